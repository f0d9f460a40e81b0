//! The hub's owner credentials: the shared ones of [`hearth_ui::access::owner`] (the owner
//! token in `$HEARTH_HOME/owner.token`, one-time login links, browser sessions), with the
//! sessions kept in `hub.db` (its migration 5 made their tables).
//!
//! Never logs a secret; opens `hub.db` only through [`crate::hubdb`].

use std::path::Path;

pub use hearth_ui::access::owner::*;
use hearth_ui::access::Server;

use crate::hubdb::{self, HubDbError};

/// The owner's browser sessions and login links, in `hub_db`.
pub fn open_sessions(hub_db: &Path) -> Result<OwnerSessions, HubDbError> {
    Ok(OwnerSessions::new(
        hubdb::open(hub_db, hubdb::Durability::Full)?,
        Server::Hub,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_live_in_hub_db_and_name_the_hubs_command() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = open_sessions(&dir.path().join("hub.db")).expect("open");
        let (link, _) = s
            .create_link(std::time::Duration::from_secs(60))
            .expect("link");
        s.redeem_link(&link, "t").expect("redeem");
        let again = s.redeem_link(&link, "t").expect_err("used");
        assert!(again.to_string().contains("`hearth-hub open`"), "{again}");
        assert_eq!(s.list().expect("list").len(), 1);
    }
}

//! Owner access to a Hearth HTTP API, one implementation for the hub and the node: the
//! guard in front of every route ([`mod@guard`]: `Host`, then `Origin`, then the owner's
//! credential), the credentials themselves ([`owner`]: the owner token file, one-time
//! login links, browser sessions), the routes that open and end sessions ([`mod@routes`]),
//! and opening a login link in the owner's browser ([`browser`]).
//!
//! [`Server`] says which kind of process serves the API: it names the session cookie
//! (`hearth_hub_<id prefix>` or `hearth_node_<id prefix>`, since cookies ignore ports and
//! a hub and a node may run on one machine) and the commands messages tell the owner to
//! run (`hearth-hub open` or `hearth open`).
//!
//! Architecture Invariant: this module is the only part of hearth-ui that touches SQLite,
//! and only for the owner's sessions and login links, on a connection handed to it by
//! the owner of the database file (the hub's `hubdb`, the node's `nodedb`); it never opens
//! a database or creates a table itself ([`owner::SESSION_TABLES`] is the schema those
//! owners migrate to). Secrets are stored as SHA-256 hashes and never logged.

pub mod browser;
pub mod guard;
pub mod owner;
pub mod routes;

pub use guard::{guard, Access, Principal};
pub use owner::{OwnerError, OwnerSessions, OwnerToken, SessionInfo};
pub use routes::{routes, LOGIN_PATH};

/// Which kind of Hearth process serves an API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    /// The hub (`hearth-hub`).
    Hub,
    /// A node (`hearth run`).
    Node,
}

impl Server {
    /// `hub` or `node`, for messages.
    pub fn noun(self) -> &'static str {
        match self {
            Self::Hub => "hub",
            Self::Node => "node",
        }
    }

    /// The command that prints a login link.
    pub fn open_command(self) -> &'static str {
        match self {
            Self::Hub => "hearth-hub open",
            Self::Node => "hearth open",
        }
    }

    /// The command that starts the server (and creates its owner token).
    pub fn start_command(self) -> &'static str {
        match self {
            Self::Hub => "hearth-hub",
            Self::Node => "hearth run",
        }
    }

    /// The session cookie's name for the instance with this endpoint id.
    pub fn cookie_name(self, id: &str) -> String {
        let prefix: String = id.chars().take(10).collect();
        format!("hearth_{}_{prefix}", self.noun())
    }
}

/// Runs blocking credential work (rusqlite) off the async threads.
async fn blocking<T, E>(f: impl FnOnce() -> Result<T, E> + Send + 'static) -> crate::ApiResult<T>
where
    T: Send + 'static,
    E: Into<crate::ApiError> + Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .map_err(crate::ApiError::internal)?
        .map_err(Into::into)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_server_names_its_own_cookie_and_commands() {
        assert_eq!(
            Server::Hub.cookie_name("abcdefghijklmnop"),
            "hearth_hub_abcdefghij"
        );
        assert_eq!(Server::Node.cookie_name("abc"), "hearth_node_abc");
        assert_eq!(Server::Hub.open_command(), "hearth-hub open");
        assert_eq!(Server::Node.open_command(), "hearth open");
    }
}

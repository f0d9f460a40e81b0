//! The unversioned `hearth/versions` handler: tells any peer which `hearth/sync/N` and
//! `hearth/pair/N` versions this hub speaks, so a device that shares none can tell its
//! owner which side to update, and logs what the device said it speaks.
//!
//! Open to any key (it reveals only version numbers); never reads more than
//! `MAX_VERSION_INFO` bytes, never keeps a connection past a short timeout, and never
//! grants anything else.

use hearth_protocol::{compare, Compat, VersionInfo};
use iroh::{
    endpoint::Connection,
    protocol::{AcceptError, ProtocolHandler},
};

/// Answers version queries.
#[derive(Debug, Clone)]
pub struct VersionsService {
    ours: VersionInfo,
}

impl VersionsService {
    /// A service announcing `ours`.
    pub fn new(ours: VersionInfo) -> Self {
        Self { ours }
    }
}

impl ProtocolHandler for VersionsService {
    async fn accept(&self, conn: Connection) -> Result<(), AcceptError> {
        let peer = conn.remote_id();
        match hearth_net::answer_versions(&conn, &self.ours).await {
            Ok(Some(theirs)) => {
                let verdict = match compare(&self.ours.sync, &theirs.sync) {
                    Compat::Shared(v) => format!("shares sync {v}"),
                    Compat::PeerTooOld => "is too old for this hub: update the device".into(),
                    Compat::PeerTooNew => "is newer than this hub: update the hub".into(),
                    Compat::Disjoint => "shares no sync version with this hub".into(),
                };
                tracing::warn!(%peer, hub_sync = ?self.ours.sync, device_sync = ?theirs.sync, "a device asked for the hub's protocol versions; it {verdict}");
            }
            Ok(None) => tracing::info!(%peer, "a device asked for the hub's protocol versions"),
            Err(e) => tracing::debug!(%peer, error = %e, "versions exchange failed"),
        }
        conn.close(0u32.into(), b"done");
        Ok(())
    }
}

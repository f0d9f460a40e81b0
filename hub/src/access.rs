//! Who may connect: the device allowlist and the handshake hook enforcing it.
//!
//! Interim until device-code pairing lands: the allowlist is a text file in the data
//! directory (`allowed_nodes`, one `<node-id> [name]` per line), edited with
//! `hearth-hub allow` / `disallow` and re-read on every connection, so a change applies
//! at once. The hook runs right after the TLS handshake, before any stream is accepted.

use std::{
    collections::BTreeMap,
    fs,
    io::Write,
    path::{Path, PathBuf},
};

use hearth_protocol::{ALPN_RPC, ALPN_SYNC};
use iroh::{
    endpoint::{AfterHandshakeOutcome, Connection, EndpointHooks},
    EndpointId,
};

/// QUIC application close code for a refused device.
pub const CLOSE_NOT_ALLOWED: u32 = 403;
/// The reason sent to a refused device.
pub const NOT_ALLOWED_REASON: &[u8] =
    b"not allowed: this device is not on the hub's allowlist (run `hearth-hub allow <node-id>` on the hub)";

/// The allowlist file.
#[derive(Debug, Clone)]
pub struct Allowlist {
    path: PathBuf,
}

impl Allowlist {
    /// The allowlist stored at `path`.
    pub fn new(path: PathBuf) -> Self {
        Self { path }
    }

    /// Every allowed id with its name.
    pub fn entries(&self) -> std::io::Result<BTreeMap<EndpointId, String>> {
        let text = match fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
            Err(e) => return Err(e),
        };
        let mut out = BTreeMap::new();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (id, name) = line.split_once(' ').unwrap_or((line, ""));
            match id.parse::<EndpointId>() {
                Ok(id) => {
                    out.insert(id, name.trim().to_string());
                }
                Err(e) => {
                    tracing::warn!(path = %self.path.display(), line, error = %e, "ignoring bad allowlist line")
                }
            }
        }
        Ok(out)
    }

    /// Whether `id` may connect. An unreadable allowlist allows nobody.
    pub fn contains(&self, id: &EndpointId) -> bool {
        match self.entries() {
            Ok(e) => e.contains_key(id),
            Err(e) => {
                tracing::error!(path = %self.path.display(), error = %e, "cannot read allowlist; refusing");
                false
            }
        }
    }

    /// Adds (or renames) a device.
    pub fn allow(&self, id: EndpointId, name: &str) -> std::io::Result<()> {
        let mut entries = self.entries()?;
        entries.insert(id, name.replace(['\n', '\r'], " "));
        self.write(&entries)
    }

    /// Removes a device; returns whether it was there.
    pub fn disallow(&self, id: &EndpointId) -> std::io::Result<bool> {
        let mut entries = self.entries()?;
        let was = entries.remove(id).is_some();
        self.write(&entries)?;
        Ok(was)
    }

    fn write(&self, entries: &BTreeMap<EndpointId, String>) -> std::io::Result<()> {
        if let Some(dir) = self.path.parent() {
            fs::create_dir_all(dir)?;
        }
        let tmp = self.path.with_extension("tmp");
        let mut f = fs::File::create(&tmp)?;
        writeln!(
            f,
            "# node ids allowed to replicate with this hub: <node-id> [name]"
        )?;
        for (id, name) in entries {
            writeln!(f, "{id} {name}")?;
        }
        f.sync_all()?;
        fs::rename(&tmp, &self.path)
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Refuses `hearth/sync/1` and `hearth/rpc/1` from keys not on the allowlist.
#[derive(Debug)]
pub struct AccessHook {
    allowlist: Allowlist,
}

impl AccessHook {
    /// A hook over `allowlist`.
    pub fn new(allowlist: Allowlist) -> Self {
        Self { allowlist }
    }
}

impl EndpointHooks for AccessHook {
    async fn after_handshake<'a>(&'a self, conn: &'a Connection) -> AfterHandshakeOutcome {
        let alpn = conn.alpn();
        if alpn != ALPN_SYNC && alpn != ALPN_RPC {
            return AfterHandshakeOutcome::Accept;
        }
        let peer = conn.remote_id();
        let allowlist = self.allowlist.clone();
        let allowed = tokio::task::spawn_blocking(move || allowlist.contains(&peer))
            .await
            .unwrap_or(false);
        if allowed {
            AfterHandshakeOutcome::Accept
        } else {
            tracing::warn!(%peer, alpn = %String::from_utf8_lossy(alpn), "refused connection from a device not on the allowlist");
            AfterHandshakeOutcome::Reject {
                error_code: CLOSE_NOT_ALLOWED.into(),
                reason: NOT_ALLOWED_REASON.to_vec(),
            }
        }
    }
}

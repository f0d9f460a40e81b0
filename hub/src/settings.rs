//! Hub settings: the one place configuration is read.
//!
//! Flags override `HEARTH_*` environment variables, which override the embedded
//! defaults (see `main.rs` for the flag definitions). Nothing else reads the environment.

use std::{net::SocketAddr, path::PathBuf};

use hearth_net::NetSettings;

/// Everything the hub needs to start.
#[derive(Debug, Clone)]
pub struct HubSettings {
    /// Data directory: store, identity key, allowlist.
    pub home: PathBuf,
    /// iroh endpoint settings.
    pub net: NetSettings,
    /// HTTP API address; `None` disables it.
    pub http: Option<SocketAddr>,
    /// Advertise the hub on the LAN over mDNS.
    pub mdns: bool,
    /// Display name shown to devices.
    pub name: String,
    /// Accept pairing requests only with a pair ticket's secret.
    pub pair_require_ticket: bool,
    /// The agent's chat model, `provider:model`.
    pub chat_model: crate::agent::provider::ModelRef,
    /// The model for rolling summaries; the chat model when `None`.
    pub summary_model: Option<crate::agent::provider::ModelRef>,
    /// The embedding model (OpenAI-compatible provider), for semantic search.
    pub embedding_model: crate::agent::provider::ModelRef,
    /// Where the model providers live.
    pub provider_urls: crate::chat::ProviderUrls,
    /// The `hearth/sync/N` versions served (normally `hearth_protocol::SYNC_VERSIONS`;
    /// tests inject others to play a hub of another release).
    pub sync_versions: Vec<u16>,
    /// The `hearth/pair/N` versions served (normally `hearth_protocol::PAIR_VERSIONS`).
    pub pair_versions: Vec<u16>,
}

/// The default data directory: `$HEARTH_HOME`, else `~/.hearth`.
pub fn default_home() -> PathBuf {
    match std::env::var_os("HOME") {
        Some(home) => PathBuf::from(home).join(".hearth"),
        None => PathBuf::from(".hearth"),
    }
}

//! Building the iroh endpoint from settings.
//!
//! Always starts from `presets::Minimal` (no address publishing, no DNS lookup) and adds
//! only the relay mode the owner chose. The portmapper is compiled out (iroh without its
//! `portmapper` feature), so nothing probes the router.

use std::{fmt, net::SocketAddr, str::FromStr};

use iroh::{endpoint::presets, Endpoint, RelayMode, RelayUrl, SecretKey};

/// Where relayed traffic goes when a direct path is not available.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelaySetting {
    /// No relays: LAN or direct addresses only (tests, home-only setups).
    Disabled,
    /// The public default relays.
    Default,
    /// The owner's own `iroh-relay`.
    Custom(RelayUrl),
}

impl FromStr for RelaySetting {
    type Err = NetError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "off" | "disabled" | "none" => Ok(Self::Disabled),
            "default" => Ok(Self::Default),
            url => url.parse::<RelayUrl>().map(Self::Custom).map_err(|e| {
                NetError::Relay(format!("{url:?} is not off, default or a relay URL: {e}"))
            }),
        }
    }
}

impl fmt::Display for RelaySetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Disabled => f.write_str("off"),
            Self::Default => f.write_str("default"),
            Self::Custom(url) => write!(f, "{url}"),
        }
    }
}

/// Network settings shared by hub and node.
#[derive(Debug, Clone)]
pub struct NetSettings {
    /// UDP address to bind (port 0 picks one).
    pub bind: SocketAddr,
    /// Relay mode.
    pub relay: RelaySetting,
}

/// Why the endpoint could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NetError {
    /// Bad relay setting.
    #[error("relay setting: {0}")]
    Relay(String),
    /// Binding the socket failed.
    #[error("cannot bind {addr}: {reason}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        reason: String,
    },
}

/// Binds an endpoint with `secret` as identity, serving `alpns`.
pub async fn bind_endpoint(
    secret: SecretKey,
    settings: &NetSettings,
    alpns: Vec<Vec<u8>>,
    hooks: Option<impl iroh::endpoint::EndpointHooks + 'static>,
) -> Result<Endpoint, NetError> {
    let relay = match &settings.relay {
        RelaySetting::Disabled => RelayMode::Disabled,
        RelaySetting::Default => RelayMode::Default,
        RelaySetting::Custom(url) => RelayMode::custom([url.clone()]),
    };
    let bind_err = |reason: String| NetError::Bind {
        addr: settings.bind,
        reason,
    };
    let mut builder = Endpoint::builder(presets::Minimal)
        .secret_key(secret)
        .relay_mode(relay)
        .alpns(alpns)
        .bind_addr(settings.bind)
        .map_err(|e| bind_err(e.to_string()))?;
    if let Some(h) = hooks {
        builder = builder.hooks(h);
    }
    builder.bind().await.map_err(|e| bind_err(e.to_string()))
}

/// Hooks that accept everything (for endpoints that need no access check).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHooks;

impl iroh::endpoint::EndpointHooks for NoHooks {}

//! Building the iroh endpoint from settings.
//!
//! Always starts from `presets::Minimal` (no address publishing, no DNS lookup) and adds
//! only the relay mode the owner chose. The portmapper is compiled out (iroh without its
//! `portmapper` feature), so nothing probes the router.
//!
//! Relays stay off unless the owner chooses one; a node follows its hub's relay unless
//! its own flag says otherwise ([`RelaySetting::for_node`]).

use std::{fmt, net::SocketAddr, str::FromStr};

use iroh::{endpoint::presets, Endpoint, RelayConfig, RelayMap, RelayMode, RelayUrl, SecretKey};

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

impl RelaySetting {
    /// The relay a node uses: its own `--relay` when given; otherwise its hub's relay, so
    /// the node reaches the hub through it away from home; otherwise none.
    pub fn for_node(flag: Option<RelaySetting>, hub_relay: Option<&RelayUrl>) -> Self {
        match (flag, hub_relay) {
            (Some(chosen), _) => chosen,
            (None, Some(url)) => Self::Custom(url.clone()),
            (None, None) => Self::Disabled,
        }
    }

    /// The relay URL itself, when the owner named one.
    pub fn custom_url(&self) -> Option<&RelayUrl> {
        match self {
            Self::Custom(url) => Some(url),
            Self::Disabled | Self::Default => None,
        }
    }

    fn mode(&self) -> RelayMode {
        match self {
            Self::Disabled => RelayMode::Disabled,
            Self::Default => RelayMode::Default,
            // A plain-HTTP relay (the owner's own on a trusted network, or a test's) has no
            // TLS, so no QUIC address discovery either: don't probe a port nobody serves.
            Self::Custom(url) if url.scheme() == "http" => {
                RelayMode::Custom(RelayMap::from(RelayConfig::new(url.clone(), None)))
            }
            Self::Custom(url) => RelayMode::custom([url.clone()]),
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
    let relay = settings.relay.mode();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_follows_its_hub_relay_unless_its_flag_says_otherwise() {
        let hub: RelayUrl = "http://10.0.0.1:3340".parse().expect("url");
        let own: RelaySetting = "https://relay.example.org".parse().expect("setting");
        assert_eq!(
            RelaySetting::for_node(None, Some(&hub)),
            RelaySetting::Custom(hub.clone())
        );
        assert_eq!(RelaySetting::for_node(None, None), RelaySetting::Disabled);
        assert_eq!(
            RelaySetting::for_node(Some(RelaySetting::Disabled), Some(&hub)),
            RelaySetting::Disabled
        );
        assert_eq!(RelaySetting::for_node(Some(own.clone()), Some(&hub)), own);
        assert_eq!(own.custom_url().map(|u| u.scheme()), Some("https"));
        assert_eq!(RelaySetting::Default.custom_url(), None);
    }

    #[test]
    fn a_plain_http_relay_is_not_probed_over_quic() {
        let url: RelayUrl = "http://10.0.0.1:3340".parse().expect("url");
        let RelayMode::Custom(map) = RelaySetting::Custom(url.clone()).mode() else {
            panic!("custom relay map expected");
        };
        assert!(map.get(&url).expect("listed").quic.is_none());
        let tls: RelayUrl = "https://relay.example.org".parse().expect("url");
        let RelayMode::Custom(map) = RelaySetting::Custom(tls.clone()).mode() else {
            panic!("custom relay map expected");
        };
        assert!(map.get(&tls).expect("listed").quic.is_some());
    }
}

//! LAN discovery over mDNS (mdns-sd, Hearth's one mDNS stack).
//!
//! The hub advertises `_hearth._udp.local.` under a host label of its own
//! (`hearth-<id prefix>.local.`, never the machine's hostname) with its node id, name and
//! protocol version in TXT records. `discover` browses for a while and returns what
//! resolved. mDNS is optional: callers log failures and carry on (a ticket always works).

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    time::{Duration, Instant},
};

use iroh::EndpointId;
use mdns_sd::{ServiceDaemon, ServiceEvent, ServiceInfo};

/// The DNS-SD service type.
pub const SERVICE_TYPE: &str = "_hearth._udp.local.";

/// Why mDNS could not be used.
#[derive(Debug, thiserror::Error)]
#[error("mDNS: {0}")]
pub struct DiscoveryError(String);

impl From<mdns_sd::Error> for DiscoveryError {
    fn from(e: mdns_sd::Error) -> Self {
        Self(e.to_string())
    }
}

/// A running advertisement; dropping it unregisters and stops the daemon.
pub struct Advertiser {
    daemon: ServiceDaemon,
    fullname: String,
}

impl std::fmt::Debug for Advertiser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Advertiser")
            .field("fullname", &self.fullname)
            .finish()
    }
}

impl Advertiser {
    /// Advertises the hub `id` called `name` on UDP `port`.
    pub fn start(id: EndpointId, name: &str, port: u16) -> Result<Self, DiscoveryError> {
        let daemon = ServiceDaemon::new()?;
        let short: String = id.to_string().chars().take(12).collect();
        let host = format!("hearth-{short}.local.");
        let instance = format!("hearth-{short}");
        let id_text = id.to_string();
        let props = [("id", id_text.as_str()), ("name", name), ("v", "1")];
        let info = ServiceInfo::new(SERVICE_TYPE, &instance, &host, "", port, &props[..])?
            .enable_addr_auto();
        let fullname = info.get_fullname().to_string();
        daemon.register(info)?;
        // Another responder may contest our name; mdns-sd renames and tells us here.
        if let Ok(events) = daemon.monitor() {
            let spawned = std::thread::Builder::new()
                .name("hearth-mdns-monitor".into())
                .spawn(move || {
                    // Ends when the daemon shuts down and closes the channel.
                    while let Ok(event) = events.recv() {
                        match event {
                            mdns_sd::DaemonEvent::NameChange(change) => {
                                tracing::warn!(
                                    ?change,
                                    "mDNS name contested; advertising under a new name"
                                )
                            }
                            mdns_sd::DaemonEvent::Error(e) => {
                                tracing::warn!(error = %e, "mDNS daemon error")
                            }
                            _ => {}
                        }
                    }
                });
            if let Err(e) = spawned {
                tracing::debug!(error = %e, "no mDNS monitor thread");
            }
        }
        tracing::info!(%fullname, port, "advertising on mDNS");
        Ok(Self { daemon, fullname })
    }
}

impl Drop for Advertiser {
    fn drop(&mut self) {
        let _ = self.daemon.unregister(&self.fullname);
        let _ = self.daemon.shutdown();
    }
}

/// A hub found on the LAN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveredHub {
    /// Its node id.
    pub id: EndpointId,
    /// Its display name.
    pub name: String,
    /// Its protocol version.
    pub version: String,
    /// Addresses it answered with.
    pub addrs: Vec<SocketAddr>,
}

/// Browses for `timeout` and returns the hubs that resolved (blocking).
pub fn discover(timeout: Duration) -> Result<Vec<DiscoveredHub>, DiscoveryError> {
    let daemon = ServiceDaemon::new()?;
    let rx = daemon.browse(SERVICE_TYPE)?;
    let deadline = Instant::now() + timeout;
    let mut found: BTreeMap<String, DiscoveredHub> = BTreeMap::new();
    // Drain promptly: a slow receiver has its channel closed without notice.
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        let Ok(event) = rx.recv_timeout(left) else {
            break;
        };
        if let ServiceEvent::ServiceResolved(r) = event {
            let Some(id) = r
                .get_property_val_str("id")
                .and_then(|s| s.parse::<EndpointId>().ok())
            else {
                continue;
            };
            let mut addrs: Vec<SocketAddr> = r
                .get_addresses_v4()
                .into_iter()
                .map(|ip| SocketAddr::new(ip.into(), r.get_port()))
                .collect();
            addrs.sort();
            let entry = found
                .entry(id.to_string())
                .or_insert_with(|| DiscoveredHub {
                    id,
                    name: r
                        .get_property_val_str("name")
                        .unwrap_or_default()
                        .to_string(),
                    version: r.get_property_val_str("v").unwrap_or_default().to_string(),
                    addrs: Vec::new(),
                });
            for a in addrs {
                if !entry.addrs.contains(&a) {
                    entry.addrs.push(a);
                }
            }
        }
    }
    let _ = daemon.stop_browse(SERVICE_TYPE);
    let _ = daemon.shutdown();
    Ok(found.into_values().collect())
}

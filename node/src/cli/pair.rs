//! `hearth pair` and `hearth discover`: find the hub and pair with a device code.
//!
//! Shows the hub's name and key fingerprint and this device's own fingerprint, so the
//! owner can check both ends (`hearth-hub ticket` and `hearth-hub devices approve` print
//! the same fingerprints). Never pins a hub the pairing client did not accept.

use std::{net::SocketAddr, path::Path, time::Duration};

use anyhow::{bail, Context};
use hearth_net::{discovery, NetSettings, NoHooks, PairTicket, RelaySetting};
use iroh::{EndpointAddr, TransportAddr};
use iroh_tickets::Ticket;

use crate::config::{HubAddr, NodeConfig};

#[derive(clap::Args)]
pub(crate) struct PairArgs {
    /// A ticket from `hearth-hub ticket`, for a hub that is not on this LAN.
    #[arg(long)]
    ticket: Option<String>,
    /// Which hub, when several answer on the LAN (node id or prefix).
    #[arg(long)]
    hub: Option<String>,
    /// How this device is called on the hub.
    #[arg(long, env = "HEARTH_DEVICE_NAME", default_value = "laptop")]
    name: String,
    /// Seconds to look for hubs on the LAN.
    #[arg(long, default_value_t = 3)]
    discover_secs: u64,
    /// Relays: `off`, `default` or your own iroh-relay URL.
    #[arg(long, env = "HEARTH_RELAY", default_value = "off")]
    relay: RelaySetting,
}

pub(crate) async fn discover_cmd(secs: u64) -> anyhow::Result<()> {
    let hubs = tokio::task::spawn_blocking(move || discovery::discover(Duration::from_secs(secs)))
        .await??;
    if hubs.is_empty() {
        eprintln!("no hub answered on this network within {secs} s");
    }
    for h in hubs {
        let addrs: Vec<String> = h.addrs.iter().map(ToString::to_string).collect();
        println!("{}\t{}\tv{}\t{}", h.id, h.name, h.version, addrs.join(","));
    }
    Ok(())
}

pub(crate) async fn pair_cmd(home: &Path, args: PairArgs) -> anyhow::Result<()> {
    let (hub, secret, announced_name) = match &args.ticket {
        Some(text) => {
            let t = PairTicket::decode_string(text.trim())
                .context("this is not a Hearth pair ticket")?;
            (t.addr, Some(t.secret), t.name)
        }
        None => {
            let secs = args.discover_secs;
            let mut hubs =
                tokio::task::spawn_blocking(move || discovery::discover(Duration::from_secs(secs)))
                    .await??;
            if let Some(want) = &args.hub {
                hubs.retain(|h| h.id.to_string().starts_with(want.as_str()));
            }
            match hubs.len() {
                0 => bail!(
                    "no hub found on this network: on the hub run `hearth-hub ticket` and pair with `hearth pair --ticket <ticket>`"
                ),
                1 => {}
                _ => {
                    for h in &hubs {
                        eprintln!("  {} {}", h.id, h.name);
                    }
                    bail!("several hubs answered: choose one with --hub <id>");
                }
            }
            let h = hubs.remove(0);
            let mut addr = EndpointAddr::new(h.id);
            for a in h.addrs {
                addr = addr.with_ip_addr(a);
            }
            (addr, None, h.name)
        }
    };
    let secret_key = hearth_net::load_or_create_secret_key(&home.join("secret.key"))?;
    let own_fingerprint = hearth_net::fingerprint(secret_key.public().as_bytes());
    let hub_fingerprint = hearth_net::fingerprint(hub.id.as_bytes());
    let announced_name: String = announced_name
        .chars()
        .filter(|c| !c.is_control())
        .take(64)
        .collect();
    // Believe "already paired" without a code only from the hub this node pinned before.
    let hub_pinned = NodeConfig::load(home)?
        .hub
        .is_some_and(|h| h.id == hub.id.to_string());
    let net = NetSettings {
        bind: "0.0.0.0:0".parse()?,
        relay: args.relay,
    };
    let endpoint = hearth_net::bind_endpoint(secret_key, &net, Vec::new(), None::<NoHooks>).await?;
    println!(
        "hearth pair hub={} hub_fingerprint={hub_fingerprint} fingerprint={own_fingerprint}",
        hub.id
    );
    eprintln!(
        "Pairing with hub \"{announced_name}\", fingerprint {hub_fingerprint}.\n\
         This device is \"{}\", fingerprint {own_fingerprint}: the hub shows it when you approve.",
        args.name
    );
    let paired = hearth_node_pair(&endpoint, hub.clone(), &args.name, secret, hub_pinned).await;
    endpoint.close().await;
    let paired = paired?;
    let addrs: Vec<SocketAddr> = hub
        .addrs
        .iter()
        .filter_map(|a| match a {
            TransportAddr::Ip(ip) => Some(*ip),
            _ => None,
        })
        .collect();
    let mut config = NodeConfig::load(home)?;
    let relay = hub.relay_urls().next().map(ToString::to_string);
    config.hub = Some(HubAddr {
        id: hub.id.to_string(),
        addrs,
        relay,
    });
    config.scope = paired.scope.clone();
    config.save(home)?;
    println!(
        "hearth paired hub={} name={} hub_fingerprint={hub_fingerprint}",
        hub.id, paired.hub_name
    );
    eprintln!(
        "Paired with \"{}\" (fingerprint {hub_fingerprint}){}. Run `hearth run` to keep this device in sync.",
        paired.hub_name,
        paired
            .scope
            .as_deref()
            .map(|s| format!(", scoped to project {s}"))
            .unwrap_or_default()
    );
    Ok(())
}

async fn hearth_node_pair(
    endpoint: &iroh::Endpoint,
    hub: EndpointAddr,
    name: &str,
    secret: Option<[u8; 16]>,
    hub_pinned: bool,
) -> anyhow::Result<crate::pair::Paired> {
    Ok(crate::pair::request_pairing(endpoint, hub, name, secret, hub_pinned, |code, expires| {
        println!("hearth pair code={code} expires_in={expires}");
        eprintln!(
            "\n  Pairing code: {code}\n\n  Approve it on the hub: hearth-hub devices approve {code}\n  (or in the hub's web UI). The code expires in {} minutes.\n",
            expires / 60
        );
    })
    .await?)
}

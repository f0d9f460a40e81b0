//! `hearth pair` and `hearth discover`: find the hub and pair with a device code.
//!
//! Shows the hub's name and key fingerprint and this device's own fingerprint, so the
//! owner can check both ends (`hearth-hub ticket` and `hearth-hub devices approve` print
//! the same fingerprints). Never pins a hub the pairing client did not accept. Dials
//! through the hub's relay (from the ticket) unless `--relay` says otherwise, keeps
//! dialing a hub that is starting (`--wait`), and saves the relay the hub named.

use std::{net::SocketAddr, path::Path, time::Duration};

use anyhow::{bail, Context};
use hearth_net::{discovery, NetSettings, NoHooks, PairTicket, RelaySetting};
use iroh::{EndpointAddr, TransportAddr};
use iroh_tickets::Ticket;

use crate::{
    config::{HubAddr, NodeConfig},
    pair::PairEvent,
};

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
    /// Relays: `off`, `default` or your own iroh-relay URL [default: the hub's relay,
    /// from the ticket, else none].
    #[arg(long, env = "HEARTH_RELAY")]
    relay: Option<RelaySetting>,
    /// Seconds to keep dialing a hub that does not answer yet (starting or restarting).
    #[arg(long, default_value = "60", value_parser = parse_secs)]
    wait: u64,
    /// Test hook: the `hearth/pair/N` versions to offer instead of this build's own
    /// (comma-separated), to play a node of another release.
    #[arg(long, env = "HEARTH_PAIR_VERSIONS", value_delimiter = ',', hide = true)]
    pair_versions: Vec<u16>,
}

/// Seconds, written `60` or `60s`.
fn parse_secs(text: &str) -> Result<u64, String> {
    text.strip_suffix('s')
        .unwrap_or(text)
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds (like 60 or 60s)"))
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
    let pinned = NodeConfig::load(home)?
        .hub
        .filter(|h| h.id == hub.id.to_string());
    let hub_pinned = pinned.is_some();
    // The hub's relay: from the ticket, else as saved when this node paired with it before.
    let hub_relay = hub.relay_urls().next().cloned().or_else(|| {
        pinned
            .as_ref()
            .and_then(|h| h.relay.as_deref())
            .and_then(|r| r.parse().ok())
    });
    let hub = match &hub_relay {
        Some(url) if hub.relay_urls().next().is_none() => hub.with_relay_url(url.clone()),
        _ => hub,
    };
    let net = NetSettings {
        bind: "0.0.0.0:0".parse()?,
        relay: RelaySetting::for_node(args.relay.clone(), hub_relay.as_ref()),
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
    let versions = if args.pair_versions.is_empty() {
        hearth_protocol::PAIR_VERSIONS.to_vec()
    } else {
        args.pair_versions.clone()
    };
    let options = crate::pair::PairOptions {
        device_name: &args.name,
        ticket_secret: secret,
        hub_pinned,
        versions: &versions,
        wait: Duration::from_secs(args.wait),
    };
    let paired = hearth_node_pair(&endpoint, hub.clone(), options).await;
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
    // What the hub said at approval wins over the ticket (its relay may have changed).
    let relay = paired.relay.clone().or(hub_relay).map(|u| u.to_string());
    config.hub = Some(HubAddr {
        id: hub.id.to_string(),
        addrs,
        relay,
    });
    config.scope = paired.scope.clone();
    config.save(home)?;
    println!(
        "hearth paired hub={} name={} hub_fingerprint={hub_fingerprint} relay={}",
        hub.id,
        paired.hub_name,
        config
            .hub
            .as_ref()
            .and_then(|h| h.relay.as_deref())
            .unwrap_or("off")
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
    options: crate::pair::PairOptions<'_>,
) -> anyhow::Result<crate::pair::Paired> {
    let mut told_waiting = false;
    let paired = crate::pair::request_pairing(endpoint, hub, options, |event| match event {
        PairEvent::Waiting { reason, retry_in } => {
            println!(
                "hearth pair waiting retry_ms={} reason={reason}",
                retry_in.as_millis()
            );
            if !told_waiting {
                told_waiting = true;
                eprintln!("The hub does not answer yet ({reason}): it may be starting. Still trying…");
            }
        }
        PairEvent::Code {
            code,
            expires_in_secs,
        } => {
            println!("hearth pair code={code} expires_in={expires_in_secs}");
            eprintln!(
                "\n  Pairing code: {code}\n\n  Approve it on the hub: hearth-hub devices approve {code}\n  (or in the hub's web UI). The code expires in {} minutes.\n",
                expires_in_secs / 60
            );
        }
    })
    .await?;
    Ok(paired)
}

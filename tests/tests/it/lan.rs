//! The home-LAN journey across a real interface: hub and node each in a network
//! namespace of their own, joined by a veth pair. The node finds the hub over mDNS,
//! pairs with a code, and syncs. All mDNS traffic stays inside the two namespaces.

use std::time::Duration;

use hearth_tests::{can_make_namespaces, hub_cli, ip, run_ok, NodeHome, Proc};

use crate::{bins, sub, tempdir};

/// Two namespaces and a veth pair, removed on drop.
struct Lan {
    hub_ns: String,
    node_ns: String,
}

impl Lan {
    fn new() -> anyhow::Result<Self> {
        let tag = std::process::id() % 100_000;
        let lan = Lan {
            hub_ns: format!("hth-hub-{tag}"),
            node_ns: format!("hth-node-{tag}"),
        };
        let (hv, nv) = (format!("hv{tag}"), format!("nv{tag}"));
        // Leftovers of an earlier run that was killed would make the adds below fail.
        let _ = ip(&["netns", "del", &lan.hub_ns]);
        let _ = ip(&["netns", "del", &lan.node_ns]);
        let _ = ip(&["link", "del", &hv]);
        ip(&["netns", "add", &lan.hub_ns])?;
        ip(&["netns", "add", &lan.node_ns])?;
        ip(&["link", "add", &hv, "type", "veth", "peer", "name", &nv])?;
        ip(&["link", "set", &hv, "netns", &lan.hub_ns])?;
        ip(&["link", "set", &nv, "netns", &lan.node_ns])?;
        for (ns, dev, addr) in [
            (&lan.hub_ns, &hv, "10.201.7.1/24"),
            (&lan.node_ns, &nv, "10.201.7.2/24"),
        ] {
            ip(&["-n", ns, "addr", "add", addr, "dev", dev])?;
            ip(&["-n", ns, "link", "set", dev, "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        Ok(lan)
    }
}

impl Drop for Lan {
    fn drop(&mut self) {
        // Deleting a namespace removes its end of the veth pair, and so the pair.
        let _ = ip(&["netns", "del", &self.hub_ns]);
        let _ = ip(&["netns", "del", &self.node_ns]);
    }
}

#[test]
fn node_finds_hub_over_mdns_pairs_and_syncs_across_a_veth_pair() -> anyhow::Result<()> {
    if !can_make_namespaces() {
        // CI runs as root with iproute2 installed; a developer laptop may not.
        eprintln!("SKIPPED: needs root and iproute2 to create network namespaces");
        return Ok(());
    }
    let lan = Lan::new()?;
    let dir = tempdir();
    let hub_home = sub(&dir, "hub");
    let host = bins();
    let hub_bins = host.in_netns(&lan.hub_ns);
    let node_bins = host.in_netns(&lan.node_ns);
    let hub_docs = NodeHome::new(&host, hub_home.clone())?;
    let note = hub_docs
        .cli(&[
            "note",
            "add",
            "--title",
            "From home",
            "--content",
            "over the LAN",
        ])?
        .trim()
        .to_string();

    let mut c = hub_bins.hub(&hub_home);
    c.env("HEARTH_MDNS", "on").args([
        "--bind",
        "0.0.0.0:7447",
        "--http",
        "off",
        "--name",
        "home-hub",
    ]);
    let hub = Proc::spawn("hub", c, hub_home.join("hub.stderr"))?;
    hub.wait_line(Duration::from_secs(30), |l| {
        l.starts_with("hearth-hub ready")
    })?;

    let node_home = sub(&dir, "laptop");
    let mut c = node_bins.node(&node_home);
    c.args(["discover", "--secs", "3"]);
    let found = run_ok(c)?;
    assert!(
        found.contains("home-hub") && found.contains("10.201.7.1:7447"),
        "discovered: {found:?}"
    );

    let mut c = node_bins.node(&node_home);
    c.args(["pair", "--name", "laptop", "--discover-secs", "3"]);
    let pairing = Proc::spawn("pair", c, node_home.join("pair.stderr"))?;
    let line = pairing.wait_line(Duration::from_secs(30), |l| {
        l.starts_with("hearth pair code=")
    })?;
    let code = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("code="))
        .unwrap_or_default()
        .to_string();
    hub_cli(&host, &hub_home, &["devices", "approve", &code])?;
    pairing.wait_line(Duration::from_secs(15), |l| l.starts_with("hearth paired"))?;

    let mut c = node_bins.node(&node_home);
    // Inside the namespace the node may look the hub up by id over mDNS too.
    c.env("HEARTH_MDNS", "on").args(["run"]);
    let node = Proc::spawn("node", c, node_home.join("node.stderr"))?;
    node.wait_line(Duration::from_secs(30), |l| {
        l.starts_with("hearth caught-up")
    })?;
    let laptop = NodeHome::new(&host, node_home)?;
    assert!(laptop
        .cli(&["note", "show", &note])?
        .contains("over the LAN"));
    drop((node, pairing, hub));
    drop(lan);
    Ok(())
}

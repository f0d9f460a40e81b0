//! Away from home, as a user meets it: hub and node in network namespaces that cannot
//! reach each other, joined only through a third namespace running a local iroh relay
//! (`hearth-testbin relay`, plain HTTP, never a public relay; mDNS off).
//!
//! The hub is told its relay once (`hub.json`); the ticket and the pairing answer carry
//! it to the node, which uses it with no flag of its own. `hearth pair` is started while
//! the hub is down and keeps trying until the hub is back; notes then sync both ways
//! through the relay; then a direct link between the two namespaces appears and the
//! node's connection moves to it by itself (`hearth path=direct`), still syncing; when
//! the link goes again, traffic falls back to the relay (`hearth path=relay`). On both
//! paths `hearth chat` on the laptop talks to the hub's agent (a fake model in the hub's
//! namespace, `hearth-testbin fake-model`) through the node's API and `hearth/rpc/1`.
//!
//! ```text
//!   hub ns 10.203.1.2 ── 10.203.1.1 relay ns 10.203.2.1 ── 10.203.2.2 node ns
//!   hub ns 10.203.3.1 ───────── (added later) ───────────── 10.203.3.2 node ns
//! ```
//! The node has a host route to the relay's 10.203.1.1 only; neither side has a route to
//! the other until the direct link appears.
//!
//! Also, on 127.0.0.1: a hub and a node one `hearth/pair/N` version apart still pair, and
//! only `hearth/pair/2` brings the hub's relay in the pairing answer.

use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use hearth_net::PairTicket;
use hearth_tests::{
    can_make_namespaces, eventually, hub_cli, ip, set_provider_key, Binaries, HubProc, NodeHome,
    Proc,
};
use iroh_tickets::Ticket;

use crate::{bins, sub, tempdir};

const RELAY_URL: &str = "http://10.203.1.1:3340/";
/// What the fake model in the hub's namespace answers.
const REPLY: &str = "Hello from home, wherever you are.";
const WAIT: Duration = Duration::from_secs(60);

/// Three namespaces (hub, relay, node), the two links through the relay's namespace, and
/// later the direct link; all removed on drop.
struct Away {
    hub_ns: String,
    relay_ns: String,
    node_ns: String,
    tag: u32,
}

impl Away {
    fn new() -> anyhow::Result<Self> {
        let tag = std::process::id() % 100_000;
        let away = Away {
            hub_ns: format!("hrl-hub-{tag}"),
            relay_ns: format!("hrl-relay-{tag}"),
            node_ns: format!("hrl-node-{tag}"),
            tag,
        };
        away.remove();
        for ns in [&away.hub_ns, &away.relay_ns, &away.node_ns] {
            ip(&["netns", "add", ns])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        away.link(
            ("hr", &away.hub_ns, "10.203.1.2/24"),
            ("rh", &away.relay_ns, "10.203.1.1/24"),
        )?;
        away.link(
            ("nr", &away.node_ns, "10.203.2.2/24"),
            ("rn", &away.relay_ns, "10.203.2.1/24"),
        )?;
        // The node reaches the relay's address on the hub side (the URL the hub hands
        // out), and nothing else there: the relay namespace is not the node's router.
        ip(&[
            "-n",
            &away.node_ns,
            "route",
            "add",
            "10.203.1.1/32",
            "via",
            "10.203.2.1",
        ])?;
        Ok(away)
    }

    /// A veth pair `a` ↔ `b`, each `(name prefix, namespace, address)`.
    fn link(&self, a: (&str, &str, &str), b: (&str, &str, &str)) -> anyhow::Result<()> {
        let (an, bn) = (
            format!("{}{}", a.0, self.tag),
            format!("{}{}", b.0, self.tag),
        );
        // A run killed between these two steps leaves the pair in this namespace.
        let _ = ip(&["link", "del", &an]);
        ip(&["link", "add", &an, "type", "veth", "peer", "name", &bn])?;
        for ((_, ns, addr), dev) in [(a, &an), (b, &bn)] {
            ip(&["link", "set", dev, "netns", ns])?;
            ip(&["-n", ns, "addr", "add", addr, "dev", dev])?;
            ip(&["-n", ns, "link", "set", dev, "up"])?;
        }
        Ok(())
    }

    /// The laptop comes home: a direct link between hub and node.
    fn add_direct_link(&self) -> anyhow::Result<()> {
        self.link(
            ("hd", &self.hub_ns, "10.203.3.1/24"),
            ("nd", &self.node_ns, "10.203.3.2/24"),
        )
    }

    /// The laptop leaves home again.
    fn remove_direct_link(&self) -> anyhow::Result<()> {
        ip(&[
            "-n",
            &self.hub_ns,
            "link",
            "del",
            &format!("hd{}", self.tag),
        ])
    }

    fn remove(&self) {
        // Deleting a namespace removes its ends of the veth pairs, and so the pairs.
        for ns in [&self.hub_ns, &self.relay_ns, &self.node_ns] {
            let _ = ip(&["netns", "del", ns]);
        }
    }
}

impl Drop for Away {
    fn drop(&mut self) {
        self.remove();
    }
}

/// A `hearth-hub` in `ns` whose relay comes from its `hub.json`, as an owner sets it once.
fn hub_cmd(bins: &Binaries, home: &std::path::Path) -> Command {
    let mut c = bins.hub(home);
    c.env_remove("HEARTH_RELAY");
    c
}

/// A `hearth` command that follows its hub's relay (no `--relay` of its own).
fn node_cmd(bins: &Binaries, home: &std::path::Path) -> Command {
    let mut c = bins.node(home);
    c.env_remove("HEARTH_RELAY");
    c
}

/// Starts the hub with its model provider at `model_url`.
fn start_hub(bins: &Binaries, home: &std::path::Path, model_url: &str) -> anyhow::Result<Proc> {
    let mut c = hub_cmd(bins, home);
    c.env("HEARTH_ANTHROPIC_URL", model_url);
    c.args([
        "--bind",
        "0.0.0.0:7447",
        "--http",
        "off",
        "--name",
        "home-hub",
    ]);
    let hub = Proc::spawn("hub", c, home.join("hub.stderr"))?;
    hub.wait_line(WAIT, |l| l.starts_with("hearth-hub ready"))?;
    Ok(hub)
}

/// Waits until `proc` printed a stdout line satisfying `pred` (at any time so far).
fn wait_seen(proc: &Proc, what: &str, pred: impl Fn(&str) -> bool) -> anyhow::Result<String> {
    let mut found = None;
    eventually(WAIT, || {
        found = proc.stdout_lines().into_iter().find(|l| pred(l));
        Ok(found.is_some())
    })
    .map_err(|e| {
        anyhow::anyhow!(
            "{what}: {e}; stdout: {:?}; stderr: {}",
            proc.stdout_lines(),
            proc.stderr_text()
        )
    })?;
    found.ok_or_else(|| anyhow::anyhow!("{what}: not seen"))
}

/// `hearth chat --message … --yes` on the laptop prints the hub's reply. The agent's line
/// comes up beside the sync session: while the node still answers that the hub is out of
/// reach, it asks again.
fn chat_reaches_the_agent(node_bins: &Binaries, home: &std::path::Path) -> anyhow::Result<()> {
    let started = Instant::now();
    let deadline = started + WAIT;
    let mut tries = 0;
    loop {
        tries += 1;
        let mut c = node_cmd(node_bins, home);
        c.args(["chat", "--message", "are you there?", "--yes"])
            .stdin(Stdio::null());
        let out = c.output()?;
        let (said, err) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        if out.status.success() {
            anyhow::ensure!(said.contains(REPLY), "no reply in {said:?}; stderr: {err}");
            eprintln!(
                "relay test: chat answered in {} s ({tries} tries)",
                started.elapsed().as_secs_f32()
            );
            return Ok(());
        }
        anyhow::ensure!(
            err.contains("the hub is out of reach") && Instant::now() < deadline,
            "hearth chat failed: {said} {err}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Adds a note on `from` and waits until `to` shows it.
fn note_travels(from: &NodeHome, to: &NodeHome, title: &str) -> anyhow::Result<()> {
    let id = from
        .cli(&["note", "add", "--title", title, "--content", title])?
        .trim()
        .to_string();
    eventually(WAIT, || {
        Ok(to
            .cli(&["note", "show", &id])
            .map(|t| t.contains(title))
            .unwrap_or(false))
    })
}

#[test]
fn node_pairs_through_a_relay_while_the_hub_starts_syncs_and_moves_to_a_direct_path(
) -> anyhow::Result<()> {
    if !can_make_namespaces() {
        // CI runs as root with iproute2 installed; a developer laptop may not.
        eprintln!("SKIPPED: needs root and iproute2 to create network namespaces");
        return Ok(());
    }
    let away = Away::new()?;
    let dir = tempdir();
    let host = bins();
    let hub_bins = host.in_netns(&away.hub_ns);
    let node_bins = host.in_netns(&away.node_ns);

    let mut c = host.in_netns(&away.relay_ns).relay();
    c.args(["--bind", "10.203.1.1:3340"]);
    let relay = Proc::spawn("relay", c, sub(&dir, "relay.stderr"))?;
    relay.wait_line(WAIT, |l| l.starts_with("relay ready"))?;
    // The hub's model provider lives beside it, on the hub namespace's own loopback.
    let mut c = hub_bins.fake_model(REPLY);
    c.args(["--bind", "127.0.0.1:0"]);
    let model = Proc::spawn("fake-model", c, sub(&dir, "model.stderr"))?;
    let ready = model.wait_line(WAIT, |l| l.starts_with("fake-model ready"))?;
    let model_url = ready
        .strip_prefix("fake-model ready url=")
        .unwrap_or_default()
        .to_string();

    // The owner sets the relay once, in hub.json; the hub says what that means.
    let hub_home = sub(&dir, "hub");
    std::fs::create_dir_all(&hub_home)?;
    std::fs::write(
        hub_home.join("hub.json"),
        format!(r#"{{"relay": "{RELAY_URL}"}}"#),
    )?;
    set_provider_key(&host, &hub_home, "anthropic", "sk-test-away")?;
    let mut hub = start_hub(&hub_bins, &hub_home, &model_url)?;
    let notice = wait_seen(&hub, "the hub's relay notice", |l| {
        l.starts_with("Away from home")
    })?;
    assert!(
        notice.contains(&format!("through your relay {RELAY_URL}"))
            && notice.contains("from anywhere"),
        "{notice}"
    );
    // The log says it too.
    eventually(WAIT, || Ok(hub.stderr_text().contains(&notice)))?;
    // A ticket right after start: the hub may not have reached its relay yet, the
    // ticket names it all the same.
    let mut c = hub_cmd(&host, &hub_home);
    c.arg("ticket");
    let ticket = hearth_tests::run_ok(c)?.trim().to_string();

    // The hub goes down; the laptop starts pairing and says it is waiting; the hub
    // comes back and the laptop pairs without being started again.
    hub.terminate();
    let node_home = sub(&dir, "laptop");
    let mut c = node_cmd(&node_bins, &node_home);
    c.args(["pair", "--ticket", &ticket, "--name", "laptop"]);
    let pairing = Proc::spawn("pair", c, node_home.join("pair.stderr"))?;
    pairing.wait_line(WAIT, |l| l.starts_with("hearth pair waiting"))?;
    let hub_back_at = Instant::now();
    let hub = start_hub(&hub_bins, &hub_home, &model_url)?;
    let line = pairing.wait_line(WAIT, |l| l.starts_with("hearth pair code="))?;
    let code = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("code="))
        .unwrap_or_default()
        .to_string();
    eprintln!(
        "relay test: code {} s after the hub came back",
        hub_back_at.elapsed().as_secs_f32()
    );
    hub_cli(&host, &hub_home, &["devices", "approve", &code])?;
    let paired = pairing.wait_line(WAIT, |l| l.starts_with("hearth paired"))?;
    assert!(paired.contains(&format!("relay={RELAY_URL}")), "{paired}");
    let saved = std::fs::read_to_string(node_home.join("node.json"))?;
    assert!(saved.contains(RELAY_URL), "{saved}");

    // Notes sync both ways through the relay.
    let mut c = node_cmd(&node_bins, &node_home);
    c.args(["run"]);
    let node = Proc::spawn("node", c, node_home.join("node.stderr"))?;
    wait_seen(&node, "a relayed connection", |l| l == "hearth path=relay")?;
    wait_seen(&node, "caught up", |l| l.starts_with("hearth caught-up"))?;
    let hub_docs = NodeHome::new(&host, hub_home.clone())?;
    let laptop = NodeHome::new(&host, node_home.clone())?;
    note_travels(&hub_docs, &laptop, "from home, through the relay")?;
    note_travels(&laptop, &hub_docs, "from the road, through the relay")?;
    // The laptop talks to the agent at home, through the relay.
    chat_reaches_the_agent(&node_bins, &node_home)?;

    // The laptop comes home: a direct link appears and the connection moves to it.
    let linked_at = Instant::now();
    away.add_direct_link()?;
    wait_seen(&node, "a direct path", |l| l == "hearth path=direct")?;
    eprintln!(
        "relay test: direct path {} s after the link appeared",
        linked_at.elapsed().as_secs_f32()
    );
    // Asked inside the laptop's namespace, where its API listens.
    let mut c = node_cmd(&node_bins, &node_home);
    c.arg("status");
    let status = hearth_tests::run_ok(c)?;
    assert!(status.contains("path: direct"), "{status}");
    note_travels(&hub_docs, &laptop, "from home, direct")?;
    note_travels(&laptop, &hub_docs, "from the laptop, direct")?;
    chat_reaches_the_agent(&node_bins, &node_home)?;
    assert!(
        !node
            .stdout_lines()
            .iter()
            .any(|l| l.starts_with("hearth disconnected")),
        "the move kept the session: {:?}",
        node.stdout_lines()
    );

    // The laptop leaves again: the direct link goes and traffic falls back to the relay.
    let unlinked_at = Instant::now();
    away.remove_direct_link()?;
    eventually(WAIT, || {
        Ok(node.stdout_lines().last().map(String::as_str) == Some("hearth path=relay"))
    })
    .map_err(|e| anyhow::anyhow!("back to the relay: {e}; stdout: {:?}", node.stdout_lines()))?;
    eprintln!(
        "relay test: back on the relay {} s after the link went",
        unlinked_at.elapsed().as_secs_f32()
    );
    note_travels(&hub_docs, &laptop, "from home, through the relay again")?;
    drop((node, pairing, hub, model, relay));
    drop(away);
    Ok(())
}

/// Pairs a node offering `node_pair` with a hub serving `hub_pair` whose relay is
/// `relay`, with a ticket stripped of its relay so that only the pairing answer can bring
/// it; returns the relay the node saved.
fn pair_one_version_apart(
    dir: &tempfile::TempDir,
    hub_pair: &str,
    node_pair: &str,
    relay: &str,
) -> anyhow::Result<Option<String>> {
    let bins = bins();
    let hub_home = sub(dir, &format!("hub-{hub_pair}-{node_pair}"));
    let hub = HubProc::start_with_env(
        &bins,
        &hub_home,
        0,
        &[("HEARTH_RELAY", relay), ("HEARTH_PAIR_VERSIONS", hub_pair)],
    )?;
    let text = hub_cli(&bins, &hub_home, &["ticket"])?;
    let mut ticket = PairTicket::decode_string(text.trim())?;
    ticket.addr = iroh::EndpointAddr::from_parts(
        ticket.addr.id,
        ticket
            .addr
            .ip_addrs()
            .map(|a| iroh::TransportAddr::Ip(*a))
            .collect::<Vec<_>>(),
    );
    let node_home = sub(dir, &format!("node-{hub_pair}-{node_pair}"));
    let mut c = node_cmd(&bins, &node_home);
    c.env("HEARTH_PAIR_VERSIONS", node_pair).args([
        "pair",
        "--ticket",
        &ticket.encode_string(),
        "--name",
        "laptop",
    ]);
    let pairing = Proc::spawn("pair", c, node_home.join("pair.stderr"))?;
    let line = pairing.wait_line(WAIT, |l| l.starts_with("hearth pair code="))?;
    let code = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("code="))
        .unwrap_or_default()
        .to_string();
    hub_cli(&bins, &hub_home, &["devices", "approve", &code])?;
    pairing.wait_line(WAIT, |l| l.starts_with("hearth paired"))?;
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(node_home.join("node.json"))?)?;
    drop((pairing, hub));
    Ok(saved["hub"]["relay"].as_str().map(str::to_string))
}

#[test]
fn hub_and_node_one_pairing_version_apart_pair_and_only_pair_2_brings_the_relay(
) -> anyhow::Result<()> {
    let dir = tempdir();
    let mut c = bins().relay();
    c.args(["--bind", "127.0.0.1:0"]);
    let relay = Proc::spawn("relay", c, sub(&dir, "relay.stderr"))?;
    let ready = relay.wait_line(WAIT, |l| l.starts_with("relay ready"))?;
    let url = ready
        .strip_prefix("relay ready url=")
        .unwrap_or_default()
        .to_string();
    let expected = Some(format!("{url}/"));
    assert_eq!(pair_one_version_apart(&dir, "1,2", "1,2", &url)?, expected);
    // An older hub (pair 1) approves without naming its relay; an older node is answered
    // in pair 1's words. Both pair.
    assert_eq!(pair_one_version_apart(&dir, "1", "1,2", &url)?, None);
    assert_eq!(pair_one_version_apart(&dir, "1,2", "1", &url)?, None);
    Ok(())
}

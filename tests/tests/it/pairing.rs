//! Device-code pairing with separate processes: through a ticket, then syncing with no
//! further flags; and every way a code can be refused, each with its own message.

use std::time::Duration;

use hearth_tests::{eventually, hub_cli, HubProc, NodeHome, Proc};

use crate::{bins, sub, tempdir};

fn start_pairing(node: &NodeHome, ticket: &str) -> anyhow::Result<(Proc, String)> {
    let mut c = bins().node(&node.home);
    c.args(["pair", "--ticket", ticket, "--name", "laptop"]);
    let p = Proc::spawn("pair", c, node.home.join("pair.stderr"))?;
    let line = p.wait_line(Duration::from_secs(30), |l| {
        l.starts_with("hearth pair code=")
    })?;
    let code = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("code="))
        .ok_or_else(|| anyhow::anyhow!("no code in {line}"))?
        .to_string();
    Ok((p, code))
}

#[test]
fn pair_through_a_ticket_then_sync_by_node_id_alone() -> anyhow::Result<()> {
    let bins = bins();
    let dir = tempdir();
    let hub_home = sub(&dir, "hub");
    let hub_cli_node = NodeHome::new(&bins, hub_home.clone())?;
    let hub = HubProc::start(&bins, &hub_home, 0)?;
    let note = hub_cli_node
        .cli(&["note", "add", "--title", "Welcome", "--content", "paired!"])?
        .trim()
        .to_string();
    let ticket = hub_cli(&bins, &hub_home, &["ticket"])?.trim().to_string();
    assert!(ticket.starts_with("hearthpair"), "{ticket}");

    let laptop = NodeHome::new(&bins, sub(&dir, "laptop"))?;
    let (mut pairing, code) = start_pairing(&laptop, &ticket)?;
    assert_eq!(code.len(), 9, "{code}");
    let pending = hub_cli(&bins, &hub_home, &["devices", "pending"])?;
    assert!(
        pending.contains(&code) && pending.contains("laptop"),
        "{pending}"
    );
    // Both sides show the same fingerprint of the device's key, and the hub's.
    let intro = pairing
        .stdout_lines()
        .into_iter()
        .find(|l| l.starts_with("hearth pair hub="))
        .ok_or_else(|| anyhow::anyhow!("no intro line"))?;
    let field = |k: &str| {
        intro
            .split_whitespace()
            .find_map(|w| w.strip_prefix(k))
            .map(str::to_string)
            .ok_or_else(|| anyhow::anyhow!("{k} missing in {intro}"))
    };
    let fingerprint = field("fingerprint=")?;
    assert_eq!(
        Some(fingerprint.clone()),
        hearth_net::fingerprint_of_id(&laptop.id)
    );
    assert!(pending.contains(&fingerprint), "{pending}");
    assert_eq!(
        Some(field("hub_fingerprint=")?),
        hearth_net::fingerprint_of_id(&hub.id)
    );
    // The owner approves through the HTTP API, as the UI will.
    let (status, body) = hub.api(
        "POST",
        "/api/v1/devices/approve",
        Some(&format!(
            "{{\"code\":\"{}\",\"name\":\"Ada's laptop\"}}",
            code.to_lowercase()
        )),
    )?;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(&fingerprint),
        "the answer names the device: {body}"
    );
    let paired = pairing.wait_line(Duration::from_secs(10), |l| l.starts_with("hearth paired"))?;
    assert!(paired.contains(&hub.id), "{paired}");
    eventually(Duration::from_secs(5), || Ok(!pairing.is_running()))?;

    // `hearth run` needs no flags now: the hub was pinned at pairing.
    let mut c = bins.node(&laptop.home);
    c.args(["run", "--bind", "127.0.0.1:0"]);
    let run = Proc::spawn("node", c, laptop.home.join("node.stderr"))?;
    run.wait_line(Duration::from_secs(30), |l| {
        l.starts_with("hearth caught-up")
    })?;
    assert!(laptop.cli(&["note", "show", &note])?.contains("paired!"));
    let (status, body) = hub.api("GET", "/api/v1/devices", None)?;
    assert_eq!(status, 200);
    assert!(
        body.contains("Ada's laptop") && body.contains("\"online\":true"),
        "{body}"
    );
    Ok(())
}

#[test]
fn wrong_denied_reused_and_expired_codes_are_refused_distinctly() -> anyhow::Result<()> {
    let bins = bins();
    let dir = tempdir();
    let hub_home = sub(&dir, "hub");
    let _hub = HubProc::start(&bins, &hub_home, 0)?;
    let approve = |code: &str| -> String {
        let mut c = bins.hub(&hub_home);
        c.args(["devices", "approve", code]);
        match c.output() {
            Ok(o) => {
                String::from_utf8_lossy(&o.stderr).into_owned()
                    + &String::from_utf8_lossy(&o.stdout)
            }
            Err(e) => e.to_string(),
        }
    };
    let wrong = approve("BCDF-GHJK");
    assert!(
        wrong.contains("no pairing request has code BCDF-GHJK"),
        "{wrong}"
    );

    // Denied: the device is told, and the code cannot be approved afterwards.
    let a = NodeHome::new(&bins, sub(&dir, "a"))?;
    let (mut pa, code_a) = start_pairing(&a, &hub_cli(&bins, &hub_home, &["ticket"])?)?;
    hub_cli(&bins, &hub_home, &["devices", "deny", &code_a])?;
    eventually(Duration::from_secs(10), || Ok(!pa.is_running()))?;
    assert!(
        pa.stderr_text().contains("denied this pairing request"),
        "{}",
        pa.stderr_text()
    );
    assert!(approve(&code_a).contains("was denied"));

    // Reused: approving twice.
    let b = NodeHome::new(&bins, sub(&dir, "b"))?;
    let (mut pb, code_b) = start_pairing(&b, &hub_cli(&bins, &hub_home, &["ticket"])?)?;
    assert!(approve(&code_b).contains("approved"));
    eventually(Duration::from_secs(10), || Ok(!pb.is_running()))?;
    assert!(approve(&code_b).contains("already used"));

    // Expired: age the request in the hub's database.
    let c = NodeHome::new(&bins, sub(&dir, "c"))?;
    let (mut pc, code_c) = start_pairing(&c, &hub_cli(&bins, &hub_home, &["ticket"])?)?;
    rusqlite::Connection::open(hub_home.join("hub.db"))?.execute(
        "UPDATE pair_requests SET expires_at = 0 WHERE code = ?1",
        [&code_c],
    )?;
    eventually(Duration::from_secs(10), || Ok(!pc.is_running()))?;
    assert!(
        pc.stderr_text().contains("code expired"),
        "{}",
        pc.stderr_text()
    );
    assert!(approve(&code_c).contains("expired"));

    // A used ticket cannot start another pairing.
    let d = NodeHome::new(&bins, sub(&dir, "d"))?;
    let ticket = hub_cli(&bins, &hub_home, &["ticket"])?;
    let (mut pd, code_d) = start_pairing(&d, &ticket)?;
    assert!(approve(&code_d).contains("approved"));
    eventually(Duration::from_secs(10), || Ok(!pd.is_running()))?;
    let e = NodeHome::new(&bins, sub(&dir, "e"))?;
    let out = e
        .cli(&["pair", "--ticket", ticket.trim()])
        .expect_err("used ticket");
    assert!(out.to_string().contains("expired or already used"), "{out}");

    // A flood of wrong codes is throttled.
    let mut throttled = false;
    for i in 0..15 {
        let text = approve(
            &format!("ZZZZ-ZZ{:02}", i % 10)
                .replace('0', "B")
                .replace('1', "C"),
        );
        if text.contains("too many attempts") {
            throttled = true;
            break;
        }
    }
    assert!(throttled, "wrong codes must be throttled");
    Ok(())
}

//! Pairing approved in the browser (`tests/browser/pairing.mjs`): a laptop runs `hearth
//! pair` against a running hub and waits; the hub's devices page shows the request
//! live, with the laptop's name and the key fingerprint the laptop printed; Approve
//! completes the laptop's `hearth pair` and the device joins the paired list. On the
//! way, the settings, devices, usage and audit pages are walked on the hub (with a few
//! usage and audit rows, so the tables and the cost estimate show) and the devices page
//! on the node, with screenshots in light and dark.

use std::time::Duration;

use anyhow::{anyhow, Context};
use hearth_tests::{
    browser::{Journey, UiLab},
    eventually, hub_cli, NodeHome, Proc,
};
use serde_json::{json, Value};

use crate::{bins, tempdir};

/// The name the laptop asks to be paired under.
const LAPTOP: &str = "ada-laptop";

/// Writes usage and audit rows into the hub's database as the agent would, for `day`
/// (`YYYY-MM-DD`, today in UTC as the page counts days): a priced model and one the
/// price table does not know, in the hub's `general` project.
fn seed_records(lab: &UiLab, day: &str) -> anyhow::Result<Value> {
    let (status, body) = lab.hub_api("GET", "/api/v1/projects", None)?;
    anyhow::ensure!(status == 200, "projects: {status} {body}");
    let projects: Value = serde_json::from_str(&body)?;
    let general = hearth_tests::project_id(&projects, "general")?;
    let db = rusqlite::Connection::open(lab.hub_home.join("hub.db"))?;
    db.busy_timeout(Duration::from_secs(5))?;
    for (model, input, output, cost) in [
        ("claude-sonnet-4-5", 120_000, 8_000, 480_000),
        ("llama3.1", 40_000, 2_000, 0),
    ] {
        db.execute(
            "INSERT INTO usage_daily (day, model, project, input_tokens, output_tokens, cached_tokens, requests, cost_micro_usd)
             VALUES (?1, ?2, ?3, ?4, ?5, 0, 12, ?6)",
            rusqlite::params![day, model, general, input, output, cost],
        )?;
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as i64;
    for (i, (tool, args, outcome, failed)) in [
        (
            "notes_create",
            r#"{"title":"Seed order for spring"}"#,
            "created",
            false,
        ),
        (
            "notes_delete",
            r#"{"id":"7c1e9a0b2d4f4e1a8b3c5d6e7f809112"}"#,
            "denied by the owner",
            true,
        ),
        (
            "tasks_create",
            r#"{"title":"Call the plumber"}"#,
            "created",
            false,
        ),
    ]
    .into_iter()
    .enumerate()
    {
        db.execute(
            "INSERT INTO audit_log (at, conversation, project, tool, args, outcome, is_error)
             VALUES (?1, 'main', ?2, ?3, ?4, ?5, ?6)",
            rusqlite::params![
                now - 60_000 * (3 - i as i64),
                general,
                tool,
                args,
                outcome,
                failed
            ],
        )?;
    }
    Ok(Value::Null)
}

/// Starts `hearth pair --ticket … --name ada-laptop` for a new laptop and answers its
/// code and the key fingerprint it printed.
fn start_pairing(lab: &UiLab, laptop: &NodeHome) -> anyhow::Result<(Proc, Value)> {
    let ticket = hub_cli(&bins(), &lab.hub_home, &["ticket"])?
        .trim()
        .to_string();
    let mut c = bins().node(&laptop.home);
    c.args(["pair", "--ticket", &ticket, "--name", LAPTOP]);
    let pairing = Proc::spawn("pair", c, laptop.home.join("pair.stderr"))?;
    let code_line = pairing.wait_line(Duration::from_secs(30), |l| {
        l.starts_with("hearth pair code=")
    })?;
    let code = code_line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("code="))
        .ok_or_else(|| anyhow!("no code in {code_line}"))?;
    let intro = pairing
        .stdout_lines()
        .into_iter()
        .find(|l| l.starts_with("hearth pair hub="))
        .ok_or_else(|| anyhow!("no intro line"))?;
    let fingerprint = intro
        .split_whitespace()
        .find_map(|w| w.strip_prefix("fingerprint="))
        .ok_or_else(|| anyhow!("no fingerprint in {intro}"))?;
    anyhow::ensure!(
        Some(fingerprint.to_string()) == hearth_net::fingerprint_of_id(&laptop.id),
        "the laptop prints its own key's fingerprint"
    );
    Ok((
        pairing,
        json!({ "code": code, "fingerprint": fingerprint, "name": LAPTOP }),
    ))
}

#[test]
fn a_pairing_request_appears_live_and_is_approved_in_the_browser() -> anyhow::Result<()> {
    let dir = tempdir();
    let mut lab = UiLab::start(&bins(), dir.path(), &[])?;
    let laptop = NodeHome::new(&bins(), dir.path().join("laptop"))?;
    let mut pairing: Option<Proc> = None;
    let config = lab.config()?;
    Journey::new("pairing.mjs", config).run(|cmd, arg| match cmd {
        "seed" => Some(
            arg.as_str()
                .context("seed takes a day")
                .and_then(|day| seed_records(&lab, day)),
        ),
        "pair" => Some(start_pairing(&lab, &laptop).map(|(p, answer)| {
            pairing = Some(p);
            answer
        })),
        // The laptop's `hearth pair` ends by itself, paired with this hub.
        "paired" => Some((|| {
            let p = pairing.as_mut().context("no pairing under way")?;
            let line = p.wait_line(Duration::from_secs(20), |l| l.starts_with("hearth paired"))?;
            anyhow::ensure!(line.contains(&lab.hub_id), "{line}");
            eventually(Duration::from_secs(10), || Ok(!p.is_running()))?;
            Ok(Value::from(line))
        })()),
        _ => lab.control(cmd),
    })?;

    // The hub keeps the device under the name and key the page showed.
    let (status, body) = lab.hub_api("GET", "/api/v1/devices", None)?;
    assert_eq!(status, 200, "{body}");
    let devices: Value = serde_json::from_str(&body)?;
    let paired = devices["data"]
        .as_array()
        .and_then(|all| all.iter().find(|d| d["node_id"] == laptop.id.as_str()))
        .ok_or_else(|| anyhow!("the laptop is not paired: {body}"))?;
    assert_eq!(paired["name"], LAPTOP, "{paired}");
    assert_eq!(paired["revoked"], false, "{paired}");
    Ok(())
}

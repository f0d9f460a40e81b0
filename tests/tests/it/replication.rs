//! The offline-editing journey: a hub and two nodes, edits made while apart, convergence.

use std::time::Duration;

use hearth_tests::{allow, eventually, free_udp_port, HubProc, NodeHome};

use crate::{bins, json_lines, sub, tempdir};

const TEXT: &str =
    "First paragraph: the plan.\n\nMiddle paragraph stays.\n\nLast paragraph: the end.";

fn note_json(node: &NodeHome, id: &str) -> anyhow::Result<serde_json::Value> {
    Ok(serde_json::from_str(
        &node.cli(&["note", "show", id, "--json"])?,
    )?)
}

#[test]
fn hub_and_two_nodes_converge_after_offline_edits() -> anyhow::Result<()> {
    let bins = bins();
    let dir = tempdir();
    let hub_home = sub(&dir, "hub");
    let port = free_udp_port()?;
    let hub_cli = NodeHome::new(&bins, hub_home.clone())?; // `hearth` commands on the hub's store
    let a = NodeHome::new(&bins, sub(&dir, "a"))?;
    let b = NodeHome::new(&bins, sub(&dir, "b"))?;
    allow(&bins, &hub_home, &a.id)?;
    allow(&bins, &hub_home, &b.id)?;

    let mut hub = HubProc::start(&bins, &hub_home, port)?;
    let note = hub_cli
        .cli(&["note", "add", "--title", "Plan", "--content", TEXT])?
        .trim()
        .to_string();
    let task = hub_cli
        .cli(&["task", "add", "Water the plants"])?
        .trim()
        .to_string();

    let pa = a.start(&hub.id, hub.addr)?;
    let pb = b.start(&hub.id, hub.addr)?;
    for p in [&pa, &pb] {
        p.wait_line(Duration::from_secs(30), |l| {
            l.starts_with("hearth caught-up")
        })?;
    }
    assert_eq!(note_json(&a, &note)?["content"], TEXT);
    assert_eq!(note_json(&b, &note)?["content"], TEXT);

    // The hub goes away; both nodes keep running and keep editing offline.
    hub.proc.terminate();
    a.cli(&[
        "note",
        "edit",
        &note,
        "--find",
        "First paragraph",
        "--replace",
        "First paragraph (edited on A)",
    ])?;
    b.cli(&[
        "note",
        "edit",
        &note,
        "--find",
        "the end.",
        "--replace",
        "the end, says B.",
    ])?;
    // The hub's owner completes the task while the hub is down, then the hub returns.
    hub_cli.cli(&["task", "done", &task])?;
    let hub = HubProc::start(&bins, &hub_home, port)?;
    assert_eq!(hub.addr.port(), port);

    let expected = "First paragraph (edited on A): the plan.\n\nMiddle paragraph stays.\n\nLast paragraph: the end, says B.";
    let homes = [&hub_cli, &a, &b];
    eventually(Duration::from_secs(60), || {
        let notes: Vec<serde_json::Value> = homes
            .iter()
            .map(|h| note_json(h, &note))
            .collect::<Result<_, _>>()?;
        let tasks: Vec<Vec<serde_json::Value>> = homes
            .iter()
            .map(|h| h.cli(&["task", "list", "--json"]).map(|t| json_lines(&t)))
            .collect::<Result<_, _>>()?;
        Ok(notes
            .iter()
            .all(|n| n["content"] == expected && n["heads"] == notes[0]["heads"])
            && tasks.iter().all(|t| {
                t.len() == 1
                    && t[0]["status"] == "complete"
                    && t[0]["heads"] == tasks[0][0]["heads"]
            }))
    })?;
    drop((pa, pb, hub));
    Ok(())
}

#[test]
fn a_cli_edit_on_a_running_node_reaches_the_other_node() -> anyhow::Result<()> {
    let bins = bins();
    let dir = tempdir();
    let hub_home = sub(&dir, "hub");
    let a = NodeHome::new(&bins, sub(&dir, "a"))?;
    let b = NodeHome::new(&bins, sub(&dir, "b"))?;
    allow(&bins, &hub_home, &a.id)?;
    allow(&bins, &hub_home, &b.id)?;
    let hub = HubProc::start(&bins, &hub_home, 0)?;
    let pa = a.start(&hub.id, hub.addr)?;
    let pb = b.start(&hub.id, hub.addr)?;
    for p in [&pa, &pb] {
        p.wait_line(Duration::from_secs(30), |l| {
            l.starts_with("hearth caught-up")
        })?;
    }
    let note = a
        .cli(&["note", "add", "--title", "Live", "--content", "typed on A"])?
        .trim()
        .to_string();
    eventually(Duration::from_secs(20), || {
        Ok(note_json(&b, &note)
            .map(|n| n["content"] == "typed on A")
            .unwrap_or(false))
    })?;
    b.cli(&["note", "edit", &note, "--append", "\\nand on B"])?;
    eventually(Duration::from_secs(20), || {
        Ok(note_json(&a, &note)?["content"] == "typed on A\nand on B")
    })?;
    // The hub serves the same documents over its HTTP API.
    let (status, body) = hub.api("GET", "/api/v1/notes", None)?;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"title\":\"Live\""), "{body}");
    assert!(body.contains("\"total\":1"), "{body}");
    Ok(())
}

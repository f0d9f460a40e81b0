//! The built-in computer plugin through the owner's tool-call route of a running hub:
//! a file inside the project's directory is read, while the file next door reached by
//! `..`, by its absolute path or through a symlink is refused; `web_fetch` of a page on 127.0.0.1 is
//! refused before any connection is made.

use std::{io::ErrorKind, net::TcpListener};

use serde_json::{json, Value};

use crate::plugins_lab::{api_json, Lab};

/// The owner calls computer tool `tool` in `project`: (HTTP status, answer).
fn call(
    hub: &hearth_tests::HubProc,
    project: &str,
    tool: &str,
    arguments: Value,
) -> anyhow::Result<(u16, Value)> {
    let body = json!({ "project": project, "arguments": arguments }).to_string();
    let (status, text) = hub.api(
        "POST",
        &format!("/api/v1/plugins/computer/tools/{tool}"),
        Some(&body),
    )?;
    Ok((
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    ))
}

/// A refusal the model sees: a tool result marked as an error whose text says `why`.
fn refused((status, answer): &(u16, Value), why: &str) -> bool {
    *status == 200
        && answer["isError"] == true
        && answer["output"].as_str().is_some_and(|o| o.contains(why))
}

#[test]
fn the_computer_plugin_keeps_to_the_project_and_off_loopback() -> anyhow::Result<()> {
    let lab = Lab::new()?;
    let hub = lab.start_hub()?;
    let projects = api_json(&hub, "GET", "/api/v1/projects?limit=200", None)?;
    let general = hearth_tests::project_id(&projects, "general")?;
    let plugins = api_json(&hub, "GET", "/api/v1/plugins?limit=200", None)?;
    assert!(
        plugins["data"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|p| p["name"] == "computer" && p["enabled"] == true),
        "the computer plugin is built in and on: {plugins}"
    );

    // The project's directory with a file in it, a text file next door (text, so a
    // refusal cannot come from a binary check) and a symlink out to it.
    let project_dir = lab.home.join("projects").join(&general);
    std::fs::create_dir_all(&project_dir)?;
    std::fs::write(project_dir.join("inside.txt"), "inside the project")?;
    let next_door = lab.home.join("projects").join("x");
    std::fs::write(&next_door, "next door")?;
    std::os::unix::fs::symlink(&next_door, project_dir.join("link-out"))?;

    let read = |path: &str| {
        call(
            &hub,
            &general,
            "computer_file_read",
            json!({ "path": path }),
        )
    };
    let inside = read("inside.txt")?;
    assert_eq!(inside.0, 200, "{inside:?}");
    assert_ne!(inside.1["isError"], true, "{inside:?}");
    assert!(
        inside.1["output"]
            .to_string()
            .contains("inside the project"),
        "{inside:?}"
    );
    for escape in [
        "../x".to_string(),
        next_door.display().to_string(),
        "link-out".to_string(),
    ] {
        let answer = read(&escape)?;
        eprintln!("{escape}: {answer:?}");
        assert!(
            refused(&answer, "outside the project"),
            "{escape}: {answer:?}"
        );
        let said = answer.1.to_string();
        assert!(!said.contains("next door"), "{escape}: {answer:?}");
    }

    // A page on loopback: refused, and never asked for.
    let page = TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}/secret", page.local_addr()?);
    let answer = call(&hub, &general, "computer_web_fetch", json!({ "url": url }))?;
    eprintln!("{url}: {answer:?}");
    assert!(refused(&answer, "loopback"), "{answer:?}");
    page.set_nonblocking(true)?;
    match page.accept() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        other => panic!("the hub connected to the loopback page: {other:?}"),
    }

    // A command runs in the project's directory, and (confined, where bubblewrap is) the
    // hub's data directory is empty to it.
    let hub_db = lab.home.join("hub.db");
    let (status, answer) = call(
        &hub,
        &general,
        "computer_terminal_run",
        json!({ "command": format!("head -c 15 {}; echo; pwd", hub_db.display()) }),
    )?;
    assert_eq!(status, 200, "{answer}");
    let said = answer.to_string();
    eprintln!("terminal: {said}");
    assert!(said.contains(&general), "ran in the project: {said}");
    if hearth_hub::plugins::sandbox::find_bwrap(std::env::var_os("PATH").as_deref()).is_some() {
        assert!(!said.contains("SQLite format"), "read hub.db: {said}");
    } else {
        eprintln!("SKIPPED the confinement half: no bwrap on PATH");
    }
    Ok(())
}

//! MCP servers as plugins, end to end with real processes: the reference server
//! `@modelcontextprotocol/server-everything` (installed in `tests/mcp` from npm) added
//! with `hearth-hub plugins`, its tools listed on the hub's API and called through the
//! agent loop with a fake model; servers that crash, never answer, hang in a call or
//! are killed from outside do not stop the hub or the other servers.

use std::time::{Duration, Instant};

use hearth_tests::{
    agent_bench::{anthropic_text_turn, anthropic_tool_turn},
    eventually,
};
use serde_json::{json, Value};

use crate::plugins_lab::{
    api_json, call_tool, chat, chat_at, everything, offered, servers, tool_results, wait_running,
    wait_servers, Lab, SERVER_WAIT,
};

/// The text a successful `everything_echo` call answers.
fn echoed(answer: &Value, message: &str) -> bool {
    answer["isError"] != true
        && answer["output"]
            .to_string()
            .contains(&format!("Echo: {message}"))
}

#[test]
fn an_mcp_server_added_with_the_cli_serves_its_tools_to_the_agent() -> anyhow::Result<()> {
    let lab = Lab::new()?;
    let command = everything(&[])?;
    let added = lab.add_stdio("everything", &[], &command)?;
    // `add` shows the command it will run as the hub's user.
    assert!(added.contains(&command[1]), "{added}");
    let listed = lab.plugins(&["list"])?;
    assert!(listed.contains("everything"), "{listed}");

    let hub = lab.start_hub()?;
    let running = wait_running(&hub, "everything")?;
    assert_eq!(running.len(), 1, "{running:?}");
    assert_eq!(running[0]["status"]["error"], Value::Null, "{running:?}");

    // Its tools, registered as `everything_<tool>`, on the API and in the CLI's cache.
    let tools = api_json(
        &hub,
        "GET",
        "/api/v1/plugins/everything/tools?limit=200",
        None,
    )?;
    let names: Vec<&str> = tools["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for want in ["everything_echo", "everything_get-sum"] {
        assert!(names.contains(&want), "{want} missing from {tools}");
    }
    let echo = tools["data"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t["name"] == "everything_echo")
        .cloned()
        .unwrap_or_default();
    // server-everything annotates echo read-only: not risky.
    assert_eq!(echo["risky"], false, "{echo}");
    assert!(
        echo["description"].as_str().is_some_and(|d| !d.is_empty()),
        "{echo}"
    );
    let cached = lab.plugins(&["tools", "everything"])?;
    assert!(cached.contains("everything_echo"), "{cached}");

    // A chat turn: the model asks for the tool, the turn shows its result, and the
    // model's next request carries it.
    lab.model.answer([
        anthropic_tool_turn(
            "toolu_echo",
            "everything_echo",
            &json!({"message": "hello from hearth"}),
        ),
        anthropic_text_turn("It echoed."),
    ]);
    let events = chat(&hub, "echo something", "plugins-echo")?;
    let call = events
        .iter()
        .find(|e| e["type"] == "tool_call")
        .cloned()
        .unwrap_or_default();
    assert_eq!(call["name"], "everything_echo", "{events:?}");
    let result = events
        .iter()
        .find(|e| e["type"] == "tool_result")
        .cloned()
        .unwrap_or_default();
    assert_eq!(result["is_error"], false, "{events:?}");
    assert!(
        result["output"]
            .as_str()
            .is_some_and(|o| o.contains("Echo: hello from hearth")),
        "{events:?}"
    );
    assert!(events.iter().any(|e| e["type"] == "finished"), "{events:?}");
    let requests = lab.model.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert!(
        offered(&requests[0]).iter().any(|t| t == "everything_echo"),
        "the agent is offered the plugin's tools: {:?}",
        offered(&requests[0])
    );
    let results = tool_results(&requests[1]);
    assert_eq!(results.len(), 1, "{:?}", requests[1]);
    assert_eq!(results[0]["tool_use_id"], "toolu_echo");
    assert_ne!(results[0]["is_error"], true, "{results:?}");
    assert!(
        results[0]["content"]
            .to_string()
            .contains("Echo: hello from hearth"),
        "{results:?}"
    );

    // Disabled from the CLI while the hub runs: the server stops and the agent is no
    // longer offered its tools; removed, the plugin is gone from the API.
    lab.plugins(&["disable", "everything"])?;
    wait_servers(&hub, "everything", SERVER_WAIT, |s| {
        s["status"]["state"] == "stopped"
    })?;
    // The API says `stopped` as soon as hub.db does; the tools go when the running hub's
    // supervisor has caught up (within about a second).
    eventually(SERVER_WAIT, || {
        let tools = api_json(
            &hub,
            "GET",
            "/api/v1/plugins/everything/tools?limit=200",
            None,
        )?;
        Ok(tools["data"]
            .as_array()
            .is_some_and(|t| !t.is_empty() && t.iter().all(|t| t["live"] == false)))
    })?;
    lab.model.answer([anthropic_text_turn("Fine.")]);
    chat(&hub, "anything else?", "plugins-echo-2")?;
    let last = lab.model.requests().pop().unwrap_or_default();
    assert!(
        !offered(&last).iter().any(|t| t.starts_with("everything_")),
        "{:?}",
        offered(&last)
    );
    lab.plugins(&["remove", "everything"])?;
    eventually(SERVER_WAIT, || Ok(servers(&hub, "everything").is_err()))?;
    let (status, _) = hub.api("GET", "/api/v1/plugins/everything", None)?;
    assert_eq!(status, 404);
    Ok(())
}

#[test]
fn servers_that_crash_or_never_answer_do_not_hold_up_the_hub_or_the_others() -> anyhow::Result<()> {
    let lab = Lab::new()?;
    lab.add_stdio("everything", &[], &everything(&[])?)?;
    // The reference start: the hub with server-everything alone.
    let t = Instant::now();
    let mut hub = lab.start_hub()?;
    let alone = t.elapsed();
    wait_running(&hub, "everything")?;
    hub.proc.terminate();

    // Beside it: a server that exits at once and one that never answers `initialize`.
    let sh = |script: &str| vec!["/bin/sh".to_string(), "-c".to_string(), script.to_string()];
    lab.add_stdio("crasher", &[], &sh("echo 'crasher: exiting' >&2; exit 3"))?;
    lab.add_stdio("mute", &[], &sh("exec sleep 600"))?;
    let t = Instant::now();
    let hub = lab.start_hub()?;
    let beside_bad = t.elapsed();
    eprintln!("hub ready: {alone:?} with everything alone, {beside_bad:?} beside the bad servers");
    assert!(
        beside_bad < alone + Duration::from_secs(2),
        "the bad servers delayed readiness: {beside_bad:?} against {alone:?}"
    );
    // Ready while the mute server still waits for its handshake (20 s): not held up by it.
    let mute = servers(&hub, "mute")?;
    assert_eq!(mute[0]["status"]["state"], "starting", "{mute:?}");

    // The good server comes up and answers while the others are failing.
    wait_running(&hub, "everything")?;
    let (status, answer) = call_tool(
        &hub,
        "everything",
        "everything_echo",
        json!({"message": "still here"}),
    )?;
    assert_eq!(status, 200, "{answer}");
    assert!(echoed(&answer, "still here"), "{answer}");

    // The bad ones are reported, each with its error.
    let bad = |s: &Value| {
        let status = &s["status"];
        (status["state"] == "failed" || status["state"] == "restarting")
            && status["error"].as_str().is_some_and(|e| !e.is_empty())
    };
    let crasher = wait_servers(&hub, "crasher", SERVER_WAIT, bad)?;
    let mute = wait_servers(&hub, "mute", SERVER_WAIT, bad)?;
    eprintln!("crasher: {crasher:?}\nmute: {mute:?}");
    assert_eq!(crasher[0]["status"]["tools"], 0, "{crasher:?}");
    assert_eq!(mute[0]["status"]["tools"], 0, "{mute:?}");
    let (status, body) = hub.api(
        "POST",
        "/api/v1/plugins/crasher/tools/crasher_anything",
        Some(&json!({"arguments": {}}).to_string()),
    )?;
    assert!((400..500).contains(&status), "{status} {body}");

    // The hub and the good server are unharmed.
    let (status, answer) = call_tool(
        &hub,
        "everything",
        "everything_echo",
        json!({"message": "after"}),
    )?;
    assert_eq!(status, 200, "{answer}");
    assert!(echoed(&answer, "after"), "{answer}");
    let (status, _) = hub.api("GET", "/api/v1/health", None)?;
    assert_eq!(status, 200);
    Ok(())
}

#[test]
fn a_hung_tool_call_ends_at_its_timeout_with_an_error_the_model_sees() -> anyhow::Result<()> {
    let lab = Lab::new()?;
    lab.add_stdio("everything", &["--timeout", "2"], &everything(&[])?)?;
    let hub = lab.start_hub()?;
    wait_running(&hub, "everything")?;

    // The long-running operation takes 60 s; the plugin's calls time out after 2 s.
    lab.model.answer([
        anthropic_tool_turn(
            "toolu_slow",
            "everything_trigger-long-running-operation",
            &json!({"duration": 60, "steps": 1}),
        ),
        anthropic_text_turn("That took too long."),
    ]);
    let t = Instant::now();
    let events = chat(&hub, "run the slow thing", "plugins-hang")?;
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(1_900) && took < Duration::from_secs(20),
        "the turn took {took:?}"
    );
    let result = events
        .iter()
        .find(|e| e["type"] == "tool_result")
        .cloned()
        .unwrap_or_default();
    assert_eq!(result["is_error"], true, "{events:?}");
    assert!(
        events.iter().any(|e| e["type"] == "text"),
        "the turn goes on after the timeout: {events:?}"
    );
    let requests = lab.model.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    let results = tool_results(&requests[1]);
    assert_eq!(results.len(), 1, "{:?}", requests[1]);
    assert_eq!(results[0]["tool_use_id"], "toolu_slow");
    assert_eq!(results[0]["is_error"], true, "{results:?}");
    let said = results[0]["content"].to_string().to_lowercase();
    assert!(
        said.contains("timed out") || said.contains("within 2s"),
        "the model is told the call ran past its 2 s: {said}"
    );

    // The server still answers other calls.
    let (status, answer) = call_tool(
        &hub,
        "everything",
        "everything_echo",
        json!({"message": "awake"}),
    )?;
    assert_eq!(status, 200, "{answer}");
    assert!(echoed(&answer, "awake"), "{answer}");
    Ok(())
}

/// The pids of the processes whose command line has `marker` as an argument (a zombie's
/// command line is empty).
fn pids_with_arg(marker: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| c.split(|b| *b == 0).any(|a| a == marker.as_bytes()))
                .unwrap_or(false)
        })
        .collect()
}

#[test]
fn a_server_killed_from_outside_is_restarted_and_works_again() -> anyhow::Result<()> {
    let lab = Lab::new()?;
    // A unique argument marks this test's server (and its sandbox) among all processes.
    let marker = format!(
        "hearth-test{}",
        lab.dir
            .path()
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
    );
    lab.add_stdio("everything", &[], &everything(&[&marker])?)?;
    let hub = lab.start_hub()?;
    let before = wait_running(&hub, "everything")?;
    let restarts = before[0]["status"]["restarts"].as_u64().unwrap_or(0);
    // The pid the API shows (bubblewrap's when sandboxed), killed from outside; the
    // server itself goes with it.
    let pid = before[0]["status"]["pid"]
        .as_u64()
        .ok_or_else(|| anyhow::anyhow!("no pid in {before:?}"))?;
    let pids = pids_with_arg(&marker);
    assert!(!pids.is_empty(), "no process carries {marker}");
    let mut kill = std::process::Command::new("kill");
    kill.args(["-KILL", &pid.to_string()]);
    hearth_tests::run_ok(kill)?;

    let after = wait_servers(&hub, "everything", SERVER_WAIT, |s| {
        crate::plugins_lab::running(s) && s["status"]["restarts"].as_u64().unwrap_or(0) > restarts
    })?;
    eprintln!("before: {before:?}\nafter: {after:?}");
    assert_ne!(after[0]["status"]["pid"], pid, "{after:?}");
    let again = pids_with_arg(&marker);
    assert!(
        !again.is_empty() && again.iter().all(|p| !pids.contains(p)),
        "the old processes are gone and new ones run: {pids:?} then {again:?}"
    );
    let (status, answer) = call_tool(
        &hub,
        "everything",
        "everything_echo",
        json!({"message": "back"}),
    )?;
    assert_eq!(status, 200, "{answer}");
    assert!(echoed(&answer, "back"), "{answer}");
    Ok(())
}

#[test]
fn plugin_tools_are_gated_by_project_permissions_like_built_in_ones() -> anyhow::Result<()> {
    let lab = Lab::new()?;
    lab.add_stdio("everything", &[], &everything(&[])?)?;
    let hub = lab.start_hub()?;
    wait_running(&hub, "everything")?;
    let projects = api_json(&hub, "GET", "/api/v1/projects?limit=200", None)?;
    let general = hearth_tests::project_id(&projects, "general")?;
    // server-everything does not annotate this one read-only: risky.
    const RISKY: &str = "everything_toggle-simulated-logging";
    let tools = api_json(
        &hub,
        "GET",
        "/api/v1/plugins/everything/tools?limit=200",
        None,
    )?;
    let risky = tools["data"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t["name"] == RISKY)
        .cloned()
        .unwrap_or_default();
    assert_eq!(risky["risky"], true, "{tools}");
    let turn = |id: &str| {
        [
            anthropic_tool_turn(id, RISKY, &json!({})),
            anthropic_text_turn("Done."),
        ]
    };

    // Unasked-for, a risky plugin tool waits for the owner, who says no here.
    lab.model.answer(turn("toolu_ask"));
    let http = hub
        .http
        .ok_or_else(|| anyhow::anyhow!("the hub has no HTTP address"))?;
    let token = hub.owner_token()?;
    let chatting =
        std::thread::spawn(move || chat_at(http, &token, "toggle logging", "plugins-ask"));
    let mut waiting = Value::Null;
    eventually(SERVER_WAIT, || {
        let page = api_json(&hub, "GET", "/api/v1/approvals?waiting=true", None)?;
        waiting = page["data"]
            .as_array()
            .and_then(|a| a.iter().find(|a| a["tool"] == RISKY).cloned())
            .unwrap_or(Value::Null);
        Ok(!waiting.is_null())
    })?;
    let id = waiting["id"].as_str().unwrap_or_default();
    let (status, body) = hub.api(
        "POST",
        &format!("/api/v1/approvals/{id}"),
        Some(&json!({"approve": false}).to_string()),
    )?;
    assert_eq!(status, 204, "{body}");
    let events = chatting
        .join()
        .map_err(|_| anyhow::anyhow!("the chat thread panicked"))??;
    assert!(
        events.iter().any(|e| e["type"] == "approval_requested"),
        "{events:?}"
    );
    let result = events
        .iter()
        .find(|e| e["type"] == "tool_result")
        .cloned()
        .unwrap_or_default();
    assert_eq!(result["is_error"], true, "denied: {events:?}");

    // Allowed outright in the project, it runs unasked.
    let (status, body) = hub.api(
        "PUT",
        &format!("/api/v1/projects/{general}/tools/{RISKY}"),
        Some(&json!({"allowed": true, "ask": false}).to_string()),
    )?;
    assert_eq!(status, 200, "{body}");
    lab.model.answer(turn("toolu_allowed"));
    let events = chat(&hub, "toggle logging again", "plugins-allowed")?;
    assert!(
        !events.iter().any(|e| e["type"] == "approval_requested"),
        "{events:?}"
    );
    let result = events
        .iter()
        .find(|e| e["type"] == "tool_result")
        .cloned()
        .unwrap_or_default();
    assert_eq!(result["is_error"], false, "{events:?}");

    // Turned off in the project, a safe plugin tool is no longer offered there.
    let (status, body) = hub.api(
        "PUT",
        &format!("/api/v1/projects/{general}/tools/everything_echo"),
        Some(&json!({"allowed": false}).to_string()),
    )?;
    assert_eq!(status, 200, "{body}");
    lab.model.answer([anthropic_text_turn("Fine.")]);
    chat(&hub, "anything?", "plugins-off")?;
    let last = lab.model.requests().pop().unwrap_or_default();
    let names = offered(&last);
    assert!(!names.iter().any(|t| t == "everything_echo"), "{names:?}");
    assert!(names.iter().any(|t| t == "everything_get-sum"), "{names:?}");
    Ok(())
}

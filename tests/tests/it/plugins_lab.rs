//! What the plugin tests (`plugins_*.rs`) share: a scripted fake model that records
//! every request the hub sends it, a hub home whose plugins are added with `hearth-hub
//! plugins`, and the owner's API calls that read plugin state, call a tool directly and
//! run a chat turn. Everything listens on 127.0.0.1 only; nothing here reaches further.

use std::{
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::{anyhow, Context};
use axum::{body::Body, extract::State, response::Response, routing::post, Router};
use hearth_tests::{
    eventually, http_request, hub_cli, mcp_server_entry, node_exe, set_provider_key, Binaries,
    HubProc,
};
use serde_json::{json, Value};

use crate::{bins, tempdir};

/// How long a server may take to start and list its tools (node starts in well under a
/// second; the margin is for a loaded CI machine running many tests at once).
pub(crate) const SERVER_WAIT: Duration = Duration::from_secs(60);

type Shared<T> = Arc<Mutex<Vec<T>>>;

/// A fake Anthropic provider in this process: answers each request with the next SSE
/// answer of its script (an empty stream once it runs out) and keeps every request body.
pub(crate) struct Model {
    /// Its address, for `HEARTH_ANTHROPIC_URL`.
    pub addr: std::net::SocketAddr,
    script: Shared<String>,
    seen: Shared<Value>,
    // Dropping the runtime stops the server.
    _rt: tokio::runtime::Runtime,
}

async fn answer(
    State((script, seen)): State<(Shared<String>, Shared<Value>)>,
    body: String,
) -> Response {
    if let Ok(mut s) = seen.lock() {
        s.push(serde_json::from_str(&body).unwrap_or(Value::Null));
    }
    let next = script
        .lock()
        .ok()
        .and_then(|mut s| (!s.is_empty()).then(|| s.remove(0)))
        .unwrap_or_default();
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from(next))
        .unwrap_or_default()
}

impl Model {
    pub(crate) fn start() -> anyhow::Result<Self> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let (script, seen): (Shared<String>, Shared<Value>) = Default::default();
        let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
        let addr = listener.local_addr()?;
        let app = Router::new()
            .route("/v1/messages", post(answer))
            .with_state((script.clone(), seen.clone()));
        rt.spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self {
            addr,
            script,
            seen,
            _rt: rt,
        })
    }

    /// Appends answers (SSE text, see `hearth_tests::agent_bench`) to the script.
    pub(crate) fn answer(&self, answers: impl IntoIterator<Item = String>) {
        if let Ok(mut s) = self.script.lock() {
            s.extend(answers);
        }
    }

    /// Every request body received so far.
    pub(crate) fn requests(&self) -> Vec<Value> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

/// A hub's data directory with a provider key, and the fake model it will talk to.
pub(crate) struct Lab {
    pub bins: Binaries,
    pub dir: tempfile::TempDir,
    pub home: PathBuf,
    pub model: Model,
}

impl Lab {
    pub(crate) fn new() -> anyhow::Result<Self> {
        let bins = bins();
        let dir = tempdir();
        let home = dir.path().join("hub");
        set_provider_key(&bins, &home, "anthropic", "sk-test-plugins")?;
        Ok(Self {
            bins,
            dir,
            home,
            model: Model::start()?,
        })
    }

    /// `hearth-hub plugins ARGS…` on this home; its stdout.
    pub(crate) fn plugins(&self, args: &[&str]) -> anyhow::Result<String> {
        let mut all = vec!["plugins"];
        all.extend_from_slice(args);
        hub_cli(&self.bins, &self.home, &all)
    }

    /// Adds plugin `name` running `command` over stdio (`flags` before the `--`, e.g.
    /// `--timeout 2`), enabled at once with `--yes`; the `add` output.
    pub(crate) fn add_stdio(
        &self,
        name: &str,
        flags: &[&str],
        command: &[String],
    ) -> anyhow::Result<String> {
        let mut args = vec!["add", name];
        args.extend_from_slice(flags);
        args.extend(["--yes", "--"]);
        args.extend(command.iter().map(String::as_str));
        self.plugins(&args)
    }

    /// Starts the hub on this home, pointed at the fake model.
    pub(crate) fn start_hub(&self) -> anyhow::Result<HubProc> {
        let url = format!("http://{}", self.model.addr);
        HubProc::start_with_env(
            &self.bins,
            &self.home,
            0,
            &[("HEARTH_ANTHROPIC_URL", url.as_str())],
        )
    }
}

/// The command line of server-everything over stdio, `extra` arguments after it (it
/// ignores them: a test can mark its process with a unique one).
pub(crate) fn everything(extra: &[&str]) -> anyhow::Result<Vec<String>> {
    let mut cmd = vec![
        node_exe()?.display().to_string(),
        mcp_server_entry("server-everything")?.display().to_string(),
        "stdio".to_string(),
    ];
    cmd.extend(extra.iter().map(|s| s.to_string()));
    Ok(cmd)
}

/// A JSON answer of the owner's API, failing on any status but 200 and 201.
pub(crate) fn api_json(
    hub: &HubProc,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> anyhow::Result<Value> {
    let body = body.map(Value::to_string);
    let (status, text) = hub.api(method, path, body.as_deref())?;
    anyhow::ensure!(
        status == 200 || status == 201,
        "{method} {path}: {status} {text}"
    );
    serde_json::from_str(&text).with_context(|| format!("{method} {path}: {text}"))
}

/// The servers of plugin `name` as `GET /api/v1/plugins` reports them: each its spec
/// (`name`, `transport`, …) and its `status` (`state`, `error`, `pid`, `tools`,
/// `restarts`, `sandboxed`).
pub(crate) fn servers(hub: &HubProc, name: &str) -> anyhow::Result<Vec<Value>> {
    let page = api_json(hub, "GET", "/api/v1/plugins?limit=200", None)?;
    let plugin = page["data"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == name)
        .ok_or_else(|| anyhow!("no plugin {name} in {page}"))?;
    Ok(plugin["servers"].as_array().cloned().unwrap_or_default())
}

/// Waits until every server of plugin `name` satisfies `ready`; returns them.
pub(crate) fn wait_servers(
    hub: &HubProc,
    name: &str,
    timeout: Duration,
    ready: impl Fn(&Value) -> bool,
) -> anyhow::Result<Vec<Value>> {
    let mut last = Vec::new();
    eventually(timeout, || {
        last = servers(hub, name)?;
        Ok(!last.is_empty() && last.iter().all(&ready))
    })
    .with_context(|| format!("plugin {name}'s servers: {last:?}"))?;
    Ok(last)
}

/// A server that runs and has listed its tools.
pub(crate) fn running(server: &Value) -> bool {
    let status = &server["status"];
    status["state"] == "running" && status["tools"].as_u64().is_some_and(|n| n > 0)
}

/// Waits until plugin `name`'s servers run with their tools listed.
pub(crate) fn wait_running(hub: &HubProc, name: &str) -> anyhow::Result<Vec<Value>> {
    wait_servers(hub, name, SERVER_WAIT, running)
}

/// The owner calls `tool` (its registered name) of plugin `plugin` directly:
/// (HTTP status, answer).
pub(crate) fn call_tool(
    hub: &HubProc,
    plugin: &str,
    tool: &str,
    arguments: Value,
) -> anyhow::Result<(u16, Value)> {
    let body = json!({ "arguments": arguments }).to_string();
    let (status, text) = hub.api(
        "POST",
        &format!("/api/v1/plugins/{plugin}/tools/{tool}"),
        Some(&body),
    )?;
    let answer = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Ok((status, answer))
}

/// One chat turn on the owner's API in conversation `conversation`; its events.
pub(crate) fn chat(hub: &HubProc, message: &str, conversation: &str) -> anyhow::Result<Vec<Value>> {
    let http = hub
        .http
        .ok_or_else(|| anyhow!("the hub has no HTTP address"))?;
    chat_at(http, &hub.owner_token()?, message, conversation)
}

/// [`chat`] on the API at `http` with the owner's `token` (from another thread).
pub(crate) fn chat_at(
    http: std::net::SocketAddr,
    token: &str,
    message: &str,
    conversation: &str,
) -> anyhow::Result<Vec<Value>> {
    let body = json!({ "message": message, "conversation": conversation }).to_string();
    let (status, sse) = http_request(http, Some(token), "POST", "/api/v1/chat", Some(&body))?;
    anyhow::ensure!(status == 200, "chat: {status} {sse}");
    Ok(sse
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect())
}

/// The `tool_result` blocks of the last message of a model request.
pub(crate) fn tool_results(request: &Value) -> Vec<Value> {
    request["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_array())
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "tool_result")
        .cloned()
        .collect()
}

/// The tool names a model request offered.
pub(crate) fn offered(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect()
}

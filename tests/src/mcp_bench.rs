//! `hearth-bench mcp`: what the hub adds to an MCP tool call, and what MCP servers cost
//! its start, with the real `@modelcontextprotocol/server-everything` (installed in
//! `tests/mcp`) and hub processes on 127.0.0.1, printed as `name value unit` lines.
//!
//! - An `echo` call made directly to the server over its stdio (newline-delimited
//!   JSON-RPC spoken by this module, one request at a time: the reference) against the
//!   same call through the hub, `POST /api/v1/plugins/everything/tools/everything_echo`
//!   on a keep-alive connection with the owner token (`mcp_call_*`, the added p50/p99
//!   and the ratio), with the hub's `GET /api/v1/health` on the same connection as the
//!   HTTP floor.
//! - The hub's time from spawn to its ready line with no plugin servers and with five
//!   server-everything plugins configured (median of a few starts each, after one
//!   discarded start that creates the data directory), and the time until all five
//!   servers' tools are registered (`mcp_ready_*`).
//!
//! Never sends a packet beyond 127.0.0.1; every process it starts is stopped before it
//! returns (children are killed on drop).

use std::{
    path::Path,
    process::Stdio,
    time::{Duration, Instant},
};

use anyhow::{bail, Context};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::{figure, hub_cli, mcp_server_entry, node_exe, percentile, Binaries, HubProc};

/// Calls made untimed before each measured series (JIT, connection, caches).
const WARM_UP: usize = 20;

/// Hub starts measured per configuration.
const STARTS: usize = 5;

/// How long five servers may take to list their tools before the bench gives up.
const TOOLS_WAIT: Duration = Duration::from_secs(60);

fn progress(msg: &str) {
    eprintln!("[hearth-bench] {msg}");
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    percentile(&samples, 0.5)
}

/// server-everything's command line over stdio.
fn everything() -> anyhow::Result<Vec<String>> {
    Ok(vec![
        node_exe()?.display().to_string(),
        mcp_server_entry("server-everything")?.display().to_string(),
        "stdio".to_string(),
    ])
}

/// An MCP server over stdio, spoken to directly: one JSON-RPC message per line.
struct StdioServer {
    _child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    next_id: u64,
}

impl StdioServer {
    /// Spawns `command` and completes MCP's initialize handshake.
    async fn start(command: &[String]) -> anyhow::Result<Self> {
        let (program, args) = command.split_first().context("empty command")?;
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("spawning {command:?}"))?;
        let stdin = child.stdin.take().context("no stdin")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut server = Self {
            _child: child,
            stdin,
            lines: BufReader::new(stdout).lines(),
            next_id: 0,
        };
        server
            .request(
                "initialize",
                json!({
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "hearth-bench", "version": "0"},
                }),
            )
            .await?;
        server
            .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await?;
        Ok(server)
    }

    async fn send(&mut self, message: &Value) -> anyhow::Result<()> {
        let mut line = message.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await?;
        self.stdin.flush().await?;
        Ok(())
    }

    /// Sends request `method` and waits for its response (skipping notifications).
    async fn request(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        while let Some(line) = self.lines.next_line().await? {
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if message["id"] != id {
                continue;
            }
            if let Some(error) = message.get("error") {
                bail!("{method}: {error}");
            }
            return Ok(message["result"].clone());
        }
        bail!("the server closed its output during {method}")
    }
}

/// `count` echo calls straight to server-everything; sorted milliseconds.
async fn direct_calls(count: usize) -> anyhow::Result<Vec<f64>> {
    let mut server = StdioServer::start(&everything()?).await?;
    let mut lat = Vec::with_capacity(count);
    for i in 0..WARM_UP + count {
        let message = format!("bench {i}");
        let t = Instant::now();
        let result = server
            .request(
                "tools/call",
                json!({"name": "echo", "arguments": {"message": message}}),
            )
            .await?;
        let took = ms(t.elapsed());
        if !result.to_string().contains(&message) || result["isError"] == true {
            bail!("echo answered {result}");
        }
        if i >= WARM_UP {
            lat.push(took);
        }
    }
    lat.sort_by(f64::total_cmp);
    Ok(lat)
}

/// `count` requests made by `request` on one keep-alive client; sorted milliseconds.
async fn hub_requests(
    count: usize,
    request: impl Fn(&reqwest::Client, usize) -> reqwest::RequestBuilder,
    check: impl Fn(&str, usize) -> bool,
) -> anyhow::Result<Vec<f64>> {
    hearth_hub::hub_client::install_crypto_provider();
    let client = reqwest::Client::builder().no_proxy().build()?;
    let mut lat = Vec::with_capacity(count);
    for i in 0..WARM_UP + count {
        let t = Instant::now();
        let resp = request(&client, i).send().await?;
        let status = resp.status();
        let body = resp.text().await?;
        let took = ms(t.elapsed());
        if !status.is_success() || !check(&body, i) {
            bail!("{status}: {body}");
        }
        if i >= WARM_UP {
            lat.push(took);
        }
    }
    lat.sort_by(f64::total_cmp);
    Ok(lat)
}

/// Adds `name` running server-everything to the hub at `home`, enabled.
fn add_everything(bins: &Binaries, home: &Path, name: &str) -> anyhow::Result<()> {
    let mut args = vec![
        "plugins".to_string(),
        "add".into(),
        name.into(),
        "--yes".into(),
    ];
    args.push("--".into());
    args.extend(everything()?);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    hub_cli(bins, home, &args).map(|_| ())
}

/// Whether every server of every plugin in `names` runs with its tools listed.
fn all_registered(hub: &HubProc, names: &[String]) -> anyhow::Result<bool> {
    let (status, text) = hub.api("GET", "/api/v1/plugins?limit=200", None)?;
    if status != 200 {
        return Ok(false);
    }
    let page: Value = serde_json::from_str(&text)?;
    let plugins = page["data"].as_array().cloned().unwrap_or_default();
    Ok(names.iter().all(|name| {
        plugins.iter().any(|p| {
            p["name"] == name.as_str()
                && p["servers"].as_array().is_some_and(|servers| {
                    !servers.is_empty()
                        && servers.iter().all(|s| {
                            s["status"]["state"] == "running"
                                && s["status"]["tools"].as_u64().is_some_and(|n| n > 0)
                        })
                })
        })
    }))
}

/// Starts the hub at `home` once to set it up, then `STARTS` times measured: the
/// milliseconds to its ready line and, if `plugins` is not empty, until their tools are
/// all registered.
fn starts(bins: &Binaries, home: &Path, plugins: &[String]) -> anyhow::Result<(f64, Option<f64>)> {
    let mut ready = Vec::new();
    let mut registered = Vec::new();
    for round in 0..=STARTS {
        let t = Instant::now();
        let mut hub = HubProc::start(bins, home, 0)?;
        let up = ms(t.elapsed());
        if !plugins.is_empty() {
            let deadline = t + TOOLS_WAIT;
            while !all_registered(&hub, plugins)? {
                if Instant::now() > deadline {
                    bail!("the plugins' tools were not all registered within {TOOLS_WAIT:?}");
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            if round > 0 {
                registered.push(ms(t.elapsed()));
            }
        }
        if round > 0 {
            ready.push(up);
        }
        hub.proc.terminate();
    }
    Ok((
        median(ready),
        (!registered.is_empty()).then(|| median(registered)),
    ))
}

/// Runs the MCP bench with `calls` measured calls per side.
pub fn run(bins: &Binaries, calls: usize) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let dir = tempfile::tempdir()?;

    progress(&format!("{calls} echo calls straight to server-everything"));
    let direct = rt.block_on(direct_calls(calls))?;

    progress(&format!("{calls} echo calls through the hub"));
    let home = dir.path().join("hub");
    add_everything(bins, &home, "everything")?;
    let mut hub = HubProc::start(bins, &home, 0)?;
    let result = (|| {
        let deadline = Instant::now() + TOOLS_WAIT;
        while !all_registered(&hub, &["everything".to_string()])? {
            if Instant::now() > deadline {
                bail!("server-everything's tools were not registered within {TOOLS_WAIT:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let base = format!("http://{}", hub.http.context("no HTTP address")?);
        let token = hub.owner_token()?;
        let call_url = format!("{base}/api/v1/plugins/everything/tools/everything_echo");
        let through = rt.block_on(hub_requests(
            calls,
            |c, i| {
                c.post(&call_url)
                    .bearer_auth(&token)
                    .header("content-type", "application/json")
                    .body(json!({"arguments": {"message": format!("bench {i}")}}).to_string())
            },
            |body, i| {
                serde_json::from_str::<Value>(body).is_ok_and(|v| {
                    v["isError"] != true && v["output"].to_string().contains(&format!("bench {i}"))
                })
            },
        ))?;
        let health_url = format!("{base}/api/v1/health");
        let health = rt.block_on(hub_requests(
            calls,
            |c, _| c.get(&health_url).bearer_auth(&token),
            |_, _| true,
        ))?;
        anyhow::Ok((through, health))
    })();
    hub.proc.terminate();
    let (through, health) = result?;
    for (name, lat) in [
        ("mcp_call_direct", &direct),
        ("mcp_call_hub", &through),
        ("mcp_hub_health", &health),
    ] {
        figure(
            &format!("{name}_p50"),
            format!("{:.3}", percentile(lat, 0.5)),
            "ms",
        );
        figure(
            &format!("{name}_p99"),
            format!("{:.3}", percentile(lat, 0.99)),
            "ms",
        );
    }
    for p in [0.5, 0.99] {
        figure(
            &format!("mcp_call_added_p{:.0}", p * 100.0),
            format!("{:.3}", percentile(&through, p) - percentile(&direct, p)),
            "ms",
        );
    }
    figure(
        "ratio_mcp_call_hub_p50_vs_direct",
        format!(
            "{:.2}",
            percentile(&through, 0.5) / percentile(&direct, 0.5)
        ),
        "x",
    );

    progress(&format!("hub starts: {STARTS} with no MCP servers"));
    let (bare, _) = starts(bins, &dir.path().join("bare"), &[])?;
    progress(&format!("hub starts: {STARTS} with five MCP servers"));
    let five_home = dir.path().join("five");
    let names: Vec<String> = (1..=5).map(|i| format!("everything{i}")).collect();
    for name in &names {
        add_everything(bins, &five_home, name)?;
    }
    let (five, registered) = starts(bins, &five_home, &names)?;
    figure("mcp_ready_no_servers", format!("{bare:.1}"), "ms");
    figure("mcp_ready_five_servers", format!("{five:.1}"), "ms");
    figure(
        "ratio_mcp_ready_five_servers_vs_none",
        format!("{:.2}", five / bare),
        "x",
    );
    if let Some(registered) = registered {
        figure(
            "mcp_ready_five_servers_tools_registered",
            format!("{registered:.1}"),
            "ms",
        );
    }
    Ok(())
}

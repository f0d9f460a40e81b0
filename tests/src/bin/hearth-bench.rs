//! `hearth-bench`: benchmarks printed as `name value unit` lines, one figure per line.
//!
//! `hearth-bench sync [--docs N] [--edits N] [--js-docs N] [--no-js]` runs a hub and nodes
//! as separate processes on 127.0.0.1 (this binary re-executes itself as `hearth-hub` and
//! `hearth`) and measures edit-to-visible latency, cold catch-up, unchanged reconnect
//! and resident memory; then drives the same catch-up and reconnect workloads through
//! automerge-repo (`tests/js`, two Node processes over its WebSocket adapter) and prints
//! our figures divided by theirs.
//!
//! `hearth-bench pair [--docs N]` (default 1,000 notes) measures the time from
//! `hearth pair --ticket` to the first complete sync, and the time to resume syncing after
//! the hub restarts.
//!
//! `hearth-bench agent [--edits N]` (N samples, default 200) measures the agent loop's
//! added latency to first token and per tool round against direct provider calls, and
//! turns per second with 50 channels at once. Progress goes to stderr.
//!
//! `hearth-bench api [--clients N] [--requests N] [--notes N]` starts a hub process and,
//! on loopback with the owner token over keep-alive connections, measures requests per
//! second and p50/p99 latency for `GET /api/v1/notes?limit=50` over N notes (default
//! 1,000) and `POST /api/v1/notes`, each with N clients (default 4) × N requests
//! (default 2,000), against `GET /api/v1/health` as the reference in the same run
//! (ratios printed); then the same workloads against a node's API (`hearth run` online
//! with a hub of its own, starting empty like the hub), printed as `api_node_*` with the
//! node's figures divided by the hub's; and the time to a chat's first token (a fake
//! Anthropic server on 127.0.0.1 streaming its real SSE format) asked on the hub's API
//! against the same turn asked on the node's API and relayed over `hearth/rpc/1`
//! (`api_chat_first_token_*`, `api_node_chat_first_token_*`, and the added p50).
//!
//! `hearth-bench ui [--notes N] [--edits N]` (default 1,000 notes, 50 keystrokes): the
//! web UI in headless Chromium against a hub and a node, see `hearth_tests::ui_bench`.
//!
//! `hearth-bench mcp [--requests N]` (default 300 calls; needs `npm ci --prefix
//! tests/mcp`): an MCP tool call through the hub against the same call made directly to
//! the server, and the hub's time to ready with and without five MCP servers, see
//! `hearth_tests::mcp_bench`.
//!
//! `hearth-bench scheduler [--notes N] [--docs M]` (default 1,000 schedules due within
//! 3 s, against 10 as the reference; 10,000 loaded for memory): the delay between a
//! run's due time and its start on a real hub, and the hub's RSS with and without the
//! schedules, see `hearth_tests::scheduler_bench`.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{bail, Context};
use hearth_sync::{DocumentStore, Note, NotePatch, TextEdit};
use hearth_tests::{allow, figure, free_udp_port, percentile, Binaries, HubProc, NodeHome, Proc};

struct Opts {
    clients: usize,
    requests: usize,
    notes: usize,
    docs: usize,
    edits: usize,
    js_docs: Option<usize>,
    js: bool,
}

fn main() -> anyhow::Result<()> {
    if let Some(result) = hearth_tests::multicall() {
        return result;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut opts = Opts {
        clients: 4,
        requests: 2_000,
        notes: 1_000,
        docs: 10_000,
        edits: 1_000,
        js_docs: None,
        js: true,
    };
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        let mut num = |name: &str| -> anyhow::Result<usize> {
            it.next()
                .with_context(|| format!("{name} needs a number"))?
                .parse()
                .with_context(|| name.to_string())
        };
        match a.as_str() {
            "--docs" => opts.docs = num("--docs")?,
            "--edits" => opts.edits = num("--edits")?,
            "--js-docs" => opts.js_docs = Some(num("--js-docs")?),
            "--no-js" => opts.js = false,
            "--clients" => opts.clients = num("--clients")?.max(1),
            "--requests" => opts.requests = num("--requests")?.max(1),
            "--notes" => opts.notes = num("--notes")?,
            other => bail!("unknown option {other}"),
        }
    }
    match args.first().map(String::as_str) {
        Some("sync") => sync_bench(&opts),
        Some("pair") => pair_bench(&opts),
        Some("api") => api_bench(&opts),
        Some("ui") => hearth_tests::ui_bench::run(
            &Binaries::new(std::env::current_exe()?),
            opts.notes,
            if opts.edits == 1_000 { 50 } else { opts.edits },
        ),
        Some("mcp") => hearth_tests::mcp_bench::run(
            &Binaries::new(std::env::current_exe()?),
            if opts.requests == 2_000 {
                300
            } else {
                opts.requests
            },
        ),
        Some("agent") => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?
            .block_on(hearth_tests::agent_bench::run(if opts.edits == 1_000 {
                200
            } else {
                opts.edits
            })),
        // --notes: schedules due together (1,000); --docs: schedules loaded (10,000).
        Some("scheduler") => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?
            .block_on(hearth_tests::scheduler_bench::run(
                &Binaries::new(std::env::current_exe()?),
                opts.notes,
                opts.docs,
            )),
        _ => bail!(
            "usage: hearth-bench sync|pair|agent|api|ui|mcp|scheduler [--docs N] [--edits N] [--js-docs N] [--no-js] [--clients N] [--requests N] [--notes N]"
        ),
    }
}

fn progress(msg: &str) {
    eprintln!("[hearth-bench] {msg}");
}

fn rss_mb(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

fn field(line: &str, key: &str) -> Option<u64> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key))
        .and_then(|v| v.parse().ok())
}

/// ~2 KB of deterministic prose.
fn note_text(i: usize) -> String {
    const WORDS: [&str; 16] = [
        "hearth", "note", "garden", "river", "lamp", "window", "letter", "morning", "bread",
        "stone", "orchard", "winter", "paper", "harbor", "candle", "meadow",
    ];
    let mut s = String::with_capacity(2100);
    let mut x = (i as u64)
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    while s.len() < 2000 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        s.push_str(WORDS[(x >> 60) as usize]);
        s.push(if (x >> 20).is_multiple_of(11) {
            '\n'
        } else {
            ' '
        });
    }
    s
}

fn sync_bench(opts: &Opts) -> anyhow::Result<()> {
    let exe = std::env::current_exe()?;
    let bins = Binaries::new(&exe);
    let dir = tempfile::tempdir()?;
    let hub_home = dir.path().join("hub");
    let a = NodeHome::new(&bins, dir.path().join("a"))?;
    let b = NodeHome::new(&bins, dir.path().join("b"))?;
    let c = NodeHome::new(&bins, dir.path().join("c"))?;
    for n in [&a, &b, &c] {
        allow(&bins, &hub_home, &n.id)?;
    }
    let port = free_udp_port()?;

    // 1. Edit-to-visible latency, node A → hub → node B.
    progress(&format!("latency: {} edits node→hub→node", opts.edits));
    let mut hub = HubProc::start(&bins, &hub_home, port)?;
    let mut pa = start_caught_up(&a, &hub)?;
    let mut pb = start_caught_up(&b, &hub)?;
    let sa = DocumentStore::open(a.home.join("hearth.db"))?;
    let sb = DocumentStore::open(b.home.join("hearth.db"))?;
    let note = sa.create_blocking(Note {
        title: "latency".into(),
        content: String::new(),
        project: None,
    })?;
    wait_same_heads(&sa, &sb, note.id, Duration::from_secs(30))?;
    let mut lat = Vec::with_capacity(opts.edits);
    let mut commit = Vec::with_capacity(opts.edits);
    for i in 0..opts.edits {
        let t0 = Instant::now();
        sa.update_blocking(
            note.id,
            NotePatch {
                content: Some(TextEdit::Append(format!("{i} "))),
                ..NotePatch::default()
            },
        )?;
        commit.push(t0.elapsed().as_secs_f64() * 1000.0);
        wait_same_heads(&sa, &sb, note.id, Duration::from_secs(10))?;
        lat.push(t0.elapsed().as_secs_f64() * 1000.0);
    }
    lat.sort_by(f64::total_cmp);
    commit.sort_by(f64::total_cmp);
    // Reference in the same run: the local durable commit alone (fsync-bound).
    figure(
        "sync_local_commit_p50",
        format!("{:.3}", percentile(&commit, 0.5)),
        "ms",
    );
    figure(
        "sync_edit_to_visible_p50_over_local_commit",
        format!("{:.2}", percentile(&lat, 0.5) / percentile(&commit, 0.5)),
        "x",
    );
    figure(
        "sync_edit_to_visible_p50",
        format!("{:.3}", percentile(&lat, 0.5)),
        "ms",
    );
    figure(
        "sync_edit_to_visible_p99",
        format!("{:.3}", percentile(&lat, 0.99)),
        "ms",
    );
    figure(
        "sync_edit_to_visible_mean",
        format!("{:.3}", lat.iter().sum::<f64>() / lat.len() as f64),
        "ms",
    );
    // One hop for reference: an edit made on the hub's store, visible on node B.
    let sh = DocumentStore::open(hub_home.join("hearth.db"))?;
    let mut hop = Vec::with_capacity(opts.edits / 2);
    for i in 0..opts.edits / 2 {
        let t0 = Instant::now();
        sh.update_blocking(
            note.id,
            NotePatch {
                content: Some(TextEdit::Append(format!("h{i} "))),
                ..NotePatch::default()
            },
        )?;
        wait_same_heads(&sh, &sb, note.id, Duration::from_secs(10))?;
        hop.push(t0.elapsed().as_secs_f64() * 1000.0);
    }
    hop.sort_by(f64::total_cmp);
    figure(
        "sync_hub_to_node_p50",
        format!("{:.3}", percentile(&hop, 0.5)),
        "ms",
    );
    figure(
        "sync_hub_to_node_p99",
        format!("{:.3}", percentile(&hop, 0.99)),
        "ms",
    );
    drop((sa, sb, sh));
    pa.terminate();
    pb.terminate();
    hub.proc.terminate();

    // 2. Cold catch-up of `docs` notes of about 2 KB.
    progress(&format!("seeding the hub with {} notes", opts.docs));
    let seed = DocumentStore::open(hub_home.join("hearth.db"))?;
    let mut raw = 0usize;
    for i in 0..opts.docs {
        let title = format!("note {i}");
        let content = note_text(i);
        raw += title.len() + content.len();
        seed.create_blocking(Note {
            title,
            content,
            project: None,
        })?;
    }
    drop(seed);
    let hub = HubProc::start(&bins, &hub_home, port)?;
    progress("catch-up: fresh node");
    let t0 = Instant::now();
    let (mut pc, line) = start_until_caught_up(&c, &hub)?;
    let catchup = t0.elapsed();
    let catchup_wire =
        field(&line, "tx_bytes=").unwrap_or(0) + field(&line, "rx_bytes=").unwrap_or(0);
    figure("sync_catchup_docs", opts.docs, "docs");
    figure(
        "sync_catchup_seconds",
        format!("{:.3}", catchup.as_secs_f64()),
        "s",
    );
    figure(
        "sync_catchup_session_seconds",
        format!("{:.3}", field(&line, "ms=").unwrap_or(0) as f64 / 1000.0),
        "s",
    );
    figure("sync_catchup_wire_bytes", catchup_wire, "bytes");
    figure("sync_catchup_raw_text_bytes", raw, "bytes");
    figure(
        "sync_catchup_wire_ratio",
        format!("{:.3}", catchup_wire as f64 / raw as f64),
        "x",
    );
    // Documents received whole are searchable once verified from their content, in the
    // background; the time until then is the other half of a fresh node's catch-up.
    let node_store = DocumentStore::open(c.home.join("hearth.db"))?;
    while node_store.unverified_blocking()? > 0 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let hits = node_store.search_blocking("note", Some(hearth_sync::Kind::Note), 5)?;
    let verified = t0.elapsed();
    drop(node_store);
    anyhow::ensure!(!hits.is_empty(), "search found nothing after verification");
    figure(
        "sync_catchup_verified_searchable_seconds",
        format!("{:.3}", verified.as_secs_f64()),
        "s",
    );
    figure(
        "sync_hub_rss_after_catchup",
        format!("{:.1}", rss_mb(hub.proc.pid())),
        "MB",
    );
    figure(
        "sync_node_rss_after_catchup",
        format!("{:.1}", rss_mb(pc.pid())),
        "MB",
    );

    // 3. Reconnect with nothing changed.
    pc.terminate();
    progress("unchanged reconnect");
    let t0 = Instant::now();
    let (pc, line) = start_until_caught_up(&c, &hub)?;
    let reconnect = t0.elapsed();
    let reconnect_wire =
        field(&line, "tx_bytes=").unwrap_or(0) + field(&line, "rx_bytes=").unwrap_or(0);
    let session_ms = field(&line, "ms=").unwrap_or(0);
    figure(
        "sync_reconnect_ms",
        format!("{:.1}", reconnect.as_secs_f64() * 1000.0),
        "ms",
    );
    figure("sync_reconnect_session_ms", session_ms, "ms");
    figure("sync_reconnect_wire_bytes", reconnect_wire, "bytes");
    figure(
        "sync_hub_rss",
        format!("{:.1}", rss_mb(hub.proc.pid())),
        "MB",
    );
    figure("sync_node_rss", format!("{:.1}", rss_mb(pc.pid())), "MB");
    drop(pc);
    drop(hub);

    // 4. The same workloads through automerge-repo, for ratios.
    if opts.js {
        let js_docs = opts.js_docs.unwrap_or(opts.docs);
        progress(&format!(
            "automerge-repo baseline with {js_docs} notes (this can take minutes)"
        ));
        let theirs = automerge_repo(js_docs, dir.path())?;
        for (k, v) in &theirs {
            figure(k, v, unit_of(k));
        }
        let get = |k: &str| theirs.iter().find(|(n, _)| n == k).map(|(_, v)| *v);
        let scale = opts.docs as f64 / js_docs as f64;
        if let Some(t) = get("amr_catchup_seconds") {
            figure(
                "ratio_catchup_seconds_vs_amr",
                format!("{:.4}", catchup.as_secs_f64() / (t * scale)),
                "x",
            );
        }
        if let Some(t) = get("amr_catchup_wire_ratio") {
            figure(
                "ratio_catchup_wire_vs_amr",
                format!("{:.4}", (catchup_wire as f64 / raw as f64) / t),
                "x",
            );
        }
        if let Some(t) = get("amr_reconnect_ms") {
            figure(
                "ratio_reconnect_ms_vs_amr",
                format!("{:.5}", reconnect.as_secs_f64() * 1000.0 / (t * scale)),
                "x",
            );
        }
        if let Some(t) = get("amr_reconnect_wire_bytes") {
            figure(
                "ratio_reconnect_bytes_vs_amr",
                format!("{:.5}", reconnect_wire as f64 / (t * scale)),
                "x",
            );
        }
        if js_docs != opts.docs {
            progress(&format!("automerge-repo ran {js_docs} docs; its time and bytes were scaled linearly by {scale} for the ratios"));
        }
    }
    Ok(())
}

fn unit_of(name: &str) -> &'static str {
    if name.ends_with("_seconds") {
        "s"
    } else if name.ends_with("_ms") {
        "ms"
    } else if name.ends_with("_bytes") {
        "bytes"
    } else if name.ends_with("_mb") {
        "MB"
    } else if name.ends_with("_ratio") {
        "x"
    } else {
        ""
    }
}

fn start_caught_up(node: &NodeHome, hub: &HubProc) -> anyhow::Result<Proc> {
    Ok(start_until_caught_up(node, hub)?.0)
}

fn start_until_caught_up(node: &NodeHome, hub: &HubProc) -> anyhow::Result<(Proc, String)> {
    let p = node.start(&hub.id, hub.addr)?;
    let line = p.wait_line(Duration::from_secs(900), |l| {
        l.starts_with("hearth caught-up")
    })?;
    Ok((p, line))
}

fn wait_same_heads(
    a: &DocumentStore,
    b: &DocumentStore,
    id: hearth_sync::DocId,
    timeout: Duration,
) -> anyhow::Result<()> {
    let want = a.heads_blocking(id)?;
    let deadline = Instant::now() + timeout;
    loop {
        if b.heads_blocking(id)? == want {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("edit not visible on the other node within {timeout:?}");
        }
        std::thread::sleep(Duration::from_micros(50));
    }
}

fn automerge_repo(docs: usize, work: &Path) -> anyhow::Result<Vec<(String, f64)>> {
    let js = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("js");
    if !js.join("node_modules").exists() {
        progress("installing automerge-repo (npm ci in tests/js)");
        let ok = Command::new("npm")
            .arg("ci")
            .arg("--no-audit")
            .arg("--no-fund")
            .current_dir(&js)
            .status()?
            .success();
        if !ok {
            bail!("npm ci in {} failed", js.display());
        }
    }
    let wd = work.join("amr");
    std::fs::create_dir_all(&wd)?;
    let out = Command::new("node")
        .arg(js.join("amr-bench.mjs"))
        .args([
            "--docs",
            &docs.to_string(),
            "--timeout-s",
            "1800",
            "--workdir",
        ])
        .arg(&wd)
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("running node tests/js/amr-bench.mjs")?;
    if !out.status.success() {
        bail!("automerge-repo baseline failed ({})", out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let name = it.next()?.to_string();
            let value = it.next()?.parse().ok()?;
            Some((name, value))
        })
        .collect())
}

fn pair_bench(opts: &Opts) -> anyhow::Result<()> {
    let docs = if opts.docs == 10_000 {
        1_000
    } else {
        opts.docs
    };
    let exe = std::env::current_exe()?;
    let bins = Binaries::new(&exe);
    let dir = tempfile::tempdir()?;
    let hub_home = dir.path().join("hub");
    std::fs::create_dir_all(&hub_home)?;
    progress(&format!("seeding the hub with {docs} notes"));
    let seed = DocumentStore::open(hub_home.join("hearth.db"))?;
    for i in 0..docs {
        seed.create_blocking(Note {
            title: format!("note {i}"),
            content: note_text(i),
            project: None,
        })?;
    }
    drop(seed);
    let port = free_udp_port()?;
    let mut hub = HubProc::start(&bins, &hub_home, port)?;
    let ticket = hearth_tests::hub_cli(&bins, &hub_home, &["ticket"])?
        .trim()
        .to_string();
    let node_home = dir.path().join("laptop");

    progress("pairing and first sync");
    let t0 = Instant::now();
    let mut c = bins.node(&node_home);
    c.args(["pair", "--ticket", &ticket, "--name", "bench"]);
    let pairing = Proc::spawn("pair", c, node_home.join("pair.stderr"))?;
    let line = pairing.wait_line(Duration::from_secs(60), |l| {
        l.starts_with("hearth pair code=")
    })?;
    let code_at = t0.elapsed();
    let code = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("code="))
        .unwrap_or_default()
        .to_string();
    hearth_tests::hub_cli(&bins, &hub_home, &["devices", "approve", &code])?;
    pairing.wait_line(Duration::from_secs(60), |l| l.starts_with("hearth paired"))?;
    let paired_at = t0.elapsed();
    let mut c = bins.node(&node_home);
    c.args(["run", "--bind", "127.0.0.1:0"]);
    let node = Proc::spawn("node", c, node_home.join("node.stderr"))?;
    node.wait_line(Duration::from_secs(600), |l| {
        l.starts_with("hearth caught-up")
    })?;
    let synced_at = t0.elapsed();
    figure("pair_docs", docs, "docs");
    figure(
        "pair_code_shown_ms",
        format!("{:.1}", code_at.as_secs_f64() * 1000.0),
        "ms",
    );
    figure(
        "pair_approved_ms",
        format!("{:.1}", paired_at.as_secs_f64() * 1000.0),
        "ms",
    );
    figure(
        "pair_to_first_complete_sync_ms",
        format!("{:.1}", synced_at.as_secs_f64() * 1000.0),
        "ms",
    );
    figure(
        "pair_first_sync_only_ms",
        format!("{:.1}", (synced_at - paired_at).as_secs_f64() * 1000.0),
        "ms",
    );

    progress("hub restart");
    let t_restart = Instant::now();
    hub.proc.terminate();
    let stopped = t_restart.elapsed();
    let hub = HubProc::start(&bins, &hub_home, port)?;
    let ready = t_restart.elapsed();
    node.wait_line(Duration::from_secs(60), |l| {
        l.starts_with("hearth caught-up")
    })?;
    let resumed = t_restart.elapsed();
    figure(
        "pair_hub_stop_ms",
        format!("{:.1}", stopped.as_secs_f64() * 1000.0),
        "ms",
    );
    figure(
        "pair_resume_after_hub_ready_ms",
        format!("{:.1}", (resumed - ready).as_secs_f64() * 1000.0),
        "ms",
    );
    figure(
        "pair_resume_after_restart_total_ms",
        format!("{:.1}", resumed.as_secs_f64() * 1000.0),
        "ms",
    );
    drop((node, hub));
    Ok(())
}

/// One API workload: `clients` keep-alive clients, each sending `requests` requests one
/// after another. Returns (requests per second, sorted latencies in ms).
async fn api_load(
    base: &str,
    token: &str,
    clients: usize,
    requests: usize,
    request: fn(&reqwest::Client, &str, usize) -> reqwest::RequestBuilder,
) -> anyhow::Result<(f64, Vec<f64>)> {
    hearth_hub::hub_client::install_crypto_provider();
    let started = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for c in 0..clients {
        let client = reqwest::Client::builder().no_proxy().build()?;
        let (base, token) = (base.to_string(), token.to_string());
        set.spawn(async move {
            let mut lat = Vec::with_capacity(requests);
            for i in 0..requests {
                let t = Instant::now();
                let resp = request(&client, &base, c * requests + i)
                    .bearer_auth(&token)
                    .send()
                    .await?;
                let status = resp.status();
                let body = resp.bytes().await?;
                if !status.is_success() {
                    bail!("{status}: {}", String::from_utf8_lossy(&body));
                }
                lat.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            anyhow::Ok(lat)
        });
    }
    let mut all = Vec::with_capacity(clients * requests);
    while let Some(done) = set.join_next().await {
        all.extend(done??);
    }
    let rps = all.len() as f64 / started.elapsed().as_secs_f64();
    all.sort_by(f64::total_cmp);
    Ok((rps, all))
}

fn health(c: &reqwest::Client, base: &str, _: usize) -> reqwest::RequestBuilder {
    c.get(format!("{base}/api/v1/health"))
}

fn list_notes(c: &reqwest::Client, base: &str, _: usize) -> reqwest::RequestBuilder {
    c.get(format!("{base}/api/v1/notes?limit=50"))
}

fn create_note(c: &reqwest::Client, base: &str, i: usize) -> reqwest::RequestBuilder {
    let body = serde_json::json!({ "title": format!("bench {i}"), "content": note_text(i) });
    c.post(format!("{base}/api/v1/notes"))
        .header("content-type", "application/json")
        .body(body.to_string())
}

/// Seeds `opts.notes` notes through the API at `base`, then measures health, listing and
/// creating notes there; returns (name, requests per second, p50, p99) per workload.
fn api_rows(
    rt: &tokio::runtime::Runtime,
    base: &str,
    token: &str,
    opts: &Opts,
) -> anyhow::Result<Vec<(&'static str, f64, f64, f64)>> {
    let (clients, requests) = (opts.clients, opts.requests);
    rt.block_on(async {
        progress(&format!("seeding {} notes", opts.notes));
        let per = opts.notes.div_ceil(clients);
        api_load(base, token, clients, per, create_note).await?;
        let mut rows = Vec::new();
        for (name, request) in [
            ("health", health as fn(&_, &_, _) -> _),
            ("list_notes", list_notes),
            ("create_note", create_note),
        ] {
            progress(&format!("{name}: {clients} clients × {requests} requests"));
            let (rps, lat) = api_load(base, token, clients, requests, request).await?;
            rows.push((name, rps, percentile(&lat, 0.5), percentile(&lat, 0.99)));
        }
        anyhow::Ok(rows)
    })
}

/// Prints `rows` as `{prefix}_{name}_rps|p50|p99`, and each workload against health.
fn print_api_rows(prefix: &str, rows: &[(&'static str, f64, f64, f64)]) {
    for (name, rps, p50, p99) in rows {
        figure(
            &format!("{prefix}_{name}_rps"),
            format!("{rps:.0}"),
            "req/s",
        );
        figure(&format!("{prefix}_{name}_p50"), format!("{p50:.3}"), "ms");
        figure(&format!("{prefix}_{name}_p99"), format!("{p99:.3}"), "ms");
    }
    if let Some((_, ref_rps, _, ref_p99)) = rows.first().copied() {
        for (name, rps, _, p99) in rows.iter().skip(1) {
            figure(
                &format!("ratio_{prefix}_{name}_rps_vs_health"),
                format!("{:.3}", rps / ref_rps),
                "ratio",
            );
            figure(
                &format!("ratio_{prefix}_{name}_p99_vs_health"),
                format!("{:.2}", p99 / ref_p99),
                "ratio",
            );
        }
    }
}

fn api_bench(opts: &Opts) -> anyhow::Result<()> {
    let exe = std::env::current_exe()?;
    let bins = Binaries::new(&exe);
    let dir = tempfile::tempdir()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;

    progress("the hub's API");
    let mut hub = HubProc::start(&bins, &dir.path().join("hub"), 0)?;
    let http = hub.http.context("the hub has no HTTP address")?;
    let token = hub.owner_token()?;
    let result = api_rows(&rt, &format!("http://{http}"), &token, opts);
    hub.proc.terminate();
    let hub_rows = result?;
    print_api_rows("api", &hub_rows);

    // The same workloads against a node's API, the node online with a hub of its own
    // (so every note it creates also syncs), starting from an empty replica like the hub.
    progress("the node's API");
    let hub_home = dir.path().join("hub2");
    let node = NodeHome::new(&bins, dir.path().join("node"))?;
    allow(&bins, &hub_home, &node.id)?;
    // The hub behind the node also answers chat, from a fake model on loopback.
    let model = rt.block_on(fake_model())?;
    hearth_tests::set_provider_key(&bins, &hub_home, "anthropic", "sk-bench")?;
    let model_url = format!("http://{model}");
    let hub = HubProc::start_with_env(
        &bins,
        &hub_home,
        0,
        &[("HEARTH_ANTHROPIC_URL", model_url.as_str())],
    )?;
    let mut proc = start_caught_up(&node, &hub)?;
    let node_http = node.http_addr()?;
    let node_token = node.owner_token()?;
    let result = api_rows(&rt, &format!("http://{node_http}"), &node_token, opts);
    // First token: the same turn on the hub's API, then relayed through the node.
    let chat = result.and_then(|rows| {
        let hub_http = hub.http.context("the hub has no HTTP address")?;
        let hub_token = hub.owner_token()?;
        let turns = CHAT_TURNS;
        progress(&format!(
            "chat first token: {turns} turns on the hub, {turns} relayed"
        ));
        let on_hub = rt.block_on(first_tokens(
            &format!("http://{hub_http}"),
            &hub_token,
            turns,
        ))?;
        let via_node = rt.block_on(first_tokens(
            &format!("http://{node_http}"),
            &node_token,
            turns,
        ))?;
        Ok((rows, on_hub, via_node))
    });
    proc.terminate();
    drop(hub);
    let (node_rows, on_hub, via_node) = chat?;
    print_api_rows("api_node", &node_rows);
    for ((name, hub_rps, _, hub_p99), (_, rps, _, p99)) in hub_rows.iter().zip(&node_rows).skip(1) {
        figure(
            &format!("ratio_api_node_{name}_rps_vs_hub"),
            format!("{:.3}", rps / hub_rps),
            "ratio",
        );
        figure(
            &format!("ratio_api_node_{name}_p99_vs_hub"),
            format!("{:.2}", p99 / hub_p99),
            "ratio",
        );
    }
    for (prefix, lat) in [("api_chat", &on_hub), ("api_node_chat", &via_node)] {
        figure(
            &format!("{prefix}_first_token_p50"),
            format!("{:.2}", percentile(lat, 0.5)),
            "ms",
        );
        figure(
            &format!("{prefix}_first_token_p99"),
            format!("{:.2}", percentile(lat, 0.99)),
            "ms",
        );
    }
    figure(
        "api_node_chat_first_token_added_p50",
        format!(
            "{:.2}",
            percentile(&via_node, 0.5) - percentile(&on_hub, 0.5)
        ),
        "ms",
    );
    figure(
        "ratio_api_node_chat_first_token_p50_vs_hub",
        format!(
            "{:.2}",
            percentile(&via_node, 0.5) / percentile(&on_hub, 0.5)
        ),
        "ratio",
    );
    Ok(())
}

/// Chat turns per side in `hearth-bench api`.
const CHAT_TURNS: usize = 50;

/// A fake Anthropic server on 127.0.0.1 answering every turn with the same short text,
/// in the provider's streaming format.
async fn fake_model() -> anyhow::Result<std::net::SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let app = hearth_tests::fake_model::text_app("Here is the first token.");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(addr)
}

/// `turns` chat turns, one after another, through the API at `base`: the milliseconds
/// from sending each until its first `text` event arrived, sorted.
async fn first_tokens(base: &str, token: &str, turns: usize) -> anyhow::Result<Vec<f64>> {
    use futures_util::StreamExt;
    hearth_hub::hub_client::install_crypto_provider();
    let client = reqwest::Client::builder().no_proxy().build()?;
    let mut lat = Vec::with_capacity(turns);
    for i in 0..turns {
        let body = serde_json::json!({ "message": "hello", "conversation": format!("bench-{i}") });
        let t = Instant::now();
        let resp = client
            .post(format!("{base}/api/v1/chat"))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await?;
        if !resp.status().is_success() {
            let status = resp.status();
            bail!("chat: {status}: {}", resp.text().await.unwrap_or_default());
        }
        let mut stream = resp.bytes_stream();
        let mut seen = String::new();
        let mut first = None;
        while let Some(chunk) = stream.next().await {
            seen.push_str(&String::from_utf8_lossy(&chunk?));
            if first.is_none() && seen.contains("\"type\":\"text\"") {
                first = Some(t.elapsed().as_secs_f64() * 1000.0);
            }
            if seen.contains("\"type\":\"finished\"") || seen.contains("\"type\":\"error\"") {
                break;
            }
        }
        lat.push(first.with_context(|| format!("no text in the turn: {seen}"))?);
    }
    lat.sort_by(f64::total_cmp);
    Ok(lat)
}

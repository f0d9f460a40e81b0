//! hearth-tests: a harness for tests and benchmarks that run hubs and nodes as separate
//! processes on 127.0.0.1 with relays off.
//!
//! [`Binaries`] names the executable to run (a multi-call binary that dispatches to the
//! hub's or the node's real command line, see [`multicall`]); [`Proc`] is a child process
//! whose stdout lines can be awaited and whose stderr goes to a file; [`HubProc`] and
//! [`NodeHome`] wrap the usual steps; [`relay`] runs a local iroh relay for the
//! away-from-home tests and [`fake_model`] a model provider a namespaced hub can reach;
//! [`fake_telegram`] plays the Telegram Bot API for the channel's tests;
//! [`browser`] runs the web UI's journeys in headless Chromium against them;
//! [`mcp_server_entry`] finds the real MCP servers installed in `tests/mcp`.
//! Nothing here sends a packet off this machine.

use std::{
    ffi::OsString,
    io::{BufRead, BufReader},
    net::{SocketAddr, UdpSocket},
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    sync::{mpsc, Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::{anyhow, bail, Context};

pub mod agent_bench;
pub mod browser;
pub mod fake_model;
pub mod fake_telegram;
pub mod mcp_bench;
pub mod relay;
pub mod scheduler_bench;
pub mod ui_bench;

/// Dispatches `argv[1]` to the hub's (`hearth-hub`) or node's (`hearth`) command line,
/// to a local iroh relay (`relay`, see [`relay`]) or to a fake model provider
/// (`fake-model`, see [`fake_model`]). Returns `None` if argv[1] is none of these.
pub fn multicall() -> Option<anyhow::Result<()>> {
    let args: Vec<OsString> = std::env::args_os().collect();
    let which = args.get(1)?.to_str()?.to_string();
    let rest = args[1..].to_vec();
    match which.as_str() {
        "hearth-hub" => Some(hearth_hub::cli::main_with_args(rest)),
        "hearth" => Some(hearth_node::cli::main_with_args(rest)),
        "relay" => Some(relay::main_with_args(&rest[1..])),
        "fake-model" => Some(fake_model::main_with_args(&rest[1..])),
        _ => None,
    }
}

/// The multi-call executable.
#[derive(Debug, Clone)]
pub struct Binaries {
    exe: PathBuf,
    netns: Option<String>,
}

impl Binaries {
    /// Uses `exe` (e.g. `env!("CARGO_BIN_EXE_hearth-testbin")`, or the bench itself).
    pub fn new(exe: impl Into<PathBuf>) -> Self {
        Self {
            exe: exe.into(),
            netns: None,
        }
    }

    /// The same binaries, run inside network namespace `ns` (`ip netns exec`).
    pub fn in_netns(&self, ns: &str) -> Self {
        Self {
            exe: self.exe.clone(),
            netns: Some(ns.to_string()),
        }
    }

    fn command(&self) -> Command {
        match &self.netns {
            None => Command::new(&self.exe),
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(&self.exe);
                c
            }
        }
    }

    /// A `hearth-hub` command with `HEARTH_HOME` set, relays and mDNS off (tests that
    /// need mDNS turn it on inside network namespaces of their own).
    pub fn hub(&self, home: &Path) -> Command {
        let mut c = self.command();
        c.arg("hearth-hub")
            .env("HEARTH_HOME", home)
            .env("HEARTH_RELAY", "off")
            .env("HEARTH_MDNS", "off");
        c
    }

    /// A local iroh relay, `hearth-testbin relay` (add `--bind <ip:port>`).
    pub fn relay(&self) -> Command {
        let mut c = self.command();
        c.arg("relay");
        c
    }

    /// A fake model provider answering `text` to every turn, `hearth-testbin fake-model`
    /// (add `--bind <ip:port>`; it prints `fake-model ready url=…`).
    pub fn fake_model(&self, text: &str) -> Command {
        let mut c = self.command();
        c.args(["fake-model", "--text", text]);
        c
    }

    /// A `hearth` command with `HEARTH_HOME` set, relays and mDNS off, and the API of
    /// `hearth run` on a free loopback port (many nodes run at once in tests; each
    /// records its address in `node.http`).
    pub fn node(&self, home: &Path) -> Command {
        let mut c = self.command();
        c.arg("hearth")
            .env("HEARTH_HOME", home)
            .env("HEARTH_RELAY", "off")
            .env("HEARTH_MDNS", "off")
            .env("HEARTH_HTTP", "127.0.0.1:0");
        c
    }
}

/// Runs `ip` (iproute2) with `args`; fails with its stderr.
pub fn ip(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .context("running ip")?;
    if !out.status.success() {
        bail!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// Whether this process may make network namespaces: root with iproute2. CI runs as
/// root; a developer's laptop may not, and the tests that need them say so and skip.
pub fn can_make_namespaces() -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false);
    root && Command::new("ip").arg("-V").output().is_ok()
}

/// Prints one benchmark figure as a `name value unit` line.
pub fn figure(name: &str, value: impl std::fmt::Display, unit: &str) {
    println!("{name} {value} {unit}");
}

/// The `p` quantile (0–1) of `sorted` samples, nearest rank; NaN when there are none.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// `tests/mcp`: the MCP servers the plugin tests and `hearth-bench mcp` run, pinned in
/// its `package-lock.json` and installed by `npm ci --prefix tests/mcp` (`.ci/run` does).
pub fn mcp_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp")
}

/// The entry script of MCP server `package` (e.g. `server-everything`, under
/// `@modelcontextprotocol/`) installed in [`mcp_dir`]; fails saying how to install it.
pub fn mcp_server_entry(package: &str) -> anyhow::Result<PathBuf> {
    let entry = mcp_dir()
        .join("node_modules/@modelcontextprotocol")
        .join(package)
        .join("dist/index.js");
    anyhow::ensure!(
        entry.is_file(),
        "{} is missing: run `npm ci --prefix tests/mcp` (Node.js and npm needed)",
        entry.display()
    );
    Ok(entry)
}

/// The `node` executable by absolute path, for a plugin's command line: a server gets
/// only the environment its plugin declared, so it cannot count on `PATH`.
pub fn node_exe() -> anyhow::Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("node"))
        .find(|exe| exe.is_file())
        .context("no `node` on PATH: install Node.js (`apt-get install nodejs npm`)")
}

/// Runs a command to completion; fails with its stderr if it fails.
pub fn run_ok(mut cmd: Command) -> anyhow::Result<String> {
    let out: Output = cmd.stdin(Stdio::null()).output().context("spawning")?;
    if !out.status.success() {
        bail!(
            "{:?} failed ({}): {}",
            cmd,
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A free UDP port on 127.0.0.1 (for a hub that must come back on the same address).
pub fn free_udp_port() -> anyhow::Result<u16> {
    Ok(UdpSocket::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A running child process.
pub struct Proc {
    name: String,
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Arc<Mutex<Vec<String>>>,
    stderr: PathBuf,
}

impl Proc {
    /// Spawns `cmd`, capturing stdout lines and sending stderr to `stderr`.
    pub fn spawn(name: &str, mut cmd: Command, stderr: PathBuf) -> anyhow::Result<Self> {
        if let Some(dir) = stderr.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let err = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&stderr)?;
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(err)
            .spawn()
            .with_context(|| format!("spawning {name}"))?;
        let out = child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
        let (tx, lines) = mpsc::channel();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let seen2 = seen.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if let Ok(mut s) = seen2.lock() {
                    s.push(line.clone());
                }
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Self {
            name: name.to_string(),
            child,
            lines,
            seen,
            stderr,
        })
    }

    /// Waits for a stdout line satisfying `pred`.
    pub fn wait_line(
        &self,
        timeout: Duration,
        pred: impl Fn(&str) -> bool,
    ) -> anyhow::Result<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if pred(&line) => return Ok(line),
                Ok(_) => continue,
                Err(_) => bail!(
                    "{}: no matching line within {timeout:?}; stdout so far: {:?}; stderr: {}",
                    self.name,
                    self.seen.lock().map(|s| s.clone()).unwrap_or_default(),
                    self.stderr_text()
                ),
            }
        }
    }

    /// Every stdout line so far.
    pub fn stdout_lines(&self) -> Vec<String> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// The stderr log so far.
    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, then reap.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then wait up to 10 s (SIGKILL after that).
    pub fn terminate(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill9();
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// The id of the project titled `title` in a page of `GET /api/v1/projects`.
pub fn project_id(projects: &serde_json::Value, title: &str) -> anyhow::Result<String> {
    projects["data"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["title"] == title)
        .and_then(|p| p["id"].as_str())
        .map(str::to_string)
        .ok_or_else(|| anyhow::anyhow!("no {title} project in {projects}"))
}

/// A hub process and what its ready line said.
pub struct HubProc {
    /// The process.
    pub proc: Proc,
    /// Its node id.
    pub id: String,
    /// Its UDP address on 127.0.0.1.
    pub addr: SocketAddr,
    /// Its HTTP address, if enabled.
    pub http: Option<SocketAddr>,
    /// Its data directory.
    pub home: PathBuf,
}

impl HubProc {
    /// Starts a hub on `home`, bound to 127.0.0.1:`port` (0: any), HTTP on a free port.
    pub fn start(bins: &Binaries, home: &Path, port: u16) -> anyhow::Result<Self> {
        Self::start_with_env(bins, home, port, &[])
    }

    /// [`Self::start`] with extra environment variables (e.g. a test hook).
    pub fn start_with_env(
        bins: &Binaries,
        home: &Path,
        port: u16,
        env: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        Self::start_at(
            bins,
            home,
            SocketAddr::from(([127, 0, 0, 1], port)),
            SocketAddr::from(([127, 0, 0, 1], 0)),
            env,
        )
    }

    /// Starts a hub on `home` with its endpoint bound to `bind` and HTTP on `http`.
    pub fn start_at(
        bins: &Binaries,
        home: &Path,
        bind: SocketAddr,
        http: SocketAddr,
        env: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        let mut cmd = bins.hub(home);
        cmd.envs(env.iter().copied());
        cmd.args(["--bind", &bind.to_string(), "--http", &http.to_string()]);
        let proc = Proc::spawn("hub", cmd, home.join("hub.stderr"))?;
        let ready = proc.wait_line(Duration::from_secs(30), |l| {
            l.starts_with("hearth-hub ready")
        })?;
        let field = |k: &str| {
            ready
                .split_whitespace()
                .find_map(|w| w.strip_prefix(k))
                .map(str::to_string)
                .ok_or_else(|| anyhow!("ready line {ready:?} lacks {k}"))
        };
        let id = field("id=")?;
        let addr = field("sync=")?
            .split(',')
            .find_map(|a| a.parse::<SocketAddr>().ok().filter(|a| a.is_ipv4()))
            .ok_or_else(|| anyhow!("no IPv4 sync address in {ready:?}"))?;
        let http = field("http=")?.parse().ok();
        Ok(Self {
            proc,
            id,
            addr,
            http,
            home: home.to_path_buf(),
        })
    }

    /// The owner token the hub created (`owner.token`), for the API.
    pub fn owner_token(&self) -> anyhow::Result<String> {
        Ok(std::fs::read_to_string(self.home.join("owner.token"))?
            .trim()
            .to_string())
    }

    /// One request to the hub's API with the owner token; returns (status, body).
    pub fn api(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> anyhow::Result<(u16, String)> {
        let http = self
            .http
            .ok_or_else(|| anyhow!("the hub has no HTTP address"))?;
        http_request(http, Some(&self.owner_token()?), method, path, body)
    }
}

/// A node's data directory.
pub struct NodeHome {
    bins: Binaries,
    /// The directory.
    pub home: PathBuf,
    /// The node's id.
    pub id: String,
}

impl NodeHome {
    /// Creates the node identity in `home` and reads its id.
    pub fn new(bins: &Binaries, home: PathBuf) -> anyhow::Result<Self> {
        let mut c = bins.node(&home);
        c.arg("id");
        let id = run_ok(c)?.trim().to_string();
        Ok(Self {
            bins: bins.clone(),
            home,
            id,
        })
    }

    /// Runs one `hearth …` command against this replica and returns its stdout.
    pub fn cli(&self, args: &[&str]) -> anyhow::Result<String> {
        let mut c = self.bins.node(&self.home);
        c.args(args);
        run_ok(c)
    }

    /// The address of the API the running `hearth run` serves (from `node.http`).
    pub fn http_addr(&self) -> anyhow::Result<SocketAddr> {
        let text = std::fs::read_to_string(self.home.join("node.http"))
            .context("no node.http: is `hearth run` running?")?;
        Ok(text.trim().parse()?)
    }

    /// The node's owner token (`owner.token`, made by `hearth run`), for its API.
    pub fn owner_token(&self) -> anyhow::Result<String> {
        Ok(std::fs::read_to_string(self.home.join("owner.token"))?
            .trim()
            .to_string())
    }

    /// Starts `hearth run` following `hub`.
    pub fn start(&self, hub_id: &str, hub_addr: SocketAddr) -> anyhow::Result<Proc> {
        self.start_with_env(hub_id, hub_addr, &[])
    }

    /// [`Self::start`] with extra environment variables (e.g. a test hook).
    pub fn start_with_env(
        &self,
        hub_id: &str,
        hub_addr: SocketAddr,
        env: &[(&str, &str)],
    ) -> anyhow::Result<Proc> {
        let mut c = self.bins.node(&self.home);
        c.envs(env.iter().copied());
        c.args([
            "run",
            "--hub",
            hub_id,
            "--hub-addr",
            &hub_addr.to_string(),
            "--bind",
            "127.0.0.1:0",
        ]);
        let p = Proc::spawn("node", c, self.home.join("node.stderr"))?;
        p.wait_line(Duration::from_secs(30), |l| l.starts_with("hearth ready"))?;
        Ok(p)
    }
}

/// Pairs `node` with the hub whose data directory is `hub_home` directly by id (the
/// owner's shortcut; pairing by code is tested on its own).
pub fn allow(bins: &Binaries, hub_home: &Path, node_id: &str) -> anyhow::Result<()> {
    let mut c = bins.hub(hub_home);
    c.args(["devices", "add", node_id, "--name", "test-node"]);
    run_ok(c).map(|_| ())
}

/// Gives the hub at `hub_home` a provider key, as the owner does once before starting it
/// (`hearth-hub set-key <provider>` reads the key from standard input).
pub fn set_provider_key(
    bins: &Binaries,
    hub_home: &Path,
    provider: &str,
    key: &str,
) -> anyhow::Result<()> {
    use std::io::Write;
    let mut c = bins.hub(hub_home);
    c.args(["set-key", provider])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = c.spawn()?;
    if let Some(mut input) = child.stdin.take() {
        input.write_all(format!("{key}\n").as_bytes())?;
    }
    let out = child.wait_with_output()?;
    anyhow::ensure!(
        out.status.success(),
        "set-key failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// Runs one `hearth-hub …` command on `hub_home` and returns its stdout.
pub fn hub_cli(bins: &Binaries, hub_home: &Path, args: &[&str]) -> anyhow::Result<String> {
    let mut c = bins.hub(hub_home);
    c.args(args);
    run_ok(c)
}

/// Polls `f` until it returns `Ok(true)` or `timeout` passes.
pub fn eventually(
    timeout: Duration,
    mut f: impl FnMut() -> anyhow::Result<bool>,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    let mut last = None;
    while Instant::now() < deadline {
        match f() {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(e) => last = Some(e),
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    bail!("condition not met within {timeout:?}; last error: {last:?}")
}

/// One HTTP/1.1 request on loopback, with `token` as the bearer credential if given;
/// returns (status, body). Enough for JSON APIs.
pub fn http_request(
    addr: SocketAddr,
    token: Option<&str>,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> anyhow::Result<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr)?;
    let body = body.unwrap_or("");
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| anyhow!("no status in {out:?}"))?;
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

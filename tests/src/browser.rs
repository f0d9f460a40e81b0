//! Browser journeys: a script in `tests/browser/` (run by Node.js, driving Debian's
//! Chromium through playwright-core) against real hub and node processes started here.
//!
//! [`UiLab`] starts a hub and a paired node, each serving the web UI, and can stop and
//! restart the hub (same ports, so the browser's pages and cookies stay valid) and, when
//! built with [`UiLab::cuttable`], cut the node off from the hub and heal it while both
//! UIs stay reachable: the node then runs in a network namespace of its own, joined to
//! this one by two veth pairs — one carries only its QUIC link to the hub (the hub binds
//! its endpoint to that pair's address alone), the other only the browser's HTTP — and
//! cutting takes the first one down. [`Journey`] runs a script with the lab's addresses
//! and login links, and answers the script's control requests (`cut`, `heal`,
//! `stop-hub`, `start-hub`, and any the test adds) while it runs.
//!
//! Nothing here sends a packet off this machine: loopback and the namespace's private
//! links only, relays and mDNS off, Chromium started without its background traffic.

use std::{
    io::{BufRead, BufReader, Write},
    net::{Ipv4Addr, SocketAddr, TcpListener},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use anyhow::{anyhow, bail, Context};
use serde_json::{json, Value};

use crate::{allow, http_request, ip, run_ok, Binaries, HubProc, NodeHome, Proc};

/// Where journeys and their `node_modules` live.
pub fn browser_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("browser")
}

/// Where screenshots go: `$HEARTH_SHOTS`, or `target/ui-shots` of this workspace.
pub fn shots_dir() -> PathBuf {
    match std::env::var_os("HEARTH_SHOTS") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join("target")
            .join("ui-shots"),
    }
}

/// Fails with the commands that install what journeys need, if something is missing.
pub fn check_prerequisites() -> anyhow::Result<()> {
    let chromium = std::env::var("HEARTH_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    if !Path::new(&chromium).exists() {
        bail!("browser tests need Chromium at {chromium}: `apt-get install chromium` (or set HEARTH_CHROMIUM)");
    }
    if !browser_dir()
        .join("node_modules/playwright-core/package.json")
        .exists()
    {
        bail!(
            "browser tests need playwright-core: `npm ci --prefix {}`",
            browser_dir().display()
        );
    }
    Ok(())
}

/// A port free for both UDP and TCP on 127.0.0.1, below Linux's ephemeral range
/// (32768–60999), so a process that binds port 0 while the hub is stopped cannot take
/// it from the hub's restart.
fn fixed_port() -> anyhow::Result<u16> {
    use std::hash::{BuildHasher, Hasher};
    for _ in 0..200 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        let port = 20_000 + (h.finish() % 12_000) as u16;
        let free = std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok()
            && TcpListener::bind(("127.0.0.1", port)).is_ok();
        if free {
            return Ok(port);
        }
    }
    bail!("no free port between 20000 and 32000")
}

/// A free TCP port on 127.0.0.1 (released at once; a test binds it right after).
pub fn free_tcp_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A one-time login link for the API at `addr` (hub or node), made with its owner token.
pub fn login_url(addr: SocketAddr, token: &str) -> anyhow::Result<String> {
    let (status, body) = http_request(addr, Some(token), "POST", "/api/v1/auth/links", Some("{}"))?;
    anyhow::ensure!(status == 200, "login link: {status} {body}");
    let v: Value = serde_json::from_str(&body)?;
    v["url"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| anyhow!("no url in {body}"))
}

/// The node's namespace and its two links; removed on drop.
struct Cut {
    ns: String,
    /// The root side of the sync link (taken down to cut).
    sync_if: String,
    /// The hub's address on the sync link.
    hub_ip: Ipv4Addr,
    /// The node's address on the HTTP link.
    node_http_ip: Ipv4Addr,
}

impl Cut {
    fn new() -> anyhow::Result<Self> {
        // Labs of one test process run at once: each takes the next number.
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let pid = std::process::id();
        let tag = format!("{}x{n}", pid % 10_000);
        // One /24 per link and per lab.
        let k = ((pid.wrapping_mul(7).wrapping_add(n)) % 250) as u8;
        let ns = format!("hth-ui-{tag}");
        let (sa, sb) = (format!("us{tag}"), format!("un{tag}"));
        let (ha, hb) = (format!("uh{tag}"), format!("um{tag}"));
        let _ = ip(&["netns", "del", &ns]);
        let _ = ip(&["link", "del", &sa]);
        let _ = ip(&["link", "del", &ha]);
        ip(&["netns", "add", &ns])?;
        let cut = Cut {
            ns: ns.clone(),
            sync_if: sa.clone(),
            hub_ip: Ipv4Addr::new(10, 213, k, 1),
            node_http_ip: Ipv4Addr::new(10, 214, k, 2),
        };
        for (root, inner, net) in [(&sa, &sb, 213u8), (&ha, &hb, 214u8)] {
            ip(&["link", "add", root, "type", "veth", "peer", "name", inner])?;
            ip(&["link", "set", inner, "netns", &ns])?;
            ip(&["addr", "add", &format!("10.{net}.{k}.1/24"), "dev", root])?;
            ip(&[
                "netns",
                "exec",
                &ns,
                "ip",
                "addr",
                "add",
                &format!("10.{net}.{k}.2/24"),
                "dev",
                inner,
            ])?;
            // No IPv6: a link-local address would be a second way between the two.
            let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{root}/disable_ipv6"), "1");
            ip(&["link", "set", root, "up"])?;
            ip(&["netns", "exec", &ns, "ip", "link", "set", inner, "up"])?;
        }
        ip(&["netns", "exec", &ns, "ip", "link", "set", "lo", "up"])?;
        // The HTTP link carries no UDP, either way: hub and node have wildcard
        // (dual-stack) sockets answering on every address, so QUIC found the other side
        // over that link and the hub's changes still reached a cut-off node.
        let http_net = format!("10.214.{k}.0/24");
        let rule = ["rule", "add", "to", &http_net, "ipproto", "udp", "prohibit"];
        ip(&rule)?;
        ip(&[&["netns", "exec", &ns, "ip"][..], &rule[..]].concat())?;
        let _ = Command::new("ip")
            .args([
                "netns",
                "exec",
                &ns,
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
            ])
            .status();
        Ok(cut)
    }

    fn set(&self, up: bool) -> anyhow::Result<()> {
        ip(&["link", "set", &self.sync_if, if up { "up" } else { "down" }])
    }
}

impl Drop for Cut {
    fn drop(&mut self) {
        let http_net = format!(
            "{}/24",
            Ipv4Addr::from(u32::from(self.node_http_ip) & !0xff)
        );
        let _ = ip(&["rule", "del", "to", &http_net, "ipproto", "udp", "prohibit"]);
        let _ = ip(&["link", "del", &self.sync_if]);
        let _ = ip(&["netns", "del", &self.ns]);
    }
}

/// A hub and a paired node, both serving the web UI, with the hub stoppable and the
/// node's link cuttable (see the module doc).
pub struct UiLab {
    bins: Binaries,
    /// The directory everything lives in.
    pub dir: PathBuf,
    /// The hub while it runs.
    pub hub: Option<HubProc>,
    /// The hub's data directory.
    pub hub_home: PathBuf,
    /// The hub's id.
    pub hub_id: String,
    /// The hub's QUIC address (fixed across restarts).
    pub hub_udp: SocketAddr,
    /// The hub's HTTP address (fixed across restarts).
    pub hub_http: SocketAddr,
    /// The node's data directory and id.
    pub node: NodeHome,
    /// The node's `hearth run` while it runs.
    pub node_proc: Option<Proc>,
    /// The node's HTTP address.
    pub node_http: SocketAddr,
    cut: Option<Cut>,
    hub_env: Vec<(String, String)>,
}

impl UiLab {
    /// A hub and a node on 127.0.0.1; `hub_env` goes to every start of the hub.
    pub fn start(bins: &Binaries, dir: &Path, hub_env: &[(&str, &str)]) -> anyhow::Result<Self> {
        Self::build(bins, dir, hub_env, false)
    }

    /// Like [`Self::start`], with the node in a namespace of its own so that
    /// [`Self::cut_link`] can part it from the hub while both UIs stay reachable.
    pub fn cuttable(bins: &Binaries, dir: &Path, hub_env: &[(&str, &str)]) -> anyhow::Result<Self> {
        Self::build(bins, dir, hub_env, true)
    }

    fn build(
        bins: &Binaries,
        dir: &Path,
        hub_env: &[(&str, &str)],
        cuttable: bool,
    ) -> anyhow::Result<Self> {
        let cut = if cuttable { Some(Cut::new()?) } else { None };
        let hub_home = dir.join("hub");
        let hub_id = run_ok({
            let mut c = bins.hub(&hub_home);
            c.arg("id");
            c
        })?
        .trim()
        .to_string();
        let node = NodeHome::new(bins, dir.join("node"))?;
        allow(bins, &hub_home, &node.id)?;
        let hub_ip = cut.as_ref().map_or(Ipv4Addr::LOCALHOST, |c| c.hub_ip);
        // Fixed across restarts of the hub, so out of the range others are handed.
        let hub_udp = SocketAddr::from((hub_ip, fixed_port()?));
        let hub_http = SocketAddr::from((Ipv4Addr::LOCALHOST, fixed_port()?));
        let node_http = match &cut {
            Some(c) => SocketAddr::from((c.node_http_ip, 4300)),
            None => SocketAddr::from((Ipv4Addr::LOCALHOST, free_tcp_port()?)),
        };
        let mut lab = Self {
            bins: bins.clone(),
            dir: dir.to_path_buf(),
            hub: None,
            hub_home,
            hub_id,
            hub_udp,
            hub_http,
            node,
            node_proc: None,
            node_http,
            cut,
            hub_env: hub_env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        lab.start_hub()?;
        lab.start_node()?;
        Ok(lab)
    }

    /// Starts the hub (again) on its fixed addresses.
    pub fn start_hub(&mut self) -> anyhow::Result<()> {
        anyhow::ensure!(self.hub.is_none(), "the hub already runs");
        let env: Vec<(&str, &str)> = self
            .hub_env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        self.hub = Some(HubProc::start_at(
            &self.bins,
            &self.hub_home,
            self.hub_udp,
            self.hub_http,
            &env,
        )?);
        Ok(())
    }

    /// Stops the hub (SIGTERM, then it is gone).
    pub fn stop_hub(&mut self) {
        if let Some(mut hub) = self.hub.take() {
            hub.proc.terminate();
        }
    }

    /// Starts the node's `hearth run` following the hub.
    pub fn start_node(&mut self) -> anyhow::Result<()> {
        anyhow::ensure!(self.node_proc.is_none(), "the node already runs");
        let bins = match &self.cut {
            Some(c) => self.bins.in_netns(&c.ns),
            None => self.bins.clone(),
        };
        let mut c = bins.node(&self.node.home);
        c.env("HEARTH_HTTP", self.node_http.to_string());
        if self.cut.is_some() {
            // Its API is on the namespace's HTTP link, so the browser can reach it.
            c.env("HEARTH_HTTP_ALLOW_REMOTE", "true")
                .env("HEARTH_HTTP_HOSTS", self.node_http.to_string());
        }
        c.args([
            "run",
            "--hub",
            &self.hub_id,
            "--hub-addr",
            &self.hub_udp.to_string(),
            "--bind",
            if self.cut.is_some() {
                "0.0.0.0:0"
            } else {
                "127.0.0.1:0"
            },
        ]);
        let p = Proc::spawn("node", c, self.node.home.join("node.stderr"))?;
        p.wait_line(Duration::from_secs(30), |l| l.starts_with("hearth ready"))?;
        self.node_proc = Some(p);
        Ok(())
    }

    /// Stops the node's `hearth run` (SIGTERM).
    pub fn stop_node(&mut self) {
        if let Some(mut p) = self.node_proc.take() {
            p.terminate();
        }
    }

    /// Parts the node from the hub (both UIs stay reachable). Needs [`Self::cuttable`].
    pub fn cut_link(&self) -> anyhow::Result<()> {
        self.cut
            .as_ref()
            .ok_or_else(|| anyhow!("this lab was not built cuttable"))?
            .set(false)
    }

    /// Joins the node and the hub again.
    pub fn heal_link(&self) -> anyhow::Result<()> {
        self.cut
            .as_ref()
            .ok_or_else(|| anyhow!("this lab was not built cuttable"))?
            .set(true)
    }

    /// The hub's owner token.
    pub fn hub_token(&self) -> anyhow::Result<String> {
        Ok(std::fs::read_to_string(self.hub_home.join("owner.token"))?
            .trim()
            .to_string())
    }

    /// One request to the hub's API as its owner.
    pub fn hub_api(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> anyhow::Result<(u16, String)> {
        http_request(self.hub_http, Some(&self.hub_token()?), method, path, body)
    }

    /// Creates a note on the hub (`{title, content}`) and waits until the node holds it
    /// too; returns its id.
    pub fn note_on_both(&self, title: &str, content: &str) -> anyhow::Result<String> {
        let body = json!({ "title": title, "content": content }).to_string();
        let (status, created) = self.hub_api("POST", "/api/v1/notes", Some(&body))?;
        anyhow::ensure!(status == 201, "creating the note: {status} {created}");
        let id = serde_json::from_str::<Value>(&created)?["id"]
            .as_str()
            .ok_or_else(|| anyhow!("no id in {created}"))?
            .to_string();
        crate::eventually(Duration::from_secs(30), || {
            let (status, _) = self.node_api("GET", &format!("/api/v1/notes/{id}"), None)?;
            Ok(status == 200)
        })?;
        Ok(id)
    }

    /// One request to the node's API as its owner.
    pub fn node_api(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> anyhow::Result<(u16, String)> {
        http_request(
            self.node_http,
            Some(&self.node.owner_token()?),
            method,
            path,
            body,
        )
    }

    /// The journey configuration: both UIs' addresses and fresh login links.
    pub fn config(&self) -> anyhow::Result<Value> {
        let hub = match &self.hub {
            Some(_) => json!({
                "url": format!("http://{}/", self.hub_http),
                "login": login_url(self.hub_http, &self.hub_token()?)?,
            }),
            None => Value::Null,
        };
        Ok(json!({
            "hub": hub,
            "node": {
                "id": self.node.id,
                "url": format!("http://{}/", self.node_http),
                "login": login_url(self.node_http, &self.node.owner_token()?)?,
            },
        }))
    }

    /// Answers the controls every lab knows: `cut`, `heal`, `stop-hub`, `start-hub`
    /// (which answers a fresh hub login link, the old session being kept too),
    /// `hub-login` and `node-login`. `None` for any other.
    pub fn control(&mut self, command: &str) -> Option<anyhow::Result<Value>> {
        Some(match command {
            "cut" => self.cut_link().map(|_| Value::Null),
            "heal" => self.heal_link().map(|_| Value::Null),
            "stop-hub" => {
                self.stop_hub();
                Ok(Value::Null)
            }
            "start-hub" => self
                .start_hub()
                .and_then(|_| login_url(self.hub_http, &self.hub_token()?))
                .map(Value::from),
            "hub-login" => self
                .hub_token()
                .and_then(|t| login_url(self.hub_http, &t))
                .map(Value::from),
            "node-login" => self
                .node
                .owner_token()
                .and_then(|t| login_url(self.node_http, &t))
                .map(Value::from),
            _ => return None,
        })
    }
}

impl Drop for UiLab {
    fn drop(&mut self) {
        if let Some(mut p) = self.node_proc.take() {
            p.terminate();
        }
        self.stop_hub();
    }
}

/// A journey script and what it is given.
pub struct Journey {
    script: String,
    config: Value,
    timeout: Duration,
}

impl Journey {
    /// The script `tests/browser/<script>` with `config` (JSON; `shots` is added).
    pub fn new(script: &str, config: Value) -> Self {
        Self {
            script: script.to_string(),
            config,
            timeout: Duration::from_secs(240),
        }
    }

    /// Gives up after `timeout` (default 240 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Runs the script to its end, answering its `@@control` lines with `control`
    /// (`None`: unknown command). Fails with the script's output if it fails.
    pub fn run(
        self,
        mut control: impl FnMut(&str, Value) -> Option<anyhow::Result<Value>>,
    ) -> anyhow::Result<Vec<String>> {
        check_prerequisites()?;
        let name = self.script.trim_end_matches(".mjs").to_string();
        let shots = shots_dir().join(&name);
        let mut config = self.config;
        config["shots"] = Value::from(shots.display().to_string());
        let mut child = Command::new("node")
            .arg(&self.script)
            .current_dir(browser_dir())
            .env("HEARTH_JOURNEY", config.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting node (Node.js) for a browser journey")?;
        let mut stdin = child.stdin.take().ok_or_else(|| anyhow!("no stdin"))?;
        let stdout = child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
        let stderr = child.stderr.take().ok_or_else(|| anyhow!("no stderr"))?;
        let err_reader = std::thread::spawn(move || {
            let mut text = String::new();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                text.push_str(&line);
                text.push('\n');
            }
            text
        });
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let deadline = Instant::now() + self.timeout;
        let mut out = Vec::new();
        let failure = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some(rest) = line.strip_prefix("@@control ") {
                        let (cmd, arg) = rest.split_once(' ').unwrap_or((rest, "null"));
                        let arg: Value = serde_json::from_str(arg).unwrap_or(Value::Null);
                        let reply = match control(cmd, arg) {
                            Some(Ok(v)) => format!("@@ok {v}\n"),
                            Some(Err(e)) => format!("@@err {e:#}\n"),
                            None => format!("@@err unknown control {cmd:?}\n"),
                        };
                        out.push(format!("[control {cmd}] {}", reply.trim()));
                        if stdin.write_all(reply.as_bytes()).is_err() {
                            break None;
                        }
                        let _ = stdin.flush();
                    } else {
                        out.push(line);
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break None,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let _ = child.kill();
                    break Some(format!("timed out after {:?}", self.timeout));
                }
            }
        };
        let status = child.wait()?;
        let err = err_reader.join().unwrap_or_default();
        eprintln!("journey {name}: screenshots in {}", shots.display());
        if failure.is_some() || !status.success() {
            bail!(
                "journey {} failed ({}):\n--- output\n{}\n--- errors\n{}",
                self.script,
                failure.unwrap_or_else(|| status.to_string()),
                out.join("\n"),
                err
            );
        }
        Ok(out)
    }
}

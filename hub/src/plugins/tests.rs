//! The supervisor and the MCP client against real MCP servers from npm
//! (`@modelcontextprotocol/server-everything` and `server-filesystem`, installed by
//! `.ci/run` into `tests/mcp/node_modules`; `HEARTH_MCP_MODULES` names another
//! `node_modules`). Without them the tests fail under CI and are skipped, saying so,
//! elsewhere. Linux only: the sandbox test needs bubblewrap, and process checks read
//! `/proc`.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};

use hearth_sync::{DocId, DocumentStore};
use serde_json::{json, Value};

use super::{
    sandbox, CachedTool, EnvBinding, EnvSource, NewPlugin, Phase, PluginPatch, PluginStore,
    Plugins, SandboxMode, ServerSpec, ServerStatus, SupervisorConfig, SupervisorDeps, Transport,
    COMPUTER,
};
use crate::{
    agent::{
        registry::{Effect, ToolDescriptor, ToolFuture, ToolHandler, ToolRegistry, ToolSource},
        tools::{Risk, ToolContext, ToolError, UpdateLog},
    },
    secrets::{SecretStore, SecretValue},
};

/// Where the npm MCP servers are, if installed.
fn modules() -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("HEARTH_MCP_MODULES").map(PathBuf::from),
        Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp/node_modules")),
        Some(PathBuf::from("/tmp/mcp/node_modules")),
    ];
    let found = candidates.into_iter().flatten().find(|m| {
        m.join("@modelcontextprotocol/server-everything/dist/index.js")
            .is_file()
    });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "the npm MCP servers are missing: .ci/run installs tests/mcp"
        );
        eprintln!("SKIPPED: no npm MCP servers (npm install --prefix tests/mcp)");
    }
    found
}

fn everything(modules: &Path, name: &str) -> ServerSpec {
    ServerSpec {
        name: name.into(),
        transport: Transport::Stdio {
            command: "node".into(),
            args: vec![
                modules
                    .join("@modelcontextprotocol/server-everything/dist/index.js")
                    .to_string_lossy()
                    .into_owned(),
                "stdio".into(),
            ],
            cwd: None,
        },
        sandbox: SandboxMode::Auto,
        call_timeout_secs: 30,
    }
}

fn command(name: &str, program: &str, args: &[&str]) -> ServerSpec {
    ServerSpec {
        name: name.into(),
        transport: Transport::Stdio {
            command: program.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            cwd: None,
        },
        sandbox: SandboxMode::Auto,
        call_timeout_secs: 30,
    }
}

struct Probe;
impl ToolHandler for Probe {
    fn call(&self, _ctx: ToolContext, _args: Value) -> ToolFuture {
        Box::pin(async { Ok(Value::String("probed".into())) })
    }
}

struct Lab {
    _dir: tempfile::TempDir,
    home: PathBuf,
    store: Arc<PluginStore>,
    registry: Arc<ToolRegistry>,
    plugins: Arc<Plugins>,
    secrets: Arc<SecretStore>,
    ctx: ToolContext,
    project: DocId,
}

impl Lab {
    async fn start(init_timeout: Duration) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path().canonicalize().expect("canonical home");
        let hub_db = home.join("hub.db");
        let store = Arc::new(PluginStore::open(&hub_db).expect("plugins"));
        store.ensure_builtin().expect("builtin");
        let registry = Arc::new(ToolRegistry::new());
        let secrets =
            Arc::new(SecretStore::open(&hub_db, &home.join("server.secret")).expect("secrets"));
        let config = SupervisorConfig {
            init_timeout,
            poll: Duration::from_millis(200),
            backoff_first: Duration::from_millis(500),
            backoff_cap: Duration::from_secs(2),
            ..SupervisorConfig::new(home.clone())
        };
        let deps = SupervisorDeps {
            store: Arc::new(PluginStore::open(&hub_db).expect("supervisor's plugins")),
            registry: registry.clone(),
            secrets: Some(secrets.clone()),
            computer: Box::new(|_| {
                vec![ToolDescriptor {
                    name: "computer_probe".into(),
                    description: "a stand-in for the computer's tools".into(),
                    schema: json!({"type": "object"}),
                    risk: Risk::Risky,
                    default_on: true,
                    effect: Effect::RunsCommands,
                    reads_untrusted: true,
                    risk_of_call: None,
                    only_in: None,
                    source: ToolSource::System,
                    handler: Arc::new(Probe),
                }]
            }),
        };
        let plugins = Plugins::start(config, deps, store.clone());
        let project = DocId::random();
        let ctx = ToolContext {
            store: DocumentStore::open(home.join("hearth.db")).expect("store"),
            updates: Arc::new(UpdateLog::open(&hub_db).expect("updates")),
            project,
            project_dir: Some(home.join("projects").join(project.to_string())),
            secrets: Some(secrets.clone()),
        };
        Self {
            _dir: dir,
            home,
            store,
            registry,
            plugins,
            secrets,
            ctx,
            project,
        }
    }

    fn add(
        &self,
        name: &str,
        servers: Vec<ServerSpec>,
        env: Vec<EnvBinding>,
        project: Option<DocId>,
    ) {
        self.store
            .create(NewPlugin {
                name: name.into(),
                enabled: true,
                env,
                servers,
                settings: Default::default(),
                project,
            })
            .expect("add plugin");
        self.plugins.nudge();
    }

    fn state(&self, plugin: &str, server: &str) -> Option<ServerStatus> {
        self.plugins
            .states()
            .get(&(plugin.to_string(), server.to_string()))
            .cloned()
    }

    async fn call(&self, tool: &str, args: Value) -> Result<Value, ToolError> {
        let t = self
            .registry
            .get(tool)
            .unwrap_or_else(|| panic!("no tool {tool}"));
        t.handler.call(self.ctx.clone(), args).await
    }
}

/// Polls `f` every 20 ms until it answers, failing after `secs` with `what`.
async fn until<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn running(lab: &Lab, plugin: &str, server: &str) -> Option<ServerStatus> {
    lab.state(plugin, server)
        .filter(|s| s.state == Phase::Running)
}

fn text(v: Value) -> String {
    match v {
        Value::String(s) => s,
        other => other.to_string(),
    }
}

/// Whether any process's command line is exactly `args`.
/// Whether a live process (not a zombie waiting for its reaper) runs exactly `args`.
fn process_running(args: &[&str]) -> bool {
    let want: Vec<u8> = args.iter().flat_map(|a| a.bytes().chain([0])).collect();
    std::fs::read_dir("/proc")
        .map(|dir| {
            dir.flatten().any(|e| {
                std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c == want)
                    && std::fs::read_to_string(e.path().join("stat")).is_ok_and(|s| {
                        !s.rsplit_once(") ")
                            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X'))
                    })
            })
        })
        .unwrap_or(false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_is_discovered_called_and_given_only_what_it_declared() {
    let Some(m) = modules() else { return };
    let lab = Lab::start(Duration::from_secs(20)).await;
    lab.secrets
        .set(
            &format!("project:{}", lab.project),
            "token",
            &SecretValue::new("s3cret-value"),
        )
        .expect("secret");
    let env = vec![
        EnvBinding {
            name: "MODE".into(),
            source: EnvSource::Value("fast".into()),
        },
        EnvBinding {
            name: "TOKEN".into(),
            source: EnvSource::Secret("token".into()),
        },
        EnvBinding {
            name: "CARGO_MANIFEST_DIR".into(),
            source: EnvSource::Hub,
        },
    ];
    lab.add(
        "everything",
        vec![everything(&m, "main")],
        env,
        Some(lab.project),
    );
    let status = until(30, "everything running", || {
        running(&lab, "everything", "main")
    })
    .await;
    assert!(status.pid.is_some() && status.tools > 5, "{status:?}");
    assert_eq!(
        status.sandboxed,
        cfg!(target_os = "linux")
            && sandbox::find_bwrap(std::env::var_os("PATH").as_deref()).is_some()
    );

    // A call, through the registered handler.
    let echo = lab
        .registry
        .get("everything_echo")
        .expect("echo registered");
    assert_eq!(echo.only_in, Some(lab.project), "bound to its project");
    assert!(echo.reads_untrusted);
    assert_eq!(
        echo.source,
        ToolSource::Plugin {
            plugin: "everything".into(),
            server: Some("main".into())
        }
    );
    let out = lab
        .call("everything_echo", json!({"message": "hi"}))
        .await
        .expect("echo");
    assert_eq!(text(out), "Echo: hi");
    // Only a tool that says it only reads is safe.
    assert_eq!(
        lab.registry
            .get("everything_get-env")
            .expect("get-env")
            .risk,
        Risk::Safe
    );
    let cached = lab.store.cached_tools("everything").expect("cache");
    assert!(
        cached
            .iter()
            .any(|t: &CachedTool| t.name == "everything_echo"),
        "{cached:?}"
    );

    // Tools registered after the handshake arrive through tools/list_changed.
    until(20, "get-roots-list after list_changed", || {
        lab.registry.get("everything_get-roots-list")
    })
    .await;
    let roots = text(
        lab.call("everything_get-roots-list", json!({}))
            .await
            .expect("roots"),
    );
    let uri = super::mcp::file_uri(&lab.home.join("projects").join(lab.project.to_string()));
    assert!(roots.contains(&uri), "{roots}");

    // The environment: the base and the declared, nothing else of the hub's.
    let env = text(
        lab.call("everything_get-env", json!({}))
            .await
            .expect("env"),
    );
    let env: serde_json::Map<String, Value> = serde_json::from_str(&env).expect("env json");
    assert_eq!(env.get("MODE"), Some(&json!("fast")));
    assert_eq!(env.get("TOKEN"), Some(&json!("s3cret-value")));
    assert_eq!(
        env.get("CARGO_MANIFEST_DIR"),
        Some(&json!(env!("CARGO_MANIFEST_DIR")))
    );
    // bubblewrap sets PWD to the directory it starts the server in: the project's.
    if let Some(pwd) = env.get("PWD") {
        let project_dir = lab.home.join("projects").join(lab.project.to_string());
        assert_eq!(pwd, &json!(project_dir), "PWD is the project's directory");
    }
    let allowed = [
        "PATH",
        "HOME",
        "LANG",
        "TMPDIR",
        "PWD",
        "MODE",
        "TOKEN",
        "CARGO_MANIFEST_DIR",
    ];
    let extra: Vec<&String> = env
        .keys()
        .filter(|k| !allowed.contains(&k.as_str()))
        .collect();
    assert!(
        extra.is_empty(),
        "the server saw more of the hub's environment: {extra:?}"
    );

    lab.plugins.shutdown().await;
    assert!(
        lab.registry.get("everything_echo").is_none(),
        "tools withdrawn at shutdown"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_that_hang_or_die_at_start_fail_alone() {
    let Some(m) = modules() else { return };
    let lab = Lab::start(Duration::from_secs(3)).await;
    lab.add(
        "never",
        vec![command("main", "sleep", &["1001"])],
        vec![],
        None,
    );
    lab.add("dies", vec![command("main", "false", &[])], vec![], None);
    lab.add("everything", vec![everything(&m, "main")], vec![], None);
    until(30, "everything running", || {
        running(&lab, "everything", "main")
    })
    .await;
    let dies = until(10, "dies failed", || {
        lab.state("dies", "main")
            .filter(|s| s.state == Phase::Failed)
    })
    .await;
    assert!(
        dies.error
            .as_deref()
            .is_some_and(|e| e.contains("handshake failed")),
        "{dies:?}"
    );
    let never = until(15, "never failed", || {
        lab.state("never", "main")
            .filter(|s| s.state == Phase::Failed)
    })
    .await;
    assert!(
        never
            .error
            .as_deref()
            .is_some_and(|e| e.contains("no MCP handshake within 3s")),
        "{never:?}"
    );
    // The hung server was killed, not left behind.
    until(5, "sleep 1001 killed", || {
        (!process_running(&["sleep", "1001"])).then_some(())
    })
    .await;
    // The others kept working.
    let out = lab
        .call("everything_echo", json!({"message": "still here"}))
        .await
        .expect("echo");
    assert_eq!(text(out), "Echo: still here");
    // And the failed ones are tried again (state goes back to starting).
    until(10, "never retried", || {
        lab.state("never", "main")
            .filter(|s| s.state == Phase::Starting)
    })
    .await;
    lab.plugins.shutdown().await;
    // Killed at shutdown; a sandboxed one's pid namespace takes a moment to go.
    until(5, "shutdown kills a starting server", || {
        (!process_running(&["sleep", "1001"])).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_call_ends_at_its_timeout() {
    let Some(m) = modules() else { return };
    let lab = Lab::start(Duration::from_secs(20)).await;
    let spec = ServerSpec {
        call_timeout_secs: 1,
        ..everything(&m, "main")
    };
    lab.add("slow", vec![spec], vec![], None);
    until(30, "slow running", || running(&lab, "slow", "main")).await;
    let started = Instant::now();
    let r = lab
        .call(
            "slow_trigger-long-running-operation",
            json!({"duration": 30, "steps": 2}),
        )
        .await;
    assert!(
        matches!(r, Err(ToolError::TimedOut { after }) if after == Duration::from_secs(1)),
        "{r:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // The server is still usable after the abandoned call.
    let out = lab
        .call("slow_echo", json!({"message": "after"}))
        .await
        .expect("echo");
    assert_eq!(text(out), "Echo: after");
    lab.plugins.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_is_restarted_and_its_tools_withdrawn_meanwhile() {
    let Some(m) = modules() else { return };
    let lab = Lab::start(Duration::from_secs(20)).await;
    lab.add("everything", vec![everything(&m, "main")], vec![], None);
    let before = until(30, "running", || running(&lab, "everything", "main")).await;
    let pid = before.pid.expect("pid");
    nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(i32::try_from(pid).expect("pid")),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill the server");
    let down = until(5, "noticed dead", || {
        lab.state("everything", "main")
            .filter(|s| s.state == Phase::Restarting)
    })
    .await;
    assert_eq!(down.restarts, 1);
    assert_eq!(down.tools, 0);
    assert!(
        down.error.as_deref().is_some_and(|e| e.contains("exited")),
        "{down:?}"
    );
    assert!(
        lab.registry.get("everything_echo").is_none(),
        "tools withdrawn while down"
    );
    let after = until(30, "running again", || running(&lab, "everything", "main")).await;
    assert_ne!(after.pid, Some(pid));
    assert_eq!(after.restarts, 1);
    let out = lab
        .call("everything_echo", json!({"message": "back"}))
        .await
        .expect("echo");
    assert_eq!(text(out), "Echo: back");
    lab.plugins.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandboxed_server_cannot_read_the_hub_database() {
    let Some(m) = modules() else { return };
    assert!(
        sandbox::find_bwrap(std::env::var_os("PATH").as_deref()).is_some(),
        "bubblewrap is not installed (apt-get install bubblewrap)"
    );
    let lab = Lab::start(Duration::from_secs(20)).await;
    let fs = |name: &str, mode: SandboxMode| ServerSpec {
        name: name.into(),
        transport: Transport::Stdio {
            command: "node".into(),
            args: vec![
                m.join("@modelcontextprotocol/server-filesystem/dist/index.js")
                    .to_string_lossy()
                    .into_owned(),
                lab.home.to_string_lossy().into_owned(),
            ],
            cwd: None,
        },
        sandbox: mode,
        call_timeout_secs: 30,
    };
    lab.add("boxed", vec![fs("main", SandboxMode::Auto)], vec![], None);
    lab.add("open", vec![fs("main", SandboxMode::Off)], vec![], None);
    let boxed = until(30, "boxed running", || running(&lab, "boxed", "main")).await;
    let open = until(30, "open running", || running(&lab, "open", "main")).await;
    assert!(boxed.sandboxed && boxed.sandbox_note.is_none(), "{boxed:?}");
    assert!(!open.sandboxed && open.sandbox_note.is_some(), "{open:?}");
    let args = json!({"path": lab.home.join("hub.db")});
    let unconfined = lab
        .call("open_read_text_file", args.clone())
        .await
        .expect("an unconfined server reads hub.db");
    assert!(text(unconfined).contains("SQLite format 3"));
    match lab.call("boxed_read_text_file", args).await {
        Err(ToolError::Failed(msg)) => assert!(!msg.contains("SQLite format 3"), "{msg}"),
        other => panic!("the sandboxed server read hub.db: {other:?}"),
    }
    lab.plugins.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_supervisor_follows_the_database() {
    let Some(m) = modules() else { return };
    let lab = Lab::start(Duration::from_secs(20)).await;
    // The built-in computer plugin is registered while enabled.
    until(5, "computer tools", || lab.registry.get("computer_probe")).await;
    let probe = lab.registry.get("computer_probe").expect("probe");
    assert_eq!(
        probe.source,
        ToolSource::Plugin {
            plugin: COMPUTER.into(),
            server: None
        }
    );
    assert_eq!(lab.store.cached_tools(COMPUTER).expect("cache").len(), 1);
    lab.store
        .update(
            COMPUTER,
            PluginPatch {
                enabled: Some(false),
                ..PluginPatch::default()
            },
        )
        .expect("disable computer");
    until(5, "computer withdrawn", || {
        lab.registry.get("computer_probe").is_none().then_some(())
    })
    .await;

    // A plugin written by another process (no nudge): picked up by the poll.
    let other = PluginStore::open(&lab.home.join("hub.db")).expect("another connection");
    other
        .create(NewPlugin {
            name: "everything".into(),
            enabled: true,
            servers: vec![everything(&m, "main")],
            ..NewPlugin::default()
        })
        .expect("add");
    let first = until(30, "running", || running(&lab, "everything", "main")).await;
    // A changed server restarts.
    other
        .update(
            "everything",
            PluginPatch {
                servers: Some(vec![ServerSpec {
                    call_timeout_secs: 7,
                    ..everything(&m, "main")
                }]),
                ..PluginPatch::default()
            },
        )
        .expect("change");
    let second = until(30, "restarted with the change", || {
        running(&lab, "everything", "main").filter(|s| s.pid != first.pid)
    })
    .await;
    assert_eq!(second.restarts, 0, "a change is a new start, not a crash");
    // Disabled: stopped and withdrawn; enabled again: back.
    other
        .update(
            "everything",
            PluginPatch {
                enabled: Some(false),
                ..PluginPatch::default()
            },
        )
        .expect("disable");
    until(10, "stopped", || {
        lab.state("everything", "main").is_none().then_some(())
    })
    .await;
    assert!(lab.registry.get("everything_echo").is_none());
    assert!(!process_running_pid(second.pid), "its process is gone");
    other
        .update(
            "everything",
            PluginPatch {
                enabled: Some(true),
                ..PluginPatch::default()
            },
        )
        .expect("enable");
    until(30, "running again", || running(&lab, "everything", "main")).await;
    until(5, "echo back", || lab.registry.get("everything_echo")).await;
    // Removed: gone with its cache.
    other.remove("everything").expect("remove");
    until(10, "removed", || {
        lab.state("everything", "main").is_none().then_some(())
    })
    .await;
    assert!(lab.registry.get("everything_echo").is_none());
    assert!(lab
        .store
        .cached_tools("everything")
        .expect("cache")
        .is_empty());
    lab.plugins.shutdown().await;
}

fn process_running_pid(pid: Option<u32>) -> bool {
    pid.is_some_and(|p| {
        std::fs::read_to_string(format!("/proc/{p}/stat"))
            // A zombie (state Z) has exited.
            .is_ok_and(|s| {
                !s.split(") ")
                    .nth(1)
                    .is_some_and(|rest| rest.starts_with('Z'))
            })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_server_over_streamable_http() {
    let Some(m) = modules() else { return };
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
        l.local_addr().expect("addr").port()
    };
    let mut server = tokio::process::Command::new("node")
        .arg(m.join("@modelcontextprotocol/server-everything/dist/index.js"))
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the remote server");
    until(20, "the remote server listening", || {
        std::net::TcpStream::connect(("127.0.0.1", port))
            .ok()
            .map(drop)
    })
    .await;
    let lab = Lab::start(Duration::from_secs(20)).await;
    let spec = ServerSpec {
        name: "main".into(),
        transport: Transport::Http {
            url: format!("http://127.0.0.1:{port}/mcp"),
            headers: vec![EnvBinding {
                name: "X-Hearth-Test".into(),
                source: EnvSource::Value("1".into()),
            }],
        },
        sandbox: SandboxMode::Auto,
        call_timeout_secs: 30,
    };
    lab.add("remote", vec![spec], vec![], None);
    let status = until(30, "remote running", || running(&lab, "remote", "main")).await;
    assert!(status.pid.is_none() && !status.sandboxed, "{status:?}");
    let out = lab
        .call("remote_echo", json!({"message": "far"}))
        .await
        .expect("echo");
    assert_eq!(text(out), "Echo: far");
    lab.plugins.shutdown().await;
    let _ = server.kill().await;
}

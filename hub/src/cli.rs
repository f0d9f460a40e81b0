//! The `hearth-hub` command line: run the hub, manage devices, plugins, schedules, the
//! Telegram channel and owner sessions, print a pair ticket or a login link.
//!
//! A binary edge: `anyhow` is allowed here (and in the CLI's HTTP client) and nowhere
//! else in the crate. The binary is a one-line wrapper so tests can run the same code from
//! a multi-call test binary. Device, plugin and session commands work on `hub.db` directly,
//! whether or not the hub is running; `chat` and `open` talk to the running hub's API
//! with the owner token.

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use hearth_net::PairTicket;
use iroh_tickets::Ticket;

use crate::{devices::DeviceRegistry, settings::default_home};

const SETTINGS_HELP: &str = "\
Settings:
  Process settings (data directory, addresses, relay, mDNS, HTTP hosts, provider URLs) come
  from defaults, then $HEARTH_HOME/hub.json, then HEARTH_* variables, then flags.
  Runtime settings (the chat, summary and embedding models, the agent's instructions, the
  approval timeout, tool permissions) live in hub.db and change through the API while the
  hub runs (PATCH /api/v1/settings); their flags only seed the first start.

Access:
  The HTTP API listens on 127.0.0.1 and needs the owner's credential: $HEARTH_HOME/owner.token
  (used by this CLI) or a browser session opened with the link `hearth-hub open` prints.";

#[derive(Parser)]
#[command(
    name = "hearth-hub",
    version,
    about = "Hearth hub: your agent and your documents, at home",
    after_help = SETTINGS_HELP,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    /// Data directory [default: ~/.hearth].
    #[arg(long, env = "HEARTH_HOME", global = true)]
    home: Option<PathBuf>,
    #[command(flatten)]
    run: crate::settings::ProcessArgs,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Print this hub's node id.
    Id,
    /// Print a pair ticket for a device that cannot find the hub on the LAN.
    Ticket,
    /// Paired devices and pairing requests.
    #[command(subcommand)]
    Devices(DevicesCommand),
    /// Talk to the running hub's agent (streamed; approvals answered inline).
    Chat {
        /// The project to work in (name or id).
        #[arg(long, default_value = "general")]
        project: String,
        /// Send this one message and exit (otherwise read messages from standard input).
        #[arg(long)]
        message: Option<String>,
        /// Conversation channel.
        #[arg(long, default_value = "cli")]
        channel: String,
        /// Answer every approval request with yes (for scripts; use with care).
        #[arg(long)]
        yes: bool,
    },
    /// Store a provider's API key (read from standard input), encrypted.
    SetKey {
        /// anthropic, openai or ollama.
        provider: String,
    },
    /// Print a one-time login link for a browser (and open it when a desktop is
    /// present); the running hub's API must be up.
    Open {
        /// Print the link only; do not start a browser.
        #[arg(long)]
        no_browser: bool,
        /// Seconds the link stays valid (1-600).
        #[arg(long, default_value_t = 120)]
        ttl: u64,
    },
    /// Browser sessions of the owner.
    #[command(subcommand)]
    Sessions(SessionsCommand),
    /// Plugins: MCP servers whose tools the agent can use (the running hub picks changes
    /// up within a second).
    #[command(subcommand)]
    Plugins(PluginsCommand),
    /// Schedules: the agent at set times (the running hub picks changes up within a
    /// second; `run-now` needs it running).
    #[command(subcommand)]
    Schedules(crate::scheduler::cli::SchedulesCommand),
    /// The Telegram channel: bot token, allowed chats (the running hub picks changes up
    /// within a couple of seconds).
    #[command(subcommand)]
    Telegram(crate::channels::telegram::cli::TelegramCommand),
}

#[derive(Subcommand)]
enum PluginsCommand {
    /// Add a plugin with one MCP server: a command (after `--`) or a remote `--url`.
    /// The command is a program that runs as this user, with the hub's permissions.
    Add {
        /// Its name: 1-32 of a-z, 0-9 and '-'.
        name: String,
        /// Offer its tools only in this project (name or id); its server starts there.
        #[arg(long)]
        project: Option<String>,
        /// A variable the server receives: NAME (from the hub's environment),
        /// NAME=VALUE, or NAME=secret:KEY (the bound project's secret KEY). Repeatable;
        /// the server gets no other variable but PATH, HOME, LANG and TMPDIR.
        #[arg(long = "env", value_name = "NAME|NAME=VALUE|NAME=secret:KEY")]
        env: Vec<String>,
        /// A header sent to a remote server, like --env (e.g. Authorization=secret:token).
        #[arg(
            long = "header",
            value_name = "NAME=VALUE|NAME=secret:KEY",
            requires = "url"
        )]
        headers: Vec<String>,
        /// Run the server without the sandbox (it can then read the hub's data).
        #[arg(long)]
        no_sandbox: bool,
        /// Seconds a tool call may take.
        #[arg(long, default_value_t = crate::plugins::store::DEFAULT_CALL_TIMEOUT_SECS)]
        timeout: u64,
        /// A remote MCP server (streamable HTTP) instead of a command.
        #[arg(long, conflicts_with = "command")]
        url: Option<String>,
        /// Enable it without asking.
        #[arg(long, short = 'y')]
        yes: bool,
        /// The server's command and its arguments, after `--`.
        #[arg(last = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// List plugins and their servers.
    List,
    /// Enable a plugin: its servers start and its tools are offered.
    Enable {
        /// The plugin.
        name: String,
    },
    /// Disable a plugin: its servers stop and its tools are withdrawn.
    Disable {
        /// The plugin.
        name: String,
    },
    /// Remove a plugin (the built-in `computer` can only be disabled).
    Remove {
        /// The plugin.
        name: String,
    },
    /// The tools a plugin's servers listed last, with their risk.
    Tools {
        /// The plugin.
        name: String,
    },
}

#[derive(Subcommand)]
enum SessionsCommand {
    /// List open browser sessions.
    List,
    /// End a browser session (it must log in again).
    End {
        /// Session id (or a prefix of at least 4 characters).
        id: String,
    },
}

#[derive(Subcommand)]
enum DevicesCommand {
    /// List paired devices.
    List,
    /// List pairing requests waiting for a decision.
    Pending,
    /// Approve the pairing request showing this code (e.g. WDJB-MJHT).
    Approve {
        /// The code shown by `hearth pair`.
        code: String,
        /// Name for the device (default: the name it asked with).
        #[arg(long)]
        name: Option<String>,
        /// Let the device see only this project and its children (name or id).
        #[arg(long)]
        scope: Option<String>,
        /// Approve without asking for confirmation (the device is still printed).
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Deny a pairing request.
    Deny {
        /// The code shown by `hearth pair`.
        code: String,
    },
    /// Rename a device.
    Rename {
        /// Node id (or a prefix of at least 4 characters).
        id: String,
        /// New name.
        name: String,
    },
    /// Change what a device may see; its session restarts under the new scope.
    Scope {
        /// Node id (or a prefix of at least 4 characters).
        id: String,
        /// A project (name or id): the device sees it and its children. `all`: everything.
        project: String,
    },
    /// Let a device widen power through its relay (approve devices, set provider keys,
    /// tool permissions, secrets, settings), or stop it. Its relayed connection is cut at
    /// once either way. Only the owner sets this: no relayed request can.
    Admin {
        /// Node id (or a prefix of at least 4 characters).
        id: String,
        /// `on` or `off`.
        #[arg(value_parser = ["on", "off"])]
        state: String,
    },
    /// Revoke a device: its connections close at once and it is refused from now on.
    Revoke {
        /// Node id (or a prefix of at least 4 characters).
        id: String,
    },
    /// Pair a device by its node id, without a code (`hearth id` prints it).
    Add {
        /// The device's node id.
        node_id: iroh::EndpointId,
        /// A name for it.
        #[arg(long, default_value = "device")]
        name: String,
        /// Let the device see only this project and its children (name or id).
        #[arg(long)]
        scope: Option<String>,
    },
}

/// Runs `hearth-hub` with these arguments (the first is the program name).
pub fn main_with_args(args: impl IntoIterator<Item = std::ffi::OsString>) -> anyhow::Result<()> {
    let cli = Cli::parse_from(args);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting tokio")?;
    rt.block_on(main_async(cli))
}

fn fmt_time(ms: Option<i64>) -> String {
    match ms {
        None => "never".into(),
        Some(ms) => {
            let ago = (std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or(ms)
                - ms)
                / 1000;
            match ago {
                a if a < 60 => format!("{a}s ago"),
                a if a < 3600 => format!("{}m ago", a / 60),
                a if a < 86400 => format!("{}h ago", a / 3600),
                a => format!("{}d ago", a / 86400),
            }
        }
    }
}

async fn main_async(cli: Cli) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("HEARTH_LOG").unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new(
                    "info,iroh=warn,noq=warn,noq_proto=warn,mdns_sd=warn,rmcp=warn",
                )
            }),
        )
        .with_writer(crate::secrets::RedactingStderr)
        .init();
    let home = cli.home.unwrap_or_else(default_home);
    let Some(command) = cli.command else {
        return run(home, cli.run).await;
    };
    hearth_net::files::ensure_private_dir(&home)
        .with_context(|| format!("creating {}", home.display()))?;
    let registry = || -> anyhow::Result<DeviceRegistry> {
        let path = home.join("hub.db");
        crate::hubdb::check(&path)?;
        DeviceRegistry::open(&path).context("opening the device registry")
    };
    match command {
        Command::Id => {
            let key = hearth_net::load_or_create_secret_key(&home.join("secret.key"))?;
            println!("{}", key.public());
        }
        Command::Ticket => {
            let text = std::fs::read_to_string(home.join("hub.addr")).context(
                "the hub has not run yet in this data directory: start `hearth-hub` first",
            )?;
            let mut addr: iroh::EndpointAddr =
                serde_json::from_str(&text).context("reading hub.addr")?;
            let settings = crate::settings::load(home.clone(), cli.run)?;
            // A hub that has not reached its relay yet (it takes a few seconds) still
            // hands out the relay it was told to use, so the ticket works away from home.
            if addr.relay_urls().next().is_none() {
                if let Some(url) = settings.net.relay.custom_url() {
                    addr = addr.with_relay_url(url.clone());
                }
            }
            let secret = registry()?.issue_ticket()?;
            let ticket = PairTicket {
                addr,
                name: settings.name,
                secret,
            };
            let fingerprint = hearth_net::fingerprint(ticket.addr.id.as_bytes());
            println!("{}", ticket.encode_string());
            eprintln!(
                "On the device: hearth pair --ticket <ticket above>   (valid 24 hours, single use)\n\
                 It will show this hub as \"{}\" with fingerprint {fingerprint}.",
                ticket.name
            );
            let relay = ticket.addr.relay_urls().next().cloned();
            match relay {
                Some(url) => eprintln!(
                    "The ticket works away from home too, through the relay {url}."
                ),
                None if settings.net.relay == hearth_net::RelaySetting::Default => eprintln!(
                    "The hub has not reached iroh's public relays yet, so this ticket works \
                     only on the hub's network: wait a few seconds and run `hearth-hub ticket` again."
                ),
                None => eprintln!(
                    "The ticket works only on the hub's network: relays are off (see `--relay`)."
                ),
            }
        }
        Command::Chat {
            project,
            message,
            channel,
            yes,
        } => {
            crate::chat_cli::run(&home, &project, &channel, message, yes).await?;
        }
        Command::Open { no_browser, ttl } => {
            crate::hub_client::open(&home, ttl, !no_browser).await?;
        }
        Command::Sessions(cmd) => {
            let path = home.join("hub.db");
            crate::hubdb::check(&path)?;
            let sessions = crate::owner::open_sessions(&path)?;
            match cmd {
                SessionsCommand::List => {
                    for s in sessions.list()? {
                        println!(
                            "{}\tstarted {}\tlast used {}\t{}",
                            s.id,
                            fmt_time(Some(s.created_at)),
                            fmt_time(Some(s.last_used)),
                            s.user_agent
                        );
                    }
                }
                SessionsCommand::End { id } => {
                    let s = sessions.end(&id)?;
                    println!("ended session {}", s.id);
                }
            }
        }
        Command::SetKey { provider } => {
            let mut key = String::new();
            std::io::stdin()
                .read_line(&mut key)
                .context("reading the key from standard input")?;
            let secrets = crate::secrets::SecretStore::open(
                &home.join("hub.db"),
                &home.join("server.secret"),
            )?;
            secrets.set(
                "provider",
                &provider,
                &crate::secrets::SecretValue::new(key.trim()),
            )?;
            println!("stored the {provider} key (restart the hub, or set it through the API, to use it now)");
        }
        Command::Plugins(cmd) => plugins_command(&home, cmd)?,
        Command::Schedules(cmd) => crate::scheduler::cli::run(&home, cmd).await?,
        Command::Telegram(cmd) => {
            let api = crate::settings::load(home.clone(), cli.run)?.telegram_api;
            let resolve = |what: &str| resolve_project(&home, what);
            crate::channels::telegram::cli::run(&home, &api, cmd, &resolve).await?;
        }
        Command::Devices(cmd) => {
            let reg = registry()?;
            match cmd {
                DevicesCommand::List => {
                    for d in reg.list()? {
                        let state = match (d.revoked_at.is_some(), d.online) {
                            (true, _) => "revoked",
                            (false, true) => "online",
                            (false, false) => "paired",
                        };
                        println!(
                            "{}\t{}\t{}\tpaired {}\tlast seen {}\tscope {}{}",
                            d.node_id,
                            d.name,
                            state,
                            fmt_time(Some(d.paired_at)),
                            fmt_time(d.last_seen),
                            d.scope.as_deref().unwrap_or("all"),
                            if d.admin { "\tadmin" } else { "" }
                        );
                    }
                }
                DevicesCommand::Pending => {
                    for p in reg.pending()? {
                        println!(
                            "{}\t{}\tfingerprint {}\t{}\tasked {}{}",
                            p.code,
                            p.device_name,
                            p.fingerprint,
                            p.node_id,
                            fmt_time(Some(p.created_at)),
                            if p.previously_revoked {
                                "\tpreviously revoked"
                            } else {
                                ""
                            }
                        );
                    }
                }
                DevicesCommand::Approve {
                    code,
                    name,
                    scope,
                    yes,
                } => {
                    let req = reg.request(&code)?;
                    println!(
                        "approving {} ({}): \"{}\" fingerprint {} node {} asked {}",
                        req.code,
                        if req.previously_revoked {
                            "PREVIOUSLY REVOKED"
                        } else {
                            "new device"
                        },
                        req.device_name,
                        req.fingerprint,
                        req.node_id,
                        fmt_time(Some(req.created_at))
                    );
                    eprintln!(
                        "Check that `hearth pair` on the device shows this device's fingerprint {}.",
                        req.fingerprint
                    );
                    if !yes && std::io::IsTerminal::is_terminal(&std::io::stdin()) {
                        eprint!(
                            "Approve \"{}\" ({})? [y/N] ",
                            req.device_name, req.fingerprint
                        );
                        let mut answer = String::new();
                        std::io::stdin()
                            .read_line(&mut answer)
                            .context("reading the answer")?;
                        if !matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes") {
                            bail!("not approved: the request stays pending (deny it with `hearth-hub devices deny {}`)", req.code);
                        }
                    }
                    let scope = scope.map(|s| resolve_project(&home, &s)).transpose()?;
                    let d = reg.approve(&req.code, name.as_deref(), scope.as_deref())?;
                    println!(
                        "approved {} ({}) fingerprint {}",
                        d.name, d.node_id, req.fingerprint
                    );
                }
                DevicesCommand::Deny { code } => {
                    reg.deny(&code)?;
                    println!("denied {code}");
                }
                DevicesCommand::Rename { id, name } => {
                    let d = reg.rename(&id, &name)?;
                    println!("renamed {} to {}", d.node_id, d.name);
                }
                DevicesCommand::Scope { id, project } => {
                    let scope = if project == "all" {
                        None
                    } else {
                        Some(resolve_project(&home, &project)?)
                    };
                    let d = reg.set_scope(&id, scope.as_deref())?;
                    println!(
                        "{} ({}) now sees {}",
                        d.name,
                        d.node_id,
                        d.scope.as_deref().unwrap_or("everything")
                    );
                }
                DevicesCommand::Admin { id, state } => {
                    let d = reg.set_admin(&id, state == "on")?;
                    println!(
                        "{} ({}) fingerprint {} is {}",
                        d.name,
                        d.node_id,
                        hearth_net::fingerprint_of_id(&d.node_id).unwrap_or_default(),
                        if d.admin {
                            "an admin device: it may approve devices and change keys, tools and settings"
                        } else {
                            "not an admin device"
                        }
                    );
                }
                DevicesCommand::Revoke { id } => {
                    let d = reg.revoke(&id)?;
                    println!("revoked {} ({})", d.name, d.node_id);
                }
                DevicesCommand::Add {
                    node_id,
                    name,
                    scope,
                } => {
                    let scope = scope.map(|s| resolve_project(&home, &s)).transpose()?;
                    let d = reg.add(&node_id, &name, scope.as_deref())?;
                    println!("added {} ({})", d.name, d.node_id);
                }
            }
        }
    }
    Ok(())
}

/// `NAME` (from the hub's environment), `NAME=VALUE`, or `NAME=secret:KEY`.
fn parse_binding(arg: &str) -> crate::plugins::EnvBinding {
    use crate::plugins::{EnvBinding, EnvSource};
    match arg.split_once('=') {
        None => EnvBinding {
            name: arg.to_string(),
            source: EnvSource::Hub,
        },
        Some((name, value)) => EnvBinding {
            name: name.to_string(),
            source: match value.strip_prefix("secret:") {
                Some(key) => EnvSource::Secret(key.to_string()),
                None => EnvSource::Value(value.to_string()),
            },
        },
    }
}

fn plugins_command(home: &std::path::Path, cmd: PluginsCommand) -> anyhow::Result<()> {
    use crate::plugins::{
        sandbox, NewPlugin, PluginPatch, PluginStore, SandboxMode, ServerSpec, Transport,
    };
    let path = home.join("hub.db");
    crate::hubdb::check(&path)?;
    let store = PluginStore::open(&path).context("opening the plugins")?;
    // The built-in exists before the hub's first start too.
    store.ensure_builtin()?;
    let bwrap = sandbox::find_bwrap(std::env::var_os("PATH").as_deref());
    let decide = |spec: &ServerSpec| match spec.transport {
        Transport::Stdio { .. } => sandbox::decide(spec.sandbox, bwrap.clone()),
        Transport::Http { .. } => sandbox::Decision::Unconfined("remote".into()),
    };
    let enable = |name: &str, enabled: bool| -> anyhow::Result<()> {
        let patch = PluginPatch {
            enabled: Some(enabled),
            ..PluginPatch::default()
        };
        let p = store.update(name, patch)?;
        println!(
            "{} is {} (a running hub applies it within a second)",
            p.name,
            if p.enabled { "enabled" } else { "disabled" }
        );
        Ok(())
    };
    match cmd {
        PluginsCommand::Add {
            name,
            project,
            env,
            headers,
            no_sandbox,
            timeout,
            url,
            yes,
            command,
        } => {
            let transport = match (url, command.split_first()) {
                (Some(url), _) => Transport::Http {
                    url,
                    headers: headers.iter().map(|h| parse_binding(h)).collect(),
                },
                (None, Some((program, args))) => Transport::Stdio {
                    command: program.clone(),
                    args: args.to_vec(),
                    cwd: None,
                },
                (None, None) => bail!(
                    "name the server: `hearth-hub plugins add {name} -- COMMAND ARGS...` or `--url URL`"
                ),
            };
            let project = project
                .map(|p| resolve_project(home, &p))
                .transpose()?
                .map(|p| p.parse::<hearth_sync::DocId>())
                .transpose()?;
            let plugin = store.create(NewPlugin {
                name,
                enabled: false,
                env: env.iter().map(|e| parse_binding(e)).collect(),
                servers: vec![ServerSpec {
                    name: "main".into(),
                    transport,
                    sandbox: if no_sandbox {
                        SandboxMode::Off
                    } else {
                        SandboxMode::Auto
                    },
                    call_timeout_secs: timeout,
                }],
                settings: Default::default(),
                project,
            })?;
            println!("added plugin {} (disabled)", plugin.name);
            println!("{}", crate::plugins::run_warning(&plugin, &decide));
            let interactive = std::io::IsTerminal::is_terminal(&std::io::stdin());
            let go = if yes {
                true
            } else if interactive {
                eprint!("Enable {} now? [y/N] ", plugin.name);
                let mut answer = String::new();
                std::io::stdin()
                    .read_line(&mut answer)
                    .context("reading the answer")?;
                matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes")
            } else {
                false
            };
            if go {
                enable(&plugin.name, true)?;
            } else {
                println!(
                    "{} stays disabled: enable it with `hearth-hub plugins enable {}`",
                    plugin.name, plugin.name
                );
            }
        }
        PluginsCommand::List => {
            for p in store.list()? {
                let tools = store.cached_tools(&p.name)?.len();
                println!(
                    "{}\t{}{}\tproject {}\t{} tools",
                    p.name,
                    if p.enabled { "enabled" } else { "disabled" },
                    if p.builtin { "\tbuilt in" } else { "" },
                    p.project
                        .map(|d| d.to_string())
                        .unwrap_or_else(|| "all".into()),
                    tools
                );
                for s in &p.servers {
                    let what = match &s.transport {
                        Transport::Stdio { command, args, .. } => {
                            let args: Vec<std::ffi::OsString> =
                                args.iter().map(Into::into).collect();
                            sandbox::display(command.as_ref(), &args)
                        }
                        Transport::Http { url, .. } => url.clone(),
                    };
                    let confined = match decide(s) {
                        sandbox::Decision::Bubblewrap(_) => "sandboxed".to_string(),
                        sandbox::Decision::Unconfined(_)
                            if matches!(s.transport, Transport::Http { .. }) =>
                        {
                            "remote".to_string()
                        }
                        sandbox::Decision::Unconfined(why) => format!("unconfined: {why}"),
                    };
                    println!("  {}\t{what}\t{confined}", s.name);
                }
            }
        }
        PluginsCommand::Enable { name } => enable(&name, true)?,
        PluginsCommand::Disable { name } => enable(&name, false)?,
        PluginsCommand::Remove { name } => {
            store.remove(&name)?;
            println!("removed {name}");
        }
        PluginsCommand::Tools { name } => {
            store.get(&name)?;
            let tools = store.cached_tools(&name)?;
            if tools.is_empty() {
                println!("no tools known yet: {name}'s servers list them when they first run");
            }
            for t in tools {
                println!(
                    "{}\t{}\t{}\t{}",
                    t.name,
                    if t.risky { "risky" } else { "safe" },
                    t.server,
                    t.description.lines().next().unwrap_or("")
                );
            }
        }
    }
    Ok(())
}

/// Finds a project by id, id prefix or name in the hub's documents; returns its id. An
/// ambiguous name is an error; `general` is the hub's general project by id.
pub(crate) fn resolve_project(home: &std::path::Path, what: &str) -> anyhow::Result<String> {
    let path = home.join("hearth.db");
    hearth_net::files::secure_db_files(&path)?;
    let store = hearth_sync::DocumentStore::open(path)?;
    let general = crate::projects::general_id_blocking(&home.join("hub.db"))?;
    Ok(crate::projects::find_project_blocking(&store, general, what)?.to_string())
}

async fn run(home: PathBuf, args: crate::settings::ProcessArgs) -> anyhow::Result<()> {
    let settings = crate::settings::load(home, args)?;
    let settings_relay = settings.net.relay.clone();
    let hub = crate::launch(settings).await.context("starting the hub")?;
    let addrs: Vec<String> = hub.sync_addrs.iter().map(ToString::to_string).collect();
    // One machine-readable line for scripts and tests; logs go to stderr.
    let relay = settings_relay.to_string();
    println!(
        "hearth-hub ready id={} sync={} http={} relay={relay}",
        hub.id,
        addrs.join(","),
        hub.http_addr
            .map(|a| a.to_string())
            .unwrap_or_else(|| "off".into())
    );
    println!(
        "{}",
        crate::settings::away_from_home_notice(&settings_relay)
    );
    hub.run_until(hearth_net::shutdown_signal()).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::EnvSource;

    #[test]
    fn env_arguments_name_their_source() {
        let b = parse_binding("GITHUB_TOKEN");
        assert_eq!(
            (b.name.as_str(), b.source),
            ("GITHUB_TOKEN", EnvSource::Hub)
        );
        let b = parse_binding("MODE=a=b");
        assert_eq!(
            (b.name.as_str(), b.source),
            ("MODE", EnvSource::Value("a=b".into()))
        );
        let b = parse_binding("API_KEY=secret:api");
        assert_eq!(
            (b.name.as_str(), b.source),
            ("API_KEY", EnvSource::Secret("api".into()))
        );
        let b = parse_binding("EMPTY=");
        assert_eq!(
            (b.name.as_str(), b.source),
            ("EMPTY", EnvSource::Value(String::new()))
        );
    }

    #[test]
    fn plugins_add_takes_a_command_after_the_double_dash() {
        let cli = Cli::try_parse_from([
            "hearth-hub",
            "plugins",
            "add",
            "fs",
            "--env",
            "A",
            "--no-sandbox",
            "--timeout",
            "5",
            "--",
            "npx",
            "-y",
            "pkg",
            "--flag",
        ])
        .expect("parses");
        match cli.command {
            Some(Command::Plugins(PluginsCommand::Add {
                name,
                env,
                no_sandbox,
                timeout,
                command,
                url,
                ..
            })) => {
                assert_eq!(name, "fs");
                assert_eq!(env, ["A"]);
                assert!(no_sandbox);
                assert_eq!(timeout, 5);
                assert_eq!(command, ["npx", "-y", "pkg", "--flag"]);
                assert_eq!(url, None);
            }
            _ => panic!("not plugins add"),
        }
        let both = Cli::try_parse_from([
            "hearth-hub",
            "plugins",
            "add",
            "x",
            "--url",
            "http://127.0.0.1:1/mcp",
            "--",
            "srv",
        ]);
        assert!(both.is_err(), "a command and a URL exclude each other");
    }
}

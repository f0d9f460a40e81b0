//! The `hearth-hub` command line: run the hub, manage devices, print a pair ticket.
//!
//! A binary edge: `anyhow` is allowed here and nowhere else in the crate. The binary is
//! a one-line wrapper so tests can run the same code from a multi-call test binary.
//! Device commands work on `hub.db` directly, whether or not the hub is running.

use std::{net::SocketAddr, path::PathBuf};

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use hearth_net::{NetSettings, PairTicket, RelaySetting};
use iroh_tickets::Ticket;

use crate::{devices::DeviceRegistry, settings::default_home, HubSettings};

#[derive(Parser)]
#[command(
    name = "hearth-hub",
    version,
    about = "Hearth hub: your agent and your documents, at home",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    /// Data directory.
    #[arg(long, env = "HEARTH_HOME", global = true)]
    home: Option<PathBuf>,
    #[command(flatten)]
    run: RunArgs,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(clap::Args)]
struct RunArgs {
    /// UDP address of the iroh endpoint.
    #[arg(long, env = "HEARTH_BIND", default_value = "0.0.0.0:7447")]
    bind: SocketAddr,
    /// Relays: `off`, `default` (public relays) or the URL of your own iroh-relay.
    #[arg(long, env = "HEARTH_RELAY", default_value = "off")]
    relay: RelaySetting,
    /// HTTP API address, or `off`.
    #[arg(long, env = "HEARTH_HTTP", default_value = "127.0.0.1:4200")]
    http: String,
    /// Advertise the hub on the LAN over mDNS: `on` or `off`.
    #[arg(long, env = "HEARTH_MDNS", default_value = "on")]
    mdns: String,
    /// The hub's display name.
    #[arg(long, env = "HEARTH_NAME", default_value = "hearth")]
    name: String,
    /// Pair only devices that present a pair ticket (`hearth-hub ticket`).
    #[arg(long, env = "HEARTH_PAIR_REQUIRE_TICKET")]
    pair_require_ticket: bool,
    /// The agent's chat model, `provider:model` (anthropic, openai or ollama).
    #[arg(
        long,
        env = "HEARTH_CHAT_MODEL",
        default_value = "anthropic:claude-sonnet-4-5"
    )]
    chat_model: crate::agent::provider::ModelRef,
    /// Model for rolling conversation summaries (same provider as the chat model).
    #[arg(long, env = "HEARTH_SUMMARY_MODEL")]
    summary_model: Option<crate::agent::provider::ModelRef>,
    /// Model for embeddings (an OpenAI-compatible provider: openai or ollama).
    #[arg(
        long,
        env = "HEARTH_EMBEDDING_MODEL",
        default_value = "ollama:nomic-embed-text"
    )]
    embedding_model: crate::agent::provider::ModelRef,
    /// Anthropic's base URL.
    #[arg(
        long,
        env = "HEARTH_ANTHROPIC_URL",
        default_value = "https://api.anthropic.com"
    )]
    anthropic_url: String,
    /// OpenAI's base URL.
    #[arg(
        long,
        env = "HEARTH_OPENAI_URL",
        default_value = "https://api.openai.com/v1"
    )]
    openai_url: String,
    /// An OpenAI-compatible local server (Ollama, llama.cpp, vLLM).
    #[arg(
        long,
        env = "HEARTH_OLLAMA_URL",
        default_value = "http://127.0.0.1:11434/v1"
    )]
    ollama_url: String,
    /// Test hook: the `hearth/sync/N` versions to serve instead of this build's own
    /// (comma-separated), to play a hub of another release.
    #[arg(long, env = "HEARTH_SYNC_VERSIONS", value_delimiter = ',', hide = true)]
    sync_versions: Vec<u16>,
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
                    "info,iroh=warn,noq=warn,noq_proto=warn,mdns_sd=warn",
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
            let addr: iroh::EndpointAddr =
                serde_json::from_str(&text).context("reading hub.addr")?;
            let secret = registry()?.issue_ticket()?;
            let name = cli.run.name.clone();
            let ticket = PairTicket { addr, name, secret };
            let fingerprint = hearth_net::fingerprint(ticket.addr.id.as_bytes());
            println!("{}", ticket.encode_string());
            eprintln!(
                "On the device: hearth pair --ticket <ticket above>   (valid 24 hours, single use)\n\
                 It will show this hub as \"{}\" with fingerprint {fingerprint}.",
                ticket.name
            );
        }
        Command::Chat {
            project,
            message,
            channel,
            yes,
        } => {
            crate::chat_cli::run(&home, &project, &channel, message, yes).await?;
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
                            "{}\t{}\t{}\tpaired {}\tlast seen {}\tscope {}",
                            d.node_id,
                            d.name,
                            state,
                            fmt_time(Some(d.paired_at)),
                            fmt_time(d.last_seen),
                            d.scope.as_deref().unwrap_or("all")
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

/// Finds a project by id, id prefix or name in the hub's documents; returns its id. An
/// ambiguous name is an error; `general` is the hub's general project by id.
fn resolve_project(home: &std::path::Path, what: &str) -> anyhow::Result<String> {
    let path = home.join("hearth.db");
    hearth_net::files::secure_db_files(&path)?;
    let store = hearth_sync::DocumentStore::open(path)?;
    let general = crate::projects::general_id_blocking(&home.join("hub.db"))?;
    Ok(crate::projects::find_project_blocking(&store, general, what)?.to_string())
}

async fn run(home: PathBuf, args: RunArgs) -> anyhow::Result<()> {
    let http = match args.http.as_str() {
        "off" => None,
        addr => Some(
            addr.parse()
                .with_context(|| format!("--http {addr:?} is not an address or `off`"))?,
        ),
    };
    let mdns = match args.mdns.as_str() {
        "on" | "true" | "1" => true,
        "off" | "false" | "0" => false,
        other => bail!("--mdns {other:?}: use on or off"),
    };
    let settings = HubSettings {
        home,
        net: NetSettings {
            bind: args.bind,
            relay: args.relay,
        },
        http,
        mdns,
        name: args.name,
        pair_require_ticket: args.pair_require_ticket,
        chat_model: args.chat_model,
        summary_model: args.summary_model,
        embedding_model: args.embedding_model,
        provider_urls: crate::chat::ProviderUrls {
            anthropic: args.anthropic_url,
            openai: args.openai_url,
            ollama: args.ollama_url,
        },
        sync_versions: if args.sync_versions.is_empty() {
            hearth_protocol::SYNC_VERSIONS.to_vec()
        } else {
            args.sync_versions
        },
        pair_versions: hearth_protocol::PAIR_VERSIONS.to_vec(),
    };
    let hub = crate::launch(settings).await.context("starting the hub")?;
    let addrs: Vec<String> = hub.sync_addrs.iter().map(ToString::to_string).collect();
    // One machine-readable line for scripts and tests; logs go to stderr.
    println!(
        "hearth-hub ready id={} sync={} http={}",
        hub.id,
        addrs.join(","),
        hub.http_addr
            .map(|a| a.to_string())
            .unwrap_or_else(|| "off".into())
    );
    hub.run_until(hearth_net::shutdown_signal()).await;
    Ok(())
}

//! The `hearth` command line, one file per subcommand group. Document commands write the
//! local replica directly through the store; a running `hearth run` notices and replicates.
//!
//! A binary edge: `anyhow` is allowed here and nowhere else in the crate.

pub(crate) mod chat;
pub(crate) mod client;
pub(crate) mod note;
pub(crate) mod pair;
pub(crate) mod project;
pub(crate) mod run;
pub(crate) mod status;
pub(crate) mod task;

use std::path::{Path, PathBuf};

use anyhow::Context;
use hearth_sync::{DocId, DocumentStore, Kind};

pub(crate) fn open_store(home: &Path) -> anyhow::Result<DocumentStore> {
    hearth_net::files::ensure_private_dir(home)
        .with_context(|| format!("creating {}", home.display()))?;
    let path = home.join("hearth.db");
    hearth_net::files::secure_db_files(&path)
        .with_context(|| format!("securing {}", path.display()))?;
    DocumentStore::open(path).with_context(|| format!("opening the replica in {}", home.display()))
}

pub(crate) fn hex(bytes: &[u8; 32]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Accepts a full id or a unique prefix of at least 4 hex digits.
pub(crate) fn resolve(store: &DocumentStore, kind: Kind, id: &str) -> anyhow::Result<DocId> {
    if let Ok(full) = id.parse::<DocId>() {
        return Ok(full);
    }
    Ok(store.resolve_blocking(kind, id)?)
}

use crate::config::{default_home, NodeConfig};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "hearth",
    version,
    about = "Hearth node: your notes and tasks, everywhere, offline too"
)]
struct Cli {
    /// Data directory (replica, identity key, settings).
    #[arg(long, env = "HEARTH_HOME", global = true)]
    home: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print this node's id (give it to `hearth-hub allow`).
    Id,
    /// Find the hub (LAN or ticket) and pair this device with a code.
    Pair(pair::PairArgs),
    /// List the hubs that answer on this network.
    Discover {
        /// Seconds to listen.
        #[arg(long, default_value_t = 3)]
        secs: u64,
    },
    /// Keep the replica in sync with the hub and serve the API on loopback until
    /// interrupted.
    Run(run::RunArgs),
    /// The pinned hub, online or not, the last sync and the changes waiting for the hub.
    Status,
    /// Talk to the hub's agent through the running `hearth run`: one `--message`, or
    /// one message per line of standard input.
    Chat(chat::ChatArgs),
    /// Print a one-time login link for this node's API and open it in a browser.
    Open {
        /// Print the link only; do not start a browser.
        #[arg(long)]
        no_browser: bool,
        /// Seconds the link stays valid (1-600).
        #[arg(long, default_value_t = 120)]
        ttl: u64,
    },
    /// Notes in the local replica.
    #[command(subcommand)]
    Note(note::NoteCommand),
    /// Projects in the local replica.
    #[command(subcommand)]
    Project(project::ProjectCommand),
    /// Tasks in the local replica.
    #[command(subcommand)]
    Task(task::TaskCommand),
}

/// Runs `hearth` with these arguments (the first is the program name).
pub fn main_with_args(args: impl IntoIterator<Item = std::ffi::OsString>) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    let cli = Cli::parse_from(args);
    tracing_subscriber::fmt()
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("HEARTH_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,hearth=info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let home = cli.home.unwrap_or_else(default_home);
    match cli.command {
        Command::Id => {
            let key = hearth_net::load_or_create_secret_key(&home.join("secret.key"))?;
            println!("{}", key.public());
            Ok(())
        }
        Command::Pair(args) => runtime()?.block_on(pair::pair_cmd(&home, args)),
        Command::Discover { secs } => runtime()?.block_on(pair::discover_cmd(secs)),
        Command::Run(args) => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .context("starting tokio")?;
            rt.block_on(run::run(home, args))
        }
        Command::Status => runtime()?.block_on(status::run(&home)),
        Command::Chat(args) => runtime()?.block_on(chat::run(&home, args)),
        Command::Open { no_browser, ttl } => {
            runtime()?.block_on(client::open(&home, ttl, !no_browser))
        }
        Command::Note(cmd) => note::run(&open_store(&home)?, cmd, NodeConfig::load(&home)?.scope),
        Command::Project(cmd) => project::run(&open_store(&home)?, cmd),
        Command::Task(cmd) => task::run(&open_store(&home)?, cmd, NodeConfig::load(&home)?.scope),
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting tokio")
}

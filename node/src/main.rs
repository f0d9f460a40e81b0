//! `hearth`: the node CLI. Keeps a replica in sync with the hub (`hearth run`) and edits
//! it for scripts and tests (`hearth note …`, `hearth task …`).

mod cli;

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use hearth_node::config::default_home;

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
    /// Keep the replica in sync with the hub until interrupted.
    Run(cli::run::RunArgs),
    /// Notes in the local replica.
    #[command(subcommand)]
    Note(cli::note::NoteCommand),
    /// Tasks in the local replica.
    #[command(subcommand)]
    Task(cli::task::TaskCommand),
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("HEARTH_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,hearth=info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let home = cli.home.unwrap_or_else(default_home);
    match cli.command {
        Command::Id => {
            let key = hearth_net::load_or_create_secret_key(&home.join("secret.key"))?;
            println!("{}", key.public());
            Ok(())
        }
        Command::Run(args) => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .context("starting tokio")?;
            rt.block_on(cli::run::run(home, args))
        }
        Command::Note(cmd) => cli::note::run(&cli::open_store(&home)?, cmd),
        Command::Task(cmd) => cli::task::run(&cli::open_store(&home)?, cmd),
    }
}

//! The `hearth-hub` command line: start the hub, or manage its allowlist.
//!
//! A binary edge: `anyhow` is allowed here and nowhere else in the crate. The binary is
//! a one-line wrapper so tests can run the same code from a multi-call test binary.

use std::{net::SocketAddr, path::PathBuf};

use crate::{access::Allowlist, settings::default_home, HubSettings};
use anyhow::Context;
use clap::{Parser, Subcommand};
use hearth_net::{NetSettings, RelaySetting};

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
}

#[derive(Subcommand)]
enum Command {
    /// Print this hub's node id.
    Id,
    /// Allow a node to replicate with this hub.
    Allow {
        /// The node's id (`hearth id` prints it).
        node_id: iroh::EndpointId,
        /// A name for the device.
        #[arg(long, default_value = "")]
        name: String,
    },
    /// Remove a node from the allowlist.
    Disallow {
        /// The node's id.
        node_id: iroh::EndpointId,
    },
    /// List allowed nodes.
    Allowed,
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

async fn main_async(cli: Cli) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("HEARTH_LOG").unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new("info,iroh=warn,noq=warn,noq_proto=warn")
            }),
        )
        .with_writer(std::io::stderr)
        .init();
    let home = cli.home.unwrap_or_else(default_home);
    let allowlist = Allowlist::new(home.join("allowed_nodes"));
    let Some(command) = cli.command else {
        return run(home, cli.run).await;
    };
    match command {
        Command::Id => {
            let key = hearth_net::load_or_create_secret_key(&home.join("secret.key"))?;
            println!("{}", key.public());
            Ok(())
        }
        Command::Allow { node_id, name } => {
            allowlist
                .allow(node_id, &name)
                .with_context(|| format!("writing {}", allowlist.path().display()))?;
            println!("allowed {node_id}");
            Ok(())
        }
        Command::Disallow { node_id } => {
            if allowlist.disallow(&node_id)? {
                println!("removed {node_id}");
            } else {
                println!("{node_id} was not allowed");
            }
            Ok(())
        }
        Command::Allowed => {
            for (id, name) in allowlist.entries()? {
                println!("{id} {name}");
            }
            Ok(())
        }
    }
}

async fn run(home: PathBuf, args: RunArgs) -> anyhow::Result<()> {
    let http = match args.http.as_str() {
        "off" => None,
        addr => Some(
            addr.parse()
                .with_context(|| format!("--http {addr:?} is not an address or `off`"))?,
        ),
    };
    let settings = HubSettings {
        home,
        net: NetSettings {
            bind: args.bind,
            relay: args.relay,
        },
        http,
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
    hub.run_until(shutdown_signal()).await;
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

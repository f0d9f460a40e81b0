//! `hearth-testbin relay --bind <ip:port>`: a local iroh relay for the away-from-home
//! tests, so they never reach a public relay.
//!
//! Runs iroh's own relay server (the `iroh-relay` crate) in plain HTTP, with no QUIC
//! address discovery: the relay protocol authenticates endpoints by their keys and
//! carries only end-to-end encrypted QUIC packets, so a test needs no certificate and
//! hub and node need no flag to trust one. Prints `relay ready url=http://…` once it
//! listens and stops on SIGTERM or Ctrl-C. Never binds a wildcard address by default.

use std::net::SocketAddr;

use anyhow::{bail, Context};
use iroh_relay::server::{RelayConfig, Server, ServerConfig};

/// Runs the relay with `args` (`--bind <ip:port>`) until the process is asked to stop.
pub fn main_with_args(args: &[std::ffi::OsString]) -> anyhow::Result<()> {
    let bind: SocketAddr = match args {
        [flag, addr] if flag == "--bind" => addr
            .to_str()
            .context("the address is not UTF-8")?
            .parse()
            .context("--bind takes ip:port")?,
        _ => bail!("usage: hearth-testbin relay --bind <ip:port>"),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting tokio")?;
    rt.block_on(async move {
        let mut config = ServerConfig::default();
        config.relay = Some(RelayConfig::new(bind));
        let server = Server::spawn(config)
            .await
            .with_context(|| format!("starting the relay on {bind}"))?;
        let addr = server
            .http_addr()
            .context("the relay has no HTTP address")?;
        println!("relay ready url=http://{addr}");
        hearth_net::shutdown_signal().await;
        server.shutdown().await.context("stopping the relay")?;
        Ok(())
    })
}

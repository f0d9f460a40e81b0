//! Serving the node's API: binds the listener (refusing an address beyond loopback unless
//! the owner allows it, and then warning that it speaks plain HTTP), records the bound
//! address in `$HEARTH_HOME/node.http` for `hearth open`, `hearth status` and tests, and
//! stops in two steps: stop accepting, then let open requests finish within a bound.
//!
//! Never logs a credential; owns the one server task and its shutdown path.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use axum::Router;
use tokio::{sync::oneshot, task::JoinHandle};

/// The file that names the running API's address.
pub const ADDR_FILE: &str = "node.http";

/// Why the API could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The address is beyond loopback and the owner did not allow it.
    #[error("the HTTP API would listen on {0}, beyond loopback: pass --http-allow-remote (HEARTH_HTTP_ALLOW_REMOTE=true) to mean it, and put a TLS proxy in front of it")]
    Remote(SocketAddr),
    /// The listener failed (e.g. the port is taken: choose another with --http).
    #[error("cannot listen for HTTP on {addr}: {source} (choose another address with --http, or --http off)")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// Binds the API's listener on `addr`.
pub async fn bind(
    addr: SocketAddr,
    allow_remote: bool,
) -> Result<tokio::net::TcpListener, ServeError> {
    if !addr.ip().is_loopback() {
        if !allow_remote {
            return Err(ServeError::Remote(addr));
        }
        tracing::warn!(%addr, "the node's HTTP API listens beyond loopback: it speaks plain HTTP and must sit behind a TLS proxy");
        eprintln!(
            "WARNING: the HTTP API listens on {addr}, beyond loopback. It speaks plain HTTP: \
             put it behind a TLS proxy, and list the proxy's host name with --http-host."
        );
    }
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })
}

/// The running API server.
#[derive(Debug)]
pub struct ApiServer {
    /// Where it listens.
    pub addr: SocketAddr,
    addr_file: PathBuf,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl ApiServer {
    /// Serves `app` on `listener` and records the address in `home/node.http`.
    pub fn start(
        listener: tokio::net::TcpListener,
        app: Router,
        home: &std::path::Path,
    ) -> Result<Self, ServeError> {
        let local = listener.local_addr();
        let addr = local.map_err(|source| ServeError::Bind {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            source,
        })?;
        let addr_file = home.join(ADDR_FILE);
        if let Err(e) = hearth_net::files::write_atomic(&addr_file, addr.to_string().as_bytes()) {
            tracing::warn!(error = %e, "cannot record the HTTP address in node.http");
        }
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let served = axum::serve(hearth_ui::http_listener(listener), app)
                .with_graceful_shutdown(async move {
                    let _ = rx.await;
                })
                .await;
            if let Err(e) = served {
                tracing::error!(error = %e, "HTTP server failed");
            }
        });
        Ok(Self {
            addr,
            addr_file,
            stop: Some(tx),
            task,
        })
    }

    /// Stops accepting connections; open ones go on until [`Self::drain`].
    pub fn stop_accepting(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        // Nothing answers there any more.
        let _ = std::fs::remove_file(&self.addr_file);
    }

    /// Waits up to `within` for open requests to finish, then drops the rest.
    pub async fn drain(mut self, within: Duration) {
        self.stop_accepting();
        if tokio::time::timeout(within, &mut self.task).await.is_err() {
            tracing::warn!("HTTP connections did not close in time; dropping them");
            self.task.abort();
        }
    }
}

//! The external-write watcher: other processes' commits become feed events.

use super::*;

/// The running external-write watcher thread.
pub(super) struct Watcher {
    pub(super) stop: Arc<AtomicBool>,
    pub(super) handle: JoinHandle<()>,
    pub(super) port: u16,
}

/// Where a watching process publishes the loopback port of its wake-up socket.
pub(super) fn notify_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".notify");
    PathBuf::from(name)
}

impl DocumentStore {
    /// Starts a thread that announces other processes' commits on the feed as
    /// [`Origin::External`]. Stops when the last clone of the store is dropped.
    pub fn watch_external_writes(&self) -> Result<(), StoreError> {
        let mut slot = self
            .shared
            .watcher
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if slot.is_some() {
            return Ok(());
        }
        let conn = open_connection(&self.shared.path)?;
        // Writers in other processes send a datagram here after each commit, so changes
        // are seen at once without busy polling (a laptop's battery matters).
        let wake = std::net::UdpSocket::bind(("127.0.0.1", 0))
            .and_then(|s| s.set_read_timeout(Some(WATCH_FALLBACK)).map(|()| s))
            .map_err(|e| StoreError::Task(format!("watcher socket: {e}")))?;
        let port = wake
            .local_addr()
            .map_err(|e| StoreError::Task(e.to_string()))?
            .port();
        std::fs::write(notify_path(&self.shared.path), port.to_string())
            .map_err(|e| StoreError::Task(format!("writing the notify port: {e}")))?;
        let stop = Arc::new(AtomicBool::new(false));
        let feed = self.shared.feed.clone();
        let writer = self.shared.writer;
        let mut last: i64 =
            conn.query_row("SELECT coalesce(max(seq), 0) FROM change_log", [], |r| {
                r.get(0)
            })?;
        let stop2 = stop.clone();
        let handle = std::thread::Builder::new()
            .name("hearth-store-watch".into())
            .spawn(move || {
                let mut version: i64 = -1;
                let mut buf = [0u8; 16];
                while !stop2.load(Ordering::Relaxed) {
                    // A datagram, or the fallback timeout: either way look for commits.
                    let _ = wake.recv(&mut buf);
                    let now: i64 = match conn.query_row("PRAGMA data_version", [], |r| r.get(0)) {
                        Ok(v) => v,
                        Err(e) => {
                            tracing::warn!(error = %e, "store watcher cannot read data_version");
                            continue;
                        }
                    };
                    if now == version {
                        continue;
                    }
                    version = now;
                    let rows: Result<Vec<(i64, Vec<u8>, i64)>, _> = conn
                        .prepare_cached("SELECT seq, doc_id, writer FROM change_log WHERE seq > ?1 ORDER BY seq")
                        .and_then(|mut s| {
                            s.query_map([last], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect()
                        });
                    match rows {
                        Ok(rows) => {
                            for (seq, id, by) in rows {
                                last = seq;
                                if by == writer {
                                    continue;
                                }
                                if let Ok(id) = id_from_sql(id) {
                                    let _ = feed.send(DocChange { id, origin: Origin::External });
                                }
                            }
                        }
                        Err(e) => tracing::warn!(error = %e, "store watcher cannot read change_log"),
                    }
                }
            })
            .map_err(|e| StoreError::Task(e.to_string()))?;
        *slot = Some(Watcher { stop, handle, port });
        Ok(())
    }

    /// Tells a watcher in another process (say `hearth run` beside `hearth note edit`)
    /// that something was committed. Best effort: its fallback poll catches a lost one.
    pub(super) fn wake_other_watcher(&self) {
        let own = self
            .shared
            .watcher
            .lock()
            .map(|w| w.is_some())
            .unwrap_or(true);
        if own {
            return;
        }
        let Some(socket) = &self.shared.notifier else {
            return;
        };
        if let Some(port) = std::fs::read_to_string(notify_path(&self.shared.path))
            .ok()
            .and_then(|p| p.trim().parse::<u16>().ok())
        {
            let _ = socket.send_to(&[1], ("127.0.0.1", port));
        }
    }
}

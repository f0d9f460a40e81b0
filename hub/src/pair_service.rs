//! The `hearth/pair/1` protocol handler: device-code pairing.
//!
//! Open to any key (an unpaired device may only pair). One stream per attempt: the node
//! sends `Start`, gets a code, then polls until the owner decides or the code expires.
//! Every decision goes through [`DeviceRegistry`]; this handler holds no pairing state of
//! its own beyond the code of its one connection.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use hearth_protocol::{encode_frame, PairRequest, PairResponse, PAIR_MAX_FRAME};
use hearth_sync::read_frame;
use iroh::{
    endpoint::{Connection, SendStream},
    protocol::{AcceptError, ProtocolHandler},
};

use crate::devices::{DeviceError, DeviceRegistry, PollState, CODE_LIFETIME};

/// Serves pairing requests.
#[derive(Debug, Clone)]
pub struct PairService {
    registry: Arc<DeviceRegistry>,
    hub_name: String,
    require_ticket: bool,
}

impl PairService {
    /// A pairing service over `registry`.
    pub fn new(registry: Arc<DeviceRegistry>, hub_name: String, require_ticket: bool) -> Self {
        Self {
            registry,
            hub_name,
            require_ticket,
        }
    }
}

const MIN_POLL_INTERVAL: Duration = Duration::from_millis(500);
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

async fn send(stream: &mut SendStream, msg: &PairResponse) -> Result<(), AcceptError> {
    let frame = encode_frame(msg).map_err(AcceptError::from_err)?;
    stream
        .write_all(&frame)
        .await
        .map_err(AcceptError::from_err)
}

fn refusal(e: DeviceError) -> PairResponse {
    match e {
        DeviceError::Throttled { retry_after_secs } => PairResponse::Throttled { retry_after_secs },
        DeviceError::Db(_) | DeviceError::Random(_) => {
            tracing::error!(error = %e, "pairing failed on the hub");
            PairResponse::Refused {
                reason: "the hub could not record the request; try again".into(),
            }
        }
        other => PairResponse::Refused {
            reason: other.to_string(),
        },
    }
}

impl ProtocolHandler for PairService {
    async fn accept(&self, conn: Connection) -> Result<(), AcceptError> {
        let peer = conn.remote_id();
        let (mut tx, mut rx) = conn.accept_bi().await?;
        let deadline = Instant::now() + CODE_LIFETIME + Duration::from_secs(60);
        let mut buf = Vec::new();
        let mut code: Option<String> = None;
        let mut last_poll = Instant::now() - MIN_POLL_INTERVAL;
        while Instant::now() < deadline {
            let msg = match tokio::time::timeout(
                IDLE_TIMEOUT,
                read_frame::<PairRequest, _>(&mut rx, &mut buf, PAIR_MAX_FRAME),
            )
            .await
            {
                Ok(Ok(Some(m))) => m,
                Ok(Ok(None)) | Err(_) => break,
                Ok(Err(e)) => {
                    tracing::warn!(%peer, error = %e, "bad pairing message");
                    break;
                }
            };
            let registry = self.registry.clone();
            let reply = match msg {
                PairRequest::Start {
                    device_name,
                    ticket_secret,
                } => {
                    let require = self.require_ticket;
                    let r = tokio::task::spawn_blocking(move || -> Result<_, DeviceError> {
                        if registry.is_allowed(&peer)? {
                            return Ok(None);
                        }
                        registry
                            .start_pair(&peer, &device_name, ticket_secret, require)
                            .map(Some)
                    })
                    .await
                    .map_err(AcceptError::from_err)?;
                    match r {
                        // Already paired (say its settings were lost): nothing to approve.
                        Ok(None) => PairResponse::Approved {
                            hub_name: self.hub_name.clone(),
                            scope: None,
                        },
                        Ok(Some(req)) => {
                            tracing::info!(%peer, code = %req.code, device = %req.device_name, "pairing requested");
                            let left = (req.expires_at - req.created_at).max(0) / 1000;
                            code = Some(req.code.clone());
                            PairResponse::Code {
                                user_code: req.code,
                                expires_in_secs: left as u32,
                            }
                        }
                        Err(e) => refusal(e),
                    }
                }
                PairRequest::Poll => {
                    let since = last_poll.elapsed();
                    if since < MIN_POLL_INTERVAL {
                        tokio::time::sleep(MIN_POLL_INTERVAL - since).await;
                    }
                    last_poll = Instant::now();
                    match code.clone() {
                        None => PairResponse::Refused {
                            reason: "ask for a code first".into(),
                        },
                        Some(c) => {
                            match tokio::task::spawn_blocking(move || registry.poll(&peer, &c))
                                .await
                                .map_err(AcceptError::from_err)?
                            {
                                Ok(PollState::Pending) => PairResponse::Pending,
                                Ok(PollState::Approved(scope)) => PairResponse::Approved {
                                    hub_name: self.hub_name.clone(),
                                    scope,
                                },
                                Ok(PollState::Denied) => PairResponse::Denied,
                                Ok(PollState::Expired) => PairResponse::Expired,
                                Err(e) => refusal(e),
                            }
                        }
                    }
                }
            };
            let done = !matches!(reply, PairResponse::Pending | PairResponse::Code { .. });
            send(&mut tx, &reply).await?;
            if done {
                break;
            }
        }
        let _ = tx.finish();
        // Give the last frame time to arrive before the connection goes.
        let _ = tokio::time::timeout(Duration::from_secs(2), conn.closed()).await;
        Ok(())
    }
}

//! The pairing client: ask a hub for a device code and wait for the owner's decision.
//!
//! Speaks `hearth/pair/1` (see `hearth_protocol::PairRequest`). The hub's id is
//! authenticated by the QUIC handshake, so on approval the caller can pin it.

use std::time::Duration;

use hearth_protocol::{
    encode_frame, PairRequest, PairResponse, ALPN_PAIR, PAIR_MAX_FRAME, PAIR_VERSIONS,
};
use hearth_sync::read_frame;
use iroh::{Endpoint, EndpointAddr};

/// Why pairing did not succeed. Each message tells the user what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PairError {
    /// The hub could not be reached.
    #[error("cannot reach the hub: {0}")]
    Connect(String),
    /// The owner denied the request.
    #[error("the hub's owner denied this pairing request")]
    Denied,
    /// The code expired.
    #[error("the code expired before it was approved: run `hearth pair` again")]
    Expired,
    /// Too many attempts.
    #[error("the hub is throttling pairing requests: try again in {0} s")]
    Throttled(u32),
    /// The hub refused.
    #[error("the hub refused: {0}")]
    Refused(String),
    /// The hub broke the protocol or the stream failed.
    #[error("pairing failed: {0}")]
    Protocol(String),
}

/// The hub's answer on approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paired {
    /// The hub's display name.
    pub hub_name: String,
    /// Project scope, if the device was paired for one.
    pub scope: Option<String>,
}

/// Asks `hub` to pair this device; calls `on_code(code, expires_in_secs)` once the hub
/// issued a code, then polls every second until the owner decides.
pub async fn request_pairing(
    endpoint: &Endpoint,
    hub: EndpointAddr,
    device_name: &str,
    ticket_secret: Option<[u8; 16]>,
    mut on_code: impl FnMut(&str, u32),
) -> Result<Paired, PairError> {
    // Offer every pair version this build speaks; the hub picks the highest it shares.
    let mut rest = hearth_protocol::alpns(hearth_protocol::Family::Pair, PAIR_VERSIONS);
    let first = if rest.is_empty() {
        ALPN_PAIR.to_vec()
    } else {
        rest.remove(0)
    };
    let conn = endpoint
        .connect_with_opts(
            hub,
            &first,
            iroh::endpoint::ConnectOptions::new().with_additional_alpns(rest),
        )
        .await
        .map_err(|e| PairError::Connect(e.to_string()))?
        .await
        .map_err(|e| PairError::Connect(e.to_string()))?;
    let (mut tx, mut rx) = conn
        .open_bi()
        .await
        .map_err(|e| PairError::Connect(e.to_string()))?;
    let proto = |e: &dyn std::fmt::Display| PairError::Protocol(e.to_string());
    let mut buf = Vec::new();
    let mut msg = PairRequest::Start {
        device_name: device_name.to_string(),
        ticket_secret,
    };
    let outcome = loop {
        let frame = encode_frame(&msg).map_err(|e| proto(&e))?;
        tx.write_all(&frame).await.map_err(|e| proto(&e))?;
        let reply = read_frame::<PairResponse, _>(&mut rx, &mut buf, PAIR_MAX_FRAME)
            .await
            .map_err(|e| proto(&e))?
            .ok_or_else(|| PairError::Protocol("the hub closed the pairing stream".into()))?;
        match reply {
            PairResponse::Code {
                user_code,
                expires_in_secs,
            } => on_code(&user_code, expires_in_secs),
            PairResponse::Pending => {}
            PairResponse::Approved { hub_name, scope } => break Ok(Paired { hub_name, scope }),
            PairResponse::Denied => break Err(PairError::Denied),
            PairResponse::Expired => break Err(PairError::Expired),
            PairResponse::Throttled { retry_after_secs } => {
                break Err(PairError::Throttled(retry_after_secs))
            }
            PairResponse::Refused { reason } => break Err(PairError::Refused(reason)),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        msg = PairRequest::Poll;
    };
    let _ = tx.finish();
    conn.close(0u32.into(), b"done");
    outcome
}

//! The pairing client: ask a hub for a device code and wait for the owner's decision.
//!
//! Speaks `hearth/pair/1` (see `hearth_protocol::PairRequest`). The hub's id is
//! authenticated by the QUIC handshake, so on approval the caller can pin it.
//!
//! Trusts nothing the other side sends: an `Approved` is accepted only after this
//! exchange showed the owner a code to approve on the hub, or when the caller already
//! pinned this very hub key. Anything that answers `Approved` at once (an impostor on
//! the LAN answering mDNS, say) would otherwise be pinned without the owner ever seeing
//! a code. Replies are read with the pairing frame limit.

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
    /// The hub answered `Approved` before any code was shown: nothing was pinned.
    #[error(
        "refused: this hub said \"approved\" without showing a code first, so nobody approved \
         this device on your hub and it may be an impostor; nothing was saved. Pair with \
         `hearth pair --ticket <ticket>` from `hearth-hub ticket` on your hub. (If this device \
         is still paired there, revoke it with `hearth-hub devices revoke` and pair again.)"
    )]
    ApprovedWithoutCode,
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
///
/// `hub_pinned`: this node already pinned `hub.id` before (its `node.json` names it), so
/// an `Approved` without a code (the hub saying this key is already paired) is believed;
/// otherwise it is refused with [`PairError::ApprovedWithoutCode`].
pub async fn request_pairing(
    endpoint: &Endpoint,
    hub: EndpointAddr,
    device_name: &str,
    ticket_secret: Option<[u8; 16]>,
    hub_pinned: bool,
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
    let mut code_shown = false;
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
            } => {
                // A code is `XXXX-XXXX`; anything else (say, terminal escapes) is refused.
                let well_formed = user_code.len() == 9
                    && user_code.chars().enumerate().all(|(i, c)| {
                        if i == 4 {
                            c == '-'
                        } else {
                            c.is_ascii_alphanumeric()
                        }
                    });
                if !well_formed {
                    break Err(PairError::Protocol("the hub sent a malformed code".into()));
                }
                on_code(&user_code, expires_in_secs);
                code_shown = true;
            }
            PairResponse::Pending if !code_shown => {
                break Err(PairError::Protocol(
                    "the hub said \"pending\" before showing a code".into(),
                ))
            }
            PairResponse::Pending => {}
            PairResponse::Approved { .. } if !code_shown && !hub_pinned => {
                break Err(PairError::ApprovedWithoutCode)
            }
            PairResponse::Approved { hub_name, scope } => {
                break Ok(Paired {
                    hub_name: printable(&hub_name, 64),
                    scope,
                })
            }
            PairResponse::Denied => break Err(PairError::Denied),
            PairResponse::Expired => break Err(PairError::Expired),
            PairResponse::Throttled { retry_after_secs } => {
                break Err(PairError::Throttled(retry_after_secs))
            }
            PairResponse::Refused { reason } => {
                break Err(PairError::Refused(printable(&reason, 300)))
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        msg = PairRequest::Poll;
    };
    let _ = tx.finish();
    conn.close(0u32.into(), b"done");
    outcome
}

/// `text` without control characters (no terminal escapes from the other side), at most
/// `max` characters.
fn printable(text: &str, max: usize) -> String {
    text.chars().filter(|c| !c.is_control()).take(max).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_net::{NetSettings, NoHooks, RelaySetting};
    use iroh::{
        endpoint::Connection,
        protocol::{AcceptError, ProtocolHandler, Router},
        SecretKey,
    };

    /// A hub that answers each request with the next of its scripted replies.
    #[derive(Debug, Clone)]
    struct ScriptedHub(Vec<PairResponse>);

    impl ProtocolHandler for ScriptedHub {
        async fn accept(&self, conn: Connection) -> Result<(), AcceptError> {
            let (mut tx, mut rx) = conn.accept_bi().await?;
            let mut buf = Vec::new();
            for reply in &self.0 {
                match read_frame::<PairRequest, _>(&mut rx, &mut buf, PAIR_MAX_FRAME).await {
                    Ok(Some(_)) => {}
                    _ => break,
                }
                let frame = encode_frame(reply).map_err(AcceptError::from_err)?;
                tx.write_all(&frame).await.map_err(AcceptError::from_err)?;
            }
            let _ = tx.finish();
            let _ = tokio::time::timeout(Duration::from_secs(5), conn.closed()).await;
            Ok(())
        }
    }

    async fn endpoint(alpns: Vec<Vec<u8>>) -> Endpoint {
        let net = NetSettings {
            bind: "127.0.0.1:0".parse().expect("addr"),
            relay: RelaySetting::Disabled,
        };
        hearth_net::bind_endpoint(SecretKey::generate(), &net, alpns, None::<NoHooks>)
            .await
            .expect("endpoint")
    }

    /// Pairs against a hub scripted with `replies`; returns the outcome and the codes shown.
    async fn pair_with(
        replies: Vec<PairResponse>,
        hub_pinned: bool,
    ) -> (Result<Paired, PairError>, Vec<String>) {
        let hub_ep = endpoint(vec![ALPN_PAIR.to_vec()]).await;
        let mut hub_addr = EndpointAddr::new(hub_ep.id());
        for a in hub_ep.bound_sockets() {
            hub_addr = hub_addr.with_ip_addr(a);
        }
        let router = Router::builder(hub_ep)
            .accept(ALPN_PAIR, ScriptedHub(replies))
            .spawn();
        let node = endpoint(Vec::new()).await;
        let mut shown = Vec::new();
        let outcome = request_pairing(&node, hub_addr, "laptop", None, hub_pinned, |c, _| {
            shown.push(c.to_string())
        })
        .await;
        node.close().await;
        let _ = router.shutdown().await;
        (outcome, shown)
    }

    fn approved() -> PairResponse {
        PairResponse::Approved {
            hub_name: "home".into(),
            scope: None,
        }
    }

    #[tokio::test]
    async fn approved_without_a_shown_code_is_refused() {
        let (outcome, shown) = pair_with(vec![approved()], false).await;
        assert!(
            matches!(outcome, Err(PairError::ApprovedWithoutCode)),
            "{outcome:?}"
        );
        assert!(shown.is_empty());
        assert!(PairError::ApprovedWithoutCode
            .to_string()
            .contains("without showing a code"));
        // "Pending" before a code is just as wrong.
        let (outcome, _) = pair_with(vec![PairResponse::Pending, approved()], false).await;
        assert!(
            matches!(outcome, Err(PairError::Protocol(_))),
            "{outcome:?}"
        );
        // The hub this node pinned before may say the key is already paired.
        let (outcome, _) = pair_with(vec![approved()], true).await;
        assert_eq!(
            outcome.expect("pinned hub"),
            Paired {
                hub_name: "home".into(),
                scope: None
            }
        );
    }

    #[tokio::test]
    async fn approved_after_a_shown_code_is_accepted_and_sanitised() {
        let code = PairResponse::Code {
            user_code: "WDJB-MJHT".into(),
            expires_in_secs: 900,
        };
        let (outcome, shown) = pair_with(
            vec![
                code,
                PairResponse::Approved {
                    hub_name: "home\u{1b}[2J".into(),
                    scope: Some("p1".into()),
                },
            ],
            false,
        )
        .await;
        assert_eq!(shown, vec!["WDJB-MJHT".to_string()]);
        assert_eq!(
            outcome.expect("approved"),
            Paired {
                hub_name: "home[2J".into(),
                scope: Some("p1".into())
            }
        );
        let (outcome, shown) = pair_with(
            vec![PairResponse::Code {
                user_code: "\u{1b}]0;pwned\u{7}".into(),
                expires_in_secs: 900,
            }],
            false,
        )
        .await;
        assert!(
            matches!(outcome, Err(PairError::Protocol(_))),
            "{outcome:?}"
        );
        assert!(shown.is_empty());
    }
}

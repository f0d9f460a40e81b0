//! The pairing client: ask a hub for a device code and wait for the owner's decision.
//!
//! Speaks `hearth/pair/N` (see `hearth_protocol::PairRequest`), offering every version it
//! knows; on `/2` the approval also names the hub's relay. The hub's id is authenticated
//! by the QUIC handshake, so on approval the caller can pin it.
//!
//! A hub that does not answer yet (starting, restarting, or not yet on its relay) is
//! dialed again with backoff until the caller's bound; only then does pairing fail.
//!
//! Trusts nothing the other side sends: an `Approved` is accepted only after this
//! exchange showed the owner a code to approve on the hub, or when the caller already
//! pinned this very hub key. Anything that answers `Approved` at once (an impostor on
//! the LAN answering mDNS, say) would otherwise be pinned without the owner ever seeing
//! a code. Replies are read with the pairing frame limit; a relay URL that does not parse
//! is dropped.

use std::time::Duration;

use hearth_protocol::{encode_frame, Family, PairRequest, PairResponse, PAIR_MAX_FRAME};
use hearth_sync::read_frame;
use iroh::{endpoint::Connection, Endpoint, EndpointAddr, RelayUrl};
use tokio::time::Instant;

/// Why pairing did not succeed. Each message tells the user what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PairError {
    /// The hub could not be reached.
    #[error("cannot reach the hub: {0}")]
    Connect(String),
    /// The hub and this device share no pairing version; the message says which to update.
    #[error("{0}")]
    Version(String),
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
    /// The hub's relay, when the hub named one (`hearth/pair/2`).
    pub relay: Option<RelayUrl>,
}

/// What to ask the hub, and how long to keep trying to reach it.
#[derive(Debug, Clone)]
pub struct PairOptions<'a> {
    /// How this device calls itself on the hub.
    pub device_name: &'a str,
    /// The one-time secret of a pair ticket, when the hub was found through one.
    pub ticket_secret: Option<[u8; 16]>,
    /// This node already pinned the hub's id before (its `node.json` names it), so an
    /// `Approved` without a code (the hub saying this key is already paired) is believed;
    /// otherwise it is refused with [`PairError::ApprovedWithoutCode`].
    pub hub_pinned: bool,
    /// The `hearth/pair/N` versions to offer (normally `hearth_protocol::PAIR_VERSIONS`).
    pub versions: &'a [u16],
    /// How long to keep dialing a hub that does not answer.
    pub wait: Duration,
}

/// Progress the caller shows its user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairEvent<'a> {
    /// The hub did not answer; dialing again after `retry_in`.
    Waiting {
        /// Why the last attempt failed.
        reason: &'a str,
        /// Delay before the next attempt.
        retry_in: Duration,
    },
    /// The hub issued this code for the owner to approve.
    Code {
        /// `XXXX-XXXX`.
        code: &'a str,
        /// Seconds until it expires.
        expires_in_secs: u32,
    },
}

const RETRY_MIN: Duration = Duration::from_millis(250);
const RETRY_MAX: Duration = Duration::from_secs(5);
/// How long one dial may take. iroh's own handshake timeout is 30 s; a hub that is up
/// answers within a few round trips even through a relay, and a fresh attempt after a
/// short pause tells the user sooner that the hub is not there yet.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(6);

/// Asks `hub` to pair this device. Dials until the hub answers or `options.wait` runs out
/// (reporting [`PairEvent::Waiting`]); reports [`PairEvent::Code`] once the hub issued a
/// code, then polls every second until the owner decides.
pub async fn request_pairing(
    endpoint: &Endpoint,
    hub: EndpointAddr,
    options: PairOptions<'_>,
    mut on_event: impl FnMut(PairEvent<'_>),
) -> Result<Paired, PairError> {
    let conn = connect_patiently(endpoint, hub, &options, &mut on_event).await?;
    let outcome = exchange(&conn, &options, &mut on_event).await;
    conn.close(0u32.into(), b"done");
    outcome
}

/// Dials until the hub answers or `options.wait` runs out; a hub sharing no pairing
/// version fails at once (waiting will not change that).
async fn connect_patiently(
    endpoint: &Endpoint,
    hub: EndpointAddr,
    options: &PairOptions<'_>,
    on_event: &mut impl FnMut(PairEvent<'_>),
) -> Result<Connection, PairError> {
    let deadline = Instant::now() + options.wait;
    let mut backoff = RETRY_MIN;
    loop {
        let attempt =
            hearth_net::connect_versioned(endpoint, hub.clone(), Family::Pair, options.versions);
        let until = deadline.min(Instant::now() + ATTEMPT_TIMEOUT);
        let reason = match tokio::time::timeout_at(until, attempt).await {
            Ok(Ok((conn, version))) => {
                tracing::debug!(version, "pairing version negotiated");
                return Ok(conn);
            }
            Ok(Err(hearth_net::SyncConnError::Version(message))) => {
                return Err(PairError::Version(message))
            }
            Ok(Err(hearth_net::SyncConnError::Connect(reason))) => reason,
            Ok(Err(e)) => e.to_string(),
            Err(_) => "timed out".to_string(),
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(PairError::Connect(format!(
                "{reason} (kept trying for {} s; is the hub running, and on this network or a relay?)",
                options.wait.as_secs()
            )));
        }
        let retry_in = backoff.min(left);
        on_event(PairEvent::Waiting {
            reason: &reason,
            retry_in,
        });
        tokio::time::sleep(retry_in).await;
        backoff = (backoff * 2).min(RETRY_MAX);
    }
}

async fn exchange(
    conn: &Connection,
    options: &PairOptions<'_>,
    on_event: &mut impl FnMut(PairEvent<'_>),
) -> Result<Paired, PairError> {
    let (mut tx, mut rx) = conn
        .open_bi()
        .await
        .map_err(|e| PairError::Connect(e.to_string()))?;
    let proto = |e: &dyn std::fmt::Display| PairError::Protocol(e.to_string());
    let mut buf = Vec::new();
    let mut msg = PairRequest::Start {
        device_name: options.device_name.to_string(),
        ticket_secret: options.ticket_secret,
    };
    let mut code_shown = false;
    let outcome = loop {
        let frame = encode_frame(&msg).map_err(|e| proto(&e))?;
        tx.write_all(&frame).await.map_err(|e| proto(&e))?;
        let reply = read_frame::<PairResponse, _>(&mut rx, &mut buf, PAIR_MAX_FRAME)
            .await
            .map_err(|e| proto(&e))?
            .ok_or_else(|| PairError::Protocol("the hub closed the pairing stream".into()))?;
        let (hub_name, scope, relay) = match reply {
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
                on_event(PairEvent::Code {
                    code: &user_code,
                    expires_in_secs,
                });
                code_shown = true;
                tokio::time::sleep(Duration::from_secs(1)).await;
                msg = PairRequest::Poll;
                continue;
            }
            PairResponse::Pending if !code_shown => {
                break Err(PairError::Protocol(
                    "the hub said \"pending\" before showing a code".into(),
                ))
            }
            PairResponse::Pending => {
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            PairResponse::Approved { hub_name, scope } => (hub_name, scope, None),
            PairResponse::ApprovedWithRelay {
                hub_name,
                scope,
                relay,
            } => (hub_name, scope, relay),
            PairResponse::Denied => break Err(PairError::Denied),
            PairResponse::Expired => break Err(PairError::Expired),
            PairResponse::Throttled { retry_after_secs } => {
                break Err(PairError::Throttled(retry_after_secs))
            }
            PairResponse::Refused { reason } => {
                break Err(PairError::Refused(printable(&reason, 300)))
            }
        };
        if !code_shown && !options.hub_pinned {
            break Err(PairError::ApprovedWithoutCode);
        }
        break Ok(Paired {
            hub_name: printable(&hub_name, 64),
            scope,
            relay: relay.and_then(|r| match r.parse::<RelayUrl>() {
                Ok(url) => Some(url),
                Err(e) => {
                    tracing::warn!(error = %e, "the hub named a relay that is not a URL; ignored");
                    None
                }
            }),
        });
    };
    let _ = tx.finish();
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
    use hearth_protocol::{alpn, ALPN_PAIR, PAIR_VERSIONS};
    use iroh::{
        endpoint::Connection,
        protocol::{AcceptError, ProtocolHandler, Router},
        SecretKey,
    };
    use std::net::SocketAddr;

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

    /// A scripted hub serving pairing version `version` at `bind`.
    async fn scripted_hub(
        bind: SocketAddr,
        version: u16,
        replies: Vec<PairResponse>,
    ) -> (Router, EndpointAddr) {
        scripted_hub_with(SecretKey::generate(), bind, version, replies).await
    }

    /// The same, with the hub's key.
    async fn scripted_hub_with(
        key: SecretKey,
        bind: SocketAddr,
        version: u16,
        replies: Vec<PairResponse>,
    ) -> (Router, EndpointAddr) {
        let alpn = alpn(Family::Pair, version);
        let net = NetSettings {
            bind,
            relay: RelaySetting::Disabled,
        };
        let hub_ep = hearth_net::bind_endpoint(key, &net, vec![alpn.clone()], None::<NoHooks>)
            .await
            .expect("endpoint");
        let mut hub_addr = EndpointAddr::new(hub_ep.id());
        for a in hub_ep.bound_sockets() {
            hub_addr = hub_addr.with_ip_addr(a);
        }
        let router = Router::builder(hub_ep)
            .accept(alpn, ScriptedHub(replies))
            .spawn();
        (router, hub_addr)
    }

    fn options(hub_pinned: bool, wait: Duration) -> PairOptions<'static> {
        PairOptions {
            device_name: "laptop",
            ticket_secret: None,
            hub_pinned,
            versions: PAIR_VERSIONS,
            wait,
        }
    }

    /// Pairs with `hub`; returns the outcome, the codes shown and the waits reported.
    async fn pair(
        hub: EndpointAddr,
        options: PairOptions<'_>,
    ) -> (Result<Paired, PairError>, Vec<String>, usize) {
        let node = endpoint(Vec::new()).await;
        let mut shown = Vec::new();
        let mut waits = 0;
        let outcome = request_pairing(&node, hub, options, |event| match event {
            PairEvent::Code { code, .. } => shown.push(code.to_string()),
            PairEvent::Waiting { .. } => waits += 1,
        })
        .await;
        node.close().await;
        (outcome, shown, waits)
    }

    /// Pairs against a `hearth/pair/1` hub scripted with `replies`; returns the outcome
    /// and the codes shown.
    async fn pair_with(
        replies: Vec<PairResponse>,
        hub_pinned: bool,
    ) -> (Result<Paired, PairError>, Vec<String>) {
        let (router, hub_addr) =
            scripted_hub("127.0.0.1:0".parse().expect("addr"), 1, replies).await;
        assert_eq!(alpn(Family::Pair, 1), ALPN_PAIR);
        let (outcome, shown, _) = pair(hub_addr, options(hub_pinned, Duration::from_secs(5))).await;
        let _ = router.shutdown().await;
        (outcome, shown)
    }

    fn approved() -> PairResponse {
        PairResponse::Approved {
            hub_name: "home".into(),
            scope: None,
        }
    }

    fn code() -> PairResponse {
        PairResponse::Code {
            user_code: "WDJB-MJHT".into(),
            expires_in_secs: 900,
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
                scope: None,
                relay: None,
            }
        );
    }

    #[tokio::test]
    async fn approved_after_a_shown_code_is_accepted_and_sanitised() {
        let (outcome, shown) = pair_with(
            vec![
                code(),
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
                scope: Some("p1".into()),
                relay: None,
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

    #[tokio::test]
    async fn a_pair_2_approval_brings_the_hubs_relay_and_a_bad_url_is_dropped() {
        let with_relay = |relay: &str| PairResponse::ApprovedWithRelay {
            hub_name: "home".into(),
            scope: None,
            relay: Some(relay.into()),
        };
        let any = "127.0.0.1:0".parse().expect("addr");
        let (router, hub) =
            scripted_hub(any, 2, vec![code(), with_relay("http://10.9.9.9:3340")]).await;
        let (outcome, _, _) = pair(hub, options(false, Duration::from_secs(5))).await;
        let _ = router.shutdown().await;
        assert_eq!(
            outcome.expect("approved").relay.map(|u| u.to_string()),
            Some("http://10.9.9.9:3340/".into())
        );
        let (router, hub) = scripted_hub(any, 2, vec![code(), with_relay("not a url")]).await;
        let (outcome, _, _) = pair(hub, options(false, Duration::from_secs(5))).await;
        let _ = router.shutdown().await;
        assert_eq!(outcome.expect("approved").relay, None);
    }

    #[tokio::test]
    async fn pairing_keeps_dialing_a_hub_that_starts_late_until_its_bound() {
        // Nothing listens at first; the hub comes up on that address 1.5 s later.
        let free = std::net::UdpSocket::bind("127.0.0.1:0").expect("probe");
        let at = free.local_addr().expect("addr");
        drop(free);
        let key = SecretKey::generate();
        let hub = EndpointAddr::new(key.public()).with_ip_addr(at);
        let started = Instant::now();
        let late_hub = async {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            scripted_hub_with(key.clone(), at, 2, vec![code(), approved()]).await
        };
        let ((outcome, shown, _), (router, _)) =
            tokio::join!(pair(hub, options(false, Duration::from_secs(30))), late_hub);
        let _ = router.shutdown().await;
        assert!(outcome.is_ok(), "{outcome:?}");
        assert_eq!(shown, ["WDJB-MJHT"]);
        assert!(started.elapsed() >= Duration::from_millis(1500));

        // A hub that never answers: retried with backoff, then a plain failure at the bound.
        let nowhere = EndpointAddr::new(SecretKey::generate().public());
        let (outcome, _, waits) = pair(nowhere, options(false, Duration::from_secs(1))).await;
        assert!(waits >= 2, "retried {waits} times");
        let e = outcome.expect_err("no hub");
        assert!(
            matches!(e, PairError::Connect(_)) && e.to_string().contains("kept trying for 1 s"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn a_hub_sharing_no_pairing_version_fails_at_once_saying_which_to_update() {
        let any = "127.0.0.1:0".parse().expect("addr");
        let (router, hub) = scripted_hub(any, 9, vec![approved()]).await;
        let started = Instant::now();
        let (outcome, _, waits) = pair(hub, options(false, Duration::from_secs(30))).await;
        let _ = router.shutdown().await;
        let e = outcome.expect_err("no shared version");
        assert!(matches!(e, PairError::Version(_)), "{e}");
        assert!(e.to_string().contains("update"), "{e}");
        assert_eq!(waits, 0);
        assert!(started.elapsed() < Duration::from_secs(15));
    }
}

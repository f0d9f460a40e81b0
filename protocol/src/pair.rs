//! Messages of the `hearth/pair/N` protocol (device-code pairing, RFC 8628 in spirit).
//!
//! 1. The node sends [`PairRequest::Start`]; the hub answers [`PairResponse::Code`] with a
//!    user code such as `WDJB-MJHT`, which the node shows to its owner.
//! 2. The owner approves (or denies) that code on the hub.
//! 3. The node sends [`PairRequest::Poll`] about once a second; the hub answers
//!    [`PairResponse::Pending`] until the decision, then [`PairResponse::Approved`]
//!    (the node pins the hub's id, which the QUIC handshake authenticated),
//!    [`PairResponse::Denied`] or [`PairResponse::Expired`].
//!
//! Versions: `hearth/pair/2` differs from `/1` only in the approval, which is
//! [`PairResponse::ApprovedWithRelay`] (it also carries the hub's relay, so a device
//! paired on the LAN can reach its hub away from home). That variant comes last, so
//! every message of `/1` keeps its bytes; a hub sends it only on `/2`.

use serde::{Deserialize, Serialize};

/// Node → hub.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PairRequest {
    /// Ask for a user code.
    Start {
        /// How the device calls itself ("Ada's laptop").
        device_name: String,
        /// The one-time secret of a pair ticket, when the hub was reached through one.
        ticket_secret: Option<[u8; 16]>,
    },
    /// Ask for the owner's decision.
    Poll,
}

/// Hub → node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PairResponse {
    /// Show this code to the owner.
    Code {
        /// `XXXX-XXXX` from an alphabet without look-alikes.
        user_code: String,
        /// Seconds until the code expires.
        expires_in_secs: u32,
    },
    /// No decision yet.
    Pending,
    /// Approved: this device may now replicate.
    Approved {
        /// The hub's display name.
        hub_name: String,
        /// The project subtree this device may see, if scoped.
        scope: Option<String>,
    },
    /// The owner denied the request.
    Denied,
    /// The code expired before the owner decided.
    Expired,
    /// Too many attempts; try again later.
    Throttled {
        /// Seconds to wait.
        retry_after_secs: u32,
    },
    /// The request was refused for this reason.
    Refused {
        /// Why, for the user.
        reason: String,
    },
    /// Approved (`hearth/pair/2`): as [`PairResponse::Approved`], plus where the hub can
    /// be reached away from home.
    ApprovedWithRelay {
        /// The hub's display name.
        hub_name: String,
        /// The project subtree this device may see, if scoped.
        scope: Option<String>,
        /// The URL of the hub's iroh relay, if it uses one: the device dials the hub
        /// through it whenever no direct path works.
        relay: Option<String>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{decode_frame, encode_frame};

    #[test]
    fn pair_1_messages_keep_their_bytes_and_pair_2_approval_round_trips() {
        // Postcard numbers enum variants in order: `Approved` stays variant 2, so a
        // `hearth/pair/1` peer reads every message it knew before `/2` existed.
        let v1 = PairResponse::Approved {
            hub_name: "h".into(),
            scope: None,
        };
        let bytes = postcard::to_allocvec(&v1).expect("encode");
        assert_eq!(bytes, [2, 1, b'h', 0]);
        let v2 = PairResponse::ApprovedWithRelay {
            hub_name: "h".into(),
            scope: Some("p".into()),
            relay: Some("http://10.0.0.1:3340/".into()),
        };
        assert_eq!(postcard::to_allocvec(&v2).expect("encode")[0], 7);
        let frame = encode_frame(&v2).expect("frame");
        assert_eq!(
            decode_frame::<PairResponse>(&frame)
                .expect("decode")
                .expect("whole frame")
                .0,
            v2
        );
    }
}

//! Messages of the `hearth/pair/1` protocol (device-code pairing, RFC 8628 in spirit).
//!
//! 1. The node sends [`PairRequest::Start`]; the hub answers [`PairResponse::Code`] with a
//!    user code such as `WDJB-MJHT`, which the node shows to its owner.
//! 2. The owner approves (or denies) that code on the hub.
//! 3. The node sends [`PairRequest::Poll`] about once a second; the hub answers
//!    [`PairResponse::Pending`] until the decision, then [`PairResponse::Approved`]
//!    (the node pins the hub's id, which the QUIC handshake authenticated),
//!    [`PairResponse::Denied`] or [`PairResponse::Expired`].

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
}

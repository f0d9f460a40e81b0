//! Hearth's wire format: ALPN identifiers, versioned length-prefixed frames and the
//! messages they carry.
//!
//! This crate owns every byte that crosses a connection between a hub and a node. It is
//! pure: no I/O, no tokio, no clocks. Decoding any input returns a value or an error and
//! never panics (property-tested in `frame`).
//!
//! Architecture Invariant: any change to the encoding of a message bumps
//! [`PROTOCOL_VERSION`] and the ALPN suffix.

#![deny(missing_docs)]

mod frame;
mod messages;
mod pair;

pub use frame::{
    decode_frame, encode_frame, frame_len, FrameError, FRAME_HEADER_LEN, MAX_FRAME, PAIR_MAX_FRAME,
};
pub use messages::{Digest, DocEntry, DocId, DocIndex, DocSnapshot, Hash, SyncMessage};
pub use pair::{PairRequest, PairResponse};

/// Version byte carried in every frame; peers refuse frames of another version.
pub const PROTOCOL_VERSION: u8 = 1;

/// ALPN for document replication between an allowlisted node and its hub.
pub const ALPN_SYNC: &[u8] = b"hearth/sync/1";
/// ALPN for device pairing; open to unpaired devices, which may do nothing else.
pub const ALPN_PAIR: &[u8] = b"hearth/pair/1";
/// ALPN for chat relayed from node UIs, events and device administration.
pub const ALPN_RPC: &[u8] = b"hearth/rpc/1";

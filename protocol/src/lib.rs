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
mod rpc;
mod versions;

pub use frame::{
    decode_frame, encode_frame, frame_len, FrameError, FRAME_HEADER_LEN, MAX_FRAME, PAIR_MAX_FRAME,
};
pub use messages::{Digest, DocEntry, DocId, DocIndex, DocSnapshot, Hash, SyncMessage};
pub use pair::{PairRequest, PairResponse};
pub use rpc::{
    decode_request, decode_response, encode_request, encode_response, RpcError, RpcMethod,
    RpcRequest, RpcResponse, RPC_MAX_BODY, RPC_MAX_CHUNK, RPC_MAX_CONTENT_TYPE, RPC_MAX_FRAME,
    RPC_MAX_PATH,
};
pub use versions::{
    alpn, alpn_version, alpns, compare, mismatch_message, Compat, Family, VersionInfo,
    VersionInfoError, ALPN_VERSIONS, MAX_VERSION_INFO, PAIR_VERSIONS, RPC_VERSIONS, SYNC_VERSIONS,
};

/// Version byte carried in every frame; peers refuse frames of another version.
pub const PROTOCOL_VERSION: u8 = 1;

/// ALPN for document replication between an allowlisted node and its hub, version 1
/// (see [`SYNC_VERSIONS`] and [`alpns`] for every version a build speaks).
pub const ALPN_SYNC: &[u8] = b"hearth/sync/1";
/// ALPN for device pairing, version 1; open to unpaired devices, which may do nothing
/// else (see [`PAIR_VERSIONS`]).
pub const ALPN_PAIR: &[u8] = b"hearth/pair/1";
/// ALPN for the requests a node relays from its UI to its hub's API (chat, approvals,
/// history, usage, settings, devices, events), version 1; see [`RpcRequest`] and
/// [`RPC_VERSIONS`].
pub const ALPN_RPC: &[u8] = b"hearth/rpc/1";

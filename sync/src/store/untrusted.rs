//! Automerge work on bytes from peers: bounded before loading, and a panic inside
//! Automerge becomes an error for that one document.
//!
//! Every peer byte that reaches Automerge passes through here; nothing here touches
//! SQLite or the cache.

use std::panic::{catch_unwind, AssertUnwindSafe};

use super::*;
use crate::bounds::{check_automerge, check_sync_message, Limits};

fn refused(id: &DocId, reason: impl std::fmt::Display) -> StoreError {
    StoreError::PeerData {
        id: *id,
        reason: reason.to_string(),
    }
}

/// Runs `f`, turning a panic into an error naming the document.
pub(super) fn no_panic<T>(
    id: &DocId,
    f: impl FnOnce() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        tracing::error!(%id, "automerge panicked on a peer's data");
        Err(refused(id, "automerge panicked on this data"))
    })
}

/// Loads a whole document sent by a peer.
pub(super) fn load_untrusted(id: &DocId, bytes: &[u8]) -> Result<AutoCommit, StoreError> {
    check_automerge(bytes, &Limits::PEER).map_err(|e| refused(id, e))?;
    no_panic(id, || AutoCommit::load(bytes).map_err(|e| refused(id, e)))
}

/// Merges a peer's saved document or changes into `doc`.
pub(super) fn merge_untrusted(
    id: &DocId,
    doc: &mut AutoCommit,
    bytes: &[u8],
) -> Result<(), StoreError> {
    check_automerge(bytes, &Limits::PEER).map_err(|e| refused(id, e))?;
    no_panic(id, || {
        doc.load_incremental(bytes).map_err(|e| refused(id, e))?;
        Ok(())
    })
}

/// Applies a peer's Automerge sync message to `doc`.
pub(super) fn receive_untrusted(
    id: &DocId,
    doc: &mut AutoCommit,
    state: &mut sync::State,
    message: sync::Message,
) -> Result<(), StoreError> {
    check_sync_message(&message, &Limits::PEER).map_err(|e| refused(id, e))?;
    no_panic(id, || {
        doc.sync()
            .receive_sync_message(state, message)
            .map_err(|e| refused(id, e))
    })
}

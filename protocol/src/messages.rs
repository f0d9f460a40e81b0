//! Messages of the `hearth/sync/1` protocol.
//!
//! A session runs in three phases (see `docs/PROTOCOL.md`):
//! 1. summary: both sides send [`SyncMessage::Hello`] with a digest over their whole
//!    document set; equal digests end the phase at once. Otherwise both send
//!    [`SyncMessage::Buckets`] (256 bucket digests) and then [`SyncMessage::Entries`]
//!    for the buckets that differ (always sent, maybe empty);
//! 2. catch-up: documents one side lacks travel whole as [`SyncMessage::Snapshots`];
//!    documents both hold with different heads run Automerge's sync protocol in
//!    [`SyncMessage::Sync`] messages; [`SyncMessage::CatchUpDone`] tells the peer that
//!    this side has sent everything it planned;
//! 3. live: [`SyncMessage::Sync`] messages as documents change.
//!
//! These types carry no behaviour; the sync crate converts them to and from its own.

use serde::{Deserialize, Serialize};

/// A document id: 16 random bytes (a UUID v4).
pub type DocId = [u8; 16];
/// A truncated SHA-256 digest.
pub type Digest = [u8; 16];
/// An Automerge change hash.
pub type Hash = [u8; 32];

/// One document in a bucket listing: its id and the digest of its heads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocEntry {
    /// Document id.
    pub id: DocId,
    /// Digest of the document's sorted heads.
    pub digest: Digest,
}

/// The derived, queryable fields of a document, computed by the sender so that the
/// receiver can list a document it received whole without loading it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocIndex {
    /// Entity kind: `note`, `task`, `contact`, `skill` or `project`.
    pub kind: String,
    /// Project id (hex), if the entity belongs to one.
    pub project: Option<String>,
    /// Title or name.
    pub title: String,
    /// Task status.
    pub status: Option<String>,
    /// Task due date.
    pub due: Option<String>,
    /// Parent task or project id (hex).
    pub parent: Option<String>,
    /// Whether the document is a tombstone.
    pub deleted: bool,
    /// Last update, milliseconds since the Unix epoch.
    pub updated_at: i64,
}

/// A whole document, sent to a peer that lacks it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocSnapshot {
    /// Document id.
    pub id: DocId,
    /// The document's heads, so the receiver can summarise it without loading it.
    pub heads: Vec<Hash>,
    /// `Automerge::save()` output.
    pub bytes: Vec<u8>,
    /// Derived fields.
    pub index: DocIndex,
}

/// A message of `hearth/sync/1`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SyncMessage {
    /// Opens a session: the digest over every document and the number of documents.
    Hello {
        /// Digest over the 256 bucket digests.
        root: Digest,
        /// Number of documents the sender holds.
        docs: u64,
    },
    /// The digest of each of the 256 buckets (bucket = first byte of the document id).
    Buckets {
        /// One digest per bucket, in bucket order.
        digests: Vec<Digest>,
    },
    /// Every document of the buckets whose digests differ.
    Entries {
        /// The buckets listed (including those where the sender holds nothing).
        buckets: Vec<u8>,
        /// Entries sorted by id.
        entries: Vec<DocEntry>,
    },
    /// Whole documents the peer lacks.
    Snapshots {
        /// The documents.
        docs: Vec<DocSnapshot>,
    },
    /// One Automerge sync message for one document.
    Sync {
        /// Document id.
        doc: DocId,
        /// `automerge::sync::Message::encode()` output.
        message: Vec<u8>,
    },
    /// The sender has sent every snapshot and first sync message it planned.
    CatchUpDone,
}

//! Error types of the store and of the replication session.

use crate::entity::{DocId, Kind};

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// SQLite failed.
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// Automerge refused a document or change.
    #[error("automerge error: {0}")]
    Automerge(#[from] automerge::AutomergeError),
    /// A sync message from a peer could not be decoded.
    #[error("invalid sync message: {0}")]
    SyncMessage(String),
    /// No document with this id (or prefix).
    #[error("no {kind} with id {id}")]
    NotFound {
        /// The kind looked for.
        kind: &'static str,
        /// The id or prefix asked for.
        id: String,
    },
    /// An id prefix matched more than one document.
    #[error("id prefix {0} is ambiguous")]
    Ambiguous(String),
    /// The document exists but is another kind.
    #[error("document {id} is a {found}, not a {expected}")]
    WrongKind {
        /// The document.
        id: DocId,
        /// The kind asked for.
        expected: Kind,
        /// The kind stored.
        found: String,
    },
    /// The document was deleted; tombstones accept no edits.
    #[error("{kind} {id} was deleted")]
    Deleted {
        /// Its kind.
        kind: Kind,
        /// The document.
        id: DocId,
    },
    /// A value failed validation.
    #[error("invalid {field}: {reason}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// Stored bytes could not be read back.
    #[error("document {id} is corrupt: {reason}")]
    Corrupt {
        /// The document.
        id: DocId,
        /// What failed.
        reason: String,
    },
    /// A scoped peer touched a document outside its project subtree.
    #[error("document {id} is outside this device's scope")]
    OutOfScope {
        /// The document.
        id: DocId,
    },
    /// A new document from a scoped peer whose place depends on a document this replica
    /// does not hold yet (a project's placement, a placement's parent, an entity's
    /// project): neither stored nor refused, it waits in memory for that document while
    /// its session lasts. Not a fault of the session.
    #[error("document {id} from a scoped peer waits for document {awaiting}")]
    Waiting {
        /// The document.
        id: DocId,
        /// The document it waits for.
        awaiting: DocId,
    },
    /// A peer's document or change was refused before or while loading: over a size
    /// limit, malformed, or it made Automerge fail. Only this document is affected.
    #[error("document {id} from a peer was refused: {reason}")]
    PeerData {
        /// The document.
        id: DocId,
        /// What was wrong.
        reason: String,
    },
    /// The database was written by a newer Hearth: opening it could lose data.
    #[error("the database has schema version {found}, newer than the {known} this build knows: update Hearth")]
    SchemaTooNew {
        /// Version found in the file.
        found: i64,
        /// Highest version this build knows.
        known: i64,
    },
    /// A blocking task panicked or was cancelled.
    #[error("store task failed: {0}")]
    Task(String),
    /// An edit named document heads this replica does not have (yet): the client's
    /// version is unknown here, so its positions cannot be placed.
    #[error("document {id} has no version with heads {heads}")]
    UnknownHeads {
        /// The document.
        id: DocId,
        /// The heads asked for, hex, comma-separated.
        heads: String,
    },
}

impl StoreError {
    /// Whether the failure concerns one document only (its content, its scope, a peer's
    /// claim about it), so that a session refuses that document and carries on with the
    /// others; `false` for failures of the store itself.
    pub fn is_document_fault(&self) -> bool {
        !matches!(
            self,
            Self::Sqlite(_) | Self::Task(_) | Self::SchemaTooNew { .. }
        )
    }

    pub(crate) fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        Self::Invalid {
            field,
            reason: reason.into(),
        }
    }
}

/// Why a replication session ended.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The byte stream failed.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// The peer sent a frame that does not decode.
    #[error("bad frame from peer: {0}")]
    Frame(#[from] hearth_protocol::FrameError),
    /// The peer's stream ended in the middle of a frame.
    #[error("peer closed the stream in the middle of a frame ({got} of {want} bytes)")]
    Truncated {
        /// Bytes received.
        got: usize,
        /// Bytes announced.
        want: usize,
    },
    /// The peer broke the protocol's rules.
    #[error("protocol violation: {0}")]
    Protocol(String),
    /// The local store failed.
    #[error("store error: {0}")]
    Store(#[from] StoreError),
}

impl SessionError {
    /// Whether reconnecting may help (network trouble) or not (a peer or data bug).
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Io(_))
    }
}

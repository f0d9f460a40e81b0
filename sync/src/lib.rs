//! hearth-sync: the CRDT document store and the replication session.
//!
//! - [`bounds`]: limits on Automerge bytes from peers, checked before Automerge loads them.
//! - [`entity`]: the typed entities (project, note, task, contact, skill) and how each
//!   maps onto a plain Automerge document (schema in `docs/SCHEMA.md`).
//! - [`placement`]: a project's place in the tree, kept in a document of its own so a
//!   device scoped to a project never learns the id of that project's parent.
//! - [`store`]: [`DocumentStore`], the one write API for every writer (API, agent, UI,
//!   CLI, remote peers), on SQLite: snapshot plus incremental chunks per document, derived
//!   tables and FTS5 updated in the same transaction, a change feed.
//! - [`summary`]: pure set-digest functions used to skip unchanged documents wholesale.
//! - [`session`]: the replication session over any pair of byte streams.
//!
//! Architecture Invariant: this crate knows nothing of iroh, HTTP or the CLI. A change is
//! committed to SQLite before it is acknowledged to a peer or announced on the feed.

pub mod bounds;
pub mod entity;
mod error;
pub mod placement;
pub mod session;
pub mod store;
pub mod summary;

pub use entity::{
    Contact, ContactPatch, Details, DocId, Entity, Kind, Note, NotePatch, Patch, Project,
    ProjectPatch, Record, Skill, SkillPatch, Task, TaskPatch, TaskStatus, TextEdit, TextSplice,
};
pub use error::{SessionError, StoreError};
pub use placement::placement_id;
pub use session::{read_frame, run_session, SessionConfig, SessionEvent, SessionStats};

pub use store::{
    DocChange, DocumentStore, Filter, Origin, Page, PeerTag, Scope, SearchHit, Summary, Versioned,
};

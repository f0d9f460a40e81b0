//! The `hearth` subcommands, one file per group. Document commands write the local
//! replica directly through the store; a running `hearth run` notices and replicates.

pub(crate) mod note;
pub(crate) mod run;
pub(crate) mod task;

use std::path::Path;

use anyhow::Context;
use hearth_sync::{DocId, DocumentStore, Kind};

pub(crate) fn open_store(home: &Path) -> anyhow::Result<DocumentStore> {
    std::fs::create_dir_all(home).with_context(|| format!("creating {}", home.display()))?;
    DocumentStore::open(home.join("hearth.db"))
        .with_context(|| format!("opening the replica in {}", home.display()))
}

/// Accepts a full id or a unique prefix of at least 4 hex digits.
pub(crate) fn resolve(store: &DocumentStore, kind: Kind, id: &str) -> anyhow::Result<DocId> {
    if let Ok(full) = id.parse::<DocId>() {
        return Ok(full);
    }
    Ok(store.resolve_blocking(kind, id)?)
}

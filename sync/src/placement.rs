//! Placements: where a project hangs in the project tree, kept out of its own document.
//!
//! A project's parent edge lives in a document of its own, the project's placement:
//! `{schema, kind: "placement", project, parent}`. Its id is derived from the project's
//! id ([`placement_id`]: SHA-256 over a domain tag and the id, truncated to 16 bytes), so
//! every replica names the same placement for the same project, and two replicas that
//! place a project concurrently write one document whose `parent` merges like any field
//! (last writer wins). A top-level project needs no placement (none means "at the top",
//! unless an older document says otherwise, below).
//!
//! Why: a device scoped to project R must learn no id outside R's subtree. It receives
//! R's document and the placements of projects strictly inside the subtree (their parent
//! is a member), never R's own placement, so R's parent's id reaches it neither as a
//! current value nor in any document's history.
//!
//! Projects written before placements existed carry `parent` in their own document
//! ("legacy"). Readers take the placement when the replica holds one, else that field;
//! the store writes placements for such edges when it opens. A legacy document keeps the
//! old field in its history forever: a device scoped below such a project still sees it.
//!
//! This module never touches SQLite; it reads and writes Automerge documents only.

use automerge::transaction::Transactable;
use automerge::{AutoCommit, ScalarValue, ROOT};
use sha2::{Digest as _, Sha256};

use crate::entity::{read_id, Derived, DocId, SCHEMA};
use crate::error::StoreError;

/// The `kind` of a placement document.
pub(crate) const PLACEMENT_KIND: &str = "placement";

/// Domain tag of placement ids: no other id is derived this way.
const ID_TAG: &[u8] = b"hearth/placement/1\0";

/// The id of the placement document of project `project`: the same on every replica.
pub fn placement_id(project: DocId) -> DocId {
    let mut h = Sha256::new();
    h.update(ID_TAG);
    h.update(project.0);
    let full = h.finalize();
    let mut id = [0u8; 16];
    id.copy_from_slice(&full[..16]);
    DocId(id)
}

/// What a placement document says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Placement {
    /// The project placed.
    pub(crate) project: Option<DocId>,
    /// Its parent; `None` at the top level.
    pub(crate) parent: Option<DocId>,
}

impl Placement {
    /// Reads a placement document; missing or malformed ids read as `None`.
    pub(crate) fn read(doc: &AutoCommit) -> Self {
        Self {
            project: read_id(doc, "project"),
            parent: read_id(doc, "parent"),
        }
    }

    /// Reads placement document `id` and checks that it places the project its id is
    /// derived from: a placement can never be made to speak for another project.
    pub(crate) fn read_checked(id: &DocId, doc: &AutoCommit) -> Result<Self, StoreError> {
        let placement = Self::read(doc);
        match placement.project {
            Some(project) if placement_id(project) == *id => Ok(placement),
            _ => Err(StoreError::invalid(
                "project",
                format!("placement {id} does not place the project its id belongs to"),
            )),
        }
    }

    /// The derived row: `project` is the project placed, `parent` its parent.
    pub(crate) fn derive(&self) -> Derived {
        Derived {
            project: self.project,
            parent: self.parent,
            ..Derived::default()
        }
    }
}

/// A new placement document putting `project` under `parent`.
pub(crate) fn new_placement(
    project: DocId,
    parent: Option<DocId>,
) -> Result<AutoCommit, StoreError> {
    let mut doc = AutoCommit::new();
    doc.put(ROOT, "schema", SCHEMA)?;
    doc.put(ROOT, "kind", PLACEMENT_KIND)?;
    doc.put(ROOT, "project", project.to_string())?;
    set_parent(&mut doc, parent)?;
    doc.commit();
    Ok(doc)
}

/// Moves the project of placement `doc` under `parent`.
pub(crate) fn set_parent(doc: &mut AutoCommit, parent: Option<DocId>) -> Result<(), StoreError> {
    match parent {
        Some(p) => doc.put(ROOT, "parent", p.to_string())?,
        None => doc.put(ROOT, "parent", ScalarValue::Null)?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_ids_are_stable_and_distinct_from_their_project() {
        let p = DocId([7; 16]);
        assert_eq!(placement_id(p), placement_id(p));
        assert_ne!(placement_id(p), p);
        assert_ne!(placement_id(p), placement_id(DocId([8; 16])));
        // Pinned: every replica and every build must derive the same id.
        assert_eq!(
            placement_id(DocId([0; 16])).to_string(),
            "a258c1794b10c39cb9611c050a434c7a"
        );
    }

    #[test]
    fn a_placement_speaks_only_for_its_own_project() {
        let project = DocId([1; 16]);
        let doc = new_placement(project, Some(DocId([2; 16]))).expect("placement");
        let read = Placement::read_checked(&placement_id(project), &doc).expect("checked");
        assert_eq!(read.project, Some(project));
        assert_eq!(read.parent, Some(DocId([2; 16])));
        assert!(Placement::read_checked(&placement_id(DocId([3; 16])), &doc).is_err());
    }
}

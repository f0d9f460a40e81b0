//! Placements in the store: what kind a stored document is, a project's effective parent,
//! writing placements inside the one write path, and placing the projects written before
//! placements existed.
//!
//! A project's row in `entities` carries its effective parent: its placement's when this
//! replica holds a verified one, else the `parent` field of its own document (legacy).
//! Every write of either document keeps that row current in the same transaction
//! (`write::write_index`). This module never lets a placement speak for another project
//! than the one its id is derived from.

use super::*;
use crate::entity::read_id;
use crate::placement::{new_placement, placement_id, set_parent, Placement, PLACEMENT_KIND};

/// What a stored document is: an entity, or the placement of a project.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DocKind {
    /// One of the entity kinds.
    Entity(Kind),
    /// A project's placement (`crate::placement`).
    Placement,
}

impl DocKind {
    pub(super) fn parse(s: &str) -> Option<Self> {
        if s == PLACEMENT_KIND {
            Some(Self::Placement)
        } else {
            s.parse().ok().map(Self::Entity)
        }
    }

    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Entity(kind) => kind.as_str(),
            Self::Placement => PLACEMENT_KIND,
        }
    }

    /// The derived projection of a document of this kind.
    pub(super) fn derive(self, doc: &AutoCommit) -> Derived {
        match self {
            Self::Entity(kind) => derive_any(kind, doc),
            Self::Placement => Placement::read(doc).derive(),
        }
    }
}

/// The kind of a document a peer sent, after the checks every peer's document passes
/// whatever its scope: a known kind, a valid project name, a placement that places the
/// project its id is derived from.
pub(super) fn peer_doc_kind(id: &DocId, doc: &AutoCommit) -> Result<DocKind, StoreError> {
    let kind = read_str(doc, "kind")
        .and_then(|k| DocKind::parse(&k))
        .ok_or_else(|| StoreError::PeerData {
            id: *id,
            reason: "no known kind".into(),
        })?;
    match kind {
        DocKind::Entity(Kind::Project) => {
            validate_slug("name", &read_str(doc, "name").unwrap_or_default())?
        }
        DocKind::Placement => {
            Placement::read_checked(id, doc)?;
        }
        DocKind::Entity(_) => {}
    }
    Ok(kind)
}

/// The project a placement document of kind `kind` places, for announcing it with its
/// placement (its place in the tree moved); `None` for any other document.
pub(super) fn placed_project(kind: &str, doc: &AutoCommit) -> Option<DocId> {
    (kind == PLACEMENT_KIND)
        .then(|| Placement::read(doc).project)
        .flatten()
}

/// The parent that project `project`'s placement names, if this replica holds a verified
/// placement for it: `Some(None)` for a placement at the top level.
pub(super) fn placed_parent(
    conn: &Connection,
    project: &DocId,
) -> Result<Option<Option<DocId>>, StoreError> {
    let parent: Option<Option<String>> = conn
        .prepare_cached("SELECT parent FROM entities WHERE id = ?1 AND kind = 'placement'")?
        .query_row([&placement_id(*project).0[..]], |r| r.get(0))
        .optional()?;
    Ok(parent.map(opt_id))
}

/// The effective parent of project document `doc` (`id`): its placement's, else its own
/// legacy field.
pub(super) fn project_parent(
    conn: &Connection,
    id: &DocId,
    doc: &AutoCommit,
) -> Result<Option<DocId>, StoreError> {
    Ok(placed_parent(conn, id)?.unwrap_or_else(|| read_id(doc, "parent")))
}

/// Puts project `project` under `parent` (`None`: the top level) inside the caller's
/// transaction, after the project's own row has been written: edits its placement, or
/// creates one, when that moves the project. Refuses a cycle; every ancestor must be a
/// live project. Returns the placement's id and the cache entry to put back after the
/// commit, or `None` when the project already stands there.
pub(super) fn place(
    tx: &Transaction<'_>,
    cache: &mut LruCache<DocId, Cached>,
    writer: i64,
    project: &DocId,
    parent: Option<DocId>,
) -> Result<Option<(DocId, Cached)>, StoreError> {
    let current: Option<String> = tx.query_row(
        "SELECT parent FROM entities WHERE id = ?1",
        [&project.0[..]],
        |r| r.get(0),
    )?;
    if opt_id(current) == parent {
        return Ok(None);
    }
    if let Some(parent) = parent {
        refuse_cycle(tx, project, parent, true)?;
    }
    let id = placement_id(*project);
    if doc_row(tx, &id)?.is_some() {
        let written = write_in(tx, cache, writer, &id, |_, _, doc| set_parent(doc, parent))?;
        return Ok(written.map(|w| (id, w.entry)));
    }
    let mut doc = new_placement(*project, parent)?;
    insert_new(tx, writer, &id, PLACEMENT_KIND, &mut doc)?;
    Ok(Some((id, Cached::inserted(doc))))
}

impl DocumentStore {
    /// Writes a placement for every project whose parent is only in its own document
    /// (written before placements existed) when this replica holds that parent, so that
    /// every later move edits the placement. Runs when the store opens; finds nothing to
    /// do once done. A replica scoped below such a project does not hold the parent of
    /// its scope's root and leaves that edge alone: the hub places it.
    pub(super) fn place_legacy_projects(&self) -> Result<usize, StoreError> {
        let writer = self.shared.writer;
        let mut inner = self.lock();
        let Inner { conn, cache } = &mut *inner;
        if legacy_edges(conn)?.is_empty() {
            // The usual case: no write transaction at all.
            return Ok(0);
        }
        let tx = begin(conn, Durability::Full)?;
        let mut placed = Vec::new();
        for (project, parent) in legacy_edges(&tx)? {
            let mut doc = new_placement(project, Some(parent))?;
            let id = placement_id(project);
            insert_new(&tx, writer, &id, PLACEMENT_KIND, &mut doc)?;
            placed.push((id, doc));
        }
        tx.commit()?;
        let n = placed.len();
        for (id, doc) in placed {
            cache.put(id, Cached::inserted(doc));
        }
        if n > 0 {
            tracing::info!(projects = n, "placed projects written before placements");
        }
        Ok(n)
    }
}

/// The projects whose parent this replica knows only from their own document, with that
/// parent, when the parent is a project this replica holds.
fn legacy_edges(conn: &Connection) -> Result<Vec<(DocId, DocId)>, StoreError> {
    let rows: Vec<(DocId, Option<DocId>)> = conn
        .prepare_cached(
            "SELECT id, parent FROM entities WHERE kind = 'project' AND parent IS NOT NULL",
        )?
        .query_map([], |r| Ok((id_from_sql(r.get(0)?)?, opt_id(r.get(1)?))))?
        .collect::<Result<_, _>>()?;
    let mut edges = Vec::new();
    for (project, parent) in rows {
        let Some(parent) = parent else { continue };
        let parent_held: bool = conn.query_row(
            "SELECT EXISTS(SELECT 1 FROM entities WHERE id = ?1 AND kind = 'project')",
            [&parent.0[..]],
            |r| r.get(0),
        )?;
        if parent_held && doc_row(conn, &placement_id(project))?.is_none() {
            edges.push((project, parent));
        }
    }
    Ok(edges)
}

//! Scope: the project subtree a peer or the agent may see, and the checks of every
//! change a peer makes.
//!
//! A device scoped to project R sees R's document, the projects below R with their
//! placements, and the documents of those projects. It never sees R's placement (whose
//! parent lies outside), so it learns no id outside its subtree from the project tree.
//! Never judged on a peer's claims: always on the document's content and this replica's
//! rows.

use super::*;
use crate::entity::read_id;
use crate::placement::{placement_id, Placement, PLACEMENT_KIND};

/// The part of the replica that a device scoped to a project, or the agent invoked in a
/// project, may see: project `root` and every live project below it, the documents
/// that belong to those projects, and the placements of the projects below `root`.
/// Every scope check (sessions, imports, agent tools) goes through this one type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    root: DocId,
    projects: HashSet<DocId>,
}

impl Scope {
    /// Computes the subtree of `root` from the derived project rows (a small table),
    /// whose parents are the effective ones (placement first).
    pub(super) fn load(conn: &Connection, root: DocId) -> Result<Self, StoreError> {
        let mut stmt = conn.prepare_cached(
            "SELECT id, parent FROM entities WHERE kind = 'project' AND deleted = 0",
        )?;
        let rows: Vec<(DocId, Option<DocId>)> = stmt
            .query_map([], |r| Ok((id_from_sql(r.get(0)?)?, opt_id(r.get(1)?))))?
            .collect::<Result<_, _>>()?;
        let mut projects = HashSet::from([root]);
        // Fixed point: add children of members. A cycle among projects (possible after
        // concurrent moves on two replicas) only stops the growth, never loops.
        loop {
            let before = projects.len();
            for (id, parent) in &rows {
                if parent.is_some_and(|p| projects.contains(&p)) {
                    projects.insert(*id);
                }
            }
            if projects.len() == before {
                return Ok(Self { root, projects });
            }
        }
    }

    /// Counts project `project`, just stored under a member, as a member for the rest
    /// of a batch.
    pub(super) fn admit(&mut self, project: DocId) {
        self.projects.insert(project);
    }

    /// The project the scope hangs from.
    pub fn root(&self) -> DocId {
        self.root
    }

    /// Whether `project` is the root or below it.
    pub fn contains_project(&self, project: &DocId) -> bool {
        self.projects.contains(project)
    }

    /// The projects of the subtree, root included.
    pub fn projects(&self) -> &HashSet<DocId> {
        &self.projects
    }

    /// Whether a document with these fields lies inside the scope: the root itself, a
    /// project whose parent is a member, the placement of a project other than the root
    /// whose parent is a member (`project` is the project placed), or an entity whose
    /// project is a member.
    pub fn allows(
        &self,
        kind: &str,
        id: &DocId,
        project: Option<DocId>,
        parent: Option<DocId>,
    ) -> bool {
        let member = |p: Option<DocId>| p.is_some_and(|p| self.projects.contains(&p));
        if kind == Kind::Project.as_str() {
            *id == self.root || member(parent)
        } else if kind == PLACEMENT_KIND {
            project != Some(self.root) && member(parent)
        } else {
            member(project)
        }
    }

    /// Whether the row of `entities` with these text columns lies inside the scope.
    fn allows_row(
        &self,
        kind: &str,
        id: &DocId,
        project: Option<String>,
        parent: Option<String>,
    ) -> bool {
        self.allows(kind, id, opt_id(project), opt_id(parent))
    }
}

/// Where a document lies, read from its content and this replica's rows.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Site {
    /// A project's name (checked for renames of a scope's root).
    name: Option<String>,
    /// The project of an entity; the project placed, for a placement.
    project: Option<DocId>,
    /// A project's effective parent; a placement's parent; a task's parent task.
    parent: Option<DocId>,
}

fn site(conn: &Connection, id: &DocId, kind: &str, doc: &AutoCommit) -> Result<Site, StoreError> {
    Ok(if kind == Kind::Project.as_str() {
        Site {
            name: read_str(doc, "name"),
            project: None,
            parent: project_parent(conn, id, doc)?,
        }
    } else if kind == PLACEMENT_KIND {
        let p = Placement::read(doc);
        Site {
            name: None,
            project: p.project,
            parent: p.parent,
        }
    } else {
        Site {
            name: None,
            project: read_id(doc, "project"),
            parent: read_id(doc, "parent"),
        }
    })
}

/// Checks a change that a peer is about to make to stored document `id` of kind `kind`:
/// a scoped peer may touch only documents inside its scope and must leave them there,
/// may neither rename nor move its scope's root (nor touch the root's placement), and may
/// not make a project its own ancestor; a project name from any peer is validated like a
/// local one, and a placement from any peer must keep placing its own project.
///
/// `apply` makes the change on `doc`; the caller rolls the document back (evicts it from
/// the cache) when this returns an error. Returns the project placed when `id` is a
/// placement, to be announced with it.
pub(super) fn guard_peer_change(
    conn: &Connection,
    id: &DocId,
    kind: &str,
    doc: &mut AutoCommit,
    scope: Option<&Scope>,
    apply: impl FnOnce(&mut AutoCommit) -> Result<(), StoreError>,
) -> Result<Option<DocId>, StoreError> {
    let out_of_scope = || StoreError::OutOfScope { id: *id };
    let inside = |s: &Scope, site: &Site| s.allows(kind, id, site.project, site.parent);
    let before = site(conn, id, kind, doc)?;
    if scope.is_some_and(|s| !inside(s, &before)) {
        return Err(out_of_scope());
    }
    apply(doc)?;
    let after = site(conn, id, kind, doc)?;
    let is_project = kind == Kind::Project.as_str();
    if is_project && before.name != after.name {
        validate_slug("name", after.name.as_deref().unwrap_or_default())?;
    }
    let placed = if kind == PLACEMENT_KIND {
        Placement::read_checked(id, doc)?.project
    } else {
        None
    };
    let Some(scope) = scope else {
        return Ok(placed);
    };
    if !inside(scope, &after) {
        return Err(out_of_scope());
    }
    // The project whose place in the tree this document holds.
    let moved = if is_project { Some(*id) } else { placed };
    if moved == Some(scope.root()) && before != after {
        return Err(StoreError::invalid(
            "project",
            "a device scoped to a project may not rename or move that project",
        ));
    }
    if let (Some(moved), Some(parent)) = (moved, after.parent) {
        if before.parent != after.parent {
            refuse_cycle(conn, &moved, parent, false)?;
        }
    }
    Ok(placed)
}

/// What to do with a document a peer sends that this replica does not hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Store it: it is of this kind and, from a scoped peer, inside the scope.
    Store(DocKind),
    /// From a scoped peer, a document whose place depends on this document, which this
    /// replica does not hold yet: it waits (`waiting`).
    Wait(DocId),
}

/// Judges a document that a peer sends and this replica does not hold, on its content
/// and this replica's rows: the checks of [`peer_doc_kind`] for every peer, and for a
/// scoped peer its place: a project under a member (through its placement, or the legacy
/// field of an older document), the placement of a project other than the root, not
/// held outside the scope, under a member without a cycle, or an entity of a member
/// project. A reference this replica does not hold yet makes it wait; one held outside
/// the scope refuses it.
pub(super) fn judge_new(
    conn: &Connection,
    scope: Option<&Scope>,
    id: &DocId,
    doc: &AutoCommit,
) -> Result<Verdict, StoreError> {
    let kind = peer_doc_kind(id, doc)?;
    let Some(scope) = scope else {
        return Ok(Verdict::Store(kind));
    };
    let out_of_scope = || StoreError::OutOfScope { id: *id };
    let held = |other: &DocId| -> Result<bool, StoreError> {
        Ok(conn
            .prepare_cached("SELECT EXISTS(SELECT 1 FROM entities WHERE id = ?1)")?
            .query_row([&other.0[..]], |r| r.get(0))?)
    };
    // The reference that decides where the document lies, and for a placement the
    // project it places.
    let (deciding, placed) = match kind {
        DocKind::Entity(Kind::Project) if *id == scope.root() => return Ok(Verdict::Store(kind)),
        DocKind::Entity(Kind::Project) => match placed_parent(conn, id)? {
            Some(parent) => (parent, None),
            None => match read_id(doc, "parent") {
                Some(parent) => (Some(parent), None),
                // Not placed yet: a new top-level project unless its placement comes.
                None => return Ok(Verdict::Wait(placement_id(*id))),
            },
        },
        DocKind::Placement => {
            let Placement { project, parent } = Placement::read_checked(id, doc)?;
            let project = project.ok_or_else(out_of_scope)?;
            if project == scope.root() {
                return Err(StoreError::invalid(
                    "project",
                    "a device scoped to a project may not rename or move that project",
                ));
            }
            if held(&project)? && !scope.contains_project(&project) {
                return Err(out_of_scope());
            }
            (parent, Some(project))
        }
        DocKind::Entity(_) => (read_id(doc, "project"), None),
    };
    let Some(deciding) = deciding else {
        return Err(out_of_scope());
    };
    if !scope.contains_project(&deciding) {
        return if held(&deciding)? {
            Err(out_of_scope())
        } else {
            Ok(Verdict::Wait(deciding))
        };
    }
    if let Some(placed) = placed {
        refuse_cycle(conn, &placed, deciding, false)?;
    }
    Ok(Verdict::Store(kind))
}

/// How deep the project tree may go.
pub(super) const MAX_PROJECT_DEPTH: usize = 64;

impl DocumentStore {
    /// The summary a peer scoped to project `scope` may see (everything when `None`).
    /// Scoped summaries are computed from the derived rows, so they cost a scan.
    pub async fn summary_in(&self, scope: Option<DocId>) -> Result<Summary, StoreError> {
        let Some(root) = scope else {
            return self.summary().await;
        };
        self.blocking(move |s| {
            let mut buckets = vec![EMPTY; BUCKETS];
            let mut docs = 0u64;
            for e in s.scoped_entries(&root, None)? {
                xor_into(&mut buckets[e.id[0] as usize], &e.digest);
                docs += 1;
            }
            let root = root_digest(&buckets);
            Ok(Summary {
                buckets,
                root,
                docs,
            })
        })
        .await
    }

    /// [`Self::entries`] restricted to what a peer scoped to `scope` may see.
    pub async fn entries_in(
        &self,
        buckets: Vec<u8>,
        scope: Option<DocId>,
    ) -> Result<Vec<DocEntry>, StoreError> {
        let Some(root) = scope else {
            return self.entries(buckets).await;
        };
        self.blocking(move |s| s.scoped_entries(&root, Some(&buckets)))
            .await
    }

    pub(super) fn scoped_entries(
        &self,
        root: &DocId,
        buckets: Option<&[u8]>,
    ) -> Result<Vec<DocEntry>, StoreError> {
        let inner = self.lock();
        let scope = Scope::load(&inner.conn, *root)?;
        let mut stmt = inner.conn.prepare_cached(
            "SELECT d.id, d.digest, e.kind, e.project, e.parent FROM documents d
             JOIN entities e ON e.id = d.id ORDER BY d.id",
        )?;
        let mut out = Vec::new();
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let id = id_from_sql(r.get(0)?)?;
            if buckets.is_some_and(|b| !b.contains(&id.bucket())) {
                continue;
            }
            let kind: String = r.get(2)?;
            let project: Option<String> = r.get(3)?;
            let parent: Option<String> = r.get(4)?;
            if scope.allows_row(&kind, &id, project, parent) {
                out.push(DocEntry {
                    id: id.0,
                    digest: digest_from_sql(r.get(1)?),
                });
            }
        }
        Ok(out)
    }

    /// The scope hanging from project `root`: what a device scoped to `root`, or the
    /// agent invoked in `root`, may see.
    pub fn scope_blocking(&self, root: DocId) -> Result<Scope, StoreError> {
        Scope::load(&self.lock().conn, root)
    }

    /// Whether document `id` is visible to a peer scoped to `scope`.
    pub async fn in_scope(&self, id: DocId, scope: Option<DocId>) -> Result<bool, StoreError> {
        let Some(root) = scope else {
            return Ok(true);
        };
        self.blocking(move |s| {
            let inner = s.lock();
            let row: Option<(String, Option<String>, Option<String>)> = inner
                .conn
                .query_row(
                    "SELECT kind, project, parent FROM entities WHERE id = ?1",
                    [&id.0[..]],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .optional()?;
            let scope = Scope::load(&inner.conn, root)?;
            Ok(row.is_some_and(|(k, p, par)| scope.allows_row(&k, &id, p, par)))
        })
        .await
    }
}

//! Scope: the project subtree a peer or the agent may see.

use super::*;

/// The part of the replica that a device scoped to a project, or the agent invoked in a
/// project, may see: project `root` and every live project below it, and the documents
/// that belong to those projects. Every scope check (sessions, imports, agent tools) goes
/// through this one type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    root: DocId,
    projects: HashSet<DocId>,
}

impl Scope {
    /// Computes the subtree of `root` from the derived project rows (a small table).
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
    /// project whose parent is a member, or an entity whose project is a member.
    pub fn allows(
        &self,
        kind: &str,
        id: &DocId,
        project: Option<DocId>,
        parent: Option<DocId>,
    ) -> bool {
        if kind == Kind::Project.as_str() {
            *id == self.root || parent.is_some_and(|p| self.projects.contains(&p))
        } else {
            project.is_some_and(|p| self.projects.contains(&p))
        }
    }

    /// [`Self::allows`] judged on a document's content.
    pub(crate) fn allows_doc(&self, doc: &AutoCommit, id: &DocId) -> bool {
        self.allows(
            &read_str(doc, "kind").unwrap_or_default(),
            id,
            read_str(doc, "project").and_then(|p| p.parse().ok()),
            read_str(doc, "parent").and_then(|p| p.parse().ok()),
        )
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

/// Checks a change that a peer is about to make to document `id`: a scoped peer may
/// touch only documents inside its scope and must leave them there, may neither rename
/// nor move its scope's root, and may not make a project its own ancestor; a project
/// name from any peer is validated like a local one.
///
/// `apply` makes the change on `doc`; the caller rolls the document back (evicts it from
/// the cache) when this returns an error.
pub(super) fn guard_peer_change(
    conn: &Connection,
    id: &DocId,
    doc: &mut AutoCommit,
    scope: Option<&Scope>,
    apply: impl FnOnce(&mut AutoCommit) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let out_of_scope = || StoreError::OutOfScope { id: *id };
    let fields = |doc: &AutoCommit| (read_str(doc, "name"), read_str(doc, "parent"));
    let before = fields(doc);
    if scope.is_some_and(|s| !s.allows_doc(doc, id)) {
        return Err(out_of_scope());
    }
    apply(doc)?;
    let after = fields(doc);
    if read_str(doc, "kind").as_deref() == Some(Kind::Project.as_str()) && before.0 != after.0 {
        validate_slug("name", after.0.as_deref().unwrap_or_default())?;
    }
    let Some(scope) = scope else {
        return Ok(());
    };
    if !scope.allows_doc(doc, id) {
        return Err(out_of_scope());
    }
    if *id == scope.root() && before != after {
        return Err(StoreError::invalid(
            "project",
            "a device scoped to a project may not rename or move that project",
        ));
    }
    if before.1 != after.1 {
        if let Some(parent) = after.1.as_deref().and_then(|p| p.parse::<DocId>().ok()) {
            refuse_cycle(conn, id, parent, false)?;
        }
    }
    Ok(())
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

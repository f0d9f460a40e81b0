//! References between documents: projects, parents, subtasks, cycles.
//!
//! A project's parent is checked where it is written, in its placement
//! (`placement::place`, through [`refuse_cycle`]), not here.

use super::*;

impl Inner {
    pub(super) fn check_refs(
        tx: &Connection,
        id: &DocId,
        kind: Kind,
        d: &Derived,
    ) -> Result<(), StoreError> {
        let kind_of =
            |other: &DocId| -> Result<Option<(String, bool, Option<String>)>, StoreError> {
                Ok(tx
                    .query_row(
                        "SELECT kind, deleted, parent FROM entities WHERE id = ?1",
                        [&other.0[..]],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                    )
                    .optional()?)
            };
        if let Some(project) = &d.project {
            match kind_of(project)? {
                Some((k, false, _)) if k == "project" => {}
                _ => {
                    return Err(StoreError::invalid(
                        "project",
                        format!("no project {project}"),
                    ))
                }
            }
        }
        if let (Kind::Task, Some(parent)) = (kind, &d.parent) {
            if parent == id {
                return Err(StoreError::invalid(
                    "parent",
                    "a task cannot be its own parent",
                ));
            }
            match kind_of(parent)? {
                Some((k, false, grandparent)) if k == "task" => {
                    if grandparent.is_some() {
                        return Err(StoreError::invalid(
                            "parent",
                            "subtasks go two levels deep: the parent is itself a subtask",
                        ));
                    }
                }
                _ => return Err(StoreError::invalid("parent", format!("no task {parent}"))),
            }
            let children: i64 = tx.query_row(
                "SELECT count(*) FROM entities WHERE parent = ?1 AND kind = 'task' AND deleted = 0",
                [id.to_string()],
                |r| r.get(0),
            )?;
            if children > 0 {
                return Err(StoreError::invalid(
                    "parent",
                    "a task with subtasks cannot become a subtask (two levels at most)",
                ));
            }
        }
        Ok(())
    }
}

pub(super) fn check_refs_conn(
    tx: &Connection,
    id: &DocId,
    kind: Kind,
    d: &Derived,
) -> Result<(), StoreError> {
    Inner::check_refs(tx, id, kind, d)
}

/// Refuses making `parent` the parent of project `id` when `id` is among its ancestors.
///
/// `strict` (local edits): every ancestor must be a live project. Otherwise (a peer's
/// change) the walk ends where this replica's tree does, since a peer may be ahead.
pub(super) fn refuse_cycle(
    conn: &Connection,
    id: &DocId,
    parent: DocId,
    strict: bool,
) -> Result<(), StoreError> {
    let mut cursor = Some(parent);
    let mut steps = 0;
    while let Some(p) = cursor {
        if p == *id {
            return Err(StoreError::invalid(
                "parent",
                "projects cannot form a cycle",
            ));
        }
        let row: Option<(String, bool, Option<String>)> = conn
            .query_row(
                "SELECT kind, deleted, parent FROM entities WHERE id = ?1",
                [&p.0[..]],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()?;
        cursor = match row {
            Some((k, deleted, up)) if k == Kind::Project.as_str() && !(strict && deleted) => {
                opt_id(up)
            }
            _ if strict => return Err(StoreError::invalid("parent", format!("no project {p}"))),
            _ => None,
        };
        steps += 1;
        if steps > MAX_PROJECT_DEPTH {
            return Err(StoreError::invalid("parent", "project tree deeper than 64"));
        }
    }
    Ok(())
}

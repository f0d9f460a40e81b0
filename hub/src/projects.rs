//! Which project a name or id means, for the hub's own callers (chat, the CLI, the
//! agent's tools), and the hub's `general` project, remembered by id.
//!
//! Project titles come from documents any paired device may edit, so a title is never
//! trusted to mean one project: the `general` project is the id stored in `hub.db`
//! (`hub_meta.general_project`) when it was first created or adopted, and a name that
//! several projects share is an error that asks for an id, never "the first match".
//! This module never picks a project by the order of a listing.

use std::path::{Path, PathBuf};

use hearth_sync::{store::Listed, DocId, DocumentStore, Filter, Kind, Project};

use crate::hubdb::{self, Durability, HubDbError};

/// The name that always means the hub's general project.
pub const GENERAL: &str = "general";
/// The `hub_meta` key holding the general project's id.
const GENERAL_KEY: &str = "general_project";
/// At most this many projects are considered (a listing's page).
const MAX_PROJECTS: u32 = 100_000;

/// Why a project could not be found or made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProjectError {
    /// No project has that name or id.
    #[error("no project named or with id {0:?}")]
    NotFound(String),
    /// Several projects share the name (or id prefix).
    #[error("{count} projects are named {name:?}: use an id")]
    Ambiguous {
        /// The name as given.
        name: String,
        /// How many share it.
        count: usize,
    },
    /// The document store failed.
    #[error(transparent)]
    Store(#[from] hearth_sync::StoreError),
    /// `hub.db` failed.
    #[error(transparent)]
    HubDb(#[from] HubDbError),
    /// A blocking task died.
    #[error("internal: {0}")]
    Internal(String),
}

/// Picks the one project `what` means among `projects`: a full id; [`GENERAL`], which is
/// `general` whatever the project is called now; an exact name shared by no other
/// project; or an id prefix of at least 4 hex digits matching one project.
pub fn pick(
    projects: &[Listed],
    general: Option<DocId>,
    what: &str,
) -> Result<DocId, ProjectError> {
    if let Ok(id) = what.parse::<DocId>() {
        return projects
            .iter()
            .find(|p| p.id == id)
            .map(|p| p.id)
            .ok_or_else(|| ProjectError::NotFound(what.to_string()));
    }
    if let Some(general) = general.filter(|_| what == GENERAL) {
        return Ok(general);
    }
    let named: Vec<DocId> = projects
        .iter()
        .filter(|p| p.title == what)
        .map(|p| p.id)
        .collect();
    match named.as_slice() {
        [one] => return Ok(*one),
        [] => {}
        many => {
            return Err(ProjectError::Ambiguous {
                name: what.to_string(),
                count: many.len(),
            })
        }
    }
    let prefix = what.to_ascii_lowercase();
    if prefix.len() >= 4 && prefix.bytes().all(|b| b.is_ascii_hexdigit()) {
        let by_prefix: Vec<DocId> = projects
            .iter()
            .filter(|p| p.id.to_string().starts_with(&prefix))
            .map(|p| p.id)
            .collect();
        match by_prefix.as_slice() {
            [one] => return Ok(*one),
            [] => {}
            many => {
                return Err(ProjectError::Ambiguous {
                    name: what.to_string(),
                    count: many.len(),
                })
            }
        }
    }
    Err(ProjectError::NotFound(what.to_string()))
}

/// Every live project, for [`pick`].
pub fn all_projects_blocking(store: &DocumentStore) -> Result<Vec<Listed>, ProjectError> {
    Ok(store
        .list_blocking(&Filter {
            limit: MAX_PROJECTS,
            ..Filter::new(Kind::Project)
        })?
        .data)
}

/// Finds the project `what` (name or id) means; `general` is the hub's general project.
pub async fn find_project(
    store: &DocumentStore,
    general: Option<DocId>,
    what: &str,
) -> Result<DocId, ProjectError> {
    let store = store.clone();
    let what = what.to_string();
    tokio::task::spawn_blocking(move || find_project_blocking(&store, general, &what))
        .await
        .map_err(|e| ProjectError::Internal(e.to_string()))?
}

/// [`find_project`] for synchronous callers.
pub fn find_project_blocking(
    store: &DocumentStore,
    general: Option<DocId>,
    what: &str,
) -> Result<DocId, ProjectError> {
    pick(&all_projects_blocking(store)?, general, what)
}

/// The general project's id as remembered in `hub_db`, if the hub has started once.
pub fn general_id_blocking(hub_db: &Path) -> Result<Option<DocId>, ProjectError> {
    let conn = hubdb::open(hub_db, Durability::Full)?;
    Ok(hubdb::get_meta(&conn, GENERAL_KEY)?.and_then(|s| s.parse().ok()))
}

/// Finds the hub's general project by the id remembered in `hub_db`, creating it on first
/// start. An install from before the id was remembered adopts its oldest root project
/// titled `general`, once; from then on no rename or new project changes which it is.
pub async fn ensure_general(store: &DocumentStore, hub_db: &Path) -> Result<DocId, ProjectError> {
    let store = store.clone();
    let hub_db: PathBuf = hub_db.to_path_buf();
    tokio::task::spawn_blocking(move || ensure_general_blocking(&store, &hub_db))
        .await
        .map_err(|e| ProjectError::Internal(e.to_string()))?
}

fn ensure_general_blocking(store: &DocumentStore, hub_db: &Path) -> Result<DocId, ProjectError> {
    let conn = hubdb::open(hub_db, Durability::Full)?;
    if let Some(saved) = hubdb::get_meta(&conn, GENERAL_KEY)? {
        match saved.parse::<DocId>() {
            Ok(id) => match store.get_blocking::<Project>(id) {
                Ok(r) if !r.deleted => return Ok(id),
                _ => tracing::warn!(%id, "the general project is gone; making a new one"),
            },
            Err(e) => {
                tracing::warn!(error = %e, "the saved general project id is invalid; making a new one")
            }
        }
        let id = create_general(store)?;
        conn.execute(
            "UPDATE hub_meta SET value = ?1 WHERE key = ?2",
            [id.to_string(), GENERAL_KEY.to_string()],
        )
        .map_err(HubDbError::from)?;
        return Ok(id);
    }
    // First start with this code: adopt the oldest root project titled general (an
    // install from before the id was remembered), or make one.
    let mut oldest: Option<(i64, DocId)> = None;
    for p in all_projects_blocking(store)?
        .into_iter()
        .filter(|p| p.title == GENERAL && p.parent.is_none())
    {
        if let Ok(r) = store.get_blocking::<Project>(p.id) {
            let key = (r.created_at, p.id);
            if oldest.is_none_or(|o| key < o) {
                oldest = Some(key);
            }
        }
    }
    let id = match oldest {
        Some((_, id)) => {
            tracing::info!(%id, "remembering the existing general project by id");
            id
        }
        None => create_general(store)?,
    };
    // Another process may have remembered one first: the stored id wins.
    let stored = hubdb::set_meta_once(&conn, GENERAL_KEY, &id.to_string())?;
    stored
        .parse()
        .map_err(|_| ProjectError::Internal(format!("saved general project id {stored:?}")))
}

fn create_general(store: &DocumentStore) -> Result<DocId, ProjectError> {
    Ok(store
        .create_blocking(Project {
            name: GENERAL.into(),
            parent: None,
            instructions: String::new(),
            archived: false,
        })?
        .id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(store: &DocumentStore, name: &str, parent: Option<DocId>) -> DocId {
        store
            .create_blocking(Project {
                name: name.into(),
                parent,
                instructions: String::new(),
                archived: false,
            })
            .expect("create")
            .id
    }

    #[tokio::test]
    async fn peer_made_general_does_not_capture_the_hubs_general() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = DocumentStore::open(dir.path().join("hearth.db")).expect("store");
        let hub_db = dir.path().join("hub.db");
        let general = ensure_general(&store, &hub_db).await.expect("general");
        // A peer creates another root project named general, and renames one to general.
        let rogue = project(&store, GENERAL, None);
        let other = project(&store, "other", None);
        store
            .update_blocking(
                other,
                hearth_sync::ProjectPatch {
                    name: Some(GENERAL.into()),
                    ..Default::default()
                },
            )
            .expect("rename");
        // Later starts and every lookup of "general" keep the remembered id.
        assert_eq!(
            ensure_general(&store, &hub_db).await.expect("again"),
            general
        );
        assert_eq!(
            find_project(&store, Some(general), GENERAL)
                .await
                .expect("find"),
            general
        );
        // Without the remembered id the name is ambiguous, never the first match.
        let e = find_project(&store, None, GENERAL)
            .await
            .expect_err("ambiguous");
        assert!(
            e.to_string()
                .contains("3 projects are named \"general\": use an id"),
            "{e}"
        );
        // Ids still reach the others.
        let r = find_project(&store, Some(general), &rogue.to_string()).await;
        assert_eq!(r.expect("by id"), rogue);
    }

    #[tokio::test]
    async fn an_existing_install_adopts_its_oldest_root_general_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = DocumentStore::open(dir.path().join("hearth.db")).expect("store");
        let first = project(&store, GENERAL, None);
        std::thread::sleep(std::time::Duration::from_millis(5));
        let parent = project(&store, "parent", None);
        let _child = project(&store, GENERAL, Some(parent));
        let _later = project(&store, GENERAL, None);
        let hub_db = dir.path().join("hub.db");
        assert_eq!(ensure_general(&store, &hub_db).await.expect("adopt"), first);
        assert_eq!(general_id_blocking(&hub_db).expect("saved"), Some(first));
    }

    #[test]
    fn ambiguous_names_are_errors_and_unique_ones_resolve() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = DocumentStore::open(dir.path().join("hearth.db")).expect("store");
        let a = project(&store, "work", None);
        let _b = project(&store, "work", None);
        let home = project(&store, "home", None);
        let e = find_project_blocking(&store, None, "work").expect_err("ambiguous");
        assert_eq!(e.to_string(), "2 projects are named \"work\": use an id");
        assert_eq!(
            find_project_blocking(&store, None, "home").expect("home"),
            home
        );
        let prefix = &a.to_string()[..8];
        assert_eq!(
            find_project_blocking(&store, None, prefix).expect("prefix"),
            a
        );
        assert!(matches!(
            find_project_blocking(&store, None, "nope"),
            Err(ProjectError::NotFound(_))
        ));
    }
}

//! System tools over the document store (notes, tasks, contacts, skills, project
//! instructions) and the hub's update log, each confined to the project the agent was
//! invoked for and its children (contacts, and skills without a project, are shared by
//! every project).
//!
//! Every tool works through [`DocumentStore`], so an agent's edit replicates like any
//! other. A document outside the invoking project's subtree is reported as not found:
//! the model learns nothing about parents or siblings, not even that they exist.
//! Tools never see secrets and return JSON values the agent loop serialises. They are
//! registered in [`super::registry`] like every plugin's tools ([`system_tools`]); this
//! module also owns what every handler is given ([`ToolContext`]) and how a call fails
//! ([`ToolError`]).

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::Duration,
};

use hearth_sync::{
    store::Listed, Contact, ContactPatch, DocId, DocumentStore, Filter, Kind, Note, NotePatch,
    Project, ProjectPatch, Skill, SkillPatch, StoreError, Task, TaskPatch, TaskStatus, TextEdit,
    TextSplice,
};
use rusqlite::{params, Connection};
use serde_json::{json, Value};

use super::{
    note_ops::{self, NoteOp},
    registry::{Effect, ToolDescriptor, ToolFuture, ToolHandler, ToolSource},
};
use crate::secrets::{SecretStore, SecretValue};

/// Whether a tool needs the owner's approval before it runs (`Safe < Risky`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Risk {
    /// Reads, or ordinary edits.
    Safe,
    /// Destructive: waits for approval.
    Risky,
}

/// Why a tool call failed; the text goes back to the model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// No such document in this project (or outside it: indistinguishable on purpose).
    #[error("no {kind} {id} in this project")]
    NotFound {
        /// Kind.
        kind: &'static str,
        /// Id as given.
        id: String,
    },
    /// Bad arguments.
    #[error("invalid arguments: {0}")]
    Invalid(String),
    /// Unknown tool.
    #[error("unknown tool {0}")]
    Unknown(String),
    /// The store refused.
    #[error("{0}")]
    Store(StoreError),
    /// The tool ran and failed (a plugin's error, a refused path, a command's failure).
    #[error("{0}")]
    Failed(String),
    /// The tool did not answer in time.
    #[error("the tool did not answer within {}s and was abandoned", after.as_secs())]
    TimedOut {
        /// Its time limit.
        after: Duration,
    },
}

impl From<StoreError> for ToolError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Invalid { .. } | StoreError::Deleted { .. } => Self::Invalid(e.to_string()),
            other => Self::Store(other),
        }
    }
}

impl From<note_ops::NoteOpError> for ToolError {
    fn from(e: note_ops::NoteOpError) -> Self {
        Self::Invalid(e.to_string())
    }
}

/// Where a tool runs: the store, the update log, the invoking project and its directory.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The store.
    pub store: DocumentStore,
    /// The project update log.
    pub updates: Arc<UpdateLog>,
    /// The project the agent was invoked for.
    pub project: DocId,
    /// `<home>/projects/<project id>`: the only files a tool may touch.
    pub project_dir: Option<PathBuf>,
    /// The secret store, for a tool that takes secrets by name.
    pub secrets: Option<Arc<SecretStore>>,
}

impl ToolContext {
    /// The invoking project's secret `name`, for a tool the model asked to use it
    /// (the model names secrets, never sees values). Blocking.
    pub fn secret(&self, name: &str) -> Result<Option<SecretValue>, ToolError> {
        let Some(secrets) = &self.secrets else {
            return Ok(None);
        };
        secrets
            .get(&format!("project:{}", self.project), name)
            .map_err(|e| ToolError::Failed(format!("secret {name}: {e}")))
    }
}

/// Project updates ("what happened"), hub-only, in `hub.db`.
#[derive(Debug)]
pub struct UpdateLog {
    conn: Mutex<Connection>,
}

impl UpdateLog {
    /// Opens the log in `db`.
    pub fn open(db: &Path) -> Result<Self, crate::hubdb::HubDbError> {
        let conn = crate::hubdb::open(db, crate::hubdb::Durability::Normal)?;
        Ok(Self {
            conn: Mutex::new(conn),
        })
    }

    fn publish(&self, project: &DocId, task: Option<&DocId>, text: &str) -> Result<i64, ToolError> {
        let conn = self
            .conn
            .lock()
            .map_err(|_| ToolError::Invalid("update log unavailable".into()))?;
        let now = crate::hubdb::now_ms();
        conn.execute(
            "INSERT INTO updates (project, task, text, created_at) VALUES (?1, ?2, ?3, ?4)",
            params![project.to_string(), task.map(|t| t.to_string()), text, now],
        )
        .map_err(|e| ToolError::Invalid(e.to_string()))?;
        Ok(conn.last_insert_rowid())
    }

    fn query(&self, visible: &hearth_sync::Scope, limit: u32) -> Result<Vec<Value>, ToolError> {
        let conn = self
            .conn
            .lock()
            .map_err(|_| ToolError::Invalid("update log unavailable".into()))?;
        let mut stmt = conn
            .prepare("SELECT id, project, task, text, created_at FROM updates ORDER BY id DESC")
            .map_err(|e| ToolError::Invalid(e.to_string()))?;
        let mut rows = stmt
            .query([])
            .map_err(|e| ToolError::Invalid(e.to_string()))?;
        let mut out = Vec::new();
        while let Some(r) = rows.next().map_err(|e| ToolError::Invalid(e.to_string()))? {
            let project: String = r.get(1).map_err(|e| ToolError::Invalid(e.to_string()))?;
            if !project
                .parse::<DocId>()
                .is_ok_and(|p| visible.contains_project(&p))
            {
                continue;
            }
            let id: i64 = r.get(0).unwrap_or(0);
            let task: Option<String> = r.get(2).ok().flatten();
            let text: String = r.get(3).unwrap_or_default();
            let at: i64 = r.get(4).unwrap_or(0);
            out.push(json!({ "id": id, "project": project, "taskId": task, "text": text, "createdAt": at }));
            if out.len() >= limit as usize {
                break;
            }
        }
        Ok(out)
    }
}

fn obj(props: Value, required: &[&str]) -> Value {
    json!({ "type": "object", "properties": props, "required": required })
}

/// Runs one system tool off the async threads.
struct SystemTool(&'static str);

impl ToolHandler for SystemTool {
    fn call(&self, ctx: ToolContext, args: Value) -> ToolFuture {
        let name = self.0;
        Box::pin(async move {
            tokio::task::spawn_blocking(move || call_blocking(&ctx, name, &args))
                .await
                .map_err(|e| ToolError::Failed(format!("tool crashed: {e}")))?
        })
    }
}

/// Replacing a note's whole content is risky: a note a peer planted can carry
/// instructions that ask the model to wipe another.
fn note_update_risk(_ctx: &ToolContext, args: &Value) -> Risk {
    if args.get("content").is_some() {
        Risk::Risky
    } else {
        Risk::Safe
    }
}

/// Changing a project's instructions steers every later turn of that project.
fn instructions_risk(_ctx: &ToolContext, args: &Value) -> Risk {
    if args.get("instructions").is_some() {
        Risk::Risky
    } else {
        Risk::Safe
    }
}

/// A skill shared by every project (no project of its own) steers them all.
fn skill_update_risk(ctx: &ToolContext, args: &Value) -> Risk {
    let shared = (|| {
        let visible = ctx.store.scope_blocking(ctx.project).ok()?;
        let scope = Scope {
            store: &ctx.store,
            home: ctx.project,
            visible,
        };
        let rec = scope.skill(arg_str(args, "name")?).ok()?;
        Some(rec.value.project.is_none())
    })();
    // Unknown (not found, unreadable): the call fails anyway; ask rather than guess.
    if shared == Some(false) {
        Risk::Safe
    } else {
        Risk::Risky
    }
}

/// The system tools, as the registry holds them.
pub fn system_tools() -> Vec<ToolDescriptor> {
    catalog()
        .into_iter()
        .map(|(name, description, risk, default_on, schema)| {
            let risk_of_call: Option<super::registry::RiskOfCall> = match name {
                "notes_update" => Some(note_update_risk),
                "project_instructions_update" => Some(instructions_risk),
                "skills_update" => Some(skill_update_risk),
                _ => None,
            };
            // Whatever returns a document's words returns what a peer may have written.
            let reads_untrusted = !(name.ends_with("_create")
                || name.ends_with("_delete")
                || name == "updates_publish");
            ToolDescriptor {
                name: name.to_string(),
                description: description.to_string(),
                schema,
                risk,
                default_on,
                effect: Effect::None,
                reads_untrusted,
                risk_of_call,
                only_in: None,
                source: ToolSource::System,
                handler: Arc::new(SystemTool(name)),
            }
        })
        .collect()
}

type SystemEntry = (&'static str, &'static str, Risk, bool, Value);

fn catalog() -> Vec<SystemEntry> {
    let s = json!({"type": "string"});
    let n = json!({"type": "integer", "minimum": 0});
    let ops = json!({"type": "array", "items": {"type": "object"}, "description":
        "Patch operations, applied in order: {op: replace|insert_after|insert_before|delete|append|prepend, find, replace|text}, \
         {op: replace_section|insert_after_section|delete_section, heading, occurrence?, content|text}, \
         {op: replace_lines|insert_at_line|delete_lines, start|line, end, text} (1-based; issue several line ops in reverse order)"});
    let t = |name, description, risk, default_on, schema| -> SystemEntry {
        (name, description, risk, default_on, schema)
    };
    vec![
        t("notes_create", "Create a note with a title and optional markdown content.", Risk::Safe, true,
          obj(json!({"title": s, "content": s, "project": s}), &["title"])),
        t("notes_query", "List notes (metadata, not content), newest first.", Risk::Safe, true,
          obj(json!({"project": s, "limit": n, "offset": n}), &[])),
        t("notes_read", "Read a note's content; startLine/endLine (1-based, inclusive) page through long notes. Returns totalLines, totalChars and truncated.", Risk::Safe, true,
          obj(json!({"id": s, "startLine": n, "endLine": n}), &["id"])),
        t("notes_update", "Update a note: a new title, surgical patch operations, or a whole new content (replacing the whole content asks the owner first: prefer operations).", Risk::Safe, true,
          obj(json!({"id": s, "title": s, "content": s, "operations": ops}), &["id"])),
        t("notes_delete", "Delete a note.", Risk::Risky, false, obj(json!({"id": s}), &["id"])),
        t("notes_search", "Full-text search over notes in this project.", Risk::Safe, true,
          obj(json!({"query": s, "limit": n}), &["query"])),
        t("tasks_create", "Create a task; `parent` makes it a subtask (two levels at most).", Risk::Safe, true,
          obj(json!({"name": s, "due": s, "notes": s, "parent": s, "status": s, "interval": s, "project": s}), &["name"])),
        t("tasks_query", "List tasks, optionally by status (incomplete, complete, cancelled, recurring).", Risk::Safe, true,
          obj(json!({"status": s, "parent": s, "limit": n, "offset": n}), &[])),
        t("tasks_search", "Full-text search over tasks in this project.", Risk::Safe, true,
          obj(json!({"query": s, "limit": n}), &["query"])),
        t("tasks_update", "Update a task's name, status, due date or notes. Marking a recurring task complete moves its due date on by its interval instead; it stays open.", Risk::Safe, true,
          obj(json!({"id": s, "name": s, "status": s, "due": s, "notes": s}), &["id"])),
        t("tasks_start", "Start working on a task now: records that it started and returns what it asks for.", Risk::Safe, true,
          obj(json!({"id": s}), &["id"])),
        t("tasks_delete", "Delete a task.", Risk::Risky, false, obj(json!({"id": s}), &["id"])),
        t("contacts_create", "Create a contact with a name and optional fields, tags and metadata.", Risk::Safe, true,
          obj(json!({"name": s, "email": s, "phone": s, "company": s, "title": s, "website": s, "address": s,
                     "notes": s, "tags": {"type": "array", "items": s}, "metadata": {"type": "object"}}), &["name"])),
        t("contacts_query", "Find contacts by name, email, company or tag.", Risk::Safe, true,
          obj(json!({"query": s, "tag": s, "company": s, "limit": n, "offset": n}), &[])),
        t("contacts_read", "Read a contact with its tags and notes.", Risk::Safe, true, obj(json!({"id": s}), &["id"])),
        t("contacts_update", "Update a contact's fields, tags and/or notes.", Risk::Safe, true,
          obj(json!({"id": s, "name": s, "email": s, "phone": s, "company": s, "title": s, "website": s,
                     "address": s, "notes": s, "tags": {"type": "array", "items": s}, "metadata": {"type": "object"}}), &["id"])),
        t("contacts_delete", "Delete a contact.", Risk::Risky, false, obj(json!({"id": s}), &["id"])),
        t("skills_search", "Search skills by name, description and body.", Risk::Safe, true,
          obj(json!({"query": s, "limit": n}), &["query"])),
        t("skills_read", "Read a skill by name or id; `arguments` replaces $ARGUMENTS in its body.", Risk::Safe, true,
          obj(json!({"name": s, "arguments": s}), &["name"])),
        t("skills_create", "Create a skill (name: lowercase letters, digits, hyphens) in this project.", Risk::Safe, true,
          obj(json!({"name": s, "description": s, "body": s}), &["name", "description", "body"])),
        t("skills_update", "Update a skill's description or body (a skill shared by every project asks the owner first).", Risk::Safe, true,
          obj(json!({"name": s, "description": s, "body": s}), &["name"])),
        t("project_instructions_update", "Read this project's instructions (omit `instructions`) or replace them (replacing asks the owner first).", Risk::Safe, true,
          obj(json!({"instructions": s}), &[])),
        t("updates_publish", "Publish an update for this project, optionally about a task.", Risk::Safe, true,
          obj(json!({"text": s, "taskId": s}), &["text"])),
        t("updates_query", "Recent updates of this project and its children, newest first.", Risk::Safe, true,
          obj(json!({"limit": n}), &[])),
    ]
}

fn arg_str<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

fn need_str<'a>(args: &'a Value, key: &str) -> Result<&'a str, ToolError> {
    arg_str(args, key).ok_or_else(|| ToolError::Invalid(format!("`{key}` (a string) is required")))
}

fn arg_u32(args: &Value, key: &str, default: u32, max: u32) -> u32 {
    args.get(key)
        .and_then(Value::as_u64)
        .map(|v| v.min(u64::from(max)) as u32)
        .unwrap_or(default)
}

fn listed_json(l: &Listed) -> Value {
    json!({
        "id": l.id.to_string(), "title": l.title, "project": l.project.map(|p| p.to_string()),
        "status": l.status, "due": l.due, "parent": l.parent.map(|p| p.to_string()), "updatedAt": l.updated_at,
    })
}

struct Scope<'a> {
    store: &'a DocumentStore,
    home: DocId,
    visible: hearth_sync::Scope,
}

impl Scope<'_> {
    /// A project the caller named (id, id prefix or name), if visible.
    fn project(&self, given: Option<&str>) -> Result<DocId, ToolError> {
        let Some(given) = given else {
            return Ok(self.home);
        };
        // Only projects in the caller's subtree are candidates; a name two of them share
        // is an error, never the first match.
        let visible: Vec<_> = crate::projects::all_projects_blocking(self.store)
            .map_err(|e| ToolError::Invalid(e.to_string()))?
            .into_iter()
            .filter(|p| self.visible.contains_project(&p.id))
            .collect();
        crate::projects::pick(&visible, None, given).map_err(|e| match e {
            crate::projects::ProjectError::Ambiguous { .. } => ToolError::Invalid(e.to_string()),
            _ => ToolError::NotFound {
                kind: "project",
                id: given.to_string(),
            },
        })
    }

    fn note(&self, id: &str) -> Result<hearth_sync::Record<Note>, ToolError> {
        let missing = || ToolError::NotFound {
            kind: "note",
            id: id.to_string(),
        };
        let doc = id
            .parse::<DocId>()
            .or_else(|_| self.store.resolve_blocking(Kind::Note, id))
            .map_err(|_| missing())?;
        let rec = self
            .store
            .get_blocking::<Note>(doc)
            .map_err(|_| missing())?;
        if rec.deleted
            || !rec
                .value
                .project
                .is_some_and(|p| self.visible.contains_project(&p))
        {
            return Err(missing());
        }
        Ok(rec)
    }

    fn task(&self, id: &str) -> Result<hearth_sync::Record<Task>, ToolError> {
        let missing = || ToolError::NotFound {
            kind: "task",
            id: id.to_string(),
        };
        let doc = id
            .parse::<DocId>()
            .or_else(|_| self.store.resolve_blocking(Kind::Task, id))
            .map_err(|_| missing())?;
        let rec = self
            .store
            .get_blocking::<Task>(doc)
            .map_err(|_| missing())?;
        if rec.deleted
            || !rec
                .value
                .project
                .is_some_and(|p| self.visible.contains_project(&p))
        {
            return Err(missing());
        }
        Ok(rec)
    }

    fn contact(&self, id: &str) -> Result<hearth_sync::Record<Contact>, ToolError> {
        let missing = || ToolError::NotFound {
            kind: "contact",
            id: id.to_string(),
        };
        let doc = id
            .parse::<DocId>()
            .or_else(|_| self.store.resolve_blocking(Kind::Contact, id))
            .map_err(|_| missing())?;
        let rec = self
            .store
            .get_blocking::<Contact>(doc)
            .map_err(|_| missing())?;
        if rec.deleted {
            return Err(missing());
        }
        Ok(rec)
    }

    /// A skill by name or id: global, or owned by a visible project.
    fn skill(&self, name: &str) -> Result<hearth_sync::Record<Skill>, ToolError> {
        let missing = || ToolError::NotFound {
            kind: "skill",
            id: name.to_string(),
        };
        let candidates: Vec<DocId> = match name
            .parse::<DocId>()
            .or_else(|_| self.store.resolve_blocking(Kind::Skill, name))
        {
            Ok(id) => vec![id],
            Err(_) => self
                .store
                .list_blocking(&Filter {
                    limit: 100_000,
                    ..Filter::new(Kind::Skill)
                })?
                .data
                .into_iter()
                .filter(|l| l.title == name)
                .map(|l| l.id)
                .collect(),
        };
        candidates
            .into_iter()
            .filter_map(|id| self.store.get_blocking::<Skill>(id).ok())
            // The closest owner wins: this project's skill over a global one.
            .filter(|r| {
                !r.deleted
                    && r.value
                        .project
                        .is_none_or(|p| self.visible.contains_project(&p))
            })
            .max_by_key(|r| r.value.project.is_some())
            .ok_or_else(missing)
    }

    fn list(
        &self,
        kind: Kind,
        status: Option<String>,
        parent: Option<DocId>,
        args: &Value,
    ) -> Result<Value, ToolError> {
        let limit = arg_u32(args, "limit", 50, 500);
        let offset = arg_u32(args, "offset", 0, u32::MAX);
        let only = arg_str(args, "project")
            .map(|p| self.project(Some(p)))
            .transpose()?;
        let all = self.store.list_blocking(&Filter {
            status,
            parent,
            limit: 100_000,
            ..Filter::new(kind)
        })?;
        let rows: Vec<&Listed> = all
            .data
            .iter()
            .filter(|l| {
                l.project.is_some_and(|p| {
                    self.visible.contains_project(&p) && only.is_none_or(|o| o == p)
                })
            })
            .collect();
        let page: Vec<Value> = rows
            .iter()
            .skip(offset as usize)
            .take(limit as usize)
            .map(|l| listed_json(l))
            .collect();
        Ok(json!({ "data": page, "total": rows.len(), "limit": limit, "offset": offset }))
    }

    fn search(&self, kind: Kind, args: &Value) -> Result<Value, ToolError> {
        let query = need_str(args, "query")?;
        let limit = arg_u32(args, "limit", 20, 100);
        let hits = self.store.search_blocking(query, Some(kind), 1_000)?;
        let data: Vec<Value> = hits
            .iter()
            .filter(|h| {
                h.entity
                    .project
                    .is_some_and(|p| self.visible.contains_project(&p))
            })
            .take(limit as usize)
            .map(|h| {
                let mut v = listed_json(&h.entity);
                v["snippet"] = json!(h.snippet);
                v
            })
            .collect();
        Ok(json!({ "data": data }))
    }
}

fn call_blocking(ctx: &ToolContext, name: &str, args: &Value) -> Result<Value, ToolError> {
    let scope = Scope {
        store: &ctx.store,
        home: ctx.project,
        visible: ctx.store.scope_blocking(ctx.project)?,
    };
    let store = &ctx.store;
    match name {
        "notes_create" => {
            let project = scope.project(arg_str(args, "project"))?;
            let note = Note {
                project: Some(project),
                title: need_str(args, "title")?.to_string(),
                content: arg_str(args, "content").unwrap_or_default().to_string(),
            };
            let rec = store.create_blocking(note)?;
            Ok(json!({ "id": rec.id.to_string(), "title": rec.value.title }))
        }
        "notes_query" => scope.list(Kind::Note, None, None, args),
        "notes_read" => {
            let rec = scope.note(need_str(args, "id")?)?;
            let start = args
                .get("startLine")
                .and_then(Value::as_u64)
                .map(|v| v as usize);
            let end = args
                .get("endLine")
                .and_then(Value::as_u64)
                .map(|v| v as usize);
            let w = note_ops::read_lines(&rec.value.content, start, end);
            Ok(json!({
                "id": rec.id.to_string(), "title": rec.value.title, "content": w.text,
                "totalLines": w.total_lines, "totalChars": w.total_chars, "truncated": w.truncated,
            }))
        }
        "notes_update" => {
            let rec = scope.note(need_str(args, "id")?)?;
            let mut patch = NotePatch {
                title: arg_str(args, "title").map(|t| TextEdit::Replace(t.to_string())),
                ..NotePatch::default()
            };
            match (arg_str(args, "content"), args.get("operations")) {
                (Some(_), Some(_)) => {
                    return Err(ToolError::Invalid(
                        "give `content` or `operations`, not both".into(),
                    ))
                }
                (Some(c), None) => patch.content = Some(TextEdit::Replace(c.to_string())),
                (None, Some(ops)) => {
                    let ops: Vec<NoteOp> = serde_json::from_value(ops.clone())
                        .map_err(|e| ToolError::Invalid(format!("operations: {e}")))?;
                    let (splices, _) = note_ops::plan(&rec.value.content, &ops)?;
                    let splices = splices
                        .into_iter()
                        .map(|s| TextSplice {
                            pos: s.pos,
                            delete: s.delete,
                            insert: s.insert,
                        })
                        .collect();
                    patch.content = Some(TextEdit::Splices(splices));
                }
                (None, None) if patch.title.is_none() => {
                    return Err(ToolError::Invalid(
                        "nothing to change: give title, content or operations".into(),
                    ))
                }
                (None, None) => {}
            }
            let rec = store.update_blocking(rec.id, patch)?;
            Ok(
                json!({ "id": rec.id.to_string(), "title": rec.value.title, "totalChars": rec.value.content.chars().count() }),
            )
        }
        "notes_delete" => {
            let rec = scope.note(need_str(args, "id")?)?;
            store.delete_blocking(Kind::Note, rec.id)?;
            Ok(json!({ "deleted": rec.id.to_string() }))
        }
        "notes_search" => scope.search(Kind::Note, args),
        "tasks_create" => {
            let project = scope.project(arg_str(args, "project"))?;
            let parent = arg_str(args, "parent")
                .map(|p| scope.task(p).map(|t| t.id))
                .transpose()?;
            let status = arg_str(args, "status")
                .map(str::parse::<TaskStatus>)
                .transpose()?
                .unwrap_or_default();
            let task = Task {
                project: Some(project),
                name: need_str(args, "name")?.to_string(),
                status,
                due: arg_str(args, "due").map(str::to_string),
                notes: arg_str(args, "notes").unwrap_or_default().to_string(),
                parent,
                interval: arg_str(args, "interval").map(str::to_string),
                agent_job: false,
            };
            let rec = store.create_blocking(task)?;
            Ok(
                json!({ "id": rec.id.to_string(), "name": rec.value.name, "status": rec.value.status.as_str() }),
            )
        }
        "tasks_query" => {
            let status = arg_str(args, "status")
                .map(|s| s.parse::<TaskStatus>().map(|s| s.as_str().to_string()))
                .transpose()?;
            let parent = arg_str(args, "parent")
                .map(|p| scope.task(p).map(|t| t.id))
                .transpose()?;
            scope.list(Kind::Task, status, parent, args)
        }
        "tasks_search" => scope.search(Kind::Task, args),
        "tasks_update" => {
            let rec = scope.task(need_str(args, "id")?)?;
            let status = arg_str(args, "status")
                .map(str::parse::<TaskStatus>)
                .transpose()?;
            let due = arg_str(args, "due").map(|d| Some(d.to_string()));
            let mut patch = TaskPatch {
                name: arg_str(args, "name").map(|n| TextEdit::Replace(n.to_string())),
                status,
                due: due.clone(),
                notes: arg_str(args, "notes").map(|n| TextEdit::Replace(n.to_string())),
                ..TaskPatch::default()
            };
            // "Complete" on a person's recurring task means done this time: its due
            // moves on (from the due given in this call, if any) and it stays open.
            let mut task = rec.value;
            if let Some(d) = due {
                task.due = d;
            }
            let rolls = status == Some(TaskStatus::Complete) && task.repeats_when_done();
            if rolls {
                let done = task.done_patch(&hearth_ui::local_now());
                patch.status = done.status;
                patch.due = done.due;
            }
            let rec = store.update_blocking(rec.id, patch)?;
            let mut answer = json!({
                "id": rec.id.to_string(), "name": rec.value.name,
                "status": rec.value.status.as_str(), "due": rec.value.due,
            });
            if rolls {
                answer["note"] = json!(format!(
                    "A recurring task (every {}) is never completed: it stays open, next due {}.",
                    rec.value.interval.as_deref().unwrap_or_default(),
                    rec.value.due.as_deref().unwrap_or_default()
                ));
            }
            Ok(answer)
        }
        "tasks_start" => {
            let rec = scope.task(need_str(args, "id")?)?;
            if matches!(
                rec.value.status,
                TaskStatus::Complete | TaskStatus::Cancelled
            ) {
                return Err(ToolError::Invalid(format!(
                    "task {} is already {}",
                    rec.id, rec.value.status
                )));
            }
            let project = rec.value.project.unwrap_or(ctx.project);
            ctx.updates.publish(
                &project,
                Some(&rec.id),
                &format!("Started: {}", rec.value.name),
            )?;
            Ok(json!({
                "id": rec.id.to_string(), "name": rec.value.name, "notes": rec.value.notes, "due": rec.value.due,
                "instruction": "Work on this task now; mark it complete with tasks_update when done.",
            }))
        }
        "tasks_delete" => {
            let rec = scope.task(need_str(args, "id")?)?;
            store.delete_blocking(Kind::Task, rec.id)?;
            Ok(json!({ "deleted": rec.id.to_string() }))
        }
        "contacts_create" => {
            let c = contact_from(
                args,
                Contact {
                    name: need_str(args, "name")?.to_string(),
                    ..Contact::default()
                },
            )?;
            let rec = store.create_blocking(c)?;
            Ok(json!({ "id": rec.id.to_string(), "name": rec.value.name }))
        }
        "contacts_query" => {
            let q = arg_str(args, "query").map(str::to_lowercase);
            let tag = arg_str(args, "tag").map(str::to_lowercase);
            let company = arg_str(args, "company").map(str::to_lowercase);
            let limit = arg_u32(args, "limit", 50, 500) as usize;
            let offset = arg_u32(args, "offset", 0, u32::MAX) as usize;
            let all = store.list_blocking(&Filter {
                limit: 100_000,
                ..Filter::new(Kind::Contact)
            })?;
            let mut hits = Vec::new();
            for l in &all.data {
                let c = store.get_blocking::<Contact>(l.id)?.value;
                let has = |field: &Option<String>, needle: &str| {
                    field
                        .as_deref()
                        .is_some_and(|f| f.to_lowercase().contains(needle))
                };
                let ok = q.as_deref().is_none_or(|q| {
                    c.name.to_lowercase().contains(q) || has(&c.email, q) || has(&c.company, q)
                }) && tag
                    .as_deref()
                    .is_none_or(|t| c.tags.iter().any(|x| x.to_lowercase() == t))
                    && company.as_deref().is_none_or(|co| has(&c.company, co));
                if ok {
                    hits.push(
                        json!({ "id": l.id.to_string(), "name": c.name, "email": c.email,
                                      "company": c.company, "tags": c.tags }),
                    );
                }
            }
            let total = hits.len();
            let data: Vec<Value> = hits.into_iter().skip(offset).take(limit).collect();
            Ok(json!({ "data": data, "total": total, "limit": limit, "offset": offset }))
        }
        "contacts_read" => {
            let rec = scope.contact(need_str(args, "id")?)?;
            Ok(contact_json(&rec.id, &rec.value))
        }
        "contacts_update" => {
            let rec = scope.contact(need_str(args, "id")?)?;
            let merged = contact_from(args, rec.value.clone())?;
            let old = rec.value;
            let ch = |new: &Option<String>, old: &Option<String>| (new != old).then(|| new.clone());
            let patch = ContactPatch {
                name: (merged.name != old.name).then(|| merged.name.clone()),
                email: ch(&merged.email, &old.email),
                phone: ch(&merged.phone, &old.phone),
                company: ch(&merged.company, &old.company),
                title: ch(&merged.title, &old.title),
                website: ch(&merged.website, &old.website),
                address: ch(&merged.address, &old.address),
                notes: (merged.notes != old.notes).then(|| TextEdit::Replace(merged.notes.clone())),
                tags: (merged.tags != old.tags).then(|| merged.tags.clone()),
                metadata: (merged.metadata != old.metadata).then(|| merged.metadata.clone()),
            };
            let rec = store.update_blocking(rec.id, patch)?;
            Ok(contact_json(&rec.id, &rec.value))
        }
        "contacts_delete" => {
            let rec = scope.contact(need_str(args, "id")?)?;
            store.delete_blocking(Kind::Contact, rec.id)?;
            Ok(json!({ "deleted": rec.id.to_string() }))
        }
        "skills_search" => {
            let query = need_str(args, "query")?;
            let limit = arg_u32(args, "limit", 20, 100) as usize;
            let hits = store.search_blocking(query, Some(Kind::Skill), 1_000)?;
            let data: Vec<Value> = hits
                .iter()
                .filter(|h| h.entity.project.is_none_or(|p| scope.visible.contains_project(&p)))
                .take(limit)
                .map(|h| json!({ "id": h.entity.id.to_string(), "name": h.entity.title, "snippet": h.snippet }))
                .collect();
            Ok(json!({ "data": data }))
        }
        "skills_read" => {
            let rec = scope.skill(need_str(args, "name")?)?;
            let body = match arg_str(args, "arguments") {
                Some(a) => rec.value.body.replace("$ARGUMENTS", a),
                None => rec.value.body.clone(),
            };
            Ok(json!({ "id": rec.id.to_string(), "name": rec.value.name,
                       "description": rec.value.description, "body": body }))
        }
        "skills_create" => {
            let skill = Skill {
                project: Some(ctx.project),
                name: need_str(args, "name")?.to_string(),
                description: need_str(args, "description")?.to_string(),
                body: need_str(args, "body")?.to_string(),
            };
            let rec = store.create_blocking(skill)?;
            Ok(json!({ "id": rec.id.to_string(), "name": rec.value.name }))
        }
        "skills_update" => {
            let rec = scope.skill(need_str(args, "name")?)?;
            let patch = SkillPatch {
                description: arg_str(args, "description").map(|d| TextEdit::Replace(d.to_string())),
                body: arg_str(args, "body").map(|b| TextEdit::Replace(b.to_string())),
                ..SkillPatch::default()
            };
            let rec = store.update_blocking(rec.id, patch)?;
            Ok(json!({ "id": rec.id.to_string(), "name": rec.value.name }))
        }
        "project_instructions_update" => match arg_str(args, "instructions") {
            None => {
                let p = store.get_blocking::<Project>(ctx.project)?;
                Ok(json!({ "project": p.value.name, "instructions": p.value.instructions }))
            }
            Some(text) => {
                let patch = ProjectPatch {
                    instructions: Some(TextEdit::Replace(text.to_string())),
                    ..ProjectPatch::default()
                };
                let p = store.update_blocking(ctx.project, patch)?;
                Ok(json!({ "project": p.value.name, "instructions": p.value.instructions }))
            }
        },
        "updates_publish" => {
            let task = arg_str(args, "taskId")
                .map(|t| scope.task(t).map(|r| r.id))
                .transpose()?;
            let id = ctx
                .updates
                .publish(&ctx.project, task.as_ref(), need_str(args, "text")?)?;
            Ok(json!({ "id": id }))
        }
        "updates_query" => Ok(
            json!({ "data": ctx.updates.query(&scope.visible, arg_u32(args, "limit", 20, 200))? }),
        ),
        other => Err(ToolError::Unknown(other.to_string())),
    }
}

fn contact_json(id: &DocId, c: &Contact) -> Value {
    json!({
        "id": id.to_string(), "name": c.name, "email": c.email, "phone": c.phone, "company": c.company,
        "title": c.title, "website": c.website, "address": c.address, "notes": c.notes, "tags": c.tags,
        "metadata": c.metadata,
    })
}

/// `base` with the fields present in `args` replaced.
fn contact_from(args: &Value, mut base: Contact) -> Result<Contact, ToolError> {
    if let Some(n) = arg_str(args, "name") {
        base.name = n.to_string();
    }
    for (key, slot) in [
        ("email", &mut base.email),
        ("phone", &mut base.phone),
        ("company", &mut base.company),
        ("title", &mut base.title),
        ("website", &mut base.website),
        ("address", &mut base.address),
    ] {
        if let Some(v) = args.get(key) {
            *slot = v.as_str().map(str::to_string);
        }
    }
    if let Some(n) = arg_str(args, "notes") {
        base.notes = n.to_string();
    }
    if let Some(tags) = args.get("tags") {
        base.tags = serde_json::from_value(tags.clone())
            .map_err(|e| ToolError::Invalid(format!("tags: {e}")))?;
    }
    if let Some(meta) = args.get("metadata") {
        let m: BTreeMap<String, String> = serde_json::from_value(meta.clone())
            .map_err(|e| ToolError::Invalid(format!("metadata: {e}")))?;
        base.metadata = m;
    }
    Ok(base)
}

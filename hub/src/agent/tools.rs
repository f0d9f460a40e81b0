//! System tools over the document store: notes and tasks (contacts, skills, project
//! instructions and updates join next), each confined to the project the agent was
//! invoked for and its children.
//!
//! Every tool works through [`DocumentStore`], so an agent's edit replicates like any
//! other. A document outside the invoking project's subtree is reported as not found:
//! the model learns nothing about parents or siblings, not even that they exist.
//! Tools never see secrets and return JSON values the agent loop serialises.

use std::collections::HashSet;

use hearth_sync::{
    store::Listed, DocId, DocumentStore, Filter, Kind, Note, NotePatch, StoreError, Task,
    TaskPatch, TaskStatus, TextEdit, TextSplice,
};
use serde_json::{json, Value};

use super::note_ops::{self, NoteOp};

/// Whether a tool needs the owner's approval before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Risk {
    /// Reads, or ordinary edits.
    Safe,
    /// Destructive: waits for approval.
    Risky,
}

/// A tool's description for the registry and the model.
#[derive(Debug, Clone)]
pub struct ToolInfo {
    /// Name (underscores only: providers reject other characters).
    pub name: &'static str,
    /// What it does, for the model.
    pub description: &'static str,
    /// Its risk.
    pub risk: Risk,
    /// Whether projects allow it unless told otherwise (deletes are opt-in).
    pub default_on: bool,
    /// JSON schema of its arguments.
    pub schema: Value,
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

/// Where a tool runs: the store and the invoking project.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The store.
    pub store: DocumentStore,
    /// The project the agent was invoked for.
    pub project: DocId,
}

fn obj(props: Value, required: &[&str]) -> Value {
    json!({ "type": "object", "properties": props, "required": required })
}

/// Every system tool.
pub fn catalog() -> Vec<ToolInfo> {
    let s = json!({"type": "string"});
    let n = json!({"type": "integer", "minimum": 0});
    let ops = json!({"type": "array", "items": {"type": "object"}, "description":
        "Patch operations, applied in order: {op: replace|insert_after|insert_before|delete|append|prepend, find, replace|text}, \
         {op: replace_section|insert_after_section|delete_section, heading, occurrence?, content|text}, \
         {op: replace_lines|insert_at_line|delete_lines, start|line, end, text} (1-based; issue several line ops in reverse order)"});
    let t = |name, description, risk, default_on, schema| ToolInfo {
        name,
        description,
        risk,
        default_on,
        schema,
    };
    vec![
        t("notes_create", "Create a note with a title and optional markdown content.", Risk::Safe, true,
          obj(json!({"title": s, "content": s, "project": s}), &["title"])),
        t("notes_query", "List notes (metadata, not content), newest first.", Risk::Safe, true,
          obj(json!({"project": s, "limit": n, "offset": n}), &[])),
        t("notes_read", "Read a note's content; startLine/endLine (1-based, inclusive) page through long notes. Returns totalLines, totalChars and truncated.", Risk::Safe, true,
          obj(json!({"id": s, "startLine": n, "endLine": n}), &["id"])),
        t("notes_update", "Update a note: a new title, a whole new content, or surgical patch operations.", Risk::Safe, true,
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
        t("tasks_update", "Update a task's name, status, due date or notes.", Risk::Safe, true,
          obj(json!({"id": s, "name": s, "status": s, "due": s, "notes": s}), &["id"])),
        t("tasks_delete", "Delete a task.", Risk::Risky, false, obj(json!({"id": s}), &["id"])),
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

/// Runs tool `name` with `args` in `ctx`. Every store call runs off the async threads.
pub async fn call(ctx: &ToolContext, name: &str, args: Value) -> Result<Value, ToolError> {
    let ctx = ctx.clone();
    let name = name.to_string();
    tokio::task::spawn_blocking(move || call_blocking(&ctx, &name, &args))
        .await
        .map_err(|e| ToolError::Invalid(format!("tool crashed: {e}")))?
}

struct Scope<'a> {
    store: &'a DocumentStore,
    home: DocId,
    visible: HashSet<DocId>,
}

impl Scope<'_> {
    /// A project the caller named (id, id prefix or name), if visible.
    fn project(&self, given: Option<&str>) -> Result<DocId, ToolError> {
        let Some(given) = given else {
            return Ok(self.home);
        };
        let by_id = given
            .parse::<DocId>()
            .ok()
            .or_else(|| self.store.resolve_blocking(Kind::Project, given).ok());
        let found = match by_id {
            Some(id) => Some(id),
            None => self
                .store
                .list_blocking(&Filter {
                    limit: 10_000,
                    ..Filter::new(Kind::Project)
                })?
                .data
                .into_iter()
                .find(|p| p.title == given && self.visible.contains(&p.id))
                .map(|p| p.id),
        };
        found
            .filter(|id| self.visible.contains(id))
            .ok_or(ToolError::NotFound {
                kind: "project",
                id: given.to_string(),
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
        if rec.deleted || !rec.value.project.is_some_and(|p| self.visible.contains(&p)) {
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
        if rec.deleted || !rec.value.project.is_some_and(|p| self.visible.contains(&p)) {
            return Err(missing());
        }
        Ok(rec)
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
                l.project
                    .is_some_and(|p| self.visible.contains(&p) && only.is_none_or(|o| o == p))
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
            .filter(|h| h.entity.project.is_some_and(|p| self.visible.contains(&p)))
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
        visible: ctx.store.subtree_blocking(ctx.project)?,
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
            let patch = TaskPatch {
                name: arg_str(args, "name").map(|n| TextEdit::Replace(n.to_string())),
                status: arg_str(args, "status")
                    .map(str::parse::<TaskStatus>)
                    .transpose()?,
                due: arg_str(args, "due").map(|d| Some(d.to_string())),
                notes: arg_str(args, "notes").map(|n| TextEdit::Replace(n.to_string())),
                ..TaskPatch::default()
            };
            let rec = store.update_blocking(rec.id, patch)?;
            Ok(
                json!({ "id": rec.id.to_string(), "name": rec.value.name, "status": rec.value.status.as_str() }),
            )
        }
        "tasks_delete" => {
            let rec = scope.task(need_str(args, "id")?)?;
            store.delete_blocking(Kind::Task, rec.id)?;
            Ok(json!({ "deleted": rec.id.to_string() }))
        }
        other => Err(ToolError::Unknown(other.to_string())),
    }
}

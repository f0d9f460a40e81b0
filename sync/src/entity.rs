//! Typed entities and their mapping onto plain Automerge documents.
//!
//! One document per entity. The root map holds `schema` ("hearth/1"), `kind`, `deleted`,
//! `created_at`, `updated_at` and the kind's fields; free text is an Automerge `Text`
//! object so concurrent edits merge character by character, short values are scalar
//! strings (last writer wins). `docs/SCHEMA.md` is the normative description.
//!
//! This module never touches SQLite; it reads and writes Automerge documents only.

use std::{collections::BTreeMap, fmt, str::FromStr};

use automerge::transaction::Transactable;
use automerge::{AutoCommit, ObjType, ReadDoc, ScalarValue, Value, ROOT};
use serde::{Deserialize, Serialize};

use crate::error::StoreError;

/// Value of the root `schema` key of every Hearth document.
pub const SCHEMA: &str = "hearth/1";

/// Largest note content, in bytes of UTF-8.
pub const MAX_NOTE_BYTES: usize = 1024 * 1024;

/// Above this many characters (old plus new), a whole-text replacement is not diffed.
const DIFF_LIMIT: usize = 64 * 1024;

/// Characters of a skill's description that its listed row carries: a listing stays
/// small whatever a description holds.
pub const LISTED_DESCRIPTION_CHARS: usize = 300;

/// A document id: 16 random bytes, written as 32 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DocId(pub [u8; 16]);

impl DocId {
    /// A fresh random id.
    pub fn random() -> Self {
        Self(*uuid::Uuid::new_v4().as_bytes())
    }
    /// The replication bucket of this id.
    pub fn bucket(&self) -> u8 {
        self.0[0]
    }
}

impl fmt::Display for DocId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for DocId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DocId({self})")
    }
}

impl FromStr for DocId {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || StoreError::invalid("id", format!("{s:?} is not 32 hex digits"));
        if s.len() != 32 || !s.is_ascii() {
            return Err(bad());
        }
        let mut out = [0u8; 16];
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(Self(out))
    }
}

/// The kinds of replicated entity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A node of the project tree.
    Project,
    /// A markdown note.
    Note,
    /// A task, possibly a subtask or recurring.
    Task,
    /// A contact.
    Contact,
    /// A skill (reusable instructions for the agent).
    Skill,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 5] = [
        Kind::Project,
        Kind::Note,
        Kind::Task,
        Kind::Contact,
        Kind::Skill,
    ];

    /// The name stored in documents and tables.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Project => "project",
            Kind::Note => "note",
            Kind::Task => "task",
            Kind::Contact => "contact",
            Kind::Skill => "skill",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Kind {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Kind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| StoreError::invalid("kind", format!("unknown kind {s:?}")))
    }
}

/// An entity as stored: its id, bookkeeping and typed value.
#[derive(Debug, Clone, PartialEq)]
pub struct Record<E> {
    /// Document id.
    pub id: DocId,
    /// Creation time, ms since the Unix epoch.
    pub created_at: i64,
    /// Last local or merged update, ms since the Unix epoch.
    pub updated_at: i64,
    /// Whether the entity was deleted (the document stays as a tombstone).
    pub deleted: bool,
    /// The typed fields.
    pub value: E,
}

/// The queryable projection of an entity, written to the derived tables.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Derived {
    /// Owning project.
    pub project: Option<DocId>,
    /// Title, name.
    pub title: String,
    /// Task status.
    pub status: Option<String>,
    /// Task due date.
    pub due: Option<String>,
    /// Parent task or project.
    pub parent: Option<DocId>,
    /// What a listing shows besides the fields above.
    pub details: Details,
    /// Text for full-text search (besides the title).
    pub body: String,
}

/// What a listing shows of an entity besides its title, project, status, due date and
/// parent, by kind. Kept in the derived row (`entities.details`, JSON tagged with the
/// kind) and read back with it, so a listing never loads a document.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Details {
    /// Nothing more (projects, notes, placements).
    #[default]
    None,
    /// A task's recurrence.
    Task {
        /// `3d`, `1w`…; set on a recurring task.
        #[serde(default)]
        interval: Option<String>,
        /// The task is a job the agent runs on the hub (its name and notes the prompt).
        #[serde(default)]
        agent_job: bool,
    },
    /// How to reach a contact, where they work, how they are grouped.
    Contact {
        /// Email address.
        #[serde(default)]
        email: Option<String>,
        /// Phone number.
        #[serde(default)]
        phone: Option<String>,
        /// Company.
        #[serde(default)]
        company: Option<String>,
        /// Job title (the row's `title` is the contact's name).
        #[serde(default)]
        job_title: Option<String>,
        /// Tags.
        #[serde(default)]
        tags: Vec<String>,
    },
    /// What a skill is for.
    Skill {
        /// The description's first [`LISTED_DESCRIPTION_CHARS`] characters (cut with `…`).
        #[serde(default)]
        description: String,
    },
}

/// A typed entity stored as one Automerge document.
pub trait Entity: Sized + Clone + fmt::Debug + Send + 'static {
    /// The kind of document.
    const KIND: Kind;
    /// Writes every field into a new document.
    fn write_new(&self, doc: &mut AutoCommit) -> Result<(), StoreError>;
    /// Reads the fields back; missing fields read as empty, so peers' documents written
    /// by other implementations still load.
    fn read(doc: &AutoCommit) -> Self;
    /// Checks field values (the store calls it before every local commit).
    fn validate(&self) -> Result<(), StoreError>;
    /// The queryable projection.
    fn derive(&self) -> Derived;
    /// Sets the parent that the store keeps outside this entity's document: a project's
    /// place in the tree lives in its placement document (`crate::placement`). Kinds
    /// whose references all live in their own document ignore it.
    fn set_placed_parent(&mut self, _parent: Option<DocId>) {}
}

/// A change to one field of a document.
#[derive(Debug, Clone, PartialEq)]
pub enum TextEdit {
    /// Replace the whole text. Diffed into splices (`update_text`), so concurrent edits to
    /// other parts still merge, but prefer [`TextEdit::Splice`] when the edit is known.
    Replace(String),
    /// Delete `delete` characters at `pos` (Unicode scalar values) and insert `insert`.
    Splice {
        /// Position in characters.
        pos: usize,
        /// Characters to delete.
        delete: usize,
        /// Text to insert.
        insert: String,
    },
    /// Append text at the end.
    Append(String),
    /// Several splices in order, each against the text the previous ones left (the
    /// agent's patch operations); applied as one change.
    Splices(Vec<TextSplice>),
}

/// One splice of [`TextEdit::Splices`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextSplice {
    /// Position in characters.
    pub pos: usize,
    /// Characters to delete.
    pub delete: usize,
    /// Text to insert.
    pub insert: String,
}

/// One field edit; typed patches turn into a list of these.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldEdit {
    /// Edit a text field.
    Text(&'static str, TextEdit),
    /// Set or clear a scalar string field.
    Str(&'static str, Option<String>),
    /// Replace a list of strings.
    List(&'static str, Vec<String>),
    /// Replace a map of strings.
    Map(&'static str, BTreeMap<String, String>),
    /// Set a boolean field.
    Bool(&'static str, bool),
}

/// A typed patch for one kind of entity.
pub trait Patch: Send + 'static {
    /// The entity it patches.
    type Entity: Entity;
    /// The field edits it makes to the entity's own document.
    fn into_edits(self) -> Vec<FieldEdit>;
    /// Takes the move in the project tree this patch makes (`Some(None)`: to the top
    /// level), which the store writes to the project's placement document, not to the
    /// project's own. Patches of other kinds make none.
    fn take_placement(&mut self) -> Option<Option<DocId>> {
        None
    }
}

// ---- field helpers ---------------------------------------------------------------------

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Reads a text field (an Automerge Text, or a scalar string written by another client).
pub(crate) fn read_text(doc: &AutoCommit, key: &str) -> String {
    match doc.get(ROOT, key) {
        Ok(Some((Value::Object(ObjType::Text), obj))) => doc.text(&obj).unwrap_or_default(),
        Ok(Some((Value::Scalar(s), _))) => match s.as_ref() {
            ScalarValue::Str(s) => s.to_string(),
            _ => String::new(),
        },
        _ => String::new(),
    }
}

pub(crate) fn read_str(doc: &AutoCommit, key: &str) -> Option<String> {
    match doc.get(ROOT, key) {
        Ok(Some((Value::Scalar(s), _))) => match s.as_ref() {
            ScalarValue::Str(s) => Some(s.to_string()),
            _ => None,
        },
        Ok(Some((Value::Object(ObjType::Text), obj))) => doc.text(&obj).ok(),
        _ => None,
    }
}

pub(crate) fn read_i64(doc: &AutoCommit, key: &str) -> i64 {
    match doc.get(ROOT, key) {
        Ok(Some((Value::Scalar(s), _))) => match s.as_ref() {
            ScalarValue::Int(i) | ScalarValue::Timestamp(i) => *i,
            ScalarValue::Uint(u) => *u as i64,
            _ => 0,
        },
        _ => 0,
    }
}

pub(crate) fn read_bool(doc: &AutoCommit, key: &str) -> bool {
    matches!(doc.get(ROOT, key), Ok(Some((Value::Scalar(s), _))) if matches!(s.as_ref(), ScalarValue::Boolean(true)))
}

pub(crate) fn read_id(doc: &AutoCommit, key: &str) -> Option<DocId> {
    read_str(doc, key).and_then(|s| s.parse().ok())
}

fn read_list(doc: &AutoCommit, key: &str) -> Vec<String> {
    match doc.get(ROOT, key) {
        Ok(Some((Value::Object(ObjType::List), obj))) => (0..doc.length(&obj))
            .filter_map(|i| match doc.get(&obj, i) {
                Ok(Some((Value::Scalar(s), _))) => match s.as_ref() {
                    ScalarValue::Str(s) => Some(s.to_string()),
                    _ => None,
                },
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn read_map(doc: &AutoCommit, key: &str) -> BTreeMap<String, String> {
    match doc.get(ROOT, key) {
        Ok(Some((Value::Object(ObjType::Map), obj))) => doc
            .keys(&obj)
            .filter_map(|k| match doc.get(&obj, k.as_str()) {
                Ok(Some((Value::Scalar(s), _))) => match s.as_ref() {
                    ScalarValue::Str(v) => Some((k.clone(), v.to_string())),
                    _ => None,
                },
                _ => None,
            })
            .collect(),
        _ => BTreeMap::new(),
    }
}

pub(crate) fn write_header(doc: &mut AutoCommit, kind: Kind, now: i64) -> Result<(), StoreError> {
    doc.put(ROOT, "schema", SCHEMA)?;
    doc.put(ROOT, "kind", kind.as_str())?;
    doc.put(ROOT, "deleted", false)?;
    doc.put(ROOT, "created_at", ScalarValue::Timestamp(now))?;
    doc.put(ROOT, "updated_at", ScalarValue::Timestamp(now))?;
    Ok(())
}

fn write_text(doc: &mut AutoCommit, key: &str, value: &str) -> Result<(), StoreError> {
    let obj = doc.put_object(ROOT, key, ObjType::Text)?;
    doc.splice_text(&obj, 0, 0, value)?;
    Ok(())
}

fn write_str(doc: &mut AutoCommit, key: &str, value: Option<&str>) -> Result<(), StoreError> {
    match value {
        Some(v) => doc.put(ROOT, key, v)?,
        None => doc.put(ROOT, key, ScalarValue::Null)?,
    }
    Ok(())
}

fn write_id(doc: &mut AutoCommit, key: &str, value: Option<DocId>) -> Result<(), StoreError> {
    write_str(doc, key, value.map(|v| v.to_string()).as_deref())
}

fn write_list(doc: &mut AutoCommit, key: &str, values: &[String]) -> Result<(), StoreError> {
    let obj = doc.put_object(ROOT, key, ObjType::List)?;
    for (i, v) in values.iter().enumerate() {
        doc.insert(&obj, i, v.as_str())?;
    }
    Ok(())
}

fn write_map(
    doc: &mut AutoCommit,
    key: &str,
    values: &BTreeMap<String, String>,
) -> Result<(), StoreError> {
    let obj = doc.put_object(ROOT, key, ObjType::Map)?;
    for (k, v) in values {
        doc.put(&obj, k.as_str(), v.as_str())?;
    }
    Ok(())
}

fn splice_checked(
    doc: &mut AutoCommit,
    obj: &automerge::ObjId,
    key: &'static str,
    pos: usize,
    delete: usize,
    insert: &str,
) -> Result<(), StoreError> {
    let len = doc.length(obj);
    if pos > len || pos.saturating_add(delete) > len {
        return Err(StoreError::invalid(
            key,
            format!("splice {pos}+{delete} is outside the text of {len} characters"),
        ));
    }
    doc.splice_text(obj, pos, delete as isize, insert)?;
    Ok(())
}

/// Applies one field edit to a document inside the caller's transaction.
pub(crate) fn apply_edit(doc: &mut AutoCommit, edit: &FieldEdit) -> Result<(), StoreError> {
    match edit {
        FieldEdit::Text(key, text) => {
            let obj = match doc.get(ROOT, *key)? {
                Some((Value::Object(ObjType::Text), obj)) => obj,
                // A missing or scalar field becomes a Text object holding the old value.
                _ => {
                    let old = read_text(doc, key);
                    let obj = doc.put_object(ROOT, *key, ObjType::Text)?;
                    doc.splice_text(&obj, 0, 0, &old)?;
                    obj
                }
            };
            let len = doc.length(&obj);
            match text {
                // Diffing is quadratic in the worst case and runs under the store's lock:
                // past a size, replace the text whole (merges worse, costs linear time).
                TextEdit::Replace(new) if len + new.len() > DIFF_LIMIT => {
                    doc.splice_text(&obj, 0, len as isize, new)?
                }
                TextEdit::Replace(new) => doc.update_text(&obj, new)?,
                TextEdit::Append(more) => doc.splice_text(&obj, len, 0, more)?,
                TextEdit::Splice {
                    pos,
                    delete,
                    insert,
                } => splice_checked(doc, &obj, key, *pos, *delete, insert)?,
                TextEdit::Splices(splices) => {
                    for sp in splices {
                        splice_checked(doc, &obj, key, sp.pos, sp.delete, &sp.insert)?;
                    }
                }
            }
        }
        FieldEdit::Str(key, value) => write_str(doc, key, value.as_deref())?,
        FieldEdit::List(key, values) => write_list(doc, key, values)?,
        FieldEdit::Map(key, values) => write_map(doc, key, values)?,
        FieldEdit::Bool(key, value) => doc.put(ROOT, *key, *value)?,
    }
    Ok(())
}

// ---- validation --------------------------------------------------------------------------

/// Checks a slug: lowercase ASCII letters, digits and single inner hyphens, 1 to 64 chars.
pub fn validate_slug(field: &'static str, s: &str) -> Result<(), StoreError> {
    let ok = !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
        && !s.contains("--");
    if ok {
        Ok(())
    } else {
        Err(StoreError::invalid(
            field,
            format!("{s:?} must be 1-64 lowercase letters, digits and single hyphens"),
        ))
    }
}

fn validate_nonempty(field: &'static str, s: &str) -> Result<(), StoreError> {
    if s.trim().is_empty() {
        Err(StoreError::invalid(field, "must not be empty"))
    } else {
        Ok(())
    }
}

/// Checks a due date: `YYYY-MM-DD`, optionally followed by `THH:MM` (and `:SS`).
pub fn validate_due(s: &str) -> Result<(), StoreError> {
    let bad = || {
        StoreError::invalid(
            "due",
            format!("{s:?} is not YYYY-MM-DD or YYYY-MM-DDTHH:MM"),
        )
    };
    let (date, time) = match s.split_once('T') {
        Some((d, t)) => (d, Some(t)),
        None => (s, None),
    };
    let parts: Vec<&str> = date.split('-').collect();
    let [y, m, d] = parts.as_slice() else {
        return Err(bad());
    };
    let num = |p: &str, len: usize, lo: u32, hi: u32| {
        p.len() == len && p.bytes().all(|b| b.is_ascii_digit()) && {
            let v: u32 = p.parse().unwrap_or(0);
            (lo..=hi).contains(&v)
        }
    };
    if !(num(y, 4, 1, 9999) && num(m, 2, 1, 12) && num(d, 2, 1, 31)) {
        return Err(bad());
    }
    if let Some(t) = time {
        let parts: Vec<&str> = t.split(':').collect();
        let ok = match parts.as_slice() {
            [h, mi] => num(h, 2, 0, 23) && num(mi, 2, 0, 59),
            [h, mi, sec] => num(h, 2, 0, 23) && num(mi, 2, 0, 59) && num(sec, 2, 0, 59),
            _ => false,
        };
        if !ok {
            return Err(bad());
        }
    }
    Ok(())
}

/// Checks a recurrence interval: a positive count and a unit, `h` (hours, for agent
/// jobs), `d`, `w`, `m` or `y` (`3d`).
pub fn validate_interval(s: &str) -> Result<(), StoreError> {
    let ok = s.len() >= 2
        && s[..s.len() - 1].bytes().all(|b| b.is_ascii_digit())
        && s[..s.len() - 1].parse::<u32>().is_ok_and(|n| n > 0)
        && matches!(s.as_bytes()[s.len() - 1], b'h' | b'd' | b'w' | b'm' | b'y');
    if ok {
        Ok(())
    } else {
        Err(StoreError::invalid(
            "interval",
            format!("{s:?} is not like 6h, 1d, 2w, 1m or 1y"),
        ))
    }
}

// ---- project -------------------------------------------------------------------------------

/// A node of the project tree.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Project {
    /// Slug: lowercase letters, digits, hyphens.
    pub name: String,
    /// Parent project, `None` at the root. Kept in the project's placement document, not
    /// in its own (see `crate::placement`): the store reads and writes it there.
    pub parent: Option<DocId>,
    /// Instructions for the agent working in this project.
    pub instructions: String,
    /// Archived: kept with its documents, hidden from default listings.
    pub archived: bool,
}

impl Entity for Project {
    const KIND: Kind = Kind::Project;
    fn write_new(&self, doc: &mut AutoCommit) -> Result<(), StoreError> {
        // No `parent`: the store writes it to the project's placement.
        write_str(doc, "name", Some(&self.name))?;
        doc.put(ROOT, "archived", self.archived)?;
        write_text(doc, "instructions", &self.instructions)
    }
    fn read(doc: &AutoCommit) -> Self {
        Self {
            name: read_str(doc, "name").unwrap_or_default(),
            // A document written before placements keeps its parent here; the store
            // replaces it with the placement's when it holds one.
            parent: read_id(doc, "parent"),
            instructions: read_text(doc, "instructions"),
            archived: read_bool(doc, "archived"),
        }
    }
    fn validate(&self) -> Result<(), StoreError> {
        validate_slug("name", &self.name)
    }
    fn derive(&self) -> Derived {
        Derived {
            title: self.name.clone(),
            parent: self.parent,
            // Listed as a status, so a listing can tell archived projects without a load.
            status: self.archived.then(|| "archived".to_string()),
            body: self.instructions.clone(),
            ..Derived::default()
        }
    }
    fn set_placed_parent(&mut self, parent: Option<DocId>) {
        self.parent = parent;
    }
}

/// Changes to a project.
#[derive(Debug, Clone, Default)]
pub struct ProjectPatch {
    /// New name.
    pub name: Option<String>,
    /// New parent (`Some(None)` moves it to the root); written to the placement.
    pub parent: Option<Option<DocId>>,
    /// Instruction edit.
    pub instructions: Option<TextEdit>,
    /// Archive (`true`) or restore (`false`).
    pub archived: Option<bool>,
}

impl Patch for ProjectPatch {
    type Entity = Project;
    fn into_edits(self) -> Vec<FieldEdit> {
        let mut out = Vec::new();
        if let Some(v) = self.name {
            out.push(FieldEdit::Str("name", Some(v)));
        }
        if let Some(v) = self.instructions {
            out.push(FieldEdit::Text("instructions", v));
        }
        if let Some(v) = self.archived {
            out.push(FieldEdit::Bool("archived", v));
        }
        out
    }
    fn take_placement(&mut self) -> Option<Option<DocId>> {
        self.parent.take()
    }
}

// ---- note ----------------------------------------------------------------------------------

/// A markdown note.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Note {
    /// Owning project.
    pub project: Option<DocId>,
    /// Title.
    pub title: String,
    /// Markdown content.
    pub content: String,
}

impl Entity for Note {
    const KIND: Kind = Kind::Note;
    fn write_new(&self, doc: &mut AutoCommit) -> Result<(), StoreError> {
        write_id(doc, "project", self.project)?;
        write_text(doc, "title", &self.title)?;
        write_text(doc, "content", &self.content)
    }
    fn read(doc: &AutoCommit) -> Self {
        Self {
            project: read_id(doc, "project"),
            title: read_text(doc, "title"),
            content: read_text(doc, "content"),
        }
    }
    fn validate(&self) -> Result<(), StoreError> {
        validate_nonempty("title", &self.title)?;
        if self.content.len() > MAX_NOTE_BYTES {
            return Err(StoreError::invalid(
                "content",
                format!(
                    "a note holds at most {} MiB of text; split it into several notes",
                    MAX_NOTE_BYTES / (1024 * 1024)
                ),
            ));
        }
        Ok(())
    }
    fn derive(&self) -> Derived {
        Derived {
            project: self.project,
            title: self.title.clone(),
            body: self.content.clone(),
            ..Derived::default()
        }
    }
}

/// Changes to a note.
#[derive(Debug, Clone, Default)]
pub struct NotePatch {
    /// Move to another project (`Some(None)`: no project).
    pub project: Option<Option<DocId>>,
    /// Title edit.
    pub title: Option<TextEdit>,
    /// Content edit.
    pub content: Option<TextEdit>,
}

impl Patch for NotePatch {
    type Entity = Note;
    fn into_edits(self) -> Vec<FieldEdit> {
        let mut out = Vec::new();
        if let Some(v) = self.project {
            out.push(FieldEdit::Str("project", v.map(|p| p.to_string())));
        }
        if let Some(v) = self.title {
            out.push(FieldEdit::Text("title", v));
        }
        if let Some(v) = self.content {
            out.push(FieldEdit::Text("content", v));
        }
        out
    }
}

// ---- task ----------------------------------------------------------------------------------

/// The state of a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TaskStatus {
    /// Not done yet.
    #[default]
    Incomplete,
    /// Done.
    Complete,
    /// Will not be done.
    Cancelled,
    /// Repeats every `interval`.
    Recurring,
}

impl TaskStatus {
    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Incomplete => "incomplete",
            Self::Complete => "complete",
            Self::Cancelled => "cancelled",
            Self::Recurring => "recurring",
        }
    }
}

impl FromStr for TaskStatus {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "incomplete" => Self::Incomplete,
            "complete" => Self::Complete,
            "cancelled" => Self::Cancelled,
            "recurring" => Self::Recurring,
            _ => {
                return Err(StoreError::invalid(
                    "status",
                    format!("{s:?} is not incomplete, complete, cancelled or recurring"),
                ))
            }
        })
    }
}

impl fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A task; subtasks name a parent task (two levels at most).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Task {
    /// Owning project.
    pub project: Option<DocId>,
    /// What to do.
    pub name: String,
    /// State.
    pub status: TaskStatus,
    /// Due date, `YYYY-MM-DD[THH:MM]`.
    pub due: Option<String>,
    /// Free-form notes.
    pub notes: String,
    /// Parent task for a subtask.
    pub parent: Option<DocId>,
    /// Recurrence (`6h`, `1d`, `2w`, `1m`, `1y`), required when recurring.
    pub interval: Option<String>,
    /// A job the agent runs on the hub: its name and notes are the prompt, its
    /// interval (from its due time, if any) when it runs. Run state lives on the hub,
    /// never here, so runs do not churn every device.
    pub agent_job: bool,
}

impl Entity for Task {
    const KIND: Kind = Kind::Task;
    fn write_new(&self, doc: &mut AutoCommit) -> Result<(), StoreError> {
        write_id(doc, "project", self.project)?;
        write_text(doc, "name", &self.name)?;
        write_str(doc, "status", Some(self.status.as_str()))?;
        write_str(doc, "due", self.due.as_deref())?;
        write_text(doc, "notes", &self.notes)?;
        write_id(doc, "parent", self.parent)?;
        write_str(doc, "interval", self.interval.as_deref())?;
        if self.agent_job {
            doc.put(ROOT, "agent_job", true)?;
        }
        Ok(())
    }
    fn read(doc: &AutoCommit) -> Self {
        Self {
            project: read_id(doc, "project"),
            name: read_text(doc, "name"),
            status: read_str(doc, "status")
                .and_then(|s| s.parse().ok())
                .unwrap_or_default(),
            due: read_str(doc, "due"),
            notes: read_text(doc, "notes"),
            parent: read_id(doc, "parent"),
            interval: read_str(doc, "interval"),
            agent_job: read_bool(doc, "agent_job"),
        }
    }
    fn validate(&self) -> Result<(), StoreError> {
        validate_nonempty("name", &self.name)?;
        if let Some(due) = &self.due {
            validate_due(due)?;
        }
        if let Some(interval) = &self.interval {
            validate_interval(interval)?;
        }
        if self.status == TaskStatus::Recurring && self.interval.is_none() {
            return Err(StoreError::invalid(
                "interval",
                "a recurring task needs an interval",
            ));
        }
        Ok(())
    }
    fn derive(&self) -> Derived {
        Derived {
            project: self.project,
            title: self.name.clone(),
            status: Some(self.status.as_str().to_string()),
            due: self.due.clone(),
            parent: self.parent,
            details: Details::Task {
                interval: self.interval.clone(),
                agent_job: self.agent_job,
            },
            body: self.notes.clone(),
        }
    }
}

/// Changes to a task.
#[derive(Debug, Clone, Default)]
pub struct TaskPatch {
    /// Move to another project.
    pub project: Option<Option<DocId>>,
    /// Name edit.
    pub name: Option<TextEdit>,
    /// New status.
    pub status: Option<TaskStatus>,
    /// New due date (`Some(None)` clears it).
    pub due: Option<Option<String>>,
    /// Notes edit.
    pub notes: Option<TextEdit>,
    /// New parent task.
    pub parent: Option<Option<DocId>>,
    /// New interval.
    pub interval: Option<Option<String>>,
    /// Make it an agent job, or a person's to-do again.
    pub agent_job: Option<bool>,
}

impl Patch for TaskPatch {
    type Entity = Task;
    fn into_edits(self) -> Vec<FieldEdit> {
        let mut out = Vec::new();
        if let Some(v) = self.project {
            out.push(FieldEdit::Str("project", v.map(|p| p.to_string())));
        }
        if let Some(v) = self.name {
            out.push(FieldEdit::Text("name", v));
        }
        if let Some(v) = self.status {
            out.push(FieldEdit::Str("status", Some(v.as_str().to_string())));
        }
        if let Some(v) = self.due {
            out.push(FieldEdit::Str("due", v));
        }
        if let Some(v) = self.notes {
            out.push(FieldEdit::Text("notes", v));
        }
        if let Some(v) = self.parent {
            out.push(FieldEdit::Str("parent", v.map(|p| p.to_string())));
        }
        if let Some(v) = self.interval {
            out.push(FieldEdit::Str("interval", v));
        }
        if let Some(v) = self.agent_job {
            out.push(FieldEdit::Bool("agent_job", v));
        }
        out
    }
}

impl Task {
    /// Whether marking it done moves its due on instead of completing it: a person's
    /// recurring task (an agent job is completed, which ends its schedule).
    pub fn repeats_when_done(&self) -> bool {
        self.status == TaskStatus::Recurring && self.interval.is_some() && !self.agent_job
    }

    /// The one meaning of "done", whoever marks it (the API, the agent, the CLI): a
    /// recurring task's due moves on by its interval ([`next_due`]) and it stays open;
    /// any other task becomes `complete`. `now` is the local `YYYY-MM-DD[THH:MM]`.
    pub fn done_patch(&self, now: &str) -> TaskPatch {
        match (&self.interval, self.repeats_when_done()) {
            (Some(interval), true) => TaskPatch {
                due: Some(Some(next_due(self.due.as_deref(), interval, now))),
                ..TaskPatch::default()
            },
            _ => TaskPatch {
                status: Some(TaskStatus::Complete),
                ..TaskPatch::default()
            },
        }
    }
}

/// A due value split: its date, and its time of day if it has one (with whether the
/// time carried seconds, so the answer keeps the form it was given in).
fn split_due(s: &str) -> Option<(chrono::NaiveDate, Option<(chrono::NaiveTime, bool)>)> {
    validate_due(s).ok()?;
    let (date, time) = match s.split_once('T') {
        Some((d, t)) => (d, Some(t)),
        None => (s, None),
    };
    let n = |p: &str| p.parse::<u32>().ok();
    let mut ymd = date.split('-').map(n);
    let (y, m, d) = (ymd.next()??, ymd.next()??, ymd.next()??);
    let date = chrono::NaiveDate::from_ymd_opt(i32::try_from(y).ok()?, m, d)?;
    let time = match time {
        None => None,
        Some(t) => {
            let mut hms = t.split(':').map(n);
            let (h, mi) = (hms.next()??, hms.next()??);
            let sec = hms.next().flatten();
            Some((
                chrono::NaiveTime::from_hms_opt(h, mi, sec.unwrap_or(0))?,
                sec.is_some(),
            ))
        }
    };
    Some((date, time))
}

fn format_due(date: chrono::NaiveDate, time: Option<(chrono::NaiveTime, bool)>) -> String {
    use chrono::{Datelike, Timelike};
    let day = format!("{:04}-{:02}-{:02}", date.year(), date.month(), date.day());
    match time {
        None => day,
        Some((t, false)) => format!("{day}T{:02}:{:02}", t.hour(), t.minute()),
        Some((t, true)) => format!("{day}T{:02}:{:02}:{:02}", t.hour(), t.minute(), t.second()),
    }
}

/// The due value a recurring task gets when it is done at `today` (`YYYY-MM-DD`, or
/// `YYYY-MM-DDTHH:MM` — the time matters for hour intervals only).
///
/// Days, weeks, months and years move the due date on, counted from the original date
/// each time (so the 31st stays the 31st where the month has one, else the month's last
/// day), until it is after today; the time of day is kept. Hours move the due time on
/// (a date-only due counts from 09:00, the hour a date-only due falls due on the hub)
/// until it is after now. No due: counted from today (for hours, from now). An interval
/// or `today` that does not parse leaves the due as it was (today when there was none):
/// callers pass a validated task.
pub fn next_due(due: Option<&str>, interval: &str, today: &str) -> String {
    use chrono::{Duration, Months, NaiveTime};
    let unchanged = || due.unwrap_or(today).to_string();
    let (Ok(()), Some((now_date, now_time))) = (validate_interval(interval), split_due(today))
    else {
        return unchanged();
    };
    let (count, unit) = interval.split_at(interval.len() - 1);
    let Ok(count) = count.parse::<u32>() else {
        return unchanged();
    };
    let (from_date, from_time) = match due.and_then(split_due) {
        Some(d) => d,
        None if unit == "h" => (now_date, now_time),
        None => (now_date, None),
    };
    match unit {
        "h" => {
            let nine = NaiveTime::from_hms_opt(9, 0, 0).unwrap_or(NaiveTime::MIN);
            let (t, secs) = from_time.unwrap_or((nine, false));
            let from = from_date.and_time(t);
            let now = now_date.and_time(now_time.map_or(NaiveTime::MIN, |(t, _)| t));
            let step = i64::from(count) * 3600;
            let behind = (now - from).num_seconds();
            let k = if behind < 0 { 1 } else { behind / step + 1 };
            let next = from + Duration::seconds(k * step);
            format_due(next.date(), Some((next.time(), secs)))
        }
        "d" | "w" => {
            let days = i64::from(count) * if unit == "w" { 7 } else { 1 };
            let behind = (now_date - from_date).num_days();
            let k = if behind < 0 { 1 } else { behind / days + 1 };
            format_due(from_date + Duration::days(k * days), from_time)
        }
        _ => {
            use chrono::Datelike;
            let months = count * if unit == "y" { 12 } else { 1 };
            let behind = (now_date.year() - from_date.year()) * 12 + now_date.month() as i32
                - from_date.month() as i32;
            // A first guess one step short at most, then on until after today.
            let mut k = (behind.max(0) as u32 / months).max(1);
            loop {
                let Some(date) = k
                    .checked_mul(months)
                    .and_then(|m| from_date.checked_add_months(Months::new(m)))
                else {
                    return unchanged();
                };
                if date > now_date {
                    return format_due(date, from_time);
                }
                k += 1;
            }
        }
    }
}

// ---- contact -------------------------------------------------------------------------------

/// A contact.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Contact {
    /// Full name.
    pub name: String,
    /// Email address.
    pub email: Option<String>,
    /// Phone number.
    pub phone: Option<String>,
    /// Company.
    pub company: Option<String>,
    /// Job title.
    pub title: Option<String>,
    /// Website.
    pub website: Option<String>,
    /// Postal address.
    pub address: Option<String>,
    /// Free-form notes.
    pub notes: String,
    /// Tags.
    pub tags: Vec<String>,
    /// Other key/value data.
    pub metadata: BTreeMap<String, String>,
}

const CONTACT_SCALARS: [&str; 6] = ["email", "phone", "company", "title", "website", "address"];

impl Contact {
    fn scalars(&self) -> [&Option<String>; 6] {
        [
            &self.email,
            &self.phone,
            &self.company,
            &self.title,
            &self.website,
            &self.address,
        ]
    }
}

impl Entity for Contact {
    const KIND: Kind = Kind::Contact;
    fn write_new(&self, doc: &mut AutoCommit) -> Result<(), StoreError> {
        write_str(doc, "name", Some(&self.name))?;
        for (key, value) in CONTACT_SCALARS.iter().zip(self.scalars()) {
            write_str(doc, key, value.as_deref())?;
        }
        write_text(doc, "notes", &self.notes)?;
        write_list(doc, "tags", &self.tags)?;
        write_map(doc, "metadata", &self.metadata)
    }
    fn read(doc: &AutoCommit) -> Self {
        Self {
            name: read_str(doc, "name").unwrap_or_default(),
            email: read_str(doc, "email"),
            phone: read_str(doc, "phone"),
            company: read_str(doc, "company"),
            title: read_str(doc, "title"),
            website: read_str(doc, "website"),
            address: read_str(doc, "address"),
            notes: read_text(doc, "notes"),
            tags: read_list(doc, "tags"),
            metadata: read_map(doc, "metadata"),
        }
    }
    fn validate(&self) -> Result<(), StoreError> {
        validate_nonempty("name", &self.name)?;
        if let Some(email) = &self.email {
            if !email.contains('@') {
                return Err(StoreError::invalid("email", format!("{email:?} has no @")));
            }
        }
        Ok(())
    }
    fn derive(&self) -> Derived {
        let mut body = String::new();
        for v in self.scalars().into_iter().flatten() {
            body.push_str(v);
            body.push('\n');
        }
        body.push_str(&self.tags.join(" "));
        body.push('\n');
        body.push_str(&self.notes);
        Derived {
            title: self.name.clone(),
            details: Details::Contact {
                email: self.email.clone(),
                phone: self.phone.clone(),
                company: self.company.clone(),
                job_title: self.title.clone(),
                tags: self.tags.clone(),
            },
            body,
            ..Derived::default()
        }
    }
}

/// Changes to a contact; `Some(None)` clears an optional field.
#[derive(Debug, Clone, Default)]
pub struct ContactPatch {
    /// New name.
    pub name: Option<String>,
    /// New email.
    pub email: Option<Option<String>>,
    /// New phone.
    pub phone: Option<Option<String>>,
    /// New company.
    pub company: Option<Option<String>>,
    /// New job title.
    pub title: Option<Option<String>>,
    /// New website.
    pub website: Option<Option<String>>,
    /// New address.
    pub address: Option<Option<String>>,
    /// Notes edit.
    pub notes: Option<TextEdit>,
    /// New tags.
    pub tags: Option<Vec<String>>,
    /// New metadata.
    pub metadata: Option<BTreeMap<String, String>>,
}

impl Patch for ContactPatch {
    type Entity = Contact;
    fn into_edits(self) -> Vec<FieldEdit> {
        let mut out = Vec::new();
        if let Some(v) = self.name {
            out.push(FieldEdit::Str("name", Some(v)));
        }
        let scalars = [
            self.email,
            self.phone,
            self.company,
            self.title,
            self.website,
            self.address,
        ];
        for (key, value) in CONTACT_SCALARS.into_iter().zip(scalars) {
            if let Some(v) = value {
                out.push(FieldEdit::Str(key, v));
            }
        }
        if let Some(v) = self.notes {
            out.push(FieldEdit::Text("notes", v));
        }
        if let Some(v) = self.tags {
            out.push(FieldEdit::List("tags", v));
        }
        if let Some(v) = self.metadata {
            out.push(FieldEdit::Map("metadata", v));
        }
        out
    }
}

// ---- skill ---------------------------------------------------------------------------------

/// A skill: named instructions the agent can load.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Skill {
    /// Owning project; `None` makes the skill available in every project.
    pub project: Option<DocId>,
    /// Slug: lowercase letters, digits, hyphens.
    pub name: String,
    /// One-line description.
    pub description: String,
    /// The instructions (markdown, may use `$ARGUMENTS`).
    pub body: String,
}

impl Entity for Skill {
    const KIND: Kind = Kind::Skill;
    fn write_new(&self, doc: &mut AutoCommit) -> Result<(), StoreError> {
        write_id(doc, "project", self.project)?;
        write_str(doc, "name", Some(&self.name))?;
        write_text(doc, "description", &self.description)?;
        write_text(doc, "body", &self.body)
    }
    fn read(doc: &AutoCommit) -> Self {
        Self {
            project: read_id(doc, "project"),
            name: read_str(doc, "name").unwrap_or_default(),
            description: read_text(doc, "description"),
            body: read_text(doc, "body"),
        }
    }
    fn validate(&self) -> Result<(), StoreError> {
        validate_slug("name", &self.name)
    }
    fn derive(&self) -> Derived {
        Derived {
            project: self.project,
            title: self.name.clone(),
            details: Details::Skill {
                description: listed_description(&self.description),
            },
            body: format!("{}\n{}", self.description, self.body),
            ..Derived::default()
        }
    }
}

/// The start of a skill's description that its listed row carries.
fn listed_description(description: &str) -> String {
    match description.char_indices().nth(LISTED_DESCRIPTION_CHARS) {
        None => description.to_string(),
        Some((end, _)) => format!("{}…", description[..end].trim_end()),
    }
}

/// Changes to a skill.
#[derive(Debug, Clone, Default)]
pub struct SkillPatch {
    /// Move to another project (`Some(None)`: available in every project).
    pub project: Option<Option<DocId>>,
    /// New name.
    pub name: Option<String>,
    /// Description edit.
    pub description: Option<TextEdit>,
    /// Body edit.
    pub body: Option<TextEdit>,
}

impl Patch for SkillPatch {
    type Entity = Skill;
    fn into_edits(self) -> Vec<FieldEdit> {
        let mut out = Vec::new();
        if let Some(v) = self.project {
            out.push(FieldEdit::Str("project", v.map(|p| p.to_string())));
        }
        if let Some(v) = self.name {
            out.push(FieldEdit::Str("name", Some(v)));
        }
        if let Some(v) = self.description {
            out.push(FieldEdit::Text("description", v));
        }
        if let Some(v) = self.body {
            out.push(FieldEdit::Text("body", v));
        }
        out
    }
}

/// Reads the derived projection of any document, whatever its kind.
pub(crate) fn derive_any(kind: Kind, doc: &AutoCommit) -> Derived {
    match kind {
        Kind::Project => Project::read(doc).derive(),
        Kind::Note => Note::read(doc).derive(),
        Kind::Task => Task::read(doc).derive(),
        Kind::Contact => Contact::read(doc).derive(),
        Kind::Skill => Skill::read(doc).derive(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doc_id_round_trips_through_hex() {
        let id = DocId::random();
        assert_eq!(id.to_string().parse::<DocId>().expect("parse"), id);
        assert!("xyz".parse::<DocId>().is_err());
        assert!("é".repeat(16).parse::<DocId>().is_err());
    }

    #[test]
    fn slugs() {
        for ok in ["general", "a", "home-lab", "v2"] {
            validate_slug("name", ok).expect(ok);
        }
        for bad in ["", "Home", "a_b", "-a", "a-", "a--b", "é"] {
            assert!(validate_slug("name", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn due_and_interval() {
        validate_due("2026-11-23").expect("date");
        validate_due("2026-11-23T09:30").expect("datetime");
        for bad in ["2026-13-01", "tomorrow", "2026-1-1", "2026-11-23T25:00"] {
            assert!(validate_due(bad).is_err(), "{bad}");
        }
        validate_interval("1d").expect("1d");
        validate_interval("12w").expect("12w");
        for bad in ["d", "0d", "1x", "", "-1d"] {
            assert!(validate_interval(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_kind_reads_back_what_it_wrote() {
        let mut doc = AutoCommit::new();
        let contact = Contact {
            name: "Ada".into(),
            email: Some("ada@example.org".into()),
            tags: vec!["math".into(), "friend".into()],
            metadata: [("met".to_string(), "2026".to_string())].into(),
            notes: "likes engines".into(),
            ..Contact::default()
        };
        contact.write_new(&mut doc).expect("write");
        assert_eq!(Contact::read(&doc), contact);

        let mut doc = AutoCommit::new();
        let task = Task {
            name: "water plants".into(),
            status: TaskStatus::Recurring,
            interval: Some("3d".into()),
            due: Some("2026-12-01".into()),
            ..Task::default()
        };
        task.write_new(&mut doc).expect("write");
        assert_eq!(Task::read(&doc), task);
        task.validate().expect("valid");
    }
    #[test]
    fn next_due_counts_from_the_original_date_and_keeps_the_time() {
        // Days and weeks: on until after today.
        assert_eq!(
            next_due(Some("2026-03-01"), "3d", "2026-03-01"),
            "2026-03-04"
        );
        assert_eq!(
            next_due(Some("2026-03-01"), "3d", "2026-03-09"),
            "2026-03-10"
        );
        assert_eq!(
            next_due(Some("2026-03-01"), "3d", "2026-03-10"),
            "2026-03-13"
        );
        assert_eq!(
            next_due(Some("2026-03-05"), "1w", "2026-03-01"),
            "2026-03-12"
        );
        assert_eq!(
            next_due(Some("2026-03-01T07:30"), "1d", "2026-03-04T08:00"),
            "2026-03-05T07:30"
        );
        // Months: the 31st stays the 31st where it can, the month's last day elsewhere.
        assert_eq!(
            next_due(Some("2026-01-31"), "1m", "2026-01-31"),
            "2026-02-28"
        );
        assert_eq!(
            next_due(Some("2026-01-31"), "1m", "2026-02-28"),
            "2026-03-31"
        );
        assert_eq!(
            next_due(Some("2026-01-31"), "1m", "2026-04-15"),
            "2026-04-30"
        );
        assert_eq!(
            next_due(Some("2024-02-29"), "1y", "2024-03-01"),
            "2025-02-28"
        );
        assert_eq!(
            next_due(Some("2024-02-29"), "1y", "2027-06-01"),
            "2028-02-29"
        );
        assert_eq!(
            next_due(Some("2020-05-10"), "2m", "2026-05-09"),
            "2026-05-10"
        );
        // No due: from today.
        assert_eq!(next_due(None, "2w", "2026-03-01"), "2026-03-15");
        assert_eq!(next_due(None, "1d", "2026-03-01T10:00"), "2026-03-02");
        // Hours: from the due time until after now; a date-only due counts from 09:00.
        assert_eq!(
            next_due(Some("2026-03-01T08:00"), "6h", "2026-03-01T20:00"),
            "2026-03-02T02:00"
        );
        assert_eq!(
            next_due(Some("2026-03-01T08:00:30"), "6h", "2026-03-01T07:00"),
            "2026-03-01T14:00:30"
        );
        assert_eq!(
            next_due(Some("2026-03-01"), "12h", "2026-03-02T08:59"),
            "2026-03-02T09:00"
        );
        assert_eq!(next_due(None, "1h", "2026-03-01T23:30"), "2026-03-02T00:30");
        // Nonsense leaves it be.
        assert_eq!(
            next_due(Some("2026-03-01"), "soon", "2026-03-05"),
            "2026-03-01"
        );
    }

    #[test]
    fn done_moves_a_recurring_task_on_and_completes_the_rest() {
        let plants = Task {
            name: "water plants".into(),
            status: TaskStatus::Recurring,
            interval: Some("3d".into()),
            due: Some("2026-12-01".into()),
            ..Task::default()
        };
        let p = plants.done_patch("2026-12-01T18:00");
        assert_eq!(p.due, Some(Some("2026-12-04".to_string())));
        assert_eq!(p.status, None);
        for other in [
            Task {
                agent_job: true,
                ..plants.clone()
            },
            Task {
                status: TaskStatus::Incomplete,
                ..plants.clone()
            },
        ] {
            let p = other.done_patch("2026-12-01");
            assert_eq!((p.status, p.due), (Some(TaskStatus::Complete), None));
        }
    }
}

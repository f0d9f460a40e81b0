//! The computer plugin's file tools: read (line windows), write, edit by exact
//! replacement, delete, copy, move, list and search, all beneath the project directory.
//!
//! Every path the model gives is relative to the project directory. A path is checked
//! twice: lexically here (absolute paths, `~` and any `..` component are refused
//! outright), then by construction when it is opened: every file operation goes through
//! a `cap_std::fs::Dir` handle on the project directory, which resolves beneath that
//! handle (`openat2` with `RESOLVE_BENEATH` on Linux, a component-by-component
//! `O_NOFOLLOW` walk elsewhere) and refuses a symlink that leads out, including one
//! swapped in between a check and an open. This module must never open a path through
//! `std::fs` with the model's text in it, and never follow a symlink while walking a tree.
//! Its functions block: callers run them in `spawn_blocking`.

use std::{
    ffi::OsString,
    io::{self, BufRead, BufReader, Cursor, Read},
    path::{Component, Path, PathBuf},
};

use cap_std::{ambient_authority, fs::Dir};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::ComputerLimits;

/// How many leading bytes decide whether a file is binary (a NUL byte among them).
const SNIFF_BYTES: u64 = 8192;
/// The deepest a search descends; a list's `depth` is capped by it too.
const MAX_DEPTH: usize = 64;
/// A search hit's text is cut to this many characters.
const HIT_TEXT_CHARS: usize = 300;
/// Lines longer than this are matched (and read back) by their first bytes only.
const MAX_LINE_BYTES: usize = 64 * 1024;

/// Why a file tool failed. The message goes to the model as is.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// The path is absolute, has a `..` component, or a symlink on it leads out.
    #[error(
        "{path:?} is outside the project directory: paths are relative to it, and absolute \
         paths, `..` and symlinks that lead out are refused"
    )]
    Outside {
        /// The path as given.
        path: String,
    },
    /// Nothing at that path.
    #[error("{path:?} does not exist")]
    NotFound {
        /// The path as given.
        path: String,
    },
    /// The arguments are malformed.
    #[error("{0}")]
    Invalid(String),
    /// The operation cannot be done as asked (a binary file, an ambiguous edit, ...).
    #[error("{0}")]
    Refused(String),
    /// The project directory itself cannot be opened.
    #[error("the project directory {dir} cannot be opened: {source}")]
    ProjectDir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The file system failed.
    #[error("{path:?}: {source}")]
    Io {
        /// The path as given.
        path: String,
        /// Why.
        source: io::Error,
    },
}

/// A path the model gave, checked lexically: relative, with no `..`.
#[derive(Debug, Clone)]
struct ProjectPath {
    /// As given, for messages.
    shown: String,
    /// Normalised (no `.` components); empty means the project directory itself.
    rel: PathBuf,
}

impl ProjectPath {
    fn parse(raw: &str) -> Result<Self, FileError> {
        if raw.contains('\0') {
            return Err(FileError::Invalid(format!("{raw:?} contains a NUL byte")));
        }
        let outside = || FileError::Outside {
            path: raw.to_owned(),
        };
        let mut rel = PathBuf::new();
        for (i, component) in Path::new(raw).components().enumerate() {
            match component {
                Component::Normal(name) if i == 0 && name == "~" => return Err(outside()),
                Component::Normal(name) => rel.push(name),
                Component::CurDir => {}
                Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                    return Err(outside())
                }
            }
        }
        Ok(Self {
            shown: raw.to_owned(),
            rel,
        })
    }

    fn is_root(&self) -> bool {
        self.rel.as_os_str().is_empty()
    }

    /// What to hand cap-std: `.` for the project directory itself.
    fn open_path(&self) -> &Path {
        if self.is_root() {
            Path::new(".")
        } else {
            &self.rel
        }
    }

    /// Maps an error from opening this path: cap-std reports an escape as a
    /// `PermissionDenied` of its own making (no OS error code).
    fn err(&self, source: io::Error) -> FileError {
        match source.kind() {
            io::ErrorKind::PermissionDenied if source.raw_os_error().is_none() => {
                FileError::Outside {
                    path: self.shown.clone(),
                }
            }
            io::ErrorKind::NotFound => FileError::NotFound {
                path: self.shown.clone(),
            },
            _ => FileError::Io {
                path: self.shown.clone(),
                source,
            },
        }
    }

    /// The parent directory to create before writing here, if any.
    fn parent(&self) -> Option<&Path> {
        self.rel.parent().filter(|p| !p.as_os_str().is_empty())
    }
}

/// Creates `dir` and its parents beneath `root`. cap-std answers "exists" for a symlink
/// in the way, even one leading out: opening it says why.
fn create_dirs(root: &Dir, dir: &Path, shown: &ProjectPath) -> Result<(), FileError> {
    match root.create_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => match root.open_dir(dir) {
            Ok(_) => Err(shown.err(e)),
            Err(e) => Err(shown.err(e)),
        },
        Err(e) => Err(shown.err(e)),
    }
}

/// Opens the project directory: the handle every path resolves beneath.
fn open_root(project_dir: &Path) -> Result<Dir, FileError> {
    Dir::open_ambient_dir(project_dir, ambient_authority()).map_err(|source| {
        FileError::ProjectDir {
            dir: project_dir.to_path_buf(),
            source,
        }
    })
}

fn display(rel: &Path) -> String {
    if rel.as_os_str().is_empty() {
        ".".to_owned()
    } else {
        rel.to_string_lossy().into_owned()
    }
}

/// Reads the first bytes of `reader` and says whether they look binary; hands back a
/// reader that still yields them.
fn sniff<R: Read>(mut reader: R) -> io::Result<(bool, impl Read)> {
    let mut head = Vec::new();
    (&mut reader).take(SNIFF_BYTES).read_to_end(&mut head)?;
    let binary = head.contains(&0);
    Ok((binary, Cursor::new(head).chain(reader)))
}

/// Calls `on_line(number, bytes)` for every line (1-based, without its `\n`, cut to
/// `MAX_LINE_BYTES`), never holding more than one such line; stops early when
/// `on_line` returns false. Returns how many lines were seen.
fn scan_lines<R: Read>(reader: R, mut on_line: impl FnMut(u64, &[u8]) -> bool) -> io::Result<u64> {
    let mut reader = BufReader::new(reader);
    let mut line = Vec::new();
    let mut number = 0u64;
    let mut open = false;
    loop {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            if open {
                number += 1;
                on_line(number, &line);
            }
            return Ok(number);
        }
        let (piece, ends, used) = match chunk.iter().position(|&b| b == b'\n') {
            Some(at) => (&chunk[..at], true, at + 1),
            None => (chunk, false, chunk.len()),
        };
        let room = MAX_LINE_BYTES.saturating_sub(line.len());
        line.extend_from_slice(&piece[..piece.len().min(room)]);
        open = true;
        reader.consume(used);
        if ends {
            number += 1;
            open = false;
            if !on_line(number, &line) {
                return Ok(number);
            }
            line.clear();
        }
    }
}

/// Arguments of `computer_file_read`.
#[derive(Debug, Deserialize)]
pub(super) struct ReadArgs {
    path: String,
    /// First line to return, 1-based.
    #[serde(default)]
    offset: Option<u64>,
    /// How many lines.
    #[serde(default)]
    limit: Option<u64>,
}

/// A window of a text file's lines.
pub(super) fn read(
    project_dir: &Path,
    args: ReadArgs,
    limits: &ComputerLimits,
) -> Result<Value, FileError> {
    let path = ProjectPath::parse(&args.path)?;
    let offset = args.offset.unwrap_or(1).max(1);
    let limit = args.limit.unwrap_or(limits.read_lines).max(1);
    let root = open_root(project_dir)?;
    let file = root.open(path.open_path()).map_err(|e| path.err(e))?;
    let meta = file.metadata().map_err(|e| path.err(e))?;
    if meta.is_dir() {
        return Err(FileError::Refused(format!(
            "{:?} is a directory: use computer_file_list",
            path.shown
        )));
    }
    let (binary, reader) = sniff(file).map_err(|e| path.err(e))?;
    if binary {
        return Err(FileError::Refused(format!(
            "{:?} is a binary file ({} bytes): only text files can be read",
            path.shown,
            meta.len()
        )));
    }
    let mut text = Vec::new();
    let mut returned = 0u64;
    let mut cut_by_bytes = false;
    let last_wanted = offset.saturating_add(limit - 1);
    let total = scan_lines(reader, |number, line| {
        if number < offset || number > last_wanted || cut_by_bytes {
            return true;
        }
        if text.len() + line.len() + 1 > limits.read_bytes {
            cut_by_bytes = true;
            if returned == 0 {
                // One line longer than the whole budget: give its head.
                text.extend_from_slice(&line[..line.len().min(limits.read_bytes)]);
                returned = 1;
            }
            return true;
        }
        text.extend_from_slice(line);
        text.push(b'\n');
        returned += 1;
        true
    })
    .map_err(|e| path.err(e))?;
    let next = offset + returned;
    let truncated = next <= total;
    let mut out = json!({
        "path": path.shown,
        "offset": offset,
        "lines": returned,
        "totalLines": total,
        "truncated": truncated,
        "text": String::from_utf8_lossy(&text),
    });
    if truncated {
        out["nextOffset"] = json!(next);
        if cut_by_bytes {
            out["note"] = json!(format!(
                "the window was cut at {} bytes; read on from nextOffset",
                limits.read_bytes
            ));
        }
    } else if offset > total {
        out["note"] = json!(format!("offset {offset} is past the end ({total} lines)"));
    }
    Ok(out)
}

/// Arguments of `computer_file_write`.
#[derive(Debug, Deserialize)]
pub(super) struct WriteArgs {
    path: String,
    content: String,
}

/// Writes a whole file, creating its parent directories.
pub(super) fn write(
    project_dir: &Path,
    args: WriteArgs,
    limits: &ComputerLimits,
) -> Result<Value, FileError> {
    let path = ProjectPath::parse(&args.path)?;
    if path.is_root() {
        return Err(FileError::Invalid("give a file path to write".into()));
    }
    if args.content.len() > limits.write_bytes {
        return Err(FileError::Refused(format!(
            "content is {} bytes, over the {}-byte limit for one write",
            args.content.len(),
            limits.write_bytes
        )));
    }
    let root = open_root(project_dir)?;
    if let Some(parent) = path.parent() {
        create_dirs(&root, parent, &path)?;
    }
    let created = match root.metadata(path.open_path()) {
        Ok(meta) if meta.is_dir() => {
            return Err(FileError::Refused(format!(
                "{:?} is a directory",
                path.shown
            )))
        }
        Ok(_) => false,
        Err(e) if e.kind() == io::ErrorKind::NotFound => true,
        Err(e) => return Err(path.err(e)),
    };
    root.write(path.open_path(), args.content.as_bytes())
        .map_err(|e| path.err(e))?;
    Ok(json!({ "path": path.shown, "bytes": args.content.len(), "created": created }))
}

/// Arguments of `computer_file_edit`.
#[derive(Debug, Deserialize)]
pub(super) struct EditArgs {
    path: String,
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: bool,
}

/// Replaces exact text: `old_string` must occur exactly once unless `replace_all`.
pub(super) fn edit(
    project_dir: &Path,
    args: EditArgs,
    limits: &ComputerLimits,
) -> Result<Value, FileError> {
    let path = ProjectPath::parse(&args.path)?;
    if args.old_string.is_empty() {
        return Err(FileError::Invalid(
            "old_string is empty: to write a whole file use computer_file_write".into(),
        ));
    }
    if args.old_string == args.new_string {
        return Err(FileError::Invalid(
            "old_string and new_string are the same".into(),
        ));
    }
    let root = open_root(project_dir)?;
    let text = read_text(&root, &path, limits.write_bytes)?;
    let count = text.matches(&args.old_string).count();
    if count == 0 {
        return Err(FileError::Refused(format!(
            "old_string was not found in {:?} (it must match exactly, whitespace included)",
            path.shown
        )));
    }
    if count > 1 && !args.replace_all {
        return Err(FileError::Refused(format!(
            "old_string occurs {count} times in {:?}: include more context to make it \
             unique, or pass replace_all: true",
            path.shown
        )));
    }
    let edited = text.replace(&args.old_string, &args.new_string);
    if edited.len() > limits.write_bytes {
        return Err(FileError::Refused(format!(
            "the edited file would be {} bytes, over the {}-byte limit",
            edited.len(),
            limits.write_bytes
        )));
    }
    root.write(path.open_path(), edited.as_bytes())
        .map_err(|e| path.err(e))?;
    Ok(json!({ "path": path.shown, "replacements": count }))
}

/// A whole UTF-8 text file, at most `max` bytes.
fn read_text(root: &Dir, path: &ProjectPath, max: usize) -> Result<String, FileError> {
    let file = root.open(path.open_path()).map_err(|e| path.err(e))?;
    let meta = file.metadata().map_err(|e| path.err(e))?;
    if meta.is_dir() {
        return Err(FileError::Refused(format!(
            "{:?} is a directory",
            path.shown
        )));
    }
    let mut bytes = Vec::new();
    file.take(max as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| path.err(e))?;
    if bytes.len() > max {
        return Err(FileError::Refused(format!(
            "{:?} is over the {max}-byte limit for editing",
            path.shown
        )));
    }
    if bytes[..bytes.len().min(SNIFF_BYTES as usize)].contains(&0) {
        return Err(FileError::Refused(format!(
            "{:?} is a binary file: only text files can be edited",
            path.shown
        )));
    }
    String::from_utf8(bytes).map_err(|_| {
        FileError::Refused(format!(
            "{:?} is not UTF-8 text: it cannot be edited by exact replacement",
            path.shown
        ))
    })
}

/// Arguments of `computer_file_delete`.
#[derive(Debug, Deserialize)]
pub(super) struct DeleteArgs {
    path: String,
    #[serde(default)]
    recursive: bool,
}

/// Deletes a file or symlink, or a directory with everything in it when `recursive`.
pub(super) fn delete(project_dir: &Path, args: DeleteArgs) -> Result<Value, FileError> {
    let path = ProjectPath::parse(&args.path)?;
    if path.is_root() {
        return Err(FileError::Refused(
            "the project directory itself cannot be deleted".into(),
        ));
    }
    let root = open_root(project_dir)?;
    let meta = root
        .symlink_metadata(path.open_path())
        .map_err(|e| path.err(e))?;
    let kind = if meta.is_dir() {
        if !args.recursive {
            return Err(FileError::Refused(format!(
                "{:?} is a directory: pass recursive: true to delete it and everything in it",
                path.shown
            )));
        }
        // Removes symlinks inside as links, never what they point at.
        root.remove_dir_all(path.open_path())
            .map_err(|e| path.err(e))?;
        "directory"
    } else {
        root.remove_file(path.open_path())
            .map_err(|e| path.err(e))?;
        if meta.file_type().is_symlink() {
            "symlink"
        } else {
            "file"
        }
    };
    Ok(json!({ "path": path.shown, "deleted": kind }))
}

/// Arguments of `computer_file_copy` and `computer_file_move`.
#[derive(Debug, Deserialize)]
pub(super) struct TransferArgs {
    from: String,
    to: String,
    #[serde(default)]
    overwrite: bool,
    /// Copy only: a directory is copied with everything in it.
    #[serde(default)]
    recursive: bool,
}

/// Checks the two ends of a copy or move and creates the destination's parents.
fn transfer_ends(
    root: &Dir,
    args: &TransferArgs,
) -> Result<(ProjectPath, ProjectPath, bool), FileError> {
    let from = ProjectPath::parse(&args.from)?;
    let to = ProjectPath::parse(&args.to)?;
    if from.is_root() || to.is_root() {
        return Err(FileError::Refused(
            "the project directory itself cannot be copied, moved or replaced".into(),
        ));
    }
    let from_meta = root
        .symlink_metadata(from.open_path())
        .map_err(|e| from.err(e))?;
    match root.symlink_metadata(to.open_path()) {
        Ok(_) if !args.overwrite => {
            return Err(FileError::Refused(format!(
                "{:?} already exists: pass overwrite: true to replace it",
                to.shown
            )))
        }
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(to.err(e)),
    }
    if from_meta.is_dir() && to.rel.starts_with(&from.rel) {
        return Err(FileError::Refused(format!(
            "{:?} is inside {:?}: a directory cannot go into itself",
            to.shown, from.shown
        )));
    }
    if let Some(parent) = to.parent() {
        create_dirs(root, parent, &to)?;
    }
    Ok((from, to, from_meta.is_dir()))
}

/// Copies a file, or a directory tree when `recursive` (symlinks in it are skipped).
pub(super) fn copy(
    project_dir: &Path,
    args: TransferArgs,
    limits: &ComputerLimits,
) -> Result<Value, FileError> {
    let root = open_root(project_dir)?;
    let (from, to, is_dir) = transfer_ends(&root, &args)?;
    if !is_dir {
        let bytes = root
            .copy(from.open_path(), &root, to.open_path())
            .map_err(|e| from.err(e))?;
        return Ok(json!({ "from": from.shown, "to": to.shown, "files": 1, "bytes": bytes }));
    }
    if !args.recursive {
        return Err(FileError::Refused(format!(
            "{:?} is a directory: pass recursive: true to copy it with everything in it",
            from.shown
        )));
    }
    let source = root.open_dir(from.open_path()).map_err(|e| from.err(e))?;
    create_dirs(&root, to.open_path(), &to)?;
    let target = root.open_dir(to.open_path()).map_err(|e| to.err(e))?;
    let mut tally = CopyTally::default();
    let mut budget = limits.walk_entries;
    copy_tree(&source, &target, &mut tally, &mut budget, 0).map_err(|e| from.err(e))?;
    let mut out = json!({
        "from": from.shown,
        "to": to.shown,
        "files": tally.files,
        "bytes": tally.bytes,
        "skippedSymlinks": tally.skipped_symlinks,
    });
    if budget == 0 {
        out["note"] = json!(format!(
            "stopped after {} entries: the copy is incomplete",
            limits.walk_entries
        ));
    }
    Ok(out)
}

#[derive(Debug, Default)]
struct CopyTally {
    files: u64,
    bytes: u64,
    skipped_symlinks: u64,
}

fn copy_tree(
    source: &Dir,
    target: &Dir,
    tally: &mut CopyTally,
    budget: &mut usize,
    depth: usize,
) -> io::Result<()> {
    if depth > MAX_DEPTH {
        return Err(io::Error::other(format!("deeper than {MAX_DEPTH} levels")));
    }
    for entry in sorted_entries(source, budget)? {
        if entry.kind == EntryKind::Dir {
            target.create_dir_all(&entry.name)?;
            let (from, to) = (source.open_dir(&entry.name)?, target.open_dir(&entry.name)?);
            copy_tree(&from, &to, tally, budget, depth + 1)?;
        } else if entry.kind == EntryKind::File {
            tally.bytes += source.copy(&entry.name, target, &entry.name)?;
            tally.files += 1;
        } else {
            tally.skipped_symlinks += u64::from(entry.kind == EntryKind::Symlink);
        }
    }
    Ok(())
}

/// Moves (renames) a file or directory.
pub(super) fn rename(project_dir: &Path, args: TransferArgs) -> Result<Value, FileError> {
    let root = open_root(project_dir)?;
    let (from, to, _) = transfer_ends(&root, &args)?;
    root.rename(from.open_path(), &root, to.open_path())
        .map_err(|e| from.err(e))?;
    Ok(json!({ "from": from.shown, "to": to.shown }))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EntryKind {
    File,
    Dir,
    Symlink,
    Other,
}

impl EntryKind {
    fn name(self) -> &'static str {
        match self {
            EntryKind::File => "file",
            EntryKind::Dir => "dir",
            EntryKind::Symlink => "symlink",
            EntryKind::Other => "other",
        }
    }
}

struct Entry {
    name: OsString,
    kind: EntryKind,
    size: u64,
}

/// A directory's entries sorted by name, without following symlinks; each one spends
/// one unit of `budget`, and listing stops when it runs out.
fn sorted_entries(dir: &Dir, budget: &mut usize) -> io::Result<Vec<Entry>> {
    let mut entries = Vec::new();
    for entry in dir.entries()? {
        if *budget == 0 {
            break;
        }
        *budget -= 1;
        let entry = entry?;
        let file_type = entry.file_type()?;
        let kind = if file_type.is_symlink() {
            EntryKind::Symlink
        } else if file_type.is_dir() {
            EntryKind::Dir
        } else if file_type.is_file() {
            EntryKind::File
        } else {
            EntryKind::Other
        };
        let size = match kind {
            EntryKind::File => entry.metadata()?.len(),
            _ => 0,
        };
        entries.push(Entry {
            name: entry.file_name(),
            kind,
            size,
        });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}

/// Walks a tree depth first in name order, never following symlinks and never entering
/// `.git`; `visit(dir, rel, entry)` returns false to stop. Returns false when it stopped
/// early (by `visit` or the budget).
fn walk(
    dir: &Dir,
    rel: &Path,
    depth_left: usize,
    budget: &mut usize,
    visit: &mut dyn FnMut(&Dir, &Path, &Entry) -> bool,
) -> io::Result<bool> {
    for entry in sorted_entries(dir, budget)? {
        let path = rel.join(&entry.name);
        if !visit(dir, &path, &entry) {
            return Ok(false);
        }
        if entry.kind == EntryKind::Dir && depth_left > 1 && entry.name != ".git" {
            // Opened through the parent's handle: a directory swapped for a symlink
            // after listing cannot lead out of it.
            match dir.open_dir(&entry.name) {
                Ok(child) => {
                    if !walk(&child, &path, depth_left - 1, budget, visit)? {
                        return Ok(false);
                    }
                }
                Err(e) => tracing::debug!(path = %path.display(), error = %e, "not entered"),
            }
        }
    }
    Ok(*budget > 0)
}

/// Arguments of `computer_file_list`.
#[derive(Debug, Deserialize)]
pub(super) struct ListArgs {
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    depth: Option<usize>,
}

/// A directory's entries (kind and size), `depth` levels down.
pub(super) fn list(
    project_dir: &Path,
    args: ListArgs,
    limits: &ComputerLimits,
) -> Result<Value, FileError> {
    let path = ProjectPath::parse(args.path.as_deref().unwrap_or("."))?;
    let depth = args.depth.unwrap_or(1).clamp(1, MAX_DEPTH);
    let root = open_root(project_dir)?;
    let dir = root.open_dir(path.open_path()).map_err(|e| path.err(e))?;
    let mut entries = Vec::new();
    let mut budget = limits.walk_entries;
    let complete = walk(&dir, &path.rel, depth, &mut budget, &mut |_, rel, entry| {
        if entries.len() >= limits.list_entries {
            return false;
        }
        let mut row = json!({ "path": display(rel), "kind": entry.kind.name() });
        if entry.kind == EntryKind::File {
            row["size"] = json!(entry.size);
        }
        entries.push(row);
        true
    })
    .map_err(|e| path.err(e))?;
    Ok(json!({
        "path": display(&path.rel),
        "entries": entries,
        "truncated": !complete,
    }))
}

/// What `computer_file_search` looks for.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(super) enum SearchMode {
    /// File paths matching a glob.
    Files,
    /// Lines matching a regex or literal text.
    Content,
}

/// Arguments of `computer_file_search`.
#[derive(Debug, Deserialize)]
pub(super) struct SearchArgs {
    mode: SearchMode,
    pattern: String,
    #[serde(default)]
    path: Option<String>,
    /// Content mode: the pattern is plain text, not a regex.
    #[serde(default)]
    literal: bool,
    /// Content mode: ignore case.
    #[serde(default)]
    case_insensitive: bool,
    /// Content mode: only files whose path matches this glob.
    #[serde(default)]
    glob: Option<String>,
    #[serde(default)]
    max_results: Option<usize>,
}

/// A glob over paths relative to the search's base: `*` stays within one path
/// component and `**` crosses them; a pattern with no `/` matches file names anywhere.
struct PathGlob {
    matcher: globset::GlobMatcher,
    by_name: bool,
}

impl PathGlob {
    fn new(pattern: &str) -> Result<Self, FileError> {
        let glob = globset::GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| FileError::Invalid(format!("glob {pattern:?}: {e}")))?;
        Ok(Self {
            matcher: glob.compile_matcher(),
            by_name: !pattern.contains('/'),
        })
    }

    fn is_match(&self, rel_to_base: &Path) -> bool {
        if self.by_name {
            rel_to_base
                .file_name()
                .is_some_and(|name| self.matcher.is_match(name))
        } else {
            self.matcher.is_match(rel_to_base)
        }
    }
}

/// Finds files by glob, or lines by regex or literal text (`path:line:text` hits).
pub(super) fn search(
    project_dir: &Path,
    args: SearchArgs,
    limits: &ComputerLimits,
) -> Result<Value, FileError> {
    let base = ProjectPath::parse(args.path.as_deref().unwrap_or("."))?;
    let max_results = args
        .max_results
        .unwrap_or(limits.search_hits)
        .clamp(1, limits.search_hits.max(1) * 5);
    if args.pattern.is_empty() {
        return Err(FileError::Invalid("pattern is empty".into()));
    }
    let root = open_root(project_dir)?;
    let dir = root.open_dir(base.open_path()).map_err(|e| base.err(e))?;
    let mut budget = limits.walk_entries;
    let mut hits: Vec<String> = Vec::new();
    let mut files_searched = 0u64;
    let mut full = false;
    match args.mode {
        SearchMode::Files => {
            let glob = PathGlob::new(&args.pattern)?;
            walk(
                &dir,
                Path::new(""),
                MAX_DEPTH,
                &mut budget,
                &mut |_, rel, entry| {
                    if entry.kind == EntryKind::File && glob.is_match(rel) {
                        if hits.len() >= max_results {
                            full = true;
                            return false;
                        }
                        hits.push(display(&base.rel.join(rel)));
                    }
                    true
                },
            )
            .map_err(|e| base.err(e))?;
        }
        SearchMode::Content => {
            let source = if args.literal {
                regex::escape(&args.pattern)
            } else {
                args.pattern.clone()
            };
            let regex = regex::RegexBuilder::new(&source)
                .case_insensitive(args.case_insensitive)
                .size_limit(1 << 22)
                .build()
                .map_err(|e| FileError::Invalid(format!("pattern: {e}")))?;
            let glob = args.glob.as_deref().map(PathGlob::new).transpose()?;
            walk(
                &dir,
                Path::new(""),
                MAX_DEPTH,
                &mut budget,
                &mut |parent, rel, entry| {
                    if entry.kind != EntryKind::File
                        || entry.size > limits.search_file_bytes
                        || glob.as_ref().is_some_and(|g| !g.is_match(rel))
                    {
                        return true;
                    }
                    let Some(name) = rel.file_name() else {
                        return true;
                    };
                    let shown = display(&base.rel.join(rel));
                    // A file that vanished or cannot be read is skipped, not fatal.
                    let Ok(file) = parent.open(name) else {
                        return true;
                    };
                    let Ok((false, reader)) = sniff(file) else {
                        return true;
                    };
                    files_searched += 1;
                    let scanned = scan_lines(reader, |number, line| {
                        let text = String::from_utf8_lossy(line);
                        if !regex.is_match(&text) {
                            return true;
                        }
                        if hits.len() >= max_results {
                            full = true;
                            return false;
                        }
                        let text: String = text
                            .trim_end_matches('\r')
                            .chars()
                            .take(HIT_TEXT_CHARS)
                            .collect();
                        hits.push(format!("{shown}:{number}:{text}"));
                        true
                    });
                    if let Err(e) = scanned {
                        tracing::debug!(path = %shown, error = %e, "search skipped a file");
                    }
                    !full
                },
            )
            .map_err(|e| base.err(e))?;
        }
    }
    let mut out = json!({
        "mode": args.mode,
        "hits": hits,
        "truncated": full || budget == 0,
    });
    if args.mode == SearchMode::Content {
        out["filesSearched"] = json!(files_searched);
    }
    if full {
        out["note"] = json!(format!(
            "stopped at {max_results} results: narrow the pattern or the path"
        ));
    } else if budget == 0 {
        out["note"] = json!(format!(
            "stopped after {} entries: narrow the path",
            limits.walk_entries
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::{fs, os::unix::fs::symlink};

    use super::*;

    /// A project directory beside an `outside` directory holding a secret.
    struct Fixture {
        _tmp: tempfile::TempDir,
        project: PathBuf,
        outside: PathBuf,
    }

    fn fixture() -> Fixture {
        let tmp = tempfile::tempdir().expect("tempdir");
        let project = tmp.path().join("project");
        let outside = tmp.path().join("outside");
        fs::create_dir_all(project.join("src/deep")).expect("mkdir");
        fs::create_dir_all(&outside).expect("mkdir");
        fs::write(outside.join("secret.txt"), "hunter2\n").expect("write");
        fs::write(
            project.join("src/main.rs"),
            "fn main() {\n    println!(\"hi\");\n}\n",
        )
        .expect("write");
        fs::write(project.join("src/deep/lib.rs"), "pub fn hi() {}\n").expect("write");
        fs::write(project.join("notes.md"), "# Notes\nhi there\nHI again\n").expect("write");
        Fixture {
            _tmp: tmp,
            project,
            outside,
        }
    }

    fn limits() -> ComputerLimits {
        ComputerLimits::default()
    }

    fn read_args(path: &str, offset: Option<u64>, limit: Option<u64>) -> ReadArgs {
        ReadArgs {
            path: path.into(),
            offset,
            limit,
        }
    }

    fn read_text_of(f: &Fixture, path: &str) -> Result<String, FileError> {
        let out = read(&f.project, read_args(path, None, None), &limits())?;
        Ok(out["text"].as_str().expect("text").to_owned())
    }

    fn assert_outside(result: Result<Value, FileError>) {
        match result {
            Err(FileError::Outside { .. }) => {}
            other => panic!("expected an outside-the-project refusal, got {other:?}"),
        }
    }

    #[test]
    fn refuses_parent_components_absolute_paths_and_home() {
        let f = fixture();
        for path in [
            "../outside/secret.txt",
            "src/../../outside/secret.txt",
            "src/..",
            "/etc/passwd",
            "~/secret.txt",
        ] {
            assert_outside(read(&f.project, read_args(path, None, None), &limits()));
        }
        let abs = f.outside.join("secret.txt");
        assert_outside(read(
            &f.project,
            read_args(&abs.to_string_lossy(), None, None),
            &limits(),
        ));
        assert_outside(write(
            &f.project,
            WriteArgs {
                path: "../outside/planted.txt".into(),
                content: "x".into(),
            },
            &limits(),
        ));
        assert!(!f.outside.join("planted.txt").exists());
        assert_outside(delete(
            &f.project,
            DeleteArgs {
                path: "../outside".into(),
                recursive: true,
            },
        ));
        assert!(f.outside.join("secret.txt").exists());
        let message = read(&f.project, read_args("../x", None, None), &limits())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            message.contains("outside the project directory"),
            "{message}"
        );
    }

    #[test]
    fn refuses_symlinks_that_lead_out_of_the_project() {
        let f = fixture();
        symlink("../outside/secret.txt", f.project.join("file_link")).expect("symlink");
        symlink("../outside", f.project.join("dir_link")).expect("symlink");
        symlink(f.outside.join("secret.txt"), f.project.join("abs_link")).expect("symlink");
        symlink("../../outside", f.project.join("src/nested_link")).expect("symlink");
        for path in [
            "file_link",
            "abs_link",
            "dir_link/secret.txt",
            "src/nested_link/secret.txt",
        ] {
            assert_outside(read(&f.project, read_args(path, None, None), &limits()));
        }
        assert_outside(write(
            &f.project,
            WriteArgs {
                path: "dir_link/planted.txt".into(),
                content: "x".into(),
            },
            &limits(),
        ));
        assert_outside(write(
            &f.project,
            WriteArgs {
                path: "file_link".into(),
                content: "overwritten".into(),
            },
            &limits(),
        ));
        assert_outside(list(
            &f.project,
            ListArgs {
                path: Some("dir_link".into()),
                depth: None,
            },
            &limits(),
        ));
        assert_outside(copy(
            &f.project,
            TransferArgs {
                from: "file_link".into(),
                to: "stolen.txt".into(),
                overwrite: false,
                recursive: false,
            },
            &limits(),
        ));
        assert!(!f.project.join("stolen.txt").exists());
        assert!(!f.outside.join("planted.txt").exists());
        assert_eq!(
            fs::read_to_string(f.outside.join("secret.txt")).expect("read"),
            "hunter2\n"
        );

        // A content search never walks into a symlinked directory.
        let found = search(
            &f.project,
            SearchArgs {
                mode: SearchMode::Content,
                pattern: "hunter2".into(),
                path: None,
                literal: true,
                case_insensitive: false,
                glob: None,
                max_results: None,
            },
            &limits(),
        )
        .expect("search");
        assert_eq!(found["hits"], json!([]));

        // Deleting the link removes the link, never what it points at.
        let out = delete(
            &f.project,
            DeleteArgs {
                path: "dir_link".into(),
                recursive: false,
            },
        )
        .expect("delete link");
        assert_eq!(out["deleted"], "symlink");
        assert!(f.outside.join("secret.txt").exists());
    }

    #[test]
    fn a_symlink_that_stays_inside_works() {
        let f = fixture();
        symlink("src", f.project.join("code")).expect("symlink");
        symlink("../notes.md", f.project.join("src/notes_link.md")).expect("symlink");
        assert!(read_text_of(&f, "code/main.rs")
            .expect("read through dir link")
            .contains("println"));
        assert!(read_text_of(&f, "src/notes_link.md")
            .expect("read through file link")
            .starts_with("# Notes"));
        write(
            &f.project,
            WriteArgs {
                path: "code/new.rs".into(),
                content: "// new\n".into(),
            },
            &limits(),
        )
        .expect("write through dir link");
        assert!(f.project.join("src/new.rs").exists());
        // `.` components are fine.
        assert!(read_text_of(&f, "./src/./main.rs").is_ok());
    }

    #[test]
    fn reads_line_windows() {
        let f = fixture();
        let body: String = (1..=10).map(|i| format!("line {i}\n")).collect();
        fs::write(f.project.join("ten.txt"), body).expect("write");

        let out = read(
            &f.project,
            read_args("ten.txt", Some(3), Some(4)),
            &limits(),
        )
        .expect("read");
        assert_eq!(out["text"], "line 3\nline 4\nline 5\nline 6\n");
        assert_eq!(out["totalLines"], 10);
        assert_eq!(out["lines"], 4);
        assert_eq!(out["truncated"], true);
        assert_eq!(out["nextOffset"], 7);

        let out = read(&f.project, read_args("ten.txt", Some(7), None), &limits()).expect("read");
        assert_eq!(out["text"], "line 7\nline 8\nline 9\nline 10\n");
        assert_eq!(out["truncated"], false);
        assert!(out.get("nextOffset").is_none());

        let out = read(&f.project, read_args("ten.txt", Some(50), None), &limits()).expect("read");
        assert_eq!(out["text"], "");
        assert!(out["note"].as_str().expect("note").contains("past the end"));

        // The default window is `read_lines`, and the byte cap cuts at a line.
        let small = ComputerLimits {
            read_lines: 2,
            read_bytes: 15,
            ..ComputerLimits::default()
        };
        let out = read(&f.project, read_args("ten.txt", None, None), &small).expect("read");
        assert_eq!(out["text"], "line 1\nline 2\n");
        let out = read(&f.project, read_args("ten.txt", None, Some(10)), &small).expect("read");
        assert_eq!(out["text"], "line 1\nline 2\n");
        assert_eq!(out["nextOffset"], 3);
        assert!(out["note"].as_str().expect("note").contains("15 bytes"));

        // No trailing newline: the last line still counts.
        fs::write(f.project.join("open.txt"), "a\nb").expect("write");
        let out = read(&f.project, read_args("open.txt", None, None), &limits()).expect("read");
        assert_eq!(out["totalLines"], 2);
        assert_eq!(out["text"], "a\nb\n");
    }

    #[test]
    fn refuses_binary_files_and_directories() {
        let f = fixture();
        fs::write(
            f.project.join("blob.bin"),
            [0x89, b'P', b'N', b'G', 0, 0, 1],
        )
        .expect("write");
        let err = read(&f.project, read_args("blob.bin", None, None), &limits())
            .expect_err("binary refused");
        assert!(err.to_string().contains("binary"), "{err}");
        let err = read(&f.project, read_args("src", None, None), &limits())
            .expect_err("directory refused");
        assert!(err.to_string().contains("computer_file_list"), "{err}");
        let err =
            read(&f.project, read_args("missing.txt", None, None), &limits()).expect_err("missing");
        assert!(matches!(err, FileError::NotFound { .. }), "{err:?}");
    }

    #[test]
    fn writes_create_parents_and_keep_to_the_size_cap() {
        let f = fixture();
        let out = write(
            &f.project,
            WriteArgs {
                path: "a/b/c.txt".into(),
                content: "deep\n".into(),
            },
            &limits(),
        )
        .expect("write");
        assert_eq!(out["created"], true);
        assert_eq!(
            fs::read_to_string(f.project.join("a/b/c.txt")).expect("read"),
            "deep\n"
        );
        let small = ComputerLimits {
            write_bytes: 4,
            ..ComputerLimits::default()
        };
        let err = write(
            &f.project,
            WriteArgs {
                path: "big.txt".into(),
                content: "12345".into(),
            },
            &small,
        )
        .expect_err("too big");
        assert!(err.to_string().contains("limit"), "{err}");
        assert!(!f.project.join("big.txt").exists());
    }

    fn edit_args(old: &str, new: &str, replace_all: bool) -> EditArgs {
        EditArgs {
            path: "notes.md".into(),
            old_string: old.into(),
            new_string: new.into(),
            replace_all,
        }
    }

    #[test]
    fn edits_replace_exactly_once_unless_told_all() {
        let f = fixture();
        fs::write(f.project.join("notes.md"), "alpha beta\nbeta gamma\nbeta\n").expect("write");
        let err =
            edit(&f.project, edit_args("beta", "BETA", false), &limits()).expect_err("ambiguous");
        assert!(err.to_string().contains("occurs 3 times"), "{err}");
        let err =
            edit(&f.project, edit_args("delta", "x", false), &limits()).expect_err("not found");
        assert!(err.to_string().contains("not found"), "{err}");
        let out = edit(
            &f.project,
            edit_args("alpha beta", "alpha BETA", false),
            &limits(),
        )
        .expect("unique edit");
        assert_eq!(out["replacements"], 1);
        let out = edit(&f.project, edit_args("beta", "b", true), &limits()).expect("replace all");
        assert_eq!(out["replacements"], 2);
        assert_eq!(
            fs::read_to_string(f.project.join("notes.md")).expect("read"),
            "alpha BETA\nb gamma\nb\n"
        );
        let err = edit(&f.project, edit_args("", "x", false), &limits()).expect_err("empty");
        assert!(matches!(err, FileError::Invalid(_)), "{err:?}");
    }

    #[test]
    fn deletes_copies_and_moves() {
        let f = fixture();
        let err = delete(
            &f.project,
            DeleteArgs {
                path: "src".into(),
                recursive: false,
            },
        )
        .expect_err("directory needs recursive");
        assert!(err.to_string().contains("recursive"), "{err}");
        let err = delete(
            &f.project,
            DeleteArgs {
                path: ".".into(),
                recursive: true,
            },
        )
        .expect_err("not the project itself");
        assert!(matches!(err, FileError::Refused(_)), "{err:?}");

        let transfer = |from: &str, to: &str, overwrite: bool, recursive: bool| TransferArgs {
            from: from.into(),
            to: to.into(),
            overwrite,
            recursive,
        };
        copy(
            &f.project,
            transfer("notes.md", "copies/notes.md", false, false),
            &limits(),
        )
        .expect("copy file");
        let err = copy(
            &f.project,
            transfer("notes.md", "copies/notes.md", false, false),
            &limits(),
        )
        .expect_err("exists");
        assert!(err.to_string().contains("overwrite"), "{err}");
        let err = copy(&f.project, transfer("src", "src2", false, false), &limits())
            .expect_err("directory needs recursive");
        assert!(err.to_string().contains("recursive"), "{err}");
        let out =
            copy(&f.project, transfer("src", "src2", false, true), &limits()).expect("copy tree");
        assert_eq!(out["files"], 2);
        assert!(f.project.join("src2/deep/lib.rs").exists());
        let err = copy(
            &f.project,
            transfer("src", "src/inner", false, true),
            &limits(),
        )
        .expect_err("into itself");
        assert!(err.to_string().contains("into itself"), "{err}");

        rename(&f.project, transfer("src2", "moved/src", false, false)).expect("move");
        assert!(!f.project.join("src2").exists());
        assert!(f.project.join("moved/src/main.rs").exists());
        let out = delete(
            &f.project,
            DeleteArgs {
                path: "moved".into(),
                recursive: true,
            },
        )
        .expect("delete tree");
        assert_eq!(out["deleted"], "directory");
        assert!(!f.project.join("moved").exists());
    }

    #[test]
    fn lists_with_kinds_sizes_and_depth() {
        let f = fixture();
        let out = list(
            &f.project,
            ListArgs {
                path: None,
                depth: None,
            },
            &limits(),
        )
        .expect("list");
        assert_eq!(
            out["entries"],
            json!([
                { "path": "notes.md", "kind": "file", "size": 26 },
                { "path": "src", "kind": "dir" },
            ])
        );
        let out = list(
            &f.project,
            ListArgs {
                path: Some("src".into()),
                depth: Some(5),
            },
            &limits(),
        )
        .expect("list");
        let paths: Vec<&str> = out["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .filter_map(|e| e["path"].as_str())
            .collect();
        assert_eq!(paths, ["src/deep", "src/deep/lib.rs", "src/main.rs"]);
        let capped = ComputerLimits {
            list_entries: 1,
            ..ComputerLimits::default()
        };
        let out = list(
            &f.project,
            ListArgs {
                path: None,
                depth: Some(3),
            },
            &capped,
        )
        .expect("list");
        assert_eq!(out["entries"].as_array().map(Vec::len), Some(1));
        assert_eq!(out["truncated"], true);
    }

    fn search_args(mode: SearchMode, pattern: &str) -> SearchArgs {
        SearchArgs {
            mode,
            pattern: pattern.into(),
            path: None,
            literal: false,
            case_insensitive: false,
            glob: None,
            max_results: None,
        }
    }

    #[test]
    fn searches_files_by_glob() {
        let f = fixture();
        let out = search(
            &f.project,
            search_args(SearchMode::Files, "*.rs"),
            &limits(),
        )
        .expect("search");
        assert_eq!(out["hits"], json!(["src/deep/lib.rs", "src/main.rs"]));
        let out = search(
            &f.project,
            search_args(SearchMode::Files, "src/*.rs"),
            &limits(),
        )
        .expect("search");
        assert_eq!(out["hits"], json!(["src/main.rs"]));
        let out = search(
            &f.project,
            search_args(SearchMode::Files, "**/deep/*.rs"),
            &limits(),
        )
        .expect("search");
        assert_eq!(out["hits"], json!(["src/deep/lib.rs"]));
        let mut under = search_args(SearchMode::Files, "*.rs");
        under.path = Some("src/deep".into());
        let out = search(&f.project, under, &limits()).expect("search");
        assert_eq!(out["hits"], json!(["src/deep/lib.rs"]));
        let err = search(&f.project, search_args(SearchMode::Files, "a[b"), &limits())
            .expect_err("bad glob");
        assert!(matches!(err, FileError::Invalid(_)), "{err:?}");
    }

    #[test]
    fn searches_content_by_regex_or_literal() {
        let f = fixture();
        let out = search(
            &f.project,
            search_args(SearchMode::Content, r"fn \w+\("),
            &limits(),
        )
        .expect("search");
        assert_eq!(
            out["hits"],
            json!([
                "src/deep/lib.rs:1:pub fn hi() {}",
                "src/main.rs:1:fn main() {"
            ])
        );
        let mut literal = search_args(SearchMode::Content, "hi");
        literal.literal = true;
        literal.case_insensitive = true;
        literal.glob = Some("*.md".into());
        let out = search(&f.project, literal, &limits()).expect("search");
        assert_eq!(
            out["hits"],
            json!(["notes.md:2:hi there", "notes.md:3:HI again"])
        );
        let mut capped = search_args(SearchMode::Content, "(?i)hi");
        capped.max_results = Some(1);
        let out = search(&f.project, capped, &limits()).expect("search");
        assert_eq!(out["hits"].as_array().map(Vec::len), Some(1));
        assert_eq!(out["truncated"], true);
        let err = search(&f.project, search_args(SearchMode::Content, "("), &limits())
            .expect_err("bad regex");
        assert!(matches!(err, FileError::Invalid(_)), "{err:?}");
    }
}

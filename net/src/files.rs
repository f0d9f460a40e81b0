//! Private files on disk, for hub and node alike: the data directory (0700), SQLite
//! databases (0600, with their `-wal` and `-shm`), files created exactly once (identity
//! and server secrets: exclusive creation, the loser of a race reads the winner's file)
//! and files replaced atomically and durably (`node.json`).
//!
//! Never reads or logs the content of what it writes; never loosens a mode.

use std::{
    fs,
    io::{self, Write},
    path::{Path, PathBuf},
    sync::atomic::{AtomicU64, Ordering},
};

/// Mode of the data directory.
pub const DIR_MODE: u32 = 0o700;
/// Mode of every private file (keys, secrets, databases, `node.json`).
pub const FILE_MODE: u32 = 0o600;

/// Creates `dir` (and missing parents) with mode 0700, or tightens an existing `dir` that
/// others may read or enter to 0700, with a log line saying so.
pub fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(DIR_MODE);
    }
    builder.create(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(dir)?.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            fs::set_permissions(dir, fs::Permissions::from_mode(DIR_MODE))?;
            tracing::warn!(
                dir = %dir.display(),
                was = format_args!("{mode:o}"),
                "the data directory was open to other users; tightened it to 700"
            );
        }
    }
    Ok(())
}

/// Makes the SQLite database at `db` private before it is opened: creates it empty with
/// mode 0600 if absent (SQLite then creates its `-wal` and `-shm` with the database's
/// mode), and tightens the database, `-wal` and `-shm` to 0600 where they exist looser.
pub fn secure_db_files(db: &Path) -> io::Result<()> {
    let mut opts = fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(FILE_MODE);
    }
    match opts.open(db) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    for path in [db.to_path_buf(), sidecar(db, "-wal"), sidecar(db, "-shm")] {
        tighten_file(&path)?;
    }
    Ok(())
}

/// `db` with `suffix` appended to its file name (`hub.db` → `hub.db-wal`).
fn sidecar(db: &Path, suffix: &str) -> PathBuf {
    let mut name = db.as_os_str().to_os_string();
    name.push(suffix);
    PathBuf::from(name)
}

/// Sets an existing file that group or others may use to 0600; absent files are fine.
fn tighten_file(path: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = match fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            fs::set_permissions(path, fs::Permissions::from_mode(FILE_MODE))?;
            tracing::info!(file = %path.display(), was = format_args!("{mode:o}"), "tightened to 600");
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// What [`create_exclusive`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Created {
    /// This call created the file with the given bytes.
    Created,
    /// The file already existed (another process may just have created it): read it.
    Existed,
}

static TMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// A temporary name beside `path`, unique to this process and call.
fn tmp_path(path: &Path) -> PathBuf {
    let n = TMP_SEQ.fetch_add(1, Ordering::Relaxed);
    let mut name = path.as_os_str().to_os_string();
    name.push(format!(".{}.{n}.tmp", std::process::id()));
    PathBuf::from(name)
}

/// Writes `bytes` to a new private temporary file beside `path` and syncs it.
fn write_tmp(path: &Path, bytes: &[u8]) -> io::Result<PathBuf> {
    let tmp = tmp_path(path);
    let mut opts = fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(FILE_MODE);
    }
    let written = opts.open(&tmp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()
    });
    match written {
        Ok(()) => Ok(tmp),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Syncs the directory holding `path`, so a new name in it survives a power cut.
fn sync_parent(path: &Path) -> io::Result<()> {
    #[cfg(unix)]
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::File::open(dir)?.sync_all()?;
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// Creates `path` holding exactly `bytes` (mode 0600) unless it exists, atomically: the
/// bytes go to a private temporary file, which is synced and then linked to `path` with
/// `link(2)`, which fails if `path` exists (O_EXCL semantics). So a concurrent reader sees
/// either no file or the whole file, never half of it, and when two processes race, one
/// wins and the other gets [`Created::Existed`] and must read the winner's file.
pub fn create_exclusive(path: &Path, bytes: &[u8]) -> io::Result<Created> {
    let tmp = write_tmp(path, bytes)?;
    let linked = fs::hard_link(&tmp, path);
    let _ = fs::remove_file(&tmp);
    match linked {
        Ok(()) => {
            sync_parent(path)?;
            Ok(Created::Created)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(Created::Existed),
        // A file system without hard links: exclusive creation in place.
        Err(_) => create_new_in_place(path, bytes),
    }
}

fn create_new_in_place(path: &Path, bytes: &[u8]) -> io::Result<Created> {
    let mut opts = fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(FILE_MODE);
    }
    match opts.open(path) {
        Ok(mut f) => {
            f.write_all(bytes)?;
            f.sync_all()?;
            sync_parent(path)?;
            Ok(Created::Created)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(Created::Existed),
        Err(e) => Err(e),
    }
}

/// Replaces `path` with `bytes` (mode 0600) durably: a synced temporary file renamed over
/// `path`, then the directory synced. A crash leaves the old file or the new one.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = write_tmp(path, bytes)?;
    if let Err(e) = fs::rename(&tmp, path) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    sync_parent(path)
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(p: &Path) -> u32 {
        fs::metadata(p).expect("metadata").permissions().mode() & 0o777
    }

    #[test]
    fn data_dir_is_created_0700_and_tightened_when_looser() {
        let t = tempfile::tempdir().expect("tempdir");
        let dir = t.path().join("a").join("home");
        ensure_private_dir(&dir).expect("create");
        assert_eq!(mode(&dir), 0o700);
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).expect("loosen");
        ensure_private_dir(&dir).expect("tighten");
        assert_eq!(mode(&dir), 0o700);
    }

    #[test]
    fn database_files_are_0600_before_and_after_sqlite_opens_them() {
        let t = tempfile::tempdir().expect("tempdir");
        let db = t.path().join("x.db");
        secure_db_files(&db).expect("secure");
        assert_eq!(mode(&db), 0o600);
        // A store opened afterwards creates its WAL and shared memory with the same mode.
        let store = hearth_sync::DocumentStore::open(&db).expect("open");
        store
            .create_blocking(hearth_sync::Project {
                name: "p".into(),
                parent: None,
                instructions: String::new(),
                archived: false,
            })
            .expect("write");
        for suffix in ["", "-wal", "-shm"] {
            let p = sidecar(&db, suffix);
            assert!(p.exists(), "{} exists", p.display());
            assert_eq!(mode(&p), 0o600, "{}", p.display());
        }
        drop(store);
        // Files left looser by an older version are tightened.
        fs::set_permissions(&db, fs::Permissions::from_mode(0o644)).expect("loosen");
        secure_db_files(&db).expect("secure again");
        assert_eq!(mode(&db), 0o600);
    }

    #[test]
    fn create_exclusive_keeps_the_first_file() {
        let t = tempfile::tempdir().expect("tempdir");
        let p = t.path().join("k");
        assert_eq!(
            create_exclusive(&p, b"one").expect("first"),
            Created::Created
        );
        assert_eq!(
            create_exclusive(&p, b"two").expect("second"),
            Created::Existed
        );
        assert_eq!(fs::read(&p).expect("read"), b"one");
        assert_eq!(mode(&p), 0o600);
        // No temporary files are left behind.
        assert_eq!(fs::read_dir(t.path()).expect("ls").count(), 1);
    }

    #[test]
    fn write_atomic_replaces_and_is_private() {
        let t = tempfile::tempdir().expect("tempdir");
        let p = t.path().join("node.json");
        write_atomic(&p, b"{}").expect("write");
        write_atomic(&p, b"{\"a\":1}").expect("replace");
        assert_eq!(fs::read(&p).expect("read"), b"{\"a\":1}");
        assert_eq!(mode(&p), 0o600);
        assert_eq!(fs::read_dir(t.path()).expect("ls").count(), 1);
    }
}

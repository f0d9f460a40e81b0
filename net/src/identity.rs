//! The device identity: an ed25519 secret key in a file of mode 0600.
//!
//! Created on first start and kept for life, so a restart or an update never changes the
//! device's id (its iroh endpoint id). The key's bytes are never logged or printed.

use std::{
    fs,
    io::ErrorKind,
    path::{Path, PathBuf},
};

use iroh::SecretKey;

use crate::files::Created;

/// Why the identity key could not be loaded or created.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IdentityError {
    /// The file could not be read or written.
    #[error("identity key {path}: {source}")]
    Io {
        /// The key file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file exists but does not hold a key.
    #[error("identity key {path} is corrupt ({len} bytes, expected 32); move it away to create a new identity (the device must then be paired again)")]
    Corrupt {
        /// The key file.
        path: PathBuf,
        /// Its length.
        len: usize,
    },
}

/// Loads the secret key at `path`, creating it (mode 0600, in a 0700 directory) if
/// absent. Creation is exclusive: when two processes start at once, one creates the key
/// and the other reads it, so both end with the same identity.
pub fn load_or_create_secret_key(path: &Path) -> Result<SecretKey, IdentityError> {
    let io = |source| IdentityError::Io {
        path: path.to_path_buf(),
        source,
    };
    match read_key(path) {
        Err(IdentityError::Io { source, .. }) if source.kind() == ErrorKind::NotFound => {}
        other => return other,
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        crate::files::ensure_private_dir(dir).map_err(io)?;
    }
    let key = SecretKey::generate();
    match crate::files::create_exclusive(path, &key.to_bytes()).map_err(io)? {
        Created::Created => {
            tracing::info!(id = %key.public(), path = %path.display(), "created device identity");
            Ok(key)
        }
        // Another process created it first: its key is the identity.
        Created::Existed => read_key(path),
    }
}

fn read_key(path: &Path) -> Result<SecretKey, IdentityError> {
    let bytes = fs::read(path).map_err(|source| IdentityError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let arr: [u8; 32] = bytes
        .as_slice()
        .try_into()
        .map_err(|_| IdentityError::Corrupt {
            path: path.to_path_buf(),
            len: bytes.len(),
        })?;
    Ok(SecretKey::from_bytes(&arr))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_once_then_stable_and_private() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("sub").join("secret.key");
        let a = load_or_create_secret_key(&path).expect("create");
        let b = load_or_create_secret_key(&path).expect("load");
        assert_eq!(a.public(), b.public());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        fs::write(&path, b"short").expect("corrupt it");
        let err = load_or_create_secret_key(&path).expect_err("corrupt");
        assert!(err.to_string().contains("corrupt"), "{err}");
    }

    #[test]
    fn racing_creators_all_get_the_same_key() {
        for _round in 0..20 {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("home").join("secret.key");
            let barrier = std::sync::Barrier::new(8);
            let ids: Vec<_> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..8)
                    .map(|_| {
                        s.spawn(|| {
                            barrier.wait();
                            load_or_create_secret_key(&path).map(|k| k.public())
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("thread").expect("key"))
                    .collect()
            });
            assert!(ids.windows(2).all(|w| w[0] == w[1]), "{ids:?}");
            let on_disk = load_or_create_secret_key(&path).expect("reload").public();
            assert_eq!(ids[0], on_disk);
            // Only the key is left: no temporary files.
            let names: Vec<_> = fs::read_dir(path.parent().expect("dir"))
                .expect("ls")
                .map(|e| e.expect("entry").file_name())
                .collect();
            assert_eq!(names.len(), 1, "{names:?}");
        }
    }
}

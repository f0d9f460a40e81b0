//! The device identity: an ed25519 secret key in a file of mode 0600.
//!
//! Created on first start and kept for life, so a restart or an update never changes the
//! device's id (its iroh endpoint id). The key's bytes are never logged or printed.

use std::{
    fs,
    io::Write,
    path::{Path, PathBuf},
};

use iroh::SecretKey;

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

/// Loads the secret key at `path`, creating it (mode 0600) if absent.
pub fn load_or_create_secret_key(path: &Path) -> Result<SecretKey, IdentityError> {
    let io = |source| IdentityError::Io {
        path: path.to_path_buf(),
        source,
    };
    match fs::read(path) {
        Ok(bytes) => {
            let arr: [u8; 32] =
                bytes
                    .as_slice()
                    .try_into()
                    .map_err(|_| IdentityError::Corrupt {
                        path: path.to_path_buf(),
                        len: bytes.len(),
                    })?;
            Ok(SecretKey::from_bytes(&arr))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(dir) = path.parent() {
                fs::create_dir_all(dir).map_err(io)?;
            }
            let key = SecretKey::generate();
            // Write to a temporary file first so a crash never leaves half a key.
            let tmp = path.with_extension("tmp");
            let mut opts = fs::OpenOptions::new();
            opts.write(true).create(true).truncate(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                opts.mode(0o600);
            }
            let mut f = opts.open(&tmp).map_err(io)?;
            f.write_all(&key.to_bytes()).map_err(io)?;
            f.sync_all().map_err(io)?;
            fs::rename(&tmp, path).map_err(io)?;
            tracing::info!(id = %key.public(), path = %path.display(), "created device identity");
            Ok(key)
        }
        Err(e) => Err(io(e)),
    }
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
}

//! Confining a stdio MCP server: on Linux, when `bwrap` (bubblewrap) is on `PATH`, the
//! server runs in a mount namespace where the hub's data directory is an empty tmpfs, with
//! only the bound project's directory and the plugin's own directory put back, so it
//! cannot read `hub.db`, `hearth.db`, the keys or `server.secret`; it also gets its own
//! pid namespace and dies with the hub. Elsewhere (macOS, no `bwrap`, or a server set to
//! `sandbox: off`) it runs unconfined, and [`Decision::Unconfined`] says why.
//!
//! The command line is built by a pure function ([`bwrap_args`]); this module never runs
//! anything itself and never weakens the confinement to make a server start.

use std::{
    ffi::{OsStr, OsString},
    path::{Path, PathBuf},
};

use super::store::SandboxMode;

/// The directories a confined server is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confinement {
    /// The hub's data directory: hidden behind an empty tmpfs.
    pub data_dir: PathBuf,
    /// The bound project's directory (inside the data directory), put back read-write.
    pub project_dir: Option<PathBuf>,
    /// The plugin's own directory (`<data dir>/plugins/<name>`), put back read-write.
    pub plugin_dir: PathBuf,
    /// Where the server starts.
    pub cwd: PathBuf,
}

/// How a server will run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Under bubblewrap, at this path.
    Bubblewrap(PathBuf),
    /// Unconfined, for this reason (said in the log, the API and `plugins add`).
    Unconfined(String),
}

impl Decision {
    /// Whether the server is confined.
    pub fn sandboxed(&self) -> bool {
        matches!(self, Self::Bubblewrap(_))
    }

    /// Why a server runs unconfined, if it does.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Self::Bubblewrap(_) => None,
            Self::Unconfined(why) => Some(why),
        }
    }
}

/// Decides how a server set to `mode` runs on this machine, `bwrap` being where
/// bubblewrap was found (see [`find_bwrap`]).
pub fn decide(mode: SandboxMode, bwrap: Option<PathBuf>) -> Decision {
    if mode == SandboxMode::Off {
        return Decision::Unconfined("its sandbox is off (--no-sandbox)".into());
    }
    if !cfg!(target_os = "linux") {
        return Decision::Unconfined(
            "servers are sandboxed on Linux only (bubblewrap); this system has no sandbox for them"
                .into(),
        );
    }
    match bwrap {
        Some(path) => Decision::Bubblewrap(path),
        None => Decision::Unconfined(
            "bubblewrap (`bwrap`) is not installed: install the `bubblewrap` package to sandbox servers"
                .into(),
        ),
    }
}

/// `bwrap` in the directories of `path` (a `PATH` value), if it is there.
pub fn find_bwrap(path: Option<&OsStr>) -> Option<PathBuf> {
    std::env::split_paths(path?)
        .map(|dir| dir.join("bwrap"))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        path.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}

/// The arguments of `bwrap` that run `program args` confined to `c`. Order matters: the
/// binds come after the tmpfs that hides the data directory, so they land on top of it.
pub fn bwrap_args(c: &Confinement, program: &str, args: &[String]) -> Vec<OsString> {
    let mut out: Vec<OsString> = Vec::new();
    let mut push = |items: &[&OsStr]| out.extend(items.iter().map(|s| s.to_os_string()));
    push(&["--bind".as_ref(), "/".as_ref(), "/".as_ref()]);
    push(&["--tmpfs".as_ref(), c.data_dir.as_os_str()]);
    if let Some(project) = &c.project_dir {
        push(&["--bind".as_ref(), project.as_os_str(), project.as_os_str()]);
    }
    push(&[
        "--bind".as_ref(),
        c.plugin_dir.as_os_str(),
        c.plugin_dir.as_os_str(),
    ]);
    push(&["--dev".as_ref(), "/dev".as_ref()]);
    push(&["--proc".as_ref(), "/proc".as_ref()]);
    push(&[
        "--unshare-pid".as_ref(),
        "--die-with-parent".as_ref(),
        "--chdir".as_ref(),
        c.cwd.as_os_str(),
        "--".as_ref(),
        program.as_ref(),
    ]);
    out.extend(args.iter().map(OsString::from));
    out
}

/// The program and arguments to spawn for `program args` under `decision`.
pub fn command_line(
    decision: &Decision,
    c: &Confinement,
    program: &str,
    args: &[String],
) -> (OsString, Vec<OsString>) {
    match decision {
        Decision::Bubblewrap(bwrap) => {
            (bwrap.clone().into_os_string(), bwrap_args(c, program, args))
        }
        Decision::Unconfined(_) => (program.into(), args.iter().map(OsString::from).collect()),
    }
}

/// A command line as a person reads it (arguments with spaces or quotes quoted).
pub fn display(program: &OsStr, args: &[OsString]) -> String {
    std::iter::once(program)
        .chain(args.iter().map(OsString::as_os_str))
        .map(|a| {
            let s = a.to_string_lossy();
            if !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:@,+%".contains(c))
            {
                s.into_owned()
            } else {
                format!("'{}'", s.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn confinement(project: bool) -> Confinement {
        Confinement {
            data_dir: "/home/u/.hearth".into(),
            project_dir: project.then(|| "/home/u/.hearth/projects/p1".into()),
            plugin_dir: "/home/u/.hearth/plugins/files".into(),
            cwd: "/home/u/.hearth/projects/p1".into(),
        }
    }

    fn strings(v: &[OsString]) -> Vec<&str> {
        v.iter().map(|s| s.to_str().expect("utf-8")).collect()
    }

    #[test]
    fn bwrap_hides_the_data_dir_and_binds_back_after_the_tmpfs() {
        let args = bwrap_args(&confinement(true), "npx", &["-y".into(), "pkg".into()]);
        assert_eq!(
            strings(&args),
            [
                "--bind",
                "/",
                "/",
                "--tmpfs",
                "/home/u/.hearth",
                "--bind",
                "/home/u/.hearth/projects/p1",
                "/home/u/.hearth/projects/p1",
                "--bind",
                "/home/u/.hearth/plugins/files",
                "/home/u/.hearth/plugins/files",
                "--dev",
                "/dev",
                "--proc",
                "/proc",
                "--unshare-pid",
                "--die-with-parent",
                "--chdir",
                "/home/u/.hearth/projects/p1",
                "--",
                "npx",
                "-y",
                "pkg"
            ]
        );
    }

    #[test]
    fn a_global_plugin_gets_no_project_bind() {
        let c = Confinement {
            cwd: "/home/u/.hearth/plugins/files".into(),
            ..confinement(false)
        };
        let built = bwrap_args(&c, "srv", &[]);
        let args = strings(&built);
        assert!(!args.iter().any(|a| a.contains("projects")), "{args:?}");
        let tmpfs = args.iter().position(|a| *a == "--tmpfs").expect("tmpfs");
        let bind = args
            .iter()
            .position(|a| *a == "/home/u/.hearth/plugins/files")
            .expect("plugin bind");
        assert!(tmpfs < bind, "the plugin dir is bound after the tmpfs");
        assert_eq!(args.last(), Some(&"srv"));
    }

    #[test]
    fn decisions() {
        let off = decide(SandboxMode::Off, Some("/usr/bin/bwrap".into()));
        assert!(!off.sandboxed());
        assert!(off.reason().expect("why").contains("off"));
        let none = decide(SandboxMode::Auto, None);
        assert!(!none.sandboxed());
        let found = decide(SandboxMode::Auto, Some("/usr/bin/bwrap".into()));
        if cfg!(target_os = "linux") {
            assert!(none.reason().expect("why").contains("bubblewrap"));
            assert_eq!(found, Decision::Bubblewrap("/usr/bin/bwrap".into()));
        } else {
            assert!(!found.sandboxed());
        }
    }

    #[test]
    fn command_line_wraps_only_when_sandboxed() {
        let c = confinement(true);
        let (p, a) = command_line(
            &Decision::Unconfined("x".into()),
            &c,
            "srv",
            &["a b".into()],
        );
        assert_eq!(p, "srv");
        assert_eq!(strings(&a), ["a b"]);
        assert_eq!(display(&p, &a), "srv 'a b'");
        let (p, a) = command_line(
            &Decision::Bubblewrap("/usr/bin/bwrap".into()),
            &c,
            "srv",
            &[],
        );
        assert_eq!(p, "/usr/bin/bwrap");
        assert_eq!(a.first().and_then(|s| s.to_str()), Some("--bind"));
        assert_eq!(a.last().and_then(|s| s.to_str()), Some("srv"));
    }

    #[test]
    fn finds_bwrap_on_a_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = std::env::join_paths([dir.path()]).expect("path");
        assert_eq!(find_bwrap(Some(&path)), None);
        let bwrap = dir.path().join("bwrap");
        std::fs::write(&bwrap, "#!/bin/sh\n").expect("write");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&bwrap, std::fs::Permissions::from_mode(0o755))
                .expect("chmod");
        }
        assert_eq!(find_bwrap(Some(&path)), Some(bwrap));
        assert_eq!(find_bwrap(None), None);
    }
}

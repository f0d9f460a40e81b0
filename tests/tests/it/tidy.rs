//! Structure checks: the crate arrows of docs/ARCHITECTURE.md hold (read from
//! `cargo metadata`), and every Rust source file opens with a `//!` doc.

use std::{collections::BTreeMap, path::Path, process::Command};

fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or(Path::new("."))
}

#[test]
fn crate_arrows_point_one_way() -> anyhow::Result<()> {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--no-deps",
            "--offline",
            "--format-version",
            "1",
        ])
        .current_dir(workspace_root())
        .output()?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let mut deps: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for pkg in meta["packages"].as_array().into_iter().flatten() {
        let name = pkg["name"].as_str().unwrap_or_default().to_string();
        let hearth: Vec<String> = pkg["dependencies"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|d| d["kind"].is_null()) // normal dependencies
            .filter_map(|d| d["name"].as_str())
            .filter(|n| n.starts_with("hearth-"))
            .map(str::to_string)
            .collect();
        deps.insert(name, hearth);
    }
    let allowed: &[(&str, &[&str])] = &[
        ("hearth-protocol", &[]),
        ("hearth-sync", &["hearth-protocol"]),
        ("hearth-net", &["hearth-protocol", "hearth-sync"]),
        // hearth-net for `files`: the owner token is created once, 0600, like every
        // private file.
        (
            "hearth-ui",
            &["hearth-protocol", "hearth-sync", "hearth-net"],
        ),
        (
            "hearth-hub",
            &["hearth-protocol", "hearth-sync", "hearth-net", "hearth-ui"],
        ),
        (
            "hearth-node",
            &["hearth-protocol", "hearth-sync", "hearth-net", "hearth-ui"],
        ),
    ];
    for (krate, ok) in allowed {
        let actual = deps
            .get(*krate)
            .ok_or_else(|| anyhow::anyhow!("{krate} missing from the workspace"))?;
        for d in actual {
            assert!(ok.contains(&d.as_str()), "{krate} must not depend on {d}");
        }
    }
    // protocol stays pure: no tokio, no I/O crates.
    let protocol = meta["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == "hearth-protocol")
        .ok_or_else(|| anyhow::anyhow!("no hearth-protocol"))?;
    for d in protocol["dependencies"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| d["kind"].is_null())
    {
        let n = d["name"].as_str().unwrap_or_default();
        assert!(
            ["serde", "postcard", "thiserror"].contains(&n),
            "hearth-protocol must not depend on {n}"
        );
    }
    Ok(())
}

#[test]
fn every_source_file_opens_with_a_module_doc() -> anyhow::Result<()> {
    let mut missing = Vec::new();
    let mut stack = vec![workspace_root().to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            if path.is_dir() {
                if !["target", "node_modules", ".git"].contains(&name) && !name.starts_with('.') {
                    stack.push(path);
                }
            } else if name.ends_with(".rs") {
                let text = std::fs::read_to_string(&path)?;
                if !text.trim_start().starts_with("//!") {
                    missing.push(path.display().to_string());
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "files without a leading //! doc: {missing:?}"
    );
    Ok(())
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            rust_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// Inside the hub: only `hubdb` creates tables or sets `user_version` in hub.db; the API
/// module never touches SQLite; nothing under `agent/` knows the API.
#[test]
fn hub_subsystem_arrows_hold() -> anyhow::Result<()> {
    let src = workspace_root().join("hub/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files)?;
    let mut wrong = Vec::new();
    for file in files {
        let rel = file
            .strip_prefix(&src)?
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(&file)?;
        // Test modules may build fixtures; production code may not.
        let code: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        if rel != "hubdb.rs" && (code.contains("CREATE TABLE") || code.contains("user_version")) {
            wrong.push(format!("{rel}: creates hub.db tables outside hubdb.rs"));
        }
        if rel.starts_with("api/") && (code.contains("rusqlite") || code.contains("execute(")) {
            wrong.push(format!("{rel}: the API module holds no SQL"));
        }
        if rel.starts_with("agent/") && (code.contains("crate::api") || code.contains("axum")) {
            wrong.push(format!("{rel}: the agent knows no HTTP"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    Ok(())
}

fn files_under(dir: &Path, out: &mut Vec<std::path::PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            files_under(&path, out)?;
        } else {
            out.push(path);
        }
    }
    Ok(())
}

/// The web UI's files: every script and stylesheet opens with a comment saying what it
/// owns, and no script turns a string into markup (`innerHTML` and friends): text from
/// a peer, a tool or the model must reach the page as text nodes only (`dom.js`).
#[test]
fn ui_files_say_what_they_own_and_never_parse_markup() -> anyhow::Result<()> {
    let mut files = Vec::new();
    files_under(&workspace_root().join("ui/assets"), &mut files)?;
    let mut problems = Vec::new();
    let forbidden = [
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "createContextualFragment",
        "DOMParser",
        "eval(",
        "new Function",
    ];
    for file in &files {
        let name = file.display().to_string();
        let text = std::fs::read_to_string(file)?;
        if name.ends_with(".js") {
            if !text.starts_with("// ") {
                problems.push(format!(
                    "{name}: must open with a `// <file>: what it owns` comment"
                ));
            }
            for word in forbidden {
                if text.contains(word) {
                    problems.push(format!("{name}: uses {word}"));
                }
            }
        } else if name.ends_with(".css") && !text.starts_with("/* ") {
            problems.push(format!("{name}: must open with a `/* … */` comment"));
        }
    }
    assert!(files.len() > 5, "found the UI's files");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    Ok(())
}

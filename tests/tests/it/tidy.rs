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
        ("hearth-ui", &["hearth-protocol", "hearth-sync"]),
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

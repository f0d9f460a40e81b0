//! `hearth status`: the pinned hub and what the last `hearth run` saw, in words (for
//! example that the hub is too old and must be updated).

use std::path::Path;

use crate::{config::NodeConfig, status::SavedStatus};

pub(crate) fn run(home: &Path) -> anyhow::Result<()> {
    let config = NodeConfig::load(home)?;
    match &config.hub {
        Some(hub) => println!("hub: {}", hub.id),
        None => {
            println!("hub: none (run `hearth pair`)");
            return Ok(());
        }
    }
    if let Some(scope) = &config.scope {
        println!("scope: {scope}");
    }
    let ours: Vec<String> = hearth_protocol::SYNC_VERSIONS
        .iter()
        .map(u16::to_string)
        .collect();
    println!("protocol: sync {}", ours.join(","));
    let Some(s) = SavedStatus::load(home) else {
        println!("sync: unknown (`hearth run` has not run here yet)");
        return Ok(());
    };
    let ago = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(s.at_ms)
        - s.at_ms)
        .max(0)
        / 1000;
    let version = s
        .version
        .map(|v| format!(" on sync {v}"))
        .unwrap_or_default();
    match (s.state.as_str(), &s.detail) {
        ("incompatible", Some(why)) => println!("sync: not syncing: {why} ({ago}s ago)"),
        (state, Some(why)) => println!("sync: {state}{version}: {why} ({ago}s ago)"),
        (state, None) => println!("sync: {state}{version} ({ago}s ago)"),
    }
    if let Some(path) = &s.path {
        println!("path: {path}");
    }
    Ok(())
}

//! Cross-process tests: real hubs and nodes as separate processes on 127.0.0.1 with
//! relays off, driven through their command lines. One binary, one module per concern.

mod access;
mod agent;
mod bad_frames;
mod crash;
mod events;
mod lan;
mod node_api;
mod node_chat;
mod node_client;
mod node_relay;
mod pair_flood;
mod pairing;
mod plugins_computer;
mod plugins_http;
mod plugins_lab;
mod plugins_mcp;
mod plugins_sandbox;
mod relay;
mod relay_access;
mod replication;
mod schedules;
mod scope;
mod task_jobs;
mod telegram;
mod tidy;
mod ui_chat;
mod ui_notifications;
mod ui_offline;
mod ui_pages;
mod ui_pairing;
mod ui_plugins;
mod ui_records;
mod ui_sanitize;
mod ui_schedules;
mod ui_scope;
mod ui_telegram;
mod ui_typing;
mod ui_unit;
mod ui_xss;
mod versions;

use std::path::PathBuf;

use hearth_tests::Binaries;

pub(crate) fn bins() -> Binaries {
    Binaries::new(env!("CARGO_BIN_EXE_hearth-testbin"))
}

pub(crate) fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

pub(crate) fn sub(dir: &tempfile::TempDir, name: &str) -> PathBuf {
    dir.path().join(name)
}

pub(crate) fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect()
}

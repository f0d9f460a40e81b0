//! Project-scoped devices: a device paired for a project replicates that project and its
//! children only. Nothing outside (not even an id, its root's parent included) reaches
//! it; nothing it sends outside its scope is accepted, and the subprojects it makes are.

use std::{collections::BTreeSet, time::Duration};

use hearth_sync::{placement_id, DocId, DocumentStore, Note, NotePatch};
use hearth_tests::{eventually, hub_cli, HubProc, NodeHome};

use crate::{bins, sub, tempdir};

fn ids_in(db: &std::path::Path) -> anyhow::Result<BTreeSet<String>> {
    let conn = rusqlite::Connection::open(db)?;
    let mut stmt = conn.prepare("SELECT lower(hex(id)) FROM documents")?;
    let ids = stmt
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<Result<_, _>>()?;
    Ok(ids)
}

/// Whether id `id` (32 hex digits) occurs in `hay`, as text or as its 16 bytes.
fn mentions(hay: &[u8], id: &str) -> bool {
    let bytes: Vec<u8> = (0..16)
        .map(|i| u8::from_str_radix(&id[2 * i..2 * i + 2], 16).unwrap_or(0))
        .collect();
    hay.windows(id.len()).any(|w| w == id.as_bytes()) || hay.windows(16).any(|w| w == bytes)
}

#[test]
fn a_scoped_device_sees_and_writes_its_subtree_only() -> anyhow::Result<()> {
    let bins = bins();
    let dir = tempdir();
    let hub_home = sub(&dir, "hub");
    let docs = NodeHome::new(&bins, hub_home.clone())?; // `hearth` on the hub's store
    let add = |args: &[&str]| -> anyhow::Result<String> { Ok(docs.cli(args)?.trim().to_string()) };
    let home = add(&["project", "add", "home"])?;
    let work = add(&["project", "add", "work", "--parent", "home"])?;
    let clients = add(&["project", "add", "clients", "--parent", "work"])?;
    let personal = add(&["project", "add", "personal", "--parent", "home"])?;
    let in_work = add(&[
        "note",
        "add",
        "--title",
        "Roadmap",
        "--project",
        "work",
        "--content",
        "ship it",
    ])?;
    let in_clients = add(&["note", "add", "--title", "Acme", "--project", "clients"])?;
    let in_personal = add(&[
        "note",
        "add",
        "--title",
        "Diary",
        "--project",
        "personal",
        "--content",
        "secret",
    ])?;
    let in_home = add(&["note", "add", "--title", "House", "--project", "home"])?;
    let loose = add(&["note", "add", "--title", "Loose"])?;
    let task_personal = add(&["task", "add", "Dentist", "--project", "personal"])?;

    let laptop = NodeHome::new(&bins, sub(&dir, "work-laptop"))?;
    hub_cli(
        &bins,
        &hub_home,
        &[
            "devices",
            "add",
            &laptop.id,
            "--name",
            "work laptop",
            "--scope",
            "work",
        ],
    )?;
    let hub = HubProc::start(&bins, &hub_home, 0)?;
    let node = laptop.start(&hub.id, hub.addr)?;
    node.wait_line(Duration::from_secs(30), |l| {
        l.starts_with("hearth caught-up")
    })?;

    // The subtree, with the placement of `clients` (under `work`), not that of `work`.
    let placed =
        |id: &str| -> anyhow::Result<String> { Ok(placement_id(id.parse::<DocId>()?).to_string()) };
    let expected: BTreeSet<String> = [&work, &clients, &in_work, &in_clients]
        .into_iter()
        .cloned()
        .chain([placed(&clients)?])
        .collect();
    assert_eq!(
        ids_in(&laptop.home.join("hearth.db"))?,
        expected,
        "exactly the subtree replicates"
    );
    // Not even the ids of the rest are anywhere in the device's database file, the
    // scope root's parent `home` included (its edge lives in `work`'s placement).
    let raw = std::fs::read(laptop.home.join("hearth.db"))?;
    let wal = std::fs::read(laptop.home.join("hearth.db-wal")).unwrap_or_default();
    let work_placement = placed(&work)?;
    let personal_placement = placed(&personal)?;
    for outside in [
        &home,
        &work_placement,
        &personal,
        &personal_placement,
        &in_personal,
        &in_home,
        &loose,
        &task_personal,
    ] {
        for hay in [&raw, &wal] {
            assert!(!mentions(hay, outside), "id {outside} leaked");
        }
    }

    // Live: a change outside the scope is not pushed; a new note inside is.
    docs.cli(&["note", "edit", &in_personal, "--append", " more secrets"])?;
    let fresh = add(&["note", "add", "--title", "Sprint", "--project", "clients"])?;
    eventually(Duration::from_secs(20), || {
        Ok(ids_in(&laptop.home.join("hearth.db"))?.contains(&fresh))
    })?;
    assert!(!ids_in(&laptop.home.join("hearth.db"))?.contains(&in_personal));

    // Writes outside the scope are refused: a note with no project, and moving an
    // in-scope note out of it. (The device's own store allows both; the hub does not.)
    let device_store = DocumentStore::open(laptop.home.join("hearth.db"))?;
    let rogue = device_store.create_blocking(Note {
        title: "escape".into(),
        content: "x".into(),
        project: None,
    })?;
    device_store.update_blocking(
        in_work.parse()?,
        NotePatch {
            project: Some(None),
            ..NotePatch::default()
        },
    )?;
    let hub_log = || hub.proc.stderr_text();
    eventually(Duration::from_secs(20), || {
        Ok(hub_log().matches("outside the peer's scope").count() >= 2)
    })?;
    let hub_ids = ids_in(&hub_home.join("hearth.db"))?;
    assert!(
        !hub_ids.contains(&rogue.id.to_string()),
        "the hub stored a document from outside the scope"
    );
    let shown: serde_json::Value =
        serde_json::from_str(&docs.cli(&["note", "show", &in_work, "--json"])?)?;
    assert_eq!(
        shown["project"],
        serde_json::Value::String(work.clone()),
        "the move out of scope was refused"
    );
    // Edits inside the scope still flow.
    laptop.cli(&["note", "edit", &in_clients, "--append", "signed"])?;
    eventually(Duration::from_secs(20), || {
        Ok(docs.cli(&["note", "show", &in_clients])?.contains("signed"))
    })?;
    Ok(())
}

#[test]
fn narrowing_a_scope_restarts_the_devices_session() -> anyhow::Result<()> {
    let bins = bins();
    let dir = tempdir();
    let hub_home = sub(&dir, "hub");
    let docs = NodeHome::new(&bins, hub_home.clone())?;
    let add = |args: &[&str]| -> anyhow::Result<String> { Ok(docs.cli(args)?.trim().to_string()) };
    add(&["project", "add", "home"])?;
    add(&["project", "add", "work", "--parent", "home"])?;
    add(&["project", "add", "personal", "--parent", "home"])?;
    let laptop = NodeHome::new(&bins, sub(&dir, "laptop"))?;
    hub_cli(
        &bins,
        &hub_home,
        &["devices", "add", &laptop.id, "--name", "laptop"],
    )?;
    let hub = HubProc::start(&bins, &hub_home, 0)?;
    let node = laptop.start(&hub.id, hub.addr)?;
    node.wait_line(Duration::from_secs(30), |l| {
        l.starts_with("hearth caught-up")
    })?;
    hub_cli(&bins, &hub_home, &["devices", "scope", &laptop.id, "work"])?;
    eventually(Duration::from_secs(10), || {
        Ok(hub.proc.stderr_text().contains("device scope changed"))
    })?;
    // The device reconnects under its new scope: a new note in `personal` no longer
    // reaches it, a new one in `work` does.
    node.wait_line(Duration::from_secs(30), |l| {
        l.starts_with("hearth caught-up")
    })?;
    let private = add(&["note", "add", "--title", "Diary", "--project", "personal"])?;
    let shared = add(&["note", "add", "--title", "Plan", "--project", "work"])?;
    eventually(Duration::from_secs(20), || {
        Ok(ids_in(&laptop.home.join("hearth.db"))?.contains(&shared))
    })?;
    assert!(!ids_in(&laptop.home.join("hearth.db"))?.contains(&private));
    Ok(())
}

#[test]
fn a_scoped_device_adds_subprojects_but_no_top_level_project() -> anyhow::Result<()> {
    let bins = bins();
    let dir = tempdir();
    let hub_home = sub(&dir, "hub");
    let docs = NodeHome::new(&bins, hub_home.clone())?;
    let add = |args: &[&str]| -> anyhow::Result<String> { Ok(docs.cli(args)?.trim().to_string()) };
    let home = add(&["project", "add", "home"])?;
    let work = add(&["project", "add", "work", "--parent", "home"])?;
    let laptop = NodeHome::new(&bins, sub(&dir, "laptop"))?;
    hub_cli(
        &bins,
        &hub_home,
        &[
            "devices", "add", &laptop.id, "--name", "laptop", "--scope", "work",
        ],
    )?;
    let hub = HubProc::start(&bins, &hub_home, 0)?;
    let node = laptop.start(&hub.id, hub.addr)?;
    node.wait_line(Duration::from_secs(30), |l| {
        l.starts_with("hearth caught-up")
    })?;
    // On the device, beside its running daemon: a subproject of its root with a note,
    // and a project at the top level.
    let on_laptop =
        |args: &[&str]| -> anyhow::Result<String> { Ok(laptop.cli(args)?.trim().to_string()) };
    let drafts = on_laptop(&["project", "add", "drafts", "--parent", "work"])?;
    let outline = on_laptop(&["note", "add", "--title", "Outline", "--project", "drafts"])?;
    let escape = on_laptop(&["project", "add", "escape"])?;
    let marker = on_laptop(&["note", "add", "--title", "Marker", "--project", "work"])?;
    eventually(Duration::from_secs(20), || {
        let ids = ids_in(&hub_home.join("hearth.db"))?;
        Ok([&drafts, &outline, &marker]
            .iter()
            .all(|id| ids.contains(*id)))
    })?;
    let listed = docs.cli(&["project", "list"])?;
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with(&drafts) && l.ends_with(&work)),
        "drafts is not under work on the hub:\n{listed}"
    );
    assert!(!ids_in(&hub_home.join("hearth.db"))?.contains(&escape));
    // Still not after the device reconnects and offers it again.
    drop(node);
    let node = laptop.start(&hub.id, hub.addr)?;
    node.wait_line(Duration::from_secs(30), |l| {
        l.starts_with("hearth caught-up")
    })?;
    assert!(!ids_in(&hub_home.join("hearth.db"))?.contains(&escape));
    // And the device still knows nothing of `home`.
    let raw = std::fs::read(laptop.home.join("hearth.db"))?;
    let wal = std::fs::read(laptop.home.join("hearth.db-wal")).unwrap_or_default();
    for hay in [&raw, &wal] {
        assert!(
            !mentions(hay, &home),
            "the device learned its root's parent"
        );
    }
    Ok(())
}

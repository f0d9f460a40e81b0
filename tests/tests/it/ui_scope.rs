//! A laptop paired for one project, in its own UI (`tests/browser/scope.mjs`): new notes
//! and tasks land in that project when none is chosen, no editor offers "no project",
//! "every project" or the top level, and the paired project cannot be renamed or moved
//! from the laptop. Each of those would be refused by the hub and leave the laptop's
//! copy different from the hub's.

use std::time::Duration;

use hearth_tests::{
    browser::{Journey, UiLab},
    eventually,
};
use serde_json::{json, Value};

use crate::{bins, tempdir};

#[test]
fn a_laptop_paired_for_one_project_is_kept_inside_it_by_its_ui() -> anyhow::Result<()> {
    let dir = tempdir();
    let mut lab = UiLab::start(&bins(), dir.path(), &[])?;
    let (status, body) = lab.hub_api(
        "POST",
        "/api/v1/projects",
        Some(&json!({"name": "work"}).to_string()),
    )?;
    anyhow::ensure!(status == 201, "creating work: {status} {body}");
    let work = serde_json::from_str::<Value>(&body)?["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    eventually(Duration::from_secs(30), || {
        Ok(lab
            .node_api("GET", &format!("/api/v1/projects/{work}"), None)?
            .0
            == 200)
    })?;
    // The owner scopes the laptop to `work`; pairing with a scope writes it to the
    // laptop's node.json, as done here.
    let (status, body) = lab.hub_api(
        "PATCH",
        &format!("/api/v1/devices/{}", lab.node.id),
        Some(&json!({"scope": work}).to_string()),
    )?;
    anyhow::ensure!(status == 200, "scoping the laptop: {status} {body}");
    lab.stop_node();
    let path = lab.node.home.join("node.json");
    let mut node_json: Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
    node_json["scope"] = Value::from(work.clone());
    std::fs::write(&path, node_json.to_string())?;
    lab.start_node()?;

    let mut config = lab.config()?;
    config["work"] = Value::from(work);
    Journey::new("scope.mjs", config).run(|cmd, _| lab.control(cmd))?;
    Ok(())
}

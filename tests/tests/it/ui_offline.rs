//! The laptop journey in headless Chromium (`tests/browser/offline.mjs`): with the hub
//! stopped, a note and a task are created and edited in the node's UI; the hub starts
//! while the node is still cut off, its UI shows neither; the link heals and both appear
//! in the hub's open pages without a reload, with every edit, and the node's status
//! comes back online with nothing waiting.

use hearth_tests::browser::{Journey, UiLab};

use crate::{bins, tempdir};

#[test]
fn notes_and_tasks_made_offline_on_the_laptop_appear_live_on_the_hub() -> anyhow::Result<()> {
    if !hearth_tests::can_make_namespaces() {
        eprintln!("SKIPPED: cutting the node's link needs root and iproute2 (network namespaces)");
        return Ok(());
    }
    let dir = tempdir();
    let mut lab = UiLab::cuttable(&bins(), dir.path(), &[])?;
    let config = lab.config()?;
    Journey::new("offline.mjs", config).run(|cmd, _| lab.control(cmd))?;
    Ok(())
}

//! The web UI, page by page, on a real hub and a real node in headless Chromium
//! (`tests/browser/pages.mjs`): every page loads signed in without an error on both,
//! screenshots of each in light and dark (the folder is printed), the node's status and
//! offline banner follow the hub going away and coming back, and a signed-out browser
//! is told which command signs it in.

use hearth_tests::browser::{Journey, UiLab};

use crate::{bins, tempdir};

#[test]
fn every_page_loads_on_hub_and_node_and_the_status_follows_the_hub() -> anyhow::Result<()> {
    let dir = tempdir();
    let mut lab = UiLab::start(&bins(), dir.path(), &[])?;
    let config = lab.config()?;
    Journey::new("pages.mjs", config).run(|cmd, _| lab.control(cmd))?;
    Ok(())
}

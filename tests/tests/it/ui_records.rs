//! The tasks, contacts, skills and projects pages on a real hub and a real node in
//! headless Chromium (`tests/browser/records.mjs`): the project tree's changes and its
//! refusals (a cycle, the hub's `general`) shown in words; a task with a subtask, an
//! overdue date and a recurrence that moves on when checked; with the hub stopped, a
//! task, a contact with a tag and a skill with its Markdown preview made in the node's
//! UI, then seen by the hub's UI once it is back, and a task typed on the node showing
//! in the hub's open page without a reload. Screenshots in the folder the run prints.

use hearth_tests::browser::{Journey, UiLab};

use crate::{bins, tempdir};

#[test]
fn records_pages_edit_on_hub_and_offline_node_and_the_hub_sees_it() -> anyhow::Result<()> {
    let dir = tempdir();
    let mut lab = UiLab::start(&bins(), dir.path(), &[])?;
    let config = lab.config()?;
    Journey::new("records.mjs", config).run(|cmd, _| lab.control(cmd))?;
    Ok(())
}

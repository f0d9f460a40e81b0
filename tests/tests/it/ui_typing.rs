//! Two writers in one paragraph of one note, one in the hub's UI and one in the node's
//! (`tests/browser/typing.mjs`), live and again while the node is cut off from the hub:
//! every keystroke of both kept, each caret where its writer left it, emoji whole, and
//! both UIs and both servers end with the same text.

use hearth_tests::browser::{Journey, UiLab};
use serde_json::Value;

use crate::{bins, tempdir};

const START: &str = "Shared paragraph: the hub writes here and the laptop writes there, both at once.\n\nAnother paragraph stays as it is.";

#[test]
fn two_writers_keep_every_keystroke_live_and_across_a_cut() -> anyhow::Result<()> {
    if !hearth_tests::can_make_namespaces() {
        eprintln!("SKIPPED: cutting the node's link needs root and iproute2 (network namespaces)");
        return Ok(());
    }
    let dir = tempdir();
    let mut lab = UiLab::cuttable(&bins(), dir.path(), &[])?;
    // The journey starts once the note is on the node too.
    let id = lab.note_on_both("Written by two", START)?;
    let mut config = lab.config()?;
    config["note"] = Value::from(id);
    config["start"] = Value::from(START);
    Journey::new("typing.mjs", config).run(|cmd, _| lab.control(cmd))?;
    Ok(())
}

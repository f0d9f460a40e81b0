//! The Markdown renderer in the real browser (`tests/browser/sanitize.mjs`): hostile
//! Markdown from a peer, a tool or the model becomes text and safe links only, and no
//! script runs.

use hearth_tests::browser::{Journey, UiLab};

use crate::{bins, tempdir};

#[test]
fn hostile_markdown_renders_as_text_and_safe_links() -> anyhow::Result<()> {
    let dir = tempdir();
    let mut lab = UiLab::start(&bins(), dir.path(), &[])?;
    let config = lab.config()?;
    Journey::new("sanitize.mjs", config).run(|cmd, _| lab.control(cmd))?;
    Ok(())
}

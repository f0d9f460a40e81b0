//! A note holding markup, written through the hub's API as a peer or a tool would,
//! renders as text in the notes page of both UIs (`tests/browser/xss.mjs`): list,
//! search, title, editor and preview show its characters, and nothing of it runs or
//! becomes an element.

use hearth_tests::browser::{Journey, UiLab};
use serde_json::Value;

use crate::{bins, tempdir};

const TITLE: &str = r#"<img src=x onerror="window.__pwned=1"> in a title"#;
const CONTENT: &str = concat!(
    "Hostile: <script>window.__pwned=1</script> and ",
    r#"<img src=x onerror="window.__pwned=1"> pwned"#,
    "\n\n[a link](javascript:window.__pwned=1) <svg onload=\"window.__pwned=1\"></svg>\n",
);

#[test]
fn a_note_of_markup_renders_as_text_on_hub_and_node() -> anyhow::Result<()> {
    let dir = tempdir();
    let mut lab = UiLab::start(&bins(), dir.path(), &[])?;
    let id = lab.note_on_both(TITLE, CONTENT)?;
    let mut config = lab.config()?;
    config["note"] = Value::from(id);
    config["title"] = Value::from(TITLE);
    config["content"] = Value::from(CONTENT);
    Journey::new("xss.mjs", config).run(|cmd, _| lab.control(cmd))?;
    Ok(())
}

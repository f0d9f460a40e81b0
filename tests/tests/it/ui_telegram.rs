//! The Telegram card of the Settings page on a real hub whose Bot API is a fake on
//! loopback (`tests/browser/telegram.mjs`): a refused token, the right one starting the
//! bot, a stranger who wrote to it allowed into a project from the page, its
//! notifications switched off, the chat removed; the laptop's card pointing to the hub.
//! Afterwards the fake must have answered the stranger only after it was allowed.

use hearth_tests::{
    browser::{Journey, UiLab},
    fake_telegram::FakeTelegram,
};
use serde_json::Value;

use crate::{bins, tempdir};

const TOKEN: &str = "424242:ui-journey-token";
const STRANGER: i64 = 5_550_123;

#[test]
fn telegram_card_sets_the_token_and_allows_a_chat_that_tried() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let tg = rt.block_on(FakeTelegram::start(TOKEN))?;
    let dir = tempdir();
    let url = tg.url();
    let mut lab = UiLab::start(&bins(), dir.path(), &[("HEARTH_TELEGRAM_API", &url)])?;
    let config = lab.config()?;
    Journey::new("telegram.mjs", config).run(|cmd, _| match cmd {
        "token" => Some(Ok(Value::from(TOKEN))),
        "stranger" => {
            tg.send_text(STRANGER, "hello?");
            Some(Ok(Value::from(STRANGER)))
        }
        _ => lab.control(cmd),
    })?;
    anyhow::ensure!(
        tg.refused_tokens() >= 1,
        "the bad token was checked with Telegram"
    );
    anyhow::ensure!(
        tg.calls_to(STRANGER).is_empty(),
        "a chat not (yet) allowed got no answer: {:?}",
        tg.calls_to(STRANGER)
    );
    Ok(())
}

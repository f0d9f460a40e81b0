//! The `getUpdates` loop of one token: `getMe` first (the bot's name; a refused token
//! stops here), then long polls of [`POLL_TIMEOUT_SECS`](super::client::POLL_TIMEOUT_SECS)
//! from the stored offset, each update handed to `updates` and the offset stored right
//! after it, so a restart neither repeats nor loses an update.
//!
//! Network failures back off from 1 s doubling to 60 s; a 429 waits what Telegram asked;
//! a 401 (the token was revoked) stops the loop and says so in the status. Never starts
//! a turn or answers a chat itself.

use std::{sync::Arc, time::Duration};

use tokio::sync::watch;

use super::{client::BotApi, updates, Shared};

const BACKOFF_FIRST: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// Waits `pause`, or less if the loop is asked to stop; whether it was.
async fn pause_or_stop(pause: Duration, stop: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        _ = stop.changed() => true,
        _ = tokio::time::sleep(pause) => *stop.borrow(),
    }
}

/// What the owner reads when Telegram refuses the token.
const REFUSED: &str =
    "Telegram refused the bot token (401 Unauthorized): it was revoked or mistyped; set a new one";

/// Polls until `stop` says so or the token is refused.
pub(super) async fn run(shared: Arc<Shared>, bot: Arc<BotApi>, mut stop: watch::Receiver<bool>) {
    let mut backoff = BACKOFF_FIRST;
    let me = loop {
        let got = tokio::select! {
            _ = stop.changed() => return,
            got = bot.get_me() => got,
        };
        match got {
            Ok(me) => break me,
            Err(e) if e.bad_token() => {
                refused(&shared).await;
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "Telegram getMe failed; trying again");
                shared.live(|l| l.error = Some(e.to_string()));
                let wait = e.retry_after().unwrap_or(backoff);
                backoff = (backoff * 2).min(BACKOFF_MAX);
                if pause_or_stop(wait, &mut stop).await {
                    return;
                }
            }
        }
    };
    let username = me.username.clone().unwrap_or_default();
    tracing::info!(bot = %username, "Telegram polling started");
    let stored = {
        let name = me.username.clone();
        shared
            .db(move |s| {
                s.update_poll(|p| {
                    p.bot_username = name;
                    p.error = None;
                })
            })
            .await
    };
    let mut offset = match stored {
        Ok(state) => state.offset,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the Telegram offset");
            None
        }
    };
    shared.live(|l| {
        l.running = true;
        l.bot_username = me.username.clone();
        l.error = None;
    });
    shared.set_bot(Some(bot.clone()));
    backoff = BACKOFF_FIRST;
    let mut failing = false;
    loop {
        let got = tokio::select! {
            // A poll cut short confirms nothing: its updates come again next time.
            _ = stop.changed() => break,
            got = bot.get_updates(offset) => got,
        };
        match got {
            Ok(batch) => {
                if failing {
                    shared.live(|l| l.error = None);
                    backoff = BACKOFF_FIRST;
                    failing = false;
                }
                for update in batch {
                    let next = update.update_id + 1;
                    if offset.is_some_and(|o| next <= o) {
                        continue;
                    }
                    updates::handle(&shared, &bot, &username, update).await;
                    offset = Some(next);
                    if let Err(e) = shared
                        .db(move |s| s.update_poll(|p| p.offset = Some(next)))
                        .await
                    {
                        tracing::warn!(error = %e, "cannot store the Telegram offset");
                    }
                }
            }
            Err(e) if e.bad_token() => {
                refused(&shared).await;
                break;
            }
            Err(e) => {
                let wait = match e.retry_after() {
                    Some(wait) => wait,
                    None => {
                        let wait = backoff;
                        backoff = (backoff * 2).min(BACKOFF_MAX);
                        wait
                    }
                };
                tracing::warn!(error = %e, wait_secs = wait.as_secs(), "Telegram getUpdates failed");
                failing = true;
                shared.live(|l| l.error = Some(e.to_string()));
                if pause_or_stop(wait, &mut stop).await {
                    break;
                }
            }
        }
    }
    shared.set_bot(None);
    shared.live(|l| l.running = false);
}

/// The token was refused: stop, and say so where the owner looks.
async fn refused(shared: &Arc<Shared>) {
    tracing::warn!("{REFUSED}");
    shared.set_bot(None);
    shared.live(|l| {
        l.running = false;
        l.error = Some(REFUSED.into());
    });
    if let Err(e) = shared
        .db(|s| s.update_poll(|p| p.error = Some(REFUSED.into())))
        .await
    {
        tracing::warn!(error = %e, "cannot store the Telegram error");
    }
}

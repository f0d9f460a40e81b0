//! `hearth-hub telegram …`: the owner sets the bot token, allows and denies chats, and
//! reads the channel's state, on `hub.db` directly (like `hearth-hub plugins …`), so it
//! works with or without a running hub; a running hub picks changes up within a second
//! or two.
//!
//! Part of the command line (a binary edge, so `anyhow` is allowed here as in `cli.rs`).
//! The token is read from standard input, never from the arguments (which other users
//! of the machine can see), checked with Telegram, and never printed.

use std::{io::BufRead, path::Path};

use anyhow::{bail, Context};

use super::{
    store::{AllowedChat, ChannelStore},
    verify_token, TOKEN_NAME, TOKEN_SCOPE,
};
use crate::secrets::{SecretStore, SecretValue};

/// The `telegram` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum TelegramCommand {
    /// Store the bot token from @BotFather (read from standard input; checked with
    /// Telegram first).
    SetToken {
        /// Read the token from standard input without a prompt (for scripts).
        #[arg(long)]
        token_stdin: bool,
    },
    /// The channel's state: token, switch, bot, last error, chats, refused chats.
    Status,
    /// Allow a chat (its id: the refused chats in `status` list it) in a project.
    Allow {
        /// The chat's id (negative for groups).
        #[arg(allow_negative_numbers = true)]
        chat: i64,
        /// The project its messages work in (name or id).
        #[arg(long)]
        project: String,
        /// Your name for the chat.
        #[arg(long)]
        label: Option<String>,
        /// Send it no notifications.
        #[arg(long)]
        no_notify: bool,
    },
    /// Take a chat off the list.
    Deny {
        /// The chat's id.
        #[arg(allow_negative_numbers = true)]
        chat: i64,
    },
    /// List the allowed chats.
    Chats,
    /// Turn the channel on (it polls while a token is stored).
    Enable,
    /// Turn the channel off (the token stays stored).
    Disable,
}

fn print_chat(c: &AllowedChat, names: &std::collections::HashMap<hearth_sync::DocId, String>) {
    let project = match c.project {
        Some(p) => names
            .get(&p)
            .cloned()
            .unwrap_or_else(|| format!("{p} (gone)")),
        None => "general".into(),
    };
    println!(
        "{}\t{}\tproject {}\tconversation {}\t{}",
        c.chat,
        if c.label.is_empty() { "-" } else { &c.label },
        project,
        c.conversation_name(),
        if c.notify {
            "notifications on"
        } else {
            "notifications off"
        }
    );
}

/// Runs `cmd` on the hub at `home`; `api_base`: the Bot API (to check a token);
/// `resolve_project`: a project's id from its name or id.
pub async fn run(
    home: &Path,
    api_base: &str,
    cmd: TelegramCommand,
    resolve_project: &dyn Fn(&str) -> anyhow::Result<String>,
) -> anyhow::Result<()> {
    let db = home.join("hub.db");
    crate::hubdb::check(&db)?;
    let store = ChannelStore::open(&db).context("opening the Telegram settings")?;
    let secrets = || SecretStore::open(&db, &home.join("server.secret"));
    let names = || -> anyhow::Result<std::collections::HashMap<hearth_sync::DocId, String>> {
        let path = home.join("hearth.db");
        hearth_net::files::secure_db_files(&path)?;
        let docs = hearth_sync::DocumentStore::open(path)?;
        Ok(crate::projects::all_projects_blocking(&docs)?
            .into_iter()
            .map(|p| (p.id, p.title))
            .collect())
    };
    match cmd {
        TelegramCommand::SetToken { token_stdin } => {
            if !token_stdin {
                eprintln!("Paste the bot token from @BotFather and press Enter:");
            }
            let mut token = String::new();
            std::io::stdin()
                .lock()
                .read_line(&mut token)
                .context("reading the token from standard input")?;
            let token = token.trim();
            if token.is_empty() {
                bail!("no token given");
            }
            let me = verify_token(api_base, token)
                .await
                .map_err(|e| anyhow::anyhow!("the token was not stored: {e}"))?;
            secrets()?.set(TOKEN_SCOPE, TOKEN_NAME, &SecretValue::new(token))?;
            println!(
                "stored the token of @{} (a running hub starts polling within a couple of seconds)",
                me.username.unwrap_or_default()
            );
        }
        TelegramCommand::Status => {
            let token_set = secrets()?
                .names(TOKEN_SCOPE)?
                .iter()
                .any(|n| n == TOKEN_NAME);
            let state = store.state()?;
            println!("token: {}", if token_set { "stored" } else { "not set" });
            println!("enabled: {}", state.enabled);
            if let Some(bot) = &state.poll.bot_username {
                println!("bot: @{bot}");
            }
            if let Some(e) = &state.poll.error {
                println!("last error: {e}");
            }
            let chats = store.chats()?;
            let names = names()?;
            println!("allowed chats: {}", chats.len());
            for c in &chats {
                print_chat(c, &names);
            }
            for r in &state.poll.refused {
                println!(
                    "refused: chat {} ({}) at {} — allow it with `hearth-hub telegram allow {} --project …`",
                    r.chat, r.name, r.at, r.chat
                );
            }
        }
        TelegramCommand::Allow {
            chat,
            project,
            label,
            no_notify,
        } => {
            let project: hearth_sync::DocId = resolve_project(&project)?
                .parse()
                .map_err(|_| anyhow::anyhow!("not a project id"))?;
            let c = store.allow(chat, project, label.as_deref(), Some(!no_notify))?;
            print_chat(&c, &names()?);
        }
        TelegramCommand::Deny { chat } => {
            if !store.deny(chat)? {
                bail!("chat {chat} is not on the list");
            }
            println!("chat {chat} is no longer served");
        }
        TelegramCommand::Chats => {
            let names = names()?;
            for c in store.chats()? {
                print_chat(&c, &names);
            }
        }
        TelegramCommand::Enable | TelegramCommand::Disable => {
            let on = matches!(cmd, TelegramCommand::Enable);
            store.set_enabled(on)?;
            println!(
                "the Telegram channel is {} (a running hub applies it within a couple of seconds)",
                if on { "on" } else { "off" }
            );
        }
    }
    Ok(())
}

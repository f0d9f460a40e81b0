//! The service in process against a minimal Bot API on 127.0.0.1 (the full fake, with
//! turns and buttons, drives the cross-process test in hearth-tests): a token is
//! checked before it is stored, polling follows the token, and notifications reach only
//! the chats that take them within the notification's project, quietly when asked,
//! with approval buttons.

use std::{
    path::Path,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{extract::Path as UrlPath, routing::post, Json, Router};
use hearth_sync::{DocId, DocumentStore};
use serde_json::{json, Value};

use super::{deliver::Notifications, Telegram, TelegramError};
use crate::{
    agent::{
        provider::{ProviderClient, ProviderKind},
        runner::{Agent, AgentConfig},
    },
    channels::Channel,
    chat::{ChatService, ProviderUrls},
    events::EventHub,
    notify::{Notification, NotificationKind, NotificationRefs, Notifier},
    secrets::SecretStore,
};

const TOKEN: &str = "42:good-token";

type Sent = Arc<Mutex<Vec<(String, Value)>>>;

/// A Bot API that knows one token, answers polls with nothing (after a pause) and
/// records what is sent.
async fn bot_api(sent: Sent) -> String {
    let app = Router::new().route(
        "/{bot}/{method}",
        post(move |UrlPath((bot, method)): UrlPath<(String, String)>, Json(body): Json<Value>| {
            let sent = sent.clone();
            async move {
                if bot != format!("bot{TOKEN}") {
                    return Json(json!({"ok": false, "error_code": 401, "description": "Unauthorized"}));
                }
                match method.as_str() {
                    "getMe" => Json(json!({"ok": true, "result": {"id": 42, "is_bot": true, "first_name": "B", "username": "b_bot"}})),
                    "getUpdates" => {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        Json(json!({"ok": true, "result": []}))
                    }
                    _ => {
                        let chat = body["chat_id"].clone();
                        if let Ok(mut s) = sent.lock() {
                            s.push((method, body));
                        }
                        Json(json!({"ok": true, "result": {"message_id": 1, "chat": {"id": chat, "type": "private"}, "date": 0, "text": "x"}}))
                    }
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}")
}

async fn chat_service(home: &Path) -> Arc<ChatService> {
    let hub_db = home.join("hub.db");
    let store = DocumentStore::open(home.join("hearth.db")).expect("store");
    let general = crate::projects::ensure_general(&store, &hub_db)
        .await
        .expect("general");
    let provider = ProviderClient::new(
        "anthropic",
        ProviderKind::Anthropic,
        "http://127.0.0.1:9",
        None,
    )
    .expect("provider");
    let agent = Arc::new(
        Agent::new(store.clone(), provider, AgentConfig::default(), &hub_db).expect("agent"),
    );
    let secrets =
        Arc::new(SecretStore::open(&hub_db, &home.join("server.secret")).expect("secrets"));
    Arc::new(ChatService::new(
        agent,
        store,
        secrets,
        ProviderUrls::default(),
        home.join("projects"),
        general,
        Arc::new(EventHub::new()),
    ))
}

#[tokio::test]
async fn a_refused_token_is_not_stored_and_a_good_one_starts_polling() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sent: Sent = Arc::default();
    let url = bot_api(sent.clone()).await;
    let chat = chat_service(dir.path()).await;
    let notifier =
        Notifier::open(&dir.path().join("hub.db"), chat.events.clone()).expect("notifier");
    let tg =
        Telegram::start(&url, &dir.path().join("hub.db"), chat.clone(), &notifier).expect("start");
    let refused = tg.set_token("42:wrong").await;
    assert!(
        matches!(refused, Err(TelegramError::Bot(ref e)) if e.bad_token()),
        "{refused:?}"
    );
    assert!(!tg.status().await.expect("status").token_set);
    assert_eq!(
        tg.set_token(TOKEN).await.expect("stored").as_deref(),
        Some("b_bot")
    );
    let mut running = false;
    for _ in 0..100 {
        let st = tg.status().await.expect("status");
        if st.running {
            assert_eq!(st.bot_username.as_deref(), Some("b_bot"));
            running = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(running, "polling did not start");
    tg.set_enabled(false).await.expect("off");
    let mut stopped = false;
    for _ in 0..100 {
        if !tg.status().await.expect("status").running {
            stopped = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(stopped, "polling did not stop");
    tg.shutdown().await;
}

#[tokio::test]
async fn notifications_reach_the_chats_that_take_them_in_reach() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sent: Sent = Arc::default();
    let url = bot_api(sent.clone()).await;
    let chat = chat_service(dir.path()).await;
    let general = chat.general;
    let notifier =
        Notifier::open(&dir.path().join("hub.db"), chat.events.clone()).expect("notifier");
    let tg =
        Telegram::start(&url, &dir.path().join("hub.db"), chat.clone(), &notifier).expect("start");
    let channel = Notifications(tg.shared.clone());
    let n = Notification {
        kind: NotificationKind::ApprovalWaiting,
        title: "Approve <notes_delete>?".into(),
        body: "The **weekly review** wants to delete a note.".into(),
        project: Some(general),
        refs: NotificationRefs {
            approval: Some("0123abcd".into()),
            ..NotificationRefs::default()
        },
    };
    // Not polling yet: nothing to send with.
    assert!(channel.deliver(&n, false).await.is_err());
    tg.set_token(TOKEN).await.expect("token");
    let store = tg.store().clone();
    let elsewhere = DocId::random();
    tokio::task::spawn_blocking(move || {
        store.allow(1, general, Some("takes them"), None)?;
        store.allow(2, general, Some("muted"), Some(false))?;
        // Bound to another project: a notification of `general` is out of its reach.
        store.allow(3, elsewhere, Some("elsewhere"), None)
    })
    .await
    .expect("task")
    .expect("allow");
    for _ in 0..100 {
        if tg.shared.bot().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    channel.deliver(&n, true).await.expect("delivered");
    let got: Vec<(String, Value)> = sent.lock().expect("sent").clone();
    assert_eq!(got.len(), 1, "{got:?}");
    let (method, body) = &got[0];
    assert_eq!(method, "sendMessage");
    assert_eq!(body["chat_id"], 1);
    assert_eq!(body["disable_notification"], true);
    assert_eq!(body["parse_mode"], "HTML");
    assert_eq!(
        body["text"],
        "<b>Approve &lt;notes_delete&gt;?</b>\n\nThe <b>weekly review</b> wants to delete a note."
    );
    assert_eq!(
        body["reply_markup"]["inline_keyboard"][0][0]["callback_data"],
        "ap:0123abcd:y"
    );
    assert_eq!(
        body["reply_markup"]["inline_keyboard"][0][1]["callback_data"],
        "ap:0123abcd:n"
    );
    // A notification of no project reaches every chat that takes them; not quiet.
    sent.lock().expect("sent").clear();
    let everyone = Notification {
        kind: NotificationKind::RunFinished,
        project: None,
        refs: NotificationRefs::default(),
        ..n
    };
    channel.deliver(&everyone, false).await.expect("delivered");
    let got: Vec<(String, Value)> = sent.lock().expect("sent").clone();
    let chats: Vec<i64> = got
        .iter()
        .filter_map(|(_, b)| b["chat_id"].as_i64())
        .collect();
    assert_eq!(chats, vec![1, 3], "{got:?}");
    assert!(got
        .iter()
        .all(|(_, b)| b.get("disable_notification").is_none() && b.get("reply_markup").is_none()));
    tg.shutdown().await;
}

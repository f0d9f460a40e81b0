//! The API's state over a fresh data directory, for the tests that drive the hub's
//! handlers in process (the owner's router and the rpc relay): a store with `general`,
//! an agent whose provider is never reached (a loopback port nothing listens on), the
//! owner's token and sessions, the device registry, the runtime settings, the plugin
//! supervisor and the scheduler.

#![allow(dead_code, unreachable_pub)]

pub mod relay_hub;

use std::{path::Path, sync::Arc};

use hearth_hub::{
    access::ConnectionTracker,
    agent::{
        provider::{ProviderClient, ProviderKind},
        runner::{Agent, AgentConfig},
    },
    api::{guard::Access, ApiState},
    chat::{ChatService, ProviderUrls},
    devices::DeviceRegistry,
    events::EventHub,
    owner::{self, OwnerToken},
    plugins::{PluginStore, Plugins, SupervisorConfig, SupervisorDeps},
    secrets::SecretStore,
    settings::RuntimeStore,
};
use hearth_sync::{DocId, DocumentStore};

/// The API's port the guard expects in `Host`.
pub const PORT: u16 = 4200;

/// One request to `router` under `/api/v1`, with the owner's `token` if given; the
/// status and the JSON answer (`null` if it is not JSON).
pub async fn send(
    router: &axum::Router,
    token: Option<&str>,
    method: &str,
    path: &str,
    body: Option<serde_json::Value>,
) -> (axum::http::StatusCode, serde_json::Value) {
    use http_body_util::BodyExt;
    use tower::ServiceExt;
    let mut req = axum::http::Request::builder()
        .method(method)
        .uri(format!("/api/v1{path}"))
        .header("host", format!("127.0.0.1:{PORT}"));
    if let Some(token) = token {
        req = req.header("authorization", format!("Bearer {token}"));
    }
    let body = match body {
        Some(b) => {
            req = req.header("content-type", "application/json");
            axum::body::Body::from(b.to_string())
        }
        None => axum::body::Body::empty(),
    };
    let resp = router
        .clone()
        .oneshot(req.body(body).expect("request"))
        .await
        .expect("infallible");
    let status = resp.status();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null),
    )
}

/// What a test needs of a hub built in process.
pub struct TestState {
    pub state: ApiState,
    /// The owner token, as the CLI sends it.
    pub token: String,
    pub general: DocId,
}

/// The API's state over `home` (the caller keeps the directory alive).
pub async fn api_state(home: &Path) -> TestState {
    let hub_db = home.join("hub.db");
    let store = DocumentStore::open(home.join("hearth.db")).expect("store");
    let general = hearth_hub::projects::ensure_general(&store, &hub_db)
        .await
        .expect("general");
    let provider = ProviderClient::new(
        "anthropic",
        ProviderKind::Anthropic,
        "http://127.0.0.1:9",
        Some("k".into()),
    )
    .expect("provider");
    let agent = Arc::new(
        Agent::new(store.clone(), provider, AgentConfig::default(), &hub_db).expect("agent"),
    );
    let secrets =
        Arc::new(SecretStore::open(&hub_db, &home.join("server.secret")).expect("secrets"));
    let local = "http://127.0.0.1:9".to_string();
    let urls = ProviderUrls {
        anthropic: local.clone(),
        openai: local.clone(),
        ollama: local,
    };
    let events = Arc::new(EventHub::new());
    let chat = Arc::new(ChatService::new(
        agent,
        store.clone(),
        secrets,
        urls,
        home.join("projects"),
        general,
        events.clone(),
    ));
    let token = OwnerToken::load_or_create(home).expect("token");
    let secret = token.expose().to_string();
    let access = Arc::new(Access::new(
        token,
        Arc::new(owner::open_sessions(&hub_db).expect("sessions")),
        "hearth_hub_test".into(),
        PORT,
        vec![],
    ));
    // Plugins: the supervisor over this hub.db, registering into the agent's tools.
    let plugin_store = Arc::new(PluginStore::open(&hub_db).expect("plugins"));
    plugin_store.ensure_builtin().expect("builtin plugin");
    let plugins = Plugins::start(
        SupervisorConfig::new(home.to_path_buf()),
        SupervisorDeps {
            store: Arc::new(PluginStore::open(&hub_db).expect("supervisor's plugins")),
            registry: chat.agent.tools().clone(),
            secrets: Some(chat.secrets.clone()),
            computer: Box::new(|_| Vec::new()),
        },
        plugin_store,
    );
    let runtime = Arc::new(RuntimeStore::open(&hub_db).expect("runtime"));
    let notifier = Arc::new(hearth_hub::notify::Notifier::open(&hub_db, events).expect("notifier"));
    let scheduler = hearth_hub::scheduler::Scheduler::start(
        hearth_hub::scheduler::SchedulerDeps {
            store: Arc::new(
                hearth_hub::scheduler::ScheduleStore::open(&hub_db).expect("schedules"),
            ),
            runtime: runtime.clone(),
            agent: chat.agent.clone(),
            secrets: chat.secrets.clone(),
            urls: chat.urls.clone(),
            notifier: notifier.clone(),
            projects_dir: None,
            clock: Arc::new(hearth_hub::scheduler::SystemClock),
        },
        hearth_hub::scheduler::SchedulerConfig::default(),
    );
    let chat_service = chat.clone();
    let state = ApiState {
        store,
        registry: Arc::new(DeviceRegistry::open(&hub_db).expect("registry")),
        tracker: Arc::new(ConnectionTracker::default()),
        chat,
        runtime,
        access,
        plugins,
        notifier: notifier.clone(),
        scheduler,
        telegram: hearth_hub::channels::telegram::Telegram::start(
            "http://127.0.0.1:9",
            &hub_db,
            chat_service,
            &notifier,
        )
        .expect("telegram"),
    };
    TestState {
        state,
        token: secret,
        general,
    }
}

/// Reads ndjson lines from a relayed event stream until `n` lines or a quiet second.
pub async fn lines(resp: axum::response::Response, n: usize) -> Vec<serde_json::Value> {
    use futures_util::StreamExt;
    assert_eq!(resp.status(), axum::http::StatusCode::OK);
    let mut body = resp.into_body().into_data_stream();
    let mut text = String::new();
    let mut out = Vec::new();
    while out.len() < n {
        match tokio::time::timeout(std::time::Duration::from_secs(1), body.next()).await {
            Ok(Some(Ok(bytes))) => text.push_str(&String::from_utf8_lossy(&bytes)),
            _ => break,
        }
        while let Some((line, rest)) = text.split_once('\n') {
            out.push(serde_json::from_str(line).expect("json line"));
            text = rest.to_string();
        }
    }
    out
}

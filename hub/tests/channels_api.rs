//! The Telegram channel's routes in process (no listener; the Bot API URL is a loopback
//! port nothing listens on): the owner allows, changes and denies chats by project name
//! or id; a token that cannot be checked is not stored and the answer says why; none of
//! it is open to a stranger or relayed to a paired device; no answer carries a token.

mod api_state;

use api_state::{api_state, send, TestState};
use axum::http::StatusCode;
use serde_json::json;

#[tokio::test]
async fn the_owner_manages_the_allowed_chats() {
    let dir = tempfile::tempdir().expect("tempdir");
    let TestState {
        state,
        token,
        general,
    } = api_state(dir.path()).await;
    let router = hearth_hub::api::router(state.clone(), None);
    let owner = Some(token.as_str());

    let (s, body) = send(&router, owner, "GET", "/channels/telegram", None).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_eq!(body["token_set"], false);
    assert_eq!(body["enabled"], true);
    assert_eq!(body["running"], false);
    assert_eq!(body["configured"], false);
    assert_eq!(body["chats"], json!([]));

    let (s, body) = send(
        &router,
        owner,
        "PUT",
        "/channels/telegram/chats/-100123",
        Some(json!({"project": "general", "label": "family", "notify": false})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_eq!(body["chat"], -100123);
    assert_eq!(body["project"], general.to_string());
    assert_eq!(body["project_name"], "general");
    assert_eq!(body["notify"], false);
    assert_eq!(body["conversation"], 1);
    // By id too; the label stays.
    let (s, body) = send(
        &router,
        owner,
        "PUT",
        "/channels/telegram/chats/-100123",
        Some(json!({"project": general.to_string()})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_eq!(body["label"], "family");

    for (path, project, want) in [
        (
            "/channels/telegram/chats/abc",
            "general",
            StatusCode::BAD_REQUEST,
        ),
        (
            "/channels/telegram/chats/5",
            "no such project",
            StatusCode::NOT_FOUND,
        ),
    ] {
        let (s, body) = send(
            &router,
            owner,
            "PUT",
            path,
            Some(json!({"project": project})),
        )
        .await;
        assert_eq!(s, want, "{path}: {body}");
    }
    let (s, body) = send(&router, owner, "GET", "/channels/telegram", None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(body["chats"].as_array().map(Vec::len), Some(1), "{body}");

    let (s, _) = send(
        &router,
        owner,
        "DELETE",
        "/channels/telegram/chats/-100123",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, _) = send(
        &router,
        owner,
        "DELETE",
        "/channels/telegram/chats/-100123",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    state.telegram.shutdown().await;
    state.plugins.shutdown().await;
}

#[tokio::test]
async fn a_token_that_cannot_be_checked_is_not_stored() {
    let dir = tempfile::tempdir().expect("tempdir");
    let TestState { state, token, .. } = api_state(dir.path()).await;
    let router = hearth_hub::api::router(state.clone(), None);
    let owner = Some(token.as_str());
    let (s, body) = send(
        &router,
        owner,
        "PUT",
        "/channels/telegram",
        Some(json!({"token": "not/a:token"})),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    let secret = "123:SECRET-unreachable_token";
    let (s, body) = send(
        &router,
        owner,
        "PUT",
        "/channels/telegram",
        Some(json!({"token": secret})),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_GATEWAY, "{body}");
    assert_eq!(body["error"]["code"], "telegram_unreachable", "{body}");
    assert!(!body.to_string().contains("SECRET"), "{body}");
    let (_, body) = send(&router, owner, "GET", "/channels/telegram", None).await;
    assert_eq!(body["token_set"], false, "{body}");
    let (s, body) = send(
        &router,
        owner,
        "PUT",
        "/channels/telegram",
        Some(json!({"enabled": false})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_eq!(body["enabled"], false);
    state.telegram.shutdown().await;
    state.plugins.shutdown().await;
}

#[tokio::test]
async fn channel_routes_are_the_owners_alone() {
    for route in hearth_ui::relayed::RELAYED {
        assert!(!route.path.starts_with("/channels"), "{}", route.path);
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let TestState { state, .. } = api_state(dir.path()).await;
    let router = hearth_hub::api::router(state.clone(), None);
    for (method, path) in [
        ("GET", "/channels/telegram"),
        ("PUT", "/channels/telegram"),
        ("PUT", "/channels/telegram/chats/1"),
        ("DELETE", "/channels/telegram/chats/1"),
    ] {
        let (s, _) = send(
            &router,
            None,
            method,
            path,
            Some(json!({"project": "general"})),
        )
        .await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{method} {path}");
    }
    state.telegram.shutdown().await;
    state.plugins.shutdown().await;
}

//! The schedule routes in process: the owner creates, reads, changes, pauses, resumes
//! and removes schedules; a bad cron expression or zone is a 400 naming the problem; a
//! stranger gets 401 and a page on another site 403; a device scoped to a project
//! (through the rpc relay) lists only its subtree's schedules and cannot create one; a
//! full device needs the admin flag to write.

mod api_state;

use api_state::{
    relay_hub::{hub, Hub},
    PORT,
};

use axum::{body::Body, http::StatusCode};
use hearth_protocol::RpcMethod;
use serde_json::{json, Value};
use tower::ServiceExt;

fn briefing(project: &str) -> Value {
    json!({
        "name": "Morning briefing",
        "project": project,
        "kind": "cron",
        "spec": "0 9 * * 1-5",
        "tz": "Europe/Paris",
        "prompt": "What is on today?",
        "auto_approve": ["notes_search"],
    })
}

#[tokio::test]
async fn the_owner_manages_schedules() {
    let h = hub().await;
    let (s, made) = h
        .owner("POST", "/schedules", Some(briefing("general")))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{made}");
    assert_eq!(made["describe"], "at 09:00 on Mon–Fri (Europe/Paris)");
    assert_eq!(
        (made["running"].as_bool(), made["paused"].as_bool()),
        (Some(false), Some(false))
    );
    assert_eq!(made["missed"], "run_once");
    assert!(made["next_due"].as_i64().is_some_and(|d| d > 0), "{made}");
    let id = made["id"].as_str().expect("id").to_string();
    let (s, page) = h.owner("GET", "/schedules", None).await;
    assert_eq!(
        (s, page["total"].as_u64()),
        (StatusCode::OK, Some(1)),
        "{page}"
    );
    let (s, changed) = h
        .owner(
            "PATCH",
            &format!("/schedules/{id}"),
            Some(json!({"kind": "interval", "spec": "3d", "tz": "", "missed": "catch_up"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{changed}");
    assert_eq!(changed["describe"], "every 3 days (72 h apart)");
    assert_eq!(changed["missed"], "catch_up");
    let (s, paused) = h
        .owner("POST", &format!("/schedules/{id}/pause"), None)
        .await;
    assert_eq!(
        (s, paused["paused"].as_bool()),
        (StatusCode::OK, Some(true))
    );
    let (s, resumed) = h
        .owner("POST", &format!("/schedules/{id}/resume"), None)
        .await;
    assert_eq!(
        (s, resumed["paused"].as_bool()),
        (StatusCode::OK, Some(false))
    );
    assert_eq!(
        resumed["next_due"], changed["next_due"],
        "still on its anchor's grid"
    );
    let (s, runs) = h.owner("GET", &format!("/schedules/{id}/runs"), None).await;
    assert_eq!((s, runs["total"].as_u64()), (StatusCode::OK, Some(0)));
    let (s, _) = h.owner("DELETE", &format!("/schedules/{id}"), None).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, _) = h.owner("GET", &format!("/schedules/{id}"), None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    h.state.scheduler.shutdown().await;
}

#[tokio::test]
async fn bad_specs_and_zones_are_refused_with_the_reason() {
    let h = hub().await;
    for (patch, words) in [
        (json!({"spec": "0 9 * *"}), "needs 5"),
        (json!({"spec": "0 25 * * *"}), "not valid"),
        (json!({"tz": "Europe/Atlantis"}), "Europe/Atlantis"),
        (json!({"kind": "interval", "spec": "0d"}), "at least 1min"),
        (
            json!({"kind": "once", "spec": "2001-01-01T09:00"}),
            "in the past",
        ),
        (json!({"model": "claude"}), "provider/model"),
        (json!({"project": "nowhere"}), "nowhere"),
    ] {
        let mut body = briefing("general");
        for (k, v) in patch.as_object().expect("object") {
            body[k] = v.clone();
        }
        let (s, v) = h.owner("POST", "/schedules", Some(body)).await;
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert!(
            s == StatusCode::BAD_REQUEST || s == StatusCode::NOT_FOUND,
            "{patch}: {s} {v}"
        );
        assert!(message.contains(words), "{patch}: {message}");
    }
    let (_, page) = h.owner("GET", "/schedules", None).await;
    assert_eq!(page["total"], 0);
    h.state.scheduler.shutdown().await;
}

/// A request with exactly these headers (besides Host).
async fn raw(h: &Hub, method: &str, path: &str, headers: &[(&str, &str)]) -> StatusCode {
    let mut req = axum::http::Request::builder()
        .method(method)
        .uri(format!("/api/v1{path}"))
        .header("host", format!("127.0.0.1:{PORT}"))
        .header("content-type", "application/json");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    h.router
        .clone()
        .oneshot(
            req.body(Body::from(briefing("general").to_string()))
                .expect("request"),
        )
        .await
        .expect("infallible")
        .status()
}

#[tokio::test]
async fn a_stranger_or_a_hostile_page_cannot_touch_schedules() {
    let h = hub().await;
    let bearer = format!("Bearer {}", h.token);
    for (method, path) in [("GET", "/schedules"), ("POST", "/schedules")] {
        assert_eq!(
            raw(&h, method, path, &[]).await,
            StatusCode::UNAUTHORIZED,
            "{path}"
        );
    }
    assert_eq!(
        raw(
            &h,
            "POST",
            "/schedules",
            &[
                ("authorization", &bearer),
                ("origin", "http://evil.example")
            ]
        )
        .await,
        StatusCode::FORBIDDEN
    );
    let (_, page) = h.owner("GET", "/schedules", None).await;
    assert_eq!(page["total"], 0, "nothing was added");
    h.state.scheduler.shutdown().await;
}

#[tokio::test]
async fn a_scoped_device_sees_its_subtree_and_only_an_admin_device_writes() {
    let h = hub().await;
    let home = h.project("home", None).await;
    let garden = h.project("garden", Some(home)).await;
    let work = h.project("work", None).await;
    let mut ids = Vec::new();
    for p in [garden, work] {
        let (s, v) = h
            .owner("POST", "/schedules", Some(briefing(&p.to_string())))
            .await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
        ids.push(v["id"].as_str().expect("id").to_string());
    }
    let scoped = h.device(Some(home), true);
    let (s, page) = h.relay(scoped, RpcMethod::Get, "/schedules", None).await;
    assert_eq!(s, StatusCode::OK, "{page}");
    let seen: Vec<&str> = page["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(|v| v["id"].as_str())
        .collect();
    assert_eq!(seen, vec![ids[0].as_str()], "only the garden's");
    let (s, _) = h
        .relay(
            scoped,
            RpcMethod::Get,
            &format!("/schedules/{}", ids[1]),
            None,
        )
        .await;
    assert_eq!(
        s,
        StatusCode::NOT_FOUND,
        "work's schedule is not there for it"
    );
    let (s, v) = h
        .relay(
            scoped,
            RpcMethod::Post,
            "/schedules",
            Some(briefing(&garden.to_string())),
        )
        .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("out_of_scope"))
    );
    // A full device reads everything but writes only with the admin flag.
    let plain = h.device(None, false);
    let (s, page) = h.relay(plain, RpcMethod::Get, "/schedules", None).await;
    assert_eq!((s, page["total"].as_u64()), (StatusCode::OK, Some(2)));
    let (s, v) = h
        .relay(
            plain,
            RpcMethod::Post,
            &format!("/schedules/{}/pause", ids[1]),
            None,
        )
        .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("admin_required"))
    );
    let admin = h.device(None, true);
    let (s, v) = h
        .relay(admin, RpcMethod::Post, "/schedules", Some(briefing("work")))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    h.state.scheduler.shutdown().await;
}

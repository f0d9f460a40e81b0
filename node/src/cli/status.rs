//! `hearth status`: the pinned hub and the node's status in words — online or not, when
//! it last synced, how many local changes wait to reach the hub, the API's address, and
//! version advice (for example that the hub is too old and must be updated). It asks the
//! running `hearth run` (`GET /api/v1/status`, the same answer the API gives); when none
//! answers, it says what the last run saved and counts the pending changes itself.

use std::path::Path;

use crate::{
    config::NodeConfig,
    status::{NodeStatus, SavedStatus},
};

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn ago(ms: i64) -> String {
    format!("{}s ago", ((now_ms() - ms).max(0)) / 1000)
}

async fn live(home: &Path) -> anyhow::Result<NodeStatus> {
    let client = super::client::NodeClient::connect(home)?;
    let answer = client.call(reqwest::Method::GET, "/status", None).await?;
    Ok(serde_json::from_value(answer)?)
}

pub(crate) async fn run(home: &Path) -> anyhow::Result<()> {
    let config = NodeConfig::load(home)?;
    let Some(hub) = &config.hub else {
        println!("hub: none (run `hearth pair`)");
        return Ok(());
    };
    let status = match live(home).await {
        Ok(s) => s,
        Err(e) => {
            tracing::debug!(error = %e, "no running node answered");
            let store = super::open_store(home)?;
            let pending =
                tokio::task::spawn_blocking(move || store.pending_upstream_blocking()).await??;
            NodeStatus::stopped(
                Some(hub.id.clone()),
                SavedStatus::load(home).as_ref(),
                pending,
            )
        }
    };
    print!("{}", render(&status, config.scope.as_deref()));
    Ok(())
}

/// The status in words, one `name: value` line each.
fn render(s: &NodeStatus, scope: Option<&str>) -> String {
    let mut out = String::new();
    let mut line = |l: String| {
        out.push_str(&l);
        out.push('\n');
    };
    line(format!("hub: {}", s.hub.as_deref().unwrap_or("none")));
    if let Some(scope) = scope {
        line(format!("scope: {scope}"));
    }
    let ours: Vec<String> = s.sync_versions.iter().map(u16::to_string).collect();
    line(format!(
        "protocol: sync {} (hearth {})",
        ours.join(","),
        s.version
    ));
    line(format!(
        "api: {}",
        s.api
            .as_deref()
            .unwrap_or("not served (`hearth run` is not running, or runs with --http off)")
    ));
    line(format!("online: {}", if s.online { "yes" } else { "no" }));
    if let Some(path) = &s.path {
        line(format!("path: {path}"));
    }
    let since = s
        .state_since
        .map(|t| format!(" ({})", ago(t)))
        .unwrap_or_default();
    let version = s
        .session_version
        .map(|v| format!(" on sync {v}"))
        .unwrap_or_default();
    match (s.state.as_str(), &s.detail) {
        ("unknown", _) => line("sync: unknown (`hearth run` has not run here yet)".into()),
        ("incompatible", Some(why)) => line(format!("sync: not syncing: {why}{since}")),
        (state, Some(why)) => line(format!("sync: {state}{version}: {why}{since}")),
        (state, None) => line(format!("sync: {state}{version}{since}")),
    }
    line(format!(
        "last synced: {}",
        s.last_synced_at.map_or_else(|| "never".to_string(), ago)
    ));
    line(format!("pending changes: {}", s.pending_changes));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_words_say_what_the_api_says() {
        let saved = SavedStatus {
            state: "incompatible".into(),
            detail: Some("the hub is too old: update the hub".into()),
            version: None,
            last_synced_at: Some(now_ms() - 5_000),
            path: None,
            at_ms: now_ms(),
            pid: 1,
        };
        let mut s = NodeStatus::stopped(Some("hubid".into()), Some(&saved), 2);
        s.state = "incompatible".into();
        s.detail = saved.detail.clone();
        let text = render(&s, None);
        assert!(
            text.contains("sync: not syncing: the hub is too old: update the hub"),
            "{text}"
        );
        assert!(text.contains("online: no"), "{text}");
        assert!(text.contains("pending changes: 2"), "{text}");
        assert!(text.contains("last synced: 5s ago"), "{text}");
        s.state = "caught-up".into();
        s.detail = None;
        s.session_version = Some(1);
        s.online = true;
        let text = render(&s, Some("work"));
        assert!(text.contains("sync: caught-up on sync 1"), "{text}");
        assert!(
            text.contains("scope: work") && text.contains("online: yes"),
            "{text}"
        );
    }
}

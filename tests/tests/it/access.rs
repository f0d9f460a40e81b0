//! Access, over QUIC and over HTTP. A key that is not on the hub's allowlist is refused
//! right after the handshake, before any document byte flows, and is told why. The HTTP
//! API answers only the owner (token or a session opened by a one-time login link), only
//! under this hub's own host names, and refuses state changes from foreign origins.

use std::time::Duration;

use hearth_net::{NetSettings, NoHooks, RelaySetting};
use hearth_protocol::ALPN_SYNC;
use hearth_tests::{allow, eventually, hub_cli, HubProc, NodeHome};
use iroh::{EndpointAddr, SecretKey};

use crate::{bins, sub, tempdir};

pub(crate) async fn rogue_endpoint() -> anyhow::Result<iroh::Endpoint> {
    let net = NetSettings {
        bind: "127.0.0.1:0".parse()?,
        relay: RelaySetting::Disabled,
    };
    Ok(hearth_net::bind_endpoint(SecretKey::generate(), &net, Vec::new(), None::<NoHooks>).await?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_key_is_refused_before_any_document_data() -> anyhow::Result<()> {
    let bins = bins();
    let dir = tempdir();
    let hub_home = sub(&dir, "hub");
    let hub_cli = NodeHome::new(&bins, hub_home.clone())?;
    hub_cli.cli(&[
        "note",
        "add",
        "--title",
        "secret plans",
        "--content",
        "not for strangers",
    ])?;
    let hub = tokio::task::spawn_blocking(move || HubProc::start(&bins, &hub_home, 0)).await??;

    let ep = rogue_endpoint().await?;
    let hub_addr = EndpointAddr::new(hub.id.parse()?).with_ip_addr(hub.addr);
    let outcome = async {
        let conn = ep.connect(hub_addr, ALPN_SYNC).await?;
        let (mut send, mut recv) = conn.open_bi().await?;
        // Speak first, as a node would, so the stream exists for the hub to accept.
        send.write_all(&hearth_protocol::encode_frame(
            &hearth_protocol::SyncMessage::Hello {
                root: [0; 16],
                docs: 0,
            },
        )?)
        .await?;
        let got = recv.read_to_end(1 << 20).await?;
        anyhow::Ok(got)
    }
    .await;
    let err = outcome.expect_err("the hub must refuse an unknown key");
    let text = format!("{err:#}");
    assert!(
        text.contains("not paired"),
        "refusal reason reaches the device: {text}"
    );
    ep.close().await;
    let log = hub.proc.stderr_text();
    assert!(log.contains("refused connection"), "{log}");
    assert!(
        !log.contains("sync session started"),
        "no session may start: {log}"
    );
    Ok(())
}

#[test]
fn revocation_cuts_an_online_device_off_within_a_second_and_for_good() -> anyhow::Result<()> {
    let bins = bins();
    let dir = tempdir();
    let hub_home = sub(&dir, "hub");
    let a = NodeHome::new(&bins, sub(&dir, "a"))?;
    allow(&bins, &hub_home, &a.id)?;
    let hub = HubProc::start(&bins, &hub_home, 0)?;
    let node = a.start(&hub.id, hub.addr)?;
    node.wait_line(Duration::from_secs(30), |l| {
        l.starts_with("hearth caught-up")
    })?;
    let listed = hub_cli(&bins, &hub_home, &["devices", "list"])?;
    assert!(
        listed.contains(&a.id) && listed.contains("online"),
        "{listed}"
    );

    let t0 = std::time::Instant::now();
    hub_cli(&bins, &hub_home, &["devices", "revoke", &a.id[..12]])?;
    let line = node.wait_line(Duration::from_secs(5), |l| {
        l.starts_with("hearth disconnected")
    })?;
    let cut_after = t0.elapsed();
    assert!(
        cut_after < Duration::from_secs(1),
        "revocation took {cut_after:?}"
    );
    assert!(line.contains("revoked"), "{line}");
    // And it stays refused: the next attempts are told why.
    let again = node.wait_line(Duration::from_secs(5), |l| {
        l.starts_with("hearth disconnected")
    })?;
    assert!(again.contains("revoked"), "{again}");
    eventually(Duration::from_secs(5), || {
        Ok(hub.proc.stderr_text().contains("refused connection"))
    })?;
    let listed = hub_cli(&bins, &hub_home, &["devices", "list"])?;
    assert!(listed.contains("revoked"), "{listed}");
    Ok(())
}

/// A hub with HTTP on 127.0.0.1 and a client that follows no redirects.
struct ApiHub {
    hub: HubProc,
    base: String,
    port: u16,
    token: String,
    client: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl ApiHub {
    async fn start() -> anyhow::Result<Self> {
        let bins = bins();
        let dir = tempdir();
        let home = sub(&dir, "hub");
        let hub = tokio::task::spawn_blocking(move || HubProc::start(&bins, &home, 0)).await??;
        let http = hub.http.ok_or_else(|| anyhow::anyhow!("no HTTP"))?;
        let token = hub.owner_token()?;
        hearth_hub::hub_client::install_crypto_provider();
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .build()?;
        Ok(Self {
            base: format!("http://{http}/api/v1"),
            port: http.port(),
            hub,
            token,
            client,
            _dir: dir,
        })
    }

    fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.client.get(format!("{}{path}", self.base))
    }

    fn post(&self, path: &str) -> reqwest::RequestBuilder {
        self.client.post(format!("{}{path}", self.base))
    }
}

/// Status and the `error.code` of an answer.
async fn refusal(resp: reqwest::Response) -> anyhow::Result<(u16, String)> {
    let status = resp.status().as_u16();
    let body: serde_json::Value = serde_json::from_str(&resp.text().await?)?;
    let code = body["error"]["code"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("not the error shape: {body}"))?;
    assert!(body["error"]["message"].is_string(), "{body}");
    Ok((status, code.to_string()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_access_needs_the_owner_and_names_this_hub() -> anyhow::Result<()> {
    let h = ApiHub::start().await?;
    // Health is open; everything else needs the owner.
    assert_eq!(h.get("/health").send().await?.status(), 200);
    let none = h.get("/notes").send().await?;
    assert_eq!(
        none.headers().get("www-authenticate").map(|v| v.as_bytes()),
        Some(&b"Bearer"[..])
    );
    assert_eq!(refusal(none).await?, (401, "unauthenticated".into()));
    let wrong = h.get("/notes").bearer_auth("0".repeat(64)).send().await?;
    assert_eq!(refusal(wrong).await?, (401, "unauthenticated".into()));
    // One hex digit off the real token (a different last digit, whatever it is).
    let last = if h.token.ends_with('0') { '1' } else { '0' };
    let near = format!("{}{last}", &h.token[..63]);
    let wrong = h.get("/devices").bearer_auth(near).send().await?;
    assert_eq!(refusal(wrong).await?, (401, "unauthenticated".into()));
    let ok = h.get("/notes").bearer_auth(&h.token).send().await?;
    assert_eq!(ok.status(), 200);
    let page: serde_json::Value = serde_json::from_str(&ok.text().await?)?;
    for key in ["data", "total", "limit", "offset"] {
        assert!(page.get(key).is_some(), "page shape: {page}");
    }
    // Unknown paths are guarded too, and answer in the error shape.
    let unknown = h.get("/nope").send().await?;
    assert_eq!(refusal(unknown).await?, (401, "unauthenticated".into()));
    let unknown = h.get("/nope").bearer_auth(&h.token).send().await?;
    assert_eq!(refusal(unknown).await?, (404, "not_found".into()));
    // Pagination bounds.
    let big = h
        .get("/notes?limit=501")
        .bearer_auth(&h.token)
        .send()
        .await?;
    assert_eq!(refusal(big).await?, (400, "bad_request".into()));

    // DNS rebinding: a page on evil.example re-resolved to 127.0.0.1 sends its own Host,
    // even with the right credential (it cannot have it, but the Host alone is enough).
    let evil_host = format!("evil.example:{}", h.port);
    for path in ["/health", "/notes", "/devices"] {
        let r = h
            .get(path)
            .header("host", &evil_host)
            .bearer_auth(&h.token)
            .send()
            .await?;
        assert_eq!(
            refusal(r).await?,
            (421, "misdirected_host".into()),
            "{path}"
        );
    }
    let r = h
        .get("/notes")
        .header("host", format!("localhost:{}", h.port))
        .bearer_auth(&h.token)
        .send()
        .await?;
    assert_eq!(r.status(), 200, "localhost with our port is us");

    // Cross-site requests that change state: a bodyless POST with a foreign Origin.
    let evil_origin = format!("http://evil.example:{}", h.port);
    for path in ["/auth/logout", "/chat/web/abort", "/devices/deny"] {
        let r = h
            .post(path)
            .header("origin", &evil_origin)
            .bearer_auth(&h.token)
            .send()
            .await?;
        assert_eq!(refusal(r).await?, (403, "foreign_origin".into()), "{path}");
    }
    let r = h
        .post("/chat/web/abort")
        .header("origin", "null")
        .bearer_auth(&h.token)
        .send()
        .await?;
    assert_eq!(refusal(r).await?, (403, "foreign_origin".into()));
    let r = h
        .post("/chat/web/abort")
        .header("origin", format!("http://127.0.0.1:{}", h.port))
        .bearer_auth(&h.token)
        .send()
        .await?;
    assert_eq!(r.status(), 204, "our own origin may");
    // A WebSocket upgrade with a foreign Origin is refused before any route runs.
    let r = h
        .get("/events")
        .header("origin", &evil_origin)
        .header("connection", "upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
        .bearer_auth(&h.token)
        .send()
        .await?;
    assert_eq!(refusal(r).await?, (403, "foreign_origin".into()));
    // The hub's log never shows the token.
    assert!(!h.hub.proc.stderr_text().contains(&h.token));
    Ok(())
}

fn cookie_of(resp: &reqwest::Response) -> anyhow::Result<(String, String)> {
    let set = resp
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| anyhow::anyhow!("no cookie"))?
        .to_string();
    let pair = set.split(';').next().unwrap_or_default().to_string();
    Ok((pair, set))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_link_opens_one_session_which_the_owner_can_list_and_end() -> anyhow::Result<()> {
    let h = ApiHub::start().await?;
    let home = h.hub.home.clone();
    let bins = bins();
    let out = tokio::task::spawn_blocking(move || {
        hub_cli(&bins, &home, &["open", "--no-browser", "--ttl", "60"])
    })
    .await??;
    let url = out.trim().to_string();
    assert!(
        url.starts_with(&format!(
            "http://127.0.0.1:{}/api/v1/auth/login?link=",
            h.port
        )),
        "{url}"
    );

    let first = h.client.get(&url).send().await?;
    assert_eq!(first.status(), 303);
    let (cookie, set) = cookie_of(&first)?;
    let short_id = &h.hub.id[..10];
    assert!(
        cookie.starts_with(&format!("hearth_hub_{short_id}=")),
        "{set}"
    );
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.contains(attr), "{set}");
    }
    // Single use.
    let again = h.client.get(&url).send().await?;
    assert_eq!(refusal(again).await?, (410, "gone".into()));
    // Change the last digit (to another digit: a link that ends in 0 stays forged).
    let last = if url.ends_with('0') { '1' } else { '0' };
    let forged = format!("{}{last}", &url[..url.len() - 1]);
    let forged = h.client.get(&forged).send().await?;
    assert_eq!(refusal(forged).await?, (401, "bad_link".into()));

    // The cookie is a credential; another instance's cookie name is not.
    let r = h.get("/notes").header("cookie", &cookie).send().await?;
    assert_eq!(r.status(), 200);
    let value = cookie.split_once('=').map(|(_, v)| v).unwrap_or_default();
    let other = h
        .get("/notes")
        .header("cookie", format!("hearth_node_x={value}"))
        .send()
        .await?;
    assert_eq!(refusal(other).await?, (401, "unauthenticated".into()));
    let listed: serde_json::Value = serde_json::from_str(
        &h.get("/auth/sessions")
            .header("cookie", &cookie)
            .send()
            .await?
            .text()
            .await?,
    )?;
    assert_eq!(listed["total"], 1, "{listed}");
    assert_eq!(listed["data"][0]["current"], true, "{listed}");
    let id = listed["data"][0]["id"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("no id"))?
        .to_string();
    assert!(
        !listed.to_string().contains(value),
        "no secret in the listing"
    );

    // The CLI lists and ends it; the cookie stops working at once.
    let (bins, home) = (self::bins(), h.hub.home.clone());
    let id2 = id.clone();
    let (list, ended) = tokio::task::spawn_blocking(move || {
        anyhow::Ok((
            hub_cli(&bins, &home, &["sessions", "list"])?,
            hub_cli(&bins, &home, &["sessions", "end", &id2])?,
        ))
    })
    .await??;
    assert!(list.contains(&id), "{list}");
    assert!(ended.contains(&id), "{ended}");
    let r = h.get("/notes").header("cookie", &cookie).send().await?;
    assert_eq!(refusal(r).await?, (401, "unauthenticated".into()));

    // Another session, ended through the API.
    let link: serde_json::Value = serde_json::from_str(
        &h.post("/auth/links")
            .bearer_auth(&h.token)
            .send()
            .await?
            .text()
            .await?,
    )?;
    let url = link["url"].as_str().unwrap_or_default().to_string();
    let (cookie, _) = cookie_of(&h.client.get(&url).send().await?)?;
    let listed: serde_json::Value = serde_json::from_str(
        &h.get("/auth/sessions")
            .bearer_auth(&h.token)
            .send()
            .await?
            .text()
            .await?,
    )?;
    let id = listed["data"][0]["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let r = h
        .client
        .delete(format!("{}/auth/sessions/{id}", h.base))
        .bearer_auth(&h.token)
        .send()
        .await?;
    assert_eq!(r.status(), 204);
    let r = h.get("/notes").header("cookie", &cookie).send().await?;
    assert_eq!(r.status(), 401);

    // An expired link is refused.
    let link: serde_json::Value = serde_json::from_str(
        &h.post("/auth/links")
            .bearer_auth(&h.token)
            .header("content-type", "application/json")
            .body(r#"{"ttl_secs": 1}"#)
            .send()
            .await?
            .text()
            .await?,
    )?;
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let url = link["url"].as_str().unwrap_or_default();
    let late = h.client.get(url).send().await?;
    assert_eq!(refusal(late).await?, (410, "gone".into()));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_for_a_missing_project_is_404_and_project_dirs_are_named_by_id() -> anyhow::Result<()>
{
    let h = ApiHub::start().await?;
    for project in ["0123456789abcdef0123456789abcdef", "no-such-project"] {
        let r = tokio::time::timeout(
            Duration::from_secs(10),
            h.post("/chat")
                .bearer_auth(&h.token)
                .header("content-type", "application/json")
                .body(serde_json::json!({ "message": "hi", "project": project }).to_string())
                .send(),
        )
        .await??;
        assert_eq!(refusal(r).await?, (404, "not_found".into()), "{project}");
    }
    let r = h
        .post("/chat")
        .bearer_auth(&h.token)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await?;
    assert_eq!(refusal(r).await?.0, 400);
    // Project directories are named by id, never by the (peer-editable) name.
    let db = rusqlite::Connection::open(h.hub.home.join("hub.db"))?;
    let general: String = db.query_row(
        "SELECT value FROM hub_meta WHERE key = 'general_project'",
        [],
        |r| r.get(0),
    )?;
    let projects = h.hub.home.join("projects");
    assert!(projects.join(&general).is_dir());
    assert!(!projects.join("general").exists());
    Ok(())
}

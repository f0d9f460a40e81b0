//! Requests a node relays to its hub over `hearth/rpc/1`, against a real hub process:
//! the node's `HubLink` (in process, with each device's own key, on 127.0.0.1, relays
//! off) relays them and the hub judges each on the device's current grant. A scoped
//! device reaches only its own project's conversations and none of settings or devices;
//! a non-admin device cannot approve devices or widen tool permissions, an admin device
//! can; revoking or narrowing a device ends its open relayed event stream and its next
//! request fails, at once. With the hub down a request fails at once, and the link comes
//! back by itself when the hub does.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use futures_util::StreamExt;
use hearth_net::{NetSettings, NoHooks, RelaySetting};
use hearth_node::{hub_link::BodyStream, HubLink, HubLocator, LinkError, LinkState};
use hearth_protocol::RpcMethod::{self, Get, Patch, Post, Put};
use hearth_tests::{free_udp_port, hub_cli, HubProc, NodeHome};
use iroh::SecretKey;
use serde_json::{json, Value};

use crate::{bins, sub, tempdir};

/// A device key the hub knows, and the link it dials with.
struct Device {
    key: SecretKey,
    link: Option<HubLink>,
}

impl Device {
    fn new() -> Self {
        Self {
            key: SecretKey::generate(),
            link: None,
        }
    }

    fn id(&self) -> String {
        self.key.public().to_string()
    }

    /// Pairs this key by id, optionally scoped.
    fn pair(&self, hub_home: &Path, name: &str, scope: Option<&str>) -> anyhow::Result<()> {
        let id = self.id();
        let mut args = vec!["devices", "add", &id, "--name", name];
        if let Some(s) = scope {
            args.extend(["--scope", s]);
        }
        hub_cli(&bins(), hub_home, &args)?;
        Ok(())
    }

    async fn connect(&mut self, hub_id: &str, addr: std::net::SocketAddr) -> anyhow::Result<()> {
        let net = NetSettings {
            bind: "127.0.0.1:0".parse()?,
            relay: RelaySetting::Disabled,
        };
        let endpoint =
            hearth_net::bind_endpoint(self.key.clone(), &net, Vec::new(), None::<NoHooks>).await?;
        let hub = HubLocator {
            id: hub_id.parse()?,
            addrs: vec![addr],
            relay: None,
            mdns: false,
        };
        self.link = Some(HubLink::start(endpoint, hub));
        Ok(())
    }

    fn link(&self) -> &HubLink {
        self.link.as_ref().expect("connected")
    }

    async fn online(&self, within: Duration) -> anyhow::Result<()> {
        let mut state = self.link().state();
        tokio::time::timeout(
            within,
            state.wait_for(|s| matches!(s, LinkState::Online { .. })),
        )
        .await
        .map_err(|_| anyhow::anyhow!("not online within {within:?}: {:?}", self.link()))??;
        Ok(())
    }

    /// Status and error code (`ok` for a 2xx) of a relayed request.
    async fn code(
        &self,
        method: RpcMethod,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<(u16, String)> {
        let body = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
        let resp = self.link().request(method, path, body).await?;
        let status = resp.status;
        let bytes = resp.bytes(1 << 20).await?;
        if (200..300).contains(&status) {
            return Ok((status, "ok".into()));
        }
        let v: Value = serde_json::from_slice(&bytes)?;
        Ok((
            status,
            v["error"]["code"].as_str().unwrap_or("?").to_string(),
        ))
    }

    async fn events(&self) -> anyhow::Result<BodyStream> {
        let resp = self.link().request(Get, "/events", Vec::new()).await?;
        anyhow::ensure!(resp.status == 200, "events: {}", resp.status);
        Ok(resp.body)
    }
}

/// Waits for a relayed stream to end (cleanly or with an error); how long it took.
async fn ended(mut body: BodyStream, within: Duration) -> anyhow::Result<Duration> {
    let started = Instant::now();
    tokio::time::timeout(within, async {
        while let Some(Ok(_)) = body.next().await {}
    })
    .await
    .map_err(|_| anyhow::anyhow!("the relayed stream was still open after {within:?}"))?;
    Ok(started.elapsed())
}

async fn start_hub(home: &Path, port: u16) -> anyhow::Result<HubProc> {
    let home = home.to_path_buf();
    tokio::task::spawn_blocking(move || HubProc::start(&bins(), &home, port)).await?
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hub_judges_every_relayed_request_on_the_devices_grant() -> anyhow::Result<()> {
    let dir = tempdir();
    let hub_home = sub(&dir, "hub");
    let docs = NodeHome::new(&bins(), hub_home.clone())?; // `hearth` on the hub's store
    let work = docs.cli(&["project", "add", "work"])?.trim().to_string();
    let personal = docs
        .cli(&["project", "add", "personal"])?
        .trim()
        .to_string();

    let mut scoped = Device::new();
    scoped.pair(&hub_home, "work laptop", Some("work"))?;
    let mut plain = Device::new();
    plain.pair(&hub_home, "plain laptop", None)?;
    let mut admin = Device::new();
    admin.pair(&hub_home, "admin laptop", None)?;
    let said = hub_cli(&bins(), &hub_home, &["devices", "admin", &admin.id(), "on"])?;
    assert!(
        said.contains("admin laptop") && said.contains("fingerprint"),
        "the CLI confirms which device: {said}"
    );

    let hub = start_hub(&hub_home, 0).await?;
    for d in [&mut scoped, &mut plain, &mut admin] {
        d.connect(&hub.id, hub.addr).await?;
        d.online(Duration::from_secs(10)).await?;
    }

    // A scoped device: its own project's conversations, yes; another's, no.
    let own = format!("/projects/{work}/conversations");
    assert_eq!(scoped.code(Get, &own, None).await?, (200, "ok".into()));
    for path in [
        format!("/projects/{personal}/conversations"),
        format!("/projects/{personal}/conversations/main/messages"),
    ] {
        assert_eq!(
            scoped.code(Get, &path, None).await?,
            (403, "out_of_scope".into()),
            "{path}"
        );
    }
    // Nor settings, nor devices.
    for path in [
        "/settings",
        "/settings/providers",
        "/devices",
        "/devices/pending",
    ] {
        assert_eq!(
            scoped.code(Get, path, None).await?,
            (403, "out_of_scope".into()),
            "{path}"
        );
    }
    // Documents are never relayed: the node serves them from its replica.
    assert_eq!(
        scoped.code(Get, "/notes", None).await?,
        (404, "not_relayed".into())
    );

    // A full-scope device that is not admin reads, but cannot widen power.
    assert_eq!(plain.code(Get, "/devices", None).await?, (200, "ok".into()));
    let approve = json!({ "code": "BBBB-BBBB" });
    let tool = format!("/projects/{work}/tools/notes_create");
    let allow = json!({ "allowed": true });
    assert_eq!(
        plain
            .code(Post, "/devices/approve", Some(approve.clone()))
            .await?,
        (403, "admin_required".into())
    );
    assert_eq!(
        plain.code(Put, &tool, Some(allow.clone())).await?,
        (403, "admin_required".into())
    );
    // An admin device can (the code is unknown, so the approval itself is a 404).
    assert_eq!(
        admin.code(Post, "/devices/approve", Some(approve)).await?,
        (404, "not_found".into())
    );
    assert_eq!(
        admin.code(Put, &tool, Some(allow)).await?,
        (200, "ok".into())
    );
    // Nobody sets the admin flag through a relay.
    assert_eq!(
        admin
            .code(
                Patch,
                &format!("/devices/{}", plain.id()),
                Some(json!({ "admin": true }))
            )
            .await?,
        (403, "owner_only".into())
    );

    // Revoking cuts the open event stream at once; the next request fails.
    let stream = plain.events().await?;
    let started = Instant::now();
    hub_cli(&bins(), &hub_home, &["devices", "revoke", &plain.id()])?;
    let took = ended(stream, Duration::from_secs(5)).await?;
    eprintln!("revocation ended the relayed event stream in {took:?}");
    assert!(took < Duration::from_secs(2), "revocation took {took:?}");
    let next = plain.code(Get, "/settings", None).await;
    assert!(
        matches!(
            next.as_ref().map_err(|e| e.downcast_ref::<LinkError>()),
            Err(Some(LinkError::Unreachable | LinkError::Connection(_))) | Ok((403, _))
        ),
        "a revoked device's next request fails: {next:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(3));

    // Narrowing cuts it too; the device comes back under its new scope.
    let stream = admin.events().await?;
    hub_cli(
        &bins(),
        &hub_home,
        &["devices", "scope", &admin.id(), "work"],
    )?;
    let took = ended(stream, Duration::from_secs(5)).await?;
    eprintln!("narrowing ended the relayed event stream in {took:?}");
    assert!(took < Duration::from_secs(2), "narrowing took {took:?}");
    // It reconnects by itself (meanwhile its requests fail at once), now scoped.
    let deadline = Instant::now() + Duration::from_secs(10);
    let after = loop {
        match admin.code(Get, "/devices", None).await {
            Ok(answer) => break answer,
            Err(e) if Instant::now() < deadline => {
                assert!(
                    matches!(e.downcast_ref::<LinkError>(), Some(LinkError::Unreachable)),
                    "{e}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => return Err(e),
        }
    };
    assert_eq!(after, (403, "out_of_scope".into()));
    assert_eq!(admin.code(Get, &own, None).await?, (200, "ok".into()));

    for d in [&scoped, &plain, &admin] {
        d.link().shutdown().await;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_hub_down_requests_fail_at_once_and_the_link_comes_back() -> anyhow::Result<()> {
    let dir = tempdir();
    let hub_home = sub(&dir, "hub");
    let hub_id = hub_cli(&bins(), &hub_home, &["id"])?.trim().to_string();
    let port = free_udp_port()?;
    let mut device = Device::new();
    device.pair(&hub_home, "laptop", None)?;
    device
        .connect(&hub_id, format!("127.0.0.1:{port}").parse()?)
        .await?;

    // Nothing listens: a request fails at once, it does not wait for a dial.
    for _ in 0..3 {
        let started = Instant::now();
        let err = device
            .link()
            .request(Get, "/settings", Vec::new())
            .await
            .expect_err("no hub");
        let took = started.elapsed();
        assert!(matches!(err, LinkError::Unreachable), "{err}");
        eprintln!("a request with no hub failed in {took:?}");
        assert!(took < Duration::from_millis(100), "took {took:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    // The hub starts: the link comes back by itself.
    let started = Instant::now();
    let mut hub = start_hub(&hub_home, port).await?;
    let ready = started.elapsed();
    device.online(Duration::from_secs(10)).await?;
    eprintln!(
        "the link was back {:?} after the hub was started (its ready line after {ready:?})",
        started.elapsed()
    );
    assert_eq!(
        device.code(Get, "/settings", None).await?,
        (200, "ok".into())
    );
    let events = device.link().events(None);
    tokio::pin!(events);

    // The hub stops: open streams end and requests fail at once again.
    let stream = device.events().await?;
    tokio::task::spawn_blocking(move || {
        hub.proc.terminate();
        hub
    })
    .await?;
    ended(stream, Duration::from_secs(5)).await?;
    let mut state = device.link().state();
    tokio::time::timeout(
        Duration::from_secs(5),
        state.wait_for(|s| matches!(s, LinkState::Offline { .. })),
    )
    .await??;
    let started = Instant::now();
    let err = device
        .link()
        .request(Get, "/settings", Vec::new())
        .await
        .expect_err("hub stopped");
    assert!(matches!(err, LinkError::Unreachable), "{err}");
    assert!(started.elapsed() < Duration::from_millis(100));

    // Back again; the event stream resumes by itself and carries the hub's events.
    let _hub = start_hub(&hub_home, port).await?;
    device.online(Duration::from_secs(10)).await?;
    let other = SecretKey::generate().public().to_string();
    hub_cli(
        &bins(),
        &hub_home,
        &["devices", "add", &other, "--name", "phone"],
    )?;
    let ev = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(ev) = events.next().await {
            if ev["type"] == "device" && ev["id"] == other.as_str() {
                return Some(ev);
            }
        }
        None
    })
    .await?;
    assert!(
        ev.is_some(),
        "the resumed event stream carries a device event"
    );
    device.link().shutdown().await;
    Ok(())
}

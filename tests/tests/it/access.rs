//! The interim access check: a key that is not on the hub's allowlist is refused right
//! after the handshake, before any document byte flows, and is told why.

use std::time::Duration;

use hearth_net::{NetSettings, NoHooks, RelaySetting};
use hearth_protocol::ALPN_SYNC;
use hearth_tests::{allow, eventually, HubProc, NodeHome};
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
        text.contains("not allowed"),
        "refusal reason reaches the device: {text}"
    );
    ep.close().await;
    let log = hub.proc.stderr_text();
    assert!(
        log.contains("refused connection from a device not on the allowlist"),
        "{log}"
    );
    assert!(
        !log.contains("sync session started"),
        "no session may start: {log}"
    );
    Ok(())
}

#[test]
fn removing_a_node_from_the_allowlist_refuses_it_from_then_on() -> anyhow::Result<()> {
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
    drop(node);
    let mut c = bins.hub(&hub_home);
    c.args(["disallow", &a.id]);
    hearth_tests::run_ok(c)?;
    let node = a.start(&hub.id, hub.addr)?;
    let line = node.wait_line(Duration::from_secs(30), |l| {
        l.starts_with("hearth disconnected")
    })?;
    assert!(line.contains("not allowed"), "{line}");
    eventually(Duration::from_secs(5), || {
        Ok(hub.proc.stderr_text().contains("refused connection"))
    })?;
    Ok(())
}

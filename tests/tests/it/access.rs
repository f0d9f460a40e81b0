//! The interim access check: a key that is not on the hub's allowlist is refused right
//! after the handshake, before any document byte flows, and is told why.

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

//! A malformed, truncated or oversized frame from a peer ends that peer's session with a
//! logged error; the hub and every other session carry on.

use std::time::Duration;

use hearth_protocol::{ALPN_SYNC, MAX_FRAME, PROTOCOL_VERSION};
use hearth_tests::{allow, eventually, HubProc, NodeHome};
use iroh::EndpointAddr;

use crate::{access::rogue_endpoint, bins, sub, tempdir};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_frames_end_only_that_session() -> anyhow::Result<()> {
    let bins = bins();
    let dir = tempdir();
    let hub_home = sub(&dir, "hub");
    let hub_cli = NodeHome::new(&bins, hub_home.clone())?;
    let b = NodeHome::new(&bins, sub(&dir, "b"))?;
    allow(&bins, &hub_home, &b.id)?;
    let (bins2, home2) = (bins.clone(), hub_home.clone());
    let hub = tokio::task::spawn_blocking(move || HubProc::start(&bins2, &home2, 0)).await??;
    let (hub_id, hub_sock) = (hub.id.clone(), hub.addr);
    let node_b = tokio::task::spawn_blocking({
        let b = NodeHome::new(&bins, b.home.clone())?;
        move || -> anyhow::Result<_> {
            let p = b.start(&hub_id, hub_sock)?;
            p.wait_line(Duration::from_secs(30), |l| {
                l.starts_with("hearth caught-up")
            })?;
            Ok(p)
        }
    })
    .await??;

    let ep = rogue_endpoint().await?;
    allow(&bins, &hub_home, &ep.id().to_string())?;
    let cases: [(&str, Vec<u8>, &str); 3] = [
        (
            "malformed",
            vec![0, 0, 0, 5, PROTOCOL_VERSION, 0xff, 0xff, 0xff, 0xff],
            "malformed payload",
        ),
        (
            "truncated",
            vec![0, 0, 0, 100, PROTOCOL_VERSION, 0],
            "middle of a frame",
        ),
        (
            "oversized",
            (MAX_FRAME as u32 + 1).to_be_bytes().to_vec(),
            "exceeds the maximum",
        ),
    ];
    for (name, bytes, expect) in cases {
        let conn = ep
            .connect(
                EndpointAddr::new(hub.id.parse()?).with_ip_addr(hub.addr),
                ALPN_SYNC,
            )
            .await?;
        let (mut send, mut recv) = conn.open_bi().await?;
        send.write_all(&bytes).await?;
        send.finish()?;
        // The hub ends the session: our read side ends (cleanly or with the close).
        let _ = tokio::time::timeout(Duration::from_secs(10), recv.read_to_end(1 << 20)).await?;
        // The session's stream closes just before the hub logs why; poll the log.
        let mut logged = false;
        for _ in 0..200 {
            if hub.proc.stderr_text().contains(expect) {
                logged = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert!(
            logged,
            "{name}: hub log lacks {expect:?}: {}",
            hub.proc.stderr_text()
        );
        conn.close(0u32.into(), b"done");
    }
    ep.close().await;

    // The hub and the other session carry on.
    let note = b
        .cli(&[
            "note",
            "add",
            "--title",
            "after the storm",
            "--content",
            "still syncing",
        ])?
        .trim()
        .to_string();
    let note2 = note.clone();
    tokio::task::spawn_blocking(move || {
        eventually(Duration::from_secs(20), || {
            Ok(hub_cli
                .cli(&["note", "show", &note2])
                .is_ok_and(|c| c.contains("still syncing")))
        })
    })
    .await??;
    assert!(!note.is_empty());
    drop(node_b);
    Ok(())
}

//! A multi-call binary for the cross-process tests: `hearth-testbin hearth-hub …` runs the
//! hub's command line and `hearth-testbin hearth …` the node's, exactly as the real
//! binaries do, so `cargo test` builds and refreshes it like any test target;
//! `hearth-testbin relay --bind <ip:port>` runs a local iroh relay and
//! `hearth-testbin fake-model --bind <ip:port> --text <reply>` a fake model provider.

fn main() -> anyhow::Result<()> {
    match hearth_tests::multicall() {
        Some(result) => result,
        None => anyhow::bail!("usage: hearth-testbin (hearth-hub|hearth|relay|fake-model) [args…]"),
    }
}

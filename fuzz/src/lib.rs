//! Shared code of Hearth's fuzz targets: the Automerge format ([`amfmt`]), compression
//! bombs ([`bomb`]), the structure-aware mutator ([`mutate`]), the store path the targets
//! drive ([`replay`], the same file `sync/tests/fuzz_regressions.rs` uses) and progress
//! reporting ([`report`]).
//!
//! This crate does not link libFuzzer itself (the targets do), so the `seeds` binary
//! builds with plain `cargo run`.

pub mod amfmt;
pub mod bomb;
pub mod mutate;
#[path = "../../sync/tests/fuzz_support/mod.rs"]
pub mod replay;
pub mod report;

use std::sync::OnceLock;

use mutate::{Mutator, Rng};

/// The body of a store target (`sync_message_apply`, `snapshot_import`): replays `data`
/// on the process's one fixture store, aborts if a panic escaped the store, and reports
/// progress under `name`.
pub fn run_store_target(name: &'static str, stats: &'static replay::Stats, data: &[u8]) {
    static FIXTURE: OnceLock<replay::Fixture> = OnceLock::new();
    let fixture = FIXTURE.get_or_init(|| {
        // The store turns a panic inside Automerge into an error for that document
        // (`catch_unwind`); libFuzzer's hook would abort on it first. Count those instead;
        // a panic that escapes the store is caught below.
        report::count_caught_panics();
        match replay::Fixture::new() {
            Ok(f) => f,
            Err(e) => panic!("fixture (run the seeds binary): {e}"),
        }
    });
    let results = fixture.replay(data, stats);
    if let Some(p) = replay::panic_of(&results) {
        eprintln!("a panic escaped the store: {p}");
        std::process::abort();
    }
    report::tick(name, stats);
}

/// The mutator of a store target; `fuzzer_mutate` is libFuzzer's byte mutator, which
/// this crate does not link.
pub fn mutate_store_input(
    data: &mut [u8],
    size: usize,
    max_size: usize,
    seed: u32,
    fuzzer_mutate: fn(&mut [u8], usize, usize) -> usize,
) -> usize {
    let mut bytes = |v: &mut Vec<u8>| {
        let len = v.len();
        let cap = len + 64 + len / 2;
        v.resize(cap, 0);
        let n = fuzzer_mutate(v, len, cap);
        v.truncate(n);
    };
    custom_mutate(data, size, max_size, seed, Format::Store, &mut bytes)
}

/// Which input format a mutator works on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Raw `SyncMessage` frames (`frame_sync`).
    SyncFrames,
    /// `[0|1] ‖ PairRequest or PairResponse frame` (`frame_pair`).
    PairFrame,
    /// `flags ‖ SyncMessage frames` (`sync_message_apply`, `snapshot_import`).
    Store,
}

/// The fixture's document ids (empty if the fixture is missing).
pub fn known_ids() -> &'static [[u8; 16]] {
    static IDS: OnceLock<Vec<[u8; 16]>> = OnceLock::new();
    IDS.get_or_init(|| {
        replay::base_snapshots()
            .map(|d| d.iter().map(|d| d.id).collect())
            .unwrap_or_default()
    })
}

/// The body of `fuzz_mutator!`: mutates `data[..size]` in place, returns the new size.
/// `bytes` is libFuzzer's own mutator applied to one piece.
pub fn custom_mutate(
    data: &mut [u8],
    size: usize,
    max_size: usize,
    seed: u32,
    format: Format,
    bytes: &mut dyn FnMut(&mut Vec<u8>),
) -> usize {
    let input = data[..size.min(data.len())].to_vec();
    // A MiB of zeros costs about 1 KiB of deflate: bombs must fit in the input.
    let max_bomb_mib = max_size / 1100;
    let mut m = Mutator {
        rng: Rng::new(u64::from(seed)),
        bytes,
        known_ids: known_ids(),
        max_bomb_mib,
    };
    let mut out = match format {
        Format::SyncFrames => m.frame_sync_input(&input),
        Format::PairFrame => m.frame_pair_input(&input),
        Format::Store => m.store_input(&input),
    };
    if out.len() > max_size.min(data.len()) || out == input {
        out = input;
        (m.bytes)(&mut out);
        out.truncate(max_size.min(data.len()));
    }
    data[..out.len()].copy_from_slice(&out);
    out.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Taking real documents and sync messages apart and back gives the same bytes, so
    /// a mutation changes only what it means to.
    #[test]
    fn real_data_round_trips_through_the_format_code() {
        let docs = replay::base_snapshots().expect("fixture");
        for d in &docs {
            let chunks = amfmt::parse_chunks(&d.bytes).expect("chunks");
            assert_eq!(amfmt::write_chunks(&chunks), d.bytes);
            for c in &chunks {
                if c.ty == amfmt::TYPE_DOCUMENT {
                    let doc = amfmt::DocChunk::parse(&c.data).expect("document");
                    assert_eq!(doc.write(), c.data);
                }
            }
            assert!(replay::chunks_valid(&d.bytes));
        }
        let mut doc = automerge::AutoCommit::load(&docs[0].bytes).expect("load");
        let mut state = automerge::sync::State::new();
        use automerge::sync::SyncDoc;
        let msg = doc
            .sync()
            .generate_sync_message(&mut state)
            .expect("message");
        let bytes = msg.encode();
        let m = amfmt::SyncMsg::parse(&bytes).expect("sync message");
        assert_eq!(m.write(), bytes);
        let change = doc
            .get_changes(&[])
            .into_iter()
            .next()
            .expect("a change")
            .raw_bytes()
            .to_vec();
        let chunks = amfmt::parse_chunks(&change).expect("change chunk");
        let c = amfmt::ChangeChunk::parse(&chunks[0].data).expect("change");
        assert_eq!(c.write(), chunks[0].data);
        assert_eq!(amfmt::write_chunks(&chunks), change);
    }
}

//! Fuzz target: Automerge sync messages from a peer, applied through
//! `DocumentStore::receive_sync` (and answered with `generate_sync`) on a real store
//! seeded with the fixture, unscoped and scoped to `work`. Inputs: `flags ‖ Sync frames`
//! (see `sync/tests/fuzz_support/mod.rs`), mutated inside the Automerge format.

#![no_main]

use hearth_fuzz::{mutate_store_input, replay, run_store_target};
use libfuzzer_sys::{fuzz_mutator, fuzz_target, fuzzer_mutate};

static STATS: replay::Stats = replay::Stats::new();

fuzz_target!(|data: &[u8]| run_store_target("sync_message_apply", &STATS, data));

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    mutate_store_input(data, size, max_size, seed, fuzzer_mutate)
});

//! Fuzz target: whole documents from a peer, stored through `DocumentStore::import`
//! (then loaded, as serving them to the next peer does) on a real store seeded with the
//! fixture, for ids it has and new ones, unscoped and scoped to `work`. Inputs: `flags ‖
//! Snapshots frames`, their documents mutated inside the Automerge format.

#![no_main]

use hearth_fuzz::{mutate_store_input, replay, run_store_target};
use libfuzzer_sys::{fuzz_mutator, fuzz_target, fuzzer_mutate};

static STATS: replay::Stats = replay::Stats::new();

fuzz_target!(|data: &[u8]| run_store_target("snapshot_import", &STATS, data));

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    mutate_store_input(data, size, max_size, seed, fuzzer_mutate)
});

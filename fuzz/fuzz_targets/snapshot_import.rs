//! Fuzz target: whole documents from a peer, stored through `DocumentStore::import`
//! (then loaded, as serving them to the next peer does) on a real store seeded with the
//! fixture, for ids it has and new ones, unscoped and scoped to `work`. Inputs: `flags ‖
//! Snapshots frames`, their documents mutated inside the Automerge format.

#![no_main]

use std::sync::OnceLock;

use hearth_fuzz::{custom_mutate, replay, report, Format};
use libfuzzer_sys::{fuzz_mutator, fuzz_target, fuzzer_mutate};

static STATS: replay::Stats = replay::Stats::new();

fn fixture() -> &'static replay::Fixture {
    static F: OnceLock<replay::Fixture> = OnceLock::new();
    F.get_or_init(|| {
        // The store turns a panic inside Automerge into an error for that document
        // (`catch_unwind`); libFuzzer's hook would abort on it first. Count those instead;
        // a panic that escapes the store is caught below.
        report::count_caught_panics();
        replay::Fixture::new().expect("fixture (run the seeds binary)")
    })
}

fuzz_target!(|data: &[u8]| {
    let results = fixture().replay(data, &STATS);
    if let Some(p) = replay::panic_of(&results) {
        eprintln!("a panic escaped the store: {p}");
        std::process::abort();
    }
    report::tick("snapshot_import", &STATS);
});

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    let mut bytes = |v: &mut Vec<u8>| {
        let len = v.len();
        let cap = len + 64 + len / 2;
        v.resize(cap, 0);
        let n = fuzzer_mutate(v, len, cap);
        v.truncate(n);
    };
    custom_mutate(data, size, max_size, seed, Format::Store, &mut bytes)
});

//! Every input the fuzzers found (`tests/fuzz_crashers/<target>-<name>.bin`) replayed
//! through the same path the fuzz target drove (`fuzz_support`): each must return, Ok or
//! Err, without a panic, without a single allocation over 256 MiB or 1 GiB live, within
//! 60 s, and leave the store usable.
//!
//! Each input runs in a child process (this test binary, re-run with
//! `HEARTH_FUZZ_REPLAY_ONE=<file>`), because an over-limit allocation aborts: the parent
//! then names every input that failed, and how.

#[path = "fuzz_support/mod.rs"]
mod fuzz_support;

use std::{
    alloc::{GlobalAlloc, Layout, System},
    path::{Path, PathBuf},
    process::Command,
    sync::atomic::{AtomicUsize, Ordering::Relaxed},
    time::{Duration, Instant},
};

use hearth_protocol::{decode_frame, PairRequest, PairResponse, SyncMessage};

/// Largest single allocation a replay may make.
const MAX_ALLOC: usize = 256 << 20;
/// Most memory a replay may hold at once.
const MAX_LIVE: usize = 1 << 30;
/// Longest a replay may run.
const MAX_TIME: Duration = Duration::from_secs(60);
const ONE: &str = "HEARTH_FUZZ_REPLAY_ONE";

/// The system allocator, refusing (so the process aborts with "memory allocation of N
/// bytes failed") what a bounded decoder would never ask for.
struct Capped;

static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Capped {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > MAX_ALLOC || LIVE.fetch_add(layout.size(), Relaxed) > MAX_LIVE {
            if layout.size() <= MAX_ALLOC {
                LIVE.fetch_sub(layout.size(), Relaxed);
            }
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Relaxed);
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Capped = Capped;

fn crashers() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_crashers");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "bin"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// Replays one input in this process, panicking on any failure.
fn replay_one(path: &Path) {
    let bytes = std::fs::read(path).expect("read crasher");
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .expect("file name");
    if name.starts_with("frame_sync-") {
        let mut rest = &bytes[..];
        while let Ok(Some((_, used))) = decode_frame::<SyncMessage>(rest) {
            rest = &rest[used..];
        }
    } else if name.starts_with("frame_pair-") {
        if let Some((&which, frame)) = bytes.split_first() {
            if which & 1 == 0 {
                let _ = decode_frame::<PairRequest>(frame);
            } else {
                let _ = decode_frame::<PairResponse>(frame);
            }
        }
    } else {
        let fx = fuzz_support::Fixture::new().expect("fixture");
        let stats = fuzz_support::Stats::new();
        let results = fx.replay(&bytes, &stats);
        if let Some(p) = fuzz_support::panic_of(&results) {
            panic!("{name}: the store panicked: {p}");
        }
        // The store still answers.
        fx.store.summary_blocking().expect("summary after replay");
        eprintln!("{name}: {results:?}");
    }
}

#[test]
fn fuzz_crashers_return_ok_or_err_without_panic_or_memory_bomb() {
    if let Ok(one) = std::env::var(ONE) {
        replay_one(Path::new(&one));
        return;
    }
    let files = crashers();
    let exe = std::env::current_exe().expect("test binary");
    let mut failures = Vec::new();
    for file in &files {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "fuzz_crashers_return_ok_or_err_without_panic_or_memory_bomb",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(ONE, file)
            .env("RUST_BACKTRACE", "0")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn replay");
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break Some(status);
            }
            if start.elapsed() > MAX_TIME {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let out = child.wait_with_output().expect("output");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = stderr
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with("note:"))
            .rev()
            .take(4)
            .collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        match status {
            Some(s) if s.success() => {}
            Some(s) => failures.push(format!(
                "{}: {s}\n    {}",
                file.display(),
                tail.join("\n    ")
            )),
            None => failures.push(format!(
                "{}: still running after {MAX_TIME:?}",
                file.display()
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} fuzz crashers still fail:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

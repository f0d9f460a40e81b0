//! Progress lines for a fuzz run: the [`replay::Stats`](crate::replay::Stats) counters,
//! executions per second and peak RSS, printed to stderr every 20 s and at exit, and
//! appended to the file named by `HEARTH_FUZZ_STATS` if set.

use std::sync::{
    atomic::{AtomicU64, Ordering::Relaxed},
    OnceLock,
};
use std::time::Instant;

use crate::replay::Stats;

struct Reporter {
    name: &'static str,
    stats: &'static Stats,
    start: Instant,
}

static REPORTER: OnceLock<Reporter> = OnceLock::new();
static LAST: AtomicU64 = AtomicU64::new(0);
/// Panics seen by [`count_caught_panics`]'s hook.
pub static PANICS: AtomicU64 = AtomicU64::new(0);

/// Replaces the panic hook with one that counts (and prints the first few): the store
/// catches Automerge's panics on peer data, which is the behaviour under test.
pub fn count_caught_panics() {
    std::panic::set_hook(Box::new(|info| {
        if PANICS.fetch_add(1, Relaxed) < 3 {
            eprintln!("#hearth panic (caught by the store unless an abort follows): {info}");
        }
    }));
}

extern "C" {
    fn atexit(cb: extern "C" fn()) -> i32;
}

extern "C" fn at_exit() {
    print("exit");
}

/// Peak resident set size of this process, in MiB (`VmHWM`).
pub fn peak_rss_mib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb / 1024)
}

fn print(when: &str) {
    if let Some(r) = REPORTER.get() {
        let secs = r.start.elapsed().as_secs_f64();
        let n = r.stats.inputs.load(Relaxed);
        let line = format!(
            "#hearth {} pid={} {when} t={secs:.0}s exec/s={:.0} peak_rss={}MiB panics_caught={} {}",
            r.name,
            std::process::id(),
            n as f64 / secs.max(0.001),
            peak_rss_mib(),
            PANICS.load(Relaxed),
            r.stats.line()
        );
        eprintln!("{line}");
        // In fork mode libFuzzer discards its children's output: keep a copy.
        if let Some(path) = std::env::var_os("HEARTH_FUZZ_STATS") {
            use std::io::Write;
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
            {
                let _ = writeln!(f, "{line}");
            }
        }
    }
}

/// Call once per input: registers the exit hook on first use and prints every 20 s.
pub fn tick(name: &'static str, stats: &'static Stats) {
    let r = REPORTER.get_or_init(|| {
        // SAFETY: registers a plain function with the C runtime; it only reads atomics.
        unsafe {
            atexit(at_exit);
        }
        Reporter {
            name,
            stats,
            start: Instant::now(),
        }
    });
    let secs = r.start.elapsed().as_secs();
    let last = LAST.load(Relaxed);
    if secs >= last + 20 && LAST.compare_exchange(last, secs, Relaxed, Relaxed).is_ok() {
        print("progress");
    }
}

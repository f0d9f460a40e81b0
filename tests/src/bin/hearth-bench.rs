//! `hearth-bench`: benchmarks printed as `name value unit` lines (see `run_bench`).
fn main() {}

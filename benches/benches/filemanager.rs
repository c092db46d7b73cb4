//! Criterion benchmarks for `filemanager` (not written yet).
fn main() {}

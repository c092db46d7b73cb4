//! Criterion benchmarks for `pathcache` (not written yet).
fn main() {}

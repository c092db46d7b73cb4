//! Criterion benchmarks for `fdtable` (not written yet).
fn main() {}

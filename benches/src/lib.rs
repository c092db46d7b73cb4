//! Shared helpers for the benchmark suite.

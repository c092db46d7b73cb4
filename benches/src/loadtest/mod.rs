//! The side-by-side HTTP load harness: `fileserver` against nginx.
//!
//! One run goes through every selected scenario the same way:
//!
//! ```text
//!   tree::generate ──> temp dir: small/000..999.bin (1 KiB), large.bin (1 MiB),
//!                      pressure/0000..9999.bin (4 KiB), deterministic bytes
//!        │
//!   per scenario ──> servers::start_fileserver   servers::start_nginx
//!        │           (own process group, 127.0.0.1, ephemeral ports, 2 workers)
//!        │
//!        ├─> verify: 200 + exact bytes / 304 + ETag / 206 + Content-Range
//!        ├─> warm-up: one short wrk run per server
//!        ├─> rounds 1..N:  wrk A, wrk B, oha A, oha B      (A = fileserver)
//!        │        procs::Sampler polls /proc (RSS peak, utime+stime) meanwhile
//!        └─> stop both (SIGTERM to the group, SIGKILL after a grace period)
//!
//!   stats::summarize ──> per server medians over rounds, per-round ratios
//!   report ──> console table, latest.json, latest.md, latest.png
//! ```
//!
//! Everything the harness starts runs in its own process group held by a
//! [`procs::ChildGroup`], whose `Drop` kills the group; SIGINT/SIGTERM only
//! set a flag ([`procs::interrupted`]) that every wait loop checks, so an
//! interrupted run unwinds through those guards and leaves nothing behind.

pub mod http;
pub mod loadgen;
pub mod procs;
pub mod report;
pub mod scenario;
pub mod servers;
pub mod stats;
pub mod tree;

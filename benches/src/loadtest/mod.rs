//! The side-by-side HTTP load harness: `fileserver` against nginx, lighttpd,
//! h2o, Caddy and static-web-server (the peers that are installed); in
//! the `embedded` group ([`scenario::Group`]) `servedir::ServeDir` against
//! tower-http's `ServeDir` in the same axum app (the `embedded-server`
//! binary) and the daemon; in the `tls` group the daemon's HTTPS listener
//! against nginx, lighttpd, h2o and Caddy over HTTP/1.1 and HTTP/2 ([`tls`] makes the
//! certificate); in the `http3` group its HTTP/3 against Caddy's (load
//! from `src/bin/h3load.rs`); in the `compression` group compressed text against them;
//! in the `arena` group HttpArena's static profile ([`tree::arena`]: its 20
//! files with `.br` and `.gz` siblings) against them, each sending the
//! siblings.
//!
//! One run goes through every selected scenario the same way:
//!
//! ```text
//!   tree::generate ──> temp dir: small/000..999.bin (1 KiB), large.bin (1 MiB),
//!                      pressure/0000..9999.bin (4 KiB), deterministic bytes;
//!                      many/00000..19999.bin (4 KiB), cold/N.bin (64 MiB),
//!                      text/ (JS, CSS, JSON) and static/ (HttpArena's files and
//!                      their siblings) only for the scenarios that read them;
//!   tls::generate ──> ca.pem, chain.pem, key.pem when a TLS scenario runs
//!        │
//!   per scenario ──> servers::start_fileserver, servers::start_peer for each peer
//!        │           (own process group, 127.0.0.1, ephemeral ports, 2 workers,
//!        │            peer configs rendered from benches/http/ into the temp dir);
//!        │           embedded_*: servers::start_embedded for servedir and
//!        │           tower-http, then servers::start_fileserver
//!        │
//!        ├─> verify: 200 + exact bytes / 304 + ETag / 206 + Content-Range
//!        │           (HTTPS and decoded bodies through curl: http::Client)
//!        │           (a peer that fails is left out of the scenario, with why)
//!        ├─> warm-up: one short wrk run per server (none in `cold`)
//!        ├─> rounds 1..N:  wrk (h2load for HTTP/2 and handshakes, h3load
//!        │        for HTTP/3) on every server, then oha on every server,
//!        │        each round starting with the next server in turn;
//!        │        (`cold`: per server, drop the page cache, then wrk on
//!        │        the large files and a second generator on small ones at once);
//!        │        procs::Sampler polls /proc (RSS peak, utime+stime) meanwhile
//!        └─> stop all (SIGTERM to each group, SIGKILL after a grace period)
//!
//!   report::summarize ──> per server medians over rounds; per-round ratios
//!                         fileserver / each peer; the best peer per figure
//!                         (embedded_*: servedir / each; against tower-http;
//!                         tls_*, compressed_text, arena_*: against nginx;
//!                         h3_*: against Caddy)
//!   report ──> console tables, latest.json, latest.md, latest.png
//! ```
//!
//! Everything the harness starts runs in its own process group held by a
//! [`procs::ChildGroup`], whose `Drop` kills the group; SIGINT/SIGTERM only
//! set a flag ([`procs::interrupted`]) that every wait loop checks, so an
//! interrupted run unwinds through those guards and leaves nothing behind.

pub mod build;
pub mod http;
pub mod loadgen;
pub mod procs;
pub mod report;
pub mod scenario;
pub mod servers;
pub mod stats;
pub mod tls;
pub mod tree;

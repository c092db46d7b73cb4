//! Shared code of the benchmark suite.
//!
//! The criterion groups live in `benches/benches/*.rs`. This library holds
//! the side-by-side HTTP load harness that the `loadtest` binary drives:
//! it generates file trees, starts `fileserver` and its peers (nginx,
//! lighttpd, h2o, Caddy, static-web-server) on loopback (or, in the
//! `embedded` group, two axum apps serving the tree with `servedir` and
//! tower-http's `ServeDir`, and the daemon), verifies each,
//! drives them with `wrk` (`h2load` over HTTP/2, `h3load` over HTTP/3) and
//! `oha` in turn, samples their RSS and CPU from
//! `/proc`, and renders the results as tables, JSON, markdown and a PNG chart. See [`loadtest`] for the data flow.
//!
//! The pure parts (tool output parsing, statistics, rendering) are usable on
//! their own:
//!
//! ```
//! use benches::loadtest::stats::{median, ratio};
//! assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
//! assert_eq!(ratio(90.0, 100.0), Some(0.9));
//! ```
#![deny(missing_docs)]

pub mod loadtest;
pub mod plot_font;

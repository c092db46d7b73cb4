//! Bounds on what one connection may ask and how long it may take:
//! `max_header_bytes`, `max_headers`, the timeouts, `max_connections`
//! (top-level keys; HTTP/2's own are `http2.rs`'s).

use super::values::{dur, positive_dur, range};
use super::ConfigError;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The limit keys of the top table.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(default)]
pub struct LimitsConfig {
    /// Largest request head (request line + headers) in bytes.
    pub max_header_bytes: u64,
    /// Most header fields in one request.
    pub max_headers: u64,
    /// Time allowed to receive a complete request head.
    pub header_read_timeout: String,
    /// Idle time allowed between requests on a keep-alive connection.
    pub keepalive_timeout: String,
    /// Time a response write may stall before the connection is dropped.
    pub send_timeout: String,
    /// Time allowed for in-flight responses at SIGTERM/SIGINT.
    pub shutdown_timeout: String,
    /// Open client connections at most (accepting pauses at the limit).
    pub max_connections: u64,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_header_bytes: 8192,
            max_headers: 100,
            header_read_timeout: "10s".into(),
            keepalive_timeout: "60s".into(),
            send_timeout: "60s".into(),
            shutdown_timeout: "30s".into(),
            max_connections: 10000,
        }
    }
}

/// Connection and request limits (reloadable).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// `max_header_bytes`.
    pub max_header_bytes: usize,
    /// `max_headers`.
    pub max_headers: usize,
    /// `header_read_timeout`.
    pub header_read_timeout: Duration,
    /// `keepalive_timeout`.
    pub keepalive_timeout: Duration,
    /// `send_timeout`.
    pub send_timeout: Duration,
    /// `max_connections`.
    pub max_connections: usize,
}

impl LimitsConfig {
    /// The limits every engine reads per connection.
    pub(super) fn validate(&self, e: &mut Vec<ConfigError>) -> Limits {
        Limits {
            max_header_bytes: range("max_header_bytes", self.max_header_bytes, 256, 1 << 20, e),
            max_headers: range("max_headers", self.max_headers, 4, 10_000, e),
            header_read_timeout: positive_dur("header_read_timeout", &self.header_read_timeout, e),
            keepalive_timeout: positive_dur("keepalive_timeout", &self.keepalive_timeout, e),
            send_timeout: positive_dur("send_timeout", &self.send_timeout, e),
            max_connections: range("max_connections", self.max_connections, 1, 10_000_000, e),
        }
    }

    /// `shutdown_timeout` (zero: cut at once).
    pub(super) fn shutdown_timeout(&self, e: &mut Vec<ConfigError>) -> Duration {
        dur("shutdown_timeout", &self.shutdown_timeout, e)
    }
}

//! Bounds on what one connection may ask and how long it may take, and
//! on how many connections there are: `max_header_bytes`, `max_headers`,
//! the timeouts, `max_connections`, `max_connections_per_client` (top-level
//! keys; HTTP/2's own are `http2.rs`'s).

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
    /// Open connections of one client at most, 0 for no limit: more are
    /// closed at accept, before TLS (peers in `trusted_proxies` are not
    /// limited).
    pub max_connections_per_client: u64,
    /// The prefix an IPv6 client is known by, in bits (one host owns a /64).
    pub client_ipv6_prefix: u64,
    /// Body bytes per second of one response, 0 for no limit.
    pub limit_rate: u64,
    /// Body bytes of a response sent at full speed before `limit_rate`.
    pub limit_rate_after: u64,
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
            max_connections_per_client: 0,
            client_ipv6_prefix: 64,
            limit_rate: 0,
            limit_rate_after: 0,
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
    /// `max_connections_per_client` (0: no limit).
    pub max_connections_per_client: u32,
    /// `client_ipv6_prefix`.
    pub client_ipv6_prefix: u8,
    /// `limit_rate` (0: none).
    pub limit_rate: u64,
    /// `limit_rate_after`.
    pub limit_rate_after: u64,
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
            max_connections_per_client: range(
                "max_connections_per_client",
                self.max_connections_per_client,
                0,
                1_000_000,
                e,
            ) as u32,
            client_ipv6_prefix: range("client_ipv6_prefix", self.client_ipv6_prefix, 16, 128, e)
                as u8,
            // A slice of a paced body is at least 16 KiB: slower than 1 KiB/s
            // would send in bursts minutes apart.
            limit_rate: if self.limit_rate == 0 {
                0
            } else {
                range("limit_rate", self.limit_rate, 1024, 1 << 40, e) as u64
            },
            limit_rate_after: self.limit_rate_after,
        }
    }

    /// `shutdown_timeout` (zero: cut at once).
    pub(super) fn shutdown_timeout(&self, e: &mut Vec<ConfigError>) -> Duration {
        dur("shutdown_timeout", &self.shutdown_timeout, e)
    }
}

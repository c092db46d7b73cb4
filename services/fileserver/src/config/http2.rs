//! `[http2]`: the bounds of one HTTP/2 connection (`h2wire::Config`,
//! built here with the top-level timeouts) and the daemon's send budgets.

use super::limits::Limits;
use super::restart::Restart;
use super::values::{dur, range};
use super::ConfigError;
use serde::{Deserialize, Serialize};

/// HTTP/2 keys (`[http2]` table): per-connection bounds for the TLS
/// listener (ALPN `h2`) and h2c with prior knowledge on the plaintext one.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Http2Config {
    /// Accept HTTP/2 with prior knowledge (h2c) on the plaintext listener.
    pub h2c: bool,
    /// Streams a client may have open at once.
    pub max_concurrent_streams: u64,
    /// Largest decoded header list (bytes) per request.
    pub max_header_list_size: u64,
    /// Flow-control window of each stream, bytes.
    pub initial_stream_window: u64,
    /// Flow-control window of the connection, bytes.
    pub initial_connection_window: u64,
    /// Streams the client opens and resets before the server took them
    /// up, at most; more and the connection is closed (rapid reset,
    /// CVE-2023-44487).
    pub max_pending_reset_streams: u64,
    /// Streams the server reset for protocol errors per connection, at
    /// most; more and the connection is closed.
    pub max_local_error_resets: u64,
    /// Body bytes one stream puts into its connection's output per
    /// round, at most (the streams take turns).
    pub max_send_buffer: u64,
    /// Output not yet written on one connection, at most: past it the
    /// connection reads no more requests and its streams wait.
    pub send_budget_per_connection: u64,
    /// The same across all connections of the process (each connection
    /// may still hold one 16 KiB read beyond it, so none starves).
    pub send_budget: u64,
    /// Frames that ask the server for no response data (PRIORITY,
    /// SETTINGS, PING, empty DATA, WINDOW_UPDATE, unknown types) a client
    /// may send ahead of the server's work; each HEADERS or non-empty
    /// DATA frame the server sends earns two back, up to this. Beyond it:
    /// GOAWAY with ENHANCE_YOUR_CALM.
    pub control_frame_budget: u64,
    /// Requests one connection serves, 0 for no limit: the last gets a
    /// GOAWAY beside its answer, and the client opens a new connection
    /// (nginx's `keepalive_requests`).
    pub max_requests_per_connection: u64,
    /// How long one connection lives: then GOAWAY, its streams answered
    /// (nginx's `keepalive_time`).
    pub max_connection_age: String,
}

impl Default for Http2Config {
    fn default() -> Self {
        Http2Config {
            h2c: true,
            max_concurrent_streams: 128,
            max_header_list_size: 16384,
            initial_stream_window: 1 << 20,
            initial_connection_window: 2 << 20,
            max_pending_reset_streams: 20,
            max_local_error_resets: 256,
            max_send_buffer: 128 << 10,
            send_budget_per_connection: 64 << 10,
            send_budget: 16 << 20,
            control_frame_budget: 1000,
            max_requests_per_connection: 0,
            max_connection_age: "1h".into(),
        }
    }
}

/// The process-wide semaphore is sized once; the rest applies to new
/// connections.
pub(super) const RESTART: &[Restart] = &[Restart::key("http2.send_budget")];

/// Typed `[http2]`.
#[derive(Clone, Debug)]
pub struct Http2Settings {
    /// `h2c`.
    pub h2c: bool,
    /// What each connection announces and enforces.
    pub wire: h2wire::Config,
    /// `max_send_buffer`.
    pub max_send_buffer: usize,
    /// `send_budget_per_connection`.
    pub send_budget_per_connection: u32,
    /// `send_budget`.
    pub send_budget: u32,
}

impl Http2Config {
    /// The `[http2]` table, with the top table's `header_read_timeout`
    /// and `keepalive_timeout` (`limits`).
    pub(super) fn validate(&self, limits: &Limits, e: &mut Vec<ConfigError>) -> Http2Settings {
        let h = self;
        // 2^31 - 1 is the largest window HTTP/2 allows (RFC 9113 6.9.1).
        let window_max = (1 << 31) - 1;
        let key = |name: &str| format!("http2.{name}");
        let wire = h2wire::Config {
            // Held answers cost memory and a walk per round each: nginx's
            // 128 is the default, 1000 the most.
            max_concurrent_streams: range(
                &key("max_concurrent_streams"),
                h.max_concurrent_streams,
                1,
                1000,
                e,
            ) as u32,
            max_header_list_size: range(
                &key("max_header_list_size"),
                h.max_header_list_size,
                1024,
                1 << 20,
                e,
            ) as u32,
            initial_stream_window: range(
                &key("initial_stream_window"),
                h.initial_stream_window,
                65535,
                window_max,
                e,
            ) as u32,
            initial_connection_window: range(
                &key("initial_connection_window"),
                h.initial_connection_window,
                65535,
                window_max,
                e,
            ) as u32,
            max_pending_reset_streams: range(
                &key("max_pending_reset_streams"),
                h.max_pending_reset_streams,
                1,
                10_000,
                e,
            ),
            max_local_error_resets: range(
                &key("max_local_error_resets"),
                h.max_local_error_resets,
                1,
                100_000,
                e,
            ),
            control_frame_budget: range(
                &key("control_frame_budget"),
                h.control_frame_budget,
                10,
                1_000_000,
                e,
            ) as u32,
            max_requests: range(
                &key("max_requests_per_connection"),
                h.max_requests_per_connection,
                0,
                u64::from(u32::MAX),
                e,
            ) as u32,
            max_age: dur(&key("max_connection_age"), &h.max_connection_age, e),
            header_read_timeout: limits.header_read_timeout,
            idle_timeout: limits.keepalive_timeout,
        };
        Http2Settings {
            h2c: h.h2c,
            wire,
            max_send_buffer: range(
                &key("max_send_buffer"),
                h.max_send_buffer,
                16 << 10,
                16 << 20,
                e,
            ),
            // At least one 16 KiB read, so a stream can always send; at
            // most 1 GiB (tokio's semaphore counts in u32 and below
            // `usize::MAX >> 3`).
            send_budget_per_connection: range(
                &key("send_budget_per_connection"),
                h.send_budget_per_connection,
                16 << 10,
                1 << 30,
                e,
            ) as u32,
            send_budget: range(&key("send_budget"), h.send_budget, 16 << 10, 1 << 30, e) as u32,
        }
    }
}

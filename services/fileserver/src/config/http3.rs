//! `[http3]`: QUIC on `tls_listen`'s port (UDP), and the transport each
//! worker's endpoint is built with (`quinn::TransportConfig`, built here).

use super::restart::Restart;
use super::values::{positive_dur, range};
use super::{err, ConfigError};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// HTTP/3 keys (`[http3]` table): QUIC on `tls_listen`'s port (UDP),
/// advertised to HTTPS clients with `Alt-Svc`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Http3Config {
    /// Serve HTTP/3 (needs `tls_listen`).
    pub enabled: bool,
    /// Requests a client may have open at once on one connection.
    pub max_concurrent_streams: u64,
    /// A connection with no packet for this long is closed.
    pub idle_timeout: String,
    /// Flow-control window of each request stream, bytes: the most of a
    /// request a client may send ahead (its head; bodies are stopped).
    pub stream_window: u64,
    /// Flow-control window of the connection, bytes: the most a client may
    /// have in flight to the server over all its streams.
    pub connection_window: u64,
    /// The most the server holds for one connection, bytes: sent and not
    /// yet acknowledged, or handed to QUIC and not yet sent.
    pub send_window: u64,
    /// QUIC handshakes in progress at once, over all workers; a new
    /// connection beyond them is refused.
    pub max_handshakes: u64,
    /// When a client must prove its address with a Retry before its
    /// handshake: `auto` (once a quarter of `max_handshakes` are in
    /// progress, or always with `max_connections_per_client`) or `always`.
    pub address_validation: String,
    /// Largest request head (decoded field section), bytes.
    pub max_field_section_size: u64,
    /// `Alt-Svc` `ma`: how long a client may remember that HTTP/3 is here.
    pub alt_svc_max_age: String,
}

impl Default for Http3Config {
    fn default() -> Self {
        Http3Config {
            enabled: false,
            max_concurrent_streams: 100,
            idle_timeout: "30s".into(),
            stream_window: 64 << 10,
            connection_window: 1 << 20,
            send_window: 2 << 20,
            max_handshakes: 256,
            address_validation: "auto".into(),
            max_field_section_size: 16384,
            alt_svc_max_age: "24h".into(),
        }
    }
}

/// The QUIC endpoints are built once.
pub(super) const RESTART: &[Restart] = &[Restart::key("http3")];

/// Typed `[http3]`; `None` in `Settings` when off.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Http3Settings {
    /// `max_concurrent_streams`.
    pub max_concurrent_streams: u32,
    /// `idle_timeout`.
    pub idle_timeout: Duration,
    /// `stream_window`.
    pub stream_window: u32,
    /// `connection_window`.
    pub connection_window: u32,
    /// `send_window`.
    pub send_window: u32,
    /// `max_handshakes`.
    pub max_handshakes: usize,
    /// `address_validation = "always"`.
    pub always_retry: bool,
    /// `max_field_section_size`.
    pub max_field_section_size: u64,
    /// `alt_svc_max_age`.
    pub alt_svc_max_age: Duration,
}

impl Http3Config {
    /// The `[http3]` table; `None` when off. `tls`: `tls_listen` is set.
    pub(super) fn validate(&self, tls: bool, e: &mut Vec<ConfigError>) -> Option<Http3Settings> {
        let h = self;
        // QUIC's varint limit is 2^62; quinn's windows are u32 here.
        let window_max = u64::from(u32::MAX);
        let settings = Http3Settings {
            max_concurrent_streams: range(
                "http3.max_concurrent_streams",
                h.max_concurrent_streams,
                1,
                10_000,
                e,
            ) as u32,
            idle_timeout: positive_dur("http3.idle_timeout", &h.idle_timeout, e),
            stream_window: range("http3.stream_window", h.stream_window, 16384, window_max, e)
                as u32,
            connection_window: range(
                "http3.connection_window",
                h.connection_window,
                16384,
                window_max,
                e,
            ) as u32,
            send_window: range("http3.send_window", h.send_window, 16384, window_max, e) as u32,
            max_handshakes: range("http3.max_handshakes", h.max_handshakes, 1, 1_000_000, e),
            always_retry: match h.address_validation.as_str() {
                "auto" => false,
                "always" => true,
                o => {
                    e.push(err(
                        "http3.address_validation",
                        format!("`{o}` is not one of auto, always"),
                    ));
                    false
                }
            },
            max_field_section_size: range(
                "http3.max_field_section_size",
                h.max_field_section_size,
                1024,
                1 << 20,
                e,
            ) as u64,
            alt_svc_max_age: super::values::dur("http3.alt_svc_max_age", &h.alt_svc_max_age, e),
        };
        if !h.enabled {
            return None;
        }
        if !tls {
            e.push(err(
                "http3.enabled",
                "needs tls_listen: HTTP/3 runs on its port (UDP) with its certificate",
            ));
        }
        Some(settings)
    }
}

impl Http3Settings {
    /// Whether a client at an address QUIC has not validated is sent a
    /// Retry, with `handshakes` in progress: a spoofed source then costs
    /// one packet and no state, and never takes a slot.
    pub fn retry(&self, handshakes: usize, per_client_limit: bool) -> bool {
        self.always_retry || per_client_limit || handshakes >= self.max_handshakes.div_ceil(4)
    }

    /// The QUIC transport of every connection.
    pub fn transport(&self) -> std::io::Result<quinn::TransportConfig> {
        let mut transport = quinn::TransportConfig::default();
        transport
            .max_concurrent_bidi_streams(self.max_concurrent_streams.into())
            // HTTP/3 needs three from the client (control, QPACK encoder and
            // decoder); a few more for extensions it may open.
            .max_concurrent_uni_streams(8u32.into())
            .max_idle_timeout(Some(
                quinn::IdleTimeout::try_from(self.idle_timeout).map_err(std::io::Error::other)?,
            ))
            .stream_receive_window(self.stream_window.into())
            .receive_window(self.connection_window.into())
            .send_window(u64::from(self.send_window));
        Ok(transport)
    }
}

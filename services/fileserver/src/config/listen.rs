//! Where clients come from: `listen`, `admin_listen`, `workers` (each
//! accepts on every listener), `trusted_proxies` and `proxy_protocol`
//! (top-level keys; the HTTPS listener is `tls.rs`'s).

use super::restart::Restart;
use super::values::{addr, positive_dur, range};
use super::{err, ConfigError};
use crate::http::forwarded::IpNet;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

/// The listener keys of the top table.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(default)]
pub struct ListenConfig {
    /// HTTP listener addresses: one, or several separated by commas (in a
    /// file, also a TOML array).
    pub listen: String,
    /// Admin listener (metrics, health).
    pub admin_listen: String,
    /// Worker threads; 0 = one per CPU.
    pub workers: u64,
    /// Peers (addresses or CIDR blocks) whose `Forwarded` / `X-Forwarded-For`
    /// name the client in the access log.
    pub trusted_proxies: Vec<String>,
    /// Peers (addresses or CIDR blocks) that put a PROXY protocol header
    /// (v1 or v2) before each connection on the TCP listeners; empty: off.
    pub proxy_protocol: Vec<String>,
    /// Time such a peer has to send the whole header.
    pub proxy_protocol_timeout: String,
}

/// The default `listen` port; another one moves the admin port along.
pub(super) const DEFAULT_PORT: u16 = 8080;

impl Default for ListenConfig {
    fn default() -> Self {
        ListenConfig {
            listen: format!("127.0.0.1:{DEFAULT_PORT}"),
            admin_listen: "127.0.0.1:8081".into(),
            workers: 0,
            trusted_proxies: Vec::new(),
            proxy_protocol: Vec::new(),
            proxy_protocol_timeout: "5s".into(),
        }
    }
}

/// Sockets are bound, and workers spawned, once.
pub(super) const RESTART: &[Restart] = &[
    Restart::key("listen"),
    Restart::key("admin_listen"),
    Restart::key("workers"),
];

impl ListenConfig {
    /// `listen` (its first address, then any others) and `admin_listen`.
    pub(super) fn addrs(
        &self,
        e: &mut Vec<ConfigError>,
    ) -> (SocketAddr, Vec<SocketAddr>, SocketAddr) {
        let mut all = self
            .listen
            .split(',')
            .map(|a| addr("listen", a, e))
            .collect::<Vec<_>>()
            .into_iter();
        let first = all
            .next()
            .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)));
        let more: Vec<SocketAddr> = all.collect();
        for (i, a) in more.iter().enumerate() {
            if *a == first || more[..i].contains(a) {
                e.push(err("listen", format!("{a} is named twice")));
            }
        }
        (first, more, addr("admin_listen", &self.admin_listen, e))
    }

    /// `workers`, 0 read as one per CPU.
    pub(super) fn workers(&self, e: &mut Vec<ConfigError>) -> usize {
        match range("workers", self.workers, 0, 1024, e) {
            0 => std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            n => n,
        }
    }

    /// `trusted_proxies`.
    pub(super) fn trusted_proxies(&self, e: &mut Vec<ConfigError>) -> Vec<IpNet> {
        nets("trusted_proxies", &self.trusted_proxies, e)
    }

    /// `proxy_protocol` and its timeout.
    pub(super) fn proxy_protocol(&self, e: &mut Vec<ConfigError>) -> ProxyProtocol {
        ProxyProtocol {
            from: nets("proxy_protocol", &self.proxy_protocol, e),
            timeout: positive_dur("proxy_protocol_timeout", &self.proxy_protocol_timeout, e),
        }
    }
}

/// Who may put a PROXY protocol header before a connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyProtocol {
    /// `proxy_protocol`: a connection from one of these must start with
    /// the header; from anyone else none is read.
    pub from: Vec<IpNet>,
    /// `proxy_protocol_timeout`.
    pub timeout: std::time::Duration,
}

fn nets(key: &str, list: &[String], e: &mut Vec<ConfigError>) -> Vec<IpNet> {
    list.iter()
        .filter_map(|p| IpNet::parse(p).map_err(|m| e.push(err(key, m))).ok())
        .collect()
}

/// The admin port `-p PORT` implies: the next one (`0` stays `0`, any free
/// port); `None` for 65535.
pub fn admin_port_for(port: u16) -> Option<u16> {
    if port == 0 {
        Some(0)
    } else {
        port.checked_add(1)
    }
}

/// `listen` with its port replaced (`host:8080` -> `host:PORT`, `8080` ->
/// `:PORT`).
pub(super) fn with_port(listen: &str, port: u16) -> String {
    let host = match listen.rsplit_once(':') {
        Some((host, _)) if !listen.ends_with(']') => host,
        _ if listen.bytes().all(|b| b.is_ascii_digit()) => "",
        _ => listen,
    };
    format!("{host}:{port}")
}

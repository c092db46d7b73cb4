//! Where clients come from: `listen`, `admin_listen`, `workers` (each
//! accepts on every listener) and `trusted_proxies` (top-level keys; the
//! HTTPS listener is `tls.rs`'s).

use super::restart::Restart;
use super::values::{addr, range};
use super::{err, ConfigError};
use crate::http::forwarded::IpNet;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

/// The listener keys of the top table.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(default)]
pub struct ListenConfig {
    /// Main HTTP listener address.
    pub listen: String,
    /// Admin listener (metrics, health).
    pub admin_listen: String,
    /// Worker threads; 0 = one per CPU.
    pub workers: u64,
    /// Peers (addresses or CIDR blocks) whose `Forwarded` / `X-Forwarded-For`
    /// name the client in the access log.
    pub trusted_proxies: Vec<String>,
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
    /// `listen` and `admin_listen`.
    pub(super) fn addrs(&self, e: &mut Vec<ConfigError>) -> (SocketAddr, SocketAddr) {
        (
            addr("listen", &self.listen, e),
            addr("admin_listen", &self.admin_listen, e),
        )
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
        self.trusted_proxies
            .iter()
            .filter_map(|p| {
                IpNet::parse(p)
                    .map_err(|m| e.push(err("trusted_proxies", m)))
                    .ok()
            })
            .collect()
    }
}

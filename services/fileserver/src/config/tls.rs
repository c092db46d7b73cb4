//! The HTTPS listener: `tls_listen`, `tls_cert`, `tls_key`,
//! `tls_handshake_timeout` (top-level keys). The files are read, and
//! checked against each other, by `crate::tls` at start and each reload.

use super::restart::Restart;
use super::values::{addr, positive_dur};
use super::{err, ConfigError};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The TLS keys of the top table.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(default)]
pub struct TlsConfig {
    /// HTTPS listener addresses (ALPN h2 and http/1.1): one, or several
    /// separated by commas (in a file, also a TOML array); "" = none.
    pub tls_listen: String,
    /// PEM certificate chain for `tls_listen`, leaf first.
    pub tls_cert: String,
    /// PEM private key for `tls_cert` (PKCS#8, PKCS#1 or SEC1).
    pub tls_key: String,
    /// Time a client has to complete the TLS handshake.
    pub tls_handshake_timeout: String,
    /// Session-ticket keys shared by replicas ("" = this process's own).
    pub tls_ticket_keys: String,
}

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig {
            tls_listen: String::new(),
            tls_cert: String::new(),
            tls_key: String::new(),
            tls_handshake_timeout: "10s".into(),
            tls_ticket_keys: String::new(),
        }
    }
}

/// The listener is bound once; while it stays, its certificate and key
/// are read again at each reload. A listener added, moved or removed
/// keeps the one that started, with its files.
///
/// The ticketer is built with the listener; its key file is read again
/// at each reload (and when it changes), but another file needs a restart.
pub(super) const RESTART: &[Restart] = &[
    Restart {
        key: "tls_listen",
        keeps: &["tls_listen", "tls_cert", "tls_key"],
    },
    Restart::key("tls_ticket_keys"),
];

/// The HTTPS listener: where, with which certificate, and how long a
/// handshake may take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsSettings {
    /// `tls_listen`'s first address.
    pub listen: SocketAddr,
    /// `tls_listen`'s other addresses, each served alike (with HTTP/3 on
    /// each, when it is on).
    pub listen_more: Vec<SocketAddr>,
    /// `tls_cert` and `tls_key`: the certificate for names `[acme]` does
    /// not cover (all names without `[acme]`).
    pub manual: Option<CertFiles>,
    /// `tls_handshake_timeout`.
    pub handshake_timeout: Duration,
    /// `tls_ticket_keys`.
    pub ticket_keys: Option<PathBuf>,
}

/// A PEM certificate chain and its key, as files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertFiles {
    /// The chain, leaf first.
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
}

impl TlsConfig {
    /// All of listen, cert and key, or none of them; with `[acme]`
    /// (`acme`), listen alone (cert and key then serve the names ACME
    /// does not).
    pub(super) fn validate(&self, acme: bool, e: &mut Vec<ConfigError>) -> Option<TlsSettings> {
        let handshake_timeout =
            positive_dur("tls_handshake_timeout", &self.tls_handshake_timeout, e);
        let set = [
            ("tls_listen", &self.tls_listen),
            ("tls_cert", &self.tls_cert),
            ("tls_key", &self.tls_key),
        ];
        if set.iter().all(|(_, v)| v.is_empty()) {
            return None;
        }
        let pair_optional = acme && self.tls_cert.is_empty() && self.tls_key.is_empty();
        for (key, v) in set {
            if v.is_empty() && !(pair_optional && key != "tls_listen") {
                e.push(err(
                    key,
                    if acme {
                        "must be set: tls_cert and tls_key go together, and [acme] needs tls_listen"
                    } else {
                        "must be set: tls_listen, tls_cert and tls_key go together"
                    },
                ));
            }
        }
        if self.tls_listen.is_empty() {
            return None;
        }
        let mut all: Vec<SocketAddr> = Vec::new();
        for a in self.tls_listen.split(',') {
            let a = addr("tls_listen", a.trim(), e);
            if all.contains(&a) {
                e.push(err("tls_listen", format!("{a} is named twice")));
            }
            all.push(a);
        }
        Some(TlsSettings {
            listen: all[0],
            listen_more: all[1..].to_vec(),
            manual: (!self.tls_cert.is_empty() && !self.tls_key.is_empty()).then(|| CertFiles {
                cert: PathBuf::from(&self.tls_cert),
                key: PathBuf::from(&self.tls_key),
            }),
            handshake_timeout,
            ticket_keys: (!self.tls_ticket_keys.is_empty())
                .then(|| PathBuf::from(&self.tls_ticket_keys)),
        })
    }
}

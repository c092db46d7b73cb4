//! Configuration: one set of keys shared by the TOML file, the environment
//! (`FILESERVER_<KEY>`) and the command line, merged with the precedence
//! flags > env > file > built-in defaults.
//!
//! ```text
//!   Config::default() --serialize--> toml table            (keys.rs)
//!        ^ overlay file keys (unknown key / wrong type -> ConfigError{key})
//!        ^ overlay FILESERVER_<KEY> (string converted to the default's type)
//!        ^ overlay --flags                                  (sources.rs)
//!   --deserialize--> Config (raw) --settle--> Settings (typed, checked)
//!   SIGHUP: the restart keys back as started, then settle   (reload.rs)
//! ```
//!
//! One file per concern, each holding its raw keys (a struct flattened
//! into the top table, or a `[table]`), their defaults, their checks, the
//! typed settings or library object they make, and which of them wait for
//! a restart (`RESTART`): `files`, `listen`, `logging`, `limits`, `serve`,
//! `tls`, `sites`, `cache`, `http2`, `http3`, `compression`, `acme`.
//! Shared readings (durations, ranges, addresses) are in `values`.
//!
//! Every error carries the key it is about so `fileserver check-config` can
//! explain all of them at once instead of stopping at the first.

mod acme;
mod cache;
mod compression;
mod files;
mod http2;
mod http3;
mod keys;
mod limits;
mod listen;
mod logging;
mod reload;
mod restart;
mod serve;
mod sites;
mod sources;
mod tls;
mod values;

pub use acme::{AcmeChallenge, AcmeConfig, AcmeSettings, LETS_ENCRYPT};
pub use cache::CacheConfig;
pub use compression::{CompressionConfig, LevelsConfig};
pub use files::{BackendKind, FilesConfig, SymlinkPolicy};
pub use http2::{Http2Config, Http2Settings};
pub use http3::{Http3Config, Http3Settings};
pub use keys::{all_keys, env_name, table_fields, unknown_env};
pub use limits::{Limits, LimitsConfig};
pub use listen::{admin_port_for, ListenConfig, Owner, ProxyProtocol, UnixSockets};
pub use logging::{check_log_level, AccessLog, AccessLogFormat, LogConfig, LogFormat};
pub use reload::{reload, restart_keys, Reloaded};
pub use restart::Restart;
pub use serve::ServeConfig;
pub use sites::{Site, SiteConfig, SitesConfig};
pub use sources::{check_file, load, parse_file_text, Sources};
pub use tls::{CertFiles, TlsConfig, TlsSettings};
pub use values::{parse_duration, parse_listen};

use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// The raw configuration, exactly the keys of `config/fileserver.toml`:
/// the top table's keys by concern, then its tables.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(default)]
pub struct Config {
    /// `root`, `symlinks`, `io_backend`, the descriptor budget.
    #[serde(flatten)]
    pub files: FilesConfig,
    /// `listen`, `admin_listen`, `workers`, `trusted_proxies`.
    #[serde(flatten)]
    pub net: ListenConfig,
    /// The daemon's log and the access log.
    #[serde(flatten)]
    pub log: LogConfig,
    /// Index, listing, dotfiles, Cache-Control, ranges, precompressed.
    #[serde(flatten)]
    pub serve: ServeConfig,
    /// Header bounds, timeouts, `max_connections`.
    #[serde(flatten)]
    pub limits: LimitsConfig,
    /// The HTTPS listener.
    #[serde(flatten)]
    pub tls: TlsConfig,
    /// `[[rules]]`, `[[sites]]` and the one-liners.
    #[serde(flatten)]
    pub sites: SitesConfig,
    /// Path cache.
    pub cache: CacheConfig,
    /// HTTP/2 bounds.
    pub http2: Http2Config,
    /// HTTP/3 (QUIC).
    pub http3: Http3Config,
    /// On-the-fly compression.
    pub compression: CompressionConfig,
    /// Certificates from an ACME CA (`[acme]`; absent = none).
    pub acme: Option<AcmeConfig>,
}

/// One problem with one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// Dotted key (`cache.max_entries`); empty for a problem of the whole
    /// file (not valid TOML), whose message says where it is.
    pub key: String,
    /// What is wrong and what is expected.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            return f.write_str(&self.message);
        }
        write!(f, "key `{}`: {}", self.key, self.message)
    }
}

fn err(key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        key: key.to_string(),
        message: message.into(),
    }
}

/// Validated, typed configuration.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The default site's directory.
    pub root: PathBuf,
    /// `spa`: the default site falls back to its `/index.html`.
    pub spa: bool,
    /// The HTTP listener (the first TCP address of `listen`; none when it
    /// names only Unix domain sockets).
    pub listen: Option<std::net::SocketAddr>,
    /// `listen`'s other TCP addresses, each served alike.
    pub listen_more: Vec<std::net::SocketAddr>,
    /// `listen`'s Unix domain sockets.
    pub listen_unix: UnixSockets,
    /// The admin listener.
    pub admin_listen: std::net::SocketAddr,
    /// Worker threads (0 read as one per CPU).
    pub workers: usize,
    /// The file manager's I/O backend.
    pub io_backend: BackendKind,
    /// The daemon's log filter.
    pub log_level: String,
    /// The daemon's log format.
    pub log_format: LogFormat,
    /// Where the access log goes.
    pub access_log: AccessLog,
    /// Its line format.
    pub access_log_format: AccessLogFormat,
    /// Which symbolic links are followed.
    pub symlinks: SymlinkPolicy,
    /// How files are answered: index, listing, dotfiles, cache policy,
    /// ranges, precompressed siblings, compression, the default site's rules.
    pub serve: decide::Options,
    /// Virtual hosts, each its own root and rules.
    pub sites: Vec<Site>,
    /// Peers whose forwarding headers name the client.
    pub trusted_proxies: Vec<crate::http::forwarded::IpNet>,
    /// Peers that send a PROXY protocol header first.
    pub proxy_protocol: ProxyProtocol,
    /// Header bounds, timeouts, `max_connections`.
    pub limits: Limits,
    /// Time allowed for responses in flight at SIGTERM/SIGINT.
    pub shutdown_timeout: Duration,
    /// Descriptors the file manager may hold (`None`: from RLIMIT_NOFILE).
    pub fd_budget: Option<usize>,
    /// Descriptors kept free for sockets.
    pub fd_headroom: usize,
    /// Opens found in the dentry cache are made inline.
    pub inline_opens: bool,
    /// The HTTPS listener.
    pub tls: Option<TlsSettings>,
    /// `[acme]`: certificates obtained and renewed for `tls`.
    pub acme: Option<AcmeSettings>,
    /// The path cache's own configuration (`[cache]`; `shards` is
    /// `workers`, `variant_budget` is `compression.budget` or 0).
    pub cache: pathcache::Config,
    /// `cache.watch`: the change watcher (filemanager's `watch_changes`).
    pub watch_changes: bool,
    /// `[http2]`.
    pub http2: Http2Settings,
    /// `[http3]` when enabled.
    pub http3: Option<Http3Settings>,
}

impl Config {
    /// Checks every key and converts to typed settings; reports all problems.
    pub fn validate(&self) -> Result<Settings, Vec<ConfigError>> {
        match self.settle() {
            (settings, e) if e.is_empty() => Ok(settings),
            (_, e) => Err(e),
        }
    }

    /// The settings, with a key's default wherever its value is wrong,
    /// and every problem found: `check-config` goes on to check what a
    /// start would open with them, in the same run.
    fn settle(&self) -> (Settings, Vec<ConfigError>) {
        let mut e = Vec::new();
        let l = self.net.addrs(&mut e);
        let (listen, listen_more, listen_unix, admin_listen) = (l.first, l.more, l.unix, l.admin);
        if listen.is_none() && listen_unix.paths.is_empty() {
            e.push(err("listen", "names no address"));
        }
        let root = self.files.root(&mut e);
        let workers = self.net.workers(&mut e);
        let io_backend = self.files.io_backend(&mut e);
        let log_level = self.log.log_level(&mut e);
        let access_log = self.log.access_log(&mut e);
        let access_log_format = self.log.access_log_format(&mut e);
        let log_format = self.log.log_format(&mut e);
        let symlinks = self.files.symlinks(&mut e);
        let limits = self.limits.validate(&mut e);
        let shutdown_timeout = self.limits.shutdown_timeout(&mut e);
        let tls = self.tls.validate(self.acme.is_some(), &mut e);
        let https = !self.tls.tls_listen.is_empty();
        let acme = acme::validate(self.acme.as_ref(), &self.sites.sites, https, &mut e);
        let http2 = self.http2.validate(&limits, &mut e);
        let http3 = self.http3.validate(https, &mut e);
        let compression = self.compression.validate(&mut e);
        let variant_budget = if compression.is_some() {
            self.compression.budget
        } else {
            0
        };
        let cache = self.cache.validate(workers, variant_budget, &mut e);
        let tls_listen = &self.tls.tls_listen;
        let rules = self
            .sites
            .rules(&self.sites.rules, "rules", tls_listen, &mut e);
        let serve = self.serve.validate(compression, rules, &mut e);
        let settings = Settings {
            root,
            spa: self.sites.spa,
            listen,
            listen_more,
            listen_unix,
            admin_listen,
            workers,
            io_backend,
            log_level,
            log_format,
            access_log,
            access_log_format,
            symlinks,
            sites: self.sites.sites(&serve, tls_listen, &mut e),
            serve,
            trusted_proxies: self.net.trusted_proxies(&mut e),
            proxy_protocol: self.net.proxy_protocol(&mut e),
            limits,
            shutdown_timeout,
            fd_budget: self.files.fd_budget(),
            fd_headroom: self.files.fd_headroom as usize,
            inline_opens: self.files.inline_opens,
            tls,
            acme,
            cache,
            watch_changes: self.cache.watch,
            http2,
            http3,
        };
        (settings, e)
    }
}

#[cfg(test)]
mod tests;

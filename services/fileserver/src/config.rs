//! Configuration: one set of keys shared by the TOML file, the environment
//! (`FILESERVER_<KEY>`) and the command line, merged with the precedence
//! flags > env > file > built-in defaults.
//!
//! ```text
//!   Config::default() --serialize--> toml table
//!        ^ overlay file keys (unknown key / wrong type -> ConfigError{key})
//!        ^ overlay FILESERVER_<KEY> (string converted to the default's type)
//!        ^ overlay --flags
//!   --deserialize--> Config (raw) --validate--> Settings (typed, checked)
//! ```
//!
//! Every error carries the key it is about so `fileserver check-config` can
//! explain all of them at once instead of stopping at the first.

use decide::CompressionOptions;
pub use filemanager::{BackendKind, SymlinkPolicy};
use httpfile::mime::ContentCoding;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Path-cache keys (`[cache]` table).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    /// Most paths kept in the cache.
    pub max_entries: u64,
    /// Most open descriptors the cache keeps.
    pub max_open: u64,
    /// How long an entry is trusted before it is re-stat'ed.
    pub valid: String,
    /// How long "not found" / "forbidden" answers, and a directory's list of
    /// precompressed siblings, are trusted.
    pub negative_ttl: String,
    /// Files up to this many bytes are kept in memory (0 disables).
    pub small_file_max: u64,
    /// Total bytes of small files kept in memory.
    pub small_bytes_budget: u64,
    /// Uses of a path before its descriptor is kept open.
    pub min_uses: u64,
    /// Watch the directories of cached paths for changes (inotify): a change
    /// drops the cached answers it affects at once.
    pub watch: bool,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            max_entries: 65536,
            max_open: 32768,
            valid: "1s".into(),
            negative_ttl: "1s".into(),
            small_file_max: 16384,
            small_bytes_budget: 16 << 20,
            min_uses: 1,
            watch: true,
        }
    }
}

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
    /// Flow-control window of each request stream, bytes.
    pub stream_window: u64,
    /// Flow-control window of the connection, bytes.
    pub connection_window: u64,
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
            stream_window: 1 << 20,
            connection_window: 4 << 20,
            max_field_section_size: 16384,
            alt_svc_max_age: "24h".into(),
        }
    }
}

/// Typed `[http3]` (see [`Http3Config`]); `None` in `Settings` when off.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct Http3Settings {
    pub max_concurrent_streams: u32,
    pub idle_timeout: Duration,
    pub stream_window: u32,
    pub connection_window: u32,
    pub max_field_section_size: u64,
    pub alt_svc_max_age: Duration,
}

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
            send_budget_per_connection: 512 << 10,
            send_budget: 16 << 20,
            control_frame_budget: 1000,
            max_requests_per_connection: 0,
            max_connection_age: "1h".into(),
        }
    }
}

/// Compression levels by coding (`[compression.levels]`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct LevelsConfig {
    /// Brotli quality, 0-11.
    pub br: u64,
    /// Zstandard level, 1-22.
    pub zstd: u64,
    /// gzip level, 1-9.
    pub gzip: u64,
}

impl Default for LevelsConfig {
    fn default() -> Self {
        let level = |c| decide::codec(c).default_level() as u64;
        LevelsConfig {
            br: level(ContentCoding::Br),
            zstd: level(ContentCoding::Zstd),
            gzip: level(ContentCoding::Gzip),
        }
    }
}

/// On-the-fly compression keys (`[compression]` table).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct CompressionConfig {
    /// Compress files of `types` once and keep the results.
    pub enabled: bool,
    /// Media types compressed (`type/subtype` or `type/*`).
    pub types: Vec<String>,
    /// Codings made, in the server's order of preference.
    pub codings: Vec<String>,
    /// Larger files are sent as they are.
    pub max_file_size: u64,
    /// Total bytes of compressed variants kept.
    pub budget: u64,
    /// Level per coding.
    pub levels: LevelsConfig,
}

impl Default for CompressionConfig {
    fn default() -> Self {
        let o = CompressionOptions::default();
        CompressionConfig {
            enabled: false,
            types: o.types,
            codings: o.codings.iter().map(|c| c.token().to_string()).collect(),
            max_file_size: o.max_file_size,
            budget: pathcache::Config::default().variant_budget,
            levels: LevelsConfig::default(),
        }
    }
}

/// One `[[sites]]` table: a virtual host.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct SiteConfig {
    /// The names it answers for (`example.com`, `*.example.com`).
    pub hosts: Vec<String>,
    /// Its directory.
    pub root: PathBuf,
    /// Its rules (`[[sites.rules]]`), before the one-liners every site
    /// shares (`https_redirect`, `headers`, `cors`, `spa`).
    pub rules: Vec<siterules::RuleSpec>,
    /// Obtain a certificate for its `hosts` through `[acme]` (one
    /// certificate per site; wildcard names cannot be).
    pub acme: bool,
}

/// `[acme]`: certificates for the HTTPS listener from an ACME CA
/// (RFC 8555), renewed before they expire. Setting it up agrees to the
/// CA's terms of service.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct AcmeConfig {
    /// Names of one certificate for the default site (`[[sites]]` with
    /// `acme = true` get one each).
    pub domains: Vec<String>,
    /// Contact address given to the CA (`mailto:`); "" = none.
    pub email: String,
    /// The CA's directory URL.
    pub directory: String,
    /// Account, certificates and the lock; replicas may share it.
    pub state_dir: PathBuf,
    /// `tls-alpn-01` (on `tls_listen`) or `http-01` (on `listen`).
    pub challenge: String,
    /// PEM root the CA's own HTTPS is checked against ("" = the system's).
    pub ca_root: String,
    /// Renew this long before expiry ("" = a third of the lifetime).
    pub renew_before: String,
    /// First wait after a failed order; it doubles up to a day.
    pub retry_after: String,
}

/// Let's Encrypt's production directory, `[acme].directory`'s default.
pub const LETS_ENCRYPT: &str = "https://acme-v02.api.letsencrypt.org/directory";

impl Default for AcmeConfig {
    fn default() -> Self {
        AcmeConfig {
            domains: Vec::new(),
            email: String::new(),
            directory: LETS_ENCRYPT.into(),
            state_dir: PathBuf::from("/var/lib/fileserver/acme"),
            challenge: "tls-alpn-01".into(),
            ca_root: String::new(),
            renew_before: String::new(),
            retry_after: "1m".into(),
        }
    }
}

/// The raw configuration, exactly the keys of `config/fileserver.toml`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Directory served.
    pub root: PathBuf,
    /// Main HTTP listener address.
    pub listen: String,
    /// Admin listener (metrics, health).
    pub admin_listen: String,
    /// Worker threads; 0 = one per CPU.
    pub workers: u64,
    /// `auto`, `uring` or `blocking`.
    pub io_backend: String,
    /// `error`, `warn`, `info`, `debug`, `trace` or a tracing filter.
    pub log_level: String,
    /// The daemon's own log on stderr: `text` or `json`.
    pub log_format: String,
    /// `off`, `stdout` or a file path.
    pub access_log: String,
    /// `combined` or `json`.
    pub access_log_format: String,
    /// `deny`, `within_root` or `follow`.
    pub symlinks: String,
    /// Index files tried for a directory, in order.
    pub index: Vec<String>,
    /// Peers (addresses or CIDR blocks) whose `Forwarded` / `X-Forwarded-For`
    /// name the client in the access log.
    pub trusted_proxies: Vec<String>,
    /// Generate listings for directories without an index.
    pub directory_listing: bool,
    /// Entries shown in one listing at most; more are cut with a note.
    pub listing_max_entries: u64,
    /// Serve files and directories whose name starts with a dot.
    pub serve_dotfiles: bool,
    /// Serve `.br`/`.zst`/`.gz` siblings by `Accept-Encoding`.
    pub precompressed: bool,
    /// Value of the `Cache-Control` header; empty = none.
    pub cache_control: String,
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
    /// Byte ranges per request at most; more get the full body.
    pub max_ranges: u64,
    /// Kernel descriptors the file manager may hold; 0 = derive from RLIMIT_NOFILE.
    pub fd_budget: u64,
    /// Descriptors kept free for sockets.
    pub fd_headroom: u64,
    /// Open paths found in the dentry cache inline on the worker
    /// (`openat2` with `RESOLVE_CACHED`) before handing the open to the I/O
    /// backend; off for roots whose `open` may block (NFS, FUSE).
    pub inline_opens: bool,
    /// HTTPS listener (ALPN h2 and http/1.1); "" = none.
    pub tls_listen: String,
    /// PEM certificate chain for `tls_listen`, leaf first.
    pub tls_cert: String,
    /// PEM private key for `tls_cert` (PKCS#8, PKCS#1 or SEC1).
    pub tls_key: String,
    /// Time a client has to complete the TLS handshake.
    pub tls_handshake_timeout: String,
    /// Redirect plain-HTTP requests to HTTPS (308, to `tls_listen`'s port).
    pub https_redirect: bool,
    /// A single-page app: what is not found is answered with `/index.html`.
    pub spa: bool,
    /// `Name: value` fields set on every response.
    pub headers: Vec<String>,
    /// Origins allowed cross-origin requests to every path (`*`: any).
    pub cors: Vec<String>,
    /// Per-path rules of the default site, in order (`[[rules]]`).
    pub rules: Vec<siterules::RuleSpec>,
    /// Virtual hosts: sites with their own root, chosen by `Host`
    /// (`[[sites]]`); a request for any other name gets the default site.
    pub sites: Vec<SiteConfig>,
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

impl Default for Config {
    fn default() -> Self {
        Config {
            root: PathBuf::from("."),
            listen: "127.0.0.1:8080".into(),
            admin_listen: "127.0.0.1:8081".into(),
            workers: 0,
            io_backend: "auto".into(),
            log_level: "info".into(),
            log_format: "text".into(),
            access_log: "off".into(),
            access_log_format: "combined".into(),
            symlinks: "within_root".into(),
            index: vec!["index.html".into()],
            trusted_proxies: Vec::new(),
            directory_listing: false,
            listing_max_entries: 10_000,
            serve_dotfiles: false,
            precompressed: true,
            cache_control: "no-cache".into(),
            max_header_bytes: 8192,
            max_headers: 100,
            header_read_timeout: "10s".into(),
            keepalive_timeout: "60s".into(),
            send_timeout: "60s".into(),
            shutdown_timeout: "30s".into(),
            max_connections: 10000,
            max_ranges: 16,
            fd_budget: 0,
            fd_headroom: 256,
            inline_opens: true,
            tls_listen: String::new(),
            tls_cert: String::new(),
            tls_key: String::new(),
            tls_handshake_timeout: "10s".into(),
            https_redirect: false,
            spa: false,
            headers: Vec::new(),
            cors: Vec::new(),
            rules: Vec::new(),
            sites: Vec::new(),
            cache: CacheConfig::default(),
            http2: Http2Config::default(),
            http3: Http3Config::default(),
            compression: CompressionConfig::default(),
            acme: None,
        }
    }
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

/// Where the access log goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AccessLog {
    /// No access log.
    Off,
    /// Standard output.
    Stdout,
    /// Appended to a file.
    File(PathBuf),
}

/// Access log line format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessLogFormat {
    /// NCSA combined (nginx's `combined`).
    Combined,
    /// The `Host` asked for, then the combined line (Apache's and
    /// GoAccess's `vhost_combined`, the host without its `:port` split).
    VhostCombined,
    /// One JSON object per line.
    Json,
}

/// Format of the daemon's own log (stderr).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines (colour only on a terminal).
    Text,
    /// One JSON object per event (tracing's JSON formatter).
    Json,
}

/// The HTTPS listener: where, with which certificate, and how long a
/// handshake may take.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct TlsSettings {
    pub listen: SocketAddr,
    /// `tls_cert` and `tls_key`: the certificate for names `[acme]` does
    /// not cover (all names without `[acme]`).
    pub manual: Option<CertFiles>,
    pub handshake_timeout: Duration,
}

/// A PEM certificate chain and its key, as files.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// How the CA checks that a name is ours.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcmeChallenge {
    /// A handshake on `tls_listen` offering ALPN `acme-tls/1` (RFC 8737).
    TlsAlpn01,
    /// `GET /.well-known/acme-challenge/TOKEN` on `listen` (port 80).
    Http01,
}

impl AcmeChallenge {
    /// The RFC's name.
    pub fn as_str(self) -> &'static str {
        match self {
            AcmeChallenge::TlsAlpn01 => "tls-alpn-01",
            AcmeChallenge::Http01 => "http-01",
        }
    }
}

/// Typed `[acme]` (see [`AcmeConfig`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct AcmeSettings {
    /// The certificates to keep, each the names it covers (first: the
    /// default site's `domains`, then each `[[sites]]` with `acme`).
    pub certificates: Vec<Vec<String>>,
    /// `mailto:` + `email`.
    pub contact: Option<String>,
    pub directory: String,
    pub state_dir: PathBuf,
    pub challenge: AcmeChallenge,
    pub ca_root: Option<PathBuf>,
    /// `None`: a third of each certificate's lifetime.
    pub renew_before: Option<Duration>,
    pub retry_after: Duration,
}

/// Typed `[http2]` settings (see [`Http2Config`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct Http2Settings {
    pub h2c: bool,
    pub max_concurrent_streams: u32,
    pub max_header_list_size: u32,
    pub initial_stream_window: u32,
    pub initial_connection_window: u32,
    pub max_pending_reset_streams: usize,
    pub max_local_error_resets: usize,
    pub max_send_buffer: usize,
    pub send_budget_per_connection: u32,
    pub send_budget: u32,
    pub control_frame_budget: u32,
    pub max_requests_per_connection: u32,
    pub max_connection_age: Duration,
}

/// Connection and request limits (reloadable).
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct Limits {
    pub max_header_bytes: usize,
    pub max_headers: usize,
    pub header_read_timeout: Duration,
    pub keepalive_timeout: Duration,
    pub send_timeout: Duration,
    pub max_connections: usize,
}

/// Validated, typed configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct Settings {
    pub root: PathBuf,
    /// `spa`: the default site falls back to its `/index.html`.
    pub spa: bool,
    pub listen: SocketAddr,
    pub admin_listen: SocketAddr,
    pub workers: usize,
    pub io_backend: BackendKind,
    pub log_level: String,
    pub log_format: LogFormat,
    pub access_log: AccessLog,
    pub access_log_format: AccessLogFormat,
    pub symlinks: SymlinkPolicy,
    /// How files are answered: index, listing, dotfiles, cache policy,
    /// ranges, precompressed siblings, compression, the default site's rules.
    pub serve: decide::Options,
    /// Virtual hosts, each its own root and rules.
    pub sites: Vec<Site>,
    pub trusted_proxies: Vec<crate::http::forwarded::IpNet>,
    pub limits: Limits,
    pub shutdown_timeout: Duration,
    pub fd_budget: Option<usize>,
    pub fd_headroom: usize,
    pub inline_opens: bool,
    pub tls: Option<TlsSettings>,
    /// `[acme]`: certificates obtained and renewed for `tls`.
    pub acme: Option<AcmeSettings>,
    /// The path cache's own configuration (`[cache]`; `shards` is
    /// `workers`, `variant_budget` is `compression.budget` or 0).
    pub cache: pathcache::Config,
    /// `cache.watch`: the change watcher (filemanager's `watch_changes`).
    pub watch_changes: bool,
    pub http2: Http2Settings,
    /// `[http3]` when enabled.
    pub http3: Option<Http3Settings>,
}

/// A virtual host: the names it answers for, its root, and how its files
/// are answered (the top-level options with its own rules).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    /// The names.
    pub hosts: Vec<siterules::HostPattern>,
    /// Its directory.
    pub root: PathBuf,
    /// Its serving options.
    pub serve: decide::Options,
}

impl Settings {
    /// The site a request for `host` (`Host` or `:authority`, port and
    /// all) goes to: an exact name first, then the first wildcard; `None`
    /// is the default site (`root`).
    pub fn site_for(&self, host: Option<&[u8]>) -> Option<usize> {
        if self.sites.is_empty() {
            return None;
        }
        let name = siterules::hostname(host?);
        let exact = |p: &siterules::HostPattern| {
            matches!(p, siterules::HostPattern::Exact(_)) && p.matches(name)
        };
        self.sites
            .iter()
            .position(|s| s.hosts.iter().any(exact))
            .or_else(|| {
                self.sites
                    .iter()
                    .position(|s| s.hosts.iter().any(|p| p.matches(name)))
            })
    }
}

/// Parses `10s`, `500ms`, `2m`, `1h`, `0.5s` (a bare number is seconds)
/// and humantime's compound forms (`1m30s`, `1h 15m`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if let Ok(d) = simple_duration(s) {
        return Ok(d);
    }
    match humantime::parse_duration(s) {
        Ok(d) if d.as_secs() <= 1_000_000_000 => Ok(d),
        Ok(_) => Err(format!("`{s}` is out of range")),
        Err(_) => simple_duration(s),
    }
}

fn simple_duration(s: &str) -> Result<Duration, String> {
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a duration (examples: 500ms, 10s, 2m, 1m30s)"))?;
    let secs = match unit.trim() {
        "ms" => n / 1000.0,
        "" | "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        other => {
            return Err(format!(
                "unknown duration unit `{other}` in `{s}` (use ms, s, m or h)"
            ))
        }
    };
    if !secs.is_finite() || secs > 1e9 {
        return Err(format!("`{s}` is out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

fn type_name(v: &toml::Value) -> &'static str {
    v.type_str()
}

fn defaults_table() -> toml::Table {
    match toml::Value::try_from(Config::default()) {
        Ok(toml::Value::Table(t)) => t,
        _ => unreachable!("Config serializes to a table"),
    }
}

/// Overlays `src` onto `dst` (which holds the defaults and so every known
/// key), reporting unknown keys and type mismatches.
fn overlay(dst: &mut toml::Table, src: toml::Table, prefix: &str, errors: &mut Vec<ConfigError>) {
    for (k, v) in src {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        if key == "acme" && !dst.contains_key(&k) {
            // Absent by default (no ACME): its keys are checked against
            // [acme]'s defaults once the table is given.
            match v {
                toml::Value::Table(given) => {
                    let mut table = match toml::Value::try_from(AcmeConfig::default()) {
                        Ok(toml::Value::Table(t)) => t,
                        _ => unreachable!("AcmeConfig serializes to a table"),
                    };
                    overlay(&mut table, given, &key, errors);
                    dst.insert(k, toml::Value::Table(table));
                }
                _ => errors.push(err(&key, "expected a table: write it as [acme]")),
            }
            continue;
        }
        let Some(slot) = dst.get_mut(&k) else {
            errors.push(err(&key, unknown_key_message(&k, dst.keys())));
            continue;
        };
        match (slot, v) {
            (toml::Value::Table(d), toml::Value::Table(s)) => overlay(d, s, &key, errors),
            (slot, toml::Value::Array(items)) if key == "rules" || key == "sites" => {
                overlay_tables(&key, slot, items, errors)
            }
            (slot, v) => {
                if std::mem::discriminant(slot) != std::mem::discriminant(&v) {
                    errors.push(err(
                        &key,
                        format!(
                            "expected {}, found {} `{}`",
                            type_name(slot),
                            type_name(&v),
                            v
                        ),
                    ));
                } else if let toml::Value::Integer(i) = v {
                    if i < 0 {
                        errors.push(err(&key, format!("must not be negative, found {i}")));
                    } else {
                        *slot = v;
                    }
                } else if let toml::Value::Array(items) = &v {
                    if items.iter().any(|i| !i.is_str()) {
                        errors.push(err(&key, "expected an array of strings"));
                    } else {
                        *slot = v;
                    }
                } else {
                    *slot = v;
                }
            }
        }
    }
}

/// `[[rules]]` and `[[sites]]`: each table is read as a rule or a site
/// (unknown fields and wrong types are reported with its position, counted
/// from 1); what the values mean is checked in `validate`. A rule that
/// cannot be read is kept as an empty one, so that `validate` still checks
/// the others, under the same positions, in the same run.
fn overlay_tables(
    name: &str,
    slot: &mut toml::Value,
    mut items: Vec<toml::Value>,
    errors: &mut Vec<ConfigError>,
) {
    use serde::Deserialize;
    let mut ok = true;
    for (i, item) in items.iter_mut().enumerate() {
        let key = format!("{name}[{}]", i + 1);
        let read = match name {
            "rules" => siterules::RuleSpec::deserialize(item.clone()).map(drop),
            _ => SiteConfig::deserialize(item.clone()).map(drop),
        };
        if !item.is_table() {
            errors.push(err(
                &key,
                format!("expected a table: write each as [[{name}]]"),
            ));
            ok = false;
        } else if let Err(e) = read {
            errors.push(err(&key, e.to_string().trim().replace('\n', " ")));
            if name == "rules" {
                *item = toml::Value::Table(toml::Table::new());
            } else {
                ok = false;
            }
        }
    }
    if ok {
        *slot = toml::Value::Array(items);
    }
}

/// "unknown key", with the closest known key when one is near (an edit
/// distance of at most a third of the name), else the list of keys there.
fn unknown_key_message<'k>(name: &str, known: impl Iterator<Item = &'k String>) -> String {
    let known: Vec<&str> = known.map(String::as_str).collect();
    let closest = known
        .iter()
        .map(|k| (edit_distance(name, k), *k))
        .min()
        .filter(|(d, _)| *d <= name.len().max(3) / 3);
    match closest {
        Some((_, k)) => format!("unknown key (did you mean `{k}`?)"),
        None => format!("unknown key (known keys here: {})", known.join(", ")),
    }
}

/// Levenshtein distance (names are short; quadratic is fine).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Every leaf key of the defaults, dotted (`cache.max_entries`).
pub fn all_keys() -> Vec<String> {
    fn walk(t: &toml::Table, prefix: &str, out: &mut Vec<String>) {
        for (k, v) in t {
            let key = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            match v {
                toml::Value::Table(sub) => walk(sub, &key, out),
                // `[[rules]]` are tables in a file, not a value a flag or
                // variable sets.
                _ if key == "rules" || key == "sites" => {}
                _ => out.push(key),
            }
        }
    }
    let mut out = Vec::new();
    walk(&defaults_table(), "", &mut out);
    out
}

/// The fields of the tables a config file alone sets (`[acme]`, and each
/// `[[rules]]` and `[[sites]]` as `rules[].path`), with their defaults,
/// read from the types the parser fills: a field added there is listed
/// (and `fileserver keys` must then find its meaning).
pub fn table_fields() -> Vec<(String, toml::Value)> {
    fn fields<T: Serialize>(value: &T, prefix: &str, out: &mut Vec<(String, toml::Value)>) {
        if let Ok(toml::Value::Table(t)) = toml::Value::try_from(value) {
            for (k, v) in t {
                out.push((format!("{prefix}.{k}"), v));
            }
        }
    }
    let mut out = Vec::new();
    fields(&AcmeConfig::default(), "acme", &mut out);
    fields(&siterules::RuleSpec::default(), "rules[]", &mut out);
    fields(
        &siterules::BasicAuthSpec::default(),
        "rules[].basic_auth",
        &mut out,
    );
    fields(&siterules::CorsSpec::default(), "rules[].cors", &mut out);
    fields(&SiteConfig::default(), "sites[]", &mut out);
    out
}

/// `cache.max_entries` -> `FILESERVER_CACHE_MAX_ENTRIES`.
pub fn env_name(key: &str) -> String {
    format!("FILESERVER_{}", key.replace('.', "_").to_ascii_uppercase())
}

/// Sets one key from a string (env var or flag), converting to the key's type.
fn set_from_str(
    table: &mut toml::Table,
    key: &str,
    value: &str,
    origin: &str,
    errors: &mut Vec<ConfigError>,
) {
    let mut parts: Vec<&str> = key.split('.').collect();
    let leaf = parts.pop().unwrap_or_default();
    let mut t = table;
    for p in parts {
        match t.get_mut(p) {
            Some(toml::Value::Table(sub)) => t = sub,
            _ => {
                errors.push(err(key, format!("unknown key (from {origin})")));
                return;
            }
        }
    }
    if !t.contains_key(leaf) {
        let hint = unknown_key_message(leaf, t.keys());
        errors.push(err(key, format!("{hint} (from {origin})")));
        return;
    }
    let Some(slot) = t.get_mut(leaf) else {
        return;
    };
    let new = match slot {
        toml::Value::Integer(_) => match value.trim().parse::<u64>() {
            Ok(n) if n <= i64::MAX as u64 => toml::Value::Integer(n as i64),
            _ => {
                errors.push(err(
                    key,
                    format!("expected a non-negative integer, found `{value}` (from {origin})"),
                ));
                return;
            }
        },
        toml::Value::Boolean(_) => match value.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => toml::Value::Boolean(true),
            "false" | "0" | "no" | "off" => toml::Value::Boolean(false),
            _ => {
                errors.push(err(
                    key,
                    format!("expected true or false, found `{value}` (from {origin})"),
                ));
                return;
            }
        },
        // A header's value may hold commas: `headers` are one per line.
        toml::Value::Array(_) if key == "headers" => toml::Value::Array(
            value
                .lines()
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| toml::Value::String(s.to_string()))
                .collect(),
        ),
        toml::Value::Array(_) if key == "rules" || key == "sites" => {
            errors.push(err(
                key,
                format!("{key} are written in a config file's [[{key}]] tables (from {origin})"),
            ));
            return;
        }
        toml::Value::Array(_) => toml::Value::Array(
            value
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| toml::Value::String(s.to_string()))
                .collect(),
        ),
        _ => toml::Value::String(value.to_string()),
    };
    *slot = new;
}

/// Where a configuration comes from.
#[derive(Clone, Debug, Default)]
pub struct Sources {
    /// Config file, if any.
    pub file: Option<PathBuf>,
    /// `(KEY, value)` environment pairs (only `FILESERVER_*` matter).
    pub env: Vec<(String, String)>,
    /// `(dotted key, value)` from command-line flags.
    pub flags: Vec<(String, String)>,
    /// `--port`: replaces the port of `listen` from every other source.
    pub port: Option<u16>,
}

impl Sources {
    /// The process environment's `FILESERVER_*` variables.
    pub fn process_env() -> Vec<(String, String)> {
        std::env::vars()
            .filter(|(k, _)| k.starts_with("FILESERVER_"))
            .collect()
    }
}

/// Parses the text of a config file over the defaults (no env, no flags).
pub fn parse_file_text(text: &str) -> Result<Config, Vec<ConfigError>> {
    let mut errors = Vec::new();
    let mut table = defaults_table();
    match text.parse::<toml::Table>() {
        Ok(file) => overlay(&mut table, file, "", &mut errors),
        Err(e) => errors.push(err("", format!("not valid TOML: {}", e.to_string().trim()))),
    }
    match finish(table, errors) {
        (Some((c, _)), errors) if errors.is_empty() => Ok(c),
        (_, errors) => Err(errors),
    }
}

/// Converts the merged table and validates every value, so one run reports
/// every problem: unknown keys and type mismatches found while merging (their
/// keys keep the default) together with the values `validate` rejects.
fn finish(table: toml::Table, mut errors: Vec<ConfigError>) -> Checked {
    let config: Config = match toml::Value::Table(table).try_into() {
        Ok(c) => c,
        Err(e) => {
            errors.push(err("", e.to_string()));
            return (None, errors);
        }
    };
    let (settings, more) = config.settle();
    errors.extend(more);
    (Some((config, settings)), errors)
}

/// A config as read: what it makes (wrong values at their keys'
/// defaults), and every problem found.
type Checked = (Option<(Config, Settings)>, Vec<ConfigError>);

/// Loads and validates a configuration from all sources.
pub fn load(sources: &Sources) -> Result<(Config, Settings), Vec<ConfigError>> {
    match read_sources(sources) {
        (Some(loaded), errors) if errors.is_empty() => Ok(loaded),
        (_, errors) => Err(errors),
    }
}

fn read_sources(sources: &Sources) -> Checked {
    let mut errors = Vec::new();
    let mut table = defaults_table();
    let mut admin_in_file = false;
    if let Some(path) = &sources.file {
        match std::fs::read_to_string(path) {
            Ok(text) => match text.parse::<toml::Table>() {
                Ok(file) => {
                    admin_in_file = file.contains_key("admin_listen");
                    overlay(&mut table, file, "", &mut errors)
                }
                Err(e) => errors.push(err(
                    "",
                    format!(
                        "{} is not valid TOML: {}",
                        path.display(),
                        e.to_string().trim()
                    ),
                )),
            },
            Err(e) => errors.push(err(
                "config",
                format!("cannot read {}: {e}", path.display()),
            )),
        }
    }
    let admin_set = admin_in_file
        || sources
            .env
            .iter()
            .any(|(k, _)| k == &env_name("admin_listen"))
        || sources.flags.iter().any(|(k, _)| k == "admin_listen");
    let keys = all_keys();
    for (name, value) in &sources.env {
        if name == "FILESERVER_CONFIG" {
            continue;
        }
        if let Some(key) = keys.iter().find(|k| &env_name(k) == name) {
            set_from_str(&mut table, key, value, &format!("env {name}"), &mut errors);
        }
    }
    for (key, value) in &sources.flags {
        set_from_str(&mut table, key, value, "command line", &mut errors);
    }
    if let (Some(port), Some(toml::Value::String(listen))) = (sources.port, table.get("listen")) {
        let listen = with_port(listen, port);
        table.insert("listen".into(), toml::Value::String(listen));
    }
    // A listen port chosen anywhere (`-p 9000`, `--listen :9000`, the
    // file, the environment) moves the admin port along, one above (8080
    // and 8081 by default), unless admin_listen is set: a second instance
    // should not collide on it.
    // The port alone: `listen` is resolved once, in `validate`.
    let moved = match table.get("listen") {
        Some(toml::Value::String(l)) => l.rsplit(':').next().and_then(|p| p.trim().parse().ok()),
        _ => None,
    }
    .filter(|&p: &u16| p != DEFAULT_PORT);
    if let (Some(port), false) = (moved, admin_set) {
        if let Some(toml::Value::String(admin)) = table.get("admin_listen") {
            match admin_port_for(port) {
                Some(p) => {
                    let admin = with_port(admin, p);
                    table.insert("admin_listen".into(), toml::Value::String(admin));
                }
                None => errors.push(err(
                    "admin_listen",
                    "listen port 65535 leaves no port above it for the admin listener: set admin_listen",
                )),
            }
        }
    }
    finish(table, errors)
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

/// Environment variables named `FILESERVER_*` that match no key (reported as warnings).
pub fn unknown_env(env: &[(String, String)]) -> Vec<String> {
    let keys: Vec<String> = all_keys().iter().map(|k| env_name(k)).collect();
    env.iter()
        .map(|(k, _)| k)
        .filter(|k| k.as_str() != "FILESERVER_CONFIG" && !keys.contains(k))
        .cloned()
        .collect()
}

/// The default `listen` port; another one moves the admin port along.
const DEFAULT_PORT: u16 = 8080;

/// `listen` with its port replaced (`host:8080` -> `host:PORT`, `8080` ->
/// `:PORT`).
fn with_port(listen: &str, port: u16) -> String {
    let host = match listen.rsplit_once(':') {
        Some((host, _)) if !listen.ends_with(']') => host,
        _ if listen.bytes().all(|b| b.is_ascii_digit()) => "",
        _ => listen,
    };
    format!("{host}:{port}")
}

/// Parses a listen address: `host:port` (a name is resolved; the first
/// address wins), `[v6]:port`, `:PORT` for every IPv4 interface (as
/// Caddy's and Go's `:8080` mean), or a bare `PORT` on 127.0.0.1, as
/// `-p PORT` and the default are: a port alone never opens the server to
/// the network.
pub fn parse_listen(v: &str) -> Result<SocketAddr, String> {
    let v = v.trim();
    if let Ok(a) = v.parse::<SocketAddr>() {
        return Ok(a);
    }
    let (port_only, every_interface) = match v.strip_prefix(':') {
        Some(p) => (p, true),
        None => (v, false),
    };
    if !port_only.is_empty() && port_only.bytes().all(|b| b.is_ascii_digit()) {
        let host = if every_interface {
            [0, 0, 0, 0]
        } else {
            [127, 0, 0, 1]
        };
        return port_only
            .parse::<u16>()
            .map(|p| SocketAddr::from((host, p)))
            .map_err(|_| format!("`{v}`: port out of range (0-65535)"));
    }
    let forms = "use host:port, [v6]:port, :port or port";
    let Some((host, port)) = v.rsplit_once(':') else {
        return Err(format!("`{v}` has no port ({forms})"));
    };
    let port: u16 = port
        .parse()
        .map_err(|_| format!("`{v}`: `{port}` is not a port ({forms})"))?;
    use std::net::ToSocketAddrs;
    match (host, port).to_socket_addrs() {
        Ok(mut addrs) => addrs
            .next()
            .ok_or_else(|| format!("`{host}` resolves to no address")),
        Err(e) => Err(format!("cannot resolve `{host}`: {e} ({forms})")),
    }
}

/// The levels `log_level` takes alone or after `target=`.
const LOG_LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];

/// Checks a `log_level`: a level, or a tracing filter whose directives each
/// end in a level (`info,fileserver=debug`). tracing reads a bare unknown
/// word (`warning`, `verbose`) as a target name, which silences every line
/// of the daemon's own; that is refused here with the nearest level.
pub fn check_log_level(v: &str) -> Result<(), String> {
    let levels = "error, warn, info, debug, trace, off, or target=level directives";
    if v.trim().is_empty() {
        return Err(format!("must not be empty (use {levels})"));
    }
    for directive in v.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let level = match directive.rsplit_once('=') {
            Some((_, level)) => level,
            // `target[span]` or `target` alone means "every level of that
            // target" to tracing; a word that is not a level is a typo far
            // more often than a target name.
            None => directive,
        };
        if !LOG_LEVELS
            .iter()
            .any(|l| l.eq_ignore_ascii_case(level.trim()))
        {
            let hint = match level.to_ascii_lowercase().as_str() {
                "warning" | "warnings" => Some("warn"),
                "verbose" | "debugging" | "all" => Some("debug"),
                "err" | "errors" | "critical" | "crit" | "fatal" | "panic" => Some("error"),
                "information" | "notice" | "normal" | "default" => Some("info"),
                "quiet" | "silent" | "none" => Some("off"),
                l => LOG_LEVELS
                    .iter()
                    .map(|k| (edit_distance(l, k), *k))
                    .min()
                    .filter(|(d, _)| *d <= 2)
                    .map(|(_, k)| k),
            };
            let hint = hint.map_or(String::new(), |h| format!(" (did you mean `{h}`?)"));
            return Err(format!(
                "`{level}` in `{v}` is not a log level{hint}; use {levels}"
            ));
        }
    }
    tracing_subscriber::EnvFilter::try_new(v)
        .map(|_| ())
        .map_err(|e| format!("`{v}` is not a tracing filter: {e}"))
}

/// Why a CA could not validate `name` by http-01 or tls-alpn-01, if so.
fn acme_name_problem(name: &str) -> Option<&'static str> {
    if name.starts_with("*.") || name.contains('*') {
        return Some("is a wildcard: only dns-01 proves those, and this server answers http-01 and tls-alpn-01");
    }
    if name.parse::<std::net::IpAddr>().is_ok() {
        return Some("is an address: ACME certificates here are for DNS names");
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    if name.len() > 253 || !name.contains('.') || !name.split('.').all(label_ok) {
        return Some("is not a fully qualified DNS name");
    }
    None
}

fn parse_addr(key: &str, v: &str, errors: &mut Vec<ConfigError>) -> SocketAddr {
    parse_listen(v).unwrap_or_else(|e| {
        errors.push(err(key, e));
        SocketAddr::from(([127, 0, 0, 1], 0))
    })
}

fn dur(key: &str, v: &str, errors: &mut Vec<ConfigError>) -> Duration {
    parse_duration(v).unwrap_or_else(|e| {
        errors.push(err(key, e));
        Duration::ZERO
    })
}

fn range(key: &str, v: u64, lo: u64, hi: u64, errors: &mut Vec<ConfigError>) -> usize {
    if v < lo || v > hi {
        errors.push(err(key, format!("{v} is out of range {lo}..={hi}")));
    }
    v as usize
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
        let listen = parse_addr("listen", &self.listen, &mut e);
        let admin_listen = parse_addr("admin_listen", &self.admin_listen, &mut e);
        if self.root.as_os_str().is_empty() {
            e.push(err("root", "must not be empty"));
        }
        let workers = range("workers", self.workers, 0, 1024, &mut e);
        let workers = if workers == 0 {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        } else {
            workers
        };
        let io_backend = self.io_backend.parse().unwrap_or_else(|_| {
            e.push(err(
                "io_backend",
                format!(
                    "`{}` is not one of auto, uring, blocking, portable",
                    self.io_backend
                ),
            ));
            BackendKind::Auto
        });
        if let Err(m) = check_log_level(&self.log_level) {
            e.push(err("log_level", m));
        }
        let access_log = match self.access_log.as_str() {
            "off" => AccessLog::Off,
            "stdout" | "-" => AccessLog::Stdout,
            "" => {
                e.push(err("access_log", "must be off, stdout or a file path"));
                AccessLog::Off
            }
            p => AccessLog::File(PathBuf::from(p)),
        };
        let access_log_format = match self.access_log_format.as_str() {
            "combined" => AccessLogFormat::Combined,
            "vhost_combined" => AccessLogFormat::VhostCombined,
            "json" => AccessLogFormat::Json,
            o => {
                e.push(err(
                    "access_log_format",
                    format!("`{o}` is not one of combined, vhost_combined, json"),
                ));
                AccessLogFormat::Combined
            }
        };
        let log_format = match self.log_format.as_str() {
            "text" => LogFormat::Text,
            "json" => LogFormat::Json,
            o => {
                e.push(err("log_format", format!("`{o}` is not one of text, json")));
                LogFormat::Text
            }
        };
        let symlinks = self.symlinks.parse().unwrap_or_else(|_| {
            e.push(err(
                "symlinks",
                format!(
                    "`{}` is not one of deny, within_root, follow",
                    self.symlinks
                ),
            ));
            SymlinkPolicy::WithinRoot
        });
        let limits = self.limits(&mut e);
        let shutdown_timeout = dur("shutdown_timeout", &self.shutdown_timeout, &mut e);
        let tls = self.tls_settings(&mut e);
        let acme = self.acme_settings(&mut e);
        let http2 = self.http2.validate(&mut e);
        let http3 = self.http3.validate(!self.tls_listen.is_empty(), &mut e);
        let compression = self.compression.validate(&mut e);
        let variant_budget = if compression.is_some() {
            self.compression.budget
        } else {
            0
        };
        let cache = self.cache.validate(workers, variant_budget, &mut e);
        let serve = self.serve_options(compression, &mut e);
        let settings = Settings {
            root: self.root.clone(),
            spa: self.spa,
            listen,
            admin_listen,
            workers,
            io_backend,
            log_level: self.log_level.clone(),
            log_format,
            access_log,
            access_log_format,
            symlinks,
            sites: self.sites(&serve, &mut e),
            serve,
            trusted_proxies: self
                .trusted_proxies
                .iter()
                .filter_map(|p| {
                    crate::http::forwarded::IpNet::parse(p)
                        .map_err(|m| e.push(err("trusted_proxies", m)))
                        .ok()
                })
                .collect(),
            limits,
            shutdown_timeout,
            fd_budget: (self.fd_budget > 0).then_some(self.fd_budget as usize),
            fd_headroom: self.fd_headroom as usize,
            inline_opens: self.inline_opens,
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

impl Config {
    /// The `tls_*` keys: all of listen, cert and key, or none of them;
    /// with `[acme]`, listen alone (cert and key then serve the names ACME
    /// does not). The files themselves are read (and checked against each
    /// other) when the listener starts and at each reload.
    fn tls_settings(&self, e: &mut Vec<ConfigError>) -> Option<TlsSettings> {
        let handshake_timeout = dur("tls_handshake_timeout", &self.tls_handshake_timeout, e);
        if handshake_timeout.is_zero() && !e.iter().any(|x| x.key == "tls_handshake_timeout") {
            e.push(err("tls_handshake_timeout", "must be greater than zero"));
        }
        let set = [
            ("tls_listen", &self.tls_listen),
            ("tls_cert", &self.tls_cert),
            ("tls_key", &self.tls_key),
        ];
        if set.iter().all(|(_, v)| v.is_empty()) {
            return None;
        }
        let pair_optional =
            self.acme.is_some() && self.tls_cert.is_empty() && self.tls_key.is_empty();
        for (key, v) in set {
            if v.is_empty() && !(pair_optional && key != "tls_listen") {
                e.push(err(
                    key,
                    if self.acme.is_some() {
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
        Some(TlsSettings {
            listen: parse_addr("tls_listen", &self.tls_listen, e),
            manual: (!self.tls_cert.is_empty() && !self.tls_key.is_empty()).then(|| CertFiles {
                cert: PathBuf::from(&self.tls_cert),
                key: PathBuf::from(&self.tls_key),
            }),
            handshake_timeout,
        })
    }

    /// `[acme]` and the sites with `acme = true`: which certificates, from
    /// where, proven how. Each name must be one a CA can validate by
    /// http-01 or tls-alpn-01 (a DNS name, no wildcard) and belong to one
    /// certificate only.
    fn acme_settings(&self, e: &mut Vec<ConfigError>) -> Option<AcmeSettings> {
        let Some(a) = &self.acme else {
            for (i, site) in self.sites.iter().enumerate() {
                if site.acme {
                    e.push(err(
                        &format!("sites[{}].acme", i + 1),
                        "needs an [acme] table (state_dir, email, the CA)",
                    ));
                }
            }
            return None;
        };
        if self.tls_listen.is_empty() {
            e.push(err(
                "acme",
                "needs tls_listen: the certificates are for the HTTPS listener",
            ));
        }
        let mut seen: Vec<String> = Vec::new();
        let mut names = |key: &str, list: &[String], e: &mut Vec<ConfigError>| {
            let mut out = Vec::new();
            for name in list {
                let name = name.trim_end_matches('.').to_ascii_lowercase();
                if let Some(why) = acme_name_problem(&name) {
                    e.push(err(key, format!("`{name}` {why}")));
                } else if seen.contains(&name) {
                    e.push(err(
                        key,
                        format!("`{name}` is named twice: one certificate per name"),
                    ));
                } else {
                    seen.push(name.clone());
                    out.push(name);
                }
            }
            out
        };
        let mut certificates = Vec::new();
        let domains = names("acme.domains", &a.domains, e);
        if !domains.is_empty() {
            certificates.push(domains);
        }
        for (i, site) in self.sites.iter().enumerate() {
            if site.acme {
                let key = format!("sites[{}].hosts", i + 1);
                let hosts = names(&key, &site.hosts, e);
                if !hosts.is_empty() {
                    certificates.push(hosts);
                }
            }
        }
        if certificates.is_empty()
            && !e
                .iter()
                .any(|x| x.key.starts_with("acme") || x.key.starts_with("sites"))
        {
            e.push(err(
                "acme.domains",
                "names no domain: list the names, or set `acme = true` on a [[sites]] table",
            ));
        }
        let challenge = match a.challenge.as_str() {
            "tls-alpn-01" => AcmeChallenge::TlsAlpn01,
            "http-01" => AcmeChallenge::Http01,
            o => {
                e.push(err(
                    "acme.challenge",
                    format!("`{o}` is not one of tls-alpn-01, http-01"),
                ));
                AcmeChallenge::TlsAlpn01
            }
        };
        if !a.directory.starts_with("https://") {
            e.push(err(
                "acme.directory",
                format!("`{}` is not an https:// URL", a.directory),
            ));
        }
        if a.state_dir.as_os_str().is_empty() {
            e.push(err(
                "acme.state_dir",
                "must be set: where the account and certificates are kept",
            ));
        }
        if !a.email.is_empty() && (!a.email.contains('@') || a.email.contains(char::is_whitespace))
        {
            e.push(err(
                "acme.email",
                format!("`{}` is not an email address", a.email),
            ));
        }
        let renew_before =
            (!a.renew_before.is_empty()).then(|| dur("acme.renew_before", &a.renew_before, e));
        let retry_after = dur("acme.retry_after", &a.retry_after, e);
        if retry_after.is_zero() && !e.iter().any(|x| x.key == "acme.retry_after") {
            e.push(err("acme.retry_after", "must be greater than zero"));
        }
        Some(AcmeSettings {
            certificates,
            contact: (!a.email.is_empty()).then(|| format!("mailto:{}", a.email)),
            directory: a.directory.clone(),
            state_dir: a.state_dir.clone(),
            challenge,
            ca_root: (!a.ca_root.is_empty()).then(|| PathBuf::from(&a.ca_root)),
            renew_before,
            retry_after,
        })
    }
}

impl Config {
    /// The `[limits]`-level keys of the top table: header and connection
    /// bounds and timeouts.
    fn limits(&self, e: &mut Vec<ConfigError>) -> Limits {
        let limits = Limits {
            max_header_bytes: range("max_header_bytes", self.max_header_bytes, 256, 1 << 20, e),
            max_headers: range("max_headers", self.max_headers, 4, 10_000, e),
            header_read_timeout: dur("header_read_timeout", &self.header_read_timeout, e),
            keepalive_timeout: dur("keepalive_timeout", &self.keepalive_timeout, e),
            send_timeout: dur("send_timeout", &self.send_timeout, e),
            max_connections: range("max_connections", self.max_connections, 1, 10_000_000, e),
        };
        for (k, d) in [
            ("header_read_timeout", limits.header_read_timeout),
            ("keepalive_timeout", limits.keepalive_timeout),
            ("send_timeout", limits.send_timeout),
        ] {
            if d.is_zero() && !e.iter().any(|x| x.key == k) {
                e.push(err(k, "must be greater than zero"));
            }
        }
        limits
    }

    /// The serving keys of the top table (index, listing, dotfiles,
    /// Cache-Control, ranges, precompressed) with `compression`: the
    /// options every listener decides with.
    fn serve_options(
        &self,
        compression: Option<CompressionOptions>,
        e: &mut Vec<ConfigError>,
    ) -> decide::Options {
        for name in &self.index {
            if name.is_empty()
                || name.contains('/')
                || name == ".."
                || name == "."
                || name.contains('\0')
            {
                e.push(err("index", format!("`{name}` must be a plain file name")));
            }
        }
        if self
            .cache_control
            .bytes()
            .any(|b| b == b'\r' || b == b'\n' || (b < 0x20 && b != b'\t'))
        {
            e.push(err("cache_control", "must not contain control characters"));
        }
        let rules = self.site_rules(&self.rules, "rules", e);
        decide::Options {
            rules: std::sync::Arc::new(rules),
            index: self.index.clone(),
            listing: self.directory_listing,
            listing_max_entries: range(
                "listing_max_entries",
                self.listing_max_entries,
                1,
                10_000_000,
                e,
            ),
            dotfiles: self.serve_dotfiles,
            cache_control: Some(self.cache_control.clone()).filter(|c| !c.is_empty()),
            max_ranges: range("max_ranges", self.max_ranges, 1, 1000, e),
            precompressed: self.precompressed,
            compression,
            redirect_base: String::new(),
        }
    }
}

impl Config {
    /// The site's rules: the `[[rules]]` in order (so a rule's position is
    /// the same in every message), then `https_redirect`, `headers`, `cors`
    /// and `spa`: every path's one-liners, after which a `[[rules]]`
    /// table's redirect, `try_files` or `cors` for a path comes first, and
    /// a `headers` line sets its field last.
    fn site_rules(
        &self,
        rules: &[siterules::RuleSpec],
        key: &str,
        e: &mut Vec<ConfigError>,
    ) -> siterules::Rules {
        use siterules::{CorsSpec, RuleSpec, Rules};
        let mut specs = rules.to_vec();
        if let Err(errors) = Rules::compile(rules) {
            // The others are still built, each in its place, so that what
            // they name (an error page) is checked in the same run.
            for x in errors {
                e.push(err(&format!("{key}[{}].{}", x.rule, x.field), x.message));
                if let Some(spec) = specs.get_mut(x.rule.wrapping_sub(1)) {
                    *spec = RuleSpec::default();
                }
            }
        }
        let one_liner =
            |key: &str, spec: RuleSpec, specs: &mut Vec<RuleSpec>, e: &mut Vec<ConfigError>| {
                match Rules::compile(std::slice::from_ref(&spec)) {
                    Ok(_) => specs.push(spec),
                    Err(errors) => {
                        for x in errors {
                            e.push(err(key, x.message));
                        }
                    }
                }
            };
        if self.https_redirect {
            let port = self
                .tls_listen
                .rsplit_once(':')
                .and_then(|(_, p)| p.parse::<u16>().ok());
            let target = match port {
                None | Some(0) => {
                    e.push(err(
                        "https_redirect",
                        "needs tls_listen with a fixed port: where would it redirect to?",
                    ));
                    String::new()
                }
                Some(443) => "https://{hostname}{uri}".to_string(),
                Some(p) => format!("https://{{hostname}}:{p}{{uri}}"),
            };
            specs.push(RuleSpec {
                scheme: "http".into(),
                redirect: target,
                status: 308,
                ..RuleSpec::default()
            });
        }
        if !self.headers.is_empty() {
            // "On every response": errors too, as HSTS must be.
            let mut spec = RuleSpec {
                always: true,
                ..RuleSpec::default()
            };
            for line in &self.headers {
                match line.split_once(':') {
                    Some((name, value)) => {
                        spec.headers
                            .insert(name.trim().to_string(), value.trim().to_string());
                    }
                    None => e.push(err("headers", format!("`{line}` is not `Name: value`"))),
                }
            }
            one_liner("headers", spec, &mut specs, e);
        }
        if !self.cors.is_empty() {
            let cors = CorsSpec {
                origins: self.cors.clone(),
                ..CorsSpec::default()
            };
            let spec = RuleSpec {
                cors: Some(cors),
                ..RuleSpec::default()
            };
            one_liner("cors", spec, &mut specs, e);
        }
        if self.spa {
            let spa = RuleSpec {
                methods: vec!["GET".into(), "HEAD".into()],
                navigation_only: true,
                try_files: vec!["{path}".into(), "/index.html".into()],
                ..RuleSpec::default()
            };
            one_liner("spa", spa, &mut specs, e);
        }
        Rules::compile(&specs).unwrap_or_default()
    }
}

impl Config {
    /// The `[[sites]]`: each the default site's serving options with its
    /// own rules. A name may belong to one site only.
    fn sites(&self, default: &decide::Options, e: &mut Vec<ConfigError>) -> Vec<Site> {
        let mut seen: Vec<(siterules::HostPattern, usize)> = Vec::new();
        let mut out = Vec::new();
        for (i, site) in self.sites.iter().enumerate() {
            let n = i + 1;
            let key = |field: &str| format!("sites[{n}].{field}");
            if site.hosts.is_empty() {
                e.push(err(
                    &key("hosts"),
                    "names no host: which requests is this site for?",
                ));
            }
            if site.root.as_os_str().is_empty() {
                e.push(err(&key("root"), "must be set: the site's directory"));
            }
            let mut hosts = Vec::new();
            for h in &site.hosts {
                match siterules::HostPattern::parse(h) {
                    Ok(p) => {
                        if let Some((_, other)) = seen.iter().find(|(q, _)| *q == p) {
                            e.push(err(
                                &key("hosts"),
                                format!("`{h}` is also a name of sites[{other}]"),
                            ));
                        }
                        seen.push((p.clone(), n));
                        hosts.push(p);
                    }
                    Err(m) => e.push(err(&key("hosts"), m)),
                }
            }
            let mut serve = default.clone();
            // The one-liners' problems are reported once, by the default site.
            let mut problems = Vec::new();
            let prefix = format!("sites[{n}].rules");
            let rules = self.site_rules(&site.rules, &prefix, &mut problems);
            e.extend(problems.into_iter().filter(|p| p.key.starts_with(&prefix)));
            serve.rules = std::sync::Arc::new(rules);
            out.push(Site {
                hosts,
                root: site.root.clone(),
                serve,
            });
        }
        out
    }
}

impl CacheConfig {
    /// The `[cache]` table as the path cache's configuration, with one
    /// shard per worker and `variant_budget` bytes of compressed variants.
    fn validate(
        &self,
        shards: usize,
        variant_budget: u64,
        e: &mut Vec<ConfigError>,
    ) -> pathcache::Config {
        let c = self;
        if c.small_file_max > 1 << 30 {
            e.push(err("cache.small_file_max", "must be at most 1 GiB"));
        }
        pathcache::Config {
            shards: shards.max(1),
            max_entries: range("cache.max_entries", c.max_entries, 1, 1 << 32, e),
            max_open: range("cache.max_open", c.max_open, 0, 1 << 32, e),
            valid: dur("cache.valid", &c.valid, e),
            negative_ttl: dur("cache.negative_ttl", &c.negative_ttl, e),
            small_file_max: c.small_file_max,
            small_bytes_budget: c.small_bytes_budget,
            min_uses: range("cache.min_uses", c.min_uses, 0, u32::MAX as u64, e) as u32,
            variant_budget,
        }
    }
}

impl Http3Config {
    /// The `[http3]` table; `None` when off. `tls`: `tls_listen` is set.
    fn validate(&self, tls: bool, e: &mut Vec<ConfigError>) -> Option<Http3Settings> {
        let h = self;
        let idle_timeout = dur("http3.idle_timeout", &h.idle_timeout, e);
        let alt_svc_max_age = dur("http3.alt_svc_max_age", &h.alt_svc_max_age, e);
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
            idle_timeout,
            stream_window: range("http3.stream_window", h.stream_window, 16384, window_max, e)
                as u32,
            connection_window: range(
                "http3.connection_window",
                h.connection_window,
                16384,
                window_max,
                e,
            ) as u32,
            max_field_section_size: range(
                "http3.max_field_section_size",
                h.max_field_section_size,
                1024,
                1 << 20,
                e,
            ) as u64,
            alt_svc_max_age,
        };
        if idle_timeout.is_zero() && !e.iter().any(|x| x.key == "http3.idle_timeout") {
            e.push(err("http3.idle_timeout", "must be greater than zero"));
        }
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

impl Http2Config {
    /// The `[http2]` table.
    fn validate(&self, e: &mut Vec<ConfigError>) -> Http2Settings {
        let h = self;
        // 2^31 - 1 is the largest window HTTP/2 allows (RFC 9113 6.9.1).
        let window_max = (1 << 31) - 1;
        Http2Settings {
            h2c: h.h2c,
            // Held answers cost memory and a walk per round each: nginx's
            // 128 is the default, 1000 the most.
            max_concurrent_streams: range(
                "http2.max_concurrent_streams",
                h.max_concurrent_streams,
                1,
                1000,
                e,
            ) as u32,
            max_header_list_size: range(
                "http2.max_header_list_size",
                h.max_header_list_size,
                1024,
                1 << 20,
                e,
            ) as u32,
            initial_stream_window: range(
                "http2.initial_stream_window",
                h.initial_stream_window,
                65535,
                window_max,
                e,
            ) as u32,
            initial_connection_window: range(
                "http2.initial_connection_window",
                h.initial_connection_window,
                65535,
                window_max,
                e,
            ) as u32,
            max_pending_reset_streams: range(
                "http2.max_pending_reset_streams",
                h.max_pending_reset_streams,
                1,
                10_000,
                e,
            ),
            max_local_error_resets: range(
                "http2.max_local_error_resets",
                h.max_local_error_resets,
                1,
                100_000,
                e,
            ),
            max_send_buffer: range(
                "http2.max_send_buffer",
                h.max_send_buffer,
                16 << 10,
                16 << 20,
                e,
            ),
            // At least one 16 KiB read, so a stream can always send; at
            // most 1 GiB (tokio's semaphore counts in u32 and below
            // `usize::MAX >> 3`).
            send_budget_per_connection: range(
                "http2.send_budget_per_connection",
                h.send_budget_per_connection,
                16 << 10,
                1 << 30,
                e,
            ) as u32,
            send_budget: range("http2.send_budget", h.send_budget, 16 << 10, 1 << 30, e) as u32,
            control_frame_budget: range(
                "http2.control_frame_budget",
                h.control_frame_budget,
                10,
                1_000_000,
                e,
            ) as u32,
            max_requests_per_connection: range(
                "http2.max_requests_per_connection",
                h.max_requests_per_connection,
                0,
                u64::from(u32::MAX),
                e,
            ) as u32,
            max_connection_age: dur("http2.max_connection_age", &h.max_connection_age, e),
        }
    }
}

impl CompressionConfig {
    /// The options the engines use (`None` when off); problems go to `e`.
    fn validate(&self, e: &mut Vec<ConfigError>) -> Option<CompressionOptions> {
        let mut codings = Vec::new();
        for name in &self.codings {
            match ContentCoding::from_token(name) {
                Some(c) if codings.contains(&c) => e.push(err(
                    "compression.codings",
                    format!("`{name}` is listed twice"),
                )),
                Some(c) => codings.push(c),
                None => e.push(err(
                    "compression.codings",
                    format!("`{name}` is not one of br, zstd, gzip"),
                )),
            }
        }
        if self.enabled && self.codings.is_empty() {
            e.push(err(
                "compression.codings",
                "must name at least one of br, zstd, gzip when compression is enabled",
            ));
        }
        for t in &self.types {
            let ok = t.split_once('/').is_some_and(|(a, b)| {
                !a.is_empty()
                    && !b.is_empty()
                    && !a.contains('*')
                    && !b[..b.len() - 1].contains('*')
            });
            if !ok {
                e.push(err(
                    "compression.types",
                    format!("`{t}` is not a media type (type/subtype or type/*)"),
                ));
            }
        }
        if self.max_file_size == 0 || self.max_file_size > 1 << 30 {
            e.push(err(
                "compression.max_file_size",
                format!("{} is out of range 1..=1073741824", self.max_file_size),
            ));
        }
        let mut levels = [0i32; 3];
        for (key, coding, v) in [
            ("compression.levels.br", ContentCoding::Br, self.levels.br),
            (
                "compression.levels.zstd",
                ContentCoding::Zstd,
                self.levels.zstd,
            ),
            (
                "compression.levels.gzip",
                ContentCoding::Gzip,
                self.levels.gzip,
            ),
        ] {
            let allowed = decide::codec(coding).levels();
            let level = i32::try_from(v).unwrap_or(i32::MAX);
            if !allowed.contains(&level) {
                e.push(err(
                    key,
                    format!(
                        "{v} is out of range {}..={}",
                        allowed.start(),
                        allowed.end()
                    ),
                ));
            }
            levels[coding.index()] = level;
        }
        self.enabled.then(|| CompressionOptions {
            codings,
            types: self.types.clone(),
            max_file_size: self.max_file_size,
            levels,
        })
    }
}

/// Validates a config file for `fileserver check-config`: every problem
/// found, and the settings it makes (a wrong value's key at its default)
/// unless the file could not be read as a config at all.
pub fn check_file(path: &Path) -> (Option<Settings>, Vec<ConfigError>) {
    let (loaded, errors) = read_sources(&Sources {
        file: Some(path.to_path_buf()),
        ..Sources::default()
    });
    (loaded.map(|(_, s)| s), errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precedence_flags_over_env_over_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.toml");
        std::fs::write(
            &f,
            "workers = 3\nmax_ranges = 5\n[cache]\nmax_entries = 7\n",
        )
        .unwrap();
        let (c, _) = load(&Sources {
            file: Some(f),
            env: vec![
                ("FILESERVER_WORKERS".into(), "4".into()),
                ("FILESERVER_CACHE_MAX_ENTRIES".into(), "9".into()),
            ],
            flags: vec![("workers".into(), "6".into())],
            ..Sources::default()
        })
        .unwrap();
        assert_eq!(c.workers, 6);
        assert_eq!(c.max_ranges, 5);
        assert_eq!(c.cache.max_entries, 9);
    }

    /// Concurrent HTTP/2 streams are capped at 1000 (each held answer is
    /// memory and a look per round); the new connection bounds are keys.
    #[test]
    fn http2_bounds_are_checked_and_set() {
        let load_flags = |flags: &[(&str, &str)]| {
            load(&Sources {
                flags: flags
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                ..Sources::default()
            })
        };
        let errs = load_flags(&[("http2.max_concurrent_streams", "10000")]).unwrap_err();
        assert_eq!(errs[0].key, "http2.max_concurrent_streams", "{errs:?}");
        let (_, s) = load_flags(&[
            ("http2.max_concurrent_streams", "1000"),
            ("http2.max_requests_per_connection", "5"),
            ("http2.max_connection_age", "10m"),
        ])
        .unwrap();
        assert_eq!(s.http2.max_concurrent_streams, 1000);
        assert_eq!(s.http2.max_requests_per_connection, 5);
        assert_eq!(s.http2.max_connection_age, Duration::from_secs(600));
        let (_, s) = load_flags(&[]).unwrap();
        assert_eq!(
            (
                s.http2.max_requests_per_connection,
                s.http2.max_connection_age
            ),
            (0, Duration::from_secs(3600))
        );
    }

    /// `check-config` in one run: key errors, a rule's bad field and a
    /// bad value in another rule, all together, and the settings to check
    /// the files with (before: three runs, one kind at a time).
    #[test]
    fn check_file_reports_keys_rules_and_files_in_one_run() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.toml");
        let text = format!(
            "root = {:?}\nwokers = 2\n\
             [[rules]]\npath = \"/x/**\"\nredirect = \"/y\"\nstatus = 999\n\
             [[rules]]\npth = \"/**\"\n\
             [[rules]]\nerror_pages = {{ \"404\" = \"/missing.html\" }}\n",
            dir.path()
        );
        std::fs::write(&f, text).unwrap();
        let (settings, errors) = check_file(&f);
        let mut keys: Vec<&str> = errors.iter().map(|e| e.key.as_str()).collect();
        keys.sort();
        assert_eq!(
            keys,
            ["rules[1].status", "rules[2]", "wokers"],
            "{errors:?}"
        );
        // The settings are still made, for the file checks of the same run
        // (`check-config`; tests/cli.rs), with rules[3] in its place.
        let s = settings.expect("settings");
        assert_eq!(s.serve.rules.len(), 3);
    }

    /// `--listen :9000` moves the admin port along as `-p 9000` does
    /// (before: it stayed on 8081, and a second instance collided there),
    /// unless admin_listen is set.
    #[test]
    fn a_listen_port_moves_the_admin_port_unless_it_is_set() {
        let flags = |f: &[(&str, &str)]| {
            load(&Sources {
                flags: f
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                ..Sources::default()
            })
            .unwrap()
            .1
        };
        let s = flags(&[("listen", ":9000")]);
        assert_eq!(s.admin_listen.port(), 9001);
        let s = flags(&[("listen", "127.0.0.1:0")]);
        assert_eq!(s.admin_listen.port(), 0);
        let s = flags(&[("listen", ":9000"), ("admin_listen", "127.0.0.1:7000")]);
        assert_eq!(s.admin_listen.port(), 7000);
        let s = flags(&[]);
        assert_eq!((s.listen.port(), s.admin_listen.port()), (8080, 8081));
    }

    #[test]
    fn reports_every_error_with_its_key() {
        let errs = parse_file_text(
            "wokers = 2\nlisten = \"nope\"\nmax_ranges = \"x\"\n[cache]\nvalid = \"3 parsecs\"\nbogus = 1\n",
        )
        .unwrap_err();
        let keys: Vec<&str> = errs.iter().map(|e| e.key.as_str()).collect();
        assert!(keys.contains(&"wokers"), "{errs:?}");
        assert!(keys.contains(&"max_ranges"), "{errs:?}");
        assert!(keys.contains(&"cache.bogus"), "{errs:?}");
        // One run: unknown keys and type errors together with bad values.
        assert!(keys.contains(&"listen"), "{errs:?}");
        assert!(keys.contains(&"cache.valid"), "{errs:?}");
        let wokers = errs.iter().find(|e| e.key == "wokers").unwrap();
        assert!(
            wokers.to_string().contains("did you mean `workers`?"),
            "{wokers}"
        );
        let bogus = errs.iter().find(|e| e.key == "cache.bogus").unwrap();
        assert!(bogus.to_string().contains("known keys here"), "{bogus}");
    }

    #[test]
    fn shipped_default_file_equals_builtin_defaults() {
        let text = include_str!("../../../config/fileserver.toml");
        assert_eq!(parse_file_text(text).unwrap(), Config::default());
        // Every key is documented (present, possibly commented out).
        for key in all_keys() {
            let leaf = key.rsplit('.').next().unwrap();
            assert!(
                text.lines().any(|l| l
                    .trim_start_matches(['#', ' '])
                    .starts_with(&format!("{leaf} ="))),
                "key {key} is not documented in config/fileserver.toml"
            );
        }
    }

    #[test]
    fn compression_keys_are_checked_and_typed() {
        let errs = parse_file_text(
            "[compression]\nenabled = true\ncodings = [\"br\", \"lz4\", \"br\"]\ntypes = [\"text\", \"*/x\"]\nmax_file_size = 0\n[compression.levels]\nzstd = 23\nbr = 12\n",
        )
        .unwrap_err();
        let keys: Vec<&str> = errs.iter().map(|e| e.key.as_str()).collect();
        for key in [
            "compression.codings",
            "compression.types",
            "compression.max_file_size",
            "compression.levels.zstd",
            "compression.levels.br",
        ] {
            assert!(keys.contains(&key), "{key}: {errs:?}");
        }
        assert_eq!(
            keys.iter().filter(|k| **k == "compression.codings").count(),
            2
        );
        assert_eq!(
            keys.iter().filter(|k| **k == "compression.types").count(),
            2
        );
        let c = parse_file_text(
            "[compression]\nenabled = true\ncodings = [\"zstd\", \"gzip\"]\nbudget = 1000\n[compression.levels]\nzstd = 3\n",
        )
        .unwrap();
        let s = c.validate().unwrap();
        let o = s.serve.compression.unwrap();
        assert_eq!(o.codings, [ContentCoding::Zstd, ContentCoding::Gzip]);
        assert_eq!(o.level(ContentCoding::Zstd), 3);
        assert_eq!(s.cache.variant_budget, 1000);
        // Off: no options, no budget.
        let s = Config::default().validate().unwrap();
        assert_eq!((s.serve.compression, s.cache.variant_budget), (None, 0));
    }

    #[test]
    fn a_toml_syntax_error_names_the_line_and_no_key() {
        let errs = parse_file_text("workers = 2\ncache = [\n").unwrap_err();
        assert_eq!(errs.len(), 1);
        let shown = errs[0].to_string();
        assert!(!shown.contains("key `"), "{shown}");
        assert!(
            shown.starts_with("not valid TOML") && shown.contains("line 2"),
            "{shown}"
        );
    }

    #[test]
    fn listen_forms() {
        let a = |v: &str| parse_listen(v).unwrap().to_string();
        assert_eq!(a("127.0.0.1:80"), "127.0.0.1:80");
        assert_eq!(a("[::1]:8080"), "[::1]:8080");
        assert_eq!(a(":8080"), "0.0.0.0:8080");
        assert_eq!(
            a("8080"),
            "127.0.0.1:8080",
            "a bare port is loopback, as -p is"
        );
        assert!(parse_listen("localhost:8080").unwrap().ip().is_loopback());
        for bad in ["", "nope", "host:", "1.2.3.4:99999", "99999", "[::1]:x"] {
            assert!(parse_listen(bad).is_err(), "{bad:?}");
        }
        assert_eq!(with_port("127.0.0.1:8080", 9), "127.0.0.1:9");
        assert_eq!(with_port("[::1]:8080", 9), "[::1]:9");
        assert_eq!(with_port("[::1]", 9), "[::1]:9");
        assert_eq!(with_port("8080", 9), ":9");
        assert_eq!(with_port("localhost", 9), "localhost:9");
    }

    #[test]
    fn unknown_keys_suggest_the_nearest() {
        let msg = unknown_key_message("max_range", [String::from("max_ranges")].iter());
        assert!(msg.contains("did you mean `max_ranges`?"), "{msg}");
        let msg = unknown_key_message("zzz", [String::from("max_ranges")].iter());
        assert!(msg.contains("known keys here: max_ranges"), "{msg}");
        assert_eq!(edit_distance("wokers", "workers"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
    }

    #[test]
    fn log_levels_are_levels() {
        for ok in ["info", "WARN", "off", "info,fileserver=debug", "hyper=warn"] {
            assert_eq!(check_log_level(ok), Ok(()), "{ok}");
        }
        for (bad, hint) in [
            ("warning", "`warn`"),
            ("verbose", "`debug`"),
            ("infp", "`info`"),
            ("info,hyper=loud", ""),
            ("", ""),
        ] {
            let m = check_log_level(bad).unwrap_err();
            assert!(m.contains(hint), "{bad}: {m}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("1h 15m").unwrap(), Duration::from_secs(4500));
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("x").is_err());
        assert!(parse_duration("3 parsecs").is_err());
    }
}

//! The scenarios: what each one requests and what a correct answer is.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::loadtest::servers::Peer;
use crate::loadtest::tree::{self, COLD_SIZE, LARGE_PATH, LARGE_SIZE};

/// Size of each random range in the `range` scenario.
pub const RANGE_LEN: usize = 4096;
/// Cache bound (entries) of both servers in `cache_pressure`.
pub const PRESSURE_CACHE_ENTRIES: usize = 2000;
/// Cache bound (entries) of both servers in the other scenarios.
pub const DEFAULT_CACHE_ENTRIES: usize = 10_000;
/// The daemon's default `cache.max_open` (`config/fileserver.toml`): in
/// `many_files`, where the daemon runs at its defaults, nginx's
/// `open_file_cache max=` gets this descriptor bound.
pub const DAEMON_DEFAULT_MAX_OPEN: usize = 32_768;
/// nginx's `open_file_cache max=` in `many_files`. Each of nginx's two
/// workers keeps its own cache under its own `worker_rlimit_nofile 20000`
/// (`benches/http/nginx.conf`); with the daemon's 32768 each worker filled
/// its cache with all 20000 files and failed requests with EMFILE. Two
/// caches of 9000 hold about the 19.7k descriptors the daemon's budget
/// gives its one shared cache under the same 20000 limit.
pub const NGINX_MANY_FILES_CACHE: usize = 9_000;
/// Connections downloading cold large files in the `cold` scenario.
pub const COLD_LARGE_CONNECTIONS: usize = 8;
/// Connections of the second load generator (small cached files) in `cold`.
pub const COLD_SMALL_CONNECTIONS: usize = 4;
/// Request rate of the second load generator in `cold` (oha's `-q`; with wrk
/// each connection waits `COLD_SMALL_CONNECTIONS * 1000 / rate` ms between
/// requests instead).
pub const COLD_SMALL_RATE: usize = 1000;
/// wrk's `--timeout` for one cold large download (64 MiB from disk with 7
/// others in flight can take seconds).
pub const COLD_TIMEOUT_S: u64 = 60;
/// The fixed range oha requests in the `range` scenario (oha cannot vary headers).
pub const OHA_RANGE: (usize, usize) = (524_288, 524_288 + RANGE_LEN - 1);
/// Connections of every run in `embedded_large` (issue #15: one 1 MiB file
/// on 16 connections), also of `tls_large_*` and `tls_small_h2`.
pub const EMBEDDED_LARGE_CONNECTIONS: usize = 16;
/// Concurrent streams per HTTP/2 connection in `tls_small_h2` (h2load's
/// `-m`; 16 connections x 10 streams), and per HTTP/3 connection in
/// `h3_small` (h3load's `--streams`). `tls_large_h2` and `h3_large` run one
/// stream per connection, like `tls_large_h1`.
pub const H2_SMALL_STREAMS: usize = 10;
/// Connections h2load opens at once in one burst of `tls_handshakes`, each
/// for one request; bursts follow each other for the run's duration.
/// Fewer per burst measured lower rates against the same nginx (about 1200
/// handshakes/s in h2load's own time for 64 on one thread, 1300 for 256 on
/// two, on a loaded machine), and each h2load start costs tens of ms.
pub const HANDSHAKE_BURST: usize = 256;
/// h2load threads in a `tls_handshakes` burst (its OpenSSL 3.0 client side
/// used more CPU per handshake than nginx's server side: about 470 vs
/// 300 µs).
pub const HANDSHAKE_THREADS: usize = 2;
/// What a browser sends, and what `compressed_text` asks with.
pub const BROWSER_ACCEPT_ENCODING: &str = "gzip, deflate, br, zstd";
/// What HttpArena's static profile asks with (the `arena` group).
pub const ARENA_ACCEPT_ENCODING: &str = tree::arena::ACCEPT_ENCODING;
/// Concurrent streams per HTTP/2 connection in `arena_h2_256` (HttpArena's
/// h2load `-m 32`).
pub const ARENA_H2_STREAMS: usize = 32;

/// One load scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scenario {
    /// GET a random one of 1000 x 1 KiB files.
    SmallRandom,
    /// GET the 1 MiB file.
    Large,
    /// GET a random one of 10000 x 4 KiB files, fileserver's and nginx's caches
    /// bounded to 2000 entries (lighttpd, h2o and Caddy have no such bound).
    CachePressure,
    /// GET a random 1 KiB file with `If-None-Match` set to the server's own ETag (304).
    NotModified,
    /// GET a random 4 KiB range of the 1 MiB file (206).
    Range,
    /// GET a random one of 20000 x 4 KiB files, every server at its defaults.
    ManyFiles,
    /// `many_files` with a browser's `Accept-Encoding` on every request.
    ManyFilesBrowser,
    /// Large files downloaded from a cold page cache while a second load
    /// generator requests small cached files.
    Cold,
    /// `small_random` against the embedded servers and the daemon.
    EmbeddedSmall,
    /// The 1 MiB file on [`EMBEDDED_LARGE_CONNECTIONS`] connections against
    /// the embedded servers and the daemon.
    EmbeddedLarge,
    /// `range` against the embedded servers and the daemon.
    EmbeddedRange,
    /// `small_random` over HTTPS, HTTP/1.1 (wrk).
    TlsSmallH1,
    /// `small_random` over HTTPS, HTTP/2 (h2load, 16 connections x 10 streams).
    TlsSmallH2,
    /// The 1 MiB file over HTTPS, HTTP/1.1, 16 connections.
    TlsLargeH1,
    /// The 1 MiB file over HTTPS, HTTP/2, 16 connections.
    TlsLargeH2,
    /// One full TLS handshake per request (HTTP/1.1, a fresh client each).
    TlsHandshakes,
    /// A tree of JavaScript, CSS and JSON asked for with a browser's
    /// `Accept-Encoding`, plaintext HTTP/1.1.
    CompressedText,
    /// `small_random` over HTTP/3 (h3load, 16 connections x 10 streams).
    H3Small,
    /// The 1 MiB file over HTTP/3 (h3load, 16 connections).
    H3Large,
    /// HttpArena's 20 static files round-robin with its `Accept-Encoding`,
    /// plaintext HTTP/1.1 on 64 connections.
    ArenaH1C64,
    /// `arena_h1_64` on 1024 connections (HttpArena's smallest HTTP/1.1 row).
    ArenaH1C1024,
    /// `arena_h1_64` on 4096 connections (HttpArena's middle row).
    ArenaH1C4096,
    /// The same requests over HTTPS, HTTP/2 (h2load), 256 connections x
    /// 32 streams (HttpArena's smaller HTTP/2 row).
    ArenaH2C256,
}

/// How a scenario's requests travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// HTTP/1.1 over TCP.
    Http1,
    /// HTTP/1.1 over TLS (ALPN `http/1.1`, or none).
    Https1,
    /// HTTP/2 over TLS (ALPN `h2`).
    Https2,
    /// HTTP/3 over QUIC (ALPN `h3`).
    Https3,
}

impl Protocol {
    /// The URL scheme.
    pub fn scheme(self) -> &'static str {
        match self {
            Self::Http1 => "http",
            Self::Https1 | Self::Https2 | Self::Https3 => "https",
        }
    }

    /// Over TLS?
    pub fn tls(self) -> bool {
        self != Self::Http1
    }
}

/// The tool that measures a scenario's throughput.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Throughput {
    /// wrk with the generated Lua script (HTTP/1.1, keep-alive; https too).
    Wrk,
    /// h2load over HTTP/2 with `streams` concurrent streams per connection.
    H2load {
        /// h2load's `-m`.
        streams: usize,
    },
    /// Back-to-back h2load bursts of [`HANDSHAKE_BURST`] fresh HTTP/1.1
    /// clients, one request each, so every request pays a full handshake.
    Handshakes,
    /// h3load (`src/bin/h3load.rs`) over HTTP/3 with `streams` concurrent
    /// streams per connection: h2load's shape over QUIC.
    H3load {
        /// h3load's `--streams`.
        streams: usize,
    },
}

impl Throughput {
    /// The tool's name, in log lines and raw output file names.
    pub fn tool(self) -> &'static str {
        match self {
            Self::Wrk => "wrk",
            Self::H2load { .. } | Self::Handshakes => "h2load",
            Self::H3load { .. } => "h3load",
        }
    }
}

/// Which servers a scenario compares.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Group {
    /// fileserver (the daemon) against nginx and the other peers.
    #[default]
    Peers,
    /// Two axum apps on the same runtime settings, one with
    /// `servedir::ServeDir`, one with tower-http's `ServeDir`, and the
    /// daemon: servedir against tower-http (the headline) and the daemon.
    Embedded,
    /// The daemon's TLS listener against the peers that serve HTTPS here
    /// (nginx, lighttpd, h2o, Caddy), on HTTP/1.1 and HTTP/2, and handshakes.
    Tls,
    /// Text files sent compressed to a browser's `Accept-Encoding`, against
    /// the peers configured to compress (nginx, lighttpd, h2o, Caddy).
    Compression,
    /// HTTP/3 against the peer that serves it here (Caddy; Debian's nginx,
    /// lighttpd and h2o are built without it).
    Http3,
    /// HttpArena's static profile: its 20 front-end files round-robin with
    /// `Accept-Encoding: br;q=1, gzip;q=0.8`, every server configured to
    /// send the precompressed siblings, over HTTP/1.1 on up to 4096
    /// connections and over HTTP/2.
    Arena,
}

impl Group {
    /// The name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Peers => "peers",
            Self::Embedded => "embedded",
            Self::Tls => "tls",
            Self::Compression => "compression",
            Self::Http3 => "http3",
            Self::Arena => "arena",
        }
    }

    /// Every group, in report order.
    pub const ALL: [Group; 6] = [
        Self::Peers,
        Self::Embedded,
        Self::Tls,
        Self::Compression,
        Self::Http3,
        Self::Arena,
    ];

    /// Whether a run that names no scenario and no group runs this group
    /// (`tls` and `compression` would take the default run past 20 minutes).
    pub fn in_default_run(self) -> bool {
        matches!(self, Self::Peers | Self::Embedded)
    }

    /// The server the others are compared with (`servers[0]` of a report).
    pub fn subject(self) -> &'static str {
        match self {
            Self::Peers | Self::Tls | Self::Compression | Self::Http3 | Self::Arena => {
                crate::loadtest::servers::FILESERVER
            }
            Self::Embedded => crate::loadtest::servers::Embedded::Servedir.name(),
        }
    }

    /// The server the headline compares the subject with; `None`: the best
    /// peer on the scenario's headline figure.
    pub fn baseline(self) -> Option<&'static str> {
        match self {
            Self::Peers => None,
            Self::Embedded => Some(crate::loadtest::servers::Embedded::TowerHttp.name()),
            Self::Tls | Self::Compression | Self::Arena => Some(Peer::Nginx.name()),
            Self::Http3 => Some(Peer::Caddy.name()),
        }
    }

    /// Whether `peer` runs in this group's scenarios: the peers whose
    /// configs the harness renders for TLS, for compression, or for
    /// precompressed siblings.
    pub fn runs_peer(self, peer: Peer) -> bool {
        match self {
            Self::Peers => true,
            Self::Embedded => false,
            Self::Tls | Self::Compression | Self::Arena => peer != Peer::StaticWebServer,
            Self::Http3 => peer == Peer::Caddy,
        }
    }

    /// The scenarios of this group, in report order.
    pub fn scenarios(self) -> impl Iterator<Item = Scenario> {
        Scenario::ALL.into_iter().filter(move |s| s.group() == self)
    }
}

impl fmt::Display for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Group {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|g| g.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Self::ALL.iter().map(|g| g.name()).collect();
                format!("unknown group {s:?}; expected one of {}", names.join(", "))
            })
    }
}

/// The figure a scenario is judged by (its headline in the report).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Headline {
    /// wrk throughput, higher is better.
    ReqPerS,
    /// p99 latency of the latency runs (in `cold`: the small requests), lower is better.
    P99,
}

impl Scenario {
    /// All scenarios in report order.
    pub const ALL: [Scenario; 23] = [
        Self::SmallRandom,
        Self::Large,
        Self::CachePressure,
        Self::NotModified,
        Self::Range,
        Self::ManyFiles,
        Self::ManyFilesBrowser,
        Self::Cold,
        Self::EmbeddedSmall,
        Self::EmbeddedLarge,
        Self::EmbeddedRange,
        Self::TlsSmallH1,
        Self::TlsSmallH2,
        Self::TlsLargeH1,
        Self::TlsLargeH2,
        Self::TlsHandshakes,
        Self::CompressedText,
        Self::H3Small,
        Self::H3Large,
        Self::ArenaH1C64,
        Self::ArenaH1C1024,
        Self::ArenaH1C4096,
        Self::ArenaH2C256,
    ];

    /// The group whose servers run in this scenario.
    pub fn group(self) -> Group {
        match self {
            Self::EmbeddedSmall | Self::EmbeddedLarge | Self::EmbeddedRange => Group::Embedded,
            Self::TlsSmallH1
            | Self::TlsSmallH2
            | Self::TlsLargeH1
            | Self::TlsLargeH2
            | Self::TlsHandshakes => Group::Tls,
            Self::CompressedText => Group::Compression,
            Self::H3Small | Self::H3Large => Group::Http3,
            Self::ArenaH1C64 | Self::ArenaH1C1024 | Self::ArenaH1C4096 | Self::ArenaH2C256 => {
                Group::Arena
            }
            _ => Group::Peers,
        }
    }

    /// How the requests travel.
    pub fn protocol(self) -> Protocol {
        match self {
            Self::TlsSmallH1 | Self::TlsLargeH1 | Self::TlsHandshakes => Protocol::Https1,
            Self::TlsSmallH2 | Self::TlsLargeH2 | Self::ArenaH2C256 => Protocol::Https2,
            Self::H3Small | Self::H3Large => Protocol::Https3,
            _ => Protocol::Http1,
        }
    }

    /// What measures the throughput.
    pub fn throughput(self) -> Throughput {
        match self {
            Self::TlsSmallH2 => Throughput::H2load {
                streams: H2_SMALL_STREAMS,
            },
            Self::TlsLargeH2 => Throughput::H2load { streams: 1 },
            Self::ArenaH2C256 => Throughput::H2load {
                streams: ARENA_H2_STREAMS,
            },
            Self::TlsHandshakes => Throughput::Handshakes,
            Self::H3Small => Throughput::H3load {
                streams: H2_SMALL_STREAMS,
            },
            Self::H3Large => Throughput::H3load { streams: 1 },
            _ => Throughput::Wrk,
        }
    }

    /// The scenario whose requests (and checks) this one uses: an embedded
    /// or TLS scenario sends those of its daemon-vs-peers twin, and
    /// `many_files_browser` those of `many_files` (plus the header, see
    /// [`browser`](Self::browser)); every other scenario is its own. A twin is never itself a twin, so whatever
    /// matches on `load()` meets only scenarios that are their own.
    pub fn load(self) -> Scenario {
        match self {
            Self::EmbeddedSmall => Self::SmallRandom,
            Self::EmbeddedLarge => Self::Large,
            Self::EmbeddedRange => Self::Range,
            Self::TlsSmallH1 | Self::TlsSmallH2 | Self::TlsHandshakes | Self::H3Small => {
                Self::SmallRandom
            }
            Self::TlsLargeH1 | Self::TlsLargeH2 | Self::H3Large => Self::Large,
            Self::ManyFilesBrowser => Self::ManyFiles,
            Self::ArenaH1C1024 | Self::ArenaH1C4096 | Self::ArenaH2C256 => Self::ArenaH1C64,
            other => other,
        }
    }

    /// Whether the ceiling server ([`CEILING`](crate::loadtest::servers::CEILING))
    /// runs beside the peers: the plain-HTTP scenarios whose answers it can
    /// give (no ranges, no second load generator as in `cold`), and the
    /// HTTP/3 ones, where it is quinn with nothing above it.
    pub fn has_ceiling(self) -> bool {
        matches!(
            self,
            Self::SmallRandom
                | Self::Large
                | Self::CachePressure
                | Self::NotModified
                | Self::ManyFiles
                | Self::ManyFilesBrowser
                | Self::H3Small
                | Self::H3Large
        )
    }

    /// Whether wrk adds a browser's `Accept-Encoding` to its twin's requests
    /// (oha, which times the latency runs, sends its own on every run).
    pub fn browser(self) -> bool {
        self == Self::ManyFilesBrowser
    }

    /// Open connections of every run, given the `--connections` setting
    /// (the arena rows have their own, whatever it says).
    pub fn connections(self, default: usize) -> usize {
        match self {
            Self::ArenaH1C64 => 64,
            Self::ArenaH1C1024 => 1024,
            Self::ArenaH1C4096 => 4096,
            Self::ArenaH2C256 => 256,
            Self::EmbeddedLarge
            | Self::TlsSmallH2
            | Self::TlsLargeH1
            | Self::TlsLargeH2
            | Self::H3Small
            | Self::H3Large => EMBEDDED_LARGE_CONNECTIONS,
            Self::TlsHandshakes => HANDSHAKE_BURST,
            _ => default,
        }
    }

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::SmallRandom => "small_random",
            Self::Large => "large",
            Self::CachePressure => "cache_pressure",
            Self::NotModified => "not_modified",
            Self::Range => "range",
            Self::ManyFiles => "many_files",
            Self::ManyFilesBrowser => "many_files_browser",
            Self::Cold => "cold",
            Self::EmbeddedSmall => "embedded_small",
            Self::EmbeddedLarge => "embedded_large",
            Self::EmbeddedRange => "embedded_range",
            Self::TlsSmallH1 => "tls_small_h1",
            Self::TlsSmallH2 => "tls_small_h2",
            Self::TlsLargeH1 => "tls_large_h1",
            Self::TlsLargeH2 => "tls_large_h2",
            Self::TlsHandshakes => "tls_handshakes",
            Self::CompressedText => "compressed_text",
            Self::H3Small => "h3_small",
            Self::H3Large => "h3_large",
            Self::ArenaH1C64 => "arena_h1_64",
            Self::ArenaH1C1024 => "arena_h1_1024",
            Self::ArenaH1C4096 => "arena_h1_4096",
            Self::ArenaH2C256 => "arena_h2_256",
        }
    }

    /// One line for the report.
    pub fn description(self) -> &'static str {
        match self {
            Self::SmallRandom => "1 KiB files, random over 1000",
            Self::Large => "one 1 MiB file",
            Self::CachePressure => {
                "4 KiB files, random over 10000, fileserver's and nginx's caches bounded to 2000 \
                 entries (lighttpd's stat cache has no bound and reuses open descriptors)"
            }
            Self::NotModified => "If-None-Match with the server's ETag, random over 1000 -> 304",
            Self::Range => "random 4 KiB ranges of the 1 MiB file -> 206",
            Self::ManyFiles => "4 KiB files, random over 20000, fileserver at its default settings",
            Self::ManyFilesBrowser => {
                "many_files with a browser's Accept-Encoding: gzip, deflate, br, zstd \
                 (none of the files has a precompressed sibling)"
            }
            Self::Cold => {
                "64 MiB files dropped from the page cache before each round, downloaded \
                 while a second load generator requests cached 1 KiB files \
                 (req/s, MB/s: large downloads; p50, p99, max: small requests)"
            }
            Self::EmbeddedSmall => "embedded: 1 KiB files, random over 1000",
            Self::EmbeddedLarge => "embedded: one 1 MiB file, 16 connections",
            Self::EmbeddedRange => "embedded: random 4 KiB ranges of the 1 MiB file -> 206",
            Self::TlsSmallH1 => "HTTPS, HTTP/1.1 (wrk): 1 KiB files, random over 1000",
            Self::TlsSmallH2 => {
                "HTTPS, HTTP/2 (h2load, 16 connections x 10 streams): 1 KiB files, random over 1000"
            }
            Self::TlsLargeH1 => "HTTPS, HTTP/1.1 (wrk): one 1 MiB file, 16 connections",
            Self::TlsLargeH2 => "HTTPS, HTTP/2 (h2load): one 1 MiB file, 16 connections",
            Self::TlsHandshakes => {
                "HTTPS, HTTP/1.1: a new connection and full handshake per 1 KiB request \
                 (h2load bursts of 256 fresh clients on 2 threads; req/s = handshakes/s)"
            }
            Self::CompressedText => {
                "300 JavaScript/CSS/JSON files of 20-200 KiB with Accept-Encoding: gzip, deflate, \
                 br, zstd (HTTP/1.1; MB/s and kB/response: bytes on the wire)"
            }
            Self::H3Small => {
                "HTTP/3 (h3load, 16 connections x 10 streams): 1 KiB files, random over 1000"
            }
            Self::H3Large => "HTTP/3 (h3load): one 1 MiB file, 16 connections",
            Self::ArenaH1C64 => {
                "HttpArena's 20 static files round-robin, Accept-Encoding: br;q=1, gzip;q=0.8, \
                 HTTP/1.1 (wrk), 64 connections (kB/resp: bytes on the wire)"
            }
            Self::ArenaH1C1024 => {
                "HttpArena's 20 static files round-robin, Accept-Encoding: br;q=1, gzip;q=0.8, \
                 HTTP/1.1 (wrk), 1024 connections"
            }
            Self::ArenaH1C4096 => {
                "HttpArena's 20 static files round-robin, Accept-Encoding: br;q=1, gzip;q=0.8, \
                 HTTP/1.1 (wrk), 4096 connections"
            }
            Self::ArenaH2C256 => {
                "HttpArena's 20 static files in turn, Accept-Encoding: br;q=1, gzip;q=0.8, \
                 HTTPS HTTP/2 (h2load), 256 connections x 32 streams"
            }
        }
    }

    /// Entries fileserver may cache in this scenario (`[cache] max_entries`
    /// and `max_open`); `None` leaves the daemon's defaults.
    pub fn cache_entries(self) -> Option<usize> {
        match self {
            Self::CachePressure => Some(PRESSURE_CACHE_ENTRIES),
            Self::ManyFiles | Self::ManyFilesBrowser => None,
            _ => Some(DEFAULT_CACHE_ENTRIES),
        }
    }

    /// nginx's `open_file_cache max=`: the same descriptor bound as
    /// fileserver's (in `many_files`, see [`NGINX_MANY_FILES_CACHE`]).
    pub fn nginx_open_file_cache(self) -> usize {
        self.cache_entries().unwrap_or(NGINX_MANY_FILES_CACHE)
    }

    /// What the report's headline compares.
    pub fn headline(self) -> Headline {
        match self {
            Self::Cold => Headline::P99,
            _ => Headline::ReqPerS,
        }
    }

    /// The status every timed response must have.
    pub fn expected_status(self) -> u16 {
        match self.load() {
            Self::NotModified => 304,
            Self::Range => 206,
            _ => 200,
        }
    }

    /// Body bytes of one successful response.
    pub fn body_len(self) -> usize {
        match self.load() {
            Self::SmallRandom => tree::SMALL_SIZE,
            Self::Large => LARGE_SIZE,
            Self::CachePressure => tree::PRESSURE_SIZE,
            Self::Range => RANGE_LEN,
            Self::ManyFiles => tree::MANY_SIZE,
            Self::Cold => COLD_SIZE,
            // A 304 has none; compressed sizes differ by server (the wire
            // bytes are measured); twins do not come out of `load()`.
            _ => 0,
        }
    }

    /// The file descriptors the client and each server need for an arena
    /// row's connections, with room for files, logs and listeners: the
    /// `RLIMIT_NOFILE` the run raises its soft limit to (never past the
    /// hard limit) while the row runs, and skips the row where the hard
    /// limit is lower. `None` for the other scenarios, which run at the
    /// limit the harness was started with.
    pub fn nofile_needed(self) -> Option<u64> {
        (self.group() == Group::Arena).then(|| (self.connections(0) + 1024) as u64)
    }

    /// The `Accept-Encoding` every timed request carries (wrk, h2load,
    /// h3load and oha alike), if the scenario sends one on every request.
    pub fn accept_encoding(self) -> Option<&'static str> {
        match self.load() {
            Self::CompressedText => Some(BROWSER_ACCEPT_ENCODING),
            Self::ArenaH1C64 => Some(ARENA_ACCEPT_ENCODING),
            _ => None,
        }
    }

    /// The URL path(s) oha requests, as an oha `--rand-regex-url` pattern
    /// (path part only; oha treats `.` as a literal dot and `\.` as garbage,
    /// checked with `oha --dump-urls`) or a fixed path. In `cold` these are
    /// the second load generator's small cached files.
    pub fn oha_path(self) -> OhaPath {
        match self.load() {
            Self::SmallRandom | Self::Cold => OhaPath::Regex("/small/[0-9]{3}.bin"),
            Self::CachePressure => OhaPath::Regex("/pressure/[0-9]{4}.bin"),
            Self::ManyFiles => OhaPath::Regex("/many/[01][0-9]{4}.bin"),
            Self::NotModified => OhaPath::Fixed(tree::small_path(0)),
            // Every branch as likely: more CSS and JSON than wrk's mix.
            Self::CompressedText => {
                OhaPath::Regex("/text/(js/[01][0-9]{2}.js|css/[0-4][0-9].css|json/[0-4][0-9].json)")
            }
            // Every file as likely, where wrk and h2load go through them in turn.
            Self::ArenaH1C64 => OhaPath::Regex(tree::arena::OHA_REGEX),
            // Large, Range; twins do not come out of `load()`.
            _ => OhaPath::Fixed(LARGE_PATH.to_string()),
        }
    }
}

/// What oha requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OhaPath {
    /// A regex over paths (`--rand-regex-url`); `.` is literal in oha's dialect.
    Regex(&'static str),
    /// One path.
    Fixed(String),
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Scenario {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|x| x.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Self::ALL.iter().map(|x| x.name()).collect();
                format!(
                    "unknown scenario {s:?}; expected one of {}",
                    names.join(", ")
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_explained() {
        for s in Scenario::ALL {
            assert_eq!(s.name().parse::<Scenario>().unwrap(), s);
        }
        let err = "smal".parse::<Scenario>().unwrap_err();
        assert!(
            err.contains("small_random") && err.contains("cold"),
            "{err}"
        );
    }

    #[test]
    fn many_files_leaves_the_daemon_at_its_defaults() {
        assert_eq!(Scenario::ManyFiles.cache_entries(), None);
        assert_eq!(
            Scenario::CachePressure.cache_entries(),
            Some(PRESSURE_CACHE_ENTRIES)
        );
        // The daemon runs at its default bound; nginx's two caches share
        // about what the daemon's fd budget allows under the same limit.
        let defaults = include_str!("../../../config/fileserver.toml");
        let line = format!("max_open = {DAEMON_DEFAULT_MAX_OPEN}\n");
        assert!(
            defaults.contains(&line),
            "config/fileserver.toml no longer says {line:?}"
        );
        assert_eq!(
            Scenario::ManyFiles.nginx_open_file_cache(),
            NGINX_MANY_FILES_CACHE
        );
        let nginx = include_str!("../../http/nginx.conf");
        assert!(nginx.contains("worker_rlimit_nofile 20000;"));
        const { assert!(2 * NGINX_MANY_FILES_CACHE < 20_000 - 1024) };
    }

    #[test]
    fn tls_scenarios_send_their_twins_requests_over_https() {
        let tls: Vec<_> = Group::Tls.scenarios().collect();
        assert_eq!(tls.len(), 5);
        for s in tls {
            assert!(s.protocol().tls(), "{s}");
            assert_eq!(s.load().group(), Group::Peers, "{s}");
            assert_eq!(s.oha_path(), s.load().oha_path(), "{s}");
            assert_eq!(s.body_len(), s.load().body_len(), "{s}");
            assert!(!s.group().in_default_run());
        }
        assert_eq!(Scenario::TlsSmallH2.protocol(), Protocol::Https2);
        assert_eq!(
            Scenario::TlsSmallH2.throughput(),
            Throughput::H2load { streams: 10 }
        );
        assert_eq!(Scenario::TlsLargeH1.throughput(), Throughput::Wrk);
        assert_eq!(Scenario::TlsLargeH2.connections(64), 16);
        assert_eq!(Scenario::TlsHandshakes.connections(64), HANDSHAKE_BURST);
        assert_eq!(Scenario::CompressedText.protocol(), Protocol::Http1);
        assert_eq!(Scenario::CompressedText.group(), Group::Compression);
        for g in [Group::Tls, Group::Compression] {
            assert_eq!(g.baseline(), Some("nginx"));
            assert_eq!(g.name().parse::<Group>().unwrap(), g);
            assert!(g.runs_peer(Peer::Lighttpd) && !g.runs_peer(Peer::StaticWebServer));
        }
    }

    #[test]
    fn embedded_scenarios_send_their_twins_requests() {
        let embedded: Vec<_> = Group::Embedded.scenarios().collect();
        assert_eq!(
            embedded,
            [
                Scenario::EmbeddedSmall,
                Scenario::EmbeddedLarge,
                Scenario::EmbeddedRange
            ]
        );
        for s in embedded {
            let twin = s.load();
            assert_eq!(twin.group(), Group::Peers, "{s}");
            assert_eq!(twin.load(), twin);
            assert_eq!(s.expected_status(), twin.expected_status(), "{s}");
            assert_eq!(s.body_len(), twin.body_len(), "{s}");
            assert_eq!(s.oha_path(), twin.oha_path(), "{s}");
            assert_eq!(s.cache_entries(), twin.cache_entries(), "{s}");
            assert_eq!(s.headline(), Headline::ReqPerS);
        }
        // No scenario's twin has a twin: matches on `load()` rely on it.
        for s in Scenario::ALL {
            assert_eq!(s.load().load(), s.load(), "{s}");
        }
        assert_eq!(Scenario::EmbeddedRange.expected_status(), 206);
        assert_eq!(Scenario::EmbeddedLarge.connections(64), 16);
        assert_eq!(Scenario::EmbeddedSmall.connections(64), 64);
        assert_eq!(Scenario::Large.connections(64), 64);
        assert_eq!(Group::Embedded.subject(), "servedir");
        assert_eq!(Group::Embedded.baseline(), Some("tower-http"));
        assert_eq!(Group::Peers.subject(), "fileserver");
        assert_eq!(Group::Peers.baseline(), None);
        assert_eq!("embedded".parse::<Group>().unwrap(), Group::Embedded);
        assert!("embed".parse::<Group>().unwrap_err().contains("embedded"));
    }

    #[test]
    fn the_arena_group_has_httparenas_rows() {
        let arena: Vec<_> = Group::Arena.scenarios().collect();
        assert_eq!(
            arena,
            [
                Scenario::ArenaH1C64,
                Scenario::ArenaH1C1024,
                Scenario::ArenaH1C4096,
                Scenario::ArenaH2C256
            ]
        );
        let names: Vec<_> = arena.iter().map(|s| s.name()).collect();
        assert_eq!(
            names,
            [
                "arena_h1_64",
                "arena_h1_1024",
                "arena_h1_4096",
                "arena_h2_256"
            ]
        );
        // Their own connection counts, whatever --connections says.
        let conns: Vec<_> = arena.iter().map(|s| s.connections(16)).collect();
        assert_eq!(conns, [64, 1024, 4096, 256]);
        assert_eq!(Scenario::ArenaH1C4096.nofile_needed(), Some(4096 + 1024));
        assert_eq!(Scenario::SmallRandom.nofile_needed(), None);
        for s in &arena {
            // One set of requests and checks: those of arena_h1_64.
            assert_eq!(s.load(), Scenario::ArenaH1C64, "{s}");
            assert_eq!(s.accept_encoding(), Some("br;q=1, gzip;q=0.8"), "{s}");
            assert_eq!(s.oha_path(), OhaPath::Regex(tree::arena::OHA_REGEX), "{s}");
            assert_eq!(s.expected_status(), 200);
            assert_eq!(s.headline(), Headline::ReqPerS);
            // The ceiling sends no precompressed sibling: not a fair reference.
            assert!(!s.has_ceiling(), "{s}");
            assert_eq!(s.cache_entries(), Some(DEFAULT_CACHE_ENTRIES));
        }
        for s in &arena[..3] {
            assert_eq!(
                (s.protocol(), s.throughput()),
                (Protocol::Http1, Throughput::Wrk)
            );
        }
        assert_eq!(Scenario::ArenaH2C256.protocol(), Protocol::Https2);
        assert_eq!(
            Scenario::ArenaH2C256.throughput(),
            Throughput::H2load { streams: 32 }
        );
        let g = Group::Arena;
        assert_eq!(g.name().parse::<Group>().unwrap(), g);
        assert!(!g.in_default_run());
        assert_eq!((g.subject(), g.baseline()), ("fileserver", Some("nginx")));
        assert!(g.runs_peer(Peer::Caddy) && !g.runs_peer(Peer::StaticWebServer));
        assert_eq!(
            Scenario::CompressedText.accept_encoding(),
            Some(BROWSER_ACCEPT_ENCODING)
        );
        assert_eq!(Scenario::SmallRandom.accept_encoding(), None);
        assert_eq!(Scenario::ManyFilesBrowser.accept_encoding(), None);
    }

    #[test]
    fn http3_scenarios_take_the_shape_of_their_http2_twins() {
        let h3: Vec<_> = Group::Http3.scenarios().collect();
        assert_eq!(h3, [Scenario::H3Small, Scenario::H3Large]);
        for (h3, h2) in [
            (Scenario::H3Small, Scenario::TlsSmallH2),
            (Scenario::H3Large, Scenario::TlsLargeH2),
        ] {
            assert_eq!(h3.protocol(), Protocol::Https3);
            assert_eq!(h3.load(), h2.load(), "{h3}");
            assert_eq!(h3.body_len(), h2.body_len(), "{h3}");
            assert_eq!(h3.connections(64), h2.connections(64), "{h3}");
            let Throughput::H2load { streams } = h2.throughput() else {
                panic!("{h2} runs h2load");
            };
            assert_eq!(h3.throughput(), Throughput::H3load { streams }, "{h3}");
            assert_eq!(h3.throughput().tool(), "h3load");
        }
        let g = Group::Http3;
        assert_eq!((g.subject(), g.baseline()), ("fileserver", Some("caddy")));
        assert!(g.runs_peer(Peer::Caddy) && !g.runs_peer(Peer::Nginx));
    }

    #[test]
    fn cold_is_judged_by_small_request_latency() {
        assert_eq!(Scenario::Cold.headline(), Headline::P99);
        assert_eq!(Scenario::SmallRandom.headline(), Headline::ReqPerS);
    }
}

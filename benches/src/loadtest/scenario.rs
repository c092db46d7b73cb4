//! The scenarios: what each one requests and what a correct answer is.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

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
/// on 16 connections).
pub const EMBEDDED_LARGE_CONNECTIONS: usize = 16;

/// One load scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scenario {
    /// GET a random one of 1000 x 1 KiB files.
    SmallRandom,
    /// GET the 1 MiB file.
    Large,
    /// GET a random one of 10000 x 4 KiB files with both caches bounded to 2000 entries.
    CachePressure,
    /// GET a random 1 KiB file with `If-None-Match` set to the server's own ETag (304).
    NotModified,
    /// GET a random 4 KiB range of the 1 MiB file (206).
    Range,
    /// GET a random one of 20000 x 4 KiB files, every server at its defaults.
    ManyFiles,
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
}

impl Group {
    /// The name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Peers => "peers",
            Self::Embedded => "embedded",
        }
    }

    /// The server the others are compared with (`servers[0]` of a report).
    pub fn subject(self) -> &'static str {
        match self {
            Self::Peers => crate::loadtest::servers::FILESERVER,
            Self::Embedded => crate::loadtest::servers::Embedded::Servedir.name(),
        }
    }

    /// The server the headline compares the subject with; `None`: the best
    /// peer on the scenario's headline figure.
    pub fn baseline(self) -> Option<&'static str> {
        match self {
            Self::Peers => None,
            Self::Embedded => Some(crate::loadtest::servers::Embedded::TowerHttp.name()),
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
        [Self::Peers, Self::Embedded]
            .into_iter()
            .find(|g| g.name() == s)
            .ok_or_else(|| format!("unknown group {s:?}; expected peers or embedded"))
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
    pub const ALL: [Scenario; 10] = [
        Self::SmallRandom,
        Self::Large,
        Self::CachePressure,
        Self::NotModified,
        Self::Range,
        Self::ManyFiles,
        Self::Cold,
        Self::EmbeddedSmall,
        Self::EmbeddedLarge,
        Self::EmbeddedRange,
    ];

    /// The group whose servers run in this scenario.
    pub fn group(self) -> Group {
        match self {
            Self::EmbeddedSmall | Self::EmbeddedLarge | Self::EmbeddedRange => Group::Embedded,
            _ => Group::Peers,
        }
    }

    /// The scenario whose requests (and checks) this one uses: an embedded
    /// scenario sends those of its daemon-vs-peers twin; every other
    /// scenario is its own.
    pub fn load(self) -> Scenario {
        match self {
            Self::EmbeddedSmall => Self::SmallRandom,
            Self::EmbeddedLarge => Self::Large,
            Self::EmbeddedRange => Self::Range,
            other => other,
        }
    }

    /// Open connections of every run, given the `--connections` setting.
    pub fn connections(self, default: usize) -> usize {
        match self {
            Self::EmbeddedLarge => EMBEDDED_LARGE_CONNECTIONS,
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
            Self::Cold => "cold",
            Self::EmbeddedSmall => "embedded_small",
            Self::EmbeddedLarge => "embedded_large",
            Self::EmbeddedRange => "embedded_range",
        }
    }

    /// One line for the report.
    pub fn description(self) -> &'static str {
        match self {
            Self::SmallRandom => "1 KiB files, random over 1000",
            Self::Large => "one 1 MiB file",
            Self::CachePressure => "4 KiB files, random over 10000, caches bounded to 2000 entries",
            Self::NotModified => "If-None-Match with the server's ETag, random over 1000 -> 304",
            Self::Range => "random 4 KiB ranges of the 1 MiB file -> 206",
            Self::ManyFiles => "4 KiB files, random over 20000, fileserver at its default settings",
            Self::Cold => {
                "64 MiB files dropped from the page cache before each round, downloaded \
                 while a second load generator requests cached 1 KiB files \
                 (req/s, MB/s: large downloads; p50, p99, max: small requests)"
            }
            Self::EmbeddedSmall => "embedded: 1 KiB files, random over 1000",
            Self::EmbeddedLarge => "embedded: one 1 MiB file, 16 connections",
            Self::EmbeddedRange => "embedded: random 4 KiB ranges of the 1 MiB file -> 206",
        }
    }

    /// Entries fileserver may cache in this scenario (`[cache] max_entries`
    /// and `max_open`); `None` leaves the daemon's defaults.
    pub fn cache_entries(self) -> Option<usize> {
        match self {
            Self::CachePressure => Some(PRESSURE_CACHE_ENTRIES),
            Self::ManyFiles => None,
            _ => Some(DEFAULT_CACHE_ENTRIES),
        }
    }

    /// nginx's `open_file_cache max=`: the same descriptor bound as fileserver's.
    pub fn nginx_open_file_cache(self) -> usize {
        self.cache_entries().unwrap_or(DAEMON_DEFAULT_MAX_OPEN)
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
        match self {
            Self::EmbeddedSmall | Self::EmbeddedLarge | Self::EmbeddedRange => {
                self.load().body_len()
            }
            Self::SmallRandom => tree::SMALL_SIZE,
            Self::Large => LARGE_SIZE,
            Self::CachePressure => tree::PRESSURE_SIZE,
            Self::NotModified => 0,
            Self::Range => RANGE_LEN,
            Self::ManyFiles => tree::MANY_SIZE,
            Self::Cold => COLD_SIZE,
        }
    }

    /// The URL path(s) oha requests, as an oha `--rand-regex-url` pattern
    /// (path part only; oha treats `.` as a literal dot and `\.` as garbage,
    /// checked with `oha --dump-urls`) or a fixed path. In `cold` these are
    /// the second load generator's small cached files.
    pub fn oha_path(self) -> OhaPath {
        match self {
            Self::EmbeddedSmall | Self::EmbeddedLarge | Self::EmbeddedRange => {
                self.load().oha_path()
            }
            Self::SmallRandom | Self::Cold => OhaPath::Regex("/small/[0-9]{3}.bin"),
            Self::CachePressure => OhaPath::Regex("/pressure/[0-9]{4}.bin"),
            Self::ManyFiles => OhaPath::Regex("/many/[01][0-9]{4}.bin"),
            Self::NotModified => OhaPath::Fixed(tree::small_path(0)),
            Self::Large | Self::Range => OhaPath::Fixed(LARGE_PATH.to_string()),
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
        // nginx gets the daemon's default descriptor bound; keep the two in step.
        let defaults = include_str!("../../../config/fileserver.toml");
        let line = format!("max_open = {DAEMON_DEFAULT_MAX_OPEN}\n");
        assert!(
            defaults.contains(&line),
            "config/fileserver.toml no longer says {line:?}"
        );
        assert_eq!(
            Scenario::ManyFiles.nginx_open_file_cache(),
            DAEMON_DEFAULT_MAX_OPEN
        );
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
    fn cold_is_judged_by_small_request_latency() {
        assert_eq!(Scenario::Cold.headline(), Headline::P99);
        assert_eq!(Scenario::SmallRandom.headline(), Headline::ReqPerS);
    }
}

//! The scenarios: what each one requests and what a correct answer is.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::loadtest::tree::{self, LARGE_PATH, LARGE_SIZE};

/// Size of each random range in the `range` scenario.
pub const RANGE_LEN: usize = 4096;
/// Cache bound (entries) of both servers in `cache_pressure`.
pub const PRESSURE_CACHE_ENTRIES: usize = 2000;
/// Cache bound (entries) of both servers in the other scenarios.
pub const DEFAULT_CACHE_ENTRIES: usize = 10_000;
/// The fixed range oha requests in the `range` scenario (oha cannot vary headers).
pub const OHA_RANGE: (usize, usize) = (524_288, 524_288 + RANGE_LEN - 1);

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
}

/// The figure a scenario is judged by (its headline in the report).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Headline {
    /// wrk throughput, higher is better.
    ReqPerS,
    /// p99 latency of the latency runs, lower is better.
    P99,
}

impl Scenario {
    /// All scenarios in report order.
    pub const ALL: [Scenario; 5] = [
        Self::SmallRandom,
        Self::Large,
        Self::CachePressure,
        Self::NotModified,
        Self::Range,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::SmallRandom => "small_random",
            Self::Large => "large",
            Self::CachePressure => "cache_pressure",
            Self::NotModified => "not_modified",
            Self::Range => "range",
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
        }
    }

    /// Entries fileserver may cache in this scenario (`[cache] max_entries`
    /// and `max_open`); `None` leaves the daemon's defaults.
    pub fn cache_entries(self) -> Option<usize> {
        match self {
            Self::CachePressure => Some(PRESSURE_CACHE_ENTRIES),
            _ => Some(DEFAULT_CACHE_ENTRIES),
        }
    }

    /// nginx's `open_file_cache max=`: the same descriptor bound as fileserver's.
    pub fn nginx_open_file_cache(self) -> usize {
        self.cache_entries().unwrap_or(DEFAULT_CACHE_ENTRIES)
    }

    /// What the report's headline compares.
    pub fn headline(self) -> Headline {
        Headline::ReqPerS
    }

    /// The status every timed response must have.
    pub fn expected_status(self) -> u16 {
        match self {
            Self::NotModified => 304,
            Self::Range => 206,
            _ => 200,
        }
    }

    /// Body bytes of one successful response.
    pub fn body_len(self) -> usize {
        match self {
            Self::SmallRandom => tree::SMALL_SIZE,
            Self::Large => LARGE_SIZE,
            Self::CachePressure => tree::PRESSURE_SIZE,
            Self::NotModified => 0,
            Self::Range => RANGE_LEN,
        }
    }

    /// The URL path(s) oha requests, as an oha `--rand-regex-url` pattern
    /// (path part only; oha treats `.` as a literal dot and `\.` as garbage,
    /// checked with `oha --dump-urls`) or a fixed path.
    pub fn oha_path(self) -> OhaPath {
        match self {
            Self::SmallRandom => OhaPath::Regex("/small/[0-9]{3}.bin"),
            Self::CachePressure => OhaPath::Regex("/pressure/[0-9]{4}.bin"),
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
        assert!(err.contains("small_random"), "{err}");
    }
}

//! `[compression]`: which files are compressed on the fly, into which
//! codings, at which levels (`decide::CompressionOptions`, built here).

use super::{err, ConfigError};
use decide::CompressionOptions;
use httpfile::mime::ContentCoding;
use serde::{Deserialize, Serialize};

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

impl CompressionConfig {
    /// The options the engines use (`None` when off); problems go to `e`.
    pub(super) fn validate(&self, e: &mut Vec<ConfigError>) -> Option<CompressionOptions> {
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

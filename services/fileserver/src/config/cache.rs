//! `[cache]`: the path cache (`pathcache::Config`, built here) and the
//! change watcher.

use super::restart::Restart;
use super::values::{dur, range};
use super::{err, ConfigError};
use serde::{Deserialize, Serialize};

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

/// The watcher thread starts with the file manager; the bounds apply in
/// place at a reload.
pub(super) const RESTART: &[Restart] = &[Restart::key("cache.watch")];

impl CacheConfig {
    /// The path cache's configuration, with one shard per worker
    /// (`shards`) and `variant_budget` bytes of compressed variants.
    pub(super) fn validate(
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

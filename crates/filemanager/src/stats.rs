//! What a manager counts: the [`Stats`] snapshot summed from the
//! descriptor table, the path caches, the backend and the manager's own
//! counters, and its export through the `metrics` facade. Reads counters
//! only; changes nothing.

use std::sync::atomic::Ordering;

use crate::backend::BackendStats;
use crate::changes::WatchStats;
use crate::config::BackendKind;
use crate::shared::FileManager;

/// Everything a [`FileManager`] counts, summed at call time.
#[derive(Clone, Debug)]
pub struct Stats {
    /// The backend that runs.
    pub backend: BackendKind,
    /// Descriptor table counters.
    pub fdtable: fdtable::Stats,
    /// Path cache counters.
    pub cache: pathcache::Stats,
    /// Backend operations and bytes read.
    pub io: BackendStats,
    /// Descriptors held by this manager now.
    pub open_fds: u64,
    /// The descriptor budget.
    pub fd_budget: u64,
    /// The soft `RLIMIT_NOFILE` after raising.
    pub fd_limit: u64,
    /// Opens that hit `EMFILE`/`ENFILE` or the budget and were recovered by
    /// evicting and reaping.
    pub emfile_recoveries: u64,
    /// Opens refused with [`OpenError::Exhausted`](crate::OpenError::Exhausted).
    pub exhausted: u64,
    /// Reaper passes that released at least one descriptor.
    pub reaper_batches: u64,
    /// Descriptors released by the reaper.
    pub reaped: u64,
    /// `close` errors of descriptors the reaper closed as an io_uring batch
    /// (the table's `release_errors` counts the others).
    pub batched_close_errors: u64,
    /// The change watcher's counters, when it runs.
    pub watch: Option<WatchStats>,
    /// Times the root path, a symlink re-pointed, was followed to a new
    /// directory.
    pub root_switches: u64,
    /// Directories whose precompressed siblings are known (`census.rs`).
    pub census_dirs: u64,
    /// Directory listings taken for that census.
    pub census_scans: u64,
}

impl FileManager {
    /// Counters of the table, the cache, the backend and this manager.
    pub fn stats(&self) -> Stats {
        let s = &self.shared;
        let census = s.census.stats();
        Stats {
            backend: s.kind,
            fdtable: s.table.stats(),
            cache: s.cache.stats(),
            io: s.counters.snapshot(),
            open_fds: s.open_fds.load(Ordering::Relaxed) as u64,
            fd_budget: s.budget as u64,
            fd_limit: s.limit,
            emfile_recoveries: s.emfile_recoveries.load(Ordering::Relaxed),
            exhausted: s.exhausted.load(Ordering::Relaxed),
            reaper_batches: s.reaper_batches.load(Ordering::Relaxed),
            reaped: s.reaped.load(Ordering::Relaxed),
            batched_close_errors: s.batched_close_errors.load(Ordering::Relaxed),
            watch: s.watcher.as_ref().map(|w| w.stats()),
            root_switches: s.root_switches.load(Ordering::Relaxed),
            census_dirs: census.entries,
            census_scans: census.loads,
        }
    }

    /// Sets every counter and gauge through the `metrics` facade from
    /// [`FileManager::stats`]; call it when `/metrics` is scraped.
    pub fn export_metrics(&self, prefix: &str) {
        let st = self.stats();
        self.describe(prefix);
        let n = |s: &str| format!("{prefix}_{s}");
        let c = &st.cache;
        metrics::counter!(n("cache_hits_total")).absolute(c.hits);
        metrics::counter!(n("cache_misses_total")).absolute(c.misses);
        metrics::counter!(n("cache_negative_hits_total")).absolute(c.negative_hits);
        metrics::counter!(n("cache_evictions_total")).absolute(c.evictions);
        metrics::counter!(n("cache_unadmitted_total")).absolute(c.unadmitted);
        metrics::counter!(n("cache_revalidations_total")).absolute(c.revalidations);
        metrics::counter!(n("cache_invalidations_total")).absolute(c.invalidations);
        metrics::gauge!(n("cache_entries")).set(c.entries as f64);
        metrics::counter!(n("variant_hits_total")).absolute(c.variant_hits);
        metrics::counter!(n("variant_compressions_total")).absolute(c.variants_made);
        metrics::counter!(n("variant_bytes_saved_total")).absolute(c.variant_bytes_saved);
        metrics::counter!(n("variant_evictions_total")).absolute(c.variant_evictions);
        metrics::gauge!(n("variant_bytes")).set(c.variant_bytes as f64);
        metrics::gauge!(n("variant_budget_bytes")).set(c.variant_budget as f64);
        metrics::counter!(n("contention_total"), "component" => "fdtable")
            .absolute(st.fdtable.contention_events);
        metrics::counter!(n("contention_total"), "component" => "pathcache")
            .absolute(c.contention_events);
        metrics::gauge!(n("fds_open")).set(st.open_fds as f64);
        metrics::gauge!(n("fd_budget")).set(st.fd_budget as f64);
        metrics::gauge!(n("fd_limit")).set(st.fd_limit as f64);
        metrics::counter!(n("fd_allocations_total")).absolute(st.fdtable.allocations);
        metrics::counter!(n("fd_releases_total"), "path" => "close")
            .absolute(st.fdtable.sync_releases);
        metrics::counter!(n("fd_releases_total"), "path" => "deferred")
            .absolute(st.fdtable.deferred_releases);
        metrics::counter!(n("fd_release_errors_total"))
            .absolute(st.fdtable.release_errors + st.batched_close_errors);
        metrics::counter!(n("fd_stale_total")).absolute(st.fdtable.stale_rejections);
        metrics::gauge!(n("deferred_release_queue_depth"))
            .set(st.fdtable.deferred_queue_depth as f64);
        metrics::counter!(n("emfile_recoveries_total")).absolute(st.emfile_recoveries);
        metrics::counter!(n("fd_exhausted_total")).absolute(st.exhausted);
        for (label, v) in BackendStats::ops_labels().into_iter().zip(st.io.ops) {
            metrics::counter!(n("backend_ops_total"), "op" => label).absolute(v);
        }
        metrics::counter!(n("read_bytes_total")).absolute(st.io.read_bytes);
        metrics::counter!(n("reaper_batches_total")).absolute(st.reaper_batches);
        metrics::gauge!(n("io_backend_info"), "backend" => st.backend.to_string()).set(1.0);
        let w = st.watch.unwrap_or_default();
        metrics::gauge!(n("watch_dirs")).set(w.dirs as f64);
        metrics::counter!(n("watch_events_total")).absolute(w.events);
        metrics::counter!(n("watch_resets_total")).absolute(w.resets);
        metrics::counter!(n("root_switches_total")).absolute(st.root_switches);
        for (cause, count) in [
            ("path", w.paths_dropped),
            ("tree", w.trees_dropped),
            ("load_race", w.races),
        ] {
            metrics::counter!(n("watch_invalidations_total"), "cause" => cause).absolute(count);
        }
        metrics::gauge!(n("census_dirs")).set(st.census_dirs as f64);
        metrics::counter!(n("census_scans_total")).absolute(st.census_scans);
    }

    fn describe(&self, prefix: &str) {
        let mut d = self
            .shared
            .described
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if d.as_deref() == Some(prefix) {
            return;
        }
        *d = Some(prefix.to_string());
        let n = |s: &str| format!("{prefix}_{s}");
        use metrics::{describe_counter, describe_gauge, Unit};
        describe_counter!(
            n("cache_hits_total"),
            "Path cache lookups answered from a fresh entry."
        );
        describe_gauge!(
            n("watch_dirs"),
            "Directories watched for changes (0 when the watcher is off)."
        );
        describe_counter!(
            n("watch_events_total"),
            "Change events seen under the root; each makes cached descriptors checked again."
        );
        describe_counter!(
            n("watch_resets_total"),
            "Times every watch and every cache entry was dropped (an event queue overflow)."
        );
        describe_counter!(
            n("root_switches_total"),
            "Times the root path (a symlink, re-pointed) was followed to a new directory; every cached answer was dropped."
        );
        describe_counter!(
            n("watch_invalidations_total"),
            "Cache invalidations by change events, by cause: path (one file changed), tree (a directory or a link to one moved, created or deleted; an overflow), load_race (an entry dropped right after its load, which an event overtook)."
        );
        describe_gauge!(
            n("census_dirs"),
            "Directories whose precompressed siblings are known from a listing."
        );
        describe_counter!(
            n("census_scans_total"),
            "Directory listings taken to learn which precompressed siblings a directory holds."
        );
        describe_counter!(
            n("cache_misses_total"),
            "Path cache lookups that had to load from the filesystem."
        );
        describe_counter!(
            n("cache_negative_hits_total"),
            "Lookups answered from a cached not-found/forbidden entry."
        );
        describe_counter!(
            n("cache_evictions_total"),
            "Path cache entries evicted (capacity, fd budget or EMFILE)."
        );
        describe_counter!(
            n("cache_unadmitted_total"),
            "Misses served without caching: a path's first miss while the cache was full."
        );
        describe_counter!(
            n("cache_revalidations_total"),
            "Entries re-stat'ed after their validity period."
        );
        describe_counter!(
            n("cache_invalidations_total"),
            "Entries dropped because the file changed or on request."
        );
        describe_gauge!(n("cache_entries"), "Entries in the path cache.");
        describe_counter!(
            n("variant_hits_total"),
            "Responses sent from a compressed variant an earlier request made."
        );
        describe_counter!(
            n("variant_compressions_total"),
            "Compressed variants made (variant misses: one per file version and coding, shared by concurrent requests)."
        );
        describe_counter!(
            n("variant_bytes_saved_total"),
            Unit::Bytes,
            "File size minus variant size, summed over responses sent from a compressed variant."
        );
        describe_counter!(
            n("variant_evictions_total"),
            "Compressed variants dropped to stay within the variant budget."
        );
        describe_gauge!(
            n("variant_bytes"),
            Unit::Bytes,
            "Bytes of compressed variants counted in the variant budget (kept, or evicted and still being sent)."
        );
        describe_gauge!(
            n("variant_budget_bytes"),
            Unit::Bytes,
            "The variant budget: variant_bytes never exceeds it."
        );
        describe_counter!(
            n("contention_total"),
            "Lock waits or CAS retries, by component."
        );
        describe_gauge!(n("fds_open"), "File descriptors held by the file manager.");
        describe_gauge!(
            n("fd_budget"),
            "File descriptors the file manager may hold (RLIMIT_NOFILE less headroom)."
        );
        describe_gauge!(
            n("fd_limit"),
            "Soft RLIMIT_NOFILE after raising it to the hard limit."
        );
        describe_counter!(
            n("fd_allocations_total"),
            "Descriptor table slots allocated."
        );
        describe_counter!(
            n("fd_releases_total"),
            "Descriptors released, by path: close (synchronous) or deferred (drop, reaper)."
        );
        describe_counter!(
            n("fd_release_errors_total"),
            "close(2) errors seen while releasing descriptors."
        );
        describe_counter!(
            n("fd_stale_total"),
            "Operations refused because the descriptor was stale."
        );
        describe_gauge!(
            n("deferred_release_queue_depth"),
            "Dropped descriptors waiting for the reaper."
        );
        describe_counter!(
            n("emfile_recoveries_total"),
            "Opens that hit EMFILE/ENFILE or the budget and recovered by evicting and reaping."
        );
        describe_counter!(
            n("fd_exhausted_total"),
            "Opens refused because descriptors stayed exhausted after recovery."
        );
        describe_counter!(n("backend_ops_total"), "I/O backend operations by kind.");
        describe_counter!(
            n("read_bytes_total"),
            Unit::Bytes,
            "Bytes read from files by the backend."
        );
        describe_counter!(
            n("reaper_batches_total"),
            "Reaper passes that released at least one descriptor."
        );
        describe_gauge!(
            n("io_backend_info"),
            "The I/O backend that runs (label backend), always 1."
        );
    }
}

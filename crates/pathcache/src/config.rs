//! The cache's settings: [`Config`] as its user gives it, and the atomic
//! copy the cache reads on every lookup (`Limits`), which
//! [`PathCache::set_limits`] changes while the cache runs. Touches the
//! cache only to read and store its settings and to evict down to lowered
//! bounds.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use crate::evict::EvictFor;
use crate::{PathCache, RefLayout};

/// Sizes and times of a [`PathCache`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Shards of the in-flight load registry (statistics are per thread);
    /// default: available parallelism.
    pub shards: usize,
    /// Maximum entries in the cache (positive and negative); exact. Once
    /// the cache is full, a path's first miss is loaded for its caller and
    /// not inserted; a second miss soon after inserts it (`Stats::unadmitted`).
    pub max_entries: usize,
    /// Maximum handles held by entries (including removed entries in use).
    pub max_open: usize,
    /// How long an entry is trusted before one `stat` re-checks it (default 1 s).
    pub valid: Duration,
    /// How long a not-found / forbidden result is cached (default 1 s).
    pub negative_ttl: Duration,
    /// Files up to this size are kept in memory (0 disables). A file is
    /// copied on its second use (through [`Loader::read`](crate::Loader::read)), not when it is
    /// first loaded: under a working set larger than the cache most entries
    /// are evicted unused, and the copy was wasted on them. A path used
    /// before (promoted from `min_uses`, or a changed file reloaded) is
    /// copied as it loads.
    pub small_file_max: u64,
    /// Total bytes of small files kept in memory.
    pub small_bytes_budget: u64,
    /// A path gets an open handle on its `min_uses`-th use (0 or 1: at once);
    /// before that only its metadata is cached.
    pub min_uses: u32,
    /// Total bytes of kept variants ([`variant`](crate::variant)); 0 keeps none.
    pub variant_budget: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            shards: std::thread::available_parallelism().map_or(4, |n| n.get()),
            max_entries: 65_536,
            max_open: 4_096,
            valid: Duration::from_secs(1),
            negative_ttl: Duration::from_secs(1),
            small_file_max: 16 * 1024,
            small_bytes_budget: 64 * 1024 * 1024,
            min_uses: 1,
            variant_budget: 32 * 1024 * 1024,
        }
    }
}

/// The settings [`PathCache::set_limits`] can change while the cache runs,
/// each in its own atomic (read with `Relaxed` loads: a reader may act on
/// the old or the new value of one setting for a moment, never on a torn
/// one). `shards` is fixed at construction.
#[derive(Debug)]
pub(crate) struct Limits {
    max_entries: AtomicUsize,
    max_open: AtomicUsize,
    valid_ms: AtomicU64,
    negative_ttl_ms: AtomicU64,
    small_file_max: AtomicU64,
    small_bytes_budget: AtomicU64,
    min_uses: AtomicU32,
    variant_budget: AtomicU64,
}

impl Limits {
    pub(crate) fn new(config: &Config) -> Self {
        let limits = Limits {
            max_entries: AtomicUsize::new(0),
            max_open: AtomicUsize::new(0),
            valid_ms: AtomicU64::new(0),
            negative_ttl_ms: AtomicU64::new(0),
            small_file_max: AtomicU64::new(0),
            small_bytes_budget: AtomicU64::new(0),
            min_uses: AtomicU32::new(0),
            variant_budget: AtomicU64::new(0),
        };
        limits.store(config);
        limits
    }

    pub(crate) fn store(&self, config: &Config) {
        let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        self.max_entries
            .store(config.max_entries, Ordering::Relaxed);
        self.max_open.store(config.max_open, Ordering::Relaxed);
        self.valid_ms.store(millis(config.valid), Ordering::Relaxed);
        self.negative_ttl_ms
            .store(millis(config.negative_ttl), Ordering::Relaxed);
        self.small_file_max
            .store(config.small_file_max, Ordering::Relaxed);
        self.small_bytes_budget
            .store(config.small_bytes_budget, Ordering::Relaxed);
        self.min_uses.store(config.min_uses, Ordering::Relaxed);
        self.variant_budget
            .store(config.variant_budget, Ordering::Relaxed);
    }

    pub(crate) fn max_entries(&self) -> usize {
        self.max_entries.load(Ordering::Relaxed)
    }

    pub(crate) fn max_open(&self) -> usize {
        self.max_open.load(Ordering::Relaxed)
    }

    #[inline(always)]
    pub(crate) fn valid_ms(&self) -> u64 {
        self.valid_ms.load(Ordering::Relaxed)
    }

    pub(crate) fn negative_ttl_ms(&self) -> u64 {
        self.negative_ttl_ms.load(Ordering::Relaxed)
    }

    pub(crate) fn small_file_max(&self) -> u64 {
        self.small_file_max.load(Ordering::Relaxed)
    }

    pub(crate) fn small_bytes_budget(&self) -> u64 {
        self.small_bytes_budget.load(Ordering::Relaxed)
    }

    pub(crate) fn min_uses(&self) -> u32 {
        self.min_uses.load(Ordering::Relaxed)
    }

    pub(crate) fn variant_budget(&self) -> u64 {
        self.variant_budget.load(Ordering::Relaxed)
    }
}

impl<V: Send + Sync + 'static, L: RefLayout> PathCache<V, L> {
    /// The configuration in use (a snapshot: [`set_limits`](Self::set_limits)
    /// may change it).
    pub fn config(&self) -> Config {
        let l = &self.limits;
        Config {
            shards: self.shards,
            max_entries: l.max_entries(),
            max_open: l.max_open(),
            valid: Duration::from_millis(l.valid_ms()),
            negative_ttl: Duration::from_millis(l.negative_ttl_ms()),
            small_file_max: l.small_file_max(),
            small_bytes_budget: l.small_bytes_budget(),
            min_uses: l.min_uses(),
            variant_budget: l.variant_budget(),
        }
    }

    /// Changes the bounds and times while the cache runs (a config reload);
    /// `config.shards` is ignored (fixed at construction).
    ///
    /// New values apply to the next lookup or load. Lowering `max_entries` or
    /// `max_open` evicts unused entries down to the new bound now (entries in
    /// use leave as their users drop them, at later inserts); lowering
    /// `small_bytes_budget` stops new copies until evictions bring the bytes
    /// under it. A shorter `valid` makes older entries revalidate at their
    /// next hit. A lower `variant_budget` drops unused variants down to it
    /// now. Returns the entries evicted now.
    pub fn set_limits(&self, config: &Config) -> usize {
        self.limits.store(config);
        // Variants first: a lower budget drops unused ones down to it now.
        let variants = self.shared.variant_bytes.load(Ordering::Relaxed);
        if variants > config.variant_budget {
            self.evict_variants(variants - config.variant_budget);
        }
        let mut evicted = 0;
        let entries = self.len();
        if entries > config.max_entries {
            evicted += self.evict(EvictFor::Entries, entries - config.max_entries);
        }
        let handles = self.shared.open_handles.load(Ordering::Relaxed);
        if handles > config.max_open {
            evicted += self.evict(EvictFor::Handles, handles - config.max_open);
        }
        evicted
    }
}

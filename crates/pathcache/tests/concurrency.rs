//! Concurrency: single-flight loading, cancellation, and a bounded
//! multi-thread stress test whose counts must add up.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pathcache::{
    Borrowed, Config, EntryRef, FileMeta, Loaded, Loader, Lookup, Negative, PathCache,
};

/// A handle whose drops are counted.
#[derive(Debug)]
struct Handle(Arc<AtomicUsize>);
impl Drop for Handle {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A loader that blocks each load until the test hands out a permit.
struct GatedLoader {
    gate: tokio::sync::Semaphore,
    loads: AtomicUsize,
    drops: Arc<AtomicUsize>,
}

impl GatedLoader {
    /// A loader whose loads wait until the test adds permits to `gate`.
    fn closed() -> Self {
        GatedLoader {
            gate: tokio::sync::Semaphore::new(0),
            loads: AtomicUsize::new(0),
            drops: Default::default(),
        }
    }
}

impl Loader<Handle> for GatedLoader {
    type Error = std::convert::Infallible;
    async fn load(
        &self,
        _path: &str,
        open: bool,
        _small: Option<u64>,
    ) -> Result<Loaded<Handle>, Self::Error> {
        self.loads.fetch_add(1, Ordering::SeqCst);
        self.gate.acquire().await.unwrap().forget();
        let meta = FileMeta {
            size: 3,
            mtime_ns: 1,
            ctime_ns: 1,
            dev: 1,
            ino: 1,
        };
        Ok(Loaded::File {
            meta,
            label: "text/plain",
            handle: open.then(|| Handle(self.drops.clone())),
            bytes: None,
        })
    }
    async fn stat(&self, _path: &str) -> Result<Option<FileMeta>, Self::Error> {
        Ok(Some(FileMeta {
            size: 3,
            mtime_ns: 1,
            ctime_ns: 1,
            dev: 1,
            ino: 1,
        }))
    }
}

fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Advances a xorshift64 state: cheap per-thread randomness for the stress
/// tests, reproducible from the seed.
fn xorshift(x: &mut u64) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
}

#[test]
fn concurrent_misses_on_one_path_load_once() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let cache = Arc::new(PathCache::<Handle>::new(Config::default()));
    let loader = Arc::new(GatedLoader::closed());
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (cache, loader) = (cache.clone(), loader.clone());
            rt.spawn(async move {
                match cache.get_or_load("hot.css", &*loader).await.unwrap() {
                    Lookup::Hit(e) => e,
                    Lookup::Negative(_) => panic!("file expected"),
                }
            })
        })
        .collect();
    // Every caller other than the leader has joined the flight.
    wait_until("7 waiters", || cache.stats().contention_events >= 7);
    assert_eq!(loader.loads.load(Ordering::SeqCst), 1);
    loader.gate.add_permits(100);
    let entries: Vec<EntryRef<Handle>> =
        tasks.into_iter().map(|t| rt.block_on(t).unwrap()).collect();
    assert_eq!(
        loader.loads.load(Ordering::SeqCst),
        1,
        "one load for 8 concurrent misses"
    );
    assert!(entries.iter().all(|e| EntryRef::ptr_eq(e, &entries[0])));
    let s = cache.stats();
    assert_eq!(s.misses, 8);
    assert_eq!(s.open_handles, 1);
}

#[test]
fn a_cancelled_leader_hands_over_to_a_waiter() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let cache = Arc::new(PathCache::<Handle>::new(Config::default()));
    let loader = Arc::new(GatedLoader::closed());
    let (c, l) = (cache.clone(), loader.clone());
    let leader = rt.spawn(async move { c.get_or_load("x", &*l).await.map(|_| ()) });
    wait_until("leader loading", || {
        loader.loads.load(Ordering::SeqCst) == 1
    });
    let (c, l) = (cache.clone(), loader.clone());
    let waiter = rt.spawn(async move {
        c.get_or_load("x", &*l)
            .await
            .map(|r| matches!(r, Lookup::Hit(_)))
    });
    wait_until("waiter joined", || cache.stats().contention_events >= 1);
    leader.abort();
    assert!(rt.block_on(leader).unwrap_err().is_cancelled());
    wait_until("waiter took over", || {
        loader.loads.load(Ordering::SeqCst) == 2
    });
    loader.gate.add_permits(1);
    assert!(rt.block_on(waiter).unwrap().unwrap());
    assert_eq!(cache.len(), 1);
}

/// Real files whose content is one repeated letter, rewritten in place with a
/// new letter and a new length, so a mixed copy is detectable.
struct FsLoader {
    root: std::path::PathBuf,
    opens: AtomicUsize,
    drops: Arc<AtomicUsize>,
}

fn meta_of(m: &std::fs::Metadata) -> FileMeta {
    use std::os::unix::fs::MetadataExt;
    FileMeta {
        size: m.size(),
        mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
        ctime_ns: m.ctime() * 1_000_000_000 + m.ctime_nsec(),
        dev: m.dev(),
        ino: m.ino(),
    }
}

impl Loader<Handle> for FsLoader {
    type Error = std::io::Error;
    async fn load(
        &self,
        path: &str,
        open: bool,
        read_small: Option<u64>,
    ) -> std::io::Result<Loaded<Handle>> {
        use std::io::Read;
        let mut file = match std::fs::File::open(self.root.join(path)) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Loaded::Negative(Negative::NotFound))
            }
            Err(e) => return Err(e),
        };
        let meta = meta_of(&file.metadata()?);
        let bytes = match read_small {
            Some(max) if meta.size <= max => {
                let mut buf = Vec::new();
                file.read_to_end(&mut buf)?;
                Some(buf)
            }
            _ => None,
        };
        let handle = open.then(|| {
            self.opens.fetch_add(1, Ordering::SeqCst);
            Handle(self.drops.clone())
        });
        Ok(Loaded::File {
            meta,
            label: "text/plain",
            handle,
            bytes,
        })
    }
    async fn stat(&self, path: &str) -> std::io::Result<Option<FileMeta>> {
        match std::fs::metadata(self.root.join(path)) {
            Ok(m) => Ok(Some(meta_of(&m))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }
}

#[test]
fn stress_counts_add_up_and_bounds_hold() {
    const THREADS: usize = 4;
    const OPS: usize = 4000;
    const FILES: usize = 48;
    let dir = tempfile::tempdir().unwrap();
    for i in 0..FILES {
        std::fs::write(dir.path().join(format!("f{i}")), vec![b'a'; 10 + i]).unwrap();
    }
    let loader = Arc::new(FsLoader {
        root: dir.path().into(),
        opens: AtomicUsize::new(0),
        drops: Default::default(),
    });
    let config = Config {
        shards: 4,
        max_entries: 20,
        max_open: 10,
        valid: Duration::from_millis(2),
        negative_ttl: Duration::from_millis(5),
        small_file_max: 64,
        small_bytes_budget: 400,
        min_uses: 2,
        variant_budget: 0,
    };
    let cache = Arc::new(PathCache::<Handle>::new(config.clone()));
    let lookups = AtomicUsize::new(0);
    let root = dir.path();
    let rewrites = Mutex::new(HashMap::<usize, u8>::new());
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (cache, loader, lookups, rewrites, config) =
                (&cache, &loader, &lookups, &rewrites, &config);
            s.spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                let mut held: Vec<EntryRef<Handle>> = Vec::new();
                let mut x = 0x9e37_79b9_u64.wrapping_mul(t as u64 + 1);
                for op in 0..OPS {
                    xorshift(&mut x);
                    let file = (x % (FILES as u64 + 4)) as usize; // a few paths do not exist
                    let path = format!("f{file}");
                    match x % 100 {
                        0..=79 => {
                            lookups.fetch_add(1, Ordering::Relaxed);
                            match rt.block_on(cache.get_or_load(&path, &**loader)).unwrap() {
                                Lookup::Hit(e) => {
                                    if let Some(b) = e.bytes() {
                                        assert_eq!(
                                            b.len() as u64,
                                            e.meta().size,
                                            "copy matches its version"
                                        );
                                        assert!(
                                            b.iter().all(|&c| c == b[0]),
                                            "never a mix of two versions"
                                        );
                                    }
                                    held.push(e);
                                    if held.len() > 3 {
                                        held.remove(0);
                                    }
                                }
                                Lookup::Negative(n) => assert_eq!(n, Negative::NotFound),
                            }
                        }
                        80..=89 => {
                            lookups.fetch_add(1, Ordering::Relaxed);
                            drop(cache.get(&path));
                        }
                        90..=93 => {
                            cache.invalidate(&path);
                        }
                        94..=95 => {
                            cache.evict_unused(2);
                        }
                        _ if file < FILES => {
                            let mut r = rewrites.lock().unwrap();
                            let v = r.entry(file).or_insert(0);
                            *v = v.wrapping_add(1);
                            let letter = b'a' + (*v % 26);
                            // In place (truncate + write): readers can race it.
                            std::fs::write(root.join(&path), vec![letter; 10 + (op % 50)]).unwrap();
                        }
                        _ => held.clear(),
                    }
                    // +THREADS: an insert racing a removal of its own key may overshoot by one.
                    assert!(cache.len() <= config.max_entries + THREADS);
                    assert!(cache.open_handles() <= config.max_open);
                }
            });
        }
    });
    let s = cache.stats();
    assert_eq!(s.lookups, lookups.load(Ordering::Relaxed) as u64);
    assert_eq!(s.lookups, s.hits + s.misses + s.negative_hits);
    assert!(
        s.hits > 0 && s.misses > 0 && s.evictions > 0 && s.revalidations > 0,
        "{s:?}"
    );
    let opens = loader.opens.load(Ordering::SeqCst);
    let drops = loader.drops.load(Ordering::SeqCst);
    assert_eq!(opens, drops + cache.open_handles(), "{s:?}");
    assert!(s.small_bytes <= 400);
    drop(cache);
    assert_eq!(
        loader.opens.load(Ordering::SeqCst),
        loader.drops.load(Ordering::SeqCst),
        "every handle released"
    );
}

/// A handle that records its own release in a shared registry, so a borrower
/// can check that the handle it reads was not released under it.
#[derive(Debug)]
struct TrackedHandle {
    id: usize,
    registry: Arc<Vec<std::sync::atomic::AtomicU8>>,
}

const OPEN: u8 = 1;
const RELEASED: u8 = 2;

impl Drop for TrackedHandle {
    fn drop(&mut self) {
        let was = self.registry[self.id].swap(RELEASED, Ordering::SeqCst);
        assert_eq!(was, OPEN, "handle {} released twice", self.id);
    }
}

/// Every path exists; each load opens a new tracked handle.
struct TrackingLoader {
    next: AtomicUsize,
    registry: Arc<Vec<std::sync::atomic::AtomicU8>>,
}

impl Loader<TrackedHandle> for TrackingLoader {
    type Error = std::convert::Infallible;
    async fn load(
        &self,
        _path: &str,
        open: bool,
        _small: Option<u64>,
    ) -> Result<Loaded<TrackedHandle>, Self::Error> {
        let handle = open.then(|| {
            let id = self.next.fetch_add(1, Ordering::SeqCst);
            self.registry[id].store(OPEN, Ordering::SeqCst);
            TrackedHandle {
                id,
                registry: self.registry.clone(),
            }
        });
        Ok(Loaded::File {
            meta: FileMeta {
                size: 1,
                mtime_ns: 1,
                ctime_ns: 1,
                dev: 1,
                ino: 1,
            },
            label: "text/plain",
            handle,
            bytes: None,
        })
    }
    async fn stat(&self, _path: &str) -> Result<Option<FileMeta>, Self::Error> {
        Ok(None)
    }
}

/// Borrowers (`get_with`) race removals (invalidate, eviction by both bounds,
/// `evict_unused`) and counted users, with 24 paths in 16 entries, so entry
/// memory is freed and reused for other paths all the time: no lookup ever
/// gets another path's entry, no handle is ever seen released inside a
/// borrow, every handle is released exactly once, and the counts add up.
#[test]
fn stress_borrows_never_see_a_released_handle() {
    const THREADS: usize = 4;
    const OPS: usize = 20_000;
    const PATHS: u64 = 24;
    let registry: Arc<Vec<_>> = Arc::new(
        (0..THREADS * OPS)
            .map(|_| std::sync::atomic::AtomicU8::new(0))
            .collect(),
    );
    let loader = TrackingLoader {
        next: AtomicUsize::new(0),
        registry: registry.clone(),
    };
    let cache = PathCache::<TrackedHandle>::new(Config {
        shards: 4,
        max_entries: 16,
        max_open: 8,
        valid: Duration::from_secs(3600),
        negative_ttl: Duration::from_secs(3600),
        small_file_max: 0,
        small_bytes_budget: 0,
        min_uses: 1,
        variant_budget: 0,
    });
    let lookups = AtomicUsize::new(0);
    let borrowed = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (cache, loader, lookups, borrowed) = (&cache, &loader, &lookups, &borrowed);
            let registry = &registry;
            s.spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                let mut held: Vec<EntryRef<TrackedHandle>> = Vec::new();
                let mut x = 0x2545_f491_u64.wrapping_mul(t as u64 + 1);
                for _ in 0..OPS {
                    xorshift(&mut x);
                    let path = format!("p{}", x % PATHS);
                    match (x >> 32) % 100 {
                        0..=59 => {
                            lookups.fetch_add(1, Ordering::Relaxed);
                            cache.get_with(&path, |b| {
                                let Borrowed::Hit(e) = b else {
                                    panic!("no negatives")
                                };
                                assert_eq!(e.path(), path, "another path's entry");
                                if let Some(h) = e.handle() {
                                    let id = h.id;
                                    assert_eq!(registry[id].load(Ordering::SeqCst), OPEN);
                                    for _ in 0..50 {
                                        std::hint::spin_loop();
                                    }
                                    assert_eq!(registry[id].load(Ordering::SeqCst), OPEN);
                                    borrowed.fetch_add(1, Ordering::Relaxed);
                                }
                            });
                        }
                        60..=74 => {
                            lookups.fetch_add(1, Ordering::Relaxed);
                            let l = rt.block_on(cache.get_or_load(&path, loader)).unwrap();
                            if let Lookup::Hit(e) = l {
                                assert_eq!(e.path(), path, "another path's entry");
                                held.push(e);
                                if held.len() > 2 {
                                    held.remove(0);
                                }
                            }
                        }
                        75..=84 => {
                            cache.invalidate(&path);
                        }
                        85..=89 => {
                            cache.evict_unused(2);
                        }
                        _ => held.clear(),
                    }
                }
            });
        }
    });
    let s = cache.stats();
    assert_eq!(s.lookups, lookups.load(Ordering::Relaxed) as u64);
    assert_eq!(s.lookups, s.hits + s.misses + s.negative_hits);
    assert!(
        borrowed.load(Ordering::Relaxed) > 0 && s.evictions > 0 && s.invalidations > 0,
        "{s:?}"
    );
    let opened = loader.next.load(Ordering::SeqCst);
    let released = registry[..opened]
        .iter()
        .filter(|r| r.load(Ordering::SeqCst) == RELEASED)
        .count();
    assert_eq!(opened, released + cache.open_handles(), "{s:?}");
    assert!(cache.open_handles() <= 8, "{s:?}");
    drop(cache);
    assert!(
        registry[..opened]
            .iter()
            .all(|r| r.load(Ordering::SeqCst) == RELEASED),
        "every handle released once the cache is gone"
    );
}

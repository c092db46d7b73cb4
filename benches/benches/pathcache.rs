//! Criterion benchmarks for `pathcache`, side by side with the alternatives.
//!
//! Run: `cargo bench -p benches --bench pathcache -- --quick`

use std::convert::Infallible;
use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dashmap::DashMap;
use pathcache::{Config, FileMeta, Loaded, Loader, Lookup, PathCache, RefLayout, Unpadded};

const ENTRIES: usize = 1000;

/// The value the map alternatives hold: what a cache entry carries.
#[allow(dead_code)] // fields exist to give the value a realistic size
#[derive(Debug)]
struct Meta {
    meta: FileMeta,
    mime: &'static str,
    fd: u64,
}

fn meta_of(i: usize) -> FileMeta {
    FileMeta {
        size: 1000 + i as u64,
        mtime_ns: 1,
        ctime_ns: 1,
        dev: 1,
        ino: i as u64,
    }
}

/// A loader that answers from memory, so only the cache is measured.
struct MemLoader;
impl Loader<u64> for MemLoader {
    type Error = Infallible;
    async fn load(
        &self,
        path: &str,
        open: bool,
        _small: Option<u64>,
    ) -> Result<Loaded<u64>, Infallible> {
        let i: usize = path
            .trim_start_matches("static/asset-")
            .trim_end_matches(".js")
            .parse()
            .unwrap_or(0);
        Ok(Loaded::File {
            meta: meta_of(i),
            mime: "text/javascript",
            handle: open.then_some(i as u64),
            bytes: None,
        })
    }
    async fn stat(&self, path: &str) -> Result<Option<FileMeta>, Infallible> {
        let i: usize = path
            .trim_start_matches("static/asset-")
            .trim_end_matches(".js")
            .parse()
            .unwrap_or(0);
        Ok(Some(meta_of(i)))
    }
}

fn keys() -> Vec<String> {
    (0..ENTRIES)
        .map(|i| format!("static/asset-{i}.js"))
        .collect()
}

/// A filled cache. `valid` is an hour so the measured loop sees only hits
/// (revalidation is a once-per-second slow path, not what these groups measure).
fn filled_cache<L: RefLayout>(keys: &[String]) -> PathCache<u64, L> {
    let config = Config {
        valid: Duration::from_secs(3600),
        small_file_max: 0,
        ..Config::default()
    };
    let cache = PathCache::<u64, L>::new(config);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for k in keys {
        rt.block_on(cache.get_or_load(k, &MemLoader)).unwrap();
    }
    cache
}

fn hit_pathcache<L: RefLayout>(cache: &PathCache<u64, L>, key: &str) {
    match cache.get(key) {
        Some(Lookup::Hit(e)) => {
            black_box(e.meta().size);
        }
        _ => panic!("expected a hit"),
    }
}

/// `pathcache_hit`: one lookup of a cached path plus the release of what the
/// lookup returned, cycling over 1000 cached paths, single thread. Fair
/// because every contender holds the same 1000 keys (String paths) and
/// returns an owned, counted handle to the value (pathcache: EntryRef;
/// dashmap: Arc clone; quick_cache: Arc clone inside `get`), which the loop
/// drops. `kernel_open_close` is what the cache saves: open(2)+close(2) of one
/// small file on tmpfs (/dev/shm).
fn bench_hit(c: &mut Criterion) {
    let keys = keys();
    let mut group = c.benchmark_group("pathcache_hit");
    group.throughput(Throughput::Elements(1));

    let cache = filled_cache::<pathcache::Padded>(&keys);
    let mut i = 0;
    group.bench_function("pathcache", |b| {
        b.iter(|| {
            i = (i + 1) % ENTRIES;
            hit_pathcache(&cache, &keys[i]);
        })
    });

    let dash: DashMap<String, Arc<Meta>> = DashMap::new();
    for (n, k) in keys.iter().enumerate() {
        dash.insert(
            k.clone(),
            Arc::new(Meta {
                meta: meta_of(n),
                mime: "text/javascript",
                fd: n as u64,
            }),
        );
    }
    group.bench_function("dashmap", |b| {
        b.iter(|| {
            i = (i + 1) % ENTRIES;
            let v = dash
                .get(keys[i].as_str())
                .map(|r| r.value().clone())
                .unwrap();
            black_box(v.meta.size);
        })
    });

    let quick: quick_cache::sync::Cache<String, Arc<Meta>> =
        quick_cache::sync::Cache::new(ENTRIES * 2);
    for (n, k) in keys.iter().enumerate() {
        quick.insert(
            k.clone(),
            Arc::new(Meta {
                meta: meta_of(n),
                mime: "text/javascript",
                fd: n as u64,
            }),
        );
    }
    group.bench_function("quick_cache", |b| {
        b.iter(|| {
            i = (i + 1) % ENTRIES;
            let v = quick.get(keys[i].as_str()).unwrap();
            black_box(v.meta.size);
        })
    });

    let dir = tempfile::Builder::new()
        .prefix("pathcache-bench")
        .tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let file = dir.path().join("asset.js");
    std::fs::write(&file, b"console.log(1)").unwrap();
    let cpath = std::ffi::CString::new(file.to_str().unwrap()).unwrap();
    group.bench_function("kernel_open_close", |b| {
        b.iter(|| {
            // SAFETY: a valid NUL-terminated path; the fd is closed right away.
            let fd = unsafe { libc::open(cpath.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
            assert!(fd >= 0);
            // SAFETY: `fd` was just opened by us and is closed exactly once.
            unsafe { libc::close(fd) };
        })
    });
    group.finish();
}

/// Runs `per_thread(iters / threads)` on `threads` threads started together
/// and returns the wall time until the last finished: the aggregate rate.
fn run_threads(threads: u64, iters: u64, per_thread: impl Fn(u64) + Sync) -> Duration {
    let per = (iters / threads).max(1);
    let barrier = Barrier::new(threads as usize);
    let start = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    let t = Instant::now();
                    per_thread(per);
                    t
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .min()
            .unwrap()
    });
    start.elapsed()
}

/// `pathcache_same_key_2threads`: two threads hit ONE cached path as fast as
/// they can; the rate is the aggregate over both (iterations are split
/// between the threads). Fair because every contender does the same
/// lookup + take-a-counted-reference + release per operation on the same key;
/// `pathcache_unpadded` is the identical cache with its two reference
/// counters placed beside the metadata every lookup reads (the pre-patch
/// dentry layout of seed 03), and `pathcache_1thread` is the baseline the
/// scaling target is measured against.
fn bench_same_key(c: &mut Criterion) {
    let keys = keys();
    let hot = keys[7].as_str();
    let mut group = c.benchmark_group("pathcache_same_key_2threads");
    group.throughput(Throughput::Elements(1));

    let padded = filled_cache::<pathcache::Padded>(&keys);
    group.bench_function("pathcache_1thread", |b| {
        b.iter_custom(|iters| {
            run_threads(1, iters, |n| {
                (0..n).for_each(|_| hit_pathcache(&padded, hot))
            })
        })
    });
    group.bench_function("pathcache", |b| {
        b.iter_custom(|iters| {
            run_threads(2, iters, |n| {
                (0..n).for_each(|_| hit_pathcache(&padded, hot))
            })
        })
    });
    let unpadded = filled_cache::<Unpadded>(&keys);
    group.bench_function("pathcache_unpadded", |b| {
        b.iter_custom(|iters| {
            run_threads(2, iters, |n| {
                (0..n).for_each(|_| hit_pathcache(&unpadded, hot))
            })
        })
    });
    let dash: DashMap<String, Arc<Meta>> = DashMap::new();
    for (n, k) in keys.iter().enumerate() {
        dash.insert(
            k.clone(),
            Arc::new(Meta {
                meta: meta_of(n),
                mime: "text/javascript",
                fd: n as u64,
            }),
        );
    }
    let dash_hit = |n: u64| {
        for _ in 0..n {
            let v = dash.get(hot).map(|r| r.value().clone()).unwrap();
            black_box(v.meta.size);
        }
    };
    group.bench_function("dashmap_1thread", |b| {
        b.iter_custom(|iters| run_threads(1, iters, dash_hit))
    });
    group.bench_function("dashmap", |b| {
        b.iter_custom(|iters| run_threads(2, iters, dash_hit))
    });
    group.finish();
}

criterion_group!(benches, bench_hit, bench_same_key);
criterion_main!(benches);

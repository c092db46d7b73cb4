//! Entry reuse and the index, small enough to run under Miri
//! (`scripts/miri.sh`), which checks the unsafe code on these paths: the
//! pool's raw entry pages and lane arrays, the entry cells written on reuse,
//! the index's tagged addresses, and a pin of an entry that is freed and
//! reused meanwhile, scoped borrows (`get_with`) whose entry is removed
//! under them (the release deferred to the pending list, the entry kept out
//! of the pool until then), and the variant scan over indexed entries. Also
//! part of the normal test run.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use pathcache::testing::Harness;
use pathcache::{Borrowed, Config, FileMeta, Loaded, Loader, Lookup, PathCache};

/// A handle that counts its drops (a second drop of one handle fails).
struct Handle {
    path: String,
    drops: Arc<AtomicUsize>,
    dropped: AtomicUsize,
}

impl Drop for Handle {
    fn drop(&mut self) {
        assert_eq!(self.dropped.fetch_add(1, Ordering::SeqCst), 0);
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

struct MemLoader {
    opens: AtomicUsize,
    drops: Arc<AtomicUsize>,
}

impl Loader<Handle> for MemLoader {
    type Error = std::convert::Infallible;
    async fn load(
        &self,
        path: &str,
        open: bool,
        _small: Option<u64>,
    ) -> Result<Loaded<Handle>, Self::Error> {
        if path.starts_with("missing") {
            return Ok(Loaded::Negative(pathcache::Negative::NotFound));
        }
        let handle = open.then(|| {
            self.opens.fetch_add(1, Ordering::SeqCst);
            Handle {
                path: path.to_owned(),
                drops: self.drops.clone(),
                dropped: AtomicUsize::new(0),
            }
        });
        Ok(Loaded::File {
            meta: meta(path),
            label: "text/plain",
            handle,
            bytes: None,
        })
    }
    async fn stat(&self, path: &str) -> Result<Option<FileMeta>, Self::Error> {
        Ok(Some(meta(path)))
    }
}

fn meta(path: &str) -> FileMeta {
    FileMeta {
        size: path.len() as u64,
        mtime_ns: 1,
        ctime_ns: 1,
        dev: 1,
        ino: path.len() as u64,
    }
}

/// Runs a future on this thread (a waiter on another thread's load of the
/// same path is woken by an unpark). No tokio: Miri runs this test too.
fn ready<F: Future>(f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

/// Eight paths (short and long keys) through a 4-entry cache from two
/// threads: entries are evicted, invalidated and reused for other paths all
/// the time, and every lookup still gets its own path's live entry.
#[test]
fn reused_entries_serve_only_their_own_path() {
    let drops = Arc::new(AtomicUsize::new(0));
    let loader = MemLoader {
        opens: AtomicUsize::new(0),
        drops: drops.clone(),
    };
    let cache: PathCache<Handle> = PathCache::new(Config {
        max_entries: 4,
        max_open: 3,
        valid: Duration::from_secs(3600),
        ..Config::default()
    });
    let paths: Vec<String> = (0..8)
        .map(|i| match i % 3 {
            0 => format!("s{i}"),
            1 => format!("static/js/a-long-bundle-name-{i}.js"),
            _ => format!("missing-{i}"),
        })
        .collect();
    let rounds = if cfg!(miri) { 6 } else { 2000 };
    std::thread::scope(|s| {
        for t in 0..2 {
            let (cache, loader, paths) = (&cache, &loader, &paths);
            s.spawn(move || {
                for r in 0..rounds {
                    let path = &paths[(r * 3 + t) % paths.len()];
                    match ready(cache.get_or_load(path, loader)).unwrap() {
                        Lookup::Hit(e) => {
                            assert_eq!(e.path(), path);
                            if let Some(h) = e.handle() {
                                assert_eq!(&h.path, path);
                                assert_eq!(h.dropped.load(Ordering::SeqCst), 0);
                            }
                            if let Some(Lookup::Hit(again)) = cache.get(path) {
                                assert_eq!(again.path(), path);
                            }
                            cache.get_with(path, |b| {
                                let Borrowed::Hit(e) = b else { return };
                                assert_eq!(e.path(), path);
                                if let Some(h) = e.handle() {
                                    assert_eq!(&h.path, path);
                                    assert_eq!(h.dropped.load(Ordering::SeqCst), 0);
                                }
                            });
                        }
                        Lookup::Negative(_) => assert!(path.starts_with("missing")),
                    }
                    if r % 5 == t {
                        cache.invalidate(path);
                    }
                }
            });
        }
    });
    assert!(cache.len() <= 4);
    assert!(cache.open_handles() <= 3);
    let opens = loader.opens.load(Ordering::SeqCst);
    assert_eq!(opens, drops.load(Ordering::SeqCst) + cache.open_handles());
    drop(cache);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        opens,
        "all released with the cache"
    );
}

/// A lookup holding an entry's old address while the entry is removed,
/// released and reused for another path: it gets the old path's entry
/// alive, or nothing.
#[test]
fn stale_pin_on_a_reused_entry_finds_nothing() {
    let drops = Arc::new(AtomicUsize::new(0));
    let handle = |path: &str| Handle {
        path: path.to_owned(),
        drops: drops.clone(),
        dropped: AtomicUsize::new(0),
    };
    let cache: Harness<Handle> = Harness::default();
    let (slot, first) = cache.insert("a", handle("a"));
    drop(first);
    cache.kill(slot);
    assert_eq!(drops.load(Ordering::SeqCst), 1, "unused: released at once");
    let (slot_b, b) = cache.insert("b", handle("b"));
    assert!(slot_b == slot, "the freed entry is reused first");
    assert!(cache.lookup(slot, "a").is_none());
    let again = cache.lookup(slot, "b").expect("the live entry for b");
    assert_eq!(again.handle().unwrap().path, "b");
    cache.kill(slot_b);
    assert_eq!(drops.load(Ordering::SeqCst), 1, "b is still in use");
    drop(b);
    assert_eq!(drops.load(Ordering::SeqCst), 1, "one user left");
    drop(again);
    assert_eq!(drops.load(Ordering::SeqCst), 2);
}

/// A borrow covers an entry that is removed under it: the release waits on
/// the pending list (and the entry stays out of the pool, so a new insert
/// gets other memory) until a check after the borrow releases it.
#[test]
fn a_removal_under_a_borrow_defers_the_release() {
    let drops = Arc::new(AtomicUsize::new(0));
    let handle = |path: &str| Handle {
        path: path.to_owned(),
        drops: drops.clone(),
        dropped: AtomicUsize::new(0),
    };
    let cache: Harness<Handle> = Harness::default();
    let (slot, first) = cache.insert("a", handle("a"));
    drop(first);
    let borrowed = cache.borrow(slot, "a", |e| {
        cache.kill(slot);
        assert_eq!(drops.load(Ordering::SeqCst), 0, "covered: not released");
        let (slot_b, b) = cache.insert("b", handle("b"));
        assert!(slot_b != slot, "the covered entry is not back in the pool");
        assert_eq!(e.handle().unwrap().path, "a");
        assert_eq!(cache.reclaim(), 0, "still covered");
        drop(b);
        cache.kill(slot_b);
    });
    assert!(borrowed);
    assert_eq!(drops.load(Ordering::SeqCst), 1, "b went at once");
    assert_eq!(cache.reclaim(), 1);
    assert_eq!(drops.load(Ordering::SeqCst), 2, "a after the borrow");
    assert!(!cache.borrow(slot, "a", |_| ()), "a is gone");
    assert_eq!(cache.reclaim(), 0);
}

/// Variants on entries that are evicted, invalidated and reused for other
/// paths from two threads, under a budget that keeps evicting variants
/// (the scan that reads indexed entries' cold fields under the writer
/// lock): a variant always belongs to its own path, and every counted
/// byte is given back once.
#[test]
fn variants_follow_their_entries_through_reuse() {
    let loader = MemLoader {
        opens: AtomicUsize::new(0),
        drops: Arc::new(AtomicUsize::new(0)),
    };
    let cache: PathCache<Handle> = PathCache::new(Config {
        max_entries: 4,
        valid: Duration::from_secs(3600),
        variant_budget: 200,
        ..Config::default()
    });
    let paths: Vec<String> = (0..6)
        .map(|i| match i % 2 {
            0 => format!("s{i}"),
            _ => format!("static/js/a-long-bundle-name-{i}.js"),
        })
        .collect();
    let rounds = if cfg!(miri) { 8 } else { 2000 };
    std::thread::scope(|s| {
        for t in 0..2 {
            let (cache, loader, paths) = (&cache, &loader, &paths);
            s.spawn(move || {
                for r in 0..rounds {
                    let path = &paths[(r * 5 + t) % paths.len()];
                    let Lookup::Hit(e) = ready(cache.get_or_load(path, loader)).unwrap() else {
                        unreachable!("every path is a file")
                    };
                    let make = || async { Ok::<_, ()>(Some(path.as_bytes().repeat(3))) };
                    let (v, _) = ready(cache.variant_or_make(&e, r % 3, make)).unwrap();
                    assert_eq!(v.bytes(), Some(&path.as_bytes().repeat(3)[..]));
                    assert!(cache.stats().variant_bytes <= 200);
                    if r % 7 == t {
                        cache.invalidate(path);
                    }
                }
            });
        }
    });
    assert!(cache.stats().variant_evictions > 0 || cfg!(miri));
    for p in &paths {
        cache.invalidate(p);
    }
    assert_eq!(cache.stats().variant_bytes, 0);
}

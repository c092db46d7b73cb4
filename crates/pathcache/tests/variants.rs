//! Variants kept beside entries: one `make` per slot however many ask at
//! once, the byte budget never exceeded, and a changed file never handed
//! an old file's variant.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pathcache::{Config, EntryRef, FileMeta, Loaded, Loader, Lookup, PathCache};

/// Files in memory: path -> (version, size).
#[derive(Default)]
struct Mem(Mutex<HashMap<String, (i64, u64)>>);

impl Mem {
    fn put(&self, path: &str, version: i64, size: u64) {
        self.0.lock().unwrap().insert(path.into(), (version, size));
    }
    fn meta(&self, path: &str) -> Option<FileMeta> {
        let (v, size) = *self.0.lock().unwrap().get(path)?;
        Some(FileMeta {
            size,
            mtime_ns: v,
            ctime_ns: v,
            dev: 1,
            ino: 7,
        })
    }
}

impl Loader<u32> for Mem {
    type Error = ();
    async fn load(&self, path: &str, _: bool, _: Option<u64>) -> Result<Loaded<u32>, ()> {
        let meta = self.meta(path).ok_or(())?;
        Ok(Loaded::File {
            meta,
            label: "text/plain",
            handle: None,
            bytes: None,
        })
    }
    async fn stat(&self, path: &str) -> Result<Option<FileMeta>, ()> {
        Ok(self.meta(path))
    }
}

fn config(budget: u64) -> Config {
    Config {
        shards: 2,
        valid: Duration::ZERO,
        variant_budget: budget,
        ..Config::default()
    }
}

async fn entry(cache: &PathCache<u32>, fs: &Mem, path: &str) -> EntryRef<u32> {
    match cache.get_or_load(path, fs).await {
        Ok(Lookup::Hit(e)) => e,
        _ => panic!("{path} is a file"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_requests_share_one_make() {
    let fs = Arc::new(Mem::default());
    fs.put("app.js", 1, 1000);
    let cache = Arc::new(PathCache::<u32>::new(config(1 << 20)));
    let makes = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let (fs, cache, makes) = (fs.clone(), cache.clone(), makes.clone());
        tasks.push(tokio::spawn(async move {
            let e = entry(&cache, &fs, "app.js").await;
            let make = || async {
                makes.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
                Ok::<_, ()>(Some(vec![b'z'; 100]))
            };
            let (v, _) = cache.variant_or_make(&e, 1, make).await.unwrap();
            v.bytes().map(<[u8]>::len)
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), Some(100));
    }
    assert_eq!(makes.load(Ordering::SeqCst), 1);
    let s = cache.stats();
    assert_eq!((s.variants_made, s.variant_bytes), (1, 100));
}

#[tokio::test]
async fn budget_is_never_exceeded_and_unused_variants_go_first() {
    let fs = Mem::default();
    let cache = PathCache::<u32>::new(config(1000));
    for i in 0..50 {
        let path = format!("f{i}.css");
        fs.put(&path, 1, 2000);
        let e = entry(&cache, &fs, &path).await;
        let make = || async { Ok::<_, ()>(Some(vec![0u8; 300])) };
        let (v, made) = cache.variant_or_make(&e, 0, make).await.unwrap();
        assert!(made && v.is_kept(), "room is made by evicting others");
        assert!(cache.stats().variant_bytes <= 1000);
    }
    let s = cache.stats();
    assert!(s.variant_evictions >= 47, "{s:?}");
    assert_eq!(s.entries, 50, "entries stay when their variants go");
    // Larger than the whole budget: handed out, not kept.
    fs.put("big.js", 1, 9000);
    let e = entry(&cache, &fs, "big.js").await;
    let make = || async { Ok::<_, ()>(Some(vec![0u8; 1001])) };
    let (v, _) = cache.variant_or_make(&e, 0, make).await.unwrap();
    assert!(!v.is_kept());
    assert!(e.variant(0).is_none());
    assert!(cache.stats().variant_bytes <= 1000);
    // A lower budget at run time drops variants down to it now.
    cache.set_limits(&config(300));
    let s = cache.stats();
    assert!(s.variant_bytes <= 300, "{s:?}");
    cache.set_limits(&config(0));
    assert_eq!(cache.stats().variant_bytes, 0);
}

#[tokio::test]
async fn a_changed_file_gets_a_new_variant_and_a_held_one_stays_counted() {
    let fs = Mem::default();
    fs.put("a.html", 1, 500);
    let cache = PathCache::<u32>::new(config(1 << 20));
    let old = entry(&cache, &fs, "a.html").await;
    let make_v1 = || async { Ok::<_, ()>(Some(b"v1".to_vec())) };
    let (v1, _) = cache.variant_or_make(&old, 2, make_v1).await.unwrap();
    fs.put("a.html", 2, 600);
    let new = entry(&cache, &fs, "a.html").await;
    assert!(!EntryRef::ptr_eq(&old, &new));
    assert!(new.variant(2).is_none(), "a new version starts without");
    let make_v2 = || async { Ok::<_, ()>(Some(b"v2!".to_vec())) };
    let (v2, made) = cache.variant_or_make(&new, 2, make_v2).await.unwrap();
    assert!(made);
    assert_eq!(v2.bytes(), Some(&b"v2!"[..]));
    assert!(v2.source().is_same_version(new.meta()));
    // The old entry left the index; its variant is counted until its last
    // holder drops.
    drop(old);
    assert_eq!(cache.stats().variant_bytes, 5);
    drop(v1);
    assert_eq!(cache.stats().variant_bytes, 3);
    // "Not worth it" is remembered: the next ask makes nothing.
    fs.put("b.png", 1, 10);
    let e = entry(&cache, &fs, "b.png").await;
    let none = || async { Ok::<_, ()>(None) };
    assert!(cache.variant_or_make(&e, 0, none).await.unwrap().1);
    let (v, made) = cache.variant_or_make(&e, 0, none).await.unwrap();
    assert!(!made && v.bytes().is_none());
    // A failed make is not kept.
    fs.put("c.js", 1, 10);
    let e = entry(&cache, &fs, "c.js").await;
    let fail = || async { Err::<Option<Vec<u8>>, _>(()) };
    assert!(cache.variant_or_make(&e, 0, fail).await.is_err());
    assert!(e.variant(0).is_none());
    cache.count_variant_served(false, 7);
    cache.count_variant_served(true, 3);
    let s = cache.stats();
    assert_eq!((s.variant_hits, s.variant_bytes_saved), (1, 10));
}

/// Threads asking for variants of files that keep changing, under a small
/// budget: every variant handed out was made from its caller's version,
/// the budget holds at every step, and once every entry is gone and every
/// variant dropped, the count is back to 0 (nothing leaked, nothing
/// subtracted twice).
#[test]
fn stress_budget_and_versions_add_up() {
    const THREADS: usize = 4;
    const OPS: usize = 1500;
    const PATHS: usize = 24;
    const BUDGET: u64 = 6000;
    let fs = Arc::new(Mem::default());
    for p in 0..PATHS {
        fs.put(&format!("p{p}"), 1, 1000);
    }
    let cache = Arc::new(PathCache::<u32>::new(Config {
        max_entries: 16,
        ..config(BUDGET)
    }));
    let made = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (fs, cache, made) = (fs.clone(), cache.clone(), &made);
            s.spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                let mut held = Vec::new();
                let mut x = t as u64 + 1;
                for i in 0..OPS {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let p = format!("p{}", x as usize % PATHS);
                    if x % 7 == 0 {
                        // A new version of the file (a new size).
                        fs.put(&p, (i * THREADS + t) as i64 + 2, 1000 + x % 500);
                    }
                    rt.block_on(async {
                        let e = entry(&cache, &fs, &p).await;
                        let len = 100 + (x % 900) as usize;
                        let make = || async {
                            made.fetch_add(1, Ordering::Relaxed);
                            Ok::<_, ()>(Some(vec![0u8; len]))
                        };
                        let (v, _) = cache
                            .variant_or_make(&e, (x % 3) as usize, make)
                            .await
                            .unwrap();
                        assert!(
                            v.source().is_same_version(e.meta()),
                            "another version's variant"
                        );
                        assert!(cache.stats().variant_bytes <= BUDGET);
                        if x % 5 == 0 {
                            held.push(v);
                        }
                        if held.len() > 8 {
                            held.remove(0);
                        }
                    });
                }
            });
        }
    });
    let s = cache.stats();
    assert!(s.variant_bytes <= BUDGET);
    assert_eq!(s.variants_made, made.load(Ordering::Relaxed) as u64);
    assert!(s.variant_evictions > 0, "{s:?}");
    for p in 0..PATHS {
        cache.invalidate(&format!("p{p}"));
    }
    assert_eq!(
        cache.stats().variant_bytes,
        0,
        "bytes left counted after every variant went"
    );
}

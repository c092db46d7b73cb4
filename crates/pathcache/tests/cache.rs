//! Behaviour of the cache against real files in a temporary directory.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pathcache::{
    Borrowed, Config, EntryRef, FileMeta, Loaded, Loader, Lookup, Negative, PathCache,
};

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

fn meta_of(m: &std::fs::Metadata) -> FileMeta {
    FileMeta {
        size: m.size(),
        mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
        ctime_ns: m.ctime() * 1_000_000_000 + m.ctime_nsec(),
        dev: m.dev(),
        ino: m.ino(),
    }
}

/// An open file whose drops are counted, so tests see exactly when the
/// cache releases a handle.
#[derive(Debug)]
struct Handle {
    file: File,
    drops: Arc<AtomicUsize>,
}
impl Drop for Handle {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

/// Loads from a real directory; counts calls; optionally plays a writer that
/// rewrites the file right after the first `torn` reads.
#[derive(Default)]
struct FsLoader {
    root: PathBuf,
    loads: AtomicUsize,
    opens: AtomicUsize,
    stats: AtomicUsize,
    /// Copies read through a handle (`Loader::read`).
    reads: AtomicUsize,
    drops: Arc<AtomicUsize>,
    /// Number of reads after which the loader rewrites the file (simulating a
    /// concurrent writer between the read and the cache's re-stat).
    torn: AtomicUsize,
}

impl FsLoader {
    fn new(root: PathBuf) -> Self {
        FsLoader {
            root,
            ..Default::default()
        }
    }

    /// Plays the writer: after one of the first `torn` reads, replaces the
    /// content of `path` in place.
    fn maybe_tear(&self, path: &str, read: &[u8]) -> std::io::Result<()> {
        if self.torn.load(Ordering::SeqCst) > 0 {
            self.torn.fetch_sub(1, Ordering::SeqCst);
            let rewritten = format!("{}-rewritten", String::from_utf8_lossy(read));
            std::fs::write(self.root.join(path), rewritten)?;
        }
        Ok(())
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
        self.loads.fetch_add(1, Ordering::SeqCst);
        let full = self.root.join(path);
        let mut file = match File::open(&full) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Loaded::Negative(Negative::NotFound))
            }
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Ok(Loaded::Negative(Negative::Forbidden))
            }
            Err(e) => return Err(e),
        };
        let meta = meta_of(&file.metadata()?);
        let bytes = match read_small {
            Some(max) if meta.size <= max => {
                let mut buf = Vec::new();
                file.read_to_end(&mut buf)?;
                self.maybe_tear(path, &buf)?;
                Some(buf)
            }
            _ => None,
        };
        let handle = if open {
            self.opens.fetch_add(1, Ordering::SeqCst);
            Some(Handle {
                file,
                drops: self.drops.clone(),
            })
        } else {
            None
        };
        Ok(Loaded::File {
            meta,
            label: "text/plain",
            handle,
            bytes,
        })
    }
    /// Through the handle, as a loader with descriptors does.
    async fn read(
        &self,
        path: &str,
        handle: &Handle,
        len: u64,
    ) -> std::io::Result<Option<Vec<u8>>> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        let mut buf = vec![0; len as usize];
        let n = std::os::unix::fs::FileExt::read_at(&handle.file, &mut buf, 0)?;
        buf.truncate(n);
        self.maybe_tear(path, &buf)?;
        Ok(Some(buf))
    }
    async fn stat(&self, path: &str) -> std::io::Result<Option<FileMeta>> {
        self.stats.fetch_add(1, Ordering::SeqCst);
        match std::fs::metadata(self.root.join(path)) {
            Ok(m) => Ok(Some(meta_of(&m))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }
}

fn config() -> Config {
    Config {
        shards: 4,
        max_entries: 1000,
        max_open: 1000,
        valid: Duration::from_secs(3600),
        negative_ttl: Duration::from_secs(3600),
        small_file_max: 0,
        small_bytes_budget: 0,
        min_uses: 1,
        variant_budget: 0,
    }
}

fn hit(l: Lookup<Handle>) -> EntryRef<Handle> {
    match l {
        Lookup::Hit(e) => e,
        Lookup::Negative(n) => panic!("expected a hit, got {n:?}"),
    }
}

fn dir_with(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, body) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
    }
    dir
}

#[test]
fn miss_then_hit_then_negative() {
    let dir = dir_with(&[("a.txt", "hello")]);
    let loader = FsLoader::new(dir.path().into());
    let cache = PathCache::new(config());
    let first = hit(block_on(cache.get_or_load("a.txt", &loader)).unwrap());
    assert_eq!(first.meta().size, 5);
    assert_eq!(first.path(), "a.txt");
    assert_eq!(first.handle().unwrap().file.metadata().unwrap().len(), 5);
    let second = hit(block_on(cache.get_or_load("a.txt", &loader)).unwrap());
    assert!(EntryRef::ptr_eq(&first, &second));
    assert_eq!(second.meta(), first.meta());
    assert_eq!(loader.loads.load(Ordering::SeqCst), 1);
    assert!(matches!(cache.get("a.txt"), Some(Lookup::Hit(_))));

    for _ in 0..2 {
        assert!(matches!(
            block_on(cache.get_or_load("missing", &loader)).unwrap(),
            Lookup::Negative(Negative::NotFound)
        ));
    }
    assert_eq!(
        loader.loads.load(Ordering::SeqCst),
        2,
        "the negative answer is cached"
    );
    assert_eq!(cache.get("never-seen").map(|_| ()), None);
    let s = cache.stats();
    assert_eq!((s.hits, s.misses, s.negative_hits), (2, 3, 1));
    assert_eq!(s.lookups, 6);
    assert_eq!(s.entries, 2);
    assert_eq!(s.open_handles, 1);
    assert_eq!(s.loads, 2);
}

#[test]
fn negative_entries_expire_on_their_own_ttl() {
    let dir = dir_with(&[]);
    let loader = FsLoader::new(dir.path().into());
    let cache = PathCache::new(Config {
        negative_ttl: Duration::from_millis(30),
        ..config()
    });
    assert!(matches!(
        block_on(cache.get_or_load("late.txt", &loader)).unwrap(),
        Lookup::Negative(_)
    ));
    std::fs::write(dir.path().join("late.txt"), "now here").unwrap();
    // Within the TTL the cached negative answer stands...
    assert!(matches!(
        cache.get("late.txt"),
        Some(Lookup::Negative(Negative::NotFound))
    ));
    // Well past it: the clock lookups read may lag the OS clock by the
    // ticker thread's scheduling delay on a loaded machine.
    std::thread::sleep(Duration::from_millis(300));
    // ...after it, the file is found.
    let e = hit(block_on(cache.get_or_load("late.txt", &loader)).unwrap());
    assert_eq!(e.meta().size, 8);
}

#[test]
fn revalidation_keeps_unchanged_and_replaces_changed_files() {
    let dir = dir_with(&[("page.html", "v1")]);
    let loader = FsLoader::new(dir.path().into());
    // valid = 0: every lookup revalidates with one stat.
    let cache = PathCache::new(Config {
        valid: Duration::ZERO,
        small_file_max: 1024,
        small_bytes_budget: 1 << 20,
        ..config()
    });
    let old = hit(block_on(cache.get_or_load("page.html", &loader)).unwrap());
    assert_eq!(old.bytes(), None, "copied on the second use, not the first");
    let stats_after_load = loader.stats.load(Ordering::SeqCst);
    let same = hit(block_on(cache.get_or_load("page.html", &loader)).unwrap());
    assert!(
        EntryRef::ptr_eq(&old, &same),
        "unchanged file keeps its entry"
    );
    assert_eq!(
        old.bytes(),
        Some(&b"v1"[..]),
        "a revalidated use copies too"
    );
    assert_eq!(loader.reads.load(Ordering::SeqCst), 1);
    assert_eq!(
        loader.stats.load(Ordering::SeqCst),
        stats_after_load + 2,
        "the revalidation's stat and the copy's recheck"
    );
    let stats_after_copy = loader.stats.load(Ordering::SeqCst);
    drop(hit(
        block_on(cache.get_or_load("page.html", &loader)).unwrap()
    ));
    assert_eq!(
        loader.stats.load(Ordering::SeqCst),
        stats_after_copy + 1,
        "one stat per revalidation"
    );
    assert_eq!(loader.loads.load(Ordering::SeqCst), 1);
    assert_eq!(loader.reads.load(Ordering::SeqCst), 1, "copied once");
    drop(same);

    // Replace the file (new inode, new size).
    let tmp = dir.path().join("page.html.tmp");
    std::fs::write(&tmp, "version two").unwrap();
    std::fs::rename(&tmp, dir.path().join("page.html")).unwrap();
    let new = hit(block_on(cache.get_or_load("page.html", &loader)).unwrap());
    assert!(!EntryRef::ptr_eq(&old, &new));
    assert_eq!(
        new.bytes(),
        Some(&b"version two"[..]),
        "a path used before is copied when its new version loads"
    );
    assert!(!new.meta().is_same_version(old.meta()));
    // The old user still sees the old version, handle open.
    assert_eq!(old.bytes(), Some(&b"v1"[..]));
    assert!(old.handle().is_some());
    assert_eq!(loader.drops.load(Ordering::SeqCst), 0);
    assert_eq!(cache.open_handles(), 2);
    drop(old);
    assert_eq!(
        loader.drops.load(Ordering::SeqCst),
        1,
        "old handle released by its last user"
    );
    assert_eq!(cache.open_handles(), 1);
    let s = cache.stats();
    assert_eq!(s.revalidations, 3);
    assert_eq!(s.entries, 1);
}

#[test]
fn invalidate_drops_the_entry_but_not_its_users() {
    let dir = dir_with(&[("x", "1")]);
    let loader = FsLoader::new(dir.path().into());
    let cache = PathCache::new(config());
    let e = hit(block_on(cache.get_or_load("x", &loader)).unwrap());
    assert!(cache.invalidate("x"));
    assert!(!cache.invalidate("x"));
    assert_eq!(cache.len(), 0);
    assert!(e.handle().is_some());
    assert_eq!(loader.drops.load(Ordering::SeqCst), 0);
    drop(e);
    assert_eq!(loader.drops.load(Ordering::SeqCst), 1);
    assert_eq!(cache.stats().invalidations, 1);
    hit(block_on(cache.get_or_load("x", &loader)).unwrap());
    assert_eq!(loader.loads.load(Ordering::SeqCst), 2);
}

#[test]
fn invalidate_under_drops_a_subtree_and_nothing_beside_it() {
    let dir = dir_with(&[("a/x", "1"), ("a/b/y", "2"), ("ab", "3"), ("c", "4")]);
    let loader = FsLoader::new(dir.path().into());
    let cache: PathCache<Handle> = PathCache::new(config());
    for p in ["a/x", "a/b/y", "ab", "c", "a/missing"] {
        drop(block_on(cache.get_or_load(p, &loader)).unwrap());
    }
    assert_eq!(cache.len(), 5);
    assert_eq!(
        cache.invalidate_under("a"),
        3,
        "a/x, a/b/y and the negative a/missing"
    );
    assert!(!cache.invalidate("a/x"));
    assert!(
        cache.invalidate("ab"),
        "a sibling sharing the prefix's letters stays"
    );
    assert_eq!(cache.invalidate_under(""), 1, "everything: c");
    assert_eq!(cache.len(), 0);
    assert_eq!(cache.stats().invalidations, 5);
}

#[test]
fn entry_bound_evicts_only_unused_entries() {
    let names: Vec<String> = (0..20).map(|i| format!("f{i}")).collect();
    let files: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "data")).collect();
    let dir = dir_with(&files);
    let loader = FsLoader::new(dir.path().into());
    let cache = PathCache::new(Config {
        max_entries: 4,
        ..config()
    });
    let pinned = hit(block_on(cache.get_or_load("f0", &loader)).unwrap());
    for n in &names {
        // Twice: once full, a path's first miss is not inserted.
        for _ in 0..2 {
            drop(block_on(cache.get_or_load(n, &loader)).unwrap());
            assert!(cache.len() <= 4, "len {} after {n}", cache.len());
        }
    }
    assert!(cache.stats().evictions >= 16);
    // The pinned entry was never taken from the map.
    let again = hit(cache.get("f0").expect("pinned entry stays cached"));
    assert!(EntryRef::ptr_eq(&pinned, &again));
    // Handles: everything evicted was released, the rest is live.
    let opens = loader.opens.load(Ordering::SeqCst);
    assert_eq!(
        opens,
        loader.drops.load(Ordering::SeqCst) + cache.open_handles()
    );
}

#[test]
fn a_full_cache_admits_a_path_on_its_second_miss() {
    let dir = dir_with(&[("a", "1"), ("b", "2"), ("c", "33")]);
    let loader = FsLoader::new(dir.path().into());
    let cache = PathCache::new(Config {
        max_entries: 2,
        ..config()
    });
    drop(block_on(cache.get_or_load("a", &loader)).unwrap());
    drop(block_on(cache.get_or_load("b", &loader)).unwrap());
    assert_eq!((cache.len(), cache.open_handles()), (2, 2));

    // First miss while full: served from its own handle, not inserted,
    // nothing evicted, and the handle is not one the cache keeps.
    let c = hit(block_on(cache.get_or_load("c", &loader)).unwrap());
    assert_eq!(c.meta().size, 2);
    assert!(c.handle().is_some());
    assert!(cache.get("c").is_none(), "not inserted");
    let s = cache.stats(); // misses: three loads and the `get` above
    assert_eq!((s.unadmitted, s.evictions, s.misses, s.loads), (1, 0, 4, 3));
    assert_eq!((cache.len(), cache.open_handles()), (2, 2));
    let drops = loader.drops.load(Ordering::SeqCst);
    drop(c);
    assert_eq!(
        loader.drops.load(Ordering::SeqCst),
        drops + 1,
        "released with its user"
    );

    // Second miss: inserted, evicting one entry.
    drop(block_on(cache.get_or_load("c", &loader)).unwrap());
    assert!(cache.get("c").is_some(), "admitted");
    let s = cache.stats();
    assert_eq!((s.unadmitted, s.evictions), (1, 1));
    assert_eq!((cache.len(), cache.open_handles()), (2, 2));

    // A not-found answer is kept from its second miss on.
    for kept in [false, true] {
        assert!(matches!(
            block_on(cache.get_or_load("nope", &loader)).unwrap(),
            Lookup::Negative(Negative::NotFound)
        ));
        assert_eq!(cache.get("nope").is_some(), kept);
    }
}

#[test]
fn a_scan_of_one_off_paths_leaves_a_full_cache_alone() {
    let names: Vec<String> = (0..200).map(|i| format!("scan/{i}")).collect();
    let mut files: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "x")).collect();
    files.extend([("hot1", "1"), ("hot2", "2")]);
    let dir = dir_with(&files);
    let loader = FsLoader::new(dir.path().into());
    let cache = PathCache::new(Config {
        max_entries: 2,
        ..config()
    });
    drop(block_on(cache.get_or_load("hot1", &loader)).unwrap());
    drop(block_on(cache.get_or_load("hot2", &loader)).unwrap());
    for n in &names {
        drop(hit(block_on(cache.get_or_load(n, &loader)).unwrap()));
    }
    assert!(cache.get("hot1").is_some() && cache.get("hot2").is_some());
    let s = cache.stats();
    assert_eq!((s.evictions, s.unadmitted), (0, 200));
    assert_eq!(
        loader.opens.load(Ordering::SeqCst),
        loader.drops.load(Ordering::SeqCst) + cache.open_handles(),
        "every one-off handle was released"
    );
}

#[test]
fn full_of_users_serves_uncached_instead_of_growing() {
    let dir = dir_with(&[("a", "1"), ("b", "2"), ("c", "3")]);
    let loader = FsLoader::new(dir.path().into());
    let cache = PathCache::new(Config {
        max_entries: 2,
        ..config()
    });
    let a = hit(block_on(cache.get_or_load("a", &loader)).unwrap());
    let b = hit(block_on(cache.get_or_load("b", &loader)).unwrap());
    let c = hit(block_on(cache.get_or_load("c", &loader)).unwrap());
    assert_eq!(cache.len(), 2);
    assert_eq!(c.meta().size, 1);
    assert!(cache.get("c").is_none());
    drop((a, b));
    drop(c);
    assert_eq!(
        loader.drops.load(Ordering::SeqCst),
        1,
        "the uncached entry released its handle"
    );
}

#[test]
fn open_bound_and_evict_unused() {
    let names: Vec<String> = (0..6).map(|i| format!("f{i}")).collect();
    let files: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "data")).collect();
    let dir = dir_with(&files);
    let loader = FsLoader::new(dir.path().into());
    let cache = PathCache::new(Config {
        max_open: 2,
        ..config()
    });
    let held: Vec<_> = names
        .iter()
        .map(|n| hit(block_on(cache.get_or_load(n, &loader)).unwrap()))
        .collect();
    assert_eq!(cache.open_handles(), 2);
    assert_eq!(held.iter().filter(|e| e.handle().is_some()).count(), 2);
    assert_eq!(
        cache.evict_unused(10),
        0,
        "entries in use are never evicted"
    );
    drop(held);
    assert_eq!(cache.open_handles(), 2);
    assert_eq!(cache.evict_unused(1), 1);
    assert_eq!(
        cache.open_handles(),
        1,
        "evict_unused releases the handle at once"
    );
    assert_eq!(loader.drops.load(Ordering::SeqCst), 1);
    assert_eq!(cache.evict_unused(10), 1);
    assert_eq!(cache.open_handles(), 0);
    assert_eq!(cache.len(), 4, "metadata-only entries stay");
}

#[test]
fn min_uses_opens_on_the_nth_use() {
    let dir = dir_with(&[("m", "meta first")]);
    let loader = FsLoader::new(dir.path().into());
    let cache = PathCache::new(Config {
        min_uses: 3,
        ..config()
    });
    let first = hit(block_on(cache.get_or_load("m", &loader)).unwrap());
    assert!(first.handle().is_none());
    assert_eq!(first.meta().size, 10);
    let second = hit(block_on(cache.get_or_load("m", &loader)).unwrap());
    assert!(second.handle().is_none());
    assert_eq!(loader.opens.load(Ordering::SeqCst), 0);
    let third = hit(block_on(cache.get_or_load("m", &loader)).unwrap());
    assert!(third.handle().is_some(), "third use opens");
    assert_eq!(loader.opens.load(Ordering::SeqCst), 1);
    let fourth = hit(block_on(cache.get_or_load("m", &loader)).unwrap());
    assert!(EntryRef::ptr_eq(&third, &fourth));
    assert_eq!(cache.len(), 1);
}

#[test]
fn small_files_are_cached_within_budget() {
    let dir = dir_with(&[
        ("s1", "0123456789"),
        ("s2", "abcdefghij"),
        ("big", "this one is too large"),
    ]);
    let loader = FsLoader::new(dir.path().into());
    let cache = PathCache::new(Config {
        small_file_max: 16,
        small_bytes_budget: 15,
        ..config()
    });
    let twice = |path| {
        drop(hit(block_on(cache.get_or_load(path, &loader)).unwrap()));
        hit(block_on(cache.get_or_load(path, &loader)).unwrap())
    };
    let s1 = hit(block_on(cache.get_or_load("s1", &loader)).unwrap());
    assert_eq!(s1.bytes(), None, "a file is not copied at its first use");
    assert_eq!(cache.stats().small_bytes, 0);
    let again = hit(block_on(cache.get_or_load("s1", &loader)).unwrap());
    assert!(EntryRef::ptr_eq(&s1, &again));
    assert_eq!(
        s1.bytes(),
        Some(&b"0123456789"[..]),
        "its second use copies it"
    );
    drop(again);
    let s2 = twice("s2");
    assert_eq!(s2.bytes(), None, "budget of 15 bytes holds only one file");
    let big = twice("big");
    assert_eq!(big.bytes(), None);
    assert_eq!(cache.stats().small_bytes, 10);
    assert_eq!(
        loader.reads.load(Ordering::SeqCst),
        1,
        "nothing read beyond the budget"
    );
    drop(s1);
    assert!(cache.invalidate("s1"));
    assert_eq!(
        cache.stats().small_bytes,
        0,
        "bytes are returned to the budget"
    );
    drop(hit(block_on(cache.get_or_load("s2", &loader)).unwrap()));
    assert_eq!(
        s2.bytes(),
        Some(&b"abcdefghij"[..]),
        "the first use that finds room copies"
    );
}

#[test]
fn torn_copy_on_second_use_is_dropped_never_mixed() {
    let dir = dir_with(&[("t", "version-one")]);
    let loader = FsLoader::new(dir.path().into());
    let cache = PathCache::new(Config {
        small_file_max: 1024,
        small_bytes_budget: 1 << 20,
        ..config()
    });
    let e = hit(block_on(cache.get_or_load("t", &loader)).unwrap());
    // A writer rewrites the file right after the second use's copy.
    loader.torn.store(1, Ordering::SeqCst);
    drop(hit(block_on(cache.get_or_load("t", &loader)).unwrap()));
    assert_eq!(loader.reads.load(Ordering::SeqCst), 1);
    assert_eq!(cache.stats().torn_reads, 1);
    assert_eq!(e.bytes(), None, "a copy of another version is not kept");
    assert_eq!(e.meta().size, "version-one".len() as u64);
    assert_eq!(cache.stats().small_bytes, 0, "its budget is given back");
    drop(hit(block_on(cache.get_or_load("t", &loader)).unwrap()));
    assert_eq!(
        loader.reads.load(Ordering::SeqCst),
        1,
        "not retried at once"
    );
}

#[test]
fn torn_small_file_read_is_retried_never_mixed() {
    let dir = dir_with(&[("t", "version-one")]);
    let loader = FsLoader::new(dir.path().into());
    // valid = 0: the second use revalidates, finds the file changed and
    // reloads it, copying at once (the path was used before).
    let cache = PathCache::new(Config {
        valid: Duration::ZERO,
        small_file_max: 1024,
        small_bytes_budget: 1 << 20,
        ..config()
    });
    drop(hit(block_on(cache.get_or_load("t", &loader)).unwrap()));
    std::fs::write(dir.path().join("t"), "version-two").unwrap();
    loader.torn.store(1, Ordering::SeqCst);
    let e = hit(block_on(cache.get_or_load("t", &loader)).unwrap());
    let on_disk = std::fs::read(dir.path().join("t")).unwrap();
    assert_eq!(on_disk, b"version-two-rewritten");
    assert_eq!(
        e.bytes(),
        Some(&on_disk[..]),
        "cached bytes are the version on disk"
    );
    assert_eq!(e.meta().size, on_disk.len() as u64);
    assert_eq!(loader.loads.load(Ordering::SeqCst), 3);
    assert_eq!(cache.stats().torn_reads, 1);
    assert_eq!(
        loader.drops.load(Ordering::SeqCst),
        2,
        "the first version's and the torn attempt's handles were dropped"
    );
}

#[test]
fn endlessly_changing_file_is_cached_without_bytes() {
    let dir = dir_with(&[("t", "x")]);
    let loader = FsLoader::new(dir.path().into());
    let cache = PathCache::new(Config {
        valid: Duration::ZERO,
        small_file_max: 1 << 20,
        small_bytes_budget: 1 << 20,
        ..config()
    });
    drop(hit(block_on(cache.get_or_load("t", &loader)).unwrap()));
    std::fs::write(dir.path().join("t"), "y").unwrap();
    loader.torn.store(100, Ordering::SeqCst);
    let e = hit(block_on(cache.get_or_load("t", &loader)).unwrap());
    assert_eq!(e.bytes(), None);
    assert_eq!(cache.stats().torn_reads, 4, "the read and three retries");
    assert_eq!(cache.stats().small_bytes, 0);
}

#[test]
fn loader_errors_are_returned_and_not_cached() {
    struct Failing(AtomicUsize);
    impl Loader<u8> for Failing {
        type Error = &'static str;
        async fn load(&self, _: &str, _: bool, _: Option<u64>) -> Result<Loaded<u8>, &'static str> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Err("EIO")
        }
        async fn stat(&self, _: &str) -> Result<Option<FileMeta>, &'static str> {
            Err("EIO")
        }
    }
    let cache: PathCache<u8> = PathCache::new(config());
    let l = Failing(AtomicUsize::new(0));
    assert_eq!(block_on(cache.get_or_load("p", &l)).unwrap_err(), "EIO");
    assert_eq!(block_on(cache.get_or_load("p", &l)).unwrap_err(), "EIO");
    assert_eq!(l.0.load(Ordering::SeqCst), 2);
    assert_eq!(cache.len(), 0);
    assert_eq!(cache.open_handles(), 0);
}

#[test]
fn get_with_lends_hits_and_negatives_and_counts_like_get() {
    let dir = dir_with(&[("a.txt", "hello")]);
    let loader = FsLoader::new(dir.path().into());
    let cache: PathCache<Handle> = PathCache::new(config());
    block_on(cache.get_or_load("a.txt", &loader)).unwrap();
    block_on(cache.get_or_load("missing", &loader)).unwrap();
    let len = cache.get_with("a.txt", |b| match b {
        Borrowed::Hit(e) => e.handle().unwrap().file.metadata().unwrap().len(),
        Borrowed::Negative(n) => panic!("{n:?}"),
    });
    assert_eq!(len, Some(5));
    let neg = cache.get_with("missing", |b| {
        matches!(b, Borrowed::Negative(Negative::NotFound))
    });
    assert_eq!(neg, Some(true));
    assert_eq!(cache.get_with("never-seen", |_| ()), None);
    // A nested borrow on the same thread falls back to a counted reference.
    let nested = cache.get_with("a.txt", |outer| {
        let Borrowed::Hit(o) = outer else { panic!() };
        cache.get_with("a.txt", |inner| {
            let Borrowed::Hit(i) = inner else { panic!() };
            std::ptr::eq(o, i)
        })
    });
    assert_eq!(nested, Some(Some(true)));
    let s = cache.stats();
    // Loads: 1 miss each; get_with: 3 hits (outer, nested, first), 1 negative, 1 miss.
    assert_eq!((s.hits, s.misses, s.negative_hits), (3, 3, 1));
    assert_eq!(s.lookups, 7);
}

#[test]
fn get_with_stale_entry_is_a_miss() {
    let dir = dir_with(&[("a.txt", "hello")]);
    let loader = FsLoader::new(dir.path().into());
    let cache: PathCache<Handle> = PathCache::new(Config {
        valid: Duration::from_millis(20),
        ..config()
    });
    block_on(cache.get_or_load("a.txt", &loader)).unwrap();
    // Well past `valid` (see `negative_entries_expire_on_their_own_ttl`).
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(cache.get_with("a.txt", |_| ()), None);
    assert_eq!(cache.stats().misses, 2);
}

/// The handle of an entry removed (here: by the borrower itself) while it is
/// borrowed stays open until the borrow is over, and is released then,
/// exactly once.
#[test]
fn removal_during_a_borrow_keeps_the_handle_until_the_borrow_ends() {
    let dir = dir_with(&[("a.txt", "hello")]);
    let loader = FsLoader::new(dir.path().into());
    let cache: PathCache<Handle> = PathCache::new(config());
    block_on(cache.get_or_load("a.txt", &loader)).unwrap();
    let drops = loader.drops.clone();
    cache
        .get_with("a.txt", |b| {
            let Borrowed::Hit(e) = b else { panic!() };
            assert!(cache.invalidate("a.txt"));
            assert_eq!(cache.evict_unused(10), 0, "already out of the map");
            assert_eq!(
                drops.load(Ordering::SeqCst),
                0,
                "not released under a borrower"
            );
            assert_eq!(e.handle().unwrap().file.metadata().unwrap().len(), 5);
        })
        .unwrap();
    assert_eq!(cache.open_handles(), 0, "released as the borrow ended");
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    drop(cache);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert_eq!(loader.opens.load(Ordering::SeqCst), 1);
}

/// Without a borrower the release stays immediate (EMFILE recovery relies on
/// it), also after a borrow that panicked.
#[test]
fn removal_after_a_panicked_borrow_releases_at_once() {
    let dir = dir_with(&[("a.txt", "hello")]);
    let loader = FsLoader::new(dir.path().into());
    let cache: PathCache<Handle> = PathCache::new(config());
    block_on(cache.get_or_load("a.txt", &loader)).unwrap();
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        cache.get_with("a.txt", |_| panic!("handler bug"));
    }));
    assert!(panicked.is_err());
    assert_eq!(cache.evict_unused(10), 1);
    assert_eq!(loader.drops.load(Ordering::SeqCst), 1, "released at once");
    assert_eq!(cache.open_handles(), 0);
    // The slot is free again: a new borrow is a plain (non-nested) one.
    block_on(cache.get_or_load("a.txt", &loader)).unwrap();
    assert_eq!(cache.get_with("a.txt", |_| 1), Some(1));
}

/// A config reload: lower bounds evict unused entries at once (never one in
/// use), a shorter `valid` makes the next hit revalidate, a zero
/// `negative_ttl` stops caching misses, and `config()` reports it all.
#[test]
fn set_limits_applies_new_bounds_and_times_while_running() {
    let names: Vec<String> = (0..10).map(|i| format!("f{i}")).collect();
    let files: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "data")).collect();
    let dir = dir_with(&files);
    let loader = FsLoader::new(dir.path().into());
    let cache = PathCache::new(config());
    let pinned = hit(block_on(cache.get_or_load("f0", &loader)).unwrap());
    for n in &names {
        drop(block_on(cache.get_or_load(n, &loader)).unwrap());
    }
    assert_eq!(cache.len(), 10);
    assert_eq!(cache.open_handles(), 10);

    let evicted = cache.set_limits(&Config {
        max_entries: 4,
        max_open: 2,
        valid: Duration::ZERO,
        negative_ttl: Duration::ZERO,
        ..config()
    });
    assert!(evicted >= 6, "evicted {evicted}");
    assert!(cache.len() <= 4, "len {}", cache.len());
    assert!(
        cache.open_handles() <= 2,
        "handles {}",
        cache.open_handles()
    );
    let again = hit(cache
        .get("f0")
        .unwrap_or_else(|| block_on(cache.get_or_load("f0", &loader)).unwrap()));
    assert_eq!(again.meta(), pinned.meta(), "the pinned entry was kept");
    assert_eq!(
        loader.opens.load(Ordering::SeqCst),
        loader.drops.load(Ordering::SeqCst) + cache.open_handles(),
        "every evicted handle was released"
    );

    // valid = 0: every hit is stale and revalidates with one stat.
    let before = cache.stats().revalidations;
    drop(block_on(cache.get_or_load("f0", &loader)).unwrap());
    assert_eq!(cache.stats().revalidations, before + 1);

    // negative_ttl = 0: misses are no longer cached.
    assert!(matches!(
        block_on(cache.get_or_load("nope", &loader)).unwrap(),
        Lookup::Negative(Negative::NotFound)
    ));
    assert!(cache.get("nope").is_none(), "no negative entry");

    let now = cache.config();
    assert_eq!((now.max_entries, now.max_open), (4, 2));
    assert_eq!(now.valid, Duration::ZERO);
    assert_eq!(now.shards, config().shards);
    drop((pinned, again));
}

#[test]
fn an_entry_names_its_path_at_every_length() {
    // 31 bytes fit the key on the entry's first line; longer paths are
    // kept apart. Multi-byte characters end exactly at the boundary too.
    let names: Vec<String> = [1, 30, 31, 32, 100]
        .iter()
        .map(|&n| "p".repeat(n))
        .chain(["é".repeat(15) + "x", "é".repeat(16)])
        .collect();
    let files: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "data")).collect();
    let dir = dir_with(&files);
    let loader = FsLoader::new(dir.path().into());
    let cache = PathCache::new(config());
    for n in &names {
        let e = hit(block_on(cache.get_or_load(n, &loader)).unwrap());
        assert_eq!(e.path(), n);
        assert_eq!(hit(cache.get(n).unwrap()).path(), n);
    }
}

//! Property test: random operation sequences against a model file system.
//! Every lookup must answer the file system's current truth (valid = 0, so
//! every hit is revalidated), held references must keep their version and
//! handle, and the bounds and handle accounting must hold after every step.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pathcache::{Config, EntryRef, FileMeta, Loaded, Loader, Lookup, Negative, PathCache};
use proptest::prelude::*;

struct Handle {
    released: Arc<AtomicBool>,
    drops: Arc<AtomicUsize>,
}
impl Drop for Handle {
    fn drop(&mut self) {
        assert!(
            !self.released.swap(true, Ordering::SeqCst),
            "handle released twice"
        );
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

#[derive(Default)]
struct ModelFs {
    files: Mutex<HashMap<String, FileMeta>>,
    opens: AtomicUsize,
    drops: Arc<AtomicUsize>,
    clock: AtomicUsize,
}

fn content(meta: &FileMeta) -> Vec<u8> {
    vec![meta.mtime_ns as u8; meta.size as usize]
}

impl Loader<Handle> for ModelFs {
    type Error = Infallible;
    async fn load(
        &self,
        path: &str,
        open: bool,
        read_small: Option<u64>,
    ) -> Result<Loaded<Handle>, Infallible> {
        let Some(meta) = self.files.lock().unwrap().get(path).copied() else {
            return Ok(Loaded::Negative(Negative::NotFound));
        };
        let bytes = read_small
            .filter(|max| meta.size <= *max)
            .map(|_| content(&meta));
        let handle = open.then(|| {
            self.opens.fetch_add(1, Ordering::SeqCst);
            Handle {
                released: Arc::default(),
                drops: self.drops.clone(),
            }
        });
        Ok(Loaded::File {
            meta,
            label: "application/octet-stream",
            handle,
            bytes,
        })
    }
    async fn stat(&self, path: &str) -> Result<Option<FileMeta>, Infallible> {
        Ok(self.files.lock().unwrap().get(path).copied())
    }
}

#[derive(Debug, Clone)]
enum Op {
    Lookup(u8),
    Get(u8),
    Write(u8, u8),
    Delete(u8),
    Invalidate(u8),
    EvictUnused(u8),
    Release(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..6u8).prop_map(Op::Lookup),
        1 => (0..6u8).prop_map(Op::Get),
        2 => (0..6u8, 0..12u8).prop_map(|(k, s)| Op::Write(k, s)),
        1 => (0..6u8).prop_map(Op::Delete),
        1 => (0..6u8).prop_map(Op::Invalidate),
        1 => (0..3u8).prop_map(Op::EvictUnused),
        2 => (0..5u8).prop_map(Op::Release),
    ]
}

const MAX_ENTRIES: usize = 4;
const MAX_OPEN: usize = 2;
const BUDGET: u64 = 16;

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]
    #[test]
    fn cache_agrees_with_the_file_system(ops in proptest::collection::vec(op(), 1..60), min_uses in 1u32..4) {
        let fs = ModelFs::default();
        let cache: PathCache<Handle> = PathCache::new(Config {
            shards: 2,
            max_entries: MAX_ENTRIES,
            max_open: MAX_OPEN,
            valid: Duration::ZERO,
            negative_ttl: Duration::ZERO,
            small_file_max: 8,
            small_bytes_budget: BUDGET,
            min_uses,
            variant_budget: 0,
        });
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let mut held: Vec<(EntryRef<Handle>, FileMeta)> = Vec::new();
        let mut lookups = 0u64;
        for op in ops {
            match op {
                Op::Lookup(k) => {
                    lookups += 1;
                    let path = format!("p{k}");
                    let truth = fs.files.lock().unwrap().get(&path).copied();
                    match (rt.block_on(cache.get_or_load(&path, &fs)).unwrap(), truth) {
                        (Lookup::Hit(e), Some(meta)) => {
                            prop_assert_eq!(*e.meta(), meta);
                            if let Some(b) = e.bytes() {
                                prop_assert_eq!(b, &content(&meta)[..]);
                            }
                            held.push((e, meta));
                            if held.len() > 5 {
                                held.remove(0);
                            }
                        }
                        (Lookup::Negative(Negative::NotFound), None) => {}
                        (got, truth) => prop_assert!(false, "cache said {:?}, fs says {:?}", got, truth),
                    }
                }
                Op::Get(k) => {
                    lookups += 1;
                    // valid = 0: nothing is ever fresh enough to answer without a stat.
                    let path = format!("p{k}");
                    prop_assert!(cache.get(&path).is_none());
                }
                Op::Write(k, size) => {
                    let tick = fs.clock.fetch_add(1, Ordering::SeqCst) as i64 + 1;
                    let meta = FileMeta { size: size as u64, mtime_ns: tick, ctime_ns: tick, dev: 1, ino: k as u64 + 1 };
                    fs.files.lock().unwrap().insert(format!("p{k}"), meta);
                }
                Op::Delete(k) => {
                    fs.files.lock().unwrap().remove(&format!("p{k}"));
                }
                Op::Invalidate(k) => {
                    cache.invalidate(&format!("p{k}"));
                }
                Op::EvictUnused(n) => {
                    cache.evict_unused(n as usize);
                }
                Op::Release(i) => {
                    if (i as usize) < held.len() {
                        held.remove(i as usize);
                    }
                }
            }
            prop_assert!(cache.len() <= MAX_ENTRIES);
            prop_assert!(cache.open_handles() <= MAX_OPEN);
            let s = cache.stats();
            prop_assert!(s.small_bytes <= BUDGET);
            prop_assert_eq!(s.lookups, lookups);
            prop_assert_eq!(s.lookups, s.hits + s.misses + s.negative_hits);
            // Live handles: the cache's, plus at most one per held entry
            // that was loaded without being admitted (not counted there).
            let live = fs.opens.load(Ordering::SeqCst) - fs.drops.load(Ordering::SeqCst);
            prop_assert!(live >= cache.open_handles(), "{} live, {} counted", live, cache.open_handles());
            prop_assert!(live <= cache.open_handles() + held.len(), "{} live, {} counted", live, cache.open_handles());
            for (e, meta) in &held {
                prop_assert_eq!(e.meta(), meta, "a held entry keeps its version");
                if let Some(h) = e.handle() {
                    prop_assert!(!h.released.load(Ordering::SeqCst), "handle released under a user");
                }
            }
        }
        drop(held);
        drop(cache);
        prop_assert_eq!(fs.opens.load(Ordering::SeqCst), fs.drops.load(Ordering::SeqCst));
    }
}

//! Precompressed siblings and the census of their directories: a file whose
//! directory holds no sibling for it is served without a lookup per
//! accepted coding, and a sibling added later is served within
//! `negative_ttl`, as it was when every sibling had a negative entry.

mod common;

use std::time::Duration;

use common::{current_thread, Tree};
use filemanager::{Config, FileManager, Query, Resolved, Sibling};

const NEGATIVE_TTL: Duration = Duration::from_millis(40);

const ALL: [Sibling<'static>; 3] = [
    Sibling {
        suffix: ".br",
        accepted: true,
    },
    Sibling {
        suffix: ".zst",
        accepted: true,
    },
    Sibling {
        suffix: ".gz",
        accepted: true,
    },
];

fn manager(t: &Tree) -> FileManager {
    manager_with_ttl(t, NEGATIVE_TTL)
}

/// A manager whose census and negative entries stay valid `ttl`.
fn manager_with_ttl(t: &Tree, ttl: Duration) -> FileManager {
    let mut cfg = Config::new(&t.root);
    cfg.backend = common::pool_backend();
    cfg.cache.negative_ttl = ttl;
    FileManager::new(cfg).unwrap()
}

/// The sibling `path` resolves to (`None`: the file itself), its bytes.
async fn served(fm: &FileManager, path: &str) -> (Option<&'static str>, Vec<u8>) {
    let q = Query {
        path,
        dir_only: false,
        siblings: &ALL,
        index: &[],
        listing: None,
        check_files_over: 0,
    };
    let Resolved::File(f) = fm.resolve(&q).await.unwrap() else {
        panic!("{path}: not a file");
    };
    let bytes = match f.file.bytes() {
        Some(b) => b.to_vec(),
        None => fm.read_at(&f.file, 0, 1 << 20).await.unwrap().to_vec(),
    };
    (f.sibling.map(|i| ALL[i].suffix), bytes)
}

/// Negative entries one more request for `path` reads: its siblings looked
/// up one by one.
async fn negative_lookups(fm: &FileManager, path: &str) -> u64 {
    let before = fm.stats().cache.negative_hits;
    served(fm, path).await;
    fm.stats().cache.negative_hits - before
}

/// Lookups of the file cache (hits, misses, negative hits) and opens: what
/// a request asks of the cache and the kernel.
fn asked(fm: &FileManager) -> (u64, u64) {
    assert_eq!(filemanager::BackendStats::ops_labels()[0], "open");
    let st = fm.stats();
    let c = &st.cache;
    (c.hits + c.misses + c.negative_hits, st.io.ops[0])
}

#[test]
fn a_file_without_siblings_costs_one_lookup() {
    let t = Tree::create();
    std::fs::create_dir(t.path("d")).unwrap();
    for name in ["a.css", "b.css", "c.js"] {
        std::fs::write(t.path(&format!("d/{name}")), name).unwrap();
    }
    // No revalidation within the test, however slow the machine (Wine):
    // `d` changed just now, so one would list it again.
    let fm = manager_with_ttl(&t, Duration::from_secs(60));
    current_thread().block_on(async {
        assert_eq!(served(&fm, "d/a.css").await, (None, b"a.css".to_vec()));
        let (lookups, ops) = asked(&fm);
        for name in ["a.css", "b.css", "a.css", "c.js"] {
            served(&fm, &format!("d/{name}")).await;
        }
        let (lookups_after, ops_after) = asked(&fm);
        // b.css and c.js are loaded once each (a miss and an open).
        assert_eq!(lookups_after - lookups, 4, "one lookup per request");
        assert_eq!(ops_after - ops, 2, "only the two new files are opened");
        assert_eq!(fm.stats().census_scans, 1, "one listing of d");
        assert_eq!(fm.stats().census_dirs, 1);
    });
}

#[test]
fn a_listed_sibling_is_served_and_an_added_one_within_negative_ttl() {
    if common::skip_on_wine("an open file's name gone at delete (POSIX semantics, Windows 10+)") {
        return;
    }
    let t = Tree::create();
    std::fs::write(t.path("a.css"), "plain").unwrap();
    std::fs::write(t.path("a.css.gz"), "gzip").unwrap();
    std::fs::write(t.path("b.css"), "plain b").unwrap();
    let fm = manager(&t);
    current_thread().block_on(async {
        assert_eq!(served(&fm, "a.css").await, (Some(".gz"), b"gzip".to_vec()));
        assert_eq!(served(&fm, "b.css").await, (None, b"plain b".to_vec()));
        // Added right after the census, within `RACY` of the directory's
        // last change: seen by the moved times where timestamps are fine
        // grained, by the listing again where they are coarse.
        std::fs::write(t.path("b.css.br"), "brotli b").unwrap();
        tokio::time::sleep(NEGATIVE_TTL * 3).await;
        assert_eq!(
            served(&fm, "b.css").await,
            (Some(".br"), b"brotli b".to_vec())
        );
        // And one removed: the file itself again.
        std::fs::remove_file(t.path("a.css.gz")).unwrap();
        tokio::time::sleep(NEGATIVE_TTL * 3).await;
        assert_eq!(served(&fm, "a.css").await, (None, b"plain".to_vec()));
    });
}

/// A directory with more precompressed names than a census keeps is looked
/// up name by name: its siblings are still served.
#[test]
fn a_directory_past_the_census_bounds_is_looked_up_name_by_name() {
    let t = Tree::create();
    std::fs::create_dir(t.path("big")).unwrap();
    for i in 0..2000 {
        std::fs::write(t.path(&format!("big/f{i:04}.js.gz")), "").unwrap();
    }
    std::fs::write(t.path("big/app.js"), "plain").unwrap();
    std::fs::write(t.path("big/app.js.zst"), "zstd").unwrap();
    std::fs::write(t.path("big/lib.js"), "plain lib").unwrap();
    // The second lookup must find the first one's negative entries, however
    // slow the machine (Wine on a loaded host took more than 40 ms).
    let fm = manager_with_ttl(&t, Duration::from_secs(60));
    current_thread().block_on(async {
        assert_eq!(
            served(&fm, "big/app.js").await,
            (Some(".zst"), b"zstd".to_vec())
        );
        assert_eq!(
            served(&fm, "big/lib.js").await,
            (None, b"plain lib".to_vec())
        );
        assert_eq!(
            negative_lookups(&fm, "big/lib.js").await,
            3,
            "each sibling looked up"
        );
    });
}

/// A file whose name is not ASCII is looked up name by name (a
/// case-folding directory may hold its sibling under another spelling).
#[test]
fn a_name_that_is_not_ascii_is_looked_up_name_by_name() {
    let t = Tree::create();
    std::fs::write(t.path("é.css"), "plain").unwrap();
    std::fs::write(t.path("é.css.br"), "brotli").unwrap();
    std::fs::write(t.path("ü.css"), "plain u").unwrap();
    // As above: the negative entries outlive a slow machine's pause.
    let fm = manager_with_ttl(&t, Duration::from_secs(60));
    current_thread().block_on(async {
        assert_eq!(
            served(&fm, "é.css").await,
            (Some(".br"), b"brotli".to_vec())
        );
        served(&fm, "ü.css").await;
        assert_eq!(negative_lookups(&fm, "ü.css").await, 3);
    });
}

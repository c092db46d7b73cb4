//! Compressed variants of real files, on every backend: made from cached
//! bytes and from a read through the backend, shared by concurrent first
//! requests, never kept across a change of the file.

mod common;

use std::io::Read;
use std::sync::Arc;

use filemanager::{Codec, FileManager, Opened, SymlinkPolicy};

fn gunzip(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(b)
        .read_to_end(&mut out)
        .unwrap();
    out
}

async fn open(fm: &FileManager, path: &str) -> filemanager::CachedFile {
    match fm.open(path).await.unwrap() {
        Opened::File(f) => f,
        other => panic!("{path}: {other:?}"),
    }
}

#[test]
fn variants_of_cached_and_read_files_round_trip_and_are_made_once() {
    let tree = common::Tree::create();
    let small = "body { color: red }\n".repeat(40);
    let large = "export const x = [1, 2, 3];\n".repeat(4000);
    std::fs::write(tree.path("a.css"), &small).unwrap();
    std::fs::write(tree.path("b.js"), &large).unwrap();
    std::fs::write(tree.path("c.bin"), [7u8; 3]).unwrap();
    for backend in common::backends(&tree.root) {
        let fm = common::manager(&tree.root, backend, SymlinkPolicy::Deny);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            for (path, body) in [("a.css", small.as_bytes()), ("b.js", large.as_bytes())] {
                // The second use, which copies a small file into memory.
                drop(open(&fm, path).await);
                let f = open(&fm, path).await;
                assert_eq!(f.bytes().is_some(), path == "a.css", "{backend:?}");
                // Concurrent first requests: one compression.
                let made_before = fm.stats().cache.variants_made;
                let asks = (0..8).map(|_| fm.variant(&f, Codec::Gzip, 6));
                let all = futures_join(asks).await;
                assert_eq!(fm.stats().cache.variants_made, made_before + 1, "{path}");
                for v in all {
                    assert_eq!(gunzip(v.unwrap().unwrap().bytes()), body);
                }
                let v = fm.variant(&f, Codec::Gzip, 6).await.unwrap().unwrap();
                assert!(!v.made());
                fm.count_variant_served(&f, &v);
            }
            // Not worth it: nothing to send, and not tried again.
            let f = open(&fm, "c.bin").await;
            assert!(fm.variant(&f, Codec::Zstd, 3).await.unwrap().is_none());
            let made = fm.stats().cache.variants_made;
            assert!(fm.variant(&f, Codec::Zstd, 3).await.unwrap().is_none());
            assert_eq!(fm.stats().cache.variants_made, made);
            let s = fm.stats().cache;
            assert_eq!(s.variant_hits, 2);
            assert!(s.variant_bytes_saved > large.len() as u64 / 2);
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_file_never_gets_the_old_variant() {
    let tree = common::Tree::create();
    let path = tree.path("page.html");
    std::fs::write(&path, "<p>one</p>\n".repeat(300)).unwrap();
    let fm = Arc::new(common::manager(
        &tree.root,
        common::pool_backend(),
        SymlinkPolicy::Deny,
    ));
    let f = open(&fm, "page.html").await;
    let v1 = fm.variant(&f, Codec::Brotli, 5).await.unwrap().unwrap();
    drop(f);
    std::fs::write(&path, "<p>two!</p>\n".repeat(300)).unwrap();
    fm.invalidate("page.html");
    let f = open(&fm, "page.html").await;
    let v2 = fm.variant(&f, Codec::Brotli, 5).await.unwrap().unwrap();
    assert!(v2.made());
    let mut back = Vec::new();
    brotli::BrotliDecompress(&mut v2.bytes(), &mut back).unwrap();
    assert_eq!(back, "<p>two!</p>\n".repeat(300).as_bytes());
    assert_ne!(v1.bytes(), v2.bytes());
}

/// Polls every future to completion on the current task (no extra crate).
async fn futures_join<F: std::future::Future>(fs: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut fs: Vec<_> = fs.map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = fs.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, o) in fs.iter_mut().zip(out.iter_mut()) {
            if o.is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => *o = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.into_iter().map(Option::unwrap).collect()
}

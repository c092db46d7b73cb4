//! EMFILE recovery: with a lowered RLIMIT_NOFILE (in a child process, never
//! in the shared test process) the manager evicts cold cache entries, reaps
//! and retries, and only reports `Exhausted` when nothing can be freed.
#![cfg(unix)]

mod common;

use std::process::Command;

use common::*;
use filemanager::{BackendKind, OpenError, Opened, SymlinkPolicy};

const CHILD_ENV: &str = "FILEMANAGER_EMFILE_CHILD";

#[test]
fn emfile_recovers_by_evicting_then_reports_exhausted() {
    if let Ok(backend) = std::env::var(CHILD_ENV) {
        child(if backend == "uring" {
            BackendKind::Uring
        } else {
            BackendKind::Blocking
        });
        return;
    }
    let t = Tree::create();
    for backend in backends(&t.root) {
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "emfile_recovers_by_evicting_then_reports_exhausted",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, backend.to_string())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprintln!("--- child ({backend}) ---\n{stderr}");
        assert!(out.status.success(), "child failed for {backend}");
        assert!(
            stderr.contains("EMFILE-CHILD-OK"),
            "child did not run its checks"
        );
    }
}

fn child(backend: BackendKind) {
    let t = Tree::create();
    for i in 0..40 {
        std::fs::write(t.path(&format!("f{i}")), format!("file {i}")).unwrap();
    }
    // Lower both limits: FileManager::new raises the soft limit to the hard one.
    let lim = (open_fds() + 60) as u64;
    rustix::process::setrlimit(
        rustix::process::Resource::Nofile,
        rustix::process::Rlimit {
            current: Some(lim),
            maximum: Some(lim),
        },
    )
    .unwrap();
    let mut cfg = filemanager::Config::new(&t.root);
    cfg.backend = backend;
    cfg.symlinks = SymlinkPolicy::WithinRoot;
    cfg.fd_headroom = 4;
    let fm = filemanager::FileManager::new(cfg).unwrap();
    eprintln!(
        "child backend: {:?}, limit {}, budget {}",
        fm.backend(),
        fm.fd_limit(),
        fm.fd_budget()
    );
    assert_eq!(fm.fd_limit(), lim);
    assert!(fm.fd_budget() > 40, "budget {}", fm.fd_budget());
    current_thread().block_on(async {
        // Fill the cache with 30 idle entries, each holding a descriptor.
        for i in 0..30 {
            let Opened::File(f) = fm.open(&format!("f{i}")).await.unwrap() else {
                panic!()
            };
            drop(f);
        }
        let st = fm.stats();
        assert_eq!(st.open_fds, 30, "{st:?}");
        // Someone else in the process takes every remaining descriptor.
        let mut hog = Vec::new();
        while let Ok(f) = std::fs::File::open("/dev/null") {
            hog.push(f);
        }
        eprintln!("hogged {} fds", hog.len());
        // The next miss hits EMFILE and recovers by evicting idle entries.
        let Opened::File(f) = fm.open("f35").await.unwrap() else {
            panic!("recovery failed")
        };
        assert_eq!(&fm.read_at(&f, 0, 100).await.unwrap()[..], b"file 35");
        assert!(fm.stats().emfile_recoveries >= 1);
        drop(f);
        // Now pin every cached entry and take the descriptors freed above:
        // nothing can be evicted, so the answer is Exhausted (a 503).
        let mut pinned = Vec::new();
        for i in 0..40 {
            if let Ok(Opened::File(f)) = fm.open(&format!("f{i}")).await {
                pinned.push(f);
            }
        }
        while let Ok(f) = std::fs::File::open("/dev/null") {
            hog.push(f);
        }
        let mut handles = Vec::new();
        let mut exhausted = false;
        for i in 0..40 {
            match fm.open_uncached(&format!("f{i}")).await {
                Err(OpenError::Exhausted) => {
                    exhausted = true;
                    break;
                }
                Ok(h) => handles.push(h),
                Err(e) => panic!("unexpected {e}"),
            }
        }
        assert!(exhausted, "expected Exhausted");
        assert!(fm.stats().exhausted >= 1);
        // Freeing descriptors makes opens work again.
        drop(hog);
        drop(pinned);
        drop(handles);
        let h = fm.open_uncached("f1").await.unwrap();
        h.close().await.unwrap();
    });
    eprintln!("EMFILE-CHILD-OK");
}

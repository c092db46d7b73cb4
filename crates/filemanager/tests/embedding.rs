//! What an embedder can opt out of: raising `RLIMIT_NOFILE` and the reaper
//! thread. Each test runs in its own process under nextest; both change
//! or inspect process-wide state, so they live in this file alone.

use filemanager::{Config, FileManager, Opened};
use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

fn reaper_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim() == "filemanager-rea")
        .count()
}

#[test]
fn the_soft_descriptor_limit_is_left_alone_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let hard = getrlimit(Resource::Nofile).maximum;
    let low = hard.map_or(4096, |h| h.min(4096));
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(low),
            maximum: hard,
        },
    )
    .unwrap();
    let fm = FileManager::new(Config {
        raise_nofile: false,
        ..Config::new(dir.path())
    })
    .unwrap();
    assert_eq!(fm.fd_limit(), low);
    assert_eq!(getrlimit(Resource::Nofile).current, Some(low));
    drop(fm);
    // The default raises it to the hard limit.
    let fm = FileManager::new(Config::new(dir.path())).unwrap();
    if hard.is_some_and(|h| h > low) {
        assert_eq!(getrlimit(Resource::Nofile).current, hard);
        assert_eq!(Some(fm.fd_limit()), hard);
    }
}

#[test]
fn without_the_reaper_thread_reap_releases_dropped_handles() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), b"a").unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let before = reaper_threads();
    let fm = FileManager::new(Config {
        reaper_thread: false,
        ..Config::new(dir.path())
    })
    .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(reaper_threads(), before, "a reaper thread was started");
    let handle = rt.block_on(fm.open_uncached("a.txt")).unwrap();
    let open = fm.stats().open_fds;
    // Dropped on another thread: its release is deferred to a reap.
    std::thread::spawn(move || drop(handle)).join().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(fm.stats().open_fds, open, "released without a reap");
    assert!(fm.reap() >= 1);
    assert_eq!(fm.stats().open_fds, open - 1);
    // Opening still works, and the default does start the thread.
    assert!(matches!(
        rt.block_on(fm.open("a.txt")).unwrap(),
        Opened::File(_)
    ));
    let _fm2 = FileManager::new(Config::new(dir.path())).unwrap();
    // The new thread names itself once it runs.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while reaper_threads() < before + 1 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(reaper_threads(), before + 1);
}

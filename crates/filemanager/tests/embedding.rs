//! What embedding changes in the process: nothing global by default (no
//! `RLIMIT_NOFILE` change, one reaper and one watcher thread however many
//! managers), and what an embedder can opt into or out of. All change or
//! inspect process-wide state, so each runs in a process of its own: under
//! nextest it has one, and under `cargo test` it starts one ([`alone`]).
#![cfg(unix)]

use filemanager::{Config, FileManager, Opened};
use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

/// Whether this process is the test `name`'s own: if not, runs it in a
/// child (this test binary, that test alone) and checks that it passed.
fn alone(name: &str) -> bool {
    const VAR: &str = "FILEMANAGER_EMBEDDING_TEST";
    if std::env::var(VAR).as_deref() == Ok(name) {
        return true;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(VAR, name)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{name} in its own process:\n{text}");
    assert!(text.contains("1 passed"), "{name} did not run:\n{text}");
    false
}

fn threads_named(name: &str) -> usize {
    thread_names().iter().filter(|comm| *comm == name).count()
}

fn reaper_threads() -> usize {
    threads_named("fd-reaper")
}

fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|comm| comm.trim().to_owned())
        .collect()
}

/// Two managers (two mounts) with the default config: the soft limit is
/// as it was, and the process gained one reaper and one watcher thread,
/// not one of each per manager; they end with the last manager.
#[test]
fn two_managers_change_no_limit_and_share_their_threads() {
    if !alone("two_managers_change_no_limit_and_share_their_threads") {
        return;
    }
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    std::fs::write(a.path().join("f"), b"a").unwrap();
    let hard = getrlimit(Resource::Nofile).maximum;
    let low = hard.map_or(1024, |h| h.min(1024));
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(low),
            maximum: hard,
        },
    )
    .unwrap();
    let threads_before = thread_names().len();
    let one = FileManager::new(Config::new(a.path())).unwrap();
    let two = FileManager::new(Config::new(b.path())).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // A lookup puts a watch in place (and starts the path cache's clock).
    assert!(matches!(
        rt.block_on(one.open("f")).unwrap(),
        Opened::File(_)
    ));
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(getrlimit(Resource::Nofile).current, Some(low));
    assert_eq!(one.fd_limit(), low);
    let names = thread_names();
    assert_eq!(threads_named("fd-reaper"), 1, "{names:?}");
    assert_eq!(threads_named("fs-watch"), 1, "{names:?}");
    // The reaper, the watcher and the path cache's clock.
    assert!(names.len() <= threads_before + 3, "{names:?}");
    drop((one, two));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while threads_named("fd-reaper") + threads_named("fs-watch") > 0 {
        assert!(std::time::Instant::now() < deadline, "{:?}", thread_names());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn the_soft_descriptor_limit_is_raised_only_when_asked() {
    if !alone("the_soft_descriptor_limit_is_raised_only_when_asked") {
        return;
    }
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
    let fm = FileManager::new(Config::new(dir.path())).unwrap();
    assert_eq!(fm.fd_limit(), low);
    assert_eq!(getrlimit(Resource::Nofile).current, Some(low));
    drop(fm);
    // Asked, it raises it to the hard limit (the daemon asks).
    let fm = FileManager::new(Config {
        raise_nofile: true,
        ..Config::new(dir.path())
    })
    .unwrap();
    if hard.is_some_and(|h| h > low) {
        assert_eq!(getrlimit(Resource::Nofile).current, hard);
        assert_eq!(Some(fm.fd_limit()), hard);
    }
}

#[test]
fn without_the_reaper_thread_reap_releases_dropped_handles() {
    if !alone("without_the_reaper_thread_reap_releases_dropped_handles") {
        return;
    }
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

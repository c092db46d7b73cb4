//! A change on disk is served at once. Warm keep-alive clients hammer every
//! path while a writer changes the tree the ways deploys and editors do;
//! after each change returns, a warm client asks for the path until it
//! gets the new answer, and the delay is recorded.
//!
//! ```text
//! version(path, n) = "<path> v<n> len=<len>\n" + filler  (self-describing: a torn
//!                    or mixed body fails its own check)
//! changes, each REPS times:  in-place rewrite | rename over | delete, then create
//!   | chmod | directory renamed away and back | directory swapped for a new one
//!   | release switch (current -> releases/N re-pointed by rename) | root switch
//! hammer threads: every 200 parses as one whole version; one ETag, one body
//! ```
//!
//! With the watcher (`cache.valid` and `negative_ttl` at a minute, so only
//! events can explain a fresh answer) every change must be seen within
//! [`EVENT_BOUND`]: the watcher thread's wake-up on a loaded machine. With
//! it off, within `cache.valid` plus [`POLL_SLACK`].

mod common;
mod reliability_support;

use common::{metric_sum, Daemon};
use reliability_support::{summary, Client, Response};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// With the watcher on: how long after a change's syscall returned a
/// request may still be sent and get the old answer. The window is the
/// watcher thread's wake-up; see the summary lines for what was measured.
const EVENT_BOUND: Duration = Duration::from_millis(100);
/// With the watcher off: on top of `cache.valid`, for the clock's tick and
/// a loaded machine.
const POLL_SLACK: Duration = Duration::from_millis(250);
const REPS: u32 = 20;

fn version(path: &str, n: u32) -> Vec<u8> {
    let len = 64 + (n as usize * 37) % 700;
    let mut v = format!("{path} v{n} len={len}\n").into_bytes();
    let fill = b'a' + (n % 26) as u8;
    v.resize(len, fill);
    v
}

/// The version a body is, if it is one whole version of `path`.
fn parse_version(path: &str, body: &[u8]) -> Option<u32> {
    let line_end = body.iter().position(|&b| b == b'\n')?;
    let line = std::str::from_utf8(&body[..line_end]).ok()?;
    let rest = line.strip_prefix(path)?.strip_prefix(" v")?;
    let n: u32 = rest.split(' ').next()?.parse().ok()?;
    (version(path, n) == body).then_some(n)
}

fn write_version(root: &Path, path: &str, n: u32) {
    std::fs::write(root.join(path), version(path, n)).unwrap();
}

/// A warm keep-alive connection that reconnects when the server closes.
struct Warm {
    addr: SocketAddr,
    client: Client,
}

impl Warm {
    fn new(addr: SocketAddr) -> Warm {
        Warm {
            addr,
            client: Client::connect(addr, Duration::from_secs(10)).unwrap(),
        }
    }

    fn get(&mut self, path: &str) -> Response {
        let req = format!("GET /{path} HTTP/1.1\r\nHost: test\r\n\r\n");
        for _ in 0..3 {
            let r = self
                .client
                .send(req.as_bytes())
                .and_then(|()| self.client.read_response(false));
            match r {
                Ok(r) => {
                    if r.head.close {
                        self.client = Client::connect(self.addr, Duration::from_secs(10)).unwrap();
                    }
                    return r;
                }
                Err(_) => {
                    self.client = Client::connect(self.addr, Duration::from_secs(10)).unwrap();
                }
            }
        }
        panic!("three failed attempts at {path}");
    }

    /// Asks for `path` until `want` holds; how long after `since` the
    /// last request that still got the old answer was sent (zero when the
    /// first one got the new answer). Send times, not arrival times, so a
    /// test thread that waits for the CPU does not count against the
    /// server.
    fn until(&mut self, path: &str, since: Instant, want: impl Fn(&Response) -> bool) -> Duration {
        let mut stale_until = Duration::ZERO;
        loop {
            let sent = since.elapsed();
            let r = self.get(path);
            if want(&r) {
                return stale_until;
            }
            stale_until = sent;
            assert!(
                since.elapsed() < Duration::from_secs(5),
                "{path}: still status {} {:?} after 5 s",
                r.status,
                String::from_utf8_lossy(&r.body[..r.body.len().min(40)])
            );
            std::thread::sleep(Duration::from_micros(500));
        }
    }
}

fn is_version(path: &'static str, n: u32) -> impl Fn(&Response) -> bool {
    move |r| r.status == 200 && parse_version(path, &r.body) == Some(n)
}

fn is_status(status: u16) -> impl Fn(&Response) -> bool {
    move |r| r.status == status
}

/// Clients that ask for every path in a loop and check each answer.
struct Hammer {
    stop: Arc<AtomicBool>,
    requests: Arc<AtomicU64>,
    threads: Vec<std::thread::JoinHandle<Result<(), String>>>,
}

impl Hammer {
    fn start(addr: SocketAddr, paths: &[&'static str], clients: usize) -> Hammer {
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(AtomicU64::new(0));
        let etags: Arc<Mutex<HashMap<String, Vec<u8>>>> = Arc::default();
        let threads = (0..clients)
            .map(|k| {
                let (stop, requests, etags) = (stop.clone(), requests.clone(), etags.clone());
                let paths = paths.to_vec();
                std::thread::spawn(move || {
                    let mut warm = Warm::new(addr);
                    let mut i = k;
                    while !stop.load(Ordering::Relaxed) {
                        let path = paths[i % paths.len()];
                        i += 1;
                        let r = warm.get(path);
                        requests.fetch_add(1, Ordering::Relaxed);
                        // A file written in place or created (open with
                        // O_TRUNC or O_CREAT, then write) is empty between
                        // the two syscalls: a true answer, with a
                        // Content-Length of 0.
                        let written_in_place = ["inplace.txt", "flip.txt"].contains(&path);
                        if r.status != 200 || (written_in_place && r.body.is_empty()) {
                            continue;
                        }
                        if parse_version(path, &r.body).is_none() {
                            return Err(format!(
                                "{path}: a 200 that is no whole version: {:?}",
                                String::from_utf8_lossy(&r.body[..r.body.len().min(60)])
                            ));
                        }
                        if let Some(tag) = r.header("etag") {
                            let mut seen = etags.lock().unwrap();
                            let key = format!("{path} {tag}");
                            let body = seen.entry(key).or_insert_with(|| r.body.clone());
                            if *body != r.body {
                                return Err(format!("{path}: ETag {tag} named two bodies"));
                            }
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        Hammer {
            stop,
            requests,
            threads,
        }
    }

    fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            if let Err(e) = t.join().unwrap() {
                panic!("{e}");
            }
        }
        self.requests.load(Ordering::Relaxed)
    }
}

/// The delays, by kind of change.
#[derive(Default)]
struct Delays(Vec<(&'static str, Duration)>);

impl Delays {
    fn add(&mut self, kind: &'static str, d: Duration) {
        self.0.push((kind, d));
    }

    fn max(&self) -> Duration {
        self.0.iter().map(|&(_, d)| d).max().unwrap_or_default()
    }

    fn report(&self) -> String {
        let mut kinds: Vec<&str> = Vec::new();
        for &(k, _) in &self.0 {
            if !kinds.contains(&k) {
                kinds.push(k);
            }
        }
        kinds
            .iter()
            .map(|k| {
                let mut ds: Vec<Duration> = self
                    .0
                    .iter()
                    .filter(|(x, _)| x == k)
                    .map(|&(_, d)| d)
                    .collect();
                ds.sort();
                let stale = ds.iter().filter(|d| !d.is_zero()).count();
                format!(
                    "{k} stale-after {stale}/{} (median {:.1}ms max {:.1}ms)",
                    ds.len(),
                    ds[ds.len() / 2].as_secs_f64() * 1e3,
                    ds[ds.len() - 1].as_secs_f64() * 1e3
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn assert_within(&self, bound: Duration) {
        for &(kind, d) in &self.0 {
            assert!(
                d <= bound,
                "{kind}: the change showed after {d:?} (bound {bound:?}); {}",
                self.report()
            );
        }
    }
}

/// The site: plain files at the top, a directory, and releases behind a
/// `current` link.
fn site(root: &Path) {
    for p in ["inplace.txt", "renamed.txt", "flip.txt", "mode.txt"] {
        write_version(root, p, 0);
    }
    std::fs::create_dir_all(root.join("dir")).unwrap();
    write_version(root, "dir/a.txt", 0);
    for n in 0..2 {
        let rel = root.join(format!("releases/{n}"));
        std::fs::create_dir_all(&rel).unwrap();
        std::fs::write(rel.join("index.html"), version("current/index.html", n)).unwrap();
        std::fs::write(rel.join("app.js"), version("current/app.js", n)).unwrap();
    }
    std::os::unix::fs::symlink("releases/0", root.join("current")).unwrap();
}

/// Points `link` at `target` the way deploy tools do: a new link renamed
/// over the old one (`ln -s target tmp && mv -T tmp link`).
fn repoint(link: &Path, target: &str) {
    let tmp = link.with_extension("tmp-link");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(target, &tmp).unwrap();
    std::fs::rename(&tmp, link).unwrap();
}

const PATHS: [&str; 7] = [
    "inplace.txt",
    "renamed.txt",
    "flip.txt",
    "mode.txt",
    "dir/a.txt",
    "current/index.html",
    "current/app.js",
];

/// Every kind of change, `reps` times each; the delays.
fn changes(root: &Path, daemon: &Daemon, reps: u32, watching: bool) -> Delays {
    let mut warm = Warm::new(daemon.http);
    let mut delays = Delays::default();
    // Every path is cached (and copied: the second use) before it changes.
    for p in PATHS {
        for _ in 0..3 {
            warm.get(p);
        }
    }
    let root_is_root = rustix::process::geteuid().is_root();
    for n in 1..=reps {
        // In place: same inode, new bytes and length.
        write_version(root, "inplace.txt", n);
        let t = Instant::now();
        delays.add(
            "in-place",
            warm.until("inplace.txt", t, is_version("inplace.txt", n)),
        );

        // A new file renamed over the old one.
        let tmp = root.join(".renamed.tmp");
        std::fs::write(&tmp, version("renamed.txt", n)).unwrap();
        std::fs::rename(&tmp, root.join("renamed.txt")).unwrap();
        let t = Instant::now();
        delays.add(
            "rename-over",
            warm.until("renamed.txt", t, is_version("renamed.txt", n)),
        );

        // Deleted, then created again (the 404 was cached meanwhile).
        std::fs::remove_file(root.join("flip.txt")).unwrap();
        let t = Instant::now();
        delays.add("delete", warm.until("flip.txt", t, is_status(404)));
        for _ in 0..3 {
            warm.get("flip.txt");
        }
        write_version(root, "flip.txt", n);
        let t = Instant::now();
        delays.add(
            "create",
            warm.until("flip.txt", t, is_version("flip.txt", n)),
        );

        // chmod: as root the mode does not change the answer (root reads
        // anything), so the entry's drop is read off the metrics instead.
        let path = root.join("mode.txt");
        let mode = |m| std::fs::set_permissions(&path, std::fs::Permissions::from_mode(m)).unwrap();
        if root_is_root && watching {
            let before = path_invalidations(daemon);
            mode(if n % 2 == 0 { 0o644 } else { 0o600 });
            let t = Instant::now();
            let mut stale_until = Duration::ZERO;
            loop {
                let sent = t.elapsed();
                if path_invalidations(daemon) > before {
                    break;
                }
                stale_until = sent;
                assert!(
                    t.elapsed() < Duration::from_secs(5),
                    "chmod: no invalidation"
                );
            }
            delays.add("chmod", stale_until);
        } else if !root_is_root {
            mode(0o000);
            let t = Instant::now();
            delays.add("chmod", warm.until("mode.txt", t, is_status(403)));
            mode(0o644);
            let t = Instant::now();
            delays.add(
                "chmod",
                warm.until("mode.txt", t, is_version("mode.txt", 0)),
            );
        }

        // A directory renamed away, then back.
        std::fs::rename(root.join("dir"), root.join("dir.away")).unwrap();
        let t = Instant::now();
        delays.add("dir-rename", warm.until("dir/a.txt", t, is_status(404)));
        std::fs::rename(root.join("dir.away"), root.join("dir")).unwrap();
        let t = Instant::now();
        delays.add(
            "dir-rename",
            warm.until("dir/a.txt", t, is_version("dir/a.txt", n - 1)),
        );

        // A directory swapped for a new one with the same names.
        let fresh = root.join("dir.new");
        std::fs::create_dir(&fresh).unwrap();
        std::fs::write(fresh.join("a.txt"), version("dir/a.txt", n)).unwrap();
        std::fs::rename(root.join("dir"), root.join("dir.old")).unwrap();
        std::fs::rename(&fresh, root.join("dir")).unwrap();
        let t = Instant::now();
        delays.add(
            "dir-swap",
            warm.until("dir/a.txt", t, is_version("dir/a.txt", n)),
        );
        std::fs::remove_dir_all(root.join("dir.old")).unwrap();

        // A release switch: the new release's page and its assets together.
        let rel = root.join(format!("releases/{}", n + 1));
        std::fs::create_dir_all(&rel).unwrap();
        std::fs::write(rel.join("index.html"), version("current/index.html", n + 1)).unwrap();
        std::fs::write(rel.join("app.js"), version("current/app.js", n + 1)).unwrap();
        repoint(&root.join("current"), &format!("releases/{}", n + 1));
        let t = Instant::now();
        let html = warm.until(
            "current/index.html",
            t,
            is_version("current/index.html", n + 1),
        );
        if watching {
            let asset = warm.get("current/app.js");
            assert!(
                is_version("current/app.js", n + 1)(&asset),
                "the new release's page came with an old asset: {:?}",
                String::from_utf8_lossy(&asset.body[..asset.body.len().min(40)])
            );
        } else {
            // Entries expire one by one: for up to `cache.valid` a new
            // page can come with an old asset, which is that bound's cost.
            let t = Instant::now();
            let asset = warm.until("current/app.js", t, is_version("current/app.js", n + 1));
            delays.add("release-switch", asset);
        }
        delays.add("release-switch", html);
    }
    delays
}

fn path_invalidations(daemon: &Daemon) -> f64 {
    let m = daemon.metrics();
    metric_sum(
        &m,
        "fileserver_watch_invalidations_total",
        &[("cause", "path")],
    )
    .unwrap_or(0.0)
}

fn start(root: &Path, extra: &[&str]) -> Daemon {
    let mut args = vec!["--set", "cache.small_file_max=16384"];
    args.extend_from_slice(extra);
    Daemon::start(root, &args)
}

#[test]
fn every_change_is_served_at_once_with_the_watcher() {
    let tmp = tempfile::tempdir().unwrap();
    let root: PathBuf = tmp.path().join("site");
    std::fs::create_dir(&root).unwrap();
    site(&root);
    let daemon = start(
        &root,
        &[
            "--set",
            "cache.valid=60s",
            "--set",
            "cache.negative_ttl=60s",
        ],
    );
    let hammer = Hammer::start(daemon.http, &PATHS, 2);
    let delays = changes(&root, &daemon, REPS, true);
    let requests = hammer.finish();
    let metrics = daemon.metrics();
    let by = |cause| {
        metric_sum(
            &metrics,
            "fileserver_watch_invalidations_total",
            &[("cause", cause)],
        )
        .unwrap_or(0.0)
    };
    summary(&format!(
        "coherence(watch): {} changes, {requests} hammer requests, no torn or mixed body; \
         delays: {}; invalidations path={} tree={} load_race={}",
        delays.0.len(),
        delays.report(),
        by("path"),
        by("tree"),
        by("load_race"),
    ));
    delays.assert_within(EVENT_BOUND);
    assert!(
        by("path") > 0.0 && by("tree") > 0.0,
        "invalidations are counted by cause"
    );
}

#[test]
fn without_the_watcher_cache_valid_bounds_every_change() {
    let tmp = tempfile::tempdir().unwrap();
    let root: PathBuf = tmp.path().join("site");
    std::fs::create_dir(&root).unwrap();
    site(&root);
    let valid = Duration::from_millis(300);
    let daemon = start(
        &root,
        &[
            "--set",
            "cache.watch=false",
            "--set",
            "cache.valid=300ms",
            "--set",
            "cache.negative_ttl=300ms",
        ],
    );
    let hammer = Hammer::start(daemon.http, &PATHS, 2);
    let delays = changes(&root, &daemon, 4, false);
    let requests = hammer.finish();
    summary(&format!(
        "coherence(no watch, valid 300ms): {} changes, {requests} hammer requests, no torn \
         or mixed body; delays: {}; max {:?}",
        delays.0.len(),
        delays.report(),
        delays.max()
    ));
    delays.assert_within(valid + POLL_SLACK);
}

/// The root itself is the link deploy tools re-point (`/srv/site ->
/// releases/N`): new requests resolve beneath the new target at once, and
/// without the watcher within the reaper's tick (at most 200 ms).
#[test]
fn a_root_that_is_a_symlink_is_followed_when_re_pointed() {
    for watch in [true, false] {
        let tmp = tempfile::tempdir().unwrap();
        let release = |n: u32| {
            let dir = tmp.path().join(format!("releases/{n}"));
            std::fs::create_dir_all(dir.join("assets")).unwrap();
            std::fs::write(dir.join("index.html"), version("index.html", n)).unwrap();
            std::fs::write(dir.join("assets/app.js"), version("assets/app.js", n)).unwrap();
            if n == 2 {
                // A file only the new release has.
                std::fs::write(dir.join("new.txt"), version("new.txt", n)).unwrap();
            }
        };
        release(1);
        let link = tmp.path().join("site");
        std::os::unix::fs::symlink("releases/1", &link).unwrap();
        let watch_arg = format!("cache.watch={watch}");
        let daemon = start(
            &link,
            &[
                "--set",
                &watch_arg,
                "--set",
                "cache.valid=60s",
                "--set",
                "cache.negative_ttl=60s",
            ],
        );
        let paths = ["index.html", "assets/app.js", "new.txt"];
        let mut warm = Warm::new(daemon.http);
        for p in paths {
            for _ in 0..3 {
                warm.get(p);
            }
        }
        assert!(is_version("index.html", 1)(&warm.get("index.html")));
        assert_eq!(warm.get("new.txt").status, 404);
        let hammer = Hammer::start(daemon.http, &paths, 2);
        let mut delays = Delays::default();
        for n in 2..=6 {
            release(n);
            repoint(&link, &format!("releases/{n}"));
            let t = Instant::now();
            delays.add(
                "root-switch",
                warm.until("index.html", t, is_version("index.html", n)),
            );
            let asset = warm.get("assets/app.js");
            assert!(
                is_version("assets/app.js", n)(&asset),
                "old asset after the switch"
            );
            if n == 2 {
                assert!(
                    is_version("new.txt", 2)(&warm.get("new.txt")),
                    "a file only the new release has"
                );
            }
        }
        let requests = hammer.finish();
        let switches = metric_sum(&daemon.metrics(), "fileserver_root_switches_total", &[]);
        summary(&format!(
            "coherence(root link, watch={watch}): {requests} hammer requests, no torn or mixed \
             body; {}; root switches {switches:?}",
            delays.report()
        ));
        delays.assert_within(if watch {
            EVENT_BOUND
        } else {
            Duration::from_millis(200) + POLL_SLACK
        });
        assert_eq!(switches, Some(5.0));
        assert!(daemon.stderr_text().contains("root re-pointed"));
    }
}

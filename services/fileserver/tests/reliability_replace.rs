//! File replacement under load. A writer publishes new versions of files
//! while three clients read them over keep-alive connections:
//! - `r*` files are replaced atomically (write a temp file, rename over);
//! - `p*` files are rewritten in place (same inode: write at 0, truncate).
//!
//! Every version starts with a header naming the file, its version, length
//! and payload hash, and the writer records every version's exact bytes, so
//! a response mixing two versions (or metadata of one with bytes of
//! another) is detected by comparing with the recorded bytes.
//!
//! ```text
//! version = "FSVER file=r0 ver=000042 len=00002345 sum=<fnv64 of payload>\n" + payload
//! writer:  r*: write .tmp-r0 -> rename(.tmp-r0, r0)     p*: pwrite(0, v) ; ftruncate(len)
//! readers: 200 body == recorded bytes of exactly one version of THAT file
//! ```
//!
//! Rules checked:
//! - renamed files: every 200 is one complete version; one ETag never names
//!   two versions; no response is older than the version that had been
//!   published for longer than `cache.valid` plus a 3 s grace.
//! - in-place files: the body always agrees with Content-Length or the
//!   connection is closed short (the daemon's rule for a file that shrinks
//!   while sent). A reader can see a torn body while a write is in progress
//!   (no server can prevent that without locks); those are counted, and
//!   once writing stops no torn or stale version may be served.
//! - after the writer stops and the revalidation window passes, every file
//!   serves its final version, on every worker.

mod common;
mod reliability_support;

use common::{Daemon, Tree};
use reliability_support::{fnv64, pseudo_random_bytes, summary, Client};
use std::collections::HashMap;
use std::io::{Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// (name, replaced by rename, base size)
const FILES: [(&str, bool, usize); 6] = [
    ("r0.txt", true, 2_000),
    ("r1.txt", true, 9_000),
    ("r2.bin", true, 150_000),
    ("r3.bin", true, 400_000),
    ("p0.txt", false, 3_000),
    ("p1.bin", false, 200_000),
];
const VALID_MS: u64 = 200;
const GRACE: Duration = Duration::from_secs(3);
const MAX_VERSIONS: u64 = 400;
const WRITE_FOR: Duration = Duration::from_secs(12);
const READERS: usize = 3;

fn version_bytes(file: usize, ver: u64) -> Vec<u8> {
    let (name, _, base) = FILES[file];
    // Sizes differ between versions, so a length mix-up is visible too.
    let len = base + (ver as usize * 7919) % (base / 2 + 1);
    let head_len =
        format!("FSVER file={name} ver=000000 len=00000000 sum=0000000000000000\n").len();
    let payload = pseudo_random_bytes((file as u64) << 32 | ver, len - head_len);
    let mut v = format!(
        "FSVER file={name} ver={ver:06} len={len:08} sum={:016x}\n",
        fnv64(&payload)
    )
    .into_bytes();
    v.extend(payload);
    v
}

/// (file, version) parsed from a body's header line.
fn parse_header(body: &[u8]) -> Option<(String, u64)> {
    let line = body.split(|&b| b == b'\n').next()?;
    let s = std::str::from_utf8(line).ok()?;
    let mut it = s.split(' ');
    (it.next()? == "FSVER").then_some(())?;
    let file = it.next()?.strip_prefix("file=")?.to_string();
    let ver = it.next()?.strip_prefix("ver=")?.parse().ok()?;
    Some((file, ver))
}

/// Every version the writer published: its bytes and when it became visible.
#[derive(Default)]
struct Published {
    bytes: HashMap<(usize, u64), Arc<Vec<u8>>>,
    /// Per file: (version, visible since) in order.
    history: Vec<Vec<(u64, Instant)>>,
    /// Per file: when each write started and ended (None: in progress).
    writes: Vec<Vec<(Instant, Option<Instant>)>>,
}

impl Published {
    /// The newest version of `file` visible at or before `t`.
    fn visible_at(&self, file: usize, t: Instant) -> Option<u64> {
        self.history[file]
            .iter()
            .take_while(|(_, at)| *at <= t)
            .last()
            .map(|(v, _)| *v)
    }

    /// No write to `file` overlapped `from..=to`.
    fn stable(&self, file: usize, from: Instant, to: Instant) -> bool {
        !self.writes[file]
            .iter()
            .any(|&(s, e)| s <= to && e.is_none_or(|e| e >= from))
    }
}

fn publish(root: &std::path::Path, file: usize, ver: u64, p: &RwLock<Published>) {
    let (name, by_rename, _) = FILES[file];
    let bytes = Arc::new(version_bytes(file, ver));
    // Recorded first, so a reader never sees bytes the map does not know.
    p.write().unwrap().bytes.insert((file, ver), bytes.clone());
    let path = root.join(name);
    let started = Instant::now();
    let slot = {
        let mut w = p.write().unwrap();
        w.writes[file].push((started, None));
        w.writes[file].len() - 1
    };
    if by_rename {
        let tmp: PathBuf = root.join(format!(".tmp-{name}"));
        std::fs::write(&tmp, &bytes[..]).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
    } else {
        let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.seek(SeekFrom::Start(0)).unwrap();
        f.write_all(&bytes).unwrap();
        f.set_len(bytes.len() as u64).unwrap();
    }
    let mut w = p.write().unwrap();
    w.history[file].push((ver, Instant::now()));
    w.writes[file][slot].1 = Some(Instant::now());
}

#[derive(Default, Debug)]
struct Tally {
    requests: u64,
    ok: u64,
    /// renamed files: bodies that are not one complete version (must be 0)
    mixed: Vec<String>,
    /// renamed files: older than allowed after the revalidation window (must be 0)
    stale: Vec<String>,
    /// in-place files: full-length bodies that are not one version (allowed while writing)
    torn_in_place: u64,
    /// in-place torn bodies that are a prefix of a newer version, or a
    /// version followed by stale bytes: Content-Length from one version,
    /// bytes from another (the cached size outlived an in-place rewrite)
    torn_length_mismatch: u64,
    /// in-place files: torn bodies although no write overlapped the request
    /// (the daemon mixed versions on its own; must be 0)
    torn_while_stable: Vec<String>,
    /// in-place files: connection closed before Content-Length bytes
    short_in_place: u64,
    /// anything else unexpected (must be empty)
    errors: Vec<String>,
    etags: HashMap<String, (usize, u64)>,
}

fn reader(
    addr: std::net::SocketAddr,
    p: Arc<RwLock<Published>>,
    stop: Arc<AtomicBool>,
    seed: u64,
) -> Tally {
    let mut t = Tally::default();
    let mut client: Option<Client> = None;
    let mut x = seed | 1;
    let t0 = Instant::now();
    while !stop.load(Ordering::Relaxed) && t0.elapsed() < WRITE_FOR + Duration::from_secs(10) {
        if t.errors.len() > 20 {
            break;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let file = (x % FILES.len() as u64) as usize;
        let (name, by_rename, _) = FILES[file];
        let c = match client.as_mut() {
            Some(c) => c,
            None => match Client::connect(addr, Duration::from_secs(20)) {
                Ok(c) => client.insert(c),
                Err(e) => {
                    t.errors.push(format!("connect: {e}"));
                    continue;
                }
            },
        };
        let sent = Instant::now();
        if let Err(e) = c.send(format!("GET /{name} HTTP/1.1\r\nHost: r\r\n\r\n").as_bytes()) {
            t.errors.push(format!("send: {e}"));
            client = None;
            continue;
        }
        let head = match c.read_head(false) {
            Ok(h) => h,
            Err(e) => {
                t.errors.push(format!("{name}: head: {e}"));
                client = None;
                continue;
            }
        };
        let mut body = Vec::with_capacity(head.body_len as usize);
        if let Err(e) = c.read_body_with(head.body_len, |b| body.extend_from_slice(b)) {
            client = None;
            if by_rename {
                t.errors.push(format!("{name}: body cut short: {e}"));
            } else {
                t.short_in_place += 1;
            }
            continue;
        }
        let received = Instant::now();
        t.requests += 1;
        if head.status != 200 {
            t.errors.push(format!("{name}: status {}", head.status));
            continue;
        }
        let parsed = parse_header(&body).filter(|(f, _)| f == name);
        let pubd = p.read().unwrap();
        let exact = parsed.as_ref().and_then(|(_, v)| {
            pubd.bytes
                .get(&(file, *v))
                .filter(|b| ***b == body[..])
                .map(|_| *v)
        });
        match exact {
            Some(ver) => {
                t.ok += 1;
                if by_rename {
                    if let Some(etag) = head.header("etag") {
                        let prev = t.etags.entry(etag.to_string()).or_insert((file, ver));
                        if *prev != (file, ver) {
                            t.mixed.push(format!(
                                "{name}: ETag {etag} names version {ver} and {:?}",
                                prev
                            ));
                        }
                    }
                    // Versions published more than valid + grace before the
                    // request was sent must be superseded.
                    let horizon = sent.checked_sub(Duration::from_millis(VALID_MS) + GRACE);
                    if let Some(min) = horizon.and_then(|h| pubd.visible_at(file, h)) {
                        if ver < min {
                            t.stale.push(format!("{name}: got version {ver}, {min} was published > {GRACE:?} + valid earlier"));
                        }
                    }
                }
            }
            None if by_rename => t.mixed.push(format!(
                "{name}: {} bytes, header {:?}, Content-Length {}, not one complete version",
                body.len(),
                String::from_utf8_lossy(&body[..body.len().min(60)]),
                head.body_len
            )),
            None => {
                t.torn_in_place += 1;
                let other_len = pubd.bytes.iter().any(|((f, _), b)| {
                    *f == file
                        && b.len() != body.len()
                        && b[..b.len().min(body.len())] == body[..b.len().min(body.len())]
                });
                if other_len {
                    t.torn_length_mismatch += 1;
                }
                if pubd.stable(file, sent, received) && t.torn_while_stable.len() < 1000 {
                    t.torn_while_stable.push(format!(
                        "{name}: {} bytes (Content-Length {}), header {:?}, current version {:?}, \
                         no write during the request, last write ended {:?} ms before it",
                        body.len(),
                        head.body_len,
                        String::from_utf8_lossy(&body[..body.len().min(48)]),
                        pubd.history[file].last().map(|(v, _)| *v),
                        pubd.writes[file].last().and_then(
                            |(_, e)| e.map(|e| sent.saturating_duration_since(e).as_millis())
                        )
                    ));
                }
            }
        }
    }
    t
}

#[test]
fn replace_files_under_load_never_mixes_versions() {
    let t = Tree::new();
    let p = Arc::new(RwLock::new(Published {
        history: vec![Vec::new(); FILES.len()],
        writes: vec![Vec::new(); FILES.len()],
        ..Published::default()
    }));
    for (file, (name, _, _)) in FILES.iter().enumerate() {
        std::fs::write(t.root.join(name), b"").unwrap();
        publish(&t.root, file, 0, &p);
    }
    let valid = format!("cache.valid={VALID_MS}ms");
    let neg = format!("cache.negative_ttl={VALID_MS}ms");
    let d = Daemon::start(
        &t.root,
        &["--log-level", "error", "--set", &valid, "--set", &neg],
    );

    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..READERS)
        .map(|k| {
            let (p, stop, addr) = (p.clone(), stop.clone(), d.http);
            std::thread::spawn(move || reader(addr, p, stop, 0xabcdef + k as u64 * 6151))
        })
        .collect();
    // Writer: round-robin over the files, bounded by count and time.
    let started = Instant::now();
    let mut versions = 0u64;
    let mut next_ver = vec![1u64; FILES.len()];
    while versions < MAX_VERSIONS && started.elapsed() < WRITE_FOR {
        let file = (versions % FILES.len() as u64) as usize;
        publish(&t.root, file, next_ver[file], &p);
        next_ver[file] += 1;
        versions += 1;
        std::thread::sleep(Duration::from_millis(25));
    }
    let write_secs = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let mut total = Tally::default();
    for r in readers {
        let t = r.join().unwrap();
        total.requests += t.requests;
        total.ok += t.ok;
        total.mixed.extend(t.mixed);
        total.stale.extend(t.stale);
        total.torn_in_place += t.torn_in_place;
        total.torn_length_mismatch += t.torn_length_mismatch;
        total.torn_while_stable.extend(t.torn_while_stable);
        total.short_in_place += t.short_in_place;
        total.errors.extend(t.errors);
    }

    // Writing stopped: after the revalidation window, every file serves its
    // final version on fresh connections (both workers).
    std::thread::sleep(Duration::from_millis(VALID_MS) + Duration::from_millis(800));
    let mut final_wrong = Vec::new();
    let mut final_checks = 0;
    for round in 0..6 {
        let mut c = Client::connect(d.http, Duration::from_secs(20)).unwrap();
        for (file, (name, _, _)) in FILES.iter().enumerate() {
            let want = p.read().unwrap().bytes[&(file, next_ver[file] - 1)].clone();
            c.send(format!("GET /{name} HTTP/1.1\r\nHost: r\r\n\r\n").as_bytes())
                .unwrap();
            final_checks += 1;
            match c.read_response(false) {
                Ok(r) if r.status == 200 && r.body == *want => {}
                Ok(r) => final_wrong.push(format!(
                    "round {round} {name}: {} {:?} (want version {})",
                    r.status,
                    String::from_utf8_lossy(&r.body[..r.body.len().min(48)]),
                    next_ver[file] - 1
                )),
                Err(e) => final_wrong.push(format!("round {round} {name}: {e}")),
            }
        }
    }
    summary(&format!(
        "reliability replace: versions={versions} write_secs={write_secs:.1} requests={} complete={} \
         mixed_renamed={} stale_renamed={} torn_in_place={} (length_mismatch={} while_no_write={}) short_in_place={} errors={} \
         final_checks={final_checks} final_wrong={} valid_ms={VALID_MS}",
        total.requests,
        total.ok,
        total.mixed.len(),
        total.stale.len(),
        total.torn_in_place,
        total.torn_length_mismatch,
        total.torn_while_stable.len(),
        total.short_in_place,
        total.errors.len(),
        final_wrong.len()
    ));
    assert!(
        total.errors.is_empty(),
        "errors: {:?}",
        &total.errors[..total.errors.len().min(10)]
    );
    assert!(
        total.mixed.is_empty(),
        "renamed files served a mix: {:?}",
        &total.mixed[..total.mixed.len().min(10)]
    );
    assert!(
        total.stale.is_empty(),
        "stale after the window: {:?}",
        &total.stale[..total.stale.len().min(10)]
    );
    assert!(
        total.torn_while_stable.is_empty(),
        "in-place files served a mix while no write was in progress: {:?}",
        &total.torn_while_stable[..total.torn_while_stable.len().min(5)]
    );
    assert!(
        final_wrong.is_empty(),
        "final versions not served: {final_wrong:?}"
    );
    assert!(total.ok > 1000, "only {} complete responses", total.ok);
}

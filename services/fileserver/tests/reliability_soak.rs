//! Soak: at least 200k requests against the real daemon, mixing 200, 304,
//! 206, 404 and HEAD over pipelined keep-alive connections from a few
//! threads, plus clients that disconnect in the middle of a large body.
//! Afterwards the daemon holds the same descriptors as after warm-up, the
//! fd table balances (allocations - releases = open), RSS stayed within a
//! bound, and `/metrics` counts match what the clients received.
//!
//! ```text
//!  3 threads x 1 keep-alive socket: write 32 requests, read 32 responses, check each
//!  1 thread: GET /big.bin (32 MiB), read a little, close   (RST mid-sendfile)
//!  scrape before/after -> deltas by code == client tallies
//! ```

mod common;
mod reliability_support;

use common::{Daemon, Tree};
use reliability_support::{
    fd_kinds, fd_targets, pseudo_random_bytes, rss_kb, scrape, summary, wait_until, Client, Metrics,
};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TARGET_REQUESTS: u64 = 200_000;
const THREADS: u64 = 3;
const BATCH: usize = 32;
const SMALL_N: usize = 64;
const SMALL_LEN: usize = 1024;
const MID_N: usize = 8;
const MID_LEN: usize = 20 * 1024;
const MISSING_N: usize = 16;
const BIG_LEN: usize = 32 << 20;
const ABORT_CLIENTS: u64 = 200;
/// RSS may grow by at most this much over the soak (KiB).
const RSS_GROWTH_BOUND_KB: u64 = 32 * 1024;
const TIME_BOUND: Duration = Duration::from_secs(180);

#[derive(Clone, Copy, Debug)]
enum Expect {
    Full(usize),
    Head(usize),
    NotModified,
    Range(usize, usize, usize),
    Missing,
}

struct Plan {
    files: Vec<Vec<u8>>,
    /// (request bytes, expectation, is HEAD)
    kinds: Vec<(Vec<u8>, Expect, bool)>,
}

fn path_of(i: usize) -> String {
    if i < SMALL_N {
        format!("/small/s{i}.txt")
    } else {
        format!("/mid/m{}.bin", i - SMALL_N)
    }
}

/// Builds the request mix: per small file GET, HEAD, If-None-Match and a
/// range; per mid file GET and a suffix range; plus 404s.
fn plan(files: Vec<Vec<u8>>, etags: &[String]) -> Plan {
    let mut kinds = Vec::new();
    for i in 0..SMALL_N + MID_N {
        let p = path_of(i);
        let len = files[i].len();
        kinds.push((
            format!("GET {p} HTTP/1.1\r\nHost: soak\r\n\r\n").into_bytes(),
            Expect::Full(i),
            false,
        ));
        if i < SMALL_N {
            kinds.push((
                format!("HEAD {p} HTTP/1.1\r\nHost: soak\r\n\r\n").into_bytes(),
                Expect::Head(i),
                true,
            ));
            kinds.push((
                format!(
                    "GET {p} HTTP/1.1\r\nHost: soak\r\nIf-None-Match: {}\r\n\r\n",
                    etags[i]
                )
                .into_bytes(),
                Expect::NotModified,
                false,
            ));
            kinds.push((
                format!("GET {p} HTTP/1.1\r\nHost: soak\r\nRange: bytes=10-99\r\n\r\n")
                    .into_bytes(),
                Expect::Range(i, 10, 100),
                false,
            ));
        } else {
            kinds.push((
                format!("GET {p} HTTP/1.1\r\nHost: soak\r\nRange: bytes=-100\r\n\r\n").into_bytes(),
                Expect::Range(i, len - 100, len),
                false,
            ));
        }
    }
    for k in 0..MISSING_N {
        kinds.push((
            format!("GET /missing/n{k}.txt HTTP/1.1\r\nHost: soak\r\n\r\n").into_bytes(),
            Expect::Missing,
            false,
        ));
    }
    Plan { files, kinds }
}

#[derive(Default, Debug, Clone)]
struct Tally {
    requests: u64,
    ok200: u64,
    head200: u64,
    not_modified: u64,
    partial: u64,
    missing: u64,
    body_bytes: u64,
    errors: Vec<String>,
}

fn check(plan: &Plan, e: Expect, r: &reliability_support::Response, t: &mut Tally) {
    let bad = |t: &mut Tally, what: String| {
        if t.errors.len() < 20 {
            t.errors.push(what);
        } else {
            t.errors.push(String::new());
        }
    };
    match e {
        Expect::Full(i) => {
            if r.status == 200 && r.body == plan.files[i] {
                t.ok200 += 1;
                t.body_bytes += r.body.len() as u64;
            } else {
                bad(
                    t,
                    format!("GET {}: {} len {}", path_of(i), r.status, r.body.len()),
                );
            }
        }
        Expect::Head(i) => {
            let cl = r
                .header("content-length")
                .and_then(|v| v.parse::<usize>().ok());
            if r.status == 200 && r.body.is_empty() && cl == Some(plan.files[i].len()) {
                t.head200 += 1;
            } else {
                bad(t, format!("HEAD {}: {} cl {cl:?}", path_of(i), r.status));
            }
        }
        Expect::NotModified => {
            if r.status == 304 && r.body.is_empty() && r.header("etag").is_some() {
                t.not_modified += 1;
            } else {
                bad(t, format!("If-None-Match: {}", r.status));
            }
        }
        Expect::Range(i, a, b) => {
            let want_cr = format!("bytes {}-{}/{}", a, b - 1, plan.files[i].len());
            if r.status == 206
                && r.body == plan.files[i][a..b]
                && r.header("content-range") == Some(want_cr.as_str())
            {
                t.partial += 1;
                t.body_bytes += r.body.len() as u64;
            } else {
                bad(
                    t,
                    format!(
                        "Range {}: {} {:?}",
                        path_of(i),
                        r.status,
                        r.header("content-range")
                    ),
                );
            }
        }
        Expect::Missing => {
            if r.status == 404 {
                t.missing += 1;
                t.body_bytes += r.body.len() as u64;
            } else {
                bad(t, format!("missing: {}", r.status));
            }
        }
    }
}

/// One client thread: pipelined batches on one keep-alive socket
/// (reconnecting if the server closes), until `quota` requests or the time bound.
fn pipelined_client(
    addr: std::net::SocketAddr,
    plan: Arc<Plan>,
    seed: u64,
    quota: u64,
    deadline: Instant,
) -> Tally {
    let mut t = Tally::default();
    let mut client: Option<Client> = None;
    let mut x = seed | 1;
    let mut batch = Vec::with_capacity(BATCH * 64);
    let mut expects = Vec::with_capacity(BATCH);
    while t.requests < quota && Instant::now() < deadline && t.errors.len() < 50 {
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
        batch.clear();
        expects.clear();
        let n = (quota - t.requests).min(BATCH as u64) as usize;
        for _ in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (req, e, head) = &plan.kinds[(x % plan.kinds.len() as u64) as usize];
            batch.extend_from_slice(req);
            expects.push((*e, *head));
        }
        if let Err(e) = c.send(&batch) {
            t.errors.push(format!("send: {e}"));
            client = None;
            continue;
        }
        for &(e, head) in &expects {
            match c.read_response(head) {
                Ok(r) => {
                    t.requests += 1;
                    check(&plan, e, &r, &mut t);
                }
                Err(err) => {
                    t.errors.push(format!("read: {err}"));
                    client = None;
                    break;
                }
            }
        }
    }
    t
}

/// Clients that go away in the middle of a 32 MiB body (or right after
/// sending the request), so the daemon's sendfile hits EPIPE/ECONNRESET.
fn aborting_clients(
    addr: std::net::SocketAddr,
    deadline: Instant,
    count: u64,
) -> (u64, Vec<String>) {
    let mut n = 0;
    let mut errors = Vec::new();
    for i in 0..count {
        if Instant::now() > deadline {
            break;
        }
        let mut s = match TcpStream::connect(addr) {
            Ok(s) => s,
            Err(e) => {
                errors.push(format!("connect: {e}"));
                continue;
            }
        };
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let req: &[u8] = if i % 4 == 3 {
            // Three pipelined requests; leave during the first body.
            b"GET /big.bin HTTP/1.1\r\nHost: a\r\n\r\nGET /big.bin HTTP/1.1\r\nHost: a\r\n\r\nGET /small/s1.txt HTTP/1.1\r\nHost: a\r\n\r\n"
        } else {
            b"GET /big.bin HTTP/1.1\r\nHost: a\r\n\r\n"
        };
        if s.write_all(req).is_err() {
            errors.push("write".into());
            continue;
        }
        if i % 4 != 1 {
            // Read the head and up to ~256 KiB of the body, then leave.
            let mut buf = vec![0u8; 64 * 1024];
            let mut got = 0;
            let want = 4096 + (i as usize % 4) * 64 * 1024;
            while got < want {
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(k) => got += k,
                    Err(e) => {
                        errors.push(format!("read: {e}"));
                        break;
                    }
                }
            }
        }
        n += 1;
        drop(s);
    }
    (n, errors)
}

fn code(m: &Metrics, c: &str) -> f64 {
    m.get0("fileserver_http_requests_total", &[("code", c)])
}

#[test]
fn soak_mixed_keepalive_pipelined_and_aborted() {
    let t = Tree::new();
    let mut files = Vec::new();
    for i in 0..SMALL_N {
        files.push(pseudo_random_bytes(i as u64, SMALL_LEN));
        t.write(&format!("small/s{i}.txt"), &files[i]);
    }
    for i in 0..MID_N {
        files.push(pseudo_random_bytes(1000 + i as u64, MID_LEN));
        t.write(&format!("mid/m{i}.bin"), &files[SMALL_N + i]);
    }
    t.write("big.bin", &pseudo_random_bytes(7, BIG_LEN));
    let d = Daemon::start(&t.root, &["--log-level", "error"]);
    let pid = d.pid();

    // Warm-up, twice with the revalidation window (cache.valid = 1 s) in
    // between, so every lazily created descriptor (cache entries, the
    // revalidating thread's ring) exists before the baseline is taken.
    let mut etags = Vec::new();
    for round in 0..2 {
        if round == 1 {
            std::thread::sleep(Duration::from_millis(1300));
        }
        let mut c = Client::connect(d.http, Duration::from_secs(20)).unwrap();
        for (i, f) in files.iter().enumerate() {
            c.send(format!("GET {} HTTP/1.1\r\nHost: soak\r\n\r\n", path_of(i)).as_bytes())
                .unwrap();
            let r = c.read_response(false).unwrap();
            assert_eq!(
                (r.status, r.body.len()),
                (200, f.len()),
                "warm-up {}",
                path_of(i)
            );
            if round == 0 {
                etags.push(r.header("etag").expect("ETag").to_string());
            }
        }
        for k in 0..MISSING_N {
            c.send(format!("GET /missing/n{k}.txt HTTP/1.1\r\nHost: soak\r\n\r\n").as_bytes())
                .unwrap();
            assert_eq!(c.read_response(false).unwrap().status, 404);
        }
    }
    // The big file enters the cache too (and the abort path runs once).
    let (n, errs) = aborting_clients(d.http, Instant::now() + TIME_BOUND, 4);
    assert!(n == 4 && errs.is_empty(), "warm-up aborts: {errs:?}");
    let plan = Arc::new(plan(files, &etags));
    assert!(wait_until(Duration::from_secs(10), || {
        scrape(d.admin).must("fileserver_connections_open") == 0.0
    }));
    // Let lingering closes of the aborted warm-up connections finish.
    std::thread::sleep(Duration::from_millis(1000));
    let before = scrape(d.admin);
    let fds_before = fd_kinds(pid, &t.root);
    let fd_list_before = fd_targets(pid);
    let rss_before = rss_kb(pid);

    let started = Instant::now();
    let deadline = started + TIME_BOUND;
    let aborted = Arc::new(AtomicU64::new(0));
    let aborter = {
        let addr = d.http;
        let aborted = aborted.clone();
        std::thread::spawn(move || {
            let (n, errs) = aborting_clients(addr, deadline, ABORT_CLIENTS);
            aborted.store(n, Ordering::Relaxed);
            errs
        })
    };
    let clients: Vec<_> = (0..THREADS)
        .map(|k| {
            let plan = plan.clone();
            let addr = d.http;
            std::thread::spawn(move || {
                pipelined_client(
                    addr,
                    plan,
                    0x1234_5678 + k * 7919,
                    TARGET_REQUESTS / THREADS + 1,
                    deadline,
                )
            })
        })
        .collect();
    let mut total = Tally::default();
    for c in clients {
        let t = c.join().unwrap();
        total.requests += t.requests;
        total.ok200 += t.ok200;
        total.head200 += t.head200;
        total.not_modified += t.not_modified;
        total.partial += t.partial;
        total.missing += t.missing;
        total.body_bytes += t.body_bytes;
        total.errors.extend(t.errors);
    }
    let abort_errors = aborter.join().unwrap();
    let aborted = aborted.load(Ordering::Relaxed);
    let secs = started.elapsed().as_secs_f64();

    // Settle: connections gone, deferred releases reaped, histogram flushed.
    let idle = wait_until(Duration::from_secs(15), || {
        let m = scrape(d.admin);
        m.must("fileserver_connections_open") == 0.0
            && m.sum("fileserver_deferred_release_queue_depth")
                .unwrap_or(0.0)
                == 0.0
    });
    std::thread::sleep(Duration::from_millis(300));
    // Idle blocking-pool threads (and their per-thread rings) exit after 10 s.
    // Cached-entry descriptors exactly as after warm-up, no socket left over,
    // nothing else grown (a blocking-pool thread's ring may come and go).
    let fds_back = wait_until(Duration::from_secs(20), || {
        let k = fd_kinds(pid, &t.root);
        k.files == fds_before.files
            && k.sockets <= fds_before.sockets
            && k.total <= fds_before.total
    });
    let fds_after = fd_kinds(pid, &t.root);
    let rss_after = rss_kb(pid);
    let after = scrape(d.admin);

    let delta = |c: &str| code(&after, c) - code(&before, c);
    let (d200, d206, d304, d404) = (delta("200"), delta("206"), delta("304"), delta("404"));
    let all_codes = after.sum("fileserver_http_requests_total").unwrap_or(0.0)
        - before.sum("fileserver_http_requests_total").unwrap_or(0.0);
    let d_body = after.must("fileserver_http_response_body_bytes_total")
        - before.must("fileserver_http_response_body_bytes_total");
    let d_hist = after.must("fileserver_http_request_duration_seconds_count")
        - before.must("fileserver_http_request_duration_seconds_count");
    let allocs = after.must("fileserver_fd_allocations_total");
    let releases = after.must("fileserver_fd_releases_total");
    let fds_open = after.must("fileserver_fds_open");
    let cache_entries = after.must("fileserver_cache_entries");
    let client_200 = (total.ok200 + total.head200) as f64;

    summary(&format!(
        "reliability soak: requests={} aborted_clients={aborted} errors={} secs={secs:.1} req_per_s={:.0} \
         fds_before={} fds_after={} file_fds_before={} file_fds_after={} sockets_before={} sockets_after={} rss_before_kb={rss_before} rss_after_kb={rss_after} rss_growth_bound_kb={RSS_GROWTH_BOUND_KB} \
         codes(client/metrics) 200={client_200}/{d200} 206={}/{d206} 304={}/{d304} 404={}/{d404} all={all_codes} \
         hist_count={d_hist} body_bytes(client/metrics)={}/{d_body} fd_allocs={allocs} fd_releases={releases} \
         fds_open={fds_open} cache_entries={cache_entries}",
        total.requests,
        total.errors.len() + abort_errors.len(),
        total.requests as f64 / secs,
        fds_before.total,
        fds_after.total,
        fds_before.files,
        fds_after.files,
        fds_before.sockets,
        fds_after.sockets,
        total.partial,
        total.not_modified,
        total.missing,
        total.body_bytes,
    ));

    assert!(
        total.errors.is_empty(),
        "client errors: {:?}",
        &total.errors[..total.errors.len().min(20)]
    );
    assert!(
        abort_errors.is_empty(),
        "aborting clients: {abort_errors:?}"
    );
    assert!(
        total.requests >= TARGET_REQUESTS,
        "only {} requests within {TIME_BOUND:?}",
        total.requests
    );
    assert!(
        idle,
        "connections or deferred releases did not drain:\n{}",
        after.text
    );
    // Descriptors: back to the warmed-up baseline, and the table balances.
    let fd_list_after = fd_targets(pid);
    assert!(
        fds_back,
        "daemon fds after the soak {fds_after:?}, after warm-up {fds_before:?}\nnew: {:?}\ngone: {:?}",
        fd_list_after.iter().filter(|f| !fd_list_before.contains(f)).collect::<Vec<_>>(),
        fd_list_before.iter().filter(|f| !fd_list_after.contains(f)).collect::<Vec<_>>(),
    );
    assert_eq!(
        fds_after.files as f64, fds_open,
        "file descriptors in /proc vs fileserver_fds_open"
    );
    assert_eq!(
        allocs - releases,
        fds_open,
        "fd_allocations_total - fd_releases_total != fds_open"
    );
    assert!(
        rss_after <= rss_before + RSS_GROWTH_BOUND_KB,
        "RSS grew from {rss_before} KiB to {rss_after} KiB"
    );
    // Metrics add up with what the clients saw. Aborted clients' responses
    // may or may not be counted (as 200) by the daemon, nothing else may.
    assert_eq!(d206, total.partial as f64, "206 count");
    assert_eq!(d304, total.not_modified as f64, "304 count");
    assert_eq!(d404, total.missing as f64, "404 count");
    let slack = aborted as f64 * 2.0;
    assert!(
        d200 >= client_200 && d200 <= client_200 + slack,
        "200 count {d200}, clients received {client_200} (+ up to {slack} aborted)"
    );
    assert!(
        all_codes >= total.requests as f64 && all_codes <= total.requests as f64 + slack,
        "responses by any code {all_codes}, clients received {}",
        total.requests
    );
    assert_eq!(
        d_hist, all_codes,
        "duration histogram count vs responses counted"
    );
    let body = total.body_bytes as f64;
    assert!(
        d_body >= body && d_body <= body + slack * BIG_LEN as f64,
        "body bytes {d_body}, clients received {body}"
    );
}

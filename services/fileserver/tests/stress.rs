//! Bounded stress: many concurrent keep-alive clients (full and ranged GETs,
//! small files from the in-memory cache and large ones via sendfile) while a
//! writer atomically replaces the files. Every response must be one complete,
//! self-consistent version of its file; nothing may be mixed, short or 5xx.

mod common;

use common::{client, metric_sum, Daemon, Tree};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const FILES: usize = 24;

/// Version `v` of file `i`: a header naming both, then filler derived from them.
fn content(i: usize, v: u32) -> Vec<u8> {
    let size = if i % 3 == 0 { 200_000 } else { 1_000 + i * 37 };
    let mut out = format!("file{i:02}-v{v:06}|").into_bytes();
    let mut x = (i as u32).wrapping_mul(2_654_435_761) ^ v;
    while out.len() < size {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        out.push(b'a' + (x >> 24) as u8 % 26);
    }
    out
}

fn version_of(body: &[u8]) -> Option<(usize, u32)> {
    let s = std::str::from_utf8(body.get(..15)?).ok()?;
    Some((s.get(4..6)?.parse().ok()?, s.get(8..14)?.parse().ok()?))
}

#[test]
fn concurrent_clients_with_replacing_writer_get_consistent_bodies() {
    let tree = Tree::new();
    for i in 0..FILES {
        tree.write(&format!("f{i}.txt"), &content(i, 0));
    }
    let d = Daemon::start(&tree.root, &["--set", "cache.valid=50ms"]);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let root = tree.root.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut v = 1;
            while !stop.load(Ordering::Relaxed) {
                for i in (0..FILES).step_by(5) {
                    let tmp = root.join(format!(".tmp{i}"));
                    std::fs::write(&tmp, content(i, v)).unwrap();
                    std::fs::rename(&tmp, root.join(format!("f{i}.txt"))).unwrap();
                }
                v += 1;
                std::thread::sleep(Duration::from_millis(15));
            }
            v
        })
    };
    let deadline = Instant::now() + Duration::from_secs(4);
    let mut readers = Vec::new();
    for t in 0..6 {
        let url = d.url("");
        readers.push(std::thread::spawn(move || {
            let c = client();
            let mut n = 0u64;
            let mut k = t as usize;
            while Instant::now() < deadline {
                k = k.wrapping_mul(31).wrapping_add(7);
                let i = k % FILES;
                let ranged = k % 4 == 0;
                let mut rb = c.get(format!("{url}/f{i}.txt"));
                if ranged {
                    rb = rb.header("Range", "bytes=0-99");
                }
                let r = rb.send().unwrap();
                let status = r.status().as_u16();
                let cl: usize = r.headers()["content-length"]
                    .to_str()
                    .unwrap()
                    .parse()
                    .unwrap();
                let body = r.bytes().unwrap();
                assert_eq!(body.len(), cl, "body length disagrees with Content-Length");
                let (fi, v) =
                    version_of(&body).unwrap_or_else(|| panic!("no version header in f{i}"));
                assert_eq!(fi, i);
                let want = content(i, v);
                if ranged {
                    assert_eq!(status, 206);
                    assert_eq!(&body[..], &want[..100], "f{i} v{v} range mixed");
                } else {
                    assert_eq!(status, 200);
                    assert!(
                        body[..] == want[..],
                        "f{i} v{v}: body is not one complete version"
                    );
                }
                n += 1;
            }
            n
        }));
    }
    let total: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    stop.store(true, Ordering::Relaxed);
    let versions = writer.join().unwrap();
    assert!(total > 100, "only {total} requests");
    assert!(versions > 5, "writer made only {versions} versions");
    std::thread::sleep(Duration::from_millis(300));
    let m = d.metrics();
    let served = metric_sum(&m, "fileserver_http_requests_total", &[("code", "200")])
        .unwrap_or(0.0)
        + metric_sum(&m, "fileserver_http_requests_total", &[("code", "206")]).unwrap_or(0.0);
    assert_eq!(served as u64, total, "every response counted once");
    // Every code's series is published from the start, at 0 until used.
    assert_eq!(
        metric_sum(&m, "fileserver_http_requests_total", &[("code", "500")]),
        Some(0.0)
    );
}

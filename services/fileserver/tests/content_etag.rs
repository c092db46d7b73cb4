//! `etag = "content"`: entity-tags by the bytes, so two replicas built
//! from one tree agree whatever their files' times, and a rewrite that
//! keeps size and mtime (an image with a fixed mtime) still changes it;
//! the default `meta` tags by size and time.

mod common;

use common::{client, Daemon, Tree};
use std::time::{Duration, SystemTime};

fn etag(d: &Daemon, path: &str) -> String {
    let r = client().get(d.url(path)).send().unwrap();
    assert_eq!(r.status(), 200);
    r.headers()["etag"].to_str().unwrap().to_string()
}

/// A tree with a small (kept in memory) and a large file, all dated `at`.
fn tree(at: SystemTime) -> Tree {
    let t = Tree::new();
    for (name, bytes) in [
        ("small.txt", b"hello".to_vec()),
        ("large.bin", vec![9u8; 3 << 20]),
    ] {
        let p = t.write(name, &bytes);
        std::fs::File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_modified(at)
            .unwrap();
    }
    t
}

#[test]
fn replicas_agree_by_content_and_a_same_time_rewrite_shows() {
    let epoch = SystemTime::UNIX_EPOCH + Duration::from_secs(1);
    let (a, b) = (tree(epoch), tree(epoch + Duration::from_secs(3600)));
    let content = ["--set", "etag=content"];
    let (da, db) = (
        Daemon::start(&a.root, &content),
        Daemon::start(&b.root, &content),
    );
    for path in ["/small.txt", "/large.bin"] {
        assert_eq!(
            etag(&da, path),
            etag(&db, path),
            "{path}: replicas disagree"
        );
    }
    let (ma, mb) = (Daemon::start(&a.root, &[]), Daemon::start(&b.root, &[]));
    assert_ne!(
        etag(&ma, "/small.txt"),
        etag(&mb, "/small.txt"),
        "meta tags by time"
    );

    // Same size, same mtime, other bytes: the content tag changes, and a
    // client's old tag no longer revalidates.
    let before = etag(&da, "/small.txt");
    let p = a.write("small.txt", b"HELLO");
    std::fs::File::options()
        .write(true)
        .open(&p)
        .unwrap()
        .set_modified(epoch)
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while etag(&da, "/small.txt") == before {
        assert!(
            std::time::Instant::now() < deadline,
            "the rewrite never showed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let now = etag(&da, "/small.txt");
    let r = client()
        .get(da.url("/small.txt"))
        .header("If-None-Match", &now)
        .send()
        .unwrap();
    assert_eq!(r.status(), 304);
    let r = client()
        .get(da.url("/small.txt"))
        .header("If-None-Match", &before)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    // The tag is the first 64 bits of the bytes' SHA-256, as sha256sum prints.
    let out = std::process::Command::new("sha256sum")
        .arg(&p)
        .output()
        .unwrap();
    let hex = String::from_utf8_lossy(&out.stdout)[..16].to_string();
    assert_eq!(now, format!("\"{hex}\""));
}

#[test]
fn check_config_refuses_another_etag_kind() {
    let (_, _, err) = common::check_config("etag = \"hash\"\n");
    assert!(
        err.contains("key `etag`: `hash` is not one of meta, content"),
        "{err}"
    );
}

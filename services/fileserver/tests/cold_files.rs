//! Files that are not in the page cache: the daemon must not let sendfile
//! (or, over TLS, the read it seals) wait for the disk on a worker thread,
//! so a cold range is read through the I/O backend and sent from memory. Checked with real evictions
//! (`posix_fadvise(DONTNEED)` on a disk-backed file), byte for byte, and by
//! the counter that says which path the bytes took.

mod common;

use common::{metric, Daemon};
use std::os::fd::AsRawFd;

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 13 % 241) as u8).collect()
}

/// Drops `path`'s clean pages from the page cache; false where the
/// filesystem keeps them anyway (tmpfs).
fn evict(path: &std::path::Path) -> bool {
    let f = std::fs::File::open(path).unwrap();
    f.sync_all().unwrap();
    // SAFETY: fadvise on an open descriptor; no memory is passed.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(rc, 0);
    !filemanager::is_resident(std::os::fd::AsFd::as_fd(&f), 0, 1 << 20)
}

/// [`evict`], saying why the test stops where the filesystem keeps the
/// pages anyway.
fn evicted_or_skipped(path: &std::path::Path) -> bool {
    let evicted = evict(path);
    if !evicted {
        eprintln!("skipped: this filesystem keeps evicted pages; cannot make a file cold here");
    }
    evicted
}

/// A root holding `name`, `len` patterned bytes (returned too), on disk:
/// under the target directory, since /tmp may be tmpfs, which never
/// evicts.
fn disk_root(name: &str, len: usize) -> (tempfile::TempDir, Vec<u8>) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let data = pattern(len);
    std::fs::write(dir.path().join(name), &data).unwrap();
    (dir, data)
}

/// Body bytes the daemon read through the backend because they were cold.
fn cold_bytes(d: &Daemon) -> f64 {
    metric(&d.metrics(), "fileserver_http_cold_read_bytes_total").unwrap()
}

/// A file cold but for its end: the daemon reads a body's
/// tail first, while it asks whether the rest is resident. Here it is not,
/// so the tail is set aside, the cold windows go first, and the tail is
/// read again after them: the body still arrives in order.
#[test]
fn a_file_cold_but_for_its_end_still_sends_its_tail_last() {
    let (dir, data) = disk_root("mid.bin", 2 << 20);
    let root = dir.path();
    let d = Daemon::start(root, &[]);
    let client = common::client();
    let get = || {
        let r = client.get(d.url("/mid.bin")).send().unwrap();
        r.bytes().unwrap().to_vec()
    };
    assert!(get() == data);
    assert_eq!(cold_bytes(&d), 0.0);
    let path = root.join("mid.bin");
    if !evicted_or_skipped(&path) {
        return;
    }
    // The last 16 KiB read back without readahead: hot at the end only.
    let tail = (data.len() - (16 << 10)) as u64;
    let f = std::fs::File::open(&path).unwrap();
    // SAFETY: fadvise on an open descriptor; no memory is passed.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
    assert_eq!(rc, 0);
    let mut buf = vec![0u8; 16 << 10];
    std::os::unix::fs::FileExt::read_exact_at(&f, &mut buf, tail).unwrap();
    let fd = std::os::fd::AsFd::as_fd(&f);
    assert!(
        filemanager::is_resident(fd, tail, 16 << 10),
        "the tail is in the page cache"
    );
    assert!(!filemanager::is_resident(fd, 0, tail), "the rest is not");
    assert!(get() == data, "the body arrives byte for byte, tail last");
    assert!(
        cold_bytes(&d) > 0.0,
        "the cold part went through the backend"
    );
}

#[test]
fn cold_ranges_are_read_through_the_backend_and_sent_whole() {
    let (dir, data) = disk_root("cold.bin", 8 << 20);
    let root = dir.path();
    let d = Daemon::start(root, &[]);
    let client = common::client();
    let get = |range: Option<&str>| {
        let mut rb = client.get(d.url("/cold.bin"));
        if let Some(r) = range {
            rb = rb.header("Range", r);
        }
        rb.send().unwrap().bytes().unwrap().to_vec()
    };
    // Hot: sendfile all the way.
    assert!(get(None) == data);
    assert_eq!(
        cold_bytes(&d),
        0.0,
        "a hot file is not read through the backend"
    );
    if !evicted_or_skipped(&root.join("cold.bin")) {
        return;
    }
    assert!(get(None) == data, "the cold file arrives byte for byte");
    // At least the first window; how much more depends on how fast the
    // kernel's readahead (started by those reads) fills the rest.
    let read = cold_bytes(&d);
    assert!(
        read >= (256 << 10) as f64,
        "cold bytes read through the backend: {read}"
    );
    // It is hot again (the backend's reads filled the page cache).
    assert!(get(None) == data);
    assert_eq!(cold_bytes(&d), read);
    // A cold range in the middle.
    assert!(evict(&root.join("cold.bin")));
    let body = get(Some("bytes=3000000-5999999"));
    assert!(body == data[3_000_000..6_000_000]);
    assert!(cold_bytes(&d) > read);
}

/// The same over HTTPS HTTP/1.1, where a body is read into memory and
/// sealed instead of sent by sendfile: a cold window is read through the
/// backend, never with a read that would wait on the worker's thread, and
/// the body arrives whole, the head in front of it.
#[test]
fn cold_files_over_tls_are_read_through_the_backend_and_sent_whole() {
    let (dir, data) = disk_root("cold.bin", 3 << 20);
    let root = dir.path();
    let ca = common::tls::TestCa::new();
    let (d, https) = ca.https_daemon(root, &[]);
    let client = ca.client(false);
    let get = |range: Option<&str>| {
        let mut rb = client.get(format!("https://localhost:{}/cold.bin", https.port()));
        if let Some(r) = range {
            rb = rb.header("Range", r);
        }
        let r = rb.send().unwrap();
        assert_eq!(r.version(), reqwest::Version::HTTP_11);
        r.bytes().unwrap().to_vec()
    };
    assert!(get(None) == data);
    assert_eq!(
        cold_bytes(&d),
        0.0,
        "a hot file is read from the page cache"
    );
    if !evicted_or_skipped(&root.join("cold.bin")) {
        return;
    }
    assert!(get(None) == data, "the cold file arrives byte for byte");
    let read = cold_bytes(&d);
    assert!(read >= (128 << 10) as f64, "cold bytes: {read}");
    assert!(evict(&root.join("cold.bin")));
    let body = get(Some("bytes=1000000-2999999"));
    assert!(body == data[1_000_000..3_000_000]);
    assert!(cold_bytes(&d) > read);
    let line = d.json_log_line("status", &serde_json::json!(206));
    assert_eq!(line["bytes"], 2_000_000, "{line}");
    assert_eq!(line["version"], "HTTP/1.1");
}

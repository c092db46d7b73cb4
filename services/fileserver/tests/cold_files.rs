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
/// filesystem keeps them anyway (tmpfs). Asked again after loopback
/// traffic on every CPU: pages a response just sent by sendfile can stay
/// referenced until the CPU that sent them next processes the network
/// and frees the socket buffers it deferred. One try left
/// `a_file_cold_but_for_its_end_still_sends_its_tail_last`'s file
/// resident, and the test skipped, in 2 runs of 6; retries with sleeps
/// alone in 1 of 10, with traffic from the test's own CPU in 1 of 10;
/// with traffic on every CPU, in none of 35 runs.
fn evict(path: &std::path::Path) -> bool {
    let f = std::fs::File::open(path).unwrap();
    f.sync_all().unwrap();
    for _ in 0..20 {
        // SAFETY: fadvise on an open descriptor; no memory is passed.
        let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert_eq!(rc, 0);
        if !filemanager::is_resident(std::os::fd::AsFd::as_fd(&f), 0, 1 << 20) {
            return true;
        }
        loopback_traffic();
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    false
}

/// Sends some bytes over loopback from each CPU in turn, so every CPU's
/// network processing runs and frees what it deferred.
fn loopback_traffic() {
    use std::io::{Read, Write};
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    for cpu in 0..cpus {
        std::thread::spawn(move || {
            // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET writes
            // within it (`cpu` is below the machine's count).
            unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu, &mut set);
                libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set);
            }
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let mut tx = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let (mut rx, _) = listener.accept().unwrap();
            tx.write_all(&[0u8; 64 << 10]).unwrap();
            drop(tx);
            rx.read_to_end(&mut Vec::new()).unwrap();
        })
        .join()
        .unwrap();
    }
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

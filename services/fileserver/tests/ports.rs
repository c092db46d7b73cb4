//! Who owns a port: a second daemon on an address the first one serves
//! stops at start with one line naming it (instead of the kernel splitting
//! connections between two roots), while each worker keeps its own
//! SO_REUSEPORT socket, a crashed or stopped daemon's port is taken again
//! at once, and `-p` moves the admin listener along.

mod common;

use common::{bin, client, Daemon, Tree};
use std::net::SocketAddr;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `cmd` until it exits (stderr captured); `None` if it is still
/// running after `timeout` (it is killed then).
fn run_to_exit(mut cmd: Command, timeout: Duration) -> Option<Output> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let deadline = Instant::now() + timeout;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait_with_output();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(child.wait_with_output().unwrap())
}

/// Listening TCP sockets on `addr` (IPv4) in this network namespace.
fn listeners_on(addr: SocketAddr) -> usize {
    let SocketAddr::V4(v4) = addr else {
        panic!("IPv4 only")
    };
    let ip = u32::from_le_bytes(v4.ip().octets());
    let want = format!("{ip:08X}:{:04X}", v4.port());
    std::fs::read_to_string("/proc/net/tcp")
        .unwrap()
        .lines()
        .skip(1)
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.get(1) == Some(&want.as_str()) && f.get(3) == Some(&"0A")
        })
        .count()
}

/// A second daemon with the first one's `listen`.
fn second(root: &std::path::Path, listen: &str) -> Command {
    let mut cmd = Command::new(bin());
    cmd.args([
        "--root",
        root.to_str().unwrap(),
        "--listen",
        listen,
        "--admin-listen",
        "127.0.0.1:0",
        "--workers",
        "2",
    ]);
    cmd
}

#[test]
fn a_second_daemon_on_a_held_port_stops_with_one_line() {
    let first = Tree::new();
    first.write("which.txt", b"first");
    let other = Tree::new();
    other.write("which.txt", b"second");
    let mut cmd = second(&first.root, "127.0.0.1:0");
    cmd.args(["--set", "workers=3"]);
    let d = Daemon::spawn(cmd);
    // Each worker still has its own socket in one SO_REUSEPORT group.
    assert_eq!(listeners_on(d.http), 3, "one listening socket per worker");
    for listen in [d.http.to_string(), format!("0.0.0.0:{}", d.http.port())] {
        let out = run_to_exit(second(&other.root, &listen), Duration::from_secs(20))
            .unwrap_or_else(|| panic!("a second daemon on {listen} started beside the first"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{err}");
        assert!(
            lines[0].starts_with(&format!("fileserver: cannot listen on {listen} (listen)"))
                && lines[0].contains("in use"),
            "{err}"
        );
    }
    // Every request still reaches the first root.
    for _ in 0..20 {
        assert_eq!(d.get_text("/which.txt"), "first");
    }
}

#[test]
fn the_port_is_taken_again_after_a_crash_or_a_stop() {
    let tree = Tree::new();
    tree.write("a.txt", b"a");
    let mut d = Daemon::start(&tree.root, &[]);
    let addr = d.http.to_string();
    // Connections the server closed leave TIME_WAIT sockets on its side.
    for _ in 0..5 {
        let r = client()
            .get(d.url("/a.txt"))
            .header("Connection", "close")
            .send()
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    // A crash: no lock to go stale, the kernel frees the sockets.
    d.signal(libc::SIGKILL);
    d.wait_exit(Duration::from_secs(10)).unwrap();
    let mut d = Daemon::spawn(second(&tree.root, &addr));
    assert_eq!(d.http.to_string(), addr);
    assert_eq!(d.get_text("/a.txt"), "a");
    // A stop: the restart binds as soon as the old process is gone.
    d.signal(libc::SIGTERM);
    assert!(d.wait_exit(Duration::from_secs(10)).unwrap().success());
    let d = Daemon::spawn(second(&tree.root, &addr));
    assert_eq!(d.get_text("/a.txt"), "a");
    assert_eq!(listeners_on(d.http), 2);
}

/// A port `p` such that `p` and `p + 1` are both free now.
fn free_pair() -> u16 {
    for _ in 0..50 {
        // free_port has checked p itself.
        let p = common::free_port();
        if p < u16::MAX && std::net::TcpListener::bind(("127.0.0.1", p + 1)).is_ok() {
            return p;
        }
    }
    panic!("no two free ports in a row");
}

#[test]
fn dash_p_moves_the_admin_listener_and_a_held_admin_port_says_what_to_do() {
    let tree = Tree::new();
    tree.write("a.txt", b"a");
    let p = free_pair();
    let mut cmd = Command::new(bin());
    cmd.args([tree.root.to_str().unwrap(), "-p", &p.to_string()]);
    cmd.args(["--workers", "2"]);
    cmd.env_remove("FILESERVER_ADMIN_LISTEN");
    let d = Daemon::spawn(cmd);
    assert_eq!(d.http, SocketAddr::from(([127, 0, 0, 1], p)));
    assert_eq!(d.admin, SocketAddr::from(([127, 0, 0, 1], p + 1)));
    assert_eq!(d.healthz(), 200);
    // An admin port given explicitly is kept; held, it is one line that
    // names the key and the flag that changes it.
    let out = run_to_exit(
        {
            let mut cmd = Command::new(bin());
            cmd.args([tree.root.to_str().unwrap(), "-p", "0", "--workers", "2"]);
            cmd.args(["--admin-listen", &d.admin.to_string()]);
            cmd
        },
        Duration::from_secs(20),
    )
    .expect("started with its admin port held");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("cannot listen on {} (admin_listen", d.admin))
            && err.contains("--admin-listen"),
        "{err}"
    );
}

/// `listen` with several addresses (a TOML array, or commas on the
/// command line): each is bound and served alike, and the start line
/// names each, the first first.
#[test]
fn several_listen_addresses_are_each_served() {
    let tree = common::Tree::new();
    tree.write("a.txt", b"hello");
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.toml");
    std::fs::write(&cfg, "listen = [\"127.0.0.1:0\", \"127.0.0.2:0\"]\n").unwrap();
    let mut cmd = std::process::Command::new(common::bin());
    cmd.arg("--root")
        .arg(&tree.root)
        .args(["--admin-listen", "127.0.0.1:0", "--config"])
        .arg(&cfg);
    let d = common::Daemon::spawn(cmd);
    // The start line is handed over before it is kept in the log's copy.
    assert!(d.wait_stderr("listening ", std::time::Duration::from_secs(5)));
    let line = d.stderr_text();
    let http = line
        .lines()
        .find(|l| l.starts_with("listening "))
        .and_then(|l| l.split(' ').find_map(|kv| kv.strip_prefix("http=")))
        .unwrap()
        .to_string();
    let addrs: Vec<std::net::SocketAddr> = http.split(',').map(|a| a.parse().unwrap()).collect();
    assert_eq!(addrs.len(), 2, "{http}");
    assert_eq!(addrs[0], d.http);
    assert_eq!(addrs[1].ip().to_string(), "127.0.0.2");
    for a in addrs {
        let resp = common::raw(
            a,
            b"GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            std::time::Duration::from_secs(5),
        );
        assert_eq!(common::status_of(&resp), 200, "{a}");
    }
    // check-config takes the array; one address named twice is refused.
    let (code, _, err) = common::check_config(&std::fs::read_to_string(&cfg).unwrap());
    assert_eq!(code, Some(0), "{err}");
    let (_, _, err) = common::check_config("listen = \"127.0.0.1:9,127.0.0.1:9\"\n");
    assert!(
        err.contains("key `listen`: 127.0.0.1:9 is named twice"),
        "{err}"
    );
}

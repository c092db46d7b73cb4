//! Unix domain socket listeners (`listen = "unix:PATH"`), through curl's
//! `--unix-socket`: served like TCP (HTTP/1.1 and h2c), made with their mode
//! and owner, a stale file replaced, a live one refused, removed at exit,
//! and PROXY protocol from a proxy on this host.

mod common;

use common::{bin, Daemon, Tree};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn tree() -> Tree {
    let t = Tree::new();
    t.write("a.txt", b"over a unix socket\n");
    t
}

fn args(tree: &Tree, listen: &str) -> Vec<String> {
    common::base_args_listening(&tree.root, listen)
}

/// The daemon on TCP (for the start line the helpers read) and `sock`.
fn start(tree: &Tree, sock: &Path, extra: &[&str]) -> Daemon {
    let listen = format!("127.0.0.1:0,unix:{}", sock.display());
    let mut cmd = Command::new(bin());
    cmd.args(args(tree, &listen))
        .args(["--access-log", "stdout"])
        .args(["--set", "access_log_format=json"])
        .args(extra);
    Daemon::spawn(cmd)
}

/// curl through the socket: (status, body).
fn curl(sock: &Path, extra: &[&str], path: &str) -> (String, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10", "--unix-socket"])
        .arg(sock)
        .args(extra)
        .args(["-w", "\n%{http_code}"])
        .arg(format!("http://localhost{path}"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", &text));
    (status.to_string(), body.to_string())
}

#[test]
fn a_unix_socket_serves_http1_and_h2c_and_is_removed_at_exit() {
    let t = tree();
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("http.sock");
    let mut d = start(&t, &sock, &[]);
    assert!(
        d.wait_stderr(
            &format!(",unix:{} ", sock.display()),
            Duration::from_secs(5)
        ),
        "the start line names the socket: {}",
        d.stderr_text()
    );
    let m = std::fs::metadata(&sock).unwrap();
    assert!(m.file_type().is_socket());
    assert_eq!(m.permissions().mode() & 0o777, 0o660, "unix_socket_mode");
    assert_eq!(
        curl(&sock, &[], "/a.txt"),
        ("200".into(), "over a unix socket\n".into())
    );
    assert_eq!(
        curl(&sock, &["--http2-prior-knowledge"], "/a.txt"),
        ("200".into(), "over a unix socket\n".into())
    );
    assert_eq!(curl(&sock, &[], "/missing").0, "404");
    // Logged, with this host for the client.
    let logged = d.json_log_line("target", &serde_json::json!("/missing"));
    assert_eq!(logged["remote"], "127.0.0.1", "{logged}");
    d.signal(libc::SIGTERM);
    assert!(d.wait_exit(Duration::from_secs(10)).unwrap().success());
    assert!(!sock.exists(), "the socket file is removed at exit");
}

#[test]
fn the_mode_and_owner_are_set_before_anyone_connects() {
    let t = tree();
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("http.sock");
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let mut extra = vec!["--set", "unix_socket_mode=0600"];
    if root {
        extra.extend(["--set", "unix_socket_owner=nobody:nogroup"]);
    }
    let _d = start(&t, &sock, &extra);
    let m = std::fs::metadata(&sock).unwrap();
    assert_eq!(m.permissions().mode() & 0o777, 0o600);
    if root {
        assert_eq!((m.uid(), m.gid()), (65534, 65534), "nobody:nogroup");
    }
}

#[test]
fn a_stale_socket_is_replaced_a_live_one_and_a_plain_file_refused() {
    let t = tree();
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("http.sock");
    // What a crashed run leaves: the file, nothing accepting.
    drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
    assert!(sock.exists());
    let d = start(&t, &sock, &[]);
    assert_eq!(curl(&sock, &[], "/a.txt").0, "200");
    // A second server on the same path is refused while the first runs.
    let listen = format!("unix:{}", sock.display());
    let second = Command::new(bin())
        .args(args(&t, &listen))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success());
    assert!(err.contains("a running process accepts on it"), "{err}");
    assert_eq!(
        curl(&sock, &[], "/a.txt").0,
        "200",
        "the first still serves"
    );
    drop(d);
    // A file that is not a socket is never removed.
    let plain = dir.path().join("notes.txt");
    std::fs::write(&plain, "keep me").unwrap();
    let third = Command::new(bin())
        .args(args(&t, &format!("unix:{}", plain.display())))
        .output()
        .unwrap();
    assert!(!third.status.success());
    assert!(String::from_utf8_lossy(&third.stderr).contains("not a socket"));
    assert_eq!(std::fs::read_to_string(&plain).unwrap(), "keep me");
}

/// With only a Unix socket, the daemon starts, names it in the start line,
/// and serves; check-config accepts the same `listen`.
#[test]
fn a_unix_socket_alone_is_enough() {
    let t = tree();
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("only.sock");
    let listen = format!("unix:{}", sock.display());
    let mut child = Command::new(bin())
        .args(args(&t, &listen))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let t0 = Instant::now();
    while !line.starts_with("listening") && t0.elapsed() < Duration::from_secs(20) {
        line.clear();
        err.read_line(&mut line).unwrap();
    }
    let served = curl(&sock, &[], "/a.txt");
    // SAFETY: kill(2) on the child started above.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let _ = child.wait();
    assert!(
        line.starts_with(&format!("listening http=unix:{} ", sock.display())),
        "{line}"
    );
    assert_eq!(served.0, "200");
    let cfg = dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        format!("listen = \"{listen}\"\nroot = \"{}\"\n", t.root.display()),
    )
    .unwrap();
    let check = Command::new(bin())
        .arg("check-config")
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(String::from_utf8_lossy(&check.stdout).contains(&format!("listen {listen}")));
}

/// A proxy on this host that speaks PROXY protocol over the socket names
/// its client: `proxy_protocol = ["127.0.0.1"]` covers Unix sockets, whose
/// peer is this host. curl's own header (it names no address for a Unix
/// socket) is taken too.
#[test]
fn proxy_protocol_over_a_unix_socket_names_the_client() {
    let t = tree();
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("http.sock");
    let d = start(&t, &sock, &["--set", "proxy_protocol=127.0.0.1"]);
    let mut s = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    s.write_all(
        b"PROXY TCP4 203.0.113.7 192.0.2.1 5555 80\r\nGET /a.txt?proxied HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let logged = d.json_log_line("target", &serde_json::json!("/a.txt?proxied"));
    assert_eq!(logged["remote"], "203.0.113.7", "{logged}");
    assert_eq!(curl(&sock, &["--haproxy-protocol"], "/a.txt").0, "200");
    // Without a header the connection is closed unserved.
    assert_ne!(curl(&sock, &[], "/a.txt").0, "200");
}

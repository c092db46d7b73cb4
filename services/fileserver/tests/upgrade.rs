//! Upgrades that drop nothing (SIGUSR2): a new binary installed over the
//! running one's path takes the listening sockets while wrk keeps a steady
//! load and curl downloads 100 MiB, and the old process drains and exits.

mod common;

use common::tls::TestCa;
use common::{bin, Daemon, Tree};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The daemon started from a copy of the binary in `dir`, so that a test
/// can install another build over it as an operator would (a rename).
fn installed(dir: &Path) -> PathBuf {
    let exe = dir.join("fileserver");
    std::fs::copy(bin(), &exe).unwrap();
    exe
}

/// Installs the build again at `exe`: a new file renamed over the old
/// one, which the running process keeps.
fn install_again(exe: &Path) {
    let next = exe.with_extension("new");
    std::fs::copy(bin(), &next).unwrap();
    std::fs::rename(&next, exe).unwrap();
}

/// The successor the daemon's log names (`upgrade: the new process serves
/// ... pid=N`), stopped with SIGTERM when dropped.
struct Successor(i32);

impl Successor {
    fn from_log(d: &Daemon) -> Successor {
        assert!(
            d.wait_stderr("the new process serves", Duration::from_secs(30)),
            "{}",
            d.stderr_text()
        );
        let text = d.stderr_text();
        let line = text
            .lines()
            .find(|l| l.contains("the new process serves"))
            .unwrap();
        let pid = line.rsplit("pid=").next().unwrap().trim().parse().unwrap();
        Successor(pid)
    }

    fn alive(&self) -> bool {
        Path::new(&format!("/proc/{}", self.0)).exists()
    }
}

impl Drop for Successor {
    fn drop(&mut self) {
        // SAFETY: kill(2) on a pid this test started (through the daemon).
        unsafe { libc::kill(self.0, libc::SIGTERM) };
        let t0 = Instant::now();
        while self.alive() && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn wait_gone(pid: i32, within: Duration) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < within {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // Gone, or a zombie waiting for the test to reap it.
        if stat.is_empty() || stat.split_whitespace().nth(2) == Some("Z") {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Under wrk's steady load and during a 100 MiB download, SIGUSR2 starts
/// the new build with the sockets; wrk sees no error of any kind, the
/// download completes whole, the old process exits, and the new one
/// serves. (Before, SIGUSR2 ended the daemon: the signal's default.)
#[test]
fn sigusr2_upgrades_under_load_and_drops_nothing() {
    let tree = Tree::new();
    tree.write("small.txt", b"small and steady\n");
    // Sparse: made in no time, read as zeros.
    std::fs::File::create(tree.root.join("big.bin"))
        .unwrap()
        .set_len(100 << 20)
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let exe = installed(dir.path());
    let mut cmd = Command::new(&exe);
    cmd.args(common::base_args(&tree.root))
        .args(["--set", "shutdown_timeout=60s"]);
    let mut d = Daemon::spawn(cmd);
    let old = d.pid();
    let out = dir.path().join("big.out");
    let download = Command::new("curl")
        .args(["-sS", "--limit-rate", "25M", "-o"])
        .arg(&out)
        .args(["-w", "%{http_code} %{size_download}"])
        .arg(d.url("/big.bin"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let wrk = Command::new("wrk")
        .args(["-t2", "-c16", "-d6s"])
        .arg(d.url("/small.txt"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    install_again(&exe);
    d.signal(libc::SIGUSR2);
    let next = Successor::from_log(&d);
    assert_ne!(next.0, old);
    let wrk = wrk.wait_with_output().unwrap();
    let report = String::from_utf8_lossy(&wrk.stdout);
    let download = download.wait_with_output().unwrap();
    let got = String::from_utf8_lossy(&download.stdout);
    assert!(
        wait_gone(old, Duration::from_secs(30)),
        "the old process still runs"
    );
    let status = d.wait_exit(Duration::from_secs(5)).unwrap();
    assert!(status.success(), "old process: {status:?}");
    eprintln!("wrk through the upgrade:\n{report}");
    // "  123456 requests in 6.00s, 12.34MB read"
    let requests: u64 = report
        .lines()
        .find(|l| l.contains(" requests in "))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .expect("wrk's request count");
    assert!(requests > 1000, "{report}");
    assert!(!report.contains("Socket errors"), "{report}");
    assert!(!report.contains("Non-2xx"), "{report}");
    assert!(download.status.success(), "curl: {got}");
    assert_eq!(got, format!("200 {}", 100u64 << 20));
    assert_eq!(std::fs::metadata(&out).unwrap().len(), 100 << 20);
    // The new process serves on the same address.
    assert!(next.alive());
    assert_eq!(d.get_text("/small.txt"), "small and steady\n");
    let log = d.stderr_text();
    assert!(log.contains("upgrade: starting a new process"), "{log}");
}

/// A build that does not start leaves the old process serving, and says
/// why. The daemon was started through a symlink to a release directory
/// and the upgrade switches the link, as a release install does: the
/// new target is what starts (here a build that fails at once).
#[test]
fn a_failed_upgrade_keeps_the_old_process_serving() {
    let tree = Tree::new();
    tree.write("small.txt", b"still here\n");
    let dir = tempfile::tempdir().unwrap();
    let (v1, v2) = (dir.path().join("v1"), dir.path().join("v2"));
    std::fs::create_dir_all(&v1).unwrap();
    std::fs::create_dir_all(&v2).unwrap();
    installed(&v1);
    let link = dir.path().join("fileserver");
    std::os::unix::fs::symlink(v1.join("fileserver"), &link).unwrap();
    let mut cmd = Command::new(&link);
    cmd.args(common::base_args(&tree.root));
    let mut d = Daemon::spawn(cmd);
    let broken = v2.join("fileserver");
    std::fs::write(&broken, "#!/bin/sh\necho 'cannot start' >&2\nexit 3\n").unwrap();
    let mut perm = std::fs::metadata(&broken).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&broken, perm).unwrap();
    let next = dir.path().join("fileserver.new");
    std::os::unix::fs::symlink(&broken, &next).unwrap();
    std::fs::rename(&next, &link).unwrap();
    d.signal(libc::SIGUSR2);
    assert!(
        d.wait_stderr("upgrade failed", Duration::from_secs(30)),
        "{}",
        d.stderr_text()
    );
    assert!(d.stderr_text().contains("exited before it was ready"));
    assert_eq!(d.get_text("/small.txt"), "still here\n");
    d.signal(libc::SIGTERM);
    assert!(d.wait_exit(Duration::from_secs(10)).unwrap().success());
}

/// HTTP/3 and a Unix socket after an upgrade: the new process reads the
/// UDP sockets once the old one is gone, and answers over QUIC (aioquic),
/// HTTPS and the Unix socket, whose file it removes when it stops.
#[test]
fn http3_and_a_unix_socket_are_served_by_the_new_process_after_an_upgrade() {
    let tree = Tree::new();
    tree.write("small.txt", b"over quic\n");
    let ca = TestCa::new();
    let ca_file = ca.ca_file();
    let dir = tempfile::tempdir().unwrap();
    let exe = installed(dir.path());
    let sock = dir.path().join("http.sock");
    let listen = format!("127.0.0.1:0,unix:{}", sock.display());
    let mut cmd = Command::new(&exe);
    cmd.args(common::base_args_listening(&tree.root, &listen))
        .args(ca.args())
        .args(["--set", "http3.enabled=true"]);
    let mut d = Daemon::spawn(cmd);
    let https = d.start.https.unwrap();
    let old = d.pid();
    install_again(&exe);
    d.signal(libc::SIGUSR2);
    let next = Successor::from_log(&d);
    assert!(wait_gone(old, Duration::from_secs(30)));
    assert!(d.wait_exit(Duration::from_secs(5)).unwrap().success());
    let python = common::test_python();
    let script = common::test_script("h3client.py");
    // The new process's QUIC starts once it has seen the old one go.
    let t0 = Instant::now();
    let answer = loop {
        let out = Command::new(&python)
            .arg(&script)
            .args(["--port", &https.port().to_string(), "--ca"])
            .arg(&ca_file)
            .arg("/small.txt")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        if out.status.success() || t0.elapsed() > Duration::from_secs(10) {
            break text;
        }
    };
    assert!(answer.contains("\"status\": 200"), "{answer}");
    let https_answer = ca
        .client(true)
        .get(format!("https://localhost:{}/small.txt", https.port()))
        .send()
        .unwrap();
    assert_eq!(https_answer.text().unwrap(), "over quic\n");
    let unix = Command::new("curl")
        .args(["-sS", "--unix-socket"])
        .arg(&sock)
        .arg("http://localhost/small.txt")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&unix.stdout), "over quic\n");
    assert!(next.alive());
    drop(next);
    let t1 = Instant::now();
    while sock.exists() && t1.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !sock.exists(),
        "the successor removes the socket file it took over"
    );
}

//! The daemon under a (fake) systemd: its own `NOTIFY_SOCKET` receives the
//! watchdog pings and the notify-reload handshake, a worker thread stopped
//! with ptrace stops the pings, and two named sockets passed as fds 3 and 4
//! become the HTTP and admin listeners.

mod common;

use common::*;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixDatagram;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::{Duration, Instant};

/// A bound datagram socket playing systemd's `NOTIFY_SOCKET`.
struct NotifySocket {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    sock: UnixDatagram,
}

impl NotifySocket {
    fn new() -> NotifySocket {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let sock = UnixDatagram::bind(&path).unwrap();
        NotifySocket {
            _dir: dir,
            path,
            sock,
        }
    }

    /// The next datagram within `timeout`.
    fn recv(&self, timeout: Duration) -> Option<String> {
        self.sock.set_read_timeout(Some(timeout)).unwrap();
        let mut buf = [0u8; 4096];
        let n = self.sock.recv(&mut buf).ok()?;
        Some(String::from_utf8_lossy(&buf[..n]).into_owned())
    }

    /// The first datagram that is not a watchdog ping.
    fn recv_non_ping(&self, timeout: Duration) -> Option<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            let m = self.recv(left.max(Duration::from_millis(1)))?;
            if m != "WATCHDOG=1" {
                return Some(m);
            }
        }
    }

    /// Every datagram that arrives during `d`.
    fn collect(&self, d: Duration) -> Vec<String> {
        let deadline = Instant::now() + d;
        let mut out = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.recv(left.max(Duration::from_millis(1))) {
                Some(m) => out.push(m),
                None => break,
            }
        }
        out
    }
}

fn fields(msg: &str) -> Vec<&str> {
    msg.lines().collect()
}

fn monotonic_usec() -> i128 {
    match sd_notify::NotifyState::monotonic_usec_now().unwrap() {
        sd_notify::NotifyState::MonotonicUsec(u) => u,
        _ => unreachable!(),
    }
}

/// The daemon with `NOTIFY_SOCKET` and a 400 ms watchdog meant for it
/// (`WATCHDOG_PID` set to its pid through a shell `exec`, as systemd does).
fn start_watched(tree: &Tree, notify: &NotifySocket, extra: &[&str]) -> Daemon {
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg("export WATCHDOG_PID=$$ WATCHDOG_USEC=400000; exec \"$0\" \"$@\"")
        .arg(bin())
        .args(base_args(&tree.root))
        .args(extra)
        .env("NOTIFY_SOCKET", &notify.path);
    Daemon::spawn(cmd)
}

#[test]
fn watchdog_pings_and_notify_reload_handshake() {
    let tree = Tree::new();
    tree.write("a.txt", b"a");
    let config = tree.dir.path().join("fileserver.toml");
    std::fs::write(&config, "log_level = \"info\"\n").unwrap();
    let notify = NotifySocket::new();
    let d = start_watched(&tree, &notify, &["--config", config.to_str().unwrap()]);
    let first = notify.recv(Duration::from_secs(10)).expect("READY=1");
    assert_eq!(fields(&first), ["READY=1"]);

    // 400 ms watchdog: a ping every 200 ms.
    let t0 = Instant::now();
    let mut pings = 0;
    while pings < 4 && t0.elapsed() < Duration::from_secs(10) {
        match notify.recv(Duration::from_secs(2)) {
            Some(m) => {
                assert_eq!(
                    fields(&m),
                    ["WATCHDOG=1"],
                    "only pings between READY and SIGHUP"
                );
                pings += 1;
            }
            None => break,
        }
    }
    assert_eq!(pings, 4, "stderr:\n{}", d.stderr_text());

    // A reload that succeeds.
    let before = monotonic_usec();
    d.signal(libc::SIGHUP);
    let reloading = notify
        .recv_non_ping(Duration::from_secs(10))
        .expect("RELOADING=1");
    let after = monotonic_usec();
    let f = fields(&reloading);
    assert_eq!(f.len(), 2, "{reloading:?}");
    assert_eq!(f[0], "RELOADING=1");
    let usec: i128 = f[1]
        .strip_prefix("MONOTONIC_USEC=")
        .unwrap_or_else(|| panic!("{reloading:?}"))
        .parse()
        .unwrap();
    assert!(
        before <= usec && usec <= after,
        "{before} <= {usec} <= {after}"
    );
    let ready = notify
        .recv_non_ping(Duration::from_secs(10))
        .expect("READY=1");
    assert_eq!(fields(&ready), ["READY=1", "STATUS=configuration reloaded"]);

    // A rejected reload: still ready again afterwards, with the reason.
    std::fs::write(&config, "no_such_key = 1\n").unwrap();
    d.signal(libc::SIGHUP);
    let reloading = notify
        .recv_non_ping(Duration::from_secs(10))
        .expect("RELOADING=1");
    assert!(
        reloading.starts_with("RELOADING=1\nMONOTONIC_USEC="),
        "{reloading:?}"
    );
    let ready = notify
        .recv_non_ping(Duration::from_secs(10))
        .expect("READY=1");
    let f = fields(&ready);
    assert_eq!(f[0], "READY=1", "{ready:?}");
    assert!(
        f[1].starts_with("STATUS=reload rejected, running config kept: ")
            && f[1].contains("no_such_key"),
        "{ready:?}"
    );
    assert_eq!(d.get_text("/a.txt"), "a");
    // Pings go on after reloads.
    let more = notify.collect(Duration::from_millis(700));
    assert!(more.iter().any(|m| m == "WATCHDOG=1"), "{more:?}");

    d.signal(libc::SIGTERM);
    let stopping = notify
        .recv_non_ping(Duration::from_secs(10))
        .expect("STOPPING=1");
    assert_eq!(fields(&stopping), ["STOPPING=1"]);
    let mut d = d;
    assert!(d.wait_exit(Duration::from_secs(20)).unwrap().success());
}

#[test]
fn no_pings_without_a_watchdog_meant_for_us() {
    let tree = Tree::new();
    for watchdog_pid in [None, Some("1")] {
        let notify = NotifySocket::new();
        let mut cmd = Command::new(bin());
        cmd.args(base_args(&tree.root))
            .env("NOTIFY_SOCKET", &notify.path)
            .env_remove("WATCHDOG_PID")
            .env_remove("WATCHDOG_USEC");
        if let Some(pid) = watchdog_pid {
            // Another process's watchdog (sd_watchdog_enabled(3) ignores it).
            cmd.env("WATCHDOG_USEC", "200000").env("WATCHDOG_PID", pid);
        }
        let _d = Daemon::spawn(cmd);
        assert_eq!(
            notify.recv(Duration::from_secs(10)).as_deref(),
            Some("READY=1")
        );
        let msgs = notify.collect(Duration::from_millis(600));
        assert!(msgs.is_empty(), "WATCHDOG_PID={watchdog_pid:?}: {msgs:?}");
    }
}

/// Thread ids of the daemon's threads named `name`.
fn thread_id(pid: i32, name: &str) -> Option<i32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .filter_map(Result::ok)
        .find(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim_end() == name)
        })
        .and_then(|t| t.file_name().to_str()?.parse().ok())
}

#[test]
fn a_stuck_worker_stops_the_watchdog_pings() {
    let tree = Tree::new();
    let notify = NotifySocket::new();
    let d = start_watched(&tree, &notify, &[]);
    assert_eq!(
        notify.recv(Duration::from_secs(10)).as_deref(),
        Some("READY=1")
    );
    assert_eq!(
        notify.recv(Duration::from_secs(5)).as_deref(),
        Some("WATCHDOG=1")
    );
    let tid = thread_id(d.pid(), "worker-1").expect("a thread named worker-1");
    // Stop that one thread (ptrace stops a single thread; SIGSTOP would stop
    // the whole process, main thread included).
    // SAFETY: PTRACE_SEIZE takes no pointers (addr and data are 0); tid is a
    // thread of our own child.
    let rc = unsafe { libc::ptrace(libc::PTRACE_SEIZE, tid, 0, 0) };
    if rc != 0 {
        eprintln!(
            "SKIP: cannot ptrace the worker thread: {}",
            std::io::Error::last_os_error()
        );
        return;
    }
    // SAFETY: as above, on the thread we now trace.
    let rc = unsafe { libc::ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0) };
    assert_eq!(
        rc,
        0,
        "PTRACE_INTERRUPT: {}",
        std::io::Error::last_os_error()
    );
    let mut status = 0;
    // SAFETY: status is a valid out-pointer for waitpid.
    let w = unsafe { libc::waitpid(tid, &mut status, libc::__WALL) };
    assert_eq!(w, tid, "waitpid: {}", std::io::Error::last_os_error());
    assert!(libc::WIFSTOPPED(status), "status {status:#x}");

    // Pings already on their way, or one check that still saw a beat.
    let _ = notify.collect(Duration::from_millis(450));
    // 3 watchdog periods without a ping: systemd would have restarted us.
    let msgs = notify.collect(Duration::from_millis(1200));
    let healthz = client()
        .get(d.admin_url("/healthz"))
        .send()
        .map(|r| r.status().as_u16());
    // SAFETY: PTRACE_DETACH with data 0 (no signal) on our stopped tracee.
    let rc = unsafe { libc::ptrace(libc::PTRACE_DETACH, tid, 0, 0) };
    assert_eq!(rc, 0, "PTRACE_DETACH: {}", std::io::Error::last_os_error());
    assert!(msgs.is_empty(), "pings while worker-1 is stopped: {msgs:?}");
    assert_eq!(healthz.ok(), Some(200), "the main thread kept running");
    assert!(
        d.wait_stderr(
            "watchdog: worker-1 made no progress",
            Duration::from_secs(5)
        ),
        "{}",
        d.stderr_text()
    );
    // The worker runs again: so do the pings.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut resumed = false;
    while !resumed && Instant::now() < deadline {
        resumed = notify.recv(Duration::from_secs(1)).as_deref() == Some("WATCHDOG=1");
    }
    assert!(resumed, "{}", d.stderr_text());
    assert!(d.wait_stderr(
        "watchdog: worker-1 progressing again",
        Duration::from_secs(5)
    ));
}

/// Starts the daemon with `fds` as fds 3, 4, ... and `LISTEN_FDNAMES=names`,
/// `LISTEN_PID` set by a shell `exec` as systemd does.
fn start_activated(tree: &Tree, fds: &[&OwnedFd], names: &str) -> Daemon {
    // Out of the way of 3.. so the dup2 calls below cannot overwrite a
    // descriptor they still need.
    let high: Vec<OwnedFd> = fds
        .iter()
        .map(|fd| rustix::io::fcntl_dupfd_cloexec(fd.as_fd(), 100).unwrap())
        .collect();
    let raw: Vec<i32> = high.iter().map(|f| f.as_raw_fd()).collect();
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(format!(
            "export LISTEN_PID=$$ LISTEN_FDS={} LISTEN_FDNAMES={names}; exec \"$0\" \"$@\"",
            fds.len()
        ))
        .arg(bin())
        .args(base_args(&tree.root));
    // SAFETY: only async-signal-safe calls (dup2) between fork and exec; the
    // descriptors in `raw` stay open in the parent until spawn returns.
    unsafe {
        cmd.pre_exec(move || {
            for (i, &fd) in raw.iter().enumerate() {
                // dup2 leaves the new descriptor without FD_CLOEXEC.
                if libc::dup2(fd, 3 + i as i32) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let d = Daemon::spawn(cmd);
    drop(high);
    d
}

#[test]
fn two_named_sockets_become_the_http_and_admin_listeners() {
    let tree = Tree::new();
    tree.write("a.txt", b"through the http socket");
    for order in ["http:admin", "admin:http"] {
        let http = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let admin = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let (http_addr, admin_addr) = (http.local_addr().unwrap(), admin.local_addr().unwrap());
        let (http, admin): (OwnedFd, OwnedFd) = (http.into(), admin.into());
        let fds = if order == "http:admin" {
            [&http, &admin]
        } else {
            [&admin, &http]
        };
        let d = start_activated(&tree, &fds, order);
        assert_eq!(
            (d.http, d.admin),
            (http_addr, admin_addr),
            "{order}: the passed sockets are used, not --listen/--admin-listen"
        );
        assert_eq!(d.get_text("/a.txt"), "through the http socket", "{order}");
        let metrics = d.metrics();
        assert!(
            metric(&metrics, "fileserver_up").is_some(),
            "{order}: /metrics on the admin socket:\n{metrics}"
        );
        let s = client()
            .get(format!("http://{admin_addr}/a.txt"))
            .send()
            .unwrap()
            .status();
        assert_eq!(s, 404, "{order}: files are not served on the admin socket");
    }
}

#[test]
fn a_socket_with_an_unknown_name_is_ignored_with_a_warning() {
    let tree = Tree::new();
    tree.write("a.txt", b"bound itself");
    let http = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let http_addr = http.local_addr().unwrap();
    let (http, other): (OwnedFd, OwnedFd) = (http.into(), other.into());
    let d = start_activated(&tree, &[&http, &other], "http:metrics");
    assert_eq!(d.http, http_addr);
    assert_ne!(d.admin.port(), 0, "admin bound from --admin-listen");
    assert_eq!(d.get_text("/a.txt"), "bound itself");
    assert!(d.wait_stderr("named \"metrics\"", Duration::from_secs(5)));
    assert_eq!(d.healthz(), 200);
}

/// An upgrade (SIGUSR2) under systemd: the old process names its
/// successor with `MAINPID=` before it drains, and the successor, handed
/// the watchdog period, goes on pinging once the old process has exited
/// (without it systemd would kill the service at `WatchdogSec`).
#[test]
fn an_upgrade_names_the_new_main_pid_and_keeps_the_watchdog() {
    struct Stop(i32);
    impl Drop for Stop {
        fn drop(&mut self) {
            // SAFETY: kill(2) on the successor this test caused.
            unsafe { libc::kill(self.0, libc::SIGTERM) };
        }
    }
    let tree = Tree::new();
    tree.write("a.txt", b"after the upgrade");
    let notify = NotifySocket::new();
    let mut d = start_watched(&tree, &notify, &[]);
    assert_eq!(
        fields(&notify.recv(Duration::from_secs(10)).unwrap()),
        ["READY=1"]
    );
    let old = d.pid();
    d.signal(libc::SIGUSR2);
    let t0 = Instant::now();
    let next = loop {
        let m = notify
            .recv(Duration::from_secs(10))
            .expect("MAINPID= within 10 s");
        if let Some(pid) = fields(&m).iter().find_map(|f| f.strip_prefix("MAINPID=")) {
            break Stop(pid.parse().unwrap());
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "no MAINPID=");
    };
    assert_ne!(next.0, old);
    assert!(d.wait_exit(Duration::from_secs(10)).unwrap().success());
    // Whatever the old process sent is read; from here on only the
    // successor pings, every 200 ms.
    while notify.recv(Duration::from_millis(50)).is_some() {}
    let t1 = Instant::now();
    let mut pings = 0;
    while pings < 5 && t1.elapsed() < Duration::from_secs(5) {
        if let Some(m) = notify.recv(Duration::from_secs(1)) {
            if fields(&m) == ["WATCHDOG=1"] {
                pings += 1;
            }
        }
    }
    assert_eq!(pings, 5, "{}", d.stderr_text());
    assert_eq!(d.get_text("/a.txt"), "after the upgrade");
}

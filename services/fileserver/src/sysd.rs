//! systemd integration: what the service manager hands the process at start
//! (sockets by name, the watchdog period), the `sd_notify` datagrams, and the
//! watchdog's decision whether the serving loop still makes progress.
//!
//! - **Sockets**: `LISTEN_FDS`/`LISTEN_PID`/`LISTEN_FDNAMES` are read with the
//!   `sd-notify` crate. A socket named [`HTTP_FD_NAME`] becomes the HTTP
//!   listener, one named [`ADMIN_FD_NAME`] the admin listener; a single socket
//!   with any other name (or none) is the HTTP listener, as it always was.
//! - **Notify**: messages are `sd_notify::NotifyState` values, sent by
//!   [`notify`] itself because the crate cannot reach an abstract
//!   (`@name`) `NOTIFY_SOCKET`. Errors are logged, never fatal.
//! - **Watchdog**: `WATCHDOG_USEC` (with `WATCHDOG_PID` absent or ours, as
//!   `sd_watchdog_enabled(3)` reads them). Every worker bumps a heartbeat
//!   counter; the main thread pings `WATCHDOG=1` only while every counter
//!   advances ([`WatchdogGate`]).
//!
//! (The module's tests start with an example of all three.)

use sd_notify::NotifyState;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// `FileDescriptorName=` of the socket that becomes the HTTP listener.
pub(crate) const HTTP_FD_NAME: &str = "http";
/// `FileDescriptorName=` of the socket that becomes the admin listener.
pub(crate) const ADMIN_FD_NAME: &str = "admin";

/// Listening sockets passed by the service manager.
#[derive(Debug, Default)]
pub(crate) struct Activated {
    /// The HTTP listener (dup'ed for every worker).
    pub http: Option<OwnedFd>,
    /// The admin listener (`/metrics`, `/healthz`, `/readyz`).
    pub admin: Option<OwnedFd>,
}

/// What systemd handed this process in its environment.
#[derive(Debug, Default)]
pub(crate) struct SystemdEnv {
    /// Sockets from socket activation.
    pub activated: Activated,
    /// `WATCHDOG_USEC`, when the watchdog applies to this process.
    pub watchdog: Option<Duration>,
    /// Things worth a warning, collected before logging is set up.
    pub notes: Vec<String>,
}

/// Takes the activated sockets and the watchdog settings, and removes their
/// variables from the environment. Call it first thing in `main`, while the
/// process has one thread and before anything opens a descriptor.
pub(crate) fn take_env() -> SystemdEnv {
    let mut env = SystemdEnv::default();
    match sd_notify::listen_fds_with_names(true) {
        Ok(fds) => {
            let fds: Vec<(OwnedFd, String)> =
                fds.map(|(fd, name)| (owned_listen_fd(fd), name)).collect();
            let (http, admin, notes) = assign_listeners(fds);
            env.activated = Activated { http, admin };
            env.notes.extend(notes);
        }
        Err(e) => env.notes.push(format!(
            "ignoring the sockets passed by systemd (LISTEN_FDS): {e}"
        )),
    }
    let usec = std::env::var("WATCHDOG_USEC").ok();
    let pid = std::env::var("WATCHDOG_PID").ok();
    std::env::remove_var("WATCHDOG_USEC");
    std::env::remove_var("WATCHDOG_PID");
    match watchdog_period(usec.as_deref(), pid.as_deref(), std::process::id()) {
        Ok(p) => env.watchdog = p,
        Err(e) => env.notes.push(e),
    }
    env
}

fn owned_listen_fd(fd: RawFd) -> OwnedFd {
    // SAFETY: sd_notify::listen_fds_with_names yields each descriptor of
    // 3..3+LISTEN_FDS once, and only when LISTEN_PID is our pid, so systemd
    // opened them for this process. take_env runs first in main, before
    // anything else could have opened or claimed those numbers, and is
    // called once (it clears the variables).
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// Sorts passed sockets into (HTTP, admin) by their `LISTEN_FDNAMES` name.
/// A lone socket not named `admin` is the HTTP listener whatever its name
/// (systemd names an unnamed one after its unit, or `unknown`). Sockets with
/// other names, or a second one of a name, are dropped (closed) with a note.
#[allow(clippy::type_complexity)]
pub(crate) fn assign_listeners<T>(fds: Vec<(T, String)>) -> (Option<T>, Option<T>, Vec<String>) {
    let (mut http, mut admin, mut notes) = (None, None, Vec::new());
    let lone = fds.len() == 1;
    for (i, (fd, name)) in fds.into_iter().enumerate() {
        let slot = match name.as_str() {
            ADMIN_FD_NAME => &mut admin,
            HTTP_FD_NAME => &mut http,
            _ if lone => &mut http,
            _ => {
                notes.push(format!(
                    "ignoring socket fd {} named {name:?} from systemd: \
                     want FileDescriptorName={HTTP_FD_NAME} or {ADMIN_FD_NAME}",
                    3 + i
                ));
                continue;
            }
        };
        if slot.is_some() {
            notes.push(format!(
                "ignoring socket fd {} from systemd: a second one named {name:?}",
                3 + i
            ));
            continue;
        }
        *slot = Some(fd);
    }
    (http, admin, notes)
}

/// `sd_watchdog_enabled(3)`: the watchdog period when `usec` (WATCHDOG_USEC)
/// is set and non-zero and `pid` (WATCHDOG_PID) is absent or `our_pid`.
pub(crate) fn watchdog_period(
    usec: Option<&str>,
    pid: Option<&str>,
    our_pid: u32,
) -> Result<Option<Duration>, String> {
    let Some(usec) = usec else {
        return Ok(None);
    };
    let usec: u64 = usec
        .trim()
        .parse()
        .map_err(|_| format!("ignoring WATCHDOG_USEC={usec:?}: not a number"))?;
    if let Some(pid) = pid {
        let pid: u32 = pid
            .trim()
            .parse()
            .map_err(|_| format!("ignoring the watchdog: WATCHDOG_PID={pid:?} is not a pid"))?;
        if pid != our_pid {
            return Ok(None);
        }
    }
    Ok((usec > 0).then(|| Duration::from_micros(usec)))
}

/// Sends `states` (e.g. `[NotifyState::Ready]`) in one datagram to
/// `$NOTIFY_SOCKET`, one per line and no final newline, byte for byte what
/// libsystemd's `sd_notify(0, "READY=1")` sends; nothing when it is unset.
/// A path starting with `@` is an abstract socket.
pub(crate) fn try_notify(states: &[NotifyState<'_>]) -> std::io::Result<()> {
    use std::fmt::Write;
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return Ok(());
    };
    let mut msg = String::new();
    for (i, s) in states.iter().enumerate() {
        let sep = if i == 0 { "" } else { "\n" };
        let _ = write!(msg, "{sep}{s}");
    }
    let sock = std::os::unix::net::UnixDatagram::unbound()?;
    let bytes = std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str());
    if let Some(name) = bytes.strip_prefix(b"@") {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
        sock.send_to_addr(msg.as_bytes(), &addr)?;
    } else {
        sock.send_to(msg.as_bytes(), &path)?;
    }
    Ok(())
}

/// [`try_notify`], logging a failure (notification is never fatal).
pub(crate) fn notify(states: &[NotifyState<'_>]) {
    if let Err(e) = try_notify(states) {
        let what: Vec<String> = states.iter().map(|s| s.to_string()).collect();
        tracing::warn!("sd_notify {}: {e}", what.join(" "));
    }
}

/// `RELOADING=1` with `MONOTONIC_USEC=` in one datagram, as
/// `Type=notify-reload` requires before a reload begins.
pub(crate) fn notify_reloading() {
    match NotifyState::monotonic_usec_now() {
        Ok(now) => notify(&[NotifyState::Reloading, now]),
        Err(e) => {
            tracing::warn!("sd_notify: CLOCK_MONOTONIC: {e}");
            notify(&[NotifyState::Reloading]);
        }
    }
}

/// The watchdog's decision: ping only while every worker's heartbeat
/// counter advanced since the previous check.
#[derive(Debug, Clone)]
pub(crate) struct WatchdogGate {
    last: Vec<u64>,
    stalled: Vec<usize>,
}

/// What one [`WatchdogGate::observe`] found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct WatchdogDecision {
    /// Every heartbeat advanced: send `WATCHDOG=1`.
    pub ping: bool,
    /// Workers that stalled at this check (they advanced at the previous one).
    pub newly_stalled: Vec<usize>,
    /// Workers that advanced again after having stalled.
    pub recovered: Vec<usize>,
}

impl WatchdogGate {
    /// Starts from the current heartbeat values.
    pub(crate) fn new(beats: &[u64]) -> WatchdogGate {
        WatchdogGate {
            last: beats.to_vec(),
            stalled: Vec::new(),
        }
    }

    /// Compares `beats` (one counter per worker) with the previous check.
    pub(crate) fn observe(&mut self, beats: &[u64]) -> WatchdogDecision {
        let now_stalled: Vec<usize> = beats
            .iter()
            .enumerate()
            .filter(|&(i, b)| self.last.get(i) == Some(b))
            .map(|(i, _)| i)
            .collect();
        let decision = WatchdogDecision {
            ping: now_stalled.is_empty(),
            newly_stalled: now_stalled
                .iter()
                .copied()
                .filter(|i| !self.stalled.contains(i))
                .collect(),
            recovered: self
                .stalled
                .iter()
                .copied()
                .filter(|i| !now_stalled.contains(i))
                .collect(),
        };
        self.last = beats.to_vec();
        self.stalled = now_stalled;
        decision
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Socket names, the watchdog period and the gate, as the module's
    /// opening describes them.
    #[test]
    fn the_three_at_a_glance() {
        use std::time::Duration;
        let names = |v: &[&str]| v.iter().map(|n| ((), n.to_string())).collect::<Vec<_>>();
        let (http, admin, _) = assign_listeners(names(&["admin", "http"]));
        assert!(http.is_some() && admin.is_some());
        assert_eq!(
            watchdog_period(Some("400000"), None, 42),
            Ok(Some(Duration::from_millis(400)))
        );
        let mut gate = WatchdogGate::new(&[0, 0]);
        assert!(gate.observe(&[1, 1]).ping);
        assert_eq!(gate.observe(&[2, 1]).newly_stalled, vec![1]);
    }

    fn named(names: &[&str]) -> Vec<(usize, String)> {
        names
            .iter()
            .enumerate()
            .map(|(i, n)| (3 + i, n.to_string()))
            .collect()
    }

    #[test]
    fn listeners_by_name_in_either_order() {
        let (h, a, notes) = assign_listeners(named(&["http", "admin"]));
        assert_eq!((h, a), (Some(3), Some(4)));
        assert!(notes.is_empty());
        let (h, a, notes) = assign_listeners(named(&["admin", "http"]));
        assert_eq!((h, a), (Some(4), Some(3)));
        assert!(notes.is_empty());
    }

    #[test]
    fn lone_socket_is_http_unless_named_admin() {
        for name in ["unknown", "fileserver.socket", "http", ""] {
            let (h, a, notes) = assign_listeners(named(&[name]));
            assert_eq!((h, a), (Some(3), None), "{name}");
            assert!(notes.is_empty());
        }
        let (h, a, _) = assign_listeners(named(&["admin"]));
        assert_eq!((h, a), (None, Some(3)));
        let (h, a, notes) = assign_listeners(named(&[]));
        assert_eq!((h, a), (None, None));
        assert!(notes.is_empty());
    }

    #[test]
    fn unknown_and_duplicate_names_are_dropped_with_a_note() {
        let (h, a, notes) = assign_listeners(named(&["unknown", "unknown"]));
        assert_eq!((h, a), (None, None));
        assert_eq!(notes.len(), 2);
        let (h, a, notes) = assign_listeners(named(&["http", "http", "metrics"]));
        assert_eq!((h, a), (Some(3), None));
        assert_eq!(notes.len(), 2);
        assert!(notes[0].contains("fd 4") && notes[1].contains("\"metrics\""));
    }

    #[test]
    fn watchdog_env_as_sd_watchdog_enabled_reads_it() {
        let ms = |m| Ok(Some(Duration::from_millis(m)));
        assert_eq!(watchdog_period(None, None, 7), Ok(None));
        assert_eq!(watchdog_period(None, Some("7"), 7), Ok(None));
        assert_eq!(watchdog_period(Some("10000000"), None, 7), ms(10_000));
        assert_eq!(watchdog_period(Some("400000"), Some("7"), 7), ms(400));
        assert_eq!(watchdog_period(Some("400000"), Some("8"), 7), Ok(None));
        assert_eq!(watchdog_period(Some("0"), None, 7), Ok(None));
        assert!(watchdog_period(Some("soon"), None, 7).is_err());
        assert!(watchdog_period(Some("400000"), Some("me"), 7).is_err());
    }

    #[test]
    fn gate_pings_only_while_every_heartbeat_advances() {
        let mut g = WatchdogGate::new(&[5, 9, 0]);
        let d = g.observe(&[6, 10, 1]);
        assert_eq!(
            d,
            WatchdogDecision {
                ping: true,
                ..Default::default()
            }
        );
        // Worker 1 stops: no ping, reported once.
        let d = g.observe(&[7, 10, 2]);
        assert!(!d.ping);
        assert_eq!((d.newly_stalled, d.recovered), (vec![1], vec![]));
        let d = g.observe(&[8, 10, 3]);
        assert!(!d.ping);
        assert!(d.newly_stalled.is_empty() && d.recovered.is_empty());
        // Worker 2 stops too, then worker 1 comes back.
        let d = g.observe(&[9, 10, 3]);
        assert_eq!((d.ping, d.newly_stalled), (false, vec![2]));
        let d = g.observe(&[10, 11, 3]);
        assert_eq!((d.ping, d.recovered), (false, vec![1]));
        let d = g.observe(&[11, 12, 4]);
        assert_eq!(
            (d.ping, d.newly_stalled, d.recovered),
            (true, vec![], vec![2])
        );
    }

    #[test]
    fn gate_holds_when_a_worker_never_beat() {
        let mut g = WatchdogGate::new(&[0, 0]);
        assert!(!g.observe(&[1, 0]).ping);
    }

    #[test]
    fn abstract_and_path_notify_sockets() {
        // Only this test touches NOTIFY_SOCKET in this binary.
        use std::os::linux::net::SocketAddrExt;
        let name = format!("fileserver-sysd-test-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let rx = std::os::unix::net::UnixDatagram::bind_addr(&addr).unwrap();
        std::env::set_var("NOTIFY_SOCKET", format!("@{name}"));
        try_notify(&[NotifyState::Reloading, NotifyState::MonotonicUsec(12)]).unwrap();
        let mut buf = [0u8; 256];
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"RELOADING=1\nMONOTONIC_USEC=12");

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let rx = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        std::env::set_var("NOTIFY_SOCKET", &path);
        try_notify(&[NotifyState::Watchdog]).unwrap();
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"WATCHDOG=1");
        std::env::remove_var("NOTIFY_SOCKET");
        try_notify(&[NotifyState::Ready]).unwrap();
    }
}

//! systemd integration without libsystemd: `sd_notify` datagrams and
//! `LISTEN_FDS` socket activation.

use std::os::fd::{FromRawFd, OwnedFd};

/// Sends `msg` (e.g. `READY=1`) to `$NOTIFY_SOCKET` if set; errors are logged, never fatal.
pub fn notify(msg: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let sock = match std::os::unix::net::UnixDatagram::unbound() {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("sd_notify: socket: {e}");
            return;
        }
    };
    let bytes = std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str());
    let res = if let Some(name) = bytes.strip_prefix(b"@") {
        use std::os::linux::net::SocketAddrExt;
        std::os::unix::net::SocketAddr::from_abstract_name(name)
            .and_then(|a| sock.send_to_addr(msg.as_bytes(), &a))
    } else {
        sock.send_to(msg.as_bytes(), &path)
    };
    if let Err(e) = res {
        tracing::warn!("sd_notify {msg}: {e}");
    }
}

/// Takes the first socket passed by systemd (`LISTEN_PID` = us, `LISTEN_FDS` >= 1).
pub fn take_listen_fd() -> Option<OwnedFd> {
    let pid: u32 = std::env::var("LISTEN_PID").ok()?.parse().ok()?;
    let n: u32 = std::env::var("LISTEN_FDS").ok()?.parse().ok()?;
    if pid != std::process::id() || n < 1 {
        return None;
    }
    std::env::remove_var("LISTEN_PID");
    std::env::remove_var("LISTEN_FDS");
    std::env::remove_var("LISTEN_FDNAMES");
    // SAFETY: systemd passes the listening sockets starting at fd 3
    // (SD_LISTEN_FDS_START); LISTEN_PID matching our pid proves they were
    // meant for this process, and nothing else in the process owns fd 3
    // this early (we take it once, before any other descriptor is opened).
    Some(unsafe { OwnedFd::from_raw_fd(3) })
}

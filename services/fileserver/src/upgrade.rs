//! Upgrades that drop nothing. At SIGUSR2 the daemon starts the binary at
//! the path it was started from (a new build installed there by rename),
//! with the same arguments and environment, and hands it every listening
//! socket: the same kernel sockets, so a connection waiting in a backlog is
//! accepted by one process or the other, never refused. Once the new
//! process serves, the old one drains as at SIGTERM and exits.
//!
//! ```text
//! old process                                new process
//!   SIGUSR2: duplicate the listeners
//!   fork + exec, fds 3.. = the sockets ---->   take_env: FILESERVER_LISTEN_FDS
//!                                                names each of fds 3..
//!   wait for its ready byte (30 s)   <------   after the start line: one byte
//!                                                on FILESERVER_READY_FD
//!   MAINPID= to systemd; drain; exit
//!   (the predecessor pipe closes)    ------>   QUIC starts reading its UDP
//!                                                sockets (FILESERVER_PREDECESSOR_FD)
//! ```
//!
//! The new process takes the sockets' layout as it is (one of each per
//! worker, so its worker count is the old one's); a listener the new
//! config adds is bound afresh. HTTP/3 waits for the old process to be
//! gone: both read the same UDP sockets, and a datagram of a connection
//! the reader does not know would be lost. If the new process exits or is
//! not ready in time, the old one goes on serving and says why.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::time::Duration;

/// The names of the inherited descriptors 3, 4, ..., comma-separated.
const LISTEN_FDS: &str = "FILESERVER_LISTEN_FDS";
/// Where the new process writes its ready byte.
const READY_FD: &str = "FILESERVER_READY_FD";
/// Reads end of file once the old process has exited.
const PREDECESSOR_FD: &str = "FILESERVER_PREDECESSOR_FD";
/// How long the old process waits for the new one to serve.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Names of the sockets a successor takes: one of each per worker, in
/// worker order, then the admin listener.
pub(crate) const HTTP: &str = "http";
pub(crate) const HTTPS: &str = "https";
pub(crate) const QUIC: &str = "quic";
pub(crate) const ADMIN: &str = "admin";

/// The name of `listen`'s `n`-th other address (from 1).
pub(crate) fn http_more(n: usize) -> String {
    format!("http+{n}")
}

/// `name` for the first of its listeners (`k` = 0), `name+k` for the
/// others (`tls_listen`'s addresses).
pub(crate) fn numbered(name: &str, k: usize) -> String {
    match k {
        0 => name.to_string(),
        k => format!("{name}+{k}"),
    }
}

/// The name of `listen`'s `n`-th Unix domain socket (from 1).
pub(crate) fn unix(n: usize) -> String {
    format!("unix+{n}")
}

/// What this process hands a successor: its binary's path at start, and a
/// duplicate of every listening socket, named. Dropped when a shutdown
/// begins without one, so the listeners close with the workers' copies.
pub(crate) struct Handoff {
    exe: PathBuf,
    sockets: Vec<(String, OwnedFd)>,
    /// systemd's watchdog period, passed on: the successor pings once it
    /// is the main process (this one took `WATCHDOG_USEC` out of its
    /// environment at start).
    pub(crate) watchdog: Option<Duration>,
}

impl Handoff {
    /// The binary's path as it was started (before an upgrade replaces
    /// the file) and no sockets yet.
    pub(crate) fn new() -> std::io::Result<Handoff> {
        Ok(Handoff {
            exe: started_as()?,
            sockets: Vec::new(),
            watchdog: None,
        })
    }

    /// Keeps a duplicate of `fd` under `name`.
    pub(crate) fn add(&mut self, name: &str, fd: BorrowedFd<'_>) -> std::io::Result<()> {
        let dup = rustix::io::fcntl_dupfd_cloexec(fd, 3)?;
        self.sockets.push((name.to_string(), dup));
        Ok(())
    }

    /// Starts the binary again with the sockets. Blocks until it is ready
    /// (up to 30 s); on success returns its process id and the descriptor
    /// to hold until this process exits.
    pub(crate) fn start_successor(&self) -> Result<(u32, OwnedFd), String> {
        let (ready_r, ready_w) =
            rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(|e| e.to_string())?;
        let (gone_r, gone_w) =
            rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(|e| e.to_string())?;
        let mut pass: Vec<BorrowedFd<'_>> = self.sockets.iter().map(|(_, fd)| fd.as_fd()).collect();
        pass.push(ready_w.as_fd());
        pass.push(gone_r.as_fd());
        // Above the numbers they take in the child, so that no dup2 there
        // overwrites a descriptor still to be moved.
        let base = 3 + pass.len() as RawFd;
        let high = pass
            .iter()
            .map(|fd| rustix::io::fcntl_dupfd_cloexec(fd, base))
            .collect::<Result<Vec<OwnedFd>, _>>()
            .map_err(|e| e.to_string())?;
        let raws: Vec<RawFd> = high.iter().map(AsRawFd::as_raw_fd).collect();
        let n = self.sockets.len() as RawFd;
        let names: Vec<&str> = self.sockets.iter().map(|(name, _)| name.as_str()).collect();
        let mut cmd = std::process::Command::new(&self.exe);
        cmd.args(std::env::args_os().skip(1))
            .env(LISTEN_FDS, names.join(","))
            .env(READY_FD, (3 + n).to_string())
            .env(PREDECESSOR_FD, (4 + n).to_string());
        if let Some(period) = self.watchdog {
            cmd.env("WATCHDOG_USEC", period.as_micros().to_string());
        }
        // SAFETY: the closure runs in the forked child before exec and only
        // calls dup2, which is async-signal-safe; `raws` was built before
        // the fork and is only read. dup2 leaves the new descriptor without
        // CLOEXEC, so exactly 3..3+len(raws) survive the exec.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                for (i, &fd) in raws.iter().enumerate() {
                    if libc::dup2(fd, 3 + i as RawFd) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.exe.display()))?;
        drop((high, ready_w, gone_r));
        match wait_ready(&ready_r) {
            Ok(()) => Ok((child.id(), gone_w)),
            Err(why) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(why)
            }
        }
    }
}

/// The path the binary was started by, as the shell found it: `argv[0]`
/// when it names a path (made absolute), else the first executable of
/// that name on `PATH`. Not the file it resolves to now
/// (`/proc/self/exe`): an install that switches a symlink to a new build,
/// as a release directory does, is then followed, as nginx follows it.
fn started_as() -> std::io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let Some(arg0) = std::env::args_os().next().map(PathBuf::from) else {
        return std::env::current_exe();
    };
    if arg0.components().count() > 1 {
        return std::path::absolute(&arg0);
    }
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(&arg0))
            .find(|p| {
                std::fs::metadata(p)
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
    });
    match on_path {
        Some(p) => std::path::absolute(p),
        None => std::env::current_exe(),
    }
}

/// The new process's byte, or why it did not come.
fn wait_ready(ready: &OwnedFd) -> Result<(), String> {
    use rustix::event::{poll, PollFd, PollFlags};
    let deadline = std::time::Instant::now() + READY_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(format!(
                "the new process was not ready within {READY_TIMEOUT:?}"
            ));
        }
        let mut fds = [PollFd::new(ready, PollFlags::IN)];
        let timeout = rustix::event::Timespec::try_from(left).ok();
        match poll(&mut fds, timeout.as_ref()) {
            Ok(0) | Err(rustix::io::Errno::INTR) => continue,
            Ok(_) => break,
            Err(e) => return Err(e.to_string()),
        }
    }
    let mut byte = [0u8; 1];
    match rustix::io::read(ready, &mut byte) {
        Ok(1) => Ok(()),
        Ok(_) => Err("the new process exited before it was ready (its log says why)".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// What a predecessor handed this process.
#[derive(Debug, Default)]
pub(crate) struct Inherited {
    sockets: Vec<(String, OwnedFd)>,
    ready: Option<OwnedFd>,
    predecessor: Option<OwnedFd>,
}

/// Takes what a predecessor passed and removes its variables from the
/// environment. Call it first thing in `main`, while the process has one
/// thread and before anything opens a descriptor (beside systemd's, which
/// a successor never gets: those variables are gone by then).
pub(crate) fn take_env() -> Result<Inherited, String> {
    let names = std::env::var(LISTEN_FDS).ok();
    let ready = std::env::var(READY_FD).ok();
    let predecessor = std::env::var(PREDECESSOR_FD).ok();
    for var in [LISTEN_FDS, READY_FD, PREDECESSOR_FD] {
        std::env::remove_var(var);
    }
    let Some(names) = names else {
        return Ok(Inherited::default());
    };
    let take = |fd: RawFd| -> Result<OwnedFd, String> {
        // SAFETY: F_GETFD only reads this process's descriptor table; an
        // fd that is not open gives EBADF.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
            let e = std::io::Error::last_os_error();
            return Err(format!("{LISTEN_FDS}: descriptor {fd}: {e}"));
        }
        // SAFETY: it is open, and the predecessor placed it here with dup2
        // before exec for this process alone (the variables are removed
        // above, so nothing takes it twice); nothing has opened one yet.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        rustix::io::fcntl_setfd(&owned, rustix::io::FdFlags::CLOEXEC).map_err(|e| e.to_string())?;
        Ok(owned)
    };
    let number = |v: Option<String>| -> Result<Option<OwnedFd>, String> {
        v.map(|v| {
            v.parse::<RawFd>()
                .map_err(|e| format!("{v}: {e}"))
                .and_then(take)
        })
        .transpose()
    };
    let sockets = names
        .split(',')
        .enumerate()
        .map(|(i, name)| Ok((name.to_string(), take(3 + i as RawFd)?)))
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Inherited {
        sockets,
        ready: number(ready)?,
        predecessor: number(predecessor)?,
    })
}

impl Inherited {
    /// Whether sockets were inherited.
    pub(crate) fn is_upgrade(&self) -> bool {
        !self.sockets.is_empty()
    }

    /// The workers the sockets are laid out for (one of each name per
    /// worker: the count of the most frequent name).
    pub(crate) fn workers(&self) -> usize {
        let count = |name: &str| self.sockets.iter().filter(|(n, _)| n == name).count();
        self.sockets
            .iter()
            .filter(|(n, _)| n != ADMIN)
            .map(|(n, _)| count(n))
            .max()
            .unwrap_or(0)
    }

    /// The sockets named `name`, in order, taken out.
    pub(crate) fn take(&mut self, name: &str) -> Vec<OwnedFd> {
        let (mine, rest) = std::mem::take(&mut self.sockets)
            .into_iter()
            .partition(|(n, _)| n == name);
        self.sockets = rest;
        mine.into_iter().map(|(_, fd)| fd).collect()
    }

    /// Names of the sockets nothing took (closed when dropped).
    pub(crate) fn left(&self) -> Vec<&str> {
        self.sockets.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// Tells the predecessor this process serves.
    pub(crate) fn ready(&mut self) {
        if let Some(fd) = self.ready.take() {
            let _ = rustix::io::write(&fd, b"1");
        }
    }

    /// A flag that turns true once the predecessor has exited (at once
    /// without one).
    pub(crate) fn predecessor_gone(&mut self) -> tokio::sync::watch::Receiver<bool> {
        let (tx, gone) = tokio::sync::watch::channel(self.predecessor.is_none());
        if let Some(fd) = self.predecessor.take() {
            std::thread::Builder::new()
                .name("predecessor".into())
                .spawn(move || {
                    // End of file (or an error): its last copy is closed.
                    let mut byte = [0u8; 1];
                    while let Err(rustix::io::Errno::INTR) = rustix::io::read(&fd, &mut byte) {}
                    let _ = tx.send(true);
                })
                .map_err(|e| tracing::warn!("cannot watch the predecessor: {e}"))
                .ok();
        }
        gone
    }
}

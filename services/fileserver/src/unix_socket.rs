//! Unix domain socket listeners (`listen = "unix:PATH"`): binding one as an
//! operator expects (a stale file from a crashed run replaced, a live
//! server's socket refused, `unix_socket_mode` and `unix_socket_owner`
//! applied before anyone can connect), removing it at exit, and handing its
//! connections to the engines.
//!
//! The engines take a `tokio::net::TcpStream`: an accepted AF_UNIX stream
//! socket is handed over as one. Every call they make on it (read, send,
//! writev, sendfile, shutdown, epoll readiness) is a socket call that an
//! AF_UNIX stream socket serves alike; the TCP-only ones (`TCP_NODELAY`,
//! addresses) are not asked of it or fail harmlessly. Its peer, a process
//! on this host, is named [`PEER`].

use crate::config::UnixSockets;
use std::io;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The client address of a Unix socket connection: this host. List
/// `127.0.0.1` in `trusted_proxies` or `proxy_protocol` to take the client
/// from the proxy in front.
pub(crate) const PEER: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(
    std::net::Ipv4Addr::LOCALHOST,
    0,
));

/// A socket file this process made, removed at exit if it is still the
/// same file (not one a successor or another server made since).
pub(crate) struct SocketFile {
    path: PathBuf,
    id: (u64, u64),
}

impl SocketFile {
    /// The file `listener` was bound at, as it is now: a successor takes
    /// the removal over with the socket.
    pub(crate) fn of(listener: &std::os::unix::net::UnixListener) -> Option<SocketFile> {
        let addr = listener.local_addr().ok()?;
        let path = addr.as_pathname()?;
        let m = std::fs::symlink_metadata(path).ok()?;
        Some(SocketFile {
            path: path.to_path_buf(),
            id: (m.dev(), m.ino()),
        })
    }

    /// Removes the file if it is the one this process bound.
    pub(crate) fn remove(&self) {
        if let Ok(m) = std::fs::symlink_metadata(&self.path) {
            if (m.dev(), m.ino()) == self.id {
                let _ = std::fs::remove_file(&self.path);
            }
        }
    }
}

/// Binds a socket at `path` with `u`'s mode and owner, and the file to
/// remove at exit. The umask is the process's: this runs at start, before
/// any thread that makes files.
pub(crate) fn bind(
    path: &Path,
    u: &UnixSockets,
) -> io::Result<(std::os::unix::net::UnixListener, SocketFile)> {
    use rustix::net::{AddressFamily, SocketFlags, SocketType};
    clear_stale(path)?;
    let fd: OwnedFd = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
        None,
    )?;
    let addr = rustix::net::SocketAddrUnix::new(path)?;
    // No one may connect before the mode and owner are set: the socket
    // is made under a umask that denies everyone but this user, and
    // listens only after.
    let old = rustix::process::umask(rustix::fs::Mode::from_bits_truncate(0o177));
    let bound = rustix::net::bind(&fd, &addr);
    rustix::process::umask(old);
    bound?;
    let made = || -> io::Result<SocketFile> {
        rustix::fs::chmod(path, rustix::fs::Mode::from_bits_truncate(u.mode))?;
        if u.owner.uid.is_some() || u.owner.gid.is_some() {
            rustix::fs::chown(
                path,
                u.owner.uid.map(rustix::fs::Uid::from_raw),
                u.owner.gid.map(rustix::fs::Gid::from_raw),
            )?;
        }
        rustix::net::listen(&fd, 4096)?;
        let m = std::fs::symlink_metadata(path)?;
        Ok(SocketFile {
            path: path.to_path_buf(),
            id: (m.dev(), m.ino()),
        })
    };
    match made() {
        Ok(file) => Ok((fd.into(), file)),
        Err(e) => {
            let _ = std::fs::remove_file(path);
            Err(e)
        }
    }
}

/// Makes way for a socket at `path`: a socket file nothing listens on (a
/// crashed run's) is removed; one a live process accepts on is in use;
/// anything else there is not ours to remove.
fn clear_stale(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let m = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if !m.file_type().is_socket() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "a file that is not a socket is there",
        ));
    }
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => Err(io::ErrorKind::AddrInUse.into()),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => std::fs::remove_file(path),
        Err(e) => Err(e),
    }
}

/// An accepted connection as the engines' stream type (see the module
/// doc).
pub(crate) fn as_tcp(stream: tokio::net::UnixStream) -> io::Result<tokio::net::TcpStream> {
    let fd: OwnedFd = stream.into_std()?.into();
    tokio::net::TcpStream::from_std(std::net::TcpStream::from(fd))
}

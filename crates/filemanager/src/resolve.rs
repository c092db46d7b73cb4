//! Safe path resolution beneath the served root: owns the `openat2` flags of
//! each [`SymlinkPolicy`], the mapping of resolution errors to [`OpenError`],
//! and `statx` of an open descriptor.
//!
//! Every open is relative to the root directory's descriptor and goes through
//! `openat2(2)` with `RESOLVE_BENEATH` or `RESOLVE_IN_ROOT`, so the kernel, not
//! string checks, guarantees that no `..`, absolute path, symlink or concurrent
//! rename reaches outside the root:
//!
//! ```text
//! policy        resolve flags                          symlink "a -> /etc/passwd"   "a -> ../x"
//! deny          BENEATH | NO_SYMLINKS (| NO_MAGICLINKS) ELOOP -> Forbidden           ELOOP -> Forbidden
//! within_root   BENEATH | NO_MAGICLINKS                EXDEV -> Forbidden           allowed if it stays inside
//! follow        IN_ROOT | NO_MAGICLINKS                root/etc/passwd (chroot-like) clamped at the root
//! ```
//!
//! `follow` deliberately does NOT mean "follow anywhere": the standards say no
//! file outside the served root is ever served, so `follow` resolves every
//! symlink as if the root were `/` (`RESOLVE_IN_ROOT`), like a chroot.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags, StatxFlags};

use crate::{OpenError, SymlinkPolicy};

/// `openat2` flags for a file that will be read: read-only, close-on-exec,
/// no controlling tty, and non-blocking so a FIFO planted in the tree cannot
/// park a worker (it is then rejected by type).
pub(crate) fn read_oflags() -> OFlags {
    OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK
}

/// `openat2` flags for a metadata-only descriptor (`O_PATH`).
pub(crate) fn path_oflags() -> OFlags {
    OFlags::PATH | OFlags::CLOEXEC
}

/// The resolve flags of a symlink policy (see the module table).
pub(crate) fn resolve_flags(policy: SymlinkPolicy) -> ResolveFlags {
    match policy {
        SymlinkPolicy::Deny => {
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS
        }
        SymlinkPolicy::WithinRoot => ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
        SymlinkPolicy::Follow => ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS,
    }
}

/// Turns a request path into the C string handed to `openat2`.
///
/// Leading slashes are stripped (the path is always relative to the root) and
/// an empty path names the root itself. A NUL byte can never name a file.
pub(crate) fn c_path(rel_path: &str) -> Result<CString, OpenError> {
    let trimmed = rel_path.trim_start_matches('/');
    let rel = if trimmed.is_empty() { "." } else { trimmed };
    CString::new(rel).map_err(|_| OpenError::NotFound)
}

/// How many times an `EAGAIN` from a racing `..` resolution is retried
/// before the open is refused.
const EAGAIN_RETRIES: usize = 8;

/// Opens `path` beneath `root` with `policy`, synchronously (`openat2`).
pub(crate) fn open_beneath(
    root: impl AsFd,
    path: &CString,
    oflags: OFlags,
    policy: SymlinkPolicy,
) -> io::Result<OwnedFd> {
    let resolve = resolve_flags(policy);
    let mut tries = 0;
    loop {
        match rustix::fs::openat2(
            root.as_fd(),
            path.as_c_str(),
            oflags,
            Mode::empty(),
            resolve,
        ) {
            // The kernel could not prove a `..` step safe because of a
            // concurrent rename; the man page says the caller may retry.
            Err(rustix::io::Errno::AGAIN) if tries < EAGAIN_RETRIES => tries += 1,
            other => return other.map_err(io::Error::from),
        }
    }
}

/// Checks once, at start, that `openat2` with `policy`'s flags works on the
/// root itself. Without it (a kernel before 5.6, or a seccomp profile that
/// does not know the call, as older container runtimes' defaults) every open
/// would fail with ENOSYS or EPERM: better one clear error at start than a
/// 500 or 403 on every request.
pub(crate) fn probe_openat2(root: impl AsFd, policy: SymlinkPolicy) -> io::Result<()> {
    match open_beneath(root, &CString::from(c"."), path_oflags(), policy) {
        Ok(_) => Ok(()),
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!(
                "openat2(2) on the root failed ({e}): every file is opened with it, \
                 confined beneath the root, so the server cannot run without it \
                 (it needs Linux 5.6 or later, and a seccomp profile that allows openat2)"
            ),
        )),
    }
}

/// Whether the kernel takes `RESOLVE_CACHED` (Linux 5.12+); cleared on the
/// first `EINVAL`, after which every open takes the backend's full path.
static CACHED_LOOKUP: AtomicBool = AtomicBool::new(true);

/// `openat2` with `RESOLVE_CACHED` added to `policy`'s flags: succeeds only
/// if every component of `path` is already in the dentry cache, so the
/// lookup never waits for I/O and the call can run inline on a worker
/// thread. It is the same attempt io_uring makes inline before it hands an
/// `OPENAT2` to a worker thread, without the ring round trip, and it spares
/// the blocking backend a thread hand-off per open.
///
/// `None` means "do the full open": the lookup would need I/O or
/// revalidation (`EAGAIN`, which also covers a racing `..` rename), or the
/// kernel lacks `RESOLVE_CACHED`. Any other error is the answer the full
/// open would give (a cached negative dentry is a definite `ENOENT`); the
/// root confinement flags are the same either way.
pub(crate) fn open_beneath_cached(
    root: impl AsFd,
    path: &CString,
    oflags: OFlags,
    policy: SymlinkPolicy,
) -> Option<io::Result<OwnedFd>> {
    if !CACHED_LOOKUP.load(Ordering::Relaxed) {
        return None;
    }
    match rustix::fs::openat2(
        root.as_fd(),
        path.as_c_str(),
        oflags,
        Mode::empty(),
        resolve_flags(policy) | ResolveFlags::CACHED,
    ) {
        Ok(fd) => Some(Ok(fd)),
        Err(rustix::io::Errno::AGAIN) => None,
        Err(rustix::io::Errno::INVAL) => {
            CACHED_LOOKUP.store(false, Ordering::Relaxed);
            None
        }
        Err(e) => Some(Err(e.into())),
    }
}

/// What kind of object a descriptor refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A regular file: the only kind served.
    Regular,
    /// A directory: the server may redirect or serve an index.
    Dir,
    /// Anything else (FIFO, socket, device): refused.
    Other,
}

/// The result of `statx` on an open descriptor.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stat {
    pub(crate) kind: Kind,
    pub(crate) meta: pathcache::FileMeta,
    /// Hard links to the inode: with more than one, it can change through
    /// a name in a directory nobody watches (`watch.rs`).
    pub(crate) nlink: u32,
}

/// Kind of a `st_mode`.
pub(crate) fn kind_of(mode: u32) -> Kind {
    match mode & libc::S_IFMT {
        libc::S_IFREG => Kind::Regular,
        libc::S_IFDIR => Kind::Dir,
        _ => Kind::Other,
    }
}

/// `statx(root, path, AT_SYMLINK_NOFOLLOW)`, synchronously: an unconfined
/// walk, for comparing with what a confined open found (revalidation), never
/// for deciding what to open or serve.
pub(crate) fn stat_unconfined(root: impl AsFd, path: &str) -> io::Result<Stat> {
    statx(root, path, AtFlags::SYMLINK_NOFOLLOW)
}

/// `statx(fd, "", AT_EMPTY_PATH)`, synchronously.
pub(crate) fn stat_fd(fd: impl AsFd) -> io::Result<Stat> {
    statx(fd, c"", AtFlags::EMPTY_PATH)
}

fn statx(dir: impl AsFd, path: impl rustix::path::Arg, flags: AtFlags) -> io::Result<Stat> {
    let s = rustix::fs::statx(
        dir,
        path,
        flags,
        StatxFlags::TYPE
            | StatxFlags::SIZE
            | StatxFlags::MTIME
            | StatxFlags::CTIME
            | StatxFlags::INO
            | StatxFlags::NLINK,
    )?;
    let ns = |t: rustix::fs::StatxTimestamp| {
        t.tv_sec
            .saturating_mul(1_000_000_000)
            .saturating_add(i64::from(t.tv_nsec))
    };
    Ok(Stat {
        kind: kind_of(u32::from(s.stx_mode)),
        meta: pathcache::FileMeta {
            size: s.stx_size,
            mtime_ns: ns(s.stx_mtime),
            ctime_ns: ns(s.stx_ctime),
            dev: libc::makedev(s.stx_dev_major, s.stx_dev_minor),
            ino: s.stx_ino,
        },
        nlink: s.stx_nlink,
    })
}

/// Maps an `openat2`/`statx` error to the caller-facing error.
///
/// `EMFILE`/`ENFILE` are kept as [`OpenError::Io`] here: the manager turns
/// them into recovery (evict, reap, retry) and only then into `Exhausted`.
pub(crate) fn map_open_error(err: io::Error) -> OpenError {
    match err.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::ENOTDIR) | Some(libc::ENAMETOOLONG) => OpenError::NotFound,
        // EXDEV: the path tried to leave the root; ELOOP: a symlink under
        // `deny` or a loop; EAGAIN: a `..` race that kept failing.
        Some(libc::EXDEV) | Some(libc::ELOOP) | Some(libc::EACCES) | Some(libc::EPERM)
        | Some(libc::EAGAIN) | Some(libc::ENXIO) => OpenError::Forbidden,
        _ => OpenError::Io(err),
    }
}

/// Why a path was refused ([`FileManager::why_forbidden`](crate::FileManager::why_forbidden)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForbiddenReason {
    /// A symlink on the path leads outside the root (`within_root` refuses
    /// absolute and escaping links).
    LeavesRoot,
    /// A symlink on the path, and the policy is `deny`.
    Symlink,
    /// Symlinks that loop, or too many of them.
    SymlinkLoop,
    /// File or directory permissions (the server's user may not read it).
    Permission,
    /// Neither a regular file nor a directory (a device, socket or FIFO).
    NotRegular,
    /// Another refusal, or the path is no longer refused.
    Other,
}

impl ForbiddenReason {
    /// One sentence for a 403 body or a log line; it names no path.
    pub fn describe(self) -> &'static str {
        match self {
            ForbiddenReason::LeavesRoot => {
                "a symlink on this path leads outside the served directory (symlinks = within_root)"
            }
            ForbiddenReason::Symlink => "a symlink on this path is not followed (symlinks = deny)",
            ForbiddenReason::SymlinkLoop => "the symlinks on this path loop",
            ForbiddenReason::Permission => "the server may not read this file",
            ForbiddenReason::NotRegular => "not a regular file",
            ForbiddenReason::Other => "",
        }
    }
}

/// Resolves `rel` again as a read would, and says what refused it.
pub(crate) fn why_forbidden(root: &OwnedFd, rel: &str, policy: SymlinkPolicy) -> ForbiddenReason {
    let Ok(path) = c_path(rel) else {
        return ForbiddenReason::Other;
    };
    // NONBLOCK: a FIFO must not block the open; NOCTTY: nor a terminal
    // become ours.
    let oflags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
    match open_beneath(root.as_fd(), &path, oflags, policy) {
        Ok(fd) => match stat_fd(&fd) {
            Ok(st) if st.kind == Kind::Other => ForbiddenReason::NotRegular,
            _ => ForbiddenReason::Other,
        },
        Err(e) => match e.raw_os_error() {
            Some(libc::EXDEV) => ForbiddenReason::LeavesRoot,
            Some(libc::ELOOP) if policy == SymlinkPolicy::Deny => ForbiddenReason::Symlink,
            Some(libc::ELOOP) => ForbiddenReason::SymlinkLoop,
            Some(libc::EACCES) | Some(libc::EPERM) => ForbiddenReason::Permission,
            Some(libc::ENXIO) => ForbiddenReason::NotRegular,
            _ => ForbiddenReason::Other,
        },
    }
}

/// Whether an error means "out of descriptors".
pub(crate) fn is_exhausted(err: &io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

//! Safe path resolution beneath the served root: owns the `openat2` flags of
//! each [`SymlinkPolicy`], and the mapping of resolution errors, on every
//! system, to [`OpenError`] and [`ForbiddenReason`]. What an open
//! descriptor is (`stat`) is the system layer's (`sys`).
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
//!
//! The portable confinement (every Unix but Linux, and Linux with
//! [`BackendKind::Portable`](crate::BackendKind::Portable)) has no
//! `openat2`: it walks the path one component at a time from the root's
//! descriptor, each step an `openat(dir, name, O_NOFOLLOW)`, so no step can
//! follow a link or leave the directory it starts from. `..` is resolved
//! by the walk itself (it returns to the descriptor it came from, and at
//! the root it is an escape, or stays there under `follow`), and a symlink
//! met on the way is read with `readlinkat` and judged by the same table:
//! refused under `deny`, its target walked from the link's directory under
//! `within_root` (absolute targets and `..` past the root refused), from
//! the root for an absolute target under `follow`. A rename racing the
//! walk can only move a directory the walk already holds, so it cannot
//! lead outside. On FreeBSD 13+ `within_root` is one
//! `openat(root, path, O_RESOLVE_BENEATH)`, probed at start. Windows
//! checks the final path of the handle it opened instead (`sys::windows`).

use std::ffi::CString;
use std::io;
#[cfg(target_os = "linux")]
use std::sync::atomic::{AtomicBool, Ordering};

#[cfg(target_os = "linux")]
use rustix::fs::Mode;
#[cfg(target_os = "linux")]
use rustix::fs::ResolveFlags;

#[cfg(windows)]
use windows_sys::Win32::Foundation as win;

use crate::config::SymlinkPolicy;
#[cfg(windows)]
use crate::sys::windows::{ESCAPE, LINK};
use crate::sys::{stat_fd, AsFd, Kind, OFlags, OwnedFd};
use crate::types::{ForbiddenReason, OpenError};

/// How paths are confined: the symlink policy, and whether the portable
/// walk does it (see the module docs) or the kernel (`openat2`, Linux).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rules {
    pub(crate) policy: SymlinkPolicy,
    /// The component-by-component walk, not `openat2`.
    pub(crate) walk: bool,
}

/// `openat2` flags for a file that will be read: read-only, close-on-exec,
/// no controlling tty, and non-blocking so a FIFO planted in the tree cannot
/// park a worker (it is then rejected by type).
pub(crate) fn read_oflags() -> OFlags {
    OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK
}

/// `openat2` flags for a metadata-only descriptor (`O_PATH`).
#[cfg(target_os = "linux")]
pub(crate) fn path_oflags() -> OFlags {
    OFlags::PATH | OFlags::CLOEXEC
}

/// Flags for a metadata-only descriptor where there is no `O_PATH`: a
/// non-blocking read-only open (a file nobody may read is refused, which
/// the server could not have sent anyway).
#[cfg(not(target_os = "linux"))]
pub(crate) fn path_oflags() -> OFlags {
    read_oflags()
}

/// The resolve flags of a symlink policy (see the module table).
#[cfg(target_os = "linux")]
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
#[cfg(target_os = "linux")]
const EAGAIN_RETRIES: usize = 8;

/// Opens `path` beneath `root` under `rules`, synchronously: `openat2`, or
/// the portable walk.
pub(crate) fn open_beneath(
    root: impl AsFd,
    path: &CString,
    oflags: OFlags,
    rules: Rules,
) -> io::Result<OwnedFd> {
    #[cfg(target_os = "linux")]
    if !rules.walk {
        return openat2_beneath(root.as_fd(), path, oflags, rules.policy);
    }
    portable_open(root.as_fd(), path, oflags, rules.policy)
}

/// The confinement without `openat2`: the Unix walk, or Windows' check of
/// the opened handle's final path.
#[cfg(windows)]
use crate::sys::windows::open_beneath as portable_open;
#[cfg(unix)]
use walk::open as portable_open;

/// `openat2(root, path, oflags, policy's resolve flags)`, retried on a
/// racing `..`.
#[cfg(target_os = "linux")]
fn openat2_beneath(
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
pub(crate) fn probe_openat2(root: impl AsFd, rules: Rules) -> io::Result<()> {
    if rules.walk {
        return Ok(());
    }
    match open_beneath(root, &CString::from(c"."), path_oflags(), rules) {
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
#[cfg(target_os = "linux")]
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
/// The portable walk has no such mode: `None` always.
pub(crate) fn open_beneath_cached(
    root: impl AsFd,
    path: &CString,
    oflags: OFlags,
    rules: Rules,
) -> Option<io::Result<OwnedFd>> {
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (root, path, oflags, rules);
        None
    }
    #[cfg(target_os = "linux")]
    open_cached_linux(root, path, oflags, rules)
}

#[cfg(target_os = "linux")]
fn open_cached_linux(
    root: impl AsFd,
    path: &CString,
    oflags: OFlags,
    rules: Rules,
) -> Option<io::Result<OwnedFd>> {
    let policy = rules.policy;
    if rules.walk || !CACHED_LOOKUP.load(Ordering::Relaxed) {
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

/// Maps an `openat2`/`statx` error to the caller-facing error.
///
/// `EMFILE`/`ENFILE` are kept as [`OpenError::Io`] here: the manager turns
/// them into recovery (evict, reap, retry) and only then into `Exhausted`.
#[cfg(unix)]
pub(crate) fn map_open_error(err: io::Error) -> OpenError {
    match err.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::ENOTDIR) | Some(libc::ENAMETOOLONG) => OpenError::NotFound,
        // EXDEV: the path tried to leave the root; ELOOP: a symlink under
        // `deny` or a loop; EAGAIN: a `..` race that kept failing.
        Some(libc::EXDEV) | Some(libc::ELOOP) | Some(libc::EACCES) | Some(libc::EPERM)
        | Some(libc::EAGAIN) | Some(libc::ENXIO) => OpenError::Forbidden,
        // FreeBSD: O_NOFOLLOW on a link, and an O_RESOLVE_BENEATH escape.
        #[cfg(target_os = "freebsd")]
        Some(libc::EMLINK) | Some(libc::ENOTCAPABLE) => OpenError::Forbidden,
        _ => OpenError::Io(err),
    }
}

/// Maps an open or stat error to the caller-facing error.
#[cfg(windows)]
pub(crate) fn map_open_error(err: io::Error) -> OpenError {
    match err.raw_os_error().map(|c| c as u32) {
        Some(
            win::ERROR_FILE_NOT_FOUND
            | win::ERROR_PATH_NOT_FOUND
            | win::ERROR_INVALID_NAME
            | win::ERROR_DIRECTORY
            | win::ERROR_BAD_PATHNAME
            | win::ERROR_FILENAME_EXCED_RANGE,
        ) => OpenError::NotFound,
        Some(
            ESCAPE
            | LINK
            | win::ERROR_ACCESS_DENIED
            | win::ERROR_SHARING_VIOLATION
            | win::ERROR_CANT_ACCESS_FILE,
        ) => OpenError::Forbidden,
        _ => OpenError::Io(err),
    }
}

/// What refused an open, from its error (`why_forbidden`).
#[cfg(windows)]
fn forbidden_reason(err: &io::Error) -> ForbiddenReason {
    match err.raw_os_error().map(|c| c as u32) {
        Some(ESCAPE) => ForbiddenReason::LeavesRoot,
        Some(LINK) => ForbiddenReason::Symlink,
        Some(win::ERROR_ACCESS_DENIED | win::ERROR_SHARING_VIOLATION) => {
            ForbiddenReason::Permission
        }
        _ => ForbiddenReason::Other,
    }
}

/// Whether an error means "out of descriptors".
#[cfg(windows)]
pub(crate) fn is_exhausted(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error().map(|c| c as u32),
        Some(win::ERROR_TOO_MANY_OPEN_FILES | win::ERROR_NO_SYSTEM_RESOURCES)
    )
}

/// Resolves `rel` again as a read would, and says what refused it.
pub(crate) fn why_forbidden(root: &OwnedFd, rel: &str, rules: Rules) -> ForbiddenReason {
    let Ok(path) = c_path(rel) else {
        return ForbiddenReason::Other;
    };
    // NONBLOCK: a FIFO must not block the open; NOCTTY: nor a terminal
    // become ours.
    let oflags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
    match open_beneath(root.as_fd(), &path, oflags, rules) {
        Ok(fd) => match stat_fd(&fd) {
            Ok(st) if st.kind == Kind::Other => ForbiddenReason::NotRegular,
            _ => ForbiddenReason::Other,
        },
        #[cfg(windows)]
        Err(e) => forbidden_reason(&e),
        #[cfg(unix)]
        Err(e) => match e.raw_os_error() {
            Some(libc::EXDEV) => ForbiddenReason::LeavesRoot,
            Some(libc::ELOOP) if rules.policy == SymlinkPolicy::Deny => ForbiddenReason::Symlink,
            Some(libc::ELOOP) => ForbiddenReason::SymlinkLoop,
            Some(libc::EACCES) | Some(libc::EPERM) => ForbiddenReason::Permission,
            Some(libc::ENXIO) => ForbiddenReason::NotRegular,
            _ => ForbiddenReason::Other,
        },
    }
}

/// Whether an error means "out of descriptors".
#[cfg(unix)]
pub(crate) fn is_exhausted(err: &io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

/// The portable confinement: the path walked one component at a time with
/// `O_NOFOLLOW` (see the module docs).
#[cfg(unix)]
mod walk {
    use std::ffi::{CStr, CString};
    use std::io;
    use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

    use rustix::fs::{Mode, OFlags};

    use crate::config::SymlinkPolicy;

    /// Links followed in one walk before it is refused as a loop (Linux's
    /// `MAXSYMLINKS`).
    const MAX_LINKS: usize = 40;

    fn err(code: i32) -> io::Error {
        io::Error::from_raw_os_error(code)
    }

    /// Opens `path` beneath `root` under `policy` with `oflags` for the
    /// last component.
    pub(super) fn open(
        root: BorrowedFd<'_>,
        path: &CStr,
        oflags: OFlags,
        policy: SymlinkPolicy,
    ) -> io::Result<OwnedFd> {
        #[cfg(target_os = "freebsd")]
        if policy == SymlinkPolicy::WithinRoot && beneath::works(root) {
            return beneath::open(root, path, oflags);
        }
        // Components still to walk, the next one last.
        let mut todo: Vec<Vec<u8>> = split(path.to_bytes());
        // The directories walked into below the root, innermost last.
        let mut dirs: Vec<OwnedFd> = Vec::new();
        let mut links = 0;
        let step = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
        loop {
            let Some(name) = todo.pop() else {
                // The path ends at a directory already walked into (the
                // root, or `a/..`): open it with the caller's flags.
                let here = dirs.last().map_or(root, |d| d.as_fd());
                return Ok(rustix::fs::openat(here, c".", oflags, Mode::empty())?);
            };
            match &name[..] {
                b"." => continue,
                b".." => {
                    if dirs.pop().is_none() && policy != SymlinkPolicy::Follow {
                        // Up from the root: an escape (openat2's EXDEV).
                        return Err(err(libc::EXDEV));
                    }
                    continue;
                }
                _ => {}
            }
            let last = todo.is_empty();
            let here = dirs.last().map_or(root, |d| d.as_fd());
            let cname = CString::new(name).map_err(|_| err(libc::ENOENT))?;
            let flags = if last {
                oflags | OFlags::NOFOLLOW
            } else {
                step
            };
            let opened = rustix::fs::openat(here, &cname, flags, Mode::empty());
            let target = match opened {
                // Linux's O_PATH | O_NOFOLLOW opens a link itself.
                Ok(fd) if is_link(&fd) => read_link(here, &cname)?,
                Ok(fd) if last => return Ok(fd),
                Ok(fd) => {
                    dirs.push(fd);
                    continue;
                }
                // O_NOFOLLOW on a link: ELOOP (Linux, macOS), EMLINK
                // (FreeBSD); and O_DIRECTORY may say ENOTDIR first. Ask.
                Err(e) => match rustix::fs::readlinkat(here, &cname, Vec::new()) {
                    Ok(target) => target,
                    Err(_) => return Err(e.into()),
                },
            };
            if policy == SymlinkPolicy::Deny {
                return Err(err(libc::ELOOP));
            }
            links += 1;
            if links > MAX_LINKS {
                return Err(err(libc::ELOOP));
            }
            let target = target.into_bytes();
            if target.first() == Some(&b'/') {
                if policy != SymlinkPolicy::Follow {
                    // An absolute target: RESOLVE_BENEATH's EXDEV.
                    return Err(err(libc::EXDEV));
                }
                // Follow: `/` is the root.
                dirs.clear();
            }
            todo.extend(split(&target));
        }
    }

    /// The components of `path`, the first one last (a stack).
    fn split(path: &[u8]) -> Vec<Vec<u8>> {
        path.split(|&b| b == b'/')
            .filter(|c| !c.is_empty())
            .rev()
            .map(<[u8]>::to_vec)
            .collect()
    }

    fn is_link(fd: &OwnedFd) -> bool {
        rustix::fs::fstat(fd).is_ok_and(|s| {
            rustix::fs::FileType::from_raw_mode(s.st_mode) == rustix::fs::FileType::Symlink
        })
    }

    fn read_link(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<CString> {
        Ok(rustix::fs::readlinkat(dir, name, Vec::new())?)
    }

    /// FreeBSD's `O_RESOLVE_BENEATH` (13.0+): the kernel refuses a path
    /// that would leave the directory, which is `within_root`.
    #[cfg(target_os = "freebsd")]
    mod beneath {
        use std::ffi::CStr;
        use std::io;
        use std::os::fd::{BorrowedFd, OwnedFd};
        use std::sync::OnceLock;

        use rustix::fs::{Mode, OFlags};

        fn flag() -> OFlags {
            OFlags::from_bits_retain(libc::O_RESOLVE_BENEATH as _)
        }

        /// Whether the kernel honours the flag: an older one ignores
        /// unknown open flags, so `..` from the root must fail with it.
        pub(super) fn works(root: BorrowedFd<'_>) -> bool {
            static WORKS: OnceLock<bool> = OnceLock::new();
            *WORKS.get_or_init(|| {
                rustix::fs::openat(
                    root,
                    c"..",
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | flag(),
                    Mode::empty(),
                )
                .is_err()
            })
        }

        pub(super) fn open(
            root: BorrowedFd<'_>,
            path: &CStr,
            oflags: OFlags,
        ) -> io::Result<OwnedFd> {
            Ok(rustix::fs::openat(
                root,
                path,
                oflags | flag(),
                Mode::empty(),
            )?)
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn root(dir: &std::path::Path) -> OwnedFd {
            rustix::fs::open(
                dir,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .unwrap()
        }

        fn code(r: io::Result<OwnedFd>) -> Option<i32> {
            r.err().map(|e| e.raw_os_error().unwrap_or(-1))
        }

        /// The walk gives the answers `openat2` gives for each policy.
        #[test]
        fn the_walk_confines_as_the_kernel_does() {
            let outside = tempfile::tempdir().unwrap();
            std::fs::write(outside.path().join("secret"), b"s").unwrap();
            let tmp = tempfile::tempdir().unwrap();
            let t = tmp.path();
            std::fs::create_dir_all(t.join("a/b")).unwrap();
            std::fs::write(t.join("a/b/f"), b"f").unwrap();
            std::fs::write(t.join("x"), b"x").unwrap();
            std::os::unix::fs::symlink("b/f", t.join("a/rel")).unwrap();
            std::os::unix::fs::symlink("../../x", t.join("a/b/up")).unwrap();
            std::os::unix::fs::symlink("../..", t.join("a/esc")).unwrap();
            std::os::unix::fs::symlink("/x", t.join("abs")).unwrap();
            std::os::unix::fs::symlink(outside.path().join("secret"), t.join("out")).unwrap();
            std::os::unix::fs::symlink("loop", t.join("loop")).unwrap();
            let r = root(t);
            let rf = OFlags::RDONLY | OFlags::CLOEXEC;
            let open = |p: &CStr, policy| code(open(r.as_fd(), p, rf, policy));
            use SymlinkPolicy::*;
            for policy in [Deny, WithinRoot, Follow] {
                assert_eq!(open(c"a/b/f", policy), None, "{policy:?}");
                assert_eq!(open(c"a/b/../b/./f", policy), None, "{policy:?}");
                assert_eq!(open(c"a/b/nope", policy), Some(libc::ENOENT));
                assert_eq!(open(c"x/y", policy), Some(libc::ENOTDIR));
                let secret = open(c"out", policy);
                assert!(secret.is_some(), "{policy:?} reached outside");
            }
            assert_eq!(open(c"../x", Deny), Some(libc::EXDEV));
            assert_eq!(open(c"../x", WithinRoot), Some(libc::EXDEV));
            assert_eq!(open(c"../x", Follow), None, "clamped at the root");
            assert_eq!(open(c"a/rel", Deny), Some(libc::ELOOP));
            assert_eq!(open(c"a/rel", WithinRoot), None);
            assert_eq!(open(c"a/b/up", WithinRoot), None, "stays inside");
            assert_eq!(open(c"a/esc/x", WithinRoot), Some(libc::EXDEV));
            assert_eq!(open(c"a/esc/x", Follow), None, "clamped");
            assert_eq!(open(c"abs", WithinRoot), Some(libc::EXDEV));
            assert_eq!(open(c"abs", Follow), None, "root/x");
            assert_eq!(open(c"loop", Follow), Some(libc::ELOOP));
            assert_eq!(open(c"out", WithinRoot), Some(libc::EXDEV));
            // Follow reads the outside link's target inside the root.
            assert_eq!(open(c"out", Follow), Some(libc::ENOENT));
        }
    }
}

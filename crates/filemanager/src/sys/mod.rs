//! The operating system beneath the crate: owns the descriptor types, the
//! open flags, opening the root, reading a directory's names and reading
//! at an offset, and `stat`ing a descriptor ([`Stat`]), so the rest of
//! the crate reads the same on every system.
//!
//! On Unix these are the standard descriptors (`OwnedFd`, `BorrowedFd`,
//! `AsFd`) and rustix's `OFlags`. On Windows a descriptor is a handle:
//! `OwnedFd` and `BorrowedFd` here name `OwnedHandle` and
//! `BorrowedHandle`, `AsFd` is a crate trait over `AsHandle`, and `OFlags`
//! keeps the one flag the Windows confinement reads (`DIRECTORY`); the
//! confinement itself is [`windows::open_beneath`].

use std::io;
#[cfg(unix)]
use std::path::Path;

#[cfg(target_os = "linux")]
use rustix::fs::{AtFlags, StatxFlags};

#[cfg(unix)]
pub(crate) use rustix::fs::OFlags;
#[cfg(unix)]
pub(crate) use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

#[cfg(windows)]
pub(crate) mod windows;
#[cfg(windows)]
pub(crate) use windows::{AsFd, BorrowedFd, OFlags, OwnedFd};

#[cfg(windows)]
pub(crate) use windows::{open_dir, pread_append, read_dir};

/// Opens the directory at `path` (the root), following links: the root
/// path is the operator's to choose.
#[cfg(unix)]
pub(crate) fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?)
}

/// Calls `each` with the name of every entry of the directory `dir`
/// (`.` and `..` included on Unix; names that are not UTF-8 left out, as
/// no request can name them) until it returns false.
#[cfg(unix)]
pub(crate) fn read_dir(dir: &OwnedFd, mut each: impl FnMut(&str) -> bool) -> io::Result<()> {
    for entry in rustix::fs::Dir::read_from(dir)? {
        let entry = entry?;
        if let Ok(name) = entry.file_name().to_str() {
            if !each(name) {
                break;
            }
        }
    }
    Ok(())
}

/// One positioned read of up to `want` bytes appended to `buf` (`pread`
/// into its spare capacity: nothing is zeroed first; `ReadFile` at an
/// offset on Windows), retried when interrupted; returns the bytes read, 0
/// at end of file.
#[cfg(unix)]
pub(crate) fn pread_append(
    fd: BorrowedFd<'_>,
    buf: &mut Vec<u8>,
    want: usize,
    offset: u64,
) -> io::Result<usize> {
    buf.reserve(want);
    let spare = &mut buf.spare_capacity_mut()[..want];
    let n = loop {
        match rustix::io::pread(fd, &mut *spare, offset) {
            Err(rustix::io::Errno::INTR) => continue,
            done => break done?.0.len(),
        }
    };
    // SAFETY: `pread` initialised the first `n` bytes of the spare capacity.
    unsafe { buf.set_len(buf.len() + n) };
    Ok(n)
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
#[cfg(unix)]
pub(crate) fn kind_of(mode: u32) -> Kind {
    match rustix::fs::FileType::from_raw_mode(mode as _) {
        rustix::fs::FileType::RegularFile => Kind::Regular,
        rustix::fs::FileType::Directory => Kind::Dir,
        _ => Kind::Other,
    }
}

/// `statx(root, path, AT_SYMLINK_NOFOLLOW)`, synchronously: an unconfined
/// walk, for comparing with what a confined open found (revalidation), never
/// for deciding what to open or serve.
#[cfg(target_os = "linux")]
pub(crate) fn stat_unconfined(root: impl AsFd, path: &str) -> io::Result<Stat> {
    statx(root, path, AtFlags::SYMLINK_NOFOLLOW)
}

/// `statx(fd, "", AT_EMPTY_PATH)`, synchronously.
#[cfg(target_os = "linux")]
pub(crate) fn stat_fd(fd: impl AsFd) -> io::Result<Stat> {
    statx(fd, c"", AtFlags::EMPTY_PATH)
}

/// `fstatat(root, path, AT_SYMLINK_NOFOLLOW)` where there is no `statx`.
#[cfg(all(unix, not(target_os = "linux")))]
pub(crate) fn stat_unconfined(root: impl AsFd, path: &str) -> io::Result<Stat> {
    let st = rustix::fs::statat(root, path, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)?;
    Ok(from_stat(&st))
}

/// `fstat(fd)` where there is no `statx`.
#[cfg(all(unix, not(target_os = "linux")))]
pub(crate) fn stat_fd(fd: impl AsFd) -> io::Result<Stat> {
    Ok(from_stat(&rustix::fs::fstat(fd)?))
}

/// The file at `path` under the root's real path, opened for its
/// attributes only, links followed (the caller's rules say when that is
/// enough).
#[cfg(windows)]
pub(crate) fn stat_unconfined(root: impl AsFd, path: &str) -> io::Result<Stat> {
    windows::stat_unconfined(root.as_fd(), path)
}

/// The handle's file information.
#[cfg(windows)]
pub(crate) fn stat_fd(fd: impl AsFd) -> io::Result<Stat> {
    windows::stat(fd.as_fd())
}

// The field types of `struct stat` differ between systems (`st_dev` is
// an i32 on macOS, `st_nlink` a u16), hence the casts.
#[cfg(all(unix, not(target_os = "linux")))]
#[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
fn from_stat(s: &rustix::fs::Stat) -> Stat {
    let ns = |sec: i64, nsec: i64| sec.saturating_mul(1_000_000_000).saturating_add(nsec);
    Stat {
        kind: kind_of(s.st_mode as u32),
        meta: pathcache::FileMeta {
            size: s.st_size as u64,
            mtime_ns: ns(s.st_mtime as i64, s.st_mtime_nsec as i64),
            ctime_ns: ns(s.st_ctime as i64, s.st_ctime_nsec as i64),
            dev: s.st_dev as u64,
            ino: s.st_ino as u64,
        },
        nlink: u32::try_from(s.st_nlink as u64).unwrap_or(u32::MAX),
    }
}

#[cfg(target_os = "linux")]
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

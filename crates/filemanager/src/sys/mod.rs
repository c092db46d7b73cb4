//! The operating system beneath the crate: owns the descriptor types, the
//! open flags, opening the root, reading a directory's names and reading
//! at an offset, so the rest of the crate reads the same on every system.
//!
//! On Unix these are the standard descriptors (`OwnedFd`, `BorrowedFd`,
//! `AsFd`) and rustix's `OFlags`. On Windows a descriptor is a handle:
//! `OwnedFd` and `BorrowedFd` here name `OwnedHandle` and
//! `BorrowedHandle`, `AsFd` is a crate trait over `AsHandle`, and `OFlags`
//! keeps the one flag the Windows confinement reads (`DIRECTORY`); the
//! confinement itself is [`windows::open_beneath`].

#[cfg(unix)]
use std::io;
#[cfg(unix)]
use std::path::Path;

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

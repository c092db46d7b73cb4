//! Is a byte range of a file in the page cache? `sendfile(2)` on a range
//! that is not waits for the disk inside the syscall, which stalls every
//! other connection of a worker thread; a caller that asks first can read
//! a cold range through the backend (io_uring) instead and send it from
//! memory.
//!
//! ```text
//! cachestat(2) (Linux 6.5+): are all pages of the range in the cache?
//!   (exact, but a page still being read in by readahead counts as cached)
//!   ENOSYS / EPERM (older kernel, seccomp) -> remembered, skipped from then on
//! preadv2(RWF_NOWAIT) of one byte at the range's last page (and its first,
//! without cachestat): EAGAIN -> cold. A page is readable only once its
//! read finished, and readahead fills in order, so a readable last page
//! means the range will not wait.
//!
//! read_resident: preadv2(RWF_NOWAIT) of the whole range into a buffer,
//! for small ranges: all of it or nothing, the check and the read in one.
//! ```

use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once `cachestat` is known not to work here.
static NO_CACHESTAT: AtomicBool = AtomicBool::new(false);

/// x86-64 and aarch64 share the generic syscall number.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const SYS_CACHESTAT: libc::c_long = 451;

#[repr(C)]
struct CachestatRange {
    off: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct Cachestat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

/// Whether `len` bytes at `offset` of `fd` are all in the page cache. An
/// error other than "not supported" answers `true`: the caller's sendfile
/// then reports it.
///
/// ```
/// use std::os::fd::AsFd;
/// let f = tempfile::tempfile().unwrap();
/// std::io::Write::write_all(&mut &f, &[1u8; 8192]).unwrap();
/// assert!(filemanager::is_resident(f.as_fd(), 0, 8192));
/// ```
pub fn is_resident(fd: BorrowedFd<'_>, offset: u64, len: u64) -> bool {
    if len == 0 {
        return true;
    }
    let page = rustix::param::page_size() as u64;
    let last = (offset + len - 1) / page * page;
    match all_cached(fd, offset, len, page) {
        Some(cached) => cached && probe(fd, last),
        None => probe(fd, offset) && (last <= offset || probe(fd, last)),
    }
}

/// [`is_resident`] for a caller that has just read a later page of the
/// same file without waiting ([`read_resident`]): that read stands in for
/// the probe of the range's last page (readahead fills in order), so this
/// is one `cachestat` (one probe of the first page without it).
pub fn is_resident_before_read(fd: BorrowedFd<'_>, offset: u64, len: u64) -> bool {
    if len == 0 {
        return true;
    }
    let page = rustix::param::page_size() as u64;
    all_cached(fd, offset, len, page).unwrap_or_else(|| probe(fd, offset))
}

/// `cachestat`'s word on the range, `Some(all cached)`; `None` where the
/// kernel or the architecture has no such call, which is remembered.
fn all_cached(fd: BorrowedFd<'_>, offset: u64, len: u64, page: u64) -> Option<bool> {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    if !NO_CACHESTAT.load(Ordering::Relaxed) {
        match cachestat(fd, offset, len, page) {
            Some(cached) => return Some(cached),
            None => NO_CACHESTAT.store(true, Ordering::Relaxed),
        }
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let _ = (fd, offset, len, page);
    None
}

/// `Some(all cached)`, or `None` when the syscall is not available.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn cachestat(fd: BorrowedFd<'_>, offset: u64, len: u64, page: u64) -> Option<bool> {
    let range = CachestatRange { off: offset, len };
    let mut cs = Cachestat::default();
    // SAFETY: cachestat(2) reads `range` and writes `cs`, both live and of
    // the layout the kernel expects (struct cachestat_range, struct
    // cachestat); `fd` is a borrowed open descriptor; flags must be 0.
    let rc = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            fd.as_raw_fd(),
            &range as *const CachestatRange,
            &mut cs as *mut Cachestat,
            0u32,
        )
    };
    if rc == 0 {
        let pages = (offset + len).div_ceil(page) - offset / page;
        return Some(cs.nr_cache >= pages);
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::ENOSYS) | Some(libc::EPERM) | Some(libc::EOPNOTSUPP) => None,
        _ => Some(true),
    }
}

/// Appends `len` bytes of `fd` at `offset` to `out` if they are all in the
/// page cache, in one `preadv2(RWF_NOWAIT)`: the residency check and the
/// read in one syscall. False, with `out` as it was, when any of them is
/// not cached, the file is shorter, or the filesystem cannot read without
/// waiting (the caller then checks with [`is_resident`] and sends by
/// descriptor, which reports a short file).
///
/// ```
/// use std::os::fd::AsFd;
/// let f = tempfile::tempfile().unwrap();
/// std::io::Write::write_all(&mut &f, b"hello world").unwrap();
/// let mut out = b"head:".to_vec();
/// assert!(filemanager::read_resident(f.as_fd(), 6, 5, &mut out));
/// assert_eq!(out, b"head:world");
/// assert!(!filemanager::read_resident(f.as_fd(), 6, 6, &mut out));
/// assert_eq!(out, b"head:world");
/// ```
pub fn read_resident(fd: BorrowedFd<'_>, offset: u64, len: usize, out: &mut Vec<u8>) -> bool {
    out.reserve(len);
    let spare = &mut out.spare_capacity_mut()[..len];
    // SAFETY: `len` bytes of `out`'s spare capacity (reserved above), which
    // nothing else aliases.
    let n = unsafe { pread_nowait(fd, offset, spare.as_mut_ptr().cast(), len) };
    if n < 0 || n as usize != len {
        return false;
    }
    // SAFETY: the kernel initialised exactly `len` bytes past the old length.
    unsafe { out.set_len(out.len() + len) };
    true
}

/// One byte at `offset` without waiting for I/O: false when it is not cached.
fn probe(fd: BorrowedFd<'_>, offset: u64) -> bool {
    let mut byte = 0u8;
    // SAFETY: one live local byte.
    let n = unsafe { pread_nowait(fd, offset, &mut byte, 1) };
    !(n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN))
}

/// `preadv2(RWF_NOWAIT)` of `len` bytes at `offset` into `buf`: it fails
/// with EAGAIN, or returns what is cached, rather than wait for the disk.
///
/// # Safety
///
/// `buf` must be valid for writes of `len` bytes for the call.
unsafe fn pread_nowait(fd: BorrowedFd<'_>, offset: u64, buf: *mut u8, len: usize) -> isize {
    let iov = libc::iovec {
        iov_base: buf.cast(),
        iov_len: len,
    };
    // SAFETY: one iovec over the caller's `len` writable bytes; `fd` is a
    // borrowed open descriptor.
    unsafe {
        libc::preadv2(
            fd.as_raw_fd(),
            &iov,
            1,
            offset as libc::off_t,
            libc::RWF_NOWAIT,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_freshly_written_file_is_resident_and_a_dropped_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; 1 << 20]).unwrap();
        let f = std::fs::File::open(&path).unwrap();
        assert!(is_resident(f.as_fd(), 0, 1 << 20));
        assert!(is_resident(f.as_fd(), 4096, 0));
        assert!(is_resident_before_read(f.as_fd(), 0, 1 << 20));
        // Drop the file's pages (clean, so DONTNEED evicts them) and ask again.
        f.sync_all().unwrap();
        // SAFETY: fadvise on an open descriptor; no memory is passed.
        let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert_eq!(rc, 0);
        let cold = !is_resident(f.as_fd(), 0, 1 << 20);
        assert_eq!(is_resident_before_read(f.as_fd(), 0, 1 << 20), !cold);
        if !cold {
            // tmpfs keeps pages whatever the advice: nothing to learn there.
            let fs = rustix::fs::fstatfs(&f).unwrap();
            assert_eq!(
                fs.f_type as i64,
                libc::TMPFS_MAGIC,
                "evicted pages reported resident"
            );
        }
    }
}

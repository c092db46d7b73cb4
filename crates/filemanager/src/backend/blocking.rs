//! The portable backend: owns reads that try `preadv2(RWF_NOWAIT)` inline
//! (served from the page cache without leaving the task) and fall back to
//! tokio's blocking pool, and opens/stats run with `spawn_blocking`.
//!
//! ```text
//! read_at ─ preadv2(NOWAIT) ─ full ──────────────────────────────▶ Bytes
//!                           └ EAGAIN / short ─ dup(fd) ─ spawn_blocking(pread loop) ─▶ Bytes
//!           (one buffer throughout, filled in its spare capacity: never zeroed)
//! ```
//!
//! The pool read works on a `dup` of the descriptor so that, if the caller's
//! future is dropped and the file released, the pool never reads a reused
//! descriptor number (which could be a socket).

use std::ffi::CString;
use std::io;
#[cfg(target_os = "linux")]
use std::os::fd::AsRawFd;
use std::sync::Arc;

use bytes::Bytes;

use super::{Counters, IoBackend, Op, Target};
use crate::resolve::open_beneath;
use crate::resolve::Rules;
use crate::sys::{stat_fd, AsFd, BorrowedFd, OFlags, OwnedFd, Stat};

/// The blocking-pool backend.
#[derive(Debug)]
pub(crate) struct Blocking {
    pub(crate) counters: Arc<Counters>,
}

/// Elsewhere no read is known not to wait: every read goes to the pool.
#[cfg(not(target_os = "linux"))]
pub(crate) fn pread_nowait(
    _fd: BorrowedFd<'_>,
    _buf: &mut Vec<u8>,
    _want: usize,
    _offset: u64,
) -> io::Result<Option<usize>> {
    Ok(None)
}

/// `preadv2(fd, offset, RWF_NOWAIT)` of up to `want` bytes appended to
/// `buf` (its spare capacity, not zeroed first): `Ok(None)` when the data
/// is not in the page cache (or the filesystem cannot tell).
#[cfg(target_os = "linux")]
pub(crate) fn pread_nowait(
    fd: BorrowedFd<'_>,
    buf: &mut Vec<u8>,
    want: usize,
    offset: u64,
) -> io::Result<Option<usize>> {
    buf.reserve(want);
    let spare = &mut buf.spare_capacity_mut()[..want];
    let iov = libc::iovec {
        iov_base: spare.as_mut_ptr().cast(),
        iov_len: want,
    };
    let off = i64::try_from(offset).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `iov` points at `want` bytes of `buf`'s spare capacity,
    // exclusively borrowed for the duration of this synchronous call; the
    // kernel writes at most that many bytes.
    let n = unsafe { libc::preadv2(fd.as_raw_fd(), &iov, 1, off, libc::RWF_NOWAIT) };
    if n >= 0 {
        // SAFETY: the kernel initialised the first `n` spare bytes.
        unsafe { buf.set_len(buf.len() + n as usize) };
        return Ok(Some(n as usize));
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EOPNOTSUPP) => Ok(None),
        // Kernels or filesystems without RWF_NOWAIT for this file.
        Some(libc::EINVAL) | Some(libc::ENOSYS) => Ok(None),
        _ => Err(err),
    }
}

/// Blocking `pread`s appended to `buf` until it holds `len` bytes or the
/// file ends; `offset` is where `buf`'s first byte was read from.
fn pread_full(fd: impl AsFd, buf: &mut Vec<u8>, len: usize, offset: u64) -> io::Result<()> {
    while buf.len() < len {
        let (want, at) = (len - buf.len(), offset + buf.len() as u64);
        if crate::sys::pread_append(fd.as_fd(), buf, want, at)? == 0 {
            break;
        }
    }
    Ok(())
}

impl Blocking {
    /// Reads `len` bytes at `offset` (fewer only at end of file): inline
    /// while the page cache has the data, the rest on the blocking pool,
    /// into one buffer that is never zeroed (a body's every byte was
    /// zeroed before it was read) and that the pool read owns, so nothing
    /// is copied back from a temporary.
    async fn read_owned(&self, target: Target<'_>, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        let mut buf = crate::bufpool::take(len);
        // Inline, as long as the page cache keeps answering.
        while buf.len() < len {
            let (want, at) = (len - buf.len(), offset + buf.len() as u64);
            match pread_nowait(target.fd, &mut buf, want, at)? {
                Some(0) => {
                    self.counters.read(Op::ReadInline, buf.len());
                    return Ok(buf);
                }
                Some(_) => {}
                None => break,
            }
        }
        if buf.len() == len {
            self.counters.read(Op::ReadInline, len);
            return Ok(buf);
        }
        let fd = target.fd.try_clone_to_owned()?;
        let buf = tokio::task::spawn_blocking(move || {
            pread_full(&fd, &mut buf, len, offset)?;
            Ok::<_, io::Error>(buf)
        })
        .await
        .map_err(io::Error::other)??;
        self.counters.read(Op::ReadAsync, buf.len());
        Ok(buf)
    }

    /// Reads into `buf` at `offset` until full or EOF; returns bytes read.
    /// Read as [`read`](IoBackend::read) reads, then copied, as the io_uring
    /// backend's `read_into` copies.
    pub(crate) async fn read_into(
        &self,
        target: Target<'_>,
        offset: u64,
        buf: &mut [u8],
    ) -> io::Result<usize> {
        let read = self.read_owned(target, offset, buf.len()).await?;
        buf[..read.len()].copy_from_slice(&read);
        let n = read.len();
        crate::bufpool::give_back(read);
        Ok(n)
    }
}

impl IoBackend for Blocking {
    async fn open(
        &self,
        root: &Arc<OwnedFd>,
        path: CString,
        oflags: OFlags,
        rules: Rules,
    ) -> io::Result<(OwnedFd, Stat)> {
        let root = Arc::clone(root);
        let counters = Arc::clone(&self.counters);
        // If this future is dropped, the JoinHandle drops the result and the
        // OwnedFd closes: nothing leaks.
        tokio::task::spawn_blocking(move || {
            counters.op(Op::Open);
            let fd = open_beneath(&*root, &path, oflags, rules)?;
            counters.op(Op::Stat);
            let st = stat_fd(&fd)?;
            Ok((fd, st))
        })
        .await
        .map_err(io::Error::other)?
    }

    async fn read(&self, target: Target<'_>, offset: u64, len: usize) -> io::Result<Bytes> {
        let buf = self.read_owned(target, offset, len).await?;
        Ok(crate::bufpool::into_bytes(buf))
    }
}

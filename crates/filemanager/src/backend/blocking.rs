//! The portable backend: owns reads that try `preadv2(RWF_NOWAIT)` inline
//! (served from the page cache without leaving the task) and fall back to
//! tokio's blocking pool, and opens/stats run with `spawn_blocking`.
//!
//! ```text
//! read_at ─ preadv2(NOWAIT) ─ full ──────────────────────────────▶ Bytes
//!                           └ EAGAIN / short ─ dup(fd) ─ spawn_blocking(pread loop) ─▶ Bytes
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
use crate::resolve::Rules;
use crate::resolve::{open_beneath, stat_fd, Stat};
use crate::sys::{AsFd, BorrowedFd, OFlags, OwnedFd};

/// The blocking-pool backend.
#[derive(Debug)]
pub(crate) struct Blocking {
    pub(crate) counters: Arc<Counters>,
}

/// Elsewhere no read is known not to wait: every read goes to the pool.
#[cfg(not(target_os = "linux"))]
pub(crate) fn pread_nowait(
    _fd: BorrowedFd<'_>,
    _buf: &mut [u8],
    _offset: u64,
) -> io::Result<Option<usize>> {
    Ok(None)
}

/// `preadv2(fd, buf, offset, RWF_NOWAIT)`: returns `Ok(None)` when the data
/// is not in the page cache (or the filesystem cannot tell).
#[cfg(target_os = "linux")]
pub(crate) fn pread_nowait(
    fd: BorrowedFd<'_>,
    buf: &mut [u8],
    offset: u64,
) -> io::Result<Option<usize>> {
    let iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let off = i64::try_from(offset).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `iov` points at `buf`, a live exclusive slice of `iov_len`
    // bytes, for the duration of this synchronous call; the kernel writes
    // at most that many bytes.
    let n = unsafe { libc::preadv2(fd.as_raw_fd(), &iov, 1, off, libc::RWF_NOWAIT) };
    if n >= 0 {
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

/// Blocking `pread` until `buf` is full or end of file; returns bytes read.
pub(crate) fn pread_full(fd: impl AsFd, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match crate::sys::pread(fd.as_fd(), &mut buf[done..], offset + done as u64)? {
            0 => break,
            n => done += n,
        }
    }
    Ok(done)
}

impl Blocking {
    /// Reads into `buf` at `offset` until full or EOF, inline when the page
    /// cache has the data, else on the blocking pool.
    pub(crate) async fn read_into(
        &self,
        target: Target<'_>,
        offset: u64,
        buf: &mut [u8],
    ) -> io::Result<usize> {
        let mut done = 0;
        // Inline, as long as the page cache keeps answering.
        while done < buf.len() {
            match pread_nowait(target.fd, &mut buf[done..], offset + done as u64)? {
                Some(0) => {
                    self.counters.read(Op::ReadInline, done);
                    return Ok(done);
                }
                Some(n) => done += n,
                None => break,
            }
        }
        if done == buf.len() {
            self.counters.read(Op::ReadInline, done);
            return Ok(done);
        }
        let fd = target.fd.try_clone_to_owned()?;
        let want = buf.len() - done;
        let at = offset + done as u64;
        let tail = tokio::task::spawn_blocking(move || {
            let mut tmp = vec![0u8; want];
            let n = pread_full(&fd, &mut tmp, at)?;
            tmp.truncate(n);
            Ok::<_, io::Error>(tmp)
        })
        .await
        .map_err(io::Error::other)??;
        buf[done..done + tail.len()].copy_from_slice(&tail);
        done += tail.len();
        self.counters.read(Op::ReadAsync, done);
        Ok(done)
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
        // Zeroing 4 KiB costs tens of nanoseconds against a syscall; it keeps
        // the inline path free of uninitialised memory.
        let mut buf = crate::bufpool::take(len);
        buf.resize(len, 0);
        let n = self.read_into(target, offset, &mut buf).await?;
        buf.truncate(n);
        Ok(crate::bufpool::into_bytes(buf))
    }
}

//! `IORING_OP_READ`: reads a range of a file on the calling thread's
//! ring, through the file's fixed-file slot when it has one (registering
//! it on first use), into a pooled buffer lent to the kernel.

use std::io;
use std::os::fd::AsRawFd;

use bytes::Bytes;
use io_uring::{opcode, types};

use super::{Keep, Uring};
use crate::backend::{Op, Target};

impl Uring {
    pub(super) async fn read_at(
        &self,
        target: Target<'_>,
        offset: u64,
        len: usize,
    ) -> io::Result<Bytes> {
        let ring = self.local_ring()?;
        let raw = target.fd.as_raw_fd();
        // Resolved under the first submission's lock (one lock per read).
        let mut fixed: Option<Option<u32>> = None;
        let file = target.fixed.and_then(|f| f.slot().map(|s| (f, s)));
        let mut buf: Vec<u8> = crate::bufpool::take(len);
        let mut all_inline = true;
        while buf.len() < len {
            let filled = buf.len();
            let at = offset + filled as u64;
            let want = u32::try_from(len - filled).unwrap_or(u32::MAX);
            let (res, keep, inline) = ring
                .run(Keep::Buf(buf), |inner, k| {
                    let fixed = *fixed.get_or_insert_with(|| {
                        let (f, s) = file?;
                        ring.fixed_for(inner, s, raw, f.ring_mask(), &self.counters)
                    });
                    let Keep::Buf(b) = k else { unreachable!() };
                    // The write target is the spare capacity past `filled`;
                    // the Vec's heap block never moves while it sits in Keep.
                    let ptr = b.as_mut_ptr().wrapping_add(filled);
                    match fixed {
                        Some(i) => opcode::Read::new(types::Fixed(i), ptr, want)
                            .offset(at)
                            .build(),
                        None => opcode::Read::new(types::Fd(raw), ptr, want)
                            .offset(at)
                            .build(),
                    }
                })
                .await?;
            all_inline &= inline;
            let Keep::Buf(b) = keep else { unreachable!() };
            buf = b;
            if res == -libc::EINTR || res == -libc::EAGAIN {
                continue;
            }
            if res < 0 {
                return Err(io::Error::from_raw_os_error(-res));
            }
            if res == 0 {
                break;
            }
            // SAFETY: the kernel initialised `res` bytes after `filled`, and
            // `res <= want <= capacity - filled`.
            unsafe { buf.set_len(filled + res as usize) };
        }
        self.counters.read(
            if all_inline {
                Op::ReadInline
            } else {
                Op::ReadAsync
            },
            buf.len(),
        );
        Ok(crate::bufpool::into_bytes(buf))
    }
}

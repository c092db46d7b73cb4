//! Read buffers recycled between reads. A body streamed in 128 KiB chunks
//! would otherwise take every chunk fresh from the allocator, and for blocks
//! that size (glibc's mmap threshold is 128 KiB) that means an mmap, a page
//! fault per 4 KiB touched, and an munmap or trim: about 190 faults per
//! 1 MiB response through `servedir`, a fifth of its CPU (measured with
//! the harness's `embedded_large`; the ratio it bought is in the commit).
//!
//! ```text
//! take(len) --> Vec (recycled if one fits) --> the read fills it
//!   --> into_bytes: Bytes::from_owner(Recycled(vec)) --> the body sends it
//!   --> last Bytes clone dropped: Recycled::drop puts the Vec back
//! ```
//!
//! Small reads (a small file loaded into the cache) do not come here: the
//! cache keeps their bytes, and the allocator serves small blocks well.

use bytes::Bytes;
use std::sync::Mutex;

/// Reads this large or larger use recycled buffers.
const MIN: usize = 64 * 1024;
/// Buffers kept at most (with 128 KiB chunks, 4 MiB).
const KEEP: usize = 32;
/// Buffers larger than this are not kept.
const MAX: usize = 1024 * 1024;

static POOL: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// An empty buffer with room for `len` bytes.
pub(crate) fn take(len: usize) -> Vec<u8> {
    if len >= MIN {
        let recycled = POOL.lock().unwrap_or_else(|e| e.into_inner()).pop();
        if let Some(mut buf) = recycled {
            buf.clear();
            buf.reserve(len);
            return buf;
        }
    }
    Vec::with_capacity(len)
}

/// `buf` as `Bytes` that give the buffer back when the last clone drops.
pub(crate) fn into_bytes(buf: Vec<u8>) -> Bytes {
    if (MIN..=MAX).contains(&buf.capacity()) {
        Bytes::from_owner(Recycled(buf))
    } else {
        Bytes::from(buf)
    }
}

struct Recycled(Vec<u8>);

impl AsRef<[u8]> for Recycled {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Recycled {
    fn drop(&mut self) {
        give_back(std::mem::take(&mut self.0));
    }
}

/// Keeps `buf` for a later [`take`] if it is of a size the pool keeps and
/// the pool has room.
pub(crate) fn give_back(buf: Vec<u8>) {
    if !(MIN..=MAX).contains(&buf.capacity()) {
        return;
    }
    let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
    if pool.len() < KEEP {
        pool.push(buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_buffer_is_the_next_one_taken() {
        let mut buf = take(128 * 1024);
        buf.extend_from_slice(&[7u8; 100]);
        let ptr = buf.as_ptr();
        let bytes = into_bytes(buf);
        assert_eq!(&bytes[..], &[7u8; 100][..]);
        let clone = bytes.slice(10..20);
        drop(bytes);
        drop(clone);
        let again = take(128 * 1024);
        assert!(again.is_empty());
        // No other unit test reads 64 KiB or more, so nothing races for it.
        assert_eq!(again.as_ptr(), ptr, "the buffer was not recycled");
        assert!(into_bytes(take(10)).is_empty());
    }
}

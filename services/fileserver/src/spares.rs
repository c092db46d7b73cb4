//! A worker's spare connection buffers. An HTTP/1.1 connection waiting
//! for its next request holds no buffer, as nginx frees its buffers on an
//! idle keep-alive connection: it takes a read and a write buffer from
//! here when bytes arrive and gives them back when it waits again. A
//! worker answers one request at a time, so a few buffers go round all of
//! its connections, already allocated and their read buffers already
//! zeroed. HTTP/2 connections share one read buffer per worker: a read
//! hands its bytes to the connection's frame decoder before anything
//! else runs, so no connection holds one between reads.
//!
//! This replaced buffers kept for 100 ms after each answer and then freed
//! by a timer. At 4096 connections a connection's next request came later
//! than that, so every request paid for the timer, a wake-up, two frees
//! and two allocations (arena_h1_4096, against that: CPU per request
//! 0.86x, peak RSS 0.83x).

use std::cell::{RefCell, RefMut};

/// Spare buffers of each kind a worker keeps; more are freed. Beyond the
/// one in use, buffers are held only by connections whose answers wait on
/// their client.
const KEEP: usize = 32;

/// A write buffer grown past this is freed rather than kept: the tail of a
/// body and the head before it fit (`send::COPY_MAX`, twice).
const WRITE_KEEP_MAX: usize = 32 * 1024;

/// A worker's spare read and write buffers (not shared across threads).
#[derive(Debug, Default)]
pub(crate) struct Spares {
    read: RefCell<Vec<Vec<u8>>>,
    write: RefCell<Vec<Vec<u8>>>,
    frames: RefCell<Vec<u8>>,
}

impl Spares {
    /// A read buffer of `len` initialized bytes (zeroed when new; a spare
    /// holds what an earlier read left, which nothing reads: the parser
    /// reads only what this connection's reads report).
    pub(crate) fn read_buffer(&self, len: usize) -> Vec<u8> {
        match self.read.borrow_mut().pop() {
            Some(b) if b.len() == len => b,
            // Kept at another length (a reload changed max_header_bytes).
            _ => vec![0; len],
        }
    }

    /// Takes back a read buffer (of the length `read_buffer` gave it; its
    /// bytes need not be zeroed again: a read overwrites what it reports).
    pub(crate) fn give_read(&self, buf: Vec<u8>) {
        let mut read = self.read.borrow_mut();
        if read.len() < KEEP {
            read.push(buf);
        }
    }

    /// The worker's HTTP/2 read buffer, of at least `len` bytes: held only
    /// while one read is handed over, with no await meanwhile.
    pub(crate) fn frame_buffer(&self, len: usize) -> RefMut<'_, Vec<u8>> {
        let mut frames = self.frames.borrow_mut();
        if frames.len() < len {
            frames.resize(len, 0);
        }
        frames
    }

    /// An empty write buffer.
    pub(crate) fn write_buffer(&self) -> Vec<u8> {
        self.write
            .borrow_mut()
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(1024))
    }

    /// Takes back an emptied write buffer.
    pub(crate) fn give_write(&self, buf: Vec<u8>) {
        debug_assert!(buf.is_empty(), "nothing batched is dropped");
        let mut write = self.write.borrow_mut();
        if write.len() < KEEP && buf.capacity() <= WRITE_KEEP_MAX {
            write.push(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_go_round_and_their_number_is_bounded() {
        let s = Spares::default();
        let r = s.read_buffer(2048);
        let ptr = r.as_ptr();
        s.give_read(r);
        let again = s.read_buffer(2048);
        assert_eq!(again.as_ptr(), ptr, "the spare is reused");
        // One kept at another length is not handed out at the new one.
        s.give_read(again);
        assert_eq!(s.read_buffer(1024).len(), 1024);
        for _ in 0..2 * KEEP {
            s.give_read(vec![0; 16]);
            s.give_write(Vec::with_capacity(16));
        }
        assert_eq!(s.read.borrow().len(), KEEP);
        assert_eq!(s.write.borrow().len(), KEEP);
        let mut big = Vec::with_capacity(WRITE_KEEP_MAX + 1);
        big.push(0u8);
        big.clear();
        let s = Spares::default();
        s.give_write(big);
        assert!(s.write.borrow().is_empty(), "a grown buffer is freed");
    }
}

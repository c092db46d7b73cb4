//! Streams (RFC 9113 5.1) and flow control (RFC 9113 5.2, 6.9): one
//! stream's state and windows, the streams a connection has open, and the
//! ids it opened and closed, by which a frame for a stream that is gone
//! is told apart from one for a stream never opened. No frame is read or
//! written here: the connection (`conn.rs`) does that.

use std::collections::VecDeque;
use std::ops::{Index, IndexMut};

use crate::frame::{Reason, MAX_WINDOW};

/// Closed streams remembered, so that a HEADERS in flight for one is told
/// apart from a client reusing an old identifier.
const RECENTLY_CLOSED: usize = 64;

/// What this side may still send, on a stream or the connection:
/// negative after the client shrank the initial window below what was
/// already sent.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SendWindow(i64);

impl SendWindow {
    pub(crate) fn new(size: i64) -> SendWindow {
        SendWindow(size)
    }

    /// Octets this window and `other` (the connection's) both allow.
    pub(crate) fn and(self, other: SendWindow) -> i64 {
        self.0.min(other.0)
    }

    /// There is room to send.
    pub(crate) fn is_open(self) -> bool {
        self.0 > 0
    }

    /// Grows the window by `by` (a WINDOW_UPDATE; a change of the initial
    /// window, which may shrink it): FLOW_CONTROL_ERROR past 2^31-1.
    pub(crate) fn grow(&mut self, by: i64) -> Result<(), Reason> {
        self.0 += by;
        if self.0 > MAX_WINDOW {
            return Err(Reason::FLOW_CONTROL_ERROR);
        }
        Ok(())
    }

    /// `len` octets sent.
    pub(crate) fn spend(&mut self, len: usize) {
        self.0 -= len as i64;
    }
}

/// What the client may still send, on a stream or the connection, and
/// what it sent that was not yet given back.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RecvWindow {
    window: i64,
    /// Octets received and not yet given back in a WINDOW_UPDATE.
    unacked: u64,
}

impl RecvWindow {
    pub(crate) fn new(size: i64) -> RecvWindow {
        RecvWindow {
            window: size,
            unacked: 0,
        }
    }

    /// Takes `len` octets the client sent; false, taking nothing, if they
    /// are more than the window allows.
    pub(crate) fn take(&mut self, len: u64) -> bool {
        if len as i64 > self.window {
            return false;
        }
        self.window -= len as i64;
        self.unacked += len;
        true
    }

    /// Gives back what was taken once it is `at_least` octets (and not
    /// none): the increment of the WINDOW_UPDATE to send.
    pub(crate) fn give_back(&mut self, at_least: u64) -> Option<u32> {
        if self.unacked == 0 || self.unacked < at_least {
            return None;
        }
        let inc = self.unacked as u32;
        self.window += i64::from(inc);
        self.unacked = 0;
        Some(inc)
    }
}

/// One open (or half-closed) stream.
#[derive(Debug)]
pub(crate) struct Stream {
    pub(crate) id: u32,
    /// The client may still send on it.
    pub(crate) recv_open: bool,
    /// This side has not ended it.
    pub(crate) send_open: bool,
    pub(crate) headers_sent: bool,
    pub(crate) send: SendWindow,
    pub(crate) recv: RecvWindow,
    pub(crate) body_read: u64,
    /// Every DATA octet received, padding included: what draining costs.
    pub(crate) received: u64,
    pub(crate) content_length: Option<u64>,
    /// Answered, reading out its body: reset at the next tick.
    pub(crate) drain_marked: bool,
}

impl Stream {
    /// Stream `id` as its request head opened it (`end_stream`: with no
    /// body to come).
    pub(crate) fn new(
        id: u32,
        end_stream: bool,
        send: SendWindow,
        recv: RecvWindow,
        content_length: Option<u64>,
    ) -> Stream {
        Stream {
            id,
            recv_open: !end_stream,
            send_open: true,
            headers_sent: false,
            send,
            recv,
            body_read: 0,
            received: 0,
            content_length,
            drain_marked: false,
        }
    }
}

/// A connection's streams: those open, in the order they opened, which
/// is the order of their ids (they only rise, RFC 9113 5.1.1); the ids
/// closed last; and the highest the client opened.
#[derive(Debug, Default)]
pub(crate) struct Streams {
    open: Vec<Stream>,
    /// The ids of the streams closed last, oldest first.
    closed: VecDeque<u32>,
    /// The highest stream the client opened.
    last: u32,
}

impl Streams {
    /// The highest stream the client opened.
    pub(crate) fn last(&self) -> u32 {
        self.last
    }

    /// Stream `id` is opened (or refused): the ids below it are used up.
    pub(crate) fn set_last(&mut self, id: u32) {
        self.last = id;
    }

    pub(crate) fn len(&self) -> usize {
        self.open.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Stream> {
        self.open.iter_mut()
    }

    /// Opens `s`, whose id is above every open one.
    pub(crate) fn push(&mut self, s: Stream) {
        self.open.push(s);
    }

    /// Forgets the open streams (the connection ended).
    pub(crate) fn clear(&mut self) {
        self.open.clear();
    }

    /// Stream `id`'s index.
    pub(crate) fn find(&self, id: u32) -> Option<usize> {
        self.open.binary_search_by_key(&id, |s| s.id).ok()
    }

    /// No stream `id` was ever opened here: an even id (this side pushes
    /// none) or one above the last opened (RFC 9113 5.1).
    pub(crate) fn is_idle(&self, id: u32) -> bool {
        id % 2 == 0 || id > self.last
    }

    /// Stream `id` is among the recently closed.
    pub(crate) fn was_closed(&self, id: u32) -> bool {
        self.closed.contains(&id)
    }

    /// Takes stream `i` out, remembering its id among the recently
    /// closed: a frame for it that was in flight is a stream error
    /// (STREAM_CLOSED), one for an id never opened a connection error.
    pub(crate) fn remove(&mut self, i: usize) -> Stream {
        let s = self.open.remove(i);
        self.remember_closed(s.id);
        s
    }

    pub(crate) fn remember_closed(&mut self, id: u32) {
        if self.closed.len() == RECENTLY_CLOSED {
            self.closed.pop_front();
        }
        self.closed.push_back(id);
    }
}

impl Index<usize> for Streams {
    type Output = Stream;

    fn index(&self, i: usize) -> &Stream {
        &self.open[i]
    }
}

impl IndexMut<usize> for Streams {
    fn index_mut(&mut self, i: usize) -> &mut Stream {
        &mut self.open[i]
    }
}

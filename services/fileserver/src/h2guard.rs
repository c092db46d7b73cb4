//! What the h2 crate does not bound or names with the wrong code,
//! checked on the bytes between the connection's I/O and h2: a frame
//! header parse per frame in each direction, no allocation.
//!
//! ```text
//! client -> [read: frame headers (and SETTINGS entries)] -> h2
//!             | cheap frame: credit - 1        | bad length / value: the frame is
//!             | credit < 0: ENHANCE_YOUR_CALM  |   withheld, GOAWAY with RFC 9113's code
//! client <- [write: frame headers] <- h2
//!             HEADERS or DATA with payload: credit + 2 (up to the budget), send progress
//!             closing: bytes up to the next frame boundary, then our GOAWAY,
//!             close_notify/FIN, and input read and dropped until the peer closes
//! ```
//!
//! Cheap frames are those that cost the client a few bytes and ask the
//! server for no response data: PRIORITY, SETTINGS, PING, WINDOW_UPDATE,
//! DATA with no payload and no END_STREAM, and frame types h2 ignores.
//! h2 answers each (a SETTINGS or PING ack, a priority-tree update) and
//! never stops; the CVE-2019-9512/9515/9516/9518 floods are loops of them.
//! A client that fetches responses earns credit back, so browsers' pings
//! and window updates never reach the bound.
//!
//! Codes (RFC 9113) where h2 says PROTOCOL_ERROR: SETTINGS_INITIAL_WINDOW_SIZE
//! above 2^31-1 is FLOW_CONTROL_ERROR (6.5.2); a SETTINGS ACK with a
//! payload, SETTINGS not a multiple of 6 octets, PING not 8, WINDOW_UPDATE
//! or RST_STREAM not 4 and PRIORITY not 5 are FRAME_SIZE_ERROR (6.3-6.9).
//! An HPACK index out of range (COMPRESSION_ERROR) is not checked here:
//! telling it needs the decoder's dynamic table, which only h2 has.

/// RFC 9113 7: the error codes this module sends.
pub(crate) const FLOW_CONTROL_ERROR: u32 = 0x3;
pub(crate) const FRAME_SIZE_ERROR: u32 = 0x6;
pub(crate) const ENHANCE_YOUR_CALM: u32 = 0xb;

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const PRIORITY: u8 = 0x2;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PUSH_PROMISE: u8 = 0x5;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const WINDOW_UPDATE: u8 = 0x8;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
/// The client connection preface (RFC 9113 3.4), before the first frame.
const PREFACE_LEN: u8 = 24;
/// Credit a HEADERS or non-empty DATA frame sent earns back.
const REFILL: i64 = 2;

/// Where the connection's close is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Closing {
    /// Serving.
    No,
    /// GOAWAY with this code goes out at the next frame boundary.
    Requested(u32),
    /// GOAWAY queued after the last whole frame; writing, then shutdown.
    Queued,
    /// GOAWAY written (or the peer gone): input is read and dropped.
    Done,
}

/// A frame header being read, 9 bytes, possibly across reads or writes.
#[derive(Debug, Default)]
struct Head {
    buf: [u8; 9],
    have: u8,
    /// Payload bytes of the current frame still to pass.
    left: u32,
}

impl Head {
    /// Takes header bytes from `b`; returns how many it took and the
    /// header once complete: (length, type, flags, stream).
    fn take(&mut self, b: &[u8]) -> (usize, Option<(u32, u8, u8, u32)>) {
        let n = (9 - self.have as usize).min(b.len());
        self.buf[self.have as usize..self.have as usize + n].copy_from_slice(&b[..n]);
        self.have += n as u8;
        if self.have < 9 {
            return (n, None);
        }
        self.have = 0;
        let h = &self.buf;
        let len = u32::from_be_bytes([0, h[0], h[1], h[2]]);
        let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
        (n, Some((len, h[3], h[4], stream)))
    }

    fn at_boundary(&self) -> bool {
        self.have == 0 && self.left == 0
    }
}

/// One connection's frame accounting; see the module doc.
#[derive(Debug)]
pub(crate) struct Guard {
    preface_left: u8,
    rd: Head,
    rd_kind: u8,
    rd_flags: u8,
    /// Bytes of the SETTINGS entry being read.
    entry: [u8; 6],
    entry_have: u8,
    /// Highest stream the client opened (the GOAWAY's last stream).
    last_stream: u32,
    credit: i64,
    max_credit: i64,
    wr: Head,
    pub(crate) closing: Closing,
}

impl Guard {
    /// A guard allowing `budget` cheap frames ahead of the server's work.
    pub(crate) fn new(budget: u32) -> Guard {
        Guard {
            preface_left: PREFACE_LEN,
            rd: Head::default(),
            rd_kind: 0,
            rd_flags: 0,
            entry: [0; 6],
            entry_have: 0,
            last_stream: 0,
            credit: i64::from(budget),
            max_credit: i64::from(budget),
            wr: Head::default(),
            closing: Closing::No,
        }
    }

    /// Asks for a GOAWAY with `code` (the first request wins).
    pub(crate) fn close(&mut self, code: u32) {
        if self.closing == Closing::No {
            let reason = match code {
                ENHANCE_YOUR_CALM => "enhance_your_calm",
                FLOW_CONTROL_ERROR => "flow_control_error",
                FRAME_SIZE_ERROR => "frame_size_error",
                _ => "other",
            };
            metrics::counter!("fileserver_http2_guard_goaways_total", "code" => reason)
                .increment(1);
            self.closing = Closing::Requested(code);
        }
    }

    /// Scans bytes read from the client. `Some((at, code))`: `b[at]` is
    /// where a frame the connection must not pass on was recognised (the
    /// frame is incomplete before it), and the GOAWAY's code.
    pub(crate) fn scan_read(&mut self, b: &[u8]) -> Option<(usize, u32)> {
        let mut i = 0;
        while i < b.len() {
            if self.preface_left > 0 {
                let n = (self.preface_left as usize).min(b.len() - i);
                self.preface_left -= n as u8;
                i += n;
                continue;
            }
            if self.rd.left > 0 {
                let n = (self.rd.left as usize).min(b.len() - i);
                if self.rd_kind == SETTINGS {
                    if let Some(k) = self.settings_entries(&b[i..i + n]) {
                        return Some((i + k, FLOW_CONTROL_ERROR));
                    }
                }
                self.rd.left -= n as u32;
                i += n;
                continue;
            }
            let (n, head) = self.rd.take(&b[i..]);
            i += n;
            if let Some((len, kind, flags, stream)) = head {
                if let Some(code) = self.on_client_frame(len, kind, flags, stream) {
                    return Some((i - 1, code));
                }
                self.rd.left = len;
                self.rd_kind = kind;
                self.rd_flags = flags;
                self.entry_have = 0;
            }
        }
        None
    }

    /// SETTINGS payload bytes: the index in `b` of the last byte of an
    /// INITIAL_WINDOW_SIZE above 2^31-1, if one is there.
    fn settings_entries(&mut self, b: &[u8]) -> Option<usize> {
        for (k, &byte) in b.iter().enumerate() {
            self.entry[self.entry_have as usize] = byte;
            self.entry_have += 1;
            if self.entry_have == 6 {
                self.entry_have = 0;
                let e = &self.entry;
                let id = u16::from_be_bytes([e[0], e[1]]);
                let value = u32::from_be_bytes([e[2], e[3], e[4], e[5]]);
                if id == SETTINGS_INITIAL_WINDOW_SIZE && value > 0x7fff_ffff {
                    return Some(k);
                }
            }
        }
        None
    }

    fn on_client_frame(&mut self, len: u32, kind: u8, flags: u8, stream: u32) -> Option<u32> {
        let cheap = match kind {
            DATA => len == 0 && flags & END_STREAM == 0,
            HEADERS => {
                self.last_stream = self.last_stream.max(stream);
                false
            }
            PRIORITY if len != 5 => return Some(FRAME_SIZE_ERROR),
            PRIORITY => true,
            RST_STREAM if len != 4 => return Some(FRAME_SIZE_ERROR),
            SETTINGS if flags & ACK != 0 && len != 0 => return Some(FRAME_SIZE_ERROR),
            SETTINGS if len % 6 != 0 => return Some(FRAME_SIZE_ERROR),
            SETTINGS => flags & ACK == 0,
            PING if len != 8 => return Some(FRAME_SIZE_ERROR),
            PING => true,
            WINDOW_UPDATE if len != 4 => return Some(FRAME_SIZE_ERROR),
            WINDOW_UPDATE => true,
            RST_STREAM | PUSH_PROMISE | GOAWAY | CONTINUATION => false,
            _ => true,
        };
        if cheap {
            self.credit -= 1;
            if self.credit < 0 {
                return Some(ENHANCE_YOUR_CALM);
            }
        }
        None
    }

    /// Scans bytes the server writes; returns whether a HEADERS or DATA
    /// frame with payload began in them (the connection's send progress).
    pub(crate) fn scan_write(&mut self, mut b: &[u8]) -> bool {
        let mut progress = false;
        while !b.is_empty() {
            if self.wr.left > 0 {
                let n = (self.wr.left as usize).min(b.len());
                self.wr.left -= n as u32;
                b = &b[n..];
                continue;
            }
            let (n, head) = self.wr.take(b);
            b = &b[n..];
            if let Some((len, kind, _, _)) = head {
                self.wr.left = len;
                if kind == HEADERS || (kind == DATA && len > 0) {
                    progress = true;
                    self.credit = (self.credit + REFILL).min(self.max_credit);
                }
            }
        }
        progress
    }

    /// How many of `len` bytes the server may still write while closing:
    /// those that complete the frame it is in the middle of.
    pub(crate) fn until_boundary(&self, len: usize) -> usize {
        if self.wr.have > 0 {
            // The rest of a header is a header's worth at most; let it and
            // the payload through (the header says how much follows).
            return (9 - self.wr.have as usize).min(len);
        }
        (self.wr.left as usize).min(len)
    }

    /// Whether the bytes written so far end on a frame boundary.
    pub(crate) fn at_boundary(&self) -> bool {
        self.wr.at_boundary()
    }

    /// The GOAWAY frame for `code`, naming the last stream the client opened.
    pub(crate) fn goaway(&self, code: u32) -> [u8; 17] {
        let mut f = [0u8; 17];
        f[2] = 8;
        f[3] = GOAWAY;
        f[9..13].copy_from_slice(&self.last_stream.to_be_bytes());
        f[13..17].copy_from_slice(&code.to_be_bytes());
        f
    }
}

/// Registers the guard's metric.
pub fn describe() {
    metrics::describe_counter!(
        "fileserver_http2_guard_goaways_total",
        "HTTP/2 connections the daemon closed with its own GOAWAY, by code: \
         enhance_your_calm (a flood of cheap frames, or responses held without \
         progress for send_timeout), frame_size_error, flow_control_error."
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = payload.len() as u32;
        let mut f = len.to_be_bytes()[1..].to_vec();
        f.extend([kind, flags]);
        f.extend(stream.to_be_bytes());
        f.extend(payload);
        f
    }

    fn preface() -> Vec<u8> {
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec()
    }

    #[test]
    fn pings_spend_credit_and_responses_earn_it_back() {
        let mut g = Guard::new(10);
        let mut input = preface();
        input.extend(frame(SETTINGS, 0, 0, &[]));
        for _ in 0..9 {
            input.extend(frame(PING, 0, 0, &[0; 8]));
        }
        // Fed one byte at a time: the headers span reads.
        for b in input.chunks(1) {
            assert_eq!(g.scan_read(b), None);
        }
        assert!(g.scan_write(&frame(HEADERS, 4, 1, &[0x88])));
        let ping = frame(PING, 0, 0, &[0; 8]);
        assert_eq!(g.scan_read(&ping), None);
        assert_eq!(g.scan_read(&ping), None);
        assert_eq!(g.scan_read(&ping), Some((8, ENHANCE_YOUR_CALM)));
    }

    #[test]
    fn malformed_control_frames_get_their_rfc_codes() {
        let cases: [(Vec<u8>, u32); 4] = [
            (
                frame(SETTINGS, 0, 0, &[0, 4, 0x80, 0, 0, 0]),
                FLOW_CONTROL_ERROR,
            ),
            (
                frame(SETTINGS, ACK, 0, &[0, 3, 0, 0, 0, 1]),
                FRAME_SIZE_ERROR,
            ),
            (frame(PING, 0, 0, &[0; 7]), FRAME_SIZE_ERROR),
            (frame(WINDOW_UPDATE, 0, 0, &[0; 3]), FRAME_SIZE_ERROR),
        ];
        for (bad, code) in cases {
            let mut g = Guard::new(100);
            let mut input = preface();
            let start = input.len();
            input.extend(&bad);
            let (at, got) = g.scan_read(&input).unwrap();
            assert_eq!(got, code);
            assert!(at >= start && at < input.len(), "the frame is withheld");
        }
        let mut g = Guard::new(100);
        let mut ok = preface();
        ok.extend(frame(SETTINGS, 0, 0, &[0, 4, 0x7f, 0xff, 0xff, 0xff]));
        assert_eq!(g.scan_read(&ok), None);
    }

    #[test]
    fn writes_track_frame_boundaries() {
        let mut g = Guard::new(100);
        let data = frame(DATA, 0, 1, &[7; 100]);
        // A header split across writes counts once it is whole.
        assert!(!g.scan_write(&data[..5]));
        assert!(!g.at_boundary());
        assert_eq!(g.until_boundary(1000), 4);
        assert!(g.scan_write(&data[5..50]));
        assert_eq!(g.until_boundary(1000), data.len() - 50);
        g.scan_write(&data[50..]);
        assert!(g.at_boundary());
        let goaway = g.goaway(ENHANCE_YOUR_CALM);
        assert_eq!(&goaway[..9], &[0, 0, 8, GOAWAY, 0, 0, 0, 0, 0]);
    }
}

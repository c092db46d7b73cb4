//! HTTP/3's frames (RFC 9114 7) and streams (6): the types and codes,
//! the frames a server writes, and the readers of the two streams a
//! client sends it frames on: its control stream and a request stream up
//! to the end of the request's HEADERS.

use crate::varint;

/// An HTTP/3 error code (RFC 9114 8.1; QPACK's, RFC 9204 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Code(pub u64);

impl Code {
    pub const H3_NO_ERROR: Code = Code(0x100);
    pub const H3_GENERAL_PROTOCOL_ERROR: Code = Code(0x101);
    pub const H3_INTERNAL_ERROR: Code = Code(0x102);
    pub const H3_STREAM_CREATION_ERROR: Code = Code(0x103);
    pub const H3_CLOSED_CRITICAL_STREAM: Code = Code(0x104);
    pub const H3_FRAME_UNEXPECTED: Code = Code(0x105);
    pub const H3_FRAME_ERROR: Code = Code(0x106);
    pub const H3_EXCESSIVE_LOAD: Code = Code(0x107);
    pub const H3_ID_ERROR: Code = Code(0x108);
    pub const H3_SETTINGS_ERROR: Code = Code(0x109);
    pub const H3_MISSING_SETTINGS: Code = Code(0x10a);
    pub const H3_REQUEST_REJECTED: Code = Code(0x10b);
    pub const H3_REQUEST_CANCELLED: Code = Code(0x10c);
    pub const H3_REQUEST_INCOMPLETE: Code = Code(0x10d);
    pub const H3_MESSAGE_ERROR: Code = Code(0x10e);
    pub const QPACK_DECOMPRESSION_FAILED: Code = Code(0x200);
}

/// Unidirectional stream types (RFC 9114 6.2, RFC 9204 4.2).
pub mod stream_type {
    pub const CONTROL: u64 = 0x00;
    pub const PUSH: u64 = 0x01;
    pub const QPACK_ENCODER: u64 = 0x02;
    pub const QPACK_DECODER: u64 = 0x03;
}

pub const DATA: u64 = 0x00;
pub const HEADERS: u64 = 0x01;
const CANCEL_PUSH: u64 = 0x03;
const SETTINGS: u64 = 0x04;
const PUSH_PROMISE: u64 = 0x05;
const GOAWAY: u64 = 0x07;
const MAX_PUSH_ID: u64 = 0x0d;

/// `SETTINGS_MAX_FIELD_SECTION_SIZE`.
const MAX_FIELD_SECTION_SIZE: u64 = 0x06;

/// The most of a control-stream frame this side reads whole: SETTINGS
/// (a few identifiers and values), GOAWAY and the push frames (one
/// integer). Larger is `H3_EXCESSIVE_LOAD`.
const CONTROL_FRAME_MAX: u64 = 4096;

/// HTTP/2's frame types that HTTP/3 reserves: an error wherever they come
/// (RFC 9114 7.2.8).
fn reserved_http2(kind: u64) -> bool {
    matches!(kind, 0x02 | 0x06 | 0x08 | 0x09)
}

/// The octets [`write_header`] writes.
pub fn header_len(kind: u64, len: u64) -> usize {
    varint::len(kind) + varint::len(len)
}

/// Appends a frame's type and length.
pub fn write_header(kind: u64, len: u64, dst: &mut Vec<u8>) {
    varint::encode(kind, dst);
    varint::encode(len, dst);
}

/// Appends what this side's control stream starts with: its type and a
/// SETTINGS frame announcing `max_field_section_size` (and, by leaving
/// them out, no dynamic QPACK table and no blocked streams).
pub fn write_control_preface(max_field_section_size: u64, dst: &mut Vec<u8>) {
    varint::encode(stream_type::CONTROL, dst);
    let value = max_field_section_size.min(varint::MAX);
    let len = varint::len(MAX_FIELD_SECTION_SIZE) + varint::len(value);
    write_header(SETTINGS, len as u64, dst);
    varint::encode(MAX_FIELD_SECTION_SIZE, dst);
    varint::encode(value, dst);
}

/// Appends a GOAWAY frame: requests on streams from `id` on will not be
/// answered.
pub fn write_goaway(id: u64, dst: &mut Vec<u8>) {
    write_header(GOAWAY, varint::len(id) as u64, dst);
    varint::encode(id, dst);
}

/// Where a scan of a stream's bytes stopped.
enum Scan {
    /// A frame to act on, whole: its type and the payload's range.
    Frame(u64, std::ops::Range<usize>),
    /// The next frame is not all there: `used` octets are done with, and
    /// `skip` more octets of an ignored frame's payload will follow.
    More { used: usize, skip: u64 },
}

/// Scans `data` past frames of unknown types (RFC 9114 9: ignored) to
/// the first frame `wanted` says to read whole; `Err` for one it says is
/// wrong here.
fn scan(data: &[u8], wanted: impl Fn(u64, u64) -> Result<bool, Code>) -> Result<Scan, Code> {
    let mut at = 0;
    loop {
        let mut pos = at;
        let (Some(kind), Some(len)) = (
            varint::decode(data, &mut pos),
            varint::decode(data, &mut pos),
        ) else {
            return Ok(Scan::More { used: at, skip: 0 });
        };
        let avail = (data.len() - pos) as u64;
        if wanted(kind, len)? {
            if len > avail {
                return Ok(Scan::More { used: at, skip: 0 });
            }
            return Ok(Scan::Frame(kind, pos..pos + len as usize));
        }
        if len > avail {
            return Ok(Scan::More {
                used: data.len(),
                skip: len - avail,
            });
        }
        at = pos + len as usize;
    }
}

/// A stream's bytes kept between reads: a frame not yet whole, and how
/// much of an ignored frame's payload is still to come.
#[derive(Debug, Default)]
struct Pending {
    buf: Vec<u8>,
    skip: u64,
}

impl Pending {
    /// Drops what an ignored frame still had of `bytes`; the rest.
    fn unskipped<'a>(&mut self, bytes: &'a [u8]) -> &'a [u8] {
        let n = self.skip.min(bytes.len() as u64);
        self.skip -= n;
        &bytes[n as usize..]
    }
}

/// Reads a request stream up to the end of its HEADERS frame.
#[derive(Debug, Default)]
pub struct HeadReader {
    pending: Pending,
}

/// What a request stream's bytes came to so far.
#[derive(Debug, PartialEq, Eq)]
pub enum Head<'a> {
    /// The head is not all there yet.
    More,
    /// The field section of the request's HEADERS.
    Section(&'a [u8]),
    /// The HEADERS frame is over the limit; it is not read.
    TooLarge,
}

impl HeadReader {
    /// Takes the stream's next bytes; `max`: the largest field section
    /// read. `Err`: a frame that may not come here, which is the
    /// connection's error (RFC 9114 7.2).
    pub fn receive<'a>(&'a mut self, bytes: &'a [u8], max: usize) -> Result<Head<'a>, Code> {
        let bytes = self.pending.unskipped(bytes);
        if self.pending.skip > 0 {
            return Ok(Head::More);
        }
        // A HEADERS over `max` is not read: known from its length.
        const TOO_LARGE: Code = Code::H3_EXCESSIVE_LOAD;
        let wanted = |kind, len| match kind {
            HEADERS if len > max as u64 => Err(TOO_LARGE),
            HEADERS => Ok(true),
            DATA | CANCEL_PUSH | SETTINGS | PUSH_PROMISE | GOAWAY | MAX_PUSH_ID => {
                Err(Code::H3_FRAME_UNEXPECTED)
            }
            k if reserved_http2(k) => Err(Code::H3_FRAME_UNEXPECTED),
            _ => Ok(false),
        };
        // Most heads come whole in one read: read from it, copy nothing;
        // otherwise from what is kept, with these bytes added.
        let kept = !self.pending.buf.is_empty();
        if kept {
            self.pending.buf.extend_from_slice(bytes);
        }
        match scan(if kept { &self.pending.buf } else { bytes }, wanted) {
            Ok(Scan::Frame(_, range)) if kept => Ok(Head::Section(&self.pending.buf[range])),
            Ok(Scan::Frame(_, range)) => Ok(Head::Section(&bytes[range])),
            Ok(Scan::More { used, skip }) => {
                if kept {
                    self.pending.buf.drain(..used);
                } else {
                    self.pending.buf.extend_from_slice(&bytes[used..]);
                }
                self.pending.skip = skip;
                Ok(Head::More)
            }
            Err(TOO_LARGE) => Ok(Head::TooLarge),
            Err(code) => Err(code),
        }
    }
}

/// Reads the client's control stream, after its type.
#[derive(Debug, Default)]
pub struct ControlReader {
    pending: Pending,
    settings_seen: bool,
}

impl ControlReader {
    /// Takes the stream's next bytes: the identifier of a GOAWAY among
    /// them, if one came (the last). `Err`: the connection's error (RFC
    /// 9114 6.2.1, 7.2): a first frame other than SETTINGS, a second
    /// SETTINGS, a frame that may not come on this stream, a malformed or
    /// oversized one.
    pub fn receive(&mut self, bytes: &[u8]) -> Result<Option<u64>, Code> {
        let bytes = self.pending.unskipped(bytes);
        if self.pending.skip > 0 {
            return Ok(None);
        }
        self.pending.buf.extend_from_slice(bytes);
        let mut goaway = None;
        let mut at = 0;
        loop {
            let settings_seen = self.settings_seen;
            let wanted = |kind, len| {
                if !settings_seen && kind != SETTINGS {
                    return Err(Code::H3_MISSING_SETTINGS);
                }
                match kind {
                    SETTINGS | GOAWAY | CANCEL_PUSH | MAX_PUSH_ID if len > CONTROL_FRAME_MAX => {
                        Err(Code::H3_EXCESSIVE_LOAD)
                    }
                    SETTINGS | GOAWAY | CANCEL_PUSH | MAX_PUSH_ID => Ok(true),
                    DATA | HEADERS | PUSH_PROMISE => Err(Code::H3_FRAME_UNEXPECTED),
                    k if reserved_http2(k) => Err(Code::H3_FRAME_UNEXPECTED),
                    _ => Ok(false),
                }
            };
            match scan(&self.pending.buf[at..], wanted)? {
                Scan::Frame(kind, range) => {
                    let payload = &self.pending.buf[at + range.start..at + range.end];
                    match kind {
                        SETTINGS if settings_seen => return Err(Code::H3_FRAME_UNEXPECTED),
                        SETTINGS => check_settings(payload)?,
                        _ => {
                            let mut pos = 0;
                            let id = varint::decode(payload, &mut pos)
                                .filter(|_| pos == payload.len())
                                .ok_or(Code::H3_FRAME_ERROR)?;
                            if kind == GOAWAY {
                                goaway = Some(id);
                            }
                        }
                    }
                    self.settings_seen = true;
                    at += range.end;
                }
                Scan::More { used, skip } => {
                    self.pending.buf.drain(..at + used);
                    self.pending.skip = skip;
                    return Ok(goaway);
                }
            }
        }
    }
}

/// A SETTINGS payload's pairs: whole, none twice, none of HTTP/2's
/// (RFC 9114 7.2.4.1).
fn check_settings(payload: &[u8]) -> Result<(), Code> {
    let mut pos = 0;
    let mut seen = Vec::new();
    while pos < payload.len() {
        let id = varint::decode(payload, &mut pos).ok_or(Code::H3_FRAME_ERROR)?;
        varint::decode(payload, &mut pos).ok_or(Code::H3_FRAME_ERROR)?;
        if matches!(id, 0x02..=0x05) || seen.contains(&id) {
            return Err(Code::H3_SETTINGS_ERROR);
        }
        seen.push(id);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u64, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        write_header(kind, payload.len() as u64, &mut v);
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn a_head_whole_in_one_read_or_in_pieces_past_unknown_frames() {
        let mut wire = frame(0x21, b"grease");
        wire.extend(frame(HEADERS, b"section"));
        wire.extend(frame(DATA, b"body"));
        let mut r = HeadReader::default();
        assert_eq!(r.receive(&wire, 100), Ok(Head::Section(b"section")));
        for split in 1..wire.len() {
            let mut r = HeadReader::default();
            let first = r.receive(&wire[..split], 100).unwrap();
            if split >= 8 + 2 + 7 {
                assert_eq!(first, Head::Section(b"section"), "{split}");
                continue;
            }
            assert_eq!(first, Head::More, "{split}");
            assert_eq!(
                r.receive(&wire[split..], 100),
                Ok(Head::Section(b"section"))
            );
        }
        let mut r = HeadReader::default();
        assert_eq!(r.receive(&wire, 6), Ok(Head::TooLarge));
    }

    #[test]
    fn frames_that_may_not_open_a_request_are_errors() {
        for kind in [DATA, SETTINGS, GOAWAY, PUSH_PROMISE, 0x02, 0x08] {
            let mut r = HeadReader::default();
            assert_eq!(
                r.receive(&frame(kind, b"x"), 100),
                Err(Code::H3_FRAME_UNEXPECTED),
                "{kind}"
            );
        }
    }

    #[test]
    fn the_control_stream_starts_with_settings_and_names_its_goaway() {
        let mut c = ControlReader::default();
        let mut wire = frame(SETTINGS, &[0x06, 0x40, 0x64, 0x21, 0x00]);
        wire.extend(frame(0x21, b"grease"));
        wire.extend(frame(GOAWAY, &[0x08]));
        let (a, b) = wire.split_at(5);
        assert_eq!(c.receive(a), Ok(None));
        assert_eq!(c.receive(b), Ok(Some(8)));
        assert_eq!(
            c.receive(&frame(SETTINGS, &[])),
            Err(Code::H3_FRAME_UNEXPECTED)
        );

        let missing = ControlReader::default().receive(&frame(GOAWAY, &[0]));
        assert_eq!(missing, Err(Code::H3_MISSING_SETTINGS));
        for bad in [&[0x02, 0x00][..], &[0x06, 0x01, 0x06, 0x02], &[0x06]] {
            let got = ControlReader::default().receive(&frame(SETTINGS, bad));
            assert!(got.is_err(), "{bad:?}");
        }
        let mut c = ControlReader::default();
        c.receive(&frame(SETTINGS, &[])).unwrap();
        assert_eq!(
            c.receive(&frame(HEADERS, b"x")),
            Err(Code::H3_FRAME_UNEXPECTED)
        );
    }

    #[test]
    fn the_preface_and_goaway_read_back() {
        let mut v = Vec::new();
        write_control_preface(16 << 10, &mut v);
        assert_eq!(v[0], stream_type::CONTROL as u8);
        let mut c = ControlReader::default();
        assert_eq!(c.receive(&v[1..]), Ok(None));
        let mut g = Vec::new();
        write_goaway(400, &mut g);
        assert_eq!(c.receive(&g), Ok(Some(400)));
    }
}

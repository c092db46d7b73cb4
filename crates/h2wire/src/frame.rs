//! Frames on the wire (RFC 9113 4, 6, 7): types, flags, settings and
//! error codes; the 9-octet header; a payload read into a typed [`Frame`]
//! (checked for what the frame alone says, nothing of the connection's
//! state); and the frames this side writes. No state: the connection
//! (`conn.rs`) decides what a frame does.

pub(crate) const DATA: u8 = 0x0;
pub(crate) const HEADERS: u8 = 0x1;
pub(crate) const PRIORITY: u8 = 0x2;
pub(crate) const RST_STREAM: u8 = 0x3;
pub(crate) const SETTINGS: u8 = 0x4;
pub(crate) const PUSH_PROMISE: u8 = 0x5;
pub(crate) const PING: u8 = 0x6;
pub(crate) const GOAWAY: u8 = 0x7;
pub(crate) const WINDOW_UPDATE: u8 = 0x8;
pub(crate) const CONTINUATION: u8 = 0x9;

pub(crate) const END_STREAM: u8 = 0x1;
pub(crate) const ACK: u8 = 0x1;
pub(crate) const END_HEADERS: u8 = 0x4;
pub(crate) const PADDED: u8 = 0x8;
pub(crate) const PRIORITY_FLAG: u8 = 0x20;

pub(crate) const SETTINGS_HEADER_TABLE_SIZE: u16 = 0x1;
pub(crate) const SETTINGS_ENABLE_PUSH: u16 = 0x2;
pub(crate) const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
pub(crate) const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
pub(crate) const SETTINGS_MAX_FRAME_SIZE: u16 = 0x5;
pub(crate) const SETTINGS_MAX_HEADER_LIST_SIZE: u16 = 0x6;

/// The frame size every endpoint accepts, and the one this side announces.
pub(crate) const DEFAULT_MAX_FRAME: u32 = 16_384;
pub(crate) const MAX_MAX_FRAME: u32 = (1 << 24) - 1;
pub(crate) const DEFAULT_WINDOW: u32 = 65_535;
pub(crate) const MAX_WINDOW: i64 = (1 << 31) - 1;

/// What a client sends first (RFC 9113 3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// An HTTP/2 error code (RFC 9113 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reason(pub u32);

impl Reason {
    pub const NO_ERROR: Reason = Reason(0x0);
    pub const PROTOCOL_ERROR: Reason = Reason(0x1);
    pub const INTERNAL_ERROR: Reason = Reason(0x2);
    pub const FLOW_CONTROL_ERROR: Reason = Reason(0x3);
    pub const STREAM_CLOSED: Reason = Reason(0x5);
    pub const FRAME_SIZE_ERROR: Reason = Reason(0x6);
    pub const REFUSED_STREAM: Reason = Reason(0x7);
    pub const CANCEL: Reason = Reason(0x8);
    pub const COMPRESSION_ERROR: Reason = Reason(0x9);
    pub const ENHANCE_YOUR_CALM: Reason = Reason(0xb);
}

/// A frame header as read: payload length, type, flags, stream.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Head {
    pub(crate) len: u32,
    pub(crate) kind: u8,
    pub(crate) flags: u8,
    pub(crate) stream: u32,
}

impl Head {
    pub(crate) fn parse(b: &[u8; 9]) -> Head {
        Head {
            len: u32::from_be_bytes([0, b[0], b[1], b[2]]),
            kind: b[3],
            flags: b[4],
            stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff,
        }
    }
}

/// A 31-bit big-endian value at the start of `p` (the reserved bit off).
pub(crate) fn be31(p: &[u8]) -> u32 {
    u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & 0x7fff_ffff
}

// ---- typed frames, as read ----

/// A frame a client sent, checked against what the frame alone says (its
/// stream is 0 or not, its length, its padding): what is left to check
/// needs the connection's state. PUSH_PROMISE is never one: a client may
/// not push.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Frame<'a> {
    Data(Data),
    Headers(Headers<'a>),
    Priority {
        stream: u32,
        /// The stream it depends on.
        depends_on: u32,
    },
    RstStream {
        stream: u32,
    },
    Settings(Settings<'a>),
    Ping {
        ack: bool,
        payload: &'a [u8],
    },
    GoAway,
    WindowUpdate {
        stream: u32,
        increment: u32,
    },
    /// Its stream is the open header block's: the connection checks
    /// that before it reads the frame.
    Continuation {
        end_headers: bool,
        fragment: &'a [u8],
    },
    /// A type this side does not know (RFC 9113 5.5).
    Unknown,
}

/// A DATA frame: its sizes, the payload itself is not kept.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Data {
    pub(crate) stream: u32,
    /// The whole payload, padding included: what flow control counts.
    pub(crate) len: u64,
    /// The body octets in it (padding aside).
    pub(crate) body: u64,
    pub(crate) end_stream: bool,
}

/// A HEADERS frame: its fragment of a header block, without padding or
/// priority.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Headers<'a> {
    pub(crate) stream: u32,
    pub(crate) end_stream: bool,
    pub(crate) end_headers: bool,
    /// The stream it depends on, if it carries a priority.
    pub(crate) depends_on: Option<u32>,
    pub(crate) fragment: &'a [u8],
}

/// A SETTINGS frame: an acknowledgement (empty), or parameters.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings<'a> {
    pub(crate) ack: bool,
    /// Six octets a parameter.
    params: &'a [u8],
}

/// One SETTINGS parameter this side acts on, its value checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Setting {
    HeaderTableSize(u32),
    InitialWindowSize(u32),
    MaxFrameSize(u32),
    /// A parameter checked and not acted on, or unknown (ignored, RFC
    /// 9113 6.5.2).
    Other,
}

impl<'a> Frame<'a> {
    /// The frame of header `h` and `payload`, or the error the frame alone
    /// makes (always a connection error).
    pub(crate) fn parse(h: Head, payload: &'a [u8]) -> Result<Frame<'a>, Reason> {
        match h.kind {
            DATA => Data::parse(h, payload).map(Frame::Data),
            HEADERS => Headers::parse(h, payload).map(Frame::Headers),
            CONTINUATION => Ok(Frame::Continuation {
                end_headers: h.flags & END_HEADERS != 0,
                fragment: payload,
            }),
            PRIORITY => {
                if h.stream == 0 {
                    return Err(Reason::PROTOCOL_ERROR);
                }
                if payload.len() != 5 {
                    return Err(Reason::FRAME_SIZE_ERROR);
                }
                Ok(Frame::Priority {
                    stream: h.stream,
                    depends_on: be31(payload),
                })
            }
            RST_STREAM => {
                if payload.len() != 4 {
                    return Err(Reason::FRAME_SIZE_ERROR);
                }
                if h.stream == 0 {
                    return Err(Reason::PROTOCOL_ERROR);
                }
                Ok(Frame::RstStream { stream: h.stream })
            }
            SETTINGS => Settings::parse(h, payload).map(Frame::Settings),
            PUSH_PROMISE => Err(Reason::PROTOCOL_ERROR),
            PING => {
                if h.stream != 0 {
                    return Err(Reason::PROTOCOL_ERROR);
                }
                if payload.len() != 8 {
                    return Err(Reason::FRAME_SIZE_ERROR);
                }
                Ok(Frame::Ping {
                    ack: h.flags & ACK != 0,
                    payload,
                })
            }
            GOAWAY => {
                if h.stream != 0 {
                    return Err(Reason::PROTOCOL_ERROR);
                }
                if payload.len() < 8 {
                    return Err(Reason::FRAME_SIZE_ERROR);
                }
                Ok(Frame::GoAway)
            }
            WINDOW_UPDATE => {
                if payload.len() != 4 {
                    return Err(Reason::FRAME_SIZE_ERROR);
                }
                Ok(Frame::WindowUpdate {
                    stream: h.stream,
                    increment: be31(payload),
                })
            }
            _ => Ok(Frame::Unknown),
        }
    }
}

impl Data {
    fn parse(h: Head, payload: &[u8]) -> Result<Data, Reason> {
        if h.stream == 0 {
            return Err(Reason::PROTOCOL_ERROR);
        }
        let len = payload.len() as u64;
        let mut body = len;
        if h.flags & PADDED != 0 {
            let pad = u64::from(*payload.first().ok_or(Reason::FRAME_SIZE_ERROR)?);
            if pad >= len {
                return Err(Reason::PROTOCOL_ERROR);
            }
            body = len - 1 - pad;
        }
        Ok(Data {
            stream: h.stream,
            len,
            body,
            end_stream: h.flags & END_STREAM != 0,
        })
    }
}

impl<'a> Headers<'a> {
    fn parse(h: Head, payload: &'a [u8]) -> Result<Headers<'a>, Reason> {
        if h.stream == 0 {
            return Err(Reason::PROTOCOL_ERROR);
        }
        let mut p = payload;
        let mut pad = 0;
        if h.flags & PADDED != 0 {
            let (&n, rest) = p.split_first().ok_or(Reason::FRAME_SIZE_ERROR)?;
            pad = n as usize;
            p = rest;
        }
        let mut depends_on = None;
        if h.flags & PRIORITY_FLAG != 0 {
            if p.len() < 5 {
                return Err(Reason::FRAME_SIZE_ERROR);
            }
            depends_on = Some(be31(p));
            p = &p[5..];
        }
        if pad > p.len() {
            return Err(Reason::PROTOCOL_ERROR);
        }
        Ok(Headers {
            stream: h.stream,
            end_stream: h.flags & END_STREAM != 0,
            end_headers: h.flags & END_HEADERS != 0,
            depends_on,
            fragment: &p[..p.len() - pad],
        })
    }
}

impl<'a> Settings<'a> {
    fn parse(h: Head, payload: &'a [u8]) -> Result<Settings<'a>, Reason> {
        if h.stream != 0 {
            return Err(Reason::PROTOCOL_ERROR);
        }
        let ack = h.flags & ACK != 0;
        if ack && !payload.is_empty() {
            return Err(Reason::FRAME_SIZE_ERROR);
        }
        if payload.len() % 6 != 0 {
            return Err(Reason::FRAME_SIZE_ERROR);
        }
        Ok(Settings {
            ack,
            params: payload,
        })
    }

    /// The parameters in the order they came, each checked when it is
    /// reached: a frame may repeat one, and the last value counts.
    pub(crate) fn params(&self) -> impl Iterator<Item = Result<Setting, Reason>> + 'a {
        self.params.chunks_exact(6).map(|s| {
            let id = u16::from_be_bytes([s[0], s[1]]);
            let value = u32::from_be_bytes([s[2], s[3], s[4], s[5]]);
            Setting::parse(id, value)
        })
    }
}

impl Setting {
    /// Parameter `id` set to `value`, or the connection error a value out
    /// of its range is (RFC 9113 6.5.2).
    fn parse(id: u16, value: u32) -> Result<Setting, Reason> {
        Ok(match id {
            SETTINGS_ENABLE_PUSH if value > 1 => return Err(Reason::PROTOCOL_ERROR),
            SETTINGS_INITIAL_WINDOW_SIZE => {
                if i64::from(value) > MAX_WINDOW {
                    return Err(Reason::FLOW_CONTROL_ERROR);
                }
                Setting::InitialWindowSize(value)
            }
            SETTINGS_MAX_FRAME_SIZE => {
                if !(DEFAULT_MAX_FRAME..=MAX_MAX_FRAME).contains(&value) {
                    return Err(Reason::PROTOCOL_ERROR);
                }
                Setting::MaxFrameSize(value)
            }
            SETTINGS_HEADER_TABLE_SIZE => Setting::HeaderTableSize(value),
            _ => Setting::Other,
        })
    }
}

// ---- frames written ----

/// A frame header.
fn head_bytes(len: usize, kind: u8, flags: u8, stream: u32) -> [u8; 9] {
    let l = (len as u32).to_be_bytes();
    let s = stream.to_be_bytes();
    [l[1], l[2], l[3], kind, flags, s[0], s[1], s[2], s[3]]
}

/// Appends a frame header.
fn head(dst: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    dst.extend_from_slice(&head_bytes(len, kind, flags, stream));
}

/// Appends a whole frame whose payload is `payload`.
fn frame(dst: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    head(dst, payload.len(), kind, flags, stream);
    dst.extend_from_slice(payload);
}

/// Appends SETTINGS with `params` (identifier, value).
pub(crate) fn settings(dst: &mut Vec<u8>, params: &[(u16, u32)]) {
    let mut payload = Vec::with_capacity(6 * params.len());
    for &(id, value) in params {
        payload.extend_from_slice(&id.to_be_bytes());
        payload.extend_from_slice(&value.to_be_bytes());
    }
    frame(dst, SETTINGS, 0, 0, &payload);
}

/// Appends the acknowledgement of the client's SETTINGS.
pub(crate) fn settings_ack(dst: &mut Vec<u8>) {
    frame(dst, SETTINGS, ACK, 0, &[]);
}

/// Appends the answer to a PING whose payload was `payload`.
pub(crate) fn ping_ack(dst: &mut Vec<u8>, payload: &[u8]) {
    frame(dst, PING, ACK, 0, payload);
}

/// Appends WINDOW_UPDATE of `stream` (0: the connection) by `increment`.
pub(crate) fn window_update(dst: &mut Vec<u8>, stream: u32, increment: u32) {
    frame(dst, WINDOW_UPDATE, 0, stream, &increment.to_be_bytes());
}

/// Appends RST_STREAM of `stream` with `reason`.
pub(crate) fn rst_stream(dst: &mut Vec<u8>, stream: u32, reason: Reason) {
    frame(dst, RST_STREAM, 0, stream, &reason.0.to_be_bytes());
}

/// Appends GOAWAY naming `last_stream` and `reason`.
pub(crate) fn goaway(dst: &mut Vec<u8>, last_stream: u32, reason: Reason) {
    let mut p = [0u8; 8];
    p[..4].copy_from_slice(&last_stream.to_be_bytes());
    p[4..].copy_from_slice(&reason.0.to_be_bytes());
    frame(dst, GOAWAY, 0, 0, &p);
}

/// Room for a frame header at the end of `dst`, to be written once the
/// payload after it is: its offset.
pub(crate) fn reserve_head(dst: &mut Vec<u8>) -> usize {
    let at = dst.len();
    dst.extend_from_slice(&[0; 9]);
    at
}

/// Ends the DATA frame whose header was reserved at `at`: its payload is
/// what follows. Returns the payload's length.
pub(crate) fn end_data(dst: &mut [u8], at: usize, stream: u32, end_stream: bool) -> usize {
    let len = dst.len() - at - 9;
    let flags = if end_stream { END_STREAM } else { 0 };
    dst[at..at + 9].copy_from_slice(&head_bytes(len, DATA, flags, stream));
    len
}

/// Ends the header block written after the frame header reserved at
/// `start`: one HEADERS frame if it fits in `max_frame`, else HEADERS and
/// CONTINUATIONs of at most `max_frame` each.
pub(crate) fn end_headers(
    dst: &mut Vec<u8>,
    start: usize,
    stream: u32,
    end_stream: bool,
    max_frame: usize,
) {
    let len = dst.len() - start - 9;
    let end = if end_stream { END_STREAM } else { 0 };
    if len <= max_frame {
        let h = head_bytes(len, HEADERS, END_HEADERS | end, stream);
        dst[start..start + 9].copy_from_slice(&h);
        return;
    }
    let block = dst.split_off(start + 9);
    dst.truncate(start);
    let mut chunks = block.chunks(max_frame).peekable();
    let mut kind = HEADERS;
    let mut flags = end;
    while let Some(chunk) = chunks.next() {
        if chunks.peek().is_none() {
            flags |= END_HEADERS;
        }
        frame(dst, kind, flags, stream, chunk);
        kind = CONTINUATION;
        flags = 0;
    }
}

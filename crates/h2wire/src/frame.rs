//! Frame types, flags, settings and error codes (RFC 9113 6, 7), and the
//! 9-octet frame header.

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

/// A frame header.
pub(crate) fn head_bytes(len: usize, kind: u8, flags: u8, stream: u32) -> [u8; 9] {
    let l = (len as u32).to_be_bytes();
    let s = stream.to_be_bytes();
    [l[1], l[2], l[3], kind, flags, s[0], s[1], s[2], s[3]]
}

/// Appends a frame header.
pub(crate) fn head(dst: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    dst.extend_from_slice(&head_bytes(len, kind, flags, stream));
}

/// Appends a whole frame whose payload is `payload`.
pub(crate) fn frame(dst: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    head(dst, payload.len(), kind, flags, stream);
    dst.extend_from_slice(payload);
}

//! Frames a test client writes, and the frames a connection wrote.
#![allow(dead_code)]

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

/// The tests' clock: one instant for the whole run, so a test that does
/// not care about timers never meets one.
pub(crate) fn t0() -> std::time::Instant {
    static T0: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    *T0.get_or_init(std::time::Instant::now)
}

pub(crate) fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let l = (payload.len() as u32).to_be_bytes();
    let mut f = vec![l[1], l[2], l[3], kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// The preface and an empty SETTINGS.
pub(crate) fn hello() -> Vec<u8> {
    let mut v = h2wire::PREFACE.to_vec();
    v.extend(frame(SETTINGS, 0, 0, &[]));
    v
}

/// A header block: GET `path` on https://a, then `extra` fields as
/// literals (not indexed, not Huffman-coded).
pub(crate) fn block(path: &str, extra: &[(&str, &str)]) -> Vec<u8> {
    let mut b = vec![0x82, 0x87, 0x01, 0x01, b'a', 0x04, path.len() as u8];
    b.extend_from_slice(path.as_bytes());
    for (n, v) in extra {
        b.push(0x00);
        b.push(n.len() as u8);
        b.extend_from_slice(n.as_bytes());
        b.push(v.len() as u8);
        b.extend_from_slice(v.as_bytes());
    }
    b
}

/// HEADERS with END_HEADERS (and END_STREAM when `end`).
pub(crate) fn get(stream: u32, path: &str, end: bool) -> Vec<u8> {
    frame(HEADERS, 0x4 | u8::from(end), stream, &block(path, &[]))
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Frame {
    pub(crate) kind: u8,
    pub(crate) flags: u8,
    pub(crate) stream: u32,
    pub(crate) payload: Vec<u8>,
}

impl Frame {
    /// RST_STREAM's or GOAWAY's code.
    pub(crate) fn code(&self) -> u32 {
        let at = if self.kind == GOAWAY { 4 } else { 0 };
        u32::from_be_bytes(self.payload[at..at + 4].try_into().unwrap())
    }
}

/// Takes every frame out of the connection's output.
pub(crate) fn frames(conn: &mut h2wire::Connection) -> Vec<Frame> {
    let out = std::mem::take(conn.output());
    let mut v = Vec::new();
    let mut p = &out[..];
    while p.len() >= 9 {
        let len = u32::from_be_bytes([0, p[0], p[1], p[2]]) as usize;
        v.push(Frame {
            kind: p[3],
            flags: p[4],
            stream: u32::from_be_bytes([p[5], p[6], p[7], p[8]]),
            payload: p[9..9 + len].to_vec(),
        });
        p = &p[9 + len..];
    }
    assert!(p.is_empty(), "a partial frame in the output");
    v
}

/// A connection past its handshake, its SETTINGS and ACK taken.
pub(crate) fn open(cfg: h2wire::Config) -> h2wire::Connection {
    let mut c = h2wire::Connection::new(cfg, t0());
    c.receive(&hello(), t0()).unwrap();
    frames(&mut c);
    c
}

/// The GOAWAY code the connection ended with.
pub(crate) fn goaway(conn: &mut h2wire::Connection) -> u32 {
    let f = frames(conn);
    let g = f.iter().find(|f| f.kind == GOAWAY).expect("a GOAWAY");
    g.code()
}

/// The RST_STREAM codes written, by stream.
pub(crate) fn resets(conn: &mut h2wire::Connection) -> Vec<(u32, u32)> {
    frames(conn)
        .iter()
        .filter(|f| f.kind == RST_STREAM)
        .map(|f| (f.stream, f.code()))
        .collect()
}

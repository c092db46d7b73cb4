//! `hpack::Decoder` on a connection's worth of header blocks, against a
//! model of the dynamic table, and `hpack::Encoder` -> `Decoder` round trips.
//!
//! Input: one octet choosing the decoder's limit, then records of a 2-octet
//! big-endian header: high bit set, `set_limit(low 15 bits)`; else a header
//! block of that many octets (fewer at the end of the input). Blocks share
//! one decoder, so the dynamic table carries over from block to block.
//!
//! Checked for every block the decoder accepts, by walking its
//! representations (RFC 7541 6) beside a model table kept by RFC 7541 4:
//! - each field is what its representation says: the static entry, the
//!   model's dynamic entry, a plain literal's octets, a Huffman literal no
//!   longer than 8/5 of its coded length; `never_indexed` as coded;
//! - size updates stay within the announced limit, and no entry larger
//!   than the table's size is ever indexed (the model drops it);
//! - the model accepts the block too (and a block the decoder refuses
//!   without Huffman strings in it is refused by the model as well).
//!
//! Round trip: every accepted block's fields are encoded again with an
//! `Encoder` (plain, repeating or never-indexed fields; the limit records
//! reach it as the peer's `SETTINGS_HEADER_TABLE_SIZE`) and decoded by a
//! second `Decoder` with the same limits: the same fields come back.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::collections::VecDeque;

/// RFC 7541 Appendix A, written out again here: an independent copy.
const STATIC: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

const LIMITS: [usize; 8] = [4096, 256, 100, 0, 65536, 16384, 64, 4096];

#[derive(Clone, Debug, PartialEq, Eq)]
struct Owned {
    name: Vec<u8>,
    value: Vec<u8>,
    never_indexed: bool,
}

/// The decoder's table and limits as RFC 7541 4 has them.
struct Model {
    entries: VecDeque<(Vec<u8>, Vec<u8>)>,
    size: usize,
    max_size: usize,
    limit: usize,
    update_due: bool,
}

impl Model {
    fn new(limit: usize) -> Model {
        Model {
            entries: VecDeque::new(),
            size: 0,
            max_size: limit,
            limit,
            update_due: false,
        }
    }

    /// RFC 7541 4.2: an update is owed when the limit falls below the
    /// size in force (the peer's last update), not on any lowering.
    fn set_limit(&mut self, limit: usize) {
        self.update_due = limit < self.max_size;
        self.limit = limit;
    }

    fn evict_to(&mut self, bound: usize) {
        while self.size > bound {
            let (n, v) = self.entries.pop_back().expect("size counts entries");
            self.size -= n.len() + v.len() + 32;
        }
    }

    fn insert(&mut self, name: &[u8], value: &[u8]) {
        let size = name.len() + value.len() + 32;
        self.evict_to(self.max_size.saturating_sub(size));
        if size <= self.max_size {
            self.entries.push_front((name.to_vec(), value.to_vec()));
            self.size += size;
        }
        assert!(self.size <= self.max_size);
    }

    fn entry(&self, index: usize) -> Option<(Vec<u8>, Vec<u8>)> {
        match index {
            0 => None,
            1..=61 => Some((STATIC[index - 1].0.to_vec(), STATIC[index - 1].1.to_vec())),
            _ => self.entries.get(index - 62).cloned(),
        }
    }
}

/// RFC 7541 5.1, with the decoder's bound (a value of 2^32 or more, or
/// more than 5 continuation octets, is refused).
fn integer(b: &[u8], pos: &mut usize, n: u32) -> Option<usize> {
    let max_prefix = (1u64 << n) - 1;
    let mut value = u64::from(*b.get(*pos)?) & max_prefix;
    *pos += 1;
    if value < max_prefix {
        return Some(value as usize);
    }
    for shift in (0..=28).step_by(7) {
        let c = *b.get(*pos)?;
        *pos += 1;
        value += u64::from(c & 0x7f) << shift;
        if value > u64::from(u32::MAX) {
            return None;
        }
        if c & 0x80 == 0 {
            return Some(value as usize);
        }
    }
    None
}

/// A string literal: its raw octets and whether they are Huffman-coded.
fn string<'a>(b: &'a [u8], pos: &mut usize) -> Option<(&'a [u8], bool)> {
    let huffman = *b.get(*pos)? & 0x80 != 0;
    let len = integer(b, pos, 7)?;
    let raw = b.get(*pos..pos.checked_add(len)?)?;
    *pos += len;
    Some((raw, huffman))
}

/// Compares the decoder's field number `*next` (when it accepted the
/// block) with what the representation says, and moves on.
fn expect(fields: Option<&[Owned]>, next: &mut usize, want: Owned) {
    if let Some(fields) = fields {
        let got = fields
            .get(*next)
            .unwrap_or_else(|| panic!("decoder gave {} fields, the block has more", fields.len()));
        assert_eq!(got, &want, "field {next}");
    }
    *next += 1;
}

/// Walks `block` beside the fields the decoder gave for it (`None`: the
/// decoder refused it). Returns whether the model accepts the block and
/// whether it held a Huffman string; panics where the two disagree.
fn walk(model: &mut Model, block: &[u8], fields: Option<&[Owned]>) -> (bool, bool) {
    let mut pos = 0;
    let mut seen_field = false;
    let mut next = 0;
    let mut huffman_seen = false;
    while let Some(&first) = block.get(pos) {
        if first & 0xe0 == 0x20 {
            if seen_field {
                return (false, huffman_seen);
            }
            let Some(size) = integer(block, &mut pos, 5) else {
                return (false, huffman_seen);
            };
            if size > model.limit {
                return (false, huffman_seen);
            }
            model.max_size = size;
            model.evict_to(size);
            model.update_due = false;
            continue;
        }
        if model.update_due {
            return (false, huffman_seen);
        }
        seen_field = true;
        if first & 0x80 != 0 {
            let Some(index) = integer(block, &mut pos, 7) else {
                return (false, huffman_seen);
            };
            let Some((name, value)) = model.entry(index) else {
                return (false, huffman_seen);
            };
            // What a peer can make the decoder hand out from its table
            // fits the table's size.
            assert!(index <= 61 || name.len() + value.len() + 32 <= model.max_size);
            let want = Owned {
                name,
                value,
                never_indexed: false,
            };
            expect(fields, &mut next, want);
            continue;
        }
        let (indexing, never_indexed, prefix) = match first & 0xf0 {
            0x40..=0x70 => (true, false, 6),
            0x10 => (false, true, 4),
            _ => (false, false, 4),
        };
        let Some(index) = integer(block, &mut pos, prefix) else {
            return (false, huffman_seen);
        };
        let name = if index == 0 {
            let Some((raw, huffman)) = string(block, &mut pos) else {
                return (false, huffman_seen);
            };
            huffman_seen |= huffman;
            Literal::of(raw, huffman)
        } else {
            let Some((name, _)) = model.entry(index) else {
                return (false, huffman_seen);
            };
            Literal::Plain(name)
        };
        let Some((raw, huffman)) = string(block, &mut pos) else {
            return (false, huffman_seen);
        };
        huffman_seen |= huffman;
        let value = Literal::of(raw, huffman);
        // A Huffman string's octets are the decoder's (checked for their
        // length here, and by the round trip).
        let got = fields.and_then(|f| f.get(next));
        let name = name.resolve(got.map(|g| &g.name[..]));
        let value = value.resolve(got.map(|g| &g.value[..]));
        if indexing {
            model.insert(&name, &value);
        }
        let want = Owned {
            name,
            value,
            never_indexed,
        };
        expect(fields, &mut next, want);
    }
    if model.update_due {
        return (false, huffman_seen);
    }
    if let Some(fields) = fields {
        assert_eq!(
            fields.len(),
            next,
            "decoder gave more fields than the block has"
        );
        assert!(model.size <= model.max_size && model.max_size <= model.limit);
    }
    (true, huffman_seen)
}

enum Literal {
    Plain(Vec<u8>),
    /// Huffman-coded: the coded length.
    Huffman(usize),
}

impl Literal {
    fn of(raw: &[u8], huffman: bool) -> Literal {
        if huffman {
            Literal::Huffman(raw.len())
        } else {
            Literal::Plain(raw.to_vec())
        }
    }

    fn resolve(self, got: Option<&[u8]>) -> Vec<u8> {
        match self {
            Literal::Plain(v) => v,
            Literal::Huffman(coded) => {
                let got = got.map(<[u8]>::to_vec).unwrap_or_default();
                // The shortest code is 5 bits.
                assert!(
                    got.len() * 5 <= coded * 8,
                    "{} octets from {coded} coded",
                    got.len()
                );
                got
            }
        }
    }
}

fn decode(d: &mut hpack::Decoder, block: &[u8]) -> Result<Vec<Owned>, hpack::DecodeError> {
    let mut fields = Vec::new();
    d.decode(block, |f| {
        fields.push(Owned {
            name: f.name.to_vec(),
            value: f.value.to_vec(),
            never_indexed: f.never_indexed,
        })
    })?;
    Ok(fields)
}

/// The round trip's two ends, kept in step across blocks.
struct RoundTrip {
    enc: hpack::Encoder,
    dec: hpack::Decoder,
}

impl RoundTrip {
    fn check(&mut self, fields: &[Owned], status: Option<u16>) {
        let mut block = Vec::new();
        {
            let mut b = self.enc.block(&mut block);
            if let Some(code) = status {
                b.status(code);
            }
            for (i, f) in fields.iter().enumerate() {
                if f.never_indexed {
                    b.never_indexed(&f.name, &f.value);
                } else if (i + f.name.len() + f.value.len()) % 3 == 0 {
                    b.field(&f.name, &f.value);
                } else {
                    b.indexed(&f.name, &f.value);
                }
            }
        }
        let back = decode(&mut self.dec, &block)
            .unwrap_or_else(|e| panic!("an encoded block does not decode: {e:?}"));
        let mut want = Vec::new();
        if let Some(code) = status {
            want.push(Owned {
                name: b":status".to_vec(),
                value: format!("{:03}", code % 1000).into_bytes(),
                never_indexed: false,
            });
        }
        want.extend(fields.iter().cloned());
        assert_eq!(back.len(), want.len(), "round trip: field count");
        for (i, (b, w)) in back.iter().zip(&want).enumerate() {
            assert_eq!(b.name, w.name, "round trip field {i}: name");
            assert_eq!(b.value, w.value, "round trip field {i}: value");
            if w.never_indexed {
                assert!(b.never_indexed, "round trip field {i}: never_indexed");
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, mut rest)) = data.split_first() else {
        return;
    };
    let limit = LIMITS[usize::from(first & 7)];
    let mut dec = hpack::Decoder::new(limit);
    let mut model = Model::new(limit);
    let mut rt = RoundTrip {
        enc: hpack::Encoder::new(),
        dec: hpack::Decoder::new(4096),
    };
    let mut blocks = 0u16;
    while rest.len() >= 2 {
        let h = u16::from_be_bytes([rest[0], rest[1]]);
        rest = &rest[2..];
        if h & 0x8000 != 0 {
            let limit = usize::from(h & 0x7fff);
            dec.set_limit(limit);
            model.set_limit(limit);
            rt.enc.set_peer_limit(limit);
            // The encoder keeps at most 4096 octets, so a lower limit
            // above that changes nothing it announces, and the decoder
            // asks for nothing (hpack-1 in fuzz/regressions/README.md).
            rt.dec.set_limit(limit);
            continue;
        }
        let n = usize::from(h).min(rest.len());
        let (block, tail) = rest.split_at(n);
        rest = tail;
        blocks = blocks.wrapping_add(1);
        match decode(&mut dec, block) {
            Ok(fields) => {
                let (ok, _) = walk(&mut model, block, Some(&fields));
                assert!(ok, "the decoder accepted a block the model refuses");
                let status = (first & 8 != 0).then_some(100 + blocks % 900);
                rt.check(&fields, status);
            }
            Err(e) => {
                let (ok, huffman) = walk(&mut model, block, None);
                assert!(
                    !ok || huffman,
                    "the decoder refused ({e:?}) a block the model accepts"
                );
                // The table is out of step now (a COMPRESSION_ERROR ends
                // an HTTP/2 connection): start again, as a new one would.
                dec = hpack::Decoder::new(limit);
                model = Model::new(limit);
            }
        }
    }
});

//! The encoder, for a server's response heads.
//!
//! Each field is an index into the static table (`:status` 200, 304, ...),
//! or into the dynamic table for a field the caller marks as repeating
//! ([`Block::indexed`]: `server`, `date`, a type, a policy), or a literal,
//! its name indexed where the static table has it, each string
//! Huffman-coded where that is shorter. A repeating field costs its
//! encoding once and one octet in every later block; only the newest
//! [`SCAN`] entries are searched, so the lookup stays a few comparisons
//! (an older entry is added again, and the table evicts by size as the
//! peer's does). Responses repeat their fields in one order, so each
//! position among a block's repeating fields remembers the entry it
//! matched last, and that one comparison usually finds it.
//!
//! ```text
//! table (mirrors the peer's decoder): [newest ... oldest]   index 62 + i
//!   indexed(name, value): in the newest SCAN? -> one octet
//!                         else literal with incremental indexing, added
//! the peer's SETTINGS_HEADER_TABLE_SIZE below the size in use -> evict,
//!   and a size update opens the next block (RFC 7541 4.2)
//! ```

use std::collections::VecDeque;

use crate::table::ENTRY_OVERHEAD;
use crate::{huffman, integer};

/// Entries searched for a repeating field, newest first.
pub(crate) const SCAN: usize = 16;
/// Positions among a block's repeating fields that remember their entry.
const HINTS: usize = 16;
/// The largest table this side keeps, whatever the peer allows: HTTP/2's
/// initial size, which needs no size update.
const OWN_MAX: usize = 4096;

/// The encoder of one connection's response heads, with its dynamic table.
#[derive(Debug)]
pub struct Encoder {
    /// Name then value in one allocation, the name's length beside it;
    /// newest first, as the peer's decoder holds them.
    table: VecDeque<(Box<[u8]>, usize)>,
    size: usize,
    max_size: usize,
    /// Size updates to open the next block with: the smallest since the
    /// last block, then the last (RFC 7541 4.2).
    update: Option<(usize, usize)>,
    /// Entries ever added. The newest has serial `added - 1`, and the
    /// entry with serial `s` is at index `added - 1 - s` while it lasts.
    added: u64,
    /// Per position among a block's repeating fields, the serial of the
    /// entry it matched or added last (`u64::MAX`: none).
    hints: [u64; HINTS],
}

/// One header block being written: [`Encoder::block`].
#[derive(Debug)]
pub struct Block<'a> {
    enc: &'a mut Encoder,
    dst: &'a mut Vec<u8>,
    /// Repeating fields written so far.
    repeating: usize,
}

impl Default for Encoder {
    fn default() -> Encoder {
        Encoder {
            table: VecDeque::new(),
            size: 0,
            max_size: OWN_MAX,
            update: None,
            added: 0,
            hints: [u64::MAX; HINTS],
        }
    }
}

impl Encoder {
    pub fn new() -> Encoder {
        Encoder::default()
    }

    /// The peer's `SETTINGS_HEADER_TABLE_SIZE` (what its decoder allows):
    /// the table is kept within it, and a change of the size in use is
    /// announced at the start of the next block.
    pub fn set_peer_limit(&mut self, limit: usize) {
        let max = limit.min(OWN_MAX);
        if max == self.max_size {
            return;
        }
        self.max_size = max;
        self.evict_to(max);
        let smallest = self.update.map_or(max, |(s, _)| s.min(max));
        self.update = Some((smallest, max));
    }

    /// Starts a header block at the end of `dst`. Blocks must reach the
    /// peer in the order they are started.
    pub fn block<'a>(&'a mut self, dst: &'a mut Vec<u8>) -> Block<'a> {
        if let Some((smallest, last)) = self.update.take() {
            integer::encode(smallest, 5, 0x20, dst);
            if last != smallest {
                integer::encode(last, 5, 0x20, dst);
            }
        }
        Block {
            enc: self,
            dst,
            repeating: 0,
        }
    }

    /// The dynamic index of `name: value` among the newest [`SCAN`]: the
    /// entry `position` names in [`Encoder::hints`] if it is the one, else
    /// the first found in order.
    fn find(&mut self, name: &[u8], value: &[u8], position: usize) -> Option<usize> {
        let is = |(e, n): &(Box<[u8]>, usize)| {
            *n == name.len() && e.len() == n + value.len() && e[..*n] == *name && e[*n..] == *value
        };
        let newest = self.added.wrapping_sub(1);
        if let Some(&serial) = self.hints.get(position) {
            let hinted = newest.wrapping_sub(serial);
            if hinted < self.table.len().min(SCAN) as u64 && is(&self.table[hinted as usize]) {
                return Some(hinted as usize);
            }
        }
        let i = self.table.iter().take(SCAN).position(is)?;
        if let Some(hint) = self.hints.get_mut(position) {
            *hint = newest - i as u64;
        }
        Some(i)
    }

    /// Adds an entry as the peer's decoder will (RFC 7541 4.4), and
    /// remembers it for `position`.
    fn insert(&mut self, name: &[u8], value: &[u8], position: usize) {
        let size = name.len() + value.len() + ENTRY_OVERHEAD;
        self.evict_to(self.max_size.saturating_sub(size));
        if size <= self.max_size {
            let mut e = Vec::with_capacity(name.len() + value.len());
            e.extend_from_slice(name);
            e.extend_from_slice(value);
            self.table.push_front((e.into_boxed_slice(), name.len()));
            self.size += size;
            if let Some(hint) = self.hints.get_mut(position) {
                *hint = self.added;
            }
            self.added += 1;
        }
    }

    fn evict_to(&mut self, bound: usize) {
        while self.size > bound {
            let Some((e, _)) = self.table.pop_back() else {
                break;
            };
            self.size -= e.len() + ENTRY_OVERHEAD;
        }
    }
}

impl Block<'_> {
    /// `:status`, which goes first.
    pub fn status(&mut self, code: u16) -> &mut Self {
        let index = match code {
            200 => 8,
            204 => 9,
            206 => 10,
            304 => 11,
            400 => 12,
            404 => 13,
            500 => 14,
            _ => {
                let digits = [
                    b'0' + (code / 100 % 10) as u8,
                    b'0' + (code / 10 % 10) as u8,
                    b'0' + (code % 10) as u8,
                ];
                integer::encode(8, 4, 0x00, self.dst);
                string(&digits, self.dst);
                return self;
            }
        };
        integer::encode(index, 7, 0x80, self.dst);
        self
    }

    /// A field; `name` must be lowercase (RFC 9113 8.2.1).
    pub fn field(&mut self, name: &[u8], value: &[u8]) -> &mut Self {
        self.literal(name, value, 0x00)
    }

    /// A field that repeats across responses (the same name and value):
    /// one octet once it is in the dynamic table, else a literal that
    /// adds it. Not for a secret (a compression oracle could guess it).
    pub fn indexed(&mut self, name: &[u8], value: &[u8]) -> &mut Self {
        let position = self.repeating;
        self.repeating += 1;
        if let Some(i) = self.enc.find(name, value, position) {
            integer::encode(62 + i, 7, 0x80, self.dst);
            return self;
        }
        match static_name(name) {
            Some(index) => integer::encode(index, 6, 0x40, self.dst),
            None => {
                self.dst.push(0x40);
                string(name, self.dst);
            }
        }
        string(value, self.dst);
        self.enc.insert(name, value, position);
        self
    }

    /// A field that no intermediary may put in a table (RFC 7541 6.2.3):
    /// a secret a compression oracle could otherwise guess.
    pub fn never_indexed(&mut self, name: &[u8], value: &[u8]) -> &mut Self {
        self.literal(name, value, 0x10)
    }

    fn literal(&mut self, name: &[u8], value: &[u8], flags: u8) -> &mut Self {
        match static_name(name) {
            Some(index) => integer::encode(index, 4, flags, self.dst),
            None => {
                self.dst.push(flags);
                string(name, self.dst);
            }
        }
        string(value, self.dst);
        self
    }
}

/// A string literal, Huffman-coded where that is shorter.
fn string(s: &[u8], dst: &mut Vec<u8>) {
    let coded = huffman::encoded_len(s);
    if coded < s.len() {
        integer::encode(coded, 7, 0x80, dst);
        huffman::encode(s, coded, dst);
    } else {
        integer::encode(s.len(), 7, 0x00, dst);
        dst.extend_from_slice(s);
    }
}

/// The static table's index of a response field's name (one match, no
/// hashing); request-only names are left out.
fn static_name(name: &[u8]) -> Option<usize> {
    Some(match name {
        b"accept-ranges" => 18,
        b"access-control-allow-origin" => 20,
        b"age" => 21,
        b"allow" => 22,
        b"cache-control" => 24,
        b"content-disposition" => 25,
        b"content-encoding" => 26,
        b"content-language" => 27,
        b"content-length" => 28,
        b"content-location" => 29,
        b"content-range" => 30,
        b"content-type" => 31,
        b"date" => 33,
        b"etag" => 34,
        b"expires" => 36,
        b"last-modified" => 44,
        b"link" => 45,
        b"location" => 46,
        b"proxy-authenticate" => 48,
        b"retry-after" => 53,
        b"server" => 54,
        b"set-cookie" => 55,
        b"strict-transport-security" => 56,
        b"vary" => 59,
        b"via" => 60,
        b"www-authenticate" => 61,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::STATIC;

    #[test]
    fn static_names_are_the_tables() {
        let mut found = 0;
        for (i, (name, _)) in STATIC.iter().enumerate() {
            if let Some(index) = static_name(name) {
                assert_eq!(index, i + 1, "{}", String::from_utf8_lossy(name));
                found += 1;
            }
        }
        assert_eq!(found, 26);
        for (index, code) in [
            (8, 200),
            (9, 204),
            (10, 206),
            (11, 304),
            (12, 400),
            (13, 404),
            (14, 500),
        ] {
            let mut out = Vec::new();
            Encoder::new().block(&mut out).status(code);
            assert_eq!(out, [0x80 | index as u8]);
            assert_eq!(STATIC[index - 1].1, code.to_string().as_bytes());
        }
    }

    #[test]
    fn a_repeating_field_is_one_octet_after_its_first_block() {
        let mut e = Encoder::new();
        let mut out = Vec::new();
        e.block(&mut out).indexed(b"server", b"fileserver");
        assert_eq!(out[0], 0x40 | 54, "literal with indexing, static name");
        out.clear();
        e.block(&mut out).indexed(b"server", b"fileserver");
        assert_eq!(out, [0x80 | 62]);
    }

    /// The hint per position is only a shortcut: a field that moved, a
    /// changed value and an entry gone from the table all still index
    /// the entry the table holds (newest is 62).
    #[test]
    fn repeating_fields_index_their_entry_in_any_order() {
        let mut e = Encoder::new();
        let mut out = Vec::new();
        let fields: [(&[u8], &[u8]); 3] = [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")];
        let mut b = e.block(&mut out);
        for (n, v) in fields {
            b.indexed(n, v);
        }
        // In the table, newest first: c 62, b 63, a 64.
        fn block(e: &mut Encoder, order: &[(&[u8], &[u8])]) -> Vec<u8> {
            let mut out = Vec::new();
            let mut b = e.block(&mut out);
            for (n, v) in order {
                b.indexed(n, v);
            }
            out
        }
        assert_eq!(block(&mut e, &fields), [0x80 | 64, 0x80 | 63, 0x80 | 62]);
        assert_eq!(
            block(&mut e, &[fields[2], fields[0]]),
            [0x80 | 62, 0x80 | 64]
        );
        // A new value at position 1 is added (now 62, the rest move up) ...
        let added = block(&mut e, &[fields[0], (b"b", b"9"), fields[2]]);
        assert_eq!(added[0], 0x80 | 64);
        assert_eq!(added[added.len() - 1], 0x80 | 63);
        // ... and the old one, still in the table, is found again.
        assert_eq!(block(&mut e, &fields), [0x80 | 65, 0x80 | 64, 0x80 | 63]);
        // With the table emptied, every hint is stale: literals again.
        e.set_peer_limit(0);
        e.set_peer_limit(4096);
        let fresh = block(&mut e, &fields);
        let mut want = vec![0x20, 0x3f, 0xe1, 0x1f]; // size updates: 0, 4096
        for (n, v) in fields {
            want.extend([0x40, 1, n[0], 1, v[0]]);
        }
        assert_eq!(fresh, want);
    }

    #[test]
    fn a_lower_peer_limit_is_announced_smallest_first() {
        let mut e = Encoder::new();
        e.set_peer_limit(100);
        e.set_peer_limit(0);
        e.set_peer_limit(200);
        let mut out = Vec::new();
        e.block(&mut out).status(200);
        assert_eq!(out, [0x20, 0x3f, 0xa9, 0x01, 0x88]);
        out.clear();
        e.block(&mut out).status(200);
        assert_eq!(out, [0x88]);
        // Above what this side keeps: nothing changes.
        e.set_peer_limit(65536);
        e.set_peer_limit(4096);
        out.clear();
        e.block(&mut out).status(200);
        assert_eq!(out, [0x20 | 31, 0xe1, 0x1f, 0x88]);
    }
}

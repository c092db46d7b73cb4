//! The encoder, for a server's response heads: no dynamic table.
//!
//! The first block announces a dynamic table of size 0 (RFC 7541 6.3), so
//! the peer keeps no state for this side and a later change of its
//! `SETTINGS_HEADER_TABLE_SIZE` needs nothing from the encoder. Each field
//! is then an index into the static table (`:status` 200, 304, ...) or a
//! literal not indexed, its name indexed where the static table has it,
//! each string Huffman-coded where that is shorter. What it gives up is
//! the few dozen octets a table would save on repeated fields of later
//! responses; what it saves is the table's search and upkeep per field,
//! which is most of an HPACK encoder's time.

use crate::{huffman, integer};

/// The encoder of one connection's response heads.
#[derive(Debug, Default)]
pub struct Encoder {
    /// The size-0 table was announced.
    announced: bool,
}

/// One header block being written: [`Encoder::block`].
#[derive(Debug)]
pub struct Block<'a> {
    dst: &'a mut Vec<u8>,
}

impl Encoder {
    pub fn new() -> Encoder {
        Encoder::default()
    }

    /// Starts a header block at the end of `dst`. Blocks must reach the
    /// peer in the order they are started.
    pub fn block<'a>(&mut self, dst: &'a mut Vec<u8>) -> Block<'a> {
        if !self.announced {
            integer::encode(0, 5, 0x20, dst);
            self.announced = true;
        }
        Block { dst }
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
        huffman::encode(s, dst);
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
            Encoder { announced: true }.block(&mut out).status(code);
            assert_eq!(out, [0x80 | index as u8]);
            assert_eq!(STATIC[index - 1].1, code.to_string().as_bytes());
        }
    }

    #[test]
    fn only_the_first_block_announces_the_table() {
        let mut e = Encoder::new();
        let mut out = Vec::new();
        e.block(&mut out).status(200);
        assert_eq!(out, [0x20, 0x88]);
        out.clear();
        e.block(&mut out).status(200);
        assert_eq!(out, [0x88]);
    }
}

//! The static Huffman code of RFC 7541 Appendix B.
//!
//! The code is canonical (within one length, codes count up in symbol
//! order; each length starts where the shorter ones ended, shifted), so
//! only the 257 code lengths are written here and everything else is
//! derived from them when the crate compiles: the codes for the encoder,
//! and for the decoder the symbols in code order with, per length, the
//! first code and the bound below which a left-aligned 30-bit window
//! holds a code of at most that length.
//!
//! ```text
//! window (30 bits, left-aligned)
//!   SHORT[window >> 22] != 0 ──> (len, symbol) of a code of at most 8 bits
//!   else smallest len > 8 with window < LIMIT[len]
//!     symbol = SORTED[OFFSET[len] + (window >> (30 - len)) - FIRST[len]]
//! ```
//!
//! Request strings are mostly letters, digits and `/.-_`, codes of 5 to 8
//! bits, so most symbols take the one lookup; the length search is left
//! to the rare longer codes.

use crate::DecodeError;

/// Code length in bits of each symbol: the octets 0-255, then EOS (256).
const LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, //
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28, //
    6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, //
    5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, //
    13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, //
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, //
    15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, //
    6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, //
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, //
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, //
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, //
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23, //
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, //
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, //
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, //
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, //
    30,
];

const EOS: u16 = 256;
/// The longest code (EOS's).
const MAX_LEN: usize = 30;
/// The shortest code.
const MIN_LEN: usize = 5;
const WINDOW_MASK: u64 = (1 << MAX_LEN) - 1;

/// The tables derived from [`LENGTHS`].
struct Code {
    /// Each symbol's code, right-aligned.
    codes: [u32; 257],
    /// Symbols in code order.
    sorted: [u16; 257],
    /// Per length: the first code of that length, right-aligned.
    first: [u32; MAX_LEN + 1],
    /// Per length: where its symbols start in `sorted`.
    offset: [u16; MAX_LEN + 1],
    /// Per length: one past the last code of at most that length, as a
    /// left-aligned 30-bit window.
    limit: [u32; MAX_LEN + 1],
    /// Per 8-bit window prefix: `len << 8 | symbol` of the code of at most
    /// [`SHORT_LEN`] bits it starts with, else 0 (a longer code).
    short: [u16; 1 << SHORT_LEN],
}

/// Codes this long or shorter (most of a path's and a name's letters and
/// digits) are decoded by one lookup of the window's first octet, not by
/// the search over lengths.
const SHORT_LEN: usize = 8;

const fn derive() -> Code {
    let mut c = Code {
        codes: [0; 257],
        sorted: [0; 257],
        first: [0; MAX_LEN + 1],
        offset: [0; MAX_LEN + 1],
        limit: [0; MAX_LEN + 1],
        short: [0; 1 << SHORT_LEN],
    };
    let mut code: u32 = 0;
    let mut next: u16 = 0;
    let mut len = 1;
    while len <= MAX_LEN {
        c.first[len] = code;
        c.offset[len] = next;
        let mut sym = 0;
        while sym < 257 {
            if LENGTHS[sym] as usize == len {
                c.codes[sym] = code;
                c.sorted[next as usize] = sym as u16;
                next += 1;
                code += 1;
            }
            sym += 1;
        }
        c.limit[len] = code << (MAX_LEN - len);
        code <<= 1;
        len += 1;
    }
    let mut sym = 0;
    while sym < 256 {
        let len = LENGTHS[sym] as usize;
        if len <= SHORT_LEN {
            let first = (c.codes[sym] as usize) << (SHORT_LEN - len);
            let mut prefix = first;
            while prefix < first + (1 << (SHORT_LEN - len)) {
                c.short[prefix] = ((len as u16) << 8) | sym as u16;
                prefix += 1;
            }
        }
        sym += 1;
    }
    c
}

static CODE: Code = derive();

/// The length of `src` Huffman-encoded, in octets.
pub(crate) fn encoded_len(src: &[u8]) -> usize {
    let bits: usize = src.iter().map(|&b| LENGTHS[b as usize] as usize).sum();
    bits.div_ceil(8)
}

/// Appends `src` Huffman-encoded, padded with the EOS code's leading ones;
/// `len` is its [`encoded_len`], which the caller has already asked for.
///
/// The codes gather in a 64-bit accumulator that is emptied four octets at
/// a time into the space reserved for the whole string: less than 32 bits
/// wait, and a code is at most 30, so it never overflows. (Pushing each
/// octet, with its capacity check, made this the heaviest function of an
/// HTTP/2 response's head.)
pub(crate) fn encode(src: &[u8], len: usize, dst: &mut Vec<u8>) {
    let start = dst.len();
    dst.resize(start + len, 0);
    let out = &mut dst[start..];
    let mut acc: u64 = 0;
    let mut bits = 0u32;
    let mut at = 0;
    for &b in src {
        let n = u32::from(LENGTHS[b as usize]);
        acc = (acc << n) | u64::from(CODE.codes[b as usize]);
        bits += n;
        if bits >= 32 {
            bits -= 32;
            out[at..at + 4].copy_from_slice(&((acc >> bits) as u32).to_be_bytes());
            at += 4;
        }
    }
    while bits >= 8 {
        bits -= 8;
        out[at] = (acc >> bits) as u8;
        at += 1;
    }
    if bits > 0 {
        out[at] = ((acc << (8 - bits)) as u8) | (0xff >> bits);
        at += 1;
    }
    debug_assert_eq!(at, len, "len is encoded_len(src)");
}

/// Appends the Huffman-coded `src`, decoded. An EOS symbol, padding
/// longer than 7 bits or padding that is not the EOS code's leading ones
/// is an error (RFC 7541 5.2).
pub(crate) fn decode(src: &[u8], dst: &mut Vec<u8>) -> Result<(), DecodeError> {
    dst.reserve(src.len() * 8 / MIN_LEN);
    // Bits not yet decoded are the low `bits` of `acc`; above them is
    // spent input the shifts drop. Refilled to at most 63 bits.
    let mut acc: u64 = 0;
    let mut bits = 0u32;
    let mut rest = src;
    loop {
        while bits <= 55 {
            let Some((&b, tail)) = rest.split_first() else {
                break;
            };
            acc = (acc << 8) | u64::from(b);
            bits += 8;
            rest = tail;
        }
        if bits == 0 {
            return Ok(());
        }
        // The next 30 bits, left-aligned; past the end, ones (as padding).
        let window = if bits >= MAX_LEN as u32 {
            (acc >> (bits - MAX_LEN as u32)) & WINDOW_MASK
        } else {
            let pad = MAX_LEN as u32 - bits;
            ((acc << pad) | ((1 << pad) - 1)) & WINDOW_MASK
        } as u32;
        let short = CODE.short[(window >> (MAX_LEN - SHORT_LEN)) as usize];
        let len = if short != 0 {
            usize::from(short >> 8)
        } else {
            let mut len = SHORT_LEN + 1;
            while window >= CODE.limit[len] {
                len += 1;
            }
            len
        };
        if len as u32 > bits {
            // No whole code left: what remains must be padding.
            let ones = (1u64 << bits) - 1;
            return if bits < 8 && acc & ones == ones {
                Ok(())
            } else {
                Err(DecodeError::Huffman)
            };
        }
        let sym = if short != 0 {
            short & 0xff
        } else {
            let rank = (window >> (MAX_LEN - len)) - CODE.first[len];
            CODE.sorted[CODE.offset[len] as usize + rank as usize]
        };
        if sym == EOS {
            return Err(DecodeError::Huffman);
        }
        dst.push(sym as u8);
        bits -= len as u32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// RFC 7541 Appendix B, a few rows: the derived codes are its codes.
    #[test]
    fn derived_codes_are_the_rfcs() {
        assert_eq!(
            (CODE.codes[b'0' as usize], LENGTHS[b'0' as usize]),
            (0x0, 5)
        );
        assert_eq!(
            (CODE.codes[b'a' as usize], LENGTHS[b'a' as usize]),
            (0x3, 5)
        );
        assert_eq!(
            (CODE.codes[b' ' as usize], LENGTHS[b' ' as usize]),
            (0x14, 6)
        );
        assert_eq!(
            (CODE.codes[b'A' as usize], LENGTHS[b'A' as usize]),
            (0x21, 6)
        );
        assert_eq!(
            (CODE.codes[b'{' as usize], LENGTHS[b'{' as usize]),
            (0x7ffe, 15)
        );
        assert_eq!((CODE.codes[0], LENGTHS[0]), (0x1ff8, 13));
        assert_eq!((CODE.codes[255], LENGTHS[255]), (0x3ffffee, 26));
        assert_eq!((CODE.codes[256], LENGTHS[256]), (0x3fffffff, 30));
        assert_eq!(CODE.limit[MAX_LEN], 1 << MAX_LEN, "every window has a code");
    }

    /// The one-octet table gives, for every window, what the search over
    /// lengths gives, and is empty exactly where that code is longer.
    #[test]
    fn the_short_table_agrees_with_the_length_search() {
        for prefix in 0..1u32 << SHORT_LEN {
            for rest in [0, (1 << (MAX_LEN - SHORT_LEN)) - 1] {
                let window = prefix << (MAX_LEN - SHORT_LEN) | rest;
                let mut len = MIN_LEN;
                while window >= CODE.limit[len] {
                    len += 1;
                }
                let rank = (window >> (MAX_LEN - len)) - CODE.first[len];
                let sym = CODE.sorted[CODE.offset[len] as usize + rank as usize];
                let short = CODE.short[prefix as usize];
                if len <= SHORT_LEN {
                    assert_eq!(short, (len as u16) << 8 | sym, "{prefix:08b}");
                } else {
                    assert_eq!(short, 0, "{prefix:08b}");
                }
            }
        }
    }

    /// RFC 7541 C.4 and C.6: the Huffman-coded strings of its examples.
    #[test]
    fn the_rfc_examples_encode_and_decode() {
        let cases = [
            ("www.example.com", "f1e3 c2e5 f23a 6ba0 ab90 f4ff"),
            ("no-cache", "a8eb 1064 9cbf"),
            ("custom-key", "25a8 49e9 5ba9 7d7f"),
            ("custom-value", "25a8 49e9 5bb8 e8b4 bf"),
            ("302", "6402"),
            ("private", "aec3 771a 4b"),
            (
                "Mon, 21 Oct 2013 20:13:21 GMT",
                "d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff",
            ),
            (
                "https://www.example.com",
                "9d29 ad17 1863 c78f 0b97 c8e9 ae82 ae43 d3",
            ),
        ];
        for (text, code) in cases {
            let mut out = Vec::new();
            encode(text.as_bytes(), encoded_len(text.as_bytes()), &mut out);
            assert_eq!(out, hex(code), "{text}");
            let mut back = Vec::new();
            decode(&out, &mut back).unwrap();
            assert_eq!(back, text.as_bytes());
        }
    }

    #[test]
    fn every_octet_round_trips() {
        let all: Vec<u8> = (0..=255).collect();
        let mut out = Vec::new();
        encode(&all, encoded_len(&all), &mut out);
        let mut back = Vec::new();
        decode(&out, &mut back).unwrap();
        assert_eq!(back, all);
    }

    #[test]
    fn bad_padding_and_eos_are_errors() {
        // '0' is 00000: three padding bits of ones are fine ...
        assert_eq!(decode(&[0b0000_0111], &mut Vec::new()), Ok(()));
        // ... a zero among them is not the EOS prefix,
        assert_eq!(
            decode(&[0b0000_0110], &mut Vec::new()),
            Err(DecodeError::Huffman)
        );
        // a whole octet of padding is too long (RFC 7541 5.2),
        assert_eq!(decode(&[0xff], &mut Vec::new()), Err(DecodeError::Huffman));
        assert_eq!(
            decode(&[0b0000_0111, 0xff], &mut Vec::new()),
            Err(DecodeError::Huffman)
        );
        // and the EOS symbol itself is an error.
        assert_eq!(
            decode(&[0xff, 0xff, 0xff, 0xfc], &mut Vec::new()),
            Err(DecodeError::Huffman)
        );
    }
}

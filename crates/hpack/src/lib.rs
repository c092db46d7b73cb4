//! `hpack`: HTTP/2 header compression (RFC 7541) for a server.
//!
//! - [`Decoder`] takes a request's header block and calls back with each
//!   field as borrowed slices: no allocation for a field that is indexed
//!   or a literal that is not Huffman-coded, one for a field the peer adds
//!   to the table. It checks everything a peer controls (indexes, integer
//!   sizes, string lengths, Huffman padding, table size updates) and
//!   holds at most the table size it announced.
//! - [`Encoder`] writes a response head: static indexes, the fields the
//!   caller marks as repeating through a dynamic table it keeps in step
//!   with the peer's (one octet once added), literals Huffman-coded where
//!   shorter.
//! - [`huffman_decode`], [`encode_integer`] and [`decode_integer`]: the
//!   Huffman code and prefixed integers alone, which QPACK shares.
//!
//! No I/O, no HTTP library types and no dependencies: every function is
//! reachable by a fuzzer (`tests/properties.rs`), and Python's `hpack`
//! checks both directions (`tests/interop.rs`).
//!
//! ```
//! let mut out = Vec::new();
//! hpack::Encoder::new()
//!     .block(&mut out)
//!     .status(200)
//!     .indexed(b"content-type", b"text/html")
//!     .field(b"x-served-by", b"fdwarden");
//!
//! let mut fields = Vec::new();
//! hpack::Decoder::new(4096)
//!     .decode(&out, |f| fields.push((f.name.to_vec(), f.value.to_vec())))
//!     .unwrap();
//! assert_eq!(fields[0], (b":status".to_vec(), b"200".to_vec()));
//! assert_eq!(fields[2], (b"x-served-by".to_vec(), b"fdwarden".to_vec()));
//! ```

mod decode;
mod encode;
mod huffman;
mod integer;
mod table;

pub use decode::{Decoder, Field};
pub use encode::{Block, Encoder};

/// Appends the Huffman-coded `src`, decoded, to `dst`: RFC 7541's code,
/// which QPACK (RFC 9204 4.1.2) uses too. An EOS symbol or bad padding is
/// [`DecodeError::Huffman`].
///
/// ```
/// // RFC 7541 C.4.1.
/// let coded = [0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff];
/// let mut out = Vec::new();
/// hpack::huffman_decode(&coded, &mut out).unwrap();
/// assert_eq!(out, b"www.example.com");
/// assert!(hpack::huffman_decode(&[0xff, 0xff, 0xff, 0xff], &mut out).is_err());
/// ```
#[inline]
pub fn huffman_decode(src: &[u8], dst: &mut Vec<u8>) -> Result<(), DecodeError> {
    huffman::decode(src, dst)
}

/// Appends `value` as an integer with an `n`-bit prefix (RFC 7541 5.1,
/// QPACK's too), `flags` in the first octet's bits above the prefix.
#[inline]
pub fn encode_integer(value: usize, n: u32, flags: u8, dst: &mut Vec<u8>) {
    integer::encode(value, n, flags, dst)
}

/// Reads an integer with an `n`-bit prefix from `src` at `*pos` and moves
/// `*pos` past it; one of 2^32 or more is [`DecodeError::IntegerOverflow`].
#[inline]
pub fn decode_integer(src: &[u8], pos: &mut usize, n: u32) -> Result<usize, DecodeError> {
    integer::decode(src, pos, n)
}

/// Why a header block could not be decoded; each is the connection's
/// COMPRESSION_ERROR in HTTP/2 (RFC 9113 4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// An integer or string runs past the end of the block.
    Truncated,
    /// An integer of 2^32 or more, or padded with continuation octets.
    IntegerOverflow,
    /// Index 0, or one past the static and dynamic tables.
    InvalidIndex,
    /// A Huffman-coded string with the EOS symbol or bad padding.
    Huffman,
    /// A table size update above the limit this side announced.
    SizeUpdateOverLimit,
    /// A table size update after the block's first field.
    SizeUpdateAfterField,
    /// The limit was lowered and the block did not start by shrinking
    /// the table to it.
    SizeUpdateMissing,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DecodeError::Truncated => "HPACK: an integer or string runs past the block",
            DecodeError::IntegerOverflow => "HPACK: integer too large",
            DecodeError::InvalidIndex => "HPACK: index outside the tables",
            DecodeError::Huffman => "HPACK: invalid Huffman code or padding",
            DecodeError::SizeUpdateOverLimit => "HPACK: table size update above the limit",
            DecodeError::SizeUpdateAfterField => "HPACK: table size update after a field",
            DecodeError::SizeUpdateMissing => "HPACK: lowered table size not acknowledged",
        })
    }
}

impl std::error::Error for DecodeError {}

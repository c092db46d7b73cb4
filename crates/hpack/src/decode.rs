//! The decoder: a header block in, each field handed to the caller as
//! borrowed slices (of the block, the tables, or the decoder's scratch for
//! Huffman-coded strings), the dynamic table kept in step.
//!
//! A block is always decoded to its end, even when the caller has seen
//! enough (a header list over its bound): the table must follow the
//! peer's, or every later block on the connection decodes wrongly.
//! What a peer can make the decoder hold is the table (at most the limit
//! the server announced) and two scratch buffers of at most 8/5 of the
//! largest string in a block it was given.

use crate::table::{Dynamic, STATIC};
use crate::{huffman, integer, DecodeError};

/// One decoded field; `never_indexed` for a field the peer sent as never
/// to be indexed (RFC 7541 6.2.3), which an intermediary must forward so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field<'a> {
    pub name: &'a [u8],
    pub value: &'a [u8],
    pub never_indexed: bool,
}

/// An HPACK decoder for one connection's header blocks, in the order they
/// arrive.
#[derive(Debug)]
pub struct Decoder {
    table: Dynamic,
    /// The largest table the peer may ask for: the `SETTINGS_HEADER_TABLE_SIZE`
    /// this side announced.
    limit: usize,
    /// The limit went below the table's size: the next block must start
    /// with a size update (RFC 7541 4.2).
    update_due: bool,
    name: Vec<u8>,
    value: Vec<u8>,
}

/// Scratch capacity kept between blocks; a larger one, which only an
/// unusually long Huffman-coded string asks for, is given back.
const SCRATCH_KEEP: usize = 16 * 1024;

impl Decoder {
    /// A decoder whose peer may use a table of up to `limit` octets (HTTP/2's
    /// default is 4096).
    pub fn new(limit: usize) -> Decoder {
        Decoder {
            table: Dynamic::new(limit),
            limit,
            update_due: false,
            name: Vec::new(),
            value: Vec::new(),
        }
    }

    /// Changes the limit, once the peer has acknowledged the
    /// `SETTINGS_HEADER_TABLE_SIZE` that announced it; below the table's
    /// size in force (the peer's last size update), the peer's next block
    /// must shrink it first. A limit lowered but still above that size
    /// asks for nothing: an encoder that never grew its table past 4096
    /// octets owes no update when the limit goes from 10272 to 5311.
    pub fn set_limit(&mut self, limit: usize) {
        self.update_due = limit < self.table.max_size();
        self.limit = limit;
    }

    /// Decodes `block` (a whole header block: HEADERS and its
    /// CONTINUATIONs joined) and calls `each` with every field in order.
    /// An error is the connection's COMPRESSION_ERROR (RFC 9113 4.3): the
    /// table is then out of step with the peer's.
    pub fn decode(
        &mut self,
        block: &[u8],
        mut each: impl FnMut(Field<'_>),
    ) -> Result<(), DecodeError> {
        let result = self.decode_fields(block, &mut each);
        for scratch in [&mut self.name, &mut self.value] {
            if scratch.capacity() > SCRATCH_KEEP {
                *scratch = Vec::new();
            }
        }
        result
    }

    fn decode_fields(
        &mut self,
        block: &[u8],
        each: &mut impl FnMut(Field<'_>),
    ) -> Result<(), DecodeError> {
        let Decoder {
            table,
            limit,
            update_due,
            name: name_buf,
            value: value_buf,
        } = self;
        let mut pos = 0;
        let mut fields = false;
        while let Some(&first) = block.get(pos) {
            if first & 0xe0 == 0x20 {
                // Dynamic table size update (6.3): only before the fields.
                if fields {
                    return Err(DecodeError::SizeUpdateAfterField);
                }
                let size = integer::decode(block, &mut pos, 5)?;
                if size > *limit {
                    return Err(DecodeError::SizeUpdateOverLimit);
                }
                table.set_max_size(size);
                *update_due = false;
                continue;
            }
            if *update_due {
                return Err(DecodeError::SizeUpdateMissing);
            }
            fields = true;
            if first & 0x80 != 0 {
                // Indexed field (6.1).
                let index = integer::decode(block, &mut pos, 7)?;
                let (name, value) = entry(table, index)?;
                each(Field {
                    name,
                    value,
                    never_indexed: false,
                });
                continue;
            }
            // Literals (6.2): with indexing 01, without 0000, never 0001.
            let (indexing, never_indexed, prefix) = match first & 0xf0 {
                0x40..=0x70 => (true, false, 6),
                0x10 => (false, true, 4),
                _ => (false, false, 4),
            };
            let index = integer::decode(block, &mut pos, prefix)?;
            let name = match index {
                0 => string(block, &mut pos, name_buf)?,
                i => entry(table, i)?.0,
            };
            let value = string(block, &mut pos, value_buf)?;
            if indexing {
                let mut new = Vec::with_capacity(name.len() + value.len());
                new.extend_from_slice(name);
                new.extend_from_slice(value);
                let name_len = name.len();
                let (name, value) = new.split_at(name_len);
                each(Field {
                    name,
                    value,
                    never_indexed,
                });
                table.insert(new.into_boxed_slice(), name_len);
            } else {
                each(Field {
                    name,
                    value,
                    never_indexed,
                });
            }
        }
        if *update_due {
            // An empty block still had to carry the update.
            return Err(DecodeError::SizeUpdateMissing);
        }
        Ok(())
    }
}

/// The field at `index` of the static then the dynamic table.
fn entry(table: &Dynamic, index: usize) -> Result<(&[u8], &[u8]), DecodeError> {
    match index {
        0 => Err(DecodeError::InvalidIndex),
        1..=61 => Ok(STATIC[index - 1]),
        _ => table
            .get(index - STATIC.len() - 1)
            .ok_or(DecodeError::InvalidIndex),
    }
}

/// A string literal (5.2) at `*pos`: a slice of the block, or of
/// `scratch` once Huffman-decoded.
fn string<'a>(
    block: &'a [u8],
    pos: &mut usize,
    scratch: &'a mut Vec<u8>,
) -> Result<&'a [u8], DecodeError> {
    let huffman = block.get(*pos).ok_or(DecodeError::Truncated)? & 0x80 != 0;
    let len = integer::decode(block, pos, 7)?;
    let end = pos
        .checked_add(len)
        .filter(|&end| end <= block.len())
        .ok_or(DecodeError::Truncated)?;
    let raw = &block[*pos..end];
    *pos = end;
    if !huffman {
        return Ok(raw);
    }
    scratch.clear();
    huffman::decode(raw, scratch)?;
    Ok(scratch)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(d: &mut Decoder, block: &[u8]) -> Result<Vec<(String, String)>, DecodeError> {
        let mut out = Vec::new();
        d.decode(block, |f| {
            out.push((
                String::from_utf8_lossy(f.name).into_owned(),
                String::from_utf8_lossy(f.value).into_owned(),
            ))
        })?;
        Ok(out)
    }

    #[test]
    fn size_updates_only_first_and_within_the_limit() {
        let mut d = Decoder::new(4096);
        assert_eq!(decode(&mut d, &[0x20, 0x82]).unwrap().len(), 1);
        assert_eq!(
            decode(&mut d, &[0x82, 0x20]),
            Err(DecodeError::SizeUpdateAfterField)
        );
        // 4097 > 4096.
        assert_eq!(
            decode(&mut Decoder::new(4096), &[0x3f, 0xe2, 0x1f]),
            Err(DecodeError::SizeUpdateOverLimit)
        );
    }

    /// Found by fuzzing (fuzz/regressions/hpack_decode): hpack's own
    /// encoder's block was refused after the limit moved down but stayed
    /// above the table's size.
    #[test]
    fn a_lowered_limit_above_the_table_size_needs_no_update() {
        let (mut enc, mut d) = (crate::Encoder::new(), Decoder::new(4096));
        for limit in [10272, 5311] {
            enc.set_peer_limit(limit);
            d.set_limit(limit);
        }
        let mut out = Vec::new();
        enc.block(&mut out).status(200);
        assert_eq!(decode(&mut d, &out).unwrap().len(), 1);
        // Lowered, then raised again before any block: nothing is owed.
        let mut d = Decoder::new(4096);
        d.set_limit(100);
        d.set_limit(8192);
        assert_eq!(decode(&mut d, &[0x82]).unwrap().len(), 1);
    }

    #[test]
    fn a_lowered_limit_needs_an_update_first() {
        let mut d = Decoder::new(4096);
        d.set_limit(100);
        assert_eq!(decode(&mut d, &[0x82]), Err(DecodeError::SizeUpdateMissing));
        let mut d = Decoder::new(4096);
        d.set_limit(100);
        assert_eq!(decode(&mut d, &[]), Err(DecodeError::SizeUpdateMissing));
        let mut d = Decoder::new(4096);
        d.set_limit(100);
        assert_eq!(decode(&mut d, &[0x3f, 0x45, 0x82]).unwrap().len(), 1);
        assert_eq!(decode(&mut d, &[0x82]).unwrap().len(), 1);
    }

    #[test]
    fn indexes_outside_the_tables_are_errors() {
        let mut d = Decoder::new(4096);
        assert_eq!(decode(&mut d, &[0x80]), Err(DecodeError::InvalidIndex));
        // 62: the dynamic table is empty.
        assert_eq!(decode(&mut d, &[0xbe]), Err(DecodeError::InvalidIndex));
        // A literal whose indexed name is past the end.
        assert_eq!(
            decode(&mut d, &[0x0f, 0x2f, 0x01, b'x']),
            Err(DecodeError::InvalidIndex)
        );
    }

    #[test]
    fn strings_past_the_block_are_errors() {
        let mut d = Decoder::new(4096);
        assert_eq!(
            decode(&mut d, &[0x00, 0x05, b'a', b'b']),
            Err(DecodeError::Truncated)
        );
        assert_eq!(
            decode(&mut d, &[0x04, 0x7f, 0xff, 0xff, 0xff, 0x0f]),
            Err(DecodeError::Truncated)
        );
    }

    #[test]
    fn never_indexed_fields_say_so_and_stay_out_of_the_table() {
        let mut d = Decoder::new(4096);
        let mut seen = Vec::new();
        d.decode(
            &[0x10, 0x01, b'k', 0x01, b'v', 0x1f, 0x08, 0x01, b'x'],
            |f| seen.push((f.name.to_vec(), f.value.to_vec(), f.never_indexed)),
        )
        .unwrap();
        assert_eq!(
            seen,
            [
                (b"k".to_vec(), b"v".to_vec(), true),
                (b"authorization".to_vec(), b"x".to_vec(), true)
            ]
        );
        assert_eq!(decode(&mut d, &[0xbe]), Err(DecodeError::InvalidIndex));
    }
}

//! HPACK's integers (RFC 7541 5.1): an N-bit prefix, then 7 bits per
//! continuation octet.

use crate::DecodeError;

/// The largest integer a peer may send. Every HPACK integer is an index,
/// a string length or a table size, and none of them is near 2^32 in a
/// block a server accepts; a bound this low keeps the arithmetic exact
/// on every target.
const MAX: u64 = u32::MAX as u64;

/// Appends `value` with an `n`-bit prefix; `flags` are the first octet's
/// bits above the prefix.
#[inline]
pub(crate) fn encode(value: usize, n: u32, flags: u8, dst: &mut Vec<u8>) {
    let max_prefix = (1usize << n) - 1;
    if value < max_prefix {
        dst.push(flags | value as u8);
        return;
    }
    dst.push(flags | max_prefix as u8);
    let mut rest = value - max_prefix;
    while rest >= 0x80 {
        dst.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    dst.push(rest as u8);
}

/// Reads an integer with an `n`-bit prefix from `src` at `*pos`, and moves
/// `*pos` past it.
#[inline]
pub(crate) fn decode(src: &[u8], pos: &mut usize, n: u32) -> Result<usize, DecodeError> {
    let max_prefix = (1u64 << n) - 1;
    let first = *src.get(*pos).ok_or(DecodeError::Truncated)?;
    *pos += 1;
    let mut value = u64::from(first) & max_prefix;
    if value < max_prefix {
        return Ok(value as usize);
    }
    let mut shift = 0;
    loop {
        let b = *src.get(*pos).ok_or(DecodeError::Truncated)?;
        *pos += 1;
        value += u64::from(b & 0x7f) << shift;
        if value > MAX {
            return Err(DecodeError::IntegerOverflow);
        }
        if b & 0x80 == 0 {
            return usize::try_from(value).map_err(|_| DecodeError::IntegerOverflow);
        }
        shift += 7;
        // Past 5 octets only zeros could follow (they add nothing), which
        // a peer could send forever.
        if shift > 28 {
            return Err(DecodeError::IntegerOverflow);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7541 C.1.
    #[test]
    fn the_rfc_examples() {
        for (value, n, bytes) in [
            (10, 5, &[0x0a][..]),
            (1337, 5, &[0x1f, 0x9a, 0x0a][..]),
            (42, 8, &[0x2a][..]),
        ] {
            let mut out = Vec::new();
            encode(value, n, 0, &mut out);
            assert_eq!(out, bytes);
            let mut pos = 0;
            assert_eq!(decode(bytes, &mut pos, n), Ok(value));
            assert_eq!(pos, bytes.len());
        }
    }

    #[test]
    fn round_trips_at_the_prefix_edges() {
        for n in 1..=8 {
            for value in [
                0,
                1,
                (1 << n) - 2,
                (1 << n) - 1,
                1 << n,
                127,
                128,
                16383,
                16384,
                1 << 31,
            ] {
                let mut out = vec![];
                encode(value, n, 0, &mut out);
                let mut pos = 0;
                assert_eq!(
                    decode(&out, &mut pos, n),
                    Ok(value),
                    "{value} with {n} bits"
                );
                assert_eq!(pos, out.len());
            }
        }
    }

    #[test]
    fn overlong_and_truncated_integers_are_errors() {
        let mut pos = 0;
        assert_eq!(
            decode(&[0x1f, 0x80], &mut pos, 5),
            Err(DecodeError::Truncated)
        );
        let mut pos = 0;
        assert_eq!(decode(&[], &mut pos, 5), Err(DecodeError::Truncated));
        // 2^32 and beyond.
        let mut pos = 0;
        assert_eq!(
            decode(&[0x1f, 0xff, 0xff, 0xff, 0xff, 0x0f], &mut pos, 5),
            Err(DecodeError::IntegerOverflow)
        );
        // Zeros in continuation octets, without end.
        let mut zeros = vec![0x1f];
        zeros.extend([0x80; 64]);
        let mut pos = 0;
        assert_eq!(
            decode(&zeros, &mut pos, 5),
            Err(DecodeError::IntegerOverflow)
        );
    }
}

//! QUIC's variable-length integers (RFC 9000 16): two bits of length,
//! then 6, 14, 30 or 62 bits of value.

/// The largest value one can carry.
pub const MAX: u64 = (1 << 62) - 1;

/// Reads the integer at `*pos` and moves `*pos` past it; `None` when
/// `buf` ends first (nothing moved).
pub fn decode(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let first = *buf.get(*pos)?;
    let len = 1usize << (first >> 6);
    let bytes = buf.get(*pos..*pos + len)?;
    *pos += len;
    Some(
        bytes[1..]
            .iter()
            .fold(u64::from(first & 0x3f), |v, &b| (v << 8) | u64::from(b)),
    )
}

/// The octets [`encode`] writes for `v`.
pub fn len(v: u64) -> usize {
    match v {
        0..=63 => 1,
        64..=16_383 => 2,
        16_384..=1_073_741_823 => 4,
        _ => 8,
    }
}

/// Appends `v` (at most [`MAX`]) in its shortest form.
pub fn encode(v: u64, dst: &mut Vec<u8>) {
    debug_assert!(v <= MAX);
    match v {
        0..=63 => dst.push(v as u8),
        64..=16_383 => dst.extend_from_slice(&(0x4000 | v as u16).to_be_bytes()),
        16_384..=1_073_741_823 => dst.extend_from_slice(&(0x8000_0000 | v as u32).to_be_bytes()),
        _ => dst.extend_from_slice(&(0xc000_0000_0000_0000 | v).to_be_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_9000_examples_decode_and_encode_back() {
        // RFC 9000 A.1.
        for (bytes, v) in [
            (
                &[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c][..],
                151_288_809_941_952_652,
            ),
            (&[0x9d, 0x7f, 0x3e, 0x7d], 494_878_333),
            (&[0x7b, 0xbd], 15_293),
            (&[0x25], 37),
        ] {
            let mut pos = 0;
            assert_eq!(decode(bytes, &mut pos), Some(v));
            assert_eq!(pos, bytes.len());
            let mut out = Vec::new();
            encode(v, &mut out);
            assert_eq!(out, bytes);
            assert_eq!(len(v), bytes.len());
        }
        let mut pos = 0;
        assert_eq!(decode(&[0x7b], &mut pos), None);
        assert_eq!(pos, 0);
    }
}

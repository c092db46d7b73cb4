//! Rendering primitives every writer of header values and bodies shares:
//! integers without `fmt`, byte ranges, and paths percent-encoded for a
//! `Location`. It depends on nothing but [`ByteRange`].

use crate::range::ByteRange;

/// Appends `first-last/size` for `r`.
pub fn push_range(out: &mut Vec<u8>, r: ByteRange, size: u64) {
    push_u64(out, r.start);
    out.push(b'-');
    push_u64(out, r.end - 1);
    out.push(b'/');
    push_u64(out, size);
}

/// `00` to `99`, two digits per entry.
const DIGIT_PAIRS: [u8; 200] = {
    let mut t = [0u8; 200];
    let mut i = 0;
    while i < 100 {
        t[2 * i] = b'0' + (i / 10) as u8;
        t[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    t
};

/// Appends the decimal form of `n`, two digits per division: a range
/// response writes four numbers of up to seven digits, and one digit per
/// division was ~380 of its ~10300 instructions.
pub fn push_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    while n >= 100 {
        let pair = (n % 100) as usize * 2;
        n /= 100;
        i -= 2;
        tmp[i..i + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    }
    if n >= 10 {
        let pair = n as usize * 2;
        i -= 2;
        tmp[i..i + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    } else {
        i -= 1;
        tmp[i] = b'0' + n as u8;
    }
    out.extend_from_slice(&tmp[i..]);
}

/// Digits in the decimal form of `n`.
pub fn decimal_len(n: u64) -> u64 {
    u64::from(n.checked_ilog10().unwrap_or(0) + 1)
}

/// Appends `path` percent-encoded for a `Location` (RFC 3986 `pchar` and
/// `/` stay; everything else, `%` `?` `#` and controls included, is escaped).
pub fn push_encoded_path(out: &mut Vec<u8>, path: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in path.as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/!$&'()*+,;=:@".contains(&b) {
            out.push(b);
        } else {
            out.extend_from_slice(&[b'%', HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ints_and_paths() {
        let mut b = Vec::new();
        push_u64(&mut b, 0);
        b.push(b' ');
        push_u64(&mut b, u64::MAX);
        assert_eq!(b, b"0 18446744073709551615");
        for n in (0..=1001).chain([9_999, 10_000, 99_999, 1 << 32, u64::MAX / 10]) {
            let mut b = Vec::new();
            push_u64(&mut b, n);
            assert_eq!(b, n.to_string().as_bytes());
        }
        let mut b = Vec::new();
        push_encoded_path(&mut b, "a b/%?#\r\n");
        assert_eq!(b, b"a%20b/%25%3F%23%0D%0A");
    }
}

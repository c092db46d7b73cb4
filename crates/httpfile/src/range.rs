//! `Range: bytes=...` evaluation against a representation length (RFC 9110 14).

/// One satisfiable range, `start..end` (end exclusive).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteRange {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
}

impl ByteRange {
    /// Bytes in the range.
    pub fn len(&self) -> u64 {
        self.end - self.start
    }
    /// Whether the range is empty (never for ranges this module returns).
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
}

/// What to answer for a Range header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeOutcome {
    /// Ignore the header: 200 with the full body (invalid syntax, other unit,
    /// too many ranges, or overlapping ranges adding up past the length).
    Full,
    /// 416 with `Content-Range: bytes */len`.
    Unsatisfiable,
    /// 206; the satisfiable ranges are in `out` (one: single part; more: multipart).
    Partial,
}

/// Evaluates a Range header value for a representation of `len` bytes.
/// Satisfiable ranges are written to `out` (cleared first) in request order.
pub fn parse_range(
    header: &[u8],
    len: u64,
    max_ranges: usize,
    out: &mut Vec<ByteRange>,
) -> RangeOutcome {
    out.clear();
    let outcome = scan(header, len, max_ranges, |r| out.push(r));
    if outcome != RangeOutcome::Partial {
        out.clear();
    }
    outcome
}

/// The one range a header asks for, when [`parse_range`] would answer
/// `Partial` with exactly one range: what a server checks before it decides
/// how to read the body, without a vector.
///
/// ```
/// use httpfile::range::{single_range, ByteRange};
/// assert_eq!(single_range(b"bytes=0-9", 100, 16), Some(ByteRange { start: 0, end: 10 }));
/// assert_eq!(single_range(b"bytes=0-0,5-9", 100, 16), None);
/// assert_eq!(single_range(b"bytes=200-", 100, 16), None);
/// ```
pub fn single_range(header: &[u8], len: u64, max_ranges: usize) -> Option<ByteRange> {
    let (mut first, mut count) = (None, 0);
    let outcome = scan(header, len, max_ranges, |r| {
        first.get_or_insert(r);
        count += 1;
    });
    first.filter(|_| outcome == RangeOutcome::Partial && count == 1)
}

/// Reads the header in one pass (RFC 9110 14.1.1: `bytes=` then a list of
/// `first-last`, `first-` and `-suffix`, with optional whitespace around
/// the list's elements), handing each satisfiable range to `each` in order
/// as it goes; the outcome says whether to use them. Reading each element
/// with slice splits and searches, a server's `bytes=524288-528383` cost
/// about 700 instructions per read (and a request reads it twice), this
/// about 340 (callgrind).
fn scan(
    header: &[u8],
    len: u64,
    max_ranges: usize,
    mut each: impl FnMut(ByteRange),
) -> RangeOutcome {
    let Some(list) = header
        .get(..6)
        .filter(|unit| unit[..5].eq_ignore_ascii_case(b"bytes") && unit[5] == b'=')
        .map(|_| &header[6..])
    else {
        return RangeOutcome::Full;
    };
    let ows = |b: u8| b == b' ' || b == b'\t';
    let (mut i, mut specs, mut count, mut total) = (0, 0usize, 0usize, 0u64);
    loop {
        while i < list.len() && ows(list[i]) {
            i += 1;
        }
        match list.get(i) {
            None => break,
            // An empty list element.
            Some(b',') => {
                i += 1;
                continue;
            }
            Some(_) => {}
        }
        specs += 1;
        if specs > max_ranges {
            return RangeOutcome::Full;
        }
        let (first, first_digits) = number(list, &mut i);
        if list.get(i) != Some(&b'-') {
            return RangeOutcome::Full;
        }
        i += 1;
        let (last, last_digits) = number(list, &mut i);
        while i < list.len() && ows(list[i]) {
            i += 1;
        }
        match list.get(i) {
            None => {}
            Some(b',') => i += 1,
            Some(_) => return RangeOutcome::Full,
        }
        if first_digits > 19 || last_digits > 19 {
            return RangeOutcome::Full;
        }
        let range = if first_digits == 0 {
            if last_digits == 0 {
                return RangeOutcome::Full;
            }
            (last > 0 && len > 0).then(|| ByteRange {
                start: len - last.min(len),
                end: len,
            })
        } else {
            let last = match last_digits {
                0 => u64::MAX,
                _ if last >= first => last,
                _ => return RangeOutcome::Full,
            };
            (first < len).then(|| ByteRange {
                start: first,
                end: last.min(len - 1) + 1,
            })
        };
        if let Some(r) = range {
            count += 1;
            total = total.saturating_add(r.len());
            each(r);
        }
    }
    if specs == 0 {
        return RangeOutcome::Full;
    }
    if count == 0 {
        return RangeOutcome::Unsatisfiable;
    }
    if count > 1 && total > len {
        return RangeOutcome::Full;
    }
    RangeOutcome::Partial
}

/// The decimal number at `list[*i..]`, moving `*i` past it: its value
/// (meaningful for at most 19 digits) and how many digits it had.
fn number(list: &[u8], i: &mut usize) -> (u64, usize) {
    let start = *i;
    let mut n = 0u64;
    while let Some(d) = list.get(*i).filter(|b| b.is_ascii_digit()) {
        n = n.wrapping_mul(10).wrapping_add(u64::from(d - b'0'));
        *i += 1;
    }
    (n, *i - start)
}

/// The split-and-search reading of RFC 9110 14.1.1 that the one-pass
/// scan must agree with, for this crate's tests and the fuzz target
/// (`fuzz/fuzz_targets/httpfile_headers.rs`): one oracle, not a copy each.
#[cfg(any(test, fuzzing))]
#[doc(hidden)]
pub mod oracle {
    use super::{ByteRange, RangeOutcome};

    /// The split-and-search reading of RFC 9110 14.1.1 the one-pass scan
    /// must agree with.
    pub fn reference(
        header: &[u8],
        len: u64,
        max_ranges: usize,
        out: &mut Vec<ByteRange>,
    ) -> RangeOutcome {
        fn digits(s: &[u8]) -> Option<u64> {
            if s.is_empty() || s.len() > 19 || !s.iter().all(u8::is_ascii_digit) {
                return None;
            }
            Some(s.iter().fold(0u64, |a, d| a * 10 + u64::from(d - b'0')))
        }
        out.clear();
        let Some(eq) = header.iter().position(|&b| b == b'=') else {
            return RangeOutcome::Full;
        };
        if !header[..eq].eq_ignore_ascii_case(b"bytes") {
            return RangeOutcome::Full;
        }
        let (mut specs, mut total) = (0usize, 0u64);
        for spec in header[eq + 1..].split(|&b| b == b',') {
            let spec = crate::trim_ows(spec);
            if spec.is_empty() {
                continue;
            }
            specs += 1;
            let full = |out: &mut Vec<ByteRange>| {
                out.clear();
                RangeOutcome::Full
            };
            if specs > max_ranges {
                return full(out);
            }
            let Some(dash) = spec.iter().position(|&b| b == b'-') else {
                return full(out);
            };
            let (a, b) = (&spec[..dash], &spec[dash + 1..]);
            let range = if a.is_empty() {
                let Some(n) = digits(b) else { return full(out) };
                (n > 0 && len > 0).then(|| ByteRange {
                    start: len - n.min(len),
                    end: len,
                })
            } else {
                let Some(first) = digits(a) else {
                    return full(out);
                };
                let last = if b.is_empty() {
                    u64::MAX
                } else {
                    match digits(b) {
                        Some(l) if l >= first => l,
                        _ => return full(out),
                    }
                };
                (first < len).then(|| ByteRange {
                    start: first,
                    end: last.min(len - 1) + 1,
                })
            };
            if let Some(r) = range {
                total = total.saturating_add(r.len());
                out.push(r);
            }
        }
        if specs == 0 {
            return RangeOutcome::Full;
        }
        if out.is_empty() {
            return RangeOutcome::Unsatisfiable;
        }
        if out.len() > 1 && total > len {
            out.clear();
            return RangeOutcome::Full;
        }
        RangeOutcome::Partial
    }
}

#[cfg(test)]
mod tests {
    use super::oracle::reference;
    use super::*;

    fn p(h: &str, len: u64) -> (RangeOutcome, Vec<(u64, u64)>) {
        let mut v = Vec::new();
        let o = parse_range(h.as_bytes(), len, 16, &mut v);
        (o, v.iter().map(|r| (r.start, r.end)).collect())
    }

    #[test]
    fn scan_agrees_with_the_reference_on_every_short_list() {
        let alphabet = b"019-, \t";
        let (mut got, mut want) = (Vec::new(), Vec::new());
        let mut check = |header: &[u8]| {
            for len in [0, 1, 5, 10, 100] {
                for max in [1, 2, 16] {
                    let o = parse_range(header, len, max, &mut got);
                    let r = reference(header, len, max, &mut want);
                    let h = String::from_utf8_lossy(header);
                    assert_eq!((o, &got), (r, &want), "{h:?} len {len} max {max}");
                    let one = (r == RangeOutcome::Partial && want.len() == 1).then(|| want[0]);
                    assert_eq!(
                        single_range(header, len, max),
                        one,
                        "{h:?} len {len} max {max}"
                    );
                }
            }
        };
        for unit in ["bytes", "BYTES", "byte", "bytes ", "x"] {
            check(unit.as_bytes());
            check(format!("{unit}=0-5").as_bytes());
        }
        check(b"bytes=99999999999999999999-");
        check(b"bytes=9999999999999999999-");
        check(b"bytes=-99999999999999999999");
        let mut list = b"bytes=".to_vec();
        fn each(list: &mut Vec<u8>, alphabet: &[u8], depth: usize, check: &mut dyn FnMut(&[u8])) {
            check(list);
            if depth == 0 {
                return;
            }
            for &b in alphabet {
                list.push(b);
                each(list, alphabet, depth - 1, check);
                list.pop();
            }
        }
        each(&mut list, alphabet, 6, &mut check);
    }

    #[test]
    fn cases() {
        use RangeOutcome::*;
        assert_eq!(p("bytes=0-9", 100), (Partial, vec![(0, 10)]));
        assert_eq!(p("bytes=90-", 100), (Partial, vec![(90, 100)]));
        assert_eq!(p("bytes=-10", 100), (Partial, vec![(90, 100)]));
        assert_eq!(p("bytes=-1000", 100), (Partial, vec![(0, 100)]));
        assert_eq!(p("bytes=50-1000", 100), (Partial, vec![(50, 100)]));
        assert_eq!(p("bytes=0-0, 5-9", 100), (Partial, vec![(0, 1), (5, 10)]));
        assert_eq!(p("bytes=100-", 100).0, Unsatisfiable);
        assert_eq!(p("bytes=-0", 100).0, Unsatisfiable);
        assert_eq!(p("bytes=0-", 0).0, Unsatisfiable);
        assert_eq!(p("bytes=200-300, 100-", 100).0, Unsatisfiable);
        assert_eq!(p("bytes=200-300, 0-1", 100), (Partial, vec![(0, 2)]));
        assert_eq!(p("bytes=9-5", 100).0, Full);
        assert_eq!(p("bytes=abc", 100).0, Full);
        assert_eq!(p("items=0-5", 100).0, Full);
        assert_eq!(p("bytes=", 100).0, Full);
        assert_eq!(p("bytes=0-99,0-99", 100).0, Full);
        let many: Vec<String> = (0..17).map(|i| format!("{i}-{i}")).collect();
        assert_eq!(p(&format!("bytes={}", many.join(",")), 100).0, Full);
    }
}

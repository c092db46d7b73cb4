//! `Range: bytes=...` evaluation against a representation length (RFC 9110 14).

use crate::trim_ows;

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

fn digits(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 19 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(s.iter().fold(0u64, |a, d| a * 10 + u64::from(d - b'0')))
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
    let Some(eq) = header.iter().position(|&b| b == b'=') else {
        return RangeOutcome::Full;
    };
    if !header[..eq].eq_ignore_ascii_case(b"bytes") {
        return RangeOutcome::Full;
    }
    let mut specs = 0usize;
    let mut total: u64 = 0;
    for spec in header[eq + 1..].split(|&b| b == b',') {
        let spec = trim_ows(spec);
        if spec.is_empty() {
            continue; // empty list elements are allowed
        }
        specs += 1;
        if specs > max_ranges {
            out.clear();
            return RangeOutcome::Full;
        }
        let Some(dash) = spec.iter().position(|&b| b == b'-') else {
            out.clear();
            return RangeOutcome::Full;
        };
        let (a, b) = (&spec[..dash], &spec[dash + 1..]);
        let range = if a.is_empty() {
            let Some(n) = digits(b) else {
                out.clear();
                return RangeOutcome::Full;
            };
            (n > 0 && len > 0).then(|| ByteRange {
                start: len - n.min(len),
                end: len,
            })
        } else {
            let Some(first) = digits(a) else {
                out.clear();
                return RangeOutcome::Full;
            };
            let last = if b.is_empty() {
                u64::MAX
            } else {
                match digits(b) {
                    Some(l) if l >= first => l,
                    _ => {
                        out.clear();
                        return RangeOutcome::Full;
                    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn p(h: &str, len: u64) -> (RangeOutcome, Vec<(u64, u64)>) {
        let mut v = Vec::new();
        let o = parse_range(h.as_bytes(), len, 16, &mut v);
        (o, v.iter().map(|r| (r.start, r.end)).collect())
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

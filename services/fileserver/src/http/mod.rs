//! Pure HTTP pieces: request parsing, path normalization, ranges,
//! preconditions, dates, content types and the forwarded client address. No I/O; each is fuzzable.

pub mod conditional;
pub mod date;
pub mod forwarded;
pub mod mime;
pub mod path;
pub mod range;
pub mod request;
pub mod response;

/// Strips optional whitespace (RFC 9110 OWS: spaces and tabs) from both ends
/// of a header value or list element.
pub(crate) fn trim_ows(v: &[u8]) -> &[u8] {
    let start = v
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t'))
        .unwrap_or(v.len());
    let end = v
        .iter()
        .rposition(|b| !matches!(b, b' ' | b'\t'))
        .map_or(start, |p| p + 1);
    &v[start..end]
}

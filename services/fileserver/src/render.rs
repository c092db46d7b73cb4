//! A plan rendered on the wires whose field names are lower case and
//! whose bodies go out in frames (HTTP/2, HTTP/3): the plan's fields as
//! those wires send them, a body as parts, and a file's bytes read with
//! the check before the last of them. HTTP/1.1 renders with
//! `httpfile::encode` and sends with `send`.

use decide::Representation;
use httpfile::plan::{Multipart, Plan};
use httpfile::ByteRange;
use rustix::fd::AsFd as _;
use std::borrow::Cow;
use std::collections::VecDeque;

/// Calls `f` with each of `plan`'s fields (name in lower case, value,
/// and whether it repeats across responses: worth a compression table's
/// entry), connection-specific ones dropped (RFC 9113 8.2.2, RFC 9114
/// 4.2). `scratch` holds each value while `f` reads it.
pub(crate) fn each_field(
    plan: &Plan<'_>,
    scratch: &mut Vec<u8>,
    mut f: impl FnMut(&[u8], &[u8], bool),
) {
    plan.headers.for_each_field(|field| {
        let Some(name) = field_name(field.name) else {
            return;
        };
        // What names one file (length, tag, time, range, place) does
        // not repeat.
        let repeats = !matches!(
            &name[..],
            b"content-length"
                | b"etag"
                | b"last-modified"
                | b"content-range"
                | b"location"
                | b"listing-truncated"
        );
        scratch.clear();
        field.value.write(scratch);
        f(&name, scratch, repeats);
    });
}

/// A plan field's name as HTTP/2 and HTTP/3 send it (lowercase), `None`
/// for a connection-specific one a rule may have set.
fn field_name(name: &str) -> Option<Cow<'static, [u8]>> {
    let fixed: &'static [u8] = match name {
        "Content-Type" => b"content-type",
        "Content-Length" => b"content-length",
        "Accept-Ranges" => b"accept-ranges",
        "Last-Modified" => b"last-modified",
        "ETag" => b"etag",
        "Cache-Control" => b"cache-control",
        "Vary" => b"vary",
        "Content-Encoding" => b"content-encoding",
        "Content-Range" => b"content-range",
        "Location" => b"location",
        "Allow" => b"allow",
        _ => {
            let lower = name.to_ascii_lowercase().into_bytes();
            return match &lower[..] {
                b"connection" | b"transfer-encoding" | b"upgrade" | b"keep-alive"
                | b"proxy-connection" | b"te" => None,
                _ => Some(Cow::Owned(lower)),
            };
        }
    };
    Some(Cow::Borrowed(fixed))
}

/// A piece of a body still to send.
pub(crate) enum Part {
    Bytes(Vec<u8>),
    /// A range of the file (or of its bytes in memory); `last`: the body's
    /// final range, checked against a change before its last bytes leave.
    Range {
        range: ByteRange,
        last: bool,
    },
}

/// Appends the parts of a `multipart/byteranges` body: each range behind
/// its part head, then the closing delimiter.
pub(crate) fn push_multipart(m: &Multipart<'_>, parts: &mut VecDeque<Part>) {
    let last = m.ranges.len().saturating_sub(1);
    for (i, &range) in m.ranges.iter().enumerate() {
        let mut h = Vec::new();
        m.write_part_head(i, &mut h);
        parts.push_back(Part::Bytes(h));
        parts.push_back(Part::Range {
            range,
            last: i == last,
        });
    }
    let mut closing = Vec::new();
    m.write_closing(&mut closing);
    parts.push_back(Part::Bytes(closing));
}

/// `range` of `rep`'s bytes when they are in memory.
pub(crate) fn in_memory(rep: Option<&Representation>, range: ByteRange) -> Option<&[u8]> {
    let start = usize::try_from(range.start).ok()?;
    let end = usize::try_from(range.end).ok()?;
    rep?.bytes()?.get(start..end)
}

/// Appends the first `n` bytes of `range` of `rep` to `out` (from memory,
/// the page cache, or, cold, through the backend); when they are the last
/// of the body (all of `range`, the body's `last` one) of a file read from
/// its descriptor, the file is checked to be the version the head
/// described, so a change at any point ends the body short, never whole
/// and mixed (what `send.rs` does for HTTP/1.1). The cold bytes read, or
/// `None` when the file is shorter, the read failed or the file changed.
pub(crate) async fn read_part(
    rep: &Representation,
    fm: &filemanager::FileManager,
    range: ByteRange,
    n: usize,
    last: bool,
    out: &mut Vec<u8>,
) -> Option<u64> {
    let off = range.start;
    if let Some(bytes) = rep.bytes() {
        out.extend_from_slice(bytes.get(off as usize..off as usize + n)?);
        return Some(0);
    }
    let cold = if filemanager::read_resident(rep.file.as_fd(), off, n, out) {
        0
    } else {
        match fm.read_at(&rep.file, off, n).await {
            Ok(b) if b.len() == n => {
                out.extend_from_slice(&b);
                n as u64
            }
            _ => return None,
        }
    };
    let final_bytes = last && n as u64 == range.len();
    (!final_bytes || fm.contents_unchanged(&rep.file)).then_some(cold)
}

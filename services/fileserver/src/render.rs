//! A plan rendered on the wires whose field names are lower case and
//! whose bodies go out in frames (HTTP/2, HTTP/3): the plan's fields as
//! those wires send them, a body as parts, and a file's bytes read with
//! the check before the last of them. HTTP/1.1 renders with
//! `httpfile::encode` and sends with `send`.

use decide::Representation;
use httpfile::encode::SERVER;
use httpfile::field::Name;
use httpfile::plan::{Multipart, Plan};
use httpfile::ByteRange;
use rustix::fd::AsFd as _;
use std::collections::VecDeque;

/// Calls `f` with every field of `plan`'s response head after
/// `:status`, in order: `server`, `date` (of the second `now`, the one
/// the answer was decided at, or of the present), the plan's fields
/// ([`each_field`]) and the connection's `alt_svc`; the one place that
/// adds the fields every HTTP/2 and HTTP/3 response carries.
pub(crate) fn each_head_field(
    plan: &Plan<'_>,
    now: Option<u64>,
    alt_svc: Option<&[u8]>,
    scratch: &mut Vec<u8>,
    mut f: impl FnMut(&[u8], &[u8], bool),
) {
    let mut all = |date: &[u8]| {
        f(Name::Server.lower().as_bytes(), SERVER.as_bytes(), true);
        f(Name::Date.lower().as_bytes(), date, true);
        each_field(plan, scratch, &mut f);
        if let Some(v) = alt_svc {
            f(Name::AltSvc.lower().as_bytes(), v, true);
        }
    };
    match now {
        Some(secs) => httpfile::date::with_date(secs, |_, d| all(d)),
        None => httpfile::date::with_now(|_, d| all(d)),
    }
}

/// Calls `f` with each of `plan`'s fields (name in lower case, value,
/// and whether it repeats across responses: worth a compression table's
/// entry, `httpfile::field::Name::per_response`), connection-specific
/// ones dropped (RFC 9113 8.2.2, RFC 9114 4.2). `scratch` holds each
/// value while `f` reads it.
fn each_field(plan: &Plan<'_>, scratch: &mut Vec<u8>, mut f: impl FnMut(&[u8], &[u8], bool)) {
    // A rule's name lowered (no allocation without one).
    let mut lowered = Vec::new();
    plan.headers.for_each_field(|field| {
        let Some((name, per_response)) = field.name.lowered(&mut lowered) else {
            return;
        };
        scratch.clear();
        field.value.write(scratch);
        f(name, scratch, !per_response);
    });
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
    rep?.bytes()?.get(indices(range)?)
}

/// `range` of `all` (a representation's shared bytes,
/// `Representation::shared_bytes`), sharing them; `None` past its end.
pub(crate) fn shared_part(all: &bytes::Bytes, range: ByteRange) -> Option<bytes::Bytes> {
    let r = indices(range)?;
    (r.start <= r.end && r.end <= all.len()).then(|| all.slice(r))
}

/// `range` as indices into bytes in memory.
fn indices(range: ByteRange) -> Option<std::ops::Range<usize>> {
    Some(usize::try_from(range.start).ok()?..usize::try_from(range.end).ok()?)
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

#[cfg(test)]
mod tests {
    use httpfile::plan::HeaderEdit::{Add, Set};

    /// Every field in lower case, what names one response not indexed, and
    /// no connection-specific one, whatever case a rule wrote it in.
    #[test]
    fn fields_go_out_lower_case_without_connection_specific_ones() {
        let edits = [
            Set("X-Frame-Options", "DENY"),
            Add("ETag", "\"a\""),
            Add("Transfer-Encoding", "chunked"),
            Add("TE", "trailers"),
            Add("Connection", "close"),
        ];
        let mut plan = httpfile::plan::error(httpfile::Method::Get, 404, "");
        plan.headers.edits = &edits;
        let mut got = String::new();
        super::each_field(&plan, &mut Vec::new(), |name, value, repeats| {
            let (n, v) = (
                String::from_utf8_lossy(name),
                String::from_utf8_lossy(value),
            );
            got += &format!("{n}: {v} {repeats}\n");
        });
        let want = "content-type: text/plain; charset=utf-8 true\ncontent-length: 14 false\n\
                    x-frame-options: DENY true\netag: \"a\" false\n";
        assert_eq!(got, want);
    }
}

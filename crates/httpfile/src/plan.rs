//! Deciding a response: pure functions from a [`RequestHead`] and what the
//! resolve stage found to a [`Plan`] (status, headers, body source). Every
//! RFC 9110 decision the server makes is here, in the order the RFC gives;
//! nothing here reads a clock, a file or a socket, so the whole module is
//! reachable by a fuzzer and by any protocol's encoder.

use crate::conditional::{etag_list_matches, evaluate, Precondition};
use crate::field::{FieldName, Name};
use crate::head::{Method, RequestHead};
use crate::listing::{ListingFormat, Page};
use crate::mime::{is_text, ContentCoding};
use crate::path::{NormPath, PathError};
use crate::range::{parse_range, ByteRange, RangeOutcome};
use crate::status::reason;
use crate::text::{decimal_len, push_encoded_path, push_range, push_u64};

/// The methods a served path allows (`Allow` on 204 and 405).
pub const ALLOW: &str = "GET, HEAD, OPTIONS";

/// A multipart/byteranges boundary: 32 characters the caller draws from a
/// random source for each response (a file's author must not predict it).
pub type Boundary = [u8; 32];

/// What the server's settings tell the planner.
#[derive(Clone, Copy, Debug)]
pub struct Policy<'a> {
    /// `Cache-Control` for files and listings (`None`: not sent).
    pub cache_control: Option<&'a str>,
    /// A `Range` with more ranges than this is answered with the whole file.
    pub max_ranges: usize,
    /// Paths with a segment that starts with `.` are served (else 404).
    pub dotfiles: bool,
}

/// A media type and whether it is text (sent with `charset=utf-8`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MediaType<'a> {
    /// `type/subtype`.
    pub essence: &'a str,
    /// Text: `; charset=utf-8` follows.
    pub utf8: bool,
}

impl<'a> MediaType<'a> {
    /// `essence`, with the charset rule of [`is_text`].
    pub fn of(essence: &'a str) -> MediaType<'a> {
        MediaType {
            essence,
            utf8: is_text(essence),
        }
    }
}

/// A resolved regular file, as far as the planner needs it.
#[derive(Clone, Copy, Debug)]
pub struct FileInfo<'a> {
    /// Length in bytes.
    pub size: u64,
    /// Modification time, Unix seconds.
    pub mtime_secs: u64,
    /// The strong, quoted entity-tag.
    pub etag: &'a str,
    /// The type of the representation (for a precompressed sibling: of the
    /// file it is a coding of).
    pub media_type: MediaType<'a>,
    /// Set when a precompressed sibling is served.
    pub coding: Option<ContentCoding>,
    /// The answer at this path depends on `Accept-Encoding` (siblings are
    /// looked for and the path is not itself a sibling's).
    pub vary: bool,
}

/// `Content-Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContentType<'a> {
    /// One media type.
    Media(MediaType<'a>),
    /// `multipart/byteranges` with this boundary.
    Multipart(Boundary),
}

/// `Content-Range`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContentRange {
    /// `bytes first-last/size`.
    Bytes {
        /// The range sent.
        range: ByteRange,
        /// The representation's length.
        size: u64,
    },
    /// `bytes */size` (416).
    Unsatisfied {
        /// The representation's length.
        size: u64,
    },
}

/// `Location` of a redirect: the directory `{base}/{path}/` (`path`
/// percent-encoded) followed by the request's query, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location<'a> {
    /// Where the served tree is mounted in the URL space (`""` at `/`,
    /// `"/static"` for a service nested there), sent as it is.
    pub base: &'a str,
    /// The directory, root-relative and decoded.
    pub path: &'a str,
    /// `?...` as the request sent it, or empty.
    pub query: &'a [u8],
}

/// Which `Vary` the response carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vary {
    /// `Vary: Accept-Encoding` (precompressed siblings).
    AcceptEncoding,
    /// `Vary: Accept` (a listing is HTML or JSON).
    Accept,
}

impl Vary {
    /// The header value.
    pub fn as_str(self) -> &'static str {
        match self {
            Vary::AcceptEncoding => "Accept-Encoding",
            Vary::Accept => "Accept",
        }
    }
}

/// The headers of a response beyond the framing ones (`Date`, `Server`,
/// `Connection`) an encoder adds. Each field is one header line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Headers<'a> {
    /// `Location` of a directory.
    pub location: Option<Location<'a>>,
    /// `Location`, a URL or path made by a site rule's redirect.
    pub location_url: Option<&'a str>,
    /// `Allow`.
    pub allow: Option<&'static str>,
    /// `Retry-After`, seconds.
    pub retry_after: Option<u32>,
    /// `Content-Type`.
    pub content_type: Option<ContentType<'a>>,
    /// `Content-Range`.
    pub content_range: Option<ContentRange>,
    /// `Content-Length` (absent on 204 and 304).
    pub content_length: Option<u64>,
    /// `Accept-Ranges: bytes`.
    pub accept_ranges: bool,
    /// `Last-Modified`, Unix seconds.
    pub last_modified: Option<u64>,
    /// `ETag`.
    pub etag: Option<&'a str>,
    /// `Cache-Control`.
    pub cache_control: Option<&'a str>,
    /// `Content-Encoding`.
    pub content_encoding: Option<ContentCoding>,
    /// `Vary`.
    pub vary: Option<Vary>,
    /// `Content-Security-Policy: default-src 'none'; style-src
    /// 'unsafe-inline'` and `X-Content-Type-Options: nosniff`: the body is
    /// server-made HTML around names someone else chose; no script may run.
    pub sandbox: bool,
    /// `Listing-Truncated: N`: a listing cut at N entries.
    pub listing_truncated: Option<u64>,
    /// Fields a site's rules set, add or remove, applied in order after
    /// the ones above (a `Set` or `Remove` drops a field above of that
    /// name).
    pub edits: &'a [HeaderEdit<'a>],
}

/// One change a site rule makes to a response's header fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeaderEdit<'a> {
    /// Replace every field of this name with this one.
    Set(&'a str, &'a str),
    /// Add this field beside those of the same name.
    Add(&'a str, &'a str),
    /// Drop every field of this name.
    Remove(&'a str),
}

impl HeaderEdit<'_> {
    /// The field name edited.
    pub fn name(&self) -> &str {
        match self {
            HeaderEdit::Set(n, _) | HeaderEdit::Add(n, _) | HeaderEdit::Remove(n) => n,
        }
    }
}

/// One header field of a plan, its value not yet rendered: an HTTP/1.1
/// encoder writes `name: value` lines, an `http::HeaderMap` builder renders
/// each value into a `HeaderValue`. [`FieldName`] has every spelling of the
/// name, [`FieldValue::write`] is the one rendering of every value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field<'a> {
    /// The header name: one of [`Name`], or a rule's as written.
    pub name: FieldName<'a>,
    /// Its value.
    pub value: FieldValue<'a>,
}

/// The value of a [`Field`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldValue<'a> {
    /// Text as it is.
    Text(&'a str),
    /// A decimal number.
    Number(u64),
    /// An HTTP-date from Unix seconds.
    Date(u64),
    /// `Content-Type`.
    ContentType(ContentType<'a>),
    /// `Content-Range`.
    ContentRange(ContentRange),
    /// `Location` of a directory.
    Location(Location<'a>),
}

impl FieldValue<'_> {
    /// Appends the value as it goes on the wire.
    pub fn write(&self, out: &mut Vec<u8>) {
        match *self {
            FieldValue::Text(t) => out.extend_from_slice(t.as_bytes()),
            FieldValue::Number(n) => push_u64(out, n),
            FieldValue::Date(secs) => crate::date::push_http_date(out, secs),
            FieldValue::ContentType(ContentType::Media(m)) => {
                out.extend_from_slice(m.essence.as_bytes());
                if m.utf8 {
                    out.extend_from_slice(CHARSET);
                }
            }
            FieldValue::ContentType(ContentType::Multipart(boundary)) => {
                out.extend_from_slice(b"multipart/byteranges; boundary=");
                out.extend_from_slice(&boundary);
            }
            FieldValue::ContentRange(ContentRange::Bytes { range, size }) => {
                out.extend_from_slice(b"bytes ");
                push_range(out, range, size);
            }
            FieldValue::ContentRange(ContentRange::Unsatisfied { size }) => {
                out.extend_from_slice(b"bytes */");
                push_u64(out, size);
            }
            FieldValue::Location(loc) => {
                out.extend_from_slice(loc.base.as_bytes());
                out.push(b'/');
                push_encoded_path(out, loc.path);
                out.push(b'/');
                out.extend_from_slice(loc.query);
            }
        }
    }
}

impl<'a> Headers<'a> {
    /// Calls `f` with each header field the plan sends, in a fixed order.
    #[inline]
    pub fn for_each_field(&self, mut f: impl FnMut(Field<'a>)) {
        if self.edits.is_empty() {
            return self.for_each_own_field(f);
        }
        // A later `Set` of a name replaces what came before it: the
        // fields above, and `Add`s of earlier rules.
        let edits = self.edits;
        let replaced_after = |name: &str, at: usize| {
            edits[at..].iter().any(|e| {
                matches!(e, HeaderEdit::Set(..) | HeaderEdit::Remove(_))
                    && e.name().eq_ignore_ascii_case(name)
            })
        };
        self.for_each_own_field(|field| {
            if !replaced_after(field.name.as_str(), 0) {
                f(field)
            }
        });
        for (i, e) in edits.iter().enumerate() {
            let (HeaderEdit::Set(name, value) | HeaderEdit::Add(name, value)) = *e else {
                continue;
            };
            if !replaced_after(name, i + 1) {
                f(Field {
                    name: FieldName::Rule(name),
                    value: FieldValue::Text(value),
                })
            }
        }
    }

    fn for_each_own_field(&self, mut f: impl FnMut(Field<'a>)) {
        use FieldValue as V;
        let mut field = |name, value| {
            f(Field {
                name: FieldName::Known(name),
                value,
            })
        };
        if let Some(loc) = self.location {
            field(Name::Location, V::Location(loc));
        }
        if let Some(url) = self.location_url {
            field(Name::Location, V::Text(url));
        }
        if let Some(allow) = self.allow {
            field(Name::Allow, V::Text(allow));
        }
        if let Some(secs) = self.retry_after {
            field(Name::RetryAfter, V::Number(u64::from(secs)));
        }
        if let Some(ct) = self.content_type {
            field(Name::ContentType, V::ContentType(ct));
        }
        if let Some(cr) = self.content_range {
            field(Name::ContentRange, V::ContentRange(cr));
        }
        if let Some(len) = self.content_length {
            field(Name::ContentLength, V::Number(len));
        }
        if self.accept_ranges {
            field(Name::AcceptRanges, V::Text("bytes"));
        }
        if let Some(secs) = self.last_modified {
            field(Name::LastModified, V::Date(secs));
        }
        if let Some(etag) = self.etag {
            field(Name::ETag, V::Text(etag));
        }
        if let Some(cc) = self.cache_control {
            field(Name::CacheControl, V::Text(cc));
        }
        if let Some(coding) = self.content_encoding {
            field(Name::ContentEncoding, V::Text(coding.token()));
        }
        if let Some(vary) = self.vary {
            field(Name::Vary, V::Text(vary.as_str()));
        }
        if self.sandbox {
            field(
                Name::ContentSecurityPolicy,
                V::Text("default-src 'none'; style-src 'unsafe-inline'"),
            );
            field(Name::XContentTypeOptions, V::Text("nosniff"));
        }
        if let Some(n) = self.listing_truncated {
            field(Name::ListingTruncated, V::Number(n));
        }
    }
}

/// Where a response's body comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body<'a> {
    /// No body (HEAD, 204, 304, 416).
    Empty,
    /// The plain-text error body `"{status} {reason}[: detail]\n"`
    /// ([`message_len`], [`write_message`]).
    Message(&'a str),
    /// Bytes the caller rendered (a listing).
    Bytes(&'a [u8]),
    /// One range of the resolved file.
    File(ByteRange),
    /// Several ranges of the resolved file as multipart/byteranges.
    Multipart(Multipart<'a>),
}

/// A response, decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan<'a> {
    /// Status code.
    pub status: u16,
    /// Headers.
    pub headers: Headers<'a>,
    /// Body source.
    pub body: Body<'a>,
    /// The connection cannot be trusted after this request (its target was
    /// malformed): an HTTP/1.1 engine closes it.
    pub close: bool,
}

/// What to do with a request before the filesystem is asked.
// Returned by value and matched at once: boxing the plan would put an
// allocation on every 404 and 405 to save a move.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Route<'p> {
    /// Resolve this path.
    Serve(NormPath<'p>),
    /// Answer without resolving.
    Respond(Plan<'static>),
}

/// Decides whether a request reaches the filesystem: the `Host`
/// authority, the method, a body on GET/HEAD, the target's shape and the
/// dotfile rule. `path` is the
/// normalized target ([`crate::path::normalize_path`]).
pub fn route<'p>(
    req: &RequestHead<'_>,
    path: Result<NormPath<'p>, PathError>,
    policy: &Policy<'_>,
) -> Route<'p> {
    let allow = |status| {
        let mut plan = error(Method::Get, status, "");
        plan.headers.allow = Some(ALLOW);
        Route::Respond(plan)
    };
    let bad_target = |e: PathError| {
        let mut plan = error(req.method, 400, e.reason());
        plan.close = true;
        Route::Respond(plan)
    };
    // The authority is checked before the method: a request with a bad
    // `Host` is malformed whatever it asks (RFC 9112 3.2).
    if req.host.is_some_and(|h| !crate::head::is_valid_host(h)) {
        let mut plan = error(req.method, 400, "invalid Host");
        plan.close = true;
        return Route::Respond(plan);
    }
    match req.method {
        Method::Other => return allow(405),
        Method::Options => {
            return match path {
                Err(e) if req.target != b"*" => bad_target(e),
                _ => allow(204),
            }
        }
        Method::Get | Method::Head => {}
    }
    if req.has_body {
        let mut plan = error(req.method, 400, "request body not allowed on GET/HEAD");
        plan.close = true;
        return Route::Respond(plan);
    }
    match path {
        Err(PathError::Asterisk) => bad_target(PathError::NotOriginForm),
        Err(e) => bad_target(e),
        Ok(p) if p.dotfile && !policy.dotfiles => Route::Respond(error(req.method, 404, "")),
        Ok(p) => Route::Serve(p),
    }
}

/// A plain-text response for `status`, with `detail` after the reason
/// (nothing when it only repeats it). 204 and 304 have no body.
pub fn error(method: Method, status: u16, detail: &str) -> Plan<'_> {
    let detail = if detail == reason(status) { "" } else { detail };
    let mut plan = Plan {
        status,
        headers: Headers::default(),
        body: Body::Empty,
        close: false,
    };
    if status != 204 && status != 304 {
        plan.headers.content_type = Some(ContentType::Media(MediaType {
            essence: "text/plain",
            utf8: true,
        }));
        plan.headers.content_length = Some(message_len(status, detail));
        if method != Method::Head {
            plan.body = Body::Message(detail);
        }
    }
    plan
}

/// An unparsable request head (400, 408, 414, 431): no method is known, so the
/// body is sent, and the connection closes.
pub fn reject(status: u16, detail: &str) -> Plan<'_> {
    let mut plan = error(Method::Get, status, detail);
    plan.close = true;
    plan
}

/// 503 for a descriptor table or budget that is full: the condition passes
/// as responses finish, so the client may retry at once.
pub fn exhausted(method: Method) -> Plan<'static> {
    let mut plan = error(method, 503, "out of file descriptors");
    plan.headers.retry_after = Some(1);
    plan
}

/// 301 from a directory named without its trailing slash to
/// `{base}/{path}/` (see [`Location`]).
pub fn redirect_to_directory<'a>(req: &RequestHead<'a>, base: &'a str, path: &'a str) -> Plan<'a> {
    let mut plan = error(req.method, 301, "");
    let query = req
        .target
        .iter()
        .position(|&b| b == b'?')
        .map_or(&[][..], |q| &req.target[q..]);
    plan.headers.location = Some(Location { base, path, query });
    // Deterministic while the directory exists, and with no validator to
    // revalidate by: fresh for a minute, which bounds how long a directory
    // replaced by a file misleads.
    plan.headers.cache_control = Some("max-age=60");
    plan
}

/// The answer for a regular file: preconditions in the order of RFC 9110
/// 13.2.2, then `Range` (RFC 9110 14). `now` is the response's `Date`
/// (Unix seconds): `Last-Modified` is never later (8.8.2.1). Satisfiable
/// ranges go to `ranges`; `boundary` is called only for a multipart answer.
pub fn file<'a>(
    req: &RequestHead<'_>,
    info: &FileInfo<'a>,
    policy: &Policy<'a>,
    now: u64,
    ranges: &'a mut Vec<ByteRange>,
    boundary: impl FnOnce() -> Boundary,
) -> Plan<'a> {
    let precondition = file_precondition(req, info, now);
    file_evaluated(req, info, policy, now, precondition, ranges, boundary)
}

/// The preconditions of `req` (RFC 9110 13.2.2) against `info`'s
/// validators at `now`: what [`file()`] evaluates first. A server that needs
/// the outcome before it plans (to skip making a compressed variant a `304`
/// does not send) evaluates here and plans with [`file_evaluated`], so the
/// preconditions are evaluated once.
pub fn file_precondition(req: &RequestHead<'_>, info: &FileInfo<'_>, now: u64) -> Precondition {
    evaluate(req, info.etag.as_bytes(), info.mtime_secs.min(now))
}

/// [`file()`] with its preconditions already evaluated
/// ([`file_precondition`] of the same `req`, `info` and `now`).
pub fn file_evaluated<'a>(
    req: &RequestHead<'_>,
    info: &FileInfo<'a>,
    policy: &Policy<'a>,
    now: u64,
    precondition: Precondition,
    ranges: &'a mut Vec<ByteRange>,
    boundary: impl FnOnce() -> Boundary,
) -> Plan<'a> {
    let last_modified = info.mtime_secs.min(now);
    let validators = Headers {
        last_modified: Some(last_modified),
        etag: Some(info.etag),
        cache_control: policy.cache_control,
        content_encoding: info.coding,
        vary: info.vary.then_some(Vary::AcceptEncoding),
        ..Headers::default()
    };
    let use_range = match precondition {
        Precondition::Failed => return error(req.method, 412, ""),
        Precondition::NotModified => {
            return Plan {
                status: 304,
                headers: validators,
                body: Body::Empty,
                close: false,
            }
        }
        Precondition::Proceed { use_range } => use_range,
    };
    let size = info.size;
    let outcome = match req.range {
        Some(range) if use_range => parse_range(range, size, policy.max_ranges, ranges),
        _ => RangeOutcome::Full,
    };
    let ranges: &'a [ByteRange] = ranges;
    let media = Some(ContentType::Media(info.media_type));
    let (status, headers, body) = match outcome {
        RangeOutcome::Unsatisfiable => (
            416,
            Headers {
                content_range: Some(ContentRange::Unsatisfied { size }),
                content_length: Some(0),
                ..validators
            },
            Body::Empty,
        ),
        RangeOutcome::Full => (
            200,
            Headers {
                content_type: media,
                content_length: Some(size),
                accept_ranges: true,
                ..validators
            },
            Body::File(ByteRange {
                start: 0,
                end: size,
            }),
        ),
        RangeOutcome::Partial if ranges.len() == 1 => {
            let range = ranges[0];
            (
                206,
                Headers {
                    content_type: media,
                    content_range: Some(ContentRange::Bytes { range, size }),
                    content_length: Some(range.len()),
                    accept_ranges: true,
                    ..validators
                },
                Body::File(range),
            )
        }
        RangeOutcome::Partial => {
            let parts = Multipart {
                ranges,
                boundary: boundary(),
                part_type: info.media_type,
                size,
            };
            (
                206,
                Headers {
                    content_type: Some(ContentType::Multipart(parts.boundary)),
                    content_length: Some(parts.len()),
                    accept_ranges: true,
                    ..validators
                },
                Body::Multipart(parts),
            )
        }
    };
    let body = if req.is_head() { Body::Empty } else { body };
    Plan {
        status,
        headers,
        body,
        close: false,
    }
}

/// The answer for a directory listing: 304 when `If-None-Match` names its
/// tag (weak comparison), else 200.
pub fn listing<'a>(req: &RequestHead<'_>, page: &'a Page, policy: &Policy<'a>) -> Plan<'a> {
    let mut headers = Headers {
        etag: Some(&page.etag),
        vary: Some(Vary::Accept),
        cache_control: policy.cache_control,
        sandbox: true,
        listing_truncated: page.truncated,
        ..Headers::default()
    };
    let not_modified = req
        .if_none_match
        .is_some_and(|list| etag_list_matches(list, page.etag.as_bytes(), false));
    if not_modified {
        return Plan {
            status: 304,
            headers,
            body: Body::Empty,
            close: false,
        };
    }
    let media = match page.format {
        ListingFormat::Html => MediaType {
            essence: "text/html",
            utf8: true,
        },
        ListingFormat::Json => MediaType {
            essence: "application/json",
            utf8: false,
        },
    };
    headers.content_type = Some(ContentType::Media(media));
    headers.content_length = Some(page.body.len() as u64);
    let body = if req.is_head() {
        Body::Empty
    } else {
        Body::Bytes(page.body.as_bytes())
    };
    Plan {
        status: 200,
        headers,
        body,
        close: false,
    }
}

/// Length of [`write_message`]'s output.
pub fn message_len(status: u16, detail: &str) -> u64 {
    let detail = if detail.is_empty() {
        0
    } else {
        2 + detail.len()
    };
    (3 + 1 + reason(status).len() + detail + 1) as u64
}

/// Appends the plain-text error body `"{status} {reason}[: detail]\n"`.
pub fn write_message(status: u16, detail: &str, out: &mut Vec<u8>) {
    push_u64(out, u64::from(status));
    out.push(b' ');
    out.extend_from_slice(reason(status).as_bytes());
    if !detail.is_empty() {
        out.extend_from_slice(b": ");
        out.extend_from_slice(detail.as_bytes());
    }
    out.push(b'\n');
}

/// A fresh multipart boundary: 128 bits as 32 hex digits, from SipHash
/// keyed by std's per-thread random keys (drawn from the OS generator) and
/// a per-call counter, so neither an earlier response nor a file's author
/// can predict it, and a file that contains it by chance is a 2^-128 event
/// per position. The only function here that is not deterministic; plans
/// take it as an argument so tests and fuzzers can pass their own.
pub fn random_boundary() -> Boundary {
    use std::hash::{BuildHasher, Hasher};
    let state = std::hash::RandomState::new();
    let mut out = [0u8; 32];
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (i, half) in out.chunks_exact_mut(16).enumerate() {
        let mut h = state.build_hasher();
        h.write_usize(i);
        let v = h.finish();
        for (j, c) in half.iter_mut().enumerate() {
            *c = HEX[((v >> (60 - 4 * j)) & 0xf) as usize];
        }
    }
    out
}

/// A multipart/byteranges body (RFC 9110 14.6): before each range a part
/// head (boundary, type, range), after the last the closing delimiter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Multipart<'a> {
    /// The ranges, in request order.
    pub ranges: &'a [ByteRange],
    /// The boundary (also in the response's `Content-Type`).
    pub boundary: Boundary,
    /// Each part's `Content-Type`.
    pub part_type: MediaType<'a>,
    /// The representation's length (each part's `Content-Range`).
    pub size: u64,
}

const CHARSET: &[u8] = b"; charset=utf-8";

impl Multipart<'_> {
    /// Appends the head of part `i` (it precedes `ranges[i]`).
    pub fn write_part_head(&self, i: usize, out: &mut Vec<u8>) {
        let r = self.ranges[i];
        out.extend_from_slice(b"\r\n--");
        out.extend_from_slice(&self.boundary);
        out.extend_from_slice(b"\r\nContent-Type: ");
        out.extend_from_slice(self.part_type.essence.as_bytes());
        if self.part_type.utf8 {
            out.extend_from_slice(CHARSET);
        }
        out.extend_from_slice(b"\r\nContent-Range: bytes ");
        push_range(out, r, self.size);
        out.extend_from_slice(b"\r\n\r\n");
    }

    /// Appends the closing delimiter (after the last range).
    pub fn write_closing(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"\r\n--");
        out.extend_from_slice(&self.boundary);
        out.extend_from_slice(b"--\r\n");
    }

    /// Length of the whole body: part heads, ranges and closing delimiter.
    pub fn len(&self) -> u64 {
        let boundary = self.boundary.len() as u64;
        let part_fixed = (b"\r\n--".len()
            + b"\r\nContent-Type: ".len()
            + self.part_type.essence.len()
            + if self.part_type.utf8 {
                CHARSET.len()
            } else {
                0
            }
            + b"\r\nContent-Range: bytes ".len()
            + b"-/".len()
            + b"\r\n\r\n".len()) as u64
            + boundary
            + decimal_len(self.size);
        // Saturating: ranges of a representation within a few hundred
        // octets of u64::MAX (no file: st_size is an i64; an embedder's
        // own size could be) overflowed here, found by fuzzing.
        let parts = self.ranges.iter().fold(0u64, |sum, r| {
            let part = part_fixed + decimal_len(r.start) + decimal_len(r.end - 1);
            sum.saturating_add(part.saturating_add(r.len()))
        });
        parts.saturating_add(b"\r\n----\r\n".len() as u64 + boundary)
    }

    /// Whether there are no parts (never for a plan's multipart body).
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: Policy<'static> = Policy {
        cache_control: None,
        max_ranges: 16,
        dotfiles: false,
    };

    fn info() -> FileInfo<'static> {
        FileInfo {
            size: 1000,
            mtime_secs: 100,
            etag: "\"abc\"",
            media_type: MediaType::of("text/plain"),
            coding: None,
            vary: true,
        }
    }

    #[test]
    fn multipart_len_matches_what_is_written() {
        let ranges = [
            ByteRange { start: 0, end: 1 },
            ByteRange {
                start: 9,
                end: 1000,
            },
        ];
        for media in [MediaType::of("text/plain"), MediaType::of("image/png")] {
            let mp = Multipart {
                ranges: &ranges,
                boundary: [b'x'; 32],
                part_type: media,
                size: 1000,
            };
            let mut out = Vec::new();
            for (i, r) in ranges.iter().enumerate() {
                mp.write_part_head(i, &mut out);
                out.resize(out.len() + r.len() as usize, b'.');
            }
            mp.write_closing(&mut out);
            assert_eq!(mp.len(), out.len() as u64);
        }
    }

    #[test]
    fn message_len_matches_what_is_written() {
        for (status, detail) in [(404, ""), (400, "bad percent-encoding"), (599, "x")] {
            let mut out = Vec::new();
            write_message(status, detail, &mut out);
            assert_eq!(message_len(status, detail), out.len() as u64);
        }
    }

    #[test]
    fn head_gets_headers_without_body() {
        let req = RequestHead {
            method: Method::Head,
            ..RequestHead::default()
        };
        let mut ranges = Vec::new();
        let plan = file(&req, &info(), &POLICY, 200, &mut ranges, || [b'b'; 32]);
        assert_eq!(plan.status, 200);
        assert_eq!(plan.headers.content_length, Some(1000));
        assert_eq!(plan.body, Body::Empty);
        let e = error(Method::Head, 404, "");
        assert_eq!(e.headers.content_length, Some(message_len(404, "")));
        assert_eq!(e.body, Body::Empty);
    }

    #[test]
    fn ranges_single_multi_unsatisfiable() {
        let mut req = RequestHead {
            range: Some(b"bytes=0-9"),
            ..RequestHead::default()
        };
        let mut ranges = Vec::new();
        let plan = file(&req, &info(), &POLICY, 200, &mut ranges, || unreachable!());
        assert_eq!(plan.status, 206);
        assert_eq!(plan.body, Body::File(ByteRange { start: 0, end: 10 }));
        req.range = Some(b"bytes=0-1,5-6");
        let plan = file(&req, &info(), &POLICY, 200, &mut ranges, || [b'q'; 32]);
        assert!(matches!(plan.body, Body::Multipart(m) if m.ranges.len() == 2));
        assert_eq!(
            plan.headers.content_type,
            Some(ContentType::Multipart([b'q'; 32]))
        );
        req.range = Some(b"bytes=5000-");
        let plan = file(&req, &info(), &POLICY, 200, &mut ranges, || unreachable!());
        assert_eq!(plan.status, 416);
        assert_eq!(
            plan.headers.content_range,
            Some(ContentRange::Unsatisfied { size: 1000 })
        );
    }

    #[test]
    fn last_modified_is_never_after_date() {
        let req = RequestHead::default();
        let mut ranges = Vec::new();
        let plan = file(&req, &info(), &POLICY, 50, &mut ranges, || unreachable!());
        assert_eq!(plan.headers.last_modified, Some(50));
    }

    #[test]
    fn routes() {
        let mut buf = Vec::new();
        let req = RequestHead {
            method: Method::Other,
            ..RequestHead::default()
        };
        let path = crate::path::normalize_path(b"/a", &mut buf);
        let Route::Respond(plan) = route(&req, path, &POLICY) else {
            panic!("405 expected")
        };
        assert_eq!((plan.status, plan.headers.allow), (405, Some(ALLOW)));
        let req = RequestHead {
            target: b"/.git/config",
            ..RequestHead::default()
        };
        let path = crate::path::normalize_path(req.target, &mut buf);
        assert!(matches!(route(&req, path, &POLICY), Route::Respond(p) if p.status == 404));
        let req = RequestHead {
            target: b"/%zz",
            ..RequestHead::default()
        };
        let path = crate::path::normalize_path(req.target, &mut buf);
        assert!(
            matches!(route(&req, path, &POLICY), Route::Respond(p) if p.status == 400 && p.close)
        );
    }
}

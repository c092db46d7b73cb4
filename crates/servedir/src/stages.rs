//! What every engine on these stages needs between `filemanager::resolve`
//! and `httpfile::plan`: the siblings a request accepts, the compressed
//! variant it gets, a resolved file as the planner sees it, and a listing
//! rendered as a page. The daemon's HTTP/1.1 engine and
//! [`ServeDir`](crate::ServeDir) both use these, so the two map a resolve
//! result the same way.
//!
//! Compression, in the order both engines run it:
//!
//! ```text
//! accept  = accept_encoding(header)                  once per request, no allocation
//! resolve(siblings(&accept))                         a precompressed sibling wins
//! compress(fm, &mut file, &head, &accept, &opts)    type/size eligible? -> Vary;
//!                                                    accept.choose(codings) -> variant
//! entity_tag / file_info / plan::file                the variant's length, tag, coding
//! body_bytes / count_sent                            its bytes, one piece; the counters
//! ```

use filemanager::{Codec, FileManager, Listing, ResolvedFile, Sibling};
use httpfile::conditional::{evaluate, Precondition};
use httpfile::listing::{ListingEntry, ListingFormat, ListingView, Page};
use httpfile::mime::{type_matches, AcceptEncoding, ContentCoding, COMPRESSIBLE_TYPES};
use httpfile::plan::{Body, FileInfo, MediaType, Plan};
use httpfile::{EntityTag, RequestHead};

/// A request's `Accept-Encoding`, parsed once for siblings and variants
/// (absent: no coding is accepted).
pub fn accept_encoding(field: Option<&[u8]>) -> AcceptEncoding {
    field.map(AcceptEncoding::parse).unwrap_or_default()
}

/// The precompressed forms looked for, in [`ContentCoding::PREFERENCE`]
/// order (so a sibling's index is its coding's), flagged by what
/// `accept` accepts.
///
/// ```
/// let accept = servedir::stages::accept_encoding(Some(b"gzip, br;q=0"));
/// let s = servedir::stages::siblings(&accept);
/// assert_eq!(s.map(|s| (s.suffix, s.accepted)), [(".br", false), (".zst", false), (".gz", true)]);
/// ```
pub fn siblings(accept: &AcceptEncoding) -> [Sibling<'static>; 3] {
    ContentCoding::PREFERENCE.map(|c| Sibling {
        suffix: c.suffix(),
        accepted: accept.accepts(c),
    })
}

/// What a server compresses on the fly, and how.
///
/// The first request for a file in a coding waits for its compression (at
/// most `max_file_size` bytes: at the default 1 MiB and levels, about
/// 25 ms on one core of a small machine), sharing it with every
/// concurrent request for the same file and coding; later ones are
/// answered from the kept variant. Waiting, rather than answering the
/// first request uncompressed and compressing behind it, is what gets a
/// browser compressed bytes on the first load of a page, when they count
/// most; the size bound is what keeps that wait short.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompressionOptions {
    /// The codings made, in the server's order of preference: equal
    /// `Accept-Encoding` weights go to the earlier one. The default, br
    /// before zstd before gzip, is the order of the smallest output at the
    /// default levels (21.8%, 22.5% and 23.0% of 200 KiB of JavaScript)
    /// and the order precompressed siblings are tried in, so one request
    /// gets the same coding from either.
    pub codings: Vec<ContentCoding>,
    /// Media types compressed: `type/subtype` or `type/*`.
    pub types: Vec<String>,
    /// Larger files are sent as they are (and do not wait).
    pub max_file_size: u64,
    /// The level of each coding, by [`ContentCoding::index`].
    pub levels: [i32; 3],
}

impl Default for CompressionOptions {
    fn default() -> Self {
        CompressionOptions {
            codings: ContentCoding::PREFERENCE.to_vec(),
            types: COMPRESSIBLE_TYPES.iter().map(|t| t.to_string()).collect(),
            max_file_size: 1 << 20,
            levels: ContentCoding::PREFERENCE.map(|c| codec(c).default_level()),
        }
    }
}

impl CompressionOptions {
    /// The level `coding` is made at.
    pub fn level(&self, coding: ContentCoding) -> i32 {
        self.levels[coding.index()]
    }

    /// Whether files of type `mime` and `size` bytes are compressed.
    pub fn applies(&self, mime: &str, size: u64) -> bool {
        size > 0 && size <= self.max_file_size && type_matches(mime, &self.types)
    }
}

/// The codec that makes `coding`.
pub fn codec(coding: ContentCoding) -> Codec {
    match coding {
        ContentCoding::Zstd => Codec::Zstd,
        ContentCoding::Br => Codec::Brotli,
        ContentCoding::Gzip => Codec::Gzip,
    }
}

/// The coding `codec` makes.
pub fn coding(codec: Codec) -> ContentCoding {
    match codec {
        Codec::Zstd => ContentCoding::Zstd,
        Codec::Brotli => ContentCoding::Br,
        Codec::Gzip => ContentCoding::Gzip,
    }
}

/// Puts the variant `accept` prefers into `f` when `options` compress its
/// type and size and no sibling is served: the kept one, or one made now
/// (see [`CompressionOptions`] for why the request waits). Every response
/// for such a file varies by `Accept-Encoding`, identity ones too. A
/// request that revalidates the variant (`If-None-Match` with its tag)
/// gets its `304` from the tag alone: no compression runs for it, even
/// when the variant was evicted. A failed compression (the file changed
/// while it was read) leaves the file to be sent as it is.
pub async fn compress(
    fm: &FileManager,
    f: &mut ResolvedFile,
    req: &RequestHead<'_>,
    accept: &AcceptEncoding,
    options: &CompressionOptions,
) {
    if f.sibling.is_some() || !options.applies(f.mime, f.meta().size) {
        return;
    }
    f.negotiated = true;
    let Some(coding) = accept.choose(&options.codings) else {
        return;
    };
    let codec = codec(coding);
    if req.if_none_match.is_some() {
        f.coding = Some(codec);
        let tag = entity_tag(f);
        let mtime = file_info(f, &tag)
            .mtime_secs
            .min(httpfile::date::now_secs());
        if evaluate(req, tag.as_str().as_bytes(), mtime) == Precondition::NotModified {
            return;
        }
        f.coding = None;
    }
    match fm.variant(&f.file, codec, options.level(coding)).await {
        Ok(Some(v)) => {
            f.coding = Some(v.codec);
            f.variant = Some(v);
        }
        Ok(None) => {}
        Err(e) => tracing::debug!(path = f.file.path(), "not compressed: {e}"),
    }
}

/// The bytes a planned range of `f` is cut from when they are in memory:
/// its variant's, else the cached file's (`None`: read or sendfile).
pub fn body_bytes(f: &ResolvedFile) -> Option<&[u8]> {
    match &f.variant {
        Some(v) => Some(v.bytes()),
        None => f.file.bytes(),
    }
}

/// Counts a planned response of `f` that sends its variant's bytes.
pub fn count_sent(fm: &FileManager, f: &ResolvedFile, plan: &Plan<'_>) {
    if let Some(v) = &f.variant {
        if matches!(plan.body, Body::File(_) | Body::Multipart(_)) {
            fm.count_variant_served(&f.file, v);
        }
    }
}

/// The planner's view of `f` (resolved with [`siblings`], maybe given a
/// variant by [`compress`]), whose entity-tag `etag` is ([`entity_tag`]).
pub fn file_info<'a>(f: &ResolvedFile, etag: &'a EntityTag) -> FileInfo<'a> {
    let meta = f.meta();
    let size = f
        .variant
        .as_ref()
        .map_or(meta.size, |v| v.bytes().len() as u64);
    let coding = match f.coding {
        Some(c) => Some(coding(c)),
        None => f.sibling.map(|i| ContentCoding::PREFERENCE[i]),
    };
    FileInfo {
        size,
        mtime_secs: (meta.mtime_ns.max(0) / 1_000_000_000) as u64,
        etag: etag.as_str(),
        media_type: MediaType::of(f.mime),
        coding,
        vary: f.negotiated,
    }
}

/// The strong entity-tag of `f`: a variant's carries its coding.
pub fn entity_tag(f: &ResolvedFile) -> EntityTag {
    let tag = EntityTag::of_file(f.meta().size, f.meta().mtime_ns);
    match f.coding {
        Some(c) => tag.with_coding(coding(c)),
        None => tag,
    }
}

/// `listing` of the directory at URL path `/{path}/`, rendered in the
/// form `req` asks for (HTML or JSON), filtered and sorted as its query says.
pub fn listing_page(listing: &Listing, req: &RequestHead<'_>, path: &str) -> Page {
    let entries = listing.entries.iter().map(|e| ListingEntry {
        name: &e.name,
        is_dir: e.is_dir(),
        size: e.size,
        mtime_secs: e.mtime_secs(),
    });
    let view = ListingView::of(req);
    Page::render(
        ListingFormat::of(req),
        &view,
        path,
        entries,
        listing.truncated,
    )
}

/// The reason a 403 for `rel` gives in its body: asked of the file layer
/// again (a 403 is rare; this is never a hit's cost) and logged, at most one
/// line a second for the process so a client cannot flood the log. Neither
/// names anything outside the root. Empty when no reason is known.
pub async fn forbidden_reason(fm: &FileManager, rel: &str) -> &'static str {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    static LAST_LOGGED: AtomicU64 = AtomicU64::new(0);
    let reason = fm.why_forbidden(rel).await;
    let why = reason.describe();
    if !why.is_empty() {
        let now = httpfile::date::now_secs();
        let last = LAST_LOGGED.load(Relaxed);
        if now > last
            && LAST_LOGGED
                .compare_exchange(last, now, Relaxed, Relaxed)
                .is_ok()
        {
            tracing::warn!(path = %format_args!("/{}", rel.trim_start_matches('/')), "403 forbidden: {why}");
        }
    }
    why
}

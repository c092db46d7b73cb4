//! What every engine on these stages needs between `filemanager::resolve`
//! and `httpfile::plan`: the siblings a request accepts, a resolved file as
//! the planner sees it, and a listing rendered as a page. The daemon's
//! HTTP/1.1 engine and [`ServeDir`](crate::ServeDir) both use these, so the
//! two map a resolve result the same way.

use filemanager::{Listing, ResolvedFile, Sibling};
use httpfile::listing::{ListingEntry, ListingFormat, Page};
use httpfile::mime::{accepted_encodings, ContentCoding};
use httpfile::plan::{FileInfo, MediaType};
use httpfile::EntityTag;

/// The precompressed forms looked for, in [`ContentCoding::PREFERENCE`]
/// order (so a sibling's index is its coding's), flagged by what
/// `accept_encoding` accepts.
///
/// ```
/// let s = servedir::stages::siblings(Some(b"gzip, br;q=0"));
/// assert_eq!(s.map(|s| (s.suffix, s.accepted)), [(".br", false), (".zst", false), (".gz", true)]);
/// ```
pub fn siblings(accept_encoding: Option<&[u8]>) -> [Sibling<'static>; 3] {
    let accepted = accept_encoding.map(accepted_encodings).unwrap_or_default();
    ContentCoding::PREFERENCE.map(|c| Sibling {
        suffix: c.suffix(),
        accepted: accepted.accepts(c),
    })
}

/// The planner's view of `f` (resolved with [`siblings`]), whose
/// entity-tag `etag` is ([`entity_tag`]).
pub fn file_info<'a>(f: &ResolvedFile, etag: &'a EntityTag) -> FileInfo<'a> {
    let meta = f.meta();
    FileInfo {
        size: meta.size,
        mtime_secs: (meta.mtime_ns.max(0) / 1_000_000_000) as u64,
        etag: etag.as_str(),
        media_type: MediaType::of(f.mime),
        coding: f.sibling.map(|i| ContentCoding::PREFERENCE[i]),
        vary: f.negotiated,
    }
}

/// The strong entity-tag of `f`.
pub fn entity_tag(f: &ResolvedFile) -> EntityTag {
    EntityTag::of_file(f.meta().size, f.meta().mtime_ns)
}

/// `listing` of the directory at URL path `/{path}/`, rendered in `format`.
pub fn listing_page(listing: &Listing, format: ListingFormat, path: &str) -> Page {
    let entries = listing.entries.iter().map(|e| ListingEntry {
        name: &e.name,
        is_dir: e.is_dir(),
        size: e.size,
        mtime_secs: e.mtime_secs(),
    });
    Page::render(format, path, entries, listing.truncated)
}

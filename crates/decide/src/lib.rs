//! `decide`: the answer to one request for a directory's files, made once
//! for every engine. The daemon's HTTP/1.1 engine, its HTTPS/HTTP/2
//! listeners (through `servedir`) and any embedding server call
//! [`decide`], then render the [`Decision`] in their own protocol: they
//! parse and send, and decide no HTTP semantics.
//!
//! ```text
//! RequestHead ─▶ decide(fm, &Options, head, &mut path)
//!                 route      httpfile::plan::route: method, Host, body, target, dotfiles
//!                 resolve    filemanager: the file, its index, a sibling, a listing
//!                 negotiate  siblings and compression: coding, Vary, the entity-tag
//!                 evaluate   the preconditions, once (a 304 needs no compression)
//!             ─▶ Decision { Answer::Plan | NotFound | File(Representation) | Listing(Page) }
//!             ─▶ decision.plan(head, &mut ranges) ─▶ Plan: status, headers, body source
//! ```
//!
//! It depends on `filemanager` (the files) and `httpfile` (the semantics)
//! and on no HTTP library, socket or runtime type: a [`Decision`] is
//! tested without a connection (see `tests/`).
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use httpfile::{Method, RequestHead};
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::write(dir.path().join("a.txt"), "hello").unwrap();
//! let fm = filemanager::FileManager::new(filemanager::Config::new(dir.path())).unwrap();
//! let options = decide::Options::default();
//! let head = RequestHead { method: Method::Get, target: b"/a.txt", ..RequestHead::default() };
//! let mut path = Vec::new();
//! let decision = decide::decide(&fm, &options, &head, &mut path).await;
//! let mut ranges = Vec::new();
//! let plan = decision.plan(&head, &mut ranges);
//! assert_eq!((plan.status, plan.headers.content_length), (200, Some(5)));
//! assert_eq!(decision.representation().unwrap().mime, "text/plain");
//! # });
//! ```
//!
//! # Modules
//!
//! This file holds the public types and [`decide`]; one request's context
//! (the files, the options, who checks a file, the head) travels in a
//! private `Decider`, to which each module adds the methods of its stage:
//!
//! - `route`: what path answers. The request routed (method, `Host`,
//!   target, dotfiles), then resolved in the files: a file, its index, a
//!   listing, a directory's redirect, a 403 and its reason, and when the
//!   file is checked.
//! - `rules`: the site's rules applied. CORS, rate limits, the guards
//!   (allow/deny, basic auth), redirects, rewrites, `try_files` and error
//!   pages, and the rules of the file served when it is not the path
//!   asked for.
//! - `represent`: the representation a file is sent in (a precompressed
//!   sibling or a compressed variant, its coding, entity-tag and
//!   preconditions) and a [`Decision`] rendered as a [`Plan`].
//! - `listing`: a directory listing, rendered without what a guard hides.
//! - `compression`: what is compressed on the fly, in which codec.
//!
//! `rules` calls on `route`, which calls on `represent` and `listing`;
//! none of them calls back on one that calls it.
#![deny(missing_docs)]

mod compression;
mod listing;
mod represent;
mod route;
mod rules;

pub use compression::{codec, coding, CompressionOptions};

use filemanager::{CachedFile, FileManager, ListOptions, Variant};
use httpfile::conditional::Precondition;
use httpfile::listing::Page;
use httpfile::mime::ContentCoding;
use httpfile::plan::HeaderEdit;
use httpfile::plan::{self, FileInfo, MediaType, Plan, Policy};
use httpfile::{ByteRange, EntityTag, RequestHead};
use siterules::{Facts, Rules};
use std::sync::Arc;

/// How a directory is served: every setting a request's answer depends on.
/// The daemon's `[serve]`-level settings are this type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Names tried, in order, for a directory asked for with its `/`.
    pub index: Vec<String>,
    /// List a directory that has no index (off: such a directory is not
    /// found).
    pub listing: bool,
    /// A listing shows at most this many entries.
    pub listing_max_entries: usize,
    /// Serve paths with a segment that starts with `.`.
    pub dotfiles: bool,
    /// `Cache-Control` for files and listings (`None`: none is sent).
    pub cache_control: Option<String>,
    /// A `Range` with more ranges than this is answered with the whole file.
    pub max_ranges: usize,
    /// Serve a file's precompressed siblings (`.br`, `.zst`, `.gz`) to
    /// requests that accept their coding.
    pub precompressed: bool,
    /// Compress on the fly (`None`: off).
    pub compression: Option<CompressionOptions>,
    /// The URL path the files are mounted at (`/static`): it prefixes the
    /// `Location` of a directory redirect and is never taken off a request.
    pub redirect_base: String,
    /// The site's rules: headers, redirects, rewrites, `try_files`, error
    /// pages, basic auth, allow/deny, CORS and rate limits by path (see
    /// `siterules`).
    pub rules: Arc<Rules>,
    /// Entity-tags by a digest of each file's bytes (read once per file
    /// version) rather than its size and time: replicas agree whatever
    /// their files' times, and a rewrite that keeps them still shows.
    pub content_etag: bool,
}

impl Default for Options {
    /// `index.html`, no listing, no dotfiles, `Cache-Control: no-cache`
    /// (caches keep the file and revalidate it each time: a 304 is cheap),
    /// at most 16 ranges, precompressed siblings, no compression.
    fn default() -> Self {
        Options {
            index: vec!["index.html".to_string()],
            listing: false,
            listing_max_entries: ListOptions::default().max_entries,
            dotfiles: false,
            cache_control: Some("no-cache".to_string()),
            max_ranges: 16,
            precompressed: true,
            compression: None,
            redirect_base: String::new(),
            rules: Arc::default(),
            content_etag: false,
        }
    }
}

impl Options {
    /// What the planner reads of these options.
    pub fn policy(&self) -> Policy<'_> {
        Policy {
            cache_control: self.cache_control.as_deref(),
            max_ranges: self.max_ranges,
            dotfiles: self.dotfiles,
        }
    }
}

/// A request's answer, decided: what to send and the policy its plan is
/// made under. [`Decision::plan`] renders it as a [`Plan`].
#[derive(Debug)]
pub struct Decision<'a> {
    /// What the answer is.
    pub answer: Answer<'a>,
    policy: Policy<'a>,
    /// The header fields the site's rules and CORS set, add or remove,
    /// for a success (2xx, 304) or a rule's own redirect.
    edits: Vec<HeaderEdit<'a>>,
    /// Those for any other answer (an error, a directory redirect): the
    /// rules marked `always`, CORS, a challenge (nginx's `add_header`
    /// without and with `always`), so that no rule makes an error
    /// cacheable for long unless it says so.
    always_edits: Vec<HeaderEdit<'a>>,
    /// A `Location` a rule made (a redirect, a rewritten directory's).
    location: Option<String>,
    /// The answer is a rule's `redirect`.
    rule_redirect: bool,
    /// An error page's status: its file is sent whole under it.
    status: Option<u16>,
    /// A rate limit's `Retry-After` (seconds), its page's too.
    retry_after: Option<u32>,
}

/// What a request is answered with.
#[derive(Debug)]
pub enum Answer<'a> {
    /// The plan alone: an error, a redirect, `204`/`405` with `Allow`.
    /// Boxed: a plan is 320 bytes, and the answers of a hit (a file, a
    /// `304`) should not move that much through every await that returns
    /// one; these answers are the rare ones.
    Plan(Box<Plan<'a>>),
    /// Nothing is at the path: a `404`, or an embedding server's fallback.
    NotFound,
    /// A file, in the representation this request gets.
    File(Representation),
    /// A directory listing, rendered.
    Listing(Page),
}

impl Decision<'_> {
    /// The response: status, headers and where its body comes from.
    /// Satisfiable ranges of a file go to `ranges`.
    pub fn plan<'s>(&'s self, head: &RequestHead<'_>, ranges: &'s mut Vec<ByteRange>) -> Plan<'s> {
        let mut p = self.answer_plan(head, ranges);
        let success = matches!(p.status, 200..=299 | 304)
            || (self.rule_redirect && (300..400).contains(&p.status));
        p.headers.edits = if success {
            &self.edits
        } else {
            &self.always_edits
        };
        if let Some(url) = &self.location {
            p.headers.location_url = Some(url);
        }
        if self.retry_after.is_some() {
            p.headers.retry_after = self.retry_after;
        }
        p
    }

    /// The file answered with, if it is one.
    pub fn representation(&self) -> Option<&Representation> {
        match &self.answer {
            Answer::File(r) => Some(r),
            _ => None,
        }
    }

    /// The decision's file, taken out of it (an engine that moves the file
    /// into a response body).
    pub fn into_representation(self) -> Option<Representation> {
        match self.answer {
            Answer::File(r) => Some(r),
            _ => None,
        }
    }
}

/// The representation of a file a request gets: the file (or its
/// precompressed sibling), a compressed variant made of it, its coding,
/// its entity-tag and whether the answer varies by `Accept-Encoding`.
#[derive(Debug)]
pub struct Representation {
    /// The open file sent (a sibling's, when one is).
    pub file: CachedFile,
    /// Compressed bytes sent instead of the file's.
    pub variant: Option<Variant>,
    /// The content coding: a sibling's, a variant's, or that of a variant
    /// whose `304` needed its tag only.
    pub coding: Option<ContentCoding>,
    /// The answer at this path depends on `Accept-Encoding`.
    pub vary: bool,
    /// The media type (a sibling's is the file's it encodes).
    pub mime: &'static str,
    /// The strong entity-tag (a variant's carries its coding).
    pub etag: EntityTag,
    precondition: Precondition,
    /// The response's time (Unix seconds): `Last-Modified` is never later.
    now: u64,
}

impl Representation {
    /// The bytes sent when they are in memory: a variant's, else the cached
    /// file's (`None`: the file is read or sent by descriptor).
    pub fn bytes(&self) -> Option<&[u8]> {
        match &self.variant {
            Some(v) => Some(v.bytes()),
            None => self.file.bytes(),
        }
    }

    /// [`bytes`](Self::bytes) as a `Bytes` that shares them (a
    /// variant's, or the cache entry's): no copy, for a body that leaves
    /// after the decision is gone.
    pub fn shared_bytes(&self) -> Option<bytes::Bytes> {
        match &self.variant {
            Some(v) => Some(v.to_bytes()),
            None => self.file.shared_bytes(),
        }
    }

    /// The response's time (Unix seconds) the decision was made at: its
    /// `Date` (`Last-Modified` is never later).
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Length in bytes of what is sent: the variant's, else the file's.
    pub fn size(&self) -> u64 {
        self.variant
            .as_ref()
            .map_or(self.file.meta().size, |v| v.bytes().len() as u64)
    }

    /// The planner's view of this representation.
    pub fn info(&self) -> FileInfo<'_> {
        let meta = self.file.meta();
        FileInfo {
            size: self.size(),
            mtime_secs: (meta.mtime_ns.max(0) / 1_000_000_000) as u64,
            etag: self.etag.as_str(),
            media_type: MediaType::of(self.mime),
            coding: self.coding,
            vary: self.vary,
        }
    }
}

/// Who checks that a file sent from its descriptor is still the version
/// its head describes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Check {
    /// The resolve stage (one `statx` of a cached descriptor, which is
    /// reopened when its file changed); a sender that reads in chunks then
    /// checks again before its last bytes. What [`decide`] does.
    #[default]
    AtResolve,
    /// For files of at most this many bytes, and a GET's one range of at
    /// most this many bytes, the sender alone: it reads all of the body,
    /// checks the file before any byte of the response leaves, and when it
    /// changed decides again with [`Check::AtResolve`]; one check per
    /// response instead of two. Other answers from larger files are checked
    /// at resolve (a range's once its plan is known), since their head
    /// leaves before the sender's check.
    BeforeSendUpTo(u64),
}

/// Decides the answer to `head` from `fm`'s files under `options`.
/// `path` is scratch space for the normalized path, which a redirect's
/// plan borrows.
pub fn decide<'a>(
    fm: &'a FileManager,
    options: &'a Options,
    head: &'a RequestHead<'a>,
    path: &'a mut Vec<u8>,
) -> impl std::future::Future<Output = Decision<'a>> + 'a {
    let files = Files {
        fm,
        check: Check::AtResolve,
    };
    decide_checked(files, options, head, path)
}

/// The files a request is answered from, and who checks that a file sent
/// from its descriptor is still the version its head describes.
#[derive(Clone, Copy, Debug)]
pub struct Files<'f> {
    /// The directory's files.
    pub fm: &'f FileManager,
    /// Who checks a file sent from its descriptor.
    pub check: Check,
}

/// [`decide`], with [`Files::check`] saying who verifies a file sent from
/// its descriptor.
pub async fn decide_checked<'a>(
    files: Files<'_>,
    options: &'a Options,
    head: &RequestHead<'a>,
    path: &'a mut Vec<u8>,
) -> Decision<'a> {
    let decider = Decider {
        fm: files.fm,
        options,
        check: files.check,
        head,
    };
    let mut d = Decision {
        answer: Answer::NotFound,
        policy: options.policy(),
        edits: Vec::new(),
        always_edits: Vec::new(),
        location: None,
        rule_redirect: false,
        status: None,
        retry_after: None,
    };
    let norm = httpfile::path::normalize_path(head.target, path);
    let rules = &*options.rules;
    let matched = match norm {
        Ok(p) if !rules.is_empty() => Some(rules.matching(&facts(head, p.rel))),
        _ => None,
    };
    // Rules that only edit header fields or limit the rate leave the answer
    // to the files: once a request is admitted, it is answered as if no
    // rule matched, with their edits. small_random with a rate limit on
    // every path, against no rule: 1.39x the instructions per request
    // through the whole rules path, 1.16x this way (callgrind; CPU per
    // request 1.07x -> 0.97x of the build before limits, in the harness).
    let keeps_answer = matched.as_ref().is_some_and(|m| m.keeps_answer());
    let refused = match matched.as_ref().filter(|_| keeps_answer) {
        Some(m) => {
            m.header_edits(&mut d.edits, false);
            m.header_edits(&mut d.always_edits, true);
            // The clock is read only when some rule limits.
            let limits = rules.has_rate_limits();
            limits
                .then(|| m.rate_limited(head.client, std::time::Instant::now()))
                .flatten()
        }
        None => None,
    };
    d.answer = match matched.as_ref().filter(|m| !m.is_empty() && !keeps_answer) {
        _ if refused.is_some() => {
            d.retry_after = refused.map(|r| r.retry_after);
            Answer::Plan(Box::new(plan::error(head.method, 429, "")))
        }
        None => match decider.answer(norm).await {
            // No rule names this path, but a symlink may lead into a
            // guarded tree: judged by where the file really is.
            Answer::File(r) if rules.has_guards() && !decider.real_path_permitted(&r) => {
                Answer::Plan(Box::new(plan::error(head.method, 403, "")))
            }
            a => a,
        },
        // Boxed: its future (error pages, rewrites, try_files) is the
        // largest of a decision's, and a request no rule matches would
        // otherwise carry its size too (this future: 4064 -> 2800 bytes),
        // in every servedir response future and HTTP/1.1 connection task.
        Some(m) => Box::pin(decider.by_rules(norm, m, &mut d)).await,
    };
    let by_file = match (&matched, &d.answer, norm) {
        (Some(by_request), Answer::File(r), Ok(p)) if d.status.is_none() => {
            decider.rules_of_served_file(by_request, r, p.rel)
        }
        _ => None,
    };
    if let Some(m) = by_file {
        m.header_edits(&mut d.edits, false);
        m.header_edits(&mut d.always_edits, true);
    }
    d
}

/// One request's context, which every stage of its decision reads: the
/// files, how the directory is served, who checks a file sent from its
/// descriptor, and the request. `'r` borrows the files and the head for
/// the decision's run; `'a` is what the [`Decision`] itself borrows.
#[derive(Clone, Copy)]
struct Decider<'r, 'a> {
    fm: &'r FileManager,
    options: &'a Options,
    check: Check,
    head: &'r RequestHead<'a>,
}

impl Decider<'_, '_> {
    /// Whether the guards let this client have the file at `rel`.
    fn permits(&self, rel: &str) -> bool {
        let head = self.head;
        (self.options.rules).permits(&facts(head, rel), head.client, head.authorization)
    }
}

/// What the rules match a request on.
fn facts<'h>(head: &RequestHead<'h>, rel: &'h str) -> Facts<'h> {
    let host = head.host.unwrap_or_default();
    Facts {
        method: head.method,
        rel,
        host,
        hostname: siterules::hostname(host),
        tls: head.tls,
        navigation: is_navigation(head, rel),
    }
}

/// A browser loading a page, as far as a request says: its path's last
/// segment names no extension, or its `Accept` names `text/html` (every
/// browser's navigation does; scripts, images and `fetch` do not).
fn is_navigation(head: &RequestHead<'_>, rel: &str) -> bool {
    let last = rel.rsplit('/').next().unwrap_or_default();
    !last.contains('.')
        || head
            .accept
            .is_some_and(|a| a.windows(9).any(|w| w.eq_ignore_ascii_case(b"text/html")))
}

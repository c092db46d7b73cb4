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
#![deny(missing_docs)]

mod compression;

pub use compression::{codec, coding, CompressionOptions};

use filemanager::{
    CachedFile, FileManager, ListOptions, Listing, OpenError, Query, Resolved, ResolvedFile,
    Sibling, Variant,
};
use httpfile::conditional::Precondition;
use httpfile::listing::{ListingEntry, ListingFormat, ListingView, Page};
use httpfile::mime::{AcceptEncoding, ContentCoding};
use httpfile::path::{NormPath, PathError};
use httpfile::plan::HeaderEdit;
use httpfile::plan::{self, FileInfo, MediaType, Plan, Policy, Route};
use httpfile::{ByteRange, EntityTag, Method, RequestHead};
use siterules::{Facts, Gate, Matched, Rules};
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
    /// pages, basic auth, allow/deny and CORS by path (see `siterules`).
    pub rules: Arc<Rules>,
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
    decide_checked(fm, options, Check::AtResolve, head, path)
}

/// [`decide`], with `check` saying who verifies a file sent from its
/// descriptor.
pub async fn decide_checked<'a>(
    fm: &FileManager,
    options: &'a Options,
    check: Check,
    head: &RequestHead<'a>,
    path: &'a mut Vec<u8>,
) -> Decision<'a> {
    let decider = Decider {
        fm,
        options,
        check,
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
    };
    let norm = httpfile::path::normalize_path(head.target, path);
    let rules = &*options.rules;
    let matched = match norm {
        Ok(p) if !rules.is_empty() => Some(rules.matching(&facts(head, p.rel))),
        _ => None,
    };
    d.answer = match matched.as_ref().filter(|m| !m.is_empty()) {
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

/// A request's target, normalized (or why it is not a path).
pub(crate) type Norm<'p> = Result<NormPath<'p>, PathError>;

/// What the files hold at `path`: an answer that borrows nothing of the
/// path, or a directory asked for without its `/` (the caller's redirect
/// names the path it has).
pub(crate) enum Found {
    Answer(Answer<'static>),
    Directory,
}

impl<'a> Decider<'_, 'a> {
    /// The answer for the request's own path, no rule applied: routed,
    /// then resolved; a directory asked for without its `/` is redirected
    /// to it.
    pub(crate) async fn answer(&self, norm: Norm<'a>) -> Answer<'a> {
        let path = match plan::route(self.head, norm, &self.options.policy()) {
            Route::Serve(path) => path,
            Route::Respond(p) if p.status == 404 => return Answer::NotFound,
            Route::Respond(p) => return Answer::Plan(Box::new(p)),
        };
        match self.resolve(path).await {
            Found::Answer(a) => a,
            Found::Directory => Answer::Plan(Box::new(plan::redirect_to_directory(
                self.head,
                &self.options.redirect_base,
                path.rel,
            ))),
        }
    }

    /// What the files hold at `path` for this request, its file checked as
    /// `self.check` says.
    pub(crate) async fn resolve(&self, path: NormPath<'_>) -> Found {
        let head = self.head;
        // A GET with a `Range` may ask for a few KiB of a large file, which a
        // `BeforeSendUpTo` sender reads whole and checks before any byte
        // leaves: its file is checked once the plan's body is known, not at
        // resolve (one check per range response, not two).
        let defer = match self.check {
            Check::BeforeSendUpTo(_) => head.range.is_some() && head.method == Method::Get,
            Check::AtResolve => false,
        };
        let check_files_over = match self.check {
            _ if defer => u64::MAX,
            Check::AtResolve => 0,
            Check::BeforeSendUpTo(size) => size,
        };
        let found = self.resolve_with(check_files_over, path).await;
        let (Check::BeforeSendUpTo(bound), Found::Answer(Answer::File(r))) = (self.check, &found)
        else {
            return found;
        };
        if !defer || self.body_within(r, bound) || self.fm.is_current(&r.file) {
            return found;
        }
        // Changed since it was cached: the reopened file, checked at
        // resolve (every file over 0 bytes).
        self.fm.invalidate(r.file.path());
        drop(found);
        self.resolve_with(0, path).await
    }

    /// Whether the file body the request gets of `r` is one range of at
    /// most `bound` bytes read from the descriptor: all of it is read, and
    /// the file checked, before any byte of the response leaves.
    fn body_within(&self, r: &Representation, bound: u64) -> bool {
        let (Precondition::Proceed { use_range: true }, Some(range), None) =
            (r.precondition, self.head.range, r.bytes())
        else {
            return false;
        };
        httpfile::range::single_range(range, r.size(), self.options.max_ranges)
            .is_some_and(|one| one.len() <= bound)
    }

    /// What the files hold at `path`, files larger than
    /// `check_files_over` bytes checked at resolve.
    async fn resolve_with(&self, check_files_over: u64, path: NormPath<'_>) -> Found {
        let (fm, options, head) = (self.fm, self.options, self.head);
        let accept = head
            .accept_encoding
            .map(AcceptEncoding::parse)
            .unwrap_or_default();
        let siblings = ContentCoding::PREFERENCE.map(|c| Sibling {
            suffix: c.suffix(),
            accepted: accept.accepts(c),
        });
        let query = Query {
            path: path.rel,
            dir_only: path.trailing_slash,
            siblings: if options.precompressed {
                &siblings
            } else {
                &[]
            },
            index: &options.index,
            listing: options.listing.then_some(ListOptions {
                hidden: options.dotfiles,
                max_entries: options.listing_max_entries,
            }),
            check_files_over,
        };
        let method = head.method;
        let a = match fm.resolve(&query).await {
            Ok(Resolved::File(f)) => Answer::File(self.represent(&accept, f).await),
            Ok(Resolved::Listing(listing)) => {
                Answer::Listing(self.listing_page(&listing, path.rel))
            }
            Ok(Resolved::Directory) => return Found::Directory,
            Ok(Resolved::NotFound) | Err(OpenError::NotFound) | Err(OpenError::IsDir) => {
                Answer::NotFound
            }
            Ok(Resolved::Forbidden) | Err(OpenError::Forbidden) => {
                let why = forbidden_reason(fm, path.rel).await;
                Answer::Plan(Box::new(plan::error(method, 403, why)))
            }
            Err(OpenError::Exhausted) => Answer::Plan(Box::new(plan::exhausted(method))),
            Err(OpenError::Io(e)) => {
                tracing::warn!("open failed: {e}");
                Answer::Plan(Box::new(plan::error(method, 500, "")))
            }
        };
        Found::Answer(a)
    }
}

/// The reason a 403 for `rel` gives in its body: asked of the file layer
/// again (a 403 is rare; this is never a hit's cost) and logged, at most one
/// line a second for the process so a client cannot flood the log. Neither
/// names anything outside the root. Empty when no reason is known.
async fn forbidden_reason(fm: &FileManager, rel: &str) -> &'static str {
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

/// What a path served instead of the request's own must be to count as
/// found.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Instead {
    /// A rewrite's target: whatever is there.
    Anything,
    /// A `try_files` entry: a file, or a directory asked for by its `/`
    /// (`{path}/`).
    File,
}

/// Why a path served instead of the request's is not served.
enum Refused {
    /// It does not normalize (a rule's target made `..` or NUL).
    NotAPath,
    /// A guard keeps it from this client.
    Guarded,
}

impl<'a> Decider<'_, 'a> {
    /// The answer when some rule matched: a CORS preflight, then the guards
    /// (a refused request learns nothing of what is there), a redirect, a
    /// rewrite, the files (`try_files` in turn), and an error page for an
    /// error. Every path served instead of the request's own is judged by
    /// the guards too.
    pub(crate) async fn by_rules(
        &self,
        norm: Norm<'a>,
        m: &Matched<'a>,
        d: &mut Decision<'a>,
    ) -> Answer<'a> {
        let head = self.head;
        m.header_edits(&mut d.edits, false);
        m.header_edits(&mut d.always_edits, true);
        // What no rule changes: a malformed request (400), a method other than
        // GET, HEAD and OPTIONS (405). A dotfile's 404 goes on to the error
        // page; OPTIONS to CORS.
        let options_204 = match plan::route(head, norm, &d.policy) {
            Route::Respond(p) if p.status == 204 => Some(p),
            Route::Respond(p) if p.status != 404 => return Answer::Plan(Box::new(p)),
            _ => None,
        };
        if let Some(preflight) = self.cors(m, d) {
            return preflight;
        }
        if let Some(refused) = self.guard(m, d).await {
            return refused;
        }
        if let Some(p) = options_204 {
            return Answer::Plan(Box::new(p));
        }
        let facts = facts(head, norm.map(|p| p.rel).unwrap_or_default());
        if let Some((status, url)) = m.redirect(&facts, head.target) {
            d.location = Some(url);
            d.rule_redirect = true;
            return Answer::Plan(Box::new(plan::error(head.method, status, "")));
        }
        let answer = match m.rewrite(&facts, head.target) {
            None => self.answer(norm).await,
            Some(target) => self.serve_instead(&target, d, Instead::Anything).await,
        };
        let answer = match answer {
            Answer::NotFound => self.try_files(m, &facts, d).await,
            a => a,
        };
        match answer {
            Answer::File(r) if self.options.rules.has_guards() && !self.real_path_permitted(&r) => {
                self.error_page(m, d, 403).await
            }
            Answer::NotFound => self.error_page(m, d, 404).await,
            Answer::Plan(p) if p.status >= 400 && m.error_page(p.status).is_some() => {
                self.error_page(m, d, p.status).await
            }
            a => a,
        }
    }

    /// The CORS fields of the answer, and the answer to a preflight. A
    /// preflight carries no credentials (Fetch): it is answered before the
    /// guards, and says nothing of the files. Every answer, a 401 or 403
    /// too, carries the CORS fields, so a page's script can read it.
    fn cors(&self, m: &Matched<'a>, d: &mut Decision<'a>) -> Option<Answer<'a>> {
        let head = self.head;
        let cors = m.cors()?;
        let preflight = cors.preflight(
            head.method,
            head.origin,
            head.access_control_request_method,
            head.access_control_request_headers,
            &mut d.edits,
        );
        if preflight == siterules::CorsAnswer::Preflight {
            let mut p = plan::error(Method::Get, 204, "");
            p.headers.allow = Some(plan::ALLOW);
            return Some(Answer::Plan(Box::new(p)));
        }
        cors.response_edits(head.origin, &mut d.edits);
        cors.response_edits(head.origin, &mut d.always_edits);
        None
    }

    /// The answer to a client the guards refuse (a 403's error page, a
    /// 401 with its challenge); `None` when they let it through.
    async fn guard(&self, m: &Matched<'a>, d: &mut Decision<'a>) -> Option<Answer<'a>> {
        let head = self.head;
        let method = head.method;
        match m.gate(head.client, head.authorization) {
            Gate::Pass => None,
            Gate::Deny => Some(self.error_page(m, d, 403).await),
            Gate::Challenge(auth) => Some(challenge(d, method, auth)),
            Gate::Verify(auths) => {
                let header = head.authorization.unwrap_or_default().to_vec();
                for auth in auths {
                    let h = header.clone();
                    let a = auth.clone();
                    let ok = tokio::task::spawn_blocking(move || a.verify(&h))
                        .await
                        .unwrap_or(false);
                    if !ok {
                        // The compiled rule outlives the decision: find it again
                        // by reference to borrow its challenge for 'a.
                        return Some(match m.gate(head.client, None) {
                            Gate::Challenge(a) => challenge(d, method, a),
                            _ => Answer::Plan(Box::new(plan::error(method, 401, ""))),
                        });
                    }
                }
                None
            }
        }
    }

    /// The first of the matching rule's `try_files` found, in order.
    async fn try_files(
        &self,
        m: &Matched<'a>,
        facts: &Facts<'_>,
        d: &mut Decision<'a>,
    ) -> Answer<'a> {
        let mut found = Answer::NotFound;
        for target in m.try_files(facts, self.head.target) {
            found = self.serve_instead(&target, d, Instead::File).await;
            if !matches!(found, Answer::NotFound) {
                break;
            }
        }
        found
    }

    /// A file reached through a symlink is judged by where it really is, so a
    /// link outside a protected tree does not open a file inside it.
    pub(crate) fn real_path_permitted(&self, r: &Representation) -> bool {
        let Some(real) = self.fm.real_path(&r.file) else {
            return true;
        };
        real == r.file.path().trim_start_matches('/') || self.permits(real)
    }

    /// The rules that match the file served but not the request's path `rel`
    /// (`/` serving `index.html`, a `try_files` or SPA fallback, a rewrite),
    /// whose header edits follow the request path's own, as nginx's internal
    /// redirect matches its locations again.
    pub(crate) fn rules_of_served_file(
        &self,
        by_request: &Matched<'a>,
        r: &Representation,
        rel: &str,
    ) -> Option<Matched<'a>> {
        let rules: &'a Rules = &self.options.rules;
        let path = r.file.path().trim_start_matches('/');
        // A precompressed sibling stands for the file it encodes.
        let served = match (&r.variant, r.coding) {
            (None, Some(c)) => path.strip_suffix(c.suffix()).unwrap_or(path),
            _ => path,
        };
        if served == rel {
            return None;
        }
        Some(
            rules
                .matching(&facts(self.head, served))
                .without(by_request),
        )
    }

    /// The answer for `target` (a rewrite, a `try_files` entry: a decoded
    /// path, normalized here) served in place of the request's path, when the
    /// guards let this client have it and it is what `wanted` counts as
    /// found.
    async fn serve_instead(
        &self,
        target: &str,
        d: &mut Decision<'a>,
        wanted: Instead,
    ) -> Answer<'a> {
        let only_files = wanted == Instead::File;
        let mut buf = Vec::new();
        let path = match self.guarded_path(target, &mut buf) {
            Ok(path) if path.dotfile && !self.options.dotfiles => return Answer::NotFound,
            Ok(path) => path,
            Err(Refused::NotAPath) => return Answer::NotFound,
            Err(Refused::Guarded) => {
                return Answer::Plan(Box::new(plan::error(self.head.method, 403, "")))
            }
        };
        match self.resolve(path).await {
            Found::Answer(Answer::Listing(_)) if only_files && !path.trailing_slash => {
                Answer::NotFound
            }
            Found::Answer(a) => a,
            // A `try_files` entry names a file: a directory there is not one,
            // and its redirect to the `/` form would send `{path}` for a
            // folder without an index back to itself forever.
            Found::Directory if only_files => Answer::NotFound,
            Found::Directory => {
                let loc = plan::Location {
                    base: &self.options.redirect_base,
                    path: path.rel,
                    query: b"",
                };
                let mut url = Vec::new();
                plan::FieldValue::Location(loc).write(&mut url);
                d.location = Some(String::from_utf8_lossy(&url).into_owned());
                Answer::Plan(Box::new(plan::error(self.head.method, 301, "")))
            }
        }
    }

    /// `target` (a decoded path a rule names) normalized into `buf`, when
    /// the guards let this client have it.
    fn guarded_path<'b>(
        &self,
        target: &str,
        buf: &'b mut Vec<u8>,
    ) -> Result<NormPath<'b>, Refused> {
        let mut encoded = Vec::with_capacity(target.len() + 8);
        httpfile::text::push_encoded_path(&mut encoded, target);
        let path = httpfile::path::normalize_path(&encoded, buf).map_err(|_| Refused::NotAPath)?;
        if self.permits(path.rel) {
            Ok(path)
        } else {
            Err(Refused::Guarded)
        }
    }

    /// `status`, answered with the page the rules name for it when there is
    /// one this client may have, else plainly (`404`: [`Answer::NotFound`]).
    async fn error_page(&self, m: &Matched<'a>, d: &mut Decision<'a>, status: u16) -> Answer<'a> {
        let head = self.head;
        let plain = || match status {
            404 => Answer::NotFound,
            s => Answer::Plan(Box::new(plan::error(head.method, s, ""))),
        };
        let Some(page) = m.error_page(status) else {
            return plain();
        };
        let mut buf = Vec::new();
        let Ok(path) = self.guarded_path(page, &mut buf) else {
            return plain();
        };
        // The page is the body of an error: no conditional or range applies.
        let bare = RequestHead {
            method: head.method,
            accept_encoding: head.accept_encoding,
            host: head.host,
            ..RequestHead::default()
        };
        let page = Decider {
            head: &bare,
            ..*self
        };
        match page.resolve(path).await {
            Found::Answer(Answer::File(r)) => {
                d.status = Some(status);
                Answer::File(r)
            }
            _ => plain(),
        }
    }
}

/// `401` with the realm's challenge.
fn challenge<'a>(
    d: &mut Decision<'a>,
    method: Method,
    auth: &'a siterules::BasicAuth,
) -> Answer<'a> {
    let challenge = HeaderEdit::Set("WWW-Authenticate", auth.challenge());
    d.edits.push(challenge);
    d.always_edits.push(challenge);
    Answer::Plan(Box::new(plan::error(method, 401, "")))
}

impl Decider<'_, '_> {
    /// The representation of `f` that the request gets, its preconditions
    /// evaluated once against the tag it goes out with.
    ///
    /// Compression, when the options compress the file's type and size and no
    /// sibling is served: every response varies by `Accept-Encoding`, identity
    /// ones too; the coding `accept` prefers is made now or taken from the
    /// kept variant (see [`CompressionOptions`](crate::CompressionOptions) for why the request waits). A
    /// request that revalidates the variant (`If-None-Match` with its tag)
    /// gets its `304` from the tag alone: no compression runs for it, even
    /// when the variant was evicted. A failed compression (the file changed
    /// while it was read) leaves the file to be sent as it is.
    pub(crate) async fn represent(
        &self,
        accept: &AcceptEncoding,
        f: ResolvedFile,
    ) -> Representation {
        let (fm, options, head) = (self.fm, self.options, self.head);
        let ResolvedFile {
            file,
            sibling,
            mime,
        } = f;
        let sibling_coding = sibling.map(|i| ContentCoding::PREFERENCE[i]);
        // A path that names a sibling itself is one file, not a negotiation.
        let is_sibling_path = || {
            ContentCoding::PREFERENCE
                .iter()
                .any(|c| file.path().ends_with(c.suffix()))
        };
        let vary = options.precompressed && (sibling.is_some() || !is_sibling_path());
        let compression = options
            .compression
            .as_ref()
            .filter(|c| sibling.is_none() && c.applies(mime, file.meta().size));
        let mut r = Representation {
            variant: None,
            coding: sibling_coding,
            vary: vary || compression.is_some(),
            mime,
            etag: EntityTag::of_file(file.meta().size, file.meta().mtime_ns),
            precondition: Precondition::Proceed { use_range: false },
            now: httpfile::date::now_secs(),
            file,
        };
        let chosen = compression.and_then(|c| Some((c, accept.choose(&c.codings)?)));
        let Some((c, coding)) = chosen else {
            r.precondition = plan::file_precondition(head, &r.info(), r.now);
            return r;
        };
        // The variant's tag is known before its bytes: evaluate with it first.
        r.coding = Some(coding);
        r.etag = r.etag.with_coding(coding);
        r.precondition = plan::file_precondition(head, &r.info(), r.now);
        if r.precondition == Precondition::NotModified {
            return r;
        }
        match fm.variant(&r.file, codec(coding), c.level(coding)).await {
            Ok(Some(v)) => {
                if r.precondition != Precondition::Failed && !head.is_head() {
                    fm.count_variant_served(&r.file, &v);
                }
                r.variant = Some(v);
            }
            outcome => {
                if let Err(e) = outcome {
                    tracing::debug!(path = r.file.path(), "not compressed: {e}");
                }
                // Sent as it is: its own tag, evaluated again (rare).
                r.coding = None;
                r.etag = EntityTag::of_file(r.file.meta().size, r.file.meta().mtime_ns);
                r.precondition = plan::file_precondition(head, &r.info(), r.now);
            }
        }
        r
    }
}

impl Decision<'_> {
    /// The plan of the answer alone, before the rules' header edits and
    /// `Location`.
    pub(crate) fn answer_plan<'s>(
        &'s self,
        head: &RequestHead<'_>,
        ranges: &'s mut Vec<ByteRange>,
    ) -> Plan<'s> {
        match &self.answer {
            Answer::File(r) if self.status.is_some() => {
                // An error page: the whole file, no validators or ranges
                // (they would describe the page, not the missing resource).
                let bare = RequestHead {
                    method: head.method,
                    ..RequestHead::default()
                };
                let mut p = plan::file_evaluated(
                    &bare,
                    &r.info(),
                    &self.policy,
                    r.now,
                    Precondition::Proceed { use_range: false },
                    ranges,
                    plan::random_boundary,
                );
                p.status = self.status.unwrap_or(404);
                p.headers.etag = None;
                p.headers.last_modified = None;
                p.headers.accept_ranges = false;
                p
            }
            Answer::Plan(p) => **p,
            Answer::NotFound => plan::error(head.method, 404, ""),
            Answer::File(r) => plan::file_evaluated(
                head,
                &r.info(),
                &self.policy,
                r.now,
                r.precondition,
                ranges,
                plan::random_boundary,
            ),
            Answer::Listing(page) => plan::listing(head, page, &self.policy),
        }
    }
}

impl Decider<'_, '_> {
    /// `listing` of the directory at `path` beneath the mount
    /// (`redirect_base`), rendered in the form the request asks for (HTML
    /// or JSON), filtered and sorted as its query says. The page names the
    /// URL path the client asked for (`/{base}/{path}/`); its links are
    /// relative, so they hold under any mount.
    pub(crate) fn listing_page(&self, listing: &Listing, path: &str) -> Page {
        let req = self.head;
        let rel_dir = path;
        let base = self.options.redirect_base.trim_matches('/');
        let shown;
        let path = if base.is_empty() {
            path
        } else {
            shown = [base, path].join("/");
            shown.trim_end_matches('/')
        };
        // Names a guard keeps from this client are not shown.
        let guarded = self.options.rules.has_guards();
        let mut child = String::new();
        let mut shown = |name: &str| {
            !guarded || {
                child.clear();
                if !rel_dir.is_empty() {
                    child.push_str(rel_dir);
                    child.push('/');
                }
                child.push_str(name);
                self.permits(&child)
            }
        };
        let kept: Vec<_> = listing.entries.iter().filter(|e| shown(&e.name)).collect();
        let entries = kept.iter().map(|e| ListingEntry {
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
}

//! What path answers: the request routed (`httpfile::plan::route`: method,
//! `Host`, body, target, dotfiles), then its path resolved in the files
//! (the file, its index, a sibling, a listing, a directory asked for
//! without its `/`), with the check of a file sent from its descriptor
//! done at resolve or left to the sender.

use crate::{Answer, Check, Decider, Representation};
use filemanager::{FileManager, ListOptions, OpenError, Query, Resolved, Sibling};
use httpfile::conditional::Precondition;
use httpfile::mime::{AcceptEncoding, ContentCoding};
use httpfile::path::{NormPath, PathError};
use httpfile::plan::{self, Plan, Route};
use httpfile::Method;

/// A request's target, normalized (or why it is not a path).
pub(crate) type Norm<'p> = Result<NormPath<'p>, PathError>;

/// What routing makes of a request, before any file is looked at.
pub(crate) enum Routed<'p> {
    /// Resolve this path.
    Serve(NormPath<'p>),
    /// Nothing is there for this client: a dotfile while they are not
    /// served.
    NotFound,
    /// `OPTIONS`: `204` with `Allow`.
    Options(Plan<'static>),
    /// Answered without the files: a malformed request (400), a method
    /// other than GET, HEAD and OPTIONS (405).
    Respond(Plan<'static>),
}

/// What the files hold at `path`: an answer that borrows nothing of the
/// path, or a directory asked for without its `/` (the caller's redirect
/// names the path it has).
pub(crate) enum Found {
    Answer(Answer<'static>),
    Directory,
}

impl<'a> Decider<'_, 'a> {
    /// The request routed under the options' policy.
    pub(crate) fn route(&self, norm: Norm<'a>) -> Routed<'a> {
        match plan::route(self.head, norm, &self.options.policy()) {
            Route::Serve(path) => Routed::Serve(path),
            // `httpfile` answers a hidden path with its 404 plan: the one
            // status read here, so that no caller compares statuses to
            // learn that nothing is there.
            Route::Respond(p) if p.status == 404 => Routed::NotFound,
            Route::Respond(p) if p.status == 204 => Routed::Options(p),
            Route::Respond(p) => Routed::Respond(p),
        }
    }

    /// The answer for the request's own path, no rule applied: routed,
    /// then resolved; a directory asked for without its `/` is redirected
    /// to it.
    pub(crate) async fn answer(&self, norm: Norm<'a>) -> Answer<'a> {
        let path = match self.route(norm) {
            Routed::Serve(path) => path,
            Routed::NotFound => return Answer::NotFound,
            Routed::Options(p) | Routed::Respond(p) => return Answer::Plan(Box::new(p)),
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
            .map(AcceptEncoding::parse_remembered)
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

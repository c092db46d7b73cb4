//! The site's rules applied to a request some rule matched: CORS, rate
//! limits, the guards (allow/deny, basic auth), a redirect, a rewrite,
//! `try_files` and error pages; the guards again on every path served
//! instead of the request's own and on where a file really is; and the
//! rules of the file served when it is not the path asked for.

use crate::route::{Found, Norm, Routed};
use crate::{facts, Answer, Decider, Decision, Representation};
use httpfile::path::NormPath;
use httpfile::plan::{self, HeaderEdit};
use httpfile::{Method, RequestHead};
use siterules::{Facts, Gate, Matched, Rules};
use std::time::Instant;

/// An error status a rule's error page may stand in for.
#[derive(Clone, Copy)]
enum Failure {
    /// Nothing is at the path ([`Answer::NotFound`] when no page is).
    NotFound,
    /// A guard refuses the client.
    Forbidden,
    /// Another error the answer's plan carries.
    Status(u16),
}

impl Failure {
    /// The status the error page is sent under.
    fn status(self) -> u16 {
        match self {
            Failure::NotFound => 404,
            Failure::Forbidden => 403,
            Failure::Status(s) => s,
        }
    }

    /// The answer when no page stands in.
    fn plain(self, method: Method) -> Answer<'static> {
        match self {
            Failure::NotFound => Answer::NotFound,
            f => Answer::Plan(Box::new(plan::error(method, f.status(), ""))),
        }
    }
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
    /// The answer when some rule matched: a CORS preflight, then the rate
    /// limits and the guards (a refused request learns nothing of what is
    /// there, and one over its rate costs no password check), a redirect,
    /// a rewrite, the files (`try_files` in turn), and an error page for an
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
        let options_204 = match self.route(norm) {
            Routed::Options(p) => Some(p),
            Routed::Respond(p) => return Answer::Plan(Box::new(p)),
            Routed::Serve(_) | Routed::NotFound => None,
        };
        if let Some(preflight) = self.cors(m, d) {
            return preflight;
        }
        if let Some(refused) = self.rate_limit(m, d).await {
            return refused;
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
                self.error_page(m, d, Failure::Forbidden).await
            }
            Answer::NotFound => self.error_page(m, d, Failure::NotFound).await,
            Answer::Plan(p) if p.status >= 400 && m.error_page(p.status).is_some() => {
                self.error_page(m, d, Failure::Status(p.status)).await
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

    /// `429` with `Retry-After` (or the rule's page for 429) when a
    /// matching `rate_limit` refuses this client; `None` when every one
    /// admits it. The clock is read only when some rule limits.
    async fn rate_limit(&self, m: &Matched<'a>, d: &mut Decision<'a>) -> Option<Answer<'a>> {
        if !self.options.rules.has_rate_limits() {
            return None;
        }
        let refused = m.rate_limited(self.head.client, Instant::now())?;
        d.retry_after = Some(refused.retry_after);
        Some(self.error_page(m, d, Failure::Status(429)).await)
    }

    /// The answer to a client the guards refuse (a 403's error page, a
    /// 401 with its challenge); `None` when they let it through.
    async fn guard(&self, m: &Matched<'a>, d: &mut Decision<'a>) -> Option<Answer<'a>> {
        let head = self.head;
        let method = head.method;
        match m.gate(head.client, head.authorization) {
            Gate::Pass => None,
            Gate::Deny => Some(self.error_page(m, d, Failure::Forbidden).await),
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

    /// `failure`, answered with the page the rules name for its status when
    /// there is one this client may have, else plainly (nothing found:
    /// [`Answer::NotFound`]).
    async fn error_page(
        &self,
        m: &Matched<'a>,
        d: &mut Decision<'a>,
        failure: Failure,
    ) -> Answer<'a> {
        let head = self.head;
        let status = failure.status();
        let Some(page) = m.error_page(status) else {
            return failure.plain(head.method);
        };
        let mut buf = Vec::new();
        let Ok(path) = self.guarded_path(page, &mut buf) else {
            return failure.plain(head.method);
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
            _ => failure.plain(head.method),
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

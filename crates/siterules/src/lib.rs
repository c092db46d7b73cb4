//! `siterules`: what a site says about its paths, beyond serving files:
//! response headers, redirects, rewrites, `try_files` (an SPA's fallback,
//! clean URLs), error pages, basic auth, IP allow/deny, CORS and
//! per-client rate limits.
//!
//! A site is an ordered list of [`RuleSpec`]s (the daemon's `[[rules]]`
//! tables, or built in code), compiled once into [`Rules`]. A request is
//! matched once, on its normalized, decoded path ([`glob`]), and every
//! rule that matches contributes; the `decide` crate applies the result,
//! so every listener and embedding server behaves the same.
//!
//! | what a matching rule says | how several matching rules combine |
//! |---|---|
//! | `allow` / `deny`, `basic_auth` | every one must pass (the strictest wins) |
//! | `rate_limit` | every one counts the request, up to the first that refuses it |
//! | `headers`, `add_headers`, `remove_headers` | all, in rule order |
//! | `redirect`, `rewrite`, `try_files`, `cors` | the first rule that says it |
//! | `error_pages` | per status, the first rule that names it |
//!
//! This crate matches and renders; it opens no file and runs no task. A
//! `rate_limit` keeps its buckets in a table of fixed size (512 KiB per
//! limited rule) allocated when the rule is compiled.
//! Password verification ([`BasicAuth::verify`]) is CPU work of tens of
//! milliseconds that a caller runs off its event loop.
//!
//! ```
//! use siterules::{Facts, RuleSpec, Rules};
//! let rules = Rules::compile(&[RuleSpec {
//!     path: "/assets/**".into(),
//!     headers: [("Cache-Control".into(), "max-age=31536000, immutable".into())].into(),
//!     ..RuleSpec::default()
//! }]).unwrap();
//! let facts = Facts { rel: "assets/app.3f9a.js", ..Facts::default() };
//! let m = rules.matching(&facts);
//! let mut edits = Vec::new();
//! m.header_edits(&mut edits, false);
//! assert_eq!(edits[0].name(), "Cache-Control");
//! ```
#![deny(missing_docs)]

mod auth;
mod cors;
pub mod glob;
mod ipnet;
mod ratelimit;
mod spec;
mod template;

pub use auth::{basic_auth_user, BasicAuth};
pub use cors::{Cors, CorsAnswer};
pub use glob::Glob;
pub use ipnet::IpNet;
pub use spec::{BasicAuthSpec, CorsSpec, RateLimitSpec, RuleError, RuleSpec};
pub use template::Template;

use httpfile::plan::HeaderEdit;
use httpfile::Method;
use ratelimit::RateLimiter;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

/// A site's rules, compiled.
#[derive(Debug, Default)]
pub struct Rules {
    specs: Vec<RuleSpec>,
    rules: Vec<Rule>,
    /// Some rule restricts access (allow/deny or basic auth): listings
    /// hide what a client may not open, and a file reached through a
    /// symlink is judged by where it really is.
    guards: bool,
    /// Some rule has a `rate_limit`.
    limits: bool,
}

/// One compiled rule.
#[derive(Debug)]
struct Rule {
    glob: Glob,
    methods: Option<Vec<Method>>,
    hosts: Vec<HostPattern>,
    scheme: Option<bool>,
    navigation_only: bool,
    edits: Vec<(Edit, String, String)>,
    /// The edits apply to errors and directory redirects too.
    always: bool,
    redirect: Option<(u16, Template)>,
    rewrite: Option<Template>,
    try_files: Vec<Template>,
    error_pages: Vec<(u16, String)>,
    auth: Option<Arc<BasicAuth>>,
    allow: Vec<IpNet>,
    deny: Vec<IpNet>,
    cors: Option<Cors>,
    rate_limit: Option<RateLimiter>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Edit {
    Set,
    Add,
    Remove,
}

/// A host name a rule or a site answers for: `example.com` exactly, or
/// `*.example.com` for any name ending in `.example.com`; ASCII
/// case-insensitive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostPattern {
    /// This name.
    Exact(String),
    /// Any name ending in this suffix (`.example.com`).
    Wildcard(String),
}

impl HostPattern {
    /// Parses `example.com` or `*.example.com` (no port).
    pub fn parse(h: &str) -> Result<HostPattern, String> {
        let (wildcard, name) = match h.strip_prefix("*.") {
            Some(name) => (true, name),
            None => (false, h),
        };
        // A `*` anywhere else (`*example.com`, `**`) would have matched
        // `badexample.com`, or every name.
        if name.is_empty()
            || name.contains([':', '*'])
            || !httpfile::head::is_valid_host(name.as_bytes())
        {
            return Err(format!(
                "`{h}` is not a host name (`example.com`, `*.example.com`)"
            ));
        }
        let name = name.to_ascii_lowercase();
        Ok(if wildcard {
            HostPattern::Wildcard(format!(".{name}"))
        } else {
            HostPattern::Exact(name)
        })
    }

    /// Whether `hostname` (without a port; see [`hostname`]) is this.
    pub fn matches(&self, hostname: &[u8]) -> bool {
        match self {
            HostPattern::Exact(h) => hostname.eq_ignore_ascii_case(h.as_bytes()),
            HostPattern::Wildcard(suffix) => {
                hostname.len() > suffix.len()
                    && hostname[hostname.len() - suffix.len()..]
                        .eq_ignore_ascii_case(suffix.as_bytes())
            }
        }
    }
}

/// What a request is matched on.
#[derive(Clone, Copy, Debug, Default)]
pub struct Facts<'a> {
    /// The method.
    pub method: Method,
    /// The normalized, decoded path, root-relative (no leading `/`).
    pub rel: &'a str,
    /// The `Host` (or `:authority`) as sent.
    pub host: &'a [u8],
    /// The host name asked for, without its port.
    pub hostname: &'a [u8],
    /// The request came over TLS.
    pub tls: bool,
    /// A navigation (see `RuleSpec::navigation_only`).
    pub navigation: bool,
}

/// The host name of a `Host` or `:authority` value: without the port,
/// and with an IPv6 literal's brackets kept.
pub fn hostname(host: &[u8]) -> &[u8] {
    if host.first() == Some(&b'[') {
        let end = host
            .iter()
            .position(|&b| b == b']')
            .map_or(host.len(), |p| p + 1);
        return &host[..end];
    }
    match host.iter().rposition(|&b| b == b':') {
        Some(p) => &host[..p],
        None => host,
    }
}

impl Rules {
    /// Compiles `specs`, in order, reporting every problem with its rule's
    /// position.
    pub fn compile(specs: &[RuleSpec]) -> Result<Rules, Vec<RuleError>> {
        let mut errors = Vec::new();
        let rules: Vec<Rule> = specs
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.compile(i + 1, &mut errors))
            .collect();
        if !errors.is_empty() {
            return Err(errors);
        }
        let guards = rules.iter().any(Rule::guards);
        let limits = rules.iter().any(|r| r.rate_limit.is_some());
        Ok(Rules {
            specs: specs.to_vec(),
            rules,
            guards,
            limits,
        })
    }

    /// The rules as written.
    pub fn specs(&self) -> &[RuleSpec] {
        &self.specs
    }

    /// Each rule's error pages: `(rule position from 1, status, page)`.
    pub fn error_pages(&self) -> impl Iterator<Item = (usize, u16, &str)> + '_ {
        self.rules.iter().enumerate().flat_map(|(i, r)| {
            r.error_pages
                .iter()
                .map(move |(status, page)| (i + 1, *status, page.as_str()))
        })
    }

    /// One line per rule: its match and what it does (for the log at start
    /// and reload).
    pub fn describe(&self) -> Vec<String> {
        self.rules
            .iter()
            .map(|r| {
                let mut parts = vec![r.glob.as_str().to_string()];
                if let Some(m) = &r.methods {
                    parts.push(format!("methods={m:?}"));
                }
                if !r.hosts.is_empty() {
                    parts.push(format!("hosts={}", r.hosts.len()));
                }
                if let Some(tls) = r.scheme {
                    parts.push(if tls { "https" } else { "http" }.to_string());
                }
                let mut does = Vec::new();
                if !r.allow.is_empty() || !r.deny.is_empty() {
                    does.push("allow/deny".to_string());
                }
                if let Some(a) = &r.auth {
                    does.push(format!("basic_auth({})", a.realm()));
                }
                if !r.edits.is_empty() {
                    does.push(format!("headers({})", r.edits.len()));
                }
                if let Some((status, _)) = &r.redirect {
                    does.push(format!("redirect({status})"));
                }
                if r.rewrite.is_some() {
                    does.push("rewrite".to_string());
                }
                if !r.try_files.is_empty() {
                    does.push("try_files".to_string());
                }
                if !r.error_pages.is_empty() {
                    does.push("error_pages".to_string());
                }
                if r.cors.is_some() {
                    does.push("cors".to_string());
                }
                if let Some(limit) = &r.rate_limit {
                    does.push(limit.describe());
                }
                format!("{} -> {}", parts.join(" "), does.join(", "))
            })
            .collect()
    }

    /// How many rules there are.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// No rules: every request is served as the options alone say.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Some rule restricts access.
    pub fn has_guards(&self) -> bool {
        self.guards
    }

    /// Some rule has a `rate_limit` (a caller reads the clock for
    /// [`Matched::rate_limited`] only then).
    pub fn has_rate_limits(&self) -> bool {
        self.limits
    }

    /// Each rule with a `rate_limit`: its position (from 1) and how many
    /// requests it refused since it was compiled (a counter for metrics).
    pub fn rate_limits(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.rules.iter().enumerate().filter_map(|(i, r)| {
            let limit = r.rate_limit.as_ref()?;
            Some((i + 1, limit.refusals()))
        })
    }

    /// The rules that match `facts`.
    ///
    /// A path that names a precompressed sibling (`a.js.gz`) also matches
    /// the guarded rules of the file it encodes (`*.js`): the sibling is
    /// that file's bytes.
    pub fn matching<'r>(&'r self, facts: &Facts<'_>) -> Matched<'r> {
        let stem = if self.guards {
            [".gz", ".br", ".zst"]
                .iter()
                .find_map(|s| facts.rel.strip_suffix(s))
        } else {
            None
        };
        let mut hits = Vec::new();
        for (i, r) in self.rules.iter().enumerate() {
            let by_stem = || stem.is_some_and(|stem| r.guards() && r.applies(facts, stem));
            if r.applies(facts, facts.rel) || by_stem() {
                hits.push(i);
            }
        }
        Matched { rules: self, hits }
    }

    /// Whether a client may open `rel` as far as the guards say without a
    /// password check: every matching `allow`/`deny` passes and every
    /// matching `basic_auth` already verified `authorization`. What a
    /// listing shows, and a symlink's target is judged by. A precompressed
    /// sibling is judged as the file it encodes too (see
    /// [`Rules::matching`]).
    pub fn permits(
        &self,
        facts: &Facts<'_>,
        client: Option<IpAddr>,
        authorization: Option<&[u8]>,
    ) -> bool {
        if !self.guards {
            return true;
        }
        let m = self.matching(facts);
        matches!(m.gate(client, authorization), Gate::Pass)
    }
}

/// Two rule sets are equal when they were written the same (a reload
/// that changes no rule keeps the compiled ones).
impl PartialEq for Rules {
    fn eq(&self, other: &Rules) -> bool {
        self.specs == other.specs
    }
}

impl Eq for Rules {}

impl Rule {
    /// Header edits and a `rate_limit` at most: once the limit admits the
    /// request, its answer is the files' own, with the edits on it.
    fn keeps_answer(&self) -> bool {
        self.redirect.is_none()
            && self.rewrite.is_none()
            && self.try_files.is_empty()
            && self.error_pages.is_empty()
            && !self.guards()
            && self.cors.is_none()
    }

    fn guards(&self) -> bool {
        self.auth.is_some() || !self.allow.is_empty() || !self.deny.is_empty()
    }

    #[inline]
    fn applies(&self, facts: &Facts<'_>, rel: &str) -> bool {
        self.glob.matches(rel)
            && self
                .methods
                .as_ref()
                .is_none_or(|m| m.contains(&facts.method))
            && self.scheme.is_none_or(|tls| tls == facts.tls)
            && (!self.navigation_only || facts.navigation)
            && (self.hosts.is_empty() || self.hosts.iter().any(|h| h.matches(facts.hostname)))
    }
}

/// Whether a request may go on, after every matching guard.
#[derive(Clone, Debug)]
pub enum Gate<'r> {
    /// Every guard passes.
    Pass,
    /// An `allow`/`deny` refuses the client: 403.
    Deny,
    /// A `basic_auth` wants credentials: 401 with its challenge.
    Challenge(&'r BasicAuth),
    /// These `basic_auth`s must verify the credentials sent (not yet
    /// verified: the caller runs [`BasicAuth::verify`] off its event loop).
    Verify(Vec<Arc<BasicAuth>>),
}

/// A request a `rate_limit` refused: what its 429 says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimited {
    /// Seconds until the client's bucket takes a request again, at least
    /// 1 (`Retry-After`).
    pub retry_after: u32,
    /// The refusing rule's position, from 1.
    pub rule: usize,
}

/// The rules one request matched.
#[derive(Debug)]
pub struct Matched<'r> {
    rules: &'r Rules,
    hits: Vec<usize>,
}

impl<'r> Matched<'r> {
    fn each(&self) -> impl Iterator<Item = &'r Rule> + '_ {
        let rules = &self.rules.rules;
        self.hits.iter().map(move |&i| &rules[i])
    }

    /// No rule matched.
    pub fn is_empty(&self) -> bool {
        self.hits.is_empty()
    }

    /// These matches less the rules `other` matched too (`other` from
    /// the same [`Rules`]).
    pub fn without(mut self, other: &Matched<'_>) -> Matched<'r> {
        self.hits.retain(|i| !other.hits.contains(i));
        self
    }

    /// The guards' verdict for `client` sending `authorization`.
    pub fn gate(&self, client: Option<IpAddr>, authorization: Option<&[u8]>) -> Gate<'r> {
        let mut verify = Vec::new();
        for r in self.each() {
            let denied = r.deny.iter().any(|n| client.is_none_or(|c| n.contains(c)));
            let allowed =
                r.allow.is_empty() || client.is_some_and(|c| r.allow.iter().any(|n| n.contains(c)));
            if denied || !allowed {
                return Gate::Deny;
            }
        }
        for r in self.each() {
            let Some(auth) = &r.auth else { continue };
            match authorization {
                None => return Gate::Challenge(auth),
                Some(h) if auth.is_verified(h) => {}
                Some(h) if !auth.is_well_formed(h) => {
                    auth.count_failure();
                    return Gate::Challenge(auth);
                }
                Some(_) => verify.push(auth.clone()),
            }
        }
        if verify.is_empty() {
            Gate::Pass
        } else {
            Gate::Verify(verify)
        }
    }

    /// Every header edit of the matching rules, in rule order; with
    /// `always_only`, those of the rules marked `always` alone (what an
    /// error or a directory redirect gets).
    pub fn header_edits(&self, out: &mut Vec<HeaderEdit<'r>>, always_only: bool) {
        for r in self.each().filter(|r| r.always || !always_only) {
            for (kind, name, value) in &r.edits {
                out.push(match kind {
                    Edit::Set => HeaderEdit::Set(name, value),
                    Edit::Add => HeaderEdit::Add(name, value),
                    Edit::Remove => HeaderEdit::Remove(name),
                });
            }
        }
    }

    /// The first matching redirect: its status and target, rendered for
    /// `facts` and the request's raw `target`.
    pub fn redirect(&self, facts: &Facts<'_>, target: &[u8]) -> Option<(u16, String)> {
        let r = self.each().find(|r| r.redirect.is_some())?;
        let (status, template) = r.redirect.as_ref()?;
        Some((*status, template.render(&r.glob, facts, target, true)))
    }

    /// The first matching rewrite: the path served instead (rendered,
    /// decoded; the caller normalizes it).
    pub fn rewrite(&self, facts: &Facts<'_>, target: &[u8]) -> Option<String> {
        let r = self.each().find(|r| r.rewrite.is_some())?;
        Some(r.rewrite.as_ref()?.render(&r.glob, facts, target, false))
    }

    /// The first matching `try_files`: the paths tried in order.
    pub fn try_files(&self, facts: &Facts<'_>, target: &[u8]) -> Vec<String> {
        self.each()
            .find(|r| !r.try_files.is_empty())
            .map(|r| {
                r.try_files
                    .iter()
                    .map(|t| t.render(&r.glob, facts, target, false))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The error page for `status`: a path from the root (`/404.html`).
    pub fn error_page(&self, status: u16) -> Option<&'r str> {
        self.each()
            .find_map(|r| r.error_pages.iter().find(|(s, _)| *s == status))
            .map(|(_, p)| p.as_str())
    }

    /// The first matching CORS policy.
    pub fn cors(&self) -> Option<&'r Cors> {
        self.each().find_map(|r| r.cors.as_ref())
    }

    /// Every matching rule only edits header fields or limits the rate
    /// (none at all: false): an admitted request is answered as if none
    /// matched, with the edits ([`Matched::header_edits`]).
    pub fn keeps_answer(&self) -> bool {
        !self.hits.is_empty() && self.each().all(Rule::keeps_answer)
    }

    /// Counts a request of `client` (the address the guards judge;
    /// `None`: not known) at `now` against every matching `rate_limit`,
    /// in rule order, up to the first that refuses it: that refusal, or
    /// `None` when every limit admits it.
    pub fn rate_limited(&self, client: Option<IpAddr>, now: Instant) -> Option<RateLimited> {
        self.hits.iter().find_map(|&i| {
            let limit = self.rules.rules[i].rate_limit.as_ref()?;
            let retry_after = limit.check(client, now).err()?;
            Some(RateLimited {
                retry_after,
                rule: i + 1,
            })
        })
    }
}

/// Credentials a `basic_auth` refused in this process, every rule and
/// reload together (absent ones are not counted: a browser's first
/// request never has them). Only grows: a metric's counter.
pub fn auth_failures() -> u64 {
    auth::FAILURES.load(std::sync::atomic::Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by fuzzing (fuzz/regressions/siterules_compile): a `*` not
    /// followed by `.` made a suffix match (`*example.com` took
    /// `badexample.com`; `*` and `**` took every name).
    #[test]
    fn a_host_wildcard_is_a_whole_label() {
        let w = HostPattern::parse("*.Example.com").unwrap();
        assert!(w.matches(b"www.example.com"));
        assert!(!w.matches(b"example.com"));
        assert!(!w.matches(b"badexample.com"));
        assert!(HostPattern::parse("example.com")
            .unwrap()
            .matches(b"EXAMPLE.com"));
        for bad in [
            "*example.com",
            "*",
            "**",
            "*.",
            "a.*.com",
            "*.*.com",
            "ex*.com",
        ] {
            assert!(HostPattern::parse(bad).is_err(), "{bad}");
        }
    }

    fn limited(path: &str, rate: &str, burst: u32) -> RuleSpec {
        RuleSpec {
            path: path.into(),
            rate_limit: Some(RateLimitSpec {
                rate: rate.into(),
                burst: Some(burst),
                ..RateLimitSpec::default()
            }),
            ..RuleSpec::default()
        }
    }

    /// A rule that only limits still matches its paths (the caller goes
    /// the rules' way for them), every matching limit counts the request
    /// up to the first that refuses it, and the refusals are counted per
    /// rule.
    #[test]
    fn rate_limits_match_combine_and_count() {
        let rules = Rules::compile(&[
            limited("/downloads/**", "1/m", 2),
            RuleSpec {
                path: "/downloads/big/**".into(),
                ..RuleSpec::default()
            },
            limited("/**", "1/m", 3),
        ])
        .unwrap();
        assert!(rules.has_rate_limits());
        assert!(rules.describe()[0].contains("rate_limit(1/m burst 2)"));
        let client = Some("192.0.2.1".parse().unwrap());
        let now = Instant::now();
        let ask = |rel: &str| {
            let facts = Facts {
                rel,
                ..Facts::default()
            };
            let m = rules.matching(&facts);
            assert!(!m.is_empty(), "{rel}");
            m.rate_limited(client, now)
        };
        assert_eq!(ask("downloads/a.iso"), None);
        assert_eq!(ask("downloads/a.iso"), None);
        let refused = ask("downloads/a.iso").unwrap();
        assert_eq!((refused.rule, refused.retry_after), (1, 60));
        // The refused request was not counted by the rule after: `/` has
        // one request of its 3 left.
        assert_eq!(ask("index.html"), None);
        assert_eq!(ask("index.html").map(|r| r.rule), Some(3));
        let counts: Vec<(usize, u64)> = rules.rate_limits().collect();
        assert_eq!(counts, [(1, 1), (3, 1)]);
        assert!(!Rules::compile(&[RuleSpec::default()])
            .unwrap()
            .has_rate_limits());
    }

    #[test]
    fn a_bad_rate_limit_is_named_by_position_and_field() {
        let mut unknown_key = limited("/**", "20/s", 1);
        unknown_key.rate_limit.as_mut().unwrap().key = "ip".into();
        let errors = Rules::compile(&[
            limited("/**", "20/s", 1),
            limited("/**", "0/s", 1),
            limited("/**", "20/s", 0),
            unknown_key,
        ])
        .unwrap_err();
        let fields: Vec<(usize, &str)> = errors.iter().map(|e| (e.rule, e.field)).collect();
        assert_eq!(
            fields,
            [(2, "rate_limit"), (3, "rate_limit"), (4, "rate_limit")]
        );
        assert!(errors[0]
            .to_string()
            .starts_with("rules[2].rate_limit: rate `0/s`"));
    }
}

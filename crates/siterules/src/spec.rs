//! A rule as written: the daemon's `[[rules]]` table and servedir's
//! builder take this one type, and [`Rules::compile`](crate::Rules::compile)
//! checks every field of it.

use crate::ratelimit::RateLimiter;
use crate::{BasicAuth, Cors, Edit, Glob, HostPattern, IpNet, Rule, Template};
use httpfile::field::{is_connection_specific, Name};
use httpfile::Method;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// One rule: which requests it matches (`path`, and optionally `methods`,
/// `hosts`, `scheme`) and what it does to them. Every field but `path` is
/// optional.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct RuleSpec {
    /// A path glob (`/assets/**`, `*.html`, `/`), matched on the
    /// normalized, decoded path, ASCII case-insensitively.
    pub path: String,
    /// Match only these methods (`GET`, `HEAD`, `OPTIONS`); empty: any.
    pub methods: Vec<String>,
    /// Match only these hosts (`example.com`, `*.example.com`); empty: any.
    pub hosts: Vec<String>,
    /// Match only `http` or `https` requests; empty: both.
    pub scheme: String,
    /// Match only navigations: a path whose last segment names no
    /// extension (`/users/42`, `/docs/`), or a request whose `Accept`
    /// names `text/html` (a browser loading a page). What scripts, images
    /// and `fetch` ask for (`/app.3f2a.js`, `/favicon.ico`) does not
    /// match: an SPA's fallback to its shell leaves asset misses a 404.
    pub navigation_only: bool,
    /// Header fields set on the response, replacing any of that name.
    /// Like nginx's `add_header`, on success (2xx, 304) and on this
    /// rule's own redirect only, not on errors nor on the redirect from a
    /// directory to its `/` form, unless `always`.
    pub headers: BTreeMap<String, String>,
    /// Header fields added beside any of that name.
    pub add_headers: BTreeMap<String, String>,
    /// Header fields removed.
    pub remove_headers: Vec<String>,
    /// `headers`, `add_headers` and `remove_headers` apply to every
    /// response, errors and directory redirects too (nginx's `always`).
    pub always: bool,
    /// Redirect to this target (placeholders: `{1}`.., `{path}`,
    /// `{query}`, `{uri}`, `{host}`, `{hostname}`).
    pub redirect: String,
    /// The redirect's status: 301, 302 (the default), 303, 307 or 308.
    pub status: u16,
    /// Serve this path instead (internal; the URL does not change).
    pub rewrite: String,
    /// Paths tried in order; the first that exists is served (`{path}`,
    /// `{path}.html`, `/index.html`). None: the request's own 404.
    pub try_files: Vec<String>,
    /// Pages served for an error status (`"404" = "/404.html"`), with the
    /// status kept.
    pub error_pages: BTreeMap<String, String>,
    /// Ask for a user and password.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub basic_auth: Option<BasicAuthSpec>,
    /// Clients allowed (addresses, CIDR blocks, `all`); empty: any
    /// (unless denied).
    pub allow: Vec<String>,
    /// Clients refused (addresses, CIDR blocks, `all`); wins over `allow`.
    pub deny: Vec<String>,
    /// Cross-origin requests allowed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cors: Option<CorsSpec>,
    /// Requests a client may make (429 with `Retry-After` beyond).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimitSpec>,
}

impl Default for RuleSpec {
    fn default() -> Self {
        RuleSpec {
            path: "/**".into(),
            methods: Vec::new(),
            hosts: Vec::new(),
            scheme: String::new(),
            navigation_only: false,
            headers: BTreeMap::new(),
            add_headers: BTreeMap::new(),
            remove_headers: Vec::new(),
            always: false,
            redirect: String::new(),
            status: 0,
            rewrite: String::new(),
            try_files: Vec::new(),
            error_pages: BTreeMap::new(),
            basic_auth: None,
            allow: Vec::new(),
            deny: Vec::new(),
            cors: None,
            rate_limit: None,
        }
    }
}

/// `basic_auth = { realm = "...", users = { name = "$2b$..." } }`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct BasicAuthSpec {
    /// The realm the browser shows.
    pub realm: String,
    /// User names and their bcrypt hashes.
    pub users: BTreeMap<String, String>,
}

/// `cors = { origins = ["https://app.example"], ... }`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct CorsSpec {
    /// Origins allowed (`scheme://host[:port]`), or `["*"]` for any.
    pub origins: Vec<String>,
    /// Methods allowed (default `GET`, `HEAD`).
    pub methods: Vec<String>,
    /// Request headers a preflight may ask for (default: `Range` and the
    /// conditional headers).
    pub headers: Vec<String>,
    /// Response headers the page's script may read.
    pub expose: Vec<String>,
    /// How long a browser may keep a preflight's answer, seconds.
    pub max_age: u64,
    /// Allow cookies and `Authorization` (named origins only).
    pub credentials: bool,
}

impl Default for CorsSpec {
    fn default() -> Self {
        CorsSpec {
            origins: Vec::new(),
            methods: Vec::new(),
            headers: Vec::new(),
            expose: Vec::new(),
            max_age: 600,
            credentials: false,
        }
    }
}

/// `rate_limit = { rate = "20/s", burst = 40, key = "client", exempt = [...] }`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct RateLimitSpec {
    /// Requests per second, minute or hour a key may make on average:
    /// `20/s`, `600/m`, `100/h` (at most 10000/s).
    pub rate: String,
    /// Requests that may arrive at once (at least 1); unset: the rate per
    /// second, rounded up (`20/s`: 20, `90/m`: 2), at least 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
    /// What a bucket is kept for: `client` (the client address the rules
    /// judge, an IPv6 client by its /64) or `rule` (one bucket for every
    /// client of the rule).
    pub key: String,
    /// Clients never limited: addresses and CIDR blocks.
    pub exempt: Vec<String>,
}

impl Default for RateLimitSpec {
    fn default() -> Self {
        RateLimitSpec {
            rate: String::new(),
            burst: None,
            key: "client".into(),
            exempt: Vec::new(),
        }
    }
}

/// One problem with one rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleError {
    /// The rule's position, counted from 1.
    pub rule: usize,
    /// Its field (`path`, `headers`, `basic_auth`, ...).
    pub field: &'static str,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rules[{}].{}: {}", self.rule, self.field, self.message)
    }
}

/// Fields a rule may not touch: framing and what the server vouches for,
/// beside the connection-specific ones
/// ([`httpfile::field::CONNECTION_SPECIFIC`]).
const FRAMING: [&str; 6] = [
    Name::ContentLength.lower(),
    Name::ContentRange.lower(),
    Name::ContentEncoding.lower(),
    "trailer",
    Name::Date.lower(),
    Name::Server.lower(),
];

/// An RFC 9110 token (a header name).
pub(crate) fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

impl RuleSpec {
    /// The rule compiled, or `None` with every problem of its fields in
    /// `errors` (rule `n`), in the order the fields are written: what it
    /// matches, its header edits, its actions, then who may have it.
    pub(crate) fn compile(&self, n: usize, errors: &mut Vec<RuleError>) -> Option<Rule> {
        let before = errors.len();
        let mut fail = Problems { rule: n, errors };
        let matching = self.matching(&mut fail);
        let captures = matching.glob.as_ref().map_or(9, Glob::capture_count);
        let edits = self.header_edits(&mut fail);
        let actions = self.actions(captures, &mut fail);
        let access = self.access(&mut fail);
        if fail.errors.len() > before {
            return None;
        }
        Some(Rule {
            glob: matching.glob?,
            methods: (!matching.methods.is_empty()).then_some(matching.methods),
            hosts: matching.hosts,
            scheme: matching.scheme,
            navigation_only: self.navigation_only,
            edits,
            always: self.always,
            redirect: actions.redirect,
            rewrite: actions.rewrite,
            try_files: actions.try_files,
            error_pages: actions.error_pages,
            auth: access.auth,
            allow: access.allow,
            deny: access.deny,
            cors: access.cors,
            rate_limit: access.rate_limit,
        })
    }

    /// `path`, `methods`, `hosts` and `scheme`: which requests it matches.
    fn matching(&self, fail: &mut Problems<'_>) -> Matching {
        let glob = Glob::new(&self.path).map_err(|m| fail.at("path", m)).ok();
        let mut methods = Vec::new();
        for m in &self.methods {
            match Method::from_token(m.as_bytes()) {
                Method::Other => {
                    fail.at("methods", format!("`{m}` is not one of GET, HEAD, OPTIONS"))
                }
                m => methods.push(m),
            }
        }
        let mut hosts = Vec::new();
        for h in &self.hosts {
            match HostPattern::parse(h) {
                Ok(p) => hosts.push(p),
                Err(m) => fail.at("hosts", m),
            }
        }
        let scheme = match self.scheme.as_str() {
            "" => None,
            "http" => Some(false),
            "https" => Some(true),
            o => {
                fail.at("scheme", format!("`{o}` is not http or https"));
                None
            }
        };
        Matching {
            glob,
            methods,
            hosts,
            scheme,
        }
    }

    /// `remove_headers`, `headers` and `add_headers`, in that order.
    fn header_edits(&self, fail: &mut Problems<'_>) -> Vec<(Edit, String, String)> {
        let remove = self
            .remove_headers
            .iter()
            .map(|n| ("remove_headers", Edit::Remove, n, ""));
        let set = self
            .headers
            .iter()
            .map(|(n, v)| ("headers", Edit::Set, n, v.as_str()));
        let add = self
            .add_headers
            .iter()
            .map(|(n, v)| ("add_headers", Edit::Add, n, v.as_str()));
        remove
            .chain(set)
            .chain(add)
            .filter(|&(field, _, name, value)| header_allowed(field, name, value, fail))
            .map(|(_, kind, name, value)| (kind, name.clone(), value.to_string()))
            .collect()
    }

    /// `redirect` (with `status`), `rewrite`, `try_files` and
    /// `error_pages`: what the rule answers instead of the request's path.
    /// `captures`: how many `{n}` the path's glob makes.
    fn actions(&self, captures: usize, fail: &mut Problems<'_>) -> Actions {
        let redirect = self.redirect(captures, fail);
        let rewrite = if self.rewrite.is_empty() {
            None
        } else {
            path_template("rewrite", &self.rewrite, captures, fail)
        };
        if rewrite.is_some() && redirect.is_some() {
            fail.at("rewrite", "a rule either redirects or rewrites".into());
        }
        let try_files = self
            .try_files
            .iter()
            .filter_map(|t| path_template("try_files", t, captures, fail))
            .collect();
        Actions {
            redirect,
            rewrite,
            try_files,
            error_pages: self.error_pages(fail),
        }
    }

    /// `redirect` and its `status` (302 unless it says).
    fn redirect(&self, captures: usize, fail: &mut Problems<'_>) -> Option<(u16, Template)> {
        if self.redirect.is_empty() {
            if self.status != 0 {
                fail.at(
                    "status",
                    "is the status of a `redirect`, and this rule has none".into(),
                );
            }
            return None;
        }
        let status = match self.status {
            0 => 302,
            s @ (301 | 302 | 303 | 307 | 308) => s,
            s => {
                fail.at(
                    "status",
                    format!("{s} is not a redirect status (301, 302, 303, 307, 308)"),
                );
                302
            }
        };
        if !(self.redirect.starts_with('/')
            || self.redirect.starts_with('{')
            || self.redirect.contains("://"))
        {
            fail.at(
                "redirect",
                format!("`{}` is neither a path (`/...`) nor a URL", self.redirect),
            );
        }
        Template::new(&self.redirect, captures)
            .map_err(|m| fail.at("redirect", m))
            .ok()
            .map(|t| (status, t))
    }

    /// `error_pages`: a status from 400 to 599 and a path from the root.
    fn error_pages(&self, fail: &mut Problems<'_>) -> Vec<(u16, String)> {
        let mut error_pages = Vec::new();
        for (status, page) in &self.error_pages {
            match status.parse::<u16>() {
                Ok(s @ 400..=599) if page.starts_with('/') && !page.contains('{') => {
                    error_pages.push((s, page.clone()))
                }
                Ok(400..=599) => fail.at(
                    "error_pages",
                    format!("`{page}` must be a path from the root (`/404.html`)"),
                ),
                _ => fail.at(
                    "error_pages",
                    format!("`{status}` is not an error status (400-599)"),
                ),
            }
        }
        error_pages
    }

    /// `basic_auth`, `allow`, `deny`, `cors` and `rate_limit`: who may
    /// have what the rule matches, from which origins, and how often.
    fn access(&self, fail: &mut Problems<'_>) -> Access {
        let auth = self.basic_auth.as_ref().and_then(|a| {
            let users = a
                .users
                .iter()
                .map(|(u, h)| (u.clone(), h.clone()))
                .collect();
            BasicAuth::new(&a.realm, users)
                .map(Arc::new)
                .map_err(|m| fail.at("basic_auth", m))
                .ok()
        });
        let allow = nets("allow", &self.allow, fail);
        let deny = nets("deny", &self.deny, fail);
        let cors = self.cors.as_ref().and_then(|c| {
            Cors::new(
                &c.origins,
                &c.methods,
                &c.headers,
                &c.expose,
                c.max_age,
                c.credentials,
            )
            .map_err(|m| fail.at("cors", m))
            .ok()
        });
        let rate_limit = self.rate_limit.as_ref().and_then(|r| {
            RateLimiter::new(&r.rate, r.burst, &r.key, &r.exempt)
                .map_err(|m| fail.at("rate_limit", m))
                .ok()
        });
        Access {
            auth,
            allow,
            deny,
            cors,
            rate_limit,
        }
    }
}

/// Where one rule's problems go, each with the rule's position.
struct Problems<'e> {
    rule: usize,
    errors: &'e mut Vec<RuleError>,
}

impl Problems<'_> {
    /// `field` of the rule is wrong: `message` says how.
    fn at(&mut self, field: &'static str, message: String) {
        self.errors.push(RuleError {
            rule: self.rule,
            field,
            message,
        })
    }
}

/// Which requests a rule matches, compiled (`glob`: `None` when the
/// path is wrong).
struct Matching {
    glob: Option<Glob>,
    methods: Vec<Method>,
    hosts: Vec<HostPattern>,
    scheme: Option<bool>,
}

/// What a rule answers instead of the request's path, compiled.
struct Actions {
    redirect: Option<(u16, Template)>,
    rewrite: Option<Template>,
    try_files: Vec<Template>,
    error_pages: Vec<(u16, String)>,
}

/// Who may have what a rule matches, compiled.
struct Access {
    auth: Option<Arc<BasicAuth>>,
    allow: Vec<IpNet>,
    deny: Vec<IpNet>,
    cors: Option<Cors>,
    rate_limit: Option<RateLimiter>,
}

/// Whether a rule may edit the header field `name` (its `field`): a
/// token the server does not write, with no control character in `value`.
fn header_allowed(field: &'static str, name: &str, value: &str, fail: &mut Problems<'_>) -> bool {
    if !is_token(name) {
        fail.at(field, format!("`{name}` is not a header name"));
    } else if FRAMING.iter().any(|f| f.eq_ignore_ascii_case(name)) || is_connection_specific(name) {
        fail.at(
            field,
            format!("`{name}` is written by the server and cannot be changed"),
        );
    } else if value.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
        fail.at(
            field,
            format!("the value of `{name}` holds a control character"),
        );
    } else {
        return true;
    }
    false
}

/// A `rewrite` or `try_files` entry: a path (`/...` or `{path}...`) with
/// at most `captures` numbered placeholders.
fn path_template(
    field: &'static str,
    text: &str,
    captures: usize,
    fail: &mut Problems<'_>,
) -> Option<Template> {
    if !(text.starts_with('/') || text.starts_with("{path}")) {
        fail.at(
            field,
            format!("`{text}` must be a path: start with `/` or `{{path}}`"),
        );
        return None;
    }
    Template::new(text, captures)
        .map_err(|m| fail.at(field, m))
        .ok()
}

/// `allow` or `deny`: addresses, CIDR blocks, or `all` (every IPv4 and
/// IPv6 address).
fn nets(field: &'static str, list: &[String], fail: &mut Problems<'_>) -> Vec<IpNet> {
    let mut out = Vec::new();
    for a in list {
        if a == "all" {
            out.push(IpNet::parse("0.0.0.0/0").expect("valid"));
            out.push(IpNet::parse("::/0").expect("valid"));
        } else {
            match IpNet::parse(a) {
                Ok(n) => out.push(n),
                Err(m) => fail.at(field, m),
            }
        }
    }
    out
}

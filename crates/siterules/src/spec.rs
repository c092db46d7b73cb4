//! A rule as written: the daemon's `[[rules]]` table and servedir's
//! builder take this one type, and [`Rules::compile`](crate::Rules::compile)
//! checks every field of it.

use crate::{BasicAuth, Cors, Edit, Glob, HostPattern, IpNet, Rule, Template};
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

/// Fields a rule may not touch: framing and what the server vouches for.
const FRAMING: [&str; 10] = [
    "content-length",
    "content-range",
    "content-encoding",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "trailer",
    "date",
    "server",
];

/// An RFC 9110 token (a header name).
pub(crate) fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

impl RuleSpec {
    pub(crate) fn compile(&self, n: usize, errors: &mut Vec<RuleError>) -> Option<Rule> {
        let before = errors.len();
        let mut fail = |field: &'static str, message: String| {
            errors.push(RuleError {
                rule: n,
                field,
                message,
            })
        };
        let glob = Glob::new(&self.path).map_err(|m| fail("path", m)).ok();
        let captures = glob.as_ref().map_or(9, Glob::capture_count);
        let mut methods = Vec::new();
        for m in &self.methods {
            match Method::from_token(m.as_bytes()) {
                Method::Other => fail("methods", format!("`{m}` is not one of GET, HEAD, OPTIONS")),
                m => methods.push(m),
            }
        }
        let mut hosts = Vec::new();
        for h in &self.hosts {
            match HostPattern::parse(h) {
                Ok(p) => hosts.push(p),
                Err(m) => fail("hosts", m),
            }
        }
        let scheme = match self.scheme.as_str() {
            "" => None,
            "http" => Some(false),
            "https" => Some(true),
            o => {
                fail("scheme", format!("`{o}` is not http or https"));
                None
            }
        };
        let mut edits = Vec::new();
        let mut header = |field, kind, name: &str, value: &str| {
            if !is_token(name) {
                fail(field, format!("`{name}` is not a header name"));
            } else if FRAMING.contains(&name.to_ascii_lowercase().as_str()) {
                fail(
                    field,
                    format!("`{name}` is written by the server and cannot be changed"),
                );
            } else if value.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
                fail(
                    field,
                    format!("the value of `{name}` holds a control character"),
                );
            } else {
                edits.push((kind, name.to_string(), value.to_string()));
            }
        };
        for name in &self.remove_headers {
            header("remove_headers", Edit::Remove, name, "");
        }
        for (name, value) in &self.headers {
            header("headers", Edit::Set, name, value);
        }
        for (name, value) in &self.add_headers {
            header("add_headers", Edit::Add, name, value);
        }
        let redirect = if self.redirect.is_empty() {
            if self.status != 0 {
                fail(
                    "status",
                    "is the status of a `redirect`, and this rule has none".into(),
                );
            }
            None
        } else {
            let status = match self.status {
                0 => 302,
                s @ (301 | 302 | 303 | 307 | 308) => s,
                s => {
                    fail(
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
                fail(
                    "redirect",
                    format!("`{}` is neither a path (`/...`) nor a URL", self.redirect),
                );
            }
            Template::new(&self.redirect, captures)
                .map_err(|m| fail("redirect", m))
                .ok()
                .map(|t| (status, t))
        };
        let path_template = |field, text: &str, fail: &mut dyn FnMut(&'static str, String)| {
            if !(text.starts_with('/') || text.starts_with("{path}")) {
                fail(
                    field,
                    format!("`{text}` must be a path: start with `/` or `{{path}}`"),
                );
                return None;
            }
            Template::new(text, captures)
                .map_err(|m| fail(field, m))
                .ok()
        };
        let rewrite = if self.rewrite.is_empty() {
            None
        } else {
            path_template("rewrite", &self.rewrite, &mut fail)
        };
        if rewrite.is_some() && redirect.is_some() {
            fail("rewrite", "a rule either redirects or rewrites".into());
        }
        let try_files = self
            .try_files
            .iter()
            .filter_map(|t| path_template("try_files", t, &mut fail))
            .collect();
        let mut error_pages = Vec::new();
        for (status, page) in &self.error_pages {
            match status.parse::<u16>() {
                Ok(s @ 400..=599) if page.starts_with('/') && !page.contains('{') => {
                    error_pages.push((s, page.clone()))
                }
                Ok(400..=599) => fail(
                    "error_pages",
                    format!("`{page}` must be a path from the root (`/404.html`)"),
                ),
                _ => fail(
                    "error_pages",
                    format!("`{status}` is not an error status (400-599)"),
                ),
            }
        }
        let auth = self.basic_auth.as_ref().and_then(|a| {
            let users = a
                .users
                .iter()
                .map(|(u, h)| (u.clone(), h.clone()))
                .collect();
            BasicAuth::new(&a.realm, users)
                .map(Arc::new)
                .map_err(|m| fail("basic_auth", m))
                .ok()
        });
        let nets = |field, list: &[String], fail: &mut dyn FnMut(&'static str, String)| {
            let mut out = Vec::new();
            for a in list {
                if a == "all" {
                    out.push(IpNet::parse("0.0.0.0/0").expect("valid"));
                    out.push(IpNet::parse("::/0").expect("valid"));
                } else {
                    match IpNet::parse(a) {
                        Ok(n) => out.push(n),
                        Err(m) => fail(field, m),
                    }
                }
            }
            out
        };
        let allow = nets("allow", &self.allow, &mut fail);
        let deny = nets("deny", &self.deny, &mut fail);
        let cors = self.cors.as_ref().and_then(|c| {
            Cors::new(
                &c.origins,
                &c.methods,
                &c.headers,
                &c.expose,
                c.max_age,
                c.credentials,
            )
            .map_err(|m| fail("cors", m))
            .ok()
        });
        if errors.len() > before {
            return None;
        }
        Some(Rule {
            glob: glob?,
            methods: (!methods.is_empty()).then_some(methods),
            hosts,
            scheme,
            navigation_only: self.navigation_only,
            edits,
            always: self.always,
            redirect,
            rewrite,
            try_files,
            error_pages,
            auth,
            allow,
            deny,
            cors,
        })
    }
}

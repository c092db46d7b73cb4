//! CORS, as the Fetch standard has a server answer it: a preflight
//! (`OPTIONS` with `Origin` and `Access-Control-Request-Method`) gets the
//! methods, headers and max-age it may use; every other response to an
//! allowed origin gets `Access-Control-Allow-Origin`. When the answer
//! depends on the `Origin` (a list of origins, or credentials) the
//! response says `Vary: Origin`, so a cache does not hand one origin's
//! answer to another. Credentials go only with a named origin, never `*`.

use httpfile::plan::HeaderEdit;
use httpfile::Method;

/// A compiled `cors` policy.
#[derive(Debug)]
pub struct Cors {
    any_origin: bool,
    origins: Vec<String>,
    methods: Vec<Method>,
    methods_value: String,
    /// Lowercase request header names a preflight may ask for.
    headers: Vec<String>,
    any_header: bool,
    expose: Option<String>,
    max_age: String,
    credentials: bool,
}

/// What a preflight gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CorsAnswer {
    /// Not a preflight: answer as usual, with [`Cors::response_edits`].
    NotPreflight,
    /// A preflight: `204` with the edits pushed (none when refused: the
    /// browser then stops the request).
    Preflight,
}

/// The request headers a preflight may ask for when `headers` is not set:
/// the ones a file request uses beyond the CORS-safelisted.
pub(crate) const DEFAULT_HEADERS: [&str; 6] = [
    "range",
    "if-match",
    "if-none-match",
    "if-modified-since",
    "if-unmodified-since",
    "if-range",
];

impl Cors {
    /// Checks and compiles a policy.
    pub fn new(
        origins: &[String],
        methods: &[String],
        headers: &[String],
        expose: &[String],
        max_age_secs: u64,
        credentials: bool,
    ) -> Result<Cors, String> {
        if origins.is_empty() {
            return Err("cors.origins names no origin (`*` for any)".into());
        }
        let any_origin = origins.iter().any(|o| o == "*");
        if any_origin && origins.len() > 1 {
            return Err("cors.origins: `*` stands alone".into());
        }
        if any_origin && credentials {
            return Err(
                "cors.credentials needs named origins: browsers refuse `*` with credentials".into(),
            );
        }
        for o in origins.iter().filter(|o| *o != "*") {
            let rest = o
                .strip_prefix("https://")
                .or_else(|| o.strip_prefix("http://"))
                .ok_or_else(|| format!("cors.origins: `{o}` is not scheme://host[:port]"))?;
            if rest.is_empty() || rest.contains('/') || rest.bytes().any(|b| b <= 0x20 || b >= 0x7f)
            {
                return Err(format!(
                    "cors.origins: `{o}` is not scheme://host[:port] (no path)"
                ));
            }
        }
        let mut ms = Vec::new();
        let methods: Vec<String> = if methods.is_empty() {
            vec!["GET".into(), "HEAD".into()]
        } else {
            methods.to_vec()
        };
        for m in &methods {
            match Method::from_token(m.as_bytes()) {
                Method::Other => {
                    return Err(format!(
                        "cors.methods: `{m}` is not served here (GET, HEAD, OPTIONS)"
                    ))
                }
                m => ms.push(m),
            }
        }
        let any_header = headers.iter().any(|h| h == "*");
        if any_header && credentials {
            return Err("cors.headers `*` does not go with credentials".into());
        }
        let headers: Vec<String> = if headers.is_empty() {
            DEFAULT_HEADERS.iter().map(|h| h.to_string()).collect()
        } else {
            headers.iter().map(|h| h.to_ascii_lowercase()).collect()
        };
        for h in headers.iter().chain(expose) {
            if h != "*" && !crate::spec::is_token(h) {
                return Err(format!("cors: `{h}` is not a header name"));
            }
        }
        Ok(Cors {
            any_origin,
            origins: origins.to_vec(),
            methods: ms,
            methods_value: methods.join(", "),
            headers,
            any_header,
            expose: (!expose.is_empty()).then(|| expose.join(", ")),
            max_age: max_age_secs.to_string(),
            credentials,
        })
    }

    fn allowed_origin<'a>(&self, origin: &'a [u8]) -> Option<&'a str> {
        let o = std::str::from_utf8(origin).ok()?;
        (self.any_origin || self.origins.iter().any(|a| a.eq_ignore_ascii_case(o))).then_some(o)
    }

    /// The answer depends on the request's `Origin`.
    fn varies(&self) -> bool {
        !self.any_origin || self.credentials
    }

    fn allow_origin<'a>(&'a self, origin: &'a str, out: &mut Vec<HeaderEdit<'a>>) {
        let value = if self.any_origin { "*" } else { origin };
        out.push(HeaderEdit::Set("Access-Control-Allow-Origin", value));
        if self.credentials {
            out.push(HeaderEdit::Set("Access-Control-Allow-Credentials", "true"));
        }
    }

    /// The CORS fields of an ordinary response to a request from `origin`.
    pub fn response_edits<'a>(&'a self, origin: Option<&'a [u8]>, out: &mut Vec<HeaderEdit<'a>>) {
        if self.varies() {
            out.push(HeaderEdit::Add("Vary", "Origin"));
        }
        if let Some(o) = origin.and_then(|o| self.allowed_origin(o)) {
            self.allow_origin(o, out);
            if let Some(e) = &self.expose {
                out.push(HeaderEdit::Set("Access-Control-Expose-Headers", e));
            }
        }
    }

    /// Answers a preflight, if `method`, `origin` and
    /// `Access-Control-Request-Method` make one.
    pub fn preflight<'a>(
        &'a self,
        method: Method,
        origin: Option<&'a [u8]>,
        request_method: Option<&'a [u8]>,
        request_headers: Option<&'a [u8]>,
        out: &mut Vec<HeaderEdit<'a>>,
    ) -> CorsAnswer {
        let (Method::Options, Some(origin), Some(rm)) = (method, origin, request_method) else {
            return CorsAnswer::NotPreflight;
        };
        out.push(HeaderEdit::Add(
            "Vary",
            "Origin, Access-Control-Request-Method, Access-Control-Request-Headers",
        ));
        let Some(origin) = self.allowed_origin(origin) else {
            return CorsAnswer::Preflight;
        };
        let method_ok = match Method::from_token(rm) {
            Method::Other => false,
            m => self.methods.contains(&m),
        };
        let asked = request_headers.and_then(|h| std::str::from_utf8(h).ok());
        let headers_ok = asked.is_none_or(|list| {
            self.any_header
                || list
                    .split(',')
                    .map(str::trim)
                    .filter(|h| !h.is_empty())
                    .all(|h| self.headers.iter().any(|a| a.eq_ignore_ascii_case(h)))
        });
        if !(method_ok && headers_ok) {
            return CorsAnswer::Preflight;
        }
        self.allow_origin(origin, out);
        out.push(HeaderEdit::Set(
            "Access-Control-Allow-Methods",
            &self.methods_value,
        ));
        if let Some(list) = asked.filter(|l| !l.trim().is_empty()) {
            out.push(HeaderEdit::Set("Access-Control-Allow-Headers", list));
        }
        out.push(HeaderEdit::Set("Access-Control-Max-Age", &self.max_age));
        CorsAnswer::Preflight
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names<'a>(e: &'a [HeaderEdit<'a>]) -> Vec<String> {
        e.iter()
            .map(|e| match e {
                HeaderEdit::Set(n, v) | HeaderEdit::Add(n, v) => format!("{n}: {v}"),
                HeaderEdit::Remove(n) => format!("-{n}"),
            })
            .collect()
    }

    #[test]
    fn any_origin_needs_no_vary() {
        let c = Cors::new(&["*".into()], &[], &[], &[], 600, false).unwrap();
        let mut e = Vec::new();
        c.response_edits(Some(b"https://a.example"), &mut e);
        assert_eq!(names(&e), ["Access-Control-Allow-Origin: *"]);
    }

    #[test]
    fn named_origins_echo_and_vary() {
        let c = Cors::new(&["https://a.example".into()], &[], &[], &[], 600, true).unwrap();
        let mut e = Vec::new();
        c.response_edits(Some(b"https://b.example"), &mut e);
        assert_eq!(names(&e), ["Vary: Origin"]);
        e.clear();
        c.response_edits(Some(b"https://a.example"), &mut e);
        assert_eq!(
            names(&e),
            [
                "Vary: Origin",
                "Access-Control-Allow-Origin: https://a.example",
                "Access-Control-Allow-Credentials: true"
            ]
        );
    }

    #[test]
    fn preflights() {
        let c = Cors::new(&["https://a.example".into()], &[], &[], &[], 600, false).unwrap();
        let mut e = Vec::new();
        let a = c.preflight(
            Method::Options,
            Some(b"https://a.example"),
            Some(b"GET"),
            Some(b"range, if-none-match"),
            &mut e,
        );
        assert_eq!(a, CorsAnswer::Preflight);
        assert!(names(&e).contains(&"Access-Control-Allow-Methods: GET, HEAD".to_string()));
        assert!(
            names(&e).contains(&"Access-Control-Allow-Headers: range, if-none-match".to_string())
        );
        e.clear();
        c.preflight(
            Method::Options,
            Some(b"https://a.example"),
            Some(b"DELETE"),
            None,
            &mut e,
        );
        assert!(!names(&e)
            .iter()
            .any(|n| n.starts_with("Access-Control-Allow-Origin")));
        e.clear();
        c.preflight(
            Method::Options,
            Some(b"https://a.example"),
            Some(b"GET"),
            Some(b"x-secret"),
            &mut e,
        );
        assert!(!names(&e)
            .iter()
            .any(|n| n.starts_with("Access-Control-Allow-Origin")));
        assert_eq!(
            c.preflight(
                Method::Get,
                Some(b"https://a.example"),
                Some(b"GET"),
                None,
                &mut e
            ),
            CorsAnswer::NotPreflight
        );
        assert!(Cors::new(&["*".into()], &[], &[], &[], 0, true).is_err());
        assert!(Cors::new(&["https://a.example/x".into()], &[], &[], &[], 0, false).is_err());
    }
}

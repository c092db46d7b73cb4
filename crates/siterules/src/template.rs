//! Targets with placeholders: a redirect's `Location`, a rewrite's or a
//! `try_files` entry's path.
//!
//! | placeholder | value |
//! |---|---|
//! | `{1}` .. `{9}` | what the rule's glob's `*` / `**` matched, in order |
//! | `{path}` | the normalized path, with its leading `/` |
//! | `{query}` | the query string, without `?` (empty when none) |
//! | `{uri}` | the path and query as the client sent them |
//! | `{host}` | the `Host` (or `:authority`) as sent, port included |
//! | `{hostname}` | the host without its port |
//!
//! In a redirect the values of `{1}`.. and `{path}` are percent-encoded,
//! so a decoded `%0d%0a` never reaches the `Location` line as a line
//! break; `{uri}` and `{query}` are the client's own valid bytes, and
//! every byte outside the URI characters is encoded anyway.

use crate::glob::Glob;
use crate::Facts;

/// A compiled target.
#[derive(Clone, Debug)]
pub struct Template {
    parts: Vec<Part>,
}

#[derive(Clone, Debug)]
enum Part {
    Lit(String),
    Capture(usize),
    Path,
    Query,
    Uri,
    Host,
    Hostname,
}

impl Template {
    /// Compiles `text`; `captures` is how many the rule's glob has.
    pub fn new(text: &str, captures: usize) -> Result<Template, String> {
        let mut parts = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                parts.push(Part::Lit(rest[..open].to_string()));
            }
            let close = rest[open..]
                .find('}')
                .ok_or_else(|| format!("`{text}`: `{{` without `}}`"))?
                + open;
            let name = &rest[open + 1..close];
            parts.push(match name {
                "path" => Part::Path,
                "query" => Part::Query,
                "uri" => Part::Uri,
                "host" => Part::Host,
                "hostname" => Part::Hostname,
                n => match n.parse::<usize>() {
                    Ok(i) if (1..=captures).contains(&i) => Part::Capture(i - 1),
                    Ok(i) => {
                        return Err(format!(
                            "`{text}`: {{{i}}} but the path glob captures {captures}"
                        ))
                    }
                    Err(_) => {
                        return Err(format!(
                            "`{text}`: unknown placeholder {{{n}}} (known: {{1}}.., {{path}}, \
                             {{query}}, {{uri}}, {{host}}, {{hostname}})"
                        ))
                    }
                },
            });
            rest = &rest[close + 1..];
        }
        if !rest.is_empty() {
            parts.push(Part::Lit(rest.to_string()));
        }
        if text.bytes().any(|b| b < 0x20 || b == 0x7f) {
            return Err(format!("`{text}` holds a control character"));
        }
        Ok(Template { parts })
    }

    /// Renders for a request: `glob` is the rule's (for captures), `target`
    /// the raw request target. `for_url`: encode decoded values (a
    /// `Location`); otherwise the result is a decoded path.
    pub fn render(&self, glob: &Glob, facts: &Facts<'_>, target: &[u8], for_url: bool) -> String {
        let mut caps = Vec::new();
        if self.parts.iter().any(|p| matches!(p, Part::Capture(_))) {
            glob.captures(facts.rel, &mut caps);
        }
        let query_at = target.iter().position(|&b| b == b'?');
        let mut out = Vec::new();
        let decoded = |out: &mut Vec<u8>, s: &str| {
            if for_url {
                httpfile::text::push_encoded_path(out, s)
            } else {
                out.extend_from_slice(s.as_bytes())
            }
        };
        let raw = |out: &mut Vec<u8>, b: &[u8]| {
            for &c in b {
                if c > 0x20 && c < 0x7f {
                    out.push(c);
                } else {
                    out.extend_from_slice(format!("%{c:02X}").as_bytes());
                }
            }
        };
        for p in &self.parts {
            match p {
                Part::Lit(s) => out.extend_from_slice(s.as_bytes()),
                Part::Capture(i) => {
                    if let Some(&(a, b)) = caps.get(*i) {
                        decoded(&mut out, &facts.rel[a..b]);
                    }
                }
                Part::Path => {
                    out.push(b'/');
                    decoded(&mut out, facts.rel);
                }
                Part::Query => {
                    if let Some(q) = query_at {
                        raw(&mut out, &target[q + 1..]);
                    }
                }
                Part::Uri => raw(&mut out, target),
                Part::Host => raw(&mut out, facts.host),
                Part::Hostname => raw(&mut out, facts.hostname),
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_captures_and_request_parts() {
        let g = Glob::new("/old/**").unwrap();
        let t = Template::new("https://{hostname}/new/{1}?{query}", 1).unwrap();
        let f = Facts {
            rel: "old/a b/c",
            hostname: b"example.com",
            host: b"example.com:8080",
            ..Facts::default()
        };
        assert_eq!(
            t.render(&g, &f, b"/old/a%20b/c?x=1", true),
            "https://example.com/new/a%20b/c?x=1"
        );
        let f = Facts {
            rel: "old/x\r\ny",
            ..f
        };
        assert!(!t.render(&g, &f, b"/old/x", true).contains('\n'));
        assert!(Template::new("/{2}", 1).is_err());
        assert!(Template::new("/{nope}", 1).is_err());
        assert!(Template::new("/{path", 1).is_err());
    }
}

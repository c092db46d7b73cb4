//! Rendering a directory listing as HTML or JSON, and its validator. The
//! entries come from whoever read the directory (`filemanager` resolves
//! each name beneath the root with the rules of every open); this module
//! only turns them into bytes.
//!
//! A listing shows names chosen by whoever can write to the tree, so the
//! HTML is built to stay inert whatever they are: every name is
//! HTML-escaped, and every href is `./` followed by the name with every byte
//! but RFC 3986 unreserved ones percent-encoded, a relative reference that no
//! browser can read as a scheme (`javascript:`), an authority (`//host`), a
//! query or a fragment. The plan ([`crate::plan::listing`]) adds a
//! `Content-Security-Policy` that allows no script at all.

use crate::head::RequestHead;
use std::fmt::Write;

/// The two forms a directory listing comes in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListingFormat {
    /// `text/html` (browsers).
    Html,
    /// `application/json` (asked for by `Accept`).
    Json,
}

impl ListingFormat {
    /// The form `req` asks for.
    pub fn of(req: &RequestHead<'_>) -> ListingFormat {
        let json = req.accept.is_some_and(|a| {
            a.windows(16)
                .any(|w| w.eq_ignore_ascii_case(b"application/json"))
        });
        if json {
            ListingFormat::Json
        } else {
            ListingFormat::Html
        }
    }
}

/// One listed name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListingEntry<'a> {
    /// The name inside the directory.
    pub name: &'a str,
    /// It is a directory (listed with a trailing `/`).
    pub is_dir: bool,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, Unix seconds.
    pub mtime_secs: i64,
}

/// A listing rendered in the form a request asked for, with its tag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page {
    /// The form `body` is in.
    pub format: ListingFormat,
    /// The page.
    pub body: String,
    /// Its weak entity-tag ([`etag`]).
    pub etag: String,
    /// Set when the listing was cut at this many entries.
    pub truncated: Option<u64>,
}

impl Page {
    /// Renders `entries` of the directory at URL path `/{path}/` in
    /// `format`; `truncated` says the directory held more.
    pub fn render<'a>(
        format: ListingFormat,
        path: &str,
        entries: impl ExactSizeIterator<Item = ListingEntry<'a>>,
        truncated: bool,
    ) -> Page {
        let shown = entries.len() as u64;
        let body = match format {
            ListingFormat::Json => json(entries),
            ListingFormat::Html => html(path, entries, truncated),
        };
        Page {
            format,
            etag: etag(&body),
            body,
            truncated: truncated.then_some(shown),
        }
    }
}

fn html_escape(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

/// Everything but RFC 3986 unreserved characters is encoded in an href:
/// `:` (a scheme), `/` and `\` (segments), `?` and `#`, `%`, quotes,
/// controls (a browser strips tabs and newlines from URLs) and non-ASCII.
fn push_href_name(name: &str, out: &mut String) {
    for &b in name.as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
}

fn push_json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The HTML page for URL path `/{path}/`. `truncated` notes a listing cut
/// at the entries given.
pub fn html<'a>(
    path: &str,
    entries: impl ExactSizeIterator<Item = ListingEntry<'a>>,
    truncated: bool,
) -> String {
    let shown = entries.len();
    let mut s =
        String::from("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of /");
    html_escape(path, &mut s);
    s.push_str("</title></head><body><h1>Index of /");
    html_escape(path, &mut s);
    s.push_str("</h1><ul>\n");
    if !path.is_empty() {
        s.push_str("<li><a href=\"../\">../</a></li>\n");
    }
    for e in entries {
        let slash = if e.is_dir { "/" } else { "" };
        // The encoded href has only unreserved characters and `%`: no escaping.
        s.push_str("<li><a href=\"./");
        push_href_name(e.name, &mut s);
        s.push_str(slash);
        s.push_str("\">");
        html_escape(e.name, &mut s);
        s.push_str(slash);
        s.push_str("</a>");
        if !e.is_dir {
            let _ = write!(s, " {}", e.size);
        }
        s.push_str("</li>\n");
    }
    s.push_str("</ul>\n");
    if truncated {
        let _ = writeln!(
            s,
            "<p>Only the first {shown} entries are shown (listing_max_entries).</p>"
        );
    }
    s.push_str("</body></html>\n");
    s
}

/// The JSON array `[{"name", "type": "file"|"directory", "size", "mtime"}]`
/// (mtime in Unix seconds).
pub fn json<'a>(entries: impl Iterator<Item = ListingEntry<'a>>) -> String {
    let mut s = String::from("[");
    for (i, e) in entries.enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str("{\"name\":");
        push_json_string(e.name, &mut s);
        let kind = if e.is_dir { "directory" } else { "file" };
        let _ = write!(
            s,
            ",\"type\":\"{kind}\",\"size\":{},\"mtime\":{}}}",
            e.size, e.mtime_secs
        );
    }
    s.push_str("]\n");
    s
}

/// A weak validator for a rendered listing: a hash of its bytes, so a
/// client revalidates (`If-None-Match`, 304) instead of downloading a page
/// that has not changed. Weak, because two renderings that mean the same
/// (the same entries) are all that is promised, not the same bytes forever.
pub fn etag(body: &str) -> String {
    use std::hash::{Hash, Hasher};
    // DefaultHasher::new() has fixed keys: the same page gives the same tag
    // across requests, workers and restarts of one build.
    let mut h = std::hash::DefaultHasher::new();
    body.hash(&mut h);
    format!("W/\"{:016x}\"", h.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries<'a>(names: &'a [&'a str]) -> impl ExactSizeIterator<Item = ListingEntry<'a>> {
        names.iter().map(|n| ListingEntry {
            name: n,
            is_dir: false,
            size: 1,
            mtime_secs: 0,
        })
    }

    #[test]
    fn hrefs_are_relative_and_encoded() {
        let names = ["javascript:alert(1)", "a b", "<x>", "é"];
        let page = html("d", entries(&names), false);
        assert!(
            page.contains("href=\"./javascript%3Aalert%281%29\""),
            "{page}"
        );
        assert!(page.contains("href=\"./a%20b\""), "{page}");
        assert!(page.contains("href=\"./%3Cx%3E\">&lt;x&gt;</a>"), "{page}");
        assert!(page.contains("href=\"./%C3%A9\""), "{page}");
        assert!(!page.contains("<x>"));
    }

    #[test]
    fn truncation_is_noted() {
        assert!(!html("", entries(&["a"]), false).contains("first"));
        assert!(html("", entries(&["a"]), true).contains("Only the first 1 entries"));
    }

    #[test]
    fn json_escapes_names() {
        let names = ["a\"b\\c\n\u{1}"];
        assert_eq!(
            json(entries(&names)),
            "[{\"name\":\"a\\\"b\\\\c\\n\\u0001\",\"type\":\"file\",\"size\":1,\"mtime\":0}]\n"
        );
        assert_eq!(json(entries(&[])), "[]\n");
    }
}

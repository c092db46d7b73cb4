//! Renders a directory listing (HTML or JSON). Pure: the entries come from
//! `filemanager::FileManager::list_dir`, which reads them beneath the root
//! with the resolution rules of every file open; this module only turns
//! them into bytes.
//!
//! A listing shows names chosen by whoever can write to the tree, so the
//! HTML is built to stay inert whatever they are: every name is
//! HTML-escaped, and every href is `./` followed by the percent-encoded name,
//! a relative reference that no browser can read as a scheme
//! (`javascript:`), an authority (`//host`), a query or a fragment. The
//! response headers (`conn.rs`) add a `Content-Security-Policy` that allows
//! no script at all.

use filemanager::{EntryKind, Listing};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use std::fmt::Write;

/// Everything but RFC 3986 unreserved characters is encoded in an href:
/// `:` (a scheme), `/` and `\` (segments), `?` and `#`, `%`, quotes,
/// controls (a browser strips tabs and newlines from URLs) and non-ASCII.
const HREF_ENCODE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

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

/// The HTML page for URL path `/rel/`.
pub fn html(rel: &str, listing: &Listing) -> String {
    let mut s =
        String::from("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of /");
    html_escape(rel, &mut s);
    s.push_str("</title></head><body><h1>Index of /");
    html_escape(rel, &mut s);
    s.push_str("</h1><ul>\n");
    if !rel.is_empty() {
        s.push_str("<li><a href=\"../\">../</a></li>\n");
    }
    for e in &listing.entries {
        let dir = e.kind == EntryKind::Dir;
        let slash = if dir { "/" } else { "" };
        // The encoded href has only unreserved characters and `%`: no escaping.
        let _ = write!(
            s,
            "<li><a href=\"./{}{slash}\">",
            utf8_percent_encode(&e.name, HREF_ENCODE)
        );
        html_escape(&e.name, &mut s);
        s.push_str(slash);
        s.push_str("</a>");
        if !dir {
            let _ = write!(s, " {}", e.size);
        }
        s.push_str("</li>\n");
    }
    s.push_str("</ul>\n");
    if listing.truncated {
        let _ = writeln!(
            s,
            "<p>Only the first {} entries are shown (listing_max_entries).</p>",
            listing.entries.len()
        );
    }
    s.push_str("</body></html>\n");
    s
}

/// The JSON array: `{"name", "type": "file"|"directory", "size", "mtime"}`
/// (mtime in Unix seconds).
pub fn json(listing: &Listing) -> String {
    let v: Vec<serde_json::Value> = listing
        .entries
        .iter()
        .map(|e| {
            serde_json::json!({
                "name": e.name,
                "type": if e.kind == EntryKind::Dir { "directory" } else { "file" },
                "size": e.size,
                "mtime": e.mtime_ns.div_euclid(1_000_000_000),
            })
        })
        .collect();
    let mut s = serde_json::Value::Array(v).to_string();
    s.push('\n');
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
    use filemanager::DirEntry;

    fn listing(names: &[&str]) -> Listing {
        Listing {
            entries: names
                .iter()
                .map(|n| DirEntry {
                    name: n.to_string(),
                    kind: EntryKind::File,
                    size: 1,
                    mtime_ns: 0,
                })
                .collect(),
            truncated: false,
        }
    }

    #[test]
    fn hrefs_are_relative_and_encoded() {
        let page = html("d", &listing(&["javascript:alert(1)", "a b", "<x>", "é"]));
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
        let mut l = listing(&["a"]);
        assert!(!html("", &l).contains("first"));
        l.truncated = true;
        assert!(html("", &l).contains("Only the first 1 entries"));
    }
}

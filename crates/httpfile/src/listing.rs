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
//!
//! The page is usable without one: a breadcrumb of `../` links, a table of
//! name, type, size and modification time (sizes in KiB/MiB/GiB, times in
//! UTC), sorting by a column through links (`?sort=size&order=desc`) and a
//! filter through a plain GET form (`?filter=`), both read by
//! [`ListingView::of`]; those links carry only fixed words and the
//! percent-encoded filter. Styles are inline (`style-src 'unsafe-inline'`)
//! and icons are drawn by CSS, so nothing else is fetched.
//!
//! ```
//! use httpfile::listing::{ListingEntry, ListingFormat, ListingView, Page, SortKey};
//! let view = ListingView::of_query(b"sort=size&order=desc&filter=.txt");
//! assert_eq!((view.sort, view.desc, view.filter.as_str()), (SortKey::Size, true, ".txt"));
//! let entries = [
//!     ListingEntry { name: "a.txt", is_dir: false, size: 10, mtime_secs: 0 },
//!     ListingEntry { name: "b.txt", is_dir: false, size: 2048, mtime_secs: 0 },
//!     ListingEntry { name: "c.png", is_dir: false, size: 99, mtime_secs: 0 },
//! ];
//! let page = Page::render(ListingFormat::Json, &view, "docs", entries.into_iter(), false);
//! assert!(page.body.starts_with(r#"[{"name":"b.txt""#) && !page.body.contains("c.png"));
//! ```

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

/// The column a listing is sorted by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SortKey {
    /// By name (directories first), the default.
    #[default]
    Name,
    /// By size (directories first).
    Size,
    /// By modification time (directories first).
    Modified,
}

impl SortKey {
    fn token(self) -> &'static str {
        match self {
            SortKey::Name => "name",
            SortKey::Size => "size",
            SortKey::Modified => "modified",
        }
    }
}

/// How a request asks to see a listing: sort column, direction and a name
/// filter, from the query (`?sort=name|size|modified&order=asc|desc&filter=`).
/// Unknown parameters and values are ignored.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListingView {
    /// The column to sort by.
    pub sort: SortKey,
    /// Descending order.
    pub desc: bool,
    /// Only names containing this (case-insensitive); empty shows all.
    pub filter: String,
}

/// Filters longer than this are cut: a name filter needs no more, and the
/// page repeats it in every sort link.
const FILTER_MAX: usize = 256;

impl ListingView {
    /// The view `req`'s target asks for.
    pub fn of(req: &RequestHead<'_>) -> ListingView {
        let query = req
            .target
            .iter()
            .position(|&b| b == b'?')
            .map_or(&[][..], |i| &req.target[i + 1..]);
        let query = query.split(|&b| b == b'#').next().unwrap_or_default();
        ListingView::of_query(query)
    }

    /// The view a query string (without `?`) asks for.
    pub fn of_query(query: &[u8]) -> ListingView {
        let mut v = ListingView::default();
        for pair in query.split(|&b| b == b'&') {
            let (k, val) = match pair.iter().position(|&b| b == b'=') {
                Some(i) => (&pair[..i], &pair[i + 1..]),
                None => (pair, &[][..]),
            };
            match k {
                b"sort" => {
                    v.sort = match val {
                        b"size" => SortKey::Size,
                        b"modified" | b"time" | b"date" => SortKey::Modified,
                        _ => SortKey::Name,
                    }
                }
                b"order" => v.desc = val == b"desc",
                b"filter" => {
                    let mut f = form_decode(val);
                    if f.len() > FILTER_MAX {
                        let mut end = FILTER_MAX;
                        while !f.is_char_boundary(end) {
                            end -= 1;
                        }
                        f.truncate(end);
                    }
                    v.filter = f.trim().to_string();
                }
                _ => {}
            }
        }
        v
    }

    /// Whether `name` passes the filter.
    fn shows(&self, name: &str) -> bool {
        self.filter.is_empty() || contains_ignore_case(name, &self.filter)
    }

    /// Sorts `entries` (directories always first) in this view's order.
    fn sort(&self, entries: &mut [ListingEntry<'_>]) {
        entries.sort_by(|a, b| {
            let by = match self.sort {
                SortKey::Name => a.name.cmp(b.name),
                SortKey::Size => a.size.cmp(&b.size).then_with(|| a.name.cmp(b.name)),
                SortKey::Modified => a
                    .mtime_secs
                    .cmp(&b.mtime_secs)
                    .then_with(|| a.name.cmp(b.name)),
            };
            let by = if self.desc { by.reverse() } else { by };
            b.is_dir.cmp(&a.is_dir).then(by)
        });
    }
}

/// `application/x-www-form-urlencoded` value: `+` is a space, `%XX` a byte;
/// bytes that are not UTF-8 are replaced.
fn form_decode(v: &[u8]) -> String {
    let hex = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    };
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    while i < v.len() {
        match v[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < v.len() => match (hex(v[i + 1]), hex(v[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn contains_ignore_case(hay: &str, needle: &str) -> bool {
    if hay.is_ascii() && needle.is_ascii() {
        let (h, n) = (hay.as_bytes(), needle.as_bytes());
        return n.len() <= h.len() && h.windows(n.len()).any(|w| w.eq_ignore_ascii_case(n));
    }
    hay.to_lowercase().contains(&needle.to_lowercase())
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
    /// `format`, filtered and sorted as `view` asks; `truncated` says the
    /// directory held more (the page notes at how many it was cut).
    pub fn render<'a>(
        format: ListingFormat,
        view: &ListingView,
        path: &str,
        entries: impl ExactSizeIterator<Item = ListingEntry<'a>>,
        truncated: bool,
    ) -> Page {
        let read = entries.len() as u64;
        let mut shown: Vec<ListingEntry<'a>> = entries.filter(|e| view.shows(e.name)).collect();
        view.sort(&mut shown);
        let body = match format {
            ListingFormat::Json => json(shown.iter().copied()),
            ListingFormat::Html => html(path, view, &shown, truncated.then_some(read)),
        };
        Page {
            format,
            etag: etag(&body),
            body,
            truncated: truncated.then_some(read),
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

/// The page's style: system fonts, light and dark, CSS-drawn icons, and
/// the type column dropped on a narrow screen. Inline, as the listing's CSP
/// allows styles and nothing else.
const STYLE: &str = "\
:root{color-scheme:light dark;--fg:#1f2328;--mute:#59636e;--line:#d1d9e0;--hi:#f6f8fa;--link:#0969da}\
@media(prefers-color-scheme:dark){:root{--fg:#e6edf3;--mute:#9198a1;--line:#3d444d;--hi:#151b23;--link:#4493f8}}\
body{font:15px/1.5 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:var(--fg);margin:0 auto;padding:1rem;max-width:64rem}\
h1{font-size:1.3rem;font-weight:600;margin:.3rem 0 1rem;overflow-wrap:anywhere}\
h1 a{color:var(--link);text-decoration:none}h1 a:hover{text-decoration:underline}\
form{display:flex;gap:.5rem;margin:0 0 1rem}\
input{flex:1;min-width:0;font:inherit;padding:.35rem .6rem;border:1px solid var(--line);border-radius:6px;background:transparent;color:inherit}\
button{font:inherit;padding:.35rem .9rem;border:1px solid var(--line);border-radius:6px;background:var(--hi);color:inherit}\
table{width:100%;border-collapse:collapse}\
th{text-align:left;font-weight:600;padding:.4rem .5rem;border-bottom:2px solid var(--line);white-space:nowrap}\
th a{color:inherit;text-decoration:none}th a:hover{color:var(--link)}\
td{padding:.3rem .5rem;border-bottom:1px solid var(--line)}tr:hover td{background:var(--hi)}\
.n{overflow-wrap:anywhere}.n a{color:var(--link);text-decoration:none}.n a:hover{text-decoration:underline}\
tbody a:before{content:'';display:inline-block;width:.8em;height:1em;margin-right:.6em;vertical-align:-.15em;border-radius:1px 5px 1px 1px;background:#818b98}\
tbody a.d:before{width:1.1em;height:.85em;vertical-align:-.05em;border-radius:1px 3px 2px 2px;background:#d4a72c}\
tbody a.u:before{background:none;width:1.1em;height:auto;content:'\\2191';color:var(--mute);vertical-align:0}\
tbody a.i:before{background:#bf3989}tbody a.a:before{background:#8250df}tbody a.v:before{background:#8250df}\
tbody a.z:before{background:#9a6700}tbody a.c:before{background:#1a7f37}tbody a.p:before{background:#cf222e}\
tbody a.h:before{background:#0969da}\
.t,.s,.m{color:var(--mute);white-space:nowrap}.s,.m{text-align:right;font-variant-numeric:tabular-nums}\
.e{color:var(--mute);text-align:center;padding:1.5rem}\
footer{color:var(--mute);margin-top:1rem;font-size:.9em}\
@media(max-width:40rem){.t{display:none}body{padding:.6rem}td,th{padding:.35rem .3rem}td.m{white-space:normal;width:5.5em}}";

/// The label and icon class for a listed name: directories, then a few
/// families of media types.
fn kind(e: &ListingEntry<'_>) -> (&'static str, &'static str) {
    if e.is_dir {
        return ("Folder", "d");
    }
    let (mime, _) = crate::mime::content_type(e.name);
    let (top, sub) = mime.split_once('/').unwrap_or((mime, ""));
    match (top, sub) {
        ("text", "html") => ("HTML", "h"),
        ("image", _) => ("Image", "i"),
        ("audio", _) => ("Audio", "a"),
        ("video", _) => ("Video", "v"),
        ("application", "pdf") => ("PDF", "p"),
        ("application", "javascript" | "json" | "xml" | "wasm" | "x-sh")
        | ("text", "javascript" | "css" | "x-rust" | "x-python" | "x-c" | "xml") => ("Code", "c"),
        ("text", _) => ("Text", "f"),
        (
            "application",
            "zip" | "gzip" | "x-tar" | "x-gzip" | "x-bzip2" | "x-xz" | "zstd" | "x-7z-compressed"
            | "vnd.rar" | "x-rar-compressed" | "java-archive",
        ) => ("Archive", "z"),
        _ => ("File", "f"),
    }
}

/// `n` bytes for people: `512 B`, `1.5 KiB`, `120.6 MiB`.
pub fn human_size(n: u64, out: &mut String) {
    if n < 1024 {
        let _ = write!(out, "{n} B");
        return;
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    let _ = write!(out, "{v:.1} {}", UNITS[unit]);
}

/// Unix seconds as `YYYY-MM-DD HH:MM` (UTC).
pub fn human_time(secs: i64, out: &mut String) {
    let (y, mo, d) = crate::date::civil_from_days(secs.div_euclid(86_400));
    let t = secs.rem_euclid(86_400);
    let _ = write!(
        out,
        "{y:04}-{mo:02}-{d:02} {:02}:{:02}",
        t / 3600,
        t / 60 % 60
    );
}

/// `?sort=..&order=..[&filter=..]`: only fixed words and the
/// percent-encoded filter, so the link cannot be more than a query.
fn push_view_query(sort: SortKey, desc: bool, filter: &str, out: &mut String) {
    out.push_str("?sort=");
    out.push_str(sort.token());
    out.push_str(if desc {
        "&amp;order=desc"
    } else {
        "&amp;order=asc"
    });
    if !filter.is_empty() {
        out.push_str("&amp;filter=");
        push_href_name(filter, out);
    }
}

/// The HTML page for URL path `/{path}/`, with `entries` already filtered
/// and sorted as `view` says. `truncated` is the number of entries read
/// when the directory held more.
pub fn html(
    path: &str,
    view: &ListingView,
    entries: &[ListingEntry<'_>],
    truncated: Option<u64>,
) -> String {
    let mut s = String::with_capacity(2048 + entries.len() * 160);
    s.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>Index of /",
    );
    html_escape(path, &mut s);
    s.push_str("</title><style>");
    s.push_str(STYLE);
    s.push_str("</style></head><body>\n<header><h1>Index of ");
    // The breadcrumb: each segment links up with `../` steps only.
    let segments: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let up = |n: usize, out: &mut String| {
        if n == 0 {
            out.push_str("./");
        }
        for _ in 0..n {
            out.push_str("../");
        }
    };
    s.push_str("<a href=\"");
    up(segments.len(), &mut s);
    s.push_str("\">/</a>");
    for (i, seg) in segments.iter().enumerate() {
        s.push_str("<a href=\"");
        up(segments.len() - 1 - i, &mut s);
        s.push_str("\">");
        html_escape(seg, &mut s);
        s.push_str("</a>/");
    }
    s.push_str("</h1>\n<form method=\"get\" role=\"search\"><input type=\"search\" name=\"filter\" value=\"");
    html_escape(&view.filter, &mut s);
    let _ = write!(
        s,
        "\" placeholder=\"Filter names\" aria-label=\"Filter names\">\
         <input type=\"hidden\" name=\"sort\" value=\"{}\">\
         <input type=\"hidden\" name=\"order\" value=\"{}\"><button>Filter</button></form></header>",
        view.sort.token(),
        if view.desc { "desc" } else { "asc" }
    );
    s.push_str("\n<main><table><thead><tr>");
    for (key, label, class) in [
        (SortKey::Name, "Name", "n"),
        (SortKey::Name, "Type", "t"),
        (SortKey::Size, "Size", "s"),
        (SortKey::Modified, "Modified (UTC)", "m"),
    ] {
        let _ = write!(s, "<th class=\"{class}\">");
        if class == "t" {
            s.push_str(label);
        } else {
            // The current column's link turns the order round.
            let current = view.sort == key;
            s.push_str("<a href=\"");
            push_view_query(key, current && !view.desc, &view.filter, &mut s);
            s.push_str("\">");
            s.push_str(label);
            if current {
                s.push_str(if view.desc { " \u{2193}" } else { " \u{2191}" });
            }
            s.push_str("</a>");
        }
        s.push_str("</th>");
    }
    s.push_str("</tr></thead>\n<tbody>\n");
    if !segments.is_empty() {
        s.push_str(
            "<tr><td class=\"n\"><a class=\"u\" href=\"../\">Parent directory</a></td>\
             <td class=\"t\"></td><td class=\"s\"></td><td class=\"m\"></td></tr>\n",
        );
    }
    let (mut dirs, mut files) = (0usize, 0usize);
    for e in entries {
        let (label, icon) = kind(e);
        let slash = if e.is_dir { "/" } else { "" };
        // The encoded href has only unreserved characters and `%`: no escaping.
        let _ = write!(s, "<tr><td class=\"n\"><a class=\"{icon}\" href=\"./");
        push_href_name(e.name, &mut s);
        s.push_str(slash);
        s.push_str("\">");
        html_escape(e.name, &mut s);
        s.push_str(slash);
        let _ = write!(s, "</a></td><td class=\"t\">{label}</td>");
        if e.is_dir {
            dirs += 1;
            s.push_str("<td class=\"s\">\u{2014}</td>");
        } else {
            files += 1;
            let _ = write!(s, "<td class=\"s\" title=\"{} bytes\">", e.size);
            human_size(e.size, &mut s);
            s.push_str("</td>");
        }
        s.push_str("<td class=\"m\">");
        human_time(e.mtime_secs, &mut s);
        s.push_str("</td></tr>\n");
    }
    if entries.is_empty() {
        s.push_str("<tr><td class=\"e\" colspan=\"4\">");
        if view.filter.is_empty() {
            s.push_str("Nothing here");
        } else {
            s.push_str("No name contains \u{201c}");
            html_escape(&view.filter, &mut s);
            s.push('\u{201d}');
        }
        s.push_str("</td></tr>\n");
    }
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    let _ = write!(
        s,
        "</tbody></table></main>\n<footer>{dirs} folder{}, {files} file{}",
        plural(dirs),
        plural(files)
    );
    if !view.filter.is_empty() {
        s.push_str(" match the filter");
    }
    s.push_str("</footer>\n");
    if let Some(n) = truncated {
        let _ = writeln!(
            s,
            "<p>Only the first {n} entries are shown (listing_max_entries).</p>"
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

    fn page(path: &str, names: &[&str], view: &ListingView, truncated: bool) -> String {
        Page::render(ListingFormat::Html, view, path, entries(names), truncated).body
    }

    #[test]
    fn hrefs_are_relative_and_encoded() {
        let names = ["javascript:alert(1)", "a b", "<x>", "é"];
        let page = page("d", &names, &ListingView::default(), false);
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
        let v = ListingView::default();
        assert!(!page("", &["a"], &v, false).contains("first"));
        assert!(page("", &["a"], &v, true).contains("Only the first 1 entries"));
    }

    #[test]
    fn breadcrumb_climbs_with_dot_dot_only() {
        let p = page("a/<b>", &["x"], &ListingView::default(), false);
        assert!(
            p.contains("Index of <a href=\"../../\">/</a><a href=\"../\">a</a>/<a href=\"./\">&lt;b&gt;</a>/</h1>"),
            "{p}"
        );
        assert!(
            page("", &["x"], &ListingView::default(), false).contains("<a href=\"./\">/</a></h1>")
        );
    }

    #[test]
    fn sort_links_and_filter_carry_only_fixed_words_and_encoded_text() {
        let v = ListingView::of_query(b"sort=size&order=desc&filter=%22%3E%3Cscript%3E+x&bogus=1");
        assert_eq!(v.filter, "\"><script> x");
        let p = page("", &["a\"><script> x", "b"], &v, false);
        assert!(!p.contains("<script>"), "{p}");
        assert!(p.contains("value=\"&quot;&gt;&lt;script&gt; x\""), "{p}");
        assert!(
            p.contains("href=\"?sort=size&amp;order=asc&amp;filter=%22%3E%3Cscript%3E%20x\">Size \u{2193}</a>"),
            "{p}"
        );
        assert!(
            p.contains("href=\"?sort=name&amp;order=asc&amp;filter="),
            "{p}"
        );
        // Filtered: only the one name.
        assert!(!p.contains("href=\"./b\""), "{p}");
        assert!(p.contains("0 folders, 1 file match the filter"), "{p}");
        // A bad escape or a long filter is taken as it is, cut.
        assert_eq!(ListingView::of_query(b"filter=%zz%4").filter, "%zz%4");
        assert_eq!(ListingView::of_query(&[b'f'; 1000][..]).filter, "");
        let long = [&b"filter="[..], &[b'x'; 1000][..]].concat();
        assert_eq!(ListingView::of_query(&long).filter.len(), 256);
    }

    #[test]
    fn sorting_keeps_directories_first() {
        let e = |name, is_dir, size, mtime_secs| ListingEntry {
            name,
            is_dir,
            size,
            mtime_secs,
        };
        let all = [
            e("b.txt", false, 5, 30),
            e("z", true, 0, 10),
            e("a.txt", false, 50, 20),
            e("c.txt", false, 1, 40),
            e("y", true, 0, 50),
        ];
        let order = |q: &[u8]| {
            let v = ListingView::of_query(q);
            let body = Page::render(ListingFormat::Json, &v, "", all.iter().copied(), false).body;
            let names: Vec<String> = body
                .split("\"name\":\"")
                .skip(1)
                .map(|r| r[..r.find('"').unwrap()].to_string())
                .collect();
            names.join(" ")
        };
        assert_eq!(order(b""), "y z a.txt b.txt c.txt");
        assert_eq!(order(b"order=desc"), "z y c.txt b.txt a.txt");
        assert_eq!(order(b"sort=size&order=desc"), "z y a.txt b.txt c.txt");
        assert_eq!(order(b"sort=modified"), "z y a.txt b.txt c.txt");
        assert_eq!(order(b"sort=modified&filter=TXT"), "a.txt b.txt c.txt");
    }

    #[test]
    fn sizes_and_times_for_people() {
        let f = |n| {
            let mut s = String::new();
            human_size(n, &mut s);
            s
        };
        assert_eq!(
            [f(0), f(1023), f(1536), f(10 << 20), f(3 << 40)],
            ["0 B", "1023 B", "1.5 KiB", "10.0 MiB", "3.0 TiB"]
        );
        let mut t = String::new();
        human_time(1_700_000_000, &mut t);
        assert_eq!(t, "2023-11-14 22:13");
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

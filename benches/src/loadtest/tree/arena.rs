//! The `arena` tree: the shape of HttpArena's static profile
//! (github.com/MDA2AV/HttpArena, MIT licence, `data/static/` and
//! `requests/static-rotate.lua`): the same 20 file names and sizes under
//! `static/`, with `.br` (brotli quality 11) and `.gz` (gzip level 9)
//! siblings where HttpArena has them, which is for every text file.
//!
//! The contents are generated here, not copied: HttpArena's own files come
//! from a seeded generator too (its `scripts/generate_static.py`). Text
//! kinds (CSS, JavaScript, HTML, SVG, JSON) are made of the tokens such
//! files are made of, with enough numbers and names in them that brotli
//! takes each to about the share of its size HttpArena's file compresses
//! to ([`ArenaFile::arena_br`]); fonts and images are a format header and
//! then incompressible bytes, as real WOFF2 and WebP files are.

use std::io::{self, Read, Write};
use std::sync::OnceLock;

use super::Rng;

/// The `Accept-Encoding` HttpArena's static profile sends with every request.
pub const ACCEPT_ENCODING: &str = "br;q=1, gzip;q=0.8";

/// Where the files are, in the tree and in URLs.
pub const DIR: &str = "static";

/// One file of HttpArena's static profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArenaFile {
    /// Its name under [`DIR`], HttpArena's.
    pub name: &'static str,
    /// Its size in bytes, HttpArena's.
    pub size: usize,
    /// Whether HttpArena ships `.br` and `.gz` siblings of it.
    pub siblings: bool,
    /// The size of HttpArena's `.br` sibling (0: none), the mark the
    /// generated text aims at.
    pub arena_br: usize,
}

/// What a file holds, by its extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A stylesheet.
    Css,
    /// Bundled JavaScript.
    Js,
    /// An HTML fragment.
    Html,
    /// An SVG image (text).
    Svg,
    /// A web app manifest.
    Json,
    /// A WOFF2 font (compressed already).
    Woff2,
    /// A WebP image (compressed already).
    Webp,
}

impl ArenaFile {
    /// What the file holds.
    pub fn kind(&self) -> Kind {
        match self.name.rsplit('.').next().unwrap_or_default() {
            "css" => Kind::Css,
            "js" => Kind::Js,
            "html" => Kind::Html,
            "svg" => Kind::Svg,
            "json" => Kind::Json,
            "woff2" => Kind::Woff2,
            _ => Kind::Webp,
        }
    }

    /// Its URL path (`/static/reset.css`).
    pub fn path(&self) -> String {
        format!("/{DIR}/{}", self.name)
    }
}

const fn text(name: &'static str, size: usize, arena_br: usize) -> ArenaFile {
    ArenaFile {
        name,
        size,
        siblings: true,
        arena_br,
    }
}

const fn binary(name: &'static str, size: usize) -> ArenaFile {
    ArenaFile {
        name,
        size,
        siblings: false,
        arena_br: 0,
    }
}

/// HttpArena's 20 files, in the order its wrk script (and its h2load URI
/// list) requests them round-robin.
pub const FILES: [ArenaFile; 20] = [
    text("reset.css", 8192, 2420),
    text("layout.css", 25600, 5615),
    text("theme.css", 18432, 4520),
    text("components.css", 204_800, 33268),
    text("utilities.css", 61440, 11595),
    text("analytics.js", 12288, 3899),
    text("helpers.js", 22528, 6612),
    text("app.js", 204_800, 47275),
    text("vendor.js", 307_200, 67294),
    text("router.js", 35840, 9665),
    text("header.html", 122_880, 9390),
    text("footer.html", 56320, 6974),
    binary("regular.woff2", 18432),
    binary("bold.woff2", 22528),
    text("logo.svg", 15344, 3028),
    text("icon-sprite.svg", 71680, 11739),
    binary("hero.webp", 46080),
    binary("thumb1.webp", 8192),
    binary("thumb2.webp", 6144),
    text("manifest.json", 2883, 735),
];

/// The oha `--rand-regex-url` path pattern over the 20 files (oha's
/// dialect takes `.` as a literal dot; a test checks it names every file).
pub const OHA_REGEX: &str = "/static/(reset.css|layout.css|theme.css|components.css|\
    utilities.css|analytics.js|helpers.js|app.js|vendor.js|router.js|header.html|footer.html|\
    regular.woff2|bold.woff2|logo.svg|icon-sprite.svg|hero.webp|thumb1.webp|thumb2.webp|\
    manifest.json)";

/// One generated file and its siblings.
#[derive(Debug, Clone)]
pub struct Generated {
    /// The file it is.
    pub file: ArenaFile,
    /// Its bytes.
    pub body: Vec<u8>,
    /// `.br` (brotli quality 11, a 4 MiB window), if it has siblings.
    pub br: Option<Vec<u8>>,
    /// `.gz` (gzip level 9, no name, mtime 0), if it has siblings.
    pub gz: Option<Vec<u8>>,
}

/// The whole tree, made once per process (quality 11 is slow) and shared
/// by the writer and the checks.
pub fn generated() -> &'static [Generated] {
    static TREE: OnceLock<Vec<Generated>> = OnceLock::new();
    TREE.get_or_init(|| {
        FILES
            .iter()
            .map(|file| {
                let body = contents(file);
                let (br, gz) = if file.siblings {
                    (Some(brotli(&body)), Some(gzip(&body)))
                } else {
                    (None, None)
                };
                Generated {
                    file: *file,
                    body,
                    br,
                    gz,
                }
            })
            .collect()
    })
}

/// HttpArena's siblings are brotli at quality 11 (Python's default window,
/// 22 bits).
pub fn brotli(src: &[u8]) -> Vec<u8> {
    let params = ::brotli::enc::BrotliEncoderParams {
        quality: 11,
        lgwin: 22,
        ..Default::default()
    };
    let mut out = Vec::with_capacity(src.len() / 3);
    ::brotli::BrotliCompress(&mut &src[..], &mut out, &params)
        .expect("compressing into memory cannot fail");
    out
}

/// HttpArena's `.gz` siblings are gzip at level 9.
pub fn gzip(src: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(
        Vec::with_capacity(src.len() / 3),
        flate2::Compression::new(9),
    );
    enc.write_all(src)
        .and_then(|()| enc.finish())
        .expect("compressing into memory cannot fail")
}

/// Decodes a response body sent with `Content-Encoding: coding`
/// (`identity` or none: as it is).
pub fn decode(coding: &str, body: &[u8]) -> io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(body.len() * 4);
    match coding {
        "" | "identity" => out.extend_from_slice(body),
        "br" => {
            ::brotli::BrotliDecompress(&mut &body[..], &mut out)?;
        }
        "gzip" => {
            flate2::read::GzDecoder::new(body).read_to_end(&mut out)?;
        }
        other => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("unexpected Content-Encoding {other:?}"),
            ))
        }
    }
    Ok(out)
}

/// How a server answered for one file, once its body decoded to the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    /// The `.br` or `.gz` sibling, byte for byte.
    Sibling,
    /// Compressed by the server itself (not the sibling's bytes).
    Own,
    /// Uncompressed.
    Identity,
}

/// Checks that `body`, sent with `Content-Encoding: coding` (`identity`
/// for none), decodes to the file of `g`, and says how it was sent.
pub fn served(g: &Generated, coding: &str, body: &[u8]) -> Result<Served, String> {
    let decoded = decode(coding, body).map_err(|e| format!("{coding} body: {e}"))?;
    if decoded != g.body {
        return Err(format!(
            "body ({} bytes, Content-Encoding {coding}) decodes to {} bytes that differ from the file's {}",
            body.len(),
            decoded.len(),
            g.body.len()
        ));
    }
    let sibling = match coding {
        "br" => g.br.as_deref(),
        "gzip" => g.gz.as_deref(),
        _ => return Ok(Served::Identity),
    };
    Ok(if sibling == Some(body) {
        Served::Sibling
    } else {
        Served::Own
    })
}

/// One line on what a server sent for the files, for the log and the
/// report: the codings with their counts and whether they were the
/// siblings (`br x15 (siblings), identity x5`), and a flag where a file
/// that has siblings came uncompressed or compressed by the server itself.
pub fn describe(answers: &[(ArenaFile, String, Served)]) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for (_, coding, how) in answers {
        let what = match how {
            Served::Sibling => format!("{coding} (siblings)"),
            Served::Own => format!("{coding} (own compression)"),
            Served::Identity => coding.clone(),
        };
        match counts.iter_mut().find(|(w, _)| *w == what) {
            Some((_, n)) => *n += 1,
            None => counts.push((what, 1)),
        }
    }
    let counted: Vec<String> = counts
        .iter()
        .map(|(what, n)| match what.split_once(' ') {
            Some((coding, note)) => format!("{coding} x{n} {note}"),
            None => format!("{what} x{n}"),
        })
        .collect();
    let mut line = counted.join(", ");
    let uncompressed: Vec<&str> = answers
        .iter()
        .filter(|(f, _, how)| f.siblings && *how == Served::Identity)
        .map(|(f, _, _)| f.name)
        .collect();
    if !uncompressed.is_empty() {
        line.push_str(&format!(
            "; FLAGGED: {} file(s) with siblings sent uncompressed ({})",
            uncompressed.len(),
            uncompressed.join(" ")
        ));
    }
    if answers.iter().any(|(_, _, how)| *how == Served::Own) {
        line.push_str("; FLAGGED: compresses by itself, does not send the siblings");
    }
    line
}

/// The bytes of `file`: exactly `file.size` of them, the same on every run.
pub fn contents(file: &ArenaFile) -> Vec<u8> {
    let mut rng = Rng::for_path(&file.path());
    let mut out = String::with_capacity(file.size + 1024);
    match file.kind() {
        Kind::Woff2 | Kind::Webp => return binary_contents(file, &mut rng),
        Kind::Css => {
            while out.len() < file.size {
                css_rule(&mut rng, &mut out);
            }
        }
        Kind::Js => {
            out.push_str(JS_PRELUDE);
            while out.len() < file.size {
                js_unit(&mut rng, &mut out);
            }
        }
        Kind::Html => {
            out.push_str(HTML_HEAD);
            while out.len() < file.size {
                html_block(&mut rng, &mut out);
            }
        }
        Kind::Svg => {
            out.push_str(
                "<svg xmlns=\"http://www.w3.org/2000/svg\" xmlns:xlink=\"http://www.w3.org/1999/xlink\">",
            );
            while out.len() < file.size {
                svg_symbol(&mut rng, &mut out);
            }
        }
        Kind::Json => {
            manifest(&mut rng, file.size, &mut out);
            // A whole document, padded with whitespace to the size.
            while out.len() < file.size {
                out.push(' ');
            }
        }
    }
    let mut bytes = out.into_bytes();
    bytes.truncate(file.size);
    bytes
}

/// A font or image: its format's header, then incompressible bytes.
fn binary_contents(file: &ArenaFile, rng: &mut Rng) -> Vec<u8> {
    let size = file.size as u32;
    let mut out = Vec::with_capacity(file.size + 8);
    if file.kind() == Kind::Woff2 {
        // Signature, flavor (TrueType), length, 9 tables.
        out.extend_from_slice(b"wOF2\x00\x01\x00\x00");
        out.extend_from_slice(&size.to_be_bytes());
        out.extend_from_slice(&[0, 9, 0, 0]);
    } else {
        // RIFF container of one lossy VP8 chunk.
        out.extend_from_slice(b"RIFF");
        out.extend_from_slice(&(size - 8).to_le_bytes());
        out.extend_from_slice(b"WEBPVP8 ");
        out.extend_from_slice(&(size - 20).to_le_bytes());
        out.extend_from_slice(&[0x10, 0x00, 0x00, 0x9d, 0x01, 0x2a]);
    }
    while out.len() < file.size {
        out.extend_from_slice(&rng.next().to_le_bytes());
    }
    out.truncate(file.size);
    out
}

const PREFIXES: [&str; 32] = [
    "btn",
    "card",
    "modal",
    "nav",
    "sidebar",
    "header",
    "footer",
    "hero",
    "alert",
    "badge",
    "toast",
    "tooltip",
    "dropdown",
    "tab",
    "accordion",
    "pagination",
    "progress",
    "avatar",
    "chip",
    "table",
    "form",
    "input",
    "select",
    "switch",
    "slider",
    "dialog",
    "drawer",
    "menu",
    "toolbar",
    "grid",
    "list",
    "panel",
];

const SUFFIXES: [&str; 24] = [
    "",
    "-sm",
    "-lg",
    "-primary",
    "-outline",
    "-icon",
    "-header",
    "-body",
    "-footer",
    "-title",
    "-content",
    "-wrapper",
    "-inner",
    "-overlay",
    "-toggle",
    "-label",
    "-item",
    "-active",
    "-disabled",
    "-error",
    "-dark",
    "-light",
    "-compact",
    "-expanded",
];

const VERBS: [&str; 32] = [
    "handle",
    "render",
    "update",
    "create",
    "delete",
    "fetch",
    "parse",
    "validate",
    "format",
    "compute",
    "init",
    "register",
    "subscribe",
    "dispatch",
    "emit",
    "get",
    "set",
    "is",
    "has",
    "resolve",
    "merge",
    "clone",
    "serialize",
    "normalize",
    "throttle",
    "debounce",
    "memoize",
    "invalidate",
    "retry",
    "schedule",
    "filter",
    "map",
];

const NOUNS: [&str; 32] = [
    "User",
    "Item",
    "List",
    "Data",
    "Config",
    "State",
    "Props",
    "Context",
    "Event",
    "Error",
    "Result",
    "Response",
    "Request",
    "Query",
    "Action",
    "Store",
    "Cache",
    "Stream",
    "Session",
    "Token",
    "Route",
    "Theme",
    "Layout",
    "Component",
    "Node",
    "Tree",
    "Queue",
    "Handler",
    "Module",
    "Chunk",
    "Field",
    "Record",
];

const CSS_PROPS: [&str; 24] = [
    "display",
    "position",
    "margin",
    "padding",
    "width",
    "height",
    "max-width",
    "font-size",
    "font-weight",
    "line-height",
    "color",
    "background-color",
    "border",
    "border-radius",
    "box-shadow",
    "opacity",
    "z-index",
    "transition",
    "transform",
    "gap",
    "flex",
    "justify-content",
    "align-items",
    "letter-spacing",
];

const KEYWORDS: [&str; 16] = [
    "flex",
    "block",
    "none",
    "grid",
    "inline-flex",
    "relative",
    "absolute",
    "center",
    "space-between",
    "auto",
    "inherit",
    "hidden",
    "pointer",
    "uppercase",
    "nowrap",
    "transparent",
];

/// A colour: mostly one of a theme's, at times any.
fn colour(rng: &mut Rng) -> String {
    const THEME: [&str; 16] = [
        "#1a1a2e",
        "#16213e",
        "#0f3460",
        "#e94560",
        "#f8f9fa",
        "#dee2e6",
        "#adb5bd",
        "#6c757d",
        "#212529",
        "#0d6efd",
        "#6610f2",
        "#dc3545",
        "#198754",
        "#ffc107",
        "#fff",
        "var(--primary)",
    ];
    match rng.below(4) {
        0 => format!("#{:06x}", rng.below(0x100_0000)),
        _ => rng.pick(&THEME).to_string(),
    }
}

/// A number with a unit, a colour or a keyword: the values CSS is made of.
fn css_value(rng: &mut Rng, prop: &str) -> String {
    const UNITS: [&str; 5] = ["px", "rem", "em", "%", "vh"];
    match (prop, rng.below(4)) {
        ("color" | "background-color", _) => colour(rng),
        ("border", _) => format!("{}px solid {}", 1 + rng.below(3), colour(rng)),
        ("box-shadow", _) => format!(
            "0 {}px {}px rgba(0,0,0,.{})",
            rng.below(12),
            rng.below(40),
            1 + rng.below(9)
        ),
        ("transition", _) => format!(
            "{} {}ms cubic-bezier(.{},0,.{},1)",
            rng.pick(&["all", "opacity", "transform", "color"]),
            50 * (1 + rng.below(12)),
            rng.below(10),
            rng.below(10)
        ),
        (_, 0) => rng.pick(&KEYWORDS).to_string(),
        (_, 1) => format!(
            "{}{} {}{}",
            rng.below(64),
            rng.pick(&UNITS),
            rng.below(64),
            rng.pick(&UNITS)
        ),
        _ => format!(
            "{}{}",
            rng.pick(&["0", ".25", ".5", "1", "1.5", "2", "3", "4", "8", "12", "16", "24"]),
            rng.pick(&UNITS)
        ),
    }
}

/// One CSS rule, at times inside a media query.
fn css_rule(rng: &mut Rng, out: &mut String) {
    let media = rng.below(8) == 0;
    if media {
        out.push_str(&format!(
            "@media (min-width:{}px){{",
            320 + 16 * rng.below(80)
        ));
    }
    out.push_str(&format!(".{}{}", rng.pick(&PREFIXES), rng.pick(&SUFFIXES)));
    match rng.below(4) {
        0 => out.push_str(&format!(" .{}{}", rng.pick(&PREFIXES), rng.pick(&SUFFIXES))),
        1 => out.push_str(rng.pick(&[":hover", ":focus", "::before", ":first-child"])),
        _ => {}
    }
    out.push('{');
    for _ in 0..2 + rng.below(6) {
        let prop = rng.pick(&CSS_PROPS);
        out.push_str(&format!("{prop}:{};", css_value(rng, prop)));
    }
    out.push_str("}\n");
    if media {
        out.push_str("}\n");
    }
}

const JS_PRELUDE: &str = "\"use strict\";var __webpack_modules__={},__webpack_module_cache__={};\
    function __webpack_require__(e){var t=__webpack_module_cache__[e];if(t!==void 0)return t.exports;\
    var n=__webpack_module_cache__[e]={exports:{}};return __webpack_modules__[e](n,n.exports,\
    __webpack_require__),n.exports}\n";

/// A camelCase name: a verb and a noun, at times two nouns.
fn js_name(rng: &mut Rng) -> String {
    let mut name = format!("{}{}", rng.pick(&VERBS), rng.pick(&NOUNS));
    if rng.below(3) == 0 {
        name.push_str(rng.pick(&NOUNS));
    }
    name
}

/// A short minified variable (`e`, `t2`, ...).
fn js_var(rng: &mut Rng) -> String {
    let letter = (b'a' + rng.below(26) as u8) as char;
    match rng.below(3) {
        0 => format!("{letter}{}", rng.below(10)),
        _ => letter.to_string(),
    }
}

/// One statement of minified bundle code.
fn js_statement(rng: &mut Rng) -> String {
    let (a, b, c) = (js_var(rng), js_var(rng), js_var(rng));
    match rng.below(8) {
        0 => format!("var {a}={b}.{}({c},{})", js_name(rng), rng.below(1000)),
        1 => format!("if({a}==null||{a}.length>{})return {b}", rng.below(1000)),
        2 => format!(
            "{a}.{}=\"{}-{:x}\"",
            js_name(rng),
            rng.pick(&PREFIXES),
            rng.next() & 0xff_ffff
        ),
        3 => format!(
            "for(var {a}=0;{a}<{b}.length;{a}++){c}[{a}]={}({b}[{a}],{})",
            js_name(rng),
            rng.below(100)
        ),
        4 => format!(
            "{a}.addEventListener(\"{}\",function({b}){{return {}({b},{c})}})",
            rng.pick(&["click", "input", "change", "keydown", "scroll", "load"]),
            js_name(rng)
        ),
        5 => format!(
            "return {a}?{b}.{}({}):{c}",
            js_name(rng),
            rng.below(100_000)
        ),
        6 => format!(
            "{a}=Object.assign({{}},{b},{{{}:{},{}:\"{}\"}})",
            js_name(rng),
            rng.below(1000),
            js_name(rng),
            rng.pick(&NOUNS)
        ),
        _ => format!(
            "await {a}.{}({b},{{timeout:{}}})",
            js_name(rng),
            rng.below(9999)
        ),
    }
}

/// A function, a class method block or a webpack module.
fn js_unit(rng: &mut Rng, out: &mut String) {
    let body: Vec<String> = (0..2 + rng.below(7)).map(|_| js_statement(rng)).collect();
    let body = body.join(";");
    let line = match rng.below(3) {
        0 => format!(
            "function {}({},{}){{{body}}}\n",
            js_name(rng),
            js_var(rng),
            js_var(rng)
        ),
        1 => format!(
            "__webpack_modules__[{}]=function(e,t,n){{\"use strict\";n.r(t);{body}}};\n",
            rng.below(10_000)
        ),
        _ => format!(
            "class {}{}{{constructor(e){{this.{}=e}}{}(t){{{body}}}}}\n",
            rng.pick(&NOUNS),
            rng.pick(&NOUNS),
            js_name(rng),
            js_name(rng)
        ),
    };
    out.push_str(&line);
}

const HTML_HEAD: &str = "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
    <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
    <link rel=\"stylesheet\" href=\"/static/reset.css\"><link rel=\"stylesheet\" href=\"/static/layout.css\">\
    <link rel=\"stylesheet\" href=\"/static/theme.css\"><link rel=\"stylesheet\" href=\"/static/components.css\">\
    <link rel=\"icon\" href=\"/static/logo.svg\" type=\"image/svg+xml\"></head><body>\n";

const HTML_TEXTS: [&str; 12] = [
    "Dashboard overview",
    "Recent activity",
    "Account settings",
    "Team members",
    "Billing and plans",
    "Notifications",
    "Search results",
    "Getting started",
    "Documentation",
    "Release notes",
    "Privacy policy",
    "Contact support",
];

/// A card row, a table, a list or a nav: markup repeated with small changes.
fn html_block(rng: &mut Rng, out: &mut String) {
    match rng.below(4) {
        0 => {
            out.push_str("<div class=\"row\">");
            for _ in 0..2 + rng.below(3) {
                out.push_str(&format!(
                    "<div class=\"col-md-4\"><div class=\"card card-{}\"><div class=\"card-header\">\
                     <svg class=\"icon\"><use href=\"/static/icon-sprite.svg#icon-{}\"/></svg>\
                     <span class=\"card-title\">{}</span><span class=\"badge\">{}</span></div>\
                     <div class=\"card-body\" data-id=\"{:x}\"><p class=\"text-muted\">{} for {}.</p></div></div></div>",
                    rng.pick(&SUFFIXES[1..]).trim_start_matches('-'),
                    rng.pick(&PREFIXES),
                    rng.pick(&HTML_TEXTS),
                    rng.below(100),
                    rng.next() & 0xffff_ffff,
                    rng.pick(&HTML_TEXTS),
                    rng.pick(&NOUNS).to_lowercase()
                ));
            }
            out.push_str("</div>\n");
        }
        1 => {
            out.push_str("<table class=\"table\"><tbody>");
            for i in 0..3 + rng.below(8) {
                out.push_str(&format!(
                    "<tr class=\"table-row\" data-key=\"{:x}\"><td class=\"table-cell\">{}</td><td class=\"table-cell\">{}</td>\
                     <td class=\"table-cell\"><span class=\"badge badge-{}\">{}</span></td></tr>",
                    rng.next() & 0xff_ffff,
                    i + 1,
                    rng.pick(&NOUNS),
                    rng.pick(&["primary", "success", "danger", "muted"]),
                    rng.pick(&["Active", "Pending", "Error", "Done"])
                ));
            }
            out.push_str("</tbody></table>\n");
        }
        2 => {
            out.push_str("<ul class=\"list-group\">");
            for _ in 0..3 + rng.below(6) {
                out.push_str(&format!(
                    "<li class=\"list-item\"><a href=\"/{}/{}\" data-id=\"{:x}\">{}</a></li>",
                    rng.pick(&PREFIXES),
                    rng.below(1000),
                    rng.next() & 0xffff_ffff,
                    rng.pick(&HTML_TEXTS)
                ));
            }
            out.push_str("</ul>\n");
        }
        _ => {
            out.push_str("<nav class=\"nav\">");
            for _ in 0..3 + rng.below(5) {
                out.push_str(&format!(
                    "<a class=\"nav-link\" href=\"/{}\" aria-label=\"{}\">{}</a>",
                    rng.pick(&PREFIXES),
                    rng.pick(&HTML_TEXTS),
                    rng.pick(&HTML_TEXTS)
                ));
            }
            out.push_str("</nav>\n");
        }
    }
}

/// One icon: a `<symbol>` with path data.
fn svg_symbol(rng: &mut Rng, out: &mut String) {
    out.push_str(&format!(
        "<symbol id=\"icon-{}{}\" viewBox=\"0 0 24 24\"><path fill=\"none\" stroke=\"currentColor\" \
         stroke-width=\"2\" stroke-linecap=\"round\" d=\"M{} {}",
        rng.pick(&PREFIXES),
        rng.pick(&SUFFIXES),
        rng.below(24),
        rng.below(24)
    ));
    for _ in 0..4 + rng.below(10) {
        let cmd = rng.pick(&["L", "l", "C", "c", "H", "V", "a"]);
        let point = |rng: &mut Rng| {
            format!(
                "{}.{} {}.{}",
                rng.below(24),
                rng.below(10),
                rng.below(24),
                rng.below(10)
            )
        };
        let args = match cmd {
            "C" | "c" => format!("{} {} {}", point(rng), point(rng), point(rng)),
            "H" | "V" => format!("{}", rng.below(24)),
            "a" => format!("2 2 0 0 1 {}", point(rng)),
            _ => point(rng),
        };
        out.push_str(&format!("{cmd}{args}"));
    }
    out.push_str("z\"/></symbol>\n");
}

/// A web app manifest of about `size` bytes, valid JSON.
fn manifest(rng: &mut Rng, size: usize, out: &mut String) {
    out.push_str(
        "{\"name\":\"Static benchmark application\",\"short_name\":\"Static\",\"start_url\":\"/\",\
         \"display\":\"standalone\",\"theme_color\":\"#1a1a2e\",\"background_color\":\"#ffffff\",\"icons\":[",
    );
    let mut first = true;
    // Leave room for the closing brackets and the last entry.
    while out.len() + 200 < size {
        if !first {
            out.push(',');
        }
        first = false;
        let s = 16 * (1 + rng.below(32));
        out.push_str(&format!(
            "{{\"src\":\"/icons/{}-{s}x{s}.{:08x}.png\",\"sizes\":\"{s}x{s}\",\"type\":\"image/png\",\"purpose\":\"{}\"}}",
            rng.pick(&PREFIXES),
            rng.next() & 0xffff_ffff,
            rng.pick(&["any", "maskable", "any maskable"])
        ));
    }
    out.push_str("]}\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_have_httparenas_names_sizes_and_siblings() {
        assert_eq!(FILES.len(), 20);
        let total: usize = FILES.iter().map(|f| f.size).sum();
        // HttpArena's data/static/ without the siblings: 1,271,603 bytes.
        assert_eq!(total, 1_271_603);
        for f in FILES {
            let body = contents(&f);
            assert_eq!(body.len(), f.size, "{}", f.name);
            assert_eq!(body, contents(&f), "{}: not deterministic", f.name);
            let text = matches!(
                f.kind(),
                Kind::Css | Kind::Js | Kind::Html | Kind::Svg | Kind::Json
            );
            assert_eq!(f.siblings, text, "{}", f.name);
            assert_eq!(f.siblings, f.arena_br > 0, "{}", f.name);
            if text {
                assert!(std::str::from_utf8(&body).is_ok(), "{}", f.name);
            }
        }
        let names: Vec<&str> = FILES.iter().map(|f| f.name).collect();
        assert_eq!(&names[..3], ["reset.css", "layout.css", "theme.css"]);
        assert_eq!(names[19], "manifest.json");
        assert_eq!(FILES[0].path(), "/static/reset.css");
        // The manifest is one JSON document.
        let manifest: serde_json::Value =
            serde_json::from_slice(&contents(&FILES[19])).expect("manifest.json is JSON");
        assert!(manifest["icons"].as_array().is_some_and(|a| a.len() > 10));
        assert!(contents(&FILES[12]).starts_with(b"wOF2"));
        assert!(contents(&FILES[16]).starts_with(b"RIFF"));
        assert_eq!(&contents(&FILES[16])[8..16], b"WEBPVP8 ");
    }

    #[test]
    fn the_oha_regex_names_every_file_once() {
        let inner = OHA_REGEX
            .strip_prefix("/static/(")
            .and_then(|r| r.strip_suffix(')'))
            .unwrap();
        let names: Vec<&str> = inner.split('|').collect();
        assert_eq!(names, FILES.map(|f| f.name));
    }

    /// The siblings decode to their file, and each kind compresses about
    /// as HttpArena's does: text to within 0.6-1.6x of the size of its
    /// `.br` (all of them together within 0.9-1.25x), fonts and images
    /// not at all.
    #[test]
    fn siblings_decode_to_the_file_and_compress_like_httparenas() {
        let (mut ours, mut theirs) = (0, 0);
        for g in generated() {
            let f = g.file;
            match (&g.br, &g.gz) {
                (Some(br), Some(gz)) => {
                    assert_eq!(decode("br", br).unwrap(), g.body, "{}.br", f.name);
                    assert_eq!(decode("gzip", gz).unwrap(), g.body, "{}.gz", f.name);
                    assert!(br.len() < gz.len(), "{}", f.name);
                    ours += br.len();
                    theirs += f.arena_br;
                    let vs = br.len() as f64 / f.arena_br as f64;
                    assert!(
                        (0.6..=1.6).contains(&vs),
                        "{}: .br {} bytes, HttpArena's {} ({vs:.2}x)",
                        f.name,
                        br.len(),
                        f.arena_br
                    );
                }
                (None, None) => {
                    // What a server compressing it on the fly would get.
                    let gz = gzip(&g.body);
                    assert!(gz.len() > f.size, "{}: {} bytes gzipped", f.name, gz.len());
                }
                _ => panic!("{}: one sibling without the other", f.name),
            }
        }
        let vs = ours as f64 / theirs as f64;
        assert!(
            (0.9..=1.25).contains(&vs),
            "all .br: {ours} bytes, HttpArena's {theirs}"
        );
        assert_eq!(decode("identity", b"abc").unwrap(), b"abc");
        assert_eq!(decode("", b"abc").unwrap(), b"abc");
        assert!(decode("zstd", b"abc").is_err());
        assert!(decode("br", b"not brotli").is_err());
    }

    #[test]
    fn answers_are_told_apart_and_flagged() {
        let tree = generated();
        let (css, font) = (&tree[0], &tree[12]);
        let br = css.br.clone().unwrap();
        assert_eq!(served(css, "br", &br), Ok(Served::Sibling));
        assert_eq!(
            served(css, "gzip", css.gz.as_ref().unwrap()),
            Ok(Served::Sibling)
        );
        // gzip at another level decodes to the file but is not the sibling.
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(1));
        enc.write_all(&css.body).unwrap();
        let own = enc.finish().unwrap();
        assert_eq!(served(css, "gzip", &own), Ok(Served::Own));
        assert_eq!(served(css, "identity", &css.body), Ok(Served::Identity));
        assert_eq!(served(font, "identity", &font.body), Ok(Served::Identity));
        // Another file's bytes, or a coding that does not decode, fail.
        assert!(served(css, "identity", &font.body).is_err());
        assert!(served(css, "br", &css.body).is_err());
        assert!(served(css, "gzip", &br).is_err());

        let all_siblings: Vec<_> = tree
            .iter()
            .map(|g| match &g.br {
                Some(_) => (g.file, "br".to_string(), Served::Sibling),
                None => (g.file, "identity".to_string(), Served::Identity),
            })
            .collect();
        assert_eq!(describe(&all_siblings), "br x15 (siblings), identity x5");
        let mut lazy = all_siblings.clone();
        lazy[0] = (css.file, "identity".to_string(), Served::Identity);
        lazy[1].2 = Served::Own;
        assert_eq!(
            describe(&lazy),
            "identity x6, br x1 (own compression), br x13 (siblings); \
             FLAGGED: 1 file(s) with siblings sent uncompressed (reset.css); \
             FLAGGED: compresses by itself, does not send the siblings"
        );
    }
}

//! Content-Type by file extension (`mime_guess`), with `charset=utf-8` for text.

use crate::trim_ows;

/// The media type for `path` and whether it is text (gets `; charset=utf-8`).
pub fn content_type(path: &str) -> (&'static str, bool) {
    let name = path.rsplit('/').next().unwrap_or(path);
    let Some(dot) = name.rfind('.') else {
        return ("application/octet-stream", false);
    };
    let ext = &name[dot + 1..];
    let mime = mime_guess::from_ext(ext)
        .first_raw()
        .unwrap_or("application/octet-stream");
    (mime, is_text(mime))
}

/// Whether `mime` is text and gets `; charset=utf-8`.
pub fn is_text(mime: &str) -> bool {
    mime.starts_with("text/")
        || matches!(
            mime,
            "application/javascript"
                | "application/json"
                | "application/xml"
                | "image/svg+xml"
                | "application/manifest+json"
        )
}

/// Encodings a request accepts among the precompressed ones we look for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Accepted {
    /// `br`
    pub br: bool,
    /// `zstd`
    pub zstd: bool,
    /// `gzip`
    pub gzip: bool,
}

impl Accepted {
    /// Whether the request accepts `coding`.
    pub fn accepts(self, coding: ContentCoding) -> bool {
        match coding {
            ContentCoding::Br => self.br,
            ContentCoding::Zstd => self.zstd,
            ContentCoding::Gzip => self.gzip,
        }
    }
}

/// A content coding a precompressed sibling (`name.br`, `name.zst`,
/// `name.gz` beside `name`) or a computed variant is served with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ContentCoding {
    /// Brotli.
    Br,
    /// Zstandard.
    Zstd,
    /// gzip.
    Gzip,
}

impl ContentCoding {
    /// Every coding, best first: the order siblings are tried in.
    pub const PREFERENCE: [ContentCoding; 3] =
        [ContentCoding::Br, ContentCoding::Zstd, ContentCoding::Gzip];

    /// The `Content-Encoding` token.
    pub fn token(self) -> &'static str {
        match self {
            ContentCoding::Br => "br",
            ContentCoding::Zstd => "zstd",
            ContentCoding::Gzip => "gzip",
        }
    }

    /// The coding a `Content-Encoding` token names (`x-gzip` is gzip).
    pub fn from_token(token: &str) -> Option<ContentCoding> {
        let t = token.as_bytes();
        if t.eq_ignore_ascii_case(b"br") {
            Some(ContentCoding::Br)
        } else if t.eq_ignore_ascii_case(b"zstd") {
            Some(ContentCoding::Zstd)
        } else if t.eq_ignore_ascii_case(b"gzip") || t.eq_ignore_ascii_case(b"x-gzip") {
            Some(ContentCoding::Gzip)
        } else {
            None
        }
    }

    /// The file-name suffix of a sibling in this coding.
    pub fn suffix(self) -> &'static str {
        match self {
            ContentCoding::Br => ".br",
            ContentCoding::Zstd => ".zst",
            ContentCoding::Gzip => ".gz",
        }
    }

    /// The position of this coding in [`PREFERENCE`](Self::PREFERENCE): a
    /// small index for per-coding tables.
    pub fn index(self) -> usize {
        match self {
            ContentCoding::Br => 0,
            ContentCoding::Zstd => 1,
            ContentCoding::Gzip => 2,
        }
    }
}

/// An `Accept-Encoding` field, parsed once: the weight (RFC 9110 12.4.2
/// `qvalue`, in thousandths) of each coding this server can produce, of
/// `identity` and of `*`. No allocation; the request's bytes are read once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AcceptEncoding {
    codings: [Option<u16>; 3],
    identity: Option<u16>,
    star: Option<u16>,
}

/// The longest `Accept-Encoding` value [`AcceptEncoding::parse_remembered`]
/// keeps (a browser's is about 23: `gzip, deflate, br, zstd`).
const MEMO_MAX: usize = 48;

/// The last value parsed on this thread, and what it parsed to.
#[derive(Clone, Copy)]
struct Memo {
    len: u8,
    bytes: [u8; MEMO_MAX],
    parsed: AcceptEncoding,
}

thread_local! {
    static LAST_ACCEPT_ENCODING: std::cell::Cell<Memo> = const {
        std::cell::Cell::new(Memo {
            len: 0,
            bytes: [0; MEMO_MAX],
            parsed: AcceptEncoding {
                codings: [None; 3],
                identity: None,
                star: None,
            },
        })
    };
}

/// `q=1`.
const Q_ONE: u16 = 1000;

/// A `qvalue` in thousandths (`0`, `0.5`, `1.000`); anything else reads as
/// 0, so a malformed weight never makes a coding acceptable.
fn parse_q(v: &[u8]) -> u16 {
    let (int, frac) = match v.iter().position(|&b| b == b'.') {
        Some(dot) => (&v[..dot], &v[dot + 1..]),
        None => (v, &[][..]),
    };
    if frac.len() > 3 || !frac.iter().all(u8::is_ascii_digit) {
        return 0;
    }
    let mut thousandths = 0u16;
    for i in 0..3 {
        thousandths = thousandths * 10 + frac.get(i).map_or(0, |d| u16::from(d - b'0'));
    }
    match int {
        b"0" => thousandths,
        b"1" if thousandths == 0 => Q_ONE,
        _ => 0,
    }
}

impl AcceptEncoding {
    /// Parses a field value (`gzip, br;q=0.8, *;q=0`). A coding listed
    /// twice keeps its last weight.
    pub fn parse(v: &[u8]) -> AcceptEncoding {
        let mut a = AcceptEncoding::default();
        for item in v.split(|&b| b == b',') {
            let mut parts = item.split(|&b| b == b';');
            let name = trim_ows(parts.next().unwrap_or_default());
            // A coding this server does not make is skipped before its
            // parameters are read.
            let Some(slot) = a.slot(name) else {
                continue;
            };
            let mut q = Q_ONE;
            for p in parts {
                let p = trim_ows(p);
                if p.len() >= 2 && p[..2].eq_ignore_ascii_case(b"q=") {
                    q = parse_q(trim_ows(&p[2..]));
                }
            }
            *slot = Some(q);
        }
        a
    }

    /// [`parse`](Self::parse), remembered per thread for the last value of
    /// at most 48 bytes: a client sends the same field on every
    /// request (a browser's is fixed per version, a load generator's per
    /// run). On HttpArena's files (callgrind, arena_h1_64) the parse was
    /// 645 of 12 518 instructions per request.
    pub fn parse_remembered(v: &[u8]) -> AcceptEncoding {
        if v.len() > MEMO_MAX {
            return AcceptEncoding::parse(v);
        }
        LAST_ACCEPT_ENCODING.with(|last| {
            let mut memo = last.get();
            if memo.len as usize != v.len() || &memo.bytes[..v.len()] != v {
                memo.len = v.len() as u8;
                memo.bytes[..v.len()].copy_from_slice(v);
                memo.parsed = AcceptEncoding::parse(v);
                last.set(memo);
            }
            memo.parsed
        })
    }

    /// Where the weight of the coding `name` goes; `None` for one this
    /// server does not make (or an empty item). Compared only with the
    /// names of its length, without a UTF-8 check: the parse runs once per
    /// request (arena_h1_64, callgrind: 645 instructions instead of 803).
    fn slot(&mut self, name: &[u8]) -> Option<&mut Option<u16>> {
        let is = |token: &[u8]| name.eq_ignore_ascii_case(token);
        let coding = match name.len() {
            1 if name == b"*" => return Some(&mut self.star),
            2 if is(b"br") => ContentCoding::Br,
            4 if is(b"gzip") => ContentCoding::Gzip,
            4 if is(b"zstd") => ContentCoding::Zstd,
            6 if is(b"x-gzip") => ContentCoding::Gzip,
            8 if is(b"identity") => return Some(&mut self.identity),
            _ => return None,
        };
        Some(&mut self.codings[coding.index()])
    }

    /// The weight of `coding`: its own, else that of `*`, else 0 (a coding
    /// the field does not name is not acceptable).
    pub fn q(&self, coding: ContentCoding) -> u16 {
        self.codings[coding.index()].or(self.star).unwrap_or(0)
    }

    /// The weight of `identity`: its own, else 0 when `*;q=0` excludes it,
    /// else acceptable (RFC 9110 12.5.3).
    pub fn identity_q(&self) -> u16 {
        self.identity_weight().unwrap_or(Q_ONE)
    }

    /// The weight the field gives identity itself (`identity;q=…`, or 0
    /// through `*;q=0`); `None` when it leaves identity implicit.
    pub fn identity_weight(&self) -> Option<u16> {
        match (self.identity, self.star) {
            (Some(q), _) => Some(q),
            (None, Some(0)) => Some(0),
            _ => None,
        }
    }

    /// Whether `coding` has a weight above 0.
    pub fn accepts(&self, coding: ContentCoding) -> bool {
        self.q(coding) > 0
    }

    /// The coding to send of those `offered` (in the server's order of
    /// preference), or `None` for identity.
    ///
    /// The highest weight wins; among equal weights the earlier offer wins
    /// (the server's preference). Identity wins only when the field gives
    /// it a weight of its own above the best coding's: left implicit, it
    /// is the fallback, not a rival (`gzip;q=0.5` asks for gzip), and at
    /// equal weight a coding wins (same content, fewer bytes). A coding
    /// with weight 0 is never chosen.
    /// When nothing is acceptable, identity included (`identity;q=0`, or
    /// `*;q=0` and no listed coding offered), the answer is identity too:
    /// RFC 9110 12.5.3 lets a server disregard the field rather than send
    /// 406, and a body a client can always read beats an error page for a
    /// file that exists (nginx and Apache do the same).
    pub fn choose(&self, offered: &[ContentCoding]) -> Option<ContentCoding> {
        let mut best: Option<(ContentCoding, u16)> = None;
        for &c in offered {
            let q = self.q(c);
            if q > 0 && best.is_none_or(|(_, b)| q > b) {
                best = Some((c, q));
            }
        }
        best.filter(|&(_, q)| self.identity_weight().is_none_or(|id| q >= id))
            .map(|(c, _)| c)
    }

    /// The siblings' view: which codings have a weight above 0.
    pub fn accepted(&self) -> Accepted {
        Accepted {
            br: self.accepts(ContentCoding::Br),
            zstd: self.accepts(ContentCoding::Zstd),
            gzip: self.accepts(ContentCoding::Gzip),
        }
    }
}

/// Parses `Accept-Encoding` (codings with `q=0` are refused; `*` accepts all).
pub fn accepted_encodings(v: &[u8]) -> Accepted {
    AcceptEncoding::parse(v).accepted()
}

/// Media types worth compressing by default: text, and the structured
/// text formats a browser fetches (scripts, styles, data, vector images,
/// WebAssembly, whose code sections compress about 3:1).
pub const COMPRESSIBLE_TYPES: &[&str] = &[
    "text/*",
    "application/javascript",
    "application/json",
    "application/manifest+json",
    "application/ld+json",
    "application/xml",
    "application/xhtml+xml",
    "application/wasm",
    "image/svg+xml",
];

/// Whether `essence` is in `types`: each entry an exact `type/subtype`
/// or `type/*` (case-insensitive, as media types are).
pub fn type_matches<S: AsRef<str>>(essence: &str, types: &[S]) -> bool {
    types.iter().any(|t| {
        let t = t.as_ref();
        match t.strip_suffix('*') {
            Some(prefix) => {
                essence.len() >= prefix.len()
                    && essence.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
            }
            None => essence.eq_ignore_ascii_case(t),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remembered_parse_answers_as_the_parse_for_each_value_in_turn() {
        let long = "gzip;q=0.1, br;q=0.2, zstd;q=0.3, identity;q=0.4, *;q=0";
        assert!(long.len() > MEMO_MAX);
        let values = [
            "br;q=1, gzip;q=0.8",
            "br;q=1, gzip;q=0.8",
            "gzip",
            "",
            "br;q=1, gzip;q=0.9",
            long,
            "gzip",
            "identity;q=0",
            "br;q=1, gzip;q=0.8",
        ];
        for v in values {
            let expected = AcceptEncoding::parse(v.as_bytes());
            assert_eq!(
                AcceptEncoding::parse_remembered(v.as_bytes()),
                expected,
                "{v:?}"
            );
        }
        // Each differs from the one before, so a memo that answered from
        // the previous value would fail above; and they do parse apart.
        assert_ne!(
            AcceptEncoding::parse(b"br;q=1, gzip;q=0.8"),
            AcceptEncoding::parse(b"br;q=1, gzip;q=0.9")
        );
    }

    #[test]
    fn types() {
        assert_eq!(content_type("a/b.html"), ("text/html", true));
        assert_eq!(content_type("x.png"), ("image/png", false));
        assert_eq!(content_type("noext"), ("application/octet-stream", false));
        assert_eq!(content_type(".hidden"), ("application/octet-stream", false));
    }

    #[test]
    fn encodings() {
        let a = accepted_encodings(b"gzip, deflate, br;q=0");
        assert!(a.gzip && !a.br && !a.zstd);
        let a = accepted_encodings(b"br;q=0.5, zstd");
        assert!(a.br && a.zstd && !a.gzip);
        let a = accepted_encodings(b"*");
        assert!(a.br && a.zstd && a.gzip);
        let a = accepted_encodings(b"*;q=0, gzip");
        assert!(a.gzip && !a.br);
        let a = accepted_encodings(b"gzip;q=abc, br;q=0.000, zstd;q=0.001");
        assert!(!a.gzip && !a.br && a.zstd);
    }

    const OFFER: [ContentCoding; 3] = [ContentCoding::Zstd, ContentCoding::Br, ContentCoding::Gzip];

    fn choose(v: &str) -> Option<&'static str> {
        AcceptEncoding::parse(v.as_bytes())
            .choose(&OFFER)
            .map(ContentCoding::token)
    }

    #[test]
    fn negotiation_by_weight_then_server_order() {
        assert_eq!(choose("gzip, deflate, br"), Some("br"));
        assert_eq!(choose("gzip, deflate, br, zstd"), Some("zstd"));
        assert_eq!(choose("gzip;q=1, br;q=0.5"), Some("gzip"));
        assert_eq!(choose("gzip;q=0"), None);
        assert_eq!(choose("*"), Some("zstd"));
        assert_eq!(choose("*;q=0.5, identity;q=0.1, gzip;q=0"), Some("zstd"));
        // Identity left implicit is the fallback, not a rival.
        assert_eq!(choose("*;q=0.5"), Some("zstd"));
        assert_eq!(choose("identity;q=0.6, *;q=0.5"), None);
        // identity outweighs every coding: identity.
        assert_eq!(choose("identity, gzip;q=0.5"), None);
        // A coding ties with identity and wins.
        assert_eq!(choose("gzip, identity"), Some("gzip"));
        // Nothing acceptable at all: identity anyway (no 406).
        assert_eq!(choose("*;q=0"), None);
        assert_eq!(choose("identity;q=0, gzip;q=0"), None);
        assert_eq!(choose(""), None);
        assert_eq!(choose("deflate, compress"), None);
        assert_eq!(choose(" GZIP ; Q=0.9 , Br;q=0.8"), Some("gzip"));
        assert_eq!(choose("x-gzip"), Some("gzip"));
    }

    #[test]
    fn identity_weight() {
        let id = |v: &str| AcceptEncoding::parse(v.as_bytes()).identity_q();
        assert_eq!(id("gzip"), 1000);
        assert_eq!(id("*;q=0"), 0);
        assert_eq!(id("*;q=0, identity;q=0.2"), 200);
        assert_eq!(id("identity;q=0"), 0);
    }

    #[test]
    fn type_lists() {
        assert!(type_matches("text/css", COMPRESSIBLE_TYPES));
        assert!(type_matches("Text/HTML", COMPRESSIBLE_TYPES));
        assert!(type_matches("application/wasm", COMPRESSIBLE_TYPES));
        assert!(type_matches("image/svg+xml", COMPRESSIBLE_TYPES));
        assert!(!type_matches("image/png", COMPRESSIBLE_TYPES));
        assert!(!type_matches(
            "application/octet-stream",
            COMPRESSIBLE_TYPES
        ));
        assert!(!type_matches("text/css", &[] as &[&str]));
    }
}

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
/// `name.gz` beside `name`) is served with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

    /// The file-name suffix of a sibling in this coding.
    pub fn suffix(self) -> &'static str {
        match self {
            ContentCoding::Br => ".br",
            ContentCoding::Zstd => ".zst",
            ContentCoding::Gzip => ".gz",
        }
    }
}

/// Parses `Accept-Encoding` (codings with `q=0` are refused; `*` accepts all).
pub fn accepted_encodings(v: &[u8]) -> Accepted {
    let mut a = Accepted::default();
    let mut star = None;
    let (mut br, mut zstd, mut gzip) = (None, None, None);
    for item in v.split(|&b| b == b',') {
        let mut parts = item.split(|&b| b == b';');
        let name = trim_ows(parts.next().unwrap_or_default());
        let mut ok = true;
        for p in parts {
            let p = trim_ows(p);
            if p.len() >= 2 && p[..2].eq_ignore_ascii_case(b"q=") {
                let q = &p[2..];
                ok = q.iter().any(|&b| (b'1'..=b'9').contains(&b));
            }
        }
        if name.eq_ignore_ascii_case(b"br") {
            br = Some(ok);
        } else if name.eq_ignore_ascii_case(b"zstd") {
            zstd = Some(ok);
        } else if name.eq_ignore_ascii_case(b"gzip") || name.eq_ignore_ascii_case(b"x-gzip") {
            gzip = Some(ok);
        } else if name == b"*" {
            star = Some(ok);
        }
    }
    let star = star.unwrap_or(false);
    a.br = br.unwrap_or(star);
    a.zstd = zstd.unwrap_or(star);
    a.gzip = gzip.unwrap_or(star);
    a
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}

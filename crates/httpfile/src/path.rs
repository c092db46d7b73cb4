//! Request-target to root-relative path: strip query, percent-decode once,
//! drop empty and `.` segments, reject `..`, NUL, bad escapes and non-UTF-8.
//!
//! Decoding happens BEFORE splitting, so `%2F` is a separator and `..%2F`
//! is a `..` segment (rejected): no encoded form can smuggle a parent step.

/// Why a target was rejected (all map to 400 except `Asterisk`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathError {
    /// `*` (valid only for OPTIONS).
    Asterisk,
    /// Not origin-form or absolute-form.
    NotOriginForm,
    /// `%` not followed by two hex digits.
    BadPercentEncoding,
    /// A decoded NUL byte.
    Nul,
    /// A `..` segment.
    DotDot,
    /// The decoded path is not UTF-8.
    NotUtf8,
}

impl PathError {
    /// Human-readable reason (sent in the 400 body).
    pub fn reason(self) -> &'static str {
        match self {
            PathError::Asterisk => "asterisk-form is only valid for OPTIONS",
            PathError::NotOriginForm => "request target must start with /",
            PathError::BadPercentEncoding => "bad percent-encoding",
            PathError::Nul => "NUL in path",
            PathError::DotDot => "`..` segment in path",
            PathError::NotUtf8 => "path is not UTF-8",
        }
    }
}

/// A normalized path borrowing the caller's scratch buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NormPath<'o> {
    /// Root-relative path without leading or trailing `/` (`""` for the root).
    pub rel: &'o str,
    /// The request path ended with `/` (or was `/`).
    pub trailing_slash: bool,
    /// Some segment starts with `.` (other than a leading `.well-known`).
    pub dotfile: bool,
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Strips an absolute-form prefix (`http://host`) and the query/fragment.
pub fn path_part(target: &[u8]) -> Result<&[u8], PathError> {
    if target == b"*" {
        return Err(PathError::Asterisk);
    }
    let mut t = target;
    for scheme in [&b"http://"[..], b"https://"] {
        if t.len() >= scheme.len() && t[..scheme.len()].eq_ignore_ascii_case(scheme) {
            let rest = &t[scheme.len()..];
            t = match rest.iter().position(|&b| b == b'/') {
                Some(p) => &rest[p..],
                None => b"/",
            };
            if let Some(q) = t.iter().position(|&b| b == b'?' || b == b'#') {
                t = &t[..q];
            }
            return if t.is_empty() { Ok(b"/") } else { Ok(t) };
        }
    }
    if t.first() != Some(&b'/') {
        return Err(PathError::NotOriginForm);
    }
    if let Some(q) = t.iter().position(|&b| b == b'?' || b == b'#') {
        t = &t[..q];
    }
    Ok(t)
}

/// Normalizes `target` into `out` (cleared first) and returns a view of it.
pub fn normalize_path<'o>(target: &[u8], out: &'o mut Vec<u8>) -> Result<NormPath<'o>, PathError> {
    let raw = path_part(target)?;
    out.clear();
    if !is_plain(raw) {
        return decode_and_compact(raw, out);
    }
    // Nothing to decode or drop: the path less its leading and trailing
    // `/` (one scan and one copy; the general path below costs about ten
    // times as much for the same answer, and most targets are plain).
    let trailing_slash = raw.ends_with(b"/");
    out.extend_from_slice(&raw[1..raw.len() - usize::from(trailing_slash && raw.len() > 1)]);
    let rel = std::str::from_utf8(out).map_err(|_| PathError::NotUtf8)?;
    Ok(NormPath {
        rel,
        trailing_slash,
        dotfile: false,
    })
}

/// Whether `raw` (which starts with `/`) normalizes to itself but for its
/// leading and trailing `/`: no escape or NUL, no segment that starts with
/// `.` (so no `.`, `..` or dot file), and no empty segment but the one a
/// trailing `/` ends with.
fn is_plain(raw: &[u8]) -> bool {
    let mut after_slash = false;
    for &b in raw {
        match b {
            b'%' | 0 => return false,
            b'/' | b'.' if after_slash => return false,
            _ => {}
        }
        after_slash = b == b'/';
    }
    true
}

/// [`normalize_path`] of a path that needs decoding or compacting.
fn decode_and_compact<'o>(raw: &[u8], out: &'o mut Vec<u8>) -> Result<NormPath<'o>, PathError> {
    // Percent-decode once.
    let mut i = 0;
    while i < raw.len() {
        let b = raw[i];
        if b == b'%' {
            let (Some(h), Some(l)) = (
                raw.get(i + 1).copied().and_then(hex),
                raw.get(i + 2).copied().and_then(hex),
            ) else {
                return Err(PathError::BadPercentEncoding);
            };
            out.push(h << 4 | l);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    if out.contains(&0) {
        return Err(PathError::Nul);
    }
    let trailing_slash = out.last() == Some(&b'/') || out.is_empty();
    // Compact segments in place: the write cursor never passes the read cursor.
    let len = out.len();
    let mut w = 0;
    let mut r = 0;
    let mut dotfile = false;
    while r < len {
        let end = out[r..len]
            .iter()
            .position(|&b| b == b'/')
            .map_or(len, |p| r + p);
        let seg_len = end - r;
        let is_dot = seg_len == 1 && out[r] == b'.';
        let is_dotdot = seg_len == 2 && out[r] == b'.' && out[r + 1] == b'.';
        if is_dotdot {
            return Err(PathError::DotDot);
        }
        if seg_len > 0 && !is_dot {
            if out[r] == b'.' && !(w == 0 && &out[r..end] == b".well-known") {
                dotfile = true;
            }
            if w > 0 {
                out[w] = b'/';
                w += 1;
            }
            out.copy_within(r..end, w);
            w += seg_len;
        }
        r = end + 1;
    }
    out.truncate(w);
    let rel = std::str::from_utf8(out).map_err(|_| PathError::NotUtf8)?;
    Ok(NormPath {
        rel,
        trailing_slash,
        dotfile,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Result<(String, bool, bool), PathError> {
        let mut v = Vec::new();
        normalize_path(s.as_bytes(), &mut v)
            .map(|p| (p.rel.to_string(), p.trailing_slash, p.dotfile))
    }

    /// The plain path's shortcut gives what decoding and compacting give.
    #[test]
    fn plain_paths_normalize_as_the_general_path_does() {
        for target in [
            "/", "/a", "/a/", "/a/b", "/a/b/", "/a.b/c.d", "/a?x", "/a/?x", "/é/ü", "/a b",
        ] {
            let raw = path_part(target.as_bytes()).unwrap();
            assert!(is_plain(raw), "{target}");
            let mut general = Vec::new();
            let want = decode_and_compact(raw, &mut general)
                .map(|p| (p.rel.to_string(), p.trailing_slash, p.dotfile));
            assert_eq!(n(target), want, "{target}");
        }
        for target in ["//", "/a//b", "/.", "/a/.b", "/a/..", "/%41", "/a\0"] {
            assert!(!is_plain(target.as_bytes()), "{target:?}");
        }
    }

    proptest::proptest! {
        // Failures are kept by hand as tests, not in a side file.
        #![proptest_config(proptest::test_runner::Config {
            failure_persistence: Some(Box::new(
                proptest::test_runner::FileFailurePersistence::Off,
            )),
            ..proptest::test_runner::Config::default()
        })]
        #[test]
        fn every_target_normalizes_as_the_general_path_does(
            target in "/[/.a%2eF\\u{0}\\u{e9}?]{0,12}",
        ) {
            let raw = path_part(target.as_bytes()).unwrap();
            let mut general = Vec::new();
            let want = decode_and_compact(raw, &mut general).map(|p| (p.rel.to_string(), p.trailing_slash, p.dotfile));
            proptest::prop_assert_eq!(n(&target), want);
        }
    }

    #[test]
    fn rules() {
        assert_eq!(n("/").unwrap(), ("".into(), true, false));
        assert_eq!(n("/a//b/./c?x=1").unwrap(), ("a/b/c".into(), false, false));
        assert_eq!(n("/dir/").unwrap(), ("dir".into(), true, false));
        assert_eq!(n("/a%20b").unwrap(), ("a b".into(), false, false));
        assert_eq!(n("/%2e%2e/etc/passwd"), Err(PathError::DotDot));
        assert_eq!(n("/a/..%2Fb"), Err(PathError::DotDot));
        assert_eq!(n("/../x"), Err(PathError::DotDot));
        assert_eq!(n("/a%00b"), Err(PathError::Nul));
        assert_eq!(n("/a%zz"), Err(PathError::BadPercentEncoding));
        assert_eq!(n("/a%4"), Err(PathError::BadPercentEncoding));
        assert_eq!(n("/%ff"), Err(PathError::NotUtf8));
        assert_eq!(n("/a%252e"), Ok(("a%2e".into(), false, false)));
        assert_eq!(n("/..\\x").unwrap(), ("..\\x".into(), false, true));
        assert!(n("/.git/config").unwrap().2);
        assert!(!n("/.well-known/x").unwrap().2);
        assert!(n("/a/.well-known/x").unwrap().2);
        assert_eq!(n("http://h/a/b?q").unwrap(), ("a/b".into(), false, false));
        assert_eq!(n("*"), Err(PathError::Asterisk));
        assert_eq!(n("a/b"), Err(PathError::NotOriginForm));
    }
}

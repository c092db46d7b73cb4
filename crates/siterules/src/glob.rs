//! Path globs, matched against the normalized, decoded path a request
//! names (never its raw target), ASCII case-insensitively: a rule for
//! `/Private/**` also holds `/private/x`, so no case spelling reaches a
//! protected tree on a case-insensitive filesystem.
//!
//! ```text
//! /assets/**        /assets and everything beneath it     ({1} = the rest)
//! /docs/*/index.md  one segment in the middle              ({1})
//! *.html            any path ending in .html (= /**/*.html)
//! /                 the root only
//! ```
//!
//! `*` is any run within one segment, `?` one character of it, `**` a
//! whole segment standing for zero or more segments. Each `*` and `**`
//! captures what it matched, numbered from `{1}` left to right.

/// A compiled path glob.
#[derive(Clone, Debug)]
pub struct Glob {
    text: String,
    segs: Vec<Seg>,
    /// The literal bytes every match starts with (lowercase, without the
    /// leading `/`): the cheap test most non-matching paths fail.
    prefix: Vec<u8>,
    /// The literal bytes every match ends with (lowercase).
    suffix: Vec<u8>,
    shape: Shape,
}

/// The common forms, matched without walking segments (a request is
/// tested against every rule: most of them must cost a compare).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// `/**`.
    All,
    /// Literal segments only: the path equals `prefix`.
    Exact,
    /// Literal segments then `**`: `prefix` or beneath it.
    Under,
    /// `**/*LIT` (`*.js`): the path ends with `suffix`.
    Suffix,
    /// Anything else.
    General,
}

#[derive(Clone, Debug)]
enum Seg {
    /// `**`: zero or more whole segments.
    Any,
    /// One segment: literals, `*` and `?`.
    One(Vec<Tok>),
}

#[derive(Clone, Debug)]
enum Tok {
    Lit(Vec<u8>),
    Star,
    Quest,
}

/// Where a capture lies in the matched path (byte offsets).
pub type Span = (usize, usize);

impl Glob {
    /// Compiles `text`: it starts with `/`, or with `*` (then it matches
    /// at any depth: `*.js` is `/**/*.js`).
    pub fn new(text: &str) -> Result<Glob, String> {
        let body = if let Some(rest) = text.strip_prefix('/') {
            rest.to_string()
        } else if text.starts_with('*') && !text.starts_with("**") {
            format!("**/{text}")
        } else if text.starts_with("**") {
            text.to_string()
        } else {
            return Err(format!(
                "`{text}` must start with `/` (or `*` for any depth)"
            ));
        };
        if text.contains('\\') || text.contains('\0') {
            return Err(format!("`{text}` holds a `\\` or NUL"));
        }
        let mut segs = Vec::new();
        if !body.is_empty() {
            for part in body.split('/') {
                if part.is_empty() {
                    return Err(format!("`{text}` has an empty segment (`//`)"));
                }
                if part == "." || part == ".." {
                    return Err(format!("`{text}` has a `.` or `..` segment"));
                }
                if part == "**" {
                    segs.push(Seg::Any);
                    continue;
                }
                if part.contains("**") {
                    return Err(format!(
                        "`{text}`: `**` must be a whole segment (`/a/**`, not `/a**`)"
                    ));
                }
                let mut toks = Vec::new();
                for c in part.bytes() {
                    match (c, toks.last_mut()) {
                        (b'*', _) => toks.push(Tok::Star),
                        (b'?', _) => toks.push(Tok::Quest),
                        (c, Some(Tok::Lit(l))) => l.push(c.to_ascii_lowercase()),
                        (c, _) => toks.push(Tok::Lit(vec![c.to_ascii_lowercase()])),
                    }
                }
                segs.push(Seg::One(toks));
            }
        }
        let prefix = literal_prefix(&segs);
        let suffix = match segs.last() {
            Some(Seg::One(toks)) => match toks.last() {
                Some(Tok::Lit(l)) => l.clone(),
                _ => Vec::new(),
            },
            _ => Vec::new(),
        };
        let lit = |s: &Seg| matches!(s, Seg::One(t) if t.len() == 1 && matches!(t[0], Tok::Lit(_)));
        let shape = match segs.as_slice() {
            [Seg::Any] => Shape::All,
            [Seg::Any, Seg::One(t)] if matches!(t.as_slice(), [Tok::Star, Tok::Lit(l)] if !l.contains(&b'/')) => {
                Shape::Suffix
            }
            [init @ .., Seg::Any] if !init.is_empty() && init.iter().all(lit) => Shape::Under,
            all if all.iter().all(lit) => Shape::Exact,
            _ => Shape::General,
        };
        Ok(Glob {
            text: text.to_string(),
            segs,
            prefix,
            suffix,
            shape,
        })
    }

    /// How many captures a match has (`{1}`..).
    pub fn capture_count(&self) -> usize {
        self.segs
            .iter()
            .map(|s| match s {
                Seg::Any => 1,
                Seg::One(toks) => toks.iter().filter(|t| matches!(t, Tok::Star)).count(),
            })
            .sum()
    }

    /// The glob as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `rel` (root-relative, no leading `/`, `""` for the root)
    /// matches.
    #[inline]
    pub fn matches(&self, rel: &str) -> bool {
        let b = rel.as_bytes();
        match self.shape {
            Shape::All => true,
            Shape::Exact => b.eq_ignore_ascii_case(&self.prefix),
            Shape::Under => {
                let p = &self.prefix;
                b.len() >= p.len()
                    && b[..p.len()].eq_ignore_ascii_case(p)
                    && (b.len() == p.len() || b[p.len()] == b'/')
            }
            Shape::Suffix => {
                let s = &self.suffix;
                b.len() >= s.len() && b[b.len() - s.len()..].eq_ignore_ascii_case(s)
            }
            Shape::General => !self.quick_reject(b) && self.walk(rel, &mut |_| {}),
        }
    }

    /// Whether `rel` matches, with the captures' spans pushed to `caps`.
    pub fn captures(&self, rel: &str, caps: &mut Vec<Span>) -> bool {
        caps.clear();
        if self.quick_reject(rel.as_bytes()) {
            return false;
        }
        let mut out = Vec::new();
        let ok = self.walk(rel, &mut |c| out = c.to_vec());
        *caps = out;
        ok
    }

    /// True when the literal prefix or suffix already rules `rel` out.
    /// (Inverted so `matches` reads as one expression.)
    #[inline]
    fn quick_reject(&self, rel: &[u8]) -> bool {
        let p = &self.prefix;
        let s = &self.suffix;
        rel.len() < p.len()
            || !rel[..p.len()].eq_ignore_ascii_case(p)
            || (!s.is_empty()
                && (rel.len() < s.len() || !rel[rel.len() - s.len()..].eq_ignore_ascii_case(s)))
    }

    fn walk(&self, rel: &str, found: &mut dyn FnMut(&[Span])) -> bool {
        let segs: Vec<Span> = split_segments(rel);
        let mut caps = Vec::new();
        match_segs(&self.segs, rel.as_bytes(), &segs, &mut caps, found)
    }
}

/// The spans of `rel`'s segments.
fn split_segments(rel: &str) -> Vec<Span> {
    let mut out = Vec::new();
    if rel.is_empty() {
        return out;
    }
    let mut start = 0;
    for (i, b) in rel.bytes().enumerate() {
        if b == b'/' {
            out.push((start, i));
            start = i + 1;
        }
    }
    out.push((start, rel.len()));
    out
}

fn literal_prefix(segs: &[Seg]) -> Vec<u8> {
    let mut p = Vec::new();
    for (i, s) in segs.iter().enumerate() {
        match s {
            Seg::Any => return p,
            Seg::One(toks) => {
                for t in toks {
                    match t {
                        Tok::Lit(l) => p.extend_from_slice(l),
                        _ => return p,
                    }
                }
                if i + 1 < segs.len() {
                    // Only a following literal segment proves the `/`:
                    // `/a/**` matches `a` itself.
                    if matches!(segs[i + 1], Seg::One(_)) {
                        p.push(b'/');
                    } else {
                        return p;
                    }
                }
            }
        }
    }
    p
}

fn match_segs(
    pat: &[Seg],
    path: &[u8],
    segs: &[Span],
    caps: &mut Vec<Span>,
    found: &mut dyn FnMut(&[Span]),
) -> bool {
    let Some((first, rest)) = pat.split_first() else {
        if segs.is_empty() {
            found(caps);
            return true;
        }
        return false;
    };
    match first {
        Seg::Any => {
            for take in 0..=segs.len() {
                let span = match take {
                    0 => segs
                        .first()
                        .map_or((path.len(), path.len()), |s| (s.0, s.0)),
                    n => (segs[0].0, segs[n - 1].1),
                };
                caps.push(span);
                if match_segs(rest, path, &segs[take..], caps, found) {
                    return true;
                }
                caps.pop();
            }
            false
        }
        Seg::One(toks) => {
            let Some((&seg, more)) = segs.split_first() else {
                return false;
            };
            let mark = caps.len();
            if match_toks(toks, path, seg.0, seg.1, caps)
                && match_segs(rest, path, more, caps, found)
            {
                return true;
            }
            caps.truncate(mark);
            false
        }
    }
}

fn match_toks(toks: &[Tok], path: &[u8], at: usize, end: usize, caps: &mut Vec<Span>) -> bool {
    let Some((first, rest)) = toks.split_first() else {
        return at == end;
    };
    match first {
        Tok::Lit(l) => {
            end - at >= l.len()
                && path[at..at + l.len()].eq_ignore_ascii_case(l)
                && match_toks(rest, path, at + l.len(), end, caps)
        }
        Tok::Quest => {
            // One character: a whole UTF-8 sequence.
            let mut next = at + 1;
            while next < end && path[next] & 0xC0 == 0x80 {
                next += 1;
            }
            at < end && match_toks(rest, path, next, end, caps)
        }
        Tok::Star => {
            for stop in (at..=end).rev() {
                // A capture ends where a character starts: `{1}` is
                // rendered by slicing the path (a `?` after the `*` once
                // took the rest of a character, and rendering panicked).
                if stop < end && path[stop] & 0xC0 == 0x80 {
                    continue;
                }
                caps.push((at, stop));
                if match_toks(rest, path, stop, end, caps) {
                    return true;
                }
                caps.pop();
            }
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(g: &str, p: &str) -> bool {
        let glob = Glob::new(g).unwrap();
        let general = !glob.quick_reject(p.as_bytes()) && glob.walk(p, &mut |_| {});
        assert_eq!(
            glob.matches(p),
            general,
            "{g} {p}: the shape's answer is the walk's"
        );
        general
    }

    fn caps(g: &str, p: &str) -> Vec<String> {
        let mut c = Vec::new();
        assert!(Glob::new(g).unwrap().captures(p, &mut c), "{g} {p}");
        c.iter().map(|&(a, b)| p[a..b].to_string()).collect()
    }

    /// Found by fuzzing (fuzz/regressions/siterules_compile).
    #[test]
    fn a_capture_never_splits_a_character() {
        assert_eq!(caps("/img/*?.png", "img/é.png"), [""]);
        assert_eq!(caps("/*?", "劊"), [""]);
        assert_eq!(caps("/*?x", "éé x"), ["éé"]);
    }

    #[test]
    fn forms() {
        assert!(m("/", ""));
        assert!(!m("/", "a"));
        assert!(m("/**", ""));
        assert!(m("/**", "a/b/c"));
        assert!(m("/assets/**", "assets"));
        assert!(m("/assets/**", "assets/app.js"));
        assert!(m("/assets/**", "assets/x/y"));
        assert!(!m("/assets/**", "assetsx/y"));
        assert!(!m("/assets/**", "other/assets/y"));
        assert!(m("*.html", "index.html"));
        assert!(m("*.html", "a/b/c.HTML"));
        assert!(!m("*.html", "a/b/c.htm"));
        assert!(m("/docs/*/index.md", "docs/v1/index.md"));
        assert!(!m("/docs/*/index.md", "docs/v1/x/index.md"));
        assert!(m("/a?c", "abc"));
        assert!(m("/a?c", "aéc"));
        assert!(m("/Private/**", "PRIVATE/x"));
        assert!(m("/**/secret", "a/b/secret"));
        assert!(m("/**/secret", "secret"));
    }

    #[test]
    fn captures_in_order() {
        assert_eq!(caps("/old/**", "old/a/b.html"), ["a/b.html"]);
        assert_eq!(caps("/old/**", "old"), [""]);
        assert_eq!(
            caps("/blog/*/*.html", "blog/2024/post.html"),
            ["2024", "post"]
        );
        assert_eq!(caps("*.php", "x/y.php"), ["x", "y"]);
    }

    #[test]
    fn refused() {
        for bad in ["assets", "/a//b", "/a/../b", "/a**", "/a\\b"] {
            assert!(Glob::new(bad).is_err(), "{bad}");
        }
    }
}

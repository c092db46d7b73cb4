//! The map key: a path stored inside papaya's node when it is short.
//!
//! papaya keeps each key/value pair in its own node. With a `Box<str>` key a
//! lookup first misses on the node, then on the separate path allocation
//! before `memcmp` can compare (profile of `pathcache_hit`: about a sixth
//! of the samples sat on the first load of that compare). A path of up to
//! [`INLINE`] bytes is stored in the node itself, so the node
//! (key 48 B + value 16 B = one 64-byte node) is the only line the compare needs.
//!
//! ```text
//!  papaya node: | tag | len | path bytes (<= 46)  ...... | value (Slot, 16 B) |
//!               |  Heap: Box<str> (ptr, len) for longer paths                 |
//! ```

use std::hash::{Hash, Hasher};

/// Longest path kept inline (makes the key 48 bytes).
pub(crate) const INLINE: usize = 46;

/// A normalized path as a map key.
#[derive(Clone)]
pub(crate) enum PathKey {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<str>),
}

impl PathKey {
    pub(crate) fn new(path: &str) -> Self {
        if path.len() <= INLINE {
            let mut bytes = [0; INLINE];
            bytes[..path.len()].copy_from_slice(path.as_bytes());
            PathKey::Inline {
                len: path.len() as u8,
                bytes,
            }
        } else {
            PathKey::Heap(path.into())
        }
    }

    #[inline]
    fn as_bytes(&self) -> &[u8] {
        match self {
            PathKey::Inline { len, bytes } => &bytes[..*len as usize],
            PathKey::Heap(s) => s.as_bytes(),
        }
    }
}

impl PartialEq for PathKey {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for PathKey {}

/// Lookups by `&str` compare bytes; no `str` is rebuilt on the hit path.
impl papaya::Equivalent<PathKey> for str {
    #[inline]
    fn equivalent(&self, key: &PathKey) -> bool {
        self.as_bytes() == key.as_bytes()
    }
}

/// Hashes exactly like the `str` it was built from, so a lookup by `&str`
/// finds it (papaya hashes the query, not the stored key).
impl Hash for PathKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // The bytes are a whole `str` (inline keys are never cut), so this
        // cannot fail; the fallback only keeps a panic off the insert path.
        std::str::from_utf8(self.as_bytes())
            .unwrap_or_default()
            .hash(state)
    }
}

impl std::fmt::Debug for PathKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        String::from_utf8_lossy(self.as_bytes()).fmt(f)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn keys_hash_and_compare_like_their_str() {
        let long = "d/".repeat(40);
        let cases = [
            "",
            "a",
            "index.html",
            &"x".repeat(INLINE),
            &"y".repeat(INLINE + 1),
            "ünï/cødé.txt",
            &long,
        ];
        let state = foldhash::fast::RandomState::default();
        for s in cases {
            let k = PathKey::new(s);
            assert_eq!(
                matches!(k, PathKey::Inline { .. }),
                s.len() <= INLINE,
                "{s}"
            );
            assert_eq!(state.hash_one(&k), state.hash_one(s), "{s}");
            assert!(papaya::Equivalent::equivalent(s, &k));
            assert!(!papaya::Equivalent::equivalent(&format!("{s}z")[..], &k));
            assert_eq!(k, PathKey::new(s));
            assert_eq!(format!("{k:?}"), format!("{s:?}"));
        }
        assert_eq!(std::mem::size_of::<PathKey>(), 48);
    }
}

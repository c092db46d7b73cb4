//! The SHA-256 of each file version asked for (content entity-tags),
//! kept by version so each is read and hashed once: see `content.rs`,
//! which computes them. Bounded: at [`MAX`] versions the table starts
//! again empty (a version asked for again is hashed again).

use std::collections::HashMap;
use std::sync::Mutex;

/// Versions kept at most (about 3 MiB).
const MAX: usize = 32 * 1024;

/// A file version: what `FileMeta::is_same_version` compares.
pub(crate) type Version = (u64, u64, u64, i64, i64);

/// The digests of the versions hashed so far.
#[derive(Default)]
pub(crate) struct Digests {
    known: Mutex<HashMap<Version, [u8; 32]>>,
}

impl Digests {
    pub(crate) fn get(&self, v: &Version) -> Option<[u8; 32]> {
        self.known
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(v)
            .copied()
    }

    pub(crate) fn put(&self, v: Version, digest: [u8; 32]) {
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        if known.len() >= MAX {
            known.clear();
        }
        known.insert(v, digest);
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.known.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_whatever_is_asked() {
        let d = Digests::default();
        for i in 0..(3 * MAX as u64) {
            d.put((1, i, 1, 1, 1), [0; 32]);
            assert!(d.len() <= MAX);
        }
        assert_eq!(d.get(&(1, 3 * MAX as u64 - 1, 1, 1, 1)), Some([0; 32]));
    }
}

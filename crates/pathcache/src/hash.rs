//! The hash of a path, seeded per cache.
//!
//! Paths of up to 32 bytes (most request paths) are hashed inline with
//! folded multiplies of overlapping 8-byte words (one for up to 16 bytes,
//! two independent ones for 17-32), the scheme of foldhash
//! (which hashes everything longer). foldhash's own code for 17-32 bytes
//! is an out-of-line loop; with it a `pathcache_hit` hit of a 19-byte path
//! was 1.84-1.89x dashmap, with this 1.90-2.02x (a scratch program timing
//! `get` in batches interleaved with dashmap, 3 rounds each, builds run
//! alternately). The seeds are random per cache, so which
//! paths collide cannot be predicted from outside (paths are request input).

use std::hash::{BuildHasher, Hasher};

/// A seeded hasher for paths.
pub(crate) struct PathHasher {
    seeds: [u64; 4],
    long: foldhash::fast::RandomState,
}

#[inline(always)]
fn folded_multiply(x: u64, y: u64) -> u64 {
    let full = u128::from(x) * u128::from(y);
    (full as u64) ^ ((full >> 64) as u64)
}

#[inline(always)]
fn word(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl PathHasher {
    pub(crate) fn new() -> Self {
        let long = foldhash::fast::RandomState::default();
        // Seeds derived from the random state; odd, so no multiply zeroes out.
        let seeds = std::array::from_fn(|i| long.hash_one(i as u64 ^ 0x9e37_79b9_7f4a_7c15) | 1);
        PathHasher { seeds, long }
    }

    /// The hash of `path`'s bytes.
    #[inline]
    pub(crate) fn hash(&self, path: &[u8]) -> u64 {
        let n = path.len();
        let [k0, k1, k2, k3] = self.seeds;
        let (a, b) = if n > 32 {
            return self.hash_long(path);
        } else if n > 16 {
            // Two independent multiplies, combined without a third: one
            // multiply less on the lookup's dependency chain, interleaved
            // `pathcache_hit` 1.90-1.99x -> 1.98-2.11x dashmap.
            return folded_multiply(word(path, 0) ^ k0 ^ n as u64, word(path, 8) ^ k1)
                ^ folded_multiply(word(path, n - 16) ^ k2, word(path, n - 8) ^ k3);
        } else if n >= 8 {
            (word(path, 0) ^ k0, word(path, n - 8) ^ k1)
        } else if n >= 4 {
            let half = |at: usize| {
                u64::from(u32::from_le_bytes(
                    path[at..at + 4].try_into().expect("4 bytes"),
                ))
            };
            (half(0) ^ k0, half(n - 4) ^ k1)
        } else if n > 0 {
            let (lo, mid, hi) = (path[0], path[n / 2], path[n - 1]);
            (
                u64::from(lo) ^ k0,
                (u64::from(hi) << 8 | u64::from(mid)) ^ k1,
            )
        } else {
            (k0, k1)
        };
        folded_multiply(a ^ n as u64 ^ k2, b ^ k3)
    }

    #[inline(never)]
    fn hash_long(&self, path: &[u8]) -> u64 {
        let mut h = self.long.build_hasher();
        h.write(path);
        h.finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn distinct_paths_of_every_length_get_distinct_well_spread_hashes() {
        let hasher = PathHasher::new();
        let mut seen = HashSet::new();
        let mut low_bits = vec![0u32; 1024];
        let mut n = 0;
        for len in 0..=48 {
            for i in 0..200u32 {
                let mut p: Vec<u8> = format!("{i}/").bytes().cycle().take(len).collect();
                if len > 0 {
                    // Vary one byte in the middle too, which short paths
                    // reach only through the overlapping words.
                    p[len / 2] = b'a' + (i % 26) as u8;
                }
                if !seen.insert(p.clone()) {
                    continue;
                }
                let h = hasher.hash(&p);
                assert_eq!(h, hasher.hash(&p), "deterministic");
                low_bits[(h & 1023) as usize] += 1;
                n += 1;
            }
        }
        let hashes: HashSet<u64> = seen.iter().map(|p| hasher.hash(p)).collect();
        assert_eq!(
            hashes.len(),
            seen.len(),
            "a collision among {} paths",
            seen.len()
        );
        // The table indexes by the low bits: no bucket of 1024 should get
        // more than a few times its share.
        let max = *low_bits.iter().max().unwrap();
        assert!(max < 4 * (n / 1024 + 1) as u32 + 8, "max {max} of {n}");
        // Another cache, another seed.
        assert_ne!(
            PathHasher::new().hash(b"index.html"),
            hasher.hash(b"index.html")
        );
    }
}

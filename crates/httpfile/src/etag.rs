//! The strong entity-tag of a file: a 64-bit mix of its size and
//! modification time, rendered as 16 hex digits in quotes; or, where a
//! server asks for it, the first 64 bits of a digest of its bytes
//! ([`EntityTag::of_digest`]).
//!
//! Stable across restarts (no random seed), so clients' validators survive
//! a deploy. It leaves out the device and inode on purpose: two copies of
//! one tree (replicas on a shared volume, the same image on two nodes) must
//! agree, or `If-None-Match` and `If-Range` fail behind a load balancer. A
//! rewrite changes the mtime (nanoseconds) and so the tag; what it cannot
//! see is a replacement with the same size and a copied mtime (`cp -p`,
//! `rsync -t`), the trade-off nginx makes too. Whether a cached descriptor
//! is still the file at its path is a separate check that does use the
//! inode (`filemanager`).
//!
//! Derived per response rather than stored beside the cache entry, so the
//! cache stays ignorant of HTTP: two multiply-xorshift rounds and 16 table
//! lookups. Side by side in the load harness (`--fileserver-bin`: the daemon
//! before the typed stages, tag cached, against the one after, tag derived
//! among the other stage changes; alternated, 2 runs x 3 rounds), 304s ran
//! at 1.005x the req/s and 0.998x the CPU per request, cached 1 KiB files at
//! 1.000x and 0.991x: whatever the derivation costs is below the noise.

use crate::mime::ContentCoding;

/// `"` + 16 hex digits + `"`.
const LEN: usize = 18;
/// Room for a coding suffix (`-zstd`) inside the quotes.
const MAX: usize = LEN + 5;

/// A strong entity-tag, `"` + 16 lowercase hex digits + `"`; a computed
/// variant's tag carries its coding inside the quotes (`"…-br"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EntityTag {
    bytes: [u8; MAX],
    len: u8,
}

impl EntityTag {
    /// The tag of a file of `size` bytes last modified at `mtime_ns`
    /// (nanoseconds since the Unix epoch).
    pub fn of_file(size: u64, mtime_ns: i64) -> EntityTag {
        fn mix(mut z: u64) -> u64 {
            // splitmix64 finalizer
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        let mut h = 0x9e37_79b9_7f4a_7c15_u64;
        for word in [size, mtime_ns as u64] {
            h = mix(h ^ word).wrapping_add(0x9e37_79b9_7f4a_7c15);
        }
        let mut out = [b'"'; MAX];
        const HEX: &[u8; 16] = b"0123456789abcdef";
        for (i, slot) in out[1..17].iter_mut().enumerate() {
            *slot = HEX[((h >> (60 - 4 * i)) & 0xf) as usize];
        }
        EntityTag {
            bytes: out,
            len: LEN as u8,
        }
    }

    /// The tag of a file by its contents: the first 8 octets of a digest
    /// of its bytes (SHA-256 in `filemanager`), as 16 hex digits. Replicas
    /// of one tree agree whatever their files' times, and a rewrite that
    /// keeps size and mtime (an image built with a fixed mtime, `rsync
    /// -t`) still changes it.
    pub fn of_digest(digest: &[u8; 32]) -> EntityTag {
        let mut out = [b'"'; MAX];
        const HEX: &[u8; 16] = b"0123456789abcdef";
        for (i, b) in digest[..8].iter().enumerate() {
            out[1 + 2 * i] = HEX[usize::from(b >> 4)];
            out[2 + 2 * i] = HEX[usize::from(b & 0xf)];
        }
        EntityTag {
            bytes: out,
            len: LEN as u8,
        }
    }

    /// The tag of this file's representation in `coding` (a variant the
    /// server compressed): the identity tag with `-{coding}` inside the
    /// quotes. Strong comparison tells the two apart, so `If-None-Match`
    /// with a variant's tag revalidates that variant only, and `If-Range`
    /// never mixes ranges of two representations. (A precompressed sibling
    /// is a file of its own and has its own tag.)
    pub fn with_coding(self, coding: ContentCoding) -> EntityTag {
        let mut t = self;
        let suffix = coding.token().as_bytes();
        let end = LEN - 1;
        t.bytes[end] = b'-';
        t.bytes[end + 1..end + 1 + suffix.len()].copy_from_slice(suffix);
        t.bytes[end + 1 + suffix.len()] = b'"';
        t.len = (LEN + 1 + suffix.len()) as u8;
        t
    }

    /// The tag as sent, quotes included.
    pub fn as_str(&self) -> &str {
        // Quotes, ASCII hex digits, `-` and a coding token only, by
        // construction.
        std::str::from_utf8(&self.bytes[..self.len as usize]).unwrap_or("\"0\"")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_hex_of_size_and_mtime_only() {
        let a = EntityTag::of_file(1, 2);
        let s = a.as_str().as_bytes();
        assert_eq!((s[0], s[17], s.len()), (b'"', b'"', 18));
        assert!(s[1..17].iter().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, EntityTag::of_file(2, 2));
        assert_ne!(a, EntityTag::of_file(1, 3));
        // Stable: a validator a client holds survives a restart.
        assert_eq!(a, EntityTag::of_file(1, 2));
    }

    #[test]
    fn a_digest_tag_is_its_first_octets_in_hex() {
        let mut d = [0u8; 32];
        d[..8].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef, 0, 1, 0x2a, 0xff]);
        let t = EntityTag::of_digest(&d);
        assert_eq!(t.as_str(), "\"deadbeef00012aff\"");
        assert_eq!(
            t.with_coding(ContentCoding::Gzip).as_str(),
            "\"deadbeef00012aff-gzip\""
        );
    }

    #[test]
    fn variant_tags_differ_from_identity_and_each_other() {
        let id = EntityTag::of_file(1, 2);
        let br = id.with_coding(ContentCoding::Br);
        let zstd = id.with_coding(ContentCoding::Zstd);
        assert_eq!(br.as_str(), format!("{}-br\"", &id.as_str()[..17]));
        assert_eq!(zstd.as_str().len(), 23);
        assert!(zstd.as_str().ends_with("-zstd\""));
        assert_ne!(br, id);
        assert_ne!(br, zstd);
    }
}

//! Compressed variants of cached files: made once per file version and
//! format, off the calling thread, kept in the path cache beside the
//! file's entry under its variant budget (`pathcache::variant`).
//!
//! ```text
//! variant(file, codec, level)
//!   kept in the entry's slot?            -> it (no I/O)
//!   else single flight per (path, codec):
//!     source: the cached bytes, or one read through the backend checked
//!             with one statx against the entry's version (a torn read
//!             is an error: nothing is kept, the file goes out as it is)
//!     compress on tokio's blocking pool  -> kept (or handed out unkept)
//! ```
//!
//! Why the blocking pool: a worker is a current-thread runtime, and
//! compressing 200 KiB of JavaScript takes milliseconds (the levels'
//! timings are in [`Codec::default_level`]); on the worker it would stall
//! every other connection of that thread for as long.

use std::io::{self, Write};

use bytes::Bytes;
use pathcache::VariantRef;

use crate::handle::CachedFile;
use crate::shared::FileManager;

/// A compression format variants are made in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Codec {
    /// Zstandard (RFC 8878).
    Zstd,
    /// Brotli (RFC 7932).
    Brotli,
    /// gzip (RFC 1952).
    Gzip,
}

impl Codec {
    /// Every codec.
    pub const ALL: [Codec; 3] = [Codec::Zstd, Codec::Brotli, Codec::Gzip];

    /// The levels each codec takes.
    pub fn levels(self) -> std::ops::RangeInclusive<i32> {
        match self {
            Codec::Zstd => 1..=22,
            Codec::Brotli => 0..=11,
            Codec::Gzip => 1..=9,
        }
    }

    /// The default level, chosen on 200 KiB of minified JavaScript (rustdoc's
    /// bundled scripts; release build, best of 5, one core of this
    /// project's 2-core machine): each is the last level before the time
    /// a first request waits climbs steeply for little gain.
    ///
    /// ```text
    /// zstd    3: 24.7%  0.7 ms   9: 22.5%  3.3 ms   12: 22.3%  39 ms   19: 21.1% 159 ms
    /// brotli  4: 24.0%  2.6 ms   6: 21.8%  4.9 ms    9: 21.5%  34 ms   11: 20.1% 277 ms
    /// gzip    1: 31.5%  1.0 ms   6: 23.0%  5.2 ms    9: 23.0% 6.1 ms
    /// ```
    ///
    /// zstd 19 costs 48x the time of zstd 9 for 6% fewer bytes; brotli 11
    /// 57x brotli 6 for 8%.
    pub fn default_level(self) -> i32 {
        match self {
            Codec::Zstd => 9,
            Codec::Brotli => 6,
            Codec::Gzip => 6,
        }
    }

    /// Its variant slot in a cache entry.
    fn slot(self) -> usize {
        match self {
            Codec::Zstd => 0,
            Codec::Brotli => 1,
            Codec::Gzip => 2,
        }
    }

    /// Compresses `src` at `level` (clamped to [`levels`](Self::levels)).
    pub fn compress(self, src: &[u8], level: i32) -> io::Result<Vec<u8>> {
        let range = self.levels();
        let level = level.clamp(*range.start(), *range.end());
        let mut out = Vec::with_capacity(src.len() / 3 + 64);
        match self {
            #[cfg(feature = "zstd")]
            Codec::Zstd => zstd::stream::copy_encode(src, &mut out, level)?,
            #[cfg(not(feature = "zstd"))]
            Codec::Zstd => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "filemanager was built without its zstd feature",
                ))
            }
            Codec::Brotli => {
                let params = brotli::enc::BrotliEncoderParams {
                    quality: level,
                    // A window that covers the file (up to brotli's 16 MiB).
                    lgwin: (usize::BITS - src.len().max(1 << 10).leading_zeros()).clamp(10, 24)
                        as i32,
                    ..Default::default()
                };
                brotli::BrotliCompress(&mut &src[..], &mut out, &params)?;
            }
            Codec::Gzip => {
                let mut enc =
                    flate2::write::GzEncoder::new(out, flate2::Compression::new(level as u32));
                enc.write_all(src)?;
                out = enc.finish()?;
            }
        }
        Ok(out)
    }
}

/// A compressed form of a cached file, kept in (or, over budget, handed
/// out beside) its cache entry.
#[derive(Clone, Debug)]
pub struct Variant {
    /// Its format.
    pub codec: Codec,
    bytes: VariantRef,
    made: bool,
}

impl Variant {
    /// The compressed bytes.
    pub fn bytes(&self) -> &[u8] {
        self.bytes.as_ref()
    }

    /// The bytes as a `Bytes` that shares the cache's copy (no copy; it
    /// keeps the variant alive, counted in the budget, while it is sent).
    pub fn to_bytes(&self) -> Bytes {
        Bytes::from_owner(self.bytes.clone())
    }

    /// Whether this request made it (a compression ran for it).
    pub fn made(&self) -> bool {
        self.made
    }
}

impl FileManager {
    /// The `codec` variant of `file` at `level`: the kept one, or one made
    /// now (reading the file through the backend if its bytes are not
    /// cached, compressing on tokio's blocking pool); concurrent first
    /// requests share one compression. `None` when compression does not
    /// pay (the result is no smaller than the file; remembered, so it is
    /// not tried again for this version). An error (the file changed
    /// during the read, a read failed) keeps nothing; serve the file as it
    /// is.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use filemanager::{Codec, Config, FileManager, Opened};
    /// let dir = tempfile::tempdir().unwrap();
    /// std::fs::write(dir.path().join("a.js"), "let x = 1;\n".repeat(100)).unwrap();
    /// let fm = FileManager::new(Config::new(dir.path())).unwrap();
    /// let Opened::File(f) = fm.open("a.js").await.unwrap() else { panic!() };
    /// let v = fm.variant(&f, Codec::Gzip, 6).await.unwrap().unwrap();
    /// assert!(v.made() && v.bytes().len() < 1100);
    /// assert!(!fm.variant(&f, Codec::Gzip, 6).await.unwrap().unwrap().made());
    /// # });
    /// ```
    pub async fn variant(
        &self,
        file: &CachedFile,
        codec: Codec,
        level: i32,
    ) -> io::Result<Option<Variant>> {
        let make = || async move {
            // One compression per CPU at a time, its source read included:
            // each holds the source, the output and the encoder's window
            // (MiBs for brotli), and a burst of first requests for 300
            // files took the daemon's RSS to 365 MiB with one blocking
            // thread each (the harness's compressed_text).
            let _slot = self
                .shared
                .compress_slots
                .acquire()
                .await
                .map_err(io::Error::other)?;
            let src = match file.bytes() {
                Some(b) => Bytes::copy_from_slice(b),
                None => {
                    let size = usize::try_from(file.meta().size).map_err(io::Error::other)?;
                    let src = self.read_at(file, 0, size).await?;
                    if src.len() != size || !self.check_current(file) {
                        return Err(io::Error::other("file changed while it was read"));
                    }
                    src
                }
            };
            let out = tokio::task::spawn_blocking(move || {
                codec
                    .compress(&src, level)
                    .map(|out| (out.len() < src.len()).then_some(out))
            })
            .await
            .map_err(io::Error::other)??;
            Ok(out)
        };
        let (bytes, made) = self
            .shared
            .cache
            .variant_or_make(&file.entry, codec.slot(), make)
            .await?;
        Ok(bytes
            .bytes()
            .is_some()
            .then_some(Variant { codec, bytes, made }))
    }

    /// Counts a response whose body is `variant` of `file` (Prometheus:
    /// variant hits and bytes saved).
    pub fn count_variant_served(&self, file: &CachedFile, variant: &Variant) {
        let saved = file
            .meta()
            .size
            .saturating_sub(variant.bytes().len() as u64);
        self.shared.cache.count_variant_served(variant.made, saved);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    #[cfg(feature = "zstd")]
    fn every_codec_round_trips_at_its_bounds() {
        let src = b"function f(a) { return a + 1; }\n".repeat(500);
        for codec in Codec::ALL {
            for level in [i32::MIN, codec.default_level(), i32::MAX] {
                let out = codec.compress(&src, level).unwrap();
                assert!(out.len() < src.len() / 10, "{codec:?} {level}");
                let mut back = Vec::new();
                match codec {
                    Codec::Zstd => back = zstd::stream::decode_all(&out[..]).unwrap(),
                    Codec::Brotli => {
                        brotli::BrotliDecompress(&mut &out[..], &mut back).unwrap();
                    }
                    Codec::Gzip => {
                        flate2::read::GzDecoder::new(&out[..])
                            .read_to_end(&mut back)
                            .unwrap();
                    }
                }
                assert_eq!(back, src, "{codec:?} {level}");
            }
        }
    }
}

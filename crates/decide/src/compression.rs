//! What a server compresses on the fly ([`CompressionOptions`]) and the
//! mapping between `filemanager`'s codecs and HTTP content codings.

use filemanager::Codec;
use httpfile::mime::{type_matches, ContentCoding, COMPRESSIBLE_TYPES};

/// What a server compresses on the fly, and how.
///
/// The first request for a file in a coding waits for its compression (at
/// most `max_file_size` bytes: at the default 1 MiB and levels, about
/// 25 ms on one core of a small machine), sharing it with every
/// concurrent request for the same file and coding; later ones are
/// answered from the kept variant. Waiting, rather than answering the
/// first request uncompressed and compressing behind it, is what gets a
/// browser compressed bytes on the first load of a page, when they count
/// most; the size bound is what keeps that wait short.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompressionOptions {
    /// The codings made, in the server's order of preference: equal
    /// `Accept-Encoding` weights go to the earlier one. The default, br
    /// before zstd before gzip, is the order of the smallest output at the
    /// default levels (21.8%, 22.5% and 23.0% of 200 KiB of JavaScript)
    /// and the order precompressed siblings are tried in, so one request
    /// gets the same coding from either.
    pub codings: Vec<ContentCoding>,
    /// Media types compressed: `type/subtype` or `type/*`.
    pub types: Vec<String>,
    /// Larger files are sent as they are (and do not wait).
    pub max_file_size: u64,
    /// The level of each coding, by [`ContentCoding::index`].
    pub levels: [i32; 3],
}

impl Default for CompressionOptions {
    fn default() -> Self {
        CompressionOptions {
            codings: ContentCoding::PREFERENCE.to_vec(),
            types: COMPRESSIBLE_TYPES.iter().map(|t| t.to_string()).collect(),
            max_file_size: 1 << 20,
            levels: ContentCoding::PREFERENCE.map(|c| codec(c).default_level()),
        }
    }
}

impl CompressionOptions {
    /// The level `coding` is made at.
    pub fn level(&self, coding: ContentCoding) -> i32 {
        self.levels[coding.index()]
    }

    /// Whether files of type `mime` and `size` bytes are compressed.
    pub fn applies(&self, mime: &str, size: u64) -> bool {
        size > 0 && size <= self.max_file_size && type_matches(mime, &self.types)
    }
}

/// The codec that makes `coding`.
pub fn codec(coding: ContentCoding) -> Codec {
    match coding {
        ContentCoding::Zstd => Codec::Zstd,
        ContentCoding::Br => Codec::Brotli,
        ContentCoding::Gzip => Codec::Gzip,
    }
}

/// The coding `codec` makes.
pub fn coding(codec: Codec) -> ContentCoding {
    match codec {
        Codec::Zstd => ContentCoding::Zstd,
        Codec::Brotli => ContentCoding::Br,
        Codec::Gzip => ContentCoding::Gzip,
    }
}

//! How a path is answered: `index`, `directory_listing`,
//! `listing_max_entries`, `serve_dotfiles`, `precompressed`,
//! `cache_control`, `max_ranges`, `etag` (top-level keys), with `[compression]`
//! and the site's rules: the `decide::Options` every engine decides with.

use super::values::range;
use super::{err, ConfigError};
use decide::CompressionOptions;
use serde::{Deserialize, Serialize};

/// The serving keys of the top table.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(default)]
pub struct ServeConfig {
    /// Index files tried for a directory, in order.
    pub index: Vec<String>,
    /// Generate listings for directories without an index.
    pub directory_listing: bool,
    /// Entries shown in one listing at most; more are cut with a note.
    pub listing_max_entries: u64,
    /// Serve files and directories whose name starts with a dot.
    pub serve_dotfiles: bool,
    /// Serve `.br`/`.zst`/`.gz` siblings by `Accept-Encoding`.
    pub precompressed: bool,
    /// Value of the `Cache-Control` header; empty = none.
    pub cache_control: String,
    /// Byte ranges per request at most; more get the full body.
    pub max_ranges: u64,
    /// What a file's entity-tag is made of: `meta` (size and time) or
    /// `content` (a digest of its bytes).
    pub etag: String,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            index: vec!["index.html".into()],
            directory_listing: false,
            listing_max_entries: 10_000,
            serve_dotfiles: false,
            precompressed: true,
            cache_control: "no-cache".into(),
            max_ranges: 16,
            etag: "meta".into(),
        }
    }
}

impl ServeConfig {
    /// The options of the default site, its `rules` given.
    pub(super) fn validate(
        &self,
        compression: Option<CompressionOptions>,
        rules: siterules::Rules,
        e: &mut Vec<ConfigError>,
    ) -> decide::Options {
        for name in &self.index {
            if name.is_empty()
                || name.contains('/')
                || name == ".."
                || name == "."
                || name.contains('\0')
            {
                e.push(err("index", format!("`{name}` must be a plain file name")));
            }
        }
        if self
            .cache_control
            .bytes()
            .any(|b| b == b'\r' || b == b'\n' || (b < 0x20 && b != b'\t'))
        {
            e.push(err("cache_control", "must not contain control characters"));
        }
        let content_etag = match self.etag.as_str() {
            "meta" => false,
            "content" => true,
            o => {
                e.push(err("etag", format!("`{o}` is not one of meta, content")));
                false
            }
        };
        decide::Options {
            content_etag,
            rules: std::sync::Arc::new(rules),
            index: self.index.clone(),
            listing: self.directory_listing,
            listing_max_entries: range(
                "listing_max_entries",
                self.listing_max_entries,
                1,
                10_000_000,
                e,
            ),
            dotfiles: self.serve_dotfiles,
            cache_control: Some(self.cache_control.clone()).filter(|c| !c.is_empty()),
            max_ranges: range("max_ranges", self.max_ranges, 1, 1000, e),
            precompressed: self.precompressed,
            compression,
            redirect_base: String::new(),
        }
    }
}

//! The server's view of `filemanager`: every request opens through its path
//! cache (cached descriptor for sendfile, cached small-file bytes for one
//! writev). This module only maps settings and result types.

use crate::config::Settings;
use rustix::fd::{AsFd, BorrowedFd};
use std::io;

pub use filemanager::{OpenError, Opened};

/// An open regular file from the path cache (alias kept short for `conn`).
pub type FileRef = filemanager::CachedFile;

/// What responses need from a cached file.
pub trait FileExt {
    /// Size at open (or last revalidation).
    fn size(&self) -> u64;
    /// Modification time, Unix seconds.
    fn mtime_secs(&self) -> u64;
    /// The descriptor for sendfile.
    fn fd(&self) -> BorrowedFd<'_>;
}

impl FileExt for filemanager::CachedFile {
    #[inline]
    fn size(&self) -> u64 {
        self.meta().size
    }
    #[inline]
    fn mtime_secs(&self) -> u64 {
        (self.meta().mtime_ns.max(0) / 1_000_000_000) as u64
    }
    #[inline]
    fn fd(&self) -> BorrowedFd<'_> {
        self.as_fd()
    }
}

/// Builds the pathcache configuration from settings.
pub fn cache_config(s: &Settings) -> pathcache::Config {
    pathcache::Config {
        shards: s.workers.max(1),
        max_entries: s.cache.max_entries,
        max_open: s.cache.max_open,
        valid: s.cache.valid,
        negative_ttl: s.cache.negative_ttl,
        small_file_max: s.cache.small_file_max,
        small_bytes_budget: s.cache.small_bytes_budget,
        min_uses: s.cache.min_uses,
    }
}

/// File access beneath the root.
#[derive(Debug)]
pub struct Files {
    fm: filemanager::FileManager,
}

impl Files {
    /// Applies the `[cache]` settings of `s` to the running cache (SIGHUP);
    /// returns the entries evicted at once by lower bounds.
    pub fn set_cache_limits(&self, s: &Settings) -> usize {
        self.fm.set_cache_limits(cache_config(s))
    }

    /// The cache settings in use (`max_open` as capped by the fd budget).
    pub fn cache_config(&self) -> pathcache::Config {
        self.fm.cache_config()
    }

    /// Starts the file manager (raises RLIMIT_NOFILE, picks the backend).
    pub fn new(s: &Settings) -> io::Result<Files> {
        let config = filemanager::Config {
            root: s.root.clone(),
            shards: s.workers.max(1),
            backend: s.io_backend,
            symlinks: s.symlinks,
            cache: cache_config(s),
            fd_budget: s.fd_budget,
            fd_headroom: s.fd_headroom,
            inline_cached_opens: s.inline_opens,
        };
        Ok(Files {
            fm: filemanager::FileManager::new(config)?,
        })
    }

    /// Backend that runs and why.
    pub fn backend(&self) -> (String, String) {
        let (k, why) = self.fm.backend();
        (k.to_string(), why.to_string())
    }

    /// Soft RLIMIT_NOFILE after raising it.
    pub fn fd_limit(&self) -> u64 {
        self.fm.fd_limit()
    }

    /// Opens `rel` (normalized, root-relative; `""` is the root) through the cache.
    ///
    /// A file sent with sendfile (no cached bytes) is checked with one statx
    /// on its cached descriptor (`CachedFile::is_current`): a file rewritten
    /// in place within the cache's `valid` window would otherwise go out as
    /// new bytes under the old length and validators (without the check,
    /// `reliability_replace` counts about 16000 torn responses in 180000).
    /// One statx is noise next to a >16 KiB send; cached small-file bytes
    /// are a snapshot that matches their metadata, so they need no check.
    pub async fn open(&self, rel: &str) -> Result<Opened, OpenError> {
        let rel = if rel.is_empty() { "." } else { rel };
        let opened = self.fm.open(rel).await?;
        if let Opened::File(f) = &opened {
            if f.bytes().is_none() && !f.is_current() {
                drop(opened);
                self.fm.invalidate(rel);
                return self.fm.open(rel).await;
            }
        }
        Ok(opened)
    }

    /// Lists directory `rel` beneath the root (off the worker thread), with
    /// the resolution rules of every open.
    pub async fn list_dir(
        &self,
        rel: &str,
        opts: filemanager::ListOptions,
    ) -> Result<filemanager::Listing, OpenError> {
        self.fm.list_dir(rel, opts).await
    }

    /// Sets up the calling worker thread's I/O state (its io_uring) at
    /// start, so the worker's descriptors do not appear mid-traffic.
    pub fn attach_worker(&self) -> io::Result<()> {
        self.fm.attach_worker()
    }

    /// Publishes the file layer's counters (prefix `fileserver`).
    pub fn export_metrics(&self, prefix: &str) {
        self.fm.export_metrics(prefix);
    }
}

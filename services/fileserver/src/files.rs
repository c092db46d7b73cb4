//! The server's view of `filemanager`: every request resolves through its
//! path cache (cached descriptor for sendfile, cached small-file bytes for
//! one writev). This module only hands the settings' library
//! configurations (`pathcache::Config`, the backend, the root) to it.

use crate::config::Settings;
use std::io;

/// File access beneath the root.
#[derive(Debug)]
pub struct Files {
    fm: filemanager::FileManager,
}

impl Files {
    /// Applies the `[cache]` settings of `s` to the running cache (SIGHUP);
    /// returns the entries evicted at once by lower bounds.
    pub fn set_cache_limits(&self, s: &Settings) -> usize {
        self.fm.set_cache_limits(s.cache.clone())
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
            cache: s.cache.clone(),
            fd_budget: s.fd_budget,
            fd_headroom: s.fd_headroom,
            inline_cached_opens: s.inline_opens,
            raise_nofile: true,
            reaper_thread: true,
            watch_changes: s.watch_changes,
        };
        Ok(Files {
            fm: filemanager::FileManager::new(config)?,
        })
    }

    /// The tower Service for the hyper listeners, answering with `s`'s
    /// serving options (the plaintext engine decides with the same ones).
    pub fn service(&self, s: &Settings) -> servedir::ServeDir {
        servedir::ServeDir::with_options(self.fm.clone(), s.serve.clone())
    }

    /// The file manager itself.
    pub fn manager(&self) -> &filemanager::FileManager {
        &self.fm
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

    /// The resolve stage of a request (see `FileManager::resolve`).
    pub async fn resolve(
        &self,
        query: &filemanager::Query<'_>,
    ) -> Result<filemanager::Resolved, filemanager::OpenError> {
        self.fm.resolve(query).await
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

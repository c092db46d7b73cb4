//! The server's view of `filemanager`: every request resolves through its
//! path cache (cached descriptor for sendfile, cached small-file bytes for
//! one writev). This module only hands the settings' library
//! configurations (`pathcache::Config`, the backend, the root) to it.

use crate::config::Settings;
use std::io;

/// File access beneath the root, and beneath each virtual host's.
#[derive(Debug)]
pub(crate) struct Files {
    fm: filemanager::FileManager,
    /// One manager per `[[sites]]` root, in the order of `Settings::sites`
    /// at start (a root changes only with a restart).
    sites: Vec<filemanager::FileManager>,
}

impl Files {
    /// Applies the `[cache]` settings of `s` to the running cache (SIGHUP);
    /// returns the entries evicted at once by lower bounds.
    pub(crate) fn set_cache_limits(&self, s: &Settings) -> usize {
        let sites: usize = self
            .sites
            .iter()
            .map(|fm| fm.set_cache_limits(s.cache.clone()))
            .sum();
        self.fm.set_cache_limits(s.cache.clone()) + sites
    }

    /// The cache settings in use (`max_open` as capped by the fd budget).
    pub(crate) fn cache_config(&self) -> pathcache::Config {
        self.fm.cache_config()
    }

    /// Starts the file managers (raises RLIMIT_NOFILE, picks the backend):
    /// the default root's and one per site. The cache bounds and
    /// `fd_budget` are each root's.
    pub(crate) fn new(s: &Settings) -> io::Result<Files> {
        let manager = |root: &std::path::Path| {
            filemanager::FileManager::new(Files::config(s, root))
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", root.display())))
        };
        Ok(Files {
            fm: filemanager::FileManager::new(Files::config(s, &s.root))?,
            sites: s
                .sites
                .iter()
                .map(|site| manager(&site.root))
                .collect::<io::Result<_>>()?,
        })
    }

    fn config(s: &Settings, root: &std::path::Path) -> filemanager::Config {
        filemanager::Config {
            root: root.to_path_buf(),
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
        }
    }

    /// The default root's file manager.
    pub(crate) fn manager(&self) -> &filemanager::FileManager {
        &self.fm
    }

    /// The file manager of `site` (`Settings::site_for`), or the default.
    pub(crate) fn manager_for(&self, site: Option<usize>) -> &filemanager::FileManager {
        site.and_then(|i| self.sites.get(i)).unwrap_or(&self.fm)
    }

    /// Backend that runs and why.
    pub(crate) fn backend(&self) -> (String, String) {
        let (k, why) = self.fm.backend();
        (k.to_string(), why.to_string())
    }

    /// Soft RLIMIT_NOFILE after raising it.
    pub(crate) fn fd_limit(&self) -> u64 {
        self.fm.fd_limit()
    }

    /// Sets up the calling worker thread's I/O state (its io_uring) at
    /// start, so the worker's descriptors do not appear mid-traffic.
    pub(crate) fn attach_worker(&self) -> io::Result<()> {
        self.sites.iter().try_for_each(|fm| fm.attach_worker())?;
        self.fm.attach_worker()
    }

    /// Publishes the file layer's counters (prefix `fileserver`): the
    /// default root's, and each `[[sites]]` root's path cache under
    /// `fileserver_site_cache_*{site}` (`sites[i]` names `[[sites]]` i).
    pub(crate) fn export_metrics(&self, prefix: &str, sites: &[String]) {
        self.fm.export_metrics(prefix);
        for (fm, site) in self.sites.iter().zip(sites) {
            let c = fm.stats().cache;
            let site = site.clone();
            for (name, value) in [
                ("hits", c.hits),
                ("misses", c.misses),
                ("negative_hits", c.negative_hits),
                ("evictions", c.evictions),
            ] {
                let name = format!("{prefix}_site_cache_{name}_total");
                metrics::counter!(name, "site" => site.clone()).absolute(value);
            }
            metrics::gauge!(format!("{prefix}_site_cache_entries"), "site" => site)
                .set(c.entries as f64);
        }
    }
}

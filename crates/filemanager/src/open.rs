//! The open paths: a cached open through the path cache, an uncached
//! one, a stat, and beneath them the backend open with the descriptor
//! budget and `EMFILE` recovery that inserts each new descriptor into the
//! descriptor table. Touches the backend, the descriptor table, the budget
//! counters and the path cache.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use fdtable::Owned;
use pathcache::{FileMeta, Lookup, Negative};

use crate::backend;
use crate::file::{BudgetToken, FileValue};
use crate::handle::{CachedFile, FileHandle, Opened};
use crate::loader::CacheLoader;
use crate::resolve::{self, c_path, is_exhausted, map_open_error};
use crate::shared::{FileManager, Shared};
use crate::sys::{Kind, OwnedFd, Stat};
use crate::types::OpenError;
use crate::watch;

pub(crate) fn cache_key(rel_path: &str) -> &str {
    rel_path.trim_start_matches('/')
}

impl Shared {
    fn over_budget(&self) -> bool {
        self.open_fds.load(Ordering::Relaxed) >= self.budget
    }

    /// Opens through the backend with budget and `EMFILE` recovery.
    pub(crate) async fn open_raw(
        &self,
        path: &str,
        oflags: crate::sys::OFlags,
    ) -> Result<(OwnedFd, Stat), OpenError> {
        let c = c_path(path)?;
        let mut recovered = false;
        if self.over_budget() {
            self.relieve();
            if self.over_budget() {
                self.exhausted.fetch_add(1, Ordering::Relaxed);
                return Err(OpenError::Exhausted);
            }
            recovered = true;
        }
        let res = match self
            .backend
            .open(
                &self.root(),
                c.clone(),
                oflags,
                self.rules(),
                self.inline_cached_opens,
            )
            .await
        {
            Err(e) if is_exhausted(&e) => {
                self.relieve();
                recovered = true;
                match self
                    .backend
                    .open(
                        &self.root(),
                        c,
                        oflags,
                        self.rules(),
                        self.inline_cached_opens,
                    )
                    .await
                {
                    Err(e) if is_exhausted(&e) => {
                        self.exhausted.fetch_add(1, Ordering::Relaxed);
                        return Err(OpenError::Exhausted);
                    }
                    other => other,
                }
            }
            other => other,
        };
        if recovered {
            self.emfile_recoveries.fetch_add(1, Ordering::Relaxed);
        }
        res.map_err(map_open_error)
    }

    pub(crate) async fn stat_path(&self, path: &str) -> Result<FileMeta, OpenError> {
        let (fd, st) = self.open_raw(path, resolve::path_oflags()).await?;
        drop(fd);
        match st.kind {
            Kind::Regular => Ok(st.meta),
            Kind::Dir => Err(OpenError::IsDir),
            Kind::Other => Err(OpenError::Forbidden),
        }
    }

    pub(crate) async fn open_owned(
        &self,
        path: &str,
    ) -> Result<(Owned<FileValue>, Stat), OpenError> {
        let (fd, st) = self.open_raw(path, resolve::read_oflags()).await?;
        match st.kind {
            Kind::Regular => {}
            Kind::Dir => return Err(OpenError::IsDir),
            Kind::Other => return Err(OpenError::Forbidden),
        }
        let value = FileValue::new(fd, st.meta.size, BudgetToken::take(&self.open_fds));
        let owned = match self.table.insert_owned(value) {
            Ok(o) => o,
            Err(fdtable::InsertError::Full(v)) => {
                drop(v);
                self.relieve();
                self.exhausted.fetch_add(1, Ordering::Relaxed);
                return Err(OpenError::Exhausted);
            }
        };
        #[cfg(target_os = "linux")]
        {
            let fd = owned.fd();
            let index = u64::from(fd.slot()) * self.shards as u64 + fd.shard() as u64;
            if let Ok(index) = u32::try_from(index) {
                owned.fixed().set_slot(backend::FixedSlot {
                    index,
                    key: (self.id, fd.to_raw()),
                });
            }
        }
        Ok((owned, st))
    }
}

impl FileManager {
    /// Opens `rel_path` through the path cache.
    pub async fn open(&self, rel_path: &str) -> Result<Opened, OpenError> {
        let key = cache_key(rel_path);
        let loader = CacheLoader::new(&self.shared);
        let mut attempts = 0;
        loop {
            attempts += 1;
            loader.checked.store(false, Ordering::Relaxed);
            let lookup = self.shared.cache.get_or_load(key, &loader).await;
            loader.drop_if_raced(key);
            let entry = match lookup {
                Ok(Lookup::Hit(e)) => e,
                Ok(Lookup::Negative(Negative::NotFound)) | Err(OpenError::NotFound) => {
                    return Ok(Opened::NotFound)
                }
                Ok(Lookup::Negative(Negative::Forbidden)) | Err(OpenError::Forbidden) => {
                    return Ok(Opened::Forbidden)
                }
                Err(OpenError::IsDir) => return Ok(Opened::IsDir),
                Err(e) => return Err(e),
            };
            if entry.handle().is_some() {
                return Ok(Opened::File(CachedFile {
                    entry,
                    own: None,
                    checked: loader.checked.load(Ordering::Relaxed),
                }));
            }
            // Metadata-only entry (not yet used often enough to keep an fd
            // cached): open for this request and check it is the same file.
            let (owned, meta) = match self.shared.open_owned(key).await {
                Ok((owned, st)) => (owned, st.meta),
                Err(OpenError::NotFound) => return Ok(Opened::NotFound),
                Err(OpenError::Forbidden) => return Ok(Opened::Forbidden),
                Err(OpenError::IsDir) => return Ok(Opened::IsDir),
                Err(e) => return Err(e),
            };
            let same = entry.meta().is_same_version(&meta);
            if same || attempts >= 2 {
                return Ok(Opened::File(CachedFile {
                    entry,
                    own: Some(FileHandle { owned }),
                    checked: same,
                }));
            }
            // Changed since it was cached: drop the stale entry and look up
            // again so metadata and descriptor agree.
            self.shared.cache.invalidate(key);
        }
    }

    /// Opens `rel_path` without the cache (regular files only).
    pub async fn open_uncached(&self, rel_path: &str) -> Result<FileHandle, OpenError> {
        let (owned, _) = self.shared.open_owned(cache_key(rel_path)).await?;
        Ok(FileHandle { owned })
    }

    /// Metadata of `rel_path` (from the cache when fresh).
    pub async fn stat(&self, rel_path: &str) -> Result<FileMeta, OpenError> {
        let key = cache_key(rel_path);
        match self.shared.cache.get(key) {
            Some(Lookup::Hit(e)) => return Ok(*e.meta()),
            Some(Lookup::Negative(Negative::NotFound)) => return Err(OpenError::NotFound),
            Some(Lookup::Negative(Negative::Forbidden)) => return Err(OpenError::Forbidden),
            None => {}
        }
        self.shared.stat_path(key).await
    }

    /// Whether a file about to be sent from its descriptor is the version
    /// its metadata describes: the watcher vouches for a cached descriptor
    /// (no change under the root since it was checked, none queued: one
    /// empty epoll wait on the thread's own instance),
    /// else [`CachedFile::is_current`] (one `statx`, counted as a stat).
    /// Asked only of responses sent from a descriptor: a copy in memory
    /// needs neither, and asking every hit was one ioctl per request.
    pub(crate) fn check_current(&self, f: &CachedFile) -> bool {
        if self.vouched(f) {
            return true;
        }
        self.shared.backend.counters().op(backend::Op::Stat);
        f.is_current()
    }

    /// Whether `f`, about to be sent from its descriptor, is the version its
    /// metadata describes: yes for bytes in memory or a descriptor this
    /// lookup just checked, else the watcher's word or one `statx`
    /// ([`CachedFile::is_current`]). For a caller that resolved with a
    /// [`Query::check_files_over`](crate::Query::check_files_over) bound
    /// and then finds it must check after all.
    pub fn is_current(&self, f: &CachedFile) -> bool {
        f.bytes().is_some() || f.checked || self.check_current(f)
    }

    /// Whether the bytes behind `f` are still those its metadata describes,
    /// asked after reading some of them and before the last leave: the
    /// watcher's word where it vouches (no change under the root since the
    /// descriptor was checked, one empty epoll wait), else
    /// [`CachedFile::contents_unchanged`] (one `statx`).
    pub fn contents_unchanged(&self, f: &CachedFile) -> bool {
        self.vouched(f) || f.contents_unchanged()
    }

    /// The change watcher's word that `f`'s file is as it was checked: no
    /// event under the root since its descriptor's stamp, none queued.
    fn vouched(&self, f: &CachedFile) -> bool {
        let holds = |w: &Arc<watch::Watcher>| w.holds(f.value().stamp());
        f.own.is_none() && self.shared.watcher.as_ref().is_some_and(holds)
    }

    /// Drops the cached entry for `rel_path` (its descriptor is released when
    /// the last user finishes).
    pub fn invalidate(&self, rel_path: &str) -> bool {
        self.shared.cache.invalidate(cache_key(rel_path))
    }
}

//! The path caches' loaders: how a miss or a stale entry reaches the
//! filesystem ([`pathcache::Loader`] for the manager's cache of files,
//! and for the census cache of directories, `census.rs`), and the watcher
//! epoch a lookup notes so that a change seen while it loaded drops what
//! it indexed. Opens and stats through the open paths (`open.rs`); reads
//! a small file's bytes through the backend; takes a census on the
//! blocking pool.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use fdtable::Owned;
use pathcache::{FileMeta, Loaded, Negative};

use crate::backend::{self, Target};
use crate::census::{self, Census};
use crate::config::SymlinkPolicy;
use crate::file::FileValue;
use crate::resolve;
use crate::shared::Shared;
use crate::sys::{self, AsFd, Kind, OFlags};
use crate::types::{OpenError, Sibling};

/// The `Loader` the path cache calls on a miss or revalidation.
pub(crate) struct CacheLoader<'a> {
    shared: &'a Shared,
    /// This lookup loaded the entry it returns, or revalidated it (see
    /// `is_unchanged`).
    pub(crate) checked: AtomicBool,
    /// Before this lookup's load or revalidation looked at the file.
    epoch: LoadEpoch,
}

/// The watcher's epoch noted before a lookup's load or revalidation looked
/// at the disk (0: it did neither), checked once the lookup is over: an
/// event handled meanwhile may have found nothing indexed to drop yet
/// (`watch.rs`).
#[derive(Default)]
pub(crate) struct LoadEpoch(AtomicU64);

impl LoadEpoch {
    pub(crate) fn note(&self, shared: &Shared) {
        if let Some(w) = &shared.watcher {
            self.0.store(w.epoch(), Ordering::Relaxed);
        }
    }

    /// Whether an event about `path` was handled after the noted epoch;
    /// forgets the epoch. A plain load first: a hit noted nothing, and this
    /// runs after every lookup (a `swap` would be a locked instruction per
    /// hit).
    #[inline]
    pub(crate) fn raced(&self, shared: &Shared, path: &str) -> bool {
        let epoch = self.0.load(Ordering::Relaxed);
        if epoch == 0 {
            return false;
        }
        self.0.store(0, Ordering::Relaxed);
        (shared.watcher.as_ref()).is_some_and(|w| w.changed_since(path, epoch))
    }
}

impl<'a> CacheLoader<'a> {
    pub(crate) fn new(shared: &'a Shared) -> Self {
        CacheLoader {
            shared,
            checked: AtomicBool::new(false),
            epoch: LoadEpoch::default(),
        }
    }

    /// Puts watches on `path`'s directories and notes the epoch before
    /// the check that follows; the stamp for a descriptor it vouches for.
    fn prepare(&self, path: &str) -> Option<u64> {
        self.epoch.note(self.shared);
        self.shared.watcher.as_ref()?.prepare(path)
    }

    /// After the lookup: drops what this lookup's load indexed if an
    /// event about `path` was handled while it loaded, so the next
    /// request loads the new version (this one keeps what it has).
    #[inline]
    pub(crate) fn drop_if_raced(&self, path: &str) {
        if self.epoch.raced(self.shared, path) {
            self.shared.cache.invalidate(path);
        }
    }
}

impl pathcache::Loader<Owned<FileValue>> for CacheLoader<'_> {
    type Error = OpenError;

    async fn load(
        &self,
        path: &str,
        open: bool,
        read_small: Option<u64>,
    ) -> Result<Loaded<Owned<FileValue>>, OpenError> {
        let mime = media_type(path);
        let stamp = self.prepare(path);
        if !open {
            return match self.shared.stat_path(path).await {
                Ok(meta) => Ok(Loaded::File {
                    meta,
                    label: mime,
                    handle: None,
                    bytes: None,
                }),
                Err(OpenError::NotFound) => Ok(Loaded::Negative(Negative::NotFound)),
                Err(OpenError::Forbidden) => Ok(Loaded::Negative(Negative::Forbidden)),
                Err(e) => Err(e),
            };
        }
        let (owned, st) = match self.shared.open_owned(path).await {
            Ok(v) => v,
            Err(OpenError::NotFound) => return Ok(Loaded::Negative(Negative::NotFound)),
            Err(OpenError::Forbidden) => return Ok(Loaded::Negative(Negative::Forbidden)),
            Err(e) => return Err(e),
        };
        let meta = st.meta;
        let bytes = match read_small {
            Some(max) if meta.size <= max => self.read_whole(&owned, meta.size).await?,
            _ => None,
        };
        owned.set_stamp(stamp.filter(|_| st.nlink == 1));
        // Its metadata was taken from this descriptor just now: the request
        // that loaded it needs no other check.
        self.checked.store(true, Ordering::Relaxed);
        Ok(Loaded::File {
            meta,
            label: mime,
            handle: Some(owned),
            bytes,
        })
    }

    /// The copy a small file's second use takes: read through the entry's
    /// descriptor (no second open).
    async fn read(
        &self,
        _path: &str,
        handle: &Owned<FileValue>,
        len: u64,
    ) -> Result<Option<Vec<u8>>, OpenError> {
        self.read_whole(handle, len).await
    }

    async fn stat(&self, path: &str) -> Result<Option<FileMeta>, OpenError> {
        match self.shared.stat_path(path).await {
            Ok(meta) => Ok(Some(meta)),
            Err(OpenError::NotFound) | Err(OpenError::Forbidden) | Err(OpenError::IsDir) => {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Revalidation. An entry with a descriptor: one `statx` of the path
    /// from the root's descriptor, where a lookup's confined stat is an
    /// `O_PATH` open, a `statx` and a `close`. It never opens or serves
    /// anything: a "same version" (same device, inode, size and times as
    /// the descriptor that was opened beneath the root) keeps that
    /// descriptor, and any other answer (changed, gone, or a walk that left
    /// the root and found some other file) falls back to the confined stat,
    /// so a path that now leads elsewhere is judged as a new lookup would
    /// judge it. The descriptor pins its dentries, so the walk stays in the
    /// dentry cache. Either way a "same" also vouches for the descriptor
    /// for this request (the inode and its metadata match now), which
    /// spares the torn-response check.
    ///
    /// The walk follows symlinks in the directories on the way, so a path
    /// that now reaches the same file through a link is kept where a new
    /// lookup might refuse the link (an absolute one under `WithinRoot`):
    /// the bytes are those of the file that was opened beneath the root,
    /// and nothing else can be reached that way. Under `Deny`, whose point
    /// is that no link is ever followed, every revalidation is confined.
    async fn is_unchanged(
        &self,
        path: &str,
        cached: &FileMeta,
        handle: Option<&Owned<FileValue>>,
    ) -> Result<bool, OpenError> {
        let stamp = self.prepare(path);
        if let Some(handle) = handle.filter(|_| self.shared.policy != SymlinkPolicy::Deny) {
            self.shared.backend.counters().op(backend::Op::Stat);
            if let Ok(st) = sys::stat_unconfined(&*self.shared.root(), path) {
                if st.kind == Kind::Regular && st.meta.is_same_version(cached) {
                    handle.set_stamp(stamp.filter(|_| st.nlink == 1));
                    self.checked.store(true, Ordering::Relaxed);
                    return Ok(true);
                }
            }
            handle.set_stamp(None);
        }
        let same = self
            .stat(path)
            .await?
            .is_some_and(|m| m.is_same_version(cached));
        self.checked.store(same, Ordering::Relaxed);
        Ok(same)
    }

    /// The torn-read check after a small file's copy: an `fstat` of the
    /// descriptor the copy was read through, not a second path walk. On the
    /// cache_pressure harness (80% misses) the path stat was an `O_PATH`
    /// open + `statx` + `close` per miss, a third of the daemon's syscalls.
    async fn recheck(
        &self,
        path: &str,
        handle: Option<&Owned<FileValue>>,
    ) -> Result<Option<FileMeta>, OpenError> {
        let Some(handle) = handle else {
            return self.stat(path).await;
        };
        self.shared.backend.counters().op(backend::Op::Stat);
        match sys::stat_fd(handle.as_fd()) {
            Ok(stat) if stat.kind == Kind::Regular => Ok(Some(stat.meta)),
            Ok(_) => Ok(None),
            Err(e) => Err(OpenError::Io(e)),
        }
    }
}

impl CacheLoader<'_> {
    /// The whole of a small file of `size` bytes, read through `owned`.
    /// `None` when the file's length no longer is `size` (it is then
    /// served from the descriptor).
    async fn read_whole(
        &self,
        owned: &Owned<FileValue>,
        size: u64,
    ) -> Result<Option<Vec<u8>>, OpenError> {
        let len = usize::try_from(size).unwrap_or(usize::MAX);
        // Through the plain descriptor, not a fixed-file slot: the bytes
        // are read once and then served from the cache, so registering the
        // file in the ring (one FILES_UPDATE syscall now, one clear when it
        // is released) would buy nothing; on a miss-heavy load those were
        // ~1% of the daemon's CPU.
        let target = Target {
            fd: owned.as_fd(),
            fixed: None,
        };
        let b = self
            .shared
            .backend
            .read(target, 0, len)
            .await
            .map_err(OpenError::Io)?;
        // `Vec::from` takes the buffer back without copying when the
        // `Bytes` is the only owner of the `Vec` it came from.
        Ok((b.len() as u64 == size).then(|| Vec::from(b)))
    }
}

/// The media type of `path` by its extension, as `mime_guess` names it.
/// The web's common extensions are matched here first: `mime_guess` looks
/// every one up in its table with case-folding compares. Callgrind of the
/// daemon under `cache_pressure` (82% of requests load a file): about 1100
/// instructions per load with `mime_guess::from_path`, 530 with
/// `rsplit('/')` and `rfind('.')` before the match, 140 with one backward
/// scan for the last dot or slash.
fn media_type(path: &str) -> &'static str {
    // `Path::extension`'s answer without its component parsing: a leading
    // dot starts a name, not an extension.
    let bytes = path.as_bytes();
    let ext = match bytes.iter().rposition(|&b| b == b'.' || b == b'/') {
        Some(dot) if bytes[dot] == b'.' && dot > 0 && bytes[dot - 1] != b'/' => &path[dot + 1..],
        _ => return OCTET_STREAM,
    };
    common_media_type(ext).unwrap_or_else(|| {
        mime_guess::from_ext(ext)
            .first_raw()
            .unwrap_or(OCTET_STREAM)
    })
}

const OCTET_STREAM: &str = "application/octet-stream";

/// `mime_guess`'s answer for the common lowercase extensions (a test holds
/// them equal).
fn common_media_type(ext: &str) -> Option<&'static str> {
    Some(match ext {
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "js" => "text/javascript",
        "mjs" => "application/javascript",
        "json" => "application/json",
        "txt" => "text/plain",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "svg" => "image/svg+xml",
        "webp" => "image/webp",
        "ico" => "image/x-icon",
        "woff" => "application/font-woff",
        "woff2" => "font/woff2",
        "wasm" => "application/wasm",
        "xml" => "text/xml",
        "pdf" => "application/pdf",
        "bin" => OCTET_STREAM,
        "mp4" => "video/mp4",
        "webm" => "video/webm",
        "map" => "text/plain",
        _ => return None,
    })
}

/// The census cache's loader for one query's suffixes.
pub(crate) struct CensusLoader<'a> {
    pub(crate) shared: &'a Shared,
    pub(crate) siblings: &'a [Sibling<'a>],
    /// Before this lookup listed or re-checked the directory.
    pub(crate) epoch: LoadEpoch,
}

impl CensusLoader<'_> {
    /// After the lookup: drops a census that a name added or removed while
    /// it was taken made out of date (the watcher names the root "").
    pub(crate) fn drop_if_raced(&self, dir: &str) {
        if self
            .epoch
            .raced(self.shared, if dir == "." { "" } else { dir })
        {
            self.shared.census.invalidate(dir);
        }
    }
}

impl pathcache::Loader<Census> for CensusLoader<'_> {
    type Error = OpenError;

    async fn load(
        &self,
        dir: &str,
        _open: bool,
        _read_small: Option<u64>,
    ) -> Result<Loaded<Census>, OpenError> {
        self.epoch.note(self.shared);
        let root = self.shared.root();
        let rules = self.shared.rules();
        let dir = dir.to_owned();
        let suffixes: Box<[Box<str>]> = self.siblings.iter().map(|s| s.suffix.into()).collect();
        tokio::task::spawn_blocking(move || census::take(&root, &dir, rules, suffixes))
            .await
            .map_err(|e| OpenError::Io(std::io::Error::other(e)))?
    }

    async fn stat(&self, dir: &str) -> Result<Option<FileMeta>, OpenError> {
        match self.shared.open_raw(dir, dir_path_oflags()).await {
            Ok((_, st)) if st.kind == Kind::Dir => Ok(Some(st.meta)),
            Ok(_) | Err(OpenError::NotFound | OpenError::Forbidden) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn is_unchanged(
        &self,
        dir: &str,
        cached: &FileMeta,
        census: Option<&Census>,
    ) -> Result<bool, OpenError> {
        if census.is_none_or(|c| c.racy) {
            return Ok(false);
        }
        self.epoch.note(self.shared);
        Ok(self
            .stat(dir)
            .await?
            .is_some_and(|m| m.is_same_version(cached)))
    }
}

fn dir_path_oflags() -> OFlags {
    resolve::path_oflags() | OFlags::DIRECTORY
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_types_are_mime_guess_answers() {
        for ext in [
            "html", "htm", "css", "js", "mjs", "json", "txt", "png", "jpg", "jpeg", "gif", "svg",
            "webp", "ico", "woff", "woff2", "wasm", "xml", "pdf", "bin", "mp4", "webm", "map",
        ] {
            let guess = mime_guess::from_ext(ext).first_raw();
            assert_eq!(common_media_type(ext), guess, "{ext}");
        }
        assert_eq!(common_media_type("xyz"), None);
        assert_eq!(media_type("a/b.HTML"), "text/html");
        assert_eq!(media_type("a/b.tar.gz"), "application/gzip");
        assert_eq!(media_type("dir/.hidden"), OCTET_STREAM);
        assert_eq!(media_type("noext"), OCTET_STREAM);
        assert_eq!(media_type("a./b"), OCTET_STREAM);
        assert_eq!(media_type("d/a."), OCTET_STREAM);
        assert_eq!(media_type(".hidden"), OCTET_STREAM);
        assert_eq!(media_type("a.b/c"), OCTET_STREAM);
        assert_eq!(media_type("a.b/c.css"), "text/css");
        assert_eq!(media_type("pressure/0005.bin"), OCTET_STREAM);
        assert_eq!(
            media_type("x.avif"),
            mime_guess::from_ext("avif").first_raw().unwrap()
        );
    }
}

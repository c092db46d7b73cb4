//! The resolve stage of a request: from a normalized path and the
//! request's preferences to what is there ([`Resolved`]). This is the only
//! code a server needs to touch the filesystem for a request; every name
//! goes through the path cache and the one flag table of
//! [`crate::resolve`], and "is it still the same file?" is decided by
//! [`FileMeta::is_same_version`] alone.

use crate::census;
use crate::handle::{CachedFile, Opened};
use crate::listing::{ListOptions, Listing};
use crate::loader::CensusLoader;
use crate::shared::FileManager;
use crate::types::{OpenError, Sibling};
use pathcache::{FileMeta, Lookup};

/// What a request asks of the filesystem.
#[derive(Clone, Copy, Debug)]
pub struct Query<'a> {
    /// Normalized, root-relative path (`""` is the root).
    pub path: &'a str,
    /// The path ended with `/`: only a directory answers it.
    pub dir_only: bool,
    /// Every precompressed form the server serves, best first (empty: the
    /// server serves none). Accepted ones are tried in this order.
    pub siblings: &'a [Sibling<'a>],
    /// Names tried, in order, for a directory (`index.html`).
    pub index: &'a [String],
    /// List a directory that has no index (`None`: such a directory is not
    /// found).
    pub listing: Option<ListOptions>,
    /// A cached file sent from its descriptor that is larger than this
    /// many bytes is checked (one `statx`) and reopened when it changed;
    /// `0` checks every one. A caller that reads all of a smaller file and
    /// checks it itself before any byte of the response leaves, asking
    /// again when it changed (the daemon's HTTP/1.1 engine), sets its
    /// bound here, so such a file is checked once per response, not twice.
    pub check_files_over: u64,
}

/// What is at a [`Query`]'s path.
#[derive(Debug)]
pub enum Resolved {
    /// A regular file to serve.
    File(ResolvedFile),
    /// A directory named without its trailing `/`.
    Directory,
    /// A directory without an index, listed.
    Listing(Listing),
    /// Nothing to serve there.
    NotFound,
    /// Refused (escape, symlink policy, permission, not a regular file).
    Forbidden,
}

/// A file to serve: the path's file, its index, or a precompressed sibling.
/// What the response makes of it (its coding, a compressed variant,
/// `Vary`) is the server's to decide.
#[derive(Debug)]
pub struct ResolvedFile {
    /// The open file.
    pub file: CachedFile,
    /// Index into [`Query::siblings`] of the form served, if a sibling.
    pub sibling: Option<usize>,
    /// The type of what is served: for a sibling, of the file it encodes.
    pub mime: &'static str,
}

impl ResolvedFile {
    /// Size, times and identity of the served file.
    pub fn meta(&self) -> &FileMeta {
        self.file.meta()
    }
}

impl FileManager {
    /// Resolves `query`: the file at its path (or, with siblings, the best
    /// accepted precompressed form of it), a directory's first index file,
    /// a listing, or why there is nothing. Errors are the table being full
    /// ([`OpenError::Exhausted`]) and I/O failures.
    ///
    /// A file sent by descriptor (no cached bytes) is checked with one
    /// `statx` ([`CachedFile::is_current`]) and reopened when it changed: a
    /// file rewritten in place within the cache's `valid` window would
    /// otherwise go out as new bytes under the old length and validators
    /// (without the check, the daemon's `reliability_replace` test counts
    /// about 16000 torn responses in 180000). Cached bytes are a snapshot
    /// that matches their metadata and need no check. The check is spared
    /// when this lookup just revalidated the entry, and while the change
    /// watcher ([`Config::watch_changes`](crate::Config::watch_changes))
    /// has seen no event since the descriptor was last checked; and the
    /// path's own file is not checked when a sibling is sent instead.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use filemanager::{Config, FileManager, Query, Resolved, Sibling};
    /// let dir = tempfile::tempdir().unwrap();
    /// std::fs::write(dir.path().join("a.css"), "body{}").unwrap();
    /// std::fs::write(dir.path().join("a.css.gz"), "gz").unwrap();
    /// let fm = FileManager::new(Config::new(dir.path())).unwrap();
    /// let siblings = [Sibling { suffix: ".br", accepted: true }, Sibling { suffix: ".gz", accepted: true }];
    /// let query = Query { path: "a.css", dir_only: false, siblings: &siblings, index: &[], listing: None, check_files_over: 0 };
    /// let Resolved::File(f) = fm.resolve(&query).await.unwrap() else { panic!() };
    /// assert_eq!((f.sibling, f.mime), (Some(1), "text/css"));
    /// assert!(matches!(fm.resolve(&Query { path: "", ..query }).await.unwrap(), Resolved::Directory));
    /// # });
    /// ```
    pub async fn resolve(&self, query: &Query<'_>) -> Result<Resolved, OpenError> {
        let mut retry = false;
        loop {
            match self.resolve_pass(query, retry).await? {
                Pass::Done(resolved) => return Ok(resolved),
                // The file to send changed since it was checked: its entry
                // is gone, and a second pass opens it afresh (and checks
                // nothing it opens, so it ends the loop).
                Pass::Stale => retry = true,
            }
        }
    }

    /// One pass of [`resolve`](Self::resolve). A file is checked only once
    /// it is the one to send: the path's own file is not when a sibling
    /// goes instead (that was one check, an empty epoll wait, for 11 of
    /// HttpArena's 20 files a request, for nothing). `retry`: the second
    /// pass, after [`Pass::Stale`], which takes the file it opens afresh
    /// as it is, as a reopen always has.
    async fn resolve_pass(&self, query: &Query<'_>, retry: bool) -> Result<Pass, OpenError> {
        let resolved = match self.open(entry_path(query.path)).await? {
            Opened::File(_) if query.dir_only && !query.path.is_empty() => Resolved::NotFound,
            Opened::File(file) => match self.negotiate(query, query.path, file, retry).await? {
                Some(f) => Resolved::File(f),
                None => return Ok(Pass::Stale),
            },
            Opened::IsDir if !query.dir_only => Resolved::Directory,
            Opened::IsDir => return self.directory(query, retry).await,
            Opened::NotFound => Resolved::NotFound,
            Opened::Forbidden => Resolved::Forbidden,
        };
        Ok(Pass::Done(resolved))
    }

    /// A directory asked for with its `/`: the first index file, else a
    /// listing, else nothing.
    async fn directory(&self, query: &Query<'_>, retry: bool) -> Result<Pass, OpenError> {
        let mut path = String::new();
        for name in query.index {
            path.clear();
            if !query.path.is_empty() {
                path.push_str(query.path);
                path.push('/');
            }
            path.push_str(name);
            if let Opened::File(file) = self.open(&path).await? {
                return Ok(match self.negotiate(query, &path, file, retry).await? {
                    Some(f) => Pass::Done(Resolved::File(f)),
                    None => Pass::Stale,
                });
            }
        }
        let resolved = match query.listing {
            Some(opts) => match self.list_dir(query.path, opts).await {
                Ok(listing) => Resolved::Listing(listing),
                Err(OpenError::NotFound) | Err(OpenError::IsDir) => Resolved::NotFound,
                Err(OpenError::Forbidden) => Resolved::Forbidden,
                Err(e) => return Err(e),
            },
            None => Resolved::NotFound,
        };
        Ok(Pass::Done(resolved))
    }

    /// `file` found at `path` (opened, not yet checked), or its best
    /// accepted precompressed sibling (checked as it is opened); `None`
    /// when `file` itself is the one to send and changed since it was
    /// checked: its entry is dropped, for the caller's second pass. `retry`:
    /// that pass, which does not check `file`.
    async fn negotiate(
        &self,
        query: &Query<'_>,
        path: &str,
        file: CachedFile,
        retry: bool,
    ) -> Result<Option<ResolvedFile>, OpenError> {
        // A path that is itself a sibling's is served as it is.
        let negotiated =
            !query.siblings.is_empty() && !query.siblings.iter().any(|s| path.ends_with(s.suffix));
        let plain = |file: CachedFile| {
            let file = if retry {
                file
            } else {
                self.current_or_dropped(file, path, query.check_files_over)?
            };
            Some(ResolvedFile {
                mime: file.mime(),
                file,
                sibling: None,
            })
        };
        if !negotiated || !query.siblings.iter().any(|s| s.accepted) {
            return Ok(plain(file));
        }
        // A sibling its directory's census does not list is not there.
        let may_exist = self.siblings_listed(path, query.siblings).await;
        let candidates = || {
            query
                .siblings
                .iter()
                .enumerate()
                .filter(move |&(i, s)| s.accepted && (i >= 32 || may_exist & (1 << i) != 0))
        };
        if candidates().next().is_none() {
            return Ok(plain(file));
        }
        let (mut stack, mut heap) = ([0; SIBLING_PATH_STACK], String::new());
        for (i, s) in candidates() {
            let sibling_path = joined(path, s.suffix, &mut stack, &mut heap);
            // A sibling that cannot be opened (missing, refused, the table
            // full) is passed over: the file itself can still be served.
            if let Ok(Opened::File(encoded)) = self
                .open_current(sibling_path, query.check_files_over)
                .await
            {
                return Ok(Some(ResolvedFile {
                    file: encoded,
                    sibling: Some(i),
                    mime: file.mime(),
                }));
            }
        }
        Ok(plain(file))
    }

    /// Bit `i` set: `siblings[i]` may exist beside `path`, by the census of
    /// its directory (`census.rs`); every bit when the census cannot be
    /// taken, so the siblings are looked up one by one as without it.
    async fn siblings_listed(&self, path: &str, siblings: &[Sibling<'_>]) -> u32 {
        let (dir, name) = census::split(path);
        let loader = CensusLoader {
            shared: &self.shared,
            siblings,
            epoch: Default::default(),
        };
        let lookup = self.shared.census.get_or_load(dir, &loader).await;
        loader.drop_if_raced(dir);
        match lookup {
            Ok(Lookup::Hit(entry)) => entry
                .handle()
                .map_or(u32::MAX, |c| c.may_exist(name, siblings)),
            Ok(Lookup::Negative(_)) | Err(_) => u32::MAX,
        }
    }

    /// [`open`](Self::open), with a file sent by descriptor checked to be
    /// the version its metadata describes (see [`resolve`](Self::resolve)).
    async fn open_current(&self, path: &str, check_over: u64) -> Result<Opened, OpenError> {
        let path = entry_path(path);
        let f = match self.open(path).await? {
            Opened::File(f) => f,
            other => return Ok(other),
        };
        match self.current_or_dropped(f, path, check_over) {
            Some(f) => Ok(Opened::File(f)),
            None => self.open(path).await,
        }
    }

    /// `f`, opened at `path`, if it may be sent as it is
    /// ([`is_current_over`](Self::is_current_over)); else its entry is
    /// dropped, so the next open of `path` loads the file afresh.
    fn current_or_dropped(&self, f: CachedFile, path: &str, check_over: u64) -> Option<CachedFile> {
        if self.is_current_over(&f, check_over) {
            return Some(f);
        }
        drop(f);
        self.invalidate(entry_path(path));
        None
    }

    /// Whether `f` may be sent as it is: its bytes are in memory, it is at
    /// most `check_over` bytes, this lookup just checked it, or it is
    /// still the version its metadata describes.
    fn is_current_over(&self, f: &CachedFile, check_over: u64) -> bool {
        f.bytes().is_some() || f.meta().size <= check_over || f.checked || self.check_current(f)
    }
}

/// The cache's name for `path`: `"."` for the root itself.
fn entry_path(path: &str) -> &str {
    if path.is_empty() {
        "."
    } else {
        path
    }
}

/// One pass of [`FileManager::resolve`].
enum Pass {
    Done(Resolved),
    /// The file to send changed since it was checked; its entry is gone.
    Stale,
}

/// The longest sibling path joined on the stack; a longer one is built on
/// the heap.
const SIBLING_PATH_STACK: usize = 192;

/// `path` followed by `suffix`, in `stack` when it fits, else in `heap`:
/// most requests for a file with siblings build one such path, and a
/// `String` for it was a malloc and a free each (arena_h1_64, callgrind:
/// 12 516 instructions per request before, 12 371 after).
fn joined<'b>(
    path: &str,
    suffix: &str,
    stack: &'b mut [u8; SIBLING_PATH_STACK],
    heap: &'b mut String,
) -> &'b str {
    let n = path.len() + suffix.len();
    if n > stack.len() {
        heap.clear();
        heap.push_str(path);
        heap.push_str(suffix);
        return heap;
    }
    stack[..path.len()].copy_from_slice(path.as_bytes());
    stack[path.len()..n].copy_from_slice(suffix.as_bytes());
    // Two `str`s joined at a boundary are UTF-8: this never fails.
    std::str::from_utf8(&stack[..n]).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::{joined, SIBLING_PATH_STACK};

    /// A path joins on the stack when it fits and on the heap past it,
    /// the same either way.
    #[test]
    fn sibling_paths_join_whole_on_the_stack_or_the_heap() {
        let (mut stack, mut heap) = ([0; SIBLING_PATH_STACK], String::new());
        assert_eq!(
            joined("css/app.css", ".br", &mut stack, &mut heap),
            "css/app.css.br"
        );
        assert!(heap.is_empty());
        let fits = "é".repeat((SIBLING_PATH_STACK - 3) / 2);
        let at_limit = format!("{fits}{}", "x".repeat(SIBLING_PATH_STACK - 3 - fits.len()));
        let got = joined(&at_limit, ".gz", &mut stack, &mut heap).to_owned();
        assert_eq!(got, format!("{at_limit}.gz"));
        assert!(heap.is_empty(), "{} bytes fit the stack", got.len());
        let long = "d/".repeat(SIBLING_PATH_STACK);
        assert_eq!(
            joined(&long, ".br", &mut stack, &mut heap),
            format!("{long}.br")
        );
        assert_eq!(heap, format!("{long}.br"));
    }
}

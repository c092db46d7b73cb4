//! Change notification for what the cache holds, so a cached descriptor
//! need not be `statx`'ed on every request.
//!
//! ```text
//! one inotify descriptor per manager; a watch on every directory that
//! holds a cached file and on each directory above it, up to the root
//!
//! check (an open, or a revalidation that found the same version):
//!   prepare(path): watches in place first, then read epoch E
//!   the check itself                         -> the descriptor is stamped E
//! request: stamp == epoch and nothing queued (FIONREAD)
//!                          -> no statx (nothing changed anywhere since)
//!          stamp != epoch  -> statx the descriptor, as without watching
//! watcher thread: any event at all           -> epoch += 1
//!   a directory moved, deleted or replaced, an overflow -> every watch
//!   dropped (added again by the next prepare)
//! ```
//!
//! One epoch for everything keeps the rule simple: a stamp is trusted only
//! while no event of any kind has been seen since the check, so a change
//! that the check could not see is always followed by an event that voids
//! the stamp. A tree that changes all the time simply falls back to the
//! per-request `statx`. The time-based revalidation (`cache.valid`) stays,
//! as the bound for changes inotify does not report (writes through a
//! shared mapping, remote filesystems).

use std::collections::HashMap;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crossbeam_utils::CachePadded;
use rustix::fs::inotify::{self, ReadFlags, WatchFlags};

/// What a watch reports: anything that can change a file's bytes, its
/// metadata, or which file a name leads to.
const MASK: WatchFlags = WatchFlags::MODIFY
    .union(WatchFlags::ATTRIB)
    .union(WatchFlags::CLOSE_WRITE)
    .union(WatchFlags::MOVED_FROM)
    .union(WatchFlags::MOVED_TO)
    .union(WatchFlags::CREATE)
    .union(WatchFlags::DELETE)
    .union(WatchFlags::DELETE_SELF)
    .union(WatchFlags::MOVE_SELF)
    .union(WatchFlags::ONLYDIR);

/// Events after which the directory keys no longer name what they watch.
const STRUCTURAL: ReadFlags = ReadFlags::MOVE_SELF
    .union(ReadFlags::DELETE_SELF)
    .union(ReadFlags::QUEUE_OVERFLOW)
    .union(ReadFlags::UNMOUNT)
    .union(ReadFlags::ISDIR);

/// How long the thread waits for events before it checks that its manager
/// is still alive.
const POLL: Duration = Duration::from_millis(500);

/// Watched directories, by path relative to the root ("" is the root).
#[derive(Default)]
struct Dirs {
    by_path: HashMap<Box<str>, i32>,
    by_wd: HashMap<i32, Box<str>>,
}

pub(crate) struct Watcher {
    inotify: OwnedFd,
    /// The root through its descriptor, `/proc/self/fd/N`: a root renamed
    /// after start is still the one watched.
    root: String,
    dirs: Mutex<Dirs>,
    /// Read by every hit sent from a descriptor: on its own line, away from
    /// the lock that each miss and revalidation writes.
    epoch: CachePadded<AtomicU64>,
    events: AtomicU64,
    resets: AtomicU64,
}

/// Counters of the watcher.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WatchStats {
    /// Directories watched now.
    pub dirs: u64,
    /// Events read (each voids every stamp).
    pub events: u64,
    /// Times every watch was dropped (a directory moved or deleted, or the
    /// event queue overflowed).
    pub resets: u64,
}

impl Watcher {
    /// A watcher for the tree under `root`, and its thread.
    pub(crate) fn start(root: &OwnedFd) -> io::Result<Arc<Watcher>> {
        let w = Watcher::without_thread(root)?;
        let weak = Arc::downgrade(&w);
        std::thread::Builder::new()
            .name("filemanager-watch".into())
            .spawn(move || run(weak))?;
        Ok(w)
    }

    /// The watcher alone: nothing reads its events (tests).
    fn without_thread(root: &OwnedFd) -> io::Result<Arc<Watcher>> {
        let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)?;
        let w = Arc::new(Watcher {
            inotify: fd,
            root: format!("/proc/self/fd/{}", root.as_raw_fd()),
            dirs: Mutex::new(Dirs::default()),
            epoch: CachePadded::new(AtomicU64::new(1)),
            events: AtomicU64::new(0),
            resets: AtomicU64::new(0),
        });
        // The root itself must be reachable this way, or nothing is watched.
        rustix::fs::statx(
            rustix::fs::CWD,
            w.root.as_str(),
            rustix::fs::AtFlags::empty(),
            rustix::fs::StatxFlags::TYPE,
        )?;
        Ok(w)
    }

    /// Puts watches on the directory of `path` and every one above it,
    /// then returns the epoch a check made from now on is stamped with;
    /// `None` when a directory cannot be watched (gone, or out of watches).
    pub(crate) fn prepare(&self, path: &str) -> Option<u64> {
        let dir = path.rfind('/').map_or("", |i| &path[..i]);
        let mut dirs = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
        if !dirs.by_path.contains_key(dir) {
            let ends = std::iter::once(0)
                .chain(dir.match_indices('/').map(|(i, _)| i))
                .chain((!dir.is_empty()).then_some(dir.len()));
            for end in ends {
                let prefix = &dir[..end];
                if dirs.by_path.contains_key(prefix) {
                    continue;
                }
                let target = if prefix.is_empty() {
                    self.root.clone()
                } else {
                    format!("{}/{prefix}", self.root)
                };
                let wd = inotify::add_watch(&self.inotify, target.as_str(), MASK).ok()?;
                dirs.by_path.insert(prefix.into(), wd);
                dirs.by_wd.insert(wd, prefix.into());
            }
        }
        drop(dirs);
        Some(self.epoch.load(Ordering::SeqCst))
    }

    /// Whether a check stamped `stamp` still holds: no event since, neither
    /// one the thread has read nor one still queued. The kernel queues a
    /// write's event before the write returns, but the thread may not have
    /// run yet (on a busy machine, for milliseconds), so a request that
    /// arrives after a rewrite must see the queue itself: one `FIONREAD`
    /// ioctl, which touches neither the file nor its inode, where the check
    /// it replaces is a `statx` of the file. Without it the daemon's
    /// reliability_replace test served a torn response while no write was
    /// in progress, once in a loaded run of the suite.
    #[inline]
    pub(crate) fn holds(&self, stamp: u64) -> bool {
        stamp == self.epoch.load(Ordering::SeqCst)
            && rustix::io::ioctl_fionread(&self.inotify).is_ok_and(|queued| queued == 0)
    }

    pub(crate) fn stats(&self) -> WatchStats {
        let dirs = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
        WatchStats {
            dirs: dirs.by_path.len() as u64,
            events: self.events.load(Ordering::Relaxed),
            resets: self.resets.load(Ordering::Relaxed),
        }
    }

    /// Reads what is queued; true when something was.
    fn drain(&self, buf: &mut [MaybeUninit<u8>]) -> bool {
        let mut reader = inotify::Reader::new(self.inotify.as_fd(), buf);
        let mut seen = false;
        let mut reset = false;
        loop {
            let ev = match reader.next() {
                Ok(ev) => ev,
                Err(rustix::io::Errno::AGAIN) | Err(rustix::io::Errno::INTR) => break,
                Err(_) => {
                    reset = true;
                    break;
                }
            };
            let flags = ev.events();
            let dirs = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
            let Some(dir) = dirs.by_wd.get(&ev.wd()).cloned() else {
                // A watch dropped by a reset reports IN_IGNORED later; an
                // overflow has no watch. Neither is news about a cached file
                // except the overflow.
                if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                    seen = true;
                    reset = true;
                }
                continue;
            };
            seen = true;
            // The epoch moves before anything else, so no request that
            // starts after this point trusts a stamp from before it.
            self.epoch.fetch_add(1, Ordering::SeqCst);
            if flags.intersects(STRUCTURAL) || flags.contains(ReadFlags::IGNORED) {
                reset = true;
            } else if let Some(name) = ev.file_name() {
                // A name that is itself a watched directory (a symlink to
                // one, replaced) changes what the keys below it lead to.
                let name = name.to_string_lossy();
                let child = if dir.is_empty() {
                    name.into_owned()
                } else {
                    format!("{dir}/{name}")
                };
                reset |= dirs.by_path.contains_key(child.as_str());
            }
            drop(dirs);
            self.events.fetch_add(1, Ordering::Relaxed);
        }
        if reset {
            self.reset();
        }
        seen
    }

    /// Drops every watch; `prepare` adds them again as files are checked.
    fn reset(&self) {
        let mut dirs = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
        self.epoch.fetch_add(1, Ordering::SeqCst);
        for (&wd, _) in dirs.by_wd.iter() {
            let _ = inotify::remove_watch(&self.inotify, wd);
        }
        dirs.by_path.clear();
        dirs.by_wd.clear();
        self.resets.fetch_add(1, Ordering::Relaxed);
    }
}

fn run(weak: Weak<Watcher>) {
    let mut buf = vec![MaybeUninit::<u8>::uninit(); 16 * 1024];
    loop {
        let Some(fd) = weak.upgrade().map(|w| w.inotify.as_raw_fd()) else {
            return;
        };
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd on the stack, read and written by the kernel
        // for the call. A watcher dropped meanwhile closes `fd`: the poll
        // then wakes early or times out (it reads nothing), and the
        // upgrade below ends the thread.
        unsafe { libc::poll(&mut pfd, 1, POLL.as_millis() as libc::c_int) };
        let Some(w) = weak.upgrade() else { return };
        w.drain(&mut buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(dir: &std::path::Path) -> OwnedFd {
        rustix::fs::open(
            dir,
            rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY,
            rustix::fs::Mode::empty(),
        )
        .unwrap()
    }

    /// Waits (bounded) for the watcher thread to see what the test did.
    fn until(what: &str, f: impl Fn() -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !f() {
            assert!(std::time::Instant::now() < deadline, "{what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_write_voids_every_stamp_and_a_moved_directory_drops_the_watches() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("a/b")).unwrap();
        std::fs::write(tmp.path().join("a/b/f"), b"1").unwrap();
        std::fs::write(tmp.path().join("top"), b"1").unwrap();
        let root = root(tmp.path());
        let w = Watcher::start(&root).unwrap();
        let stamp = w.prepare("a/b/f").unwrap();
        assert_eq!(w.stats().dirs, 3, "the root, a and a/b");
        assert!(w.holds(stamp));
        assert_eq!(w.prepare("top"), Some(stamp), "nothing happened yet");

        std::fs::write(tmp.path().join("a/b/f"), b"2").unwrap();
        until("a write seen", || !w.holds(stamp));

        let stamp = w.prepare("a/b/f").unwrap();
        std::fs::rename(tmp.path().join("a"), tmp.path().join("moved")).unwrap();
        until("a moved directory resets", || w.stats().resets >= 1);
        assert!(!w.holds(stamp));
        assert_eq!(w.stats().dirs, 0);
        assert_eq!(w.prepare("a/b/f"), None, "a/ is gone");
        assert!(w.prepare("moved/b/f").is_some());
    }

    /// The window between a write and the thread reading its event: a
    /// stamp must not hold while the event waits in the queue.
    #[test]
    fn a_queued_event_voids_stamps_before_it_is_read() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("f"), b"1").unwrap();
        let root = root(tmp.path());
        let w = Watcher::without_thread(&root).unwrap();
        let stamp = w.prepare("f").unwrap();
        assert!(w.holds(stamp));
        std::fs::write(tmp.path().join("f"), b"2").unwrap();
        assert!(!w.holds(stamp), "a write not yet read by the thread");
        let mut buf = vec![MaybeUninit::<u8>::uninit(); 4096];
        assert!(w.drain(&mut buf));
        assert!(!w.holds(stamp), "and after it was read");
        let stamp = w.prepare("f").unwrap();
        assert!(w.holds(stamp), "a new check after the event holds");
    }

    #[test]
    fn a_symlinked_directory_replaced_resets() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("x")).unwrap();
        std::fs::create_dir_all(tmp.path().join("y")).unwrap();
        std::fs::write(tmp.path().join("x/f"), b"x").unwrap();
        std::fs::write(tmp.path().join("y/f"), b"y").unwrap();
        std::os::unix::fs::symlink("x", tmp.path().join("link")).unwrap();
        let root = root(tmp.path());
        let w = Watcher::start(&root).unwrap();
        let stamp = w.prepare("link/f").unwrap();
        std::fs::remove_file(tmp.path().join("link")).unwrap();
        std::os::unix::fs::symlink("y", tmp.path().join("link")).unwrap();
        until("the link's replacement resets", || w.stats().resets >= 1);
        assert!(!w.holds(stamp));
    }
}

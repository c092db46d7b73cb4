//! Change notification: what the watcher sees drops exactly the cache
//! entries it affects, and vouches for cached descriptors meanwhile.
//!
//! ```text
//! one inotify descriptor per manager, one thread per process reading them all; a watch on every directory that
//! holds a cached path and on each directory above it, up to the root
//!
//! a lookup's load or revalidation:
//!   e = epoch; prepare(path): watches in place          then the check
//!   after the entry is in the index: changed_since(path, e)?  -> drop it
//! watcher thread, around each read of the queue: drains += 1 before, += 1
//! once what it read is handled; per event in directory D (each path P that
//! D is watched as):
//!   epoch += 1                                (voids descriptor stamps)
//!   a file's bytes or attributes     -> touched[P/name] = epoch; drop P/name
//!   a name that is (or was) a directory, a link to one, or a directory
//!   a lookup found missing           -> tree = epoch; drop P/name and all below
//!   names added or removed in D      -> drop D's sibling census too
//!   D itself moved or deleted        -> drop P and all below; unwatch them
//!   queue overflow                   -> drop everything; unwatch everything
//! request sent from a cached descriptor: drains even and unmoved, stamp ==
//!   epoch and nothing queued (the thread's probe: an empty epoll wait) -> no
//!   statx; else statx the descriptor
//! ```
//!
//! The guarantee: a request that starts once the watcher thread has read a
//! change's event gets the new answer, and the kernel queues the event
//! before the change's syscall returns, so the window is the thread's wake-up
//! (it sleeps in `poll` on the queue; see `docs/operations.md` for what was
//! measured). The `touched` stamps close the race of a load that read the
//! old version while the event was handled: the event's invalidation either
//! finds the entry in the index, or happened before the insert and is seen
//! by the check after it. Not seen at all, and bounded by `cache.valid`
//! only: writes through a shared mapping, network filesystems, a file
//! reached through a hard link or a symlink whose other name is changed
//! outside the watched directories.

use std::collections::HashMap;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crossbeam_utils::CachePadded;

use crate::changes::Change;
use crate::changes::WatchStats;
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

/// Events after which a watched directory no longer is where its paths say.
const SELF_GONE: ReadFlags = ReadFlags::MOVE_SELF
    .union(ReadFlags::DELETE_SELF)
    .union(ReadFlags::UNMOUNT)
    .union(ReadFlags::IGNORED);

/// Events that add or remove a name in a directory.
const NAMES: ReadFlags = ReadFlags::CREATE
    .union(ReadFlags::DELETE)
    .union(ReadFlags::MOVED_FROM)
    .union(ReadFlags::MOVED_TO);

/// How long the thread waits for events before it checks that its manager
/// is still alive.
const POLL: Duration = Duration::from_millis(500);

/// Buckets of `touched`: a path's bucket is its hash modulo this. A
/// collision only makes a load re-check once more.
const BUCKETS: usize = 4096;

/// Watched directories, by path relative to the root ("" is the root).
#[derive(Default)]
struct Dirs {
    /// The root through its descriptor, `/proc/self/fd/N`: a root renamed
    /// after start is still the one watched.
    root: String,
    by_path: HashMap<Box<str>, i32>,
    /// Every path a watch was added through: a directory reached through
    /// a symlink and by its own name is one inode, so one watch.
    by_wd: HashMap<i32, Vec<Box<str>>>,
    /// Directories a lookup found missing, whose later creation must drop
    /// the negative answers cached below them (a directory created says so
    /// in its event; a symlink to one does not).
    missing: HashMap<Box<str>, ()>,
    /// `missing` was full: every name created is taken as a tree.
    missing_overflowed: bool,
    /// Watches outside the root, on the directories holding the symlinks
    /// the root path passes through, with the links' names.
    root_links: HashMap<i32, Vec<std::ffi::OsString>>,
}

/// Missing directories remembered at most (a client can name any number).
const MISSING_MAX: usize = 16 * 1024;

impl Dirs {
    /// Unwatches `path` and every directory below it.
    fn forget_under(&mut self, inotify: &OwnedFd, path: &str) {
        let below = |q: &str| {
            path.is_empty()
                || q.strip_prefix(path)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        };
        self.missing.retain(|q, _| !below(q));
        if path.is_empty() {
            self.missing_overflowed = false;
        }
        let gone: Vec<(Box<str>, i32)> = self
            .by_path
            .iter()
            .filter(|(q, _)| below(q))
            .map(|(q, &wd)| (q.clone(), wd))
            .collect();
        for (q, wd) in gone {
            self.by_path.remove(&q);
            if let Some(paths) = self.by_wd.get_mut(&wd) {
                paths.retain(|p| *p != q);
                if paths.is_empty() {
                    self.by_wd.remove(&wd);
                    let _ = inotify::remove_watch(inotify, wd);
                }
            }
        }
    }
}

/// What a descriptor's stamp is checked against.
struct Clock {
    /// Moves with every event handled (and every reset).
    epoch: AtomicU64,
    /// Odd while the thread drains the queue: from before its first read
    /// until every event read is handled. An event it has read but not yet
    /// handled is neither queued nor in `epoch`; a check that sees `drains`
    /// odd, or moved across its look at the queue, does not vouch.
    drains: AtomicU64,
}

/// Source of [`Watcher::id`]s: never reused, unlike descriptor numbers.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

pub(crate) struct Watcher {
    inotify: OwnedFd,
    /// This watcher's key in each thread's [`QueueProbe`].
    id: u64,
    dirs: Mutex<Dirs>,
    /// Read by every hit sent from a descriptor: on its own line, away from
    /// the lock that each miss and revalidation writes.
    clock: CachePadded<Clock>,
    /// The epoch of the last event about a path, by the path's bucket.
    touched: Box<[AtomicU64]>,
    /// The epoch of the last event that dropped a whole tree.
    tree: AtomicU64,
    events: AtomicU64,
    resets: AtomicU64,
    paths_dropped: AtomicU64,
    trees_dropped: AtomicU64,
    races: AtomicU64,
}

impl Watcher {
    /// A watcher for the tree under `root`, and for the symlinks the root
    /// path passes through (`root_links`: each link's directory and name);
    /// nothing reads its events until [`spawn`] starts its thread.
    pub(crate) fn new(
        root: &OwnedFd,
        root_links: &[(std::path::PathBuf, std::ffi::OsString)],
    ) -> io::Result<Arc<Watcher>> {
        let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)?;
        let root_path = format!("/proc/self/fd/{}", root.as_raw_fd());
        let mut dirs = Dirs {
            root: root_path.clone(),
            ..Dirs::default()
        };
        for (dir, name) in root_links {
            let wd = inotify::add_watch(&fd, dir.as_path(), MASK)?;
            dirs.root_links.entry(wd).or_default().push(name.clone());
        }
        let w = Arc::new(Watcher {
            inotify: fd,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            dirs: Mutex::new(dirs),
            clock: CachePadded::new(Clock {
                epoch: AtomicU64::new(1),
                drains: AtomicU64::new(0),
            }),
            touched: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            tree: AtomicU64::new(0),
            events: AtomicU64::new(0),
            resets: AtomicU64::new(0),
            paths_dropped: AtomicU64::new(0),
            trees_dropped: AtomicU64::new(0),
            races: AtomicU64::new(0),
        });
        // The root itself must be reachable this way, or nothing is watched.
        rustix::fs::statx(
            rustix::fs::CWD,
            root_path.as_str(),
            rustix::fs::AtFlags::empty(),
            rustix::fs::StatxFlags::TYPE,
        )?;
        Ok(w)
    }

    /// The epoch now: read before a load's check, handed back to
    /// [`changed_since`](Self::changed_since) after the entry is indexed.
    pub(crate) fn epoch(&self) -> u64 {
        self.clock.epoch.load(Ordering::SeqCst)
    }

    /// Whether an event about `path` (or a tree above it) was handled
    /// after `epoch`: the entry a load indexed may hold the old version.
    pub(crate) fn changed_since(&self, path: &str, epoch: u64) -> bool {
        let changed = self.touched[bucket(path)].load(Ordering::SeqCst) > epoch
            || self.tree.load(Ordering::SeqCst) > epoch;
        if changed {
            self.races.fetch_add(1, Ordering::Relaxed);
        }
        changed
    }

    /// Puts watches on the directory of `path` and every one above it,
    /// then returns the epoch a check made from now on is stamped with;
    /// `None` when a directory cannot be watched (gone, or out of watches).
    /// A missing directory is remembered, so that its creation drops the
    /// negative answers cached below it.
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
                    dirs.root.clone()
                } else {
                    format!("{}/{prefix}", dirs.root)
                };
                let wd = match inotify::add_watch(&self.inotify, target.as_str(), MASK) {
                    Ok(wd) => wd,
                    Err(_) => {
                        if dirs.missing.len() < MISSING_MAX {
                            dirs.missing.insert(prefix.into(), ());
                        } else {
                            dirs.missing_overflowed = true;
                        }
                        return None;
                    }
                };
                dirs.by_path.insert(prefix.into(), wd);
                dirs.by_wd.entry(wd).or_default().push(prefix.into());
            }
        }
        drop(dirs);
        Some(self.clock.epoch.load(Ordering::SeqCst))
    }

    /// Whether a check stamped `stamp` still holds: no event since, neither
    /// one the thread has handled, nor one it is reading, nor one still
    /// queued. The kernel queues a write's event before the write returns,
    /// but the thread may not have run yet (on a busy machine, for
    /// milliseconds), so a request that arrives after a rewrite must see
    /// the queue itself ([`QueueProbe`]). Without that look the daemon's
    /// reliability_replace test served a torn response while no write was
    /// in progress, once in a loaded run of the suite.
    #[inline]
    pub(crate) fn holds(&self, stamp: u64) -> bool {
        let drains = self.clock.drains.load(Ordering::SeqCst);
        drains % 2 == 0
            && stamp == self.clock.epoch.load(Ordering::SeqCst)
            && self.nothing_queued()
            && drains == self.clock.drains.load(Ordering::SeqCst)
    }

    /// Whether this watcher's queue is empty, by the calling thread's
    /// [`QueueProbe`], else by one `FIONREAD`.
    fn nothing_queued(&self) -> bool {
        PROBE
            .try_with(|probe| QueueProbe::is_empty(&mut probe.borrow_mut(), self))
            .ok()
            .flatten()
            .unwrap_or_else(|| {
                rustix::io::ioctl_fionread(&self.inotify).is_ok_and(|queued| queued == 0)
            })
    }

    pub(crate) fn stats(&self) -> WatchStats {
        let dirs = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
        WatchStats {
            dirs: dirs.by_path.len() as u64,
            events: self.events.load(Ordering::Relaxed),
            resets: self.resets.load(Ordering::Relaxed),
            paths_dropped: self.paths_dropped.load(Ordering::Relaxed),
            trees_dropped: self.trees_dropped.load(Ordering::Relaxed),
            races: self.races.load(Ordering::Relaxed),
        }
    }

    /// Reads what is queued and hands each change to `sink`; true when
    /// something was read.
    fn drain(&self, buf: &mut [MaybeUninit<u8>], sink: &dyn Fn(Change<'_>)) -> bool {
        self.drain_with(buf, sink, &mut || {})
    }

    /// [`drain`](Self::drain), calling `first_read` once the first event is
    /// read and before it is handled (tests look at stamps there).
    fn drain_with(
        &self,
        buf: &mut [MaybeUninit<u8>],
        sink: &dyn Fn(Change<'_>),
        first_read: &mut dyn FnMut(),
    ) -> bool {
        self.clock.drains.fetch_add(1, Ordering::SeqCst);
        let seen = self.read_events(buf, sink, first_read);
        self.clock.drains.fetch_add(1, Ordering::SeqCst);
        seen
    }

    fn read_events(
        &self,
        buf: &mut [MaybeUninit<u8>],
        sink: &dyn Fn(Change<'_>),
        first_read: &mut dyn FnMut(),
    ) -> bool {
        let mut reader = inotify::Reader::new(self.inotify.as_fd(), buf);
        let mut seen = false;
        loop {
            let ev = match reader.next() {
                Ok(ev) => ev,
                Err(rustix::io::Errno::AGAIN) | Err(rustix::io::Errno::INTR) => break,
                Err(_) => {
                    self.reset(sink);
                    break;
                }
            };
            if !seen {
                first_read();
            }
            seen = true;
            let flags = ev.events();
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                self.reset(sink);
                continue;
            }
            let mut dirs = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
            let root_link = dirs.root_links.get(&ev.wd()).is_some_and(|names| {
                ev.file_name()
                    .is_some_and(|n| names.iter().any(|l| l.as_encoded_bytes() == n.to_bytes()))
            });
            if root_link {
                self.events.fetch_add(1, Ordering::Relaxed);
                drop(dirs);
                sink(Change::Root);
                continue;
            }
            // A watch dropped by `forget_under` reports IN_IGNORED later:
            // no path names it any more, so it is no news.
            let Some(paths) = dirs.by_wd.get(&ev.wd()).cloned() else {
                continue;
            };
            self.events.fetch_add(1, Ordering::Relaxed);
            // The epoch moves before anything is dropped, so no request
            // that starts after this point trusts a stamp from before it.
            let epoch = self.clock.epoch.fetch_add(1, Ordering::SeqCst) + 1;
            if flags.intersects(SELF_GONE) {
                for dir in &paths {
                    if dir.is_empty() && flags.contains(ReadFlags::MOVE_SELF) {
                        // The root is held by its descriptor: its paths
                        // still lead where they did.
                        continue;
                    }
                    self.tree.store(epoch, Ordering::SeqCst);
                    dirs.forget_under(&self.inotify, dir);
                    self.trees_dropped.fetch_add(1, Ordering::Relaxed);
                    sink(Change::Tree(dir));
                }
                continue;
            }
            let Some(name) = ev.file_name() else {
                continue;
            };
            let name = name.to_string_lossy();
            for dir in &paths {
                let child = if dir.is_empty() {
                    name.to_string()
                } else {
                    format!("{dir}/{name}")
                };
                let created = flags.intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO);
                let tree = flags.contains(ReadFlags::ISDIR)
                    || dirs.by_path.contains_key(child.as_str())
                    || dirs.missing.contains_key(child.as_str())
                    || (created && dirs.missing_overflowed);
                if tree {
                    self.tree.store(epoch, Ordering::SeqCst);
                    dirs.forget_under(&self.inotify, &child);
                    self.trees_dropped.fetch_add(1, Ordering::Relaxed);
                    sink(Change::Tree(&child));
                } else {
                    self.touched[bucket(&child)].store(epoch, Ordering::SeqCst);
                    self.paths_dropped.fetch_add(1, Ordering::Relaxed);
                    sink(Change::Path(&child));
                }
                if flags.intersects(NAMES) {
                    self.touched[bucket(dir)].store(epoch, Ordering::SeqCst);
                    sink(Change::Names(dir));
                }
            }
        }
        seen
    }

    /// Serves from a new root: every watch under the old one goes (the
    /// caller drops every entry), and loads that began before are dropped
    /// after they land.
    pub(crate) fn rebase(&self, root: &OwnedFd) {
        let mut dirs = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
        let epoch = self.clock.epoch.fetch_add(1, Ordering::SeqCst) + 1;
        self.tree.store(epoch, Ordering::SeqCst);
        dirs.forget_under(&self.inotify, "");
        dirs.root = format!("/proc/self/fd/{}", root.as_raw_fd());
        self.trees_dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// Drops every watch and every entry; `prepare` adds the watches again
    /// as paths are looked up.
    fn reset(&self, sink: &dyn Fn(Change<'_>)) {
        let mut dirs = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
        let epoch = self.clock.epoch.fetch_add(1, Ordering::SeqCst) + 1;
        self.tree.store(epoch, Ordering::SeqCst);
        dirs.forget_under(&self.inotify, "");
        let root_links = !dirs.root_links.is_empty();
        drop(dirs);
        self.resets.fetch_add(1, Ordering::Relaxed);
        self.trees_dropped.fetch_add(1, Ordering::Relaxed);
        sink(Change::Tree(""));
        if root_links {
            // A lost event may have been the root's link re-pointed.
            sink(Change::Root);
        }
    }
}

/// `path`'s bucket in `touched` (FNV-1a: a few ns on a load, none on a hit).
fn bucket(path: &str) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in path.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    (h % BUCKETS as u64) as usize
}

/// A thread's own epoll instance, holding the inotify descriptor of each
/// watcher the thread has checked a stamp against: an empty wait on it
/// says no event is queued, as `FIONREAD` on the inotify descriptor does.
/// The kernel puts a watcher on the ready list of every such instance as
/// it queues the event, before the change's syscall returns, and a wait
/// re-polls the queue before it reports it, so the answer is the same.
/// What differs is what the two workers share: `FIONREAD` takes a
/// reference to the one inotify file and the lock of its queue, two cache
/// lines every request moved between the cores; this wait touches only
/// the thread's own instance while nothing is queued: 0.42 of the time per
/// look with two threads looking at once (`cargo bench -p benches --bench
/// filemanager -- watch_queue`).
struct QueueProbe {
    epoll: OwnedFd,
    /// [`Watcher::id`]s whose descriptor is in `epoll`. A watcher dropped
    /// closes its descriptor, which leaves `epoll` with it.
    watching: Vec<u64>,
}

/// Watchers a probe holds before it starts over with a new instance (the
/// dropped ones' ids would otherwise pile up in a long-lived thread).
const PROBE_WATCHERS: usize = 64;

thread_local! {
    static PROBE: std::cell::RefCell<Option<QueueProbe>> = const { std::cell::RefCell::new(None) };
}

impl QueueProbe {
    /// Whether `w`'s queue is empty, through the thread's probe in `slot`
    /// (made or extended here); `None` when the probe cannot answer (no
    /// descriptor to spare for it), and the caller asks the queue itself.
    fn is_empty(slot: &mut Option<QueueProbe>, w: &Watcher) -> Option<bool> {
        use rustix::event::epoll;
        let full = |p: &QueueProbe| p.watching.len() >= PROBE_WATCHERS;
        if slot
            .as_ref()
            .is_none_or(|p| full(p) && !p.watching.contains(&w.id))
        {
            // The old instance's descriptor goes first: a process at its
            // descriptor limit can then still make the new one.
            *slot = None;
            *slot = Some(QueueProbe {
                epoll: epoll::create(epoll::CreateFlags::CLOEXEC).ok()?,
                watching: Vec::new(),
            });
        }
        let probe = slot.as_mut()?;
        if !probe.watching.contains(&w.id) {
            let data = epoll::EventData::new_u64(w.id);
            epoll::add(&probe.epoll, &w.inotify, data, epoll::EventFlags::IN).ok()?;
            probe.watching.push(w.id);
        }
        let mut events = [MaybeUninit::<epoll::Event>::uninit(); 4];
        let now = rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let (ready, spare) = epoll::wait(&probe.epoll, &mut events, Some(&now)).ok()?;
        // A full list may have left `w` out: not empty, to be safe.
        Some(!spare.is_empty() && ready.iter().all(|e| e.data.u64() != w.id))
    }
}

/// What a watcher's events are handed to.
type Sink = Arc<dyn Fn(Change<'_>) + Send + Sync>;

/// The process's one watcher thread and the watchers it reads: each
/// manager has its own inotify descriptor, and one thread polls them all
/// (two mounts: one thread, not two). It ends when the last watcher is
/// dropped and starts again with the next.
struct Hub {
    watchers: Vec<(Weak<Watcher>, Sink)>,
    running: bool,
}

static HUB: Mutex<Hub> = Mutex::new(Hub {
    watchers: Vec::new(),
    running: false,
});

/// A pipe whose write wakes the thread's `poll` to take in a watcher
/// added meanwhile (its read end is polled beside the inotify
/// descriptors). Made once per process: two descriptors.
fn wake_pipe() -> io::Result<&'static (OwnedFd, OwnedFd)> {
    static PIPE: std::sync::OnceLock<(OwnedFd, OwnedFd)> = std::sync::OnceLock::new();
    if let Some(p) = PIPE.get() {
        return Ok(p);
    }
    let flags = rustix::pipe::PipeFlags::CLOEXEC | rustix::pipe::PipeFlags::NONBLOCK;
    let pipe = rustix::pipe::pipe_with(flags)?;
    Ok(PIPE.get_or_init(|| pipe))
}

/// Hands `watcher`'s events to `sink` from the process's watcher thread,
/// starting it if none runs; they stop once the watcher is dropped.
pub(crate) fn spawn(
    watcher: &Arc<Watcher>,
    sink: impl Fn(Change<'_>) + Send + Sync + 'static,
) -> io::Result<()> {
    let (_, wake) = wake_pipe()?;
    let mut hub = HUB.lock().unwrap_or_else(|e| e.into_inner());
    hub.watchers.retain(|(w, _)| w.strong_count() > 0);
    hub.watchers.push((Arc::downgrade(watcher), Arc::new(sink)));
    if hub.running {
        // A full pipe already wakes it.
        let _ = rustix::io::write(wake, &[1]);
        return Ok(());
    }
    std::thread::Builder::new()
        .name("fs-watch".into())
        .spawn(run)?;
    hub.running = true;
    Ok(())
}

/// The watcher thread's nice value, where the process may raise it (root,
/// or `CAP_SYS_NICE`): the window in which a change is not yet seen is
/// this thread's wake-up, and on a machine whose cores are busy with
/// workers a woken thread of equal weight can wait tens of milliseconds
/// for one. It runs only to read events, so its weight costs the workers
/// nothing while the tree is quiet.
const NICE: i32 = -10;

fn run() {
    // SAFETY: plain syscalls on the calling thread (Linux nice values are
    // per thread); a refusal (no privilege) leaves the default.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, NICE) };
    let mut buf = vec![MaybeUninit::<u8>::uninit(); 16 * 1024];
    let Ok((wake, _)) = wake_pipe() else {
        HUB.lock().unwrap_or_else(|e| e.into_inner()).running = false;
        return;
    };
    let mut pfds = Vec::new();
    loop {
        pfds.clear();
        pfds.push(libc::pollfd {
            fd: wake.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        {
            let mut hub = HUB.lock().unwrap_or_else(|e| e.into_inner());
            hub.watchers.retain(|(w, _)| w.strong_count() > 0);
            if hub.watchers.is_empty() {
                hub.running = false;
                return;
            }
            for (w, _) in &hub.watchers {
                if let Some(w) = w.upgrade() {
                    pfds.push(libc::pollfd {
                        fd: w.inotify.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    });
                }
            }
        }
        // SAFETY: `pfds` is a live array of that many pollfds, read and
        // written by the kernel for the call. A watcher dropped meanwhile
        // closes its descriptor: the poll then wakes early or times out
        // (a reused number wakes it at worst), and the upgrade below
        // skips it.
        unsafe {
            libc::poll(
                pfds.as_mut_ptr(),
                pfds.len() as libc::nfds_t,
                POLL.as_millis() as libc::c_int,
            )
        };
        let mut byte = [0u8; 64];
        while rustix::io::read(wake, &mut byte).is_ok_and(|n| n > 0) {}
        let live: Vec<(Arc<Watcher>, Sink)> = HUB
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .watchers
            .iter()
            .filter_map(|(w, sink)| Some((w.upgrade()?, Arc::clone(sink))))
            .collect();
        // Outside the lock: a sink may drop the last handle to a manager.
        for (w, sink) in live {
            w.drain(&mut buf, &*sink);
        }
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

    /// A watcher whose thread records every change as text.
    fn recording(root: &OwnedFd) -> (Arc<Watcher>, Arc<Mutex<Vec<String>>>) {
        let w = Watcher::new(root, &[]).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        spawn(&w, move |c| log.lock().unwrap().push(format!("{c:?}"))).unwrap();
        (w, seen)
    }

    /// Waits (bounded) for the watcher thread to report `change`.
    fn until_seen(seen: &Mutex<Vec<String>>, change: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !seen.lock().unwrap().iter().any(|c| c == change) {
            assert!(
                std::time::Instant::now() < deadline,
                "{change} not among {:?}",
                seen.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    #[test]
    fn a_write_drops_its_path_and_a_moved_directory_its_tree() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("a/b")).unwrap();
        std::fs::write(tmp.path().join("a/b/f"), b"1").unwrap();
        std::fs::write(tmp.path().join("top"), b"1").unwrap();
        let root = root(tmp.path());
        let (w, seen) = recording(&root);
        let e = w.epoch();
        let stamp = w.prepare("a/b/f").unwrap();
        assert_eq!(w.stats().dirs, 3, "the root, a and a/b");
        assert!(w.holds(stamp));
        assert_eq!(w.prepare("top"), Some(stamp), "nothing happened yet");
        assert!(!w.changed_since("a/b/f", e));

        std::fs::write(tmp.path().join("a/b/f"), b"2").unwrap();
        until_seen(&seen, r#"Path("a/b/f")"#);
        assert!(!w.holds(stamp));
        assert!(w.changed_since("a/b/f", e), "a load begun before sees it");
        assert!(!w.changed_since("top", e), "another path's load does not");

        std::fs::write(tmp.path().join("new"), b"n").unwrap();
        until_seen(&seen, r#"Names("")"#);
        until_seen(&seen, r#"Path("new")"#);

        std::fs::rename(tmp.path().join("a"), tmp.path().join("moved")).unwrap();
        until_seen(&seen, r#"Tree("a")"#);
        assert_eq!(w.stats().dirs, 1, "a and a/b are no longer watched");
        assert_eq!(w.prepare("a/b/f"), None, "a/ is gone");
        assert!(w.prepare("moved/b/f").is_some());
        assert_eq!(w.stats().resets, 0, "nothing else was dropped");
    }

    /// The window between a write and the thread reading its event: a
    /// stamp must not hold while the event waits in the queue.
    #[test]
    fn a_queued_event_voids_stamps_before_it_is_read() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("f"), b"1").unwrap();
        let root = root(tmp.path());
        let w = Watcher::new(&root, &[]).unwrap();
        let stamp = w.prepare("f").unwrap();
        assert!(w.holds(stamp));
        std::fs::write(tmp.path().join("f"), b"2").unwrap();
        assert!(!w.holds(stamp), "a write not yet read by the thread");
        let mut buf = vec![MaybeUninit::<u8>::uninit(); 4096];
        let changes = Mutex::new(Vec::new());
        assert!(w.drain(&mut buf, &|c| changes
            .lock()
            .unwrap()
            .push(format!("{c:?}"))));
        assert!(!w.holds(stamp), "and after it was read");
        assert!(changes
            .lock()
            .unwrap()
            .contains(&r#"Path("f")"#.to_string()));
        let stamp = w.prepare("f").unwrap();
        assert!(w.holds(stamp), "a new check after the event holds");
    }

    /// The thread has read an event and not yet handled it: the event is
    /// neither queued nor in the epoch then, and a stamp must not hold.
    #[test]
    fn an_event_read_but_not_yet_handled_voids_stamps() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("f"), b"1").unwrap();
        let root = root(tmp.path());
        let w = Watcher::new(&root, &[]).unwrap();
        let stamp = w.prepare("f").unwrap();
        std::fs::write(tmp.path().join("f"), b"2").unwrap();
        let mut buf = vec![MaybeUninit::<u8>::uninit(); 4096];
        let mut held = None;
        assert!(w.drain_with(&mut buf, &|_| {}, &mut || held = Some(w.holds(stamp))));
        assert_eq!(
            held,
            Some(false),
            "a stamp held while its event was being handled"
        );
        let stamp = w.prepare("f").unwrap();
        assert!(w.holds(stamp), "a new check after the drain holds");
    }

    /// Each thread's probe answers for each watcher it has checked, and
    /// only for that one; one that has seen many watchers come and go
    /// starts over and still sees a queued event.
    #[test]
    fn a_thread_probe_tells_watchers_apart_and_outlives_them() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("f"), b"1").unwrap();
        let dir = root(tmp.path());
        for _ in 0..PROBE_WATCHERS + 6 {
            let gone = Watcher::new(&dir, &[]).unwrap();
            let stamp = gone.prepare("f").unwrap();
            assert!(gone.holds(stamp));
        }
        let quiet = Watcher::new(&dir, &[]).unwrap();
        let quiet_stamp = quiet.prepare("f").unwrap();
        let other_dir = tempfile::tempdir().unwrap();
        std::fs::write(other_dir.path().join("g"), b"1").unwrap();
        let other_root = root(other_dir.path());
        let busy = Watcher::new(&other_root, &[]).unwrap();
        let busy_stamp = busy.prepare("g").unwrap();
        assert!(quiet.holds(quiet_stamp) && busy.holds(busy_stamp));
        std::fs::write(other_dir.path().join("g"), b"2").unwrap();
        assert!(!busy.holds(busy_stamp), "an event queued for this watcher");
        assert!(quiet.holds(quiet_stamp), "another watcher's event");
        std::thread::scope(|s| {
            s.spawn(|| {
                assert!(!busy.holds(busy_stamp), "seen from a thread of its own");
                assert!(quiet.holds(quiet_stamp));
            });
        });
    }

    #[test]
    fn a_symlinked_directory_re_pointed_drops_the_tree_through_it() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("x")).unwrap();
        std::fs::create_dir_all(tmp.path().join("y")).unwrap();
        std::fs::write(tmp.path().join("x/f"), b"x").unwrap();
        std::fs::write(tmp.path().join("y/f"), b"y").unwrap();
        std::os::unix::fs::symlink("x", tmp.path().join("link")).unwrap();
        let root = root(tmp.path());
        let (w, seen) = recording(&root);
        w.prepare("link/f").unwrap();
        w.prepare("x/f").unwrap();
        // One inode watched through two paths: a write in it drops both.
        std::fs::write(tmp.path().join("x/f"), b"x2").unwrap();
        until_seen(&seen, r#"Path("link/f")"#);
        until_seen(&seen, r#"Path("x/f")"#);
        // Re-pointed as deploy tools do it: a new link renamed over it.
        std::os::unix::fs::symlink("y", tmp.path().join("link.new")).unwrap();
        std::fs::rename(tmp.path().join("link.new"), tmp.path().join("link")).unwrap();
        until_seen(&seen, r#"Tree("link")"#);
        assert!(w.prepare("x/f").is_some(), "x itself is still watched");
    }

    /// A negative answer below a directory that did not exist must go when
    /// a symlink by that name appears (its event says nothing of a
    /// directory).
    #[test]
    fn a_link_created_where_a_lookup_found_nothing_drops_the_tree() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("r1")).unwrap();
        std::fs::write(tmp.path().join("r1/f"), b"1").unwrap();
        let root = root(tmp.path());
        let (w, seen) = recording(&root);
        assert_eq!(w.prepare("current/f"), None, "current/ is missing");
        std::os::unix::fs::symlink("r1", tmp.path().join("current")).unwrap();
        until_seen(&seen, r#"Tree("current")"#);
        assert!(w.prepare("current/f").is_some());
    }
}

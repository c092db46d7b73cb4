//! The io_uring backend: owns one ring per worker thread (created lazily on
//! first use), the table of operations in flight on each ring, the fixed-file
//! slots each ring has registered, and the driver task that turns ring
//! completions into tokio wake-ups.
//!
//! ```text
//!  worker thread (thread-local Arc<Ring>)         tokio reactor
//!  ┌──────────────────────────────────────┐       ┌──────────────────┐
//!  │ Mutex<Inner>                          │       │ AsyncFd(eventfd) │──▶ driver task:
//!  │   IoUring (SQ 256 / CQ 512)           │──CQE──▶ eventfd counter   │    drain eventfd,
//!  │   ops: Slab<OpSlot{state, keep}>      │       └──────────────────┘    reap CQ, wake
//!  │   registered: [ (manager, Fd) ; cap ] │  fixed-file slot i = fdtable slot * shards + shard
//!  │ unregister queue (from releases)      │
//!  └──────────────────────────────────────┘
//! ```
//!
//! Completion delivery needs no blocking thread: the submitter reaps the
//! completion queue right after `io_uring_enter` (page-cache reads complete
//! inline, so most reads finish inside one poll), and anything that
//! completes later signals the eventfd, which the ring's driver task watches
//! through tokio's `AsyncFd`. A ring is `Send + Sync` behind its mutex, so a
//! task that migrates to another worker of a multi-thread runtime still
//! completes: any thread may reap any ring. A thread that starts driving a
//! different runtime gets a fresh ring whose driver runs there, so a ring is
//! never left waiting on a runtime nobody drives.
//!
//! One file per operation, as tokio lays out its io_uring code:
//! `probe.rs` (can io_uring run here: setup, opcodes, sparse fixed files,
//! a NOP), `open.rs` (`IORING_OP_OPENAT2`), `read.rs` (`IORING_OP_READ`),
//! `files_update.rs` (fixed-file slots: registering a file, and
//! `IORING_OP_FILES_UPDATE` clears) and `close.rs` (the reaper's
//! `IORING_OP_CLOSE` batches). This file owns the ring driver: the
//! per-thread rings, submission, completion and the operations in flight.
//!
//! ## Memory the kernel writes (buffer lifetime)
//!
//! Every pointer handed to the kernel (read buffer, path, `open_how`,
//! root directory fd) is owned by the operation's slot in the
//! ring's slab (`Keep`), not by the future. Heap allocations do not move when
//! the slab grows. If the future is dropped before its completion arrives,
//! the slot is marked `Abandoned` and keeps the memory until the CQE is reaped
//! (by any later submitter, the driver, or the ring's `Drop`, which waits for
//! every operation in flight). An abandoned open that succeeded has its new
//! descriptor closed on reaping.

mod close;
mod files_update;
mod open;
mod probe;
mod read;

use std::cell::RefCell;
use std::ffi::CString;
use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use io_uring::{squeue, types, IoUring};
use rustix::fs::OFlags;
use slab::Slab;

use super::{Counters, IoBackend, Target};
use crate::resolve::Rules;
use crate::sys::Stat;

pub(crate) use close::CloseRing;
pub(crate) use files_update::{flush_unregisters, queue_unregister, FixedKey, FixedSlot};
pub(crate) use probe::probe;

/// Submission queue entries per ring.
const RING_ENTRIES: u32 = 256;
/// Upper bound on fixed-file slots per ring.
const MAX_FIXED: u32 = 1 << 16;
/// `user_data` of internal operations whose completion nobody awaits.
const INTERNAL: u64 = u64::MAX;
/// At most this many rings carry a bit in a file's `rings` mask.
const MAX_RING_IDS: usize = 64;

/// Rings by id, so a released file can ask each ring that registered it to
/// clear the slot.
static REGISTRY: Mutex<Vec<Weak<Ring>>> = Mutex::new(Vec::new());

thread_local! {
    static LOCAL_RING: RefCell<Option<(tokio::runtime::Id, Arc<Ring>)>> = const { RefCell::new(None) };
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a ring lock leaves consistent data (every
    // mutation is a single slab/array write), so poisoning is ignored.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What `Ring::start` returns.
enum Started {
    Done(i32, Keep),
    Pending(usize),
}

/// Memory an operation lends to the kernel until its completion.
#[derive(Debug)]
enum Keep {
    Buf(Vec<u8>),
    Open {
        _root: Arc<OwnedFd>,
        _path: CString,
        _how: Box<types::OpenHow>,
    },
}

#[derive(Debug)]
enum State {
    Waiting(Option<Waker>),
    Done(i32),
    Abandoned,
}

#[derive(Debug)]
struct OpSlot {
    state: State,
    keep: Keep,
}

struct Inner {
    ring: IoUring,
    ops: Slab<OpSlot>,
    registered: Vec<FixedKey>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner")
            .field("ops_in_flight", &self.ops.len())
            .field("fixed_slots", &self.registered.len())
            .finish()
    }
}

/// One io_uring and its bookkeeping.
#[derive(Debug)]
pub(crate) struct Ring {
    id: Option<usize>,
    inner: Mutex<Inner>,
    eventfd: OwnedFd,
    unregister: Mutex<Vec<FixedSlot>>,
    unregister_pending: AtomicBool,
    driver_alive: AtomicBool,
    counters: Mutex<Weak<Counters>>,
    inflight: AtomicU64,
}

impl Ring {
    fn new() -> io::Result<Arc<Ring>> {
        let ring = IoUring::builder()
            .setup_cqsize(RING_ENTRIES * 2)
            .build(RING_ENTRIES)?;
        // The kernel refuses a table larger than RLIMIT_NOFILE.
        let nofile = rustix::process::getrlimit(rustix::process::Resource::Nofile)
            .current
            .unwrap_or(u64::MAX);
        let cap = u32::try_from(nofile).unwrap_or(u32::MAX).min(MAX_FIXED);
        let registered = match ring.submitter().register_files_sparse(cap) {
            Ok(()) => vec![(0, 0); cap as usize],
            Err(e) => {
                tracing::warn!(error = %e, "io_uring fixed files unavailable on this ring; reads use plain fds");
                Vec::new()
            }
        };
        // SAFETY: eventfd takes no pointers; a non-negative result is a new
        // descriptor that we own from here on.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if efd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: see above: `efd` is a fresh descriptor owned by nobody else.
        let efd = unsafe { OwnedFd::from_raw_fd(efd) };
        ring.submitter().register_eventfd(efd.as_raw_fd())?;
        let ring = Arc::new_cyclic(|weak| {
            let mut reg = lock(&REGISTRY);
            let id = match reg.iter().position(|w| w.strong_count() == 0) {
                Some(i) => {
                    reg[i] = weak.clone();
                    Some(i)
                }
                None if reg.len() < MAX_RING_IDS => {
                    reg.push(weak.clone());
                    Some(reg.len() - 1)
                }
                None => None,
            };
            Ring {
                id,
                inner: Mutex::new(Inner {
                    ring,
                    ops: Slab::new(),
                    registered,
                }),
                eventfd: efd,
                unregister: Mutex::new(Vec::new()),
                unregister_pending: AtomicBool::new(false),
                driver_alive: AtomicBool::new(false),
                counters: Mutex::new(Weak::new()),
                inflight: AtomicU64::new(0),
            }
        });
        Ok(ring)
    }

    /// Starts the driver task on the current tokio runtime.
    fn spawn_driver(self: &Arc<Self>) -> io::Result<()> {
        let handle = tokio::runtime::Handle::try_current().map_err(|_| {
            io::Error::other("the io_uring backend must be used inside a tokio runtime")
        })?;
        // Registering panics when the runtime has no I/O driver; turn that
        // into an error the caller sees instead of a hang later.
        let ring = Arc::clone(self);
        let afd = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            // SAFETY: the eventfd is owned by the ring, and the ring (kept
            // alive by the `Arc` inside `EventFd`) never closes or replaces
            // it while this AsyncFd exists.
            unsafe {
                tokio::io::unix::AsyncFd::register_with_interest(
                    EventFd(ring),
                    tokio::io::Interest::READABLE,
                )
            }
        }))
        .map_err(|_| {
            io::Error::other(
                "the io_uring backend needs a tokio runtime with I/O enabled (enable_io)",
            )
        })?
        .map_err(|e| io::Error::other(format!("cannot watch the io_uring eventfd: {e}")))?;
        self.driver_alive.store(true, Ordering::Release);
        // The guard is created before spawning so that a task dropped unpolled
        // (runtime shutting down) still marks the driver dead.
        let guard = DriverGuard(Arc::clone(self));
        handle.spawn(async move {
            let ring = Arc::clone(&guard.0);
            let _guard = guard;
            drive(ring, afd).await;
        });
        Ok(())
    }

    /// Pushes one SQE, submitting first if the queue is full.
    fn push(inner: &mut Inner, entry: &squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: every pointer in `entry` is owned by an `OpSlot` in
            // `inner.ops` (or is the static CLEAR_SLOT) and stays alive until
            // the completion for its user_data is reaped (module docs).
            if unsafe { inner.ring.submission().push(entry) }.is_ok() {
                return Ok(());
            }
            inner.ring.submit()?;
        }
    }

    /// Drains the completion queue, recording results and waking waiters.
    fn reap(inner: &mut Inner, inflight: &AtomicU64) {
        let Inner { ring, ops, .. } = inner;
        for cqe in ring.completion() {
            let ud = cqe.user_data();
            if ud == INTERNAL {
                continue;
            }
            let key = ud as usize;
            let Some(slot) = ops.get_mut(key) else {
                continue;
            };
            match std::mem::replace(&mut slot.state, State::Done(cqe.result())) {
                State::Waiting(w) => {
                    if let Some(w) = w {
                        w.wake();
                    }
                }
                State::Abandoned => {
                    let slot = ops.remove(key);
                    inflight.fetch_sub(1, Ordering::Relaxed);
                    if let Keep::Open { .. } = slot.keep {
                        if cqe.result() >= 0 {
                            // SAFETY: a successful OPENAT2 returns a new
                            // descriptor that nobody else owns.
                            drop(unsafe { OwnedFd::from_raw_fd(cqe.result()) });
                        }
                    }
                }
                State::Done(_) => {}
            }
        }
    }

    /// Submits an operation. When it completed inline (the common case for
    /// page-cache reads), its result and memory come back under the same
    /// lock; otherwise its slab key to wait on.
    fn start(
        &self,
        mut keep: Keep,
        build: impl FnOnce(&mut Inner, &mut Keep) -> squeue::Entry,
    ) -> io::Result<Started> {
        let mut inner = lock(&self.inner);
        // `build` may register a fixed slot synchronously; queued clears are
        // applied after it, so a clear of the slot's previous file (which
        // checks the slot still holds that file) can never undo the new
        // registration.
        let entry = build(&mut inner, &mut keep);
        self.apply_unregisters(&mut inner);
        let key = inner.ops.insert(OpSlot {
            state: State::Waiting(None),
            keep,
        });
        self.inflight.fetch_add(1, Ordering::Relaxed);
        let entry = entry.user_data(key as u64);
        if let Err(e) = Self::push(&mut inner, &entry) {
            // Nothing was queued for this key: it is safe to free at once.
            inner.ops.remove(key);
            self.inflight.fetch_sub(1, Ordering::Relaxed);
            return Err(e);
        }
        if let Err(e) = inner.ring.submit() {
            // The SQE may still be queued: the slot stays until its CQE.
            inner.ops[key].state = State::Abandoned;
            return Err(e);
        }
        Self::reap(&mut inner, &self.inflight);
        match inner.ops[key].state {
            State::Done(res) => Ok(Started::Done(res, self.take(&mut inner, key))),
            _ => Ok(Started::Pending(key)),
        }
    }

    fn take(&self, inner: &mut Inner, key: usize) -> Keep {
        self.inflight.fetch_sub(1, Ordering::Relaxed);
        inner.ops.remove(key).keep
    }

    /// Runs one operation to completion; returns the CQE result, the
    /// memory it borrowed, and whether it completed inline.
    async fn run(
        self: &Arc<Self>,
        keep: Keep,
        build: impl FnOnce(&mut Inner, &mut Keep) -> squeue::Entry,
    ) -> io::Result<(i32, Keep, bool)> {
        match self.start(keep, build)? {
            Started::Done(res, keep) => Ok((res, keep, true)),
            Started::Pending(key) => {
                let (res, keep) = OpFuture {
                    ring: Arc::clone(self),
                    key: Some(key),
                }
                .await;
                Ok((res, keep, false))
            }
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        let inner = self.inner.get_mut().unwrap_or_else(|p| p.into_inner());
        // Wait for every operation still in flight so no buffer is freed
        // while the kernel may write it. File operations finish in bounded
        // time; the bound below only guards against a kernel bug.
        let mut rounds = 0;
        while !inner.ops.is_empty() && rounds < 10_000 {
            if inner.ring.submit_and_wait(1).is_err() {
                rounds += 100;
            }
            for cqe in inner.ring.completion() {
                let ud = cqe.user_data();
                if ud != INTERNAL && inner.ops.contains(ud as usize) {
                    let slot = inner.ops.remove(ud as usize);
                    if let (Keep::Open { .. }, State::Abandoned) = (&slot.keep, &slot.state) {
                        if cqe.result() >= 0 {
                            // SAFETY: a successful open nobody awaits anymore.
                            drop(unsafe { OwnedFd::from_raw_fd(cqe.result()) });
                        }
                    }
                }
            }
            rounds += 1;
        }
        if !inner.ops.is_empty() {
            // Leak rather than free memory the kernel might still write.
            std::mem::forget(std::mem::take(&mut inner.ops));
        }
    }
}

/// Marks the driver dead when its task ends or is dropped.
struct DriverGuard(Arc<Ring>);
impl Drop for DriverGuard {
    fn drop(&mut self) {
        self.0.driver_alive.store(false, Ordering::Release);
    }
}

struct EventFd(Arc<Ring>);
impl AsRawFd for EventFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.eventfd.as_raw_fd()
    }
}

async fn drive(ring: Arc<Ring>, afd: tokio::io::unix::AsyncFd<EventFd>) {
    loop {
        let mut guard = match afd.readable().await {
            Ok(g) => g,
            Err(_) => return,
        };
        let mut counter = [0u8; 8];
        // Resets the eventfd counter; EAGAIN just means another wake-up
        // already drained it.
        let _ = rustix::io::read(&ring.eventfd, &mut counter);
        guard.clear_ready();
        let mut inner = lock(&ring.inner);
        if ring.apply_unregisters(&mut inner) > 0 {
            let _ = inner.ring.submit();
        }
        Ring::reap(&mut inner, &ring.inflight);
    }
}

/// Waits for one operation's completion.
struct OpFuture {
    ring: Arc<Ring>,
    key: Option<usize>,
}

impl Future for OpFuture {
    type Output = (i32, Keep);
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(key) = self.key else {
            return Poll::Pending;
        };
        let ring = Arc::clone(&self.ring);
        let mut inner = lock(&ring.inner);
        Ring::reap(&mut inner, &ring.inflight);
        match &mut inner.ops[key].state {
            State::Done(res) => {
                let res = *res;
                let keep = ring.take(&mut inner, key);
                self.key = None;
                Poll::Ready((res, keep))
            }
            State::Waiting(w) => {
                match w {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => *w = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
            State::Abandoned => Poll::Pending,
        }
    }
}

impl Drop for OpFuture {
    fn drop(&mut self) {
        let Some(key) = self.key else { return };
        let mut inner = lock(&self.ring.inner);
        match inner.ops[key].state {
            State::Done(res) => {
                let keep = self.ring.take(&mut inner, key);
                if let (Keep::Open { .. }, true) = (&keep, res >= 0) {
                    // SAFETY: the open succeeded and its result is unclaimed.
                    drop(unsafe { OwnedFd::from_raw_fd(res) });
                }
            }
            // The kernel still owns the memory: keep it until the CQE.
            _ => inner.ops[key].state = State::Abandoned,
        }
    }
}

/// The io_uring backend handle held by a `FileManager`.
#[derive(Debug)]
pub(crate) struct Uring {
    pub(crate) counters: Arc<Counters>,
}

impl Uring {
    /// Creates this thread's ring and driver now rather than at first use.
    pub(crate) fn attach_thread(&self) -> io::Result<()> {
        self.local_ring().map(drop)
    }

    /// This thread's ring, created (and its driver spawned) on first use.
    fn local_ring(&self) -> io::Result<Arc<Ring>> {
        let rt = tokio::runtime::Handle::try_current()
            .map_err(|_| {
                io::Error::other("the io_uring backend must be used inside a tokio runtime")
            })?
            .id();
        LOCAL_RING.with(|cell| {
            let mut cell = cell.borrow_mut();
            // A ring's completions are watched by a driver task on one
            // runtime. If this thread now runs another runtime (or the old
            // one shut down), it gets a fresh ring whose driver runs here;
            // the old ring lives on with its own driver and futures.
            let ring = match &*cell {
                Some((id, r)) if *id == rt && r.driver_alive.load(Ordering::Acquire) => {
                    Arc::clone(r)
                }
                _ => {
                    let r = Ring::new()?;
                    // Fixed-slot clears are counted on the manager that
                    // created the ring (rings are shared per thread).
                    *lock(&r.counters) = Arc::downgrade(&self.counters);
                    r.spawn_driver()?;
                    *cell = Some((rt, Arc::clone(&r)));
                    r
                }
            };
            Ok(ring)
        })
    }
}

impl IoBackend for Uring {
    fn open(
        &self,
        root: &Arc<OwnedFd>,
        path: CString,
        oflags: OFlags,
        rules: Rules,
    ) -> impl Future<Output = io::Result<(OwnedFd, Stat)>> + Send {
        self.openat2(root, path, oflags, rules)
    }

    fn read(
        &self,
        target: Target<'_>,
        offset: u64,
        len: usize,
    ) -> impl Future<Output = io::Result<Bytes>> + Send {
        self.read_at(target, offset, len)
    }
}

//! The I/O backends: owns the [`IoBackend`] trait both backends implement,
//! the choice between them at start (`auto` probing), and the per-shard,
//! cache-padded operation counters that `/metrics` sums on scrape.
//!
//! ```text
//! FileManager --(enum dispatch)--> Backend::Blocking(blocking::Blocking)
//!                                  Backend::Uring(uring::Uring)  -- one ring per worker thread
//! counters: [CachePadded<ShardCounters>; N]   (thread -> shard by a thread-local index)
//! ```

pub(crate) mod blocking;
#[cfg(target_os = "linux")]
pub(crate) mod uring;

use std::cell::Cell;
use std::ffi::CString;
use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use crossbeam_utils::CachePadded;

use crate::resolve::Rules;
use crate::sys::{BorrowedFd, OFlags, OwnedFd, Stat};

#[cfg(target_os = "linux")]
pub(crate) use uring::FixedSlot;

/// Where a file may sit in io_uring's fixed-file tables: none without it.
#[cfg(not(target_os = "linux"))]
#[derive(Clone, Copy, Debug)]
pub(crate) struct FixedSlot;

/// A file's io_uring fixed-file state, kept in its descriptor-table value
/// (`file.rs`): the slot it may sit in (set right after the table insert)
/// and which rings registered it there (bit i: ring i).
#[derive(Debug, Default)]
pub(crate) struct Fixed {
    slot: OnceLock<FixedSlot>,
    rings: AtomicU64,
}

impl Fixed {
    #[cfg(target_os = "linux")]
    pub(crate) fn set_slot(&self, slot: FixedSlot) {
        let _ = self.slot.set(slot);
    }

    #[cfg(target_os = "linux")]
    pub(crate) fn slot(&self) -> Option<FixedSlot> {
        self.slot.get().copied()
    }

    #[cfg(target_os = "linux")]
    pub(crate) fn ring_mask(&self) -> &AtomicU64 {
        &self.rings
    }

    /// The file is released: every ring that registered it is asked to
    /// clear its slot.
    pub(crate) fn release(self) {
        let Fixed { slot, rings } = self;
        #[cfg(target_os = "linux")]
        {
            let mask = rings.load(Ordering::Acquire);
            if let (true, Some(slot)) = (mask != 0, slot.get()) {
                uring::queue_unregister(mask, *slot);
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = (slot, rings);
    }
}

/// What a read is aimed at: the kernel descriptor, and when the file lives in
/// this crate's descriptor table, its fixed-file state.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Target<'a> {
    pub(crate) fd: BorrowedFd<'a>,
    // Read by io_uring only (its fixed-file slot).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fixed: Option<&'a Fixed>,
}

/// The operations a backend provides. Both implement it; `FileManager`
/// dispatches through the [`Backend`] enum so futures stay `Send` and calls
/// stay static.
pub(crate) trait IoBackend: Send + Sync {
    /// Opens `path` beneath `root` and `statx`es the result.
    fn open(
        &self,
        root: &Arc<OwnedFd>,
        path: CString,
        oflags: OFlags,
        rules: Rules,
    ) -> impl Future<Output = io::Result<(OwnedFd, Stat)>> + Send;
    /// Reads up to `len` bytes at `offset`; fewer only at end of file.
    fn read(
        &self,
        target: Target<'_>,
        offset: u64,
        len: usize,
    ) -> impl Future<Output = io::Result<Bytes>> + Send;
}

/// The backend chosen at start.
#[derive(Debug)]
pub(crate) enum Backend {
    /// `preadv2(RWF_NOWAIT)` inline, tokio's blocking pool otherwise.
    Blocking(blocking::Blocking),
    /// One io_uring per worker thread.
    #[cfg(target_os = "linux")]
    Uring(uring::Uring),
}

impl Backend {
    pub(crate) async fn open(
        &self,
        root: &Arc<OwnedFd>,
        path: CString,
        oflags: OFlags,
        rules: Rules,
        inline_cached: bool,
    ) -> io::Result<(OwnedFd, Stat)> {
        // Most opens of a busy server hit the dentry cache: do those inline
        // (see `open_beneath_cached`), and only the rest on the backend.
        let cached = if inline_cached {
            crate::resolve::open_beneath_cached(&**root, &path, oflags, rules)
        } else {
            None
        };
        if let Some(opened) = cached {
            let counters = self.counters();
            counters.op(Op::Open);
            let fd = opened?;
            counters.op(Op::Stat);
            let stat = crate::sys::stat_fd(&fd)?;
            return Ok((fd, stat));
        }
        match self {
            Backend::Blocking(b) => b.open(root, path, oflags, rules).await,
            #[cfg(target_os = "linux")]
            Backend::Uring(u) => u.open(root, path, oflags, rules).await,
        }
    }

    pub(crate) fn counters(&self) -> &Counters {
        match self {
            Backend::Blocking(b) => &b.counters,
            #[cfg(target_os = "linux")]
            Backend::Uring(u) => &u.counters,
        }
    }

    pub(crate) async fn read(
        &self,
        target: Target<'_>,
        offset: u64,
        len: usize,
    ) -> io::Result<Bytes> {
        match self {
            Backend::Blocking(b) => b.read(target, offset, len).await,
            #[cfg(target_os = "linux")]
            Backend::Uring(u) => u.read(target, offset, len).await,
        }
    }
}

/// Operation kinds counted per shard (label `op` of `backend_ops_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub(crate) enum Op {
    /// An `openat2` (file or `O_PATH`).
    Open,
    /// A `statx`.
    Stat,
    /// A read completed without leaving the calling task (page-cache hit).
    ReadInline,
    /// A read that waited: blocking pool, or an io_uring completion that
    /// arrived asynchronously.
    ReadAsync,
    /// A `close` issued by the reaper as part of an io_uring batch.
    CloseBatched,
    /// A file registered into an io_uring fixed-file slot.
    FixedRegister,
    /// A fixed-file slot cleared after its file was released.
    FixedUnregister,
}

impl Op {
    /// Every kind, in label order.
    pub(crate) const ALL: [Op; 7] = [
        Op::Open,
        Op::Stat,
        Op::ReadInline,
        Op::ReadAsync,
        Op::CloseBatched,
        Op::FixedRegister,
        Op::FixedUnregister,
    ];

    /// The metric label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Op::Open => "open",
            Op::Stat => "stat",
            Op::ReadInline => "read_inline",
            Op::ReadAsync => "read_async",
            Op::CloseBatched => "close_batched",
            Op::FixedRegister => "fixed_register",
            Op::FixedUnregister => "fixed_unregister",
        }
    }
}

#[derive(Debug, Default)]
struct ShardCounters {
    ops: [AtomicU64; 7],
    read_bytes: AtomicU64,
}

/// Per-shard counters: each thread adds to its own cache line (Relaxed, no
/// contention in the common case); [`Counters::snapshot`] sums them.
#[derive(Debug)]
pub(crate) struct Counters {
    shards: Box<[CachePadded<ShardCounters>]>,
}

static NEXT_THREAD_INDEX: AtomicUsize = AtomicUsize::new(0);
thread_local! {
    static THREAD_INDEX: Cell<usize> = const { Cell::new(usize::MAX) };
}

fn thread_index() -> usize {
    THREAD_INDEX.with(|c| {
        let mut i = c.get();
        if i == usize::MAX {
            i = NEXT_THREAD_INDEX.fetch_add(1, Ordering::Relaxed);
            c.set(i);
        }
        i
    })
}

/// Summed counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BackendStats {
    /// Operations by kind, in the order of `ops_labels()`.
    pub ops: [u64; 7],
    /// Bytes returned by reads.
    pub read_bytes: u64,
}

impl BackendStats {
    /// The label of each entry of `ops`.
    pub fn ops_labels() -> [&'static str; 7] {
        Op::ALL.map(Op::label)
    }
}

impl Counters {
    pub(crate) fn new(shards: usize) -> Self {
        Counters {
            shards: (0..shards.max(1))
                .map(|_| CachePadded::new(ShardCounters::default()))
                .collect(),
        }
    }

    #[inline]
    fn local(&self) -> &ShardCounters {
        &self.shards[thread_index() % self.shards.len()]
    }

    #[inline]
    pub(crate) fn op(&self, op: Op) {
        self.local().ops[op as usize].fetch_add(1, Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn read(&self, op: Op, bytes: usize) {
        let l = self.local();
        l.ops[op as usize].fetch_add(1, Ordering::Relaxed);
        l.read_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> BackendStats {
        let mut s = BackendStats::default();
        for shard in self.shards.iter() {
            for (i, v) in shard.ops.iter().enumerate() {
                s.ops[i] += v.load(Ordering::Relaxed);
            }
            s.read_bytes += shard.read_bytes.load(Ordering::Relaxed);
        }
        s
    }
}

//! A sharded user-level descriptor table.
//!
//! `fdtable` owns the mapping from small integer descriptors to values (OS
//! files, or anything implementing [`Release`]): it hands out the lowest free
//! slot like POSIX `open(2)` does, resolves descriptors to values without a
//! lock, and releases each value exactly once, either synchronously in
//! [`FdTable::close`] (returning the release error, like `close(2)`) or, when
//! the last reference is dropped elsewhere, through a deferred list that the
//! shard's owner thread drains in batches. It does no I/O of its own beyond
//! `close(2)` in the [`Release`] impls for OS files, and needs no runtime.
//!
//! - **Shards.** Each thread that inserts into the table claims a shard on
//!   its first insert (a thread that only closes, releases or reaps claims
//!   none) and is the only writer of that shard's allocation bitmap, so
//!   allocation and owner-side release take no lock and no atomic
//!   read-modify-write on the bitmap. Threads that find every shard
//!   claimed use a shared shard under a lock.
//! - **Descriptors** ([`Fd`]) carry the shard, the slot, a generation and a
//!   table tag. A closed descriptor whose slot was reused fails with
//!   [`Error::Stale`]; one from another table fails with [`Error::WrongTable`].
//! - **References.** [`FdTable::get`] takes a reference with one atomic add;
//!   the returned [`Guard`] keeps the value alive even across a close.
//!   [`FdTable::get_with`] lends the value to a closure with no reference
//!   (one `xchg` announcing the slot instead of a guard's two atomic RMWs);
//!   a close during the closure defers the release until after it.
//!   [`Owned`] is an owning handle whose drop closes with a deferred release.
//!
//! How it is laid out and why: see [`implementation`].
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use fdtable::{CloseError, Config, Error, FdTable};
//!
//! # fn main() -> std::io::Result<()> {
//! let table = Arc::new(FdTable::new(Config { shards: 2, ..Config::default() }));
//!
//! // Insert an OS file: the table hands out the lowest free slot of this
//! // thread's shard.
//! let file = std::fs::File::open("Cargo.toml")?;
//! let fd = table.insert(file).expect("table has room");
//! assert_eq!(fd.slot(), 0);
//!
//! // Lookup: one atomic add, no lock. The guard derefs to the file.
//! let len = table.get(fd).expect("open").metadata()?.len();
//! assert!(len > 0);
//!
//! // close(2) runs here, in the caller, and its error is returned once.
//! table.close(fd).expect("closed cleanly");
//!
//! // The descriptor is dead now, even after its slot is reused.
//! let reused = table.insert(std::fs::File::open("Cargo.toml")?).expect("room");
//! assert_eq!(reused.slot(), fd.slot());
//! assert_eq!(table.get(fd).err(), Some(Error::Stale));
//! assert!(matches!(table.close(fd), Err(CloseError::Stale)));
//!
//! // An owning handle: dropping it defers close(2) to the shard's owner.
//! let owned = table.insert_owned(std::fs::File::open("Cargo.toml")?).expect("room");
//! drop(owned);
//! assert_eq!(table.stats().deferred_queue_depth, 1);
//! assert_eq!(table.reap(), 1);
//! table.close(reused).expect("closed cleanly");
//! assert_eq!(table.stats().live, 0);
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

mod bitmap;
pub mod implementation;
mod local;
mod slots;
mod sync;
mod table;

use std::fmt;
#[cfg(unix)]
use std::os::fd::{IntoRawFd, OwnedFd};
#[cfg(windows)]
use std::os::windows::io::{IntoRawHandle, OwnedHandle};

pub use table::{FdTable, Guard, LocalShard, Owned};

/// The largest number of owner shards a table can have (the descriptor has
/// 8 shard bits, and one shard is kept for threads that own none).
pub const MAX_SHARDS: usize = 255;
/// The largest number of slots per shard (the descriptor has 20 slot bits).
pub const MAX_SLOTS_PER_SHARD: usize = 1 << 20;

const SLOT_BITS: u32 = 20;
pub(crate) const SHARD_SHIFT: u32 = SLOT_BITS;
const SHARD_MASK: u64 = 0xFF;
const TAG_SHIFT: u32 = 28;
pub(crate) const TAG_MASK: u64 = 0xFFF;

/// A value the table can hold: something that must be given up exactly once.
pub trait Release: Send + 'static {
    /// What giving up the value can report (for a file: the `close(2)` error).
    type Error: fmt::Debug + Send + 'static;

    /// Gives up the resource; the table calls it exactly once per inserted value.
    fn release(self) -> Result<(), Self::Error>;
}

#[cfg(unix)]
impl Release for OwnedFd {
    type Error = std::io::Error;

    /// `close(2)`. The error is reported once and the call never retried:
    /// on Linux the descriptor is gone even when `close` fails (EINTR too),
    /// and a retry could close a descriptor another thread just opened.
    fn release(self) -> Result<(), std::io::Error> {
        let raw = self.into_raw_fd();
        // SAFETY: `into_raw_fd` gave us sole ownership of `raw`; it is closed
        // exactly once here and never used again.
        if unsafe { libc::close(raw) } == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }
}

#[cfg(windows)]
impl Release for OwnedHandle {
    type Error = std::io::Error;

    /// `CloseHandle`, its error reported once (dropping the handle would
    /// lose it).
    fn release(self) -> Result<(), std::io::Error> {
        let raw = self.into_raw_handle();
        // SAFETY: `into_raw_handle` gave us sole ownership of `raw`; it is
        // closed exactly once here and never used again.
        if unsafe { windows_sys::Win32::Foundation::CloseHandle(raw) } != 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }
}

impl Release for std::fs::File {
    type Error = std::io::Error;

    /// `close(2)` (`CloseHandle` on Windows), as for the owned descriptor.
    fn release(self) -> Result<(), std::io::Error> {
        #[cfg(unix)]
        let owned = OwnedFd::from(self);
        #[cfg(windows)]
        let owned = OwnedHandle::from(self);
        owned.release()
    }
}

/// Table settings. Slot counts are per shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Owner shards (threads beyond this share one locked shard).
    /// Default: available parallelism. Clamped to `1..=MAX_SHARDS`.
    pub shards: usize,
    /// Slots each shard starts with (rounded up to a power of two). Default 64.
    pub initial_slots: usize,
    /// Slots a shard may grow to by doubling. Default and limit: `1 << 20`.
    ///
    /// Each shard reserves address space for this many slots up front,
    /// `max_slots * (12 + size_of::<T>())` bytes, with no memory behind it
    /// until the shard grows into it; under an address-space limit
    /// (`RLIMIT_AS`, `ulimit -v`) size it to the descriptors you expect.
    pub max_slots: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            shards: std::thread::available_parallelism().map_or(1, usize::from),
            initial_slots: 64,
            max_slots: MAX_SLOTS_PER_SHARD,
        }
    }
}

/// A descriptor: shard, slot, generation and table tag packed in a `u64`.
///
/// ```text
///  63            40 39        28 27     20 19           0
/// +----------------+------------+---------+--------------+
/// | generation(24) | table (12) | shard(8)|   slot (20)  |
/// +----------------+------------+---------+--------------+
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fd(u64);

impl Fd {
    pub(crate) fn pack(tag: u64, shard: usize, slot: u32, generation: u32) -> Fd {
        Fd(u64::from(slot)
            | (shard as u64) << SHARD_SHIFT
            | tag << TAG_SHIFT
            | u64::from(generation) << slots::GEN_SHIFT)
    }

    pub(crate) fn tag(&self) -> u64 {
        (self.0 >> TAG_SHIFT) & TAG_MASK
    }

    /// The table tag and the shard in place (bits 20..40), to compare
    /// with a shard's `fd_base` in one step.
    #[inline(always)]
    pub(crate) fn tag_and_shard_bits(&self) -> u64 {
        self.0 & (TAG_MASK << TAG_SHIFT | SHARD_MASK << SHARD_SHIFT)
    }

    /// The shard the entry lives in.
    pub fn shard(&self) -> usize {
        ((self.0 >> SHARD_SHIFT) & SHARD_MASK) as usize
    }

    /// The slot within the shard: dense and lowest-first, so usable as an
    /// index into a per-shard array (for example io_uring fixed files).
    pub fn slot(&self) -> u32 {
        (self.0 & ((1 << SLOT_BITS) - 1)) as u32
    }

    /// How many times the slot had been reused when this descriptor was made
    /// (24 bits, wrapping).
    pub fn generation(&self) -> u32 {
        (self.0 >> slots::GEN_SHIFT) as u32
    }

    /// The packed form, for storing in a `u64` (an io_uring user_data, say).
    pub fn to_raw(self) -> u64 {
        self.0
    }

    /// Rebuilds a descriptor from [`Fd::to_raw`]. Any value is accepted; a
    /// forged one is rejected by the table as stale or wrong-table.
    pub fn from_raw(raw: u64) -> Fd {
        Fd(raw)
    }
}

impl fmt::Debug for Fd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fd")
            .field("shard", &self.shard())
            .field("slot", &self.slot())
            .field("generation", &self.generation())
            .finish()
    }
}

/// Why a lookup failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// The descriptor was closed (its slot may hold a newer entry now), or
    /// never existed.
    Stale,
    /// The descriptor belongs to another table.
    WrongTable,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::Stale => "stale or closed descriptor",
            Error::WrongTable => "descriptor belongs to another table",
        })
    }
}

impl std::error::Error for Error {}

/// Why an insert failed; the value is handed back.
pub enum InsertError<T> {
    /// The caller's shard holds `max_slots` entries already.
    Full(T),
}

impl<T> InsertError<T> {
    /// The value that was not inserted.
    pub fn into_inner(self) -> T {
        match self {
            InsertError::Full(value) => value,
        }
    }
}

impl<T> fmt::Debug for InsertError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InsertError::Full(_) => f.write_str("Full(..)"),
        }
    }
}

impl<T> fmt::Display for InsertError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InsertError::Full(_) => f.write_str("descriptor table shard is full"),
        }
    }
}

impl<T> std::error::Error for InsertError<T> {}

/// Why a close failed.
#[derive(Debug)]
pub enum CloseError<E> {
    /// The descriptor was already closed, or never existed.
    Stale,
    /// The descriptor belongs to another table.
    WrongTable,
    /// The entry was removed, and releasing its value failed (for a file:
    /// `close(2)` failed). The value is gone either way; do not retry.
    Release(E),
}

impl<E> From<Error> for CloseError<E> {
    fn from(error: Error) -> Self {
        match error {
            Error::Stale => CloseError::Stale,
            Error::WrongTable => CloseError::WrongTable,
        }
    }
}

impl<E: fmt::Display> fmt::Display for CloseError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CloseError::Stale => f.write_str("stale or closed descriptor"),
            CloseError::WrongTable => f.write_str("descriptor belongs to another table"),
            CloseError::Release(error) => write!(f, "release failed: {error}"),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for CloseError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CloseError::Release(error) => Some(error),
            _ => None,
        }
    }
}

/// Counters summed over all shards by [`FdTable::stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Successful inserts.
    pub allocations: u64,
    /// Inserts served by the word at the `next_free` hint.
    pub fast_path_hits: u64,
    /// Inserts that scanned the `full` summary (including those that grew).
    pub slow_path_scans: u64,
    /// Times a shard doubled.
    pub growths: u64,
    /// Values released in the caller of `close` / `Owned::close`.
    pub sync_releases: u64,
    /// Values released from a deferred list (drained by owner or `reap`).
    pub deferred_releases: u64,
    /// Releases that returned an error (sync or deferred).
    pub release_errors: u64,
    /// Lookups and closes rejected as stale (including double closes).
    pub stale_rejections: u64,
    /// Lock waits and CAS retries.
    pub contention_events: u64,
    /// Occupied slots (open entries plus closed ones not yet released).
    pub live: u64,
    /// Values waiting on deferred lists.
    pub deferred_queue_depth: u64,
}

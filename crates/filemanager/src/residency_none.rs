//! Page-cache residency where the system cannot say cheaply (see the
//! Linux version for what these answer there).

use crate::sys::BorrowedFd;

/// Whether `len` bytes at `offset` of `fd` are all in the page cache:
/// not knowable here, so `true` (a send then waits as a read would).
pub fn is_resident(_fd: BorrowedFd<'_>, _offset: u64, _len: u64) -> bool {
    true
}

/// [`is_resident`] after a read of a later page: `true` here too.
pub fn is_resident_before_read(_fd: BorrowedFd<'_>, _offset: u64, _len: u64) -> bool {
    true
}

/// Appends the range to `out` only if it can be read without waiting:
/// not knowable here, so never (`false`, `out` unchanged).
pub fn read_resident(_fd: BorrowedFd<'_>, _offset: u64, _len: usize, _out: &mut Vec<u8>) -> bool {
    false
}

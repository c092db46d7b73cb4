//! `close().await` reports the OS error. Its own test binary: it closes a
//! descriptor behind the manager's back, which must not race other tests.
#![cfg(unix)]

mod common;

use std::os::fd::AsRawFd;

use common::*;
use filemanager::SymlinkPolicy;

#[test]
fn explicit_close_returns_the_os_error() {
    let t = Tree::create();
    for backend in backends(&t.root) {
        let fm = manager(&t.root, backend, SymlinkPolicy::WithinRoot);
        current_thread().block_on(async {
            let ok = fm.open_uncached("inside.txt").await.unwrap();
            ok.close().await.unwrap();

            let h = fm.open_uncached("inside.txt").await.unwrap();
            let _ = fm.read_at(&h, 0, 6).await.unwrap();
            // Close the kernel fd underneath the handle: the manager's own
            // close(2) then fails with EBADF, which must reach the caller.
            // SAFETY: nothing else in this single-test process can take the
            // number between the two closes (no other test threads).
            assert_eq!(unsafe { libc::close(h.as_raw_fd()) }, 0);
            let err = h.close().await.unwrap_err();
            assert_eq!(err.raw_os_error(), Some(libc::EBADF), "{err}");
            let st = fm.stats();
            assert!(st.fdtable.release_errors >= 1);
            assert_eq!(st.open_fds, 0);
        });
    }
}

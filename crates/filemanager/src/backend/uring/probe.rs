//! Whether io_uring can run here, asked once at start: a ring can be set
//! up, the kernel has the opcodes the backend uses, sparse fixed files
//! work, and a NOP completes. Makes a throwaway ring; touches no other.

use std::io;

use io_uring::{opcode, IoUring};

/// Result of probing io_uring at start.
pub(crate) fn probe() -> Result<(), String> {
    let ring = IoUring::new(8).map_err(|e| format!("io_uring_setup failed: {e}"))?;
    let mut probe = io_uring::Probe::new();
    ring.submitter()
        .register_probe(&mut probe)
        .map_err(|e| format!("IORING_REGISTER_PROBE failed: {e}"))?;
    for (code, name) in [
        (opcode::Read::CODE, "READ"),
        (opcode::OpenAt2::CODE, "OPENAT2"),
        (opcode::FilesUpdate::CODE, "FILES_UPDATE"),
    ] {
        if !probe.is_supported(code) {
            return Err(format!("kernel lacks IORING_OP_{name}"));
        }
    }
    ring.submitter()
        .register_files_sparse(1)
        .map_err(|e| format!("sparse fixed files unsupported: {e}"))?;
    let mut ring = ring;
    // SAFETY: a NOP carries no pointers.
    unsafe {
        ring.submission()
            .push(&opcode::Nop::new().build().user_data(1))
    }
    .map_err(|_| "submission queue full on a fresh ring".to_string())?;
    ring.submit_and_wait(1)
        .map_err(|e| format!("io_uring_enter failed: {e}"))?;
    let res = ring.completion().next().map(|c| c.result());
    match res {
        Some(r) if r >= 0 => Ok(()),
        Some(r) => Err(format!("NOP failed: {}", io::Error::from_raw_os_error(-r))),
        None => Err("NOP did not complete".into()),
    }
}

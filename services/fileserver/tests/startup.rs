//! Start-up against what a host may lack: without `openat2(2)` (a kernel
//! before 5.6, or a container runtime's seccomp profile that does not know
//! the call) the daemon refuses to start with one clear line, instead of
//! answering every request with 500 or 403.
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use common::{bin, Tree};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Installs a seccomp filter in the child that fails `openat2` with `errno`
/// and allows every other call, as a container runtime's profile does.
fn deny_openat2(cmd: &mut Command, errno: i32) {
    const SECCOMP_DATA_NR: u32 = 0; // offsetof(struct seccomp_data, nr)
    let filter = [
        libc::sock_filter {
            code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
            jt: 0,
            jf: 0,
            k: SECCOMP_DATA_NR,
        },
        libc::sock_filter {
            code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
            jt: 0,
            jf: 1,
            k: libc::SYS_openat2 as u32,
        },
        libc::sock_filter {
            code: (libc::BPF_RET | libc::BPF_K) as u16,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ERRNO | (errno as u32 & libc::SECCOMP_RET_DATA),
        },
        libc::sock_filter {
            code: (libc::BPF_RET | libc::BPF_K) as u16,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ALLOW,
        },
    ];
    // SAFETY: the closure runs in the forked child before exec and only
    // makes two prctl calls on memory it owns (the filter is moved in).
    unsafe {
        cmd.pre_exec(move || {
            let prog = libc::sock_fprog {
                len: filter.len() as u16,
                filter: filter.as_ptr().cast_mut(),
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &prog as *const libc::sock_fprog,
                ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[test]
fn without_openat2_the_daemon_refuses_to_start_with_one_clear_line() {
    let tree = Tree::new();
    tree.write("a.txt", b"a");
    for (errno, name) in [(libc::ENOSYS, "ENOSYS"), (libc::EPERM, "EPERM")] {
        let mut cmd = Command::new(bin());
        cmd.args(common::base_args(&tree.root))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        deny_openat2(&mut cmd, errno);
        let mut child = cmd.spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                let out = child.wait_with_output().unwrap();
                panic!(
                    "{name}: the daemon kept running without openat2:\n{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{name}: {err}");
        assert!(
            lines[0].starts_with("fileserver: openat2(2) on the root failed")
                && lines[0].contains("Linux 5.6"),
            "{name}: {err}"
        );
    }
}

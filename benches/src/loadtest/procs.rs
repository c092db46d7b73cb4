//! Child processes the harness owns, signal handling, and `/proc` sampling.
//!
//! Every child is started in its own process group so that the group (an
//! nginx master and its workers, a load generator and its threads) can be
//! stopped as one, and so that a terminal's Ctrl-C reaches only the harness,
//! which then stops its children in order instead of leaving orphans.

use std::fs;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Installs SIGINT/SIGTERM handlers that set the [`interrupted`] flag.
pub fn install_signal_handlers() -> Result<()> {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: `sigaction` is given a zeroed (valid, empty-mask) struct whose
        // handler only performs an atomic store, which is async-signal-safe.
        let rc = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut())
        };
        if rc != 0 {
            bail!("sigaction({signal}): {}", std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// True once SIGINT or SIGTERM arrived.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Fails with a clear error if the run was interrupted.
pub fn check_interrupted() -> Result<()> {
    if interrupted() {
        bail!("interrupted by signal; stopping everything started");
    }
    Ok(())
}

/// Sleeps up to `d`, waking early on interruption.
pub fn sleep_interruptible(d: Duration) -> Result<()> {
    let end = Instant::now() + d;
    while Instant::now() < end {
        check_interrupted()?;
        std::thread::sleep((end - Instant::now()).min(Duration::from_millis(50)));
    }
    Ok(())
}

/// A child process leading its own process group; dropping it stops the group.
#[derive(Debug)]
pub struct ChildGroup {
    name: String,
    child: Child,
    exited: Option<ExitStatus>,
}

impl ChildGroup {
    /// Spawns `command` as the leader of a new process group.
    pub fn spawn(name: &str, command: &mut Command) -> Result<Self> {
        command.process_group(0);
        let child = command
            .spawn()
            .with_context(|| format!("start {name} ({command:?})"))?;
        Ok(Self {
            name: name.to_string(),
            child,
            exited: None,
        })
    }

    /// The group id (= the leader's pid).
    pub fn pgid(&self) -> i32 {
        self.child.id() as i32
    }

    /// The leader's exit status if it has exited.
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>> {
        if self.exited.is_none() {
            self.exited = self
                .child
                .try_wait()
                .with_context(|| format!("wait for {}", self.name))?;
        }
        Ok(self.exited)
    }

    /// Waits for the leader to exit by itself within `timeout`, then kills the
    /// group if it has not. Returns the exit status, or an error on timeout or
    /// interruption (the group is stopped either way).
    pub fn wait_bounded(&mut self, timeout: Duration) -> Result<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_wait()? {
                return Ok(status);
            }
            if interrupted() {
                self.stop();
                check_interrupted()?;
            }
            if Instant::now() >= deadline {
                self.stop();
                bail!("{} did not finish within {timeout:?}; killed", self.name);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM to the group, SIGKILL after a grace period, then reaps the leader.
    pub fn stop(&mut self) {
        let pgid = self.pgid();
        if self.exited.is_none() {
            // SAFETY: plain syscall on a process group this struct created.
            unsafe { libc::killpg(pgid, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(status)) = self.child.try_wait() {
                    self.exited = Some(status);
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        // Workers may outlive a master that exited; the group id stays
        // reserved while any member lives, so this reaches only our processes.
        // SAFETY: as above; ESRCH (group already gone) is fine.
        unsafe { libc::killpg(pgid, libc::SIGKILL) };
        if self.exited.is_none() {
            self.exited = self.child.wait().ok();
        }
    }
}

impl Drop for ChildGroup {
    fn drop(&mut self) {
        self.stop();
    }
}

/// CPU time and resident set of one process, from `/proc/PID/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// Process group id.
    pub pgrp: i32,
    /// User + system CPU time in clock ticks.
    pub cpu_ticks: u64,
    /// System (kernel) CPU time in clock ticks, part of `cpu_ticks`.
    pub sys_ticks: u64,
    /// Resident set size in pages.
    pub rss_pages: u64,
}

/// Parses the text of `/proc/PID/stat` (the command name may contain spaces
/// and parentheses, so fields are counted from the last `)`).
pub fn parse_proc_stat(text: &str) -> Option<ProcStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ")": state(3) ppid(4) pgrp(5) ... utime(14) stime(15) ... rss(24).
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    Some(ProcStat {
        pgrp: fields.get(2)?.parse().ok()?,
        cpu_ticks: field(14)? + field(15)?,
        sys_ticks: field(15)?,
        rss_pages: field(24)?,
    })
}

/// What every live process of a group used: CPU ticks (all, and the
/// system part) and RSS pages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupUsage {
    /// User + system CPU time in clock ticks.
    pub cpu_ticks: u64,
    /// System CPU time in clock ticks.
    pub sys_ticks: u64,
    /// Resident set size in pages.
    pub rss_pages: u64,
}

/// Sum of CPU ticks and RSS pages over every live process in group `pgid`.
pub fn group_usage(pgid: i32) -> GroupUsage {
    let mut sum = GroupUsage::default();
    let Ok(dir) = fs::read_dir("/proc") else {
        return sum;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|s| s.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Ok(text) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if let Some(stat) = parse_proc_stat(&text).filter(|s| s.pgrp == pgid) {
            sum.cpu_ticks += stat.cpu_ticks;
            sum.sys_ticks += stat.sys_ticks;
            sum.rss_pages += stat.rss_pages;
        }
    }
    sum
}

/// This process's soft and hard `RLIMIT_NOFILE`.
pub fn nofile_limits() -> Result<(u64, u64)> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes only into the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        bail!(
            "getrlimit(RLIMIT_NOFILE): {}",
            std::io::Error::last_os_error()
        );
    }
    Ok((limit.rlim_cur, limit.rlim_max))
}

fn set_soft_nofile(soft: u64, hard: u64) -> Result<()> {
    let limit = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: setrlimit only reads the struct it is given.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
        bail!(
            "setrlimit(RLIMIT_NOFILE, {soft}): {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// A soft `RLIMIT_NOFILE` raised for a while: the servers and load
/// generators started meanwhile inherit it; dropping it puts the old soft
/// limit back.
#[derive(Debug)]
pub struct NofileRaised {
    /// The soft limit before, if it was raised.
    old: Option<u64>,
    hard: u64,
}

impl NofileRaised {
    /// The soft limit before, if it was raised.
    pub fn raised_from(&self) -> Option<u64> {
        self.old
    }
}

impl Drop for NofileRaised {
    fn drop(&mut self) {
        if let Some(old) = self.old {
            let _ = set_soft_nofile(old, self.hard);
        }
    }
}

/// Raises the soft `RLIMIT_NOFILE` to `want` if it is lower; fails if the
/// hard limit is lower (this never raises the hard limit).
pub fn raise_nofile(want: u64) -> Result<NofileRaised> {
    let (soft, hard) = nofile_limits()?;
    if want > hard {
        bail!("needs RLIMIT_NOFILE {want}; the hard limit is {hard} (ulimit -Hn)");
    }
    if soft >= want {
        return Ok(NofileRaised { old: None, hard });
    }
    set_soft_nofile(want, hard)?;
    Ok(NofileRaised {
        old: Some(soft),
        hard,
    })
}

/// Clock ticks per second, for converting `/proc` CPU times.
pub fn ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

/// Page size in bytes.
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 {
        size as u64
    } else {
        4096
    }
}

/// CPU seconds, all of them and the kernel's part. A server's system time
/// is the kernel's work for its syscalls (the network stack, page-cache
/// copies, opens), which it cuts only by making fewer or cheaper calls;
/// the split shows whether a gap to a peer lies there or in its own code.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Cpu {
    /// User + system seconds.
    pub total_s: f64,
    /// System seconds.
    pub system_s: f64,
}

impl std::ops::Sub for Cpu {
    type Output = Cpu;
    fn sub(self, earlier: Cpu) -> Cpu {
        Cpu {
            total_s: self.total_s - earlier.total_s,
            system_s: self.system_s - earlier.system_s,
        }
    }
}

impl std::ops::AddAssign for Cpu {
    fn add_assign(&mut self, more: Cpu) {
        self.total_s += more.total_s;
        self.system_s += more.system_s;
    }
}

/// CPU time used so far by every process in group `pgid`.
pub fn group_cpu(pgid: i32) -> Cpu {
    let usage = group_usage(pgid);
    Cpu {
        total_s: usage.cpu_ticks as f64 / ticks_per_second(),
        system_s: usage.sys_ticks as f64 / ticks_per_second(),
    }
}

/// Polls the summed RSS of some process groups in a background thread and
/// keeps the peak of each.
#[derive(Debug)]
pub struct Sampler {
    stop: Arc<AtomicBool>,
    peaks: Arc<Mutex<Vec<u64>>>,
    thread: Option<JoinHandle<()>>,
}

impl Sampler {
    /// Starts sampling groups `pgids` every `interval`.
    pub fn start(pgids: Vec<i32>, interval: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let peaks = Arc::new(Mutex::new(vec![0u64; pgids.len()]));
        let thread = {
            let (stop, peaks) = (stop.clone(), peaks.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    for (i, pgid) in pgids.iter().enumerate() {
                        let rss = group_usage(*pgid).rss_pages * page_size();
                        let mut peaks = peaks.lock().unwrap();
                        peaks[i] = peaks[i].max(rss);
                    }
                    std::thread::sleep(interval);
                }
            })
        };
        Self {
            stop,
            peaks,
            thread: Some(thread),
        }
    }

    /// Stops sampling and returns the peak RSS in bytes of each group.
    pub fn finish(mut self) -> Vec<u64> {
        self.halt();
        self.peaks.lock().unwrap().clone()
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.halt();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nofile_is_raised_within_the_hard_limit_and_put_back() {
        let (soft, hard) = nofile_limits().unwrap();
        assert!(soft <= hard);
        // Already enough: nothing changes.
        assert_eq!(raise_nofile(soft.min(64)).unwrap().raised_from(), None);
        assert!(raise_nofile(hard.saturating_add(1)).is_err() || hard == u64::MAX);
        assert_eq!(nofile_limits().unwrap(), (soft, hard));
    }

    // /proc/PID/stat of a real nginx worker on this machine after a short wrk run.
    const NGINX_WORKER_STAT: &str = include_str!("testdata/nginx-worker.stat");

    #[test]
    fn parses_a_real_stat_line() {
        let s = parse_proc_stat(NGINX_WORKER_STAT).unwrap();
        assert_eq!(
            s,
            ProcStat {
                pgrp: 18365,
                cpu_ticks: 16 + 61,
                sys_ticks: 61,
                rss_pages: 1378
            }
        );
    }

    #[test]
    fn command_names_with_spaces_and_parens_do_not_shift_fields() {
        let line = NGINX_WORKER_STAT.replace("(nginx)", "(a b) (c)");
        assert_eq!(parse_proc_stat(&line).unwrap().pgrp, 18365);
        assert!(parse_proc_stat("garbage").is_none());
    }

    #[test]
    fn own_group_is_visible_and_stopping_a_group_kills_all_members() {
        // A real shell with a background child in the same group.
        let mut group =
            ChildGroup::spawn("sh", Command::new("sh").args(["-c", "sleep 30 & sleep 30"]))
                .unwrap();
        let pgid = group.pgid();
        std::thread::sleep(Duration::from_millis(100));
        let rss = group_usage(pgid).rss_pages;
        assert!(rss > 0, "group {pgid} should have resident pages");
        group.stop();
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(
            group_usage(pgid),
            GroupUsage::default(),
            "no member of the group may survive stop()"
        );
    }
}

//! Releasing descriptors: the process's one reaper thread, which drains
//! every manager's deferred releases (as one io_uring batch of closes on
//! that backend), and the inline relief an exhausted open runs (evict
//! cold cache entries, then reap). Closes descriptors; opens none.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

#[cfg(target_os = "linux")]
use crate::backend::{self, Backend};
#[cfg(target_os = "linux")]
use crate::file;
use crate::shared::{FileManager, Shared};

/// How long the reaper sleeps after a pass that released something.
const REAP_TICK: Duration = Duration::from_millis(5);
/// The longest it sleeps while passes find nothing: an idle daemon should not
/// wake 200 times a second. Exhaustion never waits for it (`relieve` reaps
/// inline), so the back-off only delays the release of dropped descriptors.
const REAP_IDLE_MAX: Duration = Duration::from_millis(200);
/// Cache entries evicted per `EMFILE` recovery.
const EVICT_BATCH: usize = 64;

impl Shared {
    /// Makes room: evicts cold cache entries, then reaps deferred releases
    /// and clears fixed slots. Returns descriptors released.
    pub(crate) fn relieve(&self) -> usize {
        self.cache.evict_unused(EVICT_BATCH);
        self.reap_now()
    }

    fn reap_now(&self) -> usize {
        let n = match &self.backend {
            // With io_uring, the descriptors released by this pass are
            // closed in one submission rather than one close(2) each.
            #[cfg(target_os = "linux")]
            Backend::Uring(_) => {
                let (n, batch) = file::collect_closes(|| self.table.reap());
                if !batch.is_empty() {
                    let errors = self
                        .close_ring
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .close_all(batch, &self.counters);
                    self.batched_close_errors
                        .fetch_add(errors, Ordering::Relaxed);
                }
                n
            }
            _ => self.table.reap(),
        };
        #[cfg(target_os = "linux")]
        backend::uring::flush_unregisters();
        if n > 0 {
            self.reaper_batches.fetch_add(1, Ordering::Relaxed);
            self.reaped.fetch_add(n as u64, Ordering::Relaxed);
        }
        n
    }
}

/// The managers the process's one reaper thread serves, and whether it
/// runs. The thread ends when the last of them is dropped and starts
/// again with the next manager.
static REAPER: Mutex<(Vec<Weak<Shared>>, bool)> = Mutex::new((Vec::new(), false));

/// Hands a manager to the process's reaper thread, starting it if none
/// runs: two managers (two mounts) share one thread.
pub(crate) fn register_reaper(weak: Weak<Shared>) -> io::Result<()> {
    let mut reaper = REAPER.lock().unwrap_or_else(|p| p.into_inner());
    reaper.0.retain(|w| w.strong_count() > 0);
    reaper.0.push(weak);
    if reaper.1 {
        return Ok(());
    }
    std::thread::Builder::new()
        .name("fd-reaper".into())
        .spawn(run_reaper)?;
    reaper.1 = true;
    Ok(())
}

fn run_reaper() {
    let mut tick = REAP_TICK;
    loop {
        std::thread::sleep(tick);
        let managers: Vec<Arc<Shared>> = {
            let mut reaper = REAPER.lock().unwrap_or_else(|p| p.into_inner());
            reaper.0.retain(|w| {
                w.upgrade()
                    .is_some_and(|s| !s.reaper_stop.load(Ordering::Acquire))
            });
            if reaper.0.is_empty() {
                reaper.1 = false;
                return;
            }
            reaper.0.iter().filter_map(Weak::upgrade).collect()
        };
        let mut released = 0;
        for shared in &managers {
            // Without events, a re-pointed root is found by looking.
            if shared.watcher.is_none() && !shared.root_links.is_empty() {
                shared.follow_root();
            }
            released += shared.reap_now();
        }
        tick = if released > 0 {
            REAP_TICK
        } else {
            (tick * 2).min(REAP_IDLE_MAX)
        };
    }
}

impl FileManager {
    /// Drains deferred releases now (the reaper does this every tick).
    pub fn reap(&self) -> usize {
        self.shared.reap_now()
    }
}

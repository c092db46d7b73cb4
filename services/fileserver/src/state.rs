//! What the main thread and the workers share, and what a connection
//! needs: the reloadable settings ([`Live`]), the process-wide state
//! ([`Shared`]), one worker's own ([`Worker`]) and the part of it a
//! connection may touch ([`ConnContext`]). The modules that serve
//! (`conn`, `admin`) depend on this one, `server` builds it; nothing here
//! depends on them, so the daemon's modules form no cycle.

use crate::accesslog::AccessLogger;
use crate::config::Settings;
use crate::files::Files;
use crate::stats::WorkerStats;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Poll, Waker};
use std::time::Duration;
use tokio::sync::watch;

/// Reloadable state: settings plus things derived from them.
#[derive(Debug)]
pub(crate) struct Live {
    /// Current settings.
    pub s: Settings,
    /// Access logger, when enabled.
    pub access: Option<AccessLogger>,
}

/// State shared by all workers and the main thread.
#[derive(Debug)]
pub(crate) struct Shared {
    /// File access beneath the root.
    pub files: Files,
    /// The HTTPS listener's certificate, when one is configured.
    pub tls: Option<Arc<crate::tls::Certs>>,
    /// The ACME challenge answers (`[acme]`).
    pub acme: Option<Arc<crate::acme::challenge::Challenges>>,
    /// `Alt-Svc` for HTTPS responses while HTTP/3 runs (`h3=":PORT"`).
    pub alt_svc: Option<http::HeaderValue>,
    pub(crate) live: RwLock<Arc<Live>>,
    pub(crate) generation: AtomicU64,
    /// One counter block per worker.
    pub worker_stats: Vec<Arc<WorkerStats>>,
    /// Open client connections (all workers).
    pub open_conns: AtomicUsize,
    /// Connections being served (at most `max_connections`; the rest wait).
    pub active_conns: AtomicUsize,
    /// QUIC handshakes in progress (all workers; `[http3] max_handshakes`).
    /// They hold no connection slot: only a connection past its handshake
    /// takes one of `max_connections`.
    pub(crate) quic_handshakes: AtomicUsize,
    /// Open connections per client (`max_connections_per_client`).
    pub(crate) client_conns: crate::clients::ClientConns,
    /// False once shutdown began.
    pub serving: AtomicBool,
    /// Access log lines dropped.
    pub access_dropped: Arc<AtomicU64>,
    pub(crate) log_threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// One counter per worker, bumped by a timer task on that worker's
    /// runtime: it stops when the worker's thread is stuck.
    pub(crate) heartbeats: Vec<AtomicU64>,
    /// systemd's watchdog period (`WATCHDOG_USEC`), if any.
    pub(crate) watchdog: Option<Duration>,
    /// Bytes of file data HTTP/2 streams may hold read and not yet
    /// written, across connections (`[http2] send_budget`, sized at start).
    pub(crate) h2_send_budget: Arc<tokio::sync::Semaphore>,
    /// True once the process this one upgraded (SIGUSR2) has exited, at
    /// once without one: HTTP/3 reads the shared UDP sockets only then.
    pub(crate) predecessor_gone: watch::Receiver<bool>,
}

impl Shared {
    /// The current live settings and their generation.
    pub(crate) fn live(&self) -> (Arc<Live>, u64) {
        let g = self.generation.load(Relaxed);
        let l = self.live.read().unwrap_or_else(|e| e.into_inner()).clone();
        (l, g)
    }

    /// Bumped at each successful reload.
    #[inline]
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Relaxed)
    }

    pub(crate) fn heartbeat_values(&self) -> Vec<u64> {
        self.heartbeats.iter().map(|h| h.load(Relaxed)).collect()
    }

    pub(crate) fn set_live(&self, live: Live) {
        *self.live.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(live);
        self.generation.fetch_add(1, Relaxed);
    }
}

/// One worker's state (lives on the worker thread): what its connections
/// get ([`ConnContext`]) and the accept loop's own bookkeeping.
#[derive(Debug)]
pub(crate) struct Worker {
    /// Shared state.
    pub shared: Arc<Shared>,
    /// What this worker's connections may touch.
    pub conn: Rc<ConnContext>,
    pub(crate) local_conns: Cell<usize>,
    /// The sockets of this worker's open connections, so that when
    /// `shutdown_timeout` passes they can be shut down: each connection's
    /// pending write then fails, and it is counted and logged as aborted
    /// instead of vanishing with the runtime.
    pub(crate) conn_fds: RefCell<std::collections::HashSet<std::os::fd::RawFd>>,
}

/// What a connection may touch, and nothing more: the settings in force,
/// the file layer, its worker's counters (durations included), and the
/// worker's stop signals. Connection counts, slots, heartbeats and the
/// other workers' state are out of its reach.
#[derive(Debug)]
pub(crate) struct ConnContext {
    shared: Arc<Shared>,
    /// This worker's counters.
    pub stats: Arc<WorkerStats>,
    /// Set when shutdown began: finish the current response, then close.
    pub stopping: StopSignal,
    /// Shutdown notification.
    pub shutdown: watch::Receiver<bool>,
    /// Buffers for connections that have bytes to read (HTTP/1.1's read
    /// and write buffers, HTTP/2's read buffer).
    pub spares: crate::spares::Spares,
}

/// The settings a connection answers under, with their generation:
/// re-read only when a reload bumped it, so a request costs one relaxed
/// load, not a lock and a shared count. Every engine keeps one.
#[derive(Debug)]
pub(crate) struct InForce {
    live: Arc<Live>,
    generation: u64,
}

impl InForce {
    /// Re-reads the settings when a reload changed them; true when it did.
    #[inline]
    pub(crate) fn refresh(&mut self, ctx: &ConnContext) -> bool {
        if ctx.shared.generation() == self.generation {
            return false;
        }
        (self.live, self.generation) = ctx.shared.live();
        true
    }
}

impl std::ops::Deref for InForce {
    type Target = Arc<Live>;

    fn deref(&self) -> &Arc<Live> {
        &self.live
    }
}

impl ConnContext {
    pub(crate) fn new(
        shared: Arc<Shared>,
        stats: Arc<WorkerStats>,
        shutdown: watch::Receiver<bool>,
    ) -> ConnContext {
        ConnContext {
            shared,
            stats,
            stopping: StopSignal::default(),
            shutdown,
            spares: crate::spares::Spares::default(),
        }
    }

    /// The settings in force and their generation.
    pub(crate) fn live(&self) -> (Arc<Live>, u64) {
        self.shared.live()
    }

    /// The settings in force, as a connection keeps them ([`InForce`]).
    pub(crate) fn in_force(&self) -> InForce {
        let (live, generation) = self.shared.live();
        InForce { live, generation }
    }

    /// The file layer.
    pub(crate) fn files(&self) -> &Files {
        &self.shared.files
    }

    /// `Alt-Svc` for HTTPS responses, while HTTP/3 runs.
    pub(crate) fn alt_svc(&self) -> Option<&http::HeaderValue> {
        self.shared.alt_svc.as_ref()
    }

    /// The ACME challenge answers, with `[acme]`.
    pub(crate) fn acme_challenges(&self) -> Option<&crate::acme::challenge::Challenges> {
        self.shared.acme.as_deref()
    }

    /// The process-wide HTTP/2 send budget (`[http2] send_budget`).
    pub(crate) fn h2_send_budget(&self) -> &Arc<tokio::sync::Semaphore> {
        &self.shared.h2_send_budget
    }
}

/// The reloadable state of `s`: the settings and their access log (its
/// writer thread, when one started).
pub(crate) fn make_live(
    s: &Settings,
    shared_dropped: &Arc<AtomicU64>,
) -> std::io::Result<(Live, Option<std::thread::JoinHandle<()>>)> {
    let (access, handle) =
        match AccessLogger::start(&s.access_log, s.access_log_format, shared_dropped.clone())? {
            Some((l, h)) => (Some(l), Some(h)),
            None => (None, None),
        };
    Ok((
        Live {
            s: s.clone(),
            access,
        },
        handle,
    ))
}

/// The worker's stop: a flag its connections read, and the wakers of
/// those waiting for it, woken once when it is set. Waiting is a borrow
/// and a waker compare per poll on the worker's own memory; a
/// `watch::Receiver::changed` per keep-alive wait linked a waiter into
/// the process-wide channel under its lock and unlinked it when a request
/// came first (4.8% of a range request's user time in `perf record`).
/// Every engine's connections wait on it (HTTP/1.1, HTTP/2, HTTP/3); the
/// process-wide channel is left to the accept loops, which end first.
#[derive(Debug, Default)]
pub(crate) struct StopSignal {
    set: Cell<bool>,
    /// One slot per waiting connection (`None`: not polled yet or free).
    wakers: RefCell<Vec<Option<Waker>>>,
    free: RefCell<Vec<usize>>,
}

impl StopSignal {
    /// Whether the worker is stopping.
    #[inline]
    pub(crate) fn get(&self) -> bool {
        self.set.get()
    }

    /// Marks the worker stopping and wakes every waiting connection.
    pub(crate) fn set(&self) {
        self.set.set(true);
        let wakers: Vec<Waker> = self
            .wakers
            .borrow_mut()
            .iter_mut()
            .filter_map(Option::take)
            .collect();
        for w in wakers {
            w.wake();
        }
    }

    /// A connection's place in the wait; free again when dropped.
    pub(crate) fn waiter(&self) -> StopWaiter<'_> {
        let slot = match self.free.borrow_mut().pop() {
            Some(slot) => slot,
            None => {
                let mut wakers = self.wakers.borrow_mut();
                wakers.push(None);
                wakers.len() - 1
            }
        };
        StopWaiter { signal: self, slot }
    }
}

/// One connection's wait for its worker's [`StopSignal`].
#[derive(Debug)]
pub(crate) struct StopWaiter<'a> {
    signal: &'a StopSignal,
    slot: usize,
}

impl<'a> StopWaiter<'a> {
    /// Ready once the worker is stopping. Cancel-safe: dropped before,
    /// it leaves its waker for the next wait to replace.
    pub(crate) fn wait(&mut self) -> impl Future<Output = ()> + use<'_, 'a> {
        std::future::poll_fn(move |cx| {
            if self.signal.get() {
                return Poll::Ready(());
            }
            let mut wakers = self.signal.wakers.borrow_mut();
            match &mut wakers[self.slot] {
                Some(w) => w.clone_from(cx.waker()),
                none => *none = Some(cx.waker().clone()),
            }
            Poll::Pending
        })
    }
}

impl Drop for StopWaiter<'_> {
    fn drop(&mut self) {
        self.signal.wakers.borrow_mut()[self.slot] = None;
        self.signal.free.borrow_mut().push(self.slot);
    }
}

#[cfg(test)]
mod stop_tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn a_waiting_connection_wakes_when_its_worker_stops() {
        let stop = Rc::new(StopSignal::default());
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let s = stop.clone();
                let waiting = tokio::task::spawn_local(async move {
                    let mut w = s.waiter();
                    w.wait().await;
                    let mut again = s.waiter();
                    again.wait().await; // set already: ready at once
                });
                tokio::task::yield_now().await;
                assert!(!waiting.is_finished());
                stop.set();
                waiting.await.unwrap();
            })
            .await;
        assert!(stop.get());
    }

    #[test]
    fn slots_are_reused_and_a_dropped_wait_holds_no_waker() {
        let stop = StopSignal::default();
        let a = stop.waiter();
        let b = stop.waiter();
        assert_eq!((a.slot, b.slot), (0, 1));
        drop(a);
        let c = stop.waiter();
        assert_eq!(c.slot, 0);
        assert_eq!(stop.wakers.borrow().len(), 2);
        drop((b, c));
        assert!(stop.wakers.borrow().iter().all(Option::is_none));
    }
}

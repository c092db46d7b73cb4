//! Single-flight loading: concurrent misses on one path run one load; the
//! other callers wait on an `event_listener::Event` (runtime-agnostic) and
//! share the result.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use event_listener::Event;

use crate::stats::bump;

/// One in-flight load. `outcome` is `None` while running, then
/// `Some(Some(result))`, or `Some(None)` when the leader failed or was
/// cancelled (waiters then retry, and one of them becomes the next leader).
#[derive(Debug)]
pub(crate) struct Flight<T> {
    event: Event,
    outcome: Mutex<Option<Option<T>>>,
}

impl<T: Clone> Flight<T> {
    fn outcome(&self) -> Option<Option<T>> {
        lock(&self.outcome, None).clone()
    }

    /// Waits until the leader finishes; `None` means it failed.
    pub(crate) async fn wait(&self) -> Option<T> {
        loop {
            if let Some(done) = self.outcome() {
                return done;
            }
            let listener = self.event.listen();
            // Re-check after registering so a notify between the two checks
            // is not lost.
            if let Some(done) = self.outcome() {
                return done;
            }
            listener.await;
        }
    }
}

type Shard<T> = Mutex<HashMap<Box<str>, Arc<Flight<T>>>>;

/// The registry of in-flight loads, sharded by path hash.
#[derive(Debug)]
pub(crate) struct Flights<T> {
    shards: Box<[Shard<T>]>,
    hasher: foldhash::fast::RandomState,
}

pub(crate) enum Role<'a, T: Clone> {
    Lead(LeadToken<'a, T>),
    Wait(Arc<Flight<T>>),
}

/// Held by the one caller that loads; dropping it unfinished (cancellation,
/// panic, error) releases the waiters with a failure.
pub(crate) struct LeadToken<'a, T: Clone> {
    shard: &'a Shard<T>,
    path: &'a str,
    flight: Arc<Flight<T>>,
    finished: bool,
}

fn lock<'m, X>(m: &'m Mutex<X>, contention: Option<&AtomicU64>) -> MutexGuard<'m, X> {
    match m.try_lock() {
        Ok(g) => g,
        Err(TryLockError::Poisoned(p)) => p.into_inner(),
        Err(TryLockError::WouldBlock) => {
            if let Some(c) = contention {
                bump(c);
            }
            m.lock().unwrap_or_else(|p| p.into_inner())
        }
    }
}

impl<T: Clone> Flights<T> {
    pub(crate) fn new(shards: usize) -> Self {
        let shards = (0..shards.max(1).next_power_of_two())
            .map(|_| Mutex::new(HashMap::new()))
            .collect();
        Flights {
            shards,
            hasher: foldhash::fast::RandomState::default(),
        }
    }

    /// Becomes the leader for `path`, or returns the flight to wait for.
    pub(crate) fn join<'a>(&'a self, path: &'a str, contention: &AtomicU64) -> Role<'a, T> {
        let idx = self.hasher.hash_one(path) as usize & (self.shards.len() - 1);
        let shard = &self.shards[idx];
        let mut map = lock(shard, Some(contention));
        if let Some(flight) = map.get(path) {
            return Role::Wait(flight.clone());
        }
        let flight = Arc::new(Flight {
            event: Event::new(),
            outcome: Mutex::new(None),
        });
        map.insert(path.into(), flight.clone());
        Role::Lead(LeadToken {
            shard,
            path,
            flight,
            finished: false,
        })
    }
}

impl<T: Clone> LeadToken<'_, T> {
    /// Publishes the result (`None` = failed) and wakes every waiter.
    pub(crate) fn finish(mut self, outcome: Option<T>) {
        self.publish(outcome);
    }

    fn publish(&mut self, outcome: Option<T>) {
        self.finished = true;
        *lock(&self.flight.outcome, None) = Some(outcome);
        {
            let mut map = lock(self.shard, None);
            if map
                .get(self.path)
                .is_some_and(|f| Arc::ptr_eq(f, &self.flight))
            {
                map.remove(self.path);
            }
        }
        self.flight.event.notify(usize::MAX);
    }
}

impl<T: Clone> Drop for LeadToken<'_, T> {
    fn drop(&mut self) {
        if !self.finished {
            self.publish(None);
        }
    }
}

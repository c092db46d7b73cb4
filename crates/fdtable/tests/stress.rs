//! Many threads inserting, looking up, closing and dropping across each
//! other's shards. Checks that no slot is ever handed out twice and every
//! value is released exactly once, never leaked. Bounded in operations and
//! in time (a couple of seconds), and meant to run in debug with overflow
//! checks on.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fdtable::{Config, Fd, FdTable, InsertError, Owned, Release};

const THREADS: usize = 4;
const SHARDS: usize = 2; // fewer than threads: the shared shard is used too
const MAX_SLOTS: usize = 512;
const OPS_PER_THREAD: usize = 200_000;
const TIME_LIMIT: Duration = Duration::from_secs(3);
const MAX_IDS: usize = THREADS * OPS_PER_THREAD;

struct World {
    /// One flag per (shard, slot): set while a value occupies it.
    occupied: Box<[AtomicBool]>,
    releases: Box<[AtomicU8]>,
    double_use: AtomicU64,
    double_release: AtomicU64,
    leaks: AtomicU64,
    next_id: AtomicU64,
}

struct Value {
    id: u64,
    /// (shard, slot) key, set right after insert, before the Fd is shared.
    key: AtomicU64,
    world: Arc<World>,
    armed: bool,
}

impl Release for Value {
    type Error = ();

    fn release(mut self) -> Result<(), ()> {
        self.armed = false;
        let key = self.key.load(Ordering::SeqCst);
        if let Some(occupied) = self.world.occupied.get(key as usize) {
            if !occupied.swap(false, Ordering::SeqCst) {
                self.world.double_use.fetch_add(1, Ordering::SeqCst);
            }
        }
        if self.world.releases[self.id as usize].fetch_add(1, Ordering::SeqCst) != 0 {
            self.world.double_release.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }
}

impl Drop for Value {
    fn drop(&mut self) {
        if self.armed {
            self.world.leaks.fetch_add(1, Ordering::SeqCst);
        }
    }
}

fn key_of(fd: Fd) -> u64 {
    (fd.shard() * MAX_SLOTS) as u64 + u64::from(fd.slot())
}

fn mark_occupied(world: &World, fd: Fd, value: &Value) {
    value.key.store(key_of(fd), Ordering::SeqCst);
    if world.occupied[key_of(fd) as usize].swap(true, Ordering::SeqCst) {
        world.double_use.fetch_add(1, Ordering::SeqCst);
    }
}

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

#[derive(Default)]
struct Pools {
    fds: Mutex<Vec<(Fd, u64)>>,
    owned: Mutex<Vec<Owned<Value>>>,
}

fn new_value(world: &Arc<World>) -> Option<Value> {
    let id = world.next_id.fetch_add(1, Ordering::SeqCst);
    ((id as usize) < MAX_IDS).then(|| Value {
        id,
        key: AtomicU64::new(0),
        world: Arc::clone(world),
        armed: true,
    })
}

fn worker(table: Arc<FdTable<Value>>, world: Arc<World>, pools: Arc<Pools>, seed: u64) {
    let mut rng = Rng(seed);
    let mut mine: Vec<(Fd, u64)> = Vec::new();
    let deadline = Instant::now() + TIME_LIMIT;
    let table_ref = &*table;
    let mut guards = Vec::new();
    for op in 0..OPS_PER_THREAD {
        if op % 256 == 0 && Instant::now() > deadline {
            break;
        }
        match rng.below(100) {
            0..=29 if mine.len() < 200 => {
                let Some(value) = new_value(&world) else {
                    break;
                };
                let id = value.id;
                match table_ref.insert(value) {
                    Ok(fd) => {
                        mark_occupied(&world, fd, &table_ref.get(fd).unwrap());
                        mine.push((fd, id));
                    }
                    Err(InsertError::Full(mut value)) => {
                        value.armed = false;
                        world.releases[id as usize].store(1, Ordering::SeqCst);
                    }
                }
            }
            0..=49 if !mine.is_empty() => {
                let (fd, _) = mine.swap_remove(rng.below(mine.len()));
                table_ref.close(fd).unwrap();
            }
            50..=64 if !mine.is_empty() => {
                let (fd, id) = mine[rng.below(mine.len())];
                let guard = table_ref.get(fd).unwrap();
                assert_eq!(guard.id, id, "lookup resolved to another value");
                if guards.len() < 8 {
                    guards.push(guard); // held across later closes
                }
            }
            65..=74 => {
                guards.clear();
            }
            75..=79 if !mine.is_empty() => {
                let entry = mine.swap_remove(rng.below(mine.len()));
                pools.fds.lock().unwrap().push(entry);
            }
            80..=84 => {
                let taken = pools.fds.lock().unwrap().pop();
                if let Some((fd, id)) = taken {
                    if let Ok(guard) = table_ref.get(fd) {
                        assert_eq!(guard.id, id);
                    }
                    table_ref.close(fd).unwrap();
                    assert!(table_ref.get(fd).is_err());
                }
            }
            85..=89 => {
                let Some(value) = new_value(&world) else {
                    break;
                };
                let id = value.id;
                match table.insert_owned(value) {
                    Ok(owned) => {
                        mark_occupied(&world, owned.fd(), &owned);
                        pools.owned.lock().unwrap().push(owned);
                    }
                    Err(InsertError::Full(mut value)) => {
                        value.armed = false;
                        world.releases[id as usize].store(1, Ordering::SeqCst);
                    }
                }
            }
            90..=97 => {
                let taken = pools.owned.lock().unwrap().pop();
                if let Some(owned) = taken {
                    if rng.below(2) == 0 {
                        drop(owned); // deferred, usually on a foreign thread
                    } else {
                        owned.close().unwrap();
                    }
                }
            }
            _ => {
                table_ref.reap();
            }
        }
    }
    drop(guards);
    for (fd, _) in mine {
        table_ref.close(fd).unwrap();
    }
}

#[test]
fn no_slot_handed_out_twice_and_every_value_released_once() {
    let world = Arc::new(World {
        occupied: (0..(SHARDS + 1) * MAX_SLOTS)
            .map(|_| AtomicBool::new(false))
            .collect(),
        releases: (0..MAX_IDS).map(|_| AtomicU8::new(0)).collect(),
        double_use: AtomicU64::new(0),
        double_release: AtomicU64::new(0),
        leaks: AtomicU64::new(0),
        next_id: AtomicU64::new(0),
    });
    let table = Arc::new(FdTable::new(Config {
        shards: SHARDS,
        initial_slots: 4,
        max_slots: MAX_SLOTS,
    }));
    let pools = Arc::new(Pools::default());
    let threads: Vec<_> = (0..THREADS)
        .map(|i| {
            let (table, world, pools) =
                (Arc::clone(&table), Arc::clone(&world), Arc::clone(&pools));
            std::thread::spawn(move || {
                worker(table, world, pools, 0x9E37_79B9_7F4A_7C15 ^ (i as u64 + 1))
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    // Leftovers: pooled descriptors are closed, pooled handles dropped.
    for (fd, _) in pools.fds.lock().unwrap().drain(..) {
        table.close(fd).unwrap();
    }
    pools.owned.lock().unwrap().clear();
    table.reap();
    let stats = table.stats();
    assert_eq!(stats.deferred_queue_depth, 0);
    assert_eq!(stats.live, 0, "{stats:?}");
    assert!(stats.growths > 0 && stats.deferred_releases > 0 && stats.sync_releases > 0);
    drop(table);

    let inserted = world.next_id.load(Ordering::SeqCst).min(MAX_IDS as u64);
    assert!(inserted > 1000, "only {inserted} values inserted");
    assert_eq!(
        world.double_use.load(Ordering::SeqCst),
        0,
        "a slot was handed out twice"
    );
    assert_eq!(
        world.double_release.load(Ordering::SeqCst),
        0,
        "a value was released twice"
    );
    assert_eq!(
        world.leaks.load(Ordering::SeqCst),
        0,
        "a value was dropped unreleased"
    );
    let unreleased = (0..inserted as usize)
        .filter(|&id| world.releases[id].load(Ordering::SeqCst) == 0)
        .count();
    assert_eq!(unreleased, 0, "values never released");
}

/// Readers hammer descriptors that a writer keeps closing and reusing: a
/// lookup must either fail or resolve to the value inserted under exactly
/// that descriptor, and the transient references of failed lookups must
/// never release or leak anything.
#[test]
fn lookups_racing_with_close_and_reuse_never_see_another_value() {
    const ROUNDS: usize = 100_000;
    let world = Arc::new(World {
        occupied: (0..(SHARDS + 1) * MAX_SLOTS)
            .map(|_| AtomicBool::new(false))
            .collect(),
        releases: (0..ROUNDS).map(|_| AtomicU8::new(0)).collect(),
        double_use: AtomicU64::new(0),
        double_release: AtomicU64::new(0),
        leaks: AtomicU64::new(0),
        next_id: AtomicU64::new(0),
    });
    let table: Arc<FdTable<Value>> = Arc::new(FdTable::new(Config {
        shards: SHARDS,
        initial_slots: 4,
        max_slots: MAX_SLOTS,
    }));
    let published = Arc::new(AtomicU64::new(u64::MAX));
    let done = Arc::new(AtomicBool::new(false));
    // Lookups tried: the writer waits on it now and then (below).
    let attempts = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (table, published, done, attempts) = (
                Arc::clone(&table),
                Arc::clone(&published),
                Arc::clone(&done),
                Arc::clone(&attempts),
            );
            std::thread::spawn(move || {
                let mut hits = 0u64;
                while !done.load(Ordering::Relaxed) {
                    let raw = published.load(Ordering::Acquire);
                    if raw == u64::MAX {
                        continue;
                    }
                    if let Ok(guard) = table.get(Fd::from_raw(raw)) {
                        // `key` holds the raw Fd the value was inserted under.
                        assert_eq!(
                            guard.key.load(Ordering::SeqCst),
                            raw,
                            "resolved to a reused slot"
                        );
                        hits += 1;
                    }
                    attempts.fetch_add(1, Ordering::SeqCst);
                }
                hits
            })
        })
        .collect();
    let deadline = Instant::now() + TIME_LIMIT;
    for round in 0..ROUNDS {
        if round % 256 == 0 && Instant::now() > deadline {
            break;
        }
        let value = new_value(&world).unwrap();
        let fd = table.insert(value).unwrap();
        {
            let guard = table.get(fd).unwrap();
            guard.key.store(fd.to_raw(), Ordering::SeqCst);
        }
        published.store(fd.to_raw(), Ordering::Release);
        std::hint::spin_loop();
        if round % 64 == 0 {
            // On a loaded machine the readers may not run at all between a
            // publish and its close; every 64th descriptor stays live until
            // a reader has looked (two attempts: the second one started
            // after the publish), so `hits > 0` tests the table, not the
            // scheduler. Bounded, so a stuck reader cannot hang the test.
            let seen = attempts.load(Ordering::SeqCst);
            let wait_until = Instant::now() + Duration::from_millis(20);
            while attempts.load(Ordering::SeqCst) < seen + 2 && Instant::now() < wait_until {
                std::thread::yield_now();
            }
        }
        // The reader may hold a guard: then the release is deferred.
        table.close(fd).unwrap();
    }
    done.store(true, Ordering::Relaxed);
    let hits: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    table.reap();
    assert_eq!(table.stats().live, 0);
    drop(table);
    let inserted = world.next_id.load(Ordering::SeqCst) as usize;
    assert!(hits > 0, "readers never resolved a descriptor");
    assert_eq!(world.leaks.load(Ordering::SeqCst), 0);
    let released: usize = (0..inserted)
        .map(|id| usize::from(world.releases[id].load(Ordering::SeqCst)))
        .sum();
    assert_eq!(released, inserted, "every value released exactly once");
}

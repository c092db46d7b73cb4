//! Criterion benchmarks for `fdtable`, side by side with the alternatives a
//! server could use instead: `sharded-slab`, a `Mutex<slab::Slab>`, and the
//! kernel's own descriptor table (`dup(2)` + `close(2)`).
//!
//! Run: `cargo bench -p benches --bench fdtable -- --quick`
//!
//! Each single-threaded group runs twice: under its own name with wall time
//! (criterion's default), and as `<name>_cpu` with this thread's CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`). On the shared 2-core build machine other
//! jobs preempt the benchmark thread; wall time then counts the time spent
//! descheduled and the ratios drift with the load, CPU time does not.
//!
//! Every fdtable benchmark stores a value whose `release` is a no-op, so the
//! numbers measure the table, not `close(2)`; only `kernel_dup_close` makes
//! syscalls, because that is what it stands for.
//!
//! `FDTABLE_INTERLEAVED=<rounds> cargo bench -p benches --bench fdtable`
//! skips criterion and prints per-round ratios of interleaved batches of
//! alloc+release pairs and lookups, with the floor contender
//! (`support/floor.rs`), the steadiest figure on a noisy machine, and
//! `floor_shared`, the same floor reached through a shared `&'static`
//! as a table several threads can use is, then
//! (a quarter as many rounds) the two-thread pairs: fdtable on one and on
//! two threads, and a shared `Mutex<Slab>` on one and two, in wall time
//! (`FDTABLE_NO_THREADS=1` skips those). The lookups include
//! `fdtable_get_with` (the scoped lookup) and the announcement floors;
//! `FDTABLE_ANNOUNCED=1` gives the thread an announcement word before the
//! pairs, so every close checks one. `FDTABLE_MEMBARRIER=<rounds>` times
//! `membarrier(2)` in fdtable pairs instead.
//! `FDTABLE_CALLGRIND=<contender>:<pairs>` runs one contender's pairs alone,
//! for `valgrind --tool=callgrind` (`scripts/callgrind-fdtable.sh`).

use std::convert::Infallible;
use std::hint::black_box;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use criterion::measurement::Measurement;
use criterion::{criterion_group, Criterion};
use fdtable::{Config, Fd, FdTable, Release};

#[path = "support/cpu_time.rs"]
mod cpu_time;
use cpu_time::{thread_cpu_ns, ThreadCpuTime};

#[path = "support/floor.rs"]
mod floor;
use floor::{Announce, Floor, SharedFloor};

/// Entries kept live during every alloc+release benchmark, so no structure
/// is measured in its trivial empty state.
const LIVE: usize = 1000;

/// A value with nothing to give up.
#[derive(Debug)]
struct Noop(#[allow(dead_code)] u64);

impl Release for Noop {
    type Error = Infallible;

    fn release(self) -> Result<(), Infallible> {
        Ok(())
    }
}

fn fdtable_config(shards: usize) -> Config {
    Config {
        shards,
        initial_slots: 64,
        max_slots: 1 << 20,
    }
}

/// Group `fdtable_alloc_release`: one allocation plus one release of the
/// same entry, with `LIVE` other entries held. Fair because each contender
/// does the same two operations its users would do (insert a value, later
/// remove it by key) with the same live population, single-threaded and
/// uncontended: `sharded_slab` insert+remove, `mutex_slab` takes its lock
/// once per operation (alloc and release are separate calls in a server),
/// `kernel_dup_close` allocates and frees a real descriptor in a process
/// table holding `LIVE` extra descriptors.
fn alloc_release<M: Measurement>(c: &mut Criterion<M>, name: &str) {
    let mut group = c.benchmark_group(name);

    let table = FdTable::new(fdtable_config(2));
    let held: Vec<Fd> = (0..LIVE as u64)
        .map(|i| table.insert(Noop(i)).unwrap())
        .collect();
    group.bench_function("fdtable", |b| {
        b.iter(|| {
            let fd = table.insert(Noop(1)).unwrap();
            table.close(black_box(fd)).unwrap();
        })
    });
    // The same pair through the owner token (`FdTable::local`), which a
    // server's worker threads hold: no thread-local claim lookup per call.
    let local = table.local().expect("this thread owns a shard");
    group.bench_function("fdtable_local", |b| {
        b.iter(|| {
            let fd = local.insert(Noop(1)).unwrap();
            local.close(black_box(fd)).unwrap();
        })
    });
    for fd in held {
        local.close(fd).unwrap();
    }
    drop(local);

    let slab = sharded_slab::Slab::new();
    let held: Vec<usize> = (0..LIVE as u64).map(|i| slab.insert(i).unwrap()).collect();
    group.bench_function("sharded_slab", |b| {
        b.iter(|| {
            let key = slab.insert(1u64).unwrap();
            slab.remove(black_box(key));
        })
    });
    drop(held);

    let locked = Mutex::new(slab::Slab::with_capacity(LIVE * 2));
    for i in 0..LIVE as u64 {
        locked.lock().unwrap().insert(i);
    }
    group.bench_function("mutex_slab", |b| {
        b.iter(|| {
            let key = locked.lock().unwrap().insert(1u64);
            locked.lock().unwrap().remove(black_box(key));
        })
    });

    raise_nofile_limit();
    let null = OwnedFd::from(std::fs::File::open("/dev/null").unwrap());
    let held: Vec<OwnedFd> = (0..LIVE).map(|_| null.try_clone().unwrap()).collect();
    group.bench_function("kernel_dup_close", |b| {
        b.iter(|| {
            // SAFETY: dup of a descriptor we own; the copy is closed at once.
            let copy = unsafe { libc::dup(null.as_raw_fd()) };
            assert!(copy >= 0);
            // SAFETY: `copy` is ours and closed exactly once.
            unsafe { libc::close(black_box(copy)) };
        })
    });
    drop(held);
    group.finish();
}

fn raise_nofile_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain getrlimit/setrlimit on a valid struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// Group `fdtable_lookup`: resolve a live key to its value and let the
/// reference go (a "get hit"), with `LIVE` entries present. Both contenders
/// hand out a reference-counted guard, so both pay for taking and dropping
/// one reference.
fn lookup<M: Measurement>(c: &mut Criterion<M>, name: &str) {
    let mut group = c.benchmark_group(name);

    let table = FdTable::new(fdtable_config(2));
    let fds: Vec<Fd> = (0..LIVE as u64)
        .map(|i| table.insert(Noop(i)).unwrap())
        .collect();
    let mut i = 0;
    group.bench_function("fdtable", |b| {
        b.iter(|| {
            i = (i + 1) % LIVE;
            let guard = table.get(black_box(fds[i])).unwrap();
            black_box(&*guard);
        })
    });

    let slab = sharded_slab::Slab::new();
    let keys: Vec<usize> = (0..LIVE as u64).map(|i| slab.insert(i).unwrap()).collect();
    let mut i = 0;
    group.bench_function("sharded_slab", |b| {
        b.iter(|| {
            i = (i + 1) % LIVE;
            let guard = slab.get(black_box(keys[i])).unwrap();
            black_box(&*guard);
        })
    });
    group.finish();
}

/// Starts `threads` threads that each run `worker(barrier)`: set up, wait on
/// the barrier, do the timed work, and return the instant they finished it.
/// Returns the wall time from the common start to the last thread's end.
fn time_threads<F>(threads: usize, worker: F) -> Duration
where
    F: Fn(&Barrier) -> Instant + Send + Sync + 'static,
{
    let worker = Arc::new(worker);
    let barrier = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (worker, barrier) = (Arc::clone(&worker), Arc::clone(&barrier));
            std::thread::spawn(move || worker(&barrier))
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    let end = handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .max()
        .unwrap();
    end - start
}

/// Runs `per_thread` alloc+release pairs on each of `threads` fresh threads;
/// each claims its own shard through `FdTable::local` and holds `LIVE`
/// entries there first.
fn run_pairs(threads: usize, per_thread: u64) -> Duration {
    let table = Arc::new(FdTable::new(fdtable_config(threads)));
    time_threads(threads, move |barrier| {
        // Each thread must own a shard of its own, or the figure would
        // measure the shared shard's lock.
        let local = table.local().expect("one shard per thread");
        let held: Vec<Fd> = (0..LIVE as u64)
            .map(|i| local.insert(Noop(i)).unwrap())
            .collect();
        barrier.wait();
        for _ in 0..per_thread {
            let fd = local.insert(Noop(1)).unwrap();
            local.close(black_box(fd)).unwrap();
        }
        let end = Instant::now();
        for fd in held {
            local.close(fd).unwrap();
        }
        end
    })
}

/// The same pairs as [`run_pairs`] on one `Mutex<Slab>` shared by
/// `threads` threads (each holding `LIVE` entries first): what a server
/// gets from the simple alternative once its workers allocate at once.
fn run_mutex_pairs(threads: usize, per_thread: u64) -> Duration {
    let locked = Arc::new(Mutex::new(slab::Slab::with_capacity(LIVE * (threads + 1))));
    time_threads(threads, move |barrier| {
        let held: Vec<usize> = (0..LIVE as u64)
            .map(|i| locked.lock().unwrap().insert(i))
            .collect();
        barrier.wait();
        for _ in 0..per_thread {
            let key = locked.lock().unwrap().insert(1u64);
            locked.lock().unwrap().remove(black_box(key));
        }
        let end = Instant::now();
        for key in held {
            locked.lock().unwrap().remove(key);
        }
        end
    })
}

/// Group `fdtable_2threads`: aggregate alloc+release throughput. Reported
/// time per iteration is wall time divided by the total number of pairs
/// done by all threads, so `fdtable_1thread / fdtable_2threads` is the
/// scaling factor (2.0 = perfect). All functions spawn their threads the
/// same way and hold `LIVE` entries per thread, so only the thread count
/// (and the structure) differs. `mutex_slab_*` run the same pairs on one
/// shared `Mutex<Slab>`. On a shared 2-core machine anything else running
/// lowers the 2-thread figures.
fn two_threads(c: &mut Criterion) {
    let mut group = c.benchmark_group("fdtable_2threads");
    group.bench_function("fdtable_1thread", |b| {
        b.iter_custom(|iters| run_pairs(1, iters.max(1)))
    });
    group.bench_function("fdtable_2threads", |b| {
        b.iter_custom(|iters| run_pairs(2, iters.div_ceil(2).max(1)))
    });
    group.bench_function("mutex_slab_1thread", |b| {
        b.iter_custom(|iters| run_mutex_pairs(1, iters.max(1)))
    });
    group.bench_function("mutex_slab_2threads", |b| {
        b.iter_custom(|iters| run_mutex_pairs(2, iters.div_ceil(2).max(1)))
    });
    group.finish();
}

fn alloc_release_wall(c: &mut Criterion) {
    alloc_release(c, "fdtable_alloc_release");
}

fn lookup_wall(c: &mut Criterion) {
    lookup(c, "fdtable_lookup");
}

fn alloc_release_cpu(c: &mut Criterion<ThreadCpuTime>) {
    alloc_release(c, "fdtable_alloc_release_cpu");
}

fn lookup_cpu(c: &mut Criterion<ThreadCpuTime>) {
    lookup(c, "fdtable_lookup_cpu");
}

/// The alloc+release contenders, each holding `LIVE` entries, as one
/// closure per contender that runs `n` pairs.
struct PairContenders {
    names: [&'static str; 9],
    run: [Box<dyn FnMut(usize)>; 9],
}

fn pair_contenders() -> PairContenders {
    let table: &'static FdTable<Noop> = Box::leak(Box::new(FdTable::new(fdtable_config(2))));
    // The held entries stay for the life of the (leaked) table.
    for i in 0..LIVE as u64 {
        table.insert(Noop(i)).unwrap();
    }
    let local = table.local().expect("this thread owns a shard");
    let slab = sharded_slab::Slab::new();
    for i in 0..LIVE as u64 {
        slab.insert(i).unwrap();
    }
    let locked = Mutex::new(slab::Slab::with_capacity(LIVE * 2));
    for i in 0..LIVE as u64 {
        locked.lock().unwrap().insert(i);
    }
    let mut floor = Floor::new(LIVE * 2);
    for i in 0..LIVE as u64 {
        floor.insert(i).unwrap();
    }
    let shared: &'static SharedFloor = Box::leak(Box::new(SharedFloor::new(LIVE * 2)));
    for i in 0..LIVE as u64 {
        shared.insert(i).unwrap();
    }
    // The floor pair with a close that checks `n` announcement words (one
    // per reader thread of a hazard-protected lookup): what a scoped
    // lookup with one locked instruction would cost the pair.
    let scanning = |n: usize| -> Box<dyn FnMut(usize)> {
        let mut floor = Floor::new(LIVE * 2);
        for i in 0..LIVE as u64 {
            floor.insert(i).unwrap();
        }
        let announced: Vec<Announce> = (0..n).map(|_| Announce::default()).collect();
        Box::new(move |pairs| {
            for _ in 0..pairs {
                let key = floor.insert(1).unwrap();
                assert!(floor.remove_scanning(black_box(key), &announced));
            }
        })
    };
    PairContenders {
        names: [
            "mutex_slab",
            "sharded_slab",
            "fdtable",
            "fdtable_local",
            "floor",
            "floor_shared",
            "floor_scan1",
            "floor_scan4",
            "floor_scan16",
        ],
        run: [
            Box::new(move |n| {
                for _ in 0..n {
                    let key = locked.lock().unwrap().insert(1u64);
                    locked.lock().unwrap().remove(black_box(key));
                }
            }),
            Box::new(move |n| {
                for _ in 0..n {
                    let key = slab.insert(1u64).unwrap();
                    slab.remove(black_box(key));
                }
            }),
            Box::new(move |n| {
                for _ in 0..n {
                    let fd = table.insert(Noop(1)).unwrap();
                    table.close(black_box(fd)).unwrap();
                }
            }),
            Box::new(move |n| {
                for _ in 0..n {
                    let fd = local.insert(Noop(1)).unwrap();
                    local.close(black_box(fd)).unwrap();
                }
            }),
            Box::new(move |n| {
                for _ in 0..n {
                    let key = floor.insert(1).unwrap();
                    assert!(floor.remove(black_box(key)));
                }
            }),
            Box::new(move |n| {
                for _ in 0..n {
                    let key = shared.insert(1).unwrap();
                    assert!(shared.remove(black_box(key)));
                }
            }),
            scanning(1),
            scanning(4),
            scanning(16),
        ],
    }
}

fn quantile(mut v: Vec<f64>, q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q) as usize]
}

/// `p10 ..x median ..x p90 ..x` of the per-round ratios `over[r] / under[r]`.
fn ratio_spread(over: &[f64], under: &[f64]) -> String {
    let ratios: Vec<f64> = over.iter().zip(under).map(|(o, u)| o / u).collect();
    format!(
        "p10 {:.2}x median {:.2}x p90 {:.2}x",
        quantile(ratios.clone(), 0.1),
        quantile(ratios.clone(), 0.5),
        quantile(ratios, 0.9),
    )
}

/// Times `run[k](BATCH)` for every contender in rotating order, `rounds`
/// times, and prints ns per operation and per-round ratios to `names[base]`
/// (and to each of `names[also]`).
fn interleave(
    title: &str,
    names: &[&str],
    run: &mut [Box<dyn FnMut(usize) + '_>],
    base: usize,
    also: &[usize],
    rounds: usize,
) {
    const BATCH: usize = 20_000;
    let mut ns = vec![Vec::with_capacity(rounds); names.len()];
    for round in 0..rounds {
        for k in 0..names.len() {
            let which = (k + round) % names.len();
            let start = thread_cpu_ns();
            run[which](BATCH);
            ns[which].push((thread_cpu_ns() - start) as f64 / BATCH as f64);
        }
    }
    println!("{title}: {rounds} rounds of {BATCH}, thread CPU time");
    for (k, name) in names.iter().enumerate() {
        println!(
            "  {name:14} {:6.2} ns/op (median)  speed vs {}: {}",
            quantile(ns[k].clone(), 0.5),
            names[base],
            ratio_spread(&ns[base], &ns[k]),
        );
        for &other in also {
            println!(
                "  {:14} {:6} {:15}  speed vs {}: {}",
                "",
                "",
                "",
                names[other],
                ratio_spread(&ns[other], &ns[k]),
            );
        }
    }
}

/// `FDTABLE_INTERLEAVED=<rounds>`: the alloc+release pairs and the lookups
/// in interleaved batches (see `pathcache`'s mode of the same name for why),
/// then the two-thread pairs ([`interleave_threads`]).
fn interleaved(rounds: usize) {
    if std::env::var_os("FDTABLE_ANNOUNCED").is_some() {
        // Give this thread an announcement word first, so every close
        // below checks one word, as in a process whose workers use
        // `get_with` (otherwise the check is one load and compare).
        let table = FdTable::new(fdtable_config(1));
        let fd = table.insert(Noop(0)).unwrap();
        table.get_with(fd, |v| black_box(v.0)).unwrap();
    }
    let mut pairs = pair_contenders();
    interleave(
        "fdtable_alloc_release interleaved",
        &pairs.names,
        &mut pairs.run,
        0,
        &[1],
        rounds,
    );
    let table = FdTable::new(fdtable_config(2));
    let fds: Vec<Fd> = (0..LIVE as u64)
        .map(|i| table.insert(Noop(i)).unwrap())
        .collect();
    let slab = sharded_slab::Slab::new();
    let keys: Vec<usize> = (0..LIVE as u64).map(|i| slab.insert(i).unwrap()).collect();
    let mut floor = Floor::new(LIVE);
    let floor_keys: Vec<(usize, u64)> =
        (0..LIVE as u64).map(|i| floor.insert(i).unwrap()).collect();
    let floor = &floor;
    let me = Announce::default();
    let me = &me;
    let (mut i, mut j, mut k, mut l, mut m, mut o) = (0, 0, 0, 0, 0, 0);
    let mut run: [Box<dyn FnMut(usize) + '_>; 6] = [
        Box::new(|n| {
            for _ in 0..n {
                i = (i + 1) % LIVE;
                black_box(&*slab.get(black_box(keys[i])).unwrap());
            }
        }),
        Box::new(|n| {
            for _ in 0..n {
                j = (j + 1) % LIVE;
                black_box(&*table.get(black_box(fds[j])).unwrap());
            }
        }),
        Box::new(|n| {
            for _ in 0..n {
                k = (k + 1) % LIVE;
                black_box(floor.get(black_box(floor_keys[k])).unwrap());
            }
        }),
        Box::new(|n| {
            for _ in 0..n {
                l = (l + 1) % LIVE;
                black_box(floor.get_announced(black_box(floor_keys[l]), me).unwrap());
            }
        }),
        Box::new(|n| {
            for _ in 0..n {
                m = (m + 1) % LIVE;
                black_box(
                    floor
                        .get_announced_asym(black_box(floor_keys[m]), me)
                        .unwrap(),
                );
            }
        }),
        Box::new(|n| {
            for _ in 0..n {
                o = (o + 1) % LIVE;
                black_box(table.get_with(black_box(fds[o]), |v| v.0).unwrap());
            }
        }),
    ];
    interleave(
        "fdtable_lookup interleaved",
        &[
            "sharded_slab",
            "fdtable",
            "floor",
            "floor_xchg",
            "floor_asym",
            "fdtable_get_with",
        ],
        &mut run,
        0,
        &[],
        rounds,
    );
    if std::env::var_os("FDTABLE_NO_THREADS").is_none() {
        interleave_threads(rounds.div_ceil(4));
    }
}

/// Pairs per thread in one two-thread batch: ~3 ms, so the barriers'
/// wake-ups (tens of microseconds) stay a small part of each batch.
const THREAD_BATCH: u64 = 200_000;

/// Two worker threads, each with its own state per contender, driven in
/// batches: the two-thread contenders of the interleaved mode. Keeping the
/// threads (and each one's `LocalShard`) for the whole run means a batch
/// times the pairs, not thread start-up.
struct ThreadPool {
    job: Arc<Mutex<(usize, usize)>>,
    start: Arc<Barrier>,
    done: Arc<Barrier>,
    spans: Arc<Mutex<Vec<(Instant, Instant)>>>,
    handles: Vec<std::thread::JoinHandle<()>>,
}

/// Contender numbers of the two-thread batches (and `usize::MAX`: exit).
const POOL_FDTABLE: usize = 0;
const POOL_MUTEX: usize = 1;
const POOL_EXIT: usize = usize::MAX;

impl ThreadPool {
    fn new() -> ThreadPool {
        let table = Arc::new(FdTable::new(fdtable_config(2)));
        let locked = Arc::new(Mutex::new(slab::Slab::with_capacity(LIVE * 3)));
        let job = Arc::new(Mutex::new((POOL_EXIT, 0)));
        let start = Arc::new(Barrier::new(3));
        let done = Arc::new(Barrier::new(3));
        let spans = Arc::new(Mutex::new(Vec::new()));
        let handles = (0..2)
            .map(|index| {
                let (table, locked) = (Arc::clone(&table), Arc::clone(&locked));
                let (job, start, done) = (Arc::clone(&job), Arc::clone(&start), Arc::clone(&done));
                let spans = Arc::clone(&spans);
                std::thread::spawn(move || {
                    // Each thread must own a shard of its own, or the figure
                    // would measure the shared shard's lock.
                    let local = table.local().expect("one shard per thread");
                    let held: Vec<Fd> = (0..LIVE as u64)
                        .map(|i| local.insert(Noop(i)).unwrap())
                        .collect();
                    let held_keys: Vec<usize> = (0..LIVE as u64)
                        .map(|i| locked.lock().unwrap().insert(i))
                        .collect();
                    loop {
                        start.wait();
                        let (which, threads) = *job.lock().unwrap();
                        if which == POOL_EXIT {
                            break;
                        }
                        if index < threads {
                            let begin = Instant::now();
                            if which == POOL_FDTABLE {
                                for _ in 0..THREAD_BATCH {
                                    let fd = local.insert(Noop(1)).unwrap();
                                    local.close(black_box(fd)).unwrap();
                                }
                            } else {
                                for _ in 0..THREAD_BATCH {
                                    let key = locked.lock().unwrap().insert(1u64);
                                    locked.lock().unwrap().remove(black_box(key));
                                }
                            }
                            spans.lock().unwrap().push((begin, Instant::now()));
                        }
                        done.wait();
                    }
                    for fd in held {
                        local.close(fd).unwrap();
                    }
                    for key in held_keys {
                        locked.lock().unwrap().remove(key);
                    }
                })
            })
            .collect();
        ThreadPool {
            job,
            start,
            done,
            spans,
            handles,
        }
    }

    /// Runs one batch of `which` on `threads` threads; wall ns per pair,
    /// all threads' pairs together (from the first start to the last end).
    fn run(&self, which: usize, threads: usize) -> f64 {
        *self.job.lock().unwrap() = (which, threads);
        self.start.wait();
        self.done.wait();
        let spans = std::mem::take(&mut *self.spans.lock().unwrap());
        let begin = spans.iter().map(|s| s.0).min().unwrap();
        let end = spans.iter().map(|s| s.1).max().unwrap();
        (end - begin).as_nanos() as f64 / (THREAD_BATCH * threads as u64) as f64
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        *self.job.lock().unwrap() = (POOL_EXIT, 0);
        self.start.wait();
        for handle in self.handles.drain(..) {
            handle.join().unwrap();
        }
    }
}

/// The two-thread contenders of the interleaved mode, in rotating order:
/// fdtable on one and on two threads (each thread its own shard, through
/// `local()`), and one `Mutex<Slab>` used by one and by two threads. Wall
/// time per pair of all threads together, so `fdtable_1thread /
/// fdtable_2threads` is the scaling (2.0 = perfect) and `mutex_slab_2threads
/// / fdtable_2threads` the throughput against the shared mutex.
fn interleave_threads(rounds: usize) {
    let pool = ThreadPool::new();
    let names = [
        "fdtable_1thread",
        "fdtable_2threads",
        "mutex_slab_1thread",
        "mutex_slab_2threads",
    ];
    let jobs = [
        (POOL_FDTABLE, 1),
        (POOL_FDTABLE, 2),
        (POOL_MUTEX, 1),
        (POOL_MUTEX, 2),
    ];
    let mut ns = vec![Vec::with_capacity(rounds); names.len()];
    for round in 0..rounds {
        for k in 0..names.len() {
            let which = (k + round) % names.len();
            let (contender, threads) = jobs[which];
            ns[which].push(pool.run(contender, threads));
        }
    }
    println!(
        "fdtable_2threads interleaved: {rounds} rounds of {THREAD_BATCH} pairs per thread, \
         wall time per pair of all threads"
    );
    for (k, name) in names.iter().enumerate() {
        println!(
            "  {name:20} {:6.2} ns/pair (median)",
            quantile(ns[k].clone(), 0.5)
        );
    }
    let ratio = |over: usize, under: usize, label: &str| {
        println!("  {label:44} {}", ratio_spread(&ns[over], &ns[under]));
    };
    ratio(0, 1, "fdtable 2 threads vs 1 thread (scaling)");
    ratio(3, 1, "fdtable 2 threads vs Mutex<Slab> 2 threads");
    ratio(2, 0, "fdtable 1 thread vs Mutex<Slab> 1 thread");
    ratio(2, 3, "Mutex<Slab> 2 threads vs 1 thread (scaling)");
}

/// `FDTABLE_CALLGRIND=<contender>:<pairs>`: set every contender up, then
/// run one contender's pairs alone (instruction counts need no timing).
/// `get_fdtable`, `get_sharded_slab` and `get_floor` run lookups (get +
/// guard drop) of `LIVE` entries in turn instead; `get_with_fdtable` and
/// `get_with_floor_xchg` the scoped lookups (`get_with`, and its floor: an
/// `xchg` announcement, a plain load, a plain Release clear).
fn callgrind(spec: &str) {
    let (name, pairs) = spec
        .split_once(':')
        .expect("FDTABLE_CALLGRIND=<contender>:<pairs>");
    let pairs: usize = pairs.parse().expect("a number of pairs");
    match name {
        "get_fdtable" => {
            let table = FdTable::new(fdtable_config(2));
            let fds: Vec<Fd> = (0..LIVE as u64)
                .map(|i| table.insert(Noop(i)).unwrap())
                .collect();
            for j in 0..pairs {
                black_box(&*table.get(black_box(fds[j % LIVE])).unwrap());
            }
            return;
        }
        // The set-up is written out in each arm: shared through a helper
        // (inlined or not), it changed the loops' code and their counts
        // (get 53 -> 61, get_with 70 -> 75-76, the floors 29 -> 35-36).
        "get_with_fdtable" => {
            let table = FdTable::new(fdtable_config(2));
            let fds: Vec<Fd> = (0..LIVE as u64)
                .map(|i| table.insert(Noop(i)).unwrap())
                .collect();
            for j in 0..pairs {
                black_box(table.get_with(black_box(fds[j % LIVE]), |v| v.0).unwrap());
            }
            return;
        }
        "get_with_floor_xchg" => {
            let mut floor = Floor::new(LIVE);
            let keys: Vec<(usize, u64)> =
                (0..LIVE as u64).map(|i| floor.insert(i).unwrap()).collect();
            let me = Announce::default();
            for j in 0..pairs {
                black_box(floor.get_announced(black_box(keys[j % LIVE]), &me).unwrap());
            }
            return;
        }
        "get_floor" => {
            let mut floor = Floor::new(LIVE);
            let keys: Vec<(usize, u64)> =
                (0..LIVE as u64).map(|i| floor.insert(i).unwrap()).collect();
            for j in 0..pairs {
                black_box(floor.get(black_box(keys[j % LIVE])).unwrap());
            }
            return;
        }
        "get_sharded_slab" => {
            let slab = sharded_slab::Slab::new();
            let keys: Vec<usize> = (0..LIVE as u64).map(|i| slab.insert(i).unwrap()).collect();
            for j in 0..pairs {
                black_box(&*slab.get(black_box(keys[j % LIVE])).unwrap());
            }
            return;
        }
        _ => {}
    }
    let mut c = pair_contenders();
    let k = c
        .names
        .iter()
        .position(|n| *n == name)
        .unwrap_or_else(|| panic!("contender {name}: one of {:?}", c.names));
    c.run[k](pairs);
}

/// `membarrier(2)` commands (linux/membarrier.h).
const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

fn membarrier(cmd: libc::c_long) -> libc::c_long {
    // SAFETY: membarrier takes (cmd, flags, cpu_id) and touches no memory.
    unsafe {
        libc::syscall(
            libc::SYS_membarrier,
            cmd,
            0 as libc::c_long,
            0 as libc::c_long,
        )
    }
}

/// `FDTABLE_MEMBARRIER=<rounds>`: what one process-wide barrier
/// (`membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`, the reclaiming side of
/// a lookup that announces with a plain store) costs, in fdtable
/// alloc+release pairs: per round one batch of barriers with no other
/// thread of the process running, one with a second thread spinning (so
/// the kernel must interrupt its CPU), and one batch of pairs. Wall time.
fn membarrier_cost(rounds: usize) {
    use std::sync::atomic::{AtomicBool, Ordering};
    const BARRIERS: usize = 200;
    const PAIRS: usize = 20_000;
    if membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0 {
        println!(
            "membarrier: not available ({})",
            std::io::Error::last_os_error()
        );
        return;
    }
    let table = FdTable::new(fdtable_config(2));
    for i in 0..LIVE as u64 {
        table.insert(Noop(i)).unwrap();
    }
    let barriers = |n: usize| {
        let start = Instant::now();
        for _ in 0..n {
            assert_eq!(membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), 0);
        }
        start.elapsed().as_nanos() as f64 / n as f64
    };
    let (mut alone, mut busy, mut pairs) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        alone.push(barriers(BARRIERS));
        let (running, stop) = (AtomicBool::new(false), AtomicBool::new(false));
        std::thread::scope(|s| {
            s.spawn(|| {
                running.store(true, Ordering::Release);
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            });
            while !running.load(Ordering::Acquire) {
                std::hint::spin_loop();
            }
            busy.push(barriers(BARRIERS));
            stop.store(true, Ordering::Relaxed);
        });
        let start = Instant::now();
        for _ in 0..PAIRS {
            let fd = table.insert(Noop(1)).unwrap();
            table.close(black_box(fd)).unwrap();
        }
        pairs.push(start.elapsed().as_nanos() as f64 / PAIRS as f64);
    }
    println!("membarrier: {rounds} rounds of {BARRIERS} barriers and {PAIRS} pairs, wall time");
    println!(
        "  alone     {:8.1} ns per barrier (median) = fdtable pairs: {}",
        quantile(alone.clone(), 0.5),
        ratio_spread(&alone, &pairs)
    );
    println!(
        "  2nd busy  {:8.1} ns per barrier (median) = fdtable pairs: {}",
        quantile(busy.clone(), 0.5),
        ratio_spread(&busy, &pairs)
    );
}

criterion_group!(wall, alloc_release_wall, lookup_wall, two_threads);
criterion_group! {
    name = cpu;
    config = Criterion::default().with_measurement(ThreadCpuTime);
    targets = alloc_release_cpu, lookup_cpu
}

fn main() {
    if let Ok(spec) = std::env::var("FDTABLE_CALLGRIND") {
        callgrind(&spec);
        return;
    }
    if let Some(rounds) = std::env::var("FDTABLE_MEMBARRIER")
        .ok()
        .and_then(|r| r.parse().ok())
    {
        membarrier_cost(rounds);
        return;
    }
    if let Some(rounds) = std::env::var("FDTABLE_INTERLEAVED")
        .ok()
        .and_then(|r| r.parse().ok())
    {
        interleaved(rounds);
        return;
    }
    benches::plot_font::register_or_exit();
    wall();
    cpu();
    Criterion::default().configure_from_args().final_summary();
}

//! filemanager micro-benchmarks, each side by side with the tokio::fs way of
//! doing the same thing, in one run:
//!
//! - `filemanager_read_4k`: 4 KiB reads at random 4 KiB-aligned offsets of a
//!   page-cached 64 MiB file: `uring_fixed` (io_uring, fixed-file slot),
//!   `blocking_nowait` (inline `preadv2(RWF_NOWAIT)`), `tokio_fs`
//!   (`tokio::fs::File` seek + read_exact), and `spawn_blocking_pread`
//!   (one blocking-pool hop per `pread`, the cheapest thing tokio offers).
//! - `filemanager_open_cached`: open + close of a path that is already open:
//!   `filemanager` (path cache hit) vs `tokio_fs_open` (`tokio::fs::File::open`).
//! - `filemanager_open_uncached`: a cache miss's work (safe `openat2` +
//!   `statx` + close) per backend: `uring`, `blocking`, vs `tokio_fs_open`.
//! - `filemanager_watch_queue_check`: the change watcher's look at its
//!   inotify queue, made on each of two threads at once as the daemon's two
//!   workers make it: `epoll_per_thread` (an empty wait on the thread's own
//!   epoll instance holding the inotify descriptor, what the watcher does)
//!   vs `fionread_shared` (`FIONREAD` on the one inotify descriptor).
//!
//! All run on a current-thread runtime (one per worker, as the daemon does);
//! each sample is one `block_on` of a loop, so runtime entry is not measured.

use std::io::SeekFrom;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion};
use filemanager::{BackendKind, Config, FileManager, Opened};
use tokio::io::{AsyncReadExt, AsyncSeekExt};

const FILE_SIZE: usize = 64 << 20;
const READ: usize = 4096;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

struct Offsets(u64);
impl Offsets {
    fn next(&mut self) -> u64 {
        // xorshift: cheap next offset, aligned to 4 KiB.
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % (FILE_SIZE / READ) as u64) * READ as u64
    }
}

fn setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..FILE_SIZE).map(|i| (i * 31 % 251) as u8).collect();
    std::fs::write(dir.path().join("big.bin"), &data).unwrap();
    std::fs::write(dir.path().join("small.txt"), b"hello").unwrap();
    // Read it once so every page is cached.
    let _ = std::fs::read(dir.path().join("big.bin")).unwrap();
    dir
}

fn manager(dir: &tempfile::TempDir, backend: BackendKind) -> Option<FileManager> {
    let mut cfg = Config::new(dir.path());
    cfg.backend = backend;
    cfg.shards = 1;
    match FileManager::new(cfg) {
        Ok(fm) => Some(fm),
        Err(e) => {
            eprintln!("skipping {backend}: {e}");
            None
        }
    }
}

fn bench_fm_read(
    c: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    fm: FileManager,
) {
    let rt = rt();
    let file = rt.block_on(async {
        match fm.open("big.bin").await.unwrap() {
            Opened::File(f) => f,
            other => panic!("{other:?}"),
        }
    });
    let mut offs = Offsets(0x1234_5678);
    c.bench_function(name, |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    let data = fm.read_at(&file, offs.next(), READ).await.unwrap();
                    assert_eq!(data.len(), READ);
                }
                start.elapsed()
            })
        })
    });
    eprintln!("{name}: backend stats {:?}", fm.stats().io);
}

fn read_4k(c: &mut Criterion) {
    let dir = setup();
    let mut g = c.benchmark_group("filemanager_read_4k");
    g.throughput(criterion::Throughput::Bytes(READ as u64));
    if let Some(fm) = manager(&dir, BackendKind::Uring) {
        bench_fm_read(&mut g, "uring_fixed", fm);
    }
    if let Some(fm) = manager(&dir, BackendKind::Blocking) {
        bench_fm_read(&mut g, "blocking_nowait", fm);
    }
    let rt = rt();
    let path = dir.path().join("big.bin");
    let mut file = rt.block_on(tokio::fs::File::open(&path)).unwrap();
    let mut offs = Offsets(0x1234_5678);
    let mut buf = vec![0u8; READ];
    g.bench_function("tokio_fs", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    file.seek(SeekFrom::Start(offs.next())).await.unwrap();
                    file.read_exact(&mut buf).await.unwrap();
                }
                start.elapsed()
            })
        })
    });
    let std_file = Arc::new(std::fs::File::open(&path).unwrap());
    g.bench_function("spawn_blocking_pread", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    let f = Arc::clone(&std_file);
                    let off = offs.next();
                    let v = tokio::task::spawn_blocking(move || {
                        let mut b = vec![0u8; READ];
                        f.read_exact_at(&mut b, off).map(|_| b)
                    })
                    .await
                    .unwrap()
                    .unwrap();
                    assert_eq!(v.len(), READ);
                }
                start.elapsed()
            })
        })
    });
    g.finish();
}

fn open_cached(c: &mut Criterion) {
    let dir = setup();
    let mut g = c.benchmark_group("filemanager_open_cached");
    let fm = manager(&dir, BackendKind::Auto).unwrap();
    eprintln!("open_cached backend: {:?}", fm.backend());
    let rt = rt();
    rt.block_on(async {
        let Opened::File(_f) = fm.open("small.txt").await.unwrap() else {
            panic!()
        };
    });
    g.bench_function("filemanager", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    match fm.open("small.txt").await.unwrap() {
                        Opened::File(f) => drop(std::hint::black_box(f)),
                        other => panic!("{other:?}"),
                    }
                }
                start.elapsed()
            })
        })
    });
    let path = dir.path().join("small.txt");
    g.bench_function("tokio_fs_open", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    let f = tokio::fs::File::open(&path).await.unwrap();
                    drop(std::hint::black_box(f));
                }
                start.elapsed()
            })
        })
    });
    g.finish();
}

fn open_uncached(c: &mut Criterion) {
    let dir = setup();
    let mut g = c.benchmark_group("filemanager_open_uncached");
    let rt = rt();
    for (name, kind) in [
        ("uring", BackendKind::Uring),
        ("blocking", BackendKind::Blocking),
    ] {
        let Some(fm) = manager(&dir, kind) else {
            continue;
        };
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        let h = fm.open_uncached("small.txt").await.unwrap();
                        h.close().await.unwrap();
                    }
                    start.elapsed()
                })
            })
        });
    }
    let path = dir.path().join("small.txt");
    g.bench_function("tokio_fs_open", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    let f = tokio::fs::File::open(&path).await.unwrap();
                    let _ = std::hint::black_box(f.metadata().await.unwrap().len());
                }
                start.elapsed()
            })
        })
    });
    g.finish();
}

/// One look at an inotify queue: FIONREAD on the shared descriptor, or an
/// empty wait on this thread's epoll instance `ep` that holds it.
fn queue_look(inotify: libc::c_int, ep: Option<libc::c_int>) -> bool {
    let mut queued: libc::c_int = 0;
    let mut ev = [libc::epoll_event { events: 0, u64: 0 }; 4];
    // SAFETY: plain syscalls on live descriptors, into stack buffers of
    // the sizes passed.
    unsafe {
        match ep {
            Some(ep) => libc::epoll_wait(ep, ev.as_mut_ptr(), 4, 0) == 0,
            None => libc::ioctl(inotify, libc::FIONREAD, &mut queued) == 0 && queued == 0,
        }
    }
}

/// An epoll instance of the calling thread's own, holding `inotify`.
fn epoll_holding(inotify: libc::c_int) -> libc::c_int {
    // SAFETY: plain syscalls; the event is read by the kernel for the call.
    unsafe {
        let ep = libc::epoll_create1(libc::EPOLL_CLOEXEC);
        assert!(ep >= 0);
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: 1,
        };
        assert_eq!(
            libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, inotify, &mut ev),
            0
        );
        ep
    }
}

fn watch_queue_check(c: &mut Criterion) {
    let dir = setup();
    // SAFETY: plain syscalls; the path is a live NUL-terminated string.
    let inotify = unsafe {
        let fd = libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC);
        assert!(fd >= 0);
        let path = std::ffi::CString::new(dir.path().as_os_str().as_encoded_bytes()).unwrap();
        assert!(libc::inotify_add_watch(fd, path.as_ptr(), libc::IN_MODIFY) >= 0);
        fd
    };
    let mut g = c.benchmark_group("filemanager_watch_queue_check");
    for (name, per_thread) in [("epoll_per_thread", true), ("fionread_shared", false)] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let stop = std::sync::atomic::AtomicBool::new(false);
                std::thread::scope(|s| {
                    // The other worker, looking all the while.
                    s.spawn(|| {
                        let ep = per_thread.then(|| epoll_holding(inotify));
                        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                            assert!(queue_look(inotify, ep));
                        }
                        // SAFETY: this thread's own descriptor, closed once.
                        ep.map(|ep| unsafe { libc::close(ep) });
                    });
                    let ep = per_thread.then(|| epoll_holding(inotify));
                    let start = Instant::now();
                    for _ in 0..iters {
                        assert!(queue_look(inotify, ep));
                    }
                    let took = start.elapsed();
                    stop.store(true, std::sync::atomic::Ordering::Relaxed);
                    // SAFETY: as above.
                    ep.map(|ep| unsafe { libc::close(ep) });
                    took
                })
            })
        });
    }
    g.finish();
    // SAFETY: the descriptor made above, closed once.
    unsafe { libc::close(inotify) };
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(2)).warm_up_time(Duration::from_millis(500));
    targets = read_4k, open_cached, open_uncached, watch_queue_check
}
fn main() {
    benches::plot_font::register_or_exit();
    benches();
    Criterion::default().configure_from_args().final_summary();
}

//! Process layout: N worker threads, each a tokio current-thread runtime with
//! its own SO_REUSEPORT listener; the main thread runs signals, reload and the
//! admin listener.
//!
//! ```text
//! main thread (current-thread rt): SIGTERM/SIGINT/SIGHUP, admin :8081, upkeep,
//!   |                                  WATCHDOG=1 while every heartbeat advances
//!   |  watch<bool> shutdown            RwLock<Arc<Live>> + generation (reload)
//!   v                                   v (one relaxed load per request)
//! worker i thread (current-thread rt + LocalSet)
//!   listener i (SO_REUSEPORT) -> accept -> spawn_local(conn::serve)
//!   WorkerStats i (single writer: counters, duration buckets)
//!   heartbeat i += 1 every WATCHDOG_USEC/8 (only under a systemd watchdog)
//! ```

use crate::acme::challenge::Challenges;
use crate::config::{Settings, Sources};
use crate::files::Files;
use crate::state::{make_live, ConnContext, Live, Shared, Worker};
use crate::stats::WorkerStats;
use crate::wire::Wire;
use sd_notify::NotifyState;
use std::cell::Cell;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// A URL a terminal shows as a link for the HTTP listener: an unspecified
/// address (every interface) is reached through loopback.
fn browsable_url(addr: SocketAddr) -> String {
    let ip = match addr.ip() {
        std::net::IpAddr::V4(v4) if v4.is_unspecified() => std::net::Ipv4Addr::LOCALHOST.into(),
        std::net::IpAddr::V6(v6) if v6.is_unspecified() => std::net::Ipv6Addr::LOCALHOST.into(),
        ip => ip,
    };
    format!("http://{}/", SocketAddr::new(ip, addr.port()))
}

/// Creates a non-blocking listener for one worker. Every worker's socket
/// carries SO_REUSEPORT (the kernel spreads connections over them), but the
/// first one (`claim`) is bound before the option is set: that bind is
/// exclusive, so it fails with `EADDRINUSE` while any other socket, another
/// fileserver's SO_REUSEPORT group included, holds the address. Setting the
/// option between bind and listen lets the other workers join the group.
/// The claim is the socket itself: the kernel drops it when the process
/// ends, crash or not, so there is no lock file to go stale, and a restart
/// binds as soon as the old process closed its listeners (SO_REUSEADDR
/// covers its connections still in TIME_WAIT).
fn bind_worker_socket(addr: SocketAddr, claim: bool) -> std::io::Result<std::net::TcpListener> {
    let fd = bind_reuseport(addr, claim, rustix::net::SocketType::STREAM)?;
    rustix::net::listen(&fd, 4096)?;
    Ok(std::net::TcpListener::from(fd))
}

/// A non-blocking socket of `kind` bound to `addr` with SO_REUSEPORT; the
/// first (`claim`) binds before it allows sharing, so a port another
/// process holds is an error, not a silent share.
fn bind_reuseport(
    addr: SocketAddr,
    claim: bool,
    kind: rustix::net::SocketType,
) -> std::io::Result<std::os::fd::OwnedFd> {
    use rustix::net::{sockopt, AddressFamily, SocketFlags};
    let family = if addr.is_ipv4() {
        AddressFamily::INET
    } else {
        AddressFamily::INET6
    };
    let fd = rustix::net::socket_with(
        family,
        kind,
        SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
        None,
    )?;
    sockopt::set_socket_reuseaddr(&fd, true)?;
    if !claim {
        sockopt::set_socket_reuseport(&fd, true)?;
    }
    rustix::net::bind(&fd, &addr)?;
    if claim {
        sockopt::set_socket_reuseport(&fd, true)?;
    }
    Ok(fd)
}

/// One UDP socket per worker on `addr` (HTTP/3 beside the HTTPS listener).
fn reuseport_udp(addr: SocketAddr, workers: usize) -> std::io::Result<Vec<std::net::UdpSocket>> {
    (0..workers)
        .map(|i| bind_reuseport(addr, i == 0, rustix::net::SocketType::DGRAM).map(Into::into))
        .collect()
}

/// An address that could not be bound, the key that named it, and why.
type BindError = (SocketAddr, &'static str, std::io::Error);

/// What [`https_sockets`] bound: the HTTPS listeners, their address (the
/// port picked, on port 0) and, with HTTP/3, the UDP sockets on it.
struct HttpsSockets<T, U> {
    tcp: Vec<T>,
    addr: SocketAddr,
    udp: Option<Vec<U>>,
}

/// Starts on port 0 that try again when the UDP twin of the kernel's TCP
/// port is taken.
const PORT_0_TRIES: usize = 8;

/// The HTTPS listeners and, with HTTP/3, the UDP sockets on their port.
/// On port 0 the kernel picks a TCP port whose UDP twin another process
/// may hold (any UDP client's ephemeral port): then the TCP listeners are
/// dropped and another port is tried, so a start on port 0 never fails
/// on a collision that choosing the port avoids. A configured port that
/// is taken fails at once. The error names the address and its key.
fn https_sockets<T, U>(
    listen: SocketAddr,
    http3: bool,
    bind_tcp: impl Fn(SocketAddr) -> std::io::Result<(Vec<T>, SocketAddr)>,
    bind_udp: impl Fn(SocketAddr) -> std::io::Result<Vec<U>>,
) -> Result<HttpsSockets<T, U>, BindError> {
    let mut tries = if listen.port() == 0 { PORT_0_TRIES } else { 1 };
    loop {
        let (tcp, addr) = bind_tcp(listen).map_err(|e| (listen, "tls_listen", e))?;
        if !http3 {
            return Ok(HttpsSockets {
                tcp,
                addr,
                udp: None,
            });
        }
        tries -= 1;
        match bind_udp(addr) {
            Ok(udp) => {
                return Ok(HttpsSockets {
                    tcp,
                    addr,
                    udp: Some(udp),
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && tries > 0 => {
                tracing::debug!(%addr, "UDP twin of the picked HTTPS port is taken; picking another");
            }
            Err(e) => return Err((addr, "tls_listen (UDP, for [http3])", e)),
        }
    }
}

/// Listeners for the workers: systemd's socket (dup'ed per worker) or one
/// SO_REUSEPORT socket per worker (port 0 resolved by the first); none
/// when `listen` names only Unix domain sockets.
fn worker_listeners(
    s: &Settings,
    activated: Option<std::os::fd::OwnedFd>,
) -> std::io::Result<Option<(Vec<std::net::TcpListener>, SocketAddr)>> {
    let mut out = Vec::with_capacity(s.workers);
    if let Some(fd) = activated {
        let l = std::net::TcpListener::from(fd);
        l.set_nonblocking(true)?;
        let addr = l.local_addr()?;
        for _ in 1..s.workers {
            out.push(l.try_clone()?);
        }
        out.push(l);
        return Ok(Some((out, addr)));
    }
    s.listen
        .map(|a| reuseport_listeners(a, s.workers))
        .transpose()
}

/// One SO_REUSEPORT listener per worker (port 0 resolved by the first,
/// which also claims the address: see [`bind_worker_socket`]).
fn reuseport_listeners(
    addr: SocketAddr,
    workers: usize,
) -> std::io::Result<(Vec<std::net::TcpListener>, SocketAddr)> {
    let first = bind_worker_socket(addr, true)?;
    let addr = first.local_addr()?;
    let mut out = vec![first];
    for _ in 1..workers {
        out.push(bind_worker_socket(addr, false)?);
    }
    Ok((out, addr))
}

/// The one line a listener that cannot bind stops the start with: the
/// address, its key, and for an address in use what to do about it.
pub(crate) fn listen_error(addr: SocketAddr, key: &str, how: &str, e: &std::io::Error) -> String {
    if e.kind() == std::io::ErrorKind::AddrInUse {
        format!(
            "cannot listen on {addr} ({key}): the address is in use by another process \
             (another fileserver?); stop it or choose another address with {how}"
        )
    } else {
        format!("cannot listen on {addr} ({key}): {e}")
    }
}

/// The line a Unix socket that cannot be made stops the start with.
fn unix_listen_error(path: &std::path::Path, e: &std::io::Error) -> String {
    let path = path.display();
    if e.kind() == std::io::ErrorKind::AddrInUse {
        format!(
            "cannot listen on unix:{path} (listen): a running process accepts on it \
             (another fileserver?); stop it or choose another path"
        )
    } else {
        format!("cannot listen on unix:{path} (listen): {e}")
    }
}

/// Applies a new log filter (tracing reload handle).
pub(crate) type SetLogLevel = Box<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

/// Everything the binary needs to run, after configuration succeeded.
pub(crate) struct RunArgs {
    /// Validated settings.
    pub settings: Settings,
    /// The configuration they were made from: a reload gives its restart
    /// keys back the values they have here.
    pub config: crate::config::Config,
    /// Where they came from (re-read at SIGHUP).
    pub sources: Sources,
    /// Sockets from systemd (by `FileDescriptorName=`), if any.
    pub activated: crate::sysd::Activated,
    /// Sockets from the process this one upgrades (SIGUSR2), or why they
    /// could not be taken.
    pub inherited: Result<crate::upgrade::Inherited, String>,
    /// systemd's watchdog period (`WATCHDOG_USEC`), if any.
    pub watchdog: Option<Duration>,
    /// Changes the log filter at reload.
    pub set_log_level: SetLogLevel,
}

impl std::fmt::Debug for RunArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunArgs")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// Runs the daemon until SIGTERM/SIGINT; returns the process exit code.
///
/// ```text
///   certificates -> bind -> share -> runtime + signals -> spawn workers
///   -> announce (start line, READY) -> main loop (SIGHUP, watchdog)
///   -> drain -> join workers and loggers
/// ```
pub(crate) fn run(args: RunArgs) -> anyhow::Result<i32> {
    let mut inherited = args
        .inherited
        .map_err(|e| anyhow::anyhow!("upgrade: {e}"))?;
    let mut s = args.settings.clone();
    if inherited.is_upgrade() && inherited.workers() != s.workers {
        tracing::warn!(
            "upgrade: {} workers, one per set of sockets handed over (workers = {} takes effect at a restart)",
            inherited.workers(),
            s.workers
        );
        s.workers = inherited.workers();
    }
    // Before the file layer starts (and logs), certificates and then the
    // listeners: a bad pair, or an address in use, is one line.
    let (acme, tls) = certificates(&s)?;
    let mut bound = bind(&s, args.activated, &mut inherited)?;
    bound.handoff.watchdog = args.watchdog;
    let files = Files::new(&s)?; // The error names the root.
    let shared = share(
        &s,
        files,
        tls,
        acme.as_ref().map(|(_, c)| c.clone()),
        &bound,
        args.watchdog,
        inherited.predecessor_gone(),
    )?;
    let handle = crate::admin::install_recorder()?;
    let offload = bound.tls_addr.map(|_| crate::tls::offload_reason());
    if let Some(reason) = offload {
        crate::tls::describe();
        crate::h2conn::describe();
        if s.http3.is_some() {
            crate::h3conn::describe();
        }
        metrics::gauge!("fileserver_tls_offload_info", "mode" => "userspace", "reason" => reason)
            .set(1.0);
    }
    bound.admin.set_nonblocking(true)?;
    // Built before the workers report ready, so its descriptors (signal
    // driver, epoll) exist before the start line too.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // Handled from here on, before any connection is accepted: a SIGTERM
    // that came after the start line but before the main loop ran used to
    // end the process at once (the default action), cutting the responses
    // in flight instead of draining them.
    let signals = {
        let _rt = rt.enter();
        Signals::install().map_err(|e| anyhow::anyhow!("cannot install signal handlers: {e}"))?
    };
    // Certificates ACME keeps are installed before the first handshake
    // and renewed on this thread's runtime.
    if let (Some(a), Some((store, challenges)), Some(certs)) = (&s.acme, acme, &shared.tls) {
        crate::acme::describe();
        crate::acme::spawn(a, store, challenges, certs.clone(), rt.handle());
    }
    let addrs = bound.addrs(offload)?;
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let threads = spawn_workers(&shared, bound.workers, shutdown_rx)?;
    shared.serving.store(true, Relaxed);
    announce(&s, &shared, &addrs);
    inherited.ready();
    let (code, upgraded) = rt.block_on(main_loop(MainLoop {
        shared: shared.clone(),
        sources: args.sources,
        set_log_level: args.set_log_level,
        admin: bound.admin,
        handle,
        shutdown_tx,
        signals,
        started: args.config,
        handoff: bound.handoff,
    }));
    // Workers honour shutdown_timeout themselves.
    for t in threads {
        let _ = t.join();
    }
    // A successor accepts on them now.
    if !upgraded {
        bound
            .unix_files
            .iter()
            .for_each(crate::unix_socket::SocketFile::remove);
    }
    join_loggers(&shared);
    Ok(code)
}

/// What `[acme]` keeps: the certificates' store and the challenge answers.
type Acme = (crate::acme::store::Store, Arc<Challenges>);

/// ACME's store and challenge answers, and the HTTPS listener's
/// certificates (with ACME's beside `tls_cert`).
fn certificates(s: &Settings) -> anyhow::Result<(Option<Acme>, Option<Arc<crate::tls::Certs>>)> {
    let acme = match &s.acme {
        Some(a) => Some(crate::acme::prepare(a).map_err(anyhow::Error::msg)?),
        None => None,
    };
    let tls = match &s.tls {
        Some(t) => Some(Arc::new(
            crate::tls::Certs::load(
                t,
                acme.as_ref()
                    .map(|(_, c)| c.clone() as Arc<dyn crate::tls::AlpnChallenges>),
            )
            .map_err(anyhow::Error::msg)?,
        )),
        None => None,
    };
    Ok((acme, tls))
}

/// Every socket of the process, bound before anything else starts.
struct Bound {
    /// Each worker's listeners.
    workers: Vec<WorkerListeners>,
    /// The first TCP address of `listen`, if it names one.
    http_addr: Option<SocketAddr>,
    /// The Unix socket files this process made, removed at exit.
    unix_files: Vec<crate::unix_socket::SocketFile>,
    /// `listen`'s other addresses, as bound (a port 0 resolved).
    http_more: Vec<SocketAddr>,
    tls_addr: Option<SocketAddr>,
    /// `tls_listen`'s other addresses, as bound.
    tls_more: Vec<SocketAddr>,
    admin: std::net::TcpListener,
    /// Duplicates of all of them, for a successor (SIGUSR2).
    handoff: crate::upgrade::Handoff,
}

/// Binds the HTTP, HTTPS (TCP and QUIC) and admin listeners, or takes
/// the ones a predecessor handed over (SIGUSR2) or systemd's; and keeps a
/// duplicate of each for a successor.
fn bind(
    s: &Settings,
    activated: crate::sysd::Activated,
    inherited: &mut crate::upgrade::Inherited,
) -> anyhow::Result<Bound> {
    use crate::upgrade::{ADMIN, HTTP};
    let listen_failed = |addr, e: std::io::Error| {
        anyhow::anyhow!(listen_error(addr, "listen", "-p PORT or --listen ADDR", &e))
    };
    let (listeners, http_addr) = match taken(inherited.take(HTTP))? {
        Some(l) => {
            let addr = l[0].local_addr()?;
            (l.into_iter().map(Some).collect::<Vec<_>>(), Some(addr))
        }
        None => match worker_listeners(s, activated.http) {
            Ok(Some((l, addr))) => (l.into_iter().map(Some).collect(), Some(addr)),
            Ok(None) => ((0..s.workers).map(|_| None).collect(), None),
            Err(e) => return Err(listen_failed(s.listen.unwrap_or(s.admin_listen), e)),
        },
    };
    let (unix, unix_files) = bind_unix(s, inherited)?;
    let (tls_listeners, quic_sockets, tls_bound) = bind_tls(s, inherited)?;
    let tls_addr = tls_bound.first().copied();
    let tls_more = tls_bound.get(1..).unwrap_or_default().to_vec();
    // A socket named `admin` from systemd replaces admin_listen, as the
    // `http` one replaces listen.
    let admin = match (inherited.take(ADMIN).pop(), activated.admin) {
        (Some(fd), _) | (None, Some(fd)) => std::net::TcpListener::from(fd),
        (None, None) => std::net::TcpListener::bind(s.admin_listen).map_err(|e| {
            anyhow::anyhow!(listen_error(
                s.admin_listen,
                "admin_listen, for /metrics and health",
                "--admin-listen ADDR (127.0.0.1:0 takes any free port)",
                &e
            ))
        })?,
    };
    // `listen`'s other addresses: one SO_REUSEPORT socket per worker each.
    let mut more: Vec<Vec<std::net::TcpListener>> = (0..s.workers).map(|_| Vec::new()).collect();
    let mut http_more = Vec::new();
    for (k, &a) in s.listen_more.iter().enumerate() {
        let (sockets, bound) = match taken(inherited.take(&crate::upgrade::http_more(k + 1)))? {
            Some(l) => {
                let addr = l[0].local_addr()?;
                (l, addr)
            }
            None => reuseport_listeners(a, s.workers).map_err(|e| listen_failed(a, e))?,
        };
        http_more.push(bound);
        for (w, l) in more.iter_mut().zip(sockets) {
            w.push(l);
        }
    }
    let left = inherited.left();
    if !left.is_empty() {
        tracing::warn!(
            "upgrade: closing the sockets handed over that this configuration does not use: {}",
            left.join(", ")
        );
    }
    let workers: Vec<WorkerListeners> = listeners
        .into_iter()
        .zip(more)
        .zip(unix)
        .zip(tls_listeners)
        .zip(quic_sockets)
        .map(|((((plain, more), unix), tls), quic)| WorkerListeners {
            plain,
            more,
            unix,
            tls,
            quic,
        })
        .collect();
    let handoff = handoff_of(&workers, &admin)?;
    Ok(Bound {
        http_more,
        tls_more,
        unix_files,
        workers,
        http_addr,
        tls_addr,
        admin,
        handoff,
    })
}

/// Per worker, its sockets of one kind (one per address).
type PerWorker<T> = Vec<Vec<T>>;

/// Listeners a predecessor handed over under one name, non-blocking;
/// `None` when it handed none.
fn taken(fds: Vec<std::os::fd::OwnedFd>) -> std::io::Result<Option<Vec<std::net::TcpListener>>> {
    if fds.is_empty() {
        return Ok(None);
    }
    let out: Vec<std::net::TcpListener> = fds.into_iter().map(Into::into).collect();
    out.iter().try_for_each(|l| l.set_nonblocking(true))?;
    Ok(Some(out))
}

/// `listen`'s Unix domain sockets (one each, shared by the workers), and
/// the files to remove at exit.
fn bind_unix(
    s: &Settings,
    inherited: &mut crate::upgrade::Inherited,
) -> anyhow::Result<(
    PerWorker<std::os::unix::net::UnixListener>,
    Vec<crate::unix_socket::SocketFile>,
)> {
    let mut unix: PerWorker<std::os::unix::net::UnixListener> =
        (0..s.workers).map(|_| Vec::new()).collect();
    let mut unix_files = Vec::new();
    for (k, path) in s.listen_unix.paths.iter().enumerate() {
        let handed = inherited.take(&crate::upgrade::unix(k + 1));
        let sockets: Vec<std::os::unix::net::UnixListener> = if handed.is_empty() {
            let (l, f) = crate::unix_socket::bind(path, &s.listen_unix)
                .map_err(|e| anyhow::anyhow!(unix_listen_error(path, &e)))?;
            unix_files.push(f);
            let mut all = (1..s.workers)
                .map(|_| l.try_clone())
                .collect::<std::io::Result<Vec<_>>>()?;
            all.push(l);
            all
        } else {
            let handed: Vec<std::os::unix::net::UnixListener> =
                handed.into_iter().map(Into::into).collect();
            unix_files.extend(crate::unix_socket::SocketFile::of(&handed[0]));
            handed
        };
        for (w, l) in unix.iter_mut().zip(sockets) {
            l.set_nonblocking(true)?;
            w.push(l);
        }
    }
    Ok((unix, unix_files))
}

/// `tls_listen`'s addresses, each with its HTTP/3 twin: per worker its
/// TCP and UDP sockets, and the addresses as bound.
fn bind_tls(
    s: &Settings,
    inherited: &mut crate::upgrade::Inherited,
) -> anyhow::Result<(
    PerWorker<std::net::TcpListener>,
    PerWorker<std::net::UdpSocket>,
    Vec<SocketAddr>,
)> {
    use crate::upgrade::{HTTPS, QUIC};
    let tls_addrs: Vec<SocketAddr> = s
        .tls
        .iter()
        .flat_map(|t| std::iter::once(t.listen).chain(t.listen_more.iter().copied()))
        .collect();
    let mut tls_listeners: PerWorker<std::net::TcpListener> =
        (0..s.workers).map(|_| Vec::new()).collect();
    let mut quic_sockets: PerWorker<std::net::UdpSocket> =
        (0..s.workers).map(|_| Vec::new()).collect();
    let mut tls_bound = Vec::new();
    for (k, &listen) in tls_addrs.iter().enumerate() {
        let handed_tcp = taken(inherited.take(&crate::upgrade::numbered(HTTPS, k)))?;
        let handed_udp: Vec<std::net::UdpSocket> = inherited
            .take(&crate::upgrade::numbered(QUIC, k))
            .into_iter()
            .map(Into::into)
            .collect();
        let h = match handed_tcp {
            Some(tcp) => {
                let addr = tcp[0].local_addr()?;
                let udp = s.http3.as_ref().map(|_| handed_udp);
                HttpsSockets { tcp, addr, udp }
            }
            None => https_sockets(
                listen,
                s.http3.is_some(),
                |a| reuseport_listeners(a, s.workers),
                |a| reuseport_udp(a, s.workers),
            )
            .map_err(|(addr, key, e)| {
                anyhow::anyhow!(listen_error(addr, key, "--tls-listen ADDR", &e))
            })?,
        };
        tls_bound.push(h.addr);
        for (w, l) in tls_listeners.iter_mut().zip(h.tcp) {
            w.push(l);
        }
        for (w, u) in quic_sockets.iter_mut().zip(h.udp.into_iter().flatten()) {
            w.push(u);
        }
    }
    Ok((tls_listeners, quic_sockets, tls_bound))
}

/// Duplicates of every listener, named, for a successor (SIGUSR2).
fn handoff_of(
    workers: &[WorkerListeners],
    admin: &std::net::TcpListener,
) -> std::io::Result<crate::upgrade::Handoff> {
    use crate::upgrade::{ADMIN, HTTP, HTTPS, QUIC};
    let mut handoff = crate::upgrade::Handoff::new()?;
    for w in workers {
        for (k, l) in w.tls.iter().enumerate() {
            handoff.add(&crate::upgrade::numbered(HTTPS, k), l.as_fd())?;
        }
        for (k, u) in w.quic.iter().enumerate() {
            handoff.add(&crate::upgrade::numbered(QUIC, k), u.as_fd())?;
        }
        if let Some(l) = &w.plain {
            handoff.add(HTTP, l.as_fd())?;
        }
        for (k, l) in w.more.iter().enumerate() {
            handoff.add(&crate::upgrade::http_more(k + 1), l.as_fd())?;
        }
        for (k, l) in w.unix.iter().enumerate() {
            handoff.add(&crate::upgrade::unix(k + 1), l.as_fd())?;
        }
    }
    handoff.add(ADMIN, admin.as_fd())?;
    Ok(handoff)
}

impl Bound {
    /// The addresses the start line names.
    fn addrs(&self, offload: Option<&'static str>) -> anyhow::Result<Addrs> {
        let admin = self
            .admin
            .local_addr()
            .map_err(|e| anyhow::anyhow!("admin listener: {e}"))?;
        Ok(Addrs {
            http: self.http_addr,
            http_more: self.http_more.clone(),
            tls: self.tls_addr,
            tls_more: self.tls_more.clone(),
            admin,
            offload,
        })
    }
}

/// What the workers share: the file managers, the certificates, the
/// live settings, the counters.
fn share(
    s: &Settings,
    files: Files,
    tls: Option<Arc<crate::tls::Certs>>,
    acme: Option<Arc<Challenges>>,
    bound: &Bound,
    watchdog: Option<Duration>,
    predecessor_gone: watch::Receiver<bool>,
) -> anyhow::Result<Arc<Shared>> {
    let alt_svc = match (&s.http3, bound.tls_addr) {
        (Some(h), Some(addr)) => http::HeaderValue::from_str(&format!(
            "h3=\":{}\"; ma={}",
            addr.port(),
            h.alt_svc_max_age.as_secs()
        ))
        .ok(),
        _ => None,
    };
    let dropped = Arc::new(AtomicU64::new(0));
    let (live, log_thread) = make_live(s, &dropped)?;
    Ok(Arc::new(Shared {
        files,
        tls,
        acme,
        alt_svc,
        live: RwLock::new(Arc::new(live)),
        generation: AtomicU64::new(0),
        worker_stats: (0..s.workers)
            .map(|_| Arc::new(WorkerStats::new(s.sites.len() + 1)))
            .collect(),
        open_conns: AtomicUsize::new(0),
        active_conns: AtomicUsize::new(0),
        quic_handshakes: AtomicUsize::new(0),
        client_conns: Default::default(),
        serving: AtomicBool::new(false),
        access_dropped: dropped,
        log_threads: Mutex::new(log_thread.into_iter().collect()),
        heartbeats: (0..s.workers).map(|_| AtomicU64::new(0)).collect(),
        watchdog,
        h2_send_budget: Arc::new(tokio::sync::Semaphore::new(s.http2.send_budget as usize)),
        predecessor_gone,
    }))
}

/// One thread per worker, each with its listeners. Returns once every
/// worker has its runtime and I/O state (rings, eventfds), so the start
/// line, READY=1 and /readyz mean "every worker can serve", and a
/// supervisor or test that acts on them sees the daemon's steady set of
/// descriptors. A worker that failed to start drops its sender instead.
fn spawn_workers(
    shared: &Arc<Shared>,
    listeners: Vec<WorkerListeners>,
    shutdown: watch::Receiver<bool>,
) -> std::io::Result<Vec<std::thread::JoinHandle<()>>> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    let mut threads = Vec::new();
    for (i, listeners) in listeners.into_iter().enumerate() {
        let (shared, rx, ready) = (shared.clone(), shutdown.clone(), ready_tx.clone());
        threads.push(
            std::thread::Builder::new()
                .name(format!("worker-{i}"))
                .spawn(move || worker_main(i, shared, listeners, rx, ready))?,
        );
    }
    drop(ready_tx);
    let workers_ready = (0..threads.len())
        .take_while(|_| ready_rx.recv_timeout(Duration::from_secs(30)).is_ok())
        .count();
    if workers_ready < threads.len() {
        tracing::warn!(
            ready = workers_ready,
            workers = threads.len(),
            "not every worker started"
        );
    }
    Ok(threads)
}

/// The addresses a start names.
struct Addrs {
    http: Option<SocketAddr>,
    http_more: Vec<SocketAddr>,
    tls: Option<SocketAddr>,
    tls_more: Vec<SocketAddr>,
    admin: SocketAddr,
    /// Why TLS runs in userspace (with `tls`).
    offload: Option<&'static str>,
}

/// The start line on stderr (one JSON object with `log_format = json`),
/// then a line per rule and per site, and what a start should warn of.
fn announce(s: &Settings, shared: &Shared, a: &Addrs) {
    let root = std::fs::canonicalize(&s.root).unwrap_or_else(|_| s.root.clone());
    let (backend, why) = shared.files.backend();
    let (backend, why) = (backend.as_str(), why.as_str());
    let fd_limit = shared.files.fd_limit();
    let (http_addr, admin_addr, tls_addr, offload) = (a.http, a.admin, a.tls, a.offload);
    // Every HTTP address, the first (the one clients and tests read) first.
    let http_all = http_addr
        .into_iter()
        .chain(a.http_more.iter().copied())
        .map(|a| a.to_string())
        .chain(
            s.listen_unix
                .paths
                .iter()
                .map(|p| format!("unix:{}", p.display())),
        )
        .collect::<Vec<_>>();
    let tls_all = tls_addr
        .into_iter()
        .chain(a.tls_more.iter().copied())
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let tls_part = match (tls_addr, offload) {
        (Some(addr), Some(reason)) => {
            tracing::debug!(%addr, reason, "HTTPS (h2, http/1.1) with userspace TLS (rustls)");
            let h3 = if s.http3.is_some() {
                format!(" http3={tls_all}")
            } else {
                String::new()
            };
            format!(" https={tls_all}{h3} tls=userspace tls_offload_off={reason}")
        }
        _ => String::new(),
    };
    // The start line below says all of this: at the default level it is
    // the one line a start prints, unless io_uring was wanted and refused.
    tracing::debug!(http = %http_all.join(","), %admin_addr, root = %root.display(), workers = s.workers, backend, why, fd_limit, "starting");
    if why.contains("unavailable") {
        tracing::warn!(reason = why, "serving with the {backend} backend");
    }
    // A Unix socket has no URL a browser opens: its path stands there.
    let url = http_addr.map_or_else(|| http_all[0].clone(), browsable_url);
    // On stderr, beside the log: stdout may carry the access log. With
    // log_format = json it is one JSON object too, shaped like the log's
    // events, so every stderr line parses.
    {
        use std::io::Write;
        let line = match s.log_format {
            crate::config::LogFormat::Text => format!(
                "listening http={}{tls_part} admin={admin_addr} workers={} backend={backend} fd_limit={fd_limit} rules={} url={url} root={}",
                http_all.join(","),
                s.workers,
                s.serve.rules.len(),
                root.display()
            ),
            crate::config::LogFormat::Json => serde_json::json!({
                "timestamp": humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string(),
                "level": "INFO",
                "fields": {
                    "message": "listening",
                    "http": &http_all[0],
                    "http_more": &http_all[1..],
                    "https": tls_addr.map(|a| a.to_string()),
                    "https_more": a.tls_more.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
                    "http3": tls_addr.filter(|_| s.http3.is_some()).map(|a| a.to_string()),
                    "tls_offload_off": offload,
                    "admin": admin_addr.to_string(),
                    "workers": s.workers,
                    "rules": s.serve.rules.len(),
                    "backend": backend,
                    "fd_limit": fd_limit,
                    "url": url,
                    "root": root.display().to_string(),
                },
            })
            .to_string(),
        };
        let mut out = std::io::stderr().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
    for (i, rule) in s.serve.rules.describe().iter().enumerate() {
        tracing::info!("rule {}: {rule}", i + 1);
    }
    if s.spa && !s.root.join("index.html").is_file() {
        // Every deep link would be a 404: the usual cause is the wrong
        // directory (the project, not its build output).
        tracing::warn!(
            "spa: {} has no index.html, so the app's paths get 404 (serve the build output, e.g. dist/)",
            s.root.display()
        );
    }
    for (i, site) in s.sites.iter().enumerate() {
        let hosts: Vec<String> = site
            .hosts
            .iter()
            .map(|h| match h {
                siterules::HostPattern::Exact(n) => n.clone(),
                siterules::HostPattern::Wildcard(suffix) => format!("*{suffix}"),
            })
            .collect();
        tracing::info!(
            "site {}: {} root={} rules={}",
            i + 1,
            hosts.join(","),
            site.root.display(),
            site.serve.rules.len()
        );
    }
}

/// Drops the access loggers so their threads drain, and waits for them.
fn join_loggers(shared: &Shared) {
    let (last, _) = shared.live();
    shared.set_live(Live {
        s: last.s.clone(),
        access: None,
    });
    drop(last);
    let handles: Vec<_> =
        std::mem::take(&mut *shared.log_threads.lock().unwrap_or_else(|e| e.into_inner()));
    for h in handles {
        let _ = h.join();
    }
}

/// The signals the main loop acts on: SIGTERM and SIGINT (drain and
/// stop), SIGHUP (reload), SIGUSR2 (upgrade: a new process takes the
/// listeners, then this one drains and stops).
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    usr2: tokio::signal::unix::Signal,
}

impl Signals {
    /// Replaces the signals' default actions; inside a runtime context.
    fn install() -> std::io::Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
            usr2: signal(SignalKind::user_defined2())?,
        })
    }
}

/// What the main loop runs with.
struct MainLoop {
    shared: Arc<Shared>,
    /// Re-read at SIGHUP.
    sources: Sources,
    set_log_level: SetLogLevel,
    admin: std::net::TcpListener,
    handle: metrics_exporter_prometheus::PrometheusHandle,
    shutdown_tx: watch::Sender<bool>,
    signals: Signals,
    /// The configuration at start (a reload keeps its restart keys).
    started: crate::config::Config,
    /// The listeners, for a successor (SIGUSR2).
    handoff: crate::upgrade::Handoff,
}

/// Serves the admin listener and waits for signals: SIGHUP reloads,
/// SIGTERM/SIGINT drain (within `shutdown_timeout`) and return the exit
/// code; pings the watchdog while every worker progresses.
async fn main_loop(m: MainLoop) -> (i32, bool) {
    let MainLoop {
        shared,
        sources,
        set_log_level,
        admin,
        handle,
        shutdown_tx,
        signals,
        started,
        handoff,
    } = m;
    let Signals {
        mut term,
        mut int,
        mut hup,
        mut usr2,
    } = signals;
    let mut handoff = Some(Arc::new(handoff));
    let mut upgraded = false;
    let admin = match tokio::net::TcpListener::from_std(admin) {
        Ok(a) => a,
        Err(e) => {
            tracing::error!("admin listener: {e}");
            return (1, false);
        }
    };
    let admin_task = tokio::spawn(crate::admin::serve(admin, shared.clone(), handle.clone()));
    let upkeep = {
        let (handle, certs) = (handle.clone(), shared.tls.clone());
        tokio::spawn(async move {
            let mut t = tokio::time::interval(Duration::from_secs(5));
            loop {
                t.tick().await;
                handle.run_upkeep();
                // A rotation another host wrote (or a mounted Secret).
                if let Some(c) = &certs {
                    c.refresh_ticket_keys();
                }
            }
        })
    };
    crate::sysd::notify(&[NotifyState::Ready]);
    // Checked every WATCHDOG_USEC/2, as sd_watchdog_enabled(3) advises; the
    // first check comes one period in, after every worker's first beat.
    let mut watchdog = shared.watchdog.map(|usec| {
        let every = usec / 2;
        let mut t = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        t
    });
    let mut gate = crate::sysd::WatchdogGate::new(&shared.heartbeat_values());
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = hup.recv() => {
                // Type=notify-reload: RELOADING=1 + MONOTONIC_USEC before,
                // READY=1 after, whether the new config was taken or not.
                crate::sysd::notify_reloading();
                let status = match reload(&shared, &sources, &*set_log_level, &started) {
                    Ok(()) => "configuration reloaded".to_string(),
                    Err(e) => format!("reload rejected, running config kept: {e}"),
                };
                crate::sysd::notify(&[NotifyState::Ready, NotifyState::Status(&status)]);
            }
            _ = tick(&mut watchdog) => watchdog_check(&shared, &mut gate, shared.watchdog),
            _ = usr2.recv() => {
                let Some(h) = &handoff else { continue };
                if let Some(held) = start_successor(h.clone()).await {
                    // Closed when this process exits: the successor's
                    // HTTP/3 then starts reading.
                    std::mem::forget(held);
                    // The successor answers health checks from now on.
                    admin_task.abort();
                    upgraded = true;
                    break;
                }
            }
        }
    }
    // Without a successor the listeners close with the workers' copies.
    drop(handoff.take());
    tracing::info!("shutting down: finishing in-flight responses");
    let stop_began = Instant::now();
    shared.serving.store(false, Relaxed);
    crate::sysd::notify(&[NotifyState::Stopping]);
    let _ = shutdown_tx.send(true);
    // Keep the admin listener (readyz = 503) until workers finish. Workers
    // end one by one now, so the watchdog pings without asking them: the
    // drain is bounded by shutdown_timeout and the unit's TimeoutStopSec=.
    let deadline = Instant::now() + shared.live().0.s.shutdown_timeout + Duration::from_secs(1);
    while shared.open_conns.load(Relaxed) > 0 && Instant::now() < deadline {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
            _ = tick(&mut watchdog) => crate::sysd::notify(&[NotifyState::Watchdog]),
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
    }
    admin_task.abort();
    upkeep.abort();
    // An operator (or a rolling update) reads that the drain ended, and
    // whether it cut anything.
    let left = shared.open_conns.load(Relaxed);
    if left == 0 {
        tracing::info!("shutdown complete in {:?}", stop_began.elapsed());
    } else {
        tracing::warn!(
            "shutdown complete in {:?}: {left} connection(s) cut at shutdown_timeout",
            stop_began.elapsed()
        );
    }
    (0, upgraded)
}

/// SIGUSR2: starts the binary again with the listeners and waits until
/// it serves; then tells systemd it is the main process. `None` (this
/// process goes on serving) if it could not start or was not ready.
async fn start_successor(handoff: Arc<crate::upgrade::Handoff>) -> Option<std::os::fd::OwnedFd> {
    tracing::info!("upgrade: starting a new process with the listening sockets");
    match tokio::task::spawn_blocking(move || handoff.start_successor()).await {
        Ok(Ok((pid, held))) => {
            tracing::info!(pid, "upgrade: the new process serves; draining this one");
            crate::sysd::notify(&[NotifyState::MainPid(pid)]);
            Some(held)
        }
        Ok(Err(why)) => {
            tracing::error!("upgrade failed, this process goes on serving: {why}");
            None
        }
        Err(e) => {
            tracing::error!("upgrade failed, this process goes on serving: {e}");
            None
        }
    }
}

/// The next tick of the watchdog timer; never, without a watchdog.
async fn tick(t: &mut Option<tokio::time::Interval>) {
    match t {
        Some(t) => {
            t.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// `WATCHDOG=1` if every worker's heartbeat advanced since the last check;
/// otherwise no ping (systemd restarts the service once `WATCHDOG_USEC`
/// passes without one) and one log line per worker that stalls or recovers.
fn watchdog_check(shared: &Shared, gate: &mut crate::sysd::WatchdogGate, usec: Option<Duration>) {
    let d = gate.observe(&shared.heartbeat_values());
    let names = |v: &[usize]| {
        v.iter()
            .map(|i| format!("worker-{i}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let half_ms = usec.map_or(0, |u| (u / 2).as_millis() as u64);
    if !d.newly_stalled.is_empty() {
        tracing::error!(
            "watchdog: {} made no progress for {half_ms} ms: withholding WATCHDOG=1 \
             (systemd restarts the service if this lasts WatchdogSec)",
            names(&d.newly_stalled)
        );
    }
    if !d.recovered.is_empty() {
        tracing::warn!("watchdog: {} progressing again", names(&d.recovered));
    }
    if d.ping {
        crate::sysd::notify(&[NotifyState::Watchdog]);
    }
}

/// SIGHUP: re-read the config; on error keep the old one (the error, for
/// the STATUS= line, says why).
fn reload(
    shared: &Arc<Shared>,
    sources: &Sources,
    set_log_level: &(dyn Fn(&str) -> Result<(), String> + Send + Sync),
    started: &crate::config::Config,
) -> Result<(), String> {
    let loaded =
        crate::config::load(sources).and_then(|(new, _)| crate::config::reload(&new, started));
    let mut new = match loaded {
        Ok(r) => {
            for key in r.waiting {
                tracing::warn!("reload: `{key}` changed but only takes effect after a restart");
            }
            r.settings
        }
        Err(errors) => {
            for e in &errors {
                tracing::error!("reload rejected, keeping the running config: {e}");
            }
            let first = errors.first().map(|e| e.to_string()).unwrap_or_default();
            return Err(match errors.len() {
                1 => first,
                n => format!("{first} (and {} more)", n - 1),
            });
        }
    };
    // The HTTPS listener's certificate and key are read again, and a pair
    // that does not load rejects the whole reload.
    let new_pair = match (
        &shared.tls,
        new.tls.as_ref().and_then(|t| t.manual.as_ref()),
    ) {
        (Some(_), Some(files)) => match crate::tls::load_pair(files) {
            Ok(pair) => Some(pair),
            Err(e) => {
                tracing::error!("reload rejected, keeping the running config and certificate: {e}");
                return Err(e);
            }
        },
        _ => None,
    };
    if let Some(Err(e)) = shared.tls.as_ref().map(|c| c.reload_ticket_keys()) {
        tracing::error!("reload rejected, keeping the running config and ticket keys: {e}");
        return Err(e);
    }
    if let Err(e) = set_log_level(&new.log_level) {
        tracing::error!("reload: log_level: {e}");
    }
    // Rules written the same keep their compiled state: the buckets of
    // their rate limits (a reload is no way around a limit) and counters.
    let running = shared.live().0;
    let old_rules = running.s.serve.rules.clone();
    if new.serve.rules == old_rules {
        new.serve.rules = old_rules.clone();
    }
    for (site, was) in new.sites.iter_mut().zip(&running.s.sites) {
        if site.serve.rules == was.serve.rules {
            site.serve.rules = was.serve.rules.clone();
        }
    }
    drop(running);
    match make_live(&new, &shared.access_dropped) {
        Ok((live, thread)) => {
            shared.set_live(live);
            if let (Some(certs), Some(pair)) = (&shared.tls, new_pair) {
                certs.replace(pair);
                tracing::info!("reload: TLS certificate and key loaded");
            }
            if let Some(t) = thread {
                shared
                    .log_threads
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(t);
            }
            // [cache] applies in place: lower bounds evict unused entries now.
            let cache_before = shared.files.cache_config();
            let evicted = shared.files.set_cache_limits(&new);
            let cache_after = shared.files.cache_config();
            if cache_after != cache_before {
                tracing::info!(
                    max_entries = cache_after.max_entries,
                    max_open = cache_after.max_open,
                    valid_ms = cache_after.valid.as_millis() as u64,
                    negative_ttl_ms = cache_after.negative_ttl.as_millis() as u64,
                    small_file_max = cache_after.small_file_max,
                    small_bytes_budget = cache_after.small_bytes_budget,
                    min_uses = cache_after.min_uses,
                    evicted,
                    "reload: cache settings applied"
                );
            }
            if new.serve.rules != old_rules {
                for (i, rule) in new.serve.rules.describe().iter().enumerate() {
                    tracing::info!("reload: rule {}: {rule}", i + 1);
                }
                tracing::info!(rules = new.serve.rules.len(), "reload: site rules applied");
            }
            tracing::info!("configuration reloaded");
            Ok(())
        }
        Err(e) => {
            tracing::error!("reload rejected, keeping the running config: {e}");
            Err(e.to_string())
        }
    }
}

/// One worker's sockets: the plaintext listener and, when configured, the
/// HTTPS one.
struct WorkerListeners {
    plain: Option<std::net::TcpListener>,
    /// Its sockets of `listen`'s other addresses.
    more: Vec<std::net::TcpListener>,
    /// `listen`'s Unix domain sockets (each shared by every worker).
    unix: Vec<std::os::unix::net::UnixListener>,
    /// One per `tls_listen` address.
    tls: Vec<std::net::TcpListener>,
    /// HTTP/3's UDP sockets, one per `tls_listen` address.
    quic: Vec<std::net::UdpSocket>,
}

/// What an accept loop does with a connection.
#[derive(Clone, Copy)]
enum Listener {
    /// The hand-written HTTP/1.1 engine (h2c handed to `h2conn`).
    Plain,
    /// TLS, then HTTP/2 (`h2conn`) or the HTTP/1.1 engine over rustls.
    Tls,
}

fn worker_main(
    i: usize,
    shared: Arc<Shared>,
    listeners: WorkerListeners,
    shutdown: watch::Receiver<bool>,
    ready: std::sync::mpsc::Sender<()>,
) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("worker {i}: runtime: {e}");
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    if let Some(usec) = shared.watchdog {
        // A quarter of the main thread's check period: a worker must stall
        // for at least WATCHDOG_USEC/2 - WATCHDOG_USEC/8 to miss a check.
        let every = (usec / 8).max(Duration::from_millis(1));
        let shared = shared.clone();
        local.spawn_local(async move {
            let mut t = tokio::time::interval(every);
            t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let Some(beat) = shared.heartbeats.get(i) else {
                return;
            };
            loop {
                t.tick().await;
                beat.fetch_add(1, Relaxed);
            }
        });
    }
    let conn = ConnContext::new(shared.clone(), shared.worker_stats[i].clone(), shutdown);
    let worker = Rc::new(Worker {
        shared,
        conn: Rc::new(conn),
        local_conns: Cell::new(0),
        conn_fds: Default::default(),
    });
    local.block_on(&rt, run_worker(worker, listeners, ready));
}

/// Takes one of the `max_connections` slots (for the next accepted
/// connection), waiting while all are taken; false when shutdown began.
/// One accepted connection's place in the counts (open, this worker's,
/// and once it is served, active) and its descriptor in `conn_fds`,
/// given back when dropped: at the task's end, and also when a panic
/// unwinds it, which once left the slot taken until the daemon refused
/// everyone at `max_connections`.
struct ConnSlot {
    w: Rc<Worker>,
    fd: Option<std::os::fd::RawFd>,
    /// It holds one of `max_connections`' slots.
    active: bool,
    /// The client it counts for (`max_connections_per_client`).
    client: Option<std::net::IpAddr>,
}

impl ConnSlot {
    fn open(w: &Rc<Worker>, fd: Option<std::os::fd::RawFd>) -> ConnSlot {
        w.shared.open_conns.fetch_add(1, Relaxed);
        w.local_conns.set(w.local_conns.get() + 1);
        if let Some(fd) = fd {
            w.conn_fds.borrow_mut().insert(fd);
        }
        ConnSlot {
            w: w.clone(),
            fd,
            active: false,
            client: None,
        }
    }
}

/// Takes one of `peer`'s connections under `max_connections_per_client`:
/// `Err` when it has them all (the connection is to be closed unserved),
/// `Ok(None)` when no limit applies to it (none set, or a trusted proxy).
fn client_slot(
    w: &Worker,
    s: &Settings,
    peer: std::net::IpAddr,
) -> Result<Option<std::net::IpAddr>, ()> {
    let limits = &s.limits;
    let max = limits.max_connections_per_client;
    if max == 0 || s.trusted_proxies.iter().any(|n| n.contains(peer)) {
        return Ok(None);
    }
    let client = crate::clients::client_of(peer, limits.client_ipv6_prefix);
    if w.shared.client_conns.try_open(client, max) {
        Ok(Some(client))
    } else {
        metrics::counter!("fileserver_connections_refused_total", "reason" => "per_client")
            .increment(1);
        Err(())
    }
}

impl Drop for ConnSlot {
    fn drop(&mut self) {
        let w = &self.w;
        if self.active {
            w.shared.active_conns.fetch_sub(1, Relaxed);
        }
        if let Some(fd) = self.fd {
            w.conn_fds.borrow_mut().remove(&fd);
        }
        if let Some(client) = self.client {
            w.shared.client_conns.close(client);
        }
        w.local_conns.set(w.local_conns.get() - 1);
        w.shared.open_conns.fetch_sub(1, Relaxed);
    }
}

async fn acquire_slot(w: &Worker) -> bool {
    loop {
        let max = w.shared.live().0.s.limits.max_connections;
        let cur = w.shared.active_conns.load(Relaxed);
        if cur < max {
            if w.shared
                .active_conns
                .compare_exchange(cur, cur + 1, Relaxed, Relaxed)
                .is_ok()
            {
                return true;
            }
            continue;
        }
        if w.conn.stopping.get() || *w.conn.shutdown.borrow() {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Sets up the worker's I/O, reports it ready, accepts on its listeners
/// until shutdown, then drains its connections (at most `shutdown_timeout`).
async fn run_worker(w: Rc<Worker>, listeners: WorkerListeners, ready: std::sync::mpsc::Sender<()>) {
    let tcp = |l: std::net::TcpListener| tokio::net::TcpListener::from_std(l).map(Accepting::Tcp);
    let unix = |l: std::os::unix::net::UnixListener| {
        tokio::net::UnixListener::from_std(l).map(Accepting::Unix)
    };
    let plain: std::io::Result<Vec<Accepting>> = listeners
        .plain
        .into_iter()
        .chain(listeners.more)
        .map(tcp)
        .chain(listeners.unix.into_iter().map(unix))
        .collect();
    let tls: std::io::Result<Vec<Accepting>> = listeners.tls.into_iter().map(tcp).collect();
    let (plain, tls) = match (plain, tls) {
        (Ok(plain), Ok(tls)) => (plain, tls),
        (Err(e), _) | (_, Err(e)) => {
            tracing::error!("worker listener: {e}");
            return;
        }
    };
    if let Err(e) = w.shared.files.attach_worker() {
        // Not fatal: the ring is created again at this worker's first I/O.
        tracing::warn!("worker I/O setup: {e}");
    }
    let _ = ready.send(());
    drop(ready);
    let tls_loops =
        futures_util::future::join_all(tls.into_iter().map(|l| accept_loop(&w, l, Listener::Tls)));
    let quic_loop = |socket: std::net::UdpSocket| async {
        let (Some(certs), Some(h)) = (&w.shared.tls, &w.shared.live().0.s.http3) else {
            return None;
        };
        // After an upgrade the old process reads the same UDP sockets
        // until it exits; a datagram of its connections read here would
        // be lost to them.
        let mut shutdown = w.conn.shutdown.clone();
        let mut gone = w.shared.predecessor_gone.clone();
        tokio::select! {
            // Err: the watching thread could not start; go on.
            _ = gone.wait_for(|gone| *gone) => {}
            _ = shutdown.changed() => return None,
        }
        match crate::h3conn::endpoint(socket, certs, h) {
            Ok(e) => {
                accept_quic(&w, &e).await;
                Some(e)
            }
            Err(e) => {
                tracing::error!("HTTP/3 endpoint: {e}");
                None
            }
        }
    };
    let quic_loops = futures_util::future::join_all(listeners.quic.into_iter().map(quic_loop));
    let plain_loops = futures_util::future::join_all(
        plain
            .into_iter()
            .map(|l| accept_loop(&w, l, Listener::Plain)),
    );
    let (_, _, quic) = tokio::join!(plain_loops, tls_loops, quic_loops);
    w.conn.stopping.set();
    let deadline = Instant::now() + w.shared.live().0.s.shutdown_timeout;
    while w.local_conns.get() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    if w.local_conns.get() > 0 {
        tracing::warn!(
            "shutdown timeout: closing {} connection(s) mid-response",
            w.local_conns.get()
        );
        for &fd in w.conn_fds.borrow().iter() {
            // SAFETY: a descriptor is in the set only while the task that
            // owns its stream runs (inserted after accept, removed right
            // after the stream is dropped, with no await between), and
            // this thread is the only one that runs those tasks: the
            // descriptor is open and is that connection's socket.
            let sock = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
            let _ = rustix::net::shutdown(sock, rustix::net::Shutdown::Both);
        }
        // Their writes fail now; let them count and log the abort.
        let grace = Instant::now() + Duration::from_millis(500);
        while w.local_conns.get() > 0 && Instant::now() < grace {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // Any still left are dropped with the runtime; keep the global count right.
        w.shared.open_conns.fetch_sub(w.local_conns.get(), Relaxed);
    }
    // CONNECTION_CLOSE to whatever is left, and time for it to leave.
    let quic: Vec<quinn::Endpoint> = quic.into_iter().flatten().collect();
    for e in &quic {
        e.close(0u32.into(), b"shutdown");
    }
    let idle = futures_util::future::join_all(quic.iter().map(quinn::Endpoint::wait_idle));
    let _ = tokio::time::timeout(Duration::from_millis(200), idle).await;
}

/// Accepts QUIC connections on the worker's endpoint until shutdown, each
/// a local task. An address QUIC has not validated gets a Retry under load
/// (`[http3] address_validation`), so spoofed Initials cost one packet and
/// no state; at most `max_handshakes` are in progress; a connection takes
/// one of `max_connections`' slots only once its handshake is done (at the
/// limit it is closed with H3_EXCESSIVE_LOAD and the client may retry or
/// use TCP), so handshakes never hold up the TCP listeners.
async fn accept_quic(w: &Rc<Worker>, endpoint: &quinn::Endpoint) {
    let mut shutdown = w.conn.shutdown.clone();
    loop {
        let incoming = tokio::select! {
            biased;
            _ = shutdown.changed() => break,
            i = endpoint.accept() => match i {
                Some(i) => i,
                None => break,
            },
        };
        let live = w.shared.live().0;
        let Some(h3) = &live.s.http3 else {
            incoming.refuse();
            continue;
        };
        let handshakes = w.shared.quic_handshakes.load(Relaxed);
        let per_client = live.s.limits.max_connections_per_client > 0;
        if !incoming.remote_address_validated() && h3.retry(handshakes, per_client) {
            // Unvalidated implies a Retry may be sent.
            let _ = incoming.retry();
            quic_incoming("retry");
            continue;
        }
        if handshakes >= h3.max_handshakes {
            incoming.refuse();
            quic_incoming("refused");
            continue;
        }
        let Ok(client) = client_slot(w, &live.s, incoming.remote_address().ip()) else {
            incoming.refuse();
            continue;
        };
        quic_incoming("accepted");
        let mut attempt = QuicAttempt::start(w, client);
        let w = w.clone();
        tokio::task::spawn_local(async move {
            let conn = crate::h3conn::handshake(&w.conn, incoming).await;
            attempt.handshake_over();
            let Some(conn) = conn else { return };
            let max = w.shared.live().0.s.limits.max_connections;
            if w.shared.active_conns.fetch_add(1, Relaxed) >= max {
                w.shared.active_conns.fetch_sub(1, Relaxed);
                metrics::counter!("fileserver_connections_refused_total", "reason" => "max_connections")
                    .increment(1);
                conn.close(H3_EXCESSIVE_LOAD.into(), b"busy");
                return;
            }
            let mut slot = ConnSlot::open(&w, None);
            slot.active = true;
            slot.client = attempt.client.take();
            crate::h3conn::serve(slot.w.conn.clone(), conn).await;
            drop(slot);
        });
    }
}

/// HTTP/3's code for a connection refused under load (RFC 9114 8.1).
const H3_EXCESSIVE_LOAD: u32 = 0x107;

/// What became of a QUIC connection attempt.
fn quic_incoming(result: &'static str) {
    metrics::counter!("fileserver_quic_incoming_total", "result" => result).increment(1);
}

/// A QUIC connection before it has a slot: its place among `[http3]
/// max_handshakes` while the handshake runs, and its client's under
/// `max_connections_per_client`; what it still holds is given back when
/// it is dropped (a failed handshake, a refusal, a panic).
struct QuicAttempt {
    w: Rc<Worker>,
    handshaking: bool,
    client: Option<std::net::IpAddr>,
}

impl QuicAttempt {
    fn start(w: &Rc<Worker>, client: Option<std::net::IpAddr>) -> QuicAttempt {
        w.shared.quic_handshakes.fetch_add(1, Relaxed);
        QuicAttempt {
            w: w.clone(),
            handshaking: true,
            client,
        }
    }

    fn handshake_over(&mut self) {
        if std::mem::take(&mut self.handshaking) {
            self.w.shared.quic_handshakes.fetch_sub(1, Relaxed);
        }
    }
}

impl Drop for QuicAttempt {
    fn drop(&mut self) {
        self.handshake_over();
        if let Some(client) = self.client {
            self.w.shared.client_conns.close(client);
        }
    }
}

/// A listener the accept loop takes connections from.
enum Accepting {
    Tcp(tokio::net::TcpListener),
    /// Its connections are handed to the engines as TCP streams, with
    /// this host for a peer (`unix_socket`).
    Unix(tokio::net::UnixListener),
}

impl Accepting {
    async fn accept(&self) -> std::io::Result<(tokio::net::TcpStream, SocketAddr)> {
        match self {
            Accepting::Tcp(l) => l.accept().await,
            Accepting::Unix(l) => {
                let (stream, _) = l.accept().await?;
                Ok((
                    crate::unix_socket::as_tcp(stream)?,
                    crate::unix_socket::PEER,
                ))
            }
        }
    }
}

/// Accepts on `listener` until shutdown, each connection a local task.
async fn accept_loop(w: &Rc<Worker>, listener: Accepting, kind: Listener) {
    let mut shutdown = w.conn.shutdown.clone();
    loop {
        let max = w.shared.live().0.s.limits.max_connections;
        if w.shared.open_conns.load(Relaxed) >= max {
            // At the limit: stop accepting (the kernel backlog holds new
            // clients) until a connection closes.
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(5)) => continue,
                _ = shutdown.changed() => break,
            }
        }
        tokio::select! {
            biased;
            _ = shutdown.changed() => break,
            r = listener.accept() => match r {
                Ok((mut stream, peer)) => {
                    // A balancer's connection names its client in a PROXY
                    // header, read in the task; it is limited as that client.
                    // Not held while accept waits: a reload's old settings
                    // (and their access log file) are let go.
                    let live = w.shared.live().0;
                    let p = &live.s.proxy_protocol;
                    let proxy = p.from.iter().any(|n| n.contains(peer.ip())).then_some(p.timeout);
                    // Over its share: closed unserved, before TLS.
                    let client = match proxy {
                        Some(_) => None,
                        None => match client_slot(w, &live.s, peer.ip()) {
                            Ok(c) => c,
                            Err(()) => continue,
                        },
                    };
                    let _ = stream.set_nodelay(true);
                    let fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
                    let mut slot = ConnSlot::open(w, Some(fd));
                    slot.client = client;
                    tokio::task::spawn_local(async move {
                        let mut peer = peer;
                        // What a plaintext connection read past its PROXY
                        // header: the start of its first request.
                        let mut read = (Vec::new(), 0);
                        if let Some(timeout) = proxy {
                            let plain = matches!(kind, Listener::Plain);
                            let head_max = slot.w.shared.live().0.s.limits.max_header_bytes;
                            match proxy_header(&mut stream, timeout, plain, head_max).await {
                                Ok((named, rest)) => {
                                    peer = named.unwrap_or(peer);
                                    read = rest;
                                }
                                Err(why) => {
                                    tracing::debug!(%peer, "PROXY protocol: {why}");
                                    metrics::counter!(
                                        "fileserver_connections_refused_total",
                                        "reason" => "proxy_protocol"
                                    )
                                    .increment(1);
                                    return;
                                }
                            }
                            let live = slot.w.shared.live().0;
                            match client_slot(&slot.w, &live.s, peer.ip()) {
                                Ok(c) => slot.client = c,
                                Err(()) => return,
                            }
                        }
                        // Every worker may be parked in accept() when the
                        // limit is reached, so up to `workers - 1` extra
                        // connections can be accepted; they wait here,
                        // unserved and not counted as open, for a slot.
                        if acquire_slot(&slot.w).await {
                            slot.active = true;
                            let ctx = slot.w.conn.clone();
                            match (kind, &slot.w.shared.tls) {
                                // Boxed: a plaintext connection's task does
                                // not carry the handshake's and HTTP/2's state.
                                (Listener::Tls, Some(certs)) => {
                                    Box::pin(serve_tls(ctx, certs, stream, peer)).await
                                }
                                _ => {
                                    crate::conn::serve(ctx, Wire::Plain(stream), peer, read).await
                                }
                            }
                        }
                        // The stream was dropped (closed) inside; no
                        // await since, so the number is not reused yet.
                        drop(slot);
                    });
                }
                Err(e) => {
                    // EMFILE/ENFILE and friends: back off instead of spinning.
                    tracing::warn!("accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
    drop(listener);
}

/// Reads the PROXY protocol header at the start of `stream`: the client
/// it names, `None` for the balancer's own connection (LOCAL, UNKNOWN);
/// an error for a missing, malformed or late header, whose connection is
/// then closed unserved. With `read_on` (a plaintext connection) it reads
/// what comes, first without a timer, and returns what followed the header
/// too, the start of the first request, in a buffer the engine reads on:
/// by the time the task reads, a balancer has sent both (HAProxy in two
/// segments), so the header costs no system call of its own. Behind
/// HAProxy with a new connection per request the daemon's CPU per request
/// with the header against without was 1.064x when it was peeked and read
/// apart, 1.038x now, nginx's 1.042x: what is left is the kernel's, for
/// the header's own segment (benches/README.md, "PROXY protocol behind
/// HAProxy"). Before TLS it only ever consumes the header, peeking first.
async fn proxy_header(
    stream: &mut tokio::net::TcpStream,
    timeout: Duration,
    read_on: bool,
    head_max: usize,
) -> Result<(Option<SocketAddr>, ReadAhead), String> {
    use crate::http::proxy_protocol::parse;
    use tokio::io::AsyncReadExt;
    // What is there already, without a timer: a balancer's connection
    // starts with its header. Read into the request head's buffer, which
    // it then becomes, at the size the engine starts one.
    if read_on {
        let mut buf = vec![0u8; crate::conn::HEAD_BUF_START.min(head_max)];
        // An error here is met again by the read that follows.
        let n = stream.try_read(&mut buf).unwrap_or(0);
        return proxy_header_rest(stream, timeout, buf, n, head_max).await;
    }
    let mut buf = vec![0u8; PROXY_MAX];
    let read = async {
        let mut seen = 0;
        loop {
            let n = stream.peek(&mut buf).await.map_err(|e| e.to_string())?;
            if n == 0 {
                return Err("closed before a header".to_string());
            }
            match parse(&buf[..n]) {
                Ok(Some(h)) => {
                    stream
                        .read_exact(&mut buf[..h.len])
                        .await
                        .map_err(|e| e.to_string())?;
                    return Ok((h.source, (Vec::new(), 0)));
                }
                // Part of a header: peek sees the same bytes until more
                // come, so wait a little rather than spin.
                Ok(None) => {
                    if n == seen {
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                    seen = n;
                }
                Err(e) => return Err(refusal(e)),
            }
        }
    };
    tokio::time::timeout(timeout, read)
        .await
        .unwrap_or_else(|_| Err(LATE.to_string()))
}

/// Bytes of a connection already read, and how many of the buffer's
/// first ones they are.
type ReadAhead = (Vec<u8>, usize);

/// The longest PROXY header taken: 16 octets and 4096 of addresses and
/// TLVs.
const PROXY_MAX: usize = 16 + 4096;

/// The refusal of a header past its timeout.
const LATE: &str = "no complete header within proxy_protocol_timeout";

fn refusal(e: crate::http::proxy_protocol::Error) -> String {
    match e {
        crate::http::proxy_protocol::Error::NotProxy => "no header".to_string(),
        crate::http::proxy_protocol::Error::Malformed(why) => format!("malformed header: {why}"),
    }
}

/// [`proxy_header`] reading on, with `n` octets of `buf` read: reads
/// until the header is whole, within `timeout` (no timer when it is
/// whole already), growing `buf` (doubling, up to the longer of
/// [`PROXY_MAX`] and `head_max`) for a long header.
async fn proxy_header_rest(
    stream: &mut tokio::net::TcpStream,
    timeout: Duration,
    mut buf: Vec<u8>,
    mut n: usize,
    head_max: usize,
) -> Result<(Option<SocketAddr>, ReadAhead), String> {
    use tokio::io::AsyncReadExt;
    let most = PROXY_MAX.max(head_max);
    // The header and what followed it, moved to the buffer's front;
    // `None` while only part of a header is in.
    let whole = |buf: &mut Vec<u8>, n: usize| match crate::http::proxy_protocol::parse(&buf[..n]) {
        Ok(Some(h)) => {
            buf.copy_within(h.len..n, 0);
            Ok(Some((h.source, n - h.len)))
        }
        Ok(None) if n == buf.len() && n >= most => {
            Err("malformed header: longer than any".to_string())
        }
        Ok(None) => {
            if n == buf.len() {
                buf.resize((2 * n).max(1).min(most), 0);
            }
            Ok(None)
        }
        Err(e) => Err(refusal(e)),
    };
    if let Some((source, len)) = whole(&mut buf, n)? {
        return Ok((source, (buf, len)));
    }
    let read = async {
        loop {
            let got = stream
                .read(&mut buf[n..])
                .await
                .map_err(|e| e.to_string())?;
            if got == 0 {
                return Err("closed before a header".to_string());
            }
            n += got;
            if let Some((source, len)) = whole(&mut buf, n)? {
                return Ok((source, (buf, len)));
            }
        }
    };
    tokio::time::timeout(timeout, read)
        .await
        .unwrap_or_else(|_| Err(LATE.to_string()))
}

/// Serves an accepted HTTPS connection: the handshake (`tls`), then
/// HTTP/2 (`h2conn`) or HTTP/1.1 on the plaintext listener's engine (`conn`
/// over `wire::Tls`), as ALPN chose.
async fn serve_tls(
    ctx: Rc<ConnContext>,
    certs: &crate::tls::Certs,
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
) {
    let timeout = match &ctx.live().0.s.tls {
        Some(t) => t.handshake_timeout,
        None => return,
    };
    match crate::tls::handshake(certs, stream, timeout, peer).await {
        Some((stream, true)) => {
            crate::h2conn::serve(ctx, Wire::tls(stream), Vec::new(), peer).await
        }
        Some((stream, false)) => {
            crate::conn::serve(ctx, Wire::tls(stream), peer, (Vec::new(), 0)).await
        }
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::{Cell, RefCell};
    use std::net::UdpSocket;

    /// Another process holding the UDP twin of the port the kernel picked
    /// for HTTPS (here: this test, on the first pick) costs a start on
    /// port 0 one more pick, not the start.
    #[test]
    fn a_port_0_start_picks_again_when_the_udp_twin_is_taken() {
        let held = RefCell::new(Vec::new());
        let picks = Cell::new(0);
        let HttpsSockets { tcp, addr, udp } = https_sockets(
            "127.0.0.1:0".parse().unwrap(),
            true,
            |a| reuseport_listeners(a, 2),
            |a| {
                picks.set(picks.get() + 1);
                if picks.get() == 1 {
                    held.borrow_mut().push(UdpSocket::bind(a).unwrap());
                }
                reuseport_udp(a, 2)
            },
        )
        .unwrap();
        assert_eq!(picks.get(), 2);
        let taken = held.borrow()[0].local_addr().unwrap();
        assert_ne!(addr.port(), taken.port());
        assert_eq!(tcp[0].local_addr().unwrap(), addr);
        assert_eq!(udp.unwrap()[1].local_addr().unwrap(), addr);
    }

    /// A configured port is the operator's choice: its UDP twin taken is
    /// the one line naming it, at once.
    #[test]
    fn a_configured_port_with_its_udp_twin_taken_fails_at_once() {
        let taken = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap();
        let picks = Cell::new(0);
        let err = https_sockets(
            port,
            true,
            |a| reuseport_listeners(a, 1),
            |a| {
                picks.set(picks.get() + 1);
                reuseport_udp(a, 1)
            },
        )
        .map(|_| ())
        .unwrap_err();
        assert_eq!(picks.get(), 1);
        assert_eq!((err.0, err.1), (port, "tls_listen (UDP, for [http3])"));
        assert_eq!(err.2.kind(), std::io::ErrorKind::AddrInUse);
    }
}

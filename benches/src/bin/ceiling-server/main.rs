//! The load harness's reference for "no server work": what the load
//! generator itself can drive on this machine, the ceiling of any server's
//! req/s in a scenario.
//!
//! ```text
//! ceiling-server --root DIR --listen 127.0.0.1:PORT [--workers 2]
//!                [--quic-chain chain.pem --quic-key key.pem]
//! ```
//!
//! It answers GET and HEAD with the bytes of a file under `--root`, read once
//! per worker into memory (files over 64 KiB are kept open and sent with
//! sendfile), with a head of the same fields and about the same size as the
//! daemon's (a `Date` fixed at the file's first use). No revalidation,
//! logging, counting, ranges or confinement beyond refusing `..`: every
//! request costs one `recv` and one `send` (or `send` + `sendfile`), which
//! every server pays, plus a hash lookup. A peer's req/s over this server's
//! in the same run is the share of the client's capacity that peer reaches;
//! a server that needs the same syscalls per request cannot pass 1 beyond
//! the run-to-run spread.
//!
//! Workers are threads, each with its own level-triggered epoll over its own
//! `SO_REUSEPORT` listener (the kernel spreads connections as it does
//! between nginx's or lighttpd's worker processes); a send that would block
//! waits in `poll` on that socket, which a reference server may afford.
//!
//! With `--quic-chain` and `--quic-key` it also answers HTTP/3 on the same
//! port over UDP ([`quic`]): quinn and nothing else, the floor of any
//! HTTP/3 server on quinn.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::rc::Rc;

use anyhow::{bail, Context, Result};
use clap::Parser;

mod quic;

/// Files up to this size are served from memory, larger ones by sendfile.
const IN_MEMORY_MAX: u64 = 64 * 1024;
/// Bytes a request head may take.
const HEAD_MAX: usize = 16 * 1024;

/// Serve a directory with nothing but recv and send: the harness's ceiling.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// The directory whose files are served.
    #[arg(long)]
    root: PathBuf,
    /// Where to listen.
    #[arg(long)]
    listen: SocketAddr,
    /// Worker threads, each with its own listener and epoll.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Also serve HTTP/3 on the same port over UDP, with this certificate
    /// chain (PEM).
    #[arg(long, requires = "quic_key")]
    quic_chain: Option<PathBuf>,
    /// The private key (PEM) of `--quic-chain`.
    #[arg(long, requires = "quic_chain")]
    quic_key: Option<PathBuf>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    if !args.root.is_dir() {
        bail!("--root {}: not a directory", args.root.display());
    }
    let SocketAddr::V4(addr) = args.listen else {
        bail!("--listen: an IPv4 address");
    };
    let mut listeners = Vec::new();
    for _ in 0..args.workers.max(1) {
        listeners.push(listen(addr).with_context(|| format!("listen on {addr}"))?);
    }
    let mut quic_workers = Vec::new();
    if let (Some(chain), Some(key)) = (args.quic_chain, args.quic_key) {
        let keys = quic::Keys { chain, key };
        quic_workers = quic::spawn(&args.root, addr, args.workers.max(1), &keys)?;
    }
    let workers: Vec<_> = listeners
        .into_iter()
        .enumerate()
        .map(|(i, listener)| {
            let root = args.root.clone();
            std::thread::Builder::new()
                .name(format!("worker-{i}"))
                .spawn(move || -> Result<()> { Worker::new(root, listener)?.run() })
        })
        .collect::<io::Result<_>>()?;
    for worker in workers.into_iter().chain(quic_workers) {
        match worker.join() {
            Ok(r) => r.context("worker")?,
            Err(_) => bail!("a worker panicked"),
        }
    }
    Ok(())
}

/// Turns a libc return value into a `Result`.
fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// A non-blocking `SO_REUSEPORT` listener on `addr`.
fn listen(addr: std::net::SocketAddrV4) -> io::Result<RawFd> {
    // SAFETY: plain syscalls on a descriptor this function owns.
    unsafe {
        let fd = check(libc::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        ))?;
        bind_reuseport(fd, addr)?;
        check(libc::listen(fd, 1024))?;
        Ok(fd)
    }
}

/// Binds socket `fd` to `addr` with `SO_REUSEADDR` and `SO_REUSEPORT`.
fn bind_reuseport(fd: RawFd, addr: std::net::SocketAddrV4) -> io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: `one` and the sockaddr are locals that outlive the calls;
    // `fd` is the caller's socket.
    unsafe {
        for opt in [libc::SO_REUSEADDR, libc::SO_REUSEPORT] {
            check(libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                (&one as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            ))?;
        }
        let sa = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: addr.port().to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(*addr.ip()).to_be(),
            },
            sin_zero: [0; 8],
        };
        check(libc::bind(
            fd,
            (&sa as *const libc::sockaddr_in).cast(),
            size_of::<libc::sockaddr_in>() as libc::socklen_t,
        ))?;
    }
    Ok(())
}

/// One file as it is served: both heads ready, the body in memory or open.
struct Entry {
    head_200: Vec<u8>,
    head_304: Vec<u8>,
    etag: Vec<u8>,
    body: Body,
}

enum Body {
    Memory(Vec<u8>),
    File(File, u64),
}

/// What a request needs after its answer was appended to the batch.
enum Answer {
    /// Nothing: the batch goes out when the read's heads are answered.
    Batched,
    /// The batch, then this file's bytes by sendfile.
    SendFile(Rc<Entry>),
    /// Not a GET or HEAD this server understands: close.
    Close,
}

/// One worker's listener, epoll, connections and files.
struct Worker {
    root: PathBuf,
    listener: RawFd,
    epoll: RawFd,
    /// Each open connection's unparsed bytes, indexed by its descriptor
    /// (small integers: no hashing per request).
    conns: Vec<Option<Vec<u8>>>,
    files: HashMap<Vec<u8>, Option<Rc<Entry>>>,
    out: Vec<u8>,
}

impl Worker {
    fn new(root: PathBuf, listener: RawFd) -> io::Result<Worker> {
        // SAFETY: epoll_create1 takes no pointers.
        let epoll = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        let worker = Worker {
            root,
            listener,
            epoll,
            conns: Vec::new(),
            files: HashMap::new(),
            out: Vec::with_capacity(64 * 1024),
        };
        worker.watch(listener)?;
        Ok(worker)
    }

    fn watch(&self, fd: RawFd) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: fd as u64,
        };
        // SAFETY: `ev` is a valid epoll_event for the duration of the call.
        check(unsafe { libc::epoll_ctl(self.epoll, libc::EPOLL_CTL_ADD, fd, &mut ev) })?;
        Ok(())
    }

    fn run(&mut self) -> Result<()> {
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
        loop {
            // SAFETY: `events` has room for the count passed.
            let n = unsafe {
                libc::epoll_wait(self.epoll, events.as_mut_ptr(), events.len() as i32, -1)
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e.into());
            }
            for ev in &events[..n as usize] {
                let fd = ev.u64 as RawFd;
                if fd == self.listener {
                    self.accept();
                } else if !self.serve(fd) {
                    if let Some(slot) = self.conns.get_mut(fd as usize) {
                        *slot = None;
                    }
                    // SAFETY: the connection's descriptor, closed once.
                    unsafe { libc::close(fd) };
                }
            }
        }
    }

    fn accept(&mut self) {
        loop {
            // SAFETY: no address is asked for.
            let fd = unsafe {
                libc::accept4(
                    self.listener,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                )
            };
            if fd < 0 {
                return;
            }
            let one: libc::c_int = 1;
            // SAFETY: `one` outlives the call; `fd` is the new connection.
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::IPPROTO_TCP,
                    libc::TCP_NODELAY,
                    (&one as *const libc::c_int).cast(),
                    size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            if self.watch(fd).is_ok() {
                let index = fd as usize;
                if self.conns.len() <= index {
                    self.conns.resize_with(index + 1, || None);
                }
                self.conns[index] = Some(Vec::with_capacity(HEAD_MAX));
            } else {
                // SAFETY: the connection just accepted, closed once.
                unsafe { libc::close(fd) };
            }
        }
    }

    /// Reads what `fd` sent and answers every complete head (a
    /// `Connection: close` one last); false closes.
    fn serve(&mut self, fd: RawFd) -> bool {
        let Some(mut buf) = self.conns.get_mut(fd as usize).and_then(Option::take) else {
            return false;
        };
        let keep = self.read_and_answer(fd, &mut buf);
        self.out.clear();
        if keep {
            self.conns[fd as usize] = Some(buf);
        }
        keep
    }

    fn read_and_answer(&mut self, fd: RawFd, buf: &mut Vec<u8>) -> bool {
        // Into the spare capacity, not a zero-filled resize: a memset of the
        // whole buffer per read would be work no server needs.
        let have = buf.len();
        let spare = buf.spare_capacity_mut();
        let room = spare.len().min(HEAD_MAX - have);
        // SAFETY: `spare` is writable for `room` bytes.
        let n = unsafe { libc::recv(fd, spare.as_mut_ptr().cast(), room, 0) };
        if n <= 0 {
            return n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock;
        }
        // SAFETY: recv initialized the `n` bytes after the first `have`.
        unsafe { buf.set_len(have + n as usize) };
        let mut start = 0;
        while let Some(end) = find_head_end(&buf[start..]) {
            let head = &buf[start..start + end];
            start += end;
            let close =
                header(head, b"connection").is_some_and(|v| v.eq_ignore_ascii_case(b"close"));
            match self.answer(head) {
                Answer::Close => return false,
                Answer::Batched if close => {
                    send_all(fd, &self.out, 0);
                    return false;
                }
                Answer::Batched => {}
                Answer::SendFile(entry) => {
                    if !send_all(fd, &self.out, libc::MSG_MORE) || !send_file(fd, &entry) {
                        return false;
                    }
                    self.out.clear();
                    if close {
                        return false;
                    }
                }
            }
        }
        buf.drain(..start);
        if buf.len() == HEAD_MAX {
            return false;
        }
        let sent = send_all(fd, &self.out, 0);
        self.out.clear();
        sent
    }

    /// Appends the answer to `head` to `out`.
    fn answer(&mut self, head: &[u8]) -> Answer {
        let Some((is_head, path)) = request_line(head) else {
            return Answer::Close;
        };
        let Some(entry) = self.entry(path) else {
            self.out.extend_from_slice(
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nServer: ceiling\r\n\r\n",
            );
            return Answer::Batched;
        };
        if header(head, b"if-none-match") == Some(&entry.etag[..]) {
            self.out.extend_from_slice(&entry.head_304);
            return Answer::Batched;
        }
        self.out.extend_from_slice(&entry.head_200);
        match (&entry.body, is_head) {
            (_, true) => Answer::Batched,
            (Body::Memory(bytes), false) => {
                self.out.extend_from_slice(bytes);
                Answer::Batched
            }
            (Body::File(..), false) => Answer::SendFile(entry),
        }
    }

    /// The served file at URL path `path`, loaded on first use.
    fn entry(&mut self, path: &[u8]) -> Option<Rc<Entry>> {
        if let Some(known) = self.files.get(path) {
            return known.clone();
        }
        let loaded = self.load(path).map(Rc::new);
        self.files.insert(path.to_vec(), loaded.clone());
        loaded
    }

    fn load(&self, path: &[u8]) -> Option<Entry> {
        let rel = path.strip_prefix(b"/")?;
        if rel.split(|&b| b == b'/').any(|c| c == b"..") {
            return None;
        }
        let file = File::open(self.root.join(OsStr::from_bytes(rel))).ok()?;
        let meta = file.metadata().ok()?;
        if !meta.is_file() {
            return None;
        }
        let len = meta.len();
        let mtime = meta.modified().ok()?;
        let etag = format!(
            "\"{:x}-{len:x}\"",
            mtime
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
        );
        let date = httpdate::fmt_http_date(std::time::SystemTime::now());
        let modified = httpdate::fmt_http_date(mtime);
        let common = format!(
            "Server: ceiling\r\nDate: {date}\r\nLast-Modified: {modified}\r\nETag: {etag}\r\n\
             Cache-Control: no-cache\r\n"
        );
        let head_200 = format!(
            "HTTP/1.1 200 OK\r\n{common}Content-Type: application/octet-stream\r\n\
             Content-Length: {len}\r\nAccept-Ranges: bytes\r\n\r\n"
        );
        let head_304 = format!("HTTP/1.1 304 Not Modified\r\n{common}\r\n");
        let body = if len <= IN_MEMORY_MAX {
            Body::Memory(std::fs::read(self.root.join(OsStr::from_bytes(rel))).ok()?)
        } else {
            Body::File(file, len)
        };
        Some(Entry {
            head_200: head_200.into_bytes(),
            head_304: head_304.into_bytes(),
            etag: etag.into_bytes(),
            body,
        })
    }
}

/// Whether the request line asks for HEAD (else GET), and its path
/// without the query; `None` for anything else.
fn request_line(head: &[u8]) -> Option<(bool, &[u8])> {
    let line_end = head.iter().position(|&b| b == b'\r')?;
    let mut parts = head[..line_end].split(|&b| b == b' ');
    let (method, target) = (parts.next()?, parts.next()?);
    let is_head = match method {
        b"GET" => false,
        b"HEAD" => true,
        _ => return None,
    };
    Some((is_head, target.split(|&b| b == b'?').next()?))
}

/// Length of the head at the start of `buf` (through its blank line).
fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// The value of header `name` (lower case) in `head`, trimmed.
fn header<'a>(head: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    head.split(|&b| b == b'\n').skip(1).find_map(|line| {
        let colon = line.iter().position(|&b| b == b':')?;
        if !line[..colon].eq_ignore_ascii_case(name) {
            return None;
        }
        Some(line[colon + 1..].trim_ascii())
    })
}

/// Waits until `fd` can take more bytes; false after 10 s or on an error.
fn wait_writable(fd: RawFd) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut pfd, 1, 10_000) > 0 }
}

fn send_all(fd: RawFd, mut bytes: &[u8], flags: libc::c_int) -> bool {
    while !bytes.is_empty() {
        // SAFETY: `bytes` is readable for its length.
        let n = unsafe {
            libc::send(
                fd,
                bytes.as_ptr().cast(),
                bytes.len(),
                flags | libc::MSG_NOSIGNAL,
            )
        };
        if n > 0 {
            bytes = &bytes[n as usize..];
        } else if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock {
            if !wait_writable(fd) {
                return false;
            }
        } else {
            return false;
        }
    }
    true
}

/// Sends `entry`'s open file by sendfile (false for a body in memory).
fn send_file(fd: RawFd, entry: &Entry) -> bool {
    let &Body::File(ref file, len) = &entry.body else {
        return false;
    };
    let mut off: libc::off_t = 0;
    while (off as u64) < len {
        let left = (len - off as u64) as usize;
        // SAFETY: `off` is a valid offset cell; both descriptors are open.
        let n = unsafe { libc::sendfile(fd, file.as_raw_fd(), &mut off, left) };
        if n > 0 {
            continue;
        }
        if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock {
            if !wait_writable(fd) {
                return false;
            }
        } else {
            return false;
        }
    }
    true
}

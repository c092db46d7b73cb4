//! The ceiling over HTTP/3: what quinn itself costs per request, the
//! floor of any HTTP/3 server built on it (the daemon's included).
//!
//! Each worker thread has its own `SO_REUSEPORT` UDP socket and quinn
//! endpoint, with the transport limits of the daemon's `[http3]`
//! defaults. A connection gets the control stream HTTP/3 requires (a
//! SETTINGS with no dynamic QPACK table); each request stream is read
//! until its HEADERS frame is in and its field section decoded (the
//! daemon's `h3wire`, the least any server on quinn must do), and the
//! answer is written in one call: a HEADERS frame made once per file and
//! one DATA frame with the whole file, read once into memory. Nothing
//! else: no revalidation, ranges, logging or counting.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::net::SocketAddrV4;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use h3wire::{frame, qpack, Code, Head, HeadReader};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A request head larger than this closes the stream.
const HEAD_MAX: usize = 16 * 1024;

/// The certificate chain and key files (PEM) HTTP/3 is served with.
pub(crate) struct Keys {
    pub(crate) chain: PathBuf,
    pub(crate) key: PathBuf,
}

/// Starts `workers` threads serving HTTP/3 for `root` on UDP `addr`.
pub(crate) fn spawn(
    root: &Path,
    addr: SocketAddrV4,
    workers: usize,
    keys: &Keys,
) -> Result<Vec<std::thread::JoinHandle<Result<()>>>> {
    let server = server_config(keys)?;
    let mut threads = Vec::new();
    for i in 0..workers {
        let socket = udp_reuseport(addr).with_context(|| format!("bind UDP {addr}"))?;
        let (root, server) = (root.to_path_buf(), server.clone());
        threads.push(
            std::thread::Builder::new()
                .name(format!("quic-{i}"))
                .spawn(move || run(root, socket, server))?,
        );
    }
    Ok(threads)
}

fn server_config(keys: &Keys) -> Result<quinn::ServerConfig> {
    let chain = CertificateDer::pem_file_iter(&keys.chain)
        .with_context(|| format!("{}", keys.chain.display()))?
        .collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_file(&keys.key)
        .with_context(|| format!("{}", keys.key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls)?;
    let mut server = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    // The daemon's `[http3]` defaults, so the floor is measured with the
    // windows and stream counts the daemon runs with.
    let mut transport = quinn::TransportConfig::default();
    transport
        .max_concurrent_bidi_streams(100u32.into())
        .max_concurrent_uni_streams(8u32.into())
        .max_idle_timeout(Some(quinn::IdleTimeout::try_from(Duration::from_secs(30))?))
        .stream_receive_window((64u32 << 10).into())
        .receive_window((1u32 << 20).into())
        .send_window(2 << 20);
    server.transport_config(Arc::new(transport));
    server.migration(false);
    Ok(server)
}

fn udp_reuseport(addr: SocketAddrV4) -> std::io::Result<std::net::UdpSocket> {
    use std::os::fd::FromRawFd;
    // SAFETY: plain syscalls on a descriptor this function owns, handed to
    // the `UdpSocket` (which closes it) only once it is bound.
    unsafe {
        let fd = crate::check(libc::socket(
            libc::AF_INET,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            0,
        ))?;
        let socket = std::net::UdpSocket::from_raw_fd(fd);
        crate::bind_reuseport(fd, addr)?;
        Ok(socket)
    }
}

fn run(root: PathBuf, socket: std::net::UdpSocket, server: quinn::ServerConfig) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async move {
        let endpoint = quinn::Endpoint::new(
            quinn::EndpointConfig::default(),
            Some(server),
            socket,
            Arc::new(quinn::TokioRuntime),
        )?;
        let files = Rc::new(Files {
            root,
            known: RefCell::new(HashMap::new()),
            heads: RefCell::default(),
            huffman: RefCell::default(),
        });
        while let Some(incoming) = endpoint.accept().await {
            tokio::task::spawn_local(connection(incoming, files.clone()));
        }
        Ok(())
    })
}

async fn connection(incoming: quinn::Incoming, files: Rc<Files>) {
    let Ok(conn) = incoming.await else {
        return;
    };
    // The control stream with its SETTINGS; it must stay open as long as
    // the connection.
    let Ok(mut control) = conn.open_uni().await else {
        return;
    };
    let mut preface = Vec::new();
    frame::write_control_preface(HEAD_MAX as u64, &mut preface);
    if control.write_all(&preface).await.is_err() {
        return;
    }
    while let Ok((send, recv)) = conn.accept_bi().await {
        tokio::task::spawn_local(request(send, recv, files.clone()));
    }
    drop(control);
}

async fn request(mut send: quinn::SendStream, mut recv: quinn::RecvStream, files: Rc<Files>) {
    let mut reader = HeadReader::default();
    // A head and a Huffman buffer kept by the worker, as the daemon keeps
    // them per connection: a floor that allocated them per request would
    // flatter every server measured against it.
    let mut req = files.heads.borrow_mut().pop().unwrap_or_default();
    loop {
        let Ok(Some(chunk)) = recv.read_chunk(HEAD_MAX, true).await else {
            return;
        };
        match reader.receive(&chunk.bytes, HEAD_MAX) {
            Ok(Head::More) => continue,
            Ok(Head::Section(section)) => {
                req.begin(false, HEAD_MAX);
                let huffman = &mut files.huffman.borrow_mut();
                huffman.clear();
                if qpack::decode(section, &mut req, huffman).is_err() {
                    return;
                }
                req.finish();
                break;
            }
            Ok(Head::TooLarge) | Err(_) => return,
        }
    }
    let _ = recv.stop(0u32.into());
    let is_head = match req.method() {
        _ if req.malformed().is_some() => None,
        b"GET" => Some(false),
        b"HEAD" => Some(true),
        _ => None,
    };
    let (Some(is_head), Some(target)) = (is_head, req.path()) else {
        let _ = send.reset(quinn::VarInt::from_u64(Code::H3_REQUEST_REJECTED.0).unwrap());
        return;
    };
    let path = target.split(|&b| b == b'?').next().unwrap_or_default();
    let mut chunks = match files.entry(path) {
        Some(entry) if is_head => [entry.head.clone(), Bytes::new()],
        Some(entry) => [entry.head.clone(), entry.body.clone()],
        None => [not_found(), Bytes::new()],
    };
    if send.write_all_chunks(&mut chunks).await.is_ok() {
        let _ = send.finish();
    }
    let mut heads = files.heads.borrow_mut();
    if heads.len() < KEPT_HEADS {
        heads.push(req);
    }
}

/// Request heads a worker keeps for its next streams.
const KEPT_HEADS: usize = 64;

/// A HEADERS frame of `:status 404` and `content-length: 0`.
fn not_found() -> Bytes {
    let mut section = Vec::new();
    qpack::begin(&mut section);
    qpack::status(404, &mut section);
    qpack::field(b"content-length", b"0", &mut section);
    frame_bytes(frame::HEADERS, &section)
}

/// A frame of `kind` with `payload`.
fn frame_bytes(kind: u64, payload: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(payload.len() + 16);
    frame::write_header(kind, payload.len() as u64, &mut out);
    out.extend_from_slice(payload);
    out.into()
}

/// One worker's files, each read once.
struct Files {
    root: PathBuf,
    known: RefCell<HashMap<Vec<u8>, Option<Rc<Entry>>>>,
    /// Request heads answered, for the next streams.
    heads: RefCell<Vec<h2wire::Request>>,
    /// Where a head's Huffman-coded strings are decoded.
    huffman: RefCell<Vec<u8>>,
}

/// One file's answer: its HEADERS frame and the DATA frame with its bytes.
struct Entry {
    head: Bytes,
    body: Bytes,
}

impl Files {
    fn entry(&self, path: &[u8]) -> Option<Rc<Entry>> {
        if let Some(known) = self.known.borrow().get(path) {
            return known.clone();
        }
        let loaded = self.load(path).map(Rc::new);
        self.known
            .borrow_mut()
            .insert(path.to_vec(), loaded.clone());
        loaded
    }

    fn load(&self, path: &[u8]) -> Option<Entry> {
        let rel = path.strip_prefix(b"/")?;
        if rel.split(|&b| b == b'/').any(|c| c == b"..") {
            return None;
        }
        let full = self.root.join(OsStr::from_bytes(rel));
        let meta = std::fs::metadata(&full).ok()?;
        if !meta.is_file() {
            return None;
        }
        let bytes = std::fs::read(&full).ok()?;
        let mtime = meta.modified().ok()?;
        let etag = format!(
            "\"{:x}-{:x}\"",
            mtime
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            bytes.len()
        );
        // The fields of the TCP ceiling's head, as the daemon's HTTP/3
        // writes them: static-table references and plain literals.
        let mut section = Vec::new();
        qpack::begin(&mut section);
        qpack::status(200, &mut section);
        let date = httpdate::fmt_http_date(std::time::SystemTime::now());
        let length = bytes.len().to_string();
        for (name, value) in [
            (&b"server"[..], &b"ceiling"[..]),
            (b"date", date.as_bytes()),
            (b"last-modified", httpdate::fmt_http_date(mtime).as_bytes()),
            (b"etag", etag.as_bytes()),
            (b"cache-control", b"no-cache"),
            (b"content-type", b"application/octet-stream"),
            (b"content-length", length.as_bytes()),
            (b"accept-ranges", b"bytes"),
        ] {
            qpack::field(name, value, &mut section);
        }
        let head = frame_bytes(frame::HEADERS, &section);
        let body = frame_bytes(frame::DATA, &bytes);
        Some(Entry { head, body })
    }
}

//! The ceiling over HTTP/3: what quinn itself costs per request, the
//! floor of any HTTP/3 server built on it (the daemon's included).
//!
//! Each worker thread has its own `SO_REUSEPORT` UDP socket and quinn
//! endpoint, with the transport limits of the daemon's `[http3]`
//! defaults. A connection gets the control stream HTTP/3 requires (an
//! empty SETTINGS: no dynamic QPACK table); each request stream is read
//! until its HEADERS frame is in, the `:method` and `:path` are taken
//! from its QPACK field section (static table and literals, Huffman or
//! not: what a client with no dynamic table sends), and the answer is
//! written in one call: a HEADERS frame made once per file (static-table
//! references and plain literals) and one DATA frame with the whole file,
//! read once into memory. Nothing else: no revalidation, ranges, logging
//! or counting.

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
use bytes::{BufMut, Bytes, BytesMut};
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
    // The control stream (type 0x00) with an empty SETTINGS frame; it
    // must stay open as long as the connection.
    let Ok(mut control) = conn.open_uni().await else {
        return;
    };
    if control.write_all(&[0x00, 0x04, 0x00]).await.is_err() {
        return;
    }
    while let Ok((send, recv)) = conn.accept_bi().await {
        tokio::task::spawn_local(request(send, recv, files.clone()));
    }
    drop(control);
}

async fn request(mut send: quinn::SendStream, mut recv: quinn::RecvStream, files: Rc<Files>) {
    let mut head = Vec::new();
    let fields = loop {
        if let Some(fields) = headers_frame(&head) {
            break fields;
        }
        match recv.read_chunk(HEAD_MAX, true).await {
            Ok(Some(chunk)) if head.len() + chunk.bytes.len() <= HEAD_MAX => {
                head.extend_from_slice(&chunk.bytes)
            }
            _ => return,
        }
    };
    let _ = recv.stop(0u32.into());
    let Some((is_head, path)) = method_and_path(fields) else {
        let _ = send.reset(0x10c_u32.into()); // H3_REQUEST_REJECTED
        return;
    };
    let answer = match files.entry(&path) {
        Some(entry) if is_head => vec![entry.head.clone()],
        Some(entry) => vec![entry.head.clone(), entry.body.clone()],
        None => vec![Bytes::from_static(NOT_FOUND)],
    };
    let mut chunks = answer;
    if send.write_all_chunks(&mut chunks).await.is_ok() {
        let _ = send.finish();
    }
}

/// HEADERS frame: `:status 404` (static 27), `content-length 0` (static 4).
const NOT_FOUND: &[u8] = &[0x01, 0x04, 0x00, 0x00, 0xc0 | 27, 0xc0 | 4];

/// The field section of the HEADERS frame at the start of `buf`, once it
/// is all there (an unknown frame type before it is skipped).
fn headers_frame(buf: &[u8]) -> Option<&[u8]> {
    let mut pos = 0;
    loop {
        let kind = varint(buf, &mut pos)?;
        let len = usize::try_from(varint(buf, &mut pos)?).ok()?;
        let payload = buf.get(pos..pos.checked_add(len)?)?;
        if kind == 0x01 {
            return Some(payload);
        }
        pos += len;
    }
}

/// A QUIC variable-length integer at `*pos`.
fn varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let first = *buf.get(*pos)?;
    let len = 1usize << (first >> 6);
    let bytes = buf.get(*pos..*pos + len)?;
    *pos += len;
    Some(
        bytes[1..]
            .iter()
            .fold(u64::from(first & 0x3f), |v, &b| (v << 8) | u64::from(b)),
    )
}

/// Whether the request is a HEAD (else a GET), and its path without the
/// query, from a field section that refers to no dynamic table.
fn method_and_path(section: &[u8]) -> Option<(bool, Vec<u8>)> {
    // The section prefix: Required Insert Count, then the Base.
    let mut pos = 0;
    hpack::decode_integer(section, &mut pos, 8).ok()?;
    hpack::decode_integer(section, &mut pos, 7).ok()?;
    let (mut method, mut path) = (None, None);
    while pos < section.len() {
        let first = section[pos];
        let (name, value) = if first & 0x80 != 0 {
            // Indexed field line; only the static table (T = 1) is known.
            if first & 0x40 == 0 {
                return None;
            }
            let index = hpack::decode_integer(section, &mut pos, 6).ok()?;
            match index {
                17 => (Name::Method, b"GET".to_vec()),
                18 => (Name::Method, b"HEAD".to_vec()),
                1 => (Name::Path, b"/".to_vec()),
                _ => (Name::Other, Vec::new()),
            }
        } else if first & 0x40 != 0 {
            // Literal with a name reference.
            if first & 0x10 == 0 {
                return None;
            }
            let index = hpack::decode_integer(section, &mut pos, 4).ok()?;
            let name = match index {
                1 => Name::Path,
                15..=21 => Name::Method,
                _ => Name::Other,
            };
            (name, string(section, &mut pos, 7)?)
        } else if first & 0x20 != 0 {
            // Literal with a literal name.
            let name = string(section, &mut pos, 3)?;
            let value = string(section, &mut pos, 7)?;
            let name = match &name[..] {
                b":path" => Name::Path,
                b":method" => Name::Method,
                _ => Name::Other,
            };
            (name, value)
        } else {
            return None; // post-base forms need a dynamic table
        };
        match name {
            Name::Method => method = Some(value),
            Name::Path => path = Some(value),
            Name::Other => {}
        }
    }
    let is_head = match &method?[..] {
        b"GET" => false,
        b"HEAD" => true,
        _ => return None,
    };
    let mut path = path?;
    if let Some(q) = path.iter().position(|&b| b == b'?') {
        path.truncate(q);
    }
    Some((is_head, path))
}

enum Name {
    Method,
    Path,
    Other,
}

/// A string literal whose length has an `n`-bit prefix, the Huffman flag
/// the bit above it.
fn string(buf: &[u8], pos: &mut usize, n: u32) -> Option<Vec<u8>> {
    let huffman = *buf.get(*pos)? & (1 << n) != 0;
    let len = hpack::decode_integer(buf, pos, n).ok()?;
    let raw = buf.get(*pos..pos.checked_add(len)?)?;
    *pos += len;
    if huffman {
        let mut decoded = Vec::with_capacity(len * 2);
        hpack::huffman_decode(raw, &mut decoded).ok()?;
        Some(decoded)
    } else {
        Some(raw.to_vec())
    }
}

/// One worker's files, each read once.
struct Files {
    root: PathBuf,
    known: RefCell<HashMap<Vec<u8>, Option<Rc<Entry>>>>,
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
        // The fields of the TCP ceiling's head, as QPACK static-table
        // references with plain (not Huffman) literal values.
        let mut section = vec![0x00, 0x00, 0xc0 | 25]; // :status 200
        let mut literal = |index: usize, value: &[u8]| {
            hpack::encode_integer(index, 4, 0x50, &mut section);
            hpack::encode_integer(value.len(), 7, 0x00, &mut section);
            section.extend_from_slice(value);
        };
        literal(92, b"ceiling"); // server
        literal(
            6,
            httpdate::fmt_http_date(std::time::SystemTime::now()).as_bytes(),
        ); // date
        literal(10, httpdate::fmt_http_date(mtime).as_bytes()); // last-modified
        literal(7, etag.as_bytes()); // etag
        literal(36, b"no-cache"); // cache-control
        literal(44, b"application/octet-stream"); // content-type
        literal(4, bytes.len().to_string().as_bytes()); // content-length
        section.push(0xc0 | 32); // accept-ranges: bytes
        let mut head = BytesMut::new();
        frame_header(&mut head, 0x01, section.len());
        head.put_slice(&section);
        let mut body = BytesMut::with_capacity(bytes.len() + 16);
        frame_header(&mut body, 0x00, bytes.len());
        body.put_slice(&bytes);
        Some(Entry {
            head: head.freeze(),
            body: body.freeze(),
        })
    }
}

/// A frame's type and length as QUIC variable-length integers.
fn frame_header(dst: &mut BytesMut, kind: u8, len: usize) {
    dst.put_u8(kind);
    let len = len as u64;
    match len {
        0..=63 => dst.put_u8(len as u8),
        64..=16_383 => dst.put_u16(0x4000 | len as u16),
        16_384..=1_073_741_823 => dst.put_u32(0x8000_0000 | len as u32),
        _ => dst.put_u64(0xc000_0000_0000_0000 | len),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_section_gives_its_method_and_path() {
        // :method GET (static 17), :scheme https (23), :authority literal
        // with name ref 0, :path literal "/a?x" with name ref 1.
        let mut section = vec![0x00, 0x00, 0xc0 | 17, 0xc0 | 23];
        section.extend_from_slice(&[0x50, 0x04]);
        section.extend_from_slice(b"host");
        section.extend_from_slice(&[0x51, 0x04]);
        section.extend_from_slice(b"/a?x");
        assert_eq!(method_and_path(&section), Some((false, b"/a".to_vec())));
        section[2] = 0xc0 | 18;
        assert_eq!(method_and_path(&section), Some((true, b"/a".to_vec())));
        // A dynamic-table reference is refused.
        assert_eq!(method_and_path(&[0x00, 0x00, 0x80 | 3]), None);
    }

    #[test]
    fn a_headers_frame_is_found_once_whole() {
        let mut head = BytesMut::new();
        frame_header(&mut head, 0x01, 300);
        head.put_slice(&[0u8; 300]);
        assert_eq!(headers_frame(&head).map(<[u8]>::len), Some(300));
        assert_eq!(headers_frame(&head[..100]), None);
    }
}

//! Where clients come from: `listen`, `admin_listen`, `workers` (each
//! accepts on every listener), `trusted_proxies` and `proxy_protocol`
//! (top-level keys; the HTTPS listener is `tls.rs`'s).

use super::restart::Restart;
use super::values::{addr, positive_dur, range};
use super::{err, ConfigError};
use crate::http::forwarded::IpNet;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

/// The listener keys of the top table.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(default)]
pub struct ListenConfig {
    /// HTTP listener addresses: one, or several separated by commas (in a
    /// file, also a TOML array); `unix:PATH` is a Unix domain socket.
    pub listen: String,
    /// Permissions of the Unix domain sockets `listen` names (octal).
    pub unix_socket_mode: String,
    /// Owner of those sockets, `USER`, `USER:GROUP` or `:GROUP` (names or
    /// numbers); empty: the daemon's own.
    pub unix_socket_owner: String,
    /// Admin listener (metrics, health).
    pub admin_listen: String,
    /// Worker threads; 0 = one per CPU.
    pub workers: u64,
    /// Peers (addresses or CIDR blocks) whose `Forwarded` / `X-Forwarded-For`
    /// name the client in the access log.
    pub trusted_proxies: Vec<String>,
    /// Peers (addresses or CIDR blocks) that put a PROXY protocol header
    /// (v1 or v2) before each connection on the TCP listeners; empty: off.
    pub proxy_protocol: Vec<String>,
    /// Time such a peer has to send the whole header.
    pub proxy_protocol_timeout: String,
}

/// The default `listen` port; another one moves the admin port along.
pub(super) const DEFAULT_PORT: u16 = 8080;

impl Default for ListenConfig {
    fn default() -> Self {
        ListenConfig {
            listen: format!("127.0.0.1:{DEFAULT_PORT}"),
            unix_socket_mode: "0660".into(),
            unix_socket_owner: String::new(),
            admin_listen: "127.0.0.1:8081".into(),
            workers: 0,
            trusted_proxies: Vec::new(),
            proxy_protocol: Vec::new(),
            proxy_protocol_timeout: "5s".into(),
        }
    }
}

/// Sockets are bound, and workers spawned, once.
pub(super) const RESTART: &[Restart] = &[
    Restart::key("listen"),
    Restart::key("unix_socket_mode"),
    Restart::key("unix_socket_owner"),
    Restart::key("admin_listen"),
    Restart::key("workers"),
];

impl ListenConfig {
    /// `listen` (its first TCP address, its other TCP addresses, its Unix
    /// domain sockets) and `admin_listen`.
    pub(super) fn addrs(&self, e: &mut Vec<ConfigError>) -> Listen {
        let mut tcp = Vec::new();
        let mut unix = Vec::new();
        for a in self.listen.split(',').map(str::trim) {
            match a.strip_prefix("unix:") {
                Some("") => e.push(err("listen", "`unix:` needs a path")),
                Some(path) => unix.push(std::path::PathBuf::from(path)),
                None => tcp.push(addr("listen", a, e)),
            }
        }
        for (i, a) in tcp.iter().enumerate() {
            if tcp[..i].contains(a) {
                e.push(err("listen", format!("{a} is named twice")));
            }
        }
        for (i, p) in unix.iter().enumerate() {
            if unix[..i].contains(p) {
                e.push(err(
                    "listen",
                    format!("unix:{} is named twice", p.display()),
                ));
            }
        }
        let mut tcp = tcp.into_iter();
        Listen {
            first: tcp.next(),
            more: tcp.collect(),
            unix: UnixSockets {
                paths: unix,
                mode: self.unix_socket_mode(e),
                owner: self.unix_socket_owner(e),
            },
            admin: addr("admin_listen", &self.admin_listen, e),
        }
    }

    fn unix_socket_mode(&self, e: &mut Vec<ConfigError>) -> u32 {
        match u32::from_str_radix(self.unix_socket_mode.trim_start_matches("0o"), 8) {
            Ok(m) if m <= 0o777 => m,
            _ => {
                e.push(err(
                    "unix_socket_mode",
                    format!(
                        "`{}` is not permissions in octal, as 0660",
                        self.unix_socket_mode
                    ),
                ));
                0o660
            }
        }
    }

    fn unix_socket_owner(&self, e: &mut Vec<ConfigError>) -> Owner {
        let o = self.unix_socket_owner.trim();
        if o.is_empty() {
            return Owner::default();
        }
        let (user, group) = o.split_once(':').unwrap_or((o, ""));
        let mut id = |kind: &str, name: &str, look: fn(&str) -> Option<u32>| -> Option<u32> {
            if name.is_empty() {
                return None;
            }
            let found = name.parse().ok().or_else(|| look(name));
            if found.is_none() {
                e.push(err(
                    "unix_socket_owner",
                    format!("no {kind} named `{name}`"),
                ));
            }
            found
        };
        let uid = id("user", user, user_id);
        let gid = id("group", group, group_id);
        Owner { uid, gid }
    }

    /// `workers`, 0 read as one per CPU.
    pub(super) fn workers(&self, e: &mut Vec<ConfigError>) -> usize {
        match range("workers", self.workers, 0, 1024, e) {
            0 => std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            n => n,
        }
    }

    /// `trusted_proxies`.
    pub(super) fn trusted_proxies(&self, e: &mut Vec<ConfigError>) -> Vec<IpNet> {
        nets("trusted_proxies", &self.trusted_proxies, e)
    }

    /// `proxy_protocol` and its timeout.
    pub(super) fn proxy_protocol(&self, e: &mut Vec<ConfigError>) -> ProxyProtocol {
        ProxyProtocol {
            from: nets("proxy_protocol", &self.proxy_protocol, e),
            timeout: positive_dur("proxy_protocol_timeout", &self.proxy_protocol_timeout, e),
        }
    }
}

/// What `listen` and `admin_listen` name.
pub(super) struct Listen {
    pub first: Option<SocketAddr>,
    pub more: Vec<SocketAddr>,
    pub unix: UnixSockets,
    pub admin: SocketAddr,
}

/// The Unix domain sockets `listen` names, and how they are made.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnixSockets {
    /// Their paths, in `listen`'s order.
    pub paths: Vec<std::path::PathBuf>,
    /// `unix_socket_mode`.
    pub mode: u32,
    /// `unix_socket_owner`.
    pub owner: Owner,
}

/// A file's owner to set; `None` keeps that part.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Owner {
    /// The user id.
    pub uid: Option<u32>,
    /// The group id.
    pub gid: Option<u32>,
}

/// A user's id by name (the system's user database).
fn user_id(name: &str) -> Option<u32> {
    // SAFETY: getpwnam_r has the shape `id_by_name` calls, with `passwd`.
    unsafe { id_by_name(name, libc::getpwnam_r, |p: &libc::passwd| p.pw_uid) }
}

/// A group's id by name (the system's group database).
fn group_id(name: &str) -> Option<u32> {
    // SAFETY: getgrnam_r has the shape `id_by_name` calls, with `group`.
    unsafe { id_by_name(name, libc::getgrnam_r, |g: &libc::group| g.gr_gid) }
}

/// The reentrant lookup of a user or group database entry by name.
type Lookup<T> = unsafe extern "C" fn(
    *const libc::c_char,
    *mut T,
    *mut libc::c_char,
    libc::size_t,
    *mut *mut T,
) -> libc::c_int;

/// `name`'s entry through `lookup`, and the id `id` reads from it.
///
/// # Safety
///
/// `lookup` must be getpwnam_r or getgrnam_r with `T` its entry type (a C
/// struct of integers and pointers, for which all zeros is a valid value).
unsafe fn id_by_name<T>(name: &str, lookup: Lookup<T>, id: fn(&T) -> u32) -> Option<u32> {
    let name = std::ffi::CString::new(name).ok()?;
    let mut buf = vec![0 as libc::c_char; 16384];
    // SAFETY: the caller's promise; the lookup writes only into `entry`
    // and `buf` (its length given), and `result` points at `entry` or is
    // null when none is found.
    unsafe {
        let mut entry: T = std::mem::zeroed();
        let mut result = std::ptr::null_mut();
        let rc = lookup(
            name.as_ptr(),
            &mut entry,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        );
        (rc == 0 && !result.is_null()).then(|| id(&entry))
    }
}

/// Who may put a PROXY protocol header before a connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyProtocol {
    /// `proxy_protocol`: a connection from one of these must start with
    /// the header; from anyone else none is read.
    pub from: Vec<IpNet>,
    /// `proxy_protocol_timeout`.
    pub timeout: std::time::Duration,
}

fn nets(key: &str, list: &[String], e: &mut Vec<ConfigError>) -> Vec<IpNet> {
    list.iter()
        .filter_map(|p| IpNet::parse(p).map_err(|m| e.push(err(key, m))).ok())
        .collect()
}

/// The admin port `-p PORT` implies: the next one (`0` stays `0`, any free
/// port); `None` for 65535.
pub fn admin_port_for(port: u16) -> Option<u16> {
    if port == 0 {
        Some(0)
    } else {
        port.checked_add(1)
    }
}

/// `listen` with its port replaced (`host:8080` -> `host:PORT`, `8080` ->
/// `:PORT`); a Unix socket (`unix:PATH`) has none and stays as it is.
pub(super) fn with_port(listen: &str, port: u16) -> String {
    if listen.starts_with("unix:") {
        return listen.to_string();
    }
    let host = match listen.rsplit_once(':') {
        Some((host, _)) if !listen.ends_with(']') => host,
        _ if listen.bytes().all(|b| b.is_ascii_digit()) => "",
        _ => listen,
    };
    format!("{host}:{port}")
}

//! Readings of a value that many keys share: durations, bounded integers
//! and listen addresses. Each pushes its problem under its key and gives a
//! stand-in, so one run reports every problem.

use super::{err, ConfigError};
use std::net::SocketAddr;
use std::time::Duration;

/// Parses `10s`, `500ms`, `2m`, `1h`, `0.5s` (a bare number is seconds)
/// and humantime's compound forms (`1m30s`, `1h 15m`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if let Ok(d) = simple_duration(s) {
        return Ok(d);
    }
    match humantime::parse_duration(s) {
        Ok(d) if d.as_secs() <= 1_000_000_000 => Ok(d),
        Ok(_) => Err(format!("`{s}` is out of range")),
        Err(_) => simple_duration(s),
    }
}

fn simple_duration(s: &str) -> Result<Duration, String> {
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a duration (examples: 500ms, 10s, 2m, 1m30s)"))?;
    let secs = match unit.trim() {
        "ms" => n / 1000.0,
        "" | "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        other => {
            return Err(format!(
                "unknown duration unit `{other}` in `{s}` (use ms, s, m or h)"
            ))
        }
    };
    if !secs.is_finite() || secs > 1e9 {
        return Err(format!("`{s}` is out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parses a listen address: `host:port` (a name is resolved; the first
/// address wins), `[v6]:port`, `:PORT` for every IPv4 interface (as
/// Caddy's and Go's `:8080` mean), or a bare `PORT` on 127.0.0.1, as
/// `-p PORT` and the default are: a port alone never opens the server to
/// the network.
pub fn parse_listen(v: &str) -> Result<SocketAddr, String> {
    let v = v.trim();
    if let Ok(a) = v.parse::<SocketAddr>() {
        return Ok(a);
    }
    let (port_only, every_interface) = match v.strip_prefix(':') {
        Some(p) => (p, true),
        None => (v, false),
    };
    if !port_only.is_empty() && port_only.bytes().all(|b| b.is_ascii_digit()) {
        let host = if every_interface {
            [0, 0, 0, 0]
        } else {
            [127, 0, 0, 1]
        };
        return port_only
            .parse::<u16>()
            .map(|p| SocketAddr::from((host, p)))
            .map_err(|_| format!("`{v}`: port out of range (0-65535)"));
    }
    let forms = "use host:port, [v6]:port, :port or port";
    let Some((host, port)) = v.rsplit_once(':') else {
        return Err(format!("`{v}` has no port ({forms})"));
    };
    let port: u16 = port
        .parse()
        .map_err(|_| format!("`{v}`: `{port}` is not a port ({forms})"))?;
    use std::net::ToSocketAddrs;
    match (host, port).to_socket_addrs() {
        Ok(mut addrs) => addrs
            .next()
            .ok_or_else(|| format!("`{host}` resolves to no address")),
        Err(e) => Err(format!("cannot resolve `{host}`: {e} ({forms})")),
    }
}

/// `key`'s address; 127.0.0.1:0 in its place when it is wrong.
pub(super) fn addr(key: &str, v: &str, errors: &mut Vec<ConfigError>) -> SocketAddr {
    parse_listen(v).unwrap_or_else(|e| {
        errors.push(err(key, e));
        SocketAddr::from(([127, 0, 0, 1], 0))
    })
}

/// `key`'s duration; zero in its place when it is wrong.
pub(super) fn dur(key: &str, v: &str, errors: &mut Vec<ConfigError>) -> Duration {
    parse_duration(v).unwrap_or_else(|e| {
        errors.push(err(key, e));
        Duration::ZERO
    })
}

/// `key`'s duration, which must not be zero.
pub(super) fn positive_dur(key: &str, v: &str, errors: &mut Vec<ConfigError>) -> Duration {
    let d = dur(key, v, errors);
    if d.is_zero() && !errors.iter().any(|x| x.key == key) {
        errors.push(err(key, "must be greater than zero"));
    }
    d
}

/// `key`'s integer, which must lie in `lo..=hi`.
pub(super) fn range(key: &str, v: u64, lo: u64, hi: u64, errors: &mut Vec<ConfigError>) -> usize {
    if v < lo || v > hi {
        errors.push(err(key, format!("{v} is out of range {lo}..={hi}")));
    }
    v as usize
}

/// Levenshtein distance (names are short; quadratic is fine).
pub(super) fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

//! The PROXY protocol header (HAProxy's, versions 1 and 2) a TCP load
//! balancer puts before a connection's first byte to name the client it
//! accepted. Pure: the caller peeks at the socket, this says how long the
//! header is and which address it names, and the caller then consumes
//! exactly that much (the rest is the client's TLS or HTTP).
//!
//! ```
//! use fileserver::http::proxy_protocol::{parse, Header};
//! let v1 = b"PROXY TCP4 203.0.113.7 192.0.2.1 51000 443\r\nGET / HTTP/1.1\r\n";
//! let Ok(Some(h)) = parse(v1) else { panic!() };
//! assert_eq!(h.len, 44);
//! assert_eq!(h.source.unwrap().to_string(), "203.0.113.7:51000");
//! ```

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// A complete header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Its length in octets: what to consume before the client's bytes.
    pub len: usize,
    /// The client it names; `None` for a LOCAL (health check) or UNKNOWN
    /// header, whose connection is the balancer's own.
    pub source: Option<SocketAddr>,
}

/// Why a header is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The bytes are neither version's signature.
    NotProxy,
    /// The header is malformed or longer than allowed.
    Malformed(&'static str),
}

/// A version 1 header's longest form (the specification's 107 octets).
const V1_MAX: usize = 107;
/// Version 2's signature.
const V2_SIG: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";
/// Octets of TLVs and addresses a version 2 header may carry here.
const V2_MAX_BODY: usize = 4096;

/// The header at the start of `buf`: `Ok(None)` while more bytes are
/// needed to tell.
pub fn parse(buf: &[u8]) -> Result<Option<Header>, Error> {
    let sig_len = buf.len().min(V2_SIG.len());
    if buf[..sig_len] == V2_SIG[..sig_len] {
        return if sig_len < V2_SIG.len() {
            Ok(None)
        } else {
            v2(buf)
        };
    }
    let prefix = buf.len().min(6);
    if buf[..prefix] != b"PROXY "[..prefix] {
        return Err(Error::NotProxy);
    }
    v1(buf)
}

fn v1(buf: &[u8]) -> Result<Option<Header>, Error> {
    let window = &buf[..buf.len().min(V1_MAX)];
    let Some(end) = window.windows(2).position(|w| w == b"\r\n") else {
        return if buf.len() >= V1_MAX {
            Err(Error::Malformed(
                "a version 1 header longer than 107 octets",
            ))
        } else {
            Ok(None)
        };
    };
    let line = std::str::from_utf8(&buf[6..end]).map_err(|_| Error::Malformed("not text"))?;
    let mut f = line.split(' ');
    let proto = f.next().unwrap_or_default();
    if proto == "UNKNOWN" {
        return Ok(Some(Header {
            len: end + 2,
            source: None,
        }));
    }
    let (src, _dst, sport, dport) = match (f.next(), f.next(), f.next(), f.next(), f.next()) {
        (Some(a), Some(b), Some(c), Some(d), None) => (a, b, c, d),
        _ => return Err(Error::Malformed("a version 1 header needs 4 fields")),
    };
    let ip: IpAddr = match proto {
        "TCP4" => src
            .parse::<Ipv4Addr>()
            .map(IpAddr::V4)
            .map_err(|_| Error::Malformed("not an IPv4 source"))?,
        "TCP6" => src
            .parse::<Ipv6Addr>()
            .map(IpAddr::V6)
            .map_err(|_| Error::Malformed("not an IPv6 source"))?,
        _ => return Err(Error::Malformed("neither TCP4, TCP6 nor UNKNOWN")),
    };
    let (sport, _) = (port(sport)?, port(dport)?);
    Ok(Some(Header {
        len: end + 2,
        source: Some(SocketAddr::new(ip, sport)),
    }))
}

/// A decimal port without a sign or leading zero.
fn port(s: &str) -> Result<u16, Error> {
    let ok = !s.is_empty()
        && s.bytes().all(|b| b.is_ascii_digit())
        && !(s.len() > 1 && s.starts_with('0'));
    s.parse()
        .ok()
        .filter(|_| ok)
        .ok_or(Error::Malformed("not a port"))
}

fn v2(buf: &[u8]) -> Result<Option<Header>, Error> {
    if buf.len() < 16 {
        return Ok(None);
    }
    let (ver_cmd, family) = (buf[12], buf[13]);
    if ver_cmd >> 4 != 2 {
        return Err(Error::Malformed("not version 2"));
    }
    let body = usize::from(u16::from_be_bytes([buf[14], buf[15]]));
    if body > V2_MAX_BODY {
        return Err(Error::Malformed(
            "a version 2 header longer than 4096 octets",
        ));
    }
    let len = 16 + body;
    if buf.len() < len {
        return Ok(None);
    }
    let addrs = &buf[16..len];
    let local = match ver_cmd & 0xf {
        0 => true,
        1 => false,
        _ => return Err(Error::Malformed("neither LOCAL nor PROXY")),
    };
    let source = match family >> 4 {
        _ if local => None,
        // AF_UNSPEC (and AF_UNIX): the balancer's own connection.
        0 | 3 => None,
        1 if addrs.len() >= 12 => {
            let ip: [u8; 4] = addrs[0..4].try_into().unwrap_or_default();
            let port = u16::from_be_bytes([addrs[8], addrs[9]]);
            Some(SocketAddr::new(IpAddr::from(ip), port))
        }
        2 if addrs.len() >= 36 => {
            let ip: [u8; 16] = addrs[0..16].try_into().unwrap_or_default();
            let port = u16::from_be_bytes([addrs[32], addrs[33]]);
            Some(SocketAddr::new(IpAddr::from(ip), port))
        }
        1 | 2 => return Err(Error::Malformed("addresses shorter than their family")),
        _ => return Err(Error::Malformed("an unknown address family")),
    };
    Ok(Some(Header { len, source }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2_header(cmd: u8, fam: u8, addrs: &[u8]) -> Vec<u8> {
        let mut h = V2_SIG.to_vec();
        h.push(0x20 | cmd);
        h.push(fam);
        h.extend_from_slice(&(addrs.len() as u16).to_be_bytes());
        h.extend_from_slice(addrs);
        h
    }

    #[test]
    fn version_1() {
        let h = b"PROXY TCP6 2001:db8::7 2001:db8::1 4000 443\r\n\x16\x03";
        let got = parse(h).unwrap().unwrap();
        assert_eq!(got.len, h.len() - 2);
        assert_eq!(got.source.unwrap().to_string(), "[2001:db8::7]:4000");
        assert_eq!(parse(b"PROXY UNKNOWN\r\n").unwrap().unwrap().source, None);
        for partial in [&b"PRO"[..], b"PROXY TCP4 1.2.3.4", b""] {
            assert_eq!(parse(partial), Ok(None), "{partial:?}");
        }
        for bad in [
            &b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n"[..],
            b"PROXY TCP4 ::1 ::1 1 2\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n",
            b"PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n",
        ] {
            assert!(matches!(parse(bad), Err(Error::Malformed(_))), "{bad:?}");
        }
        assert!(matches!(parse(&[b'P'; 200][..]), Err(Error::NotProxy)));
        let mut long = b"PROXY ".to_vec();
        long.extend_from_slice(&[b'x'; 120]);
        assert!(matches!(parse(&long), Err(Error::Malformed(_))));
        assert_eq!(parse(b"GET / HTTP/1.1\r\n"), Err(Error::NotProxy));
        assert_eq!(parse(b"\x16\x03\x01"), Err(Error::NotProxy));
    }

    #[test]
    fn version_2() {
        let mut a = vec![203, 0, 113, 7, 192, 0, 2, 1];
        a.extend_from_slice(&51000u16.to_be_bytes());
        a.extend_from_slice(&443u16.to_be_bytes());
        a.extend_from_slice(&[0x20, 0, 1, 0x42]); // a TLV, skipped
        let h = v2_header(1, 0x11, &a);
        let got = parse(&h).unwrap().unwrap();
        assert_eq!(
            (got.len, got.source.unwrap().to_string()),
            (h.len(), "203.0.113.7:51000".into())
        );
        for cut in 0..h.len() {
            assert_eq!(parse(&h[..cut]), Ok(None), "cut at {cut}");
        }
        let mut a6 = vec![0x20, 0x01, 0x0d, 0xb8];
        a6.resize(16, 0);
        a6[15] = 7;
        a6.extend_from_slice(&[0; 16]);
        a6.extend_from_slice(&[0x10, 0x00, 0x01, 0xbb]);
        let got = parse(&v2_header(1, 0x21, &a6)).unwrap().unwrap();
        assert_eq!(got.source.unwrap().to_string(), "[2001:db8::7]:4096");
        assert_eq!(
            parse(&v2_header(0, 0x11, &a)).unwrap().unwrap().source,
            None,
            "LOCAL"
        );
        assert_eq!(
            parse(&v2_header(1, 0x00, &[])).unwrap().unwrap().source,
            None,
            "UNSPEC"
        );
        assert!(matches!(
            parse(&v2_header(1, 0x11, &a[..8])),
            Err(Error::Malformed(_))
        ));
        assert!(matches!(
            parse(&v2_header(2, 0x11, &a)),
            Err(Error::Malformed(_))
        ));
        let mut v3 = v2_header(1, 0x11, &a);
        v3[12] = 0x31;
        assert!(matches!(parse(&v3), Err(Error::Malformed(_))));
        let mut huge = v2_header(1, 0x11, &a);
        huge[14..16].copy_from_slice(&5000u16.to_be_bytes());
        assert!(matches!(parse(&huge), Err(Error::Malformed(_))));
    }
}

//! The client address behind trusted reverse proxies (RFC 7239 `Forwarded`,
//! or `X-Forwarded-For`), for the access log. Pure: the caller passes the
//! socket peer, the header values and the configured proxies.
//!
//! A forwarding header is believed only when the socket peer is a trusted
//! proxy, and then read from the right: each proxy appends the address it
//! received from, so the rightmost address that is not itself a trusted
//! proxy is the client. Anything to its left was written by that client
//! and may be forged.

use std::net::IpAddr;

pub use siterules::IpNet;

/// The client address to log: `peer`, or, when `peer` is a trusted proxy,
/// the rightmost untrusted address of `Forwarded` (preferred) or
/// `X-Forwarded-For`. An entry that is not an address (`unknown`, an
/// obfuscated name, garbage) stops the walk at the last address read.
pub fn client_addr(
    peer: IpAddr,
    trusted: &[IpNet],
    forwarded: Option<&[u8]>,
    x_forwarded_for: Option<&[u8]>,
) -> IpAddr {
    let is_trusted = |ip: IpAddr| trusted.iter().any(|n| n.contains(ip));
    if trusted.is_empty() || !is_trusted(peer) {
        return peer;
    }
    // Right to left, without collecting: the nearest hop comes first.
    match (forwarded, x_forwarded_for) {
        (Some(f), _) => rightmost_untrusted(
            peer,
            is_trusted,
            f.rsplit(|&b| b == b',').filter_map(forwarded_for),
        ),
        (None, Some(x)) => rightmost_untrusted(peer, is_trusted, x.rsplit(|&b| b == b',')),
        (None, None) => peer,
    }
}

/// Walks `hops` (nearest first) to the first address that is not a
/// trusted proxy; a hop that is not an address stops at the last one read.
fn rightmost_untrusted<'a>(
    peer: IpAddr,
    is_trusted: impl Fn(IpAddr) -> bool,
    hops: impl Iterator<Item = &'a [u8]>,
) -> IpAddr {
    let mut client = peer;
    for hop in hops {
        let Some(ip) = parse_node(hop) else {
            break;
        };
        client = ip;
        if !is_trusted(ip) {
            break;
        }
    }
    client
}

/// The `for=` value of one `Forwarded` element (`for=1.2.3.4;proto=http`).
fn forwarded_for(element: &[u8]) -> Option<&[u8]> {
    element.split(|&b| b == b';').find_map(|pair| {
        let pair = httpfile::trim_ows(pair);
        let eq = pair.iter().position(|&b| b == b'=')?;
        pair[..eq]
            .eq_ignore_ascii_case(b"for")
            .then(|| &pair[eq + 1..])
    })
}

/// An address from a node: `1.2.3.4`, `1.2.3.4:80`, `"[2001:db8::1]:4711"`,
/// `2001:db8::1`.
fn parse_node(node: &[u8]) -> Option<IpAddr> {
    let s = std::str::from_utf8(httpfile::trim_ows(node)).ok()?;
    let s = s.trim_matches('"');
    if let Some(rest) = s.strip_prefix('[') {
        return rest.split_once(']')?.0.parse().ok();
    }
    if let Ok(ip) = s.parse() {
        return Some(ip);
    }
    // IPv4 with a port (an IPv6 address without brackets has no port).
    let (host, port) = s.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    host.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nets(v: &[&str]) -> Vec<IpNet> {
        v.iter().map(|s| IpNet::parse(s).unwrap()).collect()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn cidr_blocks() {
        let n = IpNet::parse("10.0.0.0/8").unwrap();
        assert!(n.contains(ip("10.200.1.1")) && !n.contains(ip("11.0.0.1")));
        assert!(n.contains(ip("::ffff:10.1.2.3")), "IPv4-mapped");
        assert!(IpNet::parse("fd00::/8").unwrap().contains(ip("fd12::1")));
        assert!(IpNet::parse("0.0.0.0/0").unwrap().contains(ip("1.2.3.4")));
        assert!(IpNet::parse("127.0.0.1").unwrap().contains(ip("127.0.0.1")));
        assert!(!IpNet::parse("127.0.0.1").unwrap().contains(ip("127.0.0.2")));
        for bad in ["", "x", "10.0.0.0/33", "::/129", "1.2.3.4/x"] {
            assert!(IpNet::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn headers_count_only_behind_a_trusted_peer() {
        let t = nets(&["127.0.0.1", "10.0.0.0/8"]);
        let xff = Some(&b"198.51.100.9, 203.0.113.7, 10.0.0.2"[..]);
        assert_eq!(
            client_addr(ip("127.0.0.1"), &t, None, xff),
            ip("203.0.113.7")
        );
        assert_eq!(client_addr(ip("192.0.2.1"), &t, None, xff), ip("192.0.2.1"));
        assert_eq!(
            client_addr(ip("127.0.0.1"), &[], None, xff),
            ip("127.0.0.1")
        );
        let fwd = Some(&b"for=198.51.100.9, for=\"[2001:db8::7]:4711\";proto=https"[..]);
        assert_eq!(
            client_addr(ip("127.0.0.1"), &t, fwd, xff),
            ip("2001:db8::7"),
            "Forwarded wins"
        );
        let junk = Some(&b"203.0.113.7, unknown"[..]);
        assert_eq!(
            client_addr(ip("127.0.0.1"), &t, None, junk),
            ip("127.0.0.1")
        );
        let ported = Some(&b"203.0.113.7:5555"[..]);
        assert_eq!(
            client_addr(ip("127.0.0.1"), &t, None, ported),
            ip("203.0.113.7")
        );
        let all_trusted = Some(&b"10.0.0.5, 10.0.0.6"[..]);
        assert_eq!(
            client_addr(ip("127.0.0.1"), &t, None, all_trusted),
            ip("10.0.0.5")
        );
    }
}

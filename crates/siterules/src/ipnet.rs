//! Addresses and CIDR blocks: `allow`/`deny` rules, and the daemon's
//! `trusted_proxies`.

use std::net::IpAddr;

/// An address or a CIDR block (`10.0.0.0/8`, `::1`, `fd00::/8`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpNet {
    addr: IpAddr,
    prefix: u8,
}

impl IpNet {
    /// Parses `ADDR` or `ADDR/PREFIX`.
    pub fn parse(s: &str) -> Result<IpNet, String> {
        let (addr, prefix) = match s.trim().split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s.trim(), None),
        };
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| format!("`{s}` is not an IP address or CIDR block"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => match p.parse::<u8>() {
                Ok(p) if p <= max => p,
                _ => return Err(format!("`{s}`: prefix length must be 0..={max}")),
            },
        };
        Ok(IpNet { addr, prefix })
    }

    /// Whether `ip` lies in the block (IPv4-mapped IPv6 counts as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        let (net, host, bits) = match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(h)) => (
                u128::from(u32::from(n)) << 96,
                u128::from(u32::from(h)) << 96,
                self.prefix,
            ),
            (IpAddr::V6(n), IpAddr::V6(h)) => (u128::from(n), u128::from(h), self.prefix),
            _ => return false,
        };
        let mask = if bits == 0 {
            0
        } else {
            u128::MAX << (128 - u32::from(bits))
        };
        net & mask == host & mask
    }
}

#[cfg(test)]
mod tests {
    use super::IpNet;

    #[test]
    fn blocks() {
        let n = IpNet::parse("10.0.0.0/8").unwrap();
        assert!(n.contains("10.1.2.3".parse().unwrap()));
        assert!(n.contains("::ffff:10.1.2.3".parse().unwrap()));
        assert!(!n.contains("11.0.0.1".parse().unwrap()));
        assert!(IpNet::parse("::/0")
            .unwrap()
            .contains("2001:db8::1".parse().unwrap()));
        assert!(IpNet::parse("10.0.0.0/33").is_err());
        assert!(IpNet::parse("ten").is_err());
    }
}

//! Open connections per client, for `max_connections_per_client`: counted
//! at accept (before TLS), given back when the connection ends. A client
//! is an IPv4 address or an IPv6 prefix (`client_ipv6_prefix`, a /64 by
//! default: one host owns a whole /64). Used by `server` only.
//!
//! The counts live in sharded maps with an entry per client that has a
//! connection open, so their memory follows the open connections (at most
//! `max_connections`, plus what workers accepted beyond it), never the
//! number of clients ever seen. A shard's lock is held for one hash-map
//! step at accept and at close, never per request.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::net::IpAddr;
use std::sync::Mutex;

const SHARDS: usize = 64;

/// The per-client connection counts of the process (all workers).
#[derive(Debug)]
pub(crate) struct ClientConns {
    shards: Box<[Mutex<HashMap<IpAddr, u32>>]>,
    hasher: RandomState,
}

impl Default for ClientConns {
    fn default() -> Self {
        ClientConns {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            hasher: RandomState::new(),
        }
    }
}

/// The client a peer address counts as: itself for IPv4 (and IPv4-mapped
/// IPv6), its first `v6_prefix` bits for IPv6.
pub(crate) fn client_of(peer: IpAddr, v6_prefix: u8) -> IpAddr {
    match peer {
        IpAddr::V4(_) => peer,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let bits = u128::from(v6);
                let keep = u32::from(v6_prefix.min(128));
                let mask = u128::MAX.checked_shl(128 - keep).unwrap_or(0);
                IpAddr::V6((bits & mask).into())
            }
        },
    }
}

impl ClientConns {
    fn shard(&self, client: &IpAddr) -> &Mutex<HashMap<IpAddr, u32>> {
        &self.shards[self.hasher.hash_one(client) as usize % SHARDS]
    }

    /// Counts one more connection of `client` unless it has `max` open
    /// already: false then, and nothing is counted.
    pub(crate) fn try_open(&self, client: IpAddr, max: u32) -> bool {
        let mut shard = self
            .shard(&client)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let n = shard.entry(client).or_insert(0);
        if *n >= max {
            if *n == 0 {
                shard.remove(&client);
            }
            return false;
        }
        *n += 1;
        true
    }

    /// Gives back one connection of `client` (taken by `try_open`).
    pub(crate) fn close(&self, client: IpAddr) {
        let mut shard = self
            .shard(&client)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(n) = shard.get_mut(&client) {
            *n -= 1;
            if *n == 0 {
                shard.remove(&client);
            }
        }
    }

    /// Clients with a connection open (for tests and the bound above).
    #[cfg(test)]
    fn clients(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_gets_max_and_its_closes_give_them_back() {
        let c = ClientConns::default();
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        assert!(c.try_open(a, 2) && c.try_open(a, 2));
        assert!(!c.try_open(a, 2), "a third is over 2");
        assert!(c.try_open(b, 2), "another client is not");
        c.close(a);
        assert!(c.try_open(a, 2));
        for _ in 0..2 {
            c.close(a);
        }
        c.close(b);
        assert_eq!(c.clients(), 0, "no entry outlives its connections");
    }

    #[test]
    fn ipv6_clients_are_their_prefix() {
        let p = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(
            client_of(p("2001:db8:1:2:3:4:5:6"), 64),
            p("2001:db8:1:2::")
        );
        assert_eq!(
            client_of(p("2001:db8:1:2:3:4:5:6"), 128),
            p("2001:db8:1:2:3:4:5:6")
        );
        assert_eq!(client_of(p("2001:db8:1:2:3:4:5:6"), 48), p("2001:db8:1::"));
        assert_eq!(client_of(p("::ffff:192.0.2.7"), 64), p("192.0.2.7"));
        assert_eq!(client_of(p("192.0.2.7"), 64), p("192.0.2.7"));
    }

    /// Threads opening and closing for the same clients never hold more
    /// than `max` of one at once, and leave no entry.
    #[test]
    fn concurrent_opens_never_pass_max() {
        use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
        let c = ClientConns::default();
        let held: Vec<AtomicU32> = (0..4).map(|_| AtomicU32::new(0)).collect();
        std::thread::scope(|scope| {
            for t in 0..8u32 {
                let (c, held) = (&c, &held);
                scope.spawn(move || {
                    for i in 0..20_000u32 {
                        let k = ((i + t) % 4) as usize;
                        let ip = IpAddr::V4([10, 0, 0, k as u8].into());
                        if c.try_open(ip, 3) {
                            assert!(held[k].fetch_add(1, SeqCst) < 3, "over max");
                            held[k].fetch_sub(1, SeqCst);
                            c.close(ip);
                        }
                    }
                });
            }
        });
        assert_eq!(c.clients(), 0);
    }

    #[test]
    fn a_million_clients_leave_nothing_behind() {
        let c = ClientConns::default();
        for i in 0..1_000_000u32 {
            let ip = IpAddr::V4(i.into());
            assert!(c.try_open(ip, 1));
            c.close(ip);
        }
        assert_eq!(c.clients(), 0);
    }
}

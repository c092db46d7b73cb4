//! A rule's `rate_limit`: GCRA (the generic cell rate algorithm, a
//! token bucket kept as one timestamp) per client, over a table of fixed
//! size that no number of clients grows.
//!
//! Each key (a client address, an IPv6 client's /64, or the whole rule)
//! has a theoretical arrival time (TAT): when its bucket would be full
//! again. A request at `now` is admitted when `max(TAT, now) - now` is at
//! most `tau = T * (burst - 1)` (`T`: the time one request is worth), and
//! moves the TAT on by `T`; otherwise it waits `max(TAT, now) - now - tau`.
//!
//! The table is 16384 sets of 4 ways, each an `AtomicU64` holding a
//! 22-bit tag of the key's hash and a 42-bit TAT in units of 100 µs since
//! a process-wide epoch (about 13.9 years): 512 KiB per limited rule,
//! allocated when the rule is compiled, and updated with a compare-and-
//! swap, never a lock. A key with no way of its own takes one whose TAT
//! is past (an idle client's: its bucket is full again, so nothing is
//! lost), else the way with the smallest TAT: that client starts over with
//! a full bucket. A table full of busy clients thus forgets the least
//! limited of them; it never refuses a client that is within its rate.
//! Two keys that share a set and a tag (about one lookup in a million
//! when every way is taken) share a bucket.

use crate::IpNet;
use std::fmt;
use std::hash::{BuildHasher, RandomState};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::Instant;

/// Sets of the table (a power of two: the hash's low bits pick one).
const SETS: usize = 16384;
/// Ways per set: 4 × 8 bytes, a set never straddles a cache line.
const WAYS: usize = 4;
/// Bits of a slot that hold the TAT; the rest hold the tag.
const TAT_BITS: u32 = 42;
const TAT_MASK: u64 = (1 << TAT_BITS) - 1;
/// The TAT's unit, in nanoseconds (100 µs).
const UNIT_NS: u128 = 100_000;
/// Units in a second.
const UNITS_PER_SEC: u64 = 10_000;
/// The most a key may be allowed, per second.
pub(crate) const MAX_PER_SEC: u64 = 10_000;
/// The longest `tau` may be: a burst that takes more than a year to
/// refill is a typo (and would push TATs towards the 42 bits' end).
const MAX_TAU: u64 = 365 * 24 * 3600 * UNITS_PER_SEC;

/// The instant TATs count from: the first limiter's compile.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// One seed per process, so that no client can choose addresses that
/// land in one set of every daemon.
fn hasher() -> &'static RandomState {
    static SEED: OnceLock<RandomState> = OnceLock::new();
    SEED.get_or_init(RandomState::new)
}

/// `now` in units since the epoch, kept within the 42 bits.
fn units(now: Instant) -> u64 {
    let ns = now.saturating_duration_since(epoch()).as_nanos();
    u64::try_from(ns / UNIT_NS)
        .unwrap_or(u64::MAX)
        .min(TAT_MASK)
}

/// What a request is counted against.
#[derive(Hash)]
enum Key {
    V4(u32),
    /// An IPv6 client's /64: one host owns a whole /64 (SLAAC, privacy
    /// addresses), and would otherwise have 2^64 fresh buckets.
    V6Net(u64),
    /// Requests that carry no client address share one bucket: an
    /// embedding server that says nothing of its clients still has its
    /// load bounded.
    Unknown,
    /// `key = "rule"`: every client together.
    Rule,
}

/// A compiled `rate_limit`.
pub(crate) struct RateLimiter {
    /// The spelling of the rate, for `describe`.
    rate: String,
    burst: u32,
    /// `T`, in units: rounded down, so a rate that is not a whole number
    /// of units apart is kept a little generously, never refused early
    /// (3/s: 3333 units, 3.0003/s; 3000/s: 3 units, 3333/s).
    interval: u64,
    /// `T * (burst - 1)`, in units.
    tau: u64,
    by_rule: bool,
    exempt: Vec<IpNet>,
    slots: Box<[AtomicU64]>,
    refusals: AtomicU64,
}

impl fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimiter")
            .field("rate", &self.rate)
            .field("burst", &self.burst)
            .field("by_rule", &self.by_rule)
            .field("exempt", &self.exempt)
            .field("refusals", &self.refusals())
            .finish_non_exhaustive()
    }
}

/// `rate`: `N/s`, `N/m` or `N/h`; `(N, seconds)`.
fn parse_rate(rate: &str) -> Result<(u64, u64), String> {
    let bad =
        || format!("rate `{rate}` is not N/s, N/m or N/h with N at least 1 (`20/s`, `600/m`)");
    let (n, per) = rate.trim().split_once('/').ok_or_else(bad)?;
    let seconds = match per.trim() {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => return Err(bad()),
    };
    match n.trim().parse::<u64>() {
        Ok(n) if n > 0 => Ok((n, seconds)),
        _ => Err(bad()),
    }
}

impl RateLimiter {
    /// Checks and compiles a limit, allocating its table.
    pub(crate) fn new(
        rate: &str,
        burst: Option<u32>,
        key: &str,
        exempt: &[String],
    ) -> Result<RateLimiter, String> {
        let (n, seconds) = parse_rate(rate)?;
        if n > MAX_PER_SEC * seconds {
            return Err(format!(
                "rate `{rate}` is more than {MAX_PER_SEC}/s for one key"
            ));
        }
        let burst = match burst {
            Some(0) => return Err("burst must be at least 1".into()),
            Some(b) => b,
            // What a second of the rate allows, so `20/s` takes a page
            // and its 19 assets at once.
            None => u32::try_from(n.div_ceil(seconds)).unwrap_or(u32::MAX),
        };
        let by_rule = match key {
            "client" => false,
            "rule" => true,
            k => return Err(format!("key `{k}` is not `client` or `rule`")),
        };
        let exempt = exempt
            .iter()
            .map(|a| IpNet::parse(a).map_err(|m| format!("exempt: {m}")))
            .collect::<Result<Vec<_>, _>>()?;
        let interval = seconds * UNITS_PER_SEC / n;
        let tau = interval.saturating_mul(u64::from(burst) - 1);
        if tau > MAX_TAU {
            return Err(format!(
                "a burst of {burst} at `{rate}` takes more than a year to refill"
            ));
        }
        epoch();
        Ok(RateLimiter {
            rate: rate.trim().to_string(),
            burst,
            interval,
            tau,
            by_rule,
            exempt,
            slots: (0..SETS * WAYS).map(|_| AtomicU64::new(0)).collect(),
            refusals: AtomicU64::new(0),
        })
    }

    /// The rate as written, and the burst.
    pub(crate) fn describe(&self) -> String {
        let key = if self.by_rule { ", per rule" } else { "" };
        format!("rate_limit({} burst {}{key})", self.rate, self.burst)
    }

    /// Requests refused since the rule was compiled.
    pub(crate) fn refusals(&self) -> u64 {
        self.refusals.load(Relaxed)
    }

    /// Admits a request from `client` at `now`, or says in how many
    /// seconds (at least 1) it would be.
    pub(crate) fn check(&self, client: Option<IpAddr>, now: Instant) -> Result<(), u32> {
        let client = client.map(|c| match c {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(c, IpAddr::V4),
            v4 => v4,
        });
        if client.is_some_and(|c| self.exempt.iter().any(|n| n.contains(c))) {
            return Ok(());
        }
        let key = match client {
            _ if self.by_rule => Key::Rule,
            None => Key::Unknown,
            Some(IpAddr::V4(v4)) => Key::V4(u32::from(v4)),
            Some(IpAddr::V6(v6)) => Key::V6Net((u128::from(v6) >> 64) as u64),
        };
        let Err(excess) = self.admit(hasher().hash_one(&key), units(now)) else {
            return Ok(());
        };
        self.refusals.fetch_add(1, Relaxed);
        let secs = excess.div_ceil(UNITS_PER_SEC).max(1);
        Err(u32::try_from(secs).unwrap_or(u32::MAX))
    }

    /// GCRA on the bucket of the key hashed to `hash`: `Ok` when admitted
    /// (its TAT moved on), else `Err` with how many units too early it is.
    ///
    /// Every slot is a word of its own whose updates are compare-and-swaps,
    /// so each key's updates are in one order without any other memory
    /// being ordered with them: relaxed loads and swaps suffice.
    fn admit(&self, hash: u64, now: u64) -> Result<(), u64> {
        // The low bits pick the set and the high bits make the tag, so
        // the tag says something the set does not.
        let start = (hash as usize & (SETS - 1)) * WAYS;
        let set = &self.slots[start..start + WAYS];
        let tag = hash >> TAT_BITS;
        loop {
            let seen: [u64; WAYS] = std::array::from_fn(|w| set[w].load(Relaxed));
            let (way, tat) = pick(&seen, tag, now);
            let tat = tat.max(now);
            if tat - now > self.tau {
                return Err(tat - now - self.tau);
            }
            let next = (tag << TAT_BITS) | (tat + self.interval).min(TAT_MASK);
            if set[way]
                .compare_exchange_weak(seen[way], next, Relaxed, Relaxed)
                .is_ok()
            {
                return Ok(());
            }
        }
    }

    #[cfg(test)]
    fn table_len(&self) -> usize {
        self.slots.len()
    }
}

/// The way of `set` (as `seen`) that holds `tag`'s bucket and its TAT;
/// else the way it takes: an idle one (TAT past) or the one with the
/// smallest TAT, either with a full bucket (TAT `now`).
fn pick(seen: &[u64; WAYS], tag: u64, now: u64) -> (usize, u64) {
    if let Some(w) = seen.iter().position(|s| s >> TAT_BITS == tag) {
        return (w, seen[w] & TAT_MASK);
    }
    let idle = seen.iter().position(|s| s & TAT_MASK <= now);
    let way = idle.unwrap_or_else(|| {
        (0..WAYS)
            .min_by_key(|&w| seen[w] & TAT_MASK)
            .unwrap_or_default()
    });
    (way, now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    fn limiter(rate: &str, burst: Option<u32>, key: &str, exempt: &[&str]) -> RateLimiter {
        let exempt: Vec<String> = exempt.iter().map(|s| s.to_string()).collect();
        RateLimiter::new(rate, burst, key, &exempt).unwrap()
    }

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    /// Requests admitted of `n` sent at once.
    fn admitted(l: &RateLimiter, client: Option<IpAddr>, n: usize, now: Instant) -> usize {
        (0..n).filter(|_| l.check(client, now).is_ok()).count()
    }

    #[test]
    fn a_burst_then_refusals_with_the_wait() {
        let l = limiter("2/s", Some(4), "client", &[]);
        let now = Instant::now();
        let a = ip("192.0.2.1");
        assert_eq!(admitted(&l, a, 4, now), 4);
        // The bucket is empty: the next request is a whole T (0.5 s) early,
        // rounded up to a second.
        assert_eq!(l.check(a, now), Err(1));
        assert_eq!(l.refusals(), 1);
        let slow = limiter("1/m", Some(1), "client", &[]);
        assert_eq!(slow.check(a, now), Ok(()));
        assert_eq!(slow.check(a, now), Err(60));
        assert_eq!(slow.check(a, now + Duration::from_secs(59)), Err(1));
    }

    #[test]
    fn the_bucket_refills_with_time() {
        let l = limiter("10/s", Some(5), "client", &[]);
        let t0 = Instant::now();
        let a = ip("192.0.2.1");
        assert_eq!(admitted(&l, a, 10, t0), 5);
        // 0.2 s later: two requests' worth.
        let t1 = t0 + Duration::from_millis(200);
        assert_eq!(admitted(&l, a, 10, t1), 2);
        // Idle long enough: full again, and no fuller.
        let t2 = t1 + Duration::from_secs(60);
        assert_eq!(admitted(&l, a, 10, t2), 5);
    }

    #[test]
    fn the_default_burst_is_a_seconds_worth() {
        let now = Instant::now();
        let a = ip("192.0.2.1");
        assert_eq!(
            admitted(&limiter("20/s", None, "client", &[]), a, 50, now),
            20
        );
        assert_eq!(
            admitted(&limiter("90/m", None, "client", &[]), a, 50, now),
            2
        );
        assert_eq!(
            admitted(&limiter("10/h", None, "client", &[]), a, 50, now),
            1
        );
    }

    #[test]
    fn clients_have_their_own_buckets() {
        let l = limiter("1/s", Some(2), "client", &[]);
        let now = Instant::now();
        assert_eq!(admitted(&l, ip("192.0.2.1"), 5, now), 2);
        assert_eq!(admitted(&l, ip("192.0.2.2"), 5, now), 2);
        // An IPv4 client is the same client over an IPv4-mapped address.
        assert_eq!(admitted(&l, ip("::ffff:192.0.2.1"), 5, now), 0);
    }

    #[test]
    fn key_rule_is_one_bucket_for_everyone() {
        let l = limiter("1/s", Some(3), "rule", &[]);
        let now = Instant::now();
        assert_eq!(admitted(&l, ip("192.0.2.1"), 2, now), 2);
        assert_eq!(admitted(&l, ip("198.51.100.7"), 2, now), 1);
        assert_eq!(admitted(&l, None, 2, now), 0);
    }

    #[test]
    fn exempt_clients_pass() {
        let l = limiter("1/s", Some(1), "client", &["10.0.0.0/8", "2001:db8:1::/48"]);
        let now = Instant::now();
        assert_eq!(admitted(&l, ip("10.1.2.3"), 100, now), 100);
        assert_eq!(admitted(&l, ip("2001:db8:1:2::1"), 100, now), 100);
        assert_eq!(admitted(&l, ip("11.1.2.3"), 100, now), 1);
        assert_eq!(l.refusals(), 99);
        // No address: never exempt, one bucket for all such requests.
        assert_eq!(admitted(&l, None, 3, now), 1);
    }

    #[test]
    fn an_ipv6_client_is_its_64() {
        let l = limiter("1/s", Some(2), "client", &[]);
        let now = Instant::now();
        assert_eq!(admitted(&l, ip("2001:db8:0:1::1"), 1, now), 1);
        assert_eq!(admitted(&l, ip("2001:db8:0:1:ffff::2"), 5, now), 1);
        assert_eq!(admitted(&l, ip("2001:db8:0:2::1"), 5, now), 2);
    }

    #[test]
    fn nonsense_is_refused_with_the_reason() {
        let err = |rate: &str, burst, key: &str, exempt: &[&str]| {
            let exempt: Vec<String> = exempt.iter().map(|s| s.to_string()).collect();
            RateLimiter::new(rate, burst, key, &exempt).unwrap_err()
        };
        for rate in ["", "0/s", "20", "20/d", "x/s", "-1/s", "20/ s/"] {
            assert!(err(rate, None, "client", &[]).contains("N/s"), "{rate}");
        }
        assert!(err("10001/s", None, "client", &[]).contains("10000/s"));
        assert!(err("36000001/h", None, "client", &[]).contains("10000/s"));
        assert!(RateLimiter::new("10000/s", None, "client", &[]).is_ok());
        assert!(err("1/s", Some(0), "client", &[]).contains("burst"));
        assert!(err("1/h", Some(u32::MAX), "client", &[]).contains("year"));
        assert!(err("1/s", None, "ip", &[]).contains("`ip`"));
        assert!(err("1/s", None, "client", &["10.0.0.0/33"]).contains("exempt"));
    }

    /// A million distinct clients pass through one limiter while one
    /// client keeps asking: the table stays the size it was compiled at,
    /// none of the newcomers is refused (each is within its rate), and
    /// the client that keeps asking is held to its rate throughout.
    #[test]
    fn a_million_clients_keep_the_memory_fixed_and_the_limit_held() {
        let l = limiter("10/s", Some(5), "client", &[]);
        let len = l.table_len();
        let t0 = Instant::now();
        let asker = ip("192.0.2.1");
        let mut asked = 0;
        for i in 0..1_000_000u32 {
            // One microsecond apart: a second in all.
            let now = t0 + Duration::from_micros(u64::from(i));
            let client = IpAddr::V4((0x0b00_0000 + i).into());
            assert_eq!(l.check(Some(client), now), Ok(()), "{client}");
            if i % 100 == 0 {
                asked += usize::from(l.check(asker, now).is_ok());
            }
        }
        assert_eq!(l.table_len(), len);
        assert_eq!(len, SETS * WAYS);
        // 5 at once, then 10 a second over the second the flood took.
        assert!((14..=16).contains(&asked), "{asked}");
        // Afterwards: a full bucket once idle, and no more.
        let later = t0 + Duration::from_secs(10);
        assert_eq!(admitted(&l, asker, 20, later), 5);
        assert_eq!(l.check(asker, later), Err(1));
    }

    /// Threads asking for one key at once: what is admitted over the run
    /// is never more than the burst plus the rate over its length, and
    /// every request is either admitted or counted as refused.
    #[test]
    fn threads_asking_for_one_key_never_exceed_the_rate() {
        const THREADS: usize = 4;
        const EACH: usize = 20_000;
        let l = limiter("1000/s", Some(50), "client", &[]);
        let admitted = AtomicUsize::new(0);
        let a = ip("192.0.2.1");
        let t0 = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    for _ in 0..EACH {
                        if l.check(a, Instant::now()).is_ok() {
                            admitted.fetch_add(1, Relaxed);
                        }
                    }
                });
            }
        });
        let elapsed = t0.elapsed();
        let admitted = admitted.into_inner();
        // One unit of slack: `now` is read in whole 100 µs units.
        let units = elapsed.as_nanos() / UNIT_NS + 1;
        let most = 50 + units.div_ceil(10) as usize;
        assert!(admitted >= 50, "{admitted}");
        assert!(admitted <= most, "{admitted} > {most} in {elapsed:?}");
        assert_eq!(admitted + l.refusals() as usize, THREADS * EACH);
    }
}

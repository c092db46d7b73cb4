//! Bandwidth per response (`limit_rate`, after `limit_rate_after` bytes,
//! as nginx's): how many body bytes a response may have sent by now.
//! Every engine asks before it moves more of a body; none waits inside:
//! HTTP/1.1 sleeps its connection's task, HTTP/2 skips the stream until
//! its time (the other streams go on), HTTP/3 sleeps the stream's body.
//! Used by `send`, `h2conn` and `h3conn`.

use std::time::{Duration, Instant};

/// The most a paced response sends at once: a tenth of a second of its
/// rate, at least 16 KiB, so it goes out smoothly rather than in bursts.
const SLICE: Duration = Duration::from_millis(100);
const MIN_SLICE: u64 = 16 * 1024;

/// One response's pace.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pace {
    /// Bytes per second.
    rate: u64,
    /// Bytes sent at full speed first.
    after: u64,
    start: Instant,
}

impl Pace {
    /// The pace of a response starting now, or `None` when `rate` is 0.
    pub(crate) fn new(rate: u64, after: u64) -> Option<Pace> {
        (rate > 0).then(|| Pace {
            rate,
            after,
            start: Instant::now(),
        })
    }

    /// How many of `want` more bytes a response that has sent `sent` may
    /// send at `now`, or when it may. It goes in whole slices (or what is
    /// left of `want`): a slice of a tenth of a second of the rate, so a
    /// paced body is a few frames a second, not one per wakeup (hyper's
    /// HTTP/2 client counts a flood of small DATA frames as an attack).
    /// The first slice goes at once; from there the body averages `rate`.
    pub(crate) fn allowance(&self, sent: u64, want: u64, now: Instant) -> Result<u64, Instant> {
        let slice = (self.rate.saturating_mul(SLICE.as_millis() as u64) / 1000).max(MIN_SLICE);
        let need = slice.min(want).max(1);
        let elapsed = now.saturating_duration_since(self.start);
        let earned = self.after.saturating_add(slice).saturating_add(
            (u128::from(self.rate) * elapsed.as_nanos() / 1_000_000_000).min(u128::from(u64::MAX))
                as u64,
        );
        let left = earned.saturating_sub(sent);
        if left >= need {
            return Ok(left.min(slice).min(want));
        }
        // When the rate has earned `need` beyond what was sent.
        let owed = sent.saturating_add(need) - self.after.saturating_add(slice).min(sent + need);
        let at = Duration::from_nanos(
            (u128::from(owed) * 1_000_000_000 / u128::from(self.rate)).min(u128::from(u64::MAX))
                as u64,
        );
        Err(self.start + at.max(elapsed + Duration::from_millis(1)))
    }

    /// Waits until the response may send some of `want` bytes, and says
    /// how many.
    pub(crate) async fn wait(&self, sent: u64, want: u64) -> u64 {
        loop {
            match self.allowance(sent, want, Instant::now()) {
                Ok(n) => return n,
                Err(at) => tokio::time::sleep_until(at.into()).await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_bytes_go_at_once_then_the_rate_holds() {
        let p = Pace::new(100_000, 50_000).unwrap();
        let t0 = p.start;
        let slice = 16_384;
        let all = u64::MAX;
        assert_eq!(p.allowance(0, all, t0), Ok(slice), "a slice at a time");
        assert_eq!(p.allowance(0, 10, t0), Ok(10), "or what is left");
        assert_eq!(p.allowance(49_000, all, t0), Ok(slice));
        assert!(
            p.allowance(50_000 + slice - 1, all, t0).is_err(),
            "no frame of one byte"
        );
        assert_eq!(
            p.allowance(50_000 + slice - 1, 1, t0),
            Ok(1),
            "the body's last byte"
        );
        let Err(at) = p.allowance(50_000 + slice, all, t0) else {
            panic!("more than after and a slice at once")
        };
        // The next slice is earned at 100 kB/s: 164 ms.
        let wait = at - t0;
        assert!(
            wait >= Duration::from_millis(163) && wait <= Duration::from_millis(165),
            "{wait:?}"
        );
        assert_eq!(p.allowance(50_000 + slice, all, at), Ok(slice));
        // After 2 s: the free bytes and 200 kB, of which 190 kB were sent.
        let at_2s = t0 + Duration::from_secs(2);
        assert_eq!(p.allowance(50_000 + slice + 180_000, all, at_2s), Ok(slice));
        assert!(p.allowance(50_000 + slice + 190_000, all, at_2s).is_err());
    }

    /// Sent as fast as allowed, a body takes its length over the rate
    /// (less the free bytes).
    #[test]
    fn a_body_sent_as_allowed_takes_its_time() {
        let p = Pace::new(1 << 20, 0).unwrap();
        let (mut sent, mut now) = (0u64, p.start);
        let len = 10u64 << 20;
        while sent < len {
            match p.allowance(sent, len - sent, now) {
                Ok(n) => sent += n,
                Err(at) => now = at,
            }
        }
        let took = now - p.start;
        assert!(
            took > Duration::from_millis(9_800) && took < Duration::from_millis(10_000),
            "{took:?}"
        );
    }

    #[test]
    fn no_rate_no_pace() {
        assert!(Pace::new(0, 10).is_none());
    }
}

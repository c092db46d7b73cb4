//! HTTP counters: one cache-padded block per worker, written only by that
//! worker (plain load+store, no locked read-modify-write), summed into the
//! `metrics` recorder when `/metrics` is scraped.
//!
//! ```text
//!  worker 0: [codes[16] | other | body_bytes | aborted]  (own 128-byte aligned block)
//!  worker 1: [codes[16] | other | body_bytes | aborted]
//!        \___ scrape: sum -> counter!(..).absolute(sum)
//!  durations: worker-local Vec<f64> -> histogram.record() every 100 ms
//! ```

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Status codes with their own counter slot.
pub const CODES: [u16; 16] = [
    200, 204, 206, 301, 304, 400, 403, 404, 405, 408, 412, 416, 431, 500, 503, 505,
];

/// Histogram bucket bounds for request duration, seconds.
pub const DURATION_BUCKETS: [f64; 14] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
    5.0,
];

/// Per-worker counters.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct WorkerStats {
    codes: [AtomicU64; CODES.len()],
    other: AtomicU64,
    body_bytes: AtomicU64,
    aborted: AtomicU64,
}

/// Single-writer increment: the owning worker is the only writer, so a
/// relaxed load + store is exact and costs no locked instruction.
#[inline]
fn bump(a: &AtomicU64, n: u64) {
    a.store(a.load(Relaxed).wrapping_add(n), Relaxed);
}

impl WorkerStats {
    /// Counts one response with the body bytes it sent; `completed` is
    /// false when the client went away (or a send timed out) midway.
    /// Called only from the owning worker thread.
    #[inline]
    pub fn record(&self, code: u16, body_bytes: u64, completed: bool) {
        match CODES.iter().position(|&c| c == code) {
            Some(i) => bump(&self.codes[i], 1),
            None => bump(&self.other, 1),
        }
        if body_bytes > 0 {
            bump(&self.body_bytes, body_bytes);
        }
        if !completed {
            bump(&self.aborted, 1);
        }
    }
}

/// Sums of all workers' counters.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Totals {
    /// Responses per entry of [`CODES`].
    pub codes: [u64; CODES.len()],
    /// Responses with any other code.
    pub other: u64,
    /// Response body bytes.
    pub body_bytes: u64,
    /// Responses that did not complete.
    pub aborted: u64,
}

/// Sums the workers' blocks.
pub fn totals(workers: &[std::sync::Arc<WorkerStats>]) -> Totals {
    let mut t = Totals::default();
    for w in workers {
        for (i, c) in w.codes.iter().enumerate() {
            t.codes[i] += c.load(Relaxed);
        }
        t.other += w.other.load(Relaxed);
        t.body_bytes += w.body_bytes.load(Relaxed);
        t.aborted += w.aborted.load(Relaxed);
    }
    t
}

/// Registers HELP texts for the server's own metrics.
pub fn describe() {
    metrics::describe_counter!(
        "fileserver_http_requests_total",
        "HTTP responses whose head was sent, by status code (aborted ones included)."
    );
    metrics::describe_counter!(
        "fileserver_http_responses_aborted_total",
        "Responses that did not complete: the client closed the connection or stopped reading (send_timeout) midway."
    );
    metrics::describe_counter!(
        "fileserver_http_response_body_bytes_total",
        metrics::Unit::Bytes,
        "Response body bytes sent, aborted responses included (HEAD and 304 send none)."
    );
    metrics::describe_histogram!(
        "fileserver_http_request_duration_seconds",
        metrics::Unit::Seconds,
        "Time from a complete request head to the last response byte handed to the kernel (or to the failed write that aborted it)."
    );
    metrics::describe_gauge!(
        "fileserver_connections_open",
        "Client connections currently open."
    );
    metrics::describe_gauge!(
        "fileserver_up",
        "1 while the server is serving, 0 while shutting down."
    );
    metrics::describe_counter!(
        "fileserver_access_log_dropped_total",
        "Access log lines dropped because the log writer fell behind."
    );
}

/// Publishes the summed counters into the recorder (called at each scrape).
pub fn publish(t: &Totals, connections_open: u64) {
    // Every code's series exists from the first scrape, at 0 until used:
    // `rate()` cannot see the increase that creates a series, so a code that
    // first appears in a burst (the first 503s) would otherwise be missed.
    for (i, &code) in CODES.iter().enumerate() {
        metrics::counter!("fileserver_http_requests_total", "code" => code_str(code))
            .absolute(t.codes[i]);
    }
    metrics::counter!("fileserver_http_requests_total", "code" => "other").absolute(t.other);
    metrics::counter!("fileserver_http_response_body_bytes_total").absolute(t.body_bytes);
    metrics::counter!("fileserver_http_responses_aborted_total").absolute(t.aborted);
    metrics::gauge!("fileserver_connections_open").set(connections_open as f64);
}

fn code_str(code: u16) -> &'static str {
    match code {
        200 => "200",
        204 => "204",
        206 => "206",
        301 => "301",
        304 => "304",
        400 => "400",
        403 => "403",
        404 => "404",
        405 => "405",
        408 => "408",
        412 => "412",
        416 => "416",
        431 => "431",
        500 => "500",
        503 => "503",
        505 => "505",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn per_worker_counts_sum() {
        let a = Arc::new(WorkerStats::default());
        let b = Arc::new(WorkerStats::default());
        let ta = {
            let a = a.clone();
            std::thread::spawn(move || {
                for _ in 0..1000 {
                    a.record(200, 10, true);
                }
            })
        };
        for _ in 0..500 {
            b.record(404, 0, true);
        }
        b.record(299, 1, false);
        ta.join().unwrap();
        let t = totals(&[a, b]);
        assert_eq!(t.codes[0], 1000);
        assert_eq!(t.codes[7], 500);
        assert_eq!(t.other, 1);
        assert_eq!(t.body_bytes, 10_001);
        assert_eq!(t.aborted, 1);
    }
}

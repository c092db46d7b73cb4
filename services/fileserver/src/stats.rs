//! HTTP counters: one cache-padded block per worker, written only by that
//! worker (plain load+store, no locked read-modify-write), summed into the
//! `metrics` recorder when `/metrics` is scraped.
//!
//! ```text
//!  worker 0: [responses[method 3][code 16 + other] | body_bytes | aborted]  (own aligned block)
//!  worker 1: [responses[method 3][code 16 + other] | body_bytes | aborted]
//!        \___ scrape: sum -> counter!(..).absolute(sum)
//!  durations: [count per bucket 14 + Inf | sum ns] in the same block
//!        \___ scrape: sum -> rendered as the histogram, after the recorder's text
//! ```
//!
//! The duration histogram is counted here, not by the `metrics` recorder:
//! its histograms keep every sample until the next upkeep (5 s), which at
//! 75k requests/s on the many_files load held 6.4 MB, a sixth of the
//! daemon's resident memory; these buckets are 128 bytes per worker.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Status codes with their own counter slot: every code a response can
/// carry (a site rule's 302, 308 and 401 included), from the one table of
/// status lines. The `other` slot stays for a code outside it.
pub(crate) const CODES: &[u16] = httpfile::status::CODES;

/// The `method` label: GET, HEAD and everything else, so a client cannot
/// mint series by inventing methods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MethodLabel {
    /// GET.
    Get,
    /// HEAD.
    Head,
    /// Any other method, and heads rejected before their method was known.
    Other,
}

impl MethodLabel {
    const ALL: [MethodLabel; 3] = [MethodLabel::Get, MethodLabel::Head, MethodLabel::Other];

    /// The label value.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            MethodLabel::Get => "GET",
            MethodLabel::Head => "HEAD",
            MethodLabel::Other => "other",
        }
    }
}

/// The request duration histogram's bucket bounds (`le`), nanoseconds.
pub(crate) const DURATION_BUCKETS_NS: [u64; 14] = [
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    1_000_000_000,
    5_000_000_000,
];

/// One slot per bucket of [`DURATION_BUCKETS_NS`], then `+Inf`.
const DURATION_SLOTS: usize = DURATION_BUCKETS_NS.len() + 1;

const DURATION_NAME: &str = "fileserver_http_request_duration_seconds";
const DURATION_HELP: &str = "Time from a complete request head to the last response byte handed to the kernel (or to the failed write that aborted it).";

/// One slot per entry of [`CODES`], then `other`.
const CODE_SLOTS: usize = CODES.len() + 1;

/// One worker's counters, one block per site: the default site first,
/// then each `[[sites]]` table in order (the list is fixed until a
/// restart, so the `site` label's values are the configured sites, never
/// a raw `Host`).
#[derive(Debug)]
pub(crate) struct WorkerStats {
    sites: Box<[SiteStats]>,
}

impl Default for WorkerStats {
    /// The default site's block alone.
    fn default() -> WorkerStats {
        WorkerStats::new(1)
    }
}

impl WorkerStats {
    /// Blocks for `sites` sites (the default one included).
    pub(crate) fn new(sites: usize) -> WorkerStats {
        WorkerStats {
            sites: (0..sites.max(1)).map(|_| SiteStats::default()).collect(),
        }
    }

    /// The block of `site` (`None`: the default site; one the list does
    /// not have counts there too).
    #[inline]
    pub(crate) fn site(&self, site: Option<usize>) -> &SiteStats {
        let slot = site.map_or(0, |i| i + 1);
        self.sites.get(slot).unwrap_or(&self.sites[0])
    }
}

/// One site's counters in one worker.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct SiteStats {
    responses: [[AtomicU64; CODE_SLOTS]; 3],
    body_bytes: AtomicU64,
    aborted: AtomicU64,
    cold_bytes: AtomicU64,
    /// Requests by duration slot (not cumulative).
    durations: [AtomicU64; DURATION_SLOTS],
    duration_sum_ns: AtomicU64,
}

/// Single-writer increment: the owning worker is the only writer, so a
/// relaxed load + store is exact and costs no locked instruction.
#[inline]
fn bump(a: &AtomicU64, n: u64) {
    a.store(a.load(Relaxed).wrapping_add(n), Relaxed);
}

fn code_slot(code: u16) -> usize {
    CODES.iter().position(|&c| c == code).unwrap_or(CODES.len())
}

impl SiteStats {
    /// Counts one response with the body bytes it sent; `completed` is
    /// false when the client went away (or a send timed out) midway.
    /// Called only from the owning worker thread.
    #[inline]
    pub(crate) fn record(&self, method: MethodLabel, code: u16, body_bytes: u64, completed: bool) {
        bump(&self.responses[method as usize][code_slot(code)], 1);
        if body_bytes > 0 {
            bump(&self.body_bytes, body_bytes);
        }
        if !completed {
            bump(&self.aborted, 1);
        }
    }

    /// Counts body bytes that were not in the page cache and so were read
    /// through the I/O backend instead of sent by sendfile. Owning worker only.
    #[inline]
    pub(crate) fn record_cold(&self, bytes: u64) {
        bump(&self.cold_bytes, bytes);
    }

    /// Counts one request's duration. Owning worker only.
    #[inline]
    pub(crate) fn record_duration(&self, d: std::time::Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let slot = DURATION_BUCKETS_NS
            .iter()
            .position(|&le| ns <= le)
            .unwrap_or(DURATION_BUCKETS_NS.len());
        bump(&self.durations[slot], 1);
        let sum = &self.duration_sum_ns;
        sum.store(sum.load(Relaxed).saturating_add(ns), Relaxed);
    }
}

/// Sums of all workers' counters.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Totals {
    /// Responses by method and code slot ([`CODES`], then other).
    pub responses: [[u64; CODE_SLOTS]; 3],
    /// Response body bytes.
    pub body_bytes: u64,
    /// Responses that did not complete.
    pub aborted: u64,
    /// Body bytes read through the backend because they were cold.
    pub cold_bytes: u64,
    /// Requests by duration slot ([`DURATION_BUCKETS_NS`], then `+Inf`).
    pub durations: [u64; DURATION_SLOTS],
    /// The sum of the requests' durations, nanoseconds.
    pub duration_sum_ns: u64,
}

/// Sums the workers' blocks, site by site.
pub(crate) fn totals(workers: &[std::sync::Arc<WorkerStats>]) -> Vec<Totals> {
    let sites = workers.iter().map(|w| w.sites.len()).max().unwrap_or(1);
    (0..sites)
        .map(|slot| site_totals(workers.iter().filter_map(|w| w.sites.get(slot))))
        .collect()
}

fn site_totals<'w>(blocks: impl Iterator<Item = &'w SiteStats>) -> Totals {
    let mut t = Totals::default();
    for w in blocks {
        for (sum, counts) in t.responses.iter_mut().zip(&w.responses) {
            for (s, c) in sum.iter_mut().zip(counts) {
                *s += c.load(Relaxed);
            }
        }
        t.body_bytes += w.body_bytes.load(Relaxed);
        t.aborted += w.aborted.load(Relaxed);
        t.cold_bytes += w.cold_bytes.load(Relaxed);
        for (sum, n) in t.durations.iter_mut().zip(&w.durations) {
            *sum += n.load(Relaxed);
        }
        t.duration_sum_ns = t
            .duration_sum_ns
            .saturating_add(w.duration_sum_ns.load(Relaxed));
    }
    t
}

/// Appends the request duration histogram, one per site (`sites[i]`
/// labels `totals[i]`), to a Prometheus text exposition, in the form the
/// `metrics` exporter renders its histograms.
pub(crate) fn render_durations(totals: &[Totals], sites: &[String], out: &mut String) {
    use std::fmt::Write as _;
    let _ = writeln!(out, "# HELP {DURATION_NAME} {DURATION_HELP}");
    let _ = writeln!(out, "# TYPE {DURATION_NAME} histogram");
    for (t, site) in totals.iter().zip(sites) {
        let mut count = 0;
        for (i, n) in t.durations.iter().enumerate() {
            count += n;
            let le = match DURATION_BUCKETS_NS.get(i) {
                Some(&le) => (le as f64 / 1e9).to_string(),
                None => "+Inf".to_string(),
            };
            let _ = writeln!(
                out,
                "{DURATION_NAME}_bucket{{site=\"{site}\",le=\"{le}\"}} {count}"
            );
        }
        let sum = t.duration_sum_ns as f64 / 1e9;
        let _ = writeln!(out, "{DURATION_NAME}_sum{{site=\"{site}\"}} {sum}");
        let _ = writeln!(out, "{DURATION_NAME}_count{{site=\"{site}\"}} {count}");
    }
    out.push('\n');
}

/// Registers HELP texts for the server's own metrics.
pub(crate) fn describe() {
    metrics::describe_counter!(
        "fileserver_http_requests_total",
        "HTTP responses whose head was sent, by status code and method (GET, HEAD, other; aborted ones included)."
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
    metrics::describe_counter!(
        "fileserver_http_cold_read_bytes_total",
        metrics::Unit::Bytes,
        "Body bytes that were not in the page cache: read through the I/O backend and sent from memory instead of by a sendfile that would have stalled the worker."
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
        "fileserver_h2c_connections_total",
        "Plaintext connections that opened with the HTTP/2 preface (h2c with prior knowledge) and went to the HTTP/2 engine."
    );
    for (name, what) in [
        (
            "hits",
            "lookups answered from a [[sites]] root's path cache",
        ),
        ("misses", "lookups of a [[sites]] root that opened the file"),
        (
            "negative_hits",
            "lookups of a [[sites]] root answered by a cached not-found",
        ),
        (
            "evictions",
            "entries a [[sites]] root's path cache dropped for its bounds",
        ),
    ] {
        metrics::describe_counter!(format!("fileserver_site_cache_{name}_total"), what);
    }
    metrics::describe_gauge!(
        "fileserver_site_cache_entries",
        "Paths a [[sites]] root's cache holds (the default root's: fileserver_cache_entries)."
    );
    metrics::describe_counter!(
        "fileserver_access_log_dropped_total",
        "Access log lines dropped because the log writer fell behind."
    );
}

/// Publishes the summed counters into the recorder (called at each
/// scrape), each site's (`sites[i]` labels `totals[i]`) under its `site`.
pub(crate) fn publish(totals: &[Totals], sites: &[String], connections_open: u64) {
    for (t, site) in totals.iter().zip(sites) {
        // Every (method, code) series exists from the first scrape, at 0
        // until used: `rate()` cannot see the increase that creates a
        // series, so a code that first appears in a burst (the first 503s)
        // would otherwise be missed.
        for method in MethodLabel::ALL {
            let by_code = &t.responses[method as usize];
            for (slot, &count) in by_code.iter().enumerate() {
                let code = CODES.get(slot).map_or("other", |&c| code_str(c));
                metrics::counter!(
                    "fileserver_http_requests_total",
                    "code" => code,
                    "method" => method.as_str(),
                    "site" => site.clone()
                )
                .absolute(count);
            }
        }
        let site = site.clone();
        metrics::counter!("fileserver_http_response_body_bytes_total", "site" => site.clone())
            .absolute(t.body_bytes);
        metrics::counter!("fileserver_http_responses_aborted_total", "site" => site.clone())
            .absolute(t.aborted);
        metrics::counter!("fileserver_http_cold_read_bytes_total", "site" => site)
            .absolute(t.cold_bytes);
    }
    metrics::gauge!("fileserver_connections_open").set(connections_open as f64);
}

fn code_str(code: u16) -> &'static str {
    httpfile::status::digits(code).unwrap_or("other")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Responses with `code` over every method; `None` is the `other` slot.
    fn code(t: &Totals, code: Option<u16>) -> u64 {
        let slot = code.map_or(CODES.len(), code_slot);
        t.responses.iter().map(|by_code| by_code[slot]).sum()
    }

    #[test]
    fn per_worker_counts_sum() {
        let a = Arc::new(WorkerStats::default());
        let b = Arc::new(WorkerStats::default());
        let ta = {
            let a = a.clone();
            std::thread::spawn(move || {
                for _ in 0..1000 {
                    a.site(None).record(MethodLabel::Get, 200, 10, true);
                }
            })
        };
        for _ in 0..500 {
            b.site(None).record(MethodLabel::Head, 404, 0, true);
        }
        b.site(None).record(MethodLabel::Other, 299, 1, false);
        ta.join().unwrap();
        let t = totals(&[a, b]).remove(0);
        assert_eq!(code(&t, Some(200)), 1000);
        assert_eq!(t.responses[MethodLabel::Get as usize][0], 1000);
        assert_eq!(code(&t, Some(404)), 500);
        assert_eq!(t.responses[MethodLabel::Head as usize][code_slot(404)], 500);
        assert_eq!(code(&t, None), 1);
        assert_eq!(t.body_bytes, 10_001);
        assert_eq!(t.aborted, 1);
    }

    /// The codes site rules and the limits answer with (a redirect's 302
    /// or 308, basic auth's 401, a long target's 414) are counted under
    /// their own label, not `other`.
    #[test]
    fn every_code_a_response_can_carry_has_its_own_slot() {
        let w = WorkerStats::default();
        for c in [302, 303, 307, 308, 401, 414, 500] {
            w.site(None).record(MethodLabel::Get, c, 0, true);
        }
        let t = totals(&[Arc::new(w)]).remove(0);
        for c in [302, 303, 307, 308, 401, 414, 500] {
            assert_eq!(code(&t, Some(c)), 1, "{c}");
            assert_eq!(code_str(c), c.to_string());
        }
        assert_eq!(code(&t, None), 0);
        assert_eq!(code_str(299), "other");
    }

    /// A bucket counts the durations at or under its bound (Prometheus'
    /// `le`), every worker's, cumulatively; `+Inf` and `_count` are all of
    /// them, and the text is what the exporter rendered for its histograms.
    #[test]
    fn durations_render_as_a_cumulative_histogram() {
        use std::time::Duration;
        let (a, b) = (WorkerStats::default(), WorkerStats::default());
        a.site(None).record_duration(Duration::from_nanos(50_000)); // le 0.00005, on the bound
        a.site(None).record_duration(Duration::from_nanos(50_001)); // le 0.0001
        b.site(None).record_duration(Duration::from_millis(1)); // le 0.001
        b.site(None).record_duration(Duration::from_secs(6)); // +Inf only
        b.site(None).record_duration(Duration::MAX); // +Inf, and the sum saturates
        let t = totals(&[Arc::new(a), Arc::new(b)]);
        let mut text = String::new();
        render_durations(&t, &["default".to_string()], &mut text);
        let value = |series: &str| -> f64 {
            let line = text
                .lines()
                .find(|l| l.rsplit_once(' ').is_some_and(|(s, _)| s == series))
                .unwrap_or_else(|| panic!("no {series} in\n{text}"));
            line.rsplit_once(' ').unwrap().1.parse().unwrap()
        };
        let bucket = |le: &str| {
            value(&format!(
                "{DURATION_NAME}_bucket{{site=\"default\",le=\"{le}\"}}"
            ))
        };
        assert_eq!(bucket("0.00005"), 1.0);
        assert_eq!(bucket("0.0001"), 2.0);
        assert_eq!(bucket("0.0005"), 2.0);
        assert_eq!(bucket("0.001"), 3.0);
        assert_eq!(bucket("5"), 3.0);
        assert_eq!(bucket("+Inf"), 5.0);
        assert_eq!(
            value(&format!("{DURATION_NAME}_count{{site=\"default\"}}")),
            5.0
        );
        assert_eq!(
            value(&format!("{DURATION_NAME}_sum{{site=\"default\"}}")),
            u64::MAX as f64 / 1e9
        );
        assert_eq!(text.matches("_bucket{").count(), DURATION_SLOTS);
        assert!(text.starts_with(&format!("# HELP {DURATION_NAME} Time from")));
        assert!(text.contains(&format!("# TYPE {DURATION_NAME} histogram\n")));
    }

    /// Each site counts in its own block; a site the list does not have
    /// (none can be added without a restart) counts as the default one.
    #[test]
    fn sites_count_apart() {
        let w = WorkerStats::new(3);
        w.site(None).record(MethodLabel::Get, 200, 1, true);
        w.site(Some(1)).record(MethodLabel::Get, 404, 2, true);
        w.site(Some(1)).record(MethodLabel::Get, 404, 2, true);
        w.site(Some(7)).record(MethodLabel::Get, 200, 4, true);
        let t = totals(&[Arc::new(w)]);
        assert_eq!(t.len(), 3);
        assert_eq!((code(&t[0], Some(200)), t[0].body_bytes), (2, 5));
        assert_eq!(code(&t[1], None) + code(&t[1], Some(200)), 0);
        assert_eq!((code(&t[2], Some(404)), t[2].body_bytes), (2, 4));
    }
}

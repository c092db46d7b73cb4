//! Admin listener: `/metrics` (Prometheus text), `/healthz`, `/readyz`.
//! One request per connection; it is scraped, not load-tested. Its
//! answers are plans rendered by the encoder every listener uses; they are
//! not counted in the served-traffic counters (a scrape is not a visit).

use crate::state::Shared;
use crate::stats;
use httpfile::encode::{encode_head, Framing};
use httpfile::plan::{self, ContentType, MediaType};
use httpfile::{Method, RequestHead};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Installs the global Prometheus recorder.
pub(crate) fn install_recorder() -> anyhow::Result<PrometheusHandle> {
    let handle = PrometheusBuilder::new().install_recorder()?;
    stats::describe();
    process_metrics().describe();
    metrics::describe_counter!(
        "fileserver_auth_failures_total",
        "Credentials a rule's basic_auth refused (requests without any are not counted)."
    );
    metrics::describe_counter!(
        "fileserver_connections_refused_total",
        "Connections closed at accept, unserved, by reason (per_client: over max_connections_per_client; proxy_protocol: a missing, malformed or late PROXY header)."
    );
    for reason in ["per_client", "proxy_protocol"] {
        metrics::counter!("fileserver_connections_refused_total", "reason" => reason).increment(0);
    }
    metrics::describe_gauge!(
        "fileserver_build_info",
        "Always 1; the labels say which build runs (version, git commit)."
    );
    metrics::gauge!(
        "fileserver_build_info",
        "version" => env!("CARGO_PKG_VERSION"),
        "commit" => env!("BUILD_GIT_COMMIT")
    )
    .set(1.0);
    Ok(handle)
}

/// The standard `process_*` metrics (CPU seconds, resident memory, open and
/// maximum fds, start time, threads), read from /proc at each scrape.
fn process_metrics() -> &'static metrics_process::Collector {
    static COLLECTOR: std::sync::OnceLock<metrics_process::Collector> = std::sync::OnceLock::new();
    COLLECTOR.get_or_init(metrics_process::Collector::default)
}

/// Refreshes counters from the per-worker blocks and renders the exposition.
pub(crate) fn render(shared: &Shared, handle: &PrometheusHandle) -> String {
    let t = stats::totals(&shared.worker_stats);
    let live = shared.live();
    let sites = site_labels(&live.0.s);
    stats::publish(&t, &sites, shared.active_conns.load(Relaxed) as u64);
    metrics::gauge!("fileserver_up").set(if shared.serving.load(Relaxed) {
        1.0
    } else {
        0.0
    });
    metrics::counter!("fileserver_access_log_dropped_total")
        .absolute(shared.access_dropped.load(Relaxed));
    metrics::counter!("fileserver_auth_failures_total").absolute(siterules::auth_failures());
    shared.files.export_metrics("fileserver", &sites[1..]);
    process_metrics().collect();
    handle.run_upkeep();
    let mut text = cpu_seconds_as_counter(handle.render());
    // Every bucket from the first scrape on, at 0 on a quiet daemon, so a
    // dashboard or an `absent()` alert always finds the series.
    stats::render_durations(&t, &sites, &mut text);
    render_rate_limited(&live.0.s, &sites, &mut text);
    text
}

/// `fileserver_rate_limited_total` of each rule with a `rate_limit`, by
/// site (`sites[i]` labels the default site, then each `[[sites]]`) and
/// rule position, read from the rules serving now rather than recorded:
/// a reload recompiles them, and a rule it removed or moved leaves no
/// series behind (its count starts again at 0, a counter reset).
fn render_rate_limited(s: &crate::config::Settings, sites: &[String], out: &mut String) {
    use std::fmt::Write as _;
    const NAME: &str = "fileserver_rate_limited_total";
    let each = std::iter::once(&s.serve).chain(s.sites.iter().map(|site| &site.serve));
    let mut described = false;
    for (serve, site) in each.zip(sites) {
        for (rule, refused) in serve.rules.rate_limits() {
            if !described {
                let _ = writeln!(
                    out,
                    "# HELP {NAME} Requests a rule's rate_limit refused with 429, by site and rule position."
                );
                let _ = writeln!(out, "# TYPE {NAME} counter");
                described = true;
            }
            let _ = writeln!(out, "{NAME}{{site=\"{site}\",rule=\"{rule}\"}} {refused}");
        }
    }
}

/// The `site` label of each block of the counters: `default`, then each
/// `[[sites]]` table's first name (`*.example.com` for a wildcard). The
/// configured sites, never a raw `Host`: bounded whatever clients send.
fn site_labels(s: &crate::config::Settings) -> Vec<String> {
    std::iter::once("default".to_string())
        .chain(s.sites.iter().map(|site| match site.hosts.first() {
            Some(siterules::HostPattern::Exact(n)) => n.clone(),
            Some(siterules::HostPattern::Wildcard(suffix)) => format!("*{suffix}"),
            None => "unnamed".to_string(),
        }))
        .collect()
}

/// `process_cpu_seconds_total` is recorded as a gauge so it keeps its
/// fraction (a `metrics` counter holds whole numbers, which turned every
/// scrape's CPU time into whole seconds); it is a counter, and Prometheus'
/// client libraries type it so.
fn cpu_seconds_as_counter(text: String) -> String {
    const GAUGE: &str = "# TYPE process_cpu_seconds_total gauge\n";
    if text.contains(GAUGE) {
        text.replacen(GAUGE, "# TYPE process_cpu_seconds_total counter\n", 1)
    } else {
        text
    }
}

/// Serves the admin listener until aborted.
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    handle: PrometheusHandle,
) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let shared = shared.clone();
        let handle = handle.clone();
        tokio::spawn(async move {
            let _ =
                tokio::time::timeout(Duration::from_secs(10), one(stream, &shared, &handle)).await;
        });
    }
}

async fn one(
    mut stream: tokio::net::TcpStream,
    shared: &Shared,
    handle: &PrometheusHandle,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; 8192];
    let mut n = 0;
    let mut out = Vec::with_capacity(1024);
    loop {
        let r = stream.read(&mut buf[n..]).await?;
        if r == 0 {
            return Ok(());
        }
        n += r;
        let mut headers = [httparse::EMPTY_HEADER; 64];
        match crate::http::request::parse_request(&buf[..n], &mut headers, buf.len()) {
            Ok(None) => continue,
            Err(e) => {
                let why = match e {
                    crate::http::request::ParseError::Bad(why) => why,
                    _ => "",
                };
                encode(&plan::reject(e.status(), why), &mut out);
            }
            Ok(Some(req)) => answer(&req.head, shared, handle, &mut out),
        }
        break;
    }
    stream.write_all(&out).await?;
    stream.shutdown().await
}

/// The admin answer to `head`, encoded into `out` by the planner's encoder
/// (the `Server`, `Date` and framing every listener sends).
fn answer(head: &RequestHead<'_>, shared: &Shared, handle: &PrometheusHandle, out: &mut Vec<u8>) {
    if !matches!(head.method, Method::Get | Method::Head) {
        let mut p = plan::error(head.method, 405, "");
        p.headers.allow = Some("GET, HEAD");
        p.headers.cache_control = Some("no-store");
        return encode(&p, out);
    }
    let path = httpfile::path::path_part(head.target).unwrap_or(b"");
    let (essence, status, text) = match path {
        b"/metrics" => ("text/plain; version=0.0.4", 200, render(shared, handle)),
        b"/healthz" => ("text/plain", 200, "ok\n".to_string()),
        b"/readyz" if shared.serving.load(Relaxed) => ("text/plain", 200, "ready\n".to_string()),
        b"/readyz" => ("text/plain", 503, "shutting down\n".to_string()),
        _ => (
            "text/plain",
            404,
            "not found: try /metrics, /healthz, /readyz\n".to_string(),
        ),
    };
    let p = plan::Plan {
        status,
        headers: plan::Headers {
            content_type: Some(ContentType::Media(MediaType {
                essence,
                utf8: true,
            })),
            content_length: Some(text.len() as u64),
            cache_control: Some("no-store"),
            ..plan::Headers::default()
        },
        body: if head.is_head() {
            plan::Body::Empty
        } else {
            plan::Body::Bytes(text.as_bytes())
        },
        close: true,
    };
    encode(&p, out);
    if let plan::Body::Bytes(b) = p.body {
        out.extend_from_slice(b);
    }
}

/// One response per connection: the head, then the connection closes.
fn encode(p: &plan::Plan<'_>, out: &mut Vec<u8>) {
    let framing = Framing {
        keep_alive: false,
        minor_version: 1,
    };
    httpfile::date::with_now(|_, date| encode_head(p, framing, date, out));
}

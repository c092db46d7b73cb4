//! Admin listener: `/metrics` (Prometheus text), `/healthz`, `/readyz`.
//! One request per connection; it is scraped, not load-tested.

use crate::state::Shared;
use crate::stats;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Installs the global Prometheus recorder with explicit duration buckets.
pub fn install_recorder() -> anyhow::Result<PrometheusHandle> {
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full("fileserver_http_request_duration_seconds".into()),
            &stats::DURATION_BUCKETS,
        )?
        .install_recorder()?;
    stats::describe();
    process_metrics().describe();
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
    // Registered now, so the first scrape already has every bucket at 0
    // (a histogram appeared only after the first request: a dashboard or
    // an `absent()` alert saw no series on a quiet daemon).
    let _ = metrics::histogram!("fileserver_http_request_duration_seconds");
    Ok(handle)
}

/// The standard `process_*` metrics (CPU seconds, resident memory, open and
/// maximum fds, start time, threads), read from /proc at each scrape.
fn process_metrics() -> &'static metrics_process::Collector {
    static COLLECTOR: std::sync::OnceLock<metrics_process::Collector> = std::sync::OnceLock::new();
    COLLECTOR.get_or_init(metrics_process::Collector::default)
}

/// Refreshes counters from the per-worker blocks and renders the exposition.
pub fn render(shared: &Shared, handle: &PrometheusHandle) -> String {
    let t = stats::totals(&shared.worker_stats);
    stats::publish(&t, shared.active_conns.load(Relaxed) as u64);
    metrics::gauge!("fileserver_up").set(if shared.serving.load(Relaxed) {
        1.0
    } else {
        0.0
    });
    metrics::counter!("fileserver_access_log_dropped_total")
        .absolute(shared.access_dropped.load(Relaxed));
    shared.files.export_metrics("fileserver");
    process_metrics().collect();
    handle.run_upkeep();
    cpu_seconds_as_counter(handle.render())
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
pub async fn serve(
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
    let (code, ctype, body, head) = loop {
        let r = stream.read(&mut buf[n..]).await?;
        if r == 0 {
            return Ok(());
        }
        n += r;
        let mut headers = [httparse::EMPTY_HEADER; 64];
        match crate::http::request::parse_request(&buf[..n], &mut headers, buf.len()) {
            Ok(None) => continue,
            Err(e) => {
                break (
                    e.status(),
                    "text/plain; charset=utf-8",
                    "bad request\n".to_string(),
                    false,
                )
            }
            Ok(Some(req)) => {
                let head = req.method_raw == "HEAD";
                if req.method_raw != "GET" && !head {
                    break (
                        405,
                        "text/plain; charset=utf-8",
                        "method not allowed\n".into(),
                        false,
                    );
                }
                let path = httpfile::path::path_part(req.target()).unwrap_or(b"");
                break match path {
                    b"/metrics" => (
                        200,
                        "text/plain; version=0.0.4; charset=utf-8",
                        render(shared, handle),
                        head,
                    ),
                    b"/healthz" => (200, "text/plain; charset=utf-8", "ok\n".into(), head),
                    b"/readyz" if shared.serving.load(Relaxed) => {
                        (200, "text/plain; charset=utf-8", "ready\n".into(), head)
                    }
                    b"/readyz" => (
                        503,
                        "text/plain; charset=utf-8",
                        "shutting down\n".into(),
                        head,
                    ),
                    _ => (
                        404,
                        "text/plain; charset=utf-8",
                        "not found: try /metrics, /healthz, /readyz\n".into(),
                        head,
                    ),
                };
            }
        }
    };
    let mut out = Vec::with_capacity(body.len() + 200);
    out.extend_from_slice(httpfile::status::status_line(code));
    out.extend_from_slice(
        format!(
            "Content-Type: {ctype}\r\nContent-Length: {}\r\n",
            body.len()
        )
        .as_bytes(),
    );
    if code == 405 {
        out.extend_from_slice(b"Allow: GET, HEAD\r\n");
    }
    out.extend_from_slice(b"Cache-Control: no-store\r\nConnection: close\r\n\r\n");
    if !head {
        out.extend_from_slice(body.as_bytes());
    }
    stream.write_all(&out).await?;
    stream.shutdown().await
}

//! `export_metrics` publishes every counter with HELP text through a real
//! Prometheus recorder, with values that follow the manager's activity.

mod common;

use common::*;
use filemanager::{Opened, SymlinkPolicy};

fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .unwrap_or_else(|| panic!("no series {series} in\n{text}"))
        .rsplit(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn export_metrics_renders_every_name_with_help() {
    let t = Tree::create();
    for backend in backends(&t.root) {
        let fm = manager(&t.root, backend, SymlinkPolicy::WithinRoot);
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        current_thread().block_on(async {
            for _ in 0..5 {
                let Opened::File(f) = fm.open("inside.txt").await.unwrap() else {
                    panic!()
                };
                let _ = fm.read_at(&f, 0, 6).await.unwrap();
            }
            assert!(matches!(
                fm.open("missing").await.unwrap(),
                Opened::NotFound
            ));
            let h = fm.open_uncached("inside.txt").await.unwrap();
            h.close().await.unwrap();
            drop(fm.open_uncached("inside.txt").await.unwrap());
        });
        fm.reap();
        metrics::with_local_recorder(&recorder, || fm.export_metrics("fileserver"));
        let text = handle.render();
        for name in [
            "fileserver_cache_hits_total",
            "fileserver_cache_misses_total",
            "fileserver_cache_negative_hits_total",
            "fileserver_cache_evictions_total",
            "fileserver_cache_unadmitted_total",
            "fileserver_cache_revalidations_total",
            "fileserver_cache_invalidations_total",
            "fileserver_cache_entries",
            "fileserver_watch_dirs",
            "fileserver_watch_events_total",
            "fileserver_watch_resets_total",
            "fileserver_census_dirs",
            "fileserver_census_scans_total",
            "fileserver_variant_hits_total",
            "fileserver_variant_compressions_total",
            "fileserver_variant_bytes_saved_total",
            "fileserver_variant_evictions_total",
            "fileserver_variant_bytes",
            "fileserver_variant_budget_bytes",
            "fileserver_contention_total",
            "fileserver_fds_open",
            "fileserver_fd_budget",
            "fileserver_fd_allocations_total",
            "fileserver_fd_releases_total",
            "fileserver_fd_stale_total",
            "fileserver_deferred_release_queue_depth",
            "fileserver_emfile_recoveries_total",
            "fileserver_backend_ops_total",
            "fileserver_read_bytes_total",
            "fileserver_reaper_batches_total",
        ] {
            assert!(
                text.contains(&format!("# HELP {name} ")),
                "no HELP for {name}\n{text}"
            );
        }
        assert_eq!(value(&text, "fileserver_cache_hits_total"), 4.0);
        assert!(value(&text, "fileserver_cache_misses_total") >= 2.0);
        assert_eq!(value(&text, "fileserver_fds_open"), 1.0);
        assert_eq!(
            value(&text, "fileserver_fd_releases_total{path=\"close\"}"),
            1.0
        );
        assert_eq!(
            value(&text, "fileserver_fd_releases_total{path=\"deferred\"}"),
            1.0
        );
        assert!(value(&text, "fileserver_read_bytes_total") >= 30.0);
        assert!(value(&text, "fileserver_backend_ops_total{op=\"open\"}") >= 3.0);
        let label = backend.to_string();
        assert_eq!(
            value(
                &text,
                &format!("fileserver_io_backend_info{{backend=\"{label}\"}}")
            ),
            1.0
        );
    }
}

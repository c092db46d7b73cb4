//! An axum router with an API route and the file service nested at
//! `/static`, serving a directory through `filemanager`:
//!
//! ```text
//! cargo run -p fdwarden-servedir --example axum -- [DIR] [ADDR]     (default: . 127.0.0.1:3000)
//! curl http://127.0.0.1:3000/api/health
//! curl -I http://127.0.0.1:3000/static/README.md
//! ```
//!
//! The daemon's HTTP semantics tests start [`app_at`] too (mounted at `/`,
//! with the serving options the daemon's own configuration parses from
//! their `--set key=value` arguments), so the example is held to the
//! daemon's answers.
#![allow(dead_code)]

use axum::Router;
use servedir::{FileManager, ServeDir};
use std::path::Path;

/// The file service for `root` with `options`, mounted at `base`;
/// `variant_budget`: bytes of compressed variants the manager keeps.
pub(crate) fn files(
    root: &Path,
    base: &str,
    options: servedir::Options,
    variant_budget: Option<u64>,
) -> std::io::Result<ServeDir> {
    let mut config = filemanager::Config::new(root);
    if let Some(budget) = variant_budget {
        config.cache.variant_budget = budget;
    }
    let fm = FileManager::new(config)?;
    Ok(ServeDir::with_options(fm, options).base(base))
}

/// The example's router: `/api/health` and the files under `mount`
/// (`"/static"` here; `"/"` in the daemon's semantics tests).
pub(crate) fn app_at(
    root: &Path,
    mount: &str,
    options: servedir::Options,
    variant_budget: Option<u64>,
) -> std::io::Result<Router> {
    let api = Router::new().route("/api/health", axum::routing::get(|| async { "ok\n" }));
    Ok(match mount.trim_end_matches('/') {
        "" => api.fallback_service(files(root, "", options, variant_budget)?),
        base => api.nest_service(base, files(root, base, options, variant_budget)?),
    })
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = args.first().map_or(".", String::as_str);
    let addr = args.get(1).map_or("127.0.0.1:3000", String::as_str);
    let options = servedir::Options {
        listing: true,
        ..servedir::Options::default()
    };
    let app = app_at(Path::new(root), "/static", options, None)?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    println!(
        "serving {root} at http://{}/static/ (API: /api/health)",
        listener.local_addr()?
    );
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}

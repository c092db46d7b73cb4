//! An axum router with an API route and the file service nested at
//! `/static`, serving a directory through `filemanager`:
//!
//! ```text
//! cargo run -p servedir --example axum -- [DIR] [ADDR]     (default: . 127.0.0.1:3000)
//! curl http://127.0.0.1:3000/api/health
//! curl -I http://127.0.0.1:3000/static/README.md
//! ```
//!
//! The daemon's HTTP semantics tests start [`app_at`] too (mounted at `/`,
//! with the settings they pass as `--set key=value`), so the example is
//! held to the daemon's answers.
#![allow(dead_code)]

use axum::Router;
use servedir::{FileManager, ServeDir};
use std::path::Path;

/// The settings a test or a user can pass as `--set key=value`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Options {
    /// `index=a.html,b.html`
    pub(crate) index: Option<Vec<String>>,
    /// `directory_listing=true`
    pub(crate) directory_listing: bool,
    /// `serve_dotfiles=true`
    pub(crate) serve_dotfiles: bool,
    /// `cache_control=...` (empty: none)
    pub(crate) cache_control: Option<String>,
    /// `max_ranges=N`
    pub(crate) max_ranges: Option<usize>,
    /// `precompressed=false`
    pub(crate) precompressed: Option<bool>,
    /// `compression.enabled=true`, then `compression.max_file_size=N`,
    /// `compression.codings=zstd,gzip` (the daemon's keys).
    pub(crate) compression: Option<servedir::CompressionOptions>,
    /// `compression.budget=N`: the manager's variant budget.
    pub(crate) compression_budget: Option<u64>,
}

impl Options {
    /// Reads `--set key=value` pairs; other arguments are returned.
    pub(crate) fn parse(args: &[String]) -> Result<(Options, Vec<String>), String> {
        let mut o = Options::default();
        let mut rest = Vec::new();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            if a != "--set" {
                rest.push(a.clone());
                continue;
            }
            let kv = it.next().ok_or("--set needs key=value")?;
            let (k, v) = kv.split_once('=').ok_or(format!("--set {kv}: no `=`"))?;
            let bool_of = |v: &str| v.parse::<bool>().map_err(|e| format!("{k}: {e}"));
            match k {
                "index" => o.index = Some(v.split(',').map(str::to_string).collect()),
                "directory_listing" => o.directory_listing = bool_of(v)?,
                "serve_dotfiles" => o.serve_dotfiles = bool_of(v)?,
                "cache_control" => o.cache_control = Some(v.to_string()),
                "max_ranges" => o.max_ranges = Some(v.parse().map_err(|e| format!("{k}: {e}"))?),
                "precompressed" => o.precompressed = Some(bool_of(v)?),
                "compression.enabled" => {
                    o.compression = bool_of(v)?.then(servedir::CompressionOptions::default)
                }
                "compression.max_file_size" | "compression.codings" => {
                    let c = o
                        .compression
                        .as_mut()
                        .ok_or("compression.enabled=true first")?;
                    if k.ends_with("codings") {
                        c.codings = v
                            .split(',')
                            .map(|t| {
                                httpfile::mime::ContentCoding::from_token(t)
                                    .ok_or(format!("{k}: unknown coding {t}"))
                            })
                            .collect::<Result<_, _>>()?;
                    } else {
                        c.max_file_size = v.parse().map_err(|e| format!("{k}: {e}"))?;
                    }
                }
                "compression.budget" => {
                    o.compression_budget = Some(v.parse().map_err(|e| format!("{k}: {e}"))?)
                }
                _ => return Err(format!("unknown setting {k}")),
            }
        }
        Ok((o, rest))
    }
}

/// The file service for `root` with `options`, mounted at `base`.
pub(crate) fn files(root: &Path, base: &str, options: &Options) -> std::io::Result<ServeDir> {
    let mut config = filemanager::Config::new(root);
    if let Some(budget) = options.compression_budget {
        config.cache.variant_budget = budget;
    }
    let fm = FileManager::new(config)?;
    let mut files = ServeDir::new(fm)
        .base(base)
        .directory_listing(options.directory_listing)
        .dotfiles(options.serve_dotfiles)
        .compression(options.compression.clone());
    if let Some(index) = &options.index {
        files = files.index_files(index.iter().cloned());
    }
    if let Some(cc) = &options.cache_control {
        files = files.cache_control(cc);
    }
    if let Some(n) = options.max_ranges {
        files = files.max_ranges(n);
    }
    if let Some(on) = options.precompressed {
        files = files.precompressed(on);
    }
    Ok(files)
}

/// The example's router: `/api/health` and the files under `mount`
/// (`"/static"` here; `"/"` in the daemon's semantics tests).
pub(crate) fn app_at(root: &Path, mount: &str, options: &Options) -> std::io::Result<Router> {
    let api = Router::new().route("/api/health", axum::routing::get(|| async { "ok\n" }));
    Ok(match mount.trim_end_matches('/') {
        "" => api.fallback_service(files(root, "", options)?),
        base => api.nest_service(base, files(root, base, options)?),
    })
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (options, rest) = Options::parse(&args)?;
    let root = rest.first().map_or(".", String::as_str);
    let addr = rest.get(1).map_or("127.0.0.1:3000", String::as_str);
    let app = app_at(Path::new(root), "/static", &options)?;
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

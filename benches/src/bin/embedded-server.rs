//! One axum app serving a directory with an embedded file service, for the
//! load harness's `embedded` scenario group:
//!
//! ```text
//! embedded-server --impl tower-http --root DIR --listen 127.0.0.1:PORT [--workers 2]
//! embedded-server --impl servedir   --root DIR --listen 127.0.0.1:PORT [--workers 2]
//! ```
//!
//! Both implementations run in the same app, the way a user would embed
//! them: a tokio multi-thread runtime with `--workers` worker threads, the
//! service mounted at `/` (`Router::new().fallback_service(svc)`), HTTP/1.1
//! only (the workspace's axum features), each service at its defaults.
//! Accepted sockets get `TCP_NODELAY`, as the daemon's and nginx's do:
//! without it a response whose body is not ready with its head (every
//! tower-http response, servedir's streamed ones) goes out in two writes,
//! and Nagle's algorithm holds the second until the client's delayed ACK
//! of the first, tens of milliseconds later. `--nodelay false` shows that.
//! The harness picks the port, as it does for its peers, and stops the
//! process with SIGTERM (the default action: no graceful drain to wait for).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use axum::serve::ListenerExt;
use axum::Router;
use clap::{Parser, ValueEnum};

/// Which file service the app mounts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Impl {
    /// `tower_http::services::ServeDir::new(root)`.
    TowerHttp,
    /// `servedir::ServeDir::new(FileManager::new(Config::new(root))?)`.
    Servedir,
}

/// Serve a directory from an axum app with tower-http's or this project's `ServeDir`.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// The file service mounted at `/`.
    #[arg(long = "impl", value_enum)]
    imp: Impl,
    /// The directory served.
    #[arg(long, value_name = "DIR")]
    root: PathBuf,
    /// Where to listen (port 0: any free one; the bound address is printed).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Worker threads of the tokio multi-thread runtime.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Set `TCP_NODELAY` on every accepted connection.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    nodelay: bool,
}

fn app(imp: Impl, root: &Path) -> Result<Router> {
    Ok(match imp {
        Impl::TowerHttp => {
            Router::new().fallback_service(tower_http::services::ServeDir::new(root))
        }
        Impl::Servedir => {
            let fm = filemanager::FileManager::new(filemanager::Config::new(root))
                .with_context(|| format!("open {}", root.display()))?;
            Router::new().fallback_service(servedir::ServeDir::new(fm))
        }
    })
}

async fn serve(args: Args) -> Result<()> {
    let app = app(args.imp, &args.root)?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("bind {}", args.listen))?;
    println!("listening on http://{}", listener.local_addr()?);
    let nodelay = args.nodelay;
    let listener = listener.tap_io(move |tcp| {
        if nodelay {
            if let Err(err) = tcp.set_nodelay(true) {
                eprintln!("embedded-server: TCP_NODELAY: {err}");
            }
        }
    });
    axum::serve(listener, app).await?;
    Ok(())
}

fn main() -> Result<()> {
    let args = Args::parse();
    anyhow::ensure!(args.workers >= 1, "--workers must be at least 1");
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.workers)
        .enable_all()
        .build()
        .context("build the tokio runtime")?
        .block_on(serve(args))
}

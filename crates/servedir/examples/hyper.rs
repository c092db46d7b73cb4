//! The file service on a bare hyper-util server (no framework):
//!
//! ```text
//! cargo run -p fdwarden-servedir --example hyper -- [DIR] [ADDR]    (default: . 127.0.0.1:3000)
//! curl -I http://127.0.0.1:3000/README.md
//! ```

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use servedir::{FileManager, ServeDir};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let root = args.next().unwrap_or_else(|| ".".into());
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:3000".into());
    let fm = FileManager::new(filemanager::Config::new(&root))?;
    let service = ServeDir::new(fm).directory_listing(true);
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("serving {root} at http://{}/", listener.local_addr()?);
    loop {
        let (stream, _) = listener.accept().await?;
        let service = TowerToHyperService::new(service.clone());
        tokio::spawn(async move {
            let conn = auto::Builder::new(TokioExecutor::new());
            if let Err(e) = conn.serve_connection(TokioIo::new(stream), service).await {
                eprintln!("connection: {e}");
            }
        });
    }
}

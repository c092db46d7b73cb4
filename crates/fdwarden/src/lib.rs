//! `fdwarden`: the family's crates in one dependency, under the names a
//! server uses. Add it once (`cargo add fdwarden`) and serve a directory
//! from an axum or hyper server:
//!
//! ```
//! # let dir = tempfile::tempdir().unwrap();
//! let files = fdwarden::FileManager::new(fdwarden::Config::new(dir.path()))?;
//! let service = fdwarden::ServeDir::new(files).directory_listing(true);
//! # drop(service);
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! | module | crate | what it is |
//! |---|---|---|
//! | [`servedir`] | `fdwarden-servedir` | the tower Service (`ServeDir`, `ServeFile`) |
//! | [`filemanager`] | `fdwarden-filemanager` | open files beneath a root on tokio (io_uring on Linux) |
//! | [`siterules`] | `fdwarden-siterules` | per-path headers, redirects, `try_files`, auth, CORS |
//! | [`decide`] | `fdwarden-decide` | one request's answer, shared by every engine |
//! | [`httpfile`] | `fdwarden-httpfile` | the HTTP semantics of serving a file, pure |
//! | [`pathcache`], [`fdtable`], [`announce`] | `fdwarden-pathcache`, ... | the data structures beneath |
#![deny(missing_docs)]

pub use announce;
pub use decide;
pub use fdtable;
pub use filemanager;
pub use httpfile;
pub use pathcache;
pub use servedir;
pub use siterules;

pub use filemanager::{Config, FileManager, SymlinkPolicy};
pub use servedir::{Body, ClientAddr, CompressionOptions, Options, ServeDir, ServeFile, Tls};
pub use siterules::{RuleSpec, Rules};

//! STAND-IN for `filemanager` until it compiles: the same shape (`open`
//! beneath the root returning `Opened`), implemented with openat2
//! RESOLVE_BENEATH and fstat, without a cache. Replaced by
//! `filemanager::FileManager`.

use crate::config::{Settings, Symlinks};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};
use std::io;

/// Result of an open beneath the root.
#[derive(Debug)]
pub enum Opened {
    /// A regular file.
    File(FileRef),
    /// No such file.
    NotFound,
    /// Exists but may not be served (escape attempt, symlink policy, permissions, not a regular file).
    Forbidden,
    /// A directory.
    IsDir,
}

/// Open failures that are not answers about the path.
#[derive(Debug)]
pub enum OpenError {
    /// EMFILE/ENFILE: answer 503.
    Exhausted,
    /// Anything else: answer 500.
    Io(io::Error),
}

/// An open regular file with the metadata responses need.
#[derive(Debug)]
pub struct FileRef {
    fd: OwnedFd,
    size: u64,
    mtime_secs: u64,
    etag: String,
    bytes: Option<Vec<u8>>,
}

impl FileRef {
    /// Size at open time.
    pub fn size(&self) -> u64 {
        self.size
    }
    /// Modification time (Unix seconds).
    pub fn mtime_secs(&self) -> u64 {
        self.mtime_secs
    }
    /// Strong, quoted ETag.
    pub fn etag(&self) -> &str {
        &self.etag
    }
    /// The whole file when it is small.
    pub fn bytes(&self) -> Option<&[u8]> {
        self.bytes.as_deref()
    }
    /// The descriptor (for sendfile).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Opens files beneath one root.
#[derive(Debug)]
pub struct Files {
    root: OwnedFd,
    resolve: ResolveFlags,
    small_max: u64,
}

impl Files {
    /// Opens the root directory.
    pub fn new(s: &Settings) -> io::Result<Files> {
        let root = rustix::fs::open(
            &s.root,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let resolve = match s.symlinks {
            Symlinks::Deny => ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS,
            Symlinks::WithinRoot => ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
            Symlinks::Follow => ResolveFlags::NO_MAGICLINKS,
        };
        Ok(Files {
            root,
            resolve,
            small_max: s.cache.small_file_max,
        })
    }

    /// Backend name and why.
    pub fn backend(&self) -> (&'static str, &'static str) {
        ("blocking", "stand-in until filemanager lands")
    }

    /// Soft RLIMIT_NOFILE.
    pub fn fd_limit(&self) -> u64 {
        rustix::process::getrlimit(rustix::process::Resource::Nofile)
            .current
            .unwrap_or(u64::MAX)
    }

    /// Opens `rel` (normalized, root-relative) beneath the root.
    pub async fn open(&self, rel: &str) -> Result<Opened, OpenError> {
        let path = if rel.is_empty() { "." } else { rel };
        let fd = match rustix::fs::openat2(
            &self.root,
            path,
            OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY,
            Mode::empty(),
            self.resolve,
        ) {
            Ok(fd) => fd,
            Err(e) => {
                return match e {
                    rustix::io::Errno::NOENT
                    | rustix::io::Errno::NOTDIR
                    | rustix::io::Errno::NAMETOOLONG => Ok(Opened::NotFound),
                    rustix::io::Errno::XDEV
                    | rustix::io::Errno::LOOP
                    | rustix::io::Errno::ACCESS
                    | rustix::io::Errno::PERM => Ok(Opened::Forbidden),
                    rustix::io::Errno::MFILE | rustix::io::Errno::NFILE => {
                        Err(OpenError::Exhausted)
                    }
                    e => Err(OpenError::Io(e.into())),
                }
            }
        };
        let st = rustix::fs::fstat(&fd).map_err(|e| OpenError::Io(e.into()))?;
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory => return Ok(Opened::IsDir),
            FileType::RegularFile => {}
            _ => return Ok(Opened::Forbidden),
        }
        let size = st.st_size as u64;
        let mtime_ns = st.st_mtime as i64 * 1_000_000_000 + st.st_mtime_nsec as i64;
        let etag = format!("\"{:x}-{:x}-{:x}\"", st.st_ino, size, mtime_ns);
        let bytes = if size <= self.small_max {
            let mut v = vec![0u8; size as usize];
            let n = rustix::io::pread(&fd, &mut v, 0).map_err(|e| OpenError::Io(e.into()))?;
            v.truncate(n);
            Some(v)
        } else {
            None
        };
        Ok(Opened::File(FileRef {
            fd,
            size: bytes.as_ref().map_or(size, |b| b.len() as u64),
            mtime_secs: st.st_mtime.max(0) as u64,
            etag,
            bytes,
        }))
    }
}

impl Files {
    /// Metrics of the file layer (none in the stand-in).
    pub fn export_metrics(&self, _prefix: &str) {}
}

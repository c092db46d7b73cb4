//! The digest of a file's bytes, for entity-tags by content: read once per
//! version (through the I/O backend, so no worker waits on the disk) and
//! kept in [`crate::digest::Digests`].

use std::io;

use sha2::{Digest, Sha256};

use crate::handle::CachedFile;
use crate::shared::FileManager;

/// Bytes read at a time while hashing.
const CHUNK: usize = 1 << 20;

impl FileManager {
    /// The SHA-256 of `file`'s bytes, computed the first time this version
    /// of it is asked for. An error when it could not be read whole or
    /// changed while it was read (the caller then tags by size and time).
    pub async fn content_digest(&self, file: &CachedFile) -> io::Result<[u8; 32]> {
        let m = file.meta();
        let version = (m.dev, m.ino, m.size, m.mtime_ns, m.ctime_ns);
        if let Some(d) = self.shared.digests.get(&version) {
            return Ok(d);
        }
        let mut h = Sha256::new();
        if let Some(bytes) = file.bytes() {
            h.update(bytes);
        } else {
            let mut off = 0;
            while off < m.size {
                let len = (m.size - off).min(CHUNK as u64) as usize;
                let bytes = self.read_at(file, off, len).await?;
                if bytes.is_empty() {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "file shrank while hashed",
                    ));
                }
                h.update(&bytes);
                off += bytes.len() as u64;
            }
            if !self.contents_unchanged(file) {
                return Err(io::Error::other("file changed while hashed"));
            }
        }
        let d: [u8; 32] = h.finalize().into();
        self.shared.digests.put(version, d);
        Ok(d)
    }
}

//! A file only this user may read, written whole or not at all: a new
//! 0600 file beside the path, synced, then renamed over it, so no reader
//! (another replica, the daemon at a reload) ever sees half of it. Used by
//! `acme::store` (account, certificates, challenge answers) and `tickets`
//! (session-ticket keys).

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Writes `bytes` to a new 0600 file beside `path`, syncs it and renames
/// it over `path`.
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut f = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written.map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

//! The state directory: the account per CA, each certificate with its
//! key, the challenges an order has published, and the lock that lets
//! one of several replicas order at a time. Everything here is a file
//! only this user may read; every write is a new file renamed into place,
//! so a reader (another replica, a restart) sees the old file or the new
//! one, never half of one.
//!
//! ```text
//! state_dir/                      0700
//!   lock                          flock(2): held while ordering
//!   accounts/<ca>.json            0600  instant-acme's credentials
//!   certs/<first name>/cert.pem   0600  chain, leaf first
//!   certs/<first name>/key.pem    0600
//!   challenges/http-01/<token>    0600  key authorization
//!   challenges/tls-alpn-01/<name> 0600  key authorization
//! ```

use crate::private_file::write_private;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The state directory, created with safe permissions.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    dir: PathBuf,
}

/// The lock on the state directory; released when dropped.
#[derive(Debug)]
pub(crate) struct Lock {
    _file: File,
}

/// A certificate and key as the store holds them.
#[derive(Debug)]
pub(crate) struct StoredPair {
    /// PEM chain.
    pub chain: Vec<u8>,
    /// PEM key.
    pub key: Vec<u8>,
    /// Where the chain is (for messages).
    pub path: PathBuf,
    /// Where the key is.
    pub key_path: PathBuf,
}

/// Which challenge a published answer is for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Published {
    /// Keyed by token.
    Http01,
    /// Keyed by name.
    TlsAlpn01,
}

impl Published {
    fn dir(self) -> &'static str {
        match self {
            Published::Http01 => "challenges/http-01",
            Published::TlsAlpn01 => "challenges/tls-alpn-01",
        }
    }
}

impl Store {
    /// Opens `dir`, creating it and its subdirectories as 0700. A
    /// directory others may read is narrowed to 0700 (it holds keys).
    pub(crate) fn open(dir: &Path) -> io::Result<Store> {
        for sub in [
            "",
            "accounts",
            "certs",
            "challenges/http-01",
            "challenges/tls-alpn-01",
        ] {
            let d = dir.join(sub);
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&d)?;
            let mode = fs::metadata(&d)?.permissions().mode();
            if mode & 0o077 != 0 {
                tracing::warn!(dir = %d.display(), "acme: state directory was mode {:o}; setting 0700", mode & 0o777);
                fs::set_permissions(&d, fs::Permissions::from_mode(0o700))?;
            }
        }
        Ok(Store {
            dir: dir.to_path_buf(),
        })
    }

    /// Takes the lock without waiting; `None` while another process
    /// (a replica sharing the directory) holds it.
    pub(crate) fn try_lock(&self) -> io::Result<Option<Lock>> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(self.dir.join("lock"))?;
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(Some(Lock { _file: file })),
            Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The stored credentials for the CA at `directory`, if any.
    pub(crate) fn account(&self, directory: &str) -> io::Result<Option<Vec<u8>>> {
        read_optional(&self.account_path(directory))
    }

    /// Keeps the credentials for the CA at `directory`.
    pub(crate) fn save_account(&self, directory: &str, credentials: &[u8]) -> io::Result<()> {
        write_private(&self.account_path(directory), credentials)
    }

    /// Forgets the account for `directory` (the CA no longer knows it).
    pub(crate) fn forget_account(&self, directory: &str) -> io::Result<()> {
        remove_optional(&self.account_path(directory))
    }

    fn account_path(&self, directory: &str) -> PathBuf {
        self.dir
            .join("accounts")
            .join(format!("{}.json", file_safe(directory)))
    }

    /// The certificate stored for the set whose first name is `name`.
    pub(crate) fn pair(&self, name: &str) -> io::Result<Option<StoredPair>> {
        let d = self.dir.join("certs").join(file_safe(name));
        let (path, key_path) = (d.join("cert.pem"), d.join("key.pem"));
        let (Some(chain), Some(key)) = (read_optional(&path)?, read_optional(&key_path)?) else {
            return Ok(None);
        };
        Ok(Some(StoredPair {
            chain,
            key,
            path,
            key_path,
        }))
    }

    /// Keeps a certificate and its key: the key first, so a chain on
    /// disk always has its key beside it (a reader that sees a new chain
    /// with the old key refuses the mismatch and keeps what it serves).
    pub(crate) fn save_pair(&self, name: &str, chain: &[u8], key: &[u8]) -> io::Result<()> {
        let d = self.dir.join("certs").join(file_safe(name));
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&d)?;
        write_private(&d.join("key.pem"), key)?;
        write_private(&d.join("cert.pem"), chain)
    }

    /// Publishes a challenge answer for the replicas that share the
    /// directory (the CA may reach any of them).
    pub(crate) fn publish(&self, kind: Published, key: &str, answer: &str) -> io::Result<()> {
        write_private(&self.published_path(kind, key), answer.as_bytes())
    }

    /// Withdraws what [`Store::publish`] wrote.
    pub(crate) fn withdraw(&self, kind: Published, key: &str) -> io::Result<()> {
        remove_optional(&self.published_path(kind, key))
    }

    /// An answer another replica published, if any.
    pub(crate) fn published(&self, kind: Published, key: &str) -> Option<String> {
        let bytes = read_optional(&self.published_path(kind, key)).ok()??;
        String::from_utf8(bytes).ok()
    }

    fn published_path(&self, kind: Published, key: &str) -> PathBuf {
        self.dir.join(kind.dir()).join(file_safe(key))
    }
}

/// `s` as one file name: ASCII letters, digits, `-`, `_` and `.` kept,
/// anything else (`/`, `:`) as `_`; never `.` or `..` alone.
fn file_safe(s: &str) -> String {
    let out: String = s
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' | '.' => c,
            _ => '_',
        })
        .collect();
    if out.chars().all(|c| c == '.') {
        out.replace('.', "_")
    } else {
        out
    }
}

fn read_optional(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
    }
}

fn remove_optional(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_stay_one_component() {
        assert_eq!(
            file_safe("https://ca.example:14000/dir"),
            "https___ca.example_14000_dir"
        );
        assert_eq!(file_safe("../x"), ".._x");
        assert_eq!(file_safe(".."), "__");
        assert_eq!(file_safe("a.example.com"), "a.example.com");
    }

    #[test]
    fn files_are_private_and_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("acme")).unwrap();
        store.save_pair("a.example", b"chain1", b"key1").unwrap();
        store.save_pair("a.example", b"chain2", b"key2").unwrap();
        let pair = store.pair("a.example").unwrap().unwrap();
        assert_eq!(
            (&pair.chain[..], &pair.key[..]),
            (&b"chain2"[..], &b"key2"[..])
        );
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&pair.key_path), 0o600);
        assert_eq!(mode(&dir.path().join("acme")), 0o700);
        let leftovers: Vec<_> = fs::read_dir(pair.path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers.len(), 2, "{leftovers:?}");
    }

    #[test]
    fn a_loose_directory_is_narrowed() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("acme");
        fs::create_dir(&d).unwrap();
        fs::set_permissions(&d, fs::Permissions::from_mode(0o755)).unwrap();
        Store::open(&d).unwrap();
        assert_eq!(
            fs::metadata(&d).unwrap().permissions().mode() & 0o777,
            0o700
        );
    }

    #[test]
    fn one_holder_of_the_lock_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let a = Store::open(dir.path()).unwrap();
        let b = Store::open(dir.path()).unwrap();
        let held = a.try_lock().unwrap().expect("free at first");
        assert!(b.try_lock().unwrap().is_none(), "a second holder");
        drop(held);
        assert!(b.try_lock().unwrap().is_some(), "free again after release");
    }
}

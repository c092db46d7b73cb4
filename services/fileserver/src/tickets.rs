//! Session-ticket keys shared by replicas (`tls_ticket_keys`): a client
//! that resumes its TLS session on any replica reading the same key file
//! skips the full handshake there too. Used by `tls` (the HTTPS and QUIC
//! configurations) and the `ticket-key` subcommand.
//!
//! The file holds one or more 80-octet keys, nginx's
//! `ssl_session_ticket_key` size: a 16-octet name, 32 octets nginx uses
//! for HMAC (unused here) and a 32-octet AES key. The first key seals new
//! tickets (AES-256-GCM); every key opens them, so keys rotate by putting
//! a new one first and keeping the old ones for a ticket's lifetime. The
//! file is read again at SIGHUP and when it changes.
//!
//! ```text
//! ticket = name (16) | nonce (12) | AES-256-GCM(session state), tag (16)
//! ```

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};
use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::time::SystemTime;

/// One key's length in the file.
pub(crate) const KEY_LEN: usize = 80;
/// How long a ticket is good for (rustls's default is 6 h; a day lets a
/// returning visitor resume after a night).
const LIFETIME_SECS: u32 = 24 * 3600;
/// Keys a `ticket-key` run keeps behind the new one.
const KEEP: usize = 2;

struct Key {
    name: [u8; 16],
    aead: LessSafeKey,
}

/// The keys of a `tls_ticket_keys` file: rustls's ticketer.
pub(crate) struct TicketKeys {
    path: PathBuf,
    keys: RwLock<(Vec<Key>, Option<SystemTime>)>,
    rng: SystemRandom,
}

impl std::fmt::Debug for TicketKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TicketKeys")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// The keys in `bytes`, each [`KEY_LEN`] octets.
fn parse(bytes: &[u8], path: &Path) -> Result<Vec<Key>, String> {
    if bytes.is_empty() || bytes.len() % KEY_LEN != 0 {
        return Err(format!(
            "{}: {} octets is not one or more {KEY_LEN}-octet keys (write one with `fileserver ticket-key {}`)",
            path.display(),
            bytes.len(),
            path.display()
        ));
    }
    bytes
        .chunks_exact(KEY_LEN)
        .map(|k| {
            let mut name = [0u8; 16];
            name.copy_from_slice(&k[..16]);
            let aes = UnboundKey::new(&AES_256_GCM, &k[48..80])
                .map_err(|_| format!("{}: not an AES-256 key", path.display()))?;
            Ok(Key {
                name,
                aead: LessSafeKey::new(aes),
            })
        })
        .collect()
}

fn read(path: &Path) -> Result<(Vec<Key>, Option<SystemTime>), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
    Ok((parse(&bytes, path)?, modified))
}

impl TicketKeys {
    /// The keys of `path`.
    pub(crate) fn load(path: &Path) -> Result<TicketKeys, String> {
        Ok(TicketKeys {
            path: path.to_path_buf(),
            keys: RwLock::new(read(path)?),
            rng: SystemRandom::new(),
        })
    }

    /// Reads the file again (a rotation); on error the keys in force stay.
    pub(crate) fn reload(&self) -> Result<(), String> {
        let fresh = read(&self.path)?;
        *self.keys.write().unwrap_or_else(|e| e.into_inner()) = fresh;
        Ok(())
    }

    /// Reads the file again if it changed since it was last read.
    pub(crate) fn reload_if_changed(&self) -> Result<bool, String> {
        let now = std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .ok();
        let seen = self.keys.read().unwrap_or_else(|e| e.into_inner()).1;
        if now == seen {
            return Ok(false);
        }
        self.reload().map(|()| true)
    }
}

impl rustls::server::ProducesTickets for TicketKeys {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        LIFETIME_SECS
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let keys = self.keys.read().unwrap_or_else(|e| e.into_inner());
        let key = keys.0.first()?;
        let mut nonce = [0u8; NONCE_LEN];
        self.rng.fill(&mut nonce).ok()?;
        let mut out = Vec::with_capacity(16 + NONCE_LEN + plain.len() + 16);
        out.extend_from_slice(&key.name);
        out.extend_from_slice(&nonce);
        let mut sealed = plain.to_vec();
        key.aead
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(&key.name),
                &mut sealed,
            )
            .ok()?;
        out.extend_from_slice(&sealed);
        Some(out)
    }

    fn decrypt(&self, ticket: &[u8]) -> Option<Vec<u8>> {
        if ticket.len() < 16 + NONCE_LEN + 16 {
            return None;
        }
        let (name, rest) = ticket.split_at(16);
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let keys = self.keys.read().unwrap_or_else(|e| e.into_inner());
        let key = keys.0.iter().find(|k| k.name == name)?;
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut buf = sealed.to_vec();
        let plain = key
            .aead
            .open_in_place(nonce, Aad::from(&key.name), &mut buf)
            .ok()?;
        Some(plain.to_vec())
    }
}

/// `fileserver ticket-key FILE`: a new random key first in `path`, the
/// previous first keys kept behind it (they still open the tickets they
/// sealed), its directory made if missing, and written whole or not at
/// all (`private_file`): a replica never reads half a file. Mode 0600.
pub(crate) fn rotate(path: &Path) -> Result<usize, String> {
    let mut key = [0u8; KEY_LEN];
    SystemRandom::new()
        .fill(&mut key)
        .map_err(|_| "no randomness from the system".to_string())?;
    let old = match std::fs::read(path) {
        Ok(b) => {
            parse(&b, path)?;
            b
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let mut out = key.to_vec();
    out.extend(old.chunks_exact(KEY_LEN).take(KEEP).flatten());
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    crate::private_file::write_private(path, &out).map_err(|e| e.to_string())?;
    Ok(out.len() / KEY_LEN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::server::ProducesTickets;

    #[test]
    fn a_rotated_file_opens_what_the_old_key_sealed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys");
        assert_eq!(rotate(&path).unwrap(), 1);
        let keys = TicketKeys::load(&path).unwrap();
        let ticket = keys.encrypt(b"session state").unwrap();
        assert_eq!(keys.decrypt(&ticket).unwrap(), b"session state");
        let mut forged = ticket.clone();
        *forged.last_mut().unwrap() ^= 1;
        assert!(keys.decrypt(&forged).is_none(), "a changed ticket opened");
        assert_eq!(rotate(&path).unwrap(), 2);
        keys.reload().unwrap();
        assert_eq!(
            keys.decrypt(&ticket).unwrap(),
            b"session state",
            "the old key"
        );
        let newer = keys.encrypt(b"x").unwrap();
        assert_ne!(newer[..16], ticket[..16], "the new key seals");
        for _ in 0..3 {
            rotate(&path).unwrap();
        }
        assert_eq!(std::fs::read(&path).unwrap().len(), (KEEP + 1) * KEY_LEN);
        keys.reload().unwrap();
        assert!(
            keys.decrypt(&ticket).is_none(),
            "a key rotated out still opens"
        );
    }

    #[test]
    fn a_file_that_is_not_keys_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys");
        std::fs::write(&path, [0u8; 79]).unwrap();
        assert!(TicketKeys::load(&path).unwrap_err().contains("79 octets"));
        assert!(
            rotate(&path).is_err(),
            "rotated over a file that is not keys"
        );
    }
}

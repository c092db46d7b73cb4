//! HTTP Basic authentication (RFC 7617) against bcrypt hashes.
//!
//! A bcrypt check costs tens of milliseconds of CPU by design, far more
//! than serving a file, so a credential that verified is remembered
//! (bounded, per rule) and later requests with the same `Authorization`
//! pass with a constant-time compare. Credentials that fail are never
//! remembered, and an unknown user costs the same bcrypt work as a known
//! one, so timing tells neither whether a name exists nor how much of a
//! password was right.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// Credentials refused, process-wide (see [`crate::auth_failures`]).
pub(crate) static FAILURES: AtomicU64 = AtomicU64::new(0);

/// Verified `Authorization` values remembered per rule.
const REMEMBERED: usize = 64;

/// One rule's `basic_auth`: a realm and its users' bcrypt hashes.
pub struct BasicAuth {
    realm: String,
    /// The `WWW-Authenticate` value.
    challenge: String,
    users: Vec<(String, String)>,
    verified: Mutex<Vec<Vec<u8>>>,
}

impl std::fmt::Debug for BasicAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the hashes.
        f.debug_struct("BasicAuth")
            .field("realm", &self.realm)
            .field("users", &self.users.len())
            .finish()
    }
}

impl BasicAuth {
    /// `users` are `(name, bcrypt hash)`; the hashes are checked to be
    /// bcrypt's.
    pub fn new(realm: &str, users: Vec<(String, String)>) -> Result<BasicAuth, String> {
        if realm.is_empty()
            || realm
                .bytes()
                .any(|b| b == b'"' || b == b'\\' || b < 0x20 || b == 0x7f)
        {
            return Err(format!(
                "realm `{realm}` must be non-empty text without quotes, backslashes or control characters"
            ));
        }
        if users.is_empty() {
            return Err("names no user".into());
        }
        for (name, hash) in &users {
            if name.is_empty() || name.contains(':') {
                return Err(format!("user `{name}`: a name is non-empty and has no `:`"));
            }
            if hash.parse::<bcrypt::HashParts>().is_err() {
                return Err(format!(
                    "user `{name}`: not a bcrypt hash ($2b$...); never a plain password. \
                     Make one with `fileserver hash-password`"
                ));
            }
        }
        Ok(BasicAuth {
            challenge: format!("Basic realm=\"{realm}\", charset=\"UTF-8\""),
            realm: realm.to_string(),
            users,
            verified: Mutex::new(Vec::new()),
        })
    }

    /// The realm.
    pub fn realm(&self) -> &str {
        &self.realm
    }

    /// The `WWW-Authenticate` value of this realm's challenge.
    pub fn challenge(&self) -> &str {
        &self.challenge
    }

    /// `authorization` verified before (a compare, no bcrypt). Constant
    /// time in the bytes compared, and every remembered value is compared:
    /// the time says nothing of how much of a remembered credential a
    /// guess got right.
    pub fn is_verified(&self, authorization: &[u8]) -> bool {
        use subtle::ConstantTimeEq;
        let v = self.verified.lock().unwrap_or_else(|p| p.into_inner());
        v.iter().fold(false, |found, k| {
            found
                | (k.len() == authorization.len() && bool::from(k.as_slice().ct_eq(authorization)))
        })
    }

    /// `authorization` is a `Basic` credential at all (else it fails
    /// without bcrypt work).
    pub fn is_well_formed(&self, authorization: &[u8]) -> bool {
        decode(authorization).is_some()
    }

    /// Checks `authorization` against the users' hashes: the slow part,
    /// for a blocking thread. A success is remembered; a failure counted.
    pub fn verify(&self, authorization: &[u8]) -> bool {
        let Some((user, password)) = decode(authorization) else {
            self.count_failure();
            return false;
        };
        let hash = self
            .users
            .iter()
            .find(|(name, _)| name.as_bytes() == user.as_slice())
            .map(|(_, h)| h.as_str());
        // An unknown user is checked against the first user's hash (same
        // cost) and fails whatever it matches.
        let decoy = self.users[0].1.as_str();
        let ok =
            bcrypt::verify(&password, hash.unwrap_or(decoy)).unwrap_or(false) && hash.is_some();
        if ok {
            let mut v = self.verified.lock().unwrap_or_else(|p| p.into_inner());
            if v.len() >= REMEMBERED {
                v.remove(0);
            }
            v.push(authorization.to_vec());
        } else {
            self.count_failure();
        }
        ok
    }

    pub(crate) fn count_failure(&self) {
        FAILURES.fetch_add(1, Relaxed);
    }
}

/// The user a `Basic` `Authorization` names, whether or not its password
/// is right (nginx's `$remote_user`): what an access log records, never
/// the password.
pub fn basic_auth_user(authorization: &[u8]) -> Option<Vec<u8>> {
    decode(authorization).map(|(user, _)| user)
}

/// `Basic <base64(user:password)>` decoded.
fn decode(authorization: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let s = std::str::from_utf8(authorization).ok()?.trim();
    let (scheme, b64) = s.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    use base64::engine::{general_purpose, DecodePaddingMode, GeneralPurpose};
    use base64::Engine;
    // Padded or not: a client that leaves the `=` off is still understood.
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        general_purpose::PAD.with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    let b64 = b64.trim();
    if b64.len() > 4096 {
        return None;
    }
    let raw = LENIENT.decode(b64).ok()?;
    let colon = raw.iter().position(|&b| b == b':')?;
    Some((raw[..colon].to_vec(), raw[colon + 1..].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_basic_credentials() {
        // "alice:open sesame"
        let (u, p) = decode(b"Basic YWxpY2U6b3BlbiBzZXNhbWU=").unwrap();
        assert_eq!(
            (u.as_slice(), p.as_slice()),
            (&b"alice"[..], &b"open sesame"[..])
        );
        assert!(decode(b"Bearer abc").is_none());
        assert!(decode(b"Basic !!!").is_none());
        assert!(decode(b"Basic YWxpY2U=").is_none(), "no colon");
        assert!(
            decode(b"Basic YWxpY2U6b3BlbiBzZXNhbWU").is_some(),
            "unpadded"
        );
    }

    #[test]
    fn verifies_and_remembers_only_successes() {
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let a = BasicAuth::new("r", vec![("alice".into(), hash)]).unwrap();
        let good = format!("Basic {}", b64("alice:s3cret"));
        let bad = format!("Basic {}", b64("alice:guess"));
        let nobody = format!("Basic {}", b64("bob:s3cret"));
        assert!(!a.is_verified(good.as_bytes()));
        assert!(a.verify(good.as_bytes()));
        assert!(a.is_verified(good.as_bytes()));
        assert!(!a.verify(bad.as_bytes()));
        assert!(!a.is_verified(bad.as_bytes()));
        assert!(!a.verify(nobody.as_bytes()));
        assert!(FAILURES.load(Relaxed) >= 2);
        assert!(BasicAuth::new("r", vec![("alice".into(), "s3cret".into())]).is_err());
        let hash = bcrypt::hash("x", 4).unwrap();
        assert!(BasicAuth::new("a\"b", vec![("alice".into(), hash)]).is_err());
    }

    fn b64(s: &str) -> String {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(s)
    }
}

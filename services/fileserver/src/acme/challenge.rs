//! The answers a CA asks for while it validates an order: the key
//! authorization at `/.well-known/acme-challenge/TOKEN` (http-01, on the
//! plaintext listener) and a self-signed certificate carrying its digest
//! for a handshake offering `acme-tls/1` (tls-alpn-01, RFC 8737).
//!
//! The ordering task publishes here and in the state directory; the
//! listeners read here first and then the directory, so a replica behind
//! the same load balancer answers for an order another replica placed.

use super::store::{Published, Store};
use rustls::sign::CertifiedKey;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The URL path prefix of http-01.
pub(crate) const HTTP01_PREFIX: &[u8] = b"/.well-known/acme-challenge/";

/// Challenge answers in force.
#[derive(Debug)]
pub(crate) struct Challenges {
    http: Mutex<HashMap<String, String>>,
    alpn: Mutex<HashMap<String, String>>,
    store: Store,
}

impl Challenges {
    /// Answers kept here and published in `store`.
    pub(crate) fn new(store: Store) -> Challenges {
        Challenges {
            http: Mutex::default(),
            alpn: Mutex::default(),
            store,
        }
    }

    /// Answers `token` with `key_authorization` until withdrawn.
    pub(crate) fn publish(&self, kind: Published, key: &str, key_authorization: &str) {
        let map = self.map(kind);
        map.lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.to_string(), key_authorization.to_string());
        if let Err(e) = self.store.publish(kind, key, key_authorization) {
            tracing::warn!("acme: cannot publish the challenge for other replicas: {e}");
        }
    }

    /// Stops answering for `key`.
    pub(crate) fn withdraw(&self, kind: Published, key: &str) {
        self.map(kind)
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
        if let Err(e) = self.store.withdraw(kind, key) {
            tracing::warn!("acme: cannot withdraw a published challenge: {e}");
        }
    }

    fn map(&self, kind: Published) -> &Mutex<HashMap<String, String>> {
        match kind {
            Published::Http01 => &self.http,
            Published::TlsAlpn01 => &self.alpn,
        }
    }

    fn answer(&self, kind: Published, key: &str) -> Option<String> {
        let mine = self
            .map(kind)
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .cloned();
        mine.or_else(|| self.store.published(kind, key))
    }

    /// The key authorization for an http-01 request `path` (the target
    /// without its query), if `path` is one and its token is pending.
    pub(crate) fn http01(&self, path: &[u8]) -> Option<String> {
        let token = path.strip_prefix(HTTP01_PREFIX)?;
        // Tokens are base64url (RFC 8555 8.1): anything else is not ours.
        if token.is_empty()
            || !token
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_')
        {
            return None;
        }
        self.answer(Published::Http01, std::str::from_utf8(token).ok()?)
    }

    /// The certificate for a tls-alpn-01 handshake naming `name`.
    pub(crate) fn tls_alpn_cert(&self, name: &str) -> Option<Arc<CertifiedKey>> {
        let name = name.to_ascii_lowercase();
        let key_authorization = self.answer(Published::TlsAlpn01, &name)?;
        match tls_alpn_cert(&name, &key_authorization) {
            Ok(key) => Some(Arc::new(key)),
            Err(e) => {
                tracing::error!("acme: cannot make the tls-alpn-01 certificate for {name}: {e}");
                None
            }
        }
    }
}

impl crate::tls::AlpnChallenges for Challenges {
    fn certificate(&self, name: &str) -> Option<Arc<CertifiedKey>> {
        self.tls_alpn_cert(name)
    }
}

/// The response to an http-01 request: the key authorization as
/// `application/octet-stream` (RFC 8555 8.3), never cached.
pub(crate) fn http01_plan(method: httpfile::Method, key_authorization: &str) -> httpfile::Plan<'_> {
    use httpfile::plan::{Body, ContentType, Headers, MediaType};
    httpfile::Plan {
        status: 200,
        headers: Headers {
            content_type: Some(ContentType::Media(MediaType {
                essence: "application/octet-stream",
                utf8: false,
            })),
            content_length: Some(key_authorization.len() as u64),
            cache_control: Some("no-store"),
            ..Headers::default()
        },
        body: if method == httpfile::Method::Head {
            Body::Empty
        } else {
            Body::Bytes(key_authorization.as_bytes())
        },
        close: false,
    }
}

/// A self-signed certificate for `name` with the `acmeIdentifier`
/// extension holding SHA-256 of `key_authorization` (RFC 8737 3).
pub(crate) fn tls_alpn_cert(name: &str, key_authorization: &str) -> Result<CertifiedKey, String> {
    let digest = ring::digest::digest(&ring::digest::SHA256, key_authorization.as_bytes());
    let mut params =
        rcgen::CertificateParams::new(vec![name.to_string()]).map_err(|e| e.to_string())?;
    params.custom_extensions = vec![rcgen::CustomExtension::new_acme_identifier(digest.as_ref())];
    let key = rcgen::KeyPair::generate().map_err(|e| e.to_string())?;
    let cert = params.self_signed(&key).map_err(|e| e.to_string())?;
    let private = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
    // Not `CertifiedKey::from_der`: its key check parses the certificate
    // with webpki, which refuses the critical acmeIdentifier extension.
    let signing = rustls::crypto::ring::default_provider()
        .key_provider
        .load_private_key(private)
        .map_err(|e| e.to_string())?;
    Ok(CertifiedKey::new(vec![cert.der().clone()], signing))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http01_answers_only_a_pending_well_formed_token() {
        let dir = tempfile::tempdir().unwrap();
        let c = Challenges::new(Store::open(dir.path()).unwrap());
        c.publish(Published::Http01, "tok-EN_1", "tok-EN_1.thumb");
        assert_eq!(
            c.http01(b"/.well-known/acme-challenge/tok-EN_1").as_deref(),
            Some("tok-EN_1.thumb")
        );
        assert_eq!(c.http01(b"/.well-known/acme-challenge/other"), None);
        assert_eq!(c.http01(b"/.well-known/acme-challenge/../x"), None);
        assert_eq!(c.http01(b"/.well-known/acme-challenge/"), None);
        c.withdraw(Published::Http01, "tok-EN_1");
        assert_eq!(c.http01(b"/.well-known/acme-challenge/tok-EN_1"), None);
    }

    #[test]
    fn a_replica_answers_what_another_published() {
        let dir = tempfile::tempdir().unwrap();
        let ordering = Challenges::new(Store::open(dir.path()).unwrap());
        let other = Challenges::new(Store::open(dir.path()).unwrap());
        ordering.publish(Published::Http01, "t", "t.k");
        ordering.publish(Published::TlsAlpn01, "a.example", "x.k");
        assert_eq!(
            other.http01(b"/.well-known/acme-challenge/t").as_deref(),
            Some("t.k")
        );
        assert!(other.tls_alpn_cert("A.example").is_some());
        ordering.withdraw(Published::TlsAlpn01, "a.example");
        assert!(other.tls_alpn_cert("a.example").is_none());
    }

    #[test]
    fn the_alpn_certificate_carries_the_digest() {
        let key = tls_alpn_cert("a.example", "tok.thumb").unwrap();
        let der = key.cert[0].as_ref();
        let digest = ring::digest::digest(&ring::digest::SHA256, b"tok.thumb");
        // acmeIdentifier (1.3.6.1.5.5.7.1.31), critical, OCTET STRING of the digest.
        let oid = [0x06, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x01, 0x1f];
        let at = der
            .windows(oid.len())
            .position(|w| w == oid)
            .expect("extension present");
        let rest = &der[at..];
        assert!(
            rest.windows(32).any(|w| w == digest.as_ref()),
            "digest present"
        );
    }
}

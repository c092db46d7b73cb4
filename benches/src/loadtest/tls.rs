//! The test certificate of the TLS scenarios: a self-signed CA and a
//! server certificate for `127.0.0.1` and `localhost` signed by it, both
//! ECDSA P-256, made fresh at the start of a run and written into the
//! run's temp dir. Every server gets the same chain and key; the checks
//! trust the CA alone, so a server that sent the wrong chain fails them.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, PKCS_ECDSA_P256_SHA256,
};

/// Where the certificate files of one run are.
#[derive(Debug, Clone)]
pub struct TestCert {
    /// The CA certificate (PEM): what the checks trust.
    pub ca: PathBuf,
    /// The server certificate followed by the CA's (PEM): what every server sends.
    pub chain: PathBuf,
    /// The server's private key (PKCS#8 PEM).
    pub key: PathBuf,
}

/// The names the server certificate is valid for.
pub const SERVER_NAMES: [&str; 2] = ["127.0.0.1", "localhost"];

/// Generates the CA and the server certificate and writes `ca.pem`,
/// `chain.pem` and `key.pem` into `dir` (which must exist).
pub fn generate(dir: &Path) -> Result<TestCert> {
    let ca_key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "loadtest CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca_params.clone().self_signed(&ca_key)?;

    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let mut params = CertificateParams::new(SERVER_NAMES.map(String::from).to_vec())?;
    params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);
    let cert = params.signed_by(&key, &issuer)?;

    let files = TestCert {
        ca: dir.join("ca.pem"),
        chain: dir.join("chain.pem"),
        key: dir.join("key.pem"),
    };
    let write = |path: &Path, text: String| {
        fs::write(path, text).with_context(|| format!("write {}", path.display()))
    };
    write(&files.ca, ca_cert.pem())?;
    write(&files.chain, cert.pem() + &ca_cert.pem())?;
    write(&files.key, key.serialize_pem())?;
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_chain_of_two_and_a_key() {
        let dir = std::env::temp_dir().join(format!("loadtest-tls-t-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let cert = generate(&dir).unwrap();
        let chain = fs::read_to_string(&cert.chain).unwrap();
        assert_eq!(chain.matches("BEGIN CERTIFICATE").count(), 2);
        assert!(chain.ends_with(&fs::read_to_string(&cert.ca).unwrap()));
        assert!(fs::read_to_string(&cert.key)
            .unwrap()
            .contains("BEGIN PRIVATE KEY"));
        let _ = fs::remove_dir_all(&dir);
    }
}

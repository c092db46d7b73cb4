//! `[acme]`: certificates for the HTTPS listener from an ACME CA
//! (RFC 8555), for the default site's `domains` and each `[[sites]]` with
//! `acme = true`; `crate::acme` orders and renews them.

use super::restart::Restart;
use super::sites::SiteConfig;
use super::values::dur;
use super::{err, ConfigError};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// `[acme]`: certificates for the HTTPS listener from an ACME CA
/// (RFC 8555), renewed before they expire. Setting it up agrees to the
/// CA's terms of service.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct AcmeConfig {
    /// Names of one certificate for the default site (`[[sites]]` with
    /// `acme = true` get one each).
    pub domains: Vec<String>,
    /// Contact address given to the CA (`mailto:`); "" = none.
    pub email: String,
    /// The CA's directory URL.
    pub directory: String,
    /// Account, certificates and the lock; replicas may share it.
    pub state_dir: PathBuf,
    /// `tls-alpn-01` (on `tls_listen`) or `http-01` (on `listen`).
    pub challenge: String,
    /// PEM root the CA's own HTTPS is checked against ("" = the system's).
    pub ca_root: String,
    /// Renew this long before expiry ("" = a third of the lifetime).
    pub renew_before: String,
    /// First wait after a failed order; it doubles up to a day.
    pub retry_after: String,
}

/// Let's Encrypt's production directory, `[acme].directory`'s default.
pub const LETS_ENCRYPT: &str = "https://acme-v02.api.letsencrypt.org/directory";

impl Default for AcmeConfig {
    fn default() -> Self {
        AcmeConfig {
            domains: Vec::new(),
            email: String::new(),
            directory: LETS_ENCRYPT.into(),
            state_dir: PathBuf::from("/var/lib/fileserver/acme"),
            challenge: "tls-alpn-01".into(),
            ca_root: String::new(),
            renew_before: String::new(),
            retry_after: "1m".into(),
        }
    }
}

/// The ordering tasks run with the `[acme]` they started with.
pub(super) const RESTART: &[Restart] = &[Restart::key("acme")];

/// How the CA checks that a name is ours.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcmeChallenge {
    /// A handshake on `tls_listen` offering ALPN `acme-tls/1` (RFC 8737).
    TlsAlpn01,
    /// `GET /.well-known/acme-challenge/TOKEN` on `listen` (port 80).
    Http01,
}

impl AcmeChallenge {
    /// The RFC's name.
    pub fn as_str(self) -> &'static str {
        match self {
            AcmeChallenge::TlsAlpn01 => "tls-alpn-01",
            AcmeChallenge::Http01 => "http-01",
        }
    }
}

/// Typed `[acme]` (see [`AcmeConfig`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcmeSettings {
    /// The certificates to keep, each the names it covers (first: the
    /// default site's `domains`, then each `[[sites]]` with `acme`).
    pub certificates: Vec<Vec<String>>,
    /// `mailto:` + `email`.
    pub contact: Option<String>,
    /// The CA's directory URL.
    pub directory: String,
    /// Account, certificates and the lock.
    pub state_dir: PathBuf,
    /// How names are proven.
    pub challenge: AcmeChallenge,
    /// The root the CA's HTTPS is checked against (`None`: the system's).
    pub ca_root: Option<PathBuf>,
    /// `None`: a third of each certificate's lifetime.
    pub renew_before: Option<Duration>,
    /// First wait after a failed order.
    pub retry_after: Duration,
}

/// `[acme]` (`None`: absent) and the sites with `acme = true`: which
/// certificates, from where, proven how. Each name must be one a CA can
/// validate by http-01 or tls-alpn-01 (a DNS name, no wildcard) and
/// belong to one certificate only. `tls`: `tls_listen` is set.
pub(super) fn validate(
    acme: Option<&AcmeConfig>,
    sites: &[SiteConfig],
    tls: bool,
    e: &mut Vec<ConfigError>,
) -> Option<AcmeSettings> {
    let Some(a) = acme else {
        for (i, site) in sites.iter().enumerate() {
            if site.acme {
                e.push(err(
                    &format!("sites[{}].acme", i + 1),
                    "needs an [acme] table (state_dir, email, the CA)",
                ));
            }
        }
        return None;
    };
    if !tls {
        e.push(err(
            "acme",
            "needs tls_listen: the certificates are for the HTTPS listener",
        ));
    }
    let certificates = certificates(a, sites, e);
    let challenge = match a.challenge.as_str() {
        "tls-alpn-01" => AcmeChallenge::TlsAlpn01,
        "http-01" => AcmeChallenge::Http01,
        o => {
            e.push(err(
                "acme.challenge",
                format!("`{o}` is not one of tls-alpn-01, http-01"),
            ));
            AcmeChallenge::TlsAlpn01
        }
    };
    if !a.directory.starts_with("https://") {
        e.push(err(
            "acme.directory",
            format!("`{}` is not an https:// URL", a.directory),
        ));
    }
    if a.state_dir.as_os_str().is_empty() {
        e.push(err(
            "acme.state_dir",
            "must be set: where the account and certificates are kept",
        ));
    }
    if !a.email.is_empty() && (!a.email.contains('@') || a.email.contains(char::is_whitespace)) {
        e.push(err(
            "acme.email",
            format!("`{}` is not an email address", a.email),
        ));
    }
    let renew_before =
        (!a.renew_before.is_empty()).then(|| dur("acme.renew_before", &a.renew_before, e));
    let retry_after = super::values::positive_dur("acme.retry_after", &a.retry_after, e);
    Some(AcmeSettings {
        certificates,
        contact: (!a.email.is_empty()).then(|| format!("mailto:{}", a.email)),
        directory: a.directory.clone(),
        state_dir: a.state_dir.clone(),
        challenge,
        ca_root: (!a.ca_root.is_empty()).then(|| PathBuf::from(&a.ca_root)),
        renew_before,
        retry_after,
    })
}

/// The certificates: `domains`, then each site with `acme`, each name in
/// one only.
fn certificates(
    a: &AcmeConfig,
    sites: &[SiteConfig],
    e: &mut Vec<ConfigError>,
) -> Vec<Vec<String>> {
    let mut seen: Vec<String> = Vec::new();
    let mut names = |key: &str, list: &[String], e: &mut Vec<ConfigError>| {
        let mut out = Vec::new();
        for name in list {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            if let Some(why) = name_problem(&name) {
                e.push(err(key, format!("`{name}` {why}")));
            } else if seen.contains(&name) {
                e.push(err(
                    key,
                    format!("`{name}` is named twice: one certificate per name"),
                ));
            } else {
                seen.push(name.clone());
                out.push(name);
            }
        }
        out
    };
    let mut certificates = Vec::new();
    let domains = names("acme.domains", &a.domains, e);
    if !domains.is_empty() {
        certificates.push(domains);
    }
    for (i, site) in sites.iter().enumerate() {
        if site.acme {
            let key = format!("sites[{}].hosts", i + 1);
            let hosts = names(&key, &site.hosts, e);
            if !hosts.is_empty() {
                certificates.push(hosts);
            }
        }
    }
    if certificates.is_empty()
        && !e
            .iter()
            .any(|x| x.key.starts_with("acme") || x.key.starts_with("sites"))
    {
        e.push(err(
            "acme.domains",
            "names no domain: list the names, or set `acme = true` on a [[sites]] table",
        ));
    }
    certificates
}

/// Why a CA could not validate `name` by http-01 or tls-alpn-01, if so.
fn name_problem(name: &str) -> Option<&'static str> {
    if name.starts_with("*.") || name.contains('*') {
        return Some("is a wildcard: only dns-01 proves those, and this server answers http-01 and tls-alpn-01");
    }
    if name.parse::<std::net::IpAddr>().is_ok() {
        return Some("is an address: ACME certificates here are for DNS names");
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    if name.len() > 253 || !name.contains('.') || !name.split('.').all(label_ok) {
        return Some("is not a fully qualified DNS name");
    }
    None
}

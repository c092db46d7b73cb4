//! Automatic HTTPS: certificates from an ACME CA (RFC 8555, through
//! instant-acme), kept in a state directory and renewed before expiry.
//! It owns the ordering tasks, the state directory ([`store`]) and the
//! challenge answers ([`challenge`]); it touches the listeners only
//! through [`crate::tls::Certs::install`] and the answers they read.
//!
//! ```text
//! per certificate (a set of names), on the main thread's runtime:
//!   stored pair covers the names? -> install it, sleep until renewal is due
//!   due (none stored, or renew_before of expiry, with jitter)
//!     -> try the state directory's lock; held by a replica: wait, read again
//!     -> read the store again (a replica may have renewed meanwhile)
//!     -> order: publish answers, CA validates, finalize, fetch the chain
//!        ok:  store key and chain, install, next renewal
//!        err: keep serving what is installed; retry after retry_after,
//!             doubling up to a day, with jitter
//! ```
//!
//! A failed renewal never removes the working certificate: nothing is
//! installed or stored until a whole new pair has been issued and checked.

pub(crate) mod challenge;
pub(crate) mod store;

use crate::config::{AcmeChallenge, AcmeSettings};
use crate::tls::Certs;
use challenge::Challenges;
use instant_acme::{
    Account, AccountCredentials, AuthorizationStatus, ChallengeType, Identifier, NewAccount,
    NewOrder, OrderStatus, RetryPolicy,
};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use store::{Published, Store};

pub(crate) use challenge::HTTP01_PREFIX;

/// Longest wait between attempts after failures.
const MAX_BACKOFF: Duration = Duration::from_secs(24 * 3600);
/// How long a CA may take to validate, and to issue after finalizing.
const ORDER_TIMEOUT: Duration = Duration::from_secs(120);

/// Opens the state directory and the challenge answers the listeners
/// read; [`spawn`] then starts ordering.
pub(crate) fn prepare(s: &AcmeSettings) -> Result<(Store, Arc<Challenges>), String> {
    let store = Store::open(&s.state_dir)
        .map_err(|e| format!("acme.state_dir: {}: {e}", s.state_dir.display()))?;
    let challenges = Arc::new(Challenges::new(store.clone()));
    Ok((store, challenges))
}

/// Registers the ACME metrics' help texts.
pub(crate) fn describe() {
    metrics::describe_gauge!(
        "fileserver_acme_certificate_expiry_timestamp_seconds",
        "When the certificate ACME keeps for `name` expires (Unix seconds)."
    );
    metrics::describe_counter!(
        "fileserver_acme_orders_total",
        "ACME orders by kind (first: no usable certificate, renewal) and result (issued, failed)."
    );
}

/// Installs what the store holds at once (so a restart serves before the
/// CA is asked anything), then keeps each certificate on `handle`.
pub(crate) fn spawn(
    s: &AcmeSettings,
    store: Store,
    challenges: Arc<Challenges>,
    certs: Arc<Certs>,
    handle: &tokio::runtime::Handle,
) {
    let ctx = Arc::new(Ctx {
        s: s.clone(),
        store,
        challenges,
        certs,
    });
    tracing::info!(
        certificates = s.certificates.len(),
        challenge = s.challenge.as_str(),
        state_dir = %s.state_dir.display(),
        "acme: keeping certificates from {}",
        s.directory
    );
    // Every outcome is a series from the first scrape (rate() of a
    // series that appears at its first failure misses that failure).
    for kind in ["first", "renewal"] {
        for result in ["issued", "failed"] {
            metrics::counter!("fileserver_acme_orders_total", "kind" => kind, "result" => result)
                .increment(0);
        }
    }
    for names in &s.certificates {
        let stored = ctx.load(names);
        handle.spawn(keep(ctx.clone(), names.clone(), stored));
    }
}

struct Ctx {
    s: AcmeSettings,
    store: Store,
    challenges: Arc<Challenges>,
    certs: Arc<Certs>,
}

/// A certificate's validity, as its leaf states it (Unix seconds).
#[derive(Clone, Copy, Debug)]
struct Validity {
    not_before: u64,
    not_after: u64,
}

/// The certificate in force: when it stops, and when it is due for
/// renewal (its jitter drawn once, when it was loaded).
#[derive(Clone, Copy, Debug)]
struct Kept {
    not_after: u64,
    due: u64,
}

impl Ctx {
    /// Installs the stored pair for `names` if it is whole, matches its
    /// key and covers every name; returns when it expires and is due.
    fn load(&self, names: &[String]) -> Option<Kept> {
        let pair = match self.store.pair(&names[0]) {
            Ok(Some(p)) => p,
            Ok(None) => return None,
            Err(e) => {
                tracing::warn!("acme: {e}");
                return None;
            }
        };
        let checked =
            crate::tls::certified_key(&pair.chain, &pair.key, &pair.path, &pair.key_path, false)
                .and_then(|key| {
                    let (validity, covered) = leaf_facts(key.cert[0].as_ref())?;
                    match names.iter().find(|n| !covered.contains(n)) {
                        Some(n) => Err(format!("{} does not name {n}", pair.path.display())),
                        None => Ok((key, validity)),
                    }
                });
        match checked {
            Ok((key, validity)) => {
                self.certs.install(names, Arc::new(key));
                for n in names {
                    metrics::gauge!("fileserver_acme_certificate_expiry_timestamp_seconds", "name" => n.clone())
                        .set(validity.not_after as f64);
                }
                Some(Kept {
                    not_after: validity.not_after,
                    due: self.due(validity),
                })
            }
            Err(e) => {
                tracing::warn!("acme: stored certificate not used: {e}");
                None
            }
        }
    }

    /// When the certificate with `v` is due for renewal (Unix seconds).
    fn due(&self, v: Validity) -> u64 {
        let lifetime = v.not_after.saturating_sub(v.not_before).max(1);
        let before = match self.s.renew_before {
            Some(d) if d.as_secs() < lifetime => d.as_secs(),
            Some(d) => {
                tracing::warn!(
                    "acme: renew_before ({}s) is not shorter than the certificate's lifetime ({lifetime}s); renewing at a third of it",
                    d.as_secs()
                );
                lifetime / 3
            }
            None => lifetime / 3,
        };
        // Spread replicas and restarts over up to 1/30 of the lifetime.
        let spread = (lifetime / 30).clamp(1, 3600);
        v.not_after.saturating_sub(before + random() % spread)
    }
}

/// Keeps the certificate for `names` from now on.
async fn keep(ctx: Arc<Ctx>, names: Vec<String>, mut stored: Option<Kept>) {
    let mut failures = 0u32;
    loop {
        let wait = match stored {
            Some(k) => k.due.saturating_sub(now()),
            None => 0,
        };
        if wait > 0 {
            tracing::info!(names = %names.join(","), "acme: certificate valid; renewal due in {wait}s");
            tokio::time::sleep(Duration::from_secs(wait)).await;
        }
        let lock = match ctx.store.try_lock() {
            Ok(Some(lock)) => lock,
            Ok(None) => {
                let pause = jittered(ctx.s.retry_after.min(Duration::from_secs(30)));
                tracing::info!(
                    names = %names.join(","),
                    "acme: another process is ordering with this state directory; reading it again in {}ms",
                    pause.as_millis()
                );
                tokio::time::sleep(pause).await;
                stored = ctx.load(&names).or(stored);
                continue;
            }
            Err(e) => {
                tracing::error!("acme: cannot lock the state directory: {e}");
                failures += 1;
                tokio::time::sleep(backoff(ctx.s.retry_after, failures)).await;
                continue;
            }
        };
        // Under the lock: a replica may have renewed while this one slept.
        if let Some(k) = ctx.load(&names) {
            if k.due > now() {
                stored = Some(k);
                continue;
            }
        }
        let kind = if stored.is_some_and(|v| v.not_after > now()) {
            "renewal"
        } else {
            "first"
        };
        tracing::info!(names = %names.join(","), kind, "acme: ordering a certificate from {}", ctx.s.directory);
        let outcome = order(&ctx, &names).await;
        drop(lock);
        match outcome {
            Ok(()) => {
                failures = 0;
                metrics::counter!("fileserver_acme_orders_total", "kind" => kind, "result" => "issued")
                    .increment(1);
                match ctx.load(&names) {
                    Some(v) => {
                        tracing::info!(names = %names.join(","), "acme: certificate issued and installed; valid until {}", humantime::format_rfc3339(UNIX_EPOCH + Duration::from_secs(v.not_after)));
                        stored = Some(v);
                        // Never order again sooner than retry_after.
                        tokio::time::sleep(ctx.s.retry_after).await;
                    }
                    None => {
                        tracing::error!(
                            "acme: the issued certificate did not load back from the store"
                        );
                        failures += 1;
                    }
                }
            }
            Err(e) => {
                failures += 1;
                metrics::counter!("fileserver_acme_orders_total", "kind" => kind, "result" => "failed")
                    .increment(1);
                let pause = backoff(ctx.s.retry_after, failures);
                let keeps = if stored.is_some() {
                    "the certificate in force stays"
                } else {
                    "no certificate for these names yet"
                };
                tracing::error!(names = %names.join(","), "acme: order failed ({keeps}); next attempt in {}s: {e}", pause.as_secs());
                tokio::time::sleep(pause).await;
            }
        }
    }
}

/// One order for `names`, start to stored pair.
async fn order(ctx: &Ctx, names: &[String]) -> Result<(), String> {
    let registered = account(ctx).await?;
    match order_with(ctx, &registered, names).await {
        Err(OrderError::Api(p))
            if p.r#type
                .as_deref()
                .is_some_and(|t| t.ends_with(":accountDoesNotExist")) =>
        {
            tracing::warn!("acme: the CA does not know the stored account; registering a new one");
            ctx.store
                .forget_account(&ctx.s.directory)
                .map_err(|e| e.to_string())?;
            let registered = account(ctx).await?;
            order_with(ctx, &registered, names)
                .await
                .map_err(|e| e.to_string())
        }
        other => other.map_err(|e| e.to_string()),
    }
}

enum OrderError {
    Api(instant_acme::Problem),
    Other(String),
}

impl std::fmt::Display for OrderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OrderError::Api(p) => write!(f, "{p}"),
            OrderError::Other(s) => f.write_str(s),
        }
    }
}

impl From<instant_acme::Error> for OrderError {
    fn from(e: instant_acme::Error) -> Self {
        match e {
            instant_acme::Error::Api(p) => OrderError::Api(p),
            e => OrderError::Other(with_causes(&e)),
        }
    }
}

/// `e` and what caused it ("client error (Connect): tcp connect error:
/// Connection refused"): the outermost alone rarely says what to fix.
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}

/// The stored account for the CA, or a new one (then stored).
async fn account(ctx: &Ctx) -> Result<Account, String> {
    let builder = || match &ctx.s.ca_root {
        Some(root) => Account::builder_with_root(root)
            .map_err(|e| format!("acme.ca_root: {}: {e}", root.display())),
        None => Account::builder().map_err(|e| with_causes(&e)),
    };
    let stored = ctx
        .store
        .account(&ctx.s.directory)
        .map_err(|e| e.to_string())?;
    if let Some(bytes) = stored {
        match serde_json::from_slice::<AccountCredentials>(&bytes) {
            Ok(credentials) => {
                return builder()?
                    .from_credentials(credentials)
                    .await
                    .map_err(|e| format!("{}: {}", ctx.s.directory, with_causes(&e)));
            }
            Err(e) => {
                tracing::warn!("acme: stored account unreadable ({e}); registering a new one")
            }
        }
    }
    let contact: Vec<&str> = ctx.s.contact.iter().map(String::as_str).collect();
    let (account, credentials) = builder()?
        .create(
            &NewAccount {
                contact: &contact,
                terms_of_service_agreed: true,
                only_return_existing: false,
            },
            ctx.s.directory.clone(),
            None,
        )
        .await
        .map_err(|e| format!("registering with {}: {}", ctx.s.directory, with_causes(&e)))?;
    let bytes = serde_json::to_vec(&credentials).map_err(|e| e.to_string())?;
    ctx.store
        .save_account(&ctx.s.directory, &bytes)
        .map_err(|e| e.to_string())?;
    tracing::info!("acme: account registered with {}", ctx.s.directory);
    Ok(account)
}

/// Withdraws every answer it published when the order ends, however.
struct Answers<'a> {
    challenges: &'a Challenges,
    published: Vec<(Published, String)>,
}

impl Drop for Answers<'_> {
    fn drop(&mut self) {
        for (kind, key) in &self.published {
            self.challenges.withdraw(*kind, key);
        }
    }
}

async fn order_with(ctx: &Ctx, account: &Account, names: &[String]) -> Result<(), OrderError> {
    let identifiers: Vec<Identifier> = names.iter().cloned().map(Identifier::Dns).collect();
    let mut order = account.new_order(&NewOrder::new(&identifiers)).await?;
    let (kind, challenge_type) = match ctx.s.challenge {
        AcmeChallenge::Http01 => (Published::Http01, ChallengeType::Http01),
        AcmeChallenge::TlsAlpn01 => (Published::TlsAlpn01, ChallengeType::TlsAlpn01),
    };
    let mut answers = Answers {
        challenges: &ctx.challenges,
        published: Vec::new(),
    };
    let mut authorizations = order.authorizations();
    while let Some(authz) = authorizations.next().await {
        let mut authz = authz?;
        let name = authz.identifier().to_string();
        match authz.status {
            AuthorizationStatus::Pending => {}
            AuthorizationStatus::Valid => continue,
            s => {
                return Err(OrderError::Other(format!(
                    "the authorization for {name} is {s:?}"
                )))
            }
        }
        let mut challenge = authz.challenge(challenge_type.clone()).ok_or_else(|| {
            OrderError::Other(format!(
                "the CA offers no {} challenge for {name}",
                ctx.s.challenge.as_str()
            ))
        })?;
        let key_authorization = challenge.key_authorization();
        let key = match kind {
            Published::Http01 => challenge.token.clone(),
            Published::TlsAlpn01 => name.clone(),
        };
        ctx.challenges
            .publish(kind, &key, key_authorization.as_str());
        answers.published.push((kind, key));
        tracing::info!(
            name,
            challenge = ctx.s.challenge.as_str(),
            "acme: challenge answer published"
        );
        challenge.set_ready().await?;
    }
    let retries = RetryPolicy::new().timeout(ORDER_TIMEOUT);
    let status = order.poll_ready(&retries).await?;
    drop(answers);
    if status != OrderStatus::Ready {
        let why = order
            .state()
            .error
            .as_ref()
            .map_or_else(|| format!("{status:?}"), |p| p.to_string());
        return Err(OrderError::Other(format!(
            "the CA did not validate the order: {why}"
        )));
    }
    let key_pem = order.finalize().await?;
    let chain_pem = order.poll_certificate(&retries).await?;
    // Checked before it is stored: a pair that would not load is not kept.
    let key = crate::tls::certified_key(
        chain_pem.as_bytes(),
        key_pem.as_bytes(),
        std::path::Path::new("the issued chain"),
        std::path::Path::new("its key"),
        false,
    )
    .map_err(OrderError::Other)?;
    leaf_facts(key.cert[0].as_ref()).map_err(OrderError::Other)?;
    ctx.store
        .save_pair(&names[0], chain_pem.as_bytes(), key_pem.as_bytes())
        .map_err(|e| OrderError::Other(e.to_string()))?;
    Ok(())
}

/// The leaf's validity and the DNS names it covers.
fn leaf_facts(der: &[u8]) -> Result<(Validity, Vec<String>), String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| format!("the certificate does not parse: {e}"))?;
    let validity = cert.validity();
    let secs = |t: x509_parser::time::ASN1Time| u64::try_from(t.timestamp()).unwrap_or(0);
    let mut names = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for n in &san.value.general_names {
            if let x509_parser::extensions::GeneralName::DNSName(d) = n {
                names.push(d.to_ascii_lowercase());
            }
        }
    }
    Ok((
        Validity {
            not_before: secs(validity.not_before),
            not_after: secs(validity.not_after),
        },
        names,
    ))
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn random() -> u64 {
    let mut b = [0u8; 8];
    let _ = rustix::rand::getrandom(&mut b, rustix::rand::GetRandomFlags::empty());
    u64::from_ne_bytes(b)
}

/// `d` give or take a tenth.
fn jittered(d: Duration) -> Duration {
    let tenth = (d.as_millis() as u64 / 10).max(1);
    Duration::from_millis(d.as_millis() as u64 - tenth + random() % (2 * tenth))
}

/// The wait after the `failures`th failure in a row: `first`, doubling,
/// at most a day, jittered.
fn backoff(first: Duration, failures: u32) -> Duration {
    let doubled = first.saturating_mul(1 << failures.saturating_sub(1).min(20));
    jittered(doubled.min(MAX_BACKOFF))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_a_day() {
        let first = Duration::from_secs(60);
        let within = |d: Duration, want: u64| {
            let (lo, hi) = (want * 9 / 10, want * 11 / 10);
            assert!((lo..=hi).contains(&d.as_secs()), "{d:?} not near {want}s");
        };
        within(backoff(first, 1), 60);
        within(backoff(first, 2), 120);
        within(backoff(first, 5), 960);
        within(backoff(first, 40), 86_400);
    }
}

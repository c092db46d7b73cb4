//! Automatic HTTPS against a real ACME CA: Debian's `pebble` (Let's
//! Encrypt's test server) with `pebble-challtestsrv` as its DNS, both on
//! loopback and started here. Pebble validates by connecting to the
//! daemon's own listeners (tls-alpn-01 on the HTTPS one, http-01 on the
//! plaintext one), so every certificate below was proven the way a public
//! CA proves it. Clients then check the served chain against the root
//! that pebble instance generated.
//!
//! Covered: first issuance by each challenge, renewal of short-lived
//! certificates, a CA that refuses (the certificate in force stays and
//! serving goes on), a restart that serves what is stored without asking
//! the CA, two daemons sharing one state directory (one order), and the
//! configuration errors `check-config` names.

mod common;

use common::tls::TestCa;
use common::{bin, free_port, metric_sum, Daemon, Tree};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const NAMES: [&str; 2] = ["site.test", "www.site.test"];

/// A pebble and its DNS on loopback, stopped when dropped.
struct Pebble {
    management: u16,
    tls: TestCa,
    children: Vec<Child>,
    log: PathBuf,
}

struct PebbleSpec<'a> {
    /// Where pebble's VA connects for http-01 and tls-alpn-01.
    http_port: u16,
    tls_port: u16,
    /// Seconds each certificate is valid; 0 = pebble's default (years).
    validity: u64,
    /// Names it refuses to issue for.
    blocklist: &'a [&'a str],
}

impl Pebble {
    /// Starts pebble on `port` (0: a free one).
    fn start(port: u16, spec: PebbleSpec<'_>) -> Pebble {
        let tls = TestCa::new();
        let port = if port == 0 { free_port() } else { port };
        let management = free_port();
        let dns = free_port();
        let config = tls.dir.path().join("pebble.json");
        let json = serde_json::json!({"pebble": {
            "listenAddress": format!("127.0.0.1:{port}"),
            "managementListenAddress": format!("127.0.0.1:{management}"),
            "certificate": tls.cert,
            "privateKey": tls.key,
            "httpPort": spec.http_port,
            "tlsPort": spec.tls_port,
            "ocspResponderURL": "",
            "externalAccountBindingRequired": false,
            "domainBlocklist": spec.blocklist,
            "certificateValidityPeriod": spec.validity,
        }});
        std::fs::write(&config, json.to_string()).unwrap();
        let log = tls.dir.path().join("pebble.log");
        let dns_srv = Command::new("pebble-challtestsrv")
            .args(["-dns01", &format!("127.0.0.1:{dns}")])
            .args(["-http01", "", "-https01", "", "-tlsalpn01", ""])
            .args(["-management", &format!("127.0.0.1:{}", free_port())])
            .args(["-defaultIPv4", "127.0.0.1", "-defaultIPv6", ""])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("pebble-challtestsrv (scripts/install-deps.sh installs pebble)");
        let pebble = Command::new("pebble")
            .arg("-config")
            .arg(&config)
            .args(["-dnsserver", &format!("127.0.0.1:{dns}")])
            // No random validation sleeps, no rejected nonces, and every
            // order validated afresh (no reuse of earlier authorizations).
            .env("PEBBLE_VA_NOSLEEP", "1")
            .env("PEBBLE_WFE_NONCEREJECT", "0")
            .env("PEBBLE_AUTHZREUSE", "0")
            // Its fatal errors (a port taken) go to stderr.
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::options().append(true).open(&log).unwrap())
            .spawn()
            .expect("pebble (scripts/install-deps.sh installs it)");
        let mut p = Pebble {
            management,
            tls,
            children: vec![dns_srv, pebble],
            log,
        };
        // Pebble answers on its management port before it binds the
        // directory's, and exits if that one is taken: wait for both, and
        // for both processes still to be running once they answer.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let up = [port, management, dns]
                .iter()
                .all(|&q| TcpStream::connect(("127.0.0.1", q)).is_ok());
            let exited = p.children.iter_mut().find_map(|c| c.try_wait().unwrap());
            if let Some(status) = exited {
                panic!("pebble or its DNS exited ({status}): {}", p.log_text());
            }
            if up {
                return p;
            }
            assert!(
                Instant::now() < deadline,
                "pebble did not start: {}",
                p.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Writes the root of pebble's own HTTPS to `ca_root` (the daemon
    /// reads `acme.ca_root` at each order).
    fn trust(&self, ca_root: &Path) {
        std::fs::write(ca_root, &self.tls.ca_pem).unwrap();
    }

    /// The root this pebble issues under (generated at its start).
    fn issuing_root(&self) -> String {
        self.tls
            .client(false)
            .get(format!("https://127.0.0.1:{}/roots/0", self.management))
            .send()
            .unwrap()
            .text()
            .unwrap()
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Pebble {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn https(d: &Daemon) -> SocketAddr {
    d.start.https.expect("https= in the start line")
}

/// The leaf `addr` presents for `name`, verified against `root`.
fn served_leaf(
    addr: SocketAddr,
    name: &str,
    root: &str,
) -> Result<CertificateDer<'static>, String> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(root.as_bytes()).unwrap())
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let server_name = ServerName::try_from(name.to_string()).unwrap();
    let mut conn = rustls::ClientConnection::new(Arc::new(config), server_name).unwrap();
    let mut tcp = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    while conn.is_handshaking() {
        conn.complete_io(&mut tcp).map_err(|e| e.to_string())?;
    }
    Ok(conn.peer_certificates().unwrap()[0].clone().into_owned())
}

/// Waits (60 s at most) until `addr` presents for `name` a certificate
/// that chains to `root`; returns it.
fn wait_served(d: &Daemon, name: &str, root: &str, pebble: &Pebble) -> CertificateDer<'static> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match served_leaf(https(d), name, root) {
            Ok(leaf) => return leaf,
            Err(e) if Instant::now() > deadline => panic!(
                "no certificate for {name} chaining to pebble's root: {e}\ndaemon:\n{}\npebble:\n{}",
                d.stderr_text(),
                pebble.log_text()
            ),
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

/// A GET over HTTPS for `name`, resolved to the daemon and verified
/// against `root` only.
fn get(d: &Daemon, name: &str, path: &str, root: &str) -> reqwest::blocking::Response {
    reqwest::blocking::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(root.as_bytes()).unwrap())
        .resolve(name, https(d))
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
        .get(format!("https://{name}:{}{path}", https(d).port()))
        .send()
        .unwrap()
}

fn orders(d: &Daemon, kind: &str, result: &str) -> f64 {
    metric_sum(
        &d.metrics(),
        "fileserver_acme_orders_total",
        &[("kind", kind), ("result", result)],
    )
    .unwrap_or(0.0)
}

fn wait_for(what: &str, d: &Daemon, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !ok() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; daemon:\n{}",
            d.stderr_text()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// What each test starts from: a site, a state directory, the port pebble
/// will take and the `acme.ca_root` file. The daemon starts first (pebble
/// must know its ports), so until [`Setup::pebble`] the daemon's orders
/// fail and are retried, and `ca_root` holds a placeholder.
struct Setup {
    tree: Tree,
    dir: tempfile::TempDir,
    state: PathBuf,
    directory_port: u16,
    ca_root: PathBuf,
    _placeholder: TestCa,
}

impl Setup {
    fn new() -> Setup {
        let tree = Tree::new();
        tree.write("index.html", b"<h1>site</h1>\n");
        let dir = tempfile::tempdir().unwrap();
        let placeholder = TestCa::new();
        let ca_root = dir.path().join("ca-root.pem");
        std::fs::write(&ca_root, &placeholder.ca_pem).unwrap();
        Setup {
            tree,
            state: dir.path().join("acme"),
            dir,
            directory_port: free_port(),
            ca_root,
            _placeholder: placeholder,
        }
    }

    fn directory(&self) -> String {
        format!("https://127.0.0.1:{}/dir", self.directory_port)
    }

    /// A daemon with [`Setup::config`], and a JSON access log.
    fn daemon(&self, acme: &str) -> Daemon {
        let config = self.config(acme);
        Daemon::start(
            &self.tree.root,
            &[
                "--config",
                config.to_str().unwrap(),
                "--access-log",
                "stdout",
                "--set",
                "access_log_format=json",
            ],
        )
    }

    /// A config with an HTTPS listener and `[acme]` for NAMES; `acme` is
    /// the rest of the table.
    fn config(&self, acme: &str) -> PathBuf {
        let config = self.dir.path().join("fs.toml");
        std::fs::write(
            &config,
            format!(
                "tls_listen = \"127.0.0.1:0\"\n[acme]\ndomains = {NAMES:?}\n\
                 directory = \"{}\"\nca_root = \"{}\"\nstate_dir = \"{}\"\n\
                 retry_after = \"1s\"\nemail = \"ops@site.test\"\n{acme}\n",
                self.directory(),
                self.ca_root.display(),
                self.state.display()
            ),
        )
        .unwrap();
        config
    }

    /// Starts pebble on the directory port, points `ca_root` at its HTTPS
    /// and returns it with the root it issues under.
    fn pebble(&self, spec: PebbleSpec<'_>) -> (Pebble, String) {
        let pebble = Pebble::start(self.directory_port, spec);
        pebble.trust(&self.ca_root);
        let root = pebble.issuing_root();
        (pebble, root)
    }
}

/// Pebble validating at `d`'s plaintext listener (http-01).
fn http01(d: &Daemon) -> PebbleSpec<'static> {
    PebbleSpec {
        http_port: d.http.port(),
        tls_port: 1,
        validity: 0,
        blocklist: &[],
    }
}

/// Pebble validating at `d`'s HTTPS listener (tls-alpn-01), each
/// certificate valid `validity` seconds.
fn tls_alpn01<'a>(d: &Daemon, validity: u64, blocklist: &'a [&'a str]) -> PebbleSpec<'a> {
    PebbleSpec {
        http_port: 1,
        tls_port: https(d).port(),
        validity,
        blocklist,
    }
}

/// Pebble must be told its ports before it starts. A port from `bind(0)`
/// can be taken by any test's listener or connection before pebble binds
/// it, and pebble then exits (a CI run failed so); `free_port` draws
/// below the range those come from.
#[test]
fn ports_handed_to_pebble_are_outside_the_ephemeral_range() {
    let (low, high) = common::ephemeral_port_range();
    for _ in 0..50 {
        let port = free_port();
        assert!(
            !(low..=high).contains(&port),
            "{port} is in the ephemeral range {low}-{high}"
        );
        std::net::TcpListener::bind(("127.0.0.1", port)).expect("free_port's port is free");
    }
}

#[test]
fn tls_alpn_01_issues_a_certificate_browsers_would_trust() {
    let t = Setup::new();
    let d = t.daemon("challenge = \"tls-alpn-01\"");
    // Every outcome is a series from the first scrape on.
    let m = d.metrics();
    for kind in ["first", "renewal"] {
        for result in ["issued", "failed"] {
            let series =
                format!("fileserver_acme_orders_total{{kind=\"{kind}\",result=\"{result}\"}}");
            assert!(m.contains(&series), "{series} missing:\n{m}");
        }
    }
    let (pebble, root) = t.pebble(tls_alpn01(&d, 0, &[]));
    let leaf = wait_served(&d, "site.test", &root, &pebble);
    assert_eq!(
        wait_served(&d, "www.site.test", &root, &pebble),
        leaf,
        "one certificate for both names"
    );
    let r = get(&d, "www.site.test", "/", &root);
    assert_eq!(r.status(), 200);
    assert_eq!(r.text().unwrap(), "<h1>site</h1>\n");

    let m = d.metrics();
    assert_eq!(orders(&d, "first", "issued"), 1.0, "{m}");
    assert!(
        metric_sum(
            &m,
            "fileserver_tls_handshakes_total",
            &[("result", "acme_challenge")]
        )
        .unwrap_or(0.0)
            >= 2.0,
        "pebble's validation handshakes are counted: {m}"
    );
    let expiry = metric_sum(
        &m,
        "fileserver_acme_certificate_expiry_timestamp_seconds",
        &[("name", "www.site.test")],
    )
    .expect("expiry gauge per name");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(expiry > now + 86_400.0, "expiry {expiry} vs now {now}");

    // The state directory holds the account and the pair, for this user only.
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&t.state), 0o700);
    assert_eq!(mode(&t.state.join("certs/site.test/key.pem")), 0o600);
    assert_eq!(mode(&t.state.join("certs/site.test/cert.pem")), 0o600);
    let accounts: Vec<_> = std::fs::read_dir(t.state.join("accounts"))
        .unwrap()
        .collect();
    assert_eq!(accounts.len(), 1);
    // Each step is logged.
    for step in [
        "acme: keeping certificates from",
        "acme: account registered",
        "acme: challenge answer published",
        "acme: tls-alpn-01 handshake answered",
        "acme: certificate issued and installed",
        "acme: certificate valid; renewal due in",
    ] {
        assert!(
            d.wait_stderr(step, Duration::from_secs(10)),
            "no `{step}` in:\n{}",
            d.stderr_text()
        );
    }
    // Names compare without case.
    assert_eq!(
        served_leaf(https(&d), "WWW.Site.Test", &root).unwrap(),
        leaf
    );
    // A name the daemon has no certificate for gets no certificate at all.
    assert!(served_leaf(https(&d), "other.test", &root).is_err());
    // SIGHUP keeps what was issued and orders nothing.
    d.signal(libc::SIGHUP);
    assert!(d.wait_stderr("configuration reloaded", Duration::from_secs(10)));
    assert_eq!(served_leaf(https(&d), "site.test", &root).unwrap(), leaf);
    assert_eq!(
        orders(&d, "first", "issued") + orders(&d, "renewal", "issued"),
        1.0
    );

    // A restart serves the stored pair at once, with the CA gone.
    drop(pebble);
    drop(d);
    let d = t.daemon("challenge = \"tls-alpn-01\"");
    assert_eq!(
        served_leaf(https(&d), "site.test", &root).expect("served from the store at start"),
        leaf
    );
    assert_eq!(
        orders(&d, "first", "issued") + orders(&d, "first", "failed"),
        0.0
    );
}

#[test]
fn http_01_issues_through_the_plaintext_listener() {
    let t = Setup::new();
    let d = t.daemon("challenge = \"http-01\"");
    let (pebble, root) = t.pebble(http01(&d));
    wait_served(&d, "site.test", &root, &pebble);
    assert_eq!(get(&d, "site.test", "/", &root).status(), 200);
    assert_eq!(orders(&d, "first", "issued"), 1.0);
    // Pebble's GETs of the challenge were served and logged.
    let line = d
        .stdout
        .lock()
        .unwrap()
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| {
            v["target"]
                .as_str()
                .is_some_and(|t| t.starts_with("/.well-known/acme-challenge/"))
        });
    let line = line.expect("the CA's GET in the access log");
    assert_eq!(line["status"], 200);
    assert!(
        line["user_agent"].as_str().unwrap().contains("Pebble"),
        "{line}"
    );
    // A token not pending is the site's own 404, and the answer is gone.
    let r = common::client()
        .get(d.url("/.well-known/acme-challenge/not-a-pending-token"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 404);
    let gone = common::client()
        .get(d.url(line["target"].as_str().unwrap()))
        .send()
        .unwrap();
    assert_eq!(gone.status(), 404, "withdrawn once the order is done");
}

/// The shipped recipe (config/examples/automatic-https.toml): http-01
/// with every other plain-HTTP request redirected to HTTPS. The CA's GET
/// must get its answer all the same.
#[test]
fn the_automatic_https_recipe_works_behind_its_redirect() {
    let t = Setup::new();
    let recipe = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../config/examples/automatic-https.toml")
        .display()
        .to_string();
    // https_redirect needs a fixed tls_listen port.
    let tls_listen = format!("127.0.0.1:{}", free_port());
    let set = |k: &str, v: &str| format!("acme.{k}={v}");
    let overrides = [
        set("directory", &t.directory()),
        set("ca_root", t.ca_root.to_str().unwrap()),
        set("state_dir", t.state.to_str().unwrap()),
        set("domains", "site.test"),
        set("retry_after", "1s"),
    ];
    let mut args = vec!["--config", &recipe, "--tls-listen", &tls_listen];
    for o in &overrides {
        args.extend(["--set", o]);
    }
    let d = Daemon::start(&t.tree.root, &args);
    let (pebble, root) = t.pebble(http01(&d));
    wait_served(&d, "site.test", &root, &pebble);
    assert_eq!(get(&d, "site.test", "/", &root).status(), 200);
    let r = common::client().get(d.url("/")).send().unwrap();
    assert_eq!(r.status(), 308, "other plain-HTTP paths still redirect");
    assert_eq!(
        r.headers()["location"],
        format!("https://127.0.0.1:{}/", https(&d).port()).as_str()
    );
    // A Host the recipe does not name is redirected alike, to itself.
    let r = common::client()
        .get(d.url("/x?y"))
        .header("Host", "elsewhere.example")
        .send()
        .unwrap();
    assert_eq!(r.status(), 308);
    assert_eq!(
        r.headers()["location"],
        format!("https://elsewhere.example:{}/x?y", https(&d).port()).as_str()
    );
}

#[test]
fn renewal_replaces_a_short_lived_certificate() {
    let t = Setup::new();
    // Valid 60 s, renewed 50 s before expiry: the first renewal is due
    // about 10 s after issuance.
    let d = t.daemon("renew_before = \"50s\"");
    let (pebble, root) = t.pebble(tls_alpn01(&d, 60, &[]));
    let first = wait_served(&d, "site.test", &root, &pebble);
    wait_for("a renewal", &d, Duration::from_secs(45), || {
        orders(&d, "renewal", "issued") >= 1.0
    });
    let renewed = served_leaf(https(&d), "site.test", &root).unwrap();
    assert_ne!(renewed, first, "the renewed certificate is served");
    assert_eq!(get(&d, "site.test", "/", &root).status(), 200);
    let stored = std::fs::read(t.state.join("certs/site.test/cert.pem")).unwrap();
    let stored_leaf = CertificateDer::from_pem_slice(&stored).unwrap();
    assert!(
        stored_leaf == renewed || orders(&d, "renewal", "issued") >= 2.0,
        "the store holds what is served"
    );
}

#[test]
fn a_refusing_ca_keeps_the_certificate_in_force() {
    let t = Setup::new();
    // Renewal is due a few seconds after issuance (valid an hour, renewed
    // 3590 s before expiry).
    let d = t.daemon("renew_before = \"3590s\"");
    let (pebble, root) = t.pebble(tls_alpn01(&d, 3600, &[]));
    let first = wait_served(&d, "site.test", &root, &pebble);
    let stored = std::fs::read(t.state.join("certs/site.test/cert.pem")).unwrap();
    // The CA comes back refusing these names (and knowing no account).
    drop(pebble);
    let (_refusing, _) = t.pebble(tls_alpn01(&d, 3600, &NAMES));
    wait_for("a refused renewal", &d, Duration::from_secs(60), || {
        orders(&d, "renewal", "failed") >= 1.0
    });
    let log = d.stderr_text();
    assert!(log.contains("rejectedIdentifier"), "the CA refused: {log}");
    assert!(log.contains("the certificate in force stays"), "{log}");
    assert_eq!(served_leaf(https(&d), "site.test", &root).unwrap(), first);
    let r = get(&d, "www.site.test", "/", &root);
    assert_eq!(r.status(), 200, "serving goes on");
    assert_eq!(
        std::fs::read(t.state.join("certs/site.test/cert.pem")).unwrap(),
        stored,
        "the stored pair is untouched"
    );
    assert_eq!(orders(&d, "renewal", "issued"), 0.0);
}

#[test]
fn two_daemons_sharing_a_state_directory_order_once() {
    let t = Setup::new();
    let a = t.daemon("challenge = \"http-01\"");
    let b = t.daemon("challenge = \"http-01\"");
    // Pebble validates at a's listener only: an order b placed is
    // answered by a from the shared directory, as behind a load balancer.
    let (pebble, root) = t.pebble(http01(&a));
    let from_a = wait_served(&a, "site.test", &root, &pebble);
    let from_b = wait_served(&b, "site.test", &root, &pebble);
    assert_eq!(from_a, from_b, "both serve the one certificate");
    let issued = orders(&a, "first", "issued") + orders(&b, "first", "issued");
    assert_eq!(issued, 1.0, "one order between them");
}

/// `tls_cert`/`tls_key` beside `[acme]`: the names ACME covers get its
/// certificate, any other name (or none) the manual one.
#[test]
fn the_manual_certificate_serves_the_names_acme_does_not() {
    let t = Setup::new();
    let manual = TestCa::new();
    let config = t.config("challenge = \"tls-alpn-01\"");
    let d = Daemon::start(
        &t.tree.root,
        &[
            "--config",
            config.to_str().unwrap(),
            "--tls-cert",
            manual.cert.to_str().unwrap(),
            "--tls-key",
            manual.key.to_str().unwrap(),
        ],
    );
    let (pebble, root) = t.pebble(tls_alpn01(&d, 0, &[]));
    let acme_leaf = wait_served(&d, "site.test", &root, &pebble);
    // localhost is the manual leaf's name; ACME does not cover it.
    let other = manual.served_cert(https(&d));
    assert_ne!(other, acme_leaf);
    assert_eq!(other, common::tls::cert_in(&manual.cert));
}

#[test]
fn check_config_names_what_acme_cannot_do() {
    let dir = tempfile::tempdir().unwrap();
    let check = |text: &str| {
        let path = dir.path().join("c.toml");
        std::fs::write(&path, text).unwrap();
        let out = Command::new(bin())
            .arg("check-config")
            .arg(&path)
            .output()
            .unwrap();
        assert!(!out.status.success(), "accepted:\n{text}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let e = check("[acme]\ndomains = [\"a.test\"]\n");
    assert!(e.contains("key `acme`: needs tls_listen"), "{e}");
    let e = check("tls_listen = \":8443\"\n[acme]\ndomains = [\"*.a.test\"]\n");
    assert!(
        e.contains("key `acme.domains`: `*.a.test` is a wildcard"),
        "{e}"
    );
    let e =
        check("tls_listen = \":8443\"\n[acme]\ndomains = [\"a.test\"]\nchalenge = \"http-01\"\n");
    assert!(e.contains("key `acme.chalenge`: unknown key"), "{e}");
    let e = check("tls_listen = \":8443\"\n[acme]\n");
    assert!(e.contains("key `acme.domains`: names no domain"), "{e}");
    let e = check(
        "tls_listen = \":8443\"\n[acme]\ndomains = [\"a.test\"]\n\
         [[sites]]\nhosts = [\"a.test\"]\nroot = \".\"\nacme = true\n",
    );
    assert!(e.contains("`a.test` is named twice"), "{e}");
    let e = check("[[sites]]\nhosts = [\"b.test\"]\nroot = \".\"\nacme = true\n");
    assert!(
        e.contains("key `sites[1].acme`: needs an [acme] table"),
        "{e}"
    );
    let e = check(
        "tls_listen = \":8443\"\n[acme]\ndomains = [\"a.test\"]\ndirectory = \"http://ca/dir\"\n",
    );
    assert!(e.contains("key `acme.directory`"), "{e}");
    // With [acme], tls_cert and tls_key are optional but still go together.
    let e = check("tls_listen = \":8443\"\ntls_cert = \"c.pem\"\n[acme]\ndomains = [\"a.test\"]\n");
    assert!(e.contains("key `tls_key`: must be set"), "{e}");
}

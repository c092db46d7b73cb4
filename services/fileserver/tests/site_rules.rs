//! A site's `[[rules]]` and one-liners against real servers with curl:
//! per-path headers, redirects with captures, clean URLs and an SPA's
//! fallback (`try_files`), error pages, basic auth, allow/deny, CORS,
//! rate limits, and every side door into a protected tree.
//!
//! Every test runs on each listener: the daemon's plaintext HTTP/1.1, h2c
//! (HTTP/2 with prior knowledge), HTTPS with HTTP/2 and with HTTP/1.1, and
//! the `servedir` axum example built from the same config file.

mod common;
mod embedded;

use common::Tree;
use embedded::{Server, ServerKind};
use std::process::{Command, Stdio};

/// A listener and the curl flags that speak its protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Listener {
    Plain,
    H2c,
    HttpsH2,
    HttpsH1,
    Axum,
}

impl Listener {
    fn kind(self) -> ServerKind {
        match self {
            Listener::Plain | Listener::H2c => ServerKind::Daemon,
            Listener::HttpsH2 => ServerKind::DaemonHttps2,
            Listener::HttpsH1 => ServerKind::DaemonHttps1,
            Listener::Axum => ServerKind::AxumExample,
        }
    }

    fn curl_args(self) -> &'static [&'static str] {
        match self {
            Listener::Plain | Listener::Axum => &["--http1.1"],
            Listener::H2c => &["--http2-prior-knowledge"],
            Listener::HttpsH2 => &["--http2", "-k"],
            Listener::HttpsH1 => &["--http1.1", "-k"],
        }
    }
}

/// `alice`'s password, hashed at bcrypt's lowest cost (a test's speed).
const PASSWORD: &str = "correct horse";

struct Site {
    tree: Tree,
    server: Server,
    listener: Listener,
    _config: tempfile::TempDir,
}

/// A reply as curl saw it.
#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn all(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

const CONFIG: &str = r#"
headers = ["Strict-Transport-Security: max-age=63072000"]
directory_listing = true

[compression]
enabled = true

[[rules]]
path = "/assets/**"
headers = { "Cache-Control" = "public, max-age=31536000, immutable" }

[[rules]]
path = "*.html"
headers = { "Cache-Control" = "no-cache" }
add_headers = { "X-Page" = "html" }

[[rules]]
path = "/old/**"
redirect = "/new/{1}?{query}"
status = 301

[[rules]]
path = "/private/**"
basic_auth = { realm = "Private area", users = { alice = "HASH" } }

[[rules]]
path = "/files/notes/**"
basic_auth = { realm = "Notes", users = { alice = "HASH" } }

[[rules]]
path = "/internal/**"
allow = ["10.0.0.0/8"]

[[rules]]
path = "/scripts/*.js"
deny = ["all"]

[[rules]]
path = "/docs/**"
try_files = ["{path}", "{path}.html"]

[[rules]]
path = "/app/**"
methods = ["GET", "HEAD"]
try_files = ["{path}", "/app/index.html"]

[[rules]]
path = "/leak/**"
try_files = ["{path}", "/private/secret.txt"]

[[rules]]
path = "/api/**"
cors = { origins = ["https://app.example"], credentials = true, max_age = 3600 }

[[rules]]
path = "/api/private/**"
basic_auth = { realm = "API", users = { alice = "HASH" } }

[[rules]]
path = "/**"
error_pages = { "404" = "/404.html", "403" = "/private/secret.txt" }
remove_headers = ["X-Nothing"]
"#;

fn site(listener: Listener) -> Site {
    let tree = Tree::new();
    tree.write("index.html", b"<h1>home</h1>");
    tree.write("assets/app.3f9a.js", b"console.log('app')");
    tree.write("private/secret.txt", b"the secret");
    tree.write("private/a.js", b"secret script");
    tree.write("private/a.js.gz", b"secret gz");
    tree.write("private/big.txt", "secret text ".repeat(200).as_bytes());
    tree.write("scripts/x.js", b"secret script");
    tree.write("scripts/x.js.gz", b"secret gz");
    tree.write("files/ok.txt", b"listed");
    tree.write("files/notes/n.txt", b"a note");
    tree.write("internal/x.txt", b"internal");
    tree.write("docs/intro.html", b"<p>intro</p>");
    tree.write("app/index.html", b"<div id=app>spa shell</div>");
    tree.write("api/data.json", b"{\"ok\":true}");
    tree.write("api/private/data.json", b"{\"private\":true}");
    tree.write("404.html", b"<p>custom not found</p>");
    tree.write("public/plain.txt", b"public");
    std::os::unix::fs::symlink("../private/secret.txt", tree.root.join("public/link.txt")).unwrap();
    std::os::unix::fs::symlink("../private", tree.root.join("public/dirlink")).unwrap();
    let hash = bcrypt::hash(PASSWORD, 4).unwrap();
    let config_dir = tempfile::tempdir().unwrap();
    let config = config_dir.path().join("site.toml");
    std::fs::write(&config, CONFIG.replace("HASH", &hash)).unwrap();
    let config = config.display().to_string();
    let server = Server::start(listener.kind(), &tree.root, &["--config", &config]);
    Site {
        tree,
        server,
        listener,
        _config: config_dir,
    }
}

impl Site {
    /// curl `path` on this site's listener, in its protocol.
    fn curl(&self, path: &str, args: &[&str]) -> Reply {
        let mut all = self.listener.curl_args().to_vec();
        all.extend_from_slice(args);
        curl(&self.server.url(path), &all)
    }

    fn get(&self, path: &str) -> Reply {
        self.curl(path, &[])
    }

    fn auth(&self) -> String {
        format!("alice:{PASSWORD}")
    }
}

/// Splits curl's `-D - -o -` output: the last head and the body.
fn parse(out: &[u8]) -> Reply {
    let mut rest = out;
    loop {
        let end = rest
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("a response head");
        let head = String::from_utf8_lossy(&rest[..end]).into_owned();
        let body = &rest[end + 4..];
        let mut lines = head.lines();
        let status: u16 = lines
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|s| s.parse().ok())
            .expect("a status line");
        // curl prints a 1xx head before the final one.
        if (100..200).contains(&status) {
            rest = body;
            continue;
        }
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
            .collect();
        return Reply {
            status,
            headers,
            body: body.to_vec(),
        };
    }
}

fn headers_by_path(l: Listener) {
    let s = site(l);
    let asset = s.get("/assets/app.3f9a.js");
    assert_eq!(asset.status, 200);
    assert_eq!(
        asset.header("cache-control"),
        Some("public, max-age=31536000, immutable"),
        "{asset:?}"
    );
    assert_eq!(
        asset.all("cache-control").len(),
        1,
        "set replaces: {asset:?}"
    );
    assert_eq!(
        asset.header("strict-transport-security"),
        Some("max-age=63072000")
    );
    let page = s.get("/index.html");
    assert_eq!(page.header("cache-control"), Some("no-cache"));
    assert_eq!(page.header("x-page"), Some("html"));
    assert!(asset.header("x-page").is_none());
    // `*.html` matches the file served too: `/` (its index), a directory
    // index, a try_files fallback (before: the request path alone, so none
    // of these got the page's headers).
    for path in ["/", "/app/", "/app/some/route", "/docs/intro"] {
        let r = s.get(path);
        assert_eq!(r.status, 200, "{path}: {r:?}");
        assert_eq!(r.header("x-page"), Some("html"), "{path}: {r:?}");
        assert_eq!(r.all("x-page").len(), 1, "{path}: once: {r:?}");
    }
    // Errors carry the site-wide headers (`headers`, as `always`) ...
    let missing = s.get("/nothing-here.txt");
    assert_eq!(missing.status, 404);
    assert_eq!(
        missing.header("strict-transport-security"),
        Some("max-age=63072000")
    );
    // ... and not a path rule's, as nginx's add_header without `always`:
    // a missing asset is not cached for a year.
    let gone = s.get("/assets/gone.3f9a.js");
    assert_eq!(gone.status, 404);
    assert_ne!(
        gone.header("cache-control"),
        Some("public, max-age=31536000, immutable"),
        "{gone:?}"
    );
    assert_eq!(
        gone.header("strict-transport-security"),
        Some("max-age=63072000")
    );
}

fn redirects_with_captures(l: Listener) {
    let s = site(l);
    let r = s.get("/old/guide/part%201.html?lang=en");
    assert_eq!(r.status, 301, "{r:?}");
    assert_eq!(
        r.header("location"),
        Some("/new/guide/part%201.html?lang=en")
    );
    // A decoded CR LF never becomes a header line.
    let r = s.get("/old/x%0d%0aSet-Cookie:%20a=b");
    assert_eq!(r.status, 301);
    assert!(r.header("set-cookie").is_none(), "{r:?}");
    assert!(r.header("location").unwrap().contains("%0D%0A"), "{r:?}");
}

fn clean_urls_spa_fallback_and_error_pages(l: Listener) {
    let s = site(l);
    let r = s.get("/docs/intro");
    assert_eq!((r.status, r.text().as_str()), (200, "<p>intro</p>"));
    // A deep link into the app gets its shell; its real files stay themselves.
    let r = s.get("/app/users/42/settings");
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "<div id=app>spa shell</div>")
    );
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    let r = s.get("/app/index.html");
    assert_eq!(r.status, 200);
    // What nothing answers gets the custom page, with its 404.
    let r = s.get("/no/such/page");
    assert_eq!(
        (r.status, r.text().as_str()),
        (404, "<p>custom not found</p>")
    );
    assert!(
        r.header("etag").is_none(),
        "an error page has no validator: {r:?}"
    );
    // (With -I curl writes the head where the body would go.)
    let r = s.curl("/no/such/page", &["-I"]);
    assert_eq!(r.status, 404);
    assert!(!r.text().contains("custom"), "{r:?}");
    assert_eq!(
        r.header("content-length"),
        Some("23"),
        "the page's length: {r:?}"
    );
    // Rules change no method's answer: POST is 405 (a rewrite or
    // try_files serves nothing to it), OPTIONS 204 with Allow.
    let r = s.curl("/docs/intro", &["-X", "POST"]);
    assert_eq!(r.status, 405, "{r:?}");
    assert!(!r.text().contains("intro"));
    let r = s.curl("/app/users/42", &["-X", "OPTIONS"]);
    assert_eq!(
        (r.status, r.header("allow")),
        (204, Some("GET, HEAD, OPTIONS")),
        "{r:?}"
    );
    // Conditionals and ranges apply to resources, not to an error's page.
    let r = s.curl(
        "/no/such/page",
        &["-H", "Range: bytes=0-1", "-H", "If-None-Match: *"],
    );
    assert_eq!(
        (r.status, r.text().as_str()),
        (404, "<p>custom not found</p>")
    );
}

fn basic_auth_asks_checks_and_passes(l: Listener) {
    let s = site(l);
    let r = s.get("/private/secret.txt");
    assert_eq!(r.status, 401, "{r:?}");
    assert_eq!(
        r.header("www-authenticate"),
        Some("Basic realm=\"Private area\", charset=\"UTF-8\"")
    );
    assert!(!r.text().contains("the secret"));
    let r = s.curl("/private/secret.txt", &["-u", "alice:wrong"]);
    assert_eq!(r.status, 401);
    let r = s.curl("/private/secret.txt", &["-u", "mallory:correct horse"]);
    assert_eq!(r.status, 401);
    let auth = s.auth();
    let r = s.curl("/private/secret.txt", &["-u", &auth]);
    assert_eq!((r.status, r.text().as_str()), (200, "the secret"));
    // Again: the remembered credential, the same answer.
    let r = s.curl("/private/secret.txt", &["-u", &auth]);
    assert_eq!(r.status, 200);
}

fn allow_judges_the_client_address(l: Listener) {
    let s = site(l);
    // The test client is 127.0.0.1 (the example knows no address at all):
    // outside 10.0.0.0/8.
    let r = s.get("/internal/x.txt");
    assert_eq!(r.status, 403, "{r:?}");
    assert!(!r.text().contains("internal"));
    // The 403's error page is a protected file: the plain 403 instead.
    assert!(!r.text().contains("the secret"), "{r:?}");
}

fn cors_preflight_and_responses(l: Listener) {
    let s = site(l);
    let pre = s.curl(
        "/api/data.json",
        &[
            "-X",
            "OPTIONS",
            "-H",
            "Origin: https://app.example",
            "-H",
            "Access-Control-Request-Method: GET",
            "-H",
            "Access-Control-Request-Headers: range",
        ],
    );
    assert_eq!(pre.status, 204, "{pre:?}");
    assert_eq!(
        pre.header("access-control-allow-origin"),
        Some("https://app.example")
    );
    assert_eq!(pre.header("access-control-allow-credentials"), Some("true"));
    assert_eq!(
        pre.header("access-control-allow-methods"),
        Some("GET, HEAD")
    );
    assert_eq!(pre.header("access-control-allow-headers"), Some("range"));
    assert_eq!(pre.header("access-control-max-age"), Some("3600"));
    let refused = s.curl(
        "/api/data.json",
        &[
            "-X",
            "OPTIONS",
            "-H",
            "Origin: https://evil.example",
            "-H",
            "Access-Control-Request-Method: GET",
        ],
    );
    assert!(
        refused.header("access-control-allow-origin").is_none(),
        "{refused:?}"
    );
    let r = s.curl("/api/data.json", &["-H", "Origin: https://app.example"]);
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("https://app.example")
    );
    assert!(r.all("vary").iter().any(|v| v.contains("Origin")), "{r:?}");
    // A preflight carries no credentials: a protected path answers it
    // without asking for any, and its 401 carries the CORS fields.
    let pre = s.curl(
        "/api/private/data.json",
        &[
            "-X",
            "OPTIONS",
            "-H",
            "Origin: https://app.example",
            "-H",
            "Access-Control-Request-Method: GET",
        ],
    );
    assert_eq!(pre.status, 204, "{pre:?}");
    assert_eq!(
        pre.header("access-control-allow-origin"),
        Some("https://app.example")
    );
    let r = s.curl(
        "/api/private/data.json",
        &["-H", "Origin: https://app.example"],
    );
    assert_eq!(r.status, 401);
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("https://app.example")
    );
    assert!(!r.text().contains("private"));
    let auth = s.auth();
    let r = s.curl(
        "/api/private/data.json",
        &["-u", &auth, "-H", "Origin: https://app.example"],
    );
    assert_eq!((r.status, r.text().as_str()), (200, "{\"private\":true}"));
    let r = s.get("/api/data.json");
    assert!(r.header("access-control-allow-origin").is_none());
    assert!(
        r.all("vary").iter().any(|v| v.contains("Origin")),
        "a cache must key on it: {r:?}"
    );
}

/// Every spelling and side door of `/private/` is refused, and none
/// carries the secret. Matching the raw target instead of the normalized
/// path lets at least the encoded, doubled and dotted spellings through.
fn no_side_door_into_a_protected_tree(l: Listener) {
    let s = site(l);
    let doors: &[(&str, &[&str])] = &[
        ("/private/secret.txt", &[]),
        ("/private%2fsecret.txt", &[]),
        ("/private%2Fsecret.txt", &[]),
        ("//private//secret.txt", &[]),
        ("/./private/./secret.txt", &[]),
        ("/public/../private/secret.txt", &[]),
        ("/%70rivate/secret.txt", &[]),
        ("/PRIVATE/secret.txt", &[]),
        ("/Private/Secret.txt", &[]),
        ("/private./secret.txt", &[]),
        ("/private;x=1/secret.txt", &[]),
        ("/private/secret.txt", &["-I"]),
        ("/private/secret.txt", &["-H", "Range: bytes=0-3"]),
        ("/private/a.js.gz", &[]),
        ("/private/a.js", &["-H", "Accept-Encoding: gzip"]),
        ("/private/big.txt", &["-H", "Accept-Encoding: br"]),
        ("/scripts/x.js", &["-H", "Accept-Encoding: gzip"]),
        ("/scripts/x.js.gz", &[]),
        ("/scripts/X.JS.GZ", &[]),
        ("/private/", &[]),
        ("/private", &[]),
        ("/leak/anything", &[]),
        ("/public/link.txt", &[]),
        ("/public/dirlink/secret.txt", &[]),
    ];
    for (path, args) in doors {
        let r = s.curl(path, args);
        assert!(
            matches!(r.status, 400 | 401 | 403 | 404),
            "{path} {args:?}: {} {r:?}",
            r.status
        );
        let text = r.text();
        for secret in ["the secret", "secret script", "secret gz", "secret text"] {
            assert!(!text.contains(secret), "{path} {args:?} leaked: {text}");
        }
    }
    // The listing of a parent shows what this client may open, no more.
    let r = s.get("/files/");
    assert_eq!(r.status, 200);
    let text = r.text();
    assert!(text.contains("ok.txt"), "{text}");
    assert!(
        !text.contains("notes"),
        "a protected name is listed: {text}"
    );
    let auth = s.auth();
    // Once the notes' credentials verified, their name shows.
    assert_eq!(s.curl("/files/notes/n.txt", &["-u", &auth]).status, 200);
    let r = s.curl("/files/", &["-u", &auth]);
    assert!(r.text().contains("notes"), "{}", r.text());
    assert!(!s.get("/public/").text().contains("the secret"));
    assert!(s.tree.root.join("private/secret.txt").exists());
}

/// `/downloads/**` limited to 30 a minute per client (one each 2 s)
/// after a burst of 3; the test clients are told apart by
/// `X-Forwarded-For` from loopback, a trusted proxy.
const RATE_CONFIG: &str = r#"
trusted_proxies = ["127.0.0.1", "::1"]

[[rules]]
path = "/downloads/**"
rate_limit = { rate = "30/m", burst = 3, exempt = ["198.51.100.0/24"] }
"#;

/// A client over a rule's rate gets 429 with `Retry-After` while another
/// client is served at the same moment, and is served again once it has
/// waited that long; the limit on `/downloads/**` leaves `/` alone, and
/// the refusals are counted. The axum example knows no client address:
/// its requests share one bucket, so there the second client is the first.
fn rate_limit_refuses_a_client_over_its_rate(l: Listener) {
    let tree = Tree::new();
    tree.write("index.html", b"home");
    tree.write("downloads/big.iso", b"iso bytes");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rate.toml");
    std::fs::write(&config, RATE_CONFIG).unwrap();
    let server = Server::start(
        l.kind(),
        &tree.root,
        &["--config", config.to_str().unwrap()],
    );
    let s = Site {
        tree,
        server,
        listener: l,
        _config: dir,
    };
    let from = |client: &str, path: &str| {
        let xff = format!("X-Forwarded-For: {client}");
        s.curl(path, &["-H", &xff])
    };
    let metric = || {
        let m = s.server.metrics()?;
        let series = "fileserver_rate_limited_total{site=\"default\",rule=\"1\"}";
        Some(common::metric(&m, series).unwrap_or(0.0))
    };
    let before = metric();
    // A burst of 3, then the next within 2 s is refused (a slow machine
    // may earn one more first).
    let mut admitted = 0;
    let refused = loop {
        let r = from("203.0.113.1", "/downloads/big.iso");
        match r.status {
            200 => admitted += 1,
            429 => break r,
            _ => panic!("{r:?}"),
        }
        assert!(admitted < 8, "never refused");
    };
    assert!(admitted >= 3, "{admitted} before the first 429");
    let wait: u64 = refused
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no Retry-After: {refused:?}"));
    assert!((1..=2).contains(&wait), "{refused:?}");
    assert!(!refused.text().contains("iso bytes"), "{refused:?}");
    let home = from("203.0.113.1", "/");
    assert_eq!((home.status, home.text().as_str()), (200, "home"));
    if l != Listener::Axum {
        let other = from("203.0.113.2", "/downloads/big.iso");
        assert_eq!((other.status, other.text().as_str()), (200, "iso bytes"));
        for _ in 0..5 {
            let exempt = from("198.51.100.7", "/downloads/big.iso");
            assert_eq!(exempt.status, 200, "{exempt:?}");
        }
        let after = metric().unwrap();
        assert!(after >= before.unwrap() + 1.0, "{before:?} -> {after}");
    }
    std::thread::sleep(std::time::Duration::from_secs(wait));
    let again = from("203.0.113.1", "/downloads/big.iso");
    assert_eq!((again.status, again.text().as_str()), (200, "iso bytes"));
}

/// Runs each test on each listener named in the brackets: a module per
/// test, a `#[test]` per listener.
macro_rules! on_listeners {
    ($listeners:tt $($test:ident),* $(,)?) => {
        $(on_listeners!(@one $test $listeners);)*
    };
    (@one $test:ident [$($name:ident: $listener:ident),*]) => {
        mod $test {
            use super::Listener;
            $(
                #[test]
                fn $name() {
                    super::$test(Listener::$listener)
                }
            )*
        }
    };
}

on_listeners!(
    [plain: Plain, h2c: H2c, https_h2: HttpsH2, https_h1: HttpsH1, axum: Axum]
    headers_by_path,
    redirects_with_captures,
    clean_urls_spa_fallback_and_error_pages,
    basic_auth_asks_checks_and_passes,
    allow_judges_the_client_address,
    cors_preflight_and_responses,
    no_side_door_into_a_protected_tree,
    rate_limit_refuses_a_client_over_its_rate,
);

/// curl against a daemon's plaintext listener.
fn curl_plain(d: &common::Daemon, path: &str, args: &[&str]) -> Reply {
    curl(&d.url(path), args)
}

/// curl `url` as written (`--path-as-is`: no client-side cleanup), the
/// head and the body of its final response.
fn curl(url: &str, args: &[&str]) -> Reply {
    let out = Command::new("curl")
        .args([
            "-s",
            "-S",
            "--path-as-is",
            "-D",
            "-",
            "-o",
            "-",
            "--max-time",
            "10",
        ])
        .args(args)
        .arg(url)
        .stdin(Stdio::null())
        .output()
        .expect("curl (scripts/install-deps.sh installs it)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "curl {url}: {stderr}");
    parse(&out.stdout)
}

/// The one-liners as people type them: `--browse`, `--spa`, `--header`
/// (a value with commas in it), `--cors '*'`.
#[test]
fn command_line_one_liners() {
    let tree = Tree::new();
    tree.write("index.html", b"<p>spa shell</p>");
    tree.write("files/a.txt", b"a");
    let d = common::Daemon::start(
        &tree.root,
        &[
            "--browse",
            "--spa",
            "--header",
            "Cache-Control: public, max-age=60",
            "-H",
            "X-Content-Type-Options: nosniff",
            "--cors",
            "*",
        ],
    );
    let listing = curl_plain(&d, "/files/", &[]);
    assert_eq!(listing.status, 200);
    assert!(
        listing.text().contains("a.txt"),
        "--browse lists: {listing:?}"
    );
    let deep = curl_plain(
        &d,
        "/settings/profile",
        &["-H", "Origin: https://x.example"],
    );
    assert_eq!(
        (deep.status, deep.text().as_str()),
        (200, "<p>spa shell</p>")
    );
    assert_eq!(deep.header("cache-control"), Some("public, max-age=60"));
    assert_eq!(deep.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(deep.header("access-control-allow-origin"), Some("*"));
    // Real files stay themselves; a missing asset is a 404, not the shell.
    assert_eq!(curl_plain(&d, "/files/a.txt", &[]).text(), "a");
    assert_eq!(curl_plain(&d, "/files/gone.js", &[]).status, 404);
}

/// `--rate-limit` limits every path for each client, and the refusals
/// show in `/metrics` under the one-liner's rule.
#[test]
fn command_line_rate_limit() {
    let tree = Tree::new();
    tree.write("a.txt", b"a");
    tree.write("b/c.txt", b"c");
    let d = common::Daemon::start(&tree.root, &["--rate-limit", "1/m"]);
    assert_eq!(curl_plain(&d, "/a.txt", &[]).status, 200);
    let refused = curl_plain(&d, "/b/c.txt", &[]);
    assert_eq!(refused.status, 429, "{refused:?}");
    let wait: u32 = refused.header("retry-after").unwrap().parse().unwrap();
    assert!((55..=60).contains(&wait), "{refused:?}");
    let m = d.metrics();
    let series = "fileserver_rate_limited_total{site=\"default\",rule=\"1\"}";
    assert_eq!(common::metric(&m, series), Some(1.0), "{m}");
    assert!(m.contains("# TYPE fileserver_rate_limited_total counter"));
    // Counted under its code, not `other`.
    let code = |c| common::metric_sum(&m, "fileserver_http_requests_total", &[("code", c)]);
    assert_eq!(code("429"), Some(1.0), "{m}");
}

/// A capture that would end inside a character (`*` then `?` on `é`,
/// found by fuzzing) is redirected like any other, not a panic that drops
/// the connection.
#[test]
fn a_capture_next_to_a_multibyte_character_is_rendered() {
    let tree = Tree::new();
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("img.toml");
    let rules = "[[rules]]\npath = \"/img/*?.png\"\nredirect = \"/x/{1}\"\n";
    std::fs::write(&conf, rules).unwrap();
    let d = common::Daemon::start(&tree.root, &["--config", conf.to_str().unwrap()]);
    let r = curl_plain(&d, "/img/%C3%A9.png", &[]);
    assert_eq!(
        (r.status, r.header("location")),
        (302, Some("/x/")),
        "{r:?}"
    );
    let r = curl_plain(&d, "/img/ab%C3%A9.png", &[]);
    assert_eq!(
        (r.status, r.header("location")),
        (302, Some("/x/ab")),
        "{r:?}"
    );
}

/// `--spa` on a build with folders that have no index: each answers the
/// shell (after one redirect to its `/` form), never a redirect to itself
/// (before: `/assets/` answered `301 Location: /assets/` forever).
#[test]
fn spa_folders_without_an_index_are_the_shell_not_a_loop() {
    let tree = Tree::new();
    tree.write("index.html", b"<p>shell</p>");
    tree.write("assets/app.1.js", b"js");
    std::fs::create_dir_all(tree.root.join("docs")).unwrap();
    let d = common::Daemon::start(&tree.root, &["--spa"]);
    for path in ["/assets/", "/docs/"] {
        let r = curl_plain(&d, path, &[]);
        assert_eq!(
            (r.status, r.text().as_str()),
            (200, "<p>shell</p>"),
            "{path}: {r:?}"
        );
    }
    let r = curl_plain(&d, "/assets", &[]);
    assert_eq!((r.status, r.header("location")), (301, Some("/assets/")));
    // Followed (curl prints the second head into the first's body).
    let followed = curl_plain(&d, "/assets", &["-L", "--max-redirs", "1"]).text();
    assert!(
        followed.contains("200 OK") && followed.ends_with("<p>shell</p>"),
        "{followed}"
    );
    // A try_files rule of its own for a folder: a 404, not a loop.
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("tryfiles.toml");
    std::fs::write(
        &conf,
        "[[rules]]\npath = \"/**\"\ntry_files = [\"{path}\"]\n",
    )
    .unwrap();
    let d = common::Daemon::start(&tree.root, &["--config", conf.to_str().unwrap()]);
    assert_eq!(curl_plain(&d, "/docs/", &[]).status, 404);
}

/// `config/examples/spa.toml` without its root and listen (the test's
/// daemon gives those): its directory, kept alive, and the file.
fn spa_recipe() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../config/examples/spa.toml"
    ))
    .unwrap()
    .replace("root = \"/srv/app/dist\"", "")
    .replace("listen = \":80\"", "");
    let conf = dir.path().join("spa.toml");
    std::fs::write(&conf, example).unwrap();
    (dir, conf)
}

/// The SPA recipe across a redeploy: an old hashed asset, a missing image
/// and `/favicon.ico` are 404s without the assets' year-long cache (before:
/// the shell, as `text/html`, cached `immutable` under a script's URL);
/// deep links are the shell, a dotted one too when a browser navigates.
#[test]
fn spa_asset_misses_are_404s_without_a_long_cache() {
    let tree = Tree::new();
    tree.write("index.html", b"<p>shell v2</p>");
    tree.write("assets/app.new2.js", b"js v2");
    let (_dir, conf) = spa_recipe();
    let d = common::Daemon::start(&tree.root, &["--config", conf.to_str().unwrap()]);
    for path in ["/assets/app.old1.js", "/assets/missing.png", "/favicon.ico"] {
        let r = curl_plain(&d, path, &["-H", "Accept: */*"]);
        assert_eq!(r.status, 404, "{path}: {r:?}");
        let cc = r.header("cache-control").unwrap_or_default();
        assert!(
            !cc.contains("immutable") && !cc.contains("31536000"),
            "{path}: {r:?}"
        );
    }
    let js = curl_plain(&d, "/assets/app.new2.js", &[]);
    assert_eq!(js.text(), "js v2");
    assert!(js.header("cache-control").unwrap().contains("immutable"));
    for (path, accept) in [
        ("/users/42", "*/*"),
        ("/users/", "*/*"),
        (
            "/users/john.doe",
            "text/html,application/xhtml+xml,*/*;q=0.8",
        ),
    ] {
        let r = curl_plain(&d, path, &["-H", &format!("Accept: {accept}")]);
        assert_eq!(
            (r.status, r.text().as_str()),
            (200, "<p>shell v2</p>"),
            "{path}"
        );
        assert!(!r
            .header("cache-control")
            .unwrap_or_default()
            .contains("immutable"));
    }
    // The directory redirect keeps its own short cache, not the rule's.
    std::fs::create_dir_all(tree.root.join("assets/img")).unwrap();
    let r = curl_plain(&d, "/assets/img", &[]);
    assert_eq!(r.status, 301, "{r:?}");
    assert!(
        !r.header("cache-control")
            .unwrap_or_default()
            .contains("immutable"),
        "{r:?}"
    );
}

/// `https_redirect` sends plain HTTP to the HTTPS listener's port, path and
/// query kept; HTTPS requests are served.
#[test]
fn https_redirect_keeps_path_and_query() {
    let tree = Tree::new();
    tree.write("a.txt", b"over tls");
    let ca = common::tls::TestCa::new();
    let port = common::free_port();
    let mut args = ca.args();
    args[1] = format!("127.0.0.1:{port}");
    args.extend(["--set".to_string(), "https_redirect=true".to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let d = common::Daemon::start(&tree.root, &args);
    let r = curl_plain(&d, "/a.txt?x=1", &["-H", "Host: example.test:8080"]);
    assert_eq!(r.status, 308, "{r:?}");
    assert_eq!(
        r.header("location").unwrap(),
        format!("https://example.test:{port}/a.txt?x=1")
    );
    let r = ca
        .client(true)
        .get(format!("https://localhost:{port}/a.txt"))
        .send();
    let r = r.unwrap_or_else(|e| panic!("https: {e}"));
    assert_eq!(r.status(), 200);
    // Every redirect is counted under its own code, not `other`.
    let m = d.metrics();
    let by_code = |code| {
        common::metric_sum(
            &m,
            "fileserver_http_requests_total",
            &[("code", code), ("method", "GET")],
        )
    };
    assert_eq!(by_code("308"), Some(1.0), "{m}");
    assert_eq!(by_code("other"), Some(0.0), "{m}");
}

/// A rule limited to a host rewrites for that host only.
#[test]
fn hosts_and_rewrites() {
    let tree = Tree::new();
    tree.write("index.html", b"main site");
    tree.write("docs/index.html", b"docs site");
    tree.write("docs/guide.html", b"guide");
    let config = tempfile::tempdir().unwrap();
    let file = config.path().join("c.toml");
    std::fs::write(
        &file,
        r#"
[[rules]]
path = "/**"
hosts = ["docs.example", "*.docs.example"]
rewrite = "/docs/{1}"
"#,
    )
    .unwrap();
    let d = common::Daemon::start(&tree.root, &["--config", file.to_str().unwrap()]);
    assert_eq!(curl_plain(&d, "/", &[]).text(), "main site");
    assert_eq!(
        curl_plain(&d, "/", &["-H", "Host: docs.example"]).text(),
        "docs site"
    );
    assert_eq!(
        curl_plain(&d, "/guide.html", &["-H", "Host: v2.docs.example:8080"]).text(),
        "guide"
    );
    assert_eq!(
        curl_plain(&d, "/guide.html", &["-H", "Host: other.example"]).status,
        404
    );
    // A rewrite serves nothing to a method files are not served to.
    let post = curl_plain(
        &d,
        "/guide.html",
        &["-X", "POST", "-H", "Host: docs.example"],
    );
    assert_eq!(post.status, 405, "{post:?}");
    assert!(!post.text().contains("guide"));
}

/// Runs `fileserver check-config` on `text` with a root holding
/// `404.html`; (exit code, stderr).
fn check_config(text: &str) -> (Option<i32>, String) {
    let tree = Tree::new();
    tree.write("404.html", b"nf");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.toml");
    let text = format!("root = \"{}\"\n{text}", tree.root.display());
    std::fs::write(&file, text).unwrap();
    let out = Command::new(common::bin())
        .arg("check-config")
        .arg(&file)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn check_config_names_each_bad_rule_by_position() {
    let (code, err) = check_config(
        r#"
[[rules]]
path = "/ok/**"
error_pages = { "404" = "/404.html" }

[[rules]]
path = "assets/**"
status = 301

[[rules]]
path = "/x/**"
redirect = "/y/{3}"
status = 200
headers = { "Content-Length" = "1" }

[[rules]]
path = "/p/**"
basic_auth = { realm = "r", users = { alice = "plaintext" } }
allow = ["10.0.0.0/33"]
error_pages = { "404" = "/missing.html", "200" = "/404.html" }

[[rules]]
path = "/c/**"
cors = { origins = ["*"], credentials = true }
"#,
    );
    assert_eq!(code, Some(2), "{err}");
    for needle in [
        "`rules[2].path`: `assets/**` must start with `/`",
        "`rules[2].status`",
        "`rules[3].redirect`",
        "`rules[3].status`: 200 is not a redirect status",
        "`rules[3].headers`: `Content-Length` is written by the server",
        "`rules[4].basic_auth`",
        "fileserver hash-password",
        "`rules[4].allow`",
        "`rules[4].error_pages`: `200` is not an error status",
        "`rules[5].cors`",
    ] {
        assert!(err.contains(needle), "missing {needle:?} in:\n{err}");
    }
    assert!(!err.contains("rules[1]"), "{err}");
    // An unknown field, and a page that is not there (checked once the
    // values are valid).
    let (code, err) = check_config("[[rules]]\npath = \"/\"\nredirct = \"/x\"\n");
    assert_eq!(code, Some(2));
    assert!(err.contains("rules[1]") && err.contains("redirct"), "{err}");
    let (code, err) =
        check_config("[[rules]]\npath = \"/\"\nerror_pages = { \"404\" = \"/missing.html\" }\n");
    assert_eq!(code, Some(2));
    assert!(
        err.contains("rules[1].error_pages") && err.contains("/missing.html"),
        "{err}"
    );
    let (code, err) =
        check_config("[[rules]]\npath = \"/\"\nerror_pages = { \"404\" = \"/404.html\" }\n");
    assert_eq!(code, Some(0), "{err}");
}

/// Each nonsense `rate_limit` is named by its rule and field, the
/// one-liner by its key.
#[test]
fn check_config_refuses_nonsense_rate_limits() {
    let (code, err) = check_config(
        r#"
rate_limit = "fast"

[[rules]]
path = "/a/**"
rate_limit = { rate = "0/s" }

[[rules]]
path = "/b/**"
rate_limit = { rate = "20001/s" }

[[rules]]
path = "/c/**"
rate_limit = { rate = "5/s", burst = 0 }

[[rules]]
path = "/d/**"
rate_limit = { rate = "5/s", key = "ip" }

[[rules]]
path = "/e/**"
rate_limit = { rate = "5/s", exempt = ["10.0.0.0/33"] }

[[rules]]
path = "/f/**"
rate_limit = { rate = "5/d" }

[[rules]]
path = "/ok/**"
rate_limit = { rate = "600/m", burst = 100, key = "rule", exempt = ["::1", "10.0.0.0/8"] }
"#,
    );
    assert_eq!(code, Some(2), "{err}");
    for needle in [
        "`rate_limit`: rate `fast` is not N/s, N/m or N/h",
        "`rules[1].rate_limit`: rate `0/s` is not",
        "`rules[2].rate_limit`: rate `20001/s` is more than 10000/s",
        "`rules[3].rate_limit`: burst must be at least 1",
        "`rules[4].rate_limit`: key `ip` is not `client` or `rule`",
        "`rules[5].rate_limit`: exempt: `10.0.0.0/33`",
        "`rules[6].rate_limit`: rate `5/d`",
    ] {
        assert!(err.contains(needle), "missing {needle:?} in:\n{err}");
    }
    assert!(!err.contains("rules[7]"), "{err}");
    let (code, err) = check_config("[[rules]]\nrate_limit = { rate = \"1/s\", burts = 2 }\n");
    assert_eq!(code, Some(2));
    assert!(err.contains("rules[1]") && err.contains("burts"), "{err}");
}

/// SIGHUP applies changed rules; failed credentials are counted, and the
/// password never reaches the access log.
#[test]
fn sighup_applies_rules_and_failures_are_counted_not_logged() {
    let tree = Tree::new();
    tree.write("p/secret.txt", b"secret");
    let config = tempfile::tempdir().unwrap();
    let file = config.path().join("c.toml");
    let hash = bcrypt::hash(PASSWORD, 4).unwrap();
    let rules = format!(
        "access_log = \"stdout\"\n[[rules]]\npath = \"/p/**\"\n\
         basic_auth = {{ realm = \"r\", users = {{ alice = \"{hash}\" }} }}\n"
    );
    std::fs::write(&file, &rules).unwrap();
    let d = common::Daemon::start(&tree.root, &["--config", file.to_str().unwrap()]);
    assert_eq!(d.start.rules, Some(1));
    let before = common::metric(&d.metrics(), "fileserver_auth_failures_total").unwrap_or(0.0);
    let r = curl_plain(&d, "/p/secret.txt", &["-u", "alice:hunter2-wrong"]);
    assert_eq!(r.status, 401);
    assert_eq!(curl_plain(&d, "/p/secret.txt", &[]).status, 401);
    let after = common::metric(&d.metrics(), "fileserver_auth_failures_total").unwrap();
    assert_eq!(
        after - before,
        1.0,
        "one refused credential; none sent is not a failure"
    );
    std::fs::write(
        &file,
        format!("{rules}\n[[rules]]\npath = \"/**\"\nheaders = {{ \"X-Reloaded\" = \"yes\" }}\n"),
    )
    .unwrap();
    d.signal(libc::SIGHUP);
    assert!(
        d.wait_stderr(
            "reload: site rules applied",
            std::time::Duration::from_secs(10)
        ),
        "{}",
        d.stderr_text()
    );
    let r = curl_plain(&d, "/p/secret.txt", &["-u", &format!("alice:{PASSWORD}")]);
    assert_eq!((r.status, r.header("x-reloaded")), (200, Some("yes")));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let log = d.stdout.lock().unwrap().join("\n");
    assert!(log.contains("/p/secret.txt"), "{log}");
    assert!(!log.contains("hunter2") && !log.contains(PASSWORD), "{log}");
}

/// An SPA opened by a deep link, then reloaded there: both loads get the
/// app's shell, whose script sees the deep path.
#[test]
fn chromium_opens_and_reloads_an_spa_deep_link() {
    let tree = Tree::new();
    tree.write(
        "index.html",
        b"<!doctype html><html><body><p id=out>no script</p><script src=\"/app.js\"></script></body></html>",
    );
    tree.write(
        "app.js",
        b"const out = document.getElementById('out');\n\
          if (!sessionStorage.getItem('loaded')) {\n\
            sessionStorage.setItem('loaded', '1');\n\
            location.reload();\n\
          } else {\n\
            out.textContent = 'reloaded at ' + location.pathname;\n\
          }\n",
    );
    let d = common::Daemon::start(&tree.root, &["--spa", "--access-log", "stdout"]);
    let (dom, _) = common::chromium_dom(&d.url("/users/42/settings"));
    assert!(dom.contains("reloaded at /users/42/settings"), "{dom}");
    let log = d.stdout.lock().unwrap().join("\n");
    // The reload revalidates the shell it got: 304 by the shell's tag.
    let first = log.matches("GET /users/42/settings HTTP/1.1\" 200").count();
    let again = log.matches("GET /users/42/settings HTTP/1.1\" 304").count();
    assert_eq!(
        (first, first + again),
        (1, 2),
        "loaded, then reloaded: {log}"
    );
}

/// The shipped SPA recipe across a redeploy, in Chromium: a deep link
/// loads the app; after the new build replaces the old (index.html
/// rewritten, the old hashed script deleted), a page of the old build asks
/// for its script and gets a 404 that no cache keeps for a year (before:
/// the shell, as text/html, `immutable`), and deep links load the new app.
#[test]
fn chromium_runs_the_spa_recipe_across_a_redeploy() {
    let page = |v: &str| {
        format!(
            "<!doctype html><html><body><p id=out>no script</p><p id=probe>-</p>\
             <script src=\"/assets/app.{v}.js\" onerror=\"document.getElementById('out')\
             .textContent='{v} script missing'\"></script>\
             <script>fetch('/assets/app.v1.js').then(r => document.getElementById('probe')\
             .textContent = 'v1 asset ' + r.status + ' ' + r.headers.get('cache-control'))\
             </script></body></html>"
        )
    };
    let script = |v: &str| {
        format!("document.getElementById('out').textContent = '{v} at ' + location.pathname;")
    };
    let tree = Tree::new();
    tree.write("index.html", page("v1").as_bytes());
    tree.write("assets/app.v1.js", script("v1").as_bytes());
    let (_dir, conf) = spa_recipe();
    let d = common::Daemon::start(
        &tree.root,
        &["--config", conf.to_str().unwrap(), "--access-log", "stdout"],
    );
    let (dom, _) = common::chromium_dom(&d.url("/users/7"));
    assert!(dom.contains("v1 at /users/7"), "{dom}");
    assert!(
        dom.contains("v1 asset 200 public, max-age=31536000, immutable"),
        "{dom}"
    );
    // The redeploy: the new build in place, the old script gone; a tab of
    // the old build is kept as old.html.
    tree.write("old.html", page("v1").as_bytes());
    tree.write("assets/app.v2.js", script("v2").as_bytes());
    tree.write("index.html", page("v2").as_bytes());
    std::fs::remove_file(tree.root.join("assets/app.v1.js")).unwrap();
    let (dom, _) = common::chromium_dom(&d.url("/old.html"));
    assert!(dom.contains("v1 script missing"), "{dom}");
    assert!(dom.contains("v1 asset 404 null"), "{dom}");
    let (dom, _) = common::chromium_dom(&d.url("/users/8"));
    assert!(dom.contains("v2 at /users/8"), "{dom}");
    let log = d.stdout.lock().unwrap().join("\n");
    assert!(
        log.contains("\"GET /assets/app.v1.js HTTP/1.1\" 404"),
        "{log}"
    );
}

/// A page on one origin fetches from another with a header that needs a
/// preflight: the allowed origin reads the answer, the preflight is seen
/// on the wire; a page from an origin not allowed cannot read it.
#[test]
fn chromium_fetches_cross_origin_after_a_preflight() {
    let page = |api: &str| {
        format!(
            "<!doctype html><html><body><p id=out>pending</p><script>\n\
             fetch('{api}/data.json', {{ headers: {{ 'If-None-Match': '\"nothing\"' }} }})\n\
               .then(r => r.text())\n\
               .then(t => document.getElementById('out').textContent = 'got ' + t)\n\
               .catch(e => document.getElementById('out').textContent = 'blocked');\n\
             </script></body></html>"
        )
    };
    let app = Tree::new();
    let other = Tree::new();
    let a = common::Daemon::start(&app.root, &[]);
    let o = common::Daemon::start(&other.root, &[]);
    let api_tree = Tree::new();
    api_tree.write("data.json", b"{\"answer\":42}");
    let origin = format!("http://{}", a.http);
    let api = common::Daemon::start(
        &api_tree.root,
        &["--cors", &origin, "--access-log", "stdout"],
    );
    let api_url = format!("http://{}", api.http);
    app.write("index.html", page(&api_url).as_bytes());
    other.write("index.html", page(&api_url).as_bytes());
    let (dom, _) = common::chromium_dom(&a.url("/"));
    assert!(dom.contains("got {\"answer\":42}"), "{dom}");
    let log = api.stdout.lock().unwrap().join("\n");
    assert!(
        log.contains("\"OPTIONS /data.json HTTP/1.1\" 204"),
        "a preflight: {log}"
    );
    let (dom, _) = common::chromium_dom(&o.url("/"));
    assert!(dom.contains("blocked"), "another origin read it: {dom}");
}

/// The shipped recipes (`config/examples/`) pass check-config, and each
/// does what its comment says on a real tree.
#[test]
fn the_shipped_recipes_check_and_work() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/examples");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    assert!(names.len() >= 6, "{names:?}");
    for file in &names {
        let out = Command::new(common::bin())
            .args(["check-config", "--values-only"])
            .arg(file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let start = |name: &str, tree: &Tree, extra: &[&str]| {
        let file = dir.join(name).display().to_string();
        let mut args = vec!["--config", &file];
        args.extend_from_slice(extra);
        common::Daemon::start(&tree.root, &args)
    };
    let t = Tree::new();
    t.write("index.html", b"shell");
    t.write("assets/app.1.js", b"js");
    let d = start("spa.toml", &t, &[]);
    assert_eq!(curl_plain(&d, "/users/1", &[]).text(), "shell");
    // The recipes that name no host serve every Host alike.
    let elsewhere = ["-H", "Host: elsewhere.example"];
    assert_eq!(curl_plain(&d, "/users/1", &elsewhere).text(), "shell");
    let js = curl_plain(&d, "/assets/app.1.js", &[]);
    assert!(js.header("cache-control").unwrap().contains("immutable"));
    let t = Tree::new();
    t.write("guide/install.html", b"install");
    t.write("404.html", b"lost");
    let d = start("docs-clean-urls.toml", &t, &[]);
    assert_eq!(curl_plain(&d, "/guide/install", &[]).text(), "install");
    assert_eq!(
        curl_plain(&d, "/guide/install", &elsewhere).text(),
        "install"
    );
    assert_eq!(
        curl_plain(&d, "/v1/install", &[]).header("location"),
        Some("/guide/install")
    );
    assert_eq!(curl_plain(&d, "/nope", &[]).text(), "lost");
    let t = Tree::new();
    t.write("index.html", b"home");
    t.write("404.html", b"lost");
    let d = start("static-site.toml", &t, &[]);
    let home = curl_plain(&d, "/index.html", &[]);
    assert_eq!(home.header("x-frame-options"), Some("DENY"));
    let home = curl_plain(&d, "/index.html", &elsewhere);
    assert_eq!(home.header("x-frame-options"), Some("DENY"));
    assert_eq!(curl_plain(&d, "/nope", &[]).status, 404);
    let t = Tree::new();
    t.write("private/x.txt", b"x");
    t.write("pub.txt", b"p");
    let d = start("private-dir.toml", &t, &[]);
    // From 127.0.0.1, outside the office networks: refused before any
    // password is asked; the listing does not name it.
    assert_eq!(
        curl_plain(&d, "/private/x.txt", &["-u", "alice:example"]).status,
        403
    );
    let as_elsewhere = ["-u", "alice:example", "-H", "Host: elsewhere.example"];
    assert_eq!(curl_plain(&d, "/private/x.txt", &as_elsewhere).status, 403);
    let listing = curl_plain(&d, "/", &[]).text();
    assert!(
        listing.contains("pub.txt") && !listing.contains("private"),
        "{listing}"
    );
    let t = Tree::new();
    t.write("site/index.html", b"www");
    t.write("docs/index.html", b"docs");
    t.write("404.html", b"lost");
    let ca = common::tls::TestCa::new();
    let mut args = ca.args();
    args.extend(["--set".into(), "https_redirect=false".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let d = start("two-hosts.toml", &t, &args);
    assert_eq!(
        curl_plain(&d, "/", &["-H", "Host: www.example.com"]).text(),
        "www"
    );
    assert_eq!(
        curl_plain(&d, "/", &["-H", "Host: docs.example.com"]).text(),
        "docs"
    );
    // A Host the recipe does not name reads neither tree (before: /site/,
    // /docs/index.html and /404.html were all 200).
    for path in [
        "/",
        "/site/",
        "/docs/index.html",
        "/404.html",
        "/site/index.html",
    ] {
        let r = curl_plain(&d, path, &["-H", "Host: elsewhere.example"]);
        assert_eq!((r.status, r.text().as_str()), (404, "lost"), "{path}");
    }
    // virtual-hosts.toml, its /srv roots moved to temporary trees.
    let (default, www, docs) = (Tree::new(), Tree::new(), Tree::new());
    default.write("index.html", b"default");
    www.write("index.html", b"www");
    docs.write("install.html", b"install");
    let text = std::fs::read_to_string(dir.join("virtual-hosts.toml"))
        .unwrap()
        .replace("/srv/default", default.root.to_str().unwrap())
        .replace("/srv/www", www.root.to_str().unwrap())
        .replace("/srv/docs", docs.root.to_str().unwrap());
    let moved = tempfile::tempdir().unwrap();
    let file = moved.path().join("virtual-hosts.toml");
    std::fs::write(&file, text).unwrap();
    let d = common::Daemon::start(&default.root, &["--config", file.to_str().unwrap()]);
    let host = |name: &str, path: &str| {
        let r = curl_plain(&d, path, &["-H", &format!("Host: {name}")]);
        (r.status, r.text())
    };
    assert_eq!(host("www.example.com", "/"), (200, "www".into()));
    assert_eq!(
        host("docs.example.com", "/install"),
        (200, "install".into())
    );
    assert_eq!(host("elsewhere.example", "/").0, 403);
    assert_eq!(host("elsewhere.example", "/index.html").0, 403);
    // crawlers.toml: downloads after their burst of 10, then pages and
    // listings after theirs, get 429 and the page; the office does not,
    // nor does an asset.
    let t = Tree::new();
    t.write("downloads/a.iso", b"iso");
    t.write("docs/index.html", b"docs");
    t.write("app.js", b"js");
    t.write("slow-down.html", b"slow down");
    let d = start("crawlers.toml", &t, &[]);
    let until_refused = |path: &str, most: usize| {
        for n in 0..most {
            let r = curl_plain(&d, path, &[]);
            if r.status == 429 {
                return (n, r);
            }
            assert_eq!(r.status, 200, "{path}: {r:?}");
        }
        panic!("{path}: never refused in {most}");
    };
    let (served, r) = until_refused("/downloads/a.iso", 20);
    assert!(served >= 10, "{served}");
    assert!(r.header("retry-after").is_some(), "{r:?}");
    let office = ["-H", "X-Forwarded-For: 10.1.2.3"];
    assert_eq!(curl_plain(&d, "/downloads/a.iso", &office).status, 200);
    let (served, r) = until_refused("/docs/", 200);
    assert!(served >= 20, "{served}");
    assert_eq!((r.status, r.text().as_str()), (429, "slow down"));
    assert_eq!(curl_plain(&d, "/app.js", &[]).status, 200);
}

/// `[[sites]]`: each name gets its own root and rules, on every daemon
/// listener; any other name gets the default site, and no site reaches
/// another's files.
fn virtual_hosts_have_their_own_roots_and_rules(l: Listener) {
    let default = Tree::new();
    default.write("index.html", b"default site");
    default.write("only-default.txt", b"default's own");
    default.write("secret/x.txt", b"default secret is public here");
    let a = Tree::new();
    a.write("index.html", b"site a");
    a.write("secret/x.txt", b"a's secret");
    let b = Tree::new();
    b.write("index.html", b"site b");
    b.write("404.html", b"b's own 404");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sites.toml");
    std::fs::write(
        &file,
        format!(
            r#"
[[sites]]
hosts = ["a.example", "*.a.example"]
root = "{}"

[[sites.rules]]
path = "/secret/**"
deny = ["all"]

[[sites]]
hosts = ["b.example"]
root = "{}"
rules = [{{ path = "/**", error_pages = {{ "404" = "/404.html" }} }}]
"#,
            a.root.display(),
            b.root.display()
        ),
    )
    .unwrap();
    let config = file.display().to_string();
    let server = Server::start(l.kind(), &default.root, &["--config", &config]);
    let s = Site {
        tree: default,
        server,
        listener: l,
        _config: dir,
    };
    let host = |name: &str, path: &str| {
        // curl --resolve keeps the URL's authority for HTTP/2's :authority.
        let r = s.curl(path, &["-H", &format!("Host: {name}")]);
        (r.status, r.text())
    };
    assert_eq!(host("a.example", "/"), (200, "site a".into()));
    assert_eq!(host("www.a.example:8443", "/"), (200, "site a".into()));
    assert_eq!(host("B.Example", "/"), (200, "site b".into()));
    assert_eq!(host("unknown.example", "/"), (200, "default site".into()));
    assert_eq!(host("a.example", "/secret/x.txt").0, 403);
    assert_eq!(
        host("other.example", "/secret/x.txt"),
        (200, "default secret is public here".into())
    );
    assert_eq!(host("b.example", "/nope"), (404, "b's own 404".into()));
    assert_eq!(host("a.example", "/only-default.txt").0, 404);
    assert_eq!(
        host("b.example", "/only-default.txt"),
        (404, "b's own 404".into())
    );
}

// Sites are the daemon's: every listener but the servedir example.
on_listeners!(
    [plain: Plain, h2c: H2c, https_h2: HttpsH2, https_h1: HttpsH1]
    virtual_hosts_have_their_own_roots_and_rules,
);

#[test]
fn check_config_refuses_overlapping_and_nameless_sites() {
    let other = Tree::new();
    let (code, err) = check_config(&format!(
        "[[sites]]\nhosts = [\"a.example\"]\nroot = \"{0}\"\n\
         [[sites]]\nhosts = [\"A.example\", \"bad host\"]\nroot = \"{0}\"\n\
         [[sites]]\nroot = \"/no/such/dir\"\n",
        other.root.display()
    ));
    assert_eq!(code, Some(2), "{err}");
    for needle in [
        "`sites[2].hosts`: `A.example` is also a name of sites[1]",
        "`sites[2].hosts`: `bad host` is not a host name",
        "`sites[3].hosts`: names no host",
    ] {
        assert!(err.contains(needle), "missing {needle:?} in:\n{err}");
    }
    let (code, err) = check_config("[[sites]]\nhosts = [\"a.example\"]\nroot = \"/no/such/dir\"\n");
    assert_eq!(code, Some(2));
    assert!(
        err.contains("`sites[1].root`") && err.contains("/no/such/dir"),
        "{err}"
    );
}

/// A guard on one tree, and no rule anywhere else: a symlink elsewhere
/// into the tree is judged by where its file really is.
#[test]
fn a_symlink_into_a_guarded_tree_is_refused_where_no_rule_matches() {
    let tree = Tree::new();
    tree.write("private/secret.txt", b"the secret");
    tree.write("public/ok.txt", b"ok");
    std::os::unix::fs::symlink("../private/secret.txt", tree.root.join("public/link.txt")).unwrap();
    std::os::unix::fs::symlink("../private", tree.root.join("public/dirlink")).unwrap();
    let config = tempfile::tempdir().unwrap();
    let file = config.path().join("c.toml");
    let hash = bcrypt::hash(PASSWORD, 4).unwrap();
    std::fs::write(
        &file,
        format!(
            "[[rules]]\npath = \"/private/**\"\n\
             basic_auth = {{ realm = \"r\", users = {{ alice = \"{hash}\" }} }}\n"
        ),
    )
    .unwrap();
    let d = common::Daemon::start(&tree.root, &["--config", file.to_str().unwrap()]);
    assert_eq!(curl_plain(&d, "/public/ok.txt", &[]).text(), "ok");
    for path in ["/public/link.txt", "/public/dirlink/secret.txt"] {
        let r = curl_plain(&d, path, &[]);
        assert_eq!(r.status, 403, "{path}: {r:?}");
        assert!(!r.text().contains("the secret"), "{path}");
    }
}

/// The counters and the duration histogram are split by site, labelled
/// with the configured names (a Host no site names counts under
/// `default`, never under itself), over HTTP/1.1 and h2c; each site's
/// path cache has its own series.
#[test]
fn metrics_are_split_by_site() {
    let default = Tree::new();
    default.write("index.html", b"default");
    let a = Tree::new();
    a.write("index.html", b"a");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sites.toml");
    let text = format!(
        "[[sites]]\nhosts = [\"a.example\", \"*.a.example\"]\nroot = \"{}\"\n",
        a.root.display()
    );
    std::fs::write(&file, text).unwrap();
    let d = common::Daemon::start(&default.root, &["--config", file.to_str().unwrap()]);
    for (host, path, h2) in [
        ("a.example", "/", false),
        ("www.a.example", "/", true),
        ("a.example", "/missing", false),
        ("unknown.example", "/", false),
        ("unknown.example", "/", true),
    ] {
        let mut args = vec!["-H".to_string(), format!("Host: {host}")];
        if h2 {
            args.push("--http2-prior-knowledge".into());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        curl_plain(&d, path, &args);
    }
    let m = d.metrics();
    let count = |site: &str, code: &str| {
        common::metric_sum(
            &m,
            "fileserver_http_requests_total",
            &[("site", site), ("code", code)],
        )
    };
    assert_eq!(count("a.example", "200"), Some(2.0), "{m}");
    assert_eq!(count("a.example", "404"), Some(1.0), "{m}");
    assert_eq!(count("default", "200"), Some(2.0), "{m}");
    assert!(!m.contains("site=\"unknown.example\""), "{m}");
    assert!(!m.contains("site=\"www.a.example\""), "{m}");
    assert_eq!(
        common::metric_sum(
            &m,
            "fileserver_http_request_duration_seconds_count",
            &[("site", "a.example")]
        ),
        Some(3.0),
        "{m}"
    );
    let site_cache = ["hits", "misses", "negative_hits"]
        .iter()
        .filter_map(|n| {
            common::metric_sum(
                &m,
                &format!("fileserver_site_cache_{n}_total"),
                &[("site", "a.example")],
            )
        })
        .sum::<f64>();
    assert!(site_cache >= 3.0, "{m}");
}

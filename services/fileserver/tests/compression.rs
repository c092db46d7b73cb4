//! Compressed variants against the real daemon with real clients: curl
//! (`--compressed`, and one coding asked for by hand) and reqwest, each
//! body decoded and compared with the file; one compression for many
//! concurrent first requests; the variant budget never exceeded, also
//! after a SIGHUP lowers it; the counters on `/metrics`. (The semantics,
//! against the daemon and the embedded service alike, are in
//! `http_semantics.rs`.)

mod common;

use common::{client, decode, metric, script, Daemon, Tree};
use std::process::Command;
use std::time::Duration;

const ON: [&str; 2] = ["--set", "compression.enabled=true"];

fn metric_of(d: &Daemon, name: &str) -> f64 {
    metric(&d.metrics(), name).unwrap_or_else(|| panic!("no {name} on /metrics"))
}

/// `curl -sS args.. URL`: the headers and the body it wrote.
fn curl(url: &str, args: &[&str]) -> (String, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let (head, body) = (dir.path().join("head"), dir.path().join("body"));
    let status = Command::new("curl")
        .args(["-sS", "--noproxy", "*", "-D"])
        .arg(&head)
        .arg("-o")
        .arg(&body)
        .args(args)
        .arg(url)
        .status()
        .expect("curl runs");
    assert!(status.success(), "curl {args:?} {url}");
    (
        std::fs::read_to_string(head).unwrap().to_ascii_lowercase(),
        std::fs::read(body).unwrap(),
    )
}

#[test]
fn curl_and_reqwest_get_every_coding_decoded_to_the_file() {
    let tree = Tree::new();
    let body = script(200 * 1024, 11);
    tree.write("app.js", &body);
    tree.write("site.css", &script(30 * 1024, 12));
    let d = Daemon::start(&tree.root, &ON);
    // curl --compressed asks for every coding it can decode and decodes.
    let (head, got) = curl(&d.url("/app.js"), &["--compressed"]);
    assert!(head.contains("content-encoding: br\r\n"), "{head}");
    assert!(head.contains("vary: accept-encoding\r\n"), "{head}");
    assert_eq!(got, body);
    // One coding by hand: the raw bytes, decoded here.
    for coding in ["br", "zstd", "gzip"] {
        let (head, raw) = curl(
            &d.url("/app.js"),
            &["-H", &format!("Accept-Encoding: {coding}")],
        );
        assert!(
            head.contains(&format!("content-encoding: {coding}\r\n")),
            "{head}"
        );
        assert!(raw.len() < body.len() / 3, "{coding}: {} bytes", raw.len());
        assert_eq!(decode(coding, &raw), body, "{coding}");
    }
    // reqwest, with the header a browser sends.
    let r = client()
        .get(d.url("/site.css"))
        .header("Accept-Encoding", "gzip, deflate, br, zstd")
        .send()
        .unwrap();
    assert_eq!(r.headers()["content-encoding"], "br");
    assert_eq!(
        decode("br", &r.bytes().unwrap()),
        std::fs::read(tree.root.join("site.css")).unwrap()
    );
    let text = d.metrics();
    let described = text
        .lines()
        .filter(|l| l.starts_with("# HELP fileserver_variant_"))
        .count();
    assert_eq!(described, 6, "every variant metric has a HELP text\n{text}");
    // Compressions: app.js in br (curl --compressed), zstd and gzip, and
    // site.css in br; app.js in br by hand was the one hit.
    assert_eq!(
        metric(&text, "fileserver_variant_compressions_total"),
        Some(4.0)
    );
    assert_eq!(metric(&text, "fileserver_variant_hits_total"), Some(1.0));
    assert!(metric(&text, "fileserver_variant_bytes_saved_total").unwrap() > 4.0 * 150_000.0);
}

#[test]
fn concurrent_first_requests_share_one_compression() {
    let tree = Tree::new();
    let body = script(600 * 1024, 13);
    tree.write("huge.js", &body);
    let d = Daemon::start(&tree.root, &ON);
    let url = d.url("/huge.js");
    let results: Vec<Vec<u8>> = std::thread::scope(|s| {
        let tasks: Vec<_> = (0..12)
            .map(|_| {
                s.spawn(|| {
                    let r = client()
                        .get(&url)
                        .header("Accept-Encoding", "br")
                        .send()
                        .unwrap();
                    assert_eq!(r.headers()["content-encoding"], "br");
                    r.bytes().unwrap().to_vec()
                })
            })
            .collect();
        tasks.into_iter().map(|t| t.join().unwrap()).collect()
    });
    for got in &results {
        assert_eq!(decode("br", got), body);
    }
    assert_eq!(metric_of(&d, "fileserver_variant_compressions_total"), 1.0);
    assert_eq!(metric_of(&d, "fileserver_variant_hits_total"), 11.0);
}

#[test]
fn the_budget_bounds_kept_variants_and_a_reload_lowers_it() {
    let tree = Tree::new();
    let cfg = tree.dir.path().join("fileserver.toml");
    std::fs::write(&cfg, "[compression]\nenabled = true\nbudget = 40000\n").unwrap();
    let cfg_arg = cfg.display().to_string();
    let d = Daemon::start(&tree.root, &["--config", &cfg_arg]);
    assert_eq!(metric_of(&d, "fileserver_variant_budget_bytes"), 40000.0);
    let mut bodies = Vec::new();
    for i in 0..40 {
        let body = script(40 * 1024, 100 + i);
        tree.write(&format!("m{i}.js"), &body);
        bodies.push(body);
    }
    for round in 0..2 {
        for (i, body) in bodies.iter().enumerate() {
            let r = client()
                .get(d.url(&format!("/m{i}.js")))
                .header("Accept-Encoding", "gzip")
                .send()
                .unwrap();
            assert_eq!(r.headers()["content-encoding"], "gzip");
            assert_eq!(&decode("gzip", &r.bytes().unwrap()), body, "round {round}");
            let used = metric_of(&d, "fileserver_variant_bytes");
            assert!(used <= 40000.0, "variant bytes {used} over the budget");
        }
    }
    // 40 variants of several KiB each do not fit in 40000 bytes: some were
    // dropped, and made again in the second round.
    assert!(metric_of(&d, "fileserver_variant_evictions_total") > 0.0);
    assert!(metric_of(&d, "fileserver_variant_compressions_total") > 40.0);
    assert!(metric_of(&d, "fileserver_variant_bytes") > 0.0);
    std::fs::write(&cfg, "[compression]\nenabled = true\nbudget = 5000\n").unwrap();
    d.signal(libc::SIGHUP);
    assert!(
        d.wait_stderr("configuration reloaded", Duration::from_secs(5)),
        "{}",
        d.stderr_text()
    );
    assert_eq!(metric_of(&d, "fileserver_variant_budget_bytes"), 5000.0);
    assert!(metric_of(&d, "fileserver_variant_bytes") <= 5000.0);
    // Compression turned off by reload: identity again, the budget 0.
    std::fs::write(&cfg, "[compression]\nenabled = false\n").unwrap();
    d.signal(libc::SIGHUP);
    let reloaded = || d.stderr_text().matches("configuration reloaded").count() >= 2;
    for _ in 0..250 {
        if reloaded() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(reloaded(), "{}", d.stderr_text());
    let r = client()
        .get(d.url("/m0.js"))
        .header("Accept-Encoding", "gzip")
        .send()
        .unwrap();
    assert!(r.headers().get("content-encoding").is_none());
    assert_eq!(metric_of(&d, "fileserver_variant_bytes"), 0.0);
}

#[test]
fn a_revalidation_needs_no_compression_even_when_nothing_is_kept() {
    let tree = Tree::new();
    let body = script(100 * 1024, 14);
    tree.write("app.js", &body);
    // A budget of 0 keeps no variant: every 200 compresses again.
    let d = Daemon::start(
        &tree.root,
        &[
            "--set",
            "compression.enabled=true",
            "--set",
            "compression.budget=0",
        ],
    );
    let get = |inm: Option<&str>| {
        let mut rb = client()
            .get(d.url("/app.js"))
            .header("Accept-Encoding", "zstd");
        if let Some(tag) = inm {
            rb = rb.header("If-None-Match", tag);
        }
        rb.send().unwrap()
    };
    let r = get(None);
    let tag = r.headers()["etag"].to_str().unwrap().to_string();
    assert!(tag.ends_with("-zstd\""), "{tag}");
    assert_eq!(decode("zstd", &r.bytes().unwrap()), body);
    assert_eq!(metric_of(&d, "fileserver_variant_compressions_total"), 1.0);
    for _ in 0..3 {
        let r = get(Some(&tag));
        assert_eq!(r.status(), 304);
        assert_eq!(r.headers()["etag"], tag.as_str());
        assert_eq!(r.headers()["content-encoding"], "zstd");
    }
    assert_eq!(metric_of(&d, "fileserver_variant_compressions_total"), 1.0);
    assert_eq!(metric_of(&d, "fileserver_variant_bytes"), 0.0);
    // A stale tag is no revalidation: the variant is made again and sent.
    let r = get(Some("\"0000000000000000-zstd\""));
    assert_eq!(r.status(), 200);
    assert_eq!(decode("zstd", &r.bytes().unwrap()), body);
    assert_eq!(metric_of(&d, "fileserver_variant_compressions_total"), 2.0);
}

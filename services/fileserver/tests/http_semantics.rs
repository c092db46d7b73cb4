//! RFC 9110 semantics against the real daemon: GET/HEAD, methods, redirects,
//! index, dotfiles, content types, every conditional and range rule,
//! precompressed siblings, compressed variants, pipelining and keep-alive.
//!
//! Every test runs five times: against the daemon (`daemon`), against the
//! `servedir` crate's axum example (`axum`), the same app its README starts,
//! built from the same settings (embedders get the daemon's answers),
//! against the daemon's HTTPS listener with an HTTP/2 client (`https_h2`)
//! and an HTTP/1.1 one (`https_h1`), and over HTTP/3 (`http3`). What a
//! test sends as raw HTTP/1.1 bytes goes to the plaintext listener, or over
//! TLS with ALPN `http/1.1` for the three TLS kinds.

mod common;
mod embedded;

use common::{decode, script, status_of, Tree};
use embedded::{Response, Server, ServerKind};
use reqwest::header::HeaderMap;
use std::time::{Duration, SystemTime};

fn hdr<'a>(h: &'a HeaderMap, name: &str) -> &'a str {
    h.get(name).map(|v| v.to_str().unwrap()).unwrap_or("")
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 % 251) as u8).collect()
}

struct Fixture {
    tree: Tree,
    d: Server,
    small: Vec<u8>,
    large: Vec<u8>,
}

fn fixture(kind: ServerKind, extra: &[&str]) -> Fixture {
    let tree = Tree::new();
    let small = pattern(1000);
    let large = pattern(300_000); // above cache.small_file_max: sendfile path
    tree.write("small.bin", &small);
    tree.write("large.bin", &large);
    tree.write("index.html", b"<h1>root index</h1>");
    tree.write("dir/index.html", b"<h1>dir index</h1>");
    tree.write("dir/page.html", b"<p>page</p>");
    tree.write("empty/readme.txt", b"no index here");
    tree.write(".hidden", b"dot");
    tree.write("sub/.git/config", b"secret config");
    tree.write(".well-known/security.txt", b"Contact: me");
    tree.write("app.js", b"console.log('plain');");
    tree.write("app.js.gz", b"GZ-BYTES");
    tree.write("app.js.br", b"BR-BYTES");
    tree.write("style.css", b"body{}");
    tree.write("style.css.zst", b"ZSTD-BYTES");
    tree.write("img.png", b"\x89PNG....");
    tree.write("noext", b"???");
    tree.write("a b.txt", b"space");
    // mtime well in the past so date comparisons are unambiguous.
    for f in ["small.bin", "large.bin"] {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_600_000_000);
        std::fs::File::options()
            .write(true)
            .open(tree.root.join(f))
            .unwrap()
            .set_modified(t)
            .unwrap();
    }
    let d = Server::start(kind, &tree.root, extra);
    Fixture {
        tree,
        d,
        small,
        large,
    }
}

fn get(f: &Fixture, path: &str, headers: &[(&str, &str)]) -> Response {
    let mut rb = f.d.client().get(f.d.url(path));
    for (k, v) in headers {
        rb = rb.header(*k, *v);
    }
    let r = rb.send().unwrap();
    assert_eq!(r.version(), f.d.version(), "the protocol the test runs on");
    r
}

const LM: &str = "Sun, 13 Sep 2020 12:26:40 GMT"; // 1_600_000_000

fn get_small_and_large_with_representation_headers(kind: ServerKind) {
    let f = fixture(kind, &[]);
    for (path, body) in [("/small.bin", &f.small), ("/large.bin", &f.large)] {
        let r = get(&f, path, &[]);
        assert_eq!(r.status(), 200);
        let h = r.headers().clone();
        assert_eq!(hdr(&h, "content-length"), body.len().to_string());
        assert_eq!(hdr(&h, "accept-ranges"), "bytes");
        assert_eq!(hdr(&h, "content-type"), "application/octet-stream");
        assert_eq!(hdr(&h, "cache-control"), "no-cache");
        assert_eq!(hdr(&h, "last-modified"), LM);
        let etag = hdr(&h, "etag");
        assert!(
            etag.starts_with('"') && etag.ends_with('"') && etag.len() > 2,
            "strong etag: {etag}"
        );
        let date = httpdate::parse_http_date(hdr(&h, "date")).unwrap();
        assert!(httpdate::parse_http_date(hdr(&h, "last-modified")).unwrap() <= date);
        assert_eq!(&r.bytes().unwrap()[..], &body[..]);
    }
}

fn last_modified_never_later_than_date(kind: ServerKind) {
    let f = fixture(kind, &[]);
    let p = f.tree.write("future.txt", b"from the future");
    let t = SystemTime::now() + Duration::from_secs(86_400 * 365);
    std::fs::File::options()
        .write(true)
        .open(&p)
        .unwrap()
        .set_modified(t)
        .unwrap();
    let r = get(&f, "/future.txt", &[]);
    let date = httpdate::parse_http_date(hdr(r.headers(), "date")).unwrap();
    let lm = httpdate::parse_http_date(hdr(r.headers(), "last-modified")).unwrap();
    assert!(lm <= date, "Last-Modified {lm:?} after Date {date:?}");
}

fn head_has_get_headers_and_no_body(kind: ServerKind) {
    let f = fixture(kind, &[]);
    for path in ["/small.bin", "/large.bin", "/nope", "/dir"] {
        let g = get(&f, path, &[]);
        let h = f.d.client().head(f.d.url(path)).send().unwrap();
        assert_eq!(g.status(), h.status(), "{path}");
        for name in [
            "content-length",
            "content-type",
            "etag",
            "last-modified",
            "accept-ranges",
            "location",
        ] {
            assert_eq!(
                hdr(g.headers(), name),
                hdr(h.headers(), name),
                "{path} {name}"
            );
        }
    }
    // On the wire: HEAD then GET pipelined; the HEAD must carry no body bytes.
    let req = b"HEAD /small.bin HTTP/1.1\r\nHost: x\r\n\r\nGET /noext HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let resp = f.d.raw(req, Duration::from_secs(5));
    let text = String::from_utf8_lossy(&resp);
    let second = text
        .find("HTTP/1.1 200 OK")
        .and_then(|i| text[i + 1..].find("HTTP/1.1 200 OK").map(|j| i + 1 + j));
    let second = second.expect("two responses");
    assert!(
        text[..second].ends_with("\r\n\r\n"),
        "HEAD response carried a body: {text}"
    );
    assert!(text.ends_with("???"));
}

fn other_methods_405_and_options(kind: ServerKind) {
    let f = fixture(kind, &[]);
    for m in ["POST", "PUT", "DELETE", "PATCH", "BREW"] {
        let r =
            f.d.client()
                .request(
                    reqwest::Method::from_bytes(m.as_bytes()).unwrap(),
                    f.d.url("/small.bin"),
                )
                .send()
                .unwrap();
        assert_eq!(r.status(), 405, "{m}");
        assert_eq!(hdr(r.headers(), "allow"), "GET, HEAD, OPTIONS");
    }
    let r =
        f.d.client()
            .request(reqwest::Method::OPTIONS, f.d.url("/small.bin"))
            .send()
            .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(hdr(r.headers(), "allow"), "GET, HEAD, OPTIONS");
    let resp = f.d.raw(
        b"OPTIONS * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        Duration::from_secs(5),
    );
    assert_eq!(status_of(&resp), 204);
    // Field names are case-insensitive (RFC 9110 5.1): hyper sends `allow`.
    let resp = String::from_utf8_lossy(&resp).to_ascii_lowercase();
    assert!(resp.contains("allow: get, head, options"), "{resp}");
}

fn directory_redirect_index_and_404(kind: ServerKind) {
    let f = fixture(kind, &[]);
    let r = get(&f, "/dir", &[]);
    assert_eq!(r.status(), 301);
    assert_eq!(hdr(r.headers(), "location"), "/dir/");
    let r = get(&f, "/dir?x=1", &[]);
    assert_eq!(hdr(r.headers(), "location"), "/dir/?x=1");
    let r = get(&f, "/dir/", &[]);
    assert_eq!(r.status(), 200);
    assert_eq!(hdr(r.headers(), "content-type"), "text/html; charset=utf-8");
    assert_eq!(r.text().unwrap(), "<h1>dir index</h1>");
    assert_eq!(get(&f, "/", &[]).text().unwrap(), "<h1>root index</h1>");
    assert_eq!(
        get(&f, "/empty/", &[]).status(),
        404,
        "no index, listing off"
    );
    assert_eq!(
        get(&f, "/small.bin/", &[]).status(),
        404,
        "a file is not a directory"
    );
    assert_eq!(get(&f, "/missing.txt", &[]).status(), 404);
    assert_eq!(get(&f, "/a%20b.txt", &[]).text().unwrap(), "space");
}

fn configurable_index_and_listing(kind: ServerKind) {
    let f = fixture(
        kind,
        &[
            "--set",
            "index=page.html,index.html",
            "--set",
            "directory_listing=true",
        ],
    );
    assert_eq!(get(&f, "/dir/", &[]).text().unwrap(), "<p>page</p>");
    let r = get(&f, "/empty/", &[]);
    assert_eq!(r.status(), 200);
    assert_eq!(hdr(r.headers(), "content-type"), "text/html; charset=utf-8");
    let html = r.text().unwrap();
    assert!(html.contains("readme.txt"), "{html}");
    let r = get(&f, "/sub/", &[("Accept", "application/json")]);
    assert_eq!(hdr(r.headers(), "content-type"), "application/json");
    let v: serde_json::Value = r.json().unwrap();
    assert_eq!(v.as_array().unwrap().len(), 0, ".git is hidden: {v}");
    let r = get(&f, "/empty/", &[("Accept", "application/json")]);
    let v: serde_json::Value = r.json().unwrap();
    assert_eq!(v[0]["name"], "readme.txt");
    assert_eq!(v[0]["size"], 13);
}

fn dotfiles_hidden_except_well_known(kind: ServerKind) {
    let f = fixture(kind, &[]);
    assert_eq!(get(&f, "/.hidden", &[]).status(), 404);
    assert_eq!(get(&f, "/%2ehidden", &[]).status(), 404);
    assert_eq!(get(&f, "/sub/.git/config", &[]).status(), 404);
    assert_eq!(
        get(&f, "/.well-known/security.txt", &[]).text().unwrap(),
        "Contact: me"
    );
    let f = fixture(kind, &["--set", "serve_dotfiles=true"]);
    assert_eq!(get(&f, "/.hidden", &[]).text().unwrap(), "dot");
}

fn content_types(kind: ServerKind) {
    let f = fixture(kind, &[]);
    assert_eq!(
        hdr(get(&f, "/index.html", &[]).headers(), "content-type"),
        "text/html; charset=utf-8"
    );
    assert_eq!(
        hdr(get(&f, "/img.png", &[]).headers(), "content-type"),
        "image/png"
    );
    assert_eq!(
        hdr(get(&f, "/style.css", &[]).headers(), "content-type"),
        "text/css; charset=utf-8"
    );
    assert_eq!(
        hdr(get(&f, "/noext", &[]).headers(), "content-type"),
        "application/octet-stream"
    );
}

fn cache_control_is_configurable(kind: ServerKind) {
    let f = fixture(kind, &["--set", "cache_control=public, max-age=60"]);
    assert_eq!(
        hdr(get(&f, "/small.bin", &[]).headers(), "cache-control"),
        "public, max-age=60"
    );
    let f = fixture(kind, &["--set", "cache_control="]);
    assert!(get(&f, "/small.bin", &[])
        .headers()
        .get("cache-control")
        .is_none());
}

fn etag_of(f: &Fixture, path: &str) -> String {
    hdr(get(f, path, &[]).headers(), "etag").to_string()
}

fn etag_of_with(f: &Fixture, path: &str, accept_encoding: &str) -> String {
    let r = get(f, path, &[("Accept-Encoding", accept_encoding)]);
    hdr(r.headers(), "etag").to_string()
}

fn if_match_strong_and_412(kind: ServerKind) {
    let f = fixture(kind, &[]);
    let etag = etag_of(&f, "/small.bin");
    let weak = format!("W/{etag}");
    assert_eq!(get(&f, "/small.bin", &[("If-Match", &etag)]).status(), 200);
    assert_eq!(get(&f, "/small.bin", &[("If-Match", "*")]).status(), 200);
    assert_eq!(
        get(&f, "/small.bin", &[("If-Match", &format!("\"x\", {etag}"))]).status(),
        200
    );
    assert_eq!(
        get(&f, "/small.bin", &[("If-Match", "\"other\"")]).status(),
        412
    );
    assert_eq!(
        get(&f, "/small.bin", &[("If-Match", &weak)]).status(),
        412,
        "weak never matches strongly"
    );
    // If-Match is evaluated before If-None-Match.
    assert_eq!(
        get(
            &f,
            "/small.bin",
            &[("If-Match", "\"other\""), ("If-None-Match", &etag)]
        )
        .status(),
        412
    );
}

fn if_unmodified_since(kind: ServerKind) {
    let f = fixture(kind, &[]);
    assert_eq!(
        get(
            &f,
            "/small.bin",
            &[("If-Unmodified-Since", "Sat, 12 Sep 2020 00:00:00 GMT")]
        )
        .status(),
        412
    );
    assert_eq!(
        get(&f, "/small.bin", &[("If-Unmodified-Since", LM)]).status(),
        200
    );
    assert_eq!(
        get(
            &f,
            "/small.bin",
            &[("If-Unmodified-Since", "Mon, 14 Sep 2020 00:00:00 GMT")]
        )
        .status(),
        200
    );
    assert_eq!(
        get(&f, "/small.bin", &[("If-Unmodified-Since", "not a date")]).status(),
        200,
        "invalid date ignored"
    );
    // Ignored when If-Match is present (and matches).
    let etag = etag_of(&f, "/small.bin");
    let r = get(
        &f,
        "/small.bin",
        &[
            ("If-Match", &etag),
            ("If-Unmodified-Since", "Sat, 12 Sep 2020 00:00:00 GMT"),
        ],
    );
    assert_eq!(r.status(), 200);
}

fn if_none_match_weak_comparison_and_304_headers(kind: ServerKind) {
    let f = fixture(kind, &["--set", "cache_control=max-age=5"]);
    let etag = etag_of(&f, "/small.bin");
    for v in [
        etag.clone(),
        format!("W/{etag}"),
        format!("\"a\", {etag}"),
        "*".to_string(),
    ] {
        let r = get(&f, "/small.bin", &[("If-None-Match", &v)]);
        assert_eq!(r.status(), 304, "{v}");
        let h = r.headers().clone();
        assert_eq!(hdr(&h, "etag"), etag);
        assert_eq!(hdr(&h, "last-modified"), LM);
        assert_eq!(hdr(&h, "cache-control"), "max-age=5");
        assert!(h.get("date").is_some());
        assert!(r.bytes().unwrap().is_empty());
    }
    let r =
        f.d.client()
            .head(f.d.url("/small.bin"))
            .header("If-None-Match", &etag)
            .send()
            .unwrap();
    assert_eq!(r.status(), 304);
    assert_eq!(
        get(&f, "/small.bin", &[("If-None-Match", "\"other\"")]).status(),
        200
    );
    // 304 on the wire has no body: a pipelined request right after it parses.
    let req = format!(
        "GET /small.bin HTTP/1.1\r\nHost: x\r\nIf-None-Match: {etag}\r\n\r\nGET /noext HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    );
    let resp =
        String::from_utf8_lossy(&f.d.raw(req.as_bytes(), Duration::from_secs(5))).to_string();
    assert!(resp.starts_with("HTTP/1.1 304"), "{resp}");
    assert!(resp.contains("\r\n\r\nHTTP/1.1 200 OK"), "{resp}");
    assert!(
        !resp[..resp.find("\r\n\r\n").unwrap()].contains("Content-Length"),
        "{resp}"
    );
}

fn if_modified_since_only_without_if_none_match(kind: ServerKind) {
    let f = fixture(kind, &[]);
    assert_eq!(
        get(&f, "/small.bin", &[("If-Modified-Since", LM)]).status(),
        304
    );
    assert_eq!(
        get(
            &f,
            "/small.bin",
            &[("If-Modified-Since", "Tue, 01 Jan 2030 00:00:00 GMT")]
        )
        .status(),
        304,
        "date later than mtime"
    );
    assert_eq!(
        get(
            &f,
            "/small.bin",
            &[("If-Modified-Since", "Sat, 12 Sep 2020 00:00:00 GMT")]
        )
        .status(),
        200
    );
    assert_eq!(
        get(&f, "/small.bin", &[("If-Modified-Since", "garbage")]).status(),
        200
    );
    // Ignored when If-None-Match is present.
    assert_eq!(
        get(
            &f,
            "/small.bin",
            &[("If-None-Match", "\"other\""), ("If-Modified-Since", LM)]
        )
        .status(),
        200
    );
}

fn if_range_strong_etag_or_exact_date(kind: ServerKind) {
    let f = fixture(kind, &[]);
    let etag = etag_of(&f, "/small.bin");
    let r = get(
        &f,
        "/small.bin",
        &[("Range", "bytes=0-9"), ("If-Range", &etag)],
    );
    assert_eq!(r.status(), 206);
    assert_eq!(&r.bytes().unwrap()[..], &f.small[0..10]);
    let r = get(
        &f,
        "/small.bin",
        &[("Range", "bytes=0-9"), ("If-Range", "\"stale\"")],
    );
    assert_eq!(r.status(), 200);
    assert_eq!(r.bytes().unwrap().len(), 1000);
    assert_eq!(
        get(
            &f,
            "/small.bin",
            &[("Range", "bytes=0-9"), ("If-Range", &format!("W/{etag}"))]
        )
        .status(),
        200
    );
    assert_eq!(
        get(
            &f,
            "/small.bin",
            &[("Range", "bytes=0-9"), ("If-Range", LM)]
        )
        .status(),
        206
    );
    assert_eq!(
        get(
            &f,
            "/small.bin",
            &[
                ("Range", "bytes=0-9"),
                ("If-Range", "Mon, 14 Sep 2020 00:00:00 GMT")
            ]
        )
        .status(),
        200
    );
}

fn single_ranges_small_and_large(kind: ServerKind) {
    let f = fixture(kind, &[]);
    for (path, body) in [("/small.bin", &f.small), ("/large.bin", &f.large)] {
        let len = body.len();
        for (spec, s, e) in [
            ("bytes=0-0", 0, 0),
            ("bytes=10-19", 10, 19),
            ("bytes=100-", 100, len - 1),
            ("bytes=-10", len - 10, len - 1),
            ("bytes=-999999999", 0, len - 1),
            ("bytes=5-999999999", 5, len - 1),
        ] {
            let r = get(&f, path, &[("Range", spec)]);
            assert_eq!(r.status(), 206, "{path} {spec}");
            assert_eq!(
                hdr(r.headers(), "content-range"),
                format!("bytes {s}-{e}/{len}"),
                "{path} {spec}"
            );
            assert_eq!(hdr(r.headers(), "content-length"), (e - s + 1).to_string());
            assert_eq!(&r.bytes().unwrap()[..], &body[s..=e], "{path} {spec}");
        }
        for spec in [
            format!("bytes={len}-"),
            "bytes=-0".to_string(),
            format!("bytes={}-{}", len + 5, len + 10),
        ] {
            let r = get(&f, path, &[("Range", &spec)]);
            assert_eq!(r.status(), 416, "{spec}");
            assert_eq!(hdr(r.headers(), "content-range"), format!("bytes */{len}"));
        }
        for spec in [
            "bytes=9-5",
            "bytes=abc",
            "pages=1-2",
            "bytes=",
            "bytes=1-2-3",
            "bytes 0-5",
        ] {
            let r = get(&f, path, &[("Range", spec)]);
            assert_eq!(r.status(), 200, "invalid {spec} is ignored");
            assert_eq!(r.bytes().unwrap().len(), len);
        }
        // HEAD ignores Range.
        let r =
            f.d.client()
                .head(f.d.url(path))
                .header("Range", "bytes=0-9")
                .send()
                .unwrap();
        assert_eq!(r.status(), 200);
    }
}

fn parse_multipart(ct: &str, body: &[u8]) -> Vec<(String, Vec<u8>)> {
    let boundary = ct.split("boundary=").nth(1).unwrap();
    let delim = format!("\r\n--{boundary}");
    let text = body;
    let mut parts = Vec::new();
    let mut pos = 0;
    let find = |hay: &[u8], needle: &[u8], from: usize| -> Option<usize> {
        hay[from..]
            .windows(needle.len())
            .position(|w| w == needle)
            .map(|p| p + from)
    };
    loop {
        let start = find(text, delim.as_bytes(), pos).expect("delimiter");
        let after = start + delim.len();
        if text[after..].starts_with(b"--") {
            assert_eq!(&text[after..], b"--\r\n", "closing delimiter ends the body");
            break;
        }
        let head_end = find(text, b"\r\n\r\n", after).unwrap();
        let head = String::from_utf8_lossy(&text[after + 2..head_end]).to_string();
        let cr = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Range: "))
            .unwrap()
            .to_string();
        let data_start = head_end + 4;
        let next = find(text, delim.as_bytes(), data_start).unwrap();
        parts.push((cr, text[data_start..next].to_vec()));
        pos = next;
    }
    parts
}

fn multipart_ranges_and_limits(kind: ServerKind) {
    let f = fixture(kind, &[]);
    for (path, body) in [("/small.bin", &f.small), ("/large.bin", &f.large)] {
        let len = body.len();
        let r = get(&f, path, &[("Range", "bytes=0-4, 10-14, -3")]);
        assert_eq!(r.status(), 206);
        let ct = hdr(r.headers(), "content-type").to_string();
        assert!(ct.starts_with("multipart/byteranges; boundary="), "{ct}");
        let cl: usize = hdr(r.headers(), "content-length").parse().unwrap();
        let b = r.bytes().unwrap();
        assert_eq!(b.len(), cl);
        let parts = parse_multipart(&ct, &b);
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[0], (format!("bytes 0-4/{len}"), body[0..5].to_vec()));
        assert_eq!(
            parts[1],
            (format!("bytes 10-14/{len}"), body[10..15].to_vec())
        );
        assert_eq!(
            parts[2],
            (
                format!("bytes {}-{}/{len}", len - 3, len - 1),
                body[len - 3..].to_vec()
            )
        );
        // Unsatisfiable members are dropped; one left -> single part.
        let r = get(&f, path, &[("Range", &format!("bytes={}-, 1-2", len + 1))]);
        assert_eq!(r.status(), 206);
        assert_eq!(
            hdr(r.headers(), "content-range"),
            format!("bytes 1-2/{len}")
        );
        // More than max_ranges (16): full body.
        let many: Vec<String> = (0..17).map(|i| format!("{}-{}", i * 2, i * 2)).collect();
        let r = get(&f, path, &[("Range", &format!("bytes={}", many.join(",")))]);
        assert_eq!(r.status(), 200);
        assert_eq!(r.bytes().unwrap().len(), len);
        // Exactly 16 is fine.
        let r = get(
            &f,
            path,
            &[("Range", &format!("bytes={}", many[..16].join(",")))],
        );
        assert_eq!(r.status(), 206);
        // Overlapping ranges adding up past the size: full body.
        let r = get(
            &f,
            path,
            &[("Range", &format!("bytes=0-{}, 1-{}", len - 1, len - 1))],
        );
        assert_eq!(r.status(), 200);
        assert_eq!(&r.bytes().unwrap()[..], &body[..]);
    }
    let f = fixture(kind, &["--set", "max_ranges=2"]);
    assert_eq!(
        get(&f, "/small.bin", &[("Range", "bytes=0-1,3-4,6-7")]).status(),
        200
    );
    assert_eq!(
        get(&f, "/small.bin", &[("Range", "bytes=0-1,3-4")]).status(),
        206
    );
}

fn precompressed_siblings_by_accept_encoding(kind: ServerKind) {
    let f = fixture(kind, &[]);
    let r = get(&f, "/app.js", &[("Accept-Encoding", "gzip")]);
    assert_eq!(hdr(r.headers(), "content-encoding"), "gzip");
    assert_eq!(hdr(r.headers(), "vary"), "Accept-Encoding");
    assert_eq!(
        hdr(r.headers(), "content-type"),
        "text/javascript; charset=utf-8"
    );
    assert_eq!(r.text().unwrap(), "GZ-BYTES");
    let r = get(&f, "/app.js", &[("Accept-Encoding", "gzip, br")]);
    assert_eq!(hdr(r.headers(), "content-encoding"), "br");
    assert_eq!(r.text().unwrap(), "BR-BYTES");
    let r = get(&f, "/app.js", &[("Accept-Encoding", "br;q=0, gzip")]);
    assert_eq!(r.text().unwrap(), "GZ-BYTES");
    let r = get(&f, "/style.css", &[("Accept-Encoding", "zstd, gzip")]);
    assert_eq!(hdr(r.headers(), "content-encoding"), "zstd");
    assert_eq!(r.text().unwrap(), "ZSTD-BYTES");
    let r = get(&f, "/app.js", &[("Accept-Encoding", "identity")]);
    assert!(r.headers().get("content-encoding").is_none());
    assert_eq!(hdr(r.headers(), "vary"), "Accept-Encoding");
    assert_eq!(r.text().unwrap(), "console.log('plain');");
    let r = get(&f, "/app.js", &[]);
    assert!(r.headers().get("content-encoding").is_none());
    assert_eq!(r.text().unwrap(), "console.log('plain');");
    // The sibling has its own validator.
    let plain = etag_of(&f, "/app.js");
    let gz = get(&f, "/app.js", &[("Accept-Encoding", "gzip")]);
    assert_ne!(hdr(gz.headers(), "etag"), plain);
    let f = fixture(kind, &["--set", "precompressed=false"]);
    let r = get(&f, "/app.js", &[("Accept-Encoding", "gzip, br")]);
    assert!(r.headers().get("content-encoding").is_none());
    assert_eq!(r.text().unwrap(), "console.log('plain');");
}

const COMPRESS: [&str; 2] = ["--set", "compression.enabled=true"];

fn content_length(r: &Response) -> usize {
    hdr(r.headers(), "content-length").parse().unwrap()
}

fn compressed_variants_follow_accept_encoding_weights(kind: ServerKind) {
    let f = fixture(kind, &COMPRESS);
    let body = script(200 * 1024, 1);
    f.tree.write("bundle.js", &body);
    let cases = [
        ("gzip", "gzip"),
        ("br", "br"),
        ("zstd", "zstd"),
        // Equal weights: the server's order (br, zstd, gzip).
        ("gzip, deflate, br, zstd", "br"),
        ("gzip, zstd", "zstd"),
        ("gzip;q=1, br;q=0.5", "gzip"),
        ("br;q=0, gzip", "gzip"),
        ("*", "br"),
        ("*;q=0.1, gzip;q=0.2", "gzip"),
        ("identity", ""),
        ("identity;q=1, gzip;q=0.5", ""),
        ("gzip;q=0", ""),
        ("deflate", ""),
        // Nothing acceptable, identity excluded too: identity anyway, no 406.
        ("*;q=0", ""),
        ("identity;q=0, *;q=0", ""),
    ];
    for (accept, want) in cases {
        let r = get(&f, "/bundle.js", &[("Accept-Encoding", accept)]);
        assert_eq!(r.status(), 200, "{accept}");
        assert_eq!(hdr(r.headers(), "content-encoding"), want, "{accept}");
        assert_eq!(hdr(r.headers(), "vary"), "Accept-Encoding", "{accept}");
        assert_eq!(
            hdr(r.headers(), "content-type"),
            "text/javascript; charset=utf-8"
        );
        let len = content_length(&r);
        let got = r.bytes().unwrap();
        assert_eq!(len, got.len(), "{accept}");
        if !want.is_empty() {
            assert!(got.len() < body.len() / 3, "{accept}: {} bytes", got.len());
        }
        assert_eq!(decode(want, &got), body, "{accept}");
    }
    let r = get(&f, "/bundle.js", &[]);
    assert!(r.headers().get("content-encoding").is_none());
    assert_eq!(hdr(r.headers(), "vary"), "Accept-Encoding");
    assert_eq!(&r.bytes().unwrap()[..], &body[..]);
}

fn variant_validators_ranges_and_head(kind: ServerKind) {
    let f = fixture(kind, &COMPRESS);
    let body = script(50 * 1024, 2);
    f.tree.write("lib.js", &body);
    let gz = get(&f, "/lib.js", &[("Accept-Encoding", "gzip")]);
    let gz_tag = hdr(gz.headers(), "etag").to_string();
    let gz_bytes = gz.bytes().unwrap();
    let br_tag = etag_of_with(&f, "/lib.js", "br");
    let id_tag = etag_of(&f, "/lib.js");
    assert!(gz_tag.ends_with("-gzip\""), "{gz_tag}");
    assert!(br_tag.ends_with("-br\""), "{br_tag}");
    assert_eq!(
        &gz_tag[..17],
        &id_tag[..17],
        "the coding is a suffix of the file's tag"
    );
    assert_ne!(gz_tag, id_tag);
    assert_ne!(gz_tag, br_tag);
    // If-None-Match with the variant's tag: 304 for that coding only.
    let r = get(
        &f,
        "/lib.js",
        &[("Accept-Encoding", "gzip"), ("If-None-Match", &gz_tag)],
    );
    assert_eq!(r.status(), 304);
    assert_eq!(hdr(r.headers(), "etag"), gz_tag);
    assert_eq!(hdr(r.headers(), "vary"), "Accept-Encoding");
    let r = get(&f, "/lib.js", &[("If-None-Match", &gz_tag)]);
    assert_eq!(
        r.status(),
        200,
        "a variant's tag never matches identity bytes"
    );
    assert_eq!(&r.bytes().unwrap()[..], &body[..]);
    let r = get(
        &f,
        "/lib.js",
        &[("Accept-Encoding", "br"), ("If-None-Match", &gz_tag)],
    );
    assert_eq!(r.status(), 200);
    assert_eq!(hdr(r.headers(), "content-encoding"), "br");
    let r = get(
        &f,
        "/lib.js",
        &[("Accept-Encoding", "gzip"), ("If-None-Match", &id_tag)],
    );
    assert_eq!(r.status(), 200);
    // HEAD: the variant's length, no body.
    let r =
        f.d.client()
            .head(f.d.url("/lib.js"))
            .header("Accept-Encoding", "gzip")
            .send()
            .unwrap();
    assert_eq!(content_length(&r), gz_bytes.len());
    assert_eq!(hdr(r.headers(), "content-encoding"), "gzip");
    assert!(r.bytes().unwrap().is_empty());
    // Ranges are ranges of the variant's bytes.
    let n = gz_bytes.len();
    let r = get(
        &f,
        "/lib.js",
        &[("Accept-Encoding", "gzip"), ("Range", "bytes=10-99")],
    );
    assert_eq!(r.status(), 206);
    assert_eq!(
        hdr(r.headers(), "content-range"),
        format!("bytes 10-99/{n}")
    );
    assert_eq!(hdr(r.headers(), "content-encoding"), "gzip");
    assert_eq!(&r.bytes().unwrap()[..], &gz_bytes[10..100]);
    let r = get(
        &f,
        "/lib.js",
        &[
            ("Accept-Encoding", "gzip"),
            ("Range", &format!("bytes=-{}", n + 5)),
        ],
    );
    assert_eq!(r.status(), 206);
    assert_eq!(&r.bytes().unwrap()[..], &gz_bytes[..]);
    let r = get(
        &f,
        "/lib.js",
        &[("Accept-Encoding", "gzip"), ("Range", "bytes=0-1,5-6")],
    );
    assert_eq!(r.status(), 206);
    let parts = String::from_utf8_lossy(&r.bytes().unwrap()).to_string();
    assert!(
        parts.contains(&format!("Content-Range: bytes 5-6/{n}")),
        "{parts}"
    );
    let r = get(
        &f,
        "/lib.js",
        &[
            ("Accept-Encoding", "gzip"),
            ("Range", &format!("bytes={n}-")),
        ],
    );
    assert_eq!(r.status(), 416);
    assert_eq!(hdr(r.headers(), "content-range"), format!("bytes */{n}"));
    // If-Range: the variant's tag resumes the variant; the identity tag does not.
    let r = get(
        &f,
        "/lib.js",
        &[
            ("Accept-Encoding", "gzip"),
            ("Range", "bytes=0-9"),
            ("If-Range", &gz_tag),
        ],
    );
    assert_eq!(r.status(), 206);
    let r = get(
        &f,
        "/lib.js",
        &[
            ("Accept-Encoding", "gzip"),
            ("Range", "bytes=0-9"),
            ("If-Range", &id_tag),
        ],
    );
    assert_eq!(r.status(), 200);
    assert_eq!(&r.bytes().unwrap()[..], &gz_bytes[..]);
}

fn what_is_not_compressed(kind: ServerKind) {
    let f = fixture(
        kind,
        &[
            "--set",
            "compression.enabled=true",
            "--set",
            "compression.max_file_size=100000",
        ],
    );
    f.tree.write("big.js", &script(150_000, 3));
    f.tree.write("data.bin", &script(20_000, 4));
    f.tree.write("photo.png", &script(20_000, 5));
    for path in ["/big.js", "/data.bin", "/photo.png", "/large.bin"] {
        let r = get(&f, path, &[("Accept-Encoding", "gzip, br, zstd")]);
        assert_eq!(r.status(), 200);
        assert!(r.headers().get("content-encoding").is_none(), "{path}");
        let want = std::fs::read(f.tree.root.join(&path[1..])).unwrap();
        assert_eq!(&r.bytes().unwrap()[..], &want[..], "{path}");
    }
    // Precompressed siblings still win over computed variants.
    let r = get(&f, "/app.js", &[("Accept-Encoding", "gzip")]);
    assert_eq!(r.text().unwrap(), "GZ-BYTES");
    let r = get(&f, "/app.js", &[("Accept-Encoding", "zstd, br")]);
    assert_eq!(hdr(r.headers(), "content-encoding"), "br");
    assert_eq!(r.text().unwrap(), "BR-BYTES");
    let r = get(&f, "/style.css", &[("Accept-Encoding", "zstd")]);
    assert_eq!(r.text().unwrap(), "ZSTD-BYTES");
    // A file that does not shrink is sent as it is.
    let r = get(&f, "/style.css", &[("Accept-Encoding", "gzip")]);
    assert!(r.headers().get("content-encoding").is_none());
    assert_eq!(r.text().unwrap(), "body{}");
    // Off (the default): nothing is compressed.
    let f = fixture(kind, &[]);
    f.tree.write("lib.js", &script(20_000, 6));
    let r = get(&f, "/lib.js", &[("Accept-Encoding", "gzip")]);
    assert!(r.headers().get("content-encoding").is_none());
}

fn a_changed_file_gets_a_new_variant(kind: ServerKind) {
    let f = fixture(kind, &COMPRESS);
    // Above cache.small_file_max (sent by descriptor, checked per request)
    // and below it (cached bytes, revalidated after cache.valid).
    for (path, size) in [("/big.css", 100_000), ("/small.css", 4_000)] {
        let one = script(size, 7);
        f.tree.write(&path[1..], &one);
        let r = get(&f, path, &[("Accept-Encoding", "br")]);
        let tag1 = hdr(r.headers(), "etag").to_string();
        assert_eq!(decode("br", &r.bytes().unwrap()), one);
        std::thread::sleep(Duration::from_millis(1100));
        let two = script(size + 500, 8);
        f.tree.write(&path[1..], &two);
        let r = get(&f, path, &[("Accept-Encoding", "br")]);
        assert_ne!(hdr(r.headers(), "etag"), tag1, "{path}");
        assert_eq!(
            decode("br", &r.bytes().unwrap()),
            two,
            "{path}: stale variant"
        );
    }
}

/// The framing of the daemon's own HTTP/1.1 engine (the example's is
/// hyper's, which answers an HTTP/1.0 request as HTTP/1.0).
#[test]
fn pipelining_and_keep_alive() {
    let kind = ServerKind::Daemon;
    let f = fixture(kind, &[]);
    let req = b"GET /noext HTTP/1.1\r\nHost: x\r\n\r\nGET /small.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=0-1\r\n\r\nGET /missing HTTP/1.1\r\nHost: x\r\n\r\nGET /a%20b.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let resp = String::from_utf8_lossy(&f.d.raw(req, Duration::from_secs(5))).to_string();
    let codes: Vec<&str> = resp
        .match_indices("HTTP/1.1 ")
        .map(|(i, _)| &resp[i + 9..i + 12])
        .collect();
    assert_eq!(codes, vec!["200", "206", "404", "200"], "{resp}");
    assert!(resp.ends_with("space"));
    // HTTP/1.0 closes by default; keep-alive when asked.
    let resp =
        f.d.raw(b"GET /noext HTTP/1.0\r\n\r\n", Duration::from_secs(5));
    assert!(String::from_utf8_lossy(&resp).ends_with("???"));
    let resp = f.d.raw(
        b"GET /noext HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /noext HTTP/1.0\r\n\r\n",
        Duration::from_secs(5),
    );
    let text = String::from_utf8_lossy(&resp);
    assert_eq!(text.matches("HTTP/1.1 200").count(), 2, "{text}");
    assert!(text.contains("Connection: keep-alive"));
}

fn many_small_requests_on_one_connection_stay_correct(kind: ServerKind) {
    let f = fixture(kind, &[]);
    let c = f.d.client();
    for i in 0..200 {
        let path = if i % 2 == 0 {
            "/small.bin"
        } else {
            "/large.bin"
        };
        let r = c.get(f.d.url(path)).send().unwrap();
        let want = if i % 2 == 0 { &f.small } else { &f.large };
        assert_eq!(&r.bytes().unwrap()[..], &want[..]);
    }
}

fn vary_is_the_same_for_every_response_of_a_negotiated_resource(kind: ServerKind) {
    let f = fixture(kind, &[]);
    let etag = etag_of(&f, "/app.js");
    let cases: [(&str, Vec<(&str, &str)>); 6] = [
        ("200 without Accept-Encoding", vec![]),
        ("200 with gzip", vec![("Accept-Encoding", "gzip")]),
        ("200 identity", vec![("Accept-Encoding", "identity")]),
        ("206", vec![("Range", "bytes=0-3")]),
        ("304", vec![("If-None-Match", etag.as_str())]),
        ("416", vec![("Range", "bytes=9000-")]),
    ];
    for (what, headers) in &cases {
        let r = get(&f, "/app.js", headers);
        assert_eq!(hdr(r.headers(), "vary"), "Accept-Encoding", "{what}");
    }
    let r = f.d.client().head(f.d.url("/app.js")).send().unwrap();
    assert_eq!(hdr(r.headers(), "vary"), "Accept-Encoding", "HEAD");
    // With precompressed siblings off, nothing depends on Accept-Encoding.
    let f = fixture(kind, &["--set", "precompressed=false"]);
    let r = get(&f, "/app.js", &[("Accept-Encoding", "gzip")]);
    assert!(r.headers().get("vary").is_none());
}

fn multipart_boundaries_are_fresh_and_absent_from_the_parts(kind: ServerKind) {
    let f = fixture(kind, &[]);
    let boundary = |path: &str| {
        let r = get(&f, path, &[("Range", "bytes=0-1,4-5")]);
        assert_eq!(r.status(), 206);
        let ct = hdr(r.headers(), "content-type").to_string();
        let b = ct.split("boundary=").nth(1).unwrap().to_string();
        (ct, b, r.bytes().unwrap())
    };
    let (_, first, _) = boundary("/small.bin");
    let (_, second, _) = boundary("/small.bin");
    assert_ne!(
        first, second,
        "a boundary learned from one response is reused"
    );
    // A file that carries a boundary seen before cannot forge parts.
    let planted: Vec<u8> = format!("\r\n--{second}\r\nContent-Range: bytes 0-0/1\r\n\r\nX")
        .into_bytes()
        .into_iter()
        .chain(std::iter::repeat_n(b'.', 64))
        .collect();
    f.tree.write("planted.txt", &planted);
    for _ in 0..20 {
        let r = get(&f, "/planted.txt", &[("Range", "bytes=0-40,41-60")]);
        let ct = hdr(r.headers(), "content-type").to_string();
        let parts = parse_multipart(&ct, &r.bytes().unwrap());
        assert_eq!(parts.len(), 2, "{ct}");
        assert_eq!(parts[0].1, planted[0..41].to_vec());
        assert_eq!(parts[1].1, planted[41..61].to_vec());
    }
}

/// Copies `src` to `dst` keeping the mtime to the nanosecond (a replica:
/// same bytes and times, other device and inode).
fn replicate(src: &std::path::Path, dst: &std::path::Path) {
    std::fs::copy(src, dst).unwrap();
    let mtime = std::fs::metadata(src).unwrap().modified().unwrap();
    std::fs::File::options()
        .write(true)
        .open(dst)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
}

fn replicas_of_the_same_files_agree_on_validators(kind: ServerKind) {
    let a = fixture(kind, &[]);
    let b_tree = Tree::new();
    for name in ["small.bin", "large.bin"] {
        replicate(&a.tree.root.join(name), &b_tree.root.join(name));
    }
    let b = Server::start(kind, &b_tree.root, &[]);
    let get_b = |path: &str, headers: &[(&str, &str)]| {
        let mut rb = b.client().get(b.url(path));
        for (k, v) in headers {
            rb = rb.header(*k, *v);
        }
        rb.send().unwrap()
    };
    for path in ["/small.bin", "/large.bin"] {
        let etag = etag_of(&a, path);
        assert_eq!(hdr(get_b(path, &[]).headers(), "etag"), etag, "{path}");
        assert_eq!(get_b(path, &[("If-None-Match", &etag)]).status(), 304);
        // A resume behind a load balancer continues instead of restarting.
        let r = get_b(path, &[("Range", "bytes=10-19"), ("If-Range", &etag)]);
        assert_eq!(r.status(), 206, "{path}");
    }
    // Rewriting the content (same size) still changes the validator.
    let before = etag_of(&a, "/small.bin");
    std::thread::sleep(Duration::from_millis(20));
    a.tree.write("small.bin", &vec![0u8; a.small.len()]);
    std::thread::sleep(Duration::from_millis(1200)); // past cache.valid
    assert_ne!(etag_of(&a, "/small.bin"), before);
}

fn host_must_be_a_valid_authority(kind: ServerKind) {
    let f = fixture(kind, &[]);
    let send = |host: &str| {
        let req = format!("GET /noext HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        status_of(&f.d.raw(req.as_bytes(), Duration::from_secs(5)))
    };
    for bad in [
        "a b",
        "a/b",
        "a@b",
        "exa\"mple",
        "a:b",
        "a:1:2",
        "[::1",
        "[::1]x",
        "a?b",
        "a#b",
        "a\\b",
        ":80x",
    ] {
        assert_eq!(send(bad), 400, "Host: {bad}");
    }
    for good in [
        "",
        "example.com",
        "example.com:8080",
        "127.0.0.1",
        "127.0.0.1:80",
        "[::1]",
        "[::1]:8080",
        "xn--bcher-kva.example",
        "a_b-c.d~e",
        "a%20b",
        "host:",
    ] {
        assert_eq!(send(good), 200, "Host: {good}");
    }
}

/// A bad `Host` is a malformed request whatever its method: every listener
/// answers 400 before it looks at OPTIONS or an unknown method (the HTTPS
/// listeners and the example once answered those 204 and 405).
fn host_is_checked_before_the_method(kind: ServerKind) {
    let f = fixture(kind, &[]);
    for (method, target) in [("OPTIONS", "*"), ("OPTIONS", "/noext"), ("PUT", "/noext")] {
        for host in ["a b", "a/b"] {
            let req =
                format!("{method} {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
            let got = f.d.raw(req.as_bytes(), Duration::from_secs(5));
            assert_eq!(status_of(&got), 400, "{method} {target} with Host: {host}");
        }
    }
}

/// A file rewritten in place while its body is sent never arrives complete
/// with mixed contents: the body ends short instead (the client sees fewer
/// bytes than `Content-Length`, or a reset stream). The file is larger than
/// every socket buffer on the way, so most of it is sent after the rewrite;
/// the plaintext listener's sendfile once sent such a body whole, half old
/// and half new, under the old validators.
fn a_file_rewritten_mid_send_is_never_sent_whole_and_mixed(kind: ServerKind) {
    use std::io::Read;
    let f = fixture(kind, &[]);
    let old = pattern(96 << 20);
    f.tree.write("huge.bin", &old);
    let mut r = f.d.client().get(f.d.url("/huge.bin")).send().unwrap();
    assert_eq!(r.status(), 200);
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    while got.len() < 1 << 20 {
        let n = r.read(&mut buf).unwrap();
        assert!(n > 0, "ended early");
        got.extend_from_slice(&buf[..n]);
    }
    std::thread::sleep(Duration::from_millis(20));
    let new: Vec<u8> = old.iter().map(|b| b ^ 0xff).collect();
    {
        use std::io::Write;
        let path = f.tree.root.join("huge.bin");
        let mut file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        file.write_all(&new).unwrap();
    }
    loop {
        match r.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    assert!(
        got.len() < old.len() || got == old,
        "a complete body of {} bytes that is not the file it began as",
        got.len()
    );
}

/// Both of the daemon's HTTP/1.1 listeners want one `Host` (RFC 9112 3.2):
/// hyper does not check it, so the HTTPS listener applies the plaintext
/// parser's rule itself. (An embedding server's framing is its own: the
/// axum example is not held to this.)
#[test]
fn the_daemons_http1_listeners_want_exactly_one_host() {
    for kind in [ServerKind::Daemon, ServerKind::DaemonHttps1] {
        let f = fixture(kind, &[]);
        for req in [
            "GET /noext HTTP/1.1\r\nConnection: close\r\n\r\n",
            "GET /noext HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n",
        ] {
            let got = f.d.raw(req.as_bytes(), Duration::from_secs(5));
            assert_eq!(status_of(&got), 400, "{kind:?}: {req:?}");
        }
        let ok = "GET /noext HTTP/1.0\r\nConnection: close\r\n\r\n";
        let got = f.d.raw(ok.as_bytes(), Duration::from_secs(5));
        assert_eq!(status_of(&got), 200, "{kind:?}: HTTP/1.0 needs no Host");
    }
}

/// A small file rewritten in place between two requests, with the change
/// watcher off and a long `cache.valid`, is answered with its new bytes
/// whole: the HTTP/1.1 engine checks it once, before it sends (the check
/// the resolve stage makes for the other listeners), and a response whose
/// file changed before any byte left is decided again from the file.
fn a_file_rewritten_between_requests_is_served_new_and_whole(kind: ServerKind) {
    let f = fixture(
        kind,
        &[
            "--set",
            "cache.watch=false",
            "--set",
            "cache.valid=60s",
            "--set",
            "cache.small_file_max=1024",
        ],
    );
    let old = pattern(12 * 1024);
    f.tree.write("mid.bin", &old);
    let client = f.d.client();
    let get = || {
        let r = client.get(f.d.url("/mid.bin")).send().unwrap();
        assert_eq!(r.status(), 200);
        r.bytes().expect("a whole body").to_vec()
    };
    assert_eq!(get(), old);
    std::thread::sleep(Duration::from_millis(20));
    let new: Vec<u8> = old.iter().map(|b| b ^ 0x5a).collect();
    {
        use std::io::Write;
        let path = f.tree.root.join("mid.bin");
        let mut file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        file.write_all(&new).unwrap();
    }
    assert!(get() == new, "the rewritten file, whole");
}

/// The same for a small range of a large file: the HTTP/1.1 engine reads
/// the range whole and checks the file before any byte leaves (not at
/// resolve), and a range whose file changed is decided again, its bytes
/// and its tag the new file's.
fn a_range_of_a_file_rewritten_between_requests_is_the_new_one(kind: ServerKind) {
    let f = fixture(
        kind,
        &["--set", "cache.watch=false", "--set", "cache.valid=60s"],
    );
    let old = pattern(200 * 1024);
    f.tree.write("big.bin", &old);
    let client = f.d.client();
    let range = || {
        let r = client
            .get(f.d.url("/big.bin"))
            .header("Range", "bytes=100000-100099")
            .send()
            .unwrap();
        assert_eq!(r.status(), 206);
        let tag = r.headers()["etag"].to_str().unwrap().to_owned();
        (tag, r.bytes().expect("a whole body").to_vec())
    };
    let (old_tag, body) = range();
    assert_eq!(body, old[100_000..100_100]);
    std::thread::sleep(Duration::from_millis(20));
    let new: Vec<u8> = old.iter().map(|b| b ^ 0x5a).collect();
    {
        use std::io::Write;
        let path = f.tree.root.join("big.bin");
        let mut file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        file.write_all(&new).unwrap();
    }
    let (tag, body) = range();
    assert!(body == new[100_000..100_100], "the rewritten file's bytes");
    assert_ne!(tag, old_tag, "and its tag");
}

/// Runs each test against each server (module `test::daemon`, `test::axum`,
/// `test::https_h2`, `test::https_h1`, `test::http3`).
macro_rules! against_each_server {
    ($($test:ident),* $(,)?) => {
        $(mod $test {
            #[test]
            fn daemon() {
                super::$test(super::ServerKind::Daemon)
            }
            #[test]
            fn axum() {
                super::$test(super::ServerKind::AxumExample)
            }
            #[test]
            fn https_h2() {
                super::$test(super::ServerKind::DaemonHttps2)
            }
            #[test]
            fn https_h1() {
                super::$test(super::ServerKind::DaemonHttps1)
            }
            #[test]
            fn http3() {
                super::$test(super::ServerKind::DaemonHttp3)
            }
        })*
    };
}

against_each_server!(
    a_range_of_a_file_rewritten_between_requests_is_the_new_one,
    get_small_and_large_with_representation_headers,
    last_modified_never_later_than_date,
    head_has_get_headers_and_no_body,
    other_methods_405_and_options,
    directory_redirect_index_and_404,
    configurable_index_and_listing,
    dotfiles_hidden_except_well_known,
    content_types,
    cache_control_is_configurable,
    if_match_strong_and_412,
    if_unmodified_since,
    if_none_match_weak_comparison_and_304_headers,
    if_modified_since_only_without_if_none_match,
    if_range_strong_etag_or_exact_date,
    single_ranges_small_and_large,
    multipart_ranges_and_limits,
    precompressed_siblings_by_accept_encoding,
    many_small_requests_on_one_connection_stay_correct,
    vary_is_the_same_for_every_response_of_a_negotiated_resource,
    multipart_boundaries_are_fresh_and_absent_from_the_parts,
    replicas_of_the_same_files_agree_on_validators,
    host_must_be_a_valid_authority,
    compressed_variants_follow_accept_encoding_weights,
    variant_validators_ranges_and_head,
    what_is_not_compressed,
    a_changed_file_gets_a_new_variant,
    host_is_checked_before_the_method,
    a_file_rewritten_mid_send_is_never_sent_whole_and_mixed,
    a_file_rewritten_between_requests_is_served_new_and_whole,
);

//! Directory listings against the real daemon: confinement under every
//! symlink policy (a link to `/` never lists the host), hrefs that a browser
//! cannot read as a scheme, the headers that keep a listing inert, what each
//! entry shows, the entry limit and its note, and the cache policy.

mod common;

use common::{client, Daemon, Tree};
use reqwest::blocking::Response;

const POLICIES: [&str; 3] = ["deny", "within_root", "follow"];

/// Names in the host's `/` that a tree of ours never contains.
const HOST_NAMES: [&str; 6] = ["proc", "usr", "etc", "sbin", "boot", "var"];

fn listing_daemon(tree: &Tree, extra: &[&str]) -> Daemon {
    let mut args = vec!["--set", "directory_listing=true"];
    args.extend_from_slice(extra);
    Daemon::start(&tree.root, &args)
}

fn get(d: &Daemon, path: &str, json: bool) -> Response {
    let mut rb = client().get(d.url(path));
    if json {
        rb = rb.header("Accept", "application/json");
    }
    rb.send().unwrap()
}

/// Names in a JSON listing.
fn json_names(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect()
}

/// Every `href="..."` value of an HTML page, HTML entities decoded.
fn hrefs(html: &str) -> Vec<String> {
    html.split("href=\"")
        .skip(1)
        .map(|rest| {
            let v = &rest[..rest.find('"').expect("unterminated href")];
            v.replace("&quot;", "\"")
                .replace("&#39;", "'")
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&amp;", "&")
        })
        .collect()
}

#[test]
fn a_link_to_the_host_root_never_lists_the_host() {
    let tree = Tree::new();
    tree.write("a.txt", b"inside");
    std::os::unix::fs::symlink("/", tree.root.join("x")).unwrap();
    std::os::unix::fs::symlink(tree.dir.path(), tree.root.join("up")).unwrap();
    for policy in POLICIES {
        let d = listing_daemon(&tree, &["--set", &format!("symlinks={policy}")]);
        for path in ["/x/", "/x/etc/", "/up/", "/"] {
            for json in [false, true] {
                let r = get(&d, path, json);
                let status = r.status().as_u16();
                let body = r.text().unwrap();
                for name in HOST_NAMES {
                    assert!(
                        !body.contains(&format!("\"{name}")) && !body.contains(&format!(">{name}")),
                        "{policy} {path} json={json}: host name {name} listed ({status}):\n{body}"
                    );
                }
                assert!(
                    !body.contains("secret.txt"),
                    "{policy} {path}: a name outside the root is listed:\n{body}"
                );
                if path == "/x/" && policy != "follow" {
                    assert!(status == 403 || status == 404, "{policy} {path}: {status}");
                }
            }
        }
        // Under follow the link resolves with the root as `/`: it lists the root.
        if policy == "follow" {
            let v: serde_json::Value = get(&d, "/x/", true).json().unwrap();
            let names = json_names(&v);
            assert!(names.contains(&"a.txt".to_string()), "{names:?}");
        }
    }
}

#[test]
fn entries_show_what_the_name_resolves_to_under_the_policy() {
    let tree = Tree::new();
    tree.write("big.txt", &[b'x'; 1000]);
    tree.write("d/inner.txt", b"in d");
    let r = &tree.root;
    std::os::unix::fs::symlink("big.txt", r.join("link_to_big")).unwrap();
    std::os::unix::fs::symlink("d", r.join("link_to_dir")).unwrap();
    std::os::unix::fs::symlink("../secret.txt", r.join("link_out")).unwrap();
    std::os::unix::fs::symlink(&tree.canary, r.join("abs_out")).unwrap();
    std::os::unix::fs::symlink("missing", r.join("dangling")).unwrap();
    for policy in POLICIES {
        let d = listing_daemon(&tree, &["--set", &format!("symlinks={policy}")]);
        let v: serde_json::Value = get(&d, "/", true).json().unwrap();
        let entry = |name: &str| {
            v.as_array()
                .unwrap()
                .iter()
                .find(|e| e["name"] == name)
                .cloned()
        };
        let big = entry("big.txt").expect("plain file listed");
        assert_eq!(big["type"], "file");
        assert_eq!(big["size"], 1000);
        assert_eq!(entry("d").unwrap()["type"], "directory");
        for refused in ["link_out", "abs_out", "dangling"] {
            assert!(entry(refused).is_none(), "{policy}: {refused} listed: {v}");
        }
        if policy == "deny" {
            assert!(entry("link_to_big").is_none(), "deny lists a symlink: {v}");
            assert!(entry("link_to_dir").is_none(), "deny lists a symlink: {v}");
        } else {
            let l = entry("link_to_big").unwrap_or_else(|| panic!("{policy}: {v}"));
            assert_eq!(l["type"], "file", "{policy}: {l}");
            assert_eq!(
                l["size"], 1000,
                "{policy}: the target's size, not the link's"
            );
            assert_eq!(entry("link_to_dir").unwrap()["type"], "directory");
        }
        let html = get(&d, "/", false).text().unwrap();
        assert!(!html.contains("secret"), "{policy}: {html}");
        assert!(!html.contains("abs_out"), "{policy}: {html}");
    }
}

#[test]
fn hostile_names_are_inert_relative_links() {
    let tree = Tree::new();
    let names = [
        "javascript:alert(1)",
        "data:text,x",
        "<img src=x onerror=alert(1)>",
        "\"quoted\" & 'single'",
        "a?b#c",
        "%2e%2e",
        "back\\slash",
        "tab\tname",
        "ünïcode ✓",
    ];
    for n in names {
        tree.write(&format!("dir/{n}"), b"x");
    }
    std::fs::create_dir(tree.root.join("dir/javascript:sub")).unwrap();
    let d = listing_daemon(&tree, &[]);
    let r = get(&d, "/dir/", false);
    assert_eq!(r.status(), 200);
    let h = r.headers();
    assert_eq!(
        h["content-security-policy"],
        "default-src 'none'; style-src 'unsafe-inline'"
    );
    assert_eq!(h["x-content-type-options"], "nosniff");
    let html = r.text().unwrap();
    assert!(!html.contains("<img"), "unescaped name: {html}");
    let base = reqwest::Url::parse(&d.url("/dir/")).unwrap();
    let links = hrefs(&html);
    let mut resolved = Vec::new();
    for href in &links {
        // The breadcrumb climbs with `../` steps; the column headers sort
        // with a query of fixed words. Neither carries a name.
        if href.starts_with('?') {
            let (sort, order) = href
                .strip_prefix("?sort=")
                .and_then(|r| r.split_once("&order="))
                .unwrap_or_else(|| panic!("not a sort link: {href:?}"));
            assert!(["name", "size", "modified"].contains(&sort), "{href:?}");
            assert!(["asc", "desc"].contains(&order), "{href:?}");
            continue;
        }
        if href.trim_start_matches("../").is_empty() || href == "./" {
            continue;
        }
        assert!(
            href.starts_with("./"),
            "href can be read as a scheme or another origin: {href:?}"
        );
        assert!(!href.contains(':'), "':' not percent-encoded: {href:?}");
        let url = base.join(href).unwrap();
        assert_eq!(url.scheme(), "http", "{href:?}");
        assert_eq!(url.query(), None, "{href:?}");
        assert_eq!(url.fragment(), None, "{href:?}");
        {
            let path = url.path().strip_prefix("/dir/").unwrap();
            let name = percent_encoding::percent_decode_str(path.trim_end_matches('/'))
                .decode_utf8()
                .unwrap()
                .into_owned();
            resolved.push((name, url));
        }
    }
    for n in names.iter().chain(&["javascript:sub"]) {
        let (_, url) = resolved
            .iter()
            .find(|(name, _)| name == n)
            .unwrap_or_else(|| panic!("no href leads to {n:?}: {links:?}"));
        // Every link works: following it serves the file or the directory.
        let status = client().get(url.clone()).send().unwrap().status();
        assert_eq!(status, 200, "{n:?} via {url}");
    }
    // The JSON listing carries the names as they are.
    let v: serde_json::Value = get(&d, "/dir/", true).json().unwrap();
    for n in names {
        assert!(json_names(&v).contains(&n.to_string()), "{n:?}: {v}");
    }
}

#[test]
fn the_entry_limit_truncates_with_a_visible_note() {
    let tree = Tree::new();
    for i in 0..30 {
        tree.write(&format!("many/f{i:02}.txt"), b"x");
    }
    let d = listing_daemon(&tree, &["--set", "listing_max_entries=10"]);
    let r = get(&d, "/many/", false);
    assert_eq!(r.status(), 200);
    let html = r.text().unwrap();
    let listed = hrefs(&html).iter().filter(|h| h.ends_with(".txt")).count();
    assert_eq!(listed, 10, "{html}");
    assert!(
        html.contains("first 10 entries"),
        "no truncation note: {html}"
    );
    let r = get(&d, "/many/", true);
    assert_eq!(r.headers()["listing-truncated"], "10");
    let v: serde_json::Value = r.json().unwrap();
    assert_eq!(json_names(&v).len(), 10);
    // Under the limit: no note, no header.
    let d = listing_daemon(&tree, &[]);
    let r = get(&d, "/many/", true);
    assert!(r.headers().get("listing-truncated").is_none());
    assert_eq!(json_names(&r.json().unwrap()).len(), 30);
    assert!(!get(&d, "/many/", false).text().unwrap().contains("entries"));
}

#[test]
fn redirects_and_listings_carry_a_cache_policy() {
    let tree = Tree::new();
    tree.write("d/a.txt", b"a");
    for (args, want) in [
        (vec![], "no-cache"),
        (
            vec!["--set", "cache_control=public, max-age=60"],
            "public, max-age=60",
        ),
    ] {
        let d = listing_daemon(&tree, &args);
        let r = get(&d, "/d", false);
        assert_eq!(r.status(), 301);
        assert_eq!(r.headers()["cache-control"], "max-age=60", "redirect");
        for json in [false, true] {
            let r = get(&d, "/d/", json);
            assert_eq!(r.status(), 200);
            assert_eq!(r.headers()["cache-control"], want, "listing json={json}");
        }
    }
}

#[test]
fn a_listing_revalidates_with_its_etag() {
    let tree = Tree::new();
    tree.write("d/a.txt", b"a");
    let d = listing_daemon(&tree, &[]);
    let r = get(&d, "/d/", false);
    let etag = r.headers()["etag"].to_str().unwrap().to_string();
    assert!(etag.starts_with("W/\""), "{etag}");
    assert_ne!(
        get(&d, "/d/", true).headers()["etag"],
        etag.as_str(),
        "JSON is another representation"
    );
    let again = client()
        .get(d.url("/d/"))
        .header("If-None-Match", &etag)
        .send()
        .unwrap();
    assert_eq!(again.status(), 304);
    assert_eq!(again.headers()["etag"], etag.as_str());
    assert_eq!(again.headers()["cache-control"], "no-cache");
    assert!(again.bytes().unwrap().is_empty());
    // A new entry changes the page and its tag.
    tree.write("d/b.txt", b"b");
    let changed = client()
        .get(d.url("/d/"))
        .header("If-None-Match", &etag)
        .send()
        .unwrap();
    assert_eq!(changed.status(), 200);
    assert!(changed.text().unwrap().contains("b.txt"));
}

/// Sets a file's modification time to `secs` after the epoch.
fn set_mtime(path: &std::path::Path, secs: u64) {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
    std::fs::File::options()
        .write(true)
        .open(path)
        .or_else(|_| std::fs::File::open(path))
        .unwrap()
        .set_modified(t)
        .unwrap();
}

/// A directory people would browse: folders, text, images, an archive.
fn browsable(tree: &Tree) {
    tree.write("docs/guide/intro.md", b"# intro");
    tree.write("docs/photos/cat.jpg", &[0xff; 3000]);
    tree.write("docs/README.txt", b"read me\n");
    tree.write("docs/report.pdf", &vec![b'%'; 1_536_000]);
    tree.write("docs/site.tar.gz", &vec![0u8; 5 << 20]);
    tree.write("docs/logo.png", &[0x89; 20_480]);
    tree.write("docs/app.js", b"console.log(1)\n");
    tree.write("docs/index-notes.html", b"<p>notes</p>");
    for (i, name) in [
        "README.txt",
        "report.pdf",
        "site.tar.gz",
        "logo.png",
        "app.js",
        "index-notes.html",
    ]
    .iter()
    .enumerate()
    {
        set_mtime(
            &tree.root.join("docs").join(name),
            1_700_000_000 + i as u64 * 86_400,
        );
    }
}

#[test]
fn the_listing_page_has_columns_sorting_a_filter_and_a_breadcrumb() {
    let tree = Tree::new();
    browsable(&tree);
    let d = listing_daemon(&tree, &[]);
    let r = get(&d, "/docs/guide/", false);
    let html = r.text().unwrap();
    assert!(
        html.contains(
            "Index of <a href=\"../../\">/</a><a href=\"../\">docs</a>/<a href=\"./\">guide</a>/"
        ),
        "breadcrumb: {html}"
    );
    assert!(html.contains("name=\"viewport\""), "{html}");
    let html = get(&d, "/docs/", false).text().unwrap();
    for want in [
        "<th class=\"n\"><a href=\"?sort=name&amp;order=desc\">Name \u{2191}</a>",
        "<a href=\"?sort=size&amp;order=asc\">Size</a>",
        "<a href=\"?sort=modified&amp;order=asc\">Modified (UTC)</a>",
        "title=\"1536000 bytes\">1.5 MiB</td>",
        "<td class=\"s\" title=\"5242880 bytes\">5.0 MiB</td>",
        "<td class=\"t\">Folder</td>",
        "<td class=\"t\">Image</td>",
        "<td class=\"t\">Archive</td>",
        "<td class=\"t\">PDF</td>",
        "<td class=\"m\">2023-11-14 22:13</td>",
        "<input type=\"search\" name=\"filter\"",
        "2 folders, 6 files",
    ] {
        assert!(html.contains(want), "missing {want:?} in:\n{html}");
    }
    // Sorted by size, largest first, folders still first; filtered by name.
    let names = |html: &str| -> Vec<String> {
        hrefs(html)
            .into_iter()
            .filter(|h| h.starts_with("./") && h.len() > 2)
            .collect()
    };
    let by_size = get(&d, "/docs/?sort=size&order=desc", false)
        .text()
        .unwrap();
    assert_eq!(
        names(&by_size),
        [
            "./photos/",
            "./guide/",
            "./site.tar.gz",
            "./report.pdf",
            "./logo.png",
            "./app.js",
            "./index-notes.html",
            "./README.txt"
        ],
        "{by_size}"
    );
    assert!(by_size.contains("Size \u{2193}"), "{by_size}");
    let filtered = get(&d, "/docs/?filter=RE&sort=name&order=asc", false)
        .text()
        .unwrap();
    assert_eq!(
        names(&filtered),
        ["./README.txt", "./report.pdf"],
        "{filtered}"
    );
    assert!(filtered.contains("value=\"RE\""), "{filtered}");
    // Another view is another page, with its own tag.
    assert_ne!(
        get(&d, "/docs/", false).headers()["etag"],
        get(&d, "/docs/?sort=size", false).headers()["etag"]
    );
    // The JSON form sorts and filters the same way.
    let v: serde_json::Value = get(&d, "/docs/?filter=.png", true).json().unwrap();
    assert_eq!(json_names(&v), ["logo.png"]);
}

/// Screenshots `url` with headless Chromium at `width`x`height` into
/// `out`; returns Chromium's stderr.
fn screenshot(url: &str, width: u32, height: u32, out: &std::path::Path) -> String {
    let profile = tempfile::tempdir().unwrap();
    let r = std::process::Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
        ])
        .arg(format!("--window-size={width},{height}"))
        .arg(format!("--screenshot={}", out.display()))
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(url)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("chromium (scripts/install-deps.sh installs it)");
    String::from_utf8_lossy(&r.stderr).into_owned()
}

/// Width and height from a PNG's IHDR.
fn png_size(png: &[u8]) -> (u32, u32) {
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    (be(&png[16..20]), be(&png[20..24]))
}

#[test]
fn chromium_renders_the_listing_on_a_desktop_and_a_phone() {
    let tree = Tree::new();
    browsable(&tree);
    let d = listing_daemon(&tree, &[]);
    // Kept for a person to look at: target/tmp/listing-*.png.
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    for (name, w, h) in [("desktop", 1100, 640), ("phone", 390, 780)] {
        let out = dir.join(format!("listing-{name}.png"));
        let _ = std::fs::remove_file(&out);
        let err = screenshot(&d.url("/docs/?sort=size&order=desc"), w, h, &out);
        let png =
            std::fs::read(&out).unwrap_or_else(|e| panic!("{name}: no screenshot ({e}): {err}"));
        assert_eq!(png_size(&png), (w, h), "{name}");
        // A page that rendered text and rows compresses far worse than a
        // blank or error page (a few KB).
        assert!(png.len() > 20_000, "{name}: {} bytes: {err}", png.len());
        // The CSP let the page render without a violation.
        assert!(!err.contains("Content Security Policy"), "{name}: {err}");
    }
}

#[test]
fn a_listing_of_ten_thousand_entries_stays_small_and_sorts() {
    let tree = Tree::new();
    let dir = tree.root.join("big");
    std::fs::create_dir(&dir).unwrap();
    for i in 0..10_000 {
        std::fs::write(dir.join(format!("file-{i:05}.txt")), b"").unwrap();
    }
    let d = listing_daemon(&tree, &[]);
    for q in ["", "?sort=size&order=desc", "?sort=modified&order=desc"] {
        let r = get(&d, &format!("/big/{q}"), false);
        assert_eq!(r.status(), 200);
        assert!(r.headers().get("listing-truncated").is_none());
        let html = r.text().unwrap();
        let rows = html.matches("<tr><td class=\"n\"><a class=").count();
        assert_eq!(rows, 10_000 + 1, "{q}: rows (and the parent row)");
        // A bound on bytes, not a timing: each row carries its name twice
        // (14 bytes) and a fixed amount of markup.
        let per_entry = html.len() / 10_000;
        assert!(per_entry < 260, "{q}: {per_entry} bytes per entry");
    }
    let one = get(&d, "/big/?filter=file-04242", false).text().unwrap();
    assert!(one.contains("0 folders, 1 file match the filter"), "{one}");
}

/// A file the server may not read is left out of the listing, where it
/// would only answer 403. As root (who reads everything) the daemon runs
/// as `nobody`, from a copy of its binary that `nobody` may execute.
#[test]
fn a_file_the_server_cannot_read_is_not_listed() {
    use std::os::unix::fs::PermissionsExt;
    let tree = Tree::new();
    tree.write("open.txt", b"readable");
    let secret = tree.write("secret.txt", b"not for the server");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o000)).unwrap();
    for dir in [tree.dir.path(), tree.root.as_path()] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let bin = tree.dir.path().join("fileserver");
    std::fs::copy(common::bin(), &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut cmd = if rustix::process::geteuid().is_root() {
        let mut c = std::process::Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&bin);
        c
    } else {
        std::process::Command::new(&bin)
    };
    cmd.args(common::base_args(&tree.root))
        .args(["--set", "directory_listing=true"]);
    let d = Daemon::spawn(cmd);
    assert_eq!(
        get(&d, "/secret.txt", false).status(),
        403,
        "the server may not read it"
    );
    let v: serde_json::Value = get(&d, "/", true).json().unwrap();
    let names = json_names(&v);
    assert!(names.contains(&"open.txt".to_string()), "{names:?}");
    assert!(
        !names.contains(&"secret.txt".to_string()),
        "listed, then 403: {names:?}"
    );
    let html = get(&d, "/", false).text().unwrap();
    assert!(!html.contains("secret.txt"), "{html}");
}

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
        assert!(
            href.starts_with("./") || href == "../",
            "href can be read as a scheme or another origin: {href:?}"
        );
        assert!(!href.contains(':'), "':' not percent-encoded: {href:?}");
        let url = base.join(href).unwrap();
        assert_eq!(url.scheme(), "http", "{href:?}");
        assert_eq!(url.query(), None, "{href:?}");
        assert_eq!(url.fragment(), None, "{href:?}");
        if href != "../" {
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

//! `decide` without a socket: each answer from a real directory through a
//! real `FileManager`, rendered as a plan.

use decide::{Answer, CompressionOptions, Options};
use filemanager::{Config, FileManager};
use httpfile::plan::Body;
use httpfile::{Method, RequestHead};

struct Dir {
    _tmp: tempfile::TempDir,
    fm: FileManager,
}

fn dir(files: &[(&str, &[u8])]) -> Dir {
    let tmp = tempfile::tempdir().unwrap();
    for (name, bytes) in files {
        let path = tmp.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
    let fm = FileManager::new(Config::new(tmp.path())).unwrap();
    Dir { _tmp: tmp, fm }
}

fn get(target: &str) -> RequestHead<'_> {
    RequestHead {
        method: Method::Get,
        target: target.as_bytes(),
        host: Some(b"example.com"),
        ..RequestHead::default()
    }
}

/// Status, `Content-Length`, coding and `Vary` of the plan for `head`.
async fn answer(d: &Dir, options: &Options, head: &RequestHead<'_>) -> (u16, Option<u64>, String) {
    let mut path = Vec::new();
    let decision = decide::decide(&d.fm, options, head, &mut path).await;
    let mut ranges = Vec::new();
    let plan = decision.plan(head, &mut ranges);
    let coding = plan
        .headers
        .content_encoding
        .map_or("identity", |c| c.token());
    let vary = plan.headers.vary.map_or("-", |v| v.as_str());
    (
        plan.status,
        plan.headers.content_length,
        format!("{coding} {vary}"),
    )
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn a_file_its_bytes_and_its_validators() {
    rt().block_on(async {
        let d = dir(&[("a.txt", b"hello")]);
        let options = Options::default();
        let head = get("/a.txt");
        let mut path = Vec::new();
        let decision = decide::decide(&d.fm, &options, &head, &mut path).await;
        let r = decision.representation().expect("a file");
        // Bytes are kept once a file is used again (`cache.min_uses`).
        assert!(r.bytes().is_none_or(|b| b == b"hello"));
        assert_eq!(r.info().size, 5);
        assert_eq!(r.mime, "text/plain");
        let mut ranges = Vec::new();
        let plan = decision.plan(&head, &mut ranges);
        assert_eq!(plan.status, 200);
        assert_eq!(
            plan.body,
            Body::File(httpfile::ByteRange { start: 0, end: 5 })
        );
        assert_eq!(plan.headers.etag, Some(r.etag.as_str()));
        assert_eq!(plan.headers.cache_control, Some("no-cache"));
    });
}

#[test]
fn a_revalidation_is_a_304_and_a_failed_precondition_a_412() {
    rt().block_on(async {
        let d = dir(&[("a.txt", b"hello")]);
        let options = Options::default();
        let mut path = Vec::new();
        let head = get("/a.txt");
        let first = decide::decide(&d.fm, &options, &head, &mut path).await;
        let tag = first.representation().unwrap().etag;
        let head = RequestHead {
            if_none_match: Some(tag.as_str().as_bytes()),
            ..get("/a.txt")
        };
        assert_eq!(answer(&d, &options, &head).await.0, 304);
        let head = RequestHead {
            if_match: Some(b"\"other\""),
            ..get("/a.txt")
        };
        assert_eq!(answer(&d, &options, &head).await.0, 412);
    });
}

#[test]
fn what_is_not_there_is_the_fallbacks_turn() {
    rt().block_on(async {
        let d = dir(&[("a.txt", b"hello"), (".env", b"secret")]);
        let options = Options::default();
        for target in ["/missing", "/.env", "/a.txt/"] {
            let head = get(target);
            let mut path = Vec::new();
            let decision = decide::decide(&d.fm, &options, &head, &mut path).await;
            assert!(
                matches!(decision.answer, Answer::NotFound),
                "{target}: {:?}",
                decision.answer
            );
            let mut ranges = Vec::new();
            assert_eq!(decision.plan(&head, &mut ranges).status, 404, "{target}");
        }
    });
}

#[test]
fn a_directory_redirects_under_the_mount_and_lists_when_asked() {
    rt().block_on(async {
        let d = dir(&[("docs/a.txt", b"a")]);
        let options = Options {
            redirect_base: "/static".into(),
            ..Options::default()
        };
        let head = get("/docs?x=1");
        let mut path = Vec::new();
        let decision = decide::decide(&d.fm, &options, &head, &mut path).await;
        let mut ranges = Vec::new();
        let plan = decision.plan(&head, &mut ranges);
        assert_eq!(plan.status, 301);
        let location = plan.headers.location.unwrap();
        assert_eq!(
            (location.base, location.path, location.query),
            ("/static", "docs", &b"?x=1"[..])
        );
        // No index and no listing: nothing there.
        assert_eq!(answer(&d, &options, &get("/docs/")).await.0, 404);
        let listing = Options {
            listing: true,
            ..Options::default()
        };
        let head = get("/docs/");
        let mut path = Vec::new();
        let decision = decide::decide(&d.fm, &listing, &head, &mut path).await;
        let Answer::Listing(page) = &decision.answer else {
            panic!("a listing: {:?}", decision.answer)
        };
        assert!(page.body.contains("a.txt"));
        assert!(page.body.contains("<title>Index of /docs</title>"));
        // Under a mount the page names the URL path the client asked for.
        let mounted = Options {
            listing: true,
            redirect_base: "/static".into(),
            ..Options::default()
        };
        let mut path = Vec::new();
        let decision = decide::decide(&d.fm, &mounted, &head, &mut path).await;
        let Answer::Listing(page) = &decision.answer else {
            panic!("a listing: {:?}", decision.answer)
        };
        assert!(
            page.body.contains("<title>Index of /static/docs</title>"),
            "{}",
            &page.body[..300]
        );
    });
}

#[test]
fn a_precompressed_sibling_by_accept_encoding() {
    rt().block_on(async {
        let d = dir(&[("app.js", b"console.log(1)"), ("app.js.br", b"BR")]);
        let options = Options::default();
        let head = RequestHead {
            accept_encoding: Some(b"gzip, br"),
            ..get("/app.js")
        };
        assert_eq!(
            answer(&d, &options, &head).await,
            (200, Some(2), "br Accept-Encoding".into())
        );
        let head = RequestHead {
            accept_encoding: Some(b"gzip"),
            ..get("/app.js")
        };
        assert_eq!(
            answer(&d, &options, &head).await,
            (200, Some(14), "identity Accept-Encoding".into())
        );
        let off = Options {
            precompressed: false,
            ..Options::default()
        };
        let head = RequestHead {
            accept_encoding: Some(b"br"),
            ..get("/app.js")
        };
        assert_eq!(
            answer(&d, &off, &head).await,
            (200, Some(14), "identity -".into())
        );
    });
}

#[test]
fn a_variant_is_made_once_and_its_304_needs_no_compression() {
    rt().block_on(async {
        let text = "let x = 1;\n".repeat(500);
        let d = dir(&[("app.js", text.as_bytes())]);
        let options = Options {
            compression: Some(CompressionOptions::default()),
            ..Options::default()
        };
        let head = RequestHead {
            accept_encoding: Some(b"gzip"),
            ..get("/app.js")
        };
        let mut path = Vec::new();
        let decision = decide::decide(&d.fm, &options, &head, &mut path).await;
        let r = decision.representation().unwrap();
        let v = r.variant.as_ref().expect("a variant");
        assert!(v.made(), "the first request makes it");
        assert!(v.bytes().len() < text.len());
        assert!(r.etag.as_str().ends_with("-gzip\""), "{}", r.etag.as_str());
        let tag = r.etag;
        drop(decision);
        // Evicted, then revalidated: the 304 comes from the tag alone.
        d.fm.invalidate("app.js");
        let head = RequestHead {
            accept_encoding: Some(b"gzip"),
            if_none_match: Some(tag.as_str().as_bytes()),
            ..get("/app.js")
        };
        let mut path = Vec::new();
        let decision = decide::decide(&d.fm, &options, &head, &mut path).await;
        let r = decision.representation().unwrap();
        assert!(r.variant.is_none(), "no compression for a 304");
        let mut ranges = Vec::new();
        let plan = decision.plan(&head, &mut ranges);
        assert_eq!(plan.status, 304);
        assert_eq!(plan.headers.etag, Some(tag.as_str()));
        assert_eq!(
            plan.headers.vary.map(|v| v.as_str()),
            Some("Accept-Encoding")
        );
    });
}

#[test]
fn a_bad_host_is_400_whatever_the_method() {
    rt().block_on(async {
        let d = dir(&[("a.txt", b"hello")]);
        let options = Options::default();
        for method in [Method::Get, Method::Options, Method::Other] {
            let head = RequestHead {
                method,
                host: Some(b"a b"),
                ..get("/a.txt")
            };
            assert_eq!(answer(&d, &options, &head).await.0, 400, "{method:?}");
        }
        let head = RequestHead {
            method: Method::Options,
            ..get("/a.txt")
        };
        assert_eq!(answer(&d, &options, &head).await.0, 204);
    });
}

#[cfg(unix)]
#[test]
fn a_link_out_of_the_root_is_refused() {
    rt().block_on(async {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        let d = dir(&[("a.txt", b"hello")]);
        let root = d._tmp.path();
        std::os::unix::fs::symlink(outside.path().join("secret"), root.join("link")).unwrap();
        let options = Options::default();
        assert_eq!(answer(&d, &options, &get("/link")).await.0, 403);
    });
}

/// A `BeforeSendUpTo` sender reads a GET's one small range whole and
/// checks the file before any byte leaves, so resolve leaves that check
/// to it: one per range response, not two. A whole file, a larger range
/// and a HEAD are still checked at resolve, and a 304 that a stale entry
/// would give is decided again from the file as it now is.
#[test]
fn a_small_range_is_checked_by_the_sender_not_at_resolve() {
    rt().block_on(async {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("big.bin"), vec![b'a'; 100_000]).unwrap();
        let mut config = Config::new(tmp.path());
        // No watcher to vouch and no copy in memory: every check is a statx.
        config.watch_changes = false;
        config.cache.small_file_max = 0;
        let fm = FileManager::new(config).unwrap();
        let stat = filemanager::BackendStats::ops_labels()
            .iter()
            .position(|l| *l == "stat")
            .unwrap();
        let stats = || fm.stats().io.ops[stat];
        let options = Options::default();
        let check = decide::Check::BeforeSendUpTo(16 * 1024);
        let decide = |head: RequestHead<'static>| {
            let (fm, options) = (&fm, &options);
            async move {
                let mut path = Vec::new();
                let files = decide::Files { fm, check };
                let d = decide::decide_checked(files, options, &head, &mut path).await;
                let mut ranges = Vec::new();
                let plan = d.plan(&head, &mut ranges);
                (plan.status, plan.headers.etag.map(str::to_owned))
            }
        };
        let ranged = |range: &'static [u8]| RequestHead {
            range: Some(range),
            ..get("/big.bin")
        };
        let (status, old_tag) = decide(get("/big.bin")).await;
        assert_eq!(status, 200);
        let checks = |before: u64| stats() - before;
        let before = stats();
        assert_eq!(decide(ranged(b"bytes=0-99")).await.0, 206);
        assert_eq!(checks(before), 0, "the sender checks a small range");
        for (head, what) in [
            (get("/big.bin"), "a whole file"),
            (ranged(b"bytes=0-19999"), "a range over the bound"),
            (ranged(b"bytes=0-9,20-29"), "two ranges"),
            (
                RequestHead {
                    method: Method::Head,
                    ..ranged(b"bytes=0-99")
                },
                "a HEAD",
            ),
        ] {
            let before = stats();
            decide(head).await;
            assert_eq!(checks(before), 1, "{what} is checked at resolve");
        }
        // Rewritten in place, same size: only the times tell.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(tmp.path().join("big.bin"), vec![b'b'; 100_000]).unwrap();
        let old_tag: &'static [u8] = old_tag.unwrap().into_bytes().leak();
        let revalidate = RequestHead {
            if_none_match: Some(old_tag),
            ..ranged(b"bytes=0-99")
        };
        let (status, tag) = decide(revalidate).await;
        assert_eq!(status, 206, "not a 304 from the stale entry");
        assert_ne!(tag.as_deref().map(str::as_bytes), Some(old_tag));
    });
}

/// A rule that limits `/downloads/**` to 2 requests a minute per client.
fn limited(path: &str, burst: u32) -> siterules::RuleSpec {
    siterules::RuleSpec {
        path: path.into(),
        rate_limit: Some(siterules::RateLimitSpec {
            rate: "1/m".into(),
            burst: Some(burst),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Status, `Retry-After` and what the plan for `head` sends: a file's
/// path, or a plain error's detail (empty: its reason).
async fn limited_answer(
    d: &Dir,
    options: &Options,
    head: &RequestHead<'_>,
) -> (u16, Option<u32>, String) {
    let mut path = Vec::new();
    let decision = decide::decide(&d.fm, options, head, &mut path).await;
    let mut ranges = Vec::new();
    let plan = decision.plan(head, &mut ranges);
    let body = match (&plan.body, decision.representation()) {
        (Body::Message(m), _) => m.to_string(),
        (_, Some(r)) => r.file.path().to_string(),
        _ => String::new(),
    };
    (plan.status, plan.headers.retry_after, body)
}

/// A client over a rule's rate gets 429 with `Retry-After`, and the
/// rule's page for 429 when one names it, while another client and
/// another path are served as before; a preflight is answered first, and
/// a rule that says nothing but its limit is enough to be counted.
#[test]
fn a_client_over_its_rate_gets_429_with_retry_after() {
    rt().block_on(async {
        let d = dir(&[
            ("downloads/a.iso", b"iso"),
            ("index.html", b"home"),
            ("429.html", b"slow down"),
        ]);
        let pages = siterules::RuleSpec {
            error_pages: [("429".to_string(), "/429.html".to_string())].into(),
            cors: Some(siterules::CorsSpec {
                origins: vec!["*".into()],
                ..Default::default()
            }),
            ..Default::default()
        };
        let rules = siterules::Rules::compile(&[limited("/downloads/**", 2), pages]).unwrap();
        let options = Options {
            rules: std::sync::Arc::new(rules),
            ..Options::default()
        };
        let from = |client: &str, target: &'static str| RequestHead {
            client: Some(client.parse().unwrap()),
            ..get(target)
        };
        let a = |target| from("192.0.2.1", target);
        for _ in 0..2 {
            let r = limited_answer(&d, &options, &a("/downloads/a.iso")).await;
            assert_eq!(r, (200, None, "downloads/a.iso".into()));
        }
        let r = limited_answer(&d, &options, &a("/downloads/a.iso")).await;
        assert_eq!(r, (429, Some(60), "429.html".into()));
        let head = RequestHead {
            method: Method::Head,
            ..a("/downloads/a.iso")
        };
        assert_eq!(limited_answer(&d, &options, &head).await.0, 429);
        // A preflight costs no request of the limit and is answered.
        let preflight = RequestHead {
            method: Method::Options,
            origin: Some(b"https://app.example"),
            access_control_request_method: Some(b"GET"),
            ..a("/downloads/a.iso")
        };
        assert_eq!(limited_answer(&d, &options, &preflight).await.0, 204);
        let b = from("192.0.2.2", "/downloads/a.iso");
        assert_eq!(limited_answer(&d, &options, &b).await.0, 200);
        assert_eq!(limited_answer(&d, &options, &a("/")).await.0, 200);

        let only = siterules::Rules::compile(&[limited("/**", 1)]).unwrap();
        let options = Options {
            rules: std::sync::Arc::new(only),
            ..Options::default()
        };
        assert_eq!(limited_answer(&d, &options, &a("/index.html")).await.0, 200);
        let r = limited_answer(&d, &options, &a("/index.html")).await;
        assert_eq!(r, (429, Some(60), String::new()));
        // Without a page the plain 429 says its reason.
        let mut path = Vec::new();
        let head = a("/index.html");
        let decision = decide::decide(&d.fm, &options, &head, &mut path).await;
        let mut ranges = Vec::new();
        let plan = decision.plan(&head, &mut ranges);
        let mut body = Vec::new();
        httpfile::plan::write_message(429, "", &mut body);
        assert_eq!(body, b"429 Too Many Requests\n");
        assert_eq!(plan.headers.content_length, Some(body.len() as u64));
    });
}

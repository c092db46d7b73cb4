//! The mount prefix: `base` only shapes redirects, whatever mounts the
//! service (axum's `nest_service`, `Router::fallback_service`, a bare
//! hyper server), so a real `static/` directory under a `/static` mount is
//! reachable; and `ServeFile` for one file.

use http::{Request, StatusCode};
use http_body_util::BodyExt;
use servedir::{FileManager, ServeDir, ServeFile};
use std::io::{Read, Write};
use std::path::Path;
use tower::ServiceExt;

fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(root.join("hello.txt"), "root hello").unwrap();
    std::fs::create_dir(root.join("static")).unwrap();
    std::fs::write(root.join("static/hello.txt"), "static hello").unwrap();
    std::fs::create_dir(root.join("docs")).unwrap();
    std::fs::write(root.join("docs/a.txt"), "a").unwrap();
    dir
}

fn manager(root: &Path) -> FileManager {
    FileManager::new(filemanager::Config::new(root)).unwrap()
}

/// Status, `Location` and body of `uri` sent to `app`.
async fn get<S, B>(app: S, uri: &str) -> (StatusCode, String, String)
where
    S: tower::Service<Request<axum::body::Body>, Response = http::Response<B>>,
    S::Error: std::fmt::Debug,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    let req = Request::get(uri).body(axum::body::Body::empty()).unwrap();
    let res = app.oneshot(req).await.unwrap();
    let status = res.status();
    let location = res
        .headers()
        .get("location")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = res.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        location,
        String::from_utf8_lossy(&body).into_owned(),
    )
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn nest_service_strips_the_prefix_once() {
    let dir = tree();
    let fm = manager(dir.path());
    let app = axum::Router::new().nest_service("/static", ServeDir::new(fm).base("/static"));
    rt().block_on(async {
        let (s, _, body) = get(app.clone(), "/static/hello.txt").await;
        assert_eq!((s, body.as_str()), (StatusCode::OK, "root hello"));
        let (s, _, body) = get(app.clone(), "/static/static/hello.txt").await;
        assert_eq!(
            (s, body.as_str()),
            (StatusCode::OK, "static hello"),
            "the real static/ directory under the /static mount"
        );
        let (s, location, _) = get(app.clone(), "/static/docs?x=1").await;
        assert_eq!(
            (s, location.as_str()),
            (StatusCode::MOVED_PERMANENTLY, "/static/docs/?x=1")
        );
        let (s, _, body) = get(app.clone(), "/static/docs/a.txt").await;
        assert_eq!((s, body.as_str()), (StatusCode::OK, "a"));
        let (s, _, _) = get(app, "/hello.txt").await;
        assert_eq!(s, StatusCode::NOT_FOUND, "outside the mount");
    });
}

#[test]
fn fallback_service_sees_the_whole_path() {
    let dir = tree();
    let fm = manager(dir.path());
    let app = axum::Router::new()
        .route("/api", axum::routing::get(|| async { "api" }))
        .fallback_service(ServeDir::new(fm));
    rt().block_on(async {
        let (_, _, body) = get(app.clone(), "/api").await;
        assert_eq!(body, "api");
        let (_, _, body) = get(app.clone(), "/hello.txt").await;
        assert_eq!(body, "root hello");
        let (_, _, body) = get(app.clone(), "/static/hello.txt").await;
        assert_eq!(body, "static hello");
        let (s, location, _) = get(app, "/docs").await;
        assert_eq!(
            (s, location.as_str()),
            (StatusCode::MOVED_PERMANENTLY, "/docs/")
        );
    });
}

#[test]
fn a_bare_hyper_server_serves_the_request_path() {
    let dir = tree();
    let fm = manager(dir.path());
    // Multi-thread: the server runs while this thread blocks on its socket.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let service = hyper_util::service::TowerToHyperService::new(ServeDir::new(fm));
    rt.spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let io = hyper_util::rt::TokioIo::new(stream);
            let service = service.clone();
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await;
            });
        }
    });
    let raw = |target: &str| {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        write!(
            s,
            "GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    };
    let got = raw("/static/hello.txt");
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    assert!(got.ends_with("static hello"), "{got}");
    let got = raw("/docs");
    assert!(got.starts_with("HTTP/1.1 301"), "{got}");
    assert!(
        got.to_ascii_lowercase().contains("location: /docs/\r\n"),
        "{got}"
    );
    rt.shutdown_background();
}

#[test]
fn serve_file_answers_every_path_with_one_file() {
    let dir = tree();
    let fm = manager(dir.path());
    let one = ServeFile::new(ServeDir::new(fm.clone()), "static/hello.txt");
    let missing = ServeFile::new(ServeDir::new(fm), "nope.txt");
    let app = axum::Router::new()
        .route_service("/hello", one.clone())
        .nest_service("/spa", one)
        .route_service("/missing", missing);
    rt().block_on(async {
        let (s, _, body) = get(app.clone(), "/hello").await;
        assert_eq!((s, body.as_str()), (StatusCode::OK, "static hello"));
        let (_, _, body) = get(app.clone(), "/spa/any/route").await;
        assert_eq!(body, "static hello");
        let (s, _, _) = get(app, "/missing").await;
        assert_eq!(s, StatusCode::NOT_FOUND);
    });
}

//! `servedir`: a [`tower::Service`](tower_service::Service) that serves a
//! directory through [`filemanager`], with the answers of the `fileserver`
//! daemon: both plan every response with [`httpfile`], so GET/HEAD, single
//! and multipart ranges, conditionals in RFC 9110 order, precompressed
//! siblings with `Vary`, index files, the directory redirect, listings,
//! symlink policies, negative caching and 405 with `Allow` behave the same,
//! and so do compressed variants when [`ServeDir::compression`] turns them
//! on (the same [`stages::compress`], the same variant tags).
//!
//! ```no_run
//! use servedir::ServeDir;
//! # async fn run() -> std::io::Result<()> {
//! let files = filemanager::FileManager::new(filemanager::Config::new("./public"))?;
//! let app = axum::Router::new()
//!     .route("/api/health", axum::routing::get(|| async { "ok" }))
//!     .nest_service("/static", ServeDir::new(files).base("/static"));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! axum::serve(listener, app).await
//! # }
//! ```
//!
//! What it costs per request, against tower-http's `ServeDir`: a cache hit
//! takes no syscall and no blocking-pool hand-off (the path cache holds the
//! descriptor and, for small files, the bytes, which a response shares
//! without a copy); larger files are read through the manager's backend
//! (io_uring where available) in bounded chunks, one in flight. The ratios
//! and the command that measures them are in the repository's
//! `benches/README.md`.
#![deny(missing_docs)]

mod body;
pub mod stages;

pub use body::{Body, BoxError};
pub use filemanager::{self, FileManager};
pub use stages::CompressionOptions;

use body::Segment;
use bytes::Bytes;
use filemanager::{ListOptions, OpenError, Query, Resolved, ResolvedFile};
use http::header::{HeaderName, HeaderValue};
use http::request::Parts;
use http::{Request, Response, StatusCode};
use httpfile::plan::{self, Body as PlanBody, Plan, Policy, Route};
use httpfile::{ByteRange, Method, RequestHead};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tower_service::Service;

/// Serves files beneath a [`FileManager`]'s root. Cheap to clone (an `Arc`
/// inside); `F` answers what is not found (by default, a 404).
#[derive(Clone, Debug)]
pub struct ServeDir<F = NotFound> {
    inner: Arc<Inner>,
    fallback: F,
}

#[derive(Clone, Debug)]
struct Inner {
    fm: FileManager,
    base: String,
    index: Vec<String>,
    listing: bool,
    listing_max_entries: usize,
    precompressed: bool,
    dotfiles: bool,
    cache_control: Option<String>,
    max_ranges: usize,
    chunk: usize,
    compression: Option<CompressionOptions>,
}

impl ServeDir<NotFound> {
    /// Serves `fm`'s root with the daemon's defaults: `index.html` for a
    /// directory, no listing, precompressed siblings (`.br`, `.zst`, `.gz`)
    /// when accepted, no dotfiles, `Cache-Control: no-cache` (caches keep
    /// the file and revalidate it each time: a 304 is cheap), at most 16
    /// ranges, 128 KiB reads.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let fm = filemanager::FileManager::new(filemanager::Config::new(dir.path())).unwrap();
    /// let service = servedir::ServeDir::new(fm).directory_listing(true);
    /// # drop(service);
    /// ```
    pub fn new(fm: FileManager) -> ServeDir<NotFound> {
        ServeDir {
            inner: Arc::new(Inner {
                fm,
                base: String::new(),
                index: vec!["index.html".to_string()],
                listing: false,
                listing_max_entries: ListOptions::default().max_entries,
                precompressed: true,
                dotfiles: false,
                cache_control: Some("no-cache".to_string()),
                max_ranges: 16,
                chunk: 128 * 1024,
                compression: None,
            }),
            fallback: NotFound,
        }
    }
}

impl<F> ServeDir<F> {
    fn inner_mut(&mut self) -> &mut Inner {
        Arc::make_mut(&mut self.inner)
    }

    /// The URL path this service is mounted at (`"/static"` for axum's
    /// `nest_service("/static", ..)`), like tower-http's
    /// `redirect_path_prefix`: it only shapes what the service writes
    /// (the `Location` of a directory redirect), and is never taken off
    /// the request path, which the router has already stripped. Under
    /// `nest_service("/static", ..)` the service sees `/docs` for
    /// `/static/docs`, and `/static/x` only for `/static/static/x`.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use tower::ServiceExt;
    /// let dir = tempfile::tempdir().unwrap();
    /// std::fs::create_dir(dir.path().join("docs")).unwrap();
    /// let fm = filemanager::FileManager::new(filemanager::Config::new(dir.path())).unwrap();
    /// let files = servedir::ServeDir::new(fm)
    ///     .base("/static")
    ///     .index_files(["index.html", "README.html"])
    ///     .cache_control("max-age=60");
    /// // What `nest_service("/static", ..)` hands on for `/static/docs?page=2`:
    /// let req = http::Request::get("/docs?page=2").body(()).unwrap();
    /// let res = files.oneshot(req).await.unwrap();
    /// assert_eq!(res.status(), 301);
    /// assert_eq!(res.headers()["location"], "/static/docs/?page=2");
    /// # });
    /// ```
    pub fn base(mut self, base: &str) -> Self {
        self.inner_mut().base = base.trim_end_matches('/').to_string();
        self
    }

    /// Names tried, in order, for a request of a directory.
    pub fn index_files<I: IntoIterator<Item = S>, S: Into<String>>(mut self, names: I) -> Self {
        self.inner_mut().index = names.into_iter().map(Into::into).collect();
        self
    }

    /// List a directory that has no index file (HTML, or JSON by `Accept`).
    pub fn directory_listing(mut self, on: bool) -> Self {
        self.inner_mut().listing = on;
        self
    }

    /// Entries in one listing at most (10000 by default); a longer
    /// directory is cut, with a note in the page. Applies once
    /// [`directory_listing`](Self::directory_listing) is on.
    pub fn listing_max_entries(mut self, n: usize) -> Self {
        self.inner_mut().listing_max_entries = n.max(1);
        self
    }

    /// Serve `name.br`, `name.zst` or `name.gz` for `name` by
    /// `Accept-Encoding` (on by default).
    pub fn precompressed(mut self, on: bool) -> Self {
        self.inner_mut().precompressed = on;
        self
    }

    /// Compress files of the listed types on the fly, once per file version
    /// and coding, kept in the manager's path cache under its
    /// `variant_budget` (see [`CompressionOptions`]; `None` turns it off).
    ///
    /// Off by default: an embedder decides where its CPU and memory go, and
    /// many routers already compress in a layer (tower-http's
    /// `CompressionLayer`), which would otherwise see bodies that are
    /// already encoded. Unlike such a layer, this compresses a file once,
    /// not per response, and keeps ranges, `ETag` and `304` working on the
    /// compressed bytes.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use tower::ServiceExt;
    /// let dir = tempfile::tempdir().unwrap();
    /// std::fs::write(dir.path().join("app.js"), "let a = 1;\n".repeat(200)).unwrap();
    /// let fm = filemanager::FileManager::new(filemanager::Config::new(dir.path())).unwrap();
    /// let files = servedir::ServeDir::new(fm).compression(servedir::CompressionOptions::default());
    /// let req = http::Request::get("/app.js").header("accept-encoding", "gzip").body(()).unwrap();
    /// let res = files.oneshot(req).await.unwrap();
    /// assert_eq!(res.headers()["content-encoding"], "gzip");
    /// assert_eq!(res.headers()["vary"], "Accept-Encoding");
    /// assert!(res.headers()["etag"].to_str().unwrap().ends_with("-gzip\""));
    /// # });
    /// ```
    pub fn compression(mut self, options: impl Into<Option<CompressionOptions>>) -> Self {
        self.inner_mut().compression = options.into();
        self
    }

    /// Serve paths with a segment that starts with `.` (off by default).
    pub fn dotfiles(mut self, on: bool) -> Self {
        self.inner_mut().dotfiles = on;
        self
    }

    /// `Cache-Control` for files and listings (empty: none is sent).
    pub fn cache_control(mut self, value: &str) -> Self {
        self.inner_mut().cache_control = Some(value.to_string()).filter(|v| !v.is_empty());
        self
    }

    /// A `Range` with more ranges than this is answered with the whole file.
    pub fn max_ranges(mut self, n: usize) -> Self {
        self.inner_mut().max_ranges = n;
        self
    }

    /// Bytes per read of a file streamed by descriptor (cached small files
    /// go out in one piece).
    pub fn read_chunk(mut self, bytes: usize) -> Self {
        self.inner_mut().chunk = bytes.max(4096);
        self
    }

    /// Answers what is not found with `fallback` (an SPA's `index.html`, an
    /// API router) instead of a 404.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let fm = filemanager::FileManager::new(filemanager::Config::new(dir.path())).unwrap();
    /// let fallback = tower::service_fn(|_req: http::Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(servedir::Body::full("spa")))
    /// });
    /// let service = servedir::ServeDir::new(fm).fallback(fallback);
    /// # drop(service);
    /// ```
    pub fn fallback<G>(self, fallback: G) -> ServeDir<G> {
        ServeDir {
            inner: self.inner,
            fallback,
        }
    }
}

/// The default fallback: a 404 planned like every other answer.
#[derive(Clone, Copy, Debug, Default)]
pub struct NotFound;

impl<B> Service<Request<B>> for NotFound {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let method = Method::from_token(req.method().as_str().as_bytes());
        let p = plan::error(method, 404, "");
        std::future::ready(Ok(respond(&p, message_body(&p))))
    }
}

/// The future of a [`ServeDir`] call.
pub type ResponseFuture = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

impl<B, F, FB> Service<Request<B>> for ServeDir<F>
where
    B: Send + 'static,
    F: Service<Request<B>, Response = Response<FB>, Error = Infallible> + Clone + Send + 'static,
    F::Future: Send,
    FB: http_body::Body<Data = Bytes> + Send + 'static,
    FB::Error: Into<BoxError>,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> ResponseFuture {
        let inner = self.inner.clone();
        // The clone is the one called (tower's rule: the service polled
        // ready is the one that answers).
        let fallback = self.fallback.clone();
        let fallback = std::mem::replace(&mut self.fallback, fallback);
        // The head is borrowed across the resolve; the body (`B` need not
        // be `Sync`) only moves, to the fallback.
        let (parts, body) = req.into_parts();
        Box::pin(async move {
            match inner.serve(&parts).await {
                Some(response) => Ok(response),
                None => {
                    let mut fallback = fallback;
                    std::future::poll_fn(|cx| fallback.poll_ready(cx)).await?;
                    let response = fallback.call(Request::from_parts(parts, body)).await?;
                    Ok(response.map(Body::new))
                }
            }
        })
    }
}

/// Serves one file, whatever the request path (tower-http's `ServeFile`),
/// with [`ServeDir`]'s answers for it: conditionals, ranges, precompressed
/// siblings, compression when turned on. A missing file is a 404.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use tower::ServiceExt;
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("index.html"), "<h1>app</h1>").unwrap();
/// let fm = filemanager::FileManager::new(filemanager::Config::new(dir.path())).unwrap();
/// let spa = servedir::ServeFile::new(servedir::ServeDir::new(fm), "index.html");
/// let req = http::Request::get("/any/client/route").body(()).unwrap();
/// let res = spa.oneshot(req).await.unwrap();
/// assert_eq!(res.status(), 200);
/// assert_eq!(res.headers()["content-type"], "text/html; charset=utf-8");
/// # });
/// ```
#[derive(Clone, Debug)]
pub struct ServeFile {
    inner: Arc<Inner>,
    /// `/` and the file's path beneath the root, percent-encoded.
    target: Arc<[u8]>,
}

impl ServeFile {
    /// Serves `rel_path` (beneath the manager's root) with `dir`'s settings.
    pub fn new<F>(dir: ServeDir<F>, rel_path: &str) -> ServeFile {
        let mut target = b"/".to_vec();
        httpfile::text::push_encoded_path(&mut target, rel_path.trim_start_matches('/'));
        ServeFile {
            inner: dir.inner,
            target: target.into(),
        }
    }
}

impl<B> Service<Request<B>> for ServeFile {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> ResponseFuture {
        let inner = self.inner.clone();
        let target = self.target.clone();
        let (parts, _) = req.into_parts();
        Box::pin(async move {
            Ok(match inner.serve_target(&parts, &target).await {
                Some(response) => response,
                None => {
                    let method = Method::from_token(parts.method.as_str().as_bytes());
                    let p = plan::error(method, 404, "");
                    respond(&p, message_body(&p))
                }
            })
        })
    }
}

/// The last line of a header, as the planner reads repeated headers.
fn last(req: &Parts, name: http::header::HeaderName) -> Option<&[u8]> {
    req.headers
        .get_all(name)
        .iter()
        .next_back()
        .map(|v| httpfile::trim_ows(v.as_bytes()))
}

fn has_body(req: &Parts) -> bool {
    use http::header::{CONTENT_LENGTH, TRANSFER_ENCODING};
    req.headers.contains_key(TRANSFER_ENCODING)
        || last(req, CONTENT_LENGTH).is_some_and(|v| v.iter().any(|&b| b != b'0'))
}

impl Inner {
    fn policy(&self) -> Policy<'_> {
        Policy {
            cache_control: self.cache_control.as_deref(),
            max_ranges: self.max_ranges,
            dotfiles: self.dotfiles,
        }
    }

    /// The answer for `req`, or `None` when nothing is there (the fallback's
    /// turn).
    async fn serve(&self, req: &Parts) -> Option<Response<Body>> {
        let target = req
            .uri
            .path_and_query()
            .map_or("/", |pq| pq.as_str())
            .as_bytes();
        self.serve_target(req, target).await
    }

    /// [`serve`](Self::serve) of `target` (path and query) in place of the
    /// request's.
    async fn serve_target(&self, req: &Parts, target: &[u8]) -> Option<Response<Body>> {
        use http::header::{
            ACCEPT, ACCEPT_ENCODING, IF_MATCH, IF_MODIFIED_SINCE, IF_NONE_MATCH, IF_RANGE,
            IF_UNMODIFIED_SINCE, RANGE,
        };
        let head = RequestHead {
            method: Method::from_token(req.method.as_str().as_bytes()),
            target,
            has_body: has_body(req),
            host: last(req, http::header::HOST),
            if_match: last(req, IF_MATCH),
            if_none_match: last(req, IF_NONE_MATCH),
            if_modified_since: last(req, IF_MODIFIED_SINCE),
            if_unmodified_since: last(req, IF_UNMODIFIED_SINCE),
            if_range: last(req, IF_RANGE),
            range: last(req, RANGE),
            accept_encoding: last(req, ACCEPT_ENCODING),
            accept: last(req, ACCEPT),
        };
        let policy = self.policy();
        let mut path_buf = Vec::with_capacity(target.len());
        let path = httpfile::path::normalize_path(target, &mut path_buf);
        let path = match plan::route(&head, path, &policy) {
            Route::Serve(path) => path,
            Route::Respond(p) if p.status == 404 => return None,
            Route::Respond(p) => return Some(respond(&p, message_body(&p))),
        };
        let accept = stages::accept_encoding(head.accept_encoding);
        let siblings = stages::siblings(&accept);
        let query = Query {
            path: path.rel,
            dir_only: path.trailing_slash,
            siblings: if self.precompressed { &siblings } else { &[] },
            index: &self.index,
            listing: self.listing.then_some(ListOptions {
                hidden: self.dotfiles,
                max_entries: self.listing_max_entries,
            }),
        };
        let method = head.method;
        let p = match self.fm.resolve(&query).await {
            Ok(Resolved::File(mut f)) => {
                if let Some(options) = &self.compression {
                    stages::compress(&self.fm, &mut f, &head, &accept, options).await;
                }
                return Some(self.file(&head, f, &policy));
            }
            Ok(Resolved::Listing(listing)) => {
                let page = stages::listing_page(&listing, &head, path.rel);
                let p = plan::listing(&head, &page, &policy);
                let has_body = matches!(p.body, PlanBody::Bytes(_));
                let mut response = respond(&p, Body::empty());
                if has_body {
                    *response.body_mut() = Body::full(page.body);
                }
                return Some(response);
            }
            Ok(Resolved::Directory) => plan::redirect_to_directory(&head, &self.base, path.rel),
            Ok(Resolved::NotFound) | Err(OpenError::NotFound) | Err(OpenError::IsDir) => {
                return None
            }
            Ok(Resolved::Forbidden) | Err(OpenError::Forbidden) => {
                let why = stages::forbidden_reason(&self.fm, path.rel).await;
                plan::error(method, 403, why)
            }
            Err(OpenError::Exhausted) => plan::exhausted(method),
            Err(OpenError::Io(e)) => {
                tracing::warn!("servedir: open failed: {e}");
                plan::error(method, 500, "")
            }
        };
        Some(respond(&p, message_body(&p)))
    }

    fn file(&self, head: &RequestHead<'_>, f: ResolvedFile, policy: &Policy<'_>) -> Response<Body> {
        let etag = stages::entity_tag(&f);
        let info = stages::file_info(&f, &etag);
        let mut ranges = Vec::new();
        let now = httpfile::date::now_secs();
        let p = plan::file(head, &info, policy, now, &mut ranges, plan::random_boundary);
        stages::count_sent(&self.fm, &f, &p);
        let body = match p.body {
            PlanBody::File(range) => self.file_body(f, std::iter::once(Segment::Range(range))),
            PlanBody::Multipart(parts) => {
                let mut segments = Vec::with_capacity(2 * parts.ranges.len() + 1);
                for (i, &range) in parts.ranges.iter().enumerate() {
                    let mut part = Vec::with_capacity(128);
                    parts.write_part_head(i, &mut part);
                    segments.push(Segment::Bytes(part.into()));
                    segments.push(Segment::Range(range));
                }
                let mut closing = Vec::with_capacity(40);
                parts.write_closing(&mut closing);
                segments.push(Segment::Bytes(closing.into()));
                self.file_body(f, segments)
            }
            _ => message_body(&p),
        };
        respond(&p, body)
    }

    /// The body of `segments` of `f`: a variant's or cached bytes are
    /// shared (a `Bytes` that keeps the variant or cache entry alive, no
    /// copy), other files are read.
    fn file_body(&self, f: ResolvedFile, segments: impl IntoIterator<Item = Segment>) -> Body {
        let variant = f.variant.as_ref().map(filemanager::Variant::to_bytes);
        let file = Arc::new(f.file);
        let all = variant.or_else(|| {
            file.bytes()
                .map(|_| Bytes::from_owner(CachedBytes(file.clone())))
        });
        let segments: VecDeque<Segment> = match all {
            Some(all) => segments
                .into_iter()
                .map(|s| match s {
                    Segment::Range(ByteRange { start, end }) => {
                        Segment::Bytes(all.slice(start as usize..end as usize))
                    }
                    bytes => bytes,
                })
                .collect(),
            None => segments.into_iter().collect(),
        };
        Body::file(self.fm.clone(), file, segments, self.chunk)
    }
}

/// A cached small file's bytes, owned by the cache entry it pins.
struct CachedBytes(Arc<filemanager::CachedFile>);

impl AsRef<[u8]> for CachedBytes {
    fn as_ref(&self) -> &[u8] {
        self.0.bytes().unwrap_or_default()
    }
}

fn message_body(p: &Plan<'_>) -> Body {
    match p.body {
        PlanBody::Message(detail) => {
            let mut out = Vec::with_capacity(64);
            plan::write_message(p.status, detail, &mut out);
            Body::full(out)
        }
        PlanBody::Bytes(b) => Body::full(Bytes::copy_from_slice(b)),
        _ => Body::empty(),
    }
}

/// An `http::Response` with `p`'s status and header fields.
fn respond(p: &Plan<'_>, body: Body) -> Response<Body> {
    let mut response = Response::new(body);
    *response.status_mut() =
        StatusCode::from_u16(p.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    let mut value = Vec::with_capacity(64);
    p.headers.for_each_field(|field| {
        value.clear();
        field.value.write(&mut value);
        if let (Ok(name), Ok(v)) = (
            HeaderName::from_bytes(field.name.as_bytes()),
            HeaderValue::from_bytes(&value),
        ) {
            headers.append(name, v);
        }
    });
    response
}

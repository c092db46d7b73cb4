//! `servedir`: a [`tower::Service`](tower_service::Service) that serves a
//! directory through [`filemanager`], with the answers of the `fileserver`
//! daemon: both plan every response with [`httpfile`], so GET/HEAD, single
//! and multipart ranges, conditionals in RFC 9110 order, precompressed
//! siblings with `Vary`, index files, the directory redirect, listings,
//! symlink policies, negative caching and 405 with `Allow` behave the same,
//! and so do compressed variants when [`ServeDir::compression`] turns them
//! on (the same [`decide`] stage, the same variant tags).
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

pub use body::{Body, BoxError};
pub use decide::{self, CompressionOptions, Options};
pub use filemanager::{self, FileManager};
pub use siterules;

/// The request came over TLS, as a request extension (HTTP/1.1 over TLS
/// names no scheme in its target): what a rule's `scheme` matches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tls;

/// The client's address, as a request extension: what a rule's
/// `allow`/`deny` and `rate_limit` judge. A server that knows its peer
/// (axum's `ConnectInfo`, a proxy's header it trusts) inserts it;
/// without it every request is one client to a `rate_limit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientAddr(pub std::net::IpAddr);

use body::Segment;
use bytes::Bytes;
use decide::{Answer, Representation};
use http::header::{HeaderName, HeaderValue};
use http::request::Parts;
use http::{Request, Response, StatusCode};
use httpfile::field::{FieldName, Name};
use httpfile::plan::{self, Body as PlanBody, Plan};
use httpfile::{ByteRange, Method, RequestHead};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tower_service::Service;

/// Bytes per read of a file a response streams by descriptor, unless
/// [`ServeDir::read_chunk`] sets another size: the most file data one
/// response's body holds at a time.
pub const DEFAULT_READ_CHUNK: usize = 128 * 1024;

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
    options: Options,
    chunk: usize,
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
        ServeDir::with_options(fm, Options::default())
    }

    /// Serves `fm`'s root with `options` (the daemon's settings are this
    /// type; the builder methods below set one field each).
    pub fn with_options(fm: FileManager, options: Options) -> ServeDir<NotFound> {
        ServeDir {
            inner: Arc::new(Inner {
                fm,
                options,
                chunk: DEFAULT_READ_CHUNK,
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
        self.inner_mut().options.redirect_base = base.trim_end_matches('/').to_string();
        self
    }

    /// Names tried, in order, for a request of a directory.
    pub fn index_files<I: IntoIterator<Item = S>, S: Into<String>>(mut self, names: I) -> Self {
        self.inner_mut().options.index = names.into_iter().map(Into::into).collect();
        self
    }

    /// List a directory that has no index file (HTML, or JSON by `Accept`).
    pub fn directory_listing(mut self, on: bool) -> Self {
        self.inner_mut().options.listing = on;
        self
    }

    /// Entries in one listing at most (10000 by default); a longer
    /// directory is cut, with a note in the page. Applies once
    /// [`directory_listing`](Self::directory_listing) is on.
    pub fn listing_max_entries(mut self, n: usize) -> Self {
        self.inner_mut().options.listing_max_entries = n.max(1);
        self
    }

    /// Serve `name.br`, `name.zst` or `name.gz` for `name` by
    /// `Accept-Encoding` (on by default).
    pub fn precompressed(mut self, on: bool) -> Self {
        self.inner_mut().options.precompressed = on;
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
        self.inner_mut().options.compression = options.into();
        self
    }

    /// Serve paths with a segment that starts with `.` (off by default).
    pub fn dotfiles(mut self, on: bool) -> Self {
        self.inner_mut().options.dotfiles = on;
        self
    }

    /// `Cache-Control` for files and listings (empty: none is sent).
    pub fn cache_control(mut self, value: &str) -> Self {
        self.inner_mut().options.cache_control = Some(value.to_string()).filter(|v| !v.is_empty());
        self
    }

    /// A `Range` with more ranges than this is answered with the whole file.
    pub fn max_ranges(mut self, n: usize) -> Self {
        self.inner_mut().options.max_ranges = n;
        self
    }

    /// The site's rules: per-path headers, redirects, rewrites,
    /// `try_files`, error pages, basic auth, allow/deny, CORS and rate
    /// limits, exactly as the daemon's `[[rules]]` apply them. Allow/deny
    /// and rate limits judge the address of a [`ClientAddr`] request
    /// extension (none: an `allow` refuses, and a `rate_limit` counts
    /// every such request against one bucket).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let fm = filemanager::FileManager::new(filemanager::Config::new(dir.path())).unwrap();
    /// use servedir::siterules::{RuleSpec, Rules};
    /// let spa = RuleSpec {
    ///     try_files: vec!["{path}".into(), "/index.html".into()],
    ///     ..RuleSpec::default()
    /// };
    /// let rules = Rules::compile(&[spa]).expect("valid rules");
    /// let service = servedir::ServeDir::new(fm).rules(rules);
    /// # drop(service);
    /// ```
    pub fn rules(mut self, rules: siterules::Rules) -> Self {
        self.inner_mut().options.rules = Arc::new(rules);
        self
    }

    /// Bytes per read of a file streamed by descriptor (cached small files
    /// go out in one piece); [`DEFAULT_READ_CHUNK`] unless set.
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
fn last_in(headers: &http::HeaderMap, name: HeaderName) -> Option<&[u8]> {
    headers
        .get_all(name)
        .iter()
        .next_back()
        .map(|v| httpfile::trim_ows(v.as_bytes()))
}

/// The host a request names, as [`httpfile::head::check_host`] judges it:
/// HTTP/2's and HTTP/3's `:authority` (or, without it, `Host`); HTTP/1's
/// `Host`.
pub fn request_host<'a>(
    version: http::Version,
    uri: &'a http::Uri,
    headers: &'a http::HeaderMap,
) -> Option<&'a [u8]> {
    let host = || last_in(headers, http::header::HOST);
    match version {
        http::Version::HTTP_2 | http::Version::HTTP_3 => {
            uri.authority().map(|a| a.as_str().as_bytes()).or_else(host)
        }
        _ => host(),
    }
}

/// The planner's view of `req`, with `target` as its path and query (its
/// host: [`request_host`]). A server in front (hyper, a router) has framed
/// the request; the daemon's listeners also apply
/// [`httpfile::head::check_host`].
pub fn request_head<'a>(req: &'a Parts, target: &'a [u8]) -> RequestHead<'a> {
    with_rule_fields(file_head(req, target), req)
}

/// What every answer reads of `req`: the method, framing, host, and each
/// field the planner reads ([`RequestHead::take_field`]), in one pass over
/// the header map.
fn file_head<'a>(req: &'a Parts, target: &'a [u8]) -> RequestHead<'a> {
    let mut head = RequestHead {
        method: Method::from_token(req.method.as_str().as_bytes()),
        target,
        host: request_host(req.version, &req.uri, &req.headers),
        ..RequestHead::default()
    };
    let (mut content_length, mut transfer_encoding) = (None, false);
    for (name, value) in &req.headers {
        let name = name.as_str().as_bytes();
        if head.take_field(name, value.as_bytes()) {
            continue;
        }
        match name {
            // hyper has checked it is a number; anything else declares a
            // body.
            b"content-length" => {
                content_length = Some(
                    std::str::from_utf8(httpfile::trim_ows(value.as_bytes()))
                        .ok()
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(u64::MAX),
                )
            }
            b"transfer-encoding" => transfer_encoding = true,
            _ => {}
        }
    }
    head.has_body = httpfile::head::declares_body(content_length, transfer_encoding);
    head
}

/// `head` with what only site rules read beyond the header fields: the
/// client's address and the scheme.
fn with_rule_fields<'a>(head: RequestHead<'a>, req: &'a Parts) -> RequestHead<'a> {
    RequestHead {
        client: req.extensions.get::<ClientAddr>().map(|c| c.0),
        tls: req.uri.scheme() == Some(&http::uri::Scheme::HTTPS)
            || req.extensions.get::<Tls>().is_some(),
        ..head
    }
}

impl Inner {
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
    /// request's: `decide`'s answer as an `http::Response`.
    async fn serve_target(&self, req: &Parts, target: &[u8]) -> Option<Response<Body>> {
        // Without rules nothing reads the client or the scheme: two
        // extension lookups a request saves.
        let head = if self.options.rules.is_empty() {
            file_head(req, target)
        } else {
            request_head(req, target)
        };
        let mut path = Vec::with_capacity(target.len());
        let decision = decide::decide(&self.fm, &self.options, &head, &mut path).await;
        if matches!(decision.answer, Answer::NotFound) {
            return None;
        }
        let mut ranges = Vec::new();
        let p = decision.plan(&head, &mut ranges);
        let mut response = respond(&p, Body::empty());
        // The body's pieces are taken from the plan before the file is
        // moved out of the decision the plan borrows.
        let segments = match p.body {
            PlanBody::File(range) => vec![Segment::Range(range)],
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
                segments
            }
            PlanBody::Message(_) => {
                *response.body_mut() = message_body(&p);
                return Some(response);
            }
            PlanBody::Bytes(_) => {
                let Answer::Listing(page) = decision.answer else {
                    unreachable!("only a listing's plan has a Bytes body")
                };
                *response.body_mut() = Body::full(page.body);
                return Some(response);
            }
            PlanBody::Empty => return Some(response),
        };
        if let Some(r) = decision.into_representation() {
            *response.body_mut() = self.file_body(r, segments);
        }
        Some(response)
    }

    /// The body of `segments` of `r`: a variant's or cached bytes are
    /// shared (a `Bytes` that keeps the variant or cache entry alive, no
    /// copy), other files are read.
    fn file_body(&self, r: Representation, segments: Vec<Segment>) -> Body {
        let segments: VecDeque<Segment> = match r.shared_bytes() {
            Some(all) => segments
                .into_iter()
                .map(|s| match s {
                    Segment::Range(ByteRange { start, end }) => {
                        Segment::Bytes(all.slice(start as usize..end as usize))
                    }
                    bytes => bytes,
                })
                .collect(),
            None => segments.into(),
        };
        Body::file(self.fm.clone(), Arc::new(r.file), segments, self.chunk)
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

/// The response for a plan that carries its own body (an error, a
/// redirect, a `204`): status, header fields and message. A server that
/// rejects a request before [`ServeDir`] sees it answers with this, so its
/// answer reads like every other.
///
/// ```
/// let plan = httpfile::plan::error(httpfile::Method::Get, 400, "invalid Host");
/// let res = servedir::plan_response(&plan);
/// assert_eq!(res.status(), 400);
/// assert_eq!(res.headers()["content-length"], "30");
/// ```
pub fn plan_response(p: &Plan<'_>) -> Response<Body> {
    respond(p, message_body(p))
}

/// An `http::Response` with `p`'s status and header fields. The names
/// `httpfile` writes are `http`'s constants and its fixed values static
/// ones, so only the values a response computes (length, dates, tag) are
/// parsed and copied; the map is sized once for them and for what a
/// server adds after (`Server`, `Date`, `Alt-Svc`). Against parsing every
/// name and value: 0.93-0.95x the instructions of a TLS HTTP/2 request
/// for a cached 1 KiB file (callgrind; benches/HISTORY.md, "HTTP/2
/// without hyper").
fn respond(p: &Plan<'_>, body: Body) -> Response<Body> {
    let mut response = Response::new(body);
    *response.status_mut() =
        StatusCode::from_u16(p.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    headers.reserve(12);
    let mut value = Vec::with_capacity(64);
    p.headers.for_each_field(|field| {
        let Some(name) = header_name(field.name) else {
            return;
        };
        let v = match field.value {
            plan::FieldValue::Text(t) => match fixed_value(t) {
                Some(v) => Ok(v),
                None => HeaderValue::from_str(t),
            },
            computed => {
                value.clear();
                computed.write(&mut value);
                HeaderValue::from_bytes(&value)
            }
        };
        if let Ok(v) = v {
            headers.append(name, v);
        }
    });
    response
}

/// A plan's field name as an `http` name: those most responses carry
/// as `http`'s constants, the planner's others from their lower-case
/// spelling (no parse), a rule's parsed.
fn header_name(name: FieldName<'_>) -> Option<HeaderName> {
    use http::header;
    let FieldName::Known(name) = name else {
        return HeaderName::from_bytes(name.as_str().as_bytes()).ok();
    };
    Some(match name {
        Name::ContentType => header::CONTENT_TYPE,
        Name::ContentLength => header::CONTENT_LENGTH,
        Name::AcceptRanges => header::ACCEPT_RANGES,
        Name::LastModified => header::LAST_MODIFIED,
        Name::ETag => header::ETAG,
        Name::CacheControl => header::CACHE_CONTROL,
        Name::Vary => header::VARY,
        Name::ContentEncoding => header::CONTENT_ENCODING,
        Name::ContentRange => header::CONTENT_RANGE,
        Name::Location => header::LOCATION,
        Name::Allow => header::ALLOW,
        other => HeaderName::from_static(other.lower()),
    })
}

/// The values most responses carry, as static `HeaderValue`s: cloning one
/// copies no bytes.
fn fixed_value(text: &str) -> Option<HeaderValue> {
    const BYTES: HeaderValue = HeaderValue::from_static("bytes");
    const ACCEPT_ENCODING: HeaderValue = HeaderValue::from_static("Accept-Encoding");
    const NO_CACHE: HeaderValue = HeaderValue::from_static("no-cache");
    Some(match text {
        "bytes" => BYTES,
        "Accept-Encoding" => ACCEPT_ENCODING,
        "no-cache" => NO_CACHE,
        _ => return None,
    })
}

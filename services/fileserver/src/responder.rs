//! HTTP/3's responder (`h3conn`): a request in, the settings in force for
//! it (re-read when a reload bumped their generation), the `ServeDir` of
//! its site, and a response whose body counts and logs it once it ends or
//! drops half sent.
//!
//! ```text
//! Responder::call -> host rule, site rules' inputs -> ServeDir::call
//!   -> Response<Logged>: Server; Logged: bytes sent -> Drop: count + log
//! ```

use crate::accesslog::RequestLine;
use crate::exchange::Exchange;
use crate::state::{ConnContext, Live};
use bytes::Bytes;
use http::header::{HeaderValue, DATE, REFERER, SERVER, USER_AGENT};
use http::{Request, Response};
use http_body::{Body as HttpBody, Frame, SizeHint};
use std::cell::RefCell;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tower_service::Service as _;

/// The most file data one read of an answer's body brings: servedir's
/// default, which the daemon keeps.
pub(crate) const READ_CHUNK: u64 = servedir::DEFAULT_READ_CHUNK as u64;

/// The connection's service: the settings in force at each request, the
/// `ServeDir` built from them, and the bookkeeping that makes its
/// responses counted and logged.
#[derive(Debug)]
pub(crate) struct Responder {
    ctx: Rc<ConnContext>,
    /// The settings in force and their generation, re-read only when a
    /// reload bumped it (one relaxed load per request, like conn.rs).
    live: RefCell<(Arc<Live>, u64)>,
    peer: SocketAddr,
}

impl Responder {
    /// The responder of one HTTP/3 connection from `peer` (`h3conn`):
    /// the same answers, counting and log as the TCP listeners', with the
    /// flow control and idle rule QUIC itself enforces.
    pub(crate) fn for_http3(ctx: Rc<ConnContext>, peer: SocketAddr) -> Responder {
        let live = ctx.live();
        Responder {
            ctx,
            live: RefCell::new(live),
            peer,
        }
    }

    /// The pace of a response starting now (`limit_rate`).
    pub(crate) fn pace(&self) -> Option<crate::pace::Pace> {
        let live = self.live();
        let l = &live.s.limits;
        crate::pace::Pace::new(l.limit_rate, l.limit_rate_after)
    }

    /// `header_read_timeout` (a request's head must arrive within it) and
    /// `send_timeout` (each step of an answer must make progress within it).
    pub(crate) fn timeouts(&self) -> (Duration, Duration) {
        let live = self.live();
        (
            live.s.limits.header_read_timeout,
            live.s.limits.send_timeout,
        )
    }

    fn live(&self) -> Arc<Live> {
        let mut live = self.live.borrow_mut();
        if self.ctx.generation() != live.1 {
            *live = self.ctx.live();
        }
        live.0.clone()
    }
}

/// The future of one request's answer.
pub(crate) type ResponseFuture = Pin<Box<dyn Future<Output = Response<Logged>>>>;

impl Responder {
    /// The answer to `req`, counted and logged once its body ends or is
    /// dropped.
    pub(crate) fn call<B: Send + 'static>(&self, mut req: Request<B>) -> ResponseFuture {
        let t0 = Instant::now();
        let live = self.live();
        if !live.s.serve.rules.is_empty() || !live.s.sites.is_empty() {
            // What the site's rules judge: the client behind trusted
            // proxies, and the scheme.
            let header = |name: &str| req.headers().get(name).map(HeaderValue::as_bytes);
            let client = crate::http::forwarded::client_addr(
                self.peer.ip(),
                &live.s.trusted_proxies,
                header("forwarded"),
                header("x-forwarded-for"),
            );
            req.extensions_mut().insert(servedir::ClientAddr(client));
            req.extensions_mut().insert(servedir::Tls);
        }
        let request = RequestFields::of(&req, live.access.is_some());
        let host = servedir::request_host(req.version(), req.uri(), req.headers());
        let rejected = host_rule(&req, host).err();
        let mut files = live.service_for(host).clone();
        let site = live.s.site_for(host);
        let (ctx, peer) = (self.ctx.clone(), self.peer);
        Box::pin(async move {
            let response = match rejected {
                // The HTTP/1.1 parser's rule (`http::request`), which h2
                // and h3 leave to the server: every listener rejects alike.
                Some(why) => servedir::plan_response(&httpfile::plan::reject(400, why)),
                None => match files.call(req).await {
                    Ok(r) => r,
                    Err(never) => match never {},
                },
            };
            let (mut parts, body) = response.into_parts();
            parts
                .headers
                .insert(SERVER, HeaderValue::from_static(httpfile::encode::SERVER));
            // The TCP engines write Date with every head; h3 adds none.
            if !parts.headers.contains_key(DATE) {
                httpfile::date::with_now(|_, date| {
                    if let Ok(v) = HeaderValue::from_bytes(date) {
                        parts.headers.insert(DATE, v);
                    }
                });
            }
            let status = parts.status.as_u16();
            let body = Logged {
                body,
                sent: 0,
                ended: false,
                done: Some(Done {
                    ctx,
                    live,
                    peer,
                    request,
                    status,
                    site,
                    t0,
                }),
            };
            Response::from_parts(parts, body)
        })
    }
}

/// `Host` as RFC 9112 3.2 and RFC 9113 8.3.1 require it
/// ([`httpfile::head::check_host`], what the HTTP/1.1 engine's parser
/// applies): HTTP/1.1 names one valid `Host`, HTTP/2 a valid authority.
/// `host` is the one that counts (`servedir::request_host`).
fn host_rule<B>(req: &Request<B>, host: Option<&[u8]>) -> Result<(), &'static str> {
    let hosts = req.headers().get_all(http::header::HOST).iter().count();
    httpfile::head::check_host(req.version() == http::Version::HTTP_11, hosts, host)
}

/// What the counters and the access log need of a request, kept until its
/// response ends: the method always, the rest only while a log is on.
#[derive(Debug)]
struct RequestFields {
    method: http::Method,
    log: Option<LogFields>,
}

#[derive(Debug)]
struct LogFields {
    target: String,
    forwarded: Option<HeaderValue>,
    x_forwarded_for: Option<HeaderValue>,
    referer: Option<HeaderValue>,
    user_agent: Option<HeaderValue>,
    /// `:authority`, or `Host`.
    host: Option<String>,
    authorization: Option<HeaderValue>,
}

impl RequestFields {
    fn of<B>(req: &Request<B>, logged: bool) -> RequestFields {
        let header = |name| req.headers().get(name).cloned();
        RequestFields {
            method: req.method().clone(),
            log: logged.then(|| LogFields {
                target: req
                    .uri()
                    .path_and_query()
                    .map_or("/", |pq| pq.as_str())
                    .to_string(),
                forwarded: header(http::header::FORWARDED),
                x_forwarded_for: header(http::header::HeaderName::from_static("x-forwarded-for")),
                referer: header(REFERER),
                user_agent: header(USER_AGENT),
                host: req
                    .uri()
                    .authority()
                    .map(|a| a.as_str().to_string())
                    .or_else(|| {
                        header(http::header::HOST).and_then(|h| h.to_str().ok().map(str::to_string))
                    }),
                authorization: header(http::header::AUTHORIZATION),
            }),
        }
    }
}

/// A response's accounting, settled when its body is dropped.
#[derive(Debug)]
struct Done {
    ctx: Rc<ConnContext>,
    /// The settings the request was answered under (their access log).
    live: Arc<Live>,
    peer: SocketAddr,
    request: RequestFields,
    status: u16,
    /// The `[[sites]]` table that answered (`None`: the default site).
    site: Option<usize>,
    t0: Instant,
}

/// `servedir`'s body, counting what the connection takes of it; on drop the
/// response is counted and logged with the bytes it sent (all of them, or
/// fewer when the client left or reset the stream).
#[derive(Debug)]
pub(crate) struct Logged {
    body: servedir::Body,
    sent: u64,
    ended: bool,
    done: Option<Done>,
}

impl HttpBody for Logged {
    type Data = Bytes;
    type Error = servedir::BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.sent += data.len() as u64;
                }
            }
            Poll::Ready(None) => this.ended = true,
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        let Some(d) = self.done.take() else {
            return;
        };
        let log = d.request.log.as_ref();
        fn value(v: Option<&HeaderValue>) -> Option<&[u8]> {
            v.map(HeaderValue::as_bytes)
        }
        d.ctx.finish(
            &d.live,
            &Exchange {
                peer: d.peer.ip(),
                request: Some(RequestLine {
                    method: d.request.method.as_str(),
                    target: log.map_or(&b""[..], |f| f.target.as_bytes()),
                    version: "HTTP/3.0",
                }),
                status: d.status,
                bytes: self.sent,
                // Every byte of these bodies is read through the backend;
                // whether the page cache held it is not known here.
                cold: 0,
                completed: self.ended || self.body.is_end_stream(),
                forwarded: value(log.and_then(|f| f.forwarded.as_ref())),
                x_forwarded_for: value(log.and_then(|f| f.x_forwarded_for.as_ref())),
                referer: value(log.and_then(|f| f.referer.as_ref())),
                user_agent: value(log.and_then(|f| f.user_agent.as_ref())),
                host: log.and_then(|f| f.host.as_deref()).map(str::as_bytes),
                tls: true,
                authorization: value(log.and_then(|f| f.authorization.as_ref())),
                site: d.site,
                duration: d.t0.elapsed(),
            },
        );
    }
}

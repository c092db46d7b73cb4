//! The step every engine takes between a parsed request head and
//! `decide`: which site answers, under which serving options, through
//! which file manager, and who the client is behind trusted proxies.
//! Each engine reads its wire into an `httpfile::RequestHead` (and the
//! few fields only this step reads, [`Sent`]), enters here, and hands
//! the result to `decide::decide_checked`.
//!
//! ```text
//! head (engine) -> RequestContext::enter: Host rule (400 plan on failure)
//!   -> site (Settings::site_for) -> its serve options -> the client
//!      behind trusted proxies, only when the site has rules
//!   -> its file manager => RequestContext { site, serve, fm, client }
//! ```
//!
//! HTTP/1.1's parser applies the Host rule itself (it knows the framing),
//! so that engine takes [`RequestContext::of`], the same step without the
//! rule; it costs what the engine's own lookups cost before (no
//! allocation, no copy of the head unless the site has rules).

use crate::files::Files;
use crate::state::Live;
use httpfile::plan::Plan;
use httpfile::RequestHead;
use std::net::IpAddr;

/// What a request is decided with, beside its head.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestContext<'l> {
    /// The `[[sites]]` table that answers (`None`: the default site).
    pub site: Option<usize>,
    /// Its serving options.
    pub serve: &'l decide::Options,
    /// Its files.
    pub fm: &'l filemanager::FileManager,
    /// The client behind trusted proxies, when the site's rules judge it
    /// (`None` without rules: nothing reads it).
    pub client: Option<IpAddr>,
}

/// A request the Host rule refused, and why.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Malformed(pub &'static str);

impl Malformed {
    /// The 400 it is answered with.
    pub(crate) fn plan(self) -> Plan<'static> {
        httpfile::plan::reject(400, self.0)
    }
}

/// What the step reads of a request beyond its head: how many `Host`
/// lines came (the `:authority` is the head's `host`), and the fields
/// that name the client behind a proxy.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Sent<'a> {
    /// `Host` lines.
    pub hosts: usize,
    /// `Forwarded`.
    pub forwarded: Option<&'a [u8]>,
    /// `X-Forwarded-For`.
    pub x_forwarded_for: Option<&'a [u8]>,
}

/// A head HTTP/2 or HTTP/3 decoded read into a `RequestHead` (its host
/// the `:authority`, else a `Host` field), with what
/// [`RequestContext::enter`] reads beside it. `has_body`: a body follows.
pub(crate) fn read_head(req: &h2wire::Request, has_body: bool) -> (RequestHead<'_>, Sent<'_>) {
    let mut head = RequestHead {
        method: httpfile::Method::from_token(req.method()),
        target: req.path().unwrap_or(b"/"),
        has_body,
        ..RequestHead::default()
    };
    let (mut sent, mut host) = (Sent::default(), None);
    for (name, value) in req.fields() {
        if head.take_field(name, value) {
            continue;
        }
        match name {
            b"host" => {
                sent.hosts += 1;
                host = Some(value);
            }
            b"forwarded" => sent.forwarded = Some(value),
            b"x-forwarded-for" => sent.x_forwarded_for = Some(value),
            _ => {}
        }
    }
    head.host = req.authority().or(host);
    (head, sent)
}

impl<'l> RequestContext<'l> {
    /// The context of `head` from `peer` over a connection whose framing
    /// leaves the Host rule to the server (HTTP/2, HTTP/3): the rule
    /// ([`httpfile::head::check_host`], `head.host` the one that counts),
    /// then [`of`](Self::of). Fills in what the site's rules judge of the
    /// head (`client`, `tls`). `Err`: the request is malformed, answered
    /// with [`Malformed::plan`].
    pub(crate) fn enter<'a>(
        live: &'l Live,
        files: &'l Files,
        peer: IpAddr,
        tls: bool,
        head: &mut RequestHead<'a>,
        sent: Sent<'a>,
    ) -> Result<RequestContext<'l>, Malformed> {
        httpfile::head::check_host(false, sent.hosts, head.host).map_err(Malformed)?;
        let rc = RequestContext::of(live, files, peer, head.host, sent);
        head.client = rc.client;
        head.tls = tls;
        Ok(rc)
    }

    /// The context of a request naming `host`, whose Host rule was
    /// applied already (the HTTP/1.1 parser's).
    #[inline]
    pub(crate) fn of(
        live: &'l Live,
        files: &'l Files,
        peer: IpAddr,
        host: Option<&[u8]>,
        sent: Sent<'_>,
    ) -> RequestContext<'l> {
        let site = live.s.site_for(host);
        let serve = site.map_or(&live.s.serve, |i| &live.s.sites[i].serve);
        let client = (!serve.rules.is_empty()).then(|| {
            crate::http::forwarded::client_addr(
                peer,
                &live.s.trusted_proxies,
                sent.forwarded,
                sent.x_forwarded_for,
            )
        });
        RequestContext {
            site,
            serve,
            fm: files.manager_for(site),
            client,
        }
    }
}

//! One exchange's record, finished in one place for every listener: the
//! engines (`conn`, `h2conn`, `h3conn`) fill an
//! [`Exchange`] when a response that was started ends (complete or not),
//! and [`ConnContext::finish`] counts it, times it and logs it. An engine
//! only says what happened; what is counted and how a line reads is here.
//! HTTP/2 and HTTP/3 read what they log of a decoded head alike
//! ([`LogFields`]) and make it an exchange with its [`Outcome`].

use crate::accesslog::{Entry, RequestLine};
use crate::state::{ConnContext, Live};
use crate::stats::MethodLabel;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// What one request and its response came to.
#[derive(Debug)]
pub(crate) struct Exchange<'a> {
    /// The socket peer.
    pub peer: IpAddr,
    /// The request line; `None` for a head rejected before it parsed.
    pub request: Option<RequestLine<'a>>,
    /// Status sent.
    pub status: u16,
    /// Body bytes handed to the connection.
    pub bytes: u64,
    /// Of `bytes`, bytes read through the backend because they were cold.
    pub cold: u64,
    /// The whole response was written (false: the client went away, a
    /// send timed out, or the file changed mid-send).
    pub completed: bool,
    /// `Forwarded` and `X-Forwarded-For`, read only for the log's client
    /// address and only from `trusted_proxies`.
    pub forwarded: Option<&'a [u8]>,
    /// See `forwarded`.
    pub x_forwarded_for: Option<&'a [u8]>,
    /// `Referer`.
    pub referer: Option<&'a [u8]>,
    /// `User-Agent`.
    pub user_agent: Option<&'a [u8]>,
    /// `Host` (HTTP/2 and HTTP/3: `:authority`) as sent.
    pub host: Option<&'a [u8]>,
    /// Over TLS (the scheme logged is `https`).
    pub tls: bool,
    /// `Authorization`, read only for the user it names.
    pub authorization: Option<&'a [u8]>,
    /// The `[[sites]]` table that answered (`None`: the default site):
    /// the counters' `site` label.
    pub site: Option<usize>,
    /// From the head's arrival to the response's end.
    pub duration: Duration,
}

/// A request's fields as its log line and counters read them (HTTP/2,
/// HTTP/3).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LogFields<'a> {
    pub method: &'a [u8],
    pub target: &'a [u8],
    pub referer: Option<&'a [u8]>,
    pub user_agent: Option<&'a [u8]>,
    pub forwarded: Option<&'a [u8]>,
    pub x_forwarded_for: Option<&'a [u8]>,
    pub host: Option<&'a [u8]>,
    pub authorization: Option<&'a [u8]>,
}

/// What one exchange's counters and log line say besides the request.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// 0 until a plan is made.
    pub status: u16,
    pub t0: Instant,
    /// The `[[sites]]` table that answered (`None`: the default site).
    pub site: Option<usize>,
    /// Body bytes handed to the connection so far.
    pub sent: u64,
    /// Of `sent`, bytes read through the backend.
    pub cold: u64,
    pub completed: bool,
}

impl Outcome {
    /// An exchange begun at `t0`: no plan yet, nothing sent.
    pub(crate) fn begun(t0: Instant) -> Outcome {
        Outcome {
            status: 0,
            t0,
            site: None,
            sent: 0,
            cold: 0,
            completed: false,
        }
    }
}

impl<'a> LogFields<'a> {
    /// Read from a decoded head (HTTP/2's or HTTP/3's): the method and
    /// target always (the counters' labels), the rest only for an access
    /// log (`logged`), each the first sent; the host is `:authority`, else
    /// a `host` field.
    pub(crate) fn of(req: &'a h2wire::Request, logged: bool) -> LogFields<'a> {
        let mut f = LogFields {
            method: req.method(),
            target: req.path().unwrap_or_default(),
            ..LogFields::default()
        };
        if !logged {
            return f;
        }
        f.host = req.authority();
        for (name, value) in req.fields() {
            let slot = match name {
                b"referer" => &mut f.referer,
                b"user-agent" => &mut f.user_agent,
                b"forwarded" => &mut f.forwarded,
                b"x-forwarded-for" => &mut f.x_forwarded_for,
                b"host" => &mut f.host,
                b"authorization" => &mut f.authorization,
                _ => continue,
            };
            slot.get_or_insert(value);
        }
        f
    }

    /// The exchange of this request from `peer` over `version`, which
    /// came to `o`.
    pub(crate) fn exchange(
        self,
        peer: IpAddr,
        version: &'static str,
        tls: bool,
        o: &Outcome,
    ) -> Exchange<'a> {
        Exchange {
            peer,
            request: Some(RequestLine {
                method: std::str::from_utf8(self.method).unwrap_or("-"),
                target: self.target,
                version,
            }),
            status: o.status,
            bytes: o.sent,
            cold: o.cold,
            completed: o.completed,
            forwarded: self.forwarded,
            x_forwarded_for: self.x_forwarded_for,
            referer: self.referer,
            user_agent: self.user_agent,
            host: self.host,
            tls,
            authorization: self.authorization,
            site: o.site,
            duration: o.t0.elapsed(),
        }
    }
}

impl Exchange<'_> {
    /// The `method` label of the counters.
    pub(crate) fn method(&self) -> MethodLabel {
        match self.request.map(|r| r.method) {
            Some("GET") => MethodLabel::Get,
            Some("HEAD") => MethodLabel::Head,
            _ => MethodLabel::Other,
        }
    }
}

impl ConnContext {
    /// Counts `x` in this worker's counters and duration histogram, and logs
    /// it when `live` has an access log.
    pub(crate) fn finish(&self, live: &Live, x: &Exchange<'_>) {
        let stats = self.stats.site(x.site);
        stats.record(x.method(), x.status, x.bytes, x.completed);
        if x.cold > 0 {
            stats.record_cold(x.cold);
        }
        stats.record_duration(x.duration);
        let Some(log) = &live.access else {
            return;
        };
        let client = crate::http::forwarded::client_addr(
            x.peer,
            &live.s.trusted_proxies,
            x.forwarded,
            x.x_forwarded_for,
        );
        let user = x.authorization.and_then(siterules::basic_auth_user);
        log.log(&Entry {
            client,
            peer: x.peer,
            time_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            request: x.request,
            status: x.status,
            bytes: x.bytes,
            completed: x.completed,
            referer: x.referer,
            user_agent: x.user_agent,
            host: x.host,
            scheme: if x.tls { "https" } else { "http" },
            user: user.as_deref(),
            duration: x.duration,
        });
    }
}

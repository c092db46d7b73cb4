//! Access log: workers format a line and `try_send` it to a writer thread;
//! a full queue drops the line (counted) instead of blocking a worker on disk.
//!
//! ```text
//! worker --try_send(String)--> [bounded queue 64Ki] --> writer thread --> BufWriter(file|stdout)
//!                                                      flushes when the queue runs dry
//! ```

use crate::config::{AccessLog, AccessLogFormat};
use std::borrow::Cow;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::Duration;

/// A handle workers log through; dropping every clone stops the writer after it drains.
#[derive(Clone, Debug)]
pub(crate) struct AccessLogger {
    tx: SyncSender<String>,
    /// Line format.
    pub format: AccessLogFormat,
    dropped: Arc<AtomicU64>,
}

/// The parsed request line of a logged response.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestLine<'a> {
    /// Method.
    pub method: &'a str,
    /// Target as sent.
    pub target: &'a [u8],
    /// `HTTP/1.0`, `HTTP/1.1` or `HTTP/2.0`.
    pub version: &'static str,
}

/// One response's fields.
#[derive(Debug)]
pub(crate) struct Entry<'a> {
    /// Client address: the socket peer, or the client a trusted proxy
    /// forwarded for (`trusted_proxies`).
    pub client: std::net::IpAddr,
    /// The socket peer.
    pub peer: std::net::IpAddr,
    /// Unix milliseconds.
    pub time_ms: u64,
    /// The request line; `None` for a head rejected before it parsed
    /// (logged as `"-"`, like nginx).
    pub request: Option<RequestLine<'a>>,
    /// Status code.
    pub status: u16,
    /// Body bytes actually sent.
    pub bytes: u64,
    /// Whether the whole response was written (false: the client went
    /// away or a send timed out midway).
    pub completed: bool,
    /// Referer.
    pub referer: Option<&'a [u8]>,
    /// User-Agent.
    pub user_agent: Option<&'a [u8]>,
    /// `Host` (`:authority`) as sent: which site was asked for.
    pub host: Option<&'a [u8]>,
    /// `http` or `https`.
    pub scheme: &'static str,
    /// The user a `Basic` `Authorization` names (right password or not).
    pub user: Option<&'a [u8]>,
    /// Handling time.
    pub duration: Duration,
}

impl AccessLogger {
    /// Starts a writer thread for `target` (None for `off`).
    pub(crate) fn start(
        target: &AccessLog,
        format: AccessLogFormat,
        dropped: Arc<AtomicU64>,
    ) -> std::io::Result<Option<(AccessLogger, std::thread::JoinHandle<()>)>> {
        let out: Box<dyn Write + Send> = match target {
            AccessLog::Off => return Ok(None),
            AccessLog::Stdout => Box::new(std::io::stdout()),
            AccessLog::File(p) => Box::new(open_file(p)?),
        };
        let (tx, rx) = sync_channel(65536);
        let handle = std::thread::Builder::new()
            .name("access-log".into())
            .spawn(move || writer(rx, out))?;
        Ok(Some((
            AccessLogger {
                tx,
                format,
                dropped,
            },
            handle,
        )))
    }

    /// Formats and queues one line; never blocks.
    pub(crate) fn log(&self, e: &Entry<'_>) {
        let line = match self.format {
            AccessLogFormat::Combined => combined(e),
            AccessLogFormat::VhostCombined => {
                format!("{} {}", field_or_dash(e.host), combined(e))
            }
            AccessLogFormat::Json => json(e),
        };
        match self.tx.try_send(line) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.dropped.fetch_add(1, Relaxed);
            }
        }
    }
}

/// Opens (creates) the access log file for appending; the error names the
/// key and the path, as the start and a reload report it.
pub(crate) fn open_file(p: &std::path::Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(p)
        .map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("access_log: cannot open {}: {e}", p.display()),
            )
        })
}

fn writer(rx: Receiver<String>, out: Box<dyn Write + Send>) {
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, out);
    while let Ok(line) = rx.recv() {
        let _ = out.write_all(line.as_bytes());
        while let Ok(line) = rx.try_recv() {
            let _ = out.write_all(line.as_bytes());
        }
        let _ = out.flush();
    }
    let _ = out.flush();
}

/// A client-sent value for a combined-format line, escaped as nginx does:
/// `"`, `\\`, control bytes and bytes >= 0x7f become `\\xHH`, so a value can
/// neither end its field nor write terminal escapes into whoever reads the log.
fn escape_clf(v: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(v.len());
    for &b in v {
        if b == b'"' || b == b'\\' || !(0x20..0x7f).contains(&b) {
            out.push_str("\\x");
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xf)]));
        } else {
            out.push(char::from(b));
        }
    }
    out
}

fn field_or_dash(v: Option<&[u8]>) -> String {
    v.map_or_else(|| "-".to_string(), escape_clf)
}

fn clf_time(secs: u64) -> String {
    let mut d = [0u8; 29];
    httpfile::date::fmt_http_date(secs, &mut d);
    // "Sun, 06 Nov 1994 08:49:37 GMT" -> "06/Nov/1994:08:49:37 +0000"
    let s = std::str::from_utf8(&d).unwrap_or_default();
    format!(
        "{}/{}/{}:{} +0000",
        &s[5..7],
        &s[8..11],
        &s[12..16],
        &s[17..25]
    )
}

fn combined(e: &Entry<'_>) -> String {
    let request = match e.request {
        // The method too: every engine refuses a method that is not a
        // token, but the log does not count on it.
        Some(r) => format!(
            "{} {} {}",
            escape_clf(r.method.as_bytes()),
            escape_clf(r.target),
            r.version
        ),
        None => "-".to_string(),
    };
    format!(
        "{} - {} [{}] \"{}\" {} {} \"{}\" \"{}\"\n",
        e.client,
        field_or_dash(e.user.filter(|u| !u.is_empty())),
        clf_time(e.time_ms / 1000),
        request,
        e.status,
        e.bytes,
        field_or_dash(e.referer),
        field_or_dash(e.user_agent),
    )
}

fn json(e: &Entry<'_>) -> String {
    let text = |v: &[u8]| terminal_safe(&String::from_utf8_lossy(v)).into_owned();
    let mut s = serde_json::json!({
        "time": e.time_ms / 1000,
        "time_ms": e.time_ms,
        "host": e.host.map(text),
        "scheme": e.scheme,
        "user": e.user.map(text),
        "remote": e.client.to_string(),
        "peer": e.peer.to_string(),
        "method": e.request.map(|r| terminal_safe(r.method).into_owned()),
        "target": e.request.map(|r| text(r.target)),
        "version": e.request.map(|r| r.version),
        "status": e.status,
        "bytes": e.bytes,
        "completed": e.completed,
        "referer": e.referer.map(text),
        "user_agent": e.user_agent.map(text),
        "duration_us": e.duration.as_micros() as u64,
    })
    .to_string();
    s.push('\n');
    s
}

/// `v` with DEL and the C1 controls (U+0080-U+009F, which terminals
/// read as escapes too) replaced by U+FFFD: JSON escapes the C0 controls
/// itself, and not these.
fn terminal_safe(v: &str) -> Cow<'_, str> {
    let unsafe_char = |c: char| ('\u{7f}'..='\u{9f}').contains(&c);
    if !v.contains(unsafe_char) {
        return Cow::Borrowed(v);
    }
    Cow::Owned(v.replace(unsafe_char, "\u{fffd}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        let e = Entry {
            client: "127.0.0.1".parse().unwrap(),
            peer: "127.0.0.1".parse().unwrap(),
            time_ms: 784_111_777_123,
            request: Some(RequestLine {
                method: "GET",
                target: b"/a\"b",
                version: "HTTP/1.1",
            }),
            status: 200,
            bytes: 12,
            completed: true,
            referer: None,
            user_agent: Some(b"curl/8"),
            host: Some(b"example.com"),
            scheme: "https",
            user: None,
            duration: Duration::from_micros(5),
        };
        assert_eq!(
            combined(&e),
            "127.0.0.1 - - [06/Nov/1994:08:49:37 +0000] \"GET /a\\x22b HTTP/1.1\" 200 12 \"-\" \"curl/8\"\n"
        );
        let v: serde_json::Value = serde_json::from_str(&json(&e)).unwrap();
        assert_eq!(v["status"], 200);
        assert_eq!(v["target"], "/a\"b");
        assert_eq!(v["completed"], true);
        assert_eq!(v["time_ms"], 784_111_777_123u64);
        assert_eq!(
            (v["host"].as_str(), v["scheme"].as_str()),
            (Some("example.com"), Some("https"))
        );
        // The user, escaped, where combined has its `-`; a vhost line
        // starts with the Host.
        let authed = Entry {
            user: Some(b"al\"ice"),
            host: Some(b"a b"),
            ..e
        };
        assert!(
            combined(&authed).starts_with("127.0.0.1 - al\\x22ice ["),
            "{}",
            combined(&authed)
        );
        let v: serde_json::Value = serde_json::from_str(&json(&authed)).unwrap();
        assert_eq!(v["user"], "al\"ice");
        let hostile = Entry {
            user_agent: Some(b"\x1b[31mred\\\"\n\xff"),
            ..e
        };
        assert!(
            combined(&hostile).ends_with("\"\\x1B[31mred\\x5C\\x22\\x0A\\xFF\"\n"),
            "{}",
            combined(&hostile)
        );
        // A method is escaped like every other field a client sends, in
        // both formats.
        let forged = Entry {
            request: Some(RequestLine {
                method: "GET / HTTP/1.1\" 200 1 \"-\" \"x\"\n\x1b[2J",
                target: b"/",
                version: "HTTP/2.0",
            }),
            user_agent: Some(b"ua\xc2\x9b31m"),
            ..e
        };
        let line = combined(&forged);
        assert_eq!(line.matches('"').count(), 6, "{line}");
        assert_eq!(line.matches('\n').count(), 1, "{line}");
        assert!(!line.contains('\x1b'), "{line}");
        let j = json(&forged);
        assert!(!j.contains('\u{9b}') && !j.contains('\x1b'), "{j}");
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(v["user_agent"], "ua\u{fffd}31m");
        let rejected = Entry {
            request: None,
            status: 400,
            completed: false,
            ..e
        };
        assert!(combined(&rejected).contains("] \"-\" 400 12 "));
        let v: serde_json::Value = serde_json::from_str(&json(&rejected)).unwrap();
        assert!(v["method"].is_null() && v["target"].is_null());
        assert_eq!(v["completed"], false);
    }
}

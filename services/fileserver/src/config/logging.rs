//! The daemon's own log and the access log: `log_level`, `log_format`,
//! `access_log`, `access_log_format` (top-level keys).

use super::restart::Restart;
use super::values::edit_distance;
use super::{err, ConfigError};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The logging keys of the top table.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(default)]
pub struct LogConfig {
    /// `error`, `warn`, `info`, `debug`, `trace` or a tracing filter.
    pub log_level: String,
    /// The daemon's own log on stderr: `text` or `json`.
    pub log_format: String,
    /// `off`, `stdout` or a file path.
    pub access_log: String,
    /// `combined` or `json`.
    pub access_log_format: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            log_level: "info".into(),
            log_format: "text".into(),
            access_log: "off".into(),
            access_log_format: "combined".into(),
        }
    }
}

/// The subscriber is built once.
pub(super) const RESTART: &[Restart] = &[Restart::key("log_format")];

/// Where the access log goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AccessLog {
    /// No access log.
    Off,
    /// Standard output.
    Stdout,
    /// Appended to a file.
    File(PathBuf),
}

/// Access log line format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessLogFormat {
    /// NCSA combined (nginx's `combined`).
    Combined,
    /// The `Host` asked for, then the combined line (Apache's and
    /// GoAccess's `vhost_combined`, the host without its `:port` split).
    VhostCombined,
    /// One JSON object per line.
    Json,
}

/// Format of the daemon's own log (stderr).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines (colour only on a terminal).
    Text,
    /// One JSON object per event (tracing's JSON formatter).
    Json,
}

impl LogConfig {
    /// `access_log`.
    pub(super) fn access_log(&self, e: &mut Vec<ConfigError>) -> AccessLog {
        match self.access_log.as_str() {
            "off" => AccessLog::Off,
            "stdout" | "-" => AccessLog::Stdout,
            "" => {
                e.push(err("access_log", "must be off, stdout or a file path"));
                AccessLog::Off
            }
            p => AccessLog::File(PathBuf::from(p)),
        }
    }

    /// `access_log_format`.
    pub(super) fn access_log_format(&self, e: &mut Vec<ConfigError>) -> AccessLogFormat {
        match self.access_log_format.as_str() {
            "combined" => AccessLogFormat::Combined,
            "vhost_combined" => AccessLogFormat::VhostCombined,
            "json" => AccessLogFormat::Json,
            o => {
                e.push(err(
                    "access_log_format",
                    format!("`{o}` is not one of combined, vhost_combined, json"),
                ));
                AccessLogFormat::Combined
            }
        }
    }

    /// `log_format`.
    pub(super) fn log_format(&self, e: &mut Vec<ConfigError>) -> LogFormat {
        match self.log_format.as_str() {
            "text" => LogFormat::Text,
            "json" => LogFormat::Json,
            o => {
                e.push(err("log_format", format!("`{o}` is not one of text, json")));
                LogFormat::Text
            }
        }
    }

    /// `log_level`, checked.
    pub(super) fn log_level(&self, e: &mut Vec<ConfigError>) -> String {
        if let Err(m) = check_log_level(&self.log_level) {
            e.push(err("log_level", m));
        }
        self.log_level.clone()
    }
}

/// The levels `log_level` takes alone or after `target=`.
const LOG_LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];

/// Checks a `log_level`: a level, or a tracing filter whose directives each
/// end in a level (`info,fileserver=debug`). tracing reads a bare unknown
/// word (`warning`, `verbose`) as a target name, which silences every line
/// of the daemon's own; that is refused here with the nearest level.
pub fn check_log_level(v: &str) -> Result<(), String> {
    let levels = "error, warn, info, debug, trace, off, or target=level directives";
    if v.trim().is_empty() {
        return Err(format!("must not be empty (use {levels})"));
    }
    for directive in v.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let level = match directive.rsplit_once('=') {
            Some((_, level)) => level,
            // `target[span]` or `target` alone means "every level of that
            // target" to tracing; a word that is not a level is a typo far
            // more often than a target name.
            None => directive,
        };
        if !LOG_LEVELS
            .iter()
            .any(|l| l.eq_ignore_ascii_case(level.trim()))
        {
            let hint = match level.to_ascii_lowercase().as_str() {
                "warning" | "warnings" => Some("warn"),
                "verbose" | "debugging" | "all" => Some("debug"),
                "err" | "errors" | "critical" | "crit" | "fatal" | "panic" => Some("error"),
                "information" | "notice" | "normal" | "default" => Some("info"),
                "quiet" | "silent" | "none" => Some("off"),
                l => LOG_LEVELS
                    .iter()
                    .map(|k| (edit_distance(l, k), *k))
                    .min()
                    .filter(|(d, _)| *d <= 2)
                    .map(|(_, k)| k),
            };
            let hint = hint.map_or(String::new(), |h| format!(" (did you mean `{h}`?)"));
            return Err(format!(
                "`{level}` in `{v}` is not a log level{hint}; use {levels}"
            ));
        }
    }
    tracing_subscriber::EnvFilter::try_new(v)
        .map(|_| ())
        .map_err(|e| format!("`{v}` is not a tracing filter: {e}"))
}

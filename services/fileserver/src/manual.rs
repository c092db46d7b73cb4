//! What `fileserver keys` and `fileserver man` print: every configuration
//! key with its default, its environment variable and what it means, and
//! the manual page around them (environment, signals, files, exit status,
//! admin endpoints, examples).
//!
//! The meanings are the comments of `config/fileserver.toml`, compiled in:
//! that file documents every key (a unit test in `config` checks it), so
//! the manual cannot list a key it does not explain.
//!
//! ```
//! let docs = fileserver::manual::key_docs();
//! let listen = docs.iter().find(|d| d.key == "listen").unwrap();
//! assert_eq!(listen.default, "\"127.0.0.1:8080\"");
//! assert_eq!(listen.env, "FILESERVER_LISTEN");
//! assert!(listen.meaning.starts_with("HTTP listener"));
//! ```

use crate::config::{all_keys, env_name, table_fields, Config};
use std::collections::HashMap;
use std::fmt::Write;

/// The documented config file, whose comments say what each key means.
const CONFIG_FILE: &str = include_str!("../../../config/fileserver.toml");

/// One key as `keys` and the manual show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyDoc {
    /// Dotted key (`cache.max_entries`).
    pub key: String,
    /// Its built-in default, as TOML.
    pub default: String,
    /// Its environment variable.
    pub env: String,
    /// What it means (the comment above it in `config/fileserver.toml`).
    pub meaning: String,
}

/// The comment block above each `key = value` line of the config file, by
/// dotted key; a blank line ends a block, and keys on consecutive lines
/// share the block above the first.
fn meanings() -> HashMap<String, String> {
    let mut out = HashMap::new();
    let mut section = String::new();
    let mut comment: Vec<&str> = Vec::new();
    let mut last = String::new();
    for line in CONFIG_FILE.lines().map(str::trim) {
        if line.is_empty() {
            comment.clear();
            last.clear();
        } else if let Some(c) = line.strip_prefix('#') {
            comment.push(c.trim());
        } else if let Some(s) = line.strip_prefix('[') {
            section = s.trim_end_matches(']').trim().to_string();
            comment.clear();
            last.clear();
        } else if let Some((key, _)) = line.split_once('=') {
            let key = key.trim();
            let dotted = if section.is_empty() {
                key.to_string()
            } else {
                format!("{section}.{key}")
            };
            if !comment.is_empty() {
                last = comment.join(" ");
            }
            out.insert(dotted, last.clone());
            comment.clear();
        }
    }
    out
}

/// The meanings in the commented reference blocks of the config file
/// (`# [acme]`, `# [rules[]]`, ...: a `# # ` line explains the `# key =`
/// line below it), by dotted field (`rules[].path`).
fn reference_meanings() -> HashMap<String, String> {
    let mut out = HashMap::new();
    let mut section: Option<&str> = None;
    let mut comment: Vec<&str> = Vec::new();
    for line in CONFIG_FILE.lines().map(str::trim) {
        let Some(inner) = line.strip_prefix('#').map(str::trim) else {
            // Code or a blank line ends a block.
            section = None;
            continue;
        };
        if let Some(name) = inner.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            section = (!name.starts_with('[')).then_some(name);
            comment.clear();
        } else if let Some(text) = inner.strip_prefix('#') {
            comment.push(text.trim());
        } else if let (Some(section), Some((key, _))) = (section, inner.split_once('=')) {
            if !comment.is_empty() {
                out.insert(format!("{section}.{}", key.trim()), comment.join(" "));
            }
            comment.clear();
        }
    }
    out
}

/// Every key with its default, environment variable and meaning, in the
/// order of `fileserver keys`: the keys a flag or a variable sets, then
/// the fields of the tables only a file sets (`env` says so).
pub fn key_docs() -> Vec<KeyDoc> {
    let defaults = toml::Value::try_from(Config::default()).unwrap_or(toml::Value::Boolean(false));
    let meanings = meanings();
    let reference = reference_meanings();
    all_keys()
        .into_iter()
        .map(|key| {
            let default = key
                .split('.')
                .try_fold(&defaults, |v, part| v.get(part))
                .map_or_else(String::new, |v| v.to_string());
            KeyDoc {
                env: env_name(&key),
                meaning: meanings.get(&key).cloned().unwrap_or_default(),
                default,
                key,
            }
        })
        .chain(table_fields().into_iter().map(|(key, default)| KeyDoc {
            env: "config file only".into(),
            meaning: reference.get(&key).cloned().unwrap_or_default(),
            default: default.to_string(),
            key,
        }))
        .collect()
}

/// The text of `fileserver keys`: per key a line `key = default  ENV` and
/// its meaning indented below.
pub fn keys_text() -> String {
    let mut s = String::new();
    for d in key_docs() {
        let _ = writeln!(s, "{} = {}  ({})", d.key, d.default, d.env);
        let _ = writeln!(s, "    {}", d.meaning);
    }
    s
}

/// Text for roff: backslashes and hyphens escaped, and a line that would
/// start with a control character guarded.
fn roff(text: &str) -> String {
    let mut s = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\\' => s.push_str("\\e"),
            '-' => s.push_str("\\-"),
            c => s.push(c),
        }
    }
    if s.starts_with('.') || s.starts_with('\'') {
        s.insert_str(0, "\\&");
    }
    s
}

/// A `.TP` item: a bold tag and its paragraph.
/// A section: its `.SH` line (and any text under it), then its items.
fn section(out: &mut String, head: &str, items: &[(&str, &str)]) {
    out.push_str(head);
    for (tag, text) in items {
        item(out, tag, text);
    }
}

fn item(out: &mut String, tag: &str, text: &str) {
    let _ = write!(out, ".TP\n\\fB{}\\fR\n{}\n", roff(tag), roff(text));
}

/// The manual page: clap's synopsis and options, then the sections an
/// operator looks for.
pub fn man_page(cmd: clap::Command) -> std::io::Result<Vec<u8>> {
    let man = clap_mangen::Man::new(cmd.clone());
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    man.render_options_section(&mut out)?;
    let mut s = String::new();
    s.push_str(".SH COMMANDS\n");
    for sub in cmd.get_subcommands() {
        let name = sub.get_name();
        if name == "help" {
            continue;
        }
        let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
        item(&mut s, &format!("fileserver {name}"), &about);
    }
    s.push_str(
        ".SH CONFIGURATION\nEvery key can be set in the TOML file given by \\fB\\-\\-config\\fR, \
         in the environment as \\fBFILESERVER_\\fR\\fIKEY\\fR, and with \\fB\\-\\-set\\fR \
         \\fIkey\\fR=\\fIvalue\\fR (or its own flag); flags win over the environment, the \
         environment over the file. Unknown keys are errors. Durations take 500ms, 10s, 2m, \
         1m30s. Booleans from the environment or a flag take true/false, yes/no, on/off, 1/0. \
         SIGHUP applies most keys; root, listen, unix_socket_mode, unix_socket_owner, \
         admin_listen, tls_listen, workers, io_backend, \
         symlinks, fd_budget, fd_headroom, inline_opens, cache.watch and log_format need a \
         restart.\n",
    );
    for d in key_docs() {
        let tag = format!("{} = {}", d.key, d.default);
        let text = if d.env.starts_with("FILESERVER_") {
            format!("{} Environment: {}.", d.meaning, d.env)
        } else {
            format!("{} In the config file only.", d.meaning)
        };
        item(&mut s, &tag, &text);
    }
    section(
        &mut s,
        ".SH ENVIRONMENT\n",
        &[
        ("FILESERVER_KEY", "Any configuration key, upper-cased with dots as underscores (FILESERVER_CACHE_MAX_ENTRIES). A FILESERVER_ variable that names no key is reported with a warning at start."),
        ("FILESERVER_CONFIG", "The config file, when --config is not given."),
        ("NO_COLOR", "When set (to anything), the text log has no colour even on a terminal. Off a terminal it never has any."),
        ("LISTEN_FDS, LISTEN_PID, LISTEN_FDNAMES", "systemd socket activation: a socket named http replaces listen, one named admin replaces admin_listen; a lone unnamed socket is the HTTP listener."),
        ("NOTIFY_SOCKET", "systemd notification: READY=1 once every worker serves, RELOADING=1 and READY=1 around a reload, STOPPING=1 at shutdown."),
        ("WATCHDOG_USEC, WATCHDOG_PID", "systemd watchdog: WATCHDOG=1 is sent while every worker makes progress."),
        ],
    );
    section(
        &mut s,
        ".SH SIGNALS\n",
        &[
        ("SIGTERM, SIGINT", "Stop accepting, let in-flight responses finish for up to shutdown_timeout (those still running are cut and logged as not completed), exit 0. /readyz answers 503 from the start of the drain."),
        ("SIGUSR2", "Upgrade: start the binary at the path this one was started from (a new build installed there by rename) with the same arguments and every listening socket, wait until it serves (up to 30 s), then drain as at SIGTERM. If it does not start, this process goes on serving and logs why."),
        ("SIGHUP", "Read the config file again and apply what can change while running (limits, timeouts, cache and compression settings, log_level, the access log, the TLS certificate and key). An invalid file is reported and the running config kept."),
        ],
    );
    section(
        &mut s,
        ".SH FILES\n",
        &[
        ("/etc/fileserver/fileserver.toml", "The config file of the shipped systemd unit (deploy/systemd/fileserver.service)."),
        ("config/fileserver.toml", "In the source tree: every key with its default and meaning, the same text as fileserver keys."),
        ("access_log", "Appended to when it names a file, opened again at SIGHUP (rotate by renaming, then SIGHUP)."),
        ],
    );
    section(
        &mut s,
        ".SH EXIT STATUS\n",
        &[
        ("0", "Stopped by SIGTERM or SIGINT after the drain; check-config found no problem."),
        ("1", "The start failed: the root cannot be opened, an address is in use, the certificate does not load, the access log cannot be opened. One line on stderr names the key and the path or address."),
        ("2", "The configuration or the command line is invalid (every error printed, each with its key); check-config found a problem."),
        ],
    );
    section(
        &mut s,
        ".SH ADMIN ENDPOINTS\nServed on admin_listen (127.0.0.1:8081 by default; \\-p \\fIPORT\\fR moves it to \\fIPORT\\fR+1 unless admin_listen is set):\n",
        &[
        ("/metrics", "Prometheus text exposition: requests by code and method, bytes, durations, connections, the file cache, descriptors, compression, TLS, process metrics."),
        ("/healthz", "200 while the process runs."),
        ("/readyz", "200 while serving, 503 from the moment shutdown begins."),
        ],
    );
    s.push_str(".SH EXAMPLES\n");
    for (cmd, text) in [
        (
            "fileserver docs",
            "Serve ./docs on 127.0.0.1:8080, metrics on 127.0.0.1:8081.",
        ),
        (
            "fileserver docs \\-p 9000",
            "Serve on 127.0.0.1:9000, metrics on 127.0.0.1:9001.",
        ),
        (
            "fileserver docs \\-\\-listen :8080 \\-\\-set directory_listing=true",
            "Every interface, with directory listings.",
        ),
        (
            "fileserver \\-\\-config /etc/fileserver/fileserver.toml",
            "Run with a config file; kill \\-HUP reloads it.",
        ),
        (
            "fileserver check\\-config /etc/fileserver/fileserver.toml",
            "Check the values and the files a start would open.",
        ),
        (
            "fileserver keys",
            "Every key with its default, environment variable and meaning.",
        ),
        ("curl \\-s 127.0.0.1:8081/metrics", "Read the metrics."),
    ] {
        // Already escaped for roff: the command is shown as written.
        let _ = write!(s, ".TP\n\\fB{cmd}\\fR\n{}\n", roff(text));
    }
    s.push_str(
        ".SH SEE ALSO\n\\fBsystemd.socket\\fR(5), \\fBsd_notify\\fR(3), \\fBopenat2\\fR(2); \
         docs/operations.md in the source tree.\n",
    );
    out.extend_from_slice(s.as_bytes());
    man.render_version_section(&mut out)?;
    Ok(out)
}

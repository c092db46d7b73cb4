//! `fileserver`: a static file server daemon over HTTP/1.1, HTTP/2 (TLS
//! and h2c) and HTTP/3, serving a directory tree beneath one root per site.
//!
//! Three modules are public, for the embedding tests, the benches and the
//! fuzz targets: [`config`] (keys, sources, validation), [`http`] (the
//! HTTP/1.1 request parser and the forwarding headers, which a fuzzer
//! reaches) and [`manual`] (`fileserver keys` and `man`). The rest is the
//! daemon's own:
//!
//! ```text
//!   server    bind, share, spawn workers, announce; signals, reload, drain
//!   clients   open connections per client (max_connections_per_client)
//!   conn      one TCP connection: the HTTP/1.1 engine (send: its output)
//!   h2conn    the HTTP/2 engine over h2wire
//!   h3conn    the HTTP/3 engine over quinn and h3wire
//!   request_context  the step every engine takes before decide: Host
//!             rule, site, its options and files, the client behind proxies
//!   render    a plan on the lower-case-field, framed wires (HTTP/2, HTTP/3)
//!   exchange  what every engine records of a request: log line, counters
//!   pace      a response's bandwidth (limit_rate), asked by every engine
//!   state     what workers share; files: the file managers per site
//!   tls, acme certificates, handshakes, ACME orders
//!   tickets   session-ticket keys shared by replicas (tls_ticket_keys)
//!   private_file  a 0600 file written whole or not at all (acme, tickets)
//!   upgrade   SIGUSR2: hand the listeners to a new binary, then drain
//!   unix_socket  Unix domain socket listeners (listen = "unix:PATH")
//!   admin, stats, accesslog, sysd, preflight: metrics, logs, systemd,
//!             the checks of check-config
//! ```
//!
//! Every engine decides with the `decide` crate and renders its
//! `httpfile` plan; `tests/architecture.rs` holds the module graph acyclic.
//!
//! ```
//! use fileserver::http::request::{parse_request, Method};
//! let mut headers = [httparse::EMPTY_HEADER; 16];
//! let head = b"GET /docs/a%20b.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=-10\r\n\r\n";
//! let req = parse_request(head, &mut headers, 8192).unwrap().unwrap();
//! assert_eq!((req.method(), req.target()), (Method::Get, &b"/docs/a%20b.txt"[..]));
//! assert_eq!(req.head.range, Some(&b"bytes=-10"[..]));
//! ```
#![deny(missing_docs)]

mod accesslog;
mod acme;
mod admin;
mod clients;
pub mod config;
mod conn;
mod exchange;
mod files;
mod h2conn;
mod h3conn;
pub mod http;
pub mod manual;
mod pace;
mod preflight;
mod private_file;
mod render;
mod request_context;
mod send;
mod server;
mod spares;
mod state;
mod stats;
mod sysd;
mod tickets;
mod tls;
mod unix_socket;
mod upgrade;
mod wire;

use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// Command line. Every flag is also a config key and a `FILESERVER_<KEY>` variable.
#[derive(Parser, Debug)]
#[command(
    name = "fileserver",
    version,
    about = "Static file server: HTTP/1.1, HTTPS with HTTP/2, and HTTP/3",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// Subcommand (default: serve).
    #[command(subcommand)]
    pub cmd: Option<Cmd>,
    /// Directory to serve (the same as --root)
    #[arg(value_name = "DIR", conflicts_with = "root")]
    pub dir: Option<String>,
    /// Directory to serve [key: root; default .]
    #[arg(long, value_name = "DIR")]
    pub root: Option<String>,
    /// Address to serve HTTP on: `host:port`, `[v6]:port`, `:port` for
    /// every interface, or `port` on 127.0.0.1 [key: listen; default
    /// 127.0.0.1:8080]
    #[arg(
        long,
        value_name = "ADDR",
        value_hint = clap::ValueHint::Other,
        help = "Address to serve HTTP on: host:port, [v6]:port, :port for every interface, \
                or port on 127.0.0.1 like -p [key: listen; default 127.0.0.1:8080]"
    )]
    pub listen: Option<String>,
    /// Port to serve HTTP on, keeping the host of `listen` (127.0.0.1 by default)
    #[arg(short, long, value_name = "PORT", conflicts_with = "listen", value_hint = clap::ValueHint::Other)]
    pub port: Option<u16>,
    /// Address for /metrics, /healthz, /readyz [key: admin_listen; default 127.0.0.1:8081]
    #[arg(long, value_name = "ADDR", value_hint = clap::ValueHint::Other)]
    pub admin_listen: Option<String>,
    /// TOML config file [env: FILESERVER_CONFIG]
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Worker threads, 0 = one per CPU [key: workers]
    #[arg(long, value_name = "N", value_hint = clap::ValueHint::Other)]
    pub workers: Option<String>,
    /// Open connections of one client at most, 0 = no limit [key:
    /// max_connections_per_client]
    #[arg(long, value_name = "N", value_hint = clap::ValueHint::Other)]
    pub max_connections_per_client: Option<String>,
    /// Body bytes per second of one response, 0 = no limit [key: limit_rate]
    #[arg(long, value_name = "BYTES", value_hint = clap::ValueHint::Other)]
    pub limit_rate: Option<String>,
    /// auto|uring|blocking|portable [key: io_backend]
    #[arg(long, value_name = "KIND", value_parser = ["auto", "uring", "blocking", "portable"])]
    pub io_backend: Option<String>,
    /// error|warn|info|debug|trace or a tracing filter [key: log_level]
    #[arg(long, value_name = "LEVEL", value_hint = clap::ValueHint::Other)]
    pub log_level: Option<String>,
    /// off|stdout|FILE [key: access_log]
    #[arg(long, value_name = "TARGET")]
    pub access_log: Option<String>,
    /// Address to serve HTTPS on (HTTP/2 and HTTP/1.1 by ALPN) [key: tls_listen]
    #[arg(long, value_name = "ADDR", value_hint = clap::ValueHint::Other)]
    pub tls_listen: Option<String>,
    /// PEM certificate chain, leaf first [key: tls_cert]
    #[arg(long, value_name = "FILE")]
    pub tls_cert: Option<String>,
    /// PEM private key of the certificate [key: tls_key]
    #[arg(long, value_name = "FILE")]
    pub tls_key: Option<String>,
    /// List directories that have no index, as Caddy's `file_server browse`
    /// [key: directory_listing]
    #[arg(long)]
    pub browse: bool,
    /// A single-page app: answer what is not found with /index.html [key: spa]
    #[arg(long)]
    pub spa: bool,
    /// A header field set on every response, `Name: value` (repeatable) [key: headers]
    #[arg(long = "header", short = 'H', value_name = "NAME: VALUE", value_hint = clap::ValueHint::Other)]
    pub headers: Vec<String>,
    /// Allow cross-origin requests from ORIGIN (`*`: any; repeatable) [key: cors]
    #[arg(long = "cors", value_name = "ORIGIN", value_hint = clap::ValueHint::Other)]
    pub cors: Vec<String>,
    /// Limit each client to RATE requests on every path: `20/s`, `600/m`,
    /// `100/h` (429 beyond) [key: rate_limit]
    #[arg(long, value_name = "RATE", value_hint = clap::ValueHint::Other)]
    pub rate_limit: Option<String>,
    /// Any other config key, e.g. --set cache.max_entries=1000 (repeatable)
    #[arg(long = "set", value_name = "KEY=VALUE", value_hint = clap::ValueHint::Other)]
    pub set: Vec<String>,
}

/// Subcommands.
#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Validate a config file and what a start would open with it (root,
    /// certificate and key, access log): exit 0 if all is well, else print
    /// each error with its key and exit 2. Free ports are not checked.
    CheckConfig {
        /// The TOML file.
        file: PathBuf,
        /// Check the values only, not the files they name (for a config
        /// checked away from the host it runs on: an image build, CI).
        #[arg(long)]
        values_only: bool,
    },
    /// Print every config key with its default, environment variable and meaning.
    Keys,
    /// Hash a password for a rule's basic_auth (bcrypt): asks for it on a
    /// terminal without echoing it, or reads one line from a pipe, and
    /// prints the hash.
    HashPassword {
        /// bcrypt cost: each step doubles the work of every check.
        #[arg(long, default_value_t = 12, value_parser = clap::value_parser!(u32).range(4..=31))]
        cost: u32,
    },
    /// Put a new session-ticket key first in FILE (created if missing),
    /// keeping the two before it, for `tls_ticket_keys`: copy the file to
    /// every replica, then SIGHUP them (or let them see it change).
    TicketKey {
        /// The key file.
        file: PathBuf,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), e.g. `fileserver man | man -l -`.
    Man,
}

impl Cli {
    /// Flags as `(dotted key, value)` overrides.
    pub fn flag_overrides(&self) -> Result<Vec<(String, String)>, String> {
        let mut v = Vec::new();
        for (k, val) in [
            ("root", &self.root),
            ("root", &self.dir),
            ("listen", &self.listen),
            ("admin_listen", &self.admin_listen),
            ("workers", &self.workers),
            (
                "max_connections_per_client",
                &self.max_connections_per_client,
            ),
            ("limit_rate", &self.limit_rate),
            ("io_backend", &self.io_backend),
            ("log_level", &self.log_level),
            ("access_log", &self.access_log),
            ("tls_listen", &self.tls_listen),
            ("tls_cert", &self.tls_cert),
            ("tls_key", &self.tls_key),
            ("rate_limit", &self.rate_limit),
        ] {
            if let Some(val) = val {
                v.push((k.to_string(), val.clone()));
            }
        }
        if self.browse {
            v.push(("directory_listing".to_string(), "true".to_string()));
        }
        if self.spa {
            v.push(("spa".to_string(), "true".to_string()));
        }
        if !self.headers.is_empty() {
            v.push(("headers".to_string(), self.headers.join("\n")));
        }
        if !self.cors.is_empty() {
            v.push(("cors".to_string(), self.cors.join(",")));
        }
        for s in &self.set {
            let Some((k, val)) = s.split_once('=') else {
                return Err(format!("--set {s}: expected KEY=VALUE"));
            };
            v.push((k.trim().to_string(), val.to_string()));
        }
        Ok(v)
    }
}

type LogHandle =
    tracing_subscriber::reload::Handle<tracing_subscriber::EnvFilter, tracing_subscriber::Registry>;

/// The daemon's own log on stderr: `text` with colour only when stderr is a
/// terminal (a file or the journal gets no escape codes), or `json`.
fn init_logging(level: &str, format: config::LogFormat) -> LogHandle {
    use std::io::IsTerminal;
    use tracing_subscriber::prelude::*;
    let filter = tracing_subscriber::EnvFilter::try_new(level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let (layer, handle) = tracing_subscriber::reload::Layer::new(filter);
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(false);
    let registry = tracing_subscriber::registry().with(layer);
    let _ = match format {
        config::LogFormat::Text => registry
            .with(fmt.with_ansi(std::io::stderr().is_terminal() && !no_color()))
            .try_init(),
        config::LogFormat::Json => registry.with(fmt.json().with_ansi(false)).try_init(),
    };
    handle
}

/// `NO_COLOR` set and not empty (no-color.org): no colour even on a terminal.
fn no_color() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

/// Writes `text` to stdout; a closed pipe ends quietly (exit 0, as `head` expects).
fn print_all(text: &[u8]) -> i32 {
    use std::io::Write;
    match std::io::stdout().lock().write_all(text) {
        Ok(()) => 0,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            eprintln!("fileserver: {e}");
            1
        }
    }
}

/// `fileserver hash-password`: one line of stdin, hashed with bcrypt.
fn hash_password(cost: u32) -> i32 {
    let mut line = String::new();
    if let Err(e) = read_password(&mut line) {
        eprintln!("fileserver: cannot read the password: {e}");
        return 1;
    }
    let password = line.trim_end_matches(['\r', '\n']);
    if password.is_empty() {
        eprintln!("fileserver: an empty password: type one, then Enter");
        return 2;
    }
    match bcrypt::hash(password, cost) {
        Ok(h) => {
            println!("{h}");
            0
        }
        Err(e) => {
            eprintln!("fileserver: {e}");
            1
        }
    }
}

/// One line from standard input; on a terminal, after a prompt and with
/// echo off, so the password is not shown (or left in a scrollback).
fn read_password(line: &mut String) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use rustix::termios::{tcgetattr, tcsetattr, LocalModes, OptionalActions};
        let stdin = std::io::stdin();
        if let Ok(saved) = tcgetattr(&stdin) {
            eprint!("Password: ");
            let mut quiet = saved.clone();
            quiet.local_modes.remove(LocalModes::ECHO);
            tcsetattr(&stdin, OptionalActions::Now, &quiet)?;
            let read = stdin.read_line(line);
            let _ = tcsetattr(&stdin, OptionalActions::Now, &saved);
            eprintln!();
            return read.map(drop);
        }
    }
    std::io::stdin().read_line(line).map(drop)
}

/// The binary's entry point; returns the process exit code.
pub fn main_entry() -> i32 {
    // Before anything else can open a descriptor that would take fd 3, and
    // while this is the only thread (it edits the environment).
    let systemd = sysd::take_env();
    let inherited = upgrade::take_env();
    let cli = Cli::parse();
    match &cli.cmd {
        Some(Cmd::CheckConfig { file, values_only }) => {
            // The values, and what a start would open with them (a wrong
            // value's key at its default), in one run.
            let (settings, mut errors) = config::check_file(file);
            if let (Some(s), false) = (&settings, *values_only) {
                errors.extend(preflight::check(s));
            }
            let checked = match settings {
                Some(s) if errors.is_empty() => Ok(s),
                _ => Err(errors),
            };
            return match checked {
                Ok(s) => {
                    let not_checked = if *values_only {
                        preflight::NOT_CHECKED_VALUES_ONLY
                    } else {
                        preflight::NOT_CHECKED
                    };
                    println!(
                        "{}: ok (root {}, listen {}, {} workers; {not_checked})",
                        file.display(),
                        s.root.display(),
                        s.listen.map_or_else(
                            || format!("unix:{}", s.listen_unix.paths[0].display()),
                            |a| a.to_string()
                        ),
                        s.workers,
                    );
                    0
                }
                Err(errors) => {
                    for e in &errors {
                        eprintln!("{}: error: {e}", file.display());
                    }
                    eprintln!("{}: {} error(s)", file.display(), errors.len());
                    2
                }
            };
        }
        Some(Cmd::Keys) => return print_all(manual::keys_text().as_bytes()),
        Some(Cmd::HashPassword { cost }) => return hash_password(*cost),
        Some(Cmd::TicketKey { file }) => {
            return match tickets::rotate(file) {
                Ok(n) => {
                    println!("{}: a new key first, {n} in all", file.display());
                    0
                }
                Err(e) => {
                    eprintln!("fileserver: {e}");
                    1
                }
            }
        }
        Some(Cmd::Completions { shell }) => {
            use clap::CommandFactory;
            // Rendered into memory first: clap_complete panics on a write
            // error, and `| head` closing the pipe is no reason to panic.
            let mut text = Vec::new();
            clap_complete::generate(*shell, &mut Cli::command(), "fileserver", &mut text);
            return print_all(&text);
        }
        Some(Cmd::Man) => {
            use clap::CommandFactory;
            return match manual::man_page(Cli::command()) {
                Ok(text) => print_all(&text),
                Err(e) => {
                    eprintln!("fileserver: {e}");
                    1
                }
            };
        }
        None => {}
    }
    let flags = match cli.flag_overrides() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("fileserver: {e}");
            return 2;
        }
    };
    let env = config::Sources::process_env();
    let file = cli
        .config
        .clone()
        .or_else(|| std::env::var_os("FILESERVER_CONFIG").map(PathBuf::from));
    let sources = config::Sources {
        file,
        env,
        flags,
        port: cli.port,
    };
    let (config, settings) = match config::load(&sources) {
        Ok(loaded) => loaded,
        Err(errors) => {
            for e in &errors {
                eprintln!("fileserver: config error: {e}");
            }
            return 2;
        }
    };
    let log = init_logging(&settings.log_level, settings.log_format);
    for note in &systemd.notes {
        tracing::warn!("systemd: {note}");
    }
    for name in config::unknown_env(&sources.env) {
        tracing::warn!("ignoring environment variable {name}: no such key (see `fileserver keys`)");
    }
    let set_log_level = Box::new(move |level: &str| {
        let f = tracing_subscriber::EnvFilter::try_new(level).map_err(|e| e.to_string())?;
        log.reload(f).map_err(|e| e.to_string())
    });
    match server::run(server::RunArgs {
        settings,
        config,
        sources,
        activated: systemd.activated,
        inherited,
        watchdog: systemd.watchdog,
        set_log_level,
    }) {
        Ok(code) => code,
        Err(e) => {
            // One plain line on stderr (where the log goes too), not the
            // same error twice.
            eprintln!("fileserver: {e:#}");
            1
        }
    }
}

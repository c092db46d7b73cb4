//! Starting the servers under test on loopback: the daemon, its peers, and
//! the embedded servers.
//!
//! Every peer gets a config the harness renders from a template in
//! `benches/http/` into its own directory under the run's temp dir: listening
//! on 127.0.0.1 at a free port, serving the generated tree, the scenario's
//! worker count (or the closest setting the server has), no access log, and
//! sendfile where the server has a switch for it.
//!
//! The embedded servers (the `embedded` scenario group) are one axum app,
//! the `embedded-server` binary of this package, mounting either
//! tower-http's `ServeDir` or `servedir::ServeDir` at `/`; they take the
//! root, the port and the worker count on the command line.

use std::fmt;
use std::fs;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::str::FromStr;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::loadtest::procs::{check_interrupted, ChildGroup};
use crate::loadtest::tls::TestCert;

/// The nginx config template (`benches/http/nginx.conf`).
pub const NGINX_TEMPLATE: &str = include_str!("../../http/nginx.conf");
/// The lighttpd config template (`benches/http/lighttpd.conf`).
pub const LIGHTTPD_TEMPLATE: &str = include_str!("../../http/lighttpd.conf");
/// The h2o config template (`benches/http/h2o.conf`).
pub const H2O_TEMPLATE: &str = include_str!("../../http/h2o.conf");
/// The Caddy config template (`benches/http/Caddyfile`).
pub const CADDY_TEMPLATE: &str = include_str!("../../http/Caddyfile");
/// The static-web-server config template (`benches/http/static-web-server.toml`).
pub const SWS_TEMPLATE: &str = include_str!("../../http/static-web-server.toml");

/// The name the daemon has in reports.
pub const FILESERVER: &str = "fileserver";

/// A reference server the daemon is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Peer {
    /// nginx (Debian `nginx-light`).
    Nginx,
    /// lighttpd (Debian `lighttpd`).
    Lighttpd,
    /// h2o (Debian `h2o`).
    H2o,
    /// Caddy (Debian `caddy`).
    Caddy,
    /// static-web-server (not packaged by Debian; used when on PATH or given).
    StaticWebServer,
}

impl Peer {
    /// Every peer, in run and report order.
    pub const ALL: [Peer; 5] = [
        Self::Nginx,
        Self::Lighttpd,
        Self::H2o,
        Self::Caddy,
        Self::StaticWebServer,
    ];

    /// Lower-case name for the command line and reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Nginx => "nginx",
            Self::Lighttpd => "lighttpd",
            Self::H2o => "h2o",
            Self::Caddy => "caddy",
            Self::StaticWebServer => "static-web-server",
        }
    }

    /// The binary looked for when no path is given (a bare name is searched
    /// on PATH and in the sbin directories).
    pub fn default_bin(self) -> &'static str {
        match self {
            Self::Nginx => "nginx",
            Self::Lighttpd => "lighttpd",
            Self::H2o => "h2o",
            Self::Caddy => "caddy",
            Self::StaticWebServer => "static-web-server",
        }
    }

    /// What to install when the binary is missing.
    pub fn install_hint(self) -> &'static str {
        match self {
            Self::Nginx => "apt-get install nginx-light, or give --nginx PATH",
            Self::Lighttpd => "apt-get install lighttpd, or give --lighttpd PATH",
            Self::H2o => "apt-get install h2o, or give --h2o PATH",
            Self::Caddy => "apt-get install caddy, or give --caddy PATH",
            Self::StaticWebServer => {
                "not packaged by Debian: put static-web-server on PATH or give --static-web-server PATH"
            }
        }
    }

    /// The arguments that make the binary print its version.
    pub fn version_args(self) -> &'static [&'static str] {
        match self {
            Self::Nginx | Self::Lighttpd | Self::H2o => &["-v"],
            Self::Caddy => &["version"],
            Self::StaticWebServer => &["--version"],
        }
    }
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Peer {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|p| p.name() == s || (s == "sws" && *p == Self::StaticWebServer))
            .ok_or_else(|| {
                let names: Vec<_> = Self::ALL.iter().map(|p| p.name()).collect();
                format!("unknown peer {s:?}; expected one of {}", names.join(", "))
            })
    }
}

/// A file service embedded in the same axum app (`embedded-server --impl`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Embedded {
    /// This project's `servedir::ServeDir` over a `filemanager::FileManager`.
    Servedir,
    /// tower-http's `tower_http::services::ServeDir`.
    TowerHttp,
}

impl Embedded {
    /// Both, in run and report order (the subject first).
    pub const ALL: [Embedded; 2] = [Self::Servedir, Self::TowerHttp];

    /// The name in reports, also the binary's `--impl` value.
    pub fn name(self) -> &'static str {
        match self {
            Self::Servedir => "servedir",
            Self::TowerHttp => "tower-http",
        }
    }
}

impl fmt::Display for Embedded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The `embedded-server` command line serving `root` on `port` with `workers`
/// runtime worker threads.
pub fn embedded_command(
    imp: Embedded,
    bin: &Path,
    root: &Path,
    port: u16,
    workers: usize,
) -> Command {
    let mut command = Command::new(bin);
    command
        .arg("--impl")
        .arg(imp.name())
        .arg("--root")
        .arg(root)
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--workers")
        .arg(workers.to_string())
        .env_remove("RUST_LOG");
    command
}

/// Starts the embedded server `imp` (binary `bin`) with `workers` runtime
/// threads serving `root`; its output goes in `dir`.
pub fn start_embedded(
    imp: Embedded,
    bin: &Path,
    dir: &Path,
    root: &Path,
    workers: usize,
) -> Result<Running> {
    fs::create_dir_all(dir)?;
    let port = free_port()?;
    let command = embedded_command(imp, bin, root, port, workers);
    let mut running = Running::spawn(imp.name(), command, port, dir)?;
    wait_until_accepting(&mut running)?;
    Ok(running)
}

/// The name of the reference server that does no work
/// (`src/bin/ceiling-server.rs`) in reports: what the load generator can
/// drive here, never a peer (it is no file server: no ranges, no
/// revalidation, a fixed `Date`).
pub const CEILING: &str = "ceiling";

/// The name of the second fileserver build `--baseline-bin` runs: another
/// build of the subject, never a peer.
pub const BASELINE: &str = "baseline";

/// Starts the ceiling server (binary `bin`) with `workers` threads serving
/// `root`; its output goes in `dir`.
pub fn start_ceiling(bin: &Path, dir: &Path, root: &Path, workers: usize) -> Result<Running> {
    fs::create_dir_all(dir)?;
    let port = free_port()?;
    let mut command = Command::new(bin);
    command
        .arg("--root")
        .arg(root)
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--workers")
        .arg(workers.to_string());
    let mut running = Running::spawn(CEILING, command, port, dir)?;
    wait_until_accepting(&mut running)?;
    Ok(running)
}

/// A running server.
#[derive(Debug)]
pub struct Running {
    /// Its name in reports (`fileserver`, a peer's or an embedded server's name).
    pub name: String,
    /// Where it serves HTTP.
    pub addr: SocketAddr,
    /// Its process group (dropping stops it).
    pub group: ChildGroup,
    /// Where its stdout/stderr go, for error messages.
    pub log: PathBuf,
}

impl Running {
    /// Spawns `command` as server `name` listening on loopback `port`, with
    /// its stdout and stderr in `dir/stderr.log` (one descriptor for both,
    /// so neither overwrites the other's lines).
    fn spawn(name: &str, mut command: Command, port: u16, dir: &Path) -> Result<Running> {
        let log = dir.join("stderr.log");
        let out = fs::File::create(&log)?;
        command
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        let group = ChildGroup::spawn(name, &mut command)?;
        Ok(Running {
            name: name.to_string(),
            addr: (Ipv4Addr::LOCALHOST, port).into(),
            group,
            log,
        })
    }
}

/// A free loopback port. The port is released before the server binds it;
/// on a machine where nothing else grabs ports in between that is enough.
pub fn free_port() -> Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("bind 127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// Finds a binary: a path with a `/` is taken as it is if it is a file; a
/// bare name is searched on PATH, then in the sbin directories (Debian puts
/// lighttpd and nginx there, and they are not on a normal user's PATH).
pub fn find_binary(given: &Path) -> Option<PathBuf> {
    if given.components().count() > 1 || given.is_absolute() {
        return given.is_file().then(|| given.to_path_buf());
    }
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.extend(["/usr/local/sbin", "/usr/sbin", "/sbin"].map(PathBuf::from));
    dirs.into_iter()
        .map(|d| d.join(given))
        .find(|p| p.is_file())
}

/// What a server offers beyond plaintext HTTP/1.1 in a scenario.
#[derive(Debug, Clone, Copy, Default)]
pub struct Features<'a> {
    /// Serve HTTPS (ALPN h2 and http/1.1) with this certificate instead of
    /// plaintext (the daemon: on its TLS listener, beside the plaintext one).
    pub tls: Option<&'a TestCert>,
    /// Compress text responses (the peers on the fly; the daemon once per
    /// file, `[compression] enabled = true`).
    pub compression: bool,
    /// With `tls`: HTTP/3 on the HTTPS port, UDP (Caddy's `protocols h1 h2
    /// h3`; the daemon's `[http3] enabled = true`).
    pub http3: bool,
    /// nginx reads files that are not in the page cache on its thread pool
    /// (`aio threads`), as a deployment serving cold files would set it
    /// (the `cold` scenario); the others have no such switch.
    pub aio_threads: bool,
}

/// What every peer's config is filled in with.
#[derive(Debug, Clone, Copy)]
pub struct PeerSetup<'a> {
    /// The peer's own directory (config, logs, pid and temp files).
    pub prefix: &'a Path,
    /// The tree served.
    pub root: &'a Path,
    /// The loopback port it listens on.
    pub port: u16,
    /// Workers (processes or threads).
    pub workers: usize,
    /// nginx's `open_file_cache max=` (the other peers have no such bound).
    pub open_file_cache_max: usize,
    /// Online CPUs (static-web-server sizes its threads as CPUs x multiplier).
    pub cpus: usize,
    /// TLS and compression.
    pub features: Features<'a>,
    /// nginx has the `http2` directive (1.25.1 and later; before it, HTTP/2
    /// is a flag of `listen`).
    pub nginx_http2_directive: bool,
}

/// Fills in a template's placeholders.
fn fill(template: &str, pairs: &[(&str, String)]) -> String {
    pairs
        .iter()
        .fold(template.to_string(), |t, (k, v)| t.replace(k, v))
}

/// Fills in the nginx template.
pub fn render_nginx_conf(template: &str, setup: &PeerSetup<'_>) -> String {
    // The server block's directives are indented by 8.
    let lines = |v: Vec<String>| v.join("\n        ");
    let (listen_tls, tls) = match setup.features.tls {
        None => (String::new(), String::new()),
        Some(cert) => {
            let mut v = vec![
                format!("ssl_certificate {};", cert.chain.display()),
                format!("ssl_certificate_key {};", cert.key.display()),
                "ssl_protocols TLSv1.2 TLSv1.3;".to_string(),
                "ssl_session_cache shared:SSL:10m;".to_string(),
            ];
            let listen = if setup.nginx_http2_directive {
                v.push("http2 on;".to_string());
                "ssl "
            } else {
                "ssl http2 "
            };
            (listen.to_string(), lines(v))
        }
    };
    let compression = if setup.features.compression {
        lines(vec![
            "types { application/javascript js; text/css css; application/json json; }".into(),
            "gzip on;".into(),
            "gzip_types application/javascript text/css application/json;".into(),
        ])
    } else {
        String::new()
    };
    fill(
        template,
        &[
            ("@PREFIX@", setup.prefix.display().to_string()),
            ("@ROOT@", setup.root.display().to_string()),
            ("@PORT@", setup.port.to_string()),
            ("@WORKERS@", setup.workers.to_string()),
            (
                "@OPEN_FILE_CACHE_MAX@",
                setup.open_file_cache_max.to_string(),
            ),
            ("@LISTEN_TLS@", listen_tls),
            ("@TLS@", tls),
            ("@COMPRESSION@", compression),
            (
                "@AIO@",
                if setup.features.aio_threads {
                    "aio threads;".to_string()
                } else {
                    String::new()
                },
            ),
        ],
    )
}

/// Whether the nginx whose `nginx -v` says `version` has the `http2`
/// directive (1.25.1 and later).
pub fn nginx_has_http2_directive(version: &str) -> bool {
    let numbers: Vec<u32> = version
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .trim()
        .split('.')
        .map_while(|n| n.parse().ok())
        .collect();
    numbers >= vec![1, 25, 1]
}

/// static-web-server's `threads-multiplier` closest to `workers` threads on
/// `cpus` CPUs (it runs CPUs x multiplier threads; 0 and 1 both mean one per CPU).
pub fn sws_threads_multiplier(workers: usize, cpus: usize) -> usize {
    let cpus = cpus.max(1);
    ((workers + cpus / 2) / cpus).max(1)
}

/// The file name of `peer`'s config in its directory.
pub fn config_file_name(peer: Peer) -> &'static str {
    match peer {
        Peer::Nginx => "nginx.conf",
        Peer::Lighttpd => "lighttpd.conf",
        Peer::H2o => "h2o.conf",
        Peer::Caddy => "Caddyfile",
        Peer::StaticWebServer => "static-web-server.toml",
    }
}

/// `peer`'s config for `setup`, from its template.
pub fn render_peer_conf(peer: Peer, setup: &PeerSetup<'_>) -> String {
    let common = |extra: Vec<(&'static str, String)>| {
        let mut pairs = vec![
            ("@PREFIX@", setup.prefix.display().to_string()),
            ("@ROOT@", setup.root.display().to_string()),
            ("@PORT@", setup.port.to_string()),
            ("@WORKERS@", setup.workers.to_string()),
        ];
        pairs.extend(extra);
        pairs
    };
    let (tls, compression) = (setup.features.tls, setup.features.compression);
    match peer {
        Peer::Nginx => render_nginx_conf(NGINX_TEMPLATE, setup),
        Peer::Lighttpd => {
            let mut modules = Vec::new();
            let mut extra = Vec::new();
            if let Some(c) = tls {
                modules.push("\"mod_openssl\"");
                extra.push(format!(
                    "ssl.engine = \"enable\"\nssl.pemfile = \"{}\"\nssl.privkey = \"{}\"",
                    c.chain.display(),
                    c.key.display()
                ));
            }
            if compression {
                modules.push("\"mod_deflate\"");
                extra.push(
                    "mimetype.assign := ( \".js\" => \"application/javascript\", \".css\" => \"text/css\", \
                     \".json\" => \"application/json\", \"\" => \"application/octet-stream\" )\n\
                     deflate.mimetypes = ( \"text/javascript\", \"application/javascript\", \"text/css\", \
                     \"application/json\" )\n\
                     deflate.allowed-encodings = ( \"br\", \"zstd\", \"gzip\", \"deflate\" )"
                        .to_string(),
                );
            }
            fill(
                LIGHTTPD_TEMPLATE,
                &common(vec![
                    ("@LIGHTTPD_MODULES@", modules.join(", ")),
                    ("@LIGHTTPD_EXTRA@", extra.join("\n")),
                ]),
            )
        }
        Peer::H2o => fill(
            H2O_TEMPLATE,
            &common(vec![
                (
                    "@H2O_SSL@",
                    tls.map_or(String::new(), |c| {
                        format!(
                            "  ssl:\n    certificate-file: \"{}\"\n    key-file: \"{}\"",
                            c.chain.display(),
                            c.key.display()
                        )
                    }),
                ),
                (
                    "@H2O_COMPRESS@",
                    if compression { "compress: ON" } else { "" }.to_string(),
                ),
            ]),
        ),
        Peer::Caddy => fill(
            CADDY_TEMPLATE,
            &common(vec![
                (
                    "@SCHEME@",
                    if tls.is_some() { "https" } else { "http" }.into(),
                ),
                (
                    "@PROTOCOLS@",
                    match (tls, setup.features.http3) {
                        (Some(_), true) => "h1 h2 h3",
                        (Some(_), false) => "h1 h2",
                        (None, _) => "h1",
                    }
                    .into(),
                ),
                (
                    "@TLS@",
                    tls.map_or(String::new(), |c| {
                        format!("tls \"{}\" \"{}\"", c.chain.display(), c.key.display())
                    }),
                ),
                (
                    "@ENCODE@",
                    if compression { "encode zstd gzip" } else { "" }.into(),
                ),
            ]),
        ),
        Peer::StaticWebServer => fill(
            SWS_TEMPLATE,
            &common(vec![(
                "@THREADS_MULTIPLIER@",
                sws_threads_multiplier(setup.workers, setup.cpus).to_string(),
            )]),
        ),
    }
}

/// The command that runs `peer` (`bin`) with the config at `conf`, or (with
/// `check`) only checks that config and exits.
pub fn peer_command(
    peer: Peer,
    bin: &Path,
    setup: &PeerSetup<'_>,
    conf: &Path,
    check: bool,
) -> Command {
    let mut command = Command::new(bin);
    command.current_dir(setup.prefix);
    match peer {
        Peer::Nginx => {
            if check {
                command.arg("-t");
            }
            command
                .arg("-p")
                .arg(setup.prefix)
                .arg("-e")
                .arg(setup.prefix.join("error.log"))
                .arg("-c")
                .arg(conf);
        }
        Peer::Lighttpd => {
            command
                .arg(if check { "-tt" } else { "-D" })
                .arg("-f")
                .arg(conf);
        }
        Peer::H2o => {
            if check {
                command.arg("-t");
            }
            command.arg("-c").arg(conf);
        }
        Peer::Caddy => {
            command
                .arg(if check { "validate" } else { "run" })
                .arg("--config")
                .arg(conf)
                .arg("--adapter")
                .arg("caddyfile")
                .env("GOMAXPROCS", setup.workers.to_string())
                .env("HOME", setup.prefix)
                .env("XDG_CONFIG_HOME", setup.prefix)
                .env("XDG_DATA_HOME", setup.prefix);
        }
        Peer::StaticWebServer => {
            // It has no check mode; a bad config makes it exit at start,
            // which `wait_until_accepting` reports with its output.
            command.arg("--config-file").arg(conf);
        }
    }
    command
}

/// The log files a peer writes itself (shown when it fails to start).
fn peer_error_logs(peer: Peer, prefix: &Path) -> Vec<PathBuf> {
    match peer {
        Peer::Nginx | Peer::Lighttpd | Peer::H2o => vec![prefix.join("error.log")],
        Peer::Caddy | Peer::StaticWebServer => Vec::new(),
    }
}

/// Starts `peer` (binary `bin`) with `workers` workers serving `root` with
/// `features`; its config, logs and temp files go in `dir`.
pub fn start_peer(
    peer: Peer,
    bin: &Path,
    dir: &Path,
    root: &Path,
    workers: usize,
    open_file_cache_max: usize,
    features: Features<'_>,
) -> Result<Running> {
    fs::create_dir_all(dir)?;
    let nginx_http2_directive = peer == Peer::Nginx && features.tls.is_some() && {
        let out = Command::new(bin).arg("-v").output()?;
        nginx_has_http2_directive(&String::from_utf8_lossy(&out.stderr))
    };
    let setup = PeerSetup {
        prefix: dir,
        root,
        port: free_port()?,
        workers,
        open_file_cache_max,
        cpus: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        features,
        nginx_http2_directive,
    };
    let conf = dir.join(config_file_name(peer));
    fs::write(&conf, render_peer_conf(peer, &setup))?;
    let command = peer_command(peer, bin, &setup, &conf, false);
    let mut running = Running::spawn(peer.name(), command, setup.port, dir)?;
    if let Err(err) = wait_until_accepting(&mut running) {
        // The server's own error log says more than its stderr, where it has one.
        let logs: Vec<String> = peer_error_logs(peer, dir)
            .iter()
            .map(|p| {
                let text = fs::read_to_string(p).unwrap_or_default();
                format!("{}:\n{text}", p.display())
            })
            .collect();
        return Err(if logs.is_empty() {
            err
        } else {
            err.context(logs.join("\n"))
        });
    }
    Ok(running)
}

/// Starts nginx with `workers` workers serving `root`; its files go in `dir`.
pub fn start_nginx(
    nginx: &Path,
    dir: &Path,
    root: &Path,
    workers: usize,
    open_file_cache_max: usize,
    features: Features<'_>,
) -> Result<Running> {
    start_peer(
        Peer::Nginx,
        nginx,
        dir,
        root,
        workers,
        open_file_cache_max,
        features,
    )
}

/// The fileserver config for a scenario: everything at its defaults
/// (`config/fileserver.toml`) except, when given, the cache bound, which
/// limits both the cached paths and the descriptors they keep open, as
/// nginx's `open_file_cache max=` does; and with `compression`, compressed
/// variants turned on (whatever their default), at their default levels.
pub fn render_fileserver_toml(cache_entries: Option<usize>, compression: bool) -> String {
    let mut toml = String::from(
        "# Generated by the loadtest harness; config/fileserver.toml documents every key.\n",
    );
    match (cache_entries, compression) {
        (Some(n), _) => toml.push_str(&format!("[cache]\nmax_entries = {n}\nmax_open = {n}\n")),
        (None, false) => toml.push_str("# Every key at its default.\n"),
        (None, true) => {}
    }
    if compression {
        toml.push_str("[compression]\nenabled = true\n");
    }
    toml
}

/// What one fileserver of a run gets beyond the harness's own settings.
#[derive(Clone, Copy, Debug)]
pub struct Extra<'a> {
    /// Command-line arguments (`--fileserver-arg`).
    pub args: &'a [String],
    /// TOML appended to its config (`--fileserver-config-append`).
    pub config_tail: &'a str,
}

/// Starts fileserver with `workers` workers serving `root`, with the config
/// written into `dir`, plus `extra`. With `features.tls` it also
/// serves HTTPS (`--tls-listen`, `--tls-cert`, `--tls-key`), and the
/// returned address is that listener's.
pub fn start_fileserver(
    bin: &Path,
    dir: &Path,
    root: &Path,
    workers: usize,
    cache_entries: Option<usize>,
    extra: Extra<'_>,
    features: Features<'_>,
) -> Result<Running> {
    let Extra {
        args: extra_args,
        config_tail,
    } = extra;
    let tls = features.tls;
    fs::create_dir_all(dir)?;
    let port = free_port()?;
    let admin_port = free_port()?;
    let tls_port = tls.map(|_| free_port()).transpose()?;
    let config = dir.join("fileserver.toml");
    let mut text = render_fileserver_toml(cache_entries, features.compression);
    text.push('\n');
    text.push_str(config_tail);
    fs::write(&config, text)?;
    // A renamed key would otherwise surface as a daemon that exits at start.
    let check = Command::new(bin)
        .arg("check-config")
        .arg(&config)
        .output()
        .context("run fileserver check-config")?;
    if !check.status.success() {
        bail!(
            "fileserver check-config rejected the generated config:\n{}{}",
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr)
        );
    }
    let mut command = Command::new(bin);
    command
        .arg("--config")
        .arg(&config)
        .arg("--root")
        .arg(root)
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--admin-listen")
        .arg(format!("127.0.0.1:{admin_port}"))
        .arg("--workers")
        .arg(workers.to_string())
        .arg("--access-log")
        .arg("off")
        .arg("--log-level")
        .arg("warn")
        .args(extra_args)
        .env_remove("RUST_LOG");
    if let (Some(cert), Some(tls_port)) = (tls, tls_port) {
        command
            .arg("--tls-listen")
            .arg(format!("127.0.0.1:{tls_port}"))
            .arg("--tls-cert")
            .arg(&cert.chain)
            .arg("--tls-key")
            .arg(&cert.key);
        if features.http3 {
            command.args(["--set", "http3.enabled=true"]);
        }
    }
    let mut running = Running::spawn(FILESERVER, command, tls_port.unwrap_or(port), dir)?;
    wait_until_accepting(&mut running)?;
    Ok(running)
}

/// Waits until the server accepts TCP connections, failing with its log if
/// it exits first or takes longer than 20 s.
fn wait_until_accepting(running: &mut Running) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        check_interrupted()?;
        if let Some(status) = running.group.try_wait()? {
            let log = fs::read_to_string(&running.log).unwrap_or_default();
            bail!(
                "{} exited with {status} before serving; its output:\n{log}",
                running.name
            );
        }
        if TcpStream::connect_timeout(&running.addr, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            let log = fs::read_to_string(&running.log).unwrap_or_default();
            bail!(
                "{} did not accept on {} within 20 s; its output:\n{log}",
                running.name,
                running.addr
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(prefix: &Path) -> PeerSetup<'_> {
        PeerSetup {
            prefix,
            root: Path::new("srv/r"),
            port: 8123,
            workers: 2,
            open_file_cache_max: 2000,
            cpus: 2,
            features: Features::default(),
            nginx_http2_directive: false,
        }
    }

    fn test_cert() -> TestCert {
        TestCert {
            ca: "certs/ca.pem".into(),
            chain: "certs/chain.pem".into(),
            key: "certs/key.pem".into(),
        }
    }

    #[test]
    fn nginx_template_has_every_required_setting_and_no_placeholder_left() {
        let conf = render_nginx_conf(NGINX_TEMPLATE, &setup(Path::new("srv/p")));
        assert!(!conf.contains('@'), "unfilled placeholder in:\n{conf}");
        for needle in [
            "daemon off;",
            "worker_processes 2;",
            "sendfile on;",
            "tcp_nopush on;",
            "access_log off;",
            "open_file_cache max=2000",
            "listen 127.0.0.1:8123",
            "pid srv/p/nginx.pid;",
            "root srv/r;",
        ] {
            assert!(conf.contains(needle), "missing {needle:?}");
        }
    }

    #[test]
    fn tls_and_compression_configs_say_what_the_harness_promises() {
        let cert = test_cert();
        let with = |features, directive| PeerSetup {
            features,
            nginx_http2_directive: directive,
            ..setup(Path::new("p"))
        };
        let tls = Features {
            tls: Some(&cert),
            compression: false,
            aio_threads: false,
            http3: false,
        };
        // The directives only: the templates' comments name them too.
        let directives = |conf: String| -> String {
            assert!(!conf.contains('@'), "unfilled placeholder in:\n{conf}");
            conf.lines()
                .filter(|l| !l.trim_start().starts_with('#'))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let nginx = |features, directive| {
            directives(render_nginx_conf(
                NGINX_TEMPLATE,
                &with(features, directive),
            ))
        };
        let old = nginx(tls, false);
        let new = nginx(tls, true);
        for conf in [&old, &new] {
            for needle in [
                "ssl_certificate certs/chain.pem;",
                "ssl_certificate_key certs/key.pem;",
                "ssl_session_cache shared:SSL:10m;",
                "ssl_protocols TLSv1.2 TLSv1.3;",
                "worker_processes 2;",
                "sendfile on;",
            ] {
                assert!(conf.contains(needle), "missing {needle:?} in:\n{conf}");
            }
        }
        assert!(
            old.contains("listen 127.0.0.1:8123 ssl http2 reuseport;")
                && !old.contains("http2 on;")
        );
        assert!(new.contains("listen 127.0.0.1:8123 ssl reuseport;") && new.contains("http2 on;"));
        assert!(nginx_has_http2_directive("nginx version: nginx/1.25.1\n"));
        assert!(nginx_has_http2_directive("nginx version: nginx/1.27.0"));
        assert!(!nginx_has_http2_directive("nginx version: nginx/1.22.1\n"));
        assert!(!nginx_has_http2_directive("nginx version: nginx/1.25.0"));

        let h3 = Features { http3: true, ..tls };
        let caddy_h3 = directives(render_peer_conf(Peer::Caddy, &with(h3, false)));
        assert!(caddy_h3.contains("protocols h1 h2 h3"), "{caddy_h3}");
        let gzip = Features {
            tls: None,
            compression: true,
            aio_threads: false,
            http3: false,
        };
        let conf = nginx(gzip, false);
        assert!(
            conf.contains("gzip on;") && !conf.contains("gzip_comp_level"),
            "{conf}"
        );
        assert!(conf.contains("gzip_types application/javascript text/css application/json;"));
        assert!(!conf.contains("ssl"), "{conf}");
        assert!(!conf.contains("aio"), "{conf}");
        let cold = Features {
            aio_threads: true,
            ..Features::default()
        };
        assert!(nginx(cold, false).contains("aio threads;"));
        let plain = nginx(Features::default(), false);
        assert!(
            !plain.contains("gzip on") && !plain.contains("ssl"),
            "{plain}"
        );

        let caddy = directives(render_peer_conf(Peer::Caddy, &with(tls, false)));
        for needle in [
            "https://:8123 {",
            "protocols h1 h2",
            "tls \"certs/chain.pem\" \"certs/key.pem\"",
        ] {
            assert!(caddy.contains(needle), "missing {needle:?} in:\n{caddy}");
        }
        let caddy = directives(render_peer_conf(Peer::Caddy, &with(gzip, false)));
        assert!(caddy.contains("encode zstd gzip") && caddy.contains("http://:8123 {"));
        let h2o = directives(render_peer_conf(Peer::H2o, &with(tls, false)));
        assert!(h2o.contains("  ssl:\n    certificate-file: \"certs/chain.pem\"\n    key-file: \"certs/key.pem\"\n"), "{h2o}");
        let lighttpd = directives(render_peer_conf(Peer::Lighttpd, &with(tls, false)));
        for needle in [
            "server.modules = (\"mod_openssl\")",
            "ssl.engine = \"enable\"",
            "ssl.pemfile = \"certs/chain.pem\"",
            "ssl.privkey = \"certs/key.pem\"",
        ] {
            assert!(
                lighttpd.contains(needle),
                "missing {needle:?} in:\n{lighttpd}"
            );
        }
        let lighttpd = directives(render_peer_conf(Peer::Lighttpd, &with(gzip, false)));
        assert!(
            lighttpd.contains("server.modules = (\"mod_deflate\")"),
            "{lighttpd}"
        );
        assert!(lighttpd.contains("deflate.mimetypes = ( \"text/javascript\""));
        assert!(lighttpd.contains("deflate.allowed-encodings = ("));
        let h2o = directives(render_peer_conf(Peer::H2o, &with(gzip, false)));
        assert!(
            h2o.contains("\ncompress: ON\n") && !h2o.contains("ssl:"),
            "{h2o}"
        );
    }

    #[test]
    fn every_peer_template_is_filled_and_says_what_the_harness_promises() {
        let expected: [(Peer, &[&str]); 4] = [
            (
                Peer::Lighttpd,
                &[
                    "server.max-worker = 2",
                    "server.bind = \"127.0.0.1\"",
                    "server.port = 8123",
                    "server.document-root = \"srv/r\"",
                    "server.network-backend = \"sendfile\"",
                    "server.errorlog = \"srv/p/error.log\"",
                    "server.modules = ()",
                ],
            ),
            (
                Peer::H2o,
                &[
                    "num-threads: 2",
                    "host: 127.0.0.1",
                    "port: 8123",
                    "file.dir: \"srv/r\"",
                    "error-log: \"srv/p/error.log\"",
                ],
            ),
            (
                Peer::Caddy,
                &[
                    "admin off",
                    "auto_https off",
                    "http://:8123 {",
                    "bind 127.0.0.1",
                    "root * \"srv/r\"",
                    "file_server",
                    "protocols h1",
                ],
            ),
            (
                Peer::StaticWebServer,
                &[
                    "host = \"127.0.0.1\"",
                    "port = 8123",
                    "root = \"srv/r\"",
                    "threads-multiplier = 1",
                    "log-level = \"error\"",
                    "compression = false",
                ],
            ),
        ];
        for (peer, needles) in expected {
            let conf = render_peer_conf(peer, &setup(Path::new("srv/p")));
            assert!(
                !conf.contains('@'),
                "{peer}: unfilled placeholder in:\n{conf}"
            );
            for needle in needles {
                assert!(
                    conf.contains(needle),
                    "{peer}: missing {needle:?} in:\n{conf}"
                );
            }
            // Access logs stay off: no directive (comments aside) turns one
            // on, and Caddy's site block has no `log`.
            let directives: String = conf
                .lines()
                .filter(|l| !l.trim_start().starts_with('#'))
                .collect::<Vec<_>>()
                .join("\n");
            for on in ["accesslog", "access-log", "access_log"] {
                assert!(!directives.contains(on), "{peer}: {on:?} in:\n{conf}");
            }
            if let Some((_, site)) = directives.split_once("http://") {
                assert!(!site.contains("log"), "{peer}: a log in the site:\n{site}");
            }
        }
    }

    #[test]
    fn sws_multiplier_comes_closest_to_the_worker_count() {
        assert_eq!(sws_threads_multiplier(2, 2), 1);
        assert_eq!(sws_threads_multiplier(2, 1), 2);
        assert_eq!(sws_threads_multiplier(4, 2), 2);
        assert_eq!(sws_threads_multiplier(1, 8), 1);
        assert_eq!(sws_threads_multiplier(2, 0), 2);
    }

    #[test]
    fn peer_names_parse_and_unknown_names_are_explained() {
        for p in Peer::ALL {
            assert_eq!(p.name().parse::<Peer>().unwrap(), p);
        }
        assert_eq!("sws".parse::<Peer>().unwrap(), Peer::StaticWebServer);
        let err = "apache".parse::<Peer>().unwrap_err();
        assert!(err.contains("lighttpd"), "{err}");
    }

    #[test]
    fn binaries_are_found_on_path_or_not_at_all() {
        assert_eq!(
            find_binary(Path::new("sh")).map(|p| p.is_file()),
            Some(true)
        );
        assert_eq!(find_binary(Path::new("no-such-server-binary-xyz")), None);
        assert_eq!(find_binary(Path::new("/no/such/dir/nginx")), None);
    }

    #[test]
    fn embedded_servers_get_the_root_port_and_workers() {
        let command = embedded_command(
            Embedded::TowerHttp,
            Path::new("embedded-server"),
            Path::new("srv/root"),
            8123,
            2,
        );
        let args: Vec<_> = command
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args,
            [
                "--impl",
                "tower-http",
                "--root",
                "srv/root",
                "--listen",
                "127.0.0.1:8123",
                "--workers",
                "2"
            ]
        );
        assert_eq!(
            Embedded::ALL.map(Embedded::name),
            ["servedir", "tower-http"]
        );
    }

    #[test]
    fn fileserver_config_bounds_the_cache_or_leaves_the_defaults() {
        let bounded = render_fileserver_toml(Some(2000), false);
        assert!(bounded.contains("max_entries = 2000\nmax_open = 2000\n"));
        let defaults = render_fileserver_toml(None, false);
        assert!(!defaults.contains("[cache]") && !defaults.contains('='));
        let compressed = render_fileserver_toml(Some(10), true);
        assert!(compressed.ends_with("max_open = 10\n[compression]\nenabled = true\n"));
    }

    /// Each installed peer's own checker accepts the rendered config.
    #[test]
    fn installed_peers_accept_their_rendered_configs() {
        for peer in Peer::ALL {
            let Some(bin) = find_binary(Path::new(peer.default_bin())) else {
                eprintln!("skipping {peer}: {} not installed", peer.default_bin());
                continue;
            };
            if peer == Peer::StaticWebServer {
                // No check mode; the smoke run starts it for real.
                continue;
            }
            let dir =
                std::env::temp_dir().join(format!("loadtest-{peer}-t-{}", std::process::id()));
            fs::create_dir_all(&dir).unwrap();
            let cert = crate::loadtest::tls::generate(&dir).unwrap();
            let mut variants = vec![Features::default()];
            // The TLS and compression configs of the peers that have them
            // (the checkers load the certificate, too).
            if crate::loadtest::scenario::Group::Tls.runs_peer(peer) {
                variants.push(Features {
                    tls: Some(&cert),
                    compression: false,
                    aio_threads: false,
                    http3: false,
                });
                variants.push(Features {
                    tls: None,
                    compression: true,
                    aio_threads: false,
                    http3: false,
                });
            }
            if crate::loadtest::scenario::Group::Http3.runs_peer(peer) {
                variants.push(Features {
                    tls: Some(&cert),
                    compression: false,
                    aio_threads: false,
                    http3: true,
                });
            }
            let directive = peer == Peer::Nginx && {
                let out = Command::new(&bin).arg("-v").output().unwrap();
                nginx_has_http2_directive(&String::from_utf8_lossy(&out.stderr))
            };
            for features in variants {
                let setup = PeerSetup {
                    prefix: &dir,
                    root: &dir,
                    port: free_port().unwrap(),
                    workers: 2,
                    open_file_cache_max: 10_000,
                    cpus: 2,
                    features,
                    nginx_http2_directive: directive,
                };
                let conf = dir.join(config_file_name(peer));
                fs::write(&conf, render_peer_conf(peer, &setup)).unwrap();
                let out = peer_command(peer, &bin, &setup, &conf, true)
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "{peer} config check ({features:?}): {}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            let _ = fs::remove_dir_all(&dir);
        }
    }
}

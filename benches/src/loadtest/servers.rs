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
/// (`src/bin/ceiling-server/`) in reports: what the load generator can
/// drive here, never a peer (it is no file server: no ranges, no
/// revalidation, a fixed `Date`).
pub const CEILING: &str = "ceiling";

/// The name of the second fileserver build `--baseline-bin` runs: another
/// build of the subject, never a peer.
pub const BASELINE: &str = "baseline";

/// Starts the ceiling server (binary `bin`) with `workers` threads serving
/// `root`, and HTTP/3 on the same port with `quic`'s certificate; its
/// output goes in `dir`.
pub fn start_ceiling(
    bin: &Path,
    dir: &Path,
    root: &Path,
    workers: usize,
    quic: Option<&TestCert>,
) -> Result<Running> {
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
    if let Some(cert) = quic {
        command
            .arg("--quic-chain")
            .arg(&cert.chain)
            .arg("--quic-key")
            .arg(&cert.key);
    }
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
    /// Send a file's `.br` or `.gz` sibling to a client that accepts it
    /// (the `arena` group), with real media types: the daemon's
    /// `precompressed = true`, nginx's `gzip_static` and `brotli_static`,
    /// h2o's `file.send-compressed`, Caddy's `precompressed br gzip`;
    /// lighttpd, which cannot read siblings, compresses each file once
    /// into mod_deflate's cache.
    pub precompressed: bool,
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
    /// nginx's `brotli_static` module (Debian
    /// `libnginx-mod-http-brotli-static`), loaded with `precompressed`;
    /// `None`: not installed, and nginx sends the `.gz` siblings only.
    pub nginx_brotli_static: Option<&'a Path>,
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
    } else if setup.features.precompressed {
        let mut v = vec![
            format!("types {{ {} }}", nginx_types()),
            "gzip_static on;".to_string(),
        ];
        if setup.nginx_brotli_static.is_some() {
            v.push("brotli_static on;".to_string());
        }
        lines(v)
    } else {
        String::new()
    };
    let load_modules = match (setup.features.precompressed, setup.nginx_brotli_static) {
        (true, Some(module)) => format!("load_module {};", module.display()),
        _ => String::new(),
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
            ("@LOAD_MODULES@", load_modules),
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

/// The media types of the arena tree's files, by extension: what a
/// deployment serving them would send (and what compression modules look
/// at), where the other scenarios send `application/octet-stream`.
pub const ARENA_TYPES: [(&str, &str); 7] = [
    ("css", "text/css"),
    ("js", "text/javascript"),
    ("html", "text/html"),
    ("svg", "image/svg+xml"),
    ("json", "application/json"),
    ("woff2", "font/woff2"),
    ("webp", "image/webp"),
];

/// [`ARENA_TYPES`] as the body of nginx's `types` block.
fn nginx_types() -> String {
    let v: Vec<String> = ARENA_TYPES
        .iter()
        .map(|(ext, ty)| format!("{ty} {ext};"))
        .collect();
    v.join(" ")
}

/// The file name of nginx's `brotli_static` module.
pub const NGINX_BROTLI_STATIC: &str = "ngx_http_brotli_static_module.so";

/// nginx's `brotli_static` module, if installed: in the modules directory
/// `nginx -V` names (`--modules-path=`), or Debian's.
pub fn find_nginx_brotli_static(nginx: &Path) -> Option<PathBuf> {
    let out = Command::new(nginx).arg("-V").output().ok()?;
    let text = String::from_utf8_lossy(&out.stderr);
    let dir = text
        .split_whitespace()
        .find_map(|arg| arg.strip_prefix("--modules-path="))
        .unwrap_or("/usr/lib/nginx/modules");
    Some(Path::new(dir).join(NGINX_BROTLI_STATIC)).filter(|p| p.is_file())
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
            if setup.features.precompressed {
                modules.push("\"mod_deflate\"");
                let types: Vec<String> = ARENA_TYPES
                    .iter()
                    .map(|(ext, ty)| format!("\".{ext}\" => \"{ty}\""))
                    .collect();
                let text: Vec<String> = ARENA_TYPES[..5]
                    .iter()
                    .map(|(_, ty)| format!("\"{ty}\""))
                    .collect();
                extra.push(format!(
                    "mimetype.assign := ( {}, \"\" => \"application/octet-stream\" )\n\
                     deflate.mimetypes = ( {} )\n\
                     deflate.allowed-encodings = ( \"br\", \"gzip\" )\n\
                     deflate.cache-dir = \"{}\"",
                    types.join(", "),
                    text.join(", "),
                    lighttpd_cache_dir(setup.prefix).display()
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
                    "@H2O_EXTRA@",
                    match (compression, setup.features.precompressed) {
                        (true, _) => "compress: ON",
                        // h2o 2.2 accepts 1024 connections by default.
                        (false, true) => "file.send-compressed: ON\nmax-connections: 10000",
                        (false, false) => "",
                    }
                    .to_string(),
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
                (
                    "@FILE_SERVER_BLOCK@",
                    if setup.features.precompressed {
                        " {\n\t\tprecompressed br gzip\n\t}"
                    } else {
                        ""
                    }
                    .into(),
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

/// Where lighttpd's mod_deflate keeps what it compressed (the `arena`
/// group), in its own directory.
pub fn lighttpd_cache_dir(prefix: &Path) -> PathBuf {
    prefix.join("deflate-cache")
}

/// Makes what `peer`'s rendered config expects to find in `setup.prefix`.
pub fn prepare_peer_dir(peer: Peer, setup: &PeerSetup<'_>) -> Result<()> {
    fs::create_dir_all(setup.prefix)?;
    if peer == Peer::Lighttpd && setup.features.precompressed {
        fs::create_dir_all(lighttpd_cache_dir(setup.prefix))?;
    }
    Ok(())
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
    let brotli_static = (peer == Peer::Nginx && features.precompressed)
        .then(|| find_nginx_brotli_static(bin))
        .flatten();
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
        nginx_brotli_static: brotli_static.as_deref(),
    };
    prepare_peer_dir(peer, &setup)?;
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
/// nginx's `open_file_cache max=` does; with `compression`, compressed
/// variants turned on (whatever their default), at their default levels;
/// with `precompressed`, precompressed siblings served (whatever the default).
pub fn render_fileserver_toml(
    cache_entries: Option<usize>,
    compression: bool,
    precompressed: bool,
) -> String {
    let mut toml = String::from(
        "# Generated by the loadtest harness; config/fileserver.toml documents every key.\n",
    );
    if precompressed {
        toml.push_str("precompressed = true\n");
    }
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
    let mut text =
        render_fileserver_toml(cache_entries, features.compression, features.precompressed);
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

    /// A rendered config's directives only: the templates' comments name
    /// them too. Fails on a placeholder left unfilled.
    fn directives(conf: String) -> String {
        assert!(!conf.contains('@'), "unfilled placeholder in:\n{conf}");
        conf.lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n")
    }

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
            nginx_brotli_static: None,
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
            precompressed: false,
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
            precompressed: false,
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
    fn arena_configs_send_the_precompressed_siblings() {
        let arena = Features {
            precompressed: true,
            ..Features::default()
        };
        let module = Path::new("/m/ngx_http_brotli_static_module.so");
        let with = |features, brotli: Option<&'static Path>| PeerSetup {
            features,
            nginx_brotli_static: brotli,
            ..setup(Path::new("srv/p"))
        };
        let nginx = directives(render_nginx_conf(
            NGINX_TEMPLATE,
            &with(arena, Some(module)),
        ));
        for needle in [
            "load_module /m/ngx_http_brotli_static_module.so;",
            "gzip_static on;",
            "brotli_static on;",
            "sendfile on;",
            "open_file_cache max=2000",
            "text/css css;",
            "font/woff2 woff2;",
        ] {
            assert!(nginx.contains(needle), "missing {needle:?} in:\n{nginx}");
        }
        assert!(nginx.find("load_module") < nginx.find("events {"));
        assert!(!nginx.contains("gzip on;"), "{nginx}");
        // Without the module nginx still sends the .gz siblings.
        let gz_only = directives(render_nginx_conf(NGINX_TEMPLATE, &with(arena, None)));
        assert!(gz_only.contains("gzip_static on;") && !gz_only.contains("brotli"));
        let plain = directives(render_nginx_conf(
            NGINX_TEMPLATE,
            &with(Features::default(), Some(module)),
        ));
        assert!(!plain.contains("load_module") && !plain.contains("gzip_static"));

        let caddy = directives(render_peer_conf(Peer::Caddy, &with(arena, None)));
        assert!(
            caddy.contains("file_server {\n\t\tprecompressed br gzip\n\t}"),
            "{caddy}"
        );
        assert!(!caddy.contains("encode"), "{caddy}");
        let h2o = directives(render_peer_conf(Peer::H2o, &with(arena, None)));
        assert!(
            h2o.contains("\nfile.send-compressed: ON\nmax-connections: 10000\n"),
            "{h2o}"
        );
        assert!(!h2o.contains("\ncompress: ON"), "{h2o}");
        let lighttpd = directives(render_peer_conf(Peer::Lighttpd, &with(arena, None)));
        for needle in [
            "server.modules = (\"mod_deflate\")",
            "\".woff2\" => \"font/woff2\"",
            "deflate.mimetypes = ( \"text/css\", \"text/javascript\", \"text/html\", \"image/svg+xml\", \"application/json\" )",
            "deflate.allowed-encodings = ( \"br\", \"gzip\" )",
            "deflate.cache-dir = \"srv/p/deflate-cache\"",
        ] {
            assert!(lighttpd.contains(needle), "missing {needle:?} in:\n{lighttpd}");
        }
        // arena_h2_256: TLS and the siblings together.
        let cert = test_cert();
        let both = Features {
            tls: Some(&cert),
            ..arena
        };
        let lighttpd = directives(render_peer_conf(Peer::Lighttpd, &with(both, None)));
        assert!(lighttpd.contains("server.modules = (\"mod_openssl\", \"mod_deflate\")"));
        let caddy = directives(render_peer_conf(Peer::Caddy, &with(both, None)));
        assert!(caddy.contains("https://:8123 {") && caddy.contains("precompressed br gzip"));
        assert!(caddy.contains("protocols h1 h2"));
        let nginx = directives(render_nginx_conf(NGINX_TEMPLATE, &with(both, Some(module))));
        assert!(nginx.contains("ssl_certificate") && nginx.contains("brotli_static on;"));
    }

    /// Each installed peer, started with its arena config, sends the
    /// siblings of HttpArena's files (lighttpd its own compression), and
    /// every body decodes to the file. 20 requests each, no load.
    #[test]
    fn installed_peers_send_the_arena_siblings() {
        use crate::loadtest::tree::{self, arena};
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        // nginx's and h2o's workers run as nobody under root.
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let root = dir.path().join("root");
        fs::create_dir_all(&root).unwrap();
        let extras = tree::Extras {
            arena: true,
            ..tree::Extras::default()
        };
        tree::generate(&root, extras).unwrap();
        let features = Features {
            precompressed: true,
            ..Features::default()
        };
        for peer in Peer::ALL {
            if !crate::loadtest::scenario::Group::Arena.runs_peer(peer) {
                continue;
            }
            let Some(bin) = find_binary(Path::new(peer.default_bin())) else {
                eprintln!("skipping {peer}: {} not installed", peer.default_bin());
                continue;
            };
            let running = start_peer(
                peer,
                &bin,
                &dir.path().join(peer.name()),
                &root,
                1,
                100,
                features,
            )
            .unwrap();
            let answers: Vec<_> = arena::generated()
                .iter()
                .map(|g| {
                    let path = g.file.path();
                    let accept = [("Accept-Encoding", arena::ACCEPT_ENCODING)];
                    let r = crate::loadtest::http::get(running.addr, &path, &accept).unwrap();
                    assert_eq!(r.status, 200, "{peer} {path}");
                    let coding = r.header("content-encoding").unwrap_or("identity");
                    let how = arena::served(g, coding, &r.body)
                        .unwrap_or_else(|e| panic!("{peer} {path}: {e}"));
                    (g.file, coding.to_string(), how)
                })
                .collect();
            let line = arena::describe(&answers);
            eprintln!("{peer}: {line}");
            let siblings = "br x15 (siblings), identity x5";
            match peer {
                Peer::Lighttpd => assert_eq!(
                    line,
                    "br x15 (own compression), identity x5; \
                     FLAGGED: compresses by itself, does not send the siblings"
                ),
                Peer::Nginx if find_nginx_brotli_static(&bin).is_none() => {
                    assert_eq!(line, "gzip x15 (siblings), identity x5");
                }
                // h2o 2.2 (Debian's) takes `br` and `gzip` only without
                // parameters: `br;q=1, gzip;q=0.8` gets neither sibling
                // (`br, gzip` gets them), so it runs flagged.
                Peer::H2o => assert!(
                    line == siblings
                        || line.starts_with(
                            "identity x20; FLAGGED: 15 file(s) with siblings sent uncompressed"
                        ),
                    "{line}"
                ),
                _ => assert_eq!(line, siblings, "{peer}"),
            }
        }
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
        let bounded = render_fileserver_toml(Some(2000), false, false);
        assert!(bounded.contains("max_entries = 2000\nmax_open = 2000\n"));
        assert!(!bounded.contains("precompressed"));
        let defaults = render_fileserver_toml(None, false, false);
        assert!(!defaults.contains("[cache]") && !defaults.contains('='));
        let compressed = render_fileserver_toml(Some(10), true, false);
        assert!(compressed.ends_with("max_open = 10\n[compression]\nenabled = true\n"));
        // A top-level key, before the first table.
        let siblings = render_fileserver_toml(Some(10), false, true);
        assert!(
            siblings.contains("\nprecompressed = true\n[cache]\n"),
            "{siblings}"
        );
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
                    precompressed: false,
                });
                variants.push(Features {
                    tls: None,
                    compression: true,
                    aio_threads: false,
                    http3: false,
                    precompressed: false,
                });
            }
            if crate::loadtest::scenario::Group::Arena.runs_peer(peer) {
                // arena_h1_* and arena_h2_256.
                for tls in [None, Some(&cert)] {
                    variants.push(Features {
                        tls,
                        precompressed: true,
                        ..Features::default()
                    });
                }
            }
            if crate::loadtest::scenario::Group::Http3.runs_peer(peer) {
                variants.push(Features {
                    tls: Some(&cert),
                    compression: false,
                    aio_threads: false,
                    http3: true,
                    precompressed: false,
                });
            }
            let directive = peer == Peer::Nginx && {
                let out = Command::new(&bin).arg("-v").output().unwrap();
                nginx_has_http2_directive(&String::from_utf8_lossy(&out.stderr))
            };
            let brotli_static = find_nginx_brotli_static(&bin).filter(|_| peer == Peer::Nginx);
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
                    nginx_brotli_static: brotli_static.as_deref(),
                };
                prepare_peer_dir(peer, &setup).unwrap();
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

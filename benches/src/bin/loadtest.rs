//! The side-by-side HTTP load harness: `fileserver` against nginx, lighttpd,
//! h2o, Caddy and static-web-server on loopback, and (the `embedded` group)
//! `servedir::ServeDir` against tower-http's `ServeDir` in the same axum app
//! and the daemon.
//!
//! `cargo run --release -p benches --bin loadtest -- --help` lists the options;
//! `benches/README.md` explains the output. The moving parts live in
//! `benches::loadtest` (see its module doc for the data flow).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, ensure, Context, Result};
use clap::Parser;

use benches::loadtest::build::{cargo_build, workspace_root};
use benches::loadtest::http::{self, Client};
use benches::loadtest::loadgen::{self, LoadSettings, RunResult, WrkRun};
use benches::loadtest::procs::{self, check_interrupted, group_cpu, Cpu, Sampler};
use benches::loadtest::report::{self, Report, ScenarioReport, Settings};
use benches::loadtest::scenario::{
    Group, Protocol, Scenario, Throughput, ARENA_ACCEPT_ENCODING, BROWSER_ACCEPT_ENCODING,
    COLD_LARGE_CONNECTIONS, COLD_SMALL_CONNECTIONS, COLD_SMALL_RATE, COLD_TIMEOUT_S, OHA_RANGE,
    RANGE_LEN,
};
use benches::loadtest::servers::{
    self, find_binary, Embedded, Features, Peer, Running, BASELINE, CEILING, FILESERVER,
};
use benches::loadtest::tls::{self, TestCert};
use benches::loadtest::tree::{
    self, COLD_COUNT, COLD_COUNT_QUICK, COLD_SIZE, LARGE_PATH, LARGE_SIZE, MANY_COUNT, MANY_SIZE,
    PRESSURE_COUNT, PRESSURE_SIZE, SMALL_COUNT, SMALL_SIZE, TEXT_COUNT,
};

/// Load-test fileserver against nginx, lighttpd, h2o, Caddy and
/// static-web-server, side by side, on 127.0.0.1; and servedir against
/// tower-http's ServeDir in the same axum app (the embedded group).
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Use this fileserver binary instead of building it (`cargo build --release -p fileserver`).
    #[arg(long, value_name = "PATH")]
    fileserver_bin: Option<PathBuf>,
    /// Run this second fileserver binary (an older build, say) beside the
    /// first in every round of the peers and tls groups, as a column named
    /// `baseline`: the two are measured side by side, alternated with the
    /// peers, and the tables' parentheses give fileserver / baseline. It is
    /// never counted as the best peer.
    #[arg(long, value_name = "PATH")]
    baseline_bin: Option<PathBuf>,
    /// Use this embedded-server binary (the embedded group's axum app)
    /// instead of building it (`cargo build --release -p benches --bin embedded-server`).
    #[arg(long, value_name = "PATH")]
    embedded_server_bin: Option<PathBuf>,
    /// Use this ceiling-server binary (the reference server that does no
    /// work) instead of building it (`cargo build --release -p benches --bin
    /// ceiling-server`).
    #[arg(long, value_name = "PATH")]
    ceiling_server_bin: Option<PathBuf>,
    /// Use this h3load binary (the HTTP/3 load generator of the http3
    /// group) instead of building it (`cargo build --release -p benches
    /// --bin h3load`).
    #[arg(long, value_name = "PATH")]
    h3load_bin: Option<PathBuf>,
    /// Leave out the ceiling server: by default it runs beside the peers in
    /// small_random, large, cache_pressure, not_modified and many_files*, and
    /// fileserver / ceiling shows how much of the load generator's capacity
    /// is left to win; in h3_* it is quinn with nothing above it, the floor
    /// of any HTTP/3 server on quinn.
    #[arg(long)]
    no_ceiling: bool,
    /// Extra argument for fileserver (repeatable), e.g. `--fileserver-arg=--io-backend=blocking`.
    #[arg(
        long = "fileserver-arg",
        value_name = "ARG",
        allow_hyphen_values = true
    )]
    fileserver_args: Vec<String>,
    /// TOML appended to fileserver's generated config, not the baseline's:
    /// the `[[rules]]` whose cost a run measures against a build without
    /// them.
    #[arg(long, value_name = "FILE")]
    fileserver_config_append: Option<PathBuf>,
    /// Peers to compare with (repeatable or comma-separated; default all):
    /// nginx, lighttpd, h2o, caddy, static-web-server. A peer whose binary is
    /// missing is skipped with a message.
    #[arg(long = "peer", value_name = "NAME", value_delimiter = ',')]
    peers: Vec<Peer>,
    /// The nginx binary (default: `nginx` on PATH or in /usr/sbin).
    #[arg(long, value_name = "PATH")]
    nginx: Option<PathBuf>,
    /// The lighttpd binary (default: `lighttpd` on PATH or in /usr/sbin).
    #[arg(long, value_name = "PATH")]
    lighttpd: Option<PathBuf>,
    /// The h2o binary (default: `h2o` on PATH).
    #[arg(long, value_name = "PATH")]
    h2o: Option<PathBuf>,
    /// The Caddy binary (default: `caddy` on PATH).
    #[arg(long, value_name = "PATH")]
    caddy: Option<PathBuf>,
    /// The static-web-server binary (default: `static-web-server` on PATH;
    /// Debian has no package, so without either it is skipped).
    #[arg(long, value_name = "PATH")]
    static_web_server: Option<PathBuf>,
    /// The wrk binary.
    #[arg(long, value_name = "PATH", default_value = "wrk")]
    wrk: PathBuf,
    /// The oha binary (default: `oha` on PATH or in ~/.cargo/bin). Without oha,
    /// latency comes from wrk's (uncorrected) distribution.
    #[arg(long, value_name = "PATH")]
    oha: Option<PathBuf>,
    /// Measure latency with wrk even if oha is installed.
    #[arg(long)]
    no_oha: bool,
    /// The h2load binary (nghttp2-client), for tls_*_h2 and tls_handshakes.
    #[arg(long, value_name = "PATH", default_value = "h2load")]
    h2load: PathBuf,
    /// Scenarios to run (repeatable or comma-separated; default: the peers
    /// and embedded groups): small_random, large, cache_pressure,
    /// not_modified, range, many_files, many_files_browser, cold (fileserver
    /// against the peers);
    /// embedded_small, embedded_large, embedded_range (the embedded group:
    /// servedir and tower-http's ServeDir in an axum app, and fileserver);
    /// tls_small_h1, tls_small_h2, tls_large_h1, tls_large_h2,
    /// tls_handshakes (the tls group: HTTPS against nginx, lighttpd, h2o,
    /// Caddy);
    /// compressed_text (the compression group);
    /// h3_small, h3_large (the http3 group: HTTP/3 against Caddy, load from
    /// h3load);
    /// arena_h1_64, arena_h1_1024, arena_h1_4096, arena_h2_256 (the arena
    /// group: HttpArena's 20 static files with their .br and .gz siblings).
    #[arg(long = "scenario", value_name = "NAME", value_delimiter = ',')]
    scenarios: Vec<Scenario>,
    /// Run every scenario of a group (repeatable or comma-separated, added
    /// to --scenario): peers (the first seven), embedded (the embedded_*),
    /// tls (the tls_*), compression (compressed_text), http3 (h3_*) or
    /// arena (the arena_*: HttpArena's static profile). Only peers and
    /// embedded are in the default run.
    #[arg(long = "group", value_name = "NAME", value_delimiter = ',')]
    groups: Vec<Group>,
    /// Smallest run that still checks everything: 1 round, 1 s per run, no
    /// warm-up, 2 cold files instead of 8 (explicit --rounds/--duration/--warmup win).
    #[arg(long)]
    quick: bool,
    /// Rounds per scenario; each round runs wrk on every server, then oha on
    /// every server [default: 3, --quick 1].
    #[arg(long)]
    rounds: Option<usize>,
    /// Seconds per timed run [default: 3, --quick 1].
    #[arg(long, value_name = "SECS")]
    duration: Option<u64>,
    /// Seconds of untimed wrk load per server before the rounds [default: 1, --quick 0].
    #[arg(long, value_name = "SECS")]
    warmup: Option<u64>,
    /// Open connections per run.
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// wrk threads.
    #[arg(long, default_value_t = 1)]
    wrk_threads: usize,
    /// Workers of each server.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// oha's fixed request rate, as a fraction of the slowest server's wrk
    /// req/s in the same round (latency is compared at equal offered load).
    #[arg(long, default_value_t = 0.5)]
    latency_load: f64,
    /// Where latest.{json,md,png} go (default: benches/http/results).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Keep the temp dir (trees, configs, server logs, raw tool output).
    #[arg(long)]
    keep_temp: bool,
    /// Run nginx in place of fileserver too, against nginx only unless --peer
    /// says otherwise (an A/A run that shows the harness's own noise; the
    /// embedded group is skipped).
    #[arg(long)]
    nginx_vs_nginx: bool,
    /// Run nothing: re-render latest.md and latest.png from this JSON report into --out.
    #[arg(long, value_name = "JSON")]
    render: Option<PathBuf>,
}

impl Args {
    /// The binary given for `peer`, if any.
    fn peer_bin(&self, peer: Peer) -> Option<&PathBuf> {
        match peer {
            Peer::Nginx => self.nginx.as_ref(),
            Peer::Lighttpd => self.lighttpd.as_ref(),
            Peer::H2o => self.h2o.as_ref(),
            Peer::Caddy => self.caddy.as_ref(),
            Peer::StaticWebServer => self.static_web_server.as_ref(),
        }
    }
}

/// Rounds, durations and tree sizes after `--quick` and the explicit flags.
#[derive(Debug, Clone, Copy)]
struct Plan {
    rounds: usize,
    duration: u64,
    warmup: u64,
    cold_files: usize,
}

impl Plan {
    fn from_args(args: &Args) -> Self {
        let q = args.quick;
        Self {
            rounds: args.rounds.unwrap_or(if q { 1 } else { 3 }),
            duration: args.duration.unwrap_or(if q { 1 } else { 3 }),
            warmup: args.warmup.unwrap_or(if q { 0 } else { 1 }),
            cold_files: if q { COLD_COUNT_QUICK } else { COLD_COUNT },
        }
    }
}

/// The temp dir, removed on drop unless kept.
struct TempDir {
    path: PathBuf,
    keep: bool,
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if self.keep {
            eprintln!("loadtest: kept {}", self.path.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

fn main() {
    let args = Args::parse();
    match run(args) {
        Ok(0) => {}
        Ok(failures) => {
            eprintln!("loadtest: {failures} failure(s): scenarios or peers left out (see above)");
            std::process::exit(1);
        }
        Err(err) => {
            eprintln!("loadtest: error: {err:#}");
            std::process::exit(if procs::interrupted() { 130 } else { 1 });
        }
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Why `cold` cannot run here, if it cannot.
fn cold_unavailable() -> Option<String> {
    (!is_root()).then(|| {
        "needs root to drop the page cache (echo 3 > /proc/sys/vm/drop_caches); \
         run the harness as root to include it"
            .to_string()
    })
}

/// Everything a scenario needs besides the scenario itself.
struct Ctx<'a> {
    args: &'a Args,
    plan: Plan,
    /// `None` in an A/A run: nginx stands in for fileserver.
    fileserver_bin: Option<&'a Path>,
    /// `--baseline-bin`: another fileserver build run beside it.
    baseline_bin: Option<&'a Path>,
    /// The nginx binary standing in for fileserver in an A/A run.
    nginx_for_a: Option<&'a Path>,
    /// The embedded group's axum app (`None` when no embedded scenario runs).
    embedded_bin: Option<&'a Path>,
    /// The reference server that does no work (`None`: not run).
    ceiling_bin: Option<&'a Path>,
    peers: &'a [(Peer, PathBuf)],
    temp: &'a Path,
    root: &'a Path,
    settings: &'a LoadSettings,
    /// The test certificate (`None` when no TLS scenario runs).
    cert: Option<&'a TestCert>,
    /// `--fileserver-config-append`'s text (empty: none).
    config_tail: String,
}

impl Ctx<'_> {
    /// What the servers offer in `scenario`.
    fn features(&self, scenario: Scenario) -> Features<'_> {
        Features {
            tls: self.cert.filter(|_| scenario.protocol().tls()),
            compression: scenario == Scenario::CompressedText,
            aio_threads: scenario == Scenario::Cold,
            http3: scenario.protocol() == Protocol::Https3,
            precompressed: scenario.group() == Group::Arena,
        }
    }

    /// How the checks reach a server in `scenario`.
    fn client(&self, scenario: Scenario) -> Client<'_> {
        Client {
            protocol: scenario.protocol(),
            ca: self.cert.map(|c| c.ca.as_path()),
            decode: scenario == Scenario::CompressedText,
        }
    }
}

fn run(mut args: Args) -> Result<usize> {
    if let Some(json) = &args.render {
        let text =
            std::fs::read_to_string(json).with_context(|| format!("read {}", json.display()))?;
        let report =
            report::parse_json(&text).with_context(|| format!("parse {}", json.display()))?;
        let out = args
            .out
            .clone()
            .unwrap_or_else(|| json.parent().unwrap_or(Path::new(".")).to_path_buf());
        report::write_all(&report, &out)?;
        println!("{}", report::markdown_table(&report));
        return Ok(0);
    }
    procs::install_signal_handlers()?;
    let plan = Plan::from_args(&args);
    ensure!(plan.rounds >= 1, "--rounds must be at least 1");
    ensure!(plan.duration >= 1, "--duration must be at least 1");
    ensure!(
        args.latency_load > 0.0 && args.latency_load <= 1.0,
        "--latency-load must be in (0, 1]"
    );
    args.scenarios = selected_scenarios(&args.scenarios, &args.groups);
    let mut skipped: Vec<(String, String)> = Vec::new();
    if args.nginx_vs_nginx {
        // nginx standing in for the daemon says nothing about embedding.
        for s in args
            .scenarios
            .iter()
            .filter(|s| s.group() == Group::Embedded)
        {
            eprintln!("loadtest: scenario {s} skipped: not part of an A/A run");
            skipped.push((s.name().to_string(), "not part of an A/A run".to_string()));
        }
        args.scenarios.retain(|s| s.group() != Group::Embedded);
        ensure!(
            !args.scenarios.is_empty(),
            "--nginx-vs-nginx runs the peers group only"
        );
    }
    let runs_group = |g: Group| args.scenarios.iter().any(|s| s.group() == g);
    let runs_embedded = runs_group(Group::Embedded);
    let runs_peers = [
        Group::Peers,
        Group::Tls,
        Group::Compression,
        Group::Http3,
        Group::Arena,
    ]
    .into_iter()
    .any(runs_group);
    let runs_tls = args.scenarios.iter().any(|s| s.protocol().tls());
    let runs_arena = runs_group(Group::Arena);
    let runs_tls_or_compression =
        runs_group(Group::Tls) || runs_group(Group::Compression) || runs_arena;
    let oha = if args.no_oha {
        None
    } else {
        args.oha.clone().or_else(find_oha)
    };
    if oha.is_none() {
        eprintln!("loadtest: oha not found; latency comes from wrk (not corrected for coordinated omission)");
    }

    // Peers: every one asked for whose binary is there; the rest are skipped.
    // The embedded group runs no peer.
    let wanted: Vec<Peer> = if !runs_peers {
        Vec::new()
    } else if !args.peers.is_empty() {
        let mut v = Vec::new();
        for p in &args.peers {
            if !v.contains(p) {
                v.push(*p);
            }
        }
        v
    } else if args.nginx_vs_nginx {
        vec![Peer::Nginx]
    } else {
        Peer::ALL.to_vec()
    };
    let mut peers: Vec<(Peer, PathBuf)> = Vec::new();
    for peer in wanted {
        let candidate = args
            .peer_bin(peer)
            .cloned()
            .unwrap_or_else(|| PathBuf::from(peer.default_bin()));
        match find_binary(&candidate) {
            Some(bin) => peers.push((peer, bin)),
            None => {
                let why = format!(
                    "{} not found ({})",
                    candidate.display(),
                    peer.install_hint()
                );
                eprintln!("loadtest: peer {peer} skipped: {why}");
                skipped.push((peer.name().to_string(), why));
            }
        }
    }
    if peers.is_empty() && runs_peers {
        eprintln!(
            "loadtest: no peer available; fileserver runs alone and the report has no ratios"
        );
    }
    let nginx_for_a = if args.nginx_vs_nginx {
        let given = args.nginx.clone().unwrap_or_else(|| "nginx".into());
        Some(find_binary(&given).with_context(|| {
            format!(
                "--nginx-vs-nginx needs nginx: {} not found",
                given.display()
            )
        })?)
    } else {
        None
    };
    let fileserver_bin = match (&args.fileserver_bin, args.nginx_vs_nginx) {
        (_, true) => None,
        (Some(bin), false) => Some(bin.clone()),
        (None, false) => Some(cargo_build("fileserver", "fileserver", "release")?),
    };
    let runs_ceiling =
        !args.no_ceiling && !args.nginx_vs_nginx && args.scenarios.iter().any(|s| s.has_ceiling());
    let ceiling_bin = match (&args.ceiling_server_bin, runs_ceiling) {
        (_, false) => None,
        (Some(bin), true) => Some(bin.clone()),
        (None, true) => Some(cargo_build("benches", "ceiling-server", "release")?),
    };
    let embedded_bin = match (&args.embedded_server_bin, runs_embedded) {
        (_, false) => None,
        (Some(bin), true) => Some(bin.clone()),
        (None, true) => Some(cargo_build("benches", "embedded-server", "release")?),
    };
    let runs_h3load = args
        .scenarios
        .iter()
        .any(|s| matches!(s.throughput(), Throughput::H3load { .. }));
    let h3load_bin = match (&args.h3load_bin, runs_h3load) {
        (_, false) => None,
        (Some(bin), true) => Some(bin.clone()),
        (None, true) => Some(cargo_build("benches", "h3load", "release")?),
    };

    // `cold` needs root; without it the scenario is skipped, not failed.
    if args.scenarios.contains(&Scenario::Cold) {
        if let Some(why) = cold_unavailable() {
            eprintln!("loadtest: scenario cold skipped: {why}");
            skipped.push(("cold".to_string(), why));
            args.scenarios.retain(|s| *s != Scenario::Cold);
        }
    }

    // An arena row's connections need descriptors; where the hard limit
    // is too low for them the row is skipped, not failed.
    let (_, hard_nofile) = procs::nofile_limits()?;
    args.scenarios.retain(|s| match s.nofile_needed() {
        Some(need) if need > hard_nofile => {
            let why = format!(
                "its {} connections need RLIMIT_NOFILE {need}, and the hard limit here is \
                 {hard_nofile} (ulimit -Hn; raise it, e.g. LimitNOFILE or ulimit -Hn as root, \
                 to run it)",
                s.connections(args.connections)
            );
            eprintln!("loadtest: scenario {s} skipped: {why}");
            skipped.push((s.name().to_string(), why));
            false
        }
        _ => true,
    });

    let stamp = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
    let temp = TempDir {
        path: std::env::temp_dir().join(format!("loadtest-{}-{stamp}", std::process::id())),
        keep: args.keep_temp,
    };
    let root = temp.path.join("root");
    std::fs::create_dir_all(&root)?;
    let extras = tree::Extras {
        many: args
            .scenarios
            .iter()
            .any(|s| s.load() == Scenario::ManyFiles),
        cold_files: if args.scenarios.contains(&Scenario::Cold) {
            plan.cold_files
        } else {
            0
        },
        text: args.scenarios.contains(&Scenario::CompressedText),
        arena: args.scenarios.iter().any(|s| s.group() == Group::Arena),
    };
    eprintln!("loadtest: generating test trees in {}", root.display());
    tree::generate(&root, extras).context("generate the test trees")?;
    // One certificate for every server of every TLS scenario.
    let cert = if runs_tls {
        Some(tls::generate(&temp.path).context("generate the test certificate")?)
    } else {
        None
    };
    let h2load = find_binary(&args.h2load);

    let settings = LoadSettings {
        wrk: args.wrk.clone(),
        oha: oha.clone(),
        connections: args.connections,
        wrk_threads: args.wrk_threads,
        duration_s: plan.duration,
        latency_load: args.latency_load,
        protocol: Protocol::Http1,
        h2load: h2load.clone(),
        h3load: h3load_bin.clone(),
    };
    let mut versions = Vec::new();
    for (peer, bin) in &peers {
        versions.push((
            peer.name().to_string(),
            tool_version(bin, peer.version_args()),
        ));
    }
    if runs_arena {
        if let Some((_, nginx)) = peers.iter().find(|(p, _)| *p == Peer::Nginx) {
            let module = servers::find_nginx_brotli_static(nginx).map_or_else(
                || {
                    format!(
                        "{} not installed (libnginx-mod-http-brotli-static): nginx sends \
                         the .gz siblings only",
                        servers::NGINX_BROTLI_STATIC
                    )
                },
                |p| p.display().to_string(),
            );
            versions.push(("nginx brotli_static".to_string(), module));
        }
    }
    versions.push(("wrk".to_string(), tool_version(&args.wrk, &["-v"])));
    if let Some(oha) = &oha {
        versions.push(("oha".to_string(), tool_version(oha, &["--version"])));
    }
    if runs_tls_or_compression {
        if let Some(h2load) = h2load.as_ref().filter(|_| runs_tls) {
            versions.push(("h2load".to_string(), tool_version(h2load, &["--version"])));
        }
        // The checks' client.
        versions.push((
            "curl".to_string(),
            tool_version(Path::new("curl"), &["--version"]),
        ));
    }
    if h3load_bin.is_some() {
        // The crates its HTTP/3 client is made of.
        let crates: Vec<String> = ["quinn", "h3", "rustls"]
            .iter()
            .map(|k| {
                format!(
                    "{k} {}",
                    lock_version(k).unwrap_or_else(|| "unknown".into())
                )
            })
            .collect();
        let rev = match &args.h3load_bin {
            Some(bin) => given_binary(bin),
            None => git_revision(),
        };
        versions.push((
            "h3load".to_string(),
            format!("{rev} ({})", crates.join(", ")),
        ));
    }
    if runs_embedded {
        for krate in ["axum", "tower-http"] {
            let version = lock_version(krate).unwrap_or_else(|| "unknown".to_string());
            versions.push((krate.to_string(), version));
        }
        let rev = match &args.embedded_server_bin {
            Some(bin) => given_binary(bin),
            None => git_revision(),
        };
        versions.push((Embedded::Servedir.name().to_string(), rev));
    }
    if args.nginx_vs_nginx {
        versions.push((
            FILESERVER.to_string(),
            "replaced by nginx (--nginx-vs-nginx A/A run)".to_string(),
        ));
    } else {
        let rev = match &args.fileserver_bin {
            Some(bin) => given_binary(bin),
            None => git_revision(),
        };
        versions.push((FILESERVER.to_string(), rev));
    }
    let latency_tool = match &oha {
        Some(_) => versions
            .iter()
            .find(|(k, _)| k == "oha")
            .map(|(_, v)| v.clone())
            .unwrap_or_default(),
        None => "wrk (oha not installed; uncorrected)".to_string(),
    };

    let ctx = Ctx {
        args: &args,
        plan,
        fileserver_bin: fileserver_bin.as_deref(),
        baseline_bin: args.baseline_bin.as_deref(),
        nginx_for_a: nginx_for_a.as_deref(),
        embedded_bin: embedded_bin.as_deref(),
        ceiling_bin: ceiling_bin.as_deref(),
        peers: &peers,
        temp: &temp.path,
        root: &root,
        settings: &settings,
        cert: cert.as_ref(),
        config_tail: match &args.fileserver_config_append {
            Some(p) => std::fs::read_to_string(p)
                .with_context(|| format!("read --fileserver-config-append {}", p.display()))?,
            None => String::new(),
        },
    };
    let mut scenarios = Vec::new();
    let mut failures = 0;
    for scenario in args.scenarios.clone() {
        check_interrupted()?;
        eprintln!("loadtest: scenario {scenario}: {}", scenario.description());
        match run_scenario(scenario, &ctx) {
            Ok((report, peer_failures)) => {
                failures += peer_failures;
                scenarios.push(report);
            }
            Err(err) if !procs::interrupted() => {
                failures += 1;
                eprintln!("loadtest: scenario {scenario} FAILED: {err:#}");
            }
            Err(err) => return Err(err),
        }
    }

    let report = Report {
        generated_utc: report::utc_timestamp(
            SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs(),
        ),
        settings: Settings {
            rounds: plan.rounds,
            duration_s: plan.duration,
            connections: args.connections,
            wrk_threads: args.wrk_threads,
            workers: args.workers,
            latency_tool,
            latency_load: args.latency_load,
            cpus: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap_or_default()
                .trim()
                .to_string(),
            versions,
            peers: peers.iter().map(|(p, _)| p.name().to_string()).collect(),
            skipped,
        },
        scenarios,
    };
    println!("{}", report::markdown_table(&report));
    if report.scenarios.is_empty() {
        bail!("no scenario completed; nothing written");
    }
    // An A/A run must not overwrite the real results.
    let default_out = if args.nginx_vs_nginx {
        "benches/http/results/nginx-vs-nginx"
    } else {
        "benches/http/results"
    };
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| workspace_root().join(default_out));
    report::write_all(&report, &out)?;
    eprintln!("loadtest: wrote {}/latest.{{json,md,png}}", out.display());
    Ok(failures)
}

fn find_oha() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(Path::new(&home).join(".cargo/bin"));
    }
    dirs.into_iter()
        .map(|d| d.join("oha"))
        .find(|p| p.is_file())
}

/// The scenarios to run: those named and those of the groups named, in
/// report order; those of the default run's groups when neither is given.
fn selected_scenarios(named: &[Scenario], groups: &[Group]) -> Vec<Scenario> {
    if named.is_empty() && groups.is_empty() {
        return Scenario::ALL
            .into_iter()
            .filter(|s| s.group().in_default_run())
            .collect();
    }
    Scenario::ALL
        .into_iter()
        .filter(|s| named.contains(s) || groups.contains(&s.group()))
        .collect()
}

/// The version of crate `name` in the workspace's `Cargo.lock` (the first
/// one listed, if several).
fn lock_version(name: &str) -> Option<String> {
    let lock = std::fs::read_to_string(workspace_root().join("Cargo.lock")).ok()?;
    let needle = format!("name = \"{name}\"\n");
    let rest = &lock[lock.find(&needle)? + needle.len()..];
    let version = rest.strip_prefix("version = \"")?;
    Some(version[..version.find('"')?].to_string())
}

fn tool_version(bin: &Path, args: &[&str]) -> String {
    Command::new(bin)
        .args(args)
        .output()
        .map(|o| {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            text.lines().next().unwrap_or_default().trim().to_string()
        })
        .unwrap_or_else(|_| "unknown".to_string())
}

fn git_revision() -> String {
    Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(workspace_root())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| format!("git {}", String::from_utf8_lossy(&o.stdout).trim()))
        .unwrap_or_else(|| "unknown".to_string())
}

/// One server in a scenario: the process, what verification learnt, and its
/// runs so far.
struct Entry {
    running: Running,
    etags: Vec<String>,
    /// The content codings its compressed text came in (`compressed_text`).
    codings: Option<String>,
    /// wrk's Lua script, h2load's list of URIs, or h3load's list of paths.
    script: PathBuf,
    throughput: Vec<RunResult>,
    latency: Vec<RunResult>,
    /// CPU over every timed run.
    cpu: f64,
    /// CPU over the throughput runs (wrk, h2load, h3load), whose requests it is
    /// divided by.
    wrk_cpu: Cpu,
    /// False once it failed (a peer only; fileserver failing fails the scenario).
    alive: bool,
}

impl Entry {
    fn name(&self) -> &str {
        &self.running.name
    }
}

/// Records `err` of server `i` in a scenario: for the subject (index 0:
/// fileserver, or servedir in the embedded group) the scenario fails; any
/// other server is left out of the rest of it.
fn peer_failed(
    entries: &mut [Entry],
    i: usize,
    left_out: &mut Vec<(String, String)>,
    what: &str,
    err: anyhow::Error,
) -> Result<()> {
    if i == 0 || procs::interrupted() {
        return Err(err.context(format!("{what} {}", entries[i].name())));
    }
    let name = entries[i].name().to_string();
    eprintln!("loadtest:   {name} left out of this scenario: {what} failed: {err:#}");
    left_out.push((name, format!("{what}: {err:#}")));
    // Its process group is stopped with the others at the scenario's end.
    entries[i].alive = false;
    Ok(())
}

/// What the checks learnt of a server: the ETags of the small files
/// (`not_modified`), and the content codings its text came in
/// (`compressed_text`, e.g. `gzip x17`).
#[derive(Debug, Default)]
struct Checked {
    etags: Vec<String>,
    codings: Option<String>,
}

/// A started server that passed verification, and what the checks learnt.
type Started = (Running, Checked);

/// Keeps a server that started and verified; a failure leaves it out of
/// the scenario (with why), unless the run was interrupted.
fn keep_or_leave_out(
    name: &str,
    result: Result<Started>,
    started: &mut Vec<Started>,
    left_out: &mut Vec<(String, String)>,
) -> Result<()> {
    match result {
        Ok(x) => {
            eprintln!("loadtest:   {name} started on {} and verified", x.0.addr);
            started.push(x);
        }
        Err(err) if procs::interrupted() => return Err(err),
        Err(err) => {
            eprintln!("loadtest:   {name} left out of this scenario: {err:#}");
            left_out.push((name.to_string(), format!("{err:#}")));
        }
    }
    Ok(())
}

/// Verifies a server that started.
fn verified(scenario: Scenario, ctx: &Ctx<'_>, running: Result<Running>) -> Result<Started> {
    let running = running?;
    let checked = verify(
        scenario,
        &running,
        ctx.plan.cold_files,
        &ctx.client(scenario),
    )
    .with_context(|| format!("verify {} before timing", running.name))?;
    Ok((running, checked))
}

/// Whether server `name` is checked in `scenario` through HTTP over TCP
/// (HTTPS in the TLS and HTTP/3 scenarios). The ceiling's TCP side is
/// plain HTTP, so in an HTTP/3 scenario h3load's body bytes per
/// response, which leave out a server that sent the wrong size, are its
/// only check.
fn checked_over_tcp(scenario: Scenario, name: &str) -> bool {
    !(name == CEILING && matches!(scenario.throughput(), Throughput::H3load { .. }))
}

/// [`verified`] for the subject, which the scenario cannot do without.
fn subject_verified(
    scenario: Scenario,
    ctx: &Ctx<'_>,
    running: Result<Running>,
) -> Result<Started> {
    let x = verified(scenario, ctx, running)?;
    eprintln!(
        "loadtest:   {} started on {} and verified",
        x.0.name, x.0.addr
    );
    Ok(x)
}

/// Starts the daemon, as the peers group runs it.
fn start_daemon(scenario: Scenario, ctx: &Ctx<'_>, dir: &Path, bin: &Path) -> Result<Running> {
    servers::start_fileserver(
        bin,
        &dir.join(FILESERVER),
        ctx.root,
        ctx.args.workers,
        scenario.cache_entries(),
        servers::Extra {
            args: &ctx.args.fileserver_args,
            config_tail: &ctx.config_tail,
        },
        ctx.features(scenario),
    )
}

/// fileserver (or nginx standing in for it) first, which must verify, then
/// every peer.
fn start_peers_group(
    scenario: Scenario,
    ctx: &Ctx<'_>,
    dir: &Path,
    left_out: &mut Vec<(String, String)>,
) -> Result<Vec<Started>> {
    let workers = ctx.args.workers;
    let nginx_cache = scenario.nginx_open_file_cache();
    let features = ctx.features(scenario);
    let a = match (ctx.fileserver_bin, ctx.nginx_for_a) {
        (Some(bin), _) => start_daemon(scenario, ctx, dir, bin)?,
        (None, Some(nginx)) => {
            let mut a = servers::start_nginx(
                nginx,
                &dir.join("nginx-a"),
                ctx.root,
                workers,
                nginx_cache,
                features,
            )?;
            a.name = FILESERVER.to_string();
            a
        }
        (None, None) => bail!("neither a fileserver binary nor nginx to stand in for it"),
    };
    let mut started = vec![subject_verified(scenario, ctx, Ok(a))?];
    if let Some(bin) = ctx.baseline_bin {
        check_interrupted()?;
        let running = servers::start_fileserver(
            bin,
            &dir.join(BASELINE),
            ctx.root,
            workers,
            scenario.cache_entries(),
            servers::Extra {
                args: &ctx.args.fileserver_args,
                config_tail: "",
            },
            features,
        )
        .map(|mut r| {
            r.name = BASELINE.to_string();
            r
        });
        let result = verified(scenario, ctx, running);
        keep_or_leave_out(BASELINE, result, &mut started, left_out)?;
    }
    let group = scenario.group();
    for (peer, bin) in ctx.peers {
        check_interrupted()?;
        if !group.runs_peer(*peer) {
            eprintln!("loadtest:   {peer} not in the {group} group (no config for it here)");
            continue;
        }
        let running = servers::start_peer(
            *peer,
            bin,
            &dir.join(peer.name()),
            ctx.root,
            workers,
            nginx_cache,
            features,
        );
        let result = verified(scenario, ctx, running);
        keep_or_leave_out(peer.name(), result, &mut started, left_out)?;
    }
    if let Some(bin) = ctx.ceiling_bin.filter(|_| scenario.has_ceiling()) {
        check_interrupted()?;
        let quic = features.tls.filter(|_| features.http3);
        let running = servers::start_ceiling(bin, &dir.join(CEILING), ctx.root, workers, quic);
        let result = match checked_over_tcp(scenario, CEILING) {
            true => verified(scenario, ctx, running),
            false => running.map(|r| (r, Checked::default())),
        };
        keep_or_leave_out(CEILING, result, &mut started, left_out)?;
    }
    Ok(started)
}

/// servedir first, which must verify, then tower-http's ServeDir in the
/// same axum app, then the daemon.
fn start_embedded_group(
    scenario: Scenario,
    ctx: &Ctx<'_>,
    dir: &Path,
    left_out: &mut Vec<(String, String)>,
) -> Result<Vec<Started>> {
    let bin = ctx
        .embedded_bin
        .context("no embedded-server binary for the embedded group")?;
    let start = |imp: Embedded| {
        servers::start_embedded(imp, bin, &dir.join(imp.name()), ctx.root, ctx.args.workers)
    };
    let mut started = vec![subject_verified(scenario, ctx, start(Embedded::Servedir))?];
    for imp in &Embedded::ALL[1..] {
        check_interrupted()?;
        let result = verified(scenario, ctx, start(*imp));
        keep_or_leave_out(imp.name(), result, &mut started, left_out)?;
    }
    check_interrupted()?;
    let daemon = match ctx.fileserver_bin {
        Some(fs) => start_daemon(scenario, ctx, dir, fs),
        None => Err(anyhow::anyhow!("no fileserver binary")),
    };
    let result = verified(scenario, ctx, daemon);
    keep_or_leave_out(FILESERVER, result, &mut started, left_out)?;
    Ok(started)
}

/// Starts every server for one scenario, verifies, times, and stops them.
/// Returns the report and the number of peers that had to be left out.
fn run_scenario(scenario: Scenario, ctx: &Ctx<'_>) -> Result<(ScenarioReport, usize)> {
    let plan = ctx.plan;
    // `embedded_large` runs on fewer connections than the rest.
    let settings = &LoadSettings {
        connections: scenario.connections(ctx.settings.connections),
        protocol: scenario.protocol(),
        ..ctx.settings.clone()
    };
    let dir = ctx.temp.join(scenario.name());
    std::fs::create_dir_all(&dir)?;
    let mut left_out: Vec<(String, String)> = Vec::new();
    // Every server and load generator of the scenario inherits it; the
    // limit goes back after the scenario (declared first, dropped last).
    let _nofile = match scenario.nofile_needed() {
        Some(need) => {
            let raised = procs::raise_nofile(need)?;
            if let Some(old) = raised.raised_from() {
                eprintln!(
                    "loadtest:   RLIMIT_NOFILE raised from {old} to {need} for this scenario"
                );
            }
            Some(raised)
        }
        None => None,
    };

    // Every server lives for the whole scenario, so none pays a cold start
    // inside the timed window. The subject first; it must verify.
    let started = match scenario.group() {
        Group::Peers | Group::Tls | Group::Compression | Group::Http3 | Group::Arena => {
            start_peers_group(scenario, ctx, &dir, &mut left_out)?
        }
        Group::Embedded => start_embedded_group(scenario, ctx, &dir, &mut left_out)?,
    };

    let mut entries = Vec::new();
    for (running, Checked { etags, codings }) in started {
        let (script, text) = match scenario.throughput() {
            Throughput::H2load { .. } => (
                dir.join(format!("{}.uris", running.name)),
                loadgen::h2load_uris(scenario, running.addr),
            ),
            Throughput::H3load { .. } => (
                dir.join(format!("{}.paths", running.name)),
                loadgen::h3load_paths(scenario),
            ),
            Throughput::Wrk | Throughput::Handshakes => (
                dir.join(format!("{}.lua", running.name)),
                loadgen::wrk_script(scenario, &etags, plan.cold_files)?,
            ),
        };
        std::fs::write(&script, text)?;
        entries.push(Entry {
            running,
            etags,
            codings,
            script,
            throughput: Vec::new(),
            latency: Vec::new(),
            cpu: 0.0,
            wrk_cpu: Cpu::default(),
            alive: true,
        });
    }
    let paced_small = dir.join("cold-small.lua");
    if scenario == Scenario::Cold {
        let delay_ms = (COLD_SMALL_CONNECTIONS * 1000 / COLD_SMALL_RATE) as u64;
        std::fs::write(&paced_small, loadgen::wrk_paced_small_script(delay_ms))?;
    }

    let sampler = Sampler::start(
        entries.iter().map(|e| e.running.group.pgid()).collect(),
        Duration::from_millis(200),
    );
    // A warm-up would only fill the page cache `cold` is about to drop.
    if plan.warmup > 0 && scenario != Scenario::Cold {
        for i in 0..entries.len() {
            let e = &entries[i];
            let out = dir.join(format!("warmup-{}.out", e.name()));
            if let Err(err) = throughput_run(scenario, settings, e, plan.warmup, &out) {
                peer_failed(&mut entries, i, &mut left_out, "warm-up", err)?;
            }
        }
    }

    let mut rates = Vec::new();
    let n = entries.len();
    for round in 0..plan.rounds {
        // Each round starts with the next server, so none is always first
        // (or always last) after the machine was busy with the others.
        let order: Vec<usize> = (0..n).map(|k| (k + round) % n).collect();
        if scenario == Scenario::Cold {
            for &i in &order {
                if !entries[i].alive {
                    continue;
                }
                check_interrupted()?;
                if let Err(err) = cold_round(&mut entries[i], round, &dir, &paced_small, ctx) {
                    peer_failed(&mut entries, i, &mut left_out, "cold round", err)?;
                }
            }
            if settings.oha.is_some() {
                rates.push(COLD_SMALL_RATE as f64);
            }
            continue;
        }
        for &i in &order {
            if !entries[i].alive {
                continue;
            }
            check_interrupted()?;
            let e = &mut entries[i];
            let before = group_cpu(e.running.group.pgid());
            let tool = scenario.throughput().tool();
            let out = dir.join(format!("{tool}-{}-{round}.out", e.name()));
            match throughput_run(scenario, settings, e, plan.duration, &out) {
                Ok(result) => {
                    let used = group_cpu(e.running.group.pgid()) - before;
                    e.cpu += used.total_s;
                    e.wrk_cpu += used;
                    eprintln!(
                        "loadtest:   round {} {tool} {:<17} {:>9.0} req/s {:>8.1} MB/s  errors {}",
                        round + 1,
                        e.name(),
                        result.req_per_s,
                        result.mb_per_s,
                        result.errors
                    );
                    e.throughput.push(result);
                }
                Err(err) => peer_failed(&mut entries, i, &mut left_out, tool, err)?,
            }
        }
        // A handshake per request at half the rate says little that the
        // handshake rate does not; oha would also resume sessions. Over
        // HTTP/3 oha's client stalls against Caddy, so the latency there
        // is h3load's own, under its full load.
        let oha = settings.oha.as_ref().filter(|_| {
            !matches!(
                scenario.throughput(),
                Throughput::Handshakes | Throughput::H3load { .. }
            )
        });
        match oha {
            Some(oha) => {
                // Equal offered load: a share of the slowest server's rate.
                let slowest = entries
                    .iter()
                    .filter(|e| e.alive)
                    .filter_map(|e| e.throughput.get(round).map(|r| r.req_per_s))
                    .fold(f64::INFINITY, f64::min);
                let rate = settings.latency_load * slowest;
                rates.push(rate);
                for &i in &order {
                    if !entries[i].alive {
                        continue;
                    }
                    check_interrupted()?;
                    let e = &mut entries[i];
                    let before = group_cpu(e.running.group.pgid());
                    let etag = e.etags.first().map(String::as_str).unwrap_or_default();
                    let oha_args =
                        loadgen::oha_args(scenario, e.running.addr, etag, settings, rate);
                    let out = dir.join(format!("oha-{}-{round}.json", e.name()));
                    match loadgen::run_oha(oha, &oha_args, scenario, plan.duration, &out) {
                        Ok(result) => {
                            e.cpu += (group_cpu(e.running.group.pgid()) - before).total_s;
                            eprintln!(
                                "loadtest:   round {} oha {:<17} at {:>7.0} req/s: p50 {:.3} ms p99 {:.3} ms  errors {}",
                                round + 1,
                                e.name(),
                                rate,
                                result.p50_ms,
                                result.p99_ms,
                                result.errors
                            );
                            e.latency.push(result);
                        }
                        Err(err) => peer_failed(&mut entries, i, &mut left_out, "oha", err)?,
                    }
                }
            }
            None => {
                for e in entries.iter_mut().filter(|e| e.alive) {
                    if let Some(r) = e.throughput.get(round).copied() {
                        e.latency.push(r);
                    }
                }
            }
        }
    }
    let peaks = sampler.finish();

    // Still serving the right bytes after the load?
    for i in 0..entries.len() {
        if !entries[i].alive || !checked_over_tcp(scenario, &entries[i].running.name) {
            continue;
        }
        if let Err(err) = verify(
            scenario,
            &entries[i].running,
            plan.cold_files,
            &ctx.client(scenario),
        ) {
            peer_failed(&mut entries, i, &mut left_out, "verify after timing", err)?;
        }
    }
    let failures = left_out.len();
    // Which coding each server's text came in belongs beside its figures.
    let codings: Vec<String> = entries
        .iter()
        .filter_map(|e| Some(format!("{} {}", e.name(), e.codings.as_ref()?)))
        .collect();
    let description = if codings.is_empty() {
        scenario.description().to_string()
    } else {
        format!(
            "{}; Content-Encoding of the checked files: {}",
            scenario.description(),
            codings.join(", ")
        )
    };
    let summaries = entries
        .iter()
        .zip(&peaks)
        .filter(|(e, _)| e.alive)
        .map(|(e, peak)| {
            report::summarize(
                e.name(),
                e.throughput.clone(),
                e.latency.clone(),
                *peak,
                e.cpu,
                // In `cold` the CPU is spent on two kinds of request at once.
                (scenario != Scenario::Cold).then_some(e.wrk_cpu),
            )
        })
        .collect();
    // Stop the peers before fileserver, the reverse of the start order.
    while let Some(e) = entries.pop() {
        drop(e);
    }
    Ok((
        ScenarioReport::new(
            scenario.name(),
            &description,
            benches::loadtest::stats::median(&rates).unwrap_or(0.0),
            scenario.headline(),
            summaries,
            left_out,
        )
        .in_group(scenario.group()),
        failures,
    ))
}

/// One timed throughput run against `e` with the scenario's tool.
fn throughput_run(
    scenario: Scenario,
    settings: &LoadSettings,
    e: &Entry,
    duration: u64,
    out: &Path,
) -> Result<RunResult> {
    match scenario.throughput() {
        Throughput::Wrk => loadgen::run_wrk(settings, &e.script, e.running.addr, duration, out),
        Throughput::H2load { streams } => {
            loadgen::run_h2load(settings, scenario, &e.script, streams, duration, out)
        }
        Throughput::Handshakes => {
            let url = format!(
                "{}://{}{}",
                scenario.protocol().scheme(),
                e.running.addr,
                tree::small_path(0)
            );
            loadgen::run_handshakes(settings, &url, duration, out)
        }
        Throughput::H3load { streams } => loadgen::run_h3load(
            settings,
            scenario,
            e.running.addr,
            &e.script,
            streams,
            duration,
            out,
        ),
    }
}

/// `sync` and drop the page cache, dentries and inodes (`echo 3 >
/// /proc/sys/vm/drop_caches`); needs root.
fn drop_page_cache() -> Result<()> {
    // SAFETY: sync has no preconditions and cannot fail.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3\n").context("echo 3 > /proc/sys/vm/drop_caches")
}

/// One `cold` round against one server: drop the page cache, bring the
/// small files back into it (through the server, so its own caches are warm
/// too), then download large files with wrk while a second load generator
/// requests small files at a fixed rate.
fn cold_round(
    e: &mut Entry,
    round: usize,
    dir: &Path,
    paced_small: &Path,
    ctx: &Ctx<'_>,
) -> Result<()> {
    let (settings, duration) = (ctx.settings, ctx.plan.duration);
    drop_page_cache()?;
    for i in 0..SMALL_COUNT {
        let path = tree::small_path(i);
        let r = http::get(e.running.addr, &path, &[])?;
        ensure!(r.status == 200, "warming {path}: status {}", r.status);
    }
    let before = group_cpu(e.running.group.pgid());
    let large = loadgen::spawn_wrk(
        settings,
        WrkRun {
            script: &e.script,
            addr: e.running.addr,
            duration_s: duration,
            connections: COLD_LARGE_CONNECTIONS,
            timeout_s: COLD_TIMEOUT_S,
        },
        &dir.join(format!("wrk-{}-{round}.out", e.name())),
    )?;
    let small_out = dir.join(format!("small-{}-{round}.out", e.name()));
    let small = match &settings.oha {
        Some(oha) => {
            let oha_args = loadgen::oha_args_with(
                Scenario::Cold,
                e.running.addr,
                "",
                COLD_SMALL_CONNECTIONS,
                duration,
                COLD_SMALL_RATE as f64,
            );
            loadgen::spawn_oha(oha, &oha_args, duration, &small_out)?
        }
        None => loadgen::spawn_wrk(
            settings,
            WrkRun {
                script: paced_small,
                addr: e.running.addr,
                duration_s: duration,
                connections: COLD_SMALL_CONNECTIONS,
                timeout_s: 5,
            },
            &small_out,
        )?,
    };
    // Wait for both before looking at either result.
    let (large, small) = (large.finish(), small.finish());
    let large = loadgen::parse_wrk(&large.context("wrk (large, cold)")?)?;
    let small = small.context("small-file load generator")?;
    let small = match &settings.oha {
        Some(_) => loadgen::parse_oha(&small, 200)?,
        None => loadgen::parse_wrk(&small)?,
    };
    e.cpu += (group_cpu(e.running.group.pgid()) - before).total_s;
    eprintln!(
        "loadtest:   round {} cold {:<17} large {:>6.1} req/s {:>7.1} MB/s | small p99 {:.3} ms max {:.3} ms  errors {}",
        round + 1,
        e.name(),
        large.req_per_s,
        large.mb_per_s,
        small.p99_ms,
        small.max_ms,
        large.errors + small.errors
    );
    e.throughput.push(large);
    e.latency.push(small);
    Ok(())
}

/// Indices a check samples out of `count`: both ends and a spread between.
fn sample_indices(count: usize) -> Vec<usize> {
    let mut v: Vec<usize> = vec![0, 1, count / 2, count - 2, count - 1];
    v.extend((0..12).map(|k| (k * 7919 + 13) % count));
    v.sort_unstable();
    v.dedup();
    v
}

/// GETs `path` with `headers` and checks for a 200 with the body `want`
/// (decoded, if the client decodes).
fn expect_body(
    client: &Client<'_>,
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
    want: &[u8],
) -> Result<http::Response> {
    let r = client.get(addr, path, headers)?;
    ensure!(
        r.status == 200,
        "GET {path}: status {} (want 200)",
        r.status
    );
    ensure!(
        r.body == want,
        "GET {path}: body differs from the file ({} bytes, Content-Encoding {})",
        r.body.len(),
        r.header("content-encoding").unwrap_or("none")
    );
    Ok(r)
}

fn expect_file(
    client: &Client<'_>,
    addr: SocketAddr,
    path: &str,
    len: usize,
) -> Result<http::Response> {
    expect_body(client, addr, path, &[], &tree::contents(path, len))
}

/// Checks that `s` answers this scenario's requests correctly, through
/// `client`, and returns what the checks learnt.
fn verify(
    scenario: Scenario,
    s: &Running,
    cold_files: usize,
    client: &Client<'_>,
) -> Result<Checked> {
    let addr = s.addr;
    // A twin (an embedded or TLS scenario) is checked as its twin is.
    match scenario.load() {
        Scenario::SmallRandom => {
            for i in sample_indices(SMALL_COUNT) {
                expect_file(client, addr, &tree::small_path(i), SMALL_SIZE)?;
            }
        }
        Scenario::Large => {
            expect_file(client, addr, LARGE_PATH, LARGE_SIZE)?;
        }
        Scenario::CachePressure => {
            for i in sample_indices(PRESSURE_COUNT) {
                expect_file(client, addr, &tree::pressure_path(i), PRESSURE_SIZE)?;
            }
        }
        Scenario::ManyFiles => {
            for i in sample_indices(MANY_COUNT) {
                expect_file(client, addr, &tree::many_path(i), MANY_SIZE)?;
            }
        }
        Scenario::CompressedText => {
            // What each sampled file came as; a server that sends text
            // uncompressed still passes, and the wire bytes show it.
            let mut codings: Vec<(String, usize)> = Vec::new();
            for i in sample_indices(TEXT_COUNT) {
                let path = tree::text_path(i);
                let want = tree::text_contents(&path);
                let accept = [("Accept-Encoding", BROWSER_ACCEPT_ENCODING)];
                let r = expect_body(client, addr, &path, &accept, &want)?;
                let coding = r.header("content-encoding").unwrap_or("identity");
                match codings.iter_mut().find(|(c, _)| c == coding) {
                    Some((_, n)) => *n += 1,
                    None => codings.push((coding.to_string(), 1)),
                }
            }
            let seen: Vec<String> = codings.iter().map(|(c, n)| format!("{c} x{n}")).collect();
            let seen = seen.join(", ");
            eprintln!("loadtest:   {}: sampled text files came as {seen}", s.name);
            return Ok(Checked {
                etags: Vec::new(),
                codings: Some(seen),
            });
        }
        Scenario::ArenaH1C64 => {
            // Every file, with HttpArena's header: the body must decode to
            // the file; which coding came, and whether it was the sibling,
            // goes in the report (a server that sends text uncompressed, or
            // compresses it itself, still runs, flagged).
            let accept = [("Accept-Encoding", ARENA_ACCEPT_ENCODING)];
            let mut answers = Vec::new();
            for g in tree::arena::generated() {
                let path = g.file.path();
                let r = client.get(addr, &path, &accept)?;
                ensure!(
                    r.status == 200,
                    "GET {path}: status {} (want 200)",
                    r.status
                );
                let coding = r.header("content-encoding").unwrap_or("identity");
                let how = tree::arena::served(g, coding, &r.body)
                    .map_err(|e| anyhow::anyhow!("GET {path}: {e}"))?;
                answers.push((g.file, coding.to_string(), how));
            }
            let seen = tree::arena::describe(&answers);
            eprintln!("loadtest:   {}: the 20 files came as {seen}", s.name);
            return Ok(Checked {
                etags: Vec::new(),
                codings: Some(seen),
            });
        }
        Scenario::Cold => {
            // The small files the second load generator asks for, and every
            // large file whole.
            for i in sample_indices(SMALL_COUNT) {
                expect_file(client, addr, &tree::small_path(i), SMALL_SIZE)?;
            }
            for i in 0..cold_files {
                check_interrupted()?;
                expect_file(client, addr, &tree::cold_path(i), COLD_SIZE)?;
            }
        }
        Scenario::NotModified => {
            let mut etags = Vec::with_capacity(SMALL_COUNT);
            for i in 0..SMALL_COUNT {
                check_interrupted()?;
                let path = tree::small_path(i);
                let r = expect_file(client, addr, &path, SMALL_SIZE)?;
                etags.push(
                    r.header("etag")
                        .with_context(|| format!("GET {path}: no ETag"))?
                        .to_string(),
                );
            }
            for i in sample_indices(SMALL_COUNT) {
                let path = tree::small_path(i);
                let r = client.get(addr, &path, &[("If-None-Match", &etags[i])])?;
                ensure!(
                    r.status == 304,
                    "GET {path} If-None-Match {}: status {} (want 304)",
                    etags[i],
                    r.status
                );
                ensure!(r.body.is_empty(), "GET {path}: 304 with a body");
                ensure!(
                    r.header("etag") == Some(etags[i].as_str()),
                    "GET {path}: 304 without the same ETag"
                );
            }
            return Ok(Checked {
                etags,
                codings: None,
            });
        }
        Scenario::Range => {
            let whole = tree::contents(LARGE_PATH, LARGE_SIZE);
            let starts = [0, 1, OHA_RANGE.0, 777_777, LARGE_SIZE - RANGE_LEN];
            for start in starts {
                let end = start + RANGE_LEN - 1;
                let header = format!("bytes={start}-{end}");
                let r = client.get(addr, LARGE_PATH, &[("Range", &header)])?;
                ensure!(
                    r.status == 206,
                    "GET {LARGE_PATH} Range {header}: status {} (want 206)",
                    r.status
                );
                let want = format!("bytes {start}-{end}/{LARGE_SIZE}");
                ensure!(
                    r.header("content-range") == Some(want.as_str()),
                    "Range {header}: Content-Range {:?}, want {want:?}",
                    r.header("content-range")
                );
                ensure!(r.body == whole[start..=end], "Range {header}: wrong bytes");
            }
        }
        twin => bail!("{twin} has no checks of its own"),
    }
    Ok(Checked::default())
}

/// How the report names a binary given on the command line: its file name
/// only (a path would name a place outside the repository in a committed
/// report) and the tree it was run beside.
fn given_binary(bin: &std::path::Path) -> String {
    let name = bin.file_name().map_or_else(
        || "binary".to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    format!("given binary `{name}` (tree at {})", git_revision())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenarios_come_from_names_and_groups_in_report_order() {
        let default = selected_scenarios(&[], &[]);
        assert_eq!(default, &Scenario::ALL[..11]);
        assert!(default.iter().all(|s| s.group().in_default_run()));
        let tls: Vec<_> = Group::Tls.scenarios().collect();
        assert_eq!(tls.len(), 5);
        assert_eq!(selected_scenarios(&[], &[Group::Tls]), tls);
        let embedded: Vec<_> = Group::Embedded.scenarios().collect();
        assert_eq!(selected_scenarios(&[], &[Group::Embedded]), embedded);
        assert_eq!(
            selected_scenarios(
                &[Scenario::EmbeddedLarge, Scenario::Large, Scenario::Large],
                &[]
            ),
            [Scenario::Large, Scenario::EmbeddedLarge]
        );
        let both = selected_scenarios(&[Scenario::EmbeddedSmall], &[Group::Peers]);
        assert_eq!(both.len(), 9);
        assert_eq!(both.last(), Some(&Scenario::EmbeddedSmall));
    }

    #[test]
    fn crate_versions_come_from_the_lock_file() {
        let version = lock_version("tower-http").unwrap();
        assert!(version.starts_with("0.6."), "{version}");
        assert!(lock_version("no-such-crate-xyz").is_none());
    }
}

//! The side-by-side HTTP load harness: `fileserver` against nginx on loopback.
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

use benches::loadtest::http;
use benches::loadtest::loadgen::{self, LoadSettings, RunResult};
use benches::loadtest::procs::{self, check_interrupted, group_cpu_seconds, Sampler};
use benches::loadtest::report::{self, Report, ScenarioReport, Settings};
use benches::loadtest::scenario::{Scenario, OHA_RANGE, RANGE_LEN};
use benches::loadtest::servers::{self, Running, Server};
use benches::loadtest::tree::{
    self, LARGE_PATH, LARGE_SIZE, PRESSURE_COUNT, PRESSURE_SIZE, SMALL_COUNT, SMALL_SIZE,
};

/// Load-test fileserver against nginx, side by side, on 127.0.0.1.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Use this fileserver binary instead of building it (`cargo build --release -p fileserver`).
    #[arg(long, value_name = "PATH")]
    fileserver_bin: Option<PathBuf>,
    /// Extra argument for fileserver (repeatable), e.g. `--fileserver-arg=--io-backend=blocking`.
    #[arg(
        long = "fileserver-arg",
        value_name = "ARG",
        allow_hyphen_values = true
    )]
    fileserver_args: Vec<String>,
    /// The nginx binary.
    #[arg(long, value_name = "PATH", default_value = "/usr/sbin/nginx")]
    nginx: PathBuf,
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
    /// Scenarios to run (repeatable or comma-separated; default all):
    /// small_random, large, cache_pressure, not_modified, range.
    #[arg(long = "scenario", value_name = "NAME", value_delimiter = ',')]
    scenarios: Vec<Scenario>,
    /// Rounds per scenario; each round runs wrk A, wrk B, oha A, oha B.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Seconds per timed run.
    #[arg(long, value_name = "SECS", default_value_t = 3)]
    duration: u64,
    /// Seconds of untimed wrk load per server before the rounds.
    #[arg(long, value_name = "SECS", default_value_t = 1)]
    warmup: u64,
    /// Open connections per run.
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// wrk threads.
    #[arg(long, default_value_t = 1)]
    wrk_threads: usize,
    /// Workers of each server.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// oha's fixed request rate, as a fraction of the slower server's wrk
    /// req/s in the same round (latency is compared at equal offered load).
    #[arg(long, default_value_t = 0.5)]
    latency_load: f64,
    /// Where latest.{json,md,png} go (default: benches/http/results).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Keep the temp dir (trees, configs, server logs, raw tool output).
    #[arg(long)]
    keep_temp: bool,
    /// Run nginx in place of fileserver too (an A/A run that shows the harness's own noise).
    #[arg(long)]
    nginx_vs_nginx: bool,
    /// Run nothing: re-render latest.md and latest.png from this JSON report into --out.
    #[arg(long, value_name = "JSON")]
    render: Option<PathBuf>,
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
            eprintln!("loadtest: {failures} scenario(s) failed (see above)");
            std::process::exit(1);
        }
        Err(err) => {
            eprintln!("loadtest: error: {err:#}");
            std::process::exit(if procs::interrupted() { 130 } else { 1 });
        }
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or(Path::new("."))
        .to_path_buf()
}

fn run(mut args: Args) -> Result<usize> {
    if let Some(json) = &args.render {
        let text =
            std::fs::read_to_string(json).with_context(|| format!("read {}", json.display()))?;
        let report: Report =
            serde_json::from_str(&text).with_context(|| format!("parse {}", json.display()))?;
        let out = args
            .out
            .clone()
            .unwrap_or_else(|| json.parent().unwrap_or(Path::new(".")).to_path_buf());
        report::write_all(&report, &out)?;
        println!("{}", report::markdown_table(&report));
        return Ok(0);
    }
    procs::install_signal_handlers()?;
    ensure!(args.rounds >= 1, "--rounds must be at least 1");
    ensure!(args.duration >= 1, "--duration must be at least 1");
    ensure!(
        args.latency_load > 0.0 && args.latency_load <= 1.0,
        "--latency-load must be in (0, 1]"
    );
    if args.scenarios.is_empty() {
        args.scenarios = Scenario::ALL.to_vec();
    }
    let oha = if args.no_oha {
        None
    } else {
        args.oha.clone().or_else(find_oha)
    };
    if oha.is_none() {
        eprintln!("loadtest: oha not found; latency comes from wrk (not corrected for coordinated omission)");
    }
    let fileserver_bin = match (&args.fileserver_bin, args.nginx_vs_nginx) {
        (_, true) => None,
        (Some(bin), false) => Some(bin.clone()),
        (None, false) => Some(build_fileserver()?),
    };

    let stamp = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
    let temp = TempDir {
        path: std::env::temp_dir().join(format!("loadtest-{}-{stamp}", std::process::id())),
        keep: args.keep_temp,
    };
    let root = temp.path.join("root");
    std::fs::create_dir_all(&root)?;
    eprintln!("loadtest: generating test trees in {}", root.display());
    tree::generate(&root).context("generate the test trees")?;

    let settings = LoadSettings {
        wrk: args.wrk.clone(),
        oha: oha.clone(),
        connections: args.connections,
        wrk_threads: args.wrk_threads,
        duration_s: args.duration,
        latency_load: args.latency_load,
    };
    let mut versions = vec![
        ("nginx".to_string(), tool_version(&args.nginx, "-v")),
        ("wrk".to_string(), tool_version(&args.wrk, "-v")),
    ];
    if let Some(oha) = &oha {
        versions.push(("oha".to_string(), tool_version(oha, "--version")));
    }
    if args.nginx_vs_nginx {
        versions.push((
            "fileserver".to_string(),
            "replaced by nginx (--nginx-vs-nginx A/A run)".to_string(),
        ));
    } else {
        versions.push(("fileserver".to_string(), git_revision()));
    }
    let latency_tool = match &oha {
        Some(_) => versions
            .iter()
            .find(|(k, _)| k == "oha")
            .map(|(_, v)| v.clone())
            .unwrap_or_default(),
        None => "wrk (oha not installed; uncorrected)".to_string(),
    };

    let mut scenarios = Vec::new();
    let mut failures = 0;
    for scenario in args.scenarios.clone() {
        check_interrupted()?;
        eprintln!("loadtest: scenario {scenario}: {}", scenario.description());
        match run_scenario(
            scenario,
            &args,
            fileserver_bin.as_deref(),
            &temp.path,
            &root,
            &settings,
        ) {
            Ok(report) => scenarios.push(report),
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
            rounds: args.rounds,
            duration_s: args.duration,
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

/// Builds the daemon in release mode and returns the binary's path.
fn build_fileserver() -> Result<PathBuf> {
    eprintln!("loadtest: cargo build --release -p fileserver");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "build",
            "--release",
            "-p",
            "fileserver",
            "--message-format=json-render-diagnostics",
        ])
        .current_dir(workspace_root())
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("run cargo build")?;
    ensure!(
        output.status.success(),
        "cargo build --release -p fileserver failed"
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["reason"] == "compiler-artifact" && v["target"]["name"] == "fileserver")
        .find_map(|v| v["executable"].as_str().map(PathBuf::from))
        .context("cargo build did not report a fileserver executable")
}

fn tool_version(bin: &Path, flag: &str) -> String {
    Command::new(bin)
        .arg(flag)
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

/// Starts both servers for one scenario, verifies, times, and stops them.
fn run_scenario(
    scenario: Scenario,
    args: &Args,
    fileserver_bin: Option<&Path>,
    temp: &Path,
    root: &Path,
    settings: &LoadSettings,
) -> Result<ScenarioReport> {
    let dir = temp.join(scenario.name());
    let cache = scenario.cache_entries();
    // A is started first; both live for the whole scenario so neither pays a
    // cold start inside the timed window.
    let a = match fileserver_bin {
        Some(bin) => servers::start_fileserver(
            bin,
            &dir.join("fileserver"),
            root,
            args.workers,
            cache,
            &args.fileserver_args,
        )?,
        None => {
            let mut a =
                servers::start_nginx(&args.nginx, &dir.join("nginx-a"), root, args.workers, cache)?;
            a.server = Server::Fileserver;
            a
        }
    };
    let b = servers::start_nginx(&args.nginx, &dir.join("nginx"), root, args.workers, cache)?;
    let servers = [&a, &b];

    let mut etags = Vec::new();
    for s in servers {
        etags.push(
            verify(scenario, s)
                .with_context(|| format!("verify {} before timing", s.server.name()))?,
        );
    }
    let mut scripts = Vec::new();
    for (s, etags) in servers.iter().zip(&etags) {
        let path = dir.join(format!("{}.lua", s.server.name()));
        std::fs::write(&path, loadgen::wrk_script(scenario, etags)?)?;
        scripts.push(path);
    }

    let sampler = Sampler::start(
        vec![a.group.pgid(), b.group.pgid()],
        Duration::from_millis(200),
    );
    if args.warmup > 0 {
        for (i, s) in servers.iter().enumerate() {
            loadgen::run_wrk(
                settings,
                &scripts[i],
                s.addr,
                args.warmup,
                &dir.join(format!("warmup-{i}.out")),
            )
            .with_context(|| format!("warm-up of {}", s.server.name()))?;
        }
    }

    let mut throughput: [Vec<RunResult>; 2] = Default::default();
    let mut latency: [Vec<RunResult>; 2] = Default::default();
    let mut cpu = [0.0f64; 2];
    let mut wrk_cpu = [0.0f64; 2];
    let mut rates = Vec::new();
    for round in 0..args.rounds {
        for (i, s) in servers.iter().enumerate() {
            check_interrupted()?;
            let before = group_cpu_seconds(s.group.pgid());
            let out = dir.join(format!("wrk-{}-{round}.out", s.server.name()));
            let result = loadgen::run_wrk(settings, &scripts[i], s.addr, args.duration, &out)
                .with_context(|| format!("wrk against {}", s.server.name()))?;
            let used = group_cpu_seconds(s.group.pgid()) - before;
            cpu[i] += used;
            wrk_cpu[i] += used;
            eprintln!(
                "loadtest:   round {} wrk {:<10} {:>9.0} req/s {:>8.1} MB/s  errors {}",
                round + 1,
                s.server.name(),
                result.req_per_s,
                result.mb_per_s,
                result.errors
            );
            throughput[i].push(result);
        }
        match &settings.oha {
            Some(oha) => {
                let rate = settings.latency_load
                    * throughput[0][round]
                        .req_per_s
                        .min(throughput[1][round].req_per_s);
                rates.push(rate);
                for (i, s) in servers.iter().enumerate() {
                    check_interrupted()?;
                    let before = group_cpu_seconds(s.group.pgid());
                    let etag = etags[i].first().map(String::as_str).unwrap_or_default();
                    let oha_args = loadgen::oha_args(scenario, s.addr, etag, settings, rate);
                    let out = dir.join(format!("oha-{}-{round}.json", s.server.name()));
                    let result = loadgen::run_oha(oha, &oha_args, scenario, args.duration, &out)
                        .with_context(|| format!("oha against {}", s.server.name()))?;
                    cpu[i] += group_cpu_seconds(s.group.pgid()) - before;
                    eprintln!(
                        "loadtest:   round {} oha {:<10} at {:>7.0} req/s: p50 {:.3} ms p99 {:.3} ms  errors {}",
                        round + 1,
                        s.server.name(),
                        rate,
                        result.p50_ms,
                        result.p99_ms,
                        result.errors
                    );
                    latency[i].push(result);
                }
            }
            None => {
                for i in 0..2 {
                    latency[i].push(throughput[i][round]);
                }
            }
        }
    }
    let peaks = sampler.finish();

    // Still serving the right bytes after the load?
    for s in servers {
        verify(scenario, s).with_context(|| format!("verify {} after timing", s.server.name()))?;
    }
    let [tput_a, tput_b] = throughput;
    let [lat_a, lat_b] = latency;
    let fileserver = report::summarize(tput_a, lat_a, peaks[0], cpu[0], wrk_cpu[0]);
    let nginx = report::summarize(tput_b, lat_b, peaks[1], cpu[1], wrk_cpu[1]);
    let ratios = report::ratios(&fileserver, &nginx);
    drop(b);
    drop(a);
    Ok(ScenarioReport {
        name: scenario.name().to_string(),
        description: scenario.description().to_string(),
        latency_rate: benches::loadtest::stats::median(&rates).unwrap_or(0.0),
        fileserver,
        nginx,
        ratios,
    })
}

/// Indices a check samples out of `count`: both ends and a spread between.
fn sample_indices(count: usize) -> Vec<usize> {
    let mut v: Vec<usize> = vec![0, 1, count / 2, count - 2, count - 1];
    v.extend((0..12).map(|k| (k * 7919 + 13) % count));
    v.sort_unstable();
    v.dedup();
    v
}

fn expect_file(addr: SocketAddr, path: &str, len: usize) -> Result<http::Response> {
    let r = http::get(addr, path, &[])?;
    ensure!(
        r.status == 200,
        "GET {path}: status {} (want 200)",
        r.status
    );
    ensure!(
        r.body == tree::contents(path, len),
        "GET {path}: body differs from the file ({} bytes)",
        r.body.len()
    );
    Ok(r)
}

/// Checks that `s` answers this scenario's requests correctly. Returns the
/// server's ETags of the small files for `not_modified` (empty otherwise).
fn verify(scenario: Scenario, s: &Running) -> Result<Vec<String>> {
    let addr = s.addr;
    match scenario {
        Scenario::SmallRandom => {
            for i in sample_indices(SMALL_COUNT) {
                expect_file(addr, &tree::small_path(i), SMALL_SIZE)?;
            }
        }
        Scenario::Large => {
            expect_file(addr, LARGE_PATH, LARGE_SIZE)?;
        }
        Scenario::CachePressure => {
            for i in sample_indices(PRESSURE_COUNT) {
                expect_file(addr, &tree::pressure_path(i), PRESSURE_SIZE)?;
            }
        }
        Scenario::NotModified => {
            let mut etags = Vec::with_capacity(SMALL_COUNT);
            for i in 0..SMALL_COUNT {
                check_interrupted()?;
                let path = tree::small_path(i);
                let r = expect_file(addr, &path, SMALL_SIZE)?;
                etags.push(
                    r.header("etag")
                        .with_context(|| format!("GET {path}: no ETag"))?
                        .to_string(),
                );
            }
            for i in sample_indices(SMALL_COUNT) {
                let path = tree::small_path(i);
                let r = http::get(addr, &path, &[("If-None-Match", &etags[i])])?;
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
            return Ok(etags);
        }
        Scenario::Range => {
            let whole = tree::contents(LARGE_PATH, LARGE_SIZE);
            let starts = [0, 1, OHA_RANGE.0, 777_777, LARGE_SIZE - RANGE_LEN];
            for start in starts {
                let end = start + RANGE_LEN - 1;
                let header = format!("bytes={start}-{end}");
                let r = http::get(addr, LARGE_PATH, &[("Range", &header)])?;
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
    }
    Ok(Vec::new())
}

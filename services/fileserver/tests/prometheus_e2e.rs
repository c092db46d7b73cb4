//! End to end: the real daemon, scraped by a real Prometheus server.
//!
//! ```text
//!  reqwest (N hits, M 404s, T threads on one hot file)
//!      |                                   this test
//!      v                                      | /api/v1/query, /api/v1/rules
//!  fileserver 127.0.0.1:0  --admin /metrics--> prometheus 127.0.0.1:<free>
//!                                             (deploy/prometheus/prometheus.yml,
//!                                              scrape/eval 1s, project rules)
//! ```
//!
//! Checks that what Prometheus stored matches the traffic exactly: request
//! counts by code, cache hits / misses / negative hits, body bytes, the
//! duration histogram's count; that the contention series exist per
//! component; that every recording and alert rule of `deploy/prometheus`
//! loaded and evaluates healthy; and that every Grafana dashboard query
//! returns data. A missing Prometheus binary FAILS the test (see
//! `scripts/install-deps.sh`); set `PROMETHEUS_BIN` to use another binary.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Kills (SIGKILL) and reaps the process when dropped, so a failing assertion
/// never leaves a daemon or a Prometheus behind.
struct KillOnDrop {
    name: &'static str,
    child: Option<Child>,
}

impl KillOnDrop {
    fn new(name: &'static str, child: Child) -> Self {
        KillOnDrop {
            name,
            child: Some(child),
        }
    }

    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// SIGTERM, then waits up to `timeout` for the exit status.
    fn terminate(mut self, timeout: Duration) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("process already reaped");
        // SAFETY: kill(2) on the pid of a child we spawned and have not yet
        // reaped, so the pid cannot have been reused by another process.
        let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        assert_eq!(
            rc,
            0,
            "kill({}, SIGTERM): {}",
            self.name,
            std::io::Error::last_os_error()
        );
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = child.try_wait().expect("waitpid") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{} did not exit within {timeout:?} of SIGTERM", self.name);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

// ------------------------------------------------------------------ daemon --

/// Starts the daemon on ephemeral loopback ports (the shared helper reads the
/// bound addresses from its start line and kills it on drop).
fn start_daemon(root: &Path) -> common::Daemon {
    let mut cmd = Command::new(common::bin());
    for (k, _) in std::env::vars() {
        if k.starts_with("FILESERVER_") {
            cmd.env_remove(k);
        }
    }
    cmd.args(common::base_args(root))
        // Entries and negative entries stay fresh for the whole test, so every
        // lookup after the first is a hit: the expected counts below are exact.
        .env("FILESERVER_CACHE_VALID", "1h")
        .env("FILESERVER_CACHE_NEGATIVE_TTL", "1h")
        // No sibling lookups for .br/.gz/.zst: one cache lookup per request.
        .env("FILESERVER_PRECOMPRESSED", "false")
        .env("FILESERVER_LOG_LEVEL", "warn");
    common::Daemon::spawn(cmd)
}

// -------------------------------------------------------------- prometheus --

struct Prometheus {
    proc: KillOnDrop,
    base: String,
    client: reqwest::blocking::Client,
    log: PathBuf,
}

fn prometheus_bin() -> PathBuf {
    let bin = std::env::var_os("PROMETHEUS_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/prometheus"));
    assert!(
        bin.is_file(),
        "{} not found: this test needs a real Prometheus server. Install it with \
         `scripts/install-deps.sh` (Debian package `prometheus`), or point PROMETHEUS_BIN at one.",
        bin.display()
    );
    bin
}

/// Replaces `from` with `to`, insisting it occurs exactly once so that a
/// changed template fails loudly instead of producing a config that scrapes
/// nothing.
fn replace_once(text: &str, from: &str, to: &str) -> String {
    let n = text.matches(from).count();
    assert_eq!(
        n, 1,
        "deploy/prometheus/prometheus.yml: expected `{from}` exactly once, found {n}"
    );
    text.replacen(from, to, 1)
}

/// deploy/prometheus/prometheus.yml pointed at `admin`, scraping and
/// evaluating every second, with the project's rule files by absolute path.
fn render_config(admin: SocketAddr) -> String {
    let dir = repo_root().join("deploy/prometheus");
    let template = std::fs::read_to_string(dir.join("prometheus.yml"))
        .expect("read deploy/prometheus/prometheus.yml");
    let mut c = replace_once(&template, "scrape_interval: 15s", "scrape_interval: 1s");
    c = replace_once(&c, "evaluation_interval: 15s", "evaluation_interval: 1s");
    c = replace_once(&c, "scrape_timeout: 5s", "scrape_timeout: 1s");
    c = replace_once(&c, "- 127.0.0.1:8081", &format!("- {admin}"));
    for rules in ["fileserver.rules.yml", "fileserver.alerts.yml"] {
        c = replace_once(
            &c,
            &format!("- {rules}"),
            &format!("- {}", dir.join(rules).display()),
        );
    }
    c
}

fn start_prometheus(dir: &Path, admin: SocketAddr) -> Prometheus {
    let bin = prometheus_bin();
    let config = dir.join("prometheus.yml");
    std::fs::write(&config, render_config(admin)).unwrap();
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    // The free port may be taken between probe and bind: retry with another.
    for attempt in 0..3 {
        let port = common::free_port();
        let log = dir.join(format!("prometheus-{attempt}.log"));
        let child = Command::new(&bin)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join(format!("data-{attempt}")).display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("spawn prometheus");
        let mut p = Prometheus {
            proc: KillOnDrop::new("prometheus", child),
            base: format!("http://127.0.0.1:{port}"),
            client: client.clone(),
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if p.proc.exited().is_some() {
                break;
            }
            if let Ok(r) = p.client.get(format!("{}/-/ready", p.base)).send() {
                if r.status().is_success() {
                    return p;
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let log = std::fs::read_to_string(&p.log).unwrap_or_default();
        if !log.contains("address already in use") {
            panic!("prometheus did not become ready:\n{log}");
        }
    }
    panic!("prometheus could not bind a free port in 3 attempts");
}

/// One sample of an instant vector: its labels (without `__name__`) and value.
type Sample = (BTreeMap<String, String>, f64);

impl Prometheus {
    fn api(&self, path: &str, query: &[(&str, &str)]) -> serde_json::Value {
        let r = self
            .client
            .get(format!("{}{path}", self.base))
            .query(query)
            .send()
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
        let status = r.status();
        let body: serde_json::Value = r
            .json()
            .unwrap_or_else(|e| panic!("GET {path}: body is not JSON: {e}"));
        assert!(
            status.is_success() && body["status"] == "success",
            "GET {path} {query:?}: {status} {body}"
        );
        body["data"].clone()
    }

    fn query(&self, expr: &str) -> Vec<Sample> {
        let data = self.api("/api/v1/query", &[("query", expr)]);
        match data["resultType"].as_str() {
            Some("vector") => data["result"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| {
                    let labels = s["metric"]
                        .as_object()
                        .unwrap()
                        .iter()
                        .filter(|(k, _)| *k != "__name__")
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                        .collect();
                    (labels, parse_value(&s["value"][1]))
                })
                .collect(),
            Some("scalar") => vec![(BTreeMap::new(), parse_value(&data["result"][1]))],
            other => panic!("{expr}: unexpected result type {other:?}"),
        }
    }

    /// Polls `check` every 250 ms until it returns Ok or `timeout` passes.
    fn eventually<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut check: impl FnMut(&Self) -> Result<T, String>,
    ) -> T {
        let deadline = Instant::now() + timeout;
        loop {
            match check(self) {
                Ok(v) => return v,
                Err(why) if Instant::now() > deadline => {
                    let log = std::fs::read_to_string(&self.log).unwrap_or_default();
                    panic!(
                        "{what}: still not true after {timeout:?}: {why}\nprometheus log:\n{log}"
                    )
                }
                Err(_) => std::thread::sleep(Duration::from_millis(250)),
            }
        }
    }
}

fn parse_value(v: &serde_json::Value) -> f64 {
    let s = v.as_str().expect("sample value is a string");
    match s {
        "NaN" => f64::NAN,
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        _ => s.parse().unwrap_or_else(|_| panic!("bad sample value {s}")),
    }
}

// ---------------------------------------------------- the daemon's /metrics --

/// Series of one scrape of the daemon's own /metrics: `name{a="x",b="y"}` -> value.
fn scrape(client: &reqwest::blocking::Client, admin: SocketAddr) -> BTreeMap<String, f64> {
    let text = client
        .get(format!("http://{admin}/metrics"))
        .send()
        .and_then(|r| r.error_for_status())
        .and_then(|r| r.text())
        .expect("GET /metrics");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (series, value) = l
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("bad exposition line {l:?}"));
            (series.to_string(), value.parse::<f64>().unwrap_or(f64::NAN))
        })
        .collect()
}

/// The exposition key of a Prometheus sample, labels in the exporter's order
/// (the daemon's own labels, without job/instance).
fn key(name: &str, labels: &[(&str, &str)]) -> String {
    if labels.is_empty() {
        return name.to_string();
    }
    let inner: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    format!("{name}{{{}}}", inner.join(","))
}

/// The counters this test knows exact deltas for, as (name, labels).
const COUNTED: &[(&str, &[(&str, &str)])] = &[
    (
        "fileserver_http_requests_total",
        &[("code", "200"), ("method", "GET"), ("site", "default")],
    ),
    (
        "fileserver_http_requests_total",
        &[("code", "404"), ("method", "GET"), ("site", "default")],
    ),
    ("fileserver_cache_hits_total", &[]),
    ("fileserver_cache_misses_total", &[]),
    ("fileserver_cache_negative_hits_total", &[]),
    (
        "fileserver_http_response_body_bytes_total",
        &[("site", "default")],
    ),
    (
        "fileserver_http_request_duration_seconds_count",
        &[("site", "default")],
    ),
];

/// Prometheus' latest value of each COUNTED series; an absent series is 0
/// (labelled counters appear at their first increment).
fn stored_counts(prom: &Prometheus) -> BTreeMap<String, f64> {
    COUNTED
        .iter()
        .map(|(name, labels)| {
            let matchers: Vec<String> = std::iter::once("job=\"fileserver\"".to_string())
                .chain(labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")))
                .collect();
            let got = prom.query(&format!("{name}{{{}}}", matchers.join(",")));
            assert!(
                got.len() <= 1,
                "{name}{labels:?}: more than one series: {got:?}"
            );
            (key(name, labels), got.first().map(|s| s.1).unwrap_or(0.0))
        })
        .collect()
}

// -------------------------------------------------------------------- test --

const FILES: usize = 5; // small files, each fetched 1 + REPEAT times
const REPEAT: usize = 4;
const MISSING: usize = 3; // distinct missing paths, each fetched MISSING_REPEAT times
const MISSING_REPEAT: usize = 3;
const HOT_THREADS: usize = 8; // concurrent clients on one file
const HOT_PER_THREAD: usize = 25;
const HOT_SIZE: usize = 64 * 1024;

#[test]
fn prometheus_scrapes_exact_traffic_and_loads_project_rules() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("www");
    std::fs::create_dir(&root).unwrap();
    for i in 0..FILES {
        std::fs::write(
            root.join(format!("f{i}.txt")),
            vec![b'a' + i as u8; 1000 + i],
        )
        .unwrap();
    }
    std::fs::write(root.join("hot.bin"), vec![7u8; HOT_SIZE]).unwrap();
    std::fs::write(root.join("warm.txt"), b"warm-up\n").unwrap();

    let mut daemon = start_daemon(&root);
    let prom = start_prometheus(dir.path(), daemon.admin);
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();

    // 1. Prometheus scrapes the daemon: target up, counters present. The
    // daemon creates a `code` series at its first response with that code,
    // and rate() cannot see the increase that created a series, so one 200
    // and one 404 (on paths the traffic below does not use) come first.
    let base = format!("http://{}", daemon.http);
    for (path, code) in [("/warm.txt", 200), ("/warm-missing.txt", 404)] {
        let r = client.get(format!("{base}{path}")).send().expect("GET");
        assert_eq!(r.status().as_u16(), code, "GET {path}");
    }
    prom.eventually("target up and scraped", Duration::from_secs(30), |p| {
        let up = p.query("up{job=\"fileserver\"}");
        match up.as_slice() {
            [(labels, v)] if *v == 1.0 && labels["instance"] == daemon.admin.to_string() => {}
            other => return Err(format!("up = {other:?}")),
        }
        for series in [
            "fileserver_cache_hits_total{job=\"fileserver\"}",
            "fileserver_http_requests_total{job=\"fileserver\",code=\"200\",method=\"GET\"}",
            "fileserver_http_requests_total{job=\"fileserver\",code=\"404\",method=\"GET\"}",
        ] {
            if p.query(series).is_empty() {
                return Err(format!("no {series} yet"));
            }
        }
        // Durations reach the histogram up to 100 ms after the counters: wait
        // until the scraped histogram has caught up with the warm-up too.
        let behind = p.query(
            "sum(fileserver_http_requests_total{job=\"fileserver\"}) \
             - sum(fileserver_http_request_duration_seconds_count{job=\"fileserver\"})",
        );
        match behind.as_slice() {
            [(_, v)] if *v == 0.0 => Ok(()),
            other => Err(format!(
                "histogram behind the request counters by {other:?}"
            )),
        }
    });
    // Traffic since the last scrape would make the baseline too low; there
    // is none, so Prometheus' latest values are the baseline.
    let before = stored_counts(&prom);

    // 2. Traffic.
    let mut body_bytes = 0u64;
    let mut get = |path: &str, want: u16| {
        let r = client.get(format!("{base}{path}")).send().expect("GET");
        assert_eq!(r.status().as_u16(), want, "GET {path}");
        body_bytes += r.bytes().unwrap().len() as u64;
    };
    for i in 0..FILES {
        get(&format!("/f{i}.txt"), 200); // miss: first use opens the file
    }
    for _ in 0..REPEAT {
        for i in 0..FILES {
            get(&format!("/f{i}.txt"), 200); // hit
        }
    }
    for _ in 0..MISSING_REPEAT {
        for i in 0..MISSING {
            get(&format!("/missing-{i}.txt"), 404); // miss, then negative hits
        }
    }
    get("/hot.bin", 200); // miss: loads the hot entry before the concurrent phase
    let hot_bytes: u64 = std::thread::scope(|s| {
        let workers: Vec<_> = (0..HOT_THREADS)
            .map(|_| {
                let url = format!("{base}/hot.bin");
                s.spawn(move || {
                    let c = reqwest::blocking::Client::new();
                    let mut n = 0u64;
                    for _ in 0..HOT_PER_THREAD {
                        let r = c.get(&url).send().expect("GET /hot.bin");
                        assert_eq!(r.status().as_u16(), 200);
                        let body = r.bytes().unwrap();
                        assert_eq!(body.len(), HOT_SIZE);
                        n += body.len() as u64;
                    }
                    n
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    body_bytes += hot_bytes;

    let ok_requests = FILES * (1 + REPEAT) + 1 + HOT_THREADS * HOT_PER_THREAD;
    let not_found = MISSING * MISSING_REPEAT;
    let expected_delta: BTreeMap<String, f64> = [
        (
            key(
                "fileserver_http_requests_total",
                &[("code", "200"), ("method", "GET"), ("site", "default")],
            ),
            ok_requests as f64,
        ),
        (
            key(
                "fileserver_http_requests_total",
                &[("code", "404"), ("method", "GET"), ("site", "default")],
            ),
            not_found as f64,
        ),
        (
            key("fileserver_cache_hits_total", &[]),
            (FILES * REPEAT + HOT_THREADS * HOT_PER_THREAD) as f64,
        ),
        (
            key("fileserver_cache_misses_total", &[]),
            (FILES + MISSING + 1) as f64,
        ),
        (
            key("fileserver_cache_negative_hits_total", &[]),
            (MISSING * (MISSING_REPEAT - 1)) as f64,
        ),
        (
            key(
                "fileserver_http_response_body_bytes_total",
                &[("site", "default")],
            ),
            body_bytes as f64,
        ),
        (
            key(
                "fileserver_http_request_duration_seconds_count",
                &[("site", "default")],
            ),
            (ok_requests + not_found) as f64,
        ),
    ]
    .into_iter()
    .collect();

    // 3. The daemon's own /metrics shows exactly the traffic (the histogram is
    // folded in every 100 ms, so wait for it to settle) ...
    let direct = prom.eventually(
        "daemon /metrics shows all traffic",
        Duration::from_secs(10),
        |_| {
            let now = scrape(&client, daemon.admin);
            let deltas: BTreeMap<String, f64> = expected_delta
                .keys()
                .map(|k| (k.clone(), now.get(k).copied().unwrap_or(0.0) - before[k]))
                .collect();
            if deltas == expected_delta {
                Ok(now)
            } else {
                Err(format!("deltas {deltas:?}\nexpected {expected_delta:?}"))
            }
        },
    );
    // ... and Prometheus stores those same values after its next scrapes.
    prom.eventually(
        "prometheus stored the exact deltas",
        Duration::from_secs(30),
        |p| {
            let after = stored_counts(p);
            let deltas: BTreeMap<String, f64> = after
                .iter()
                .map(|(k, v)| (k.clone(), v - before[k]))
                .collect();
            if deltas == expected_delta {
                Ok(())
            } else {
                Err(format!("deltas {deltas:?}\nexpected {expected_delta:?}"))
            }
        },
    );

    // 4. Contention: one series per component, equal to the daemon's own count.
    for component in ["fdtable", "pathcache"] {
        let k = key("fileserver_contention_total", &[("component", component)]);
        let own = *direct
            .get(&k)
            .unwrap_or_else(|| panic!("daemon /metrics has no {k}"));
        prom.eventually(
            &format!("contention series for {component}"),
            Duration::from_secs(30),
            |p| {
                let got = p.query(&format!(
                    "fileserver_contention_total{{job=\"fileserver\",component=\"{component}\"}}"
                ));
                match got.as_slice() {
                    [(_, v)] if *v >= own => Ok(()),
                    other => Err(format!("{other:?}, daemon says {own}")),
                }
            },
        );
    }
    // Gauges the fd alert divides, scraped as the daemon reports them.
    let budget = prom.query("fileserver_fd_budget{job=\"fileserver\"}");
    assert!(
        matches!(budget.as_slice(), [(_, b)] if *b > 0.0),
        "fd budget: {budget:?}"
    );
    let open = prom.query("fileserver_fds_open{job=\"fileserver\"}");
    assert!(
        matches!(open.as_slice(), [(_, o)] if *o >= 1.0),
        "fds open: {open:?}"
    );

    // 5. Every project rule is loaded and evaluates without error, and the
    // recording rules produce the series the alerts and dashboard use.
    let (records, alerts) = rule_names();
    prom.eventually(
        "all rules evaluated and healthy",
        Duration::from_secs(30),
        |p| {
            let data = p.api("/api/v1/rules", &[]);
            let mut seen = Vec::new();
            for group in data["groups"].as_array().unwrap() {
                for rule in group["rules"].as_array().unwrap() {
                    let name = rule["name"].as_str().unwrap().to_string();
                    if rule["health"] != "ok" {
                        return Err(format!(
                            "rule {name}: health {} {}",
                            rule["health"], rule["lastError"]
                        ));
                    }
                    if rule["lastEvaluation"]
                        .as_str()
                        .unwrap_or("0001")
                        .starts_with("0001")
                    {
                        return Err(format!("rule {name} not evaluated yet"));
                    }
                    seen.push((rule["type"].as_str().unwrap().to_string(), name));
                }
            }
            seen.sort();
            let mut want: Vec<(String, String)> = records
                .iter()
                .map(|r| ("recording".to_string(), r.clone()))
                .chain(alerts.iter().map(|a| ("alerting".to_string(), a.clone())))
                .collect();
            want.sort();
            if seen == want {
                Ok(())
            } else {
                Err(format!("rules loaded {seen:?}, want {want:?}"))
            }
        },
    );
    prom.eventually("recording rules produce values", Duration::from_secs(30), |p| {
        let ratio = p.query("job:fileserver_cache_hit_ratio:rate5m{job=\"fileserver\"}");
        let by_code = p.query("job_code:fileserver_http_requests:rate5m{job=\"fileserver\",code=\"404\"}");
        let contention = p.query("job_component:fileserver_contention:rate5m{job=\"fileserver\"}");
        let fds = p.query("instance:fileserver_fd_utilization:ratio{job=\"fileserver\"}");
        match (ratio.as_slice(), by_code.as_slice(), contention.len(), fds.as_slice()) {
            ([(_, r)], [(_, c)], 2, [(_, f)]) if *r > 0.5 && *r <= 1.0 && *c > 0.0 && *f > 0.0 && *f < 1.0 => Ok(()),
            _ => Err(format!("hit ratio {ratio:?}, 404 rate {by_code:?}, contention {contention:?}, fds {fds:?}")),
        }
    });
    let firing = prom.api("/api/v1/alerts", &[]);
    for alert in firing["alerts"].as_array().unwrap() {
        let name = alert["labels"]["alertname"].as_str().unwrap_or("");
        assert!(
            !matches!(name, "FileserverTargetDown" | "FileserverTargetsMissing"),
            "{name} is {} while the daemon is up",
            alert["state"]
        );
    }

    // 6. Every Grafana dashboard query returns data from the live daemon.
    check_dashboard_queries(&prom);

    // 7. Graceful stop of both; the guards kill them if anything above panicked.
    daemon.signal(libc::SIGTERM);
    let status = daemon
        .wait_exit(Duration::from_secs(40))
        .expect("fileserver did not exit within 40 s of SIGTERM");
    assert!(
        status.success(),
        "fileserver exited with {status} on SIGTERM"
    );
    let status = prom.proc.terminate(Duration::from_secs(30));
    assert!(
        status.success(),
        "prometheus exited with {status} on SIGTERM"
    );
}

/// Recording-rule and alert names declared in deploy/prometheus.
fn rule_names() -> (Vec<String>, Vec<String>) {
    let dir = repo_root().join("deploy/prometheus");
    let mut records = Vec::new();
    let mut alerts = Vec::new();
    for f in ["fileserver.rules.yml", "fileserver.alerts.yml"] {
        let text = std::fs::read_to_string(dir.join(f)).unwrap();
        for line in text.lines().map(str::trim) {
            if let Some(r) = line.strip_prefix("- record:") {
                records.push(r.trim().to_string());
            } else if let Some(a) = line.strip_prefix("- alert:") {
                alerts.push(a.trim().to_string());
            }
        }
    }
    assert!(
        !records.is_empty() && !alerts.is_empty(),
        "no rules found in {}",
        dir.display()
    );
    (records, alerts)
}

/// Runs each target of deploy/grafana/fileserver.json (Grafana variables
/// substituted) and requires data, except for the 5xx share: no 5xx was sent,
/// so its numerator is empty.
fn check_dashboard_queries(prom: &Prometheus) {
    let path = repo_root().join("deploy/grafana/fileserver.json");
    let dash: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut checked = 0;
    for panel in dash["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap();
            let q = expr
                .replace("$__rate_interval", "1m")
                .replace("$job", "fileserver")
                .replace("$instance", ".*");
            let may_be_empty = expr.contains("code=~\"5..\"");
            prom.eventually(
                &format!("dashboard panel {:?} query {expr}", panel["title"]),
                Duration::from_secs(30),
                |p| {
                    let got = p.query(&q);
                    if got.is_empty() && !may_be_empty {
                        Err("no data".into())
                    } else if got.iter().any(|(_, v)| v.is_nan()) && !may_be_empty {
                        Err(format!("NaN in {got:?}"))
                    } else {
                        Ok(())
                    }
                },
            );
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} dashboard queries found");
}

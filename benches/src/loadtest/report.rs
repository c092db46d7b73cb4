//! Summaries per scenario and their renderings: markdown/console tables,
//! JSON, and a PNG chart.
//!
//! A scenario holds one [`ServerSummary`] per server that ran (fileserver
//! first, then each peer), fileserver's ratios to each peer, and its
//! headline: fileserver against the best peer on the figure the scenario is
//! judged by (req/s, or in `cold` the small requests' p99).
//!
//! A scenario of the `embedded` group ([`Group::Embedded`]) has servedir
//! (the axum app with `servedir::ServeDir`) first, then tower-http's
//! `ServeDir` in the same app and the daemon; its ratios are servedir /
//! each, and its headline is servedir against tower-http (the group's
//! baseline), not against the best. Its tables are rendered apart from the
//! daemon-vs-peers ones ([`group_table`]).

use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::loadtest::loadgen::RunResult;
use crate::loadtest::procs::Cpu;
use crate::loadtest::scenario::{Group, Headline, Scenario};
use crate::loadtest::servers::{BASELINE, CEILING};
use crate::loadtest::stats::{median, paired_ratio, ratio, RatioSpread};

/// Everything one harness run measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// When the run finished (UTC, RFC 3339).
    pub generated_utc: String,
    /// How it was measured.
    pub settings: Settings,
    /// One entry per scenario run.
    pub scenarios: Vec<ScenarioReport>,
}

/// How a run was measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Settings {
    /// Rounds per scenario (each round: wrk on every server, then latency on every server).
    pub rounds: usize,
    /// Seconds per timed run.
    pub duration_s: u64,
    /// Open connections per run.
    pub connections: usize,
    /// wrk threads.
    pub wrk_threads: usize,
    /// Workers of each server.
    pub workers: usize,
    /// `"oha <version>"` or `"wrk (oha not installed)"`.
    pub latency_tool: String,
    /// oha's fixed rate as a fraction of the slowest server's wrk req/s.
    pub latency_load: f64,
    /// Online CPUs.
    pub cpus: usize,
    /// `uname -r`.
    pub kernel: String,
    /// Versions of the tools and servers.
    pub versions: Vec<(String, String)>,
    /// The peers that were started (fileserver is not listed).
    #[serde(default)]
    pub peers: Vec<String>,
    /// Peers and scenarios left out of the whole run, with the reason.
    #[serde(default)]
    pub skipped: Vec<(String, String)>,
}

/// One server's figures in one scenario.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ServerSummary {
    /// `fileserver` or the peer's name.
    #[serde(default)]
    pub name: String,
    /// Median wrk req/s over rounds.
    #[serde(deserialize_with = "nan_if_null")]
    pub req_per_s: f64,
    /// Median wrk MB/s (headers included) over rounds.
    #[serde(deserialize_with = "nan_if_null")]
    pub mb_per_s: f64,
    /// Median p50 latency (ms) of the latency runs.
    #[serde(deserialize_with = "nan_if_null")]
    pub p50_ms: f64,
    /// Median p99 latency (ms) of the latency runs.
    #[serde(deserialize_with = "nan_if_null")]
    pub p99_ms: f64,
    /// Slowest request (ms) over all latency runs.
    #[serde(default, deserialize_with = "nan_if_null")]
    pub max_ms: f64,
    /// Errors over all timed runs (socket errors, timeouts, wrong statuses).
    pub errors: u64,
    /// Peak RSS of all the server's processes summed, MiB.
    #[serde(deserialize_with = "nan_if_null")]
    pub peak_rss_mib: f64,
    /// CPU seconds (user + system, all processes) during the timed runs.
    #[serde(deserialize_with = "nan_if_null")]
    pub cpu_s: f64,
    /// CPU microseconds per request during the wrk runs (NaN where not measured).
    #[serde(deserialize_with = "nan_if_null")]
    pub cpu_us_per_req: f64,
    /// The system (kernel) part of `cpu_us_per_req`.
    #[serde(default = "not_measured", deserialize_with = "nan_if_null")]
    pub sys_us_per_req: f64,
    /// Every wrk run.
    pub throughput_runs: Vec<RunResult>,
    /// Every latency run.
    pub latency_runs: Vec<RunResult>,
}

/// fileserver / one peer.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Ratios {
    /// req/s (higher is better for fileserver).
    pub req_per_s: Option<RatioSpread>,
    /// MB/s.
    pub mb_per_s: Option<RatioSpread>,
    /// p50 latency (lower is better for fileserver).
    pub p50: Option<RatioSpread>,
    /// p99 latency (lower is better for fileserver).
    pub p99: Option<RatioSpread>,
    /// Peak RSS.
    pub peak_rss: Option<f64>,
    /// CPU per request.
    pub cpu_per_req: Option<f64>,
    /// System CPU per request.
    #[serde(default)]
    pub sys_per_req: Option<f64>,
    /// Bytes per response on the wire (wrk's MB/s over its req/s).
    #[serde(default)]
    pub bytes_per_req: Option<f64>,
}

/// fileserver's ratios to one peer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PeerRatios {
    /// The peer's name.
    pub peer: String,
    /// fileserver / that peer.
    pub ratios: Ratios,
}

/// fileserver against the peer that did best on one figure (or, in the
/// `embedded` group, servedir against the group's baseline).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Best {
    /// The best peer's name (the baseline's).
    pub peer: String,
    /// fileserver's figure (in the `embedded` group: servedir's).
    #[serde(deserialize_with = "nan_if_null")]
    pub fileserver: f64,
    /// The best peer's figure.
    #[serde(deserialize_with = "nan_if_null")]
    pub value: f64,
    /// fileserver / best peer, paired by round.
    pub ratio: Option<RatioSpread>,
}

/// One scenario's result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScenarioReport {
    /// Scenario name.
    pub name: String,
    /// What it requests.
    pub description: String,
    /// Median oha rate (req/s) of the latency runs; 0 when wrk measured latency.
    #[serde(deserialize_with = "nan_if_null")]
    pub latency_rate: f64,
    /// The figure the headline compares.
    pub headline: Headline,
    /// fileserver first, then every peer that ran, in run order (in the
    /// `embedded` group: servedir, tower-http, fileserver).
    pub servers: Vec<ServerSummary>,
    /// fileserver / each peer, in the order of `servers[1..]`.
    pub ratios: Vec<PeerRatios>,
    /// The peer with the highest req/s, and fileserver against it.
    pub best_req_per_s: Option<Best>,
    /// The peer with the lowest p99, and fileserver against it.
    pub best_p99: Option<Best>,
    /// Servers that started but were left out of this scenario, with why.
    #[serde(default)]
    pub left_out: Vec<(String, String)>,
    /// Which servers ran (`peers` in reports written before the groups).
    #[serde(default)]
    pub group: Group,
    /// `servers[0]` against the group's baseline on req/s (the `embedded`
    /// group: servedir / tower-http); `None` in a group without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_req_per_s: Option<Best>,
    /// `servers[0]` against the group's baseline on p99.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_p99: Option<Best>,
}

impl ScenarioReport {
    /// Builds a scenario's report from its summaries (`servers[0]` is
    /// fileserver, or what stands in for it): the ratios to every peer and
    /// the best peer on req/s and on p99.
    pub fn new(
        name: &str,
        description: &str,
        latency_rate: f64,
        headline: Headline,
        servers: Vec<ServerSummary>,
        left_out: Vec<(String, String)>,
    ) -> Self {
        let ratios: Vec<PeerRatios> = match servers.split_first() {
            Some((fs, peers)) => peers
                .iter()
                .map(|p| PeerRatios {
                    peer: p.name.clone(),
                    ratios: ratios(fs, p),
                })
                .collect(),
            None => Vec::new(),
        };
        let mut report = Self {
            name: name.to_string(),
            description: description.to_string(),
            latency_rate,
            headline,
            servers,
            ratios,
            best_req_per_s: None,
            best_p99: None,
            left_out,
            group: Group::Peers,
            baseline_req_per_s: None,
            baseline_p99: None,
        };
        report.refresh_best();
        report
    }

    /// The same report as a scenario of `group` (its baseline comparisons
    /// filled in).
    pub fn in_group(mut self, group: Group) -> Self {
        self.group = group;
        self.refresh_best();
        self
    }

    /// Recomputes the best peers and the baseline comparisons from the
    /// summaries and ratios.
    fn refresh_best(&mut self) {
        self.best_req_per_s = self.best(|s| s.req_per_s, true, |r| r.req_per_s);
        self.best_p99 = self.best(|s| s.p99_ms, false, |r| r.p99);
        let baseline = self.group.baseline();
        self.baseline_req_per_s =
            baseline.and_then(|b| self.against(b, |s| s.req_per_s, |r| r.req_per_s));
        self.baseline_p99 = baseline.and_then(|b| self.against(b, |s| s.p99_ms, |r| r.p99));
    }

    /// `servers[0]` against the server named `name` on `figure`.
    fn against(
        &self,
        name: &str,
        figure: fn(&ServerSummary) -> f64,
        ratio: fn(&Ratios) -> Option<RatioSpread>,
    ) -> Option<Best> {
        let subject = self.servers.first()?;
        let other = self.servers[1..].iter().find(|s| s.name == name)?;
        Some(Best {
            peer: other.name.clone(),
            fileserver: figure(subject),
            value: figure(other),
            ratio: self.ratios_to(name).and_then(ratio),
        })
    }

    /// The peer whose `figure` is highest (or lowest), with fileserver's ratio to it.
    fn best(
        &self,
        figure: fn(&ServerSummary) -> f64,
        higher_is_better: bool,
        ratio: fn(&Ratios) -> Option<RatioSpread>,
    ) -> Option<Best> {
        let fs = self.servers.first()?;
        let best = self.servers[1..]
            .iter()
            .filter(|s| s.name != CEILING && s.name != BASELINE)
            .filter(|s| figure(s).is_finite() && figure(s) > 0.0)
            .max_by(|a, b| {
                let order = figure(a).total_cmp(&figure(b));
                if higher_is_better {
                    order
                } else {
                    order.reverse()
                }
            })?;
        Some(Best {
            peer: best.name.clone(),
            fileserver: figure(fs),
            value: figure(best),
            ratio: self.ratios_to(&best.name).and_then(ratio),
        })
    }

    /// fileserver's summary (the first server).
    pub fn fileserver(&self) -> Option<&ServerSummary> {
        self.servers.first()
    }

    /// The summary of the server named `name`.
    pub fn server(&self, name: &str) -> Option<&ServerSummary> {
        self.servers.iter().find(|s| s.name == name)
    }

    /// fileserver / the peer named `peer`.
    pub fn ratios_to(&self, peer: &str) -> Option<&Ratios> {
        self.ratios
            .iter()
            .find(|r| r.peer == peer)
            .map(|r| &r.ratios)
    }

    /// fileserver against the best peer on the figure the scenario is
    /// judged by; in a group with a baseline, `servers[0]` against that.
    pub fn headline_best(&self) -> Option<&Best> {
        match self.headline {
            Headline::ReqPerS => self.req_per_s_vs(),
            Headline::P99 => self.p99_vs(),
        }
    }

    /// `servers[0]` on req/s against the group's baseline, or without one
    /// against the best peer.
    pub fn req_per_s_vs(&self) -> Option<&Best> {
        match self.group.baseline() {
            Some(_) => self.baseline_req_per_s.as_ref(),
            None => self.best_req_per_s.as_ref(),
        }
    }

    /// `servers[0]` on p99 against the group's baseline, or without one
    /// against the best peer.
    pub fn p99_vs(&self) -> Option<&Best> {
        match self.group.baseline() {
            Some(_) => self.baseline_p99.as_ref(),
            None => self.best_p99.as_ref(),
        }
    }
}

/// A figure a report from before it existed lacks.
fn not_measured() -> f64 {
    f64::NAN
}

/// JSON has no NaN: serde_json writes a figure that was not measured as
/// `null`, and this reads it back as NaN.
fn nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// Fills a [`ServerSummary`]'s medians from its runs.
pub fn summarize(
    name: &str,
    throughput_runs: Vec<RunResult>,
    latency_runs: Vec<RunResult>,
    peak_rss_bytes: u64,
    cpu_s: f64,
    wrk_cpu: Option<Cpu>,
) -> ServerSummary {
    let med = |runs: &[RunResult], f: fn(&RunResult) -> f64| {
        median(&runs.iter().map(f).collect::<Vec<_>>()).unwrap_or(f64::NAN)
    };
    let wrk_requests: u64 = throughput_runs.iter().map(|r| r.requests).sum();
    let per_request = |seconds: Option<f64>| match seconds {
        Some(s) if wrk_requests > 0 => s * 1e6 / wrk_requests as f64,
        _ => f64::NAN,
    };
    ServerSummary {
        name: name.to_string(),
        req_per_s: med(&throughput_runs, |r| r.req_per_s),
        mb_per_s: med(&throughput_runs, |r| r.mb_per_s),
        p50_ms: med(&latency_runs, |r| r.p50_ms),
        p99_ms: med(&latency_runs, |r| r.p99_ms),
        max_ms: latency_runs
            .iter()
            .map(|r| r.max_ms)
            .fold(f64::NAN, f64::max),
        errors: throughput_runs
            .iter()
            .chain(&latency_runs)
            .map(|r| r.errors)
            .sum(),
        peak_rss_mib: peak_rss_bytes as f64 / (1024.0 * 1024.0),
        cpu_s,
        cpu_us_per_req: per_request(wrk_cpu.map(|c| c.total_s)),
        sys_us_per_req: per_request(wrk_cpu.map(|c| c.system_s)),
        throughput_runs,
        latency_runs,
    }
}

/// The fileserver/peer ratios of two summaries (paired by round).
pub fn ratios(fs: &ServerSummary, peer: &ServerSummary) -> Ratios {
    let col = |runs: &[RunResult], f: fn(&RunResult) -> f64| runs.iter().map(f).collect::<Vec<_>>();
    Ratios {
        req_per_s: paired_ratio(
            &col(&fs.throughput_runs, |r| r.req_per_s),
            &col(&peer.throughput_runs, |r| r.req_per_s),
        ),
        mb_per_s: paired_ratio(
            &col(&fs.throughput_runs, |r| r.mb_per_s),
            &col(&peer.throughput_runs, |r| r.mb_per_s),
        ),
        p50: paired_ratio(
            &col(&fs.latency_runs, |r| r.p50_ms),
            &col(&peer.latency_runs, |r| r.p50_ms),
        ),
        p99: paired_ratio(
            &col(&fs.latency_runs, |r| r.p99_ms),
            &col(&peer.latency_runs, |r| r.p99_ms),
        ),
        peak_rss: ratio(fs.peak_rss_mib, peer.peak_rss_mib),
        cpu_per_req: ratio(fs.cpu_us_per_req, peer.cpu_us_per_req),
        sys_per_req: ratio(fs.sys_us_per_req, peer.sys_us_per_req),
        bytes_per_req: ratio(kb_per_response(fs), kb_per_response(peer)),
    }
}

/// kB (10^3 bytes) per response on the wire, headers included: MB/s over req/s.
pub fn kb_per_response(s: &ServerSummary) -> f64 {
    s.mb_per_s * 1e3 / s.req_per_s
}

/// Reads a `latest.json`, also one written before the report held a list of
/// servers (with fixed `fileserver` and `nginx` fields).
pub fn parse_json(text: &str) -> Result<Report> {
    let current = serde_json::from_str::<Report>(text);
    let err = match current {
        Ok(report) => return Ok(report),
        Err(err) => err,
    };
    let legacy: legacy::Report = serde_json::from_str(text)
        .map_err(|_| err)
        .context("not a loadtest report")?;
    Ok(legacy.upgrade())
}

/// The two-server report format (fileserver and nginx fields).
mod legacy {
    use serde::Deserialize;

    use super::{PeerRatios, Ratios, ServerSummary, Settings};

    #[derive(Deserialize)]
    pub(super) struct Report {
        generated_utc: String,
        settings: Settings,
        scenarios: Vec<ScenarioReport>,
    }

    #[derive(Deserialize)]
    struct ScenarioReport {
        name: String,
        description: String,
        latency_rate: f64,
        fileserver: ServerSummary,
        nginx: ServerSummary,
        ratios: Ratios,
    }

    impl Report {
        pub(super) fn upgrade(self) -> super::Report {
            let mut settings = self.settings;
            if settings.peers.is_empty() {
                settings.peers = vec!["nginx".to_string()];
            }
            let scenarios = self
                .scenarios
                .into_iter()
                .map(|s| {
                    let headline = super::headline_of(&s.name);
                    let mut fileserver = s.fileserver;
                    fileserver.name = "fileserver".to_string();
                    let mut nginx = s.nginx;
                    nginx.name = "nginx".to_string();
                    let mut report = super::ScenarioReport::new(
                        &s.name,
                        &s.description,
                        s.latency_rate,
                        headline,
                        vec![fileserver, nginx],
                        Vec::new(),
                    );
                    // Keep the ratios as that run computed them.
                    report.ratios = vec![PeerRatios {
                        peer: "nginx".to_string(),
                        ratios: s.ratios,
                    }];
                    report.refresh_best();
                    report
                })
                .collect();
            super::Report {
                generated_utc: self.generated_utc,
                settings,
                scenarios,
            }
        }
    }
}

/// A number with 3 significant digits and a k/M suffix for big values.
pub fn human(x: f64) -> String {
    if !x.is_finite() {
        return "-".to_string();
    }
    let (v, suffix) = if x.abs() >= 1e6 {
        (x / 1e6, "M")
    } else if x.abs() >= 1e4 {
        (x / 1e3, "k")
    } else {
        (x, "")
    };
    let digits = if v.abs() >= 100.0 {
        0
    } else if v.abs() >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.digits$}{suffix}")
}

fn spread(r: &Option<RatioSpread>) -> String {
    match r {
        Some(r) if (r.max - r.min) < 0.005 => format!("{:.2}", r.median),
        Some(r) => format!("{:.2} ({:.2}-{:.2})", r.median, r.min, r.max),
        None => "-".to_string(),
    }
}

/// Every server name in the report, in order of first appearance
/// (fileserver first).
pub fn server_names(report: &Report) -> Vec<String> {
    names_in(&report.scenarios)
}

/// Every server name in `scenarios`, in order of first appearance.
fn names_in<'a>(scenarios: impl IntoIterator<Item = &'a ScenarioReport>) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for s in scenarios.into_iter().flat_map(|s| &s.servers) {
        if !names.contains(&s.name) {
            names.push(s.name.clone());
        }
    }
    names
}

/// The report's scenarios of `group`.
pub fn in_group(report: &Report, group: Group) -> impl Iterator<Item = &ScenarioReport> {
    report.scenarios.iter().filter(move |s| s.group == group)
}

fn has_group(report: &Report, group: Group) -> bool {
    in_group(report, group).next().is_some()
}

/// Who ran against whom, for titles: `fileserver vs nginx, h2o` for the
/// daemon-vs-peers scenarios, `servedir vs tower-http, fileserver
/// (embedded)` for the embedded group, `; ` between.
pub fn title(report: &Report) -> String {
    let mut parts = Vec::new();
    if has_group(report, Group::Peers) || report.scenarios.is_empty() {
        let peers = &report.settings.peers;
        parts.push(if peers.is_empty() {
            "fileserver vs no peer".to_string()
        } else {
            format!("fileserver vs {}", peers.join(", "))
        });
    }
    for (group, _, _) in GROUP_SECTIONS {
        let names = names_in(in_group(report, group));
        if let Some((subject, others)) = names.split_first() {
            parts.push(format!("{subject} vs {} ({group})", others.join(", ")));
        }
    }
    parts.join("; ")
}

fn headline_label(h: Headline) -> &'static str {
    match h {
        Headline::ReqPerS => "req/s (higher is better)",
        Headline::P99 => "p99 ms (lower is better)",
    }
}

/// Whether any daemon-vs-peers scenario ran the ceiling server.
fn has_ceiling(report: &Report) -> bool {
    in_group(report, Group::Peers).any(|s| s.server(CEILING).is_some())
}

/// The headline table: per scenario, fileserver against the best peer
/// (the daemon-vs-peers scenarios; the `embedded` group has [`group_table`]).
pub fn headline_table(report: &Report) -> String {
    let ceiling = has_ceiling(report);
    let mut out = String::from(
        "| scenario | judged by | fileserver | best peer | best peer's | fileserver / best peer |",
    );
    out.push_str(if ceiling {
        " fileserver / ceiling | best peer / ceiling |"
    } else {
        ""
    });
    out.push_str(" CPU µs/req | lowest-CPU peer's | fileserver / it |\n|");
    out.push_str(&"---|".repeat(if ceiling { 11 } else { 9 }));
    out.push('\n');
    for s in in_group(report, Group::Peers) {
        let fs = s.fileserver();
        let figure = |x: &ServerSummary| match s.headline {
            Headline::ReqPerS => x.req_per_s,
            Headline::P99 => x.p99_ms,
        };
        let (peer, value, ratio) = match s.headline_best() {
            Some(b) => (
                b.peer.as_str(),
                human(b.value),
                format!("**{}**", spread(&b.ratio)),
            ),
            None => ("-", "-".to_string(), "-".to_string()),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |",
            s.name,
            headline_label(s.headline),
            fs.map_or("-".to_string(), |f| human(figure(f))),
            peer,
            value,
            ratio,
        ));
        if ceiling {
            // Shares of what the load generator can drive: req/s only (the
            // ceiling's latency is no bound on a file server's).
            let share = |x: Option<&ServerSummary>| match (x, s.server(CEILING)) {
                (Some(x), Some(c)) if s.headline == Headline::ReqPerS && c.req_per_s > 0.0 => {
                    format!("{:.2}", x.req_per_s / c.req_per_s)
                }
                _ => "-".to_string(),
            };
            let best = s.headline_best().and_then(|b| s.server(&b.peer));
            out.push_str(&format!(" {} | {} |", share(fs), share(best)));
        }
        // The server's own cost, which the load generator's ceiling does
        // not hide: against the peer that spends the least.
        let cpu = |x: &ServerSummary| x.cpu_us_per_req;
        let lowest = s
            .servers
            .iter()
            .skip(1)
            .filter(|x| x.name != CEILING && x.name != BASELINE && cpu(x) > 0.0)
            .min_by(|a, b| cpu(a).total_cmp(&cpu(b)));
        match (fs.map(cpu).filter(|c| c.is_finite()), lowest) {
            (Some(mine), Some(peer)) => out.push_str(&format!(
                " {} | {} {} | **{:.2}** |",
                human(mine),
                peer.name,
                human(cpu(peer)),
                mine / cpu(peer)
            )),
            (Some(mine), None) => out.push_str(&format!(" {} | - | - |", human(mine))),
            _ => out.push_str(" - | - | - |"),
        }
        out.push('\n');
    }
    out
}

/// One figure of every server per scenario: fileserver's value, each peer's
/// value with fileserver / that peer in parentheses (when `ratio` gives one),
/// every value written with `fmt` (the daemon-vs-peers scenarios).
pub fn metric_table(
    report: &Report,
    figure: fn(&ServerSummary) -> f64,
    ratio: Option<fn(&Ratios) -> Option<f64>>,
    fmt: fn(f64) -> String,
) -> String {
    let names = names_in(in_group(report, Group::Peers));
    let mut out = format!("| scenario | {} |\n|---|", names.join(" | "));
    out.push_str(&"---|".repeat(names.len()));
    out.push('\n');
    for s in in_group(report, Group::Peers) {
        out.push_str(&format!("| {} |", s.name));
        for name in &names {
            let cell = match s.server(name) {
                None => "-".to_string(),
                Some(x) => {
                    let r = ratio
                        .zip(s.ratios_to(name))
                        .and_then(|(f, r)| f(r))
                        .map(|r| format!(" ({r:.2})"))
                        .unwrap_or_default();
                    format!("{}{r}", fmt(figure(x)))
                }
            };
            out.push_str(&format!(" {cell} |"));
        }
        out.push('\n');
    }
    out
}

fn median_of(r: &Option<RatioSpread>) -> Option<f64> {
    r.map(|r| r.median)
}

/// One row kind of a [`group_table`].
#[derive(Debug, Clone, Copy)]
pub struct Figure {
    /// What the row shows, with its unit.
    pub label: &'static str,
    /// A server's value.
    pub value: fn(&ServerSummary) -> f64,
    /// How a value is written.
    pub fmt: fn(f64) -> String,
    /// `servers[0]` / another server, written (`None`: no ratio column value).
    pub ratio: Option<fn(&Ratios) -> String>,
    /// The group's headline figure: its ratio to the baseline is in bold.
    pub headline: bool,
}

fn plain_ratio(r: Option<f64>) -> String {
    r.map_or("-".to_string(), |r| format!("{r:.2}"))
}

/// req/s, p99 and CPU per request: the console's figures.
pub const CONSOLE_FIGURES: [Figure; 3] = [
    Figure {
        label: "req/s",
        value: |s| s.req_per_s,
        fmt: human,
        ratio: Some(|r| spread(&r.req_per_s)),
        headline: true,
    },
    Figure {
        label: "p99 ms",
        value: |s| s.p99_ms,
        fmt: human,
        ratio: Some(|r| spread(&r.p99)),
        headline: false,
    },
    Figure {
        label: "CPU µs/req",
        value: |s| s.cpu_us_per_req,
        fmt: human,
        ratio: Some(|r| plain_ratio(r.cpu_per_req)),
        headline: false,
    },
];

/// Every figure `latest.md` shows.
pub const ALL_FIGURES: [Figure; 9] = [
    CONSOLE_FIGURES[0],
    Figure {
        label: "MB/s",
        value: |s| s.mb_per_s,
        fmt: human,
        ratio: Some(|r| spread(&r.mb_per_s)),
        headline: false,
    },
    Figure {
        label: "p50 ms",
        value: |s| s.p50_ms,
        fmt: human,
        ratio: Some(|r| spread(&r.p50)),
        headline: false,
    },
    CONSOLE_FIGURES[1],
    Figure {
        label: "max ms",
        value: |s| s.max_ms,
        fmt: human,
        ratio: None,
        headline: false,
    },
    Figure {
        label: "peak RSS MiB",
        value: |s| s.peak_rss_mib,
        fmt: human,
        ratio: Some(|r| plain_ratio(r.peak_rss)),
        headline: false,
    },
    CONSOLE_FIGURES[2],
    Figure {
        label: "sys µs/req",
        value: |s| s.sys_us_per_req,
        fmt: human,
        ratio: Some(|r| plain_ratio(r.sys_per_req)),
        headline: false,
    },
    Figure {
        label: "errors",
        value: |s| s.errors as f64,
        fmt: |x| format!("{x:.0}"),
        ratio: None,
        headline: false,
    },
];

/// The table of one group's scenarios: a row per scenario and figure, a
/// column per server (the group's subject first), then the subject / each
/// other server (paired by round, median and min-max, for req/s, MB/s and
/// latency; the ratio of the figures for RSS and CPU). Empty when no
/// scenario of `group` ran.
pub fn group_table(report: &Report, group: Group, figures: &[Figure]) -> String {
    let names = names_in(in_group(report, group));
    let Some((subject, others)) = names.split_first() else {
        return String::new();
    };
    let mut out = format!("| scenario | figure | {} |", names.join(" | "));
    for other in others {
        out.push_str(&format!(" {subject} / {other} |"));
    }
    out.push_str("\n|---|---|");
    out.push_str(&"---|".repeat(names.len() + others.len()));
    out.push('\n');
    for s in in_group(report, group) {
        for f in figures {
            out.push_str(&format!("| {} | {} |", s.name, f.label));
            for name in &names {
                let cell = s
                    .server(name)
                    .map_or("-".to_string(), |x| (f.fmt)((f.value)(x)));
                out.push_str(&format!(" {cell} |"));
            }
            for other in others {
                let cell = match (f.ratio, s.ratios_to(other)) {
                    (Some(ratio), Some(r)) if s.servers[0].name == *subject => {
                        let text = ratio(r);
                        if f.headline && group.baseline() == Some(other.as_str()) && text != "-" {
                            format!("**{text}**")
                        } else {
                            text
                        }
                    }
                    _ => "-".to_string(),
                };
                out.push_str(&format!(" {cell} |"));
            }
            out.push('\n');
        }
    }
    out
}

/// What the embedded group compares, for the console and `latest.md`.
const EMBEDDED_INTRO: &str = "servedir: an axum app with `servedir::ServeDir` (this project's \
    tower Service over filemanager); tower-http: the same app with tower-http's `ServeDir`; both \
    on a tokio multi-thread runtime with the run's worker count as worker threads, the service \
    at `/`, HTTP/1.1. fileserver: the daemon, as in the other scenarios. The last columns are \
    servedir / that server; the headline is servedir / tower-http on req/s.";

/// What the tls group compares.
const TLS_INTRO: &str = "fileserver: the daemon's TLS listener (`--tls-listen`); nginx, \
    lighttpd, h2o and Caddy with TLS 1.2 and 1.3 and ALPN h2 and http/1.1; all with the same ECDSA P-256 \
    certificate made for the run. `_h1`: wrk over HTTPS; `_h2`: h2load (no percentiles: p99 \
    comes from oha --http2 at a fixed rate); `tls_handshakes`: bursts of fresh h2load clients, one \
    request per connection, so req/s is full handshakes per second (no latency run). The last \
    columns are fileserver / that server; the headline is fileserver / nginx on req/s.";

/// What the compression group compares.
const COMPRESSION_INTRO: &str = "Text files requested with `Accept-Encoding: gzip, deflate, br, \
    zstd` over plaintext HTTP/1.1. fileserver: the daemon with `[compression] enabled = true` \
    (compressed once per file, at its default levels); nginx: `gzip on` at its default level for \
    JS, CSS and JSON; lighttpd: mod_deflate at its defaults; h2o: `compress: ON`; Caddy: `encode zstd gzip`. kB/resp \
    is bytes on the wire per response, headers included (wrk). The last columns are fileserver / \
    that server; the headline is fileserver / nginx on req/s.";

/// What the HTTP/3 group compares.
const HTTP3_INTRO: &str = "HTTP/3 over QUIC, load from h3load (`src/bin/h3load.rs`: quinn and \
    h3 on one thread, in h2load's shape: 16 connections, 10 streams each in `h3_small` as in \
    `tls_small_h2`, one in `h3_large`; h2load here has no QUIC, and oha's HTTP/3 client stalls \
    against Caddy). fileserver: the daemon with `[http3] enabled = true`; Caddy: its default \
    HTTP/3 (`protocols h1 h2 h3`). Debian's nginx, lighttpd and h2o are built without HTTP/3. \
    p50 and p99 are h3load's under its full load (no fixed-rate run); kB/resp is body bytes per \
    response, checked to be the file's size for every server. `ceiling` (unless `--no-ceiling`) \
    is quinn with nothing above it (`src/bin/ceiling-server/quic.rs`): each request's HEADERS \
    read, a HEADERS and a DATA frame made once per file written back; its CPU per request is \
    the floor of any HTTP/3 server on quinn. The last columns are fileserver / Caddy and \
    fileserver / ceiling.";

/// What the arena group compares.
const ARENA_INTRO: &str = "HttpArena's static profile (github.com/MDA2AV/HttpArena, MIT): its 20 \
    front-end files (CSS, JS, HTML, SVG, JSON, WOFF2, WebP; 2.9-307 kB, generated with its names \
    and sizes, .br and .gz siblings of the 15 text files) requested in turn with \
    `Accept-Encoding: br;q=1, gzip;q=0.8`: wrk over HTTP/1.1 at 64, 1024 and 4096 connections, \
    h2load over HTTPS HTTP/2 at 256 connections x 32 streams. fileserver: `precompressed = true`; \
    nginx: `gzip_static` and `brotli_static`, sendfile and open_file_cache; h2o: \
    `file.send-compressed`; Caddy: `precompressed br gzip`; lighttpd, which cannot send a \
    sibling, compresses each file once into mod_deflate's cache. The scenario line says what each \
    server sent and flags one that did not send the siblings. kB/resp is bytes on the wire per \
    response, headers (and HTTP/2 framing) included, so no server wins by sending less unseen; \
    peak RSS is the highest during the scenario. The last columns are fileserver / that \
    server; the headline is fileserver / nginx on req/s.";

/// The groups with a table of their own, with its heading and what it compares.
const GROUP_SECTIONS: [(Group, &str, &str); 5] = [
    (
        Group::Embedded,
        "Embedded group: servedir against tower-http's ServeDir and the daemon",
        EMBEDDED_INTRO,
    ),
    (Group::Tls, "TLS group: HTTPS against nginx", TLS_INTRO),
    (
        Group::Compression,
        "Compression group: compressed text against nginx's gzip",
        COMPRESSION_INTRO,
    ),
    (
        Group::Http3,
        "HTTP/3 group: QUIC against Caddy",
        HTTP3_INTRO,
    ),
    (
        Group::Arena,
        "Arena group: HttpArena's static profile against nginx",
        ARENA_INTRO,
    ),
];

/// Bytes per response: on the console only for the compression, http3 and
/// arena groups.
const KB_PER_RESPONSE: Figure = Figure {
    label: "kB/resp",
    value: kb_per_response,
    fmt: human,
    ratio: Some(|r| plain_ratio(r.bytes_per_req)),
    headline: false,
};

/// Peak RSS, on the console only for the arena group.
const PEAK_RSS: Figure = ALL_FIGURES[5];

/// The figures a group's table shows: `figures`, and for the compression,
/// http3 and arena groups also bytes per response; for the arena group
/// peak RSS too, where the console leaves it out.
fn group_figures(group: Group, figures: &[Figure]) -> Vec<Figure> {
    let mut v = figures.to_vec();
    if matches!(group, Group::Compression | Group::Http3 | Group::Arena) {
        v.insert(1, KB_PER_RESPONSE);
    }
    if group == Group::Arena && !v.iter().any(|f| f.label == PEAK_RSS.label) {
        v.push(PEAK_RSS);
    }
    v
}

/// The tables the console shows: the headline, then req/s, p99 and CPU per
/// request of every server.
pub fn markdown_table(report: &Report) -> String {
    let mut out = String::new();
    for (group, _, intro) in GROUP_SECTIONS {
        if has_group(report, group) {
            out.push_str(&format!("\n{group} group: {intro}\n\n"));
            out.push_str(&group_table(
                report,
                group,
                &group_figures(group, &CONSOLE_FIGURES),
            ));
        }
    }
    if !has_group(report, Group::Peers) {
        return out.trim_start().to_string();
    }
    let embedded = out;
    let mut out = headline_table(report);
    out.push_str("\nreq/s (wrk, median over rounds; fileserver / that peer in parentheses)\n\n");
    out.push_str(&metric_table(
        report,
        |s| s.req_per_s,
        Some(|r| median_of(&r.req_per_s)),
        human,
    ));
    out.push_str("\np99 ms (latency runs; fileserver / that peer in parentheses)\n\n");
    out.push_str(&metric_table(
        report,
        |s| s.p99_ms,
        Some(|r| median_of(&r.p99)),
        human,
    ));
    out.push_str("\nCPU µs per request (wrk runs; fileserver / that peer in parentheses)\n\n");
    out.push_str(&metric_table(
        report,
        |s| s.cpu_us_per_req,
        Some(|r| r.cpu_per_req),
        human,
    ));
    out.push_str(&embedded);
    out
}

/// The whole markdown document (`latest.md`).
pub fn markdown(report: &Report) -> String {
    let s = &report.settings;
    let mut out = format!(
        "# HTTP load harness: {}\n\n\
         Run {} on {} CPUs (kernel {}). {} rounds per scenario, {} s per run, {} connections, \
         wrk -t{}, {} workers per server. Latency: {} at {:.0}% of the slowest server's wrk req/s.\n\n",
        title(report),
        report.generated_utc,
        s.cpus,
        s.kernel,
        s.rounds,
        s.duration_s,
        s.connections,
        s.wrk_threads,
        s.workers,
        s.latency_tool,
        s.latency_load * 100.0,
    );
    if has_group(report, Group::Peers) {
        peers_markdown(report, &mut out);
    }
    let mut first = !has_group(report, Group::Peers);
    for (group, heading, intro) in GROUP_SECTIONS {
        if !has_group(report, group) {
            continue;
        }
        if !first {
            out.push('\n');
        }
        first = false;
        out.push_str(&format!("## {heading}\n\n{intro}"));
        out.push_str(
            " Ratios of req/s, MB/s and latency are the median over rounds of the per-round ratio \
             (min-max in parentheses); of RSS, CPU and bytes, the ratio of the figures. Above 1 is \
             better for req/s and MB/s, below 1 for latency, RSS, CPU and bytes.\n\n",
        );
        out.push_str(&group_table(
            report,
            group,
            &group_figures(group, &ALL_FIGURES),
        ));
    }
    out.push_str("\n## Scenarios\n\n| scenario | what | latency rate req/s | left out |\n|---|---|---|---|\n");
    for sc in &report.scenarios {
        let left: Vec<String> = sc
            .left_out
            .iter()
            .map(|(name, why)| format!("{name}: {}", why.lines().next().unwrap_or_default()))
            .collect();
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            sc.name,
            sc.description,
            if sc.latency_rate > 0.0 {
                human(sc.latency_rate)
            } else if sc.servers.iter().all(|x| x.p99_ms.is_nan()) {
                // tls_handshakes has no latency run.
                "-".to_string()
            } else {
                "- (wrk)".to_string()
            },
            if left.is_empty() {
                "-".to_string()
            } else {
                left.join("; ")
            }
        ));
    }
    if !s.skipped.is_empty() {
        out.push_str("\nSkipped: ");
        let skipped: Vec<String> = s
            .skipped
            .iter()
            .map(|(k, v)| format!("{k} ({v})"))
            .collect();
        out.push_str(&skipped.join("; "));
        out.push('\n');
    }
    out.push_str("\nVersions: ");
    let versions: Vec<String> = s.versions.iter().map(|(k, v)| format!("{k} {v}")).collect();
    out.push_str(&versions.join("; "));
    out.push('\n');
    out
}

/// The daemon-vs-peers part of `latest.md`: the headline and a table per figure.
fn peers_markdown(report: &Report, out: &mut String) {
    out.push_str("## Headline: fileserver against the best peer\n\n");
    out.push_str(&headline_table(report));
    out.push_str(
        "\nRatios are fileserver / peer: the median over rounds of the per-round ratio (min-max in \
         parentheses). Above 1 is better for req/s and MB/s, below 1 is better for latency, RSS \
         and CPU.\n\nCPU µs/req is the server's own CPU time (user + system) over the requests \
         wrk completed against it: what a request costs the server, which the load \
         generator's ceiling does not hide. It is set against the peer that spends the least, \
         whichever is fastest.\n",
    );
    if has_ceiling(report) {
        out.push_str(
            "\n`ceiling` is no peer: a reference server that answers from memory with one recv \
             and one send per request and does nothing else (`benches/src/bin/ceiling-server/main.rs`). \
             Its req/s is what the load generator can drive on this machine; a server's req/s over \
             it (the ratio of the medians) is the share of that capacity it reaches, and no server \
             should pass 1 beyond the run-to-run spread.\n",
        );
    }
    type Table = (
        &'static str,
        fn(&ServerSummary) -> f64,
        Option<fn(&Ratios) -> Option<f64>>,
        fn(f64) -> String,
    );
    let tables: [Table; 9] = [
        (
            "req/s (wrk, median over rounds)",
            |s| s.req_per_s,
            Some(|r| median_of(&r.req_per_s)),
            human,
        ),
        (
            "MB/s (wrk, headers included)",
            |s| s.mb_per_s,
            Some(|r| median_of(&r.mb_per_s)),
            human,
        ),
        (
            "p50 ms (latency runs, median over rounds)",
            |s| s.p50_ms,
            Some(|r| median_of(&r.p50)),
            human,
        ),
        (
            "p99 ms (latency runs, median over rounds)",
            |s| s.p99_ms,
            Some(|r| median_of(&r.p99)),
            human,
        ),
        (
            "max ms (slowest request of all latency runs)",
            |s| s.max_ms,
            None,
            human,
        ),
        (
            "peak RSS MiB (all of a server's processes summed)",
            |s| s.peak_rss_mib,
            Some(|r| r.peak_rss),
            human,
        ),
        (
            "CPU µs per request (wrk runs)",
            |s| s.cpu_us_per_req,
            Some(|r| r.cpu_per_req),
            human,
        ),
        (
            "system CPU µs per request (wrk runs; the kernel's part of the row above)",
            |s| s.sys_us_per_req,
            Some(|r| r.sys_per_req),
            human,
        ),
        (
            "errors (all timed runs)",
            |s| s.errors as f64,
            None,
            |x| format!("{x:.0}"),
        ),
    ];
    for (title, figure, ratio, fmt) in tables {
        out.push_str(&format!(
            "\n### {title}\n\nfileserver / that peer in parentheses.\n\n"
        ));
        out.push_str(&metric_table(report, figure, ratio, fmt));
    }
}

/// Writes `latest.json`, `latest.md` and `latest.png` into `dir`.
pub fn write_all(report: &Report, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(
        dir.join("latest.json"),
        serde_json::to_string_pretty(report)? + "\n",
    )?;
    std::fs::write(dir.join("latest.md"), markdown(report))?;
    chart::draw(report, &dir.join("latest.png")).context("draw latest.png")?;
    Ok(())
}

/// The PNG chart.
pub mod chart {
    use std::path::Path;

    use anyhow::{anyhow, Result};
    use plotters::coord::ranged1d::{Ranged, ValueFormatter};
    use plotters::coord::types::RangedCoordf64;
    use plotters::coord::Shift;
    use plotters::prelude::*;
    use plotters::style::text_anchor::{HPos, Pos, VPos};

    use super::{human, server_names, Best, Group, Report, ServerSummary};

    /// fileserver's colour, then one per peer (matplotlib's tab10 order).
    const PALETTE: [RGBColor; 8] = [
        RGBColor(0x1f, 0x77, 0xb4),
        RGBColor(0x2c, 0xa0, 0x2c),
        RGBColor(0x94, 0x67, 0xbd),
        RGBColor(0x8c, 0x56, 0x4b),
        RGBColor(0xe3, 0x77, 0xc2),
        RGBColor(0x7f, 0x7f, 0x7f),
        RGBColor(0xbc, 0xbd, 0x22),
        RGBColor(0x17, 0xbe, 0xcf),
    ];
    const RATIO_COLOR: RGBColor = RGBColor(0xd6, 0x27, 0x28);
    const LATENCY_RATIO_COLOR: RGBColor = RGBColor(0xff, 0x7f, 0x0e);
    /// Share of a scenario's slot the bars fill.
    const GROUP_WIDTH: f64 = 0.8;
    /// Pixels per bar at least, so a value label fits over it.
    const MIN_BAR_PX: u32 = 56;
    /// Width of the legend's slot right of the last scenario, in scenarios.
    const LEGEND_SLOT: f64 = 1.0;

    type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;
    type XAxis = RangedCoordf64;

    /// One bar series: legend name, colour, and per scenario a value with its label.
    type Series = (String, RGBColor, Vec<Option<(f64, String)>>);

    fn e<E: std::fmt::Debug>(err: E) -> anyhow::Error {
        anyhow!("{err:?}")
    }

    /// Labels 1, 2 and 5 times a power of ten; the log axis puts a tick on
    /// every digit, and all of them labelled overlap.
    fn sparse_log_label(y: f64) -> String {
        let decade = 10f64.powf(y.log10().floor());
        let digit = (y / decade).round();
        if (y / decade - digit).abs() < 1e-6 && [1.0, 2.0, 5.0].contains(&digit) {
            format!("{y}")
        } else {
            String::new()
        }
    }

    /// One x position per scenario at 0, 1, 2, ..., and one empty slot on
    /// the right where the legend sits without covering a bar.
    fn x_axis(n: usize) -> XAxis {
        (-0.5..(n as f64 + LEGEND_SLOT - 0.5)).into()
    }

    /// Bar series side by side per scenario, with a label on each bar.
    fn draw_bars<'a, 'b: 'a, Y>(
        chart: &mut ChartContext<'a, BitMapBackend<'b>, Cartesian2d<XAxis, Y>>,
        series: Vec<Series>,
        floor: f64,
        font_size: u32,
    ) -> Result<()>
    where
        Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
    {
        let k_all = series.len().max(1);
        let slot = GROUP_WIDTH / k_all as f64;
        let width = slot * 0.9;
        for (k, (name, color, values)) in series.into_iter().enumerate() {
            let offset = -GROUP_WIDTH / 2.0 + k as f64 * slot;
            let elements: Vec<_> = values
                .iter()
                .enumerate()
                .filter_map(|(i, v)| {
                    v.as_ref()
                        .filter(|(v, _)| v.is_finite())
                        .map(|(v, l)| (i, *v, l.clone()))
                })
                .flat_map(|(i, v, label)| {
                    let x0 = i as f64 + offset;
                    // Bars grow from `floor` (0, the axis bottom, or the 1.0 line
                    // of a ratio) up or down to the value; the label sits on the end.
                    let (low, high) = if v >= floor { (floor, v) } else { (v, floor) };
                    let anchor = if v >= floor { VPos::Bottom } else { VPos::Top };
                    let style = ("sans-serif", font_size)
                        .into_font()
                        .into_text_style(chart.plotting_area())
                        .pos(Pos::new(HPos::Left, anchor));
                    [
                        Rectangle::new([(x0, low), (x0 + width, high)], color.filled()).into_dyn(),
                        Text::new(label, (x0, v), style).into_dyn(),
                    ]
                })
                .collect();
            chart
                .draw_series(elements)
                .map_err(e)?
                .label(name)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 7), (x + 16, y + 7)], color.filled())
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .label_font(("sans-serif", 18))
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(e)
    }

    fn builder<'a, 'b>(
        area: &'a Area<'b>,
        caption: &str,
    ) -> ChartBuilder<'a, 'b, BitMapBackend<'b>> {
        let mut b = ChartBuilder::on(area);
        b.caption(caption, ("sans-serif", 24))
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(80);
        b
    }

    /// The chart's size for `report`: wide enough that every server's bar
    /// in every scenario has room for its label.
    pub fn size_for(report: &Report) -> (u32, u32) {
        let scenarios = report.scenarios.len().max(1) as u32 + LEGEND_SLOT as u32;
        let servers = server_names(report).len().max(2) as u32;
        let bars_px = (scenarios * servers * MIN_BAR_PX) as f64 / GROUP_WIDTH;
        (1400.max(bars_px as u32 + 160), 1500)
    }

    /// Draws three panels: fileserver against the best peer (req/s and p99
    /// ratios), req/s per server (log scale), and peak RSS per server.
    pub fn draw(report: &Report, path: &Path) -> Result<()> {
        draw_sized(report, path, size_for(report))
    }

    /// One series per server of `figure`, labelled with [`human`].
    fn per_server(report: &Report, figure: fn(&ServerSummary) -> f64) -> Vec<Series> {
        server_names(report)
            .into_iter()
            .enumerate()
            .map(|(k, name)| {
                let values = report
                    .scenarios
                    .iter()
                    .map(|s| s.server(&name).map(|x| (figure(x), human(figure(x)))))
                    .collect();
                (name, PALETTE[k % PALETTE.len()], values)
            })
            .collect()
    }

    /// [`draw`] at another size in pixels (the tests draw small: plotters
    /// fills pixel by pixel and is slow in debug builds).
    pub fn draw_sized(report: &Report, path: &Path, size: (u32, u32)) -> Result<()> {
        crate::plot_font::register().map_err(|e| anyhow!(e))?;
        let names: Vec<String> = report.scenarios.iter().map(|s| s.name.clone()).collect();
        let n = names.len().max(1);
        let servers = server_names(report).len().max(1);
        let font_size = if servers <= 2 { 17 } else { 14 };
        // Ticks land on "nice" values; only those on a scenario's index get its name.
        let label = |x: &f64| {
            let i = x.round();
            if (x - i).abs() > 1e-6 || i < 0.0 {
                return String::new();
            }
            names.get(i as usize).cloned().unwrap_or_default()
        };
        let root = BitMapBackend::new(path, size).into_drawing_area();
        root.fill(&WHITE).map_err(e)?;
        let (title, body) = root.split_vertically(60);
        let s = &report.settings;
        title
            .draw(&Text::new(
                format!(
                    "{}: {} rounds x {} s, {} connections, {} workers each, {} CPUs ({})",
                    super::title(report),
                    s.rounds,
                    s.duration_s,
                    s.connections,
                    s.workers,
                    s.cpus,
                    report.generated_utc
                ),
                (20, 18),
                ("sans-serif", 26).into_font(),
            ))
            .map_err(e)?;
        let panels = body.split_evenly((3, 1));

        // Panel 1: fileserver / best peer on req/s and on p99 (an embedded
        // scenario: servedir / tower-http), against a line at 1.0; each bar
        // names the server it is compared with.
        let vs_best =
            |best: fn(&super::ScenarioReport) -> Option<&Best>| -> Vec<Option<(f64, String)>> {
                report
                    .scenarios
                    .iter()
                    .map(|s| {
                        let b = best(s)?;
                        let r = b.ratio?.median;
                        Some((r, format!("{r:.2} {}", b.peer)))
                    })
                    .collect()
            };
        let req = vs_best(super::ScenarioReport::req_per_s_vs);
        let p99 = vs_best(super::ScenarioReport::p99_vs);
        // Log scale, bars from the 1.0 line: 2x better and 2x worse look alike.
        let ratios = || {
            req.iter()
                .chain(&p99)
                .flatten()
                .map(|(v, _)| *v)
                .filter(|v| v.is_finite() && *v > 0.0)
        };
        let top = ratios().fold(1.25f64, f64::max) * 1.4;
        let bottom = ratios().fold(0.8f64, f64::min) / 1.4;
        // The groups with a baseline, named where their bars are not
        // against the best peer.
        let with_baseline: Vec<Group> = super::GROUP_SECTIONS
            .iter()
            .map(|(g, _, _)| *g)
            .filter(|g| super::has_group(report, *g))
            .collect();
        let mut against = Vec::new();
        let mut also = Vec::new();
        for g in &with_baseline {
            let (subject, baseline) = (g.subject(), g.baseline().unwrap_or_default());
            against.push(format!("{g}: {subject} / {baseline}"));
            also.push(format!("{g}: {baseline}"));
        }
        let (caption_note, also) = if with_baseline.is_empty() {
            (String::new(), String::new())
        } else {
            (
                format!(" ({})", against.join("; ")),
                format!(" ({})", also.join("; ")),
            )
        };
        let caption = format!(
            "fileserver / best peer{caption_note}: req/s ratio (higher is better), p99 latency ratio (lower is better)"
        );
        let mut chart = builder(&panels[0], &caption)
            .build_cartesian_2d(x_axis(n), (bottom..top).log_scale())
            .map_err(e)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n + 2)
            .x_label_formatter(&label)
            .y_label_formatter(&|y| sparse_log_label(*y))
            .y_desc("fileserver / best peer (log scale)")
            .label_style(("sans-serif", 18))
            .axis_desc_style(("sans-serif", 18))
            .draw()
            .map_err(e)?;
        chart
            .draw_series(LineSeries::new(
                [(-0.5, 1.0), (n as f64 - 0.5, 1.0)],
                BLACK.stroke_width(2),
            ))
            .map_err(e)?;
        draw_bars(
            &mut chart,
            vec![
                (format!("req/s vs the fastest peer{also}"), RATIO_COLOR, req),
                (
                    format!("p99 vs the lowest-p99 peer{also}"),
                    LATENCY_RATIO_COLOR,
                    p99,
                ),
            ],
            1.0,
            font_size,
        )?;

        // Panel 2: req/s of each server, log scale (1 MiB and 1 KiB rates differ 50x).
        let req_series = per_server(report, |s| s.req_per_s);
        let finite = || {
            req_series
                .iter()
                .flat_map(|(_, _, v)| v)
                .flatten()
                .map(|(v, _)| *v)
                .filter(|v| v.is_finite() && *v > 0.0)
        };
        let hi = finite().fold(10.0f64, f64::max) * 4.0;
        let lo = finite().fold(hi, f64::min) / 3.0;
        let mut chart = builder(
            &panels[1],
            "throughput (wrk; h2load for HTTP/2 and handshakes), req/s (log scale)",
        )
        .build_cartesian_2d(x_axis(n), (lo..hi).log_scale())
        .map_err(e)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n + 2)
            .x_label_formatter(&label)
            .y_label_formatter(&|y| human(*y))
            .y_desc("req/s")
            .label_style(("sans-serif", 18))
            .axis_desc_style(("sans-serif", 18))
            .draw()
            .map_err(e)?;
        draw_bars(&mut chart, req_series, lo, font_size)?;

        // Panel 3: peak RSS of each server.
        let rss_series = per_server(report, |s| s.peak_rss_mib);
        let hi = rss_series
            .iter()
            .flat_map(|(_, _, v)| v)
            .flatten()
            .map(|(v, _)| *v)
            .filter(|v| v.is_finite())
            .fold(1.0f64, f64::max)
            * 1.25;
        let mut chart = builder(
            &panels[2],
            "peak RSS during the scenario, MiB (all of a server's processes summed)",
        )
        .build_cartesian_2d(x_axis(n), 0.0..hi)
        .map_err(e)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n + 2)
            .x_label_formatter(&label)
            .y_desc("MiB")
            .label_style(("sans-serif", 18))
            .axis_desc_style(("sans-serif", 18))
            .draw()
            .map_err(e)?;
        draw_bars(&mut chart, rss_series, 0.0, font_size)?;
        root.present().map_err(e)?;
        Ok(())
    }
}

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_timestamp(secs: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
    humantime::format_rfc3339_seconds(t).to_string()
}

/// The scenario's headline for a name that may not parse (old reports).
pub fn headline_of(name: &str) -> Headline {
    name.parse::<Scenario>()
        .map_or(Headline::ReqPerS, Scenario::headline)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `total` CPU seconds, a quarter of them in user space.
    fn cpu(total: f64) -> Cpu {
        Cpu {
            total_s: total,
            system_s: total * 0.75,
        }
    }

    fn run(req: f64, p99: f64) -> RunResult {
        RunResult {
            req_per_s: req,
            mb_per_s: req / 1000.0,
            p50_ms: p99 / 4.0,
            p99_ms: p99,
            max_ms: p99 * 2.0,
            requests: (req * 3.0) as u64,
            errors: 0,
        }
    }

    pub(super) fn sample_report() -> Report {
        let fs = summarize(
            "fileserver",
            vec![run(41_000.0, 0.0), run(39_000.0, 0.0), run(40_000.0, 0.0)],
            vec![run(0.0, 2.0), run(0.0, 3.0), run(0.0, 2.5)],
            20 << 20,
            6.0,
            Some(cpu(3.0)),
        );
        let nginx = summarize(
            "nginx",
            vec![run(40_000.0, 0.0), run(40_000.0, 0.0), run(38_000.0, 0.0)],
            vec![run(0.0, 2.0), run(0.0, 2.0), run(0.0, 2.0)],
            10 << 20,
            6.5,
            Some(cpu(3.5)),
        );
        // Faster than nginx, slower at the tail: the best peer on req/s is
        // lighttpd, on p99 nginx.
        let lighttpd = summarize(
            "lighttpd",
            vec![run(50_000.0, 0.0), run(40_000.0, 0.0), run(45_000.0, 0.0)],
            vec![run(0.0, 4.0), run(0.0, 5.0), run(0.0, 6.0)],
            5 << 20,
            6.0,
            Some(cpu(2.0)),
        );
        Report {
            generated_utc: utc_timestamp(1_796_000_000),
            settings: Settings {
                rounds: 3,
                duration_s: 3,
                connections: 64,
                wrk_threads: 1,
                workers: 2,
                latency_tool: "oha 1.16.0".into(),
                latency_load: 0.5,
                cpus: 2,
                kernel: "6.1".into(),
                versions: vec![("nginx".into(), "1.22.1".into())],
                peers: vec!["nginx".into(), "lighttpd".into()],
                skipped: vec![("static-web-server".into(), "not found".into())],
            },
            scenarios: vec![ScenarioReport::new(
                "small_random",
                "1 KiB files",
                19_000.0,
                Headline::ReqPerS,
                vec![fs, nginx, lighttpd],
                Vec::new(),
            )],
        }
    }

    #[test]
    fn summary_takes_medians_and_pairs_rounds_for_ratios() {
        let r = sample_report();
        let s = &r.scenarios[0];
        let fs = s.fileserver().unwrap();
        assert_eq!(fs.name, "fileserver");
        assert_eq!(fs.req_per_s, 40_000.0);
        assert_eq!(fs.p99_ms, 2.5);
        assert_eq!(fs.max_ms, 6.0);
        assert_eq!(fs.peak_rss_mib, 20.0);
        // Per-round ratios 1.025, 0.975, 1.0526 -> median 1.025.
        let rr = s.ratios_to("nginx").unwrap().req_per_s.unwrap();
        assert!((rr.median - 1.025).abs() < 1e-9, "{rr:?}");
        assert!((rr.min - 0.975).abs() < 1e-9);
        assert!((s.ratios_to("nginx").unwrap().p99.unwrap().median - 1.25).abs() < 1e-9);
        assert_eq!(s.ratios_to("nginx").unwrap().peak_rss, Some(2.0));
        // 3 CPU s over 360k requests, 2.25 of them in the kernel.
        assert!((fs.cpu_us_per_req - 3.0e6 / 360_000.0).abs() < 1e-9);
        assert!((fs.sys_us_per_req - 2.25e6 / 360_000.0).abs() < 1e-9);
        // nginx: 3.5 s, 2.625 in the kernel, over 354k requests.
        let sys = s.ratios_to("nginx").unwrap().sys_per_req.unwrap();
        assert!(
            (sys - (2.25 / 360.0) / (2.625 / 354.0)).abs() < 1e-9,
            "{sys}"
        );
        // Without a CPU figure for the wrk runs there is no CPU per request.
        assert!(summarize("x", vec![run(1.0, 1.0)], vec![], 0, 1.0, None)
            .cpu_us_per_req
            .is_nan());
    }

    #[test]
    fn the_best_peer_is_chosen_per_figure() {
        let r = sample_report();
        let s = &r.scenarios[0];
        let best = s.best_req_per_s.as_ref().unwrap();
        assert_eq!(best.peer, "lighttpd");
        assert_eq!((best.fileserver, best.value), (40_000.0, 45_000.0));
        // Rounds: 41/50, 39/40, 40/45 -> median 0.8889.
        assert!((best.ratio.unwrap().median - 40.0 / 45.0).abs() < 1e-9);
        let p99 = s.best_p99.as_ref().unwrap();
        assert_eq!((p99.peer.as_str(), p99.value), ("nginx", 2.0));
        assert_eq!(s.headline_best().unwrap().peer, "lighttpd");
        // Judged by p99, the same figures name nginx.
        let mut cold = s.clone();
        cold.headline = Headline::P99;
        assert_eq!(cold.headline_best().unwrap().peer, "nginx");
        // fileserver alone has no best peer.
        let alone = ScenarioReport::new(
            "x",
            "x",
            0.0,
            Headline::ReqPerS,
            vec![s.servers[0].clone()],
            vec![],
        );
        assert!(alone.headline_best().is_none() && alone.ratios.is_empty());
    }

    #[test]
    fn the_ceiling_is_never_the_best_peer_and_gives_shares_of_itself() {
        let mut r = sample_report();
        let s = &mut r.scenarios[0];
        let ceiling = summarize(
            CEILING,
            vec![run(80_000.0, 0.0), run(80_000.0, 0.0), run(80_000.0, 0.0)],
            vec![run(0.0, 1.0), run(0.0, 1.0), run(0.0, 1.0)],
            1 << 20,
            1.0,
            Some(cpu(1.0)),
        );
        let mut servers = s.servers.clone();
        servers.push(ceiling);
        *s = ScenarioReport::new(
            "small_random",
            "1 KiB files",
            0.0,
            Headline::ReqPerS,
            servers,
            vec![],
        );
        // Fastest and lowest p99, yet the best peers stay lighttpd and nginx.
        assert_eq!(s.best_req_per_s.as_ref().unwrap().peer, "lighttpd");
        assert_eq!(s.best_p99.as_ref().unwrap().peer, "nginx");
        let table = headline_table(&r);
        assert!(
            table.contains("| fileserver / ceiling | best peer / ceiling |"),
            "{table}"
        );
        // 40k / 80k and lighttpd's 45k / 80k.
        assert!(
            table.contains("**0.89 (0.82-0.97)** | 0.50 | 0.56 |"),
            "{table}"
        );
        // Without a ceiling the headline keeps its six columns.
        let plain = headline_table(&sample_report());
        assert!(!plain.contains("ceiling"), "{plain}");
        // And every headline row ends with CPU per request against the
        // peer that spends the least (lighttpd here, not the req/s best).
        let sample = sample_report();
        let cpu = |name| sample.scenarios[0].server(name).unwrap().cpu_us_per_req;
        let (mine, lowest) = (cpu("fileserver"), cpu("lighttpd"));
        assert!(lowest < cpu("nginx"));
        let row = format!(
            "| {} | lighttpd {} | **{:.2}** |",
            human(mine),
            human(lowest),
            mine / lowest
        );
        assert!(plain.contains(&row), "{row} in {plain}");
        assert!(table.contains(&row), "{row} in {table}");
    }

    #[test]
    fn the_baseline_build_is_never_the_best_peer() {
        let mut r = sample_report();
        let s = &mut r.scenarios[0];
        let baseline = summarize(
            BASELINE,
            vec![run(90_000.0, 0.0), run(90_000.0, 0.0), run(90_000.0, 0.0)],
            vec![run(0.0, 0.5), run(0.0, 0.5), run(0.0, 0.5)],
            1 << 20,
            1.0,
            Some(cpu(1.0)),
        );
        let mut servers = s.servers.clone();
        servers.push(baseline);
        *s = ScenarioReport::new(
            "small_random",
            "1 KiB files",
            0.0,
            Headline::ReqPerS,
            servers,
            vec![],
        );
        // Fastest and lowest p99, yet the best peers stay lighttpd and nginx.
        assert_eq!(s.best_req_per_s.as_ref().unwrap().peer, "lighttpd");
        assert_eq!(s.best_p99.as_ref().unwrap().peer, "nginx");
    }

    #[test]
    fn tables_show_every_server_the_best_peer_and_ratios() {
        let table = markdown_table(&sample_report());
        let head = table.lines().nth(2).unwrap();
        assert!(
            head.starts_with(
                "| small_random | req/s (higher is better) | 40.0k | lighttpd | 45.0k | **0.89 (0.82-0.97)** |"
            ),
            "{head}"
        );
        assert!(
            table.contains("| scenario | fileserver | nginx | lighttpd |\n|---|---|---|---|\n"),
            "{table}"
        );
        assert!(
            table.contains("| small_random | 40.0k | 40.0k (1.02) | 45.0k (0.89) |"),
            "{table}"
        );
        assert!(
            table.contains("| small_random | 2.50 | 2.00 (1.25) | 5.00 (0.50) |"),
            "{table}"
        );
        let doc = markdown(&sample_report());
        assert!(
            doc.contains("2026-11-30T") && doc.contains("oha 1.16.0 at 50%"),
            "{doc}"
        );
        assert!(doc.contains("fileserver vs nginx, lighttpd"), "{doc}");
        assert!(
            doc.contains("| small_random | 6.00 | 4.00 | 12.0 |"),
            "{doc}"
        );
        assert!(
            doc.contains("Skipped: static-web-server (not found)"),
            "{doc}"
        );
        assert!(doc.contains("| small_random | 0 | 0 | 0 |"), "{doc}");
    }

    /// An embedded-group scenario: servedir, tower-http, fileserver.
    fn embedded_scenario() -> ScenarioReport {
        let servedir = summarize(
            "servedir",
            vec![run(30_000.0, 0.0), run(33_000.0, 0.0), run(36_000.0, 0.0)],
            vec![run(0.0, 2.0), run(0.0, 2.0), run(0.0, 2.0)],
            8 << 20,
            3.0,
            Some(cpu(1.0)),
        );
        let tower_http = summarize(
            "tower-http",
            vec![run(10_000.0, 0.0), run(10_000.0, 0.0), run(10_000.0, 0.0)],
            vec![run(0.0, 4.0), run(0.0, 4.0), run(0.0, 4.0)],
            6 << 20,
            3.0,
            Some(cpu(2.0)),
        );
        let fileserver = summarize(
            "fileserver",
            vec![run(40_000.0, 0.0), run(40_000.0, 0.0), run(40_000.0, 0.0)],
            vec![run(0.0, 1.0), run(0.0, 1.0), run(0.0, 1.0)],
            10 << 20,
            3.0,
            Some(cpu(0.5)),
        );
        ScenarioReport::new(
            "embedded_small",
            "embedded: 1 KiB files",
            5_000.0,
            Headline::ReqPerS,
            vec![servedir, tower_http, fileserver],
            Vec::new(),
        )
        .in_group(Group::Embedded)
    }

    #[test]
    fn the_embedded_group_is_judged_against_tower_http_in_its_own_table() {
        let s = embedded_scenario();
        // fileserver is faster, but the headline compares with the baseline.
        assert_eq!(s.best_req_per_s.as_ref().unwrap().peer, "fileserver");
        let head = s.headline_best().unwrap();
        assert_eq!(head.peer, "tower-http");
        assert!((head.ratio.unwrap().median - 3.3).abs() < 1e-9, "{head:?}");
        assert_eq!(s.p99_vs().unwrap().peer, "tower-http");

        let mut r = sample_report();
        r.scenarios.push(s.clone());
        let table = markdown_table(&r);
        // The daemon-vs-peers tables leave the embedded scenario out...
        assert!(
            !table.contains("| embedded_small | req/s (higher"),
            "{table}"
        );
        assert!(
            table.contains("| scenario | fileserver | nginx | lighttpd |\n"),
            "{table}"
        );
        // ...which has its own table: servedir / tower-http, servedir / fileserver.
        assert!(
            table.contains(
                "| scenario | figure | servedir | tower-http | fileserver | \
                 servedir / tower-http | servedir / fileserver |\n"
            ),
            "{table}"
        );
        assert!(
            table.contains(
                "| embedded_small | req/s | 33.0k | 10.0k | 40.0k | **3.30 (3.00-3.60)** | 0.82 (0.75-0.90) |"
            ),
            "{table}"
        );
        assert!(
            table.contains("| embedded_small | p99 ms | 2.00 | 4.00 | 1.00 | 0.50 | 2.00 |"),
            "{table}"
        );
        // 1 CPU s over 297k requests against 2 s over 90k and 0.5 s over 360k.
        assert!(
            table.contains("| embedded_small | CPU µs/req | 3.37 | 22.2 | 1.39 | 0.15 | 2.42 |"),
            "{table}"
        );
        let doc = markdown(&r);
        assert!(doc.contains("## Embedded group"), "{doc}");
        assert!(doc.contains("| embedded_small | peak RSS MiB | 8.00 | 6.00 | 10.0 |"));
        assert!(doc.contains(
            "# HTTP load harness: fileserver vs nginx, lighttpd; servedir vs tower-http, fileserver (embedded)"
        ));

        // A run of the embedded group alone has only its table.
        let mut alone = sample_report();
        alone.scenarios = vec![s];
        let table = markdown_table(&alone);
        assert!(table.starts_with("embedded group: "), "{table}");
        assert!(!table.contains("best peer"), "{table}");
        let back = parse_json(&serde_json::to_string(&alone).unwrap()).unwrap();
        assert_eq!(back.scenarios[0].group, Group::Embedded);
        assert_eq!(
            back.scenarios[0].headline_best().unwrap().peer,
            "tower-http"
        );
        let path =
            std::env::temp_dir().join(format!("loadtest-chart-emb-{}.png", std::process::id()));
        chart::draw_sized(&r, &path, (700, 750)).unwrap();
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn the_compression_group_is_judged_against_nginx_with_bytes_per_response() {
        // fileserver: 3 x 2000 req/s at 40 MB/s (20 kB a response); nginx:
        // 1000 req/s at 30 MB/s (30 kB).
        let with_mb = |req: f64, mb: f64| RunResult {
            mb_per_s: mb,
            ..run(req, 0.0)
        };
        let fileserver = summarize(
            "fileserver",
            vec![with_mb(2000.0, 40.0); 3],
            vec![run(0.0, 2.0); 3],
            8 << 20,
            1.0,
            Some(cpu(1.0)),
        );
        let nginx = summarize(
            "nginx",
            vec![with_mb(1000.0, 30.0); 3],
            vec![run(0.0, 3.0); 3],
            8 << 20,
            2.0,
            Some(cpu(2.0)),
        );
        let s = ScenarioReport::new(
            "compressed_text",
            "text",
            500.0,
            Headline::ReqPerS,
            vec![fileserver, nginx],
            Vec::new(),
        )
        .in_group(Group::Compression);
        assert_eq!(s.headline_best().unwrap().peer, "nginx");
        let mut r = sample_report();
        r.scenarios = vec![s];
        let table = markdown_table(&r);
        assert!(table.starts_with("compression group: "), "{table}");
        assert!(
            table.contains("| compressed_text | req/s | 2000 | 1000 | **2.00** |"),
            "{table}"
        );
        assert!(
            table.contains("| compressed_text | kB/resp | 20.0 | 30.0 | 0.67 |"),
            "{table}"
        );
        let doc = markdown(&r);
        assert!(doc.contains("## Compression group"), "{doc}");
        assert!(
            doc.contains("# HTTP load harness: fileserver vs nginx (compression)\n"),
            "{doc}"
        );
    }

    #[test]
    fn the_arena_group_shows_bytes_per_response_and_rss_beside_req_per_s_and_cpu() {
        let with_mb = |req: f64, mb: f64| RunResult {
            mb_per_s: mb,
            ..run(req, 0.0)
        };
        // fileserver: 2000 req/s at 30 MB/s (15 kB a response), 12 MiB;
        // nginx: 1000 req/s at 15 MB/s (15 kB), 6 MiB.
        let fileserver = summarize(
            "fileserver",
            vec![with_mb(2000.0, 30.0); 3],
            vec![run(0.0, 2.0); 3],
            12 << 20,
            1.0,
            Some(cpu(1.0)),
        );
        let nginx = summarize(
            "nginx",
            vec![with_mb(1000.0, 15.0); 3],
            vec![run(0.0, 3.0); 3],
            6 << 20,
            2.0,
            Some(cpu(2.0)),
        );
        let rows: Vec<ScenarioReport> = ["arena_h1_64", "arena_h2_256"]
            .iter()
            .map(|name| {
                ScenarioReport::new(
                    name,
                    "arena",
                    500.0,
                    Headline::ReqPerS,
                    vec![fileserver.clone(), nginx.clone()],
                    Vec::new(),
                )
                .in_group(Group::Arena)
            })
            .collect();
        assert_eq!(rows[0].headline_best().unwrap().peer, "nginx");
        let mut r = sample_report();
        r.scenarios = rows;
        let table = markdown_table(&r);
        assert!(
            table.starts_with("arena group: HttpArena's static profile"),
            "{table}"
        );
        for row in [
            "| arena_h1_64 | req/s | 2000 | 1000 | **2.00** |",
            "| arena_h1_64 | kB/resp | 15.0 | 15.0 | 1.00 |",
            "| arena_h1_64 | CPU µs/req |",
            "| arena_h1_64 | peak RSS MiB | 12.0 | 6.00 | 2.00 |",
            "| arena_h2_256 | kB/resp | 15.0 | 15.0 | 1.00 |",
        ] {
            assert!(table.contains(row), "missing {row:?} in:\n{table}");
        }
        // Once, in the order req/s, kB/resp, p99, CPU, RSS.
        let labels: Vec<&str> = table
            .lines()
            .filter(|l| l.starts_with("| arena_h1_64 |"))
            .filter_map(|l| l.split('|').nth(2))
            .map(str::trim)
            .collect();
        assert_eq!(
            labels,
            ["req/s", "kB/resp", "p99 ms", "CPU µs/req", "peak RSS MiB"]
        );
        let doc = markdown(&r);
        assert!(doc.contains("## Arena group"), "{doc}");
        assert!(doc.contains("| arena_h2_256 | kB/resp |"), "{doc}");
        assert_eq!(doc.matches("| arena_h1_64 | peak RSS MiB |").count(), 1);
        assert!(doc.contains("fileserver vs nginx (arena)"), "{doc}");
    }

    #[test]
    fn the_http3_group_is_judged_against_caddy_with_bytes_per_response() {
        // Both 1.024 kB of body a response (h3load counts bodies only).
        let at = |req: f64| RunResult {
            mb_per_s: req * 1.024e-3,
            ..run(req, 4.0)
        };
        let servers =
            [("fileserver", 40_000.0, 1.0), ("caddy", 10_000.0, 2.0)].map(|(name, req, cpu_s)| {
                summarize(
                    name,
                    vec![at(req); 3],
                    vec![at(req); 3],
                    8 << 20,
                    cpu_s,
                    Some(cpu(cpu_s)),
                )
            });
        let s = ScenarioReport::new(
            "h3_small",
            "HTTP/3",
            0.0,
            Headline::ReqPerS,
            servers.to_vec(),
            Vec::new(),
        )
        .in_group(Group::Http3);
        assert_eq!(s.headline_best().unwrap().peer, "caddy");
        let mut r = sample_report();
        r.scenarios = vec![s];
        let table = markdown_table(&r);
        assert!(table.starts_with("http3 group: HTTP/3 over QUIC, load from h3load"));
        for row in [
            "| h3_small | req/s | 40.0k | 10.0k | **4.00** |",
            "| h3_small | kB/resp | 1.02 | 1.02 | 1.00 |",
        ] {
            assert!(table.contains(row), "missing {row:?} in:\n{table}");
        }
    }

    #[test]
    fn json_round_trips() {
        let r = sample_report();
        let back = parse_json(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(
            back.scenarios[0].servers[2].throughput_runs,
            r.scenarios[0].servers[2].throughput_runs
        );
        assert_eq!(back.scenarios[0].headline_best().unwrap().peer, "lighttpd");
        // A figure not measured (NaN, written as null) reads back as NaN.
        let mut r = sample_report();
        r.scenarios[0].servers[0].cpu_us_per_req = f64::NAN;
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains("\"cpu_us_per_req\":null"));
        let back = parse_json(&text).unwrap();
        assert!(back.scenarios[0].servers[0].cpu_us_per_req.is_nan());
    }

    /// A `latest.json` of the two-server harness (fixed fileserver and nginx
    /// fields), cut to two scenarios and two rounds.
    const LEGACY: &str = include_str!("testdata/legacy-report.json");

    #[test]
    fn reports_of_the_two_server_harness_still_render() {
        let r = parse_json(LEGACY).unwrap();
        assert_eq!(r.settings.peers, ["nginx"]);
        let s = &r.scenarios[0];
        assert_eq!(s.group, Group::Peers);
        assert!(s.baseline_req_per_s.is_none());
        assert_eq!(s.servers.len(), 2);
        assert_eq!(
            (s.servers[0].name.as_str(), s.servers[1].name.as_str()),
            ("fileserver", "nginx")
        );
        // The ratios that run computed are kept (1.34 over its 3 rounds).
        let best = s.headline_best().unwrap();
        assert_eq!(best.peer, "nginx");
        assert!(
            (best.ratio.unwrap().median - 1.3408).abs() < 1e-3,
            "{best:?}"
        );
        assert!(headline_table(&r)
            .contains("| large | req/s (higher is better) | 2257 | nginx | 2779 |"));
        assert!(parse_json("{}").is_err());
    }

    #[test]
    fn chart_renders_a_png() {
        let mut alone = sample_report();
        alone.scenarios[0].servers.truncate(1);
        alone.settings.peers.clear();
        for (k, report) in [sample_report(), alone].iter().enumerate() {
            let path =
                std::env::temp_dir().join(format!("loadtest-chart-{}-{k}.png", std::process::id()));
            chart::draw_sized(report, &path, (700, 750)).unwrap();
            let bytes = std::fs::read(&path).unwrap();
            let _ = std::fs::remove_file(&path);
            assert!(bytes.starts_with(b"\x89PNG"), "not a PNG");
            assert!(
                bytes.len() > 10_000,
                "suspiciously small PNG: {} bytes",
                bytes.len()
            );
        }
    }

    #[test]
    fn chart_grows_with_servers_and_scenarios() {
        let mut r = sample_report();
        assert_eq!(chart::size_for(&r), (1400, 1500));
        // 7 scenarios + the legend's slot, 6 servers, 56 px a bar at 80% fill.
        let s = r.scenarios[0].clone();
        for _ in 0..6 {
            r.scenarios.push(s.clone());
        }
        for name in ["h2o", "caddy", "static-web-server"] {
            for sc in &mut r.scenarios {
                let mut x = sc.servers[1].clone();
                x.name = name.into();
                sc.servers.push(x);
            }
        }
        let (w, _) = chart::size_for(&r);
        assert!(w >= 8 * 6 * 56, "{w}");
    }

    #[test]
    fn human_numbers() {
        assert_eq!(human(41_234.0), "41.2k");
        assert_eq!(human(2_500_000.0), "2.50M");
        assert_eq!(human(0.123), "0.12");
        assert_eq!(human(123.4), "123");
        assert_eq!(human(f64::NAN), "-");
    }

    #[test]
    fn utc_timestamps() {
        assert_eq!(utc_timestamp(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_timestamp(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(headline_of("cold"), Headline::P99);
        assert_eq!(headline_of("gone"), Headline::ReqPerS);
    }
}

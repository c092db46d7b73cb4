//! Summaries per scenario and their renderings: markdown/console table,
//! JSON, and a PNG chart.

use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::loadtest::loadgen::RunResult;
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
    /// Rounds per scenario (each round: wrk A, wrk B, latency A, latency B).
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
    /// oha's fixed rate as a fraction of the slower server's wrk req/s.
    pub latency_load: f64,
    /// Online CPUs.
    pub cpus: usize,
    /// `uname -r`.
    pub kernel: String,
    /// Versions of the tools and servers.
    pub versions: Vec<(String, String)>,
}

/// One server's figures in one scenario.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ServerSummary {
    /// Median wrk req/s over rounds.
    pub req_per_s: f64,
    /// Median wrk MB/s (headers included) over rounds.
    pub mb_per_s: f64,
    /// Median p50 latency (ms) of the latency runs.
    pub p50_ms: f64,
    /// Median p99 latency (ms) of the latency runs.
    pub p99_ms: f64,
    /// Errors over all timed runs (socket errors, timeouts, wrong statuses).
    pub errors: u64,
    /// Peak RSS of all the server's processes summed, MiB.
    pub peak_rss_mib: f64,
    /// CPU seconds (user + system, all processes) during the timed runs.
    pub cpu_s: f64,
    /// CPU microseconds per request during the wrk runs.
    pub cpu_us_per_req: f64,
    /// Every wrk run.
    pub throughput_runs: Vec<RunResult>,
    /// Every latency run.
    pub latency_runs: Vec<RunResult>,
}

/// fileserver / nginx.
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
}

/// One scenario's result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScenarioReport {
    /// Scenario name.
    pub name: String,
    /// What it requests.
    pub description: String,
    /// Median oha rate (req/s) of the latency runs; 0 when wrk measured latency.
    pub latency_rate: f64,
    /// The daemon.
    pub fileserver: ServerSummary,
    /// The reference.
    pub nginx: ServerSummary,
    /// fileserver / nginx.
    pub ratios: Ratios,
}

/// Fills a [`ServerSummary`]'s medians from its runs.
pub fn summarize(
    throughput_runs: Vec<RunResult>,
    latency_runs: Vec<RunResult>,
    peak_rss_bytes: u64,
    cpu_s: f64,
    wrk_cpu_s: f64,
) -> ServerSummary {
    let med = |runs: &[RunResult], f: fn(&RunResult) -> f64| {
        median(&runs.iter().map(f).collect::<Vec<_>>()).unwrap_or(f64::NAN)
    };
    let wrk_requests: u64 = throughput_runs.iter().map(|r| r.requests).sum();
    ServerSummary {
        req_per_s: med(&throughput_runs, |r| r.req_per_s),
        mb_per_s: med(&throughput_runs, |r| r.mb_per_s),
        p50_ms: med(&latency_runs, |r| r.p50_ms),
        p99_ms: med(&latency_runs, |r| r.p99_ms),
        errors: throughput_runs
            .iter()
            .chain(&latency_runs)
            .map(|r| r.errors)
            .sum(),
        peak_rss_mib: peak_rss_bytes as f64 / (1024.0 * 1024.0),
        cpu_s,
        cpu_us_per_req: if wrk_requests > 0 {
            wrk_cpu_s * 1e6 / wrk_requests as f64
        } else {
            f64::NAN
        },
        throughput_runs,
        latency_runs,
    }
}

/// The fileserver/nginx ratios of two summaries (paired by round).
pub fn ratios(fs: &ServerSummary, nginx: &ServerSummary) -> Ratios {
    let col = |runs: &[RunResult], f: fn(&RunResult) -> f64| runs.iter().map(f).collect::<Vec<_>>();
    Ratios {
        req_per_s: paired_ratio(
            &col(&fs.throughput_runs, |r| r.req_per_s),
            &col(&nginx.throughput_runs, |r| r.req_per_s),
        ),
        mb_per_s: paired_ratio(
            &col(&fs.throughput_runs, |r| r.mb_per_s),
            &col(&nginx.throughput_runs, |r| r.mb_per_s),
        ),
        p50: paired_ratio(
            &col(&fs.latency_runs, |r| r.p50_ms),
            &col(&nginx.latency_runs, |r| r.p50_ms),
        ),
        p99: paired_ratio(
            &col(&fs.latency_runs, |r| r.p99_ms),
            &col(&nginx.latency_runs, |r| r.p99_ms),
        ),
        peak_rss: ratio(fs.peak_rss_mib, nginx.peak_rss_mib),
        cpu_per_req: ratio(fs.cpu_us_per_req, nginx.cpu_us_per_req),
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

fn plain(r: Option<f64>) -> String {
    r.map_or("-".to_string(), |r| format!("{r:.2}"))
}

/// The results table in GitHub markdown (also what the console shows).
pub fn markdown_table(report: &Report) -> String {
    let mut out = String::from(
        "| scenario | req/s fileserver / nginx | req/s ratio | MB/s fileserver / nginx | p50 ms fileserver / nginx | p50 ratio | p99 ms fileserver / nginx | p99 ratio | peak RSS MiB fileserver / nginx | CPU µs/req fileserver / nginx | CPU/req ratio | errors |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for s in &report.scenarios {
        let (f, n, r) = (&s.fileserver, &s.nginx, &s.ratios);
        out.push_str(&format!(
            "| {} | {} / {} | **{}** | {} / {} | {} / {} | {} | {} / {} | **{}** | {} / {} | {} / {} | {} | {} / {} |\n",
            s.name,
            human(f.req_per_s),
            human(n.req_per_s),
            spread(&r.req_per_s),
            human(f.mb_per_s),
            human(n.mb_per_s),
            human(f.p50_ms),
            human(n.p50_ms),
            spread(&r.p50),
            human(f.p99_ms),
            human(n.p99_ms),
            spread(&r.p99),
            human(f.peak_rss_mib),
            human(n.peak_rss_mib),
            human(f.cpu_us_per_req),
            human(n.cpu_us_per_req),
            plain(r.cpu_per_req),
            f.errors,
            n.errors,
        ));
    }
    out
}

/// The whole markdown document (`latest.md`).
pub fn markdown(report: &Report) -> String {
    let s = &report.settings;
    let mut out = format!(
        "# HTTP load harness: fileserver vs nginx\n\n\
         Run {} on {} CPUs (kernel {}). {} rounds per scenario, {} s per run, {} connections, \
         wrk -t{}, {} workers per server. Latency: {} at {:.0}% of the slower server's wrk req/s.\n\n",
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
    out.push_str(&markdown_table(report));
    out.push_str(
        "\nRatios are fileserver / nginx: the median over rounds of the per-round ratio (min-max in \
         parentheses). Above 1 is better for req/s, below 1 is better for latency, RSS and CPU.\n\n",
    );
    out.push_str("| scenario | what | latency rate req/s |\n|---|---|---|\n");
    for sc in &report.scenarios {
        out.push_str(&format!(
            "| {} | {} | {} |\n",
            sc.name,
            sc.description,
            human(sc.latency_rate)
        ));
    }
    out.push_str("\nVersions: ");
    let versions: Vec<String> = s.versions.iter().map(|(k, v)| format!("{k} {v}")).collect();
    out.push_str(&versions.join("; "));
    out.push('\n');
    out
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

    use super::{human, Report};

    const FS_COLOR: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
    const NGINX_COLOR: RGBColor = RGBColor(0x2c, 0xa0, 0x2c);
    const RATIO_COLOR: RGBColor = RGBColor(0xd6, 0x27, 0x28);
    const LATENCY_RATIO_COLOR: RGBColor = RGBColor(0xff, 0x7f, 0x0e);
    const BAR_WIDTH: f64 = 0.35;

    type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;
    type XAxis = RangedCoordf64;

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

    /// One x position per scenario at 0, 1, 2, ...
    fn x_axis(n: usize) -> XAxis {
        (-0.5..(n as f64 - 0.5)).into()
    }

    /// Two bar series side by side per scenario, with a value label on each bar.
    fn draw_bars<'a, 'b: 'a, Y>(
        chart: &mut ChartContext<'a, BitMapBackend<'b>, Cartesian2d<XAxis, Y>>,
        series: [(&str, RGBColor, &[Option<f64>]); 2],
        floor: f64,
        fmt: fn(f64) -> String,
    ) -> Result<()>
    where
        Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
    {
        for (k, (name, color, values)) in series.into_iter().enumerate() {
            let offset = if k == 0 { -BAR_WIDTH - 0.03 } else { 0.03 };
            let elements: Vec<_> = values
                .iter()
                .enumerate()
                .filter_map(|(i, v)| v.filter(|v| v.is_finite()).map(|v| (i, v)))
                .flat_map(|(i, v)| {
                    let x0 = i as f64 + offset;
                    // Bars grow from `floor` (0, the axis bottom, or the 1.0 line
                    // of a ratio) up or down to the value; the label sits on the end.
                    let (low, high) = if v >= floor { (floor, v) } else { (v, floor) };
                    let anchor = if v >= floor { VPos::Bottom } else { VPos::Top };
                    let style = ("sans-serif", 17)
                        .into_font()
                        .into_text_style(chart.plotting_area())
                        .pos(Pos::new(HPos::Left, anchor));
                    [
                        Rectangle::new([(x0, low), (x0 + BAR_WIDTH, high)], color.filled())
                            .into_dyn(),
                        Text::new(fmt(v), (x0 + 0.02, v), style).into_dyn(),
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

    /// Where the chart's font comes from: Debian's `fonts-dejavu-core`, read
    /// at run time by plotters' pure-Rust `ab_glyph` text backend, so the
    /// build links no fontconfig or freetype.
    const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

    /// Registers [`FONT`] as plotters' "sans-serif" once per process.
    fn register_font() -> Result<()> {
        static REGISTERED: std::sync::OnceLock<std::result::Result<(), String>> =
            std::sync::OnceLock::new();
        REGISTERED
            .get_or_init(|| {
                let bytes = std::fs::read(FONT)
                    .map_err(|e| format!("{FONT}: {e} (install fonts-dejavu-core)"))?;
                // Registered fonts live as long as the process.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
                    .map_err(|_| format!("{FONT} is not a usable TrueType font"))
            })
            .clone()
            .map_err(|e| anyhow!(e))
    }

    /// Draws three panels: the ratios, req/s per server (log scale), and
    /// peak RSS per server.
    pub fn draw(report: &Report, path: &Path) -> Result<()> {
        draw_sized(report, path, (1400, 1500))
    }

    /// [`draw`] at another size in pixels (the tests draw small: plotters
    /// fills pixel by pixel and is slow in debug builds).
    pub fn draw_sized(report: &Report, path: &Path, size: (u32, u32)) -> Result<()> {
        register_font()?;
        let names: Vec<String> = report.scenarios.iter().map(|s| s.name.clone()).collect();
        let n = names.len().max(1);
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
                    "fileserver vs nginx: {} rounds x {} s, {} connections, {} workers each, {} CPUs ({})",
                    s.rounds, s.duration_s, s.connections, s.workers, s.cpus, report.generated_utc
                ),
                (20, 18),
                ("sans-serif", 26).into_font(),
            ))
            .map_err(e)?;
        let panels = body.split_evenly((3, 1));

        // Panel 1: the two ratios that matter most, against a line at 1.0.
        let req: Vec<Option<f64>> = report
            .scenarios
            .iter()
            .map(|s| s.ratios.req_per_s.map(|r| r.median))
            .collect();
        let p99: Vec<Option<f64>> = report
            .scenarios
            .iter()
            .map(|s| s.ratios.p99.map(|r| r.median))
            .collect();
        // Log scale, bars from the 1.0 line: 2x better and 2x worse look alike.
        let ratios = || {
            req.iter()
                .chain(&p99)
                .flatten()
                .copied()
                .filter(|v| v.is_finite() && *v > 0.0)
        };
        let top = ratios().fold(1.25f64, f64::max) * 1.4;
        let bottom = ratios().fold(0.8f64, f64::min) / 1.4;
        let mut chart = builder(
            &panels[0],
            "fileserver / nginx: req/s ratio (higher is better), p99 latency ratio (lower is better)",
        )
        .build_cartesian_2d(x_axis(n), (bottom..top).log_scale())
        .map_err(e)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n + 1)
            .x_label_formatter(&label)
            .y_label_formatter(&|y| sparse_log_label(*y))
            .y_desc("fileserver / nginx (log scale)")
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
            [
                ("req/s ratio", RATIO_COLOR, &req),
                ("p99 latency ratio", LATENCY_RATIO_COLOR, &p99),
            ],
            1.0,
            |v| format!("{v:.2}"),
        )?;

        // Panel 2: req/s of each server, log scale (1 MiB and 1 KiB rates differ 50x).
        let (fs_req, ng_req) = super::per_server(report, |s| s.req_per_s);
        let finite = || {
            fs_req
                .iter()
                .chain(&ng_req)
                .flatten()
                .copied()
                .filter(|v| v.is_finite() && *v > 0.0)
        };
        let hi = finite().fold(10.0f64, f64::max) * 4.0;
        let lo = finite().fold(hi, f64::min) / 3.0;
        let mut chart = builder(&panels[1], "throughput with wrk, req/s (log scale)")
            .build_cartesian_2d(x_axis(n), (lo..hi).log_scale())
            .map_err(e)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n + 1)
            .x_label_formatter(&label)
            .y_label_formatter(&|y| human(*y))
            .y_desc("req/s")
            .label_style(("sans-serif", 18))
            .axis_desc_style(("sans-serif", 18))
            .draw()
            .map_err(e)?;
        draw_bars(
            &mut chart,
            [
                ("fileserver", FS_COLOR, &fs_req),
                ("nginx", NGINX_COLOR, &ng_req),
            ],
            lo,
            human,
        )?;

        // Panel 3: peak RSS of each server.
        let (fs_rss, ng_rss) = super::per_server(report, |s| s.peak_rss_mib);
        let hi = fs_rss
            .iter()
            .chain(&ng_rss)
            .flatten()
            .copied()
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
            .x_labels(n + 1)
            .x_label_formatter(&label)
            .y_desc("MiB")
            .label_style(("sans-serif", 18))
            .axis_desc_style(("sans-serif", 18))
            .draw()
            .map_err(e)?;
        draw_bars(
            &mut chart,
            [
                ("fileserver", FS_COLOR, &fs_rss),
                ("nginx", NGINX_COLOR, &ng_rss),
            ],
            0.0,
            human,
        )?;
        root.present().map_err(e)?;
        Ok(())
    }
}

/// One figure of each server per scenario, as the chart's bar series
/// (fileserver's, nginx's).
fn per_server(
    report: &Report,
    figure: impl Fn(&ServerSummary) -> f64,
) -> (Vec<Option<f64>>, Vec<Option<f64>>) {
    report
        .scenarios
        .iter()
        .map(|s| (Some(figure(&s.fileserver)), Some(figure(&s.nginx))))
        .unzip()
}

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_timestamp(secs: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
    humantime::format_rfc3339_seconds(t).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(req: f64, p99: f64) -> RunResult {
        RunResult {
            req_per_s: req,
            mb_per_s: req / 1000.0,
            p50_ms: p99 / 4.0,
            p99_ms: p99,
            requests: (req * 3.0) as u64,
            errors: 0,
        }
    }

    pub(super) fn sample_report() -> Report {
        let fs = summarize(
            vec![run(41_000.0, 0.0), run(39_000.0, 0.0), run(40_000.0, 0.0)],
            vec![run(0.0, 2.0), run(0.0, 3.0), run(0.0, 2.5)],
            20 << 20,
            6.0,
            3.0,
        );
        let nginx = summarize(
            vec![run(40_000.0, 0.0), run(40_000.0, 0.0), run(38_000.0, 0.0)],
            vec![run(0.0, 2.0), run(0.0, 2.0), run(0.0, 2.0)],
            10 << 20,
            6.5,
            3.5,
        );
        let ratios = ratios(&fs, &nginx);
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
            },
            scenarios: vec![ScenarioReport {
                name: "small_random".into(),
                description: "1 KiB files".into(),
                latency_rate: 19_000.0,
                fileserver: fs,
                nginx,
                ratios,
            }],
        }
    }

    #[test]
    fn summary_takes_medians_and_pairs_rounds_for_ratios() {
        let r = sample_report();
        let s = &r.scenarios[0];
        assert_eq!(s.fileserver.req_per_s, 40_000.0);
        assert_eq!(s.fileserver.p99_ms, 2.5);
        assert_eq!(s.fileserver.peak_rss_mib, 20.0);
        // Per-round ratios 1.025, 0.975, 1.0526 -> median 1.025.
        let rr = s.ratios.req_per_s.unwrap();
        assert!((rr.median - 1.025).abs() < 1e-9, "{rr:?}");
        assert!((rr.min - 0.975).abs() < 1e-9);
        assert!((s.ratios.p99.unwrap().median - 1.25).abs() < 1e-9);
        assert_eq!(s.ratios.peak_rss, Some(2.0));
        // 3 CPU s over 360k requests.
        assert!((s.fileserver.cpu_us_per_req - 3.0e6 / 360_000.0).abs() < 1e-9);
    }

    #[test]
    fn table_shows_values_ratios_and_spread() {
        let table = markdown_table(&sample_report());
        let row = table.lines().nth(2).unwrap();
        assert!(
            row.starts_with("| small_random | 40.0k / 40.0k | **1.02 (0.97-1.05)** |"),
            "{row}"
        );
        assert!(
            row.contains("| 2.50 / 2.00 | **1.25 (1.00-1.50)** |"),
            "{row}"
        );
        assert!(row.contains("| 20.0 / 10.0 |"), "{row}");
        assert_eq!(table.lines().count(), 3);
        let doc = markdown(&sample_report());
        assert!(
            doc.contains("2026-11-30T") && doc.contains("oha 1.16.0 at 50%"),
            "{doc}"
        );
    }

    #[test]
    fn json_round_trips() {
        let r = sample_report();
        let back: Report = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(
            back.scenarios[0].fileserver.throughput_runs,
            r.scenarios[0].fileserver.throughput_runs
        );
    }

    #[test]
    fn chart_renders_a_png() {
        let path = std::env::temp_dir().join(format!("loadtest-chart-{}.png", std::process::id()));
        chart::draw_sized(&sample_report(), &path, (700, 750)).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert!(bytes.starts_with(b"\x89PNG"), "not a PNG");
        assert!(
            bytes.len() > 10_000,
            "suspiciously small PNG: {} bytes",
            bytes.len()
        );
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
    }
}

//! Criterion's HTML reports draw their plots with plotters, which this
//! workspace builds with a text backend that knows only registered fonts:
//! a bench binary that did not register one panicked at its first plot
//! (`FontUnavailable`), so `cargo bench` failed on every machine. This
//! runs one tiny criterion benchmark with plots, as the bench binaries
//! do after `benches::plot_font::register_or_exit()`.

use std::time::Duration;

use criterion::{Criterion, PlottingBackend};

#[test]
fn criterion_draws_its_plots_with_the_registered_font() {
    benches::plot_font::register().expect("fonts-dejavu-core is installed");
    let out = tempfile::tempdir().unwrap();
    let mut c = Criterion::default()
        .output_directory(out.path())
        .plotting_backend(PlottingBackend::Plotters)
        .with_plots()
        .sample_size(10)
        .nresamples(1000)
        .warm_up_time(Duration::from_millis(10))
        .measurement_time(Duration::from_millis(50));
    c.bench_function("sum", |b| b.iter(|| std::hint::black_box(2u64) + 2));
    let report = out.path().join("sum/report/index.html");
    assert!(report.exists(), "no report at {}", report.display());
    let pdf = out.path().join("sum/report/pdf.svg");
    let svg = std::fs::read_to_string(&pdf).unwrap();
    assert!(svg.contains("<text"), "{} has no text", pdf.display());
}

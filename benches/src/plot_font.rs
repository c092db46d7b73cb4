//! The font of every plot the suite draws: the load test's chart and
//! criterion's HTML reports.
//!
//! The workspace builds plotters with its pure-Rust `ab_glyph` text
//! backend (no fontconfig or freetype linked), and with that backend a
//! font family exists only once registered: criterion's plots ask for
//! "sans-serif", so a criterion run whose process has not registered it
//! panics (`FontUnavailable`) at its first plot. Every bench binary's
//! `main` and the chart call [`register`] first.

use plotters::style::FontStyle;

/// Debian's `fonts-dejavu-core` (`scripts/install-deps.sh`), read at run
/// time.
pub const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// Registers [`FONT`] as plotters' "sans-serif", once per process; the
/// error says what to install.
pub fn register() -> Result<(), String> {
    static REGISTERED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
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
}

/// [`register`] for a bench binary's `main`: exits with the error, since
/// criterion would panic at its first plot without the font.
pub fn register_or_exit() {
    if let Err(error) = register() {
        eprintln!("criterion's plots need a font: {error}");
        std::process::exit(1);
    }
}

//! The side-by-side HTTP load harness (not written yet).
fn main() {
    eprintln!("loadtest: not written yet");
    std::process::exit(1);
}

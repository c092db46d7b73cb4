//! The `fileserver` daemon (work in progress).
fn main() {
    eprintln!("fileserver: not built yet");
    std::process::exit(1);
}

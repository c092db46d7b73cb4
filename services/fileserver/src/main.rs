//! The `fileserver` binary; everything lives in the library.
fn main() {
    std::process::exit(fileserver::main_entry());
}

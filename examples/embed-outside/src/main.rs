//! The README snippets as a user's crate compiles them (see `build.rs`):
//! building this crate is the check. Running it prints how many there are.

mod snippets {
    include!(concat!(env!("OUT_DIR"), "/snippets.rs"));
}

fn main() {
    // Referenced so that every snippet is type-checked as used code.
    let _ = snippets::snippet_1;
    println!("{} README snippets compile", snippets::SNIPPETS);
}

//! Copies every ```rust block of the project's READMEs, verbatim, into a
//! function of its own, so that `src/main.rs` compiles exactly what a user
//! pastes: a snippet that stops compiling fails this crate's build.

use std::fmt::Write;

const READMES: [&str; 2] = ["../../README.md", "../../crates/servedir/README.md"];

fn main() {
    let mut out = String::new();
    let mut n = 0;
    for readme in READMES {
        println!("cargo:rerun-if-changed={readme}");
        let text = std::fs::read_to_string(readme).expect(readme);
        let mut block: Option<String> = None;
        for line in text.lines() {
            match &mut block {
                None if line.trim_start().starts_with("```rust") => block = Some(String::new()),
                None => {}
                Some(_) if line.trim_start().starts_with("```") => {
                    let body = block.take().unwrap();
                    n += 1;
                    writeln!(
                        out,
                        "/// From {readme}.\n#[allow(unused, clippy::all)]\npub async fn snippet_{n}() \
                         -> Result<(), Box<dyn std::error::Error>> {{\n{body}\n    Ok(())\n}}\n"
                    )
                    .unwrap();
                }
                Some(body) => {
                    body.push_str(line);
                    body.push('\n');
                }
            }
        }
    }
    assert!(n > 0, "no ```rust block in {READMES:?}");
    writeln!(
        out,
        "/// How many snippets there are.\npub const SNIPPETS: usize = {n};"
    )
    .unwrap();
    let dest = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("snippets.rs");
    std::fs::write(dest, out).unwrap();
}

//! What the fuzz targets share (this crate's `tests/fuzz.rs` and the
//! daemon's `tests/reliability_fuzz.rs`, which includes this file by path):
//! a bounded proptest runner and the regression corpus reader.
#![allow(dead_code)]

use proptest::test_runner::{Config, FileFailurePersistence, TestRunner};
use std::path::Path;

/// Cases per property; the suite stays well under a second per target in a
/// debug build. Raise with `FUZZ_CASES` for a longer run (`scripts/fuzz.sh`).
pub(crate) fn cases() -> u32 {
    std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

pub(crate) fn runner() -> TestRunner {
    TestRunner::new(Config {
        cases: cases(),
        // Failures are kept by hand in tests/corpus, not in a side file.
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        ..Config::default()
    })
}

/// Decodes a corpus line: `\xNN` is a raw byte, `\\` a backslash.
fn unescape(line: &str) -> Vec<u8> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() {
            if b[i + 1] == b'\\' {
                out.push(b'\\');
                i += 2;
                continue;
            }
            if b[i + 1] == b'x' && i + 3 < b.len() {
                if let Ok(v) = u8::from_str_radix(&line[i + 2..i + 4], 16) {
                    out.push(v);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

/// The inputs of a regression corpus: `KIND INPUT` per line (`# ` starts a
/// comment), with `\\xNN` decoded to a raw byte.
pub(crate) fn corpus(path: &Path) -> Vec<(String, Vec<u8>)> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let inputs: Vec<_> = text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with("# "))
        .map(|line| {
            let (kind, input) = line.split_once(' ').unwrap_or((line, ""));
            (kind.to_string(), unescape(input))
        })
        .collect();
    assert!(
        !inputs.is_empty(),
        "empty regression corpus {}",
        path.display()
    );
    inputs
}

//! What the fuzz targets share (this crate's `tests/fuzz.rs` and the
//! daemon's `tests/reliability_fuzz.rs`, which includes this file by path):
//! a bounded proptest runner and the regression corpus reader.
#![allow(dead_code)]

use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};
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

/// Runs `check` on every input of the regression corpus at `path` (`KIND
/// INPUT` per line, `# ` starts a comment, `\xNN` is a raw byte), panicking
/// with the input at the first failure; returns how many inputs passed.
pub(crate) fn check_corpus(
    path: &Path,
    check: impl Fn(&str, &[u8]) -> Result<(), TestCaseError>,
) -> usize {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut n = 0;
    for line in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with("# "))
    {
        let (kind, input) = line.split_once(' ').unwrap_or((line, ""));
        let bytes = unescape(input);
        if let Err(e) = check(kind, &bytes) {
            panic!("regression input {line:?}: {e}");
        }
        n += 1;
    }
    assert!(n > 0, "empty regression corpus {}", path.display());
    n
}

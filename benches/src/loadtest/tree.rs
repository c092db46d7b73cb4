//! The test trees: file names, sizes and deterministic contents.
//!
//! Contents come from a seeded xorshift generator, so the harness can check
//! a response byte for byte without keeping the files in memory, and two
//! runs serve identical bytes.

use std::fs;
use std::io::Write;
use std::path::Path;

pub mod arena;

/// Number of 1 KiB files under `small/`.
pub const SMALL_COUNT: usize = 1000;
/// Size of each file under `small/`.
pub const SMALL_SIZE: usize = 1024;
/// Size of `large.bin`.
pub const LARGE_SIZE: usize = 1 << 20;
/// Number of 4 KiB files under `pressure/`.
pub const PRESSURE_COUNT: usize = 10_000;
/// Size of each file under `pressure/`.
pub const PRESSURE_SIZE: usize = 4096;
/// Number of 4 KiB files under `many/` (the `many_files` scenario).
pub const MANY_COUNT: usize = 20_000;
/// Size of each file under `many/`.
pub const MANY_SIZE: usize = 4096;
/// Number of large files under `cold/` (the `cold` scenario); `--quick` uses
/// [`COLD_COUNT_QUICK`].
pub const COLD_COUNT: usize = 8;
/// Number of large files under `cold/` in a `--quick` run.
pub const COLD_COUNT_QUICK: usize = 2;
/// Size of each file under `cold/`.
pub const COLD_SIZE: usize = 64 << 20;

/// URL path of small file `i` (`/small/000.bin` ..= `/small/999.bin`).
pub fn small_path(i: usize) -> String {
    format!("/small/{i:03}.bin")
}

/// URL path of the 1 MiB file.
pub const LARGE_PATH: &str = "/large.bin";

/// URL path of cache-pressure file `i` (`/pressure/0000.bin` ..= `/pressure/9999.bin`).
pub fn pressure_path(i: usize) -> String {
    format!("/pressure/{i:04}.bin")
}

/// URL path of many-files file `i` (`/many/00000.bin` ..= `/many/19999.bin`).
pub fn many_path(i: usize) -> String {
    format!("/many/{i:05}.bin")
}

/// URL path of cold large file `i` (`/cold/0.bin`, `/cold/1.bin`, ...).
pub fn cold_path(i: usize) -> String {
    format!("/cold/{i}.bin")
}

/// Which optional parts of the tree a run needs (they are big or many, so
/// they are written only for the scenarios that read them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Extras {
    /// Write `many/` (20000 files, 80 MiB).
    pub many: bool,
    /// Number of [`COLD_SIZE`] files to write under `cold/` (0: none).
    pub cold_files: usize,
    /// Write `text/` ([`TEXT_COUNT`] JavaScript, CSS and JSON files).
    pub text: bool,
    /// Write `static/`: HttpArena's 20 files and their `.br` and `.gz`
    /// siblings ([`arena`]).
    pub arena: bool,
}

/// A seeded xorshift generator; the seed is the FNV-1a hash of a path, so
/// every file differs and a server that mixed two files up fails
/// verification.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn for_path(path: &str) -> Self {
        // `| 1` keeps xorshift away from zero.
        Self(
            path.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            }) | 1,
        )
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `0..n`.
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, words: &[&'a str]) -> &'a str {
        words[self.below(words.len())]
    }
}

/// The bytes of the file at URL path `path` of length `len`.
pub fn contents(path: &str, len: usize) -> Vec<u8> {
    let mut rng = Rng::for_path(path);
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        out.extend_from_slice(&rng.next().to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Writes the first `small` of the small files and the large file under
/// `root`, the tree's contents, as a test needs them (not the whole
/// tree); returns the small files' URL paths.
pub fn write_sample(root: &Path, small: usize) -> std::io::Result<Vec<String>> {
    fs::create_dir_all(root.join("small"))?;
    let paths: Vec<String> = (0..small).map(small_path).collect();
    for path in &paths {
        fs::write(
            root.join(path.trim_start_matches('/')),
            contents(path, SMALL_SIZE),
        )?;
    }
    let large = LARGE_PATH.trim_start_matches('/');
    fs::write(root.join(large), contents(LARGE_PATH, LARGE_SIZE))?;
    Ok(paths)
}

/// Number of JavaScript files under `text/js/` (the `compressed_text` tree).
pub const TEXT_JS_COUNT: usize = 200;
/// Number of stylesheets under `text/css/`.
pub const TEXT_CSS_COUNT: usize = 50;
/// Number of JSON documents under `text/json/`.
pub const TEXT_JSON_COUNT: usize = 50;
/// Files in the text tree in all.
pub const TEXT_COUNT: usize = TEXT_JS_COUNT + TEXT_CSS_COUNT + TEXT_JSON_COUNT;
/// Smallest and largest size a text file aims at (it ends at the first
/// whole statement, rule or record past its size).
pub const TEXT_SIZES: (usize, usize) = (20 << 10, 200 << 10);

/// URL path of text file `i` (`0..TEXT_COUNT`): `/text/js/000.js` ..=
/// `/text/js/199.js`, then `/text/css/00.css` ..= `/text/css/49.css`, then
/// `/text/json/00.json` ..= `/text/json/49.json`.
pub fn text_path(i: usize) -> String {
    match i {
        i if i < TEXT_JS_COUNT => format!("/text/js/{i:03}.js"),
        i if i < TEXT_JS_COUNT + TEXT_CSS_COUNT => {
            format!("/text/css/{:02}.css", i - TEXT_JS_COUNT)
        }
        i => format!("/text/json/{:02}.json", i - TEXT_JS_COUNT - TEXT_CSS_COUNT),
    }
}

const WORDS: [&str; 40] = [
    "get",
    "set",
    "on",
    "handle",
    "render",
    "update",
    "create",
    "remove",
    "user",
    "item",
    "list",
    "data",
    "value",
    "state",
    "props",
    "config",
    "index",
    "count",
    "node",
    "event",
    "request",
    "response",
    "error",
    "result",
    "options",
    "element",
    "component",
    "context",
    "buffer",
    "cache",
    "token",
    "route",
    "query",
    "session",
    "layout",
    "theme",
    "button",
    "panel",
    "view",
    "model",
];

/// A camelCase identifier of one to three words.
fn ident(rng: &mut Rng) -> String {
    let mut id = rng.pick(&WORDS).to_string();
    for _ in 0..rng.below(3) {
        let w = rng.pick(&WORDS);
        id.push_str(&w[..1].to_ascii_uppercase());
        id.push_str(&w[1..]);
    }
    id
}

/// One JavaScript function, from a small grammar of the statements
/// bundled front-end code is made of.
fn js_unit(rng: &mut Rng, out: &mut String) {
    let (f, a, b) = (ident(rng), ident(rng), ident(rng));
    match rng.below(4) {
        0 => out.push_str(&format!("export function {f}({a}, {b}) {{\n")),
        1 => out.push_str(&format!("const {f} = async ({a}, {b}) => {{\n")),
        2 => out.push_str(&format!("{f}.prototype.{a} = function ({b}) {{\n")),
        _ => out.push_str(&format!(
            "function {f}({a}) {{\n  const {b} = this.{b} || {{}};\n"
        )),
    }
    for _ in 0..2 + rng.below(6) {
        let (x, y, z) = (ident(rng), ident(rng), ident(rng));
        let n = rng.below(1000);
        let line = match rng.below(7) {
            0 => format!("  const {x} = {a}.{y}({z}, {n});\n"),
            1 => format!("  if ({x} === null || {x}.{y} > {n}) {{\n    return {b};\n  }}\n"),
            2 => format!(
                "  {a}.{x} = \"{} {}\";\n",
                rng.pick(&WORDS),
                rng.pick(&WORDS)
            ),
            3 => format!(
                "  for (let i = 0; i < {x}.length; i++) {{\n    {y}[i] = {z}(i, {n});\n  }}\n"
            ),
            4 => format!(
                "  // {} the {} before {}\n",
                rng.pick(&WORDS),
                x,
                rng.pick(&WORDS)
            ),
            5 => format!("  await {x}.{y}({{ {z}: {n}, {a}: {b} }});\n"),
            _ => format!("  {x}.addEventListener(\"{}\", {y});\n", rng.pick(&WORDS)),
        };
        out.push_str(&line);
    }
    out.push_str(&format!("  return {a};\n}}\n\n"));
}

/// One CSS rule.
fn css_unit(rng: &mut Rng, out: &mut String) {
    out.push_str(&format!(".{}-{}", rng.pick(&WORDS), rng.pick(&WORDS)));
    if rng.below(2) == 0 {
        out.push_str(&format!(" > .{}", rng.pick(&WORDS)));
    }
    out.push_str(" {\n");
    const PROPS: [&str; 8] = [
        "display: flex",
        "position: relative",
        "font-weight: 600",
        "text-align: center",
        "box-sizing: border-box",
        "overflow: hidden",
        "cursor: pointer",
        "align-items: center",
    ];
    for _ in 0..2 + rng.below(5) {
        let line = match rng.below(4) {
            0 => format!("  margin: {}px {}px;\n", rng.below(32), rng.below(32)),
            1 => format!("  color: #{:03x};\n", rng.below(0x1000)),
            2 => format!("  padding: {}rem;\n", rng.below(8)),
            _ => format!("  {};\n", rng.pick(&PROPS)),
        };
        out.push_str(&line);
    }
    out.push_str("}\n\n");
}

/// One JSON record (without the separator).
fn json_unit(rng: &mut Rng, out: &mut String) {
    out.push_str(&format!(
        "  {{\"id\": {}, \"name\": \"{} {}\", \"kind\": \"{}\", \"tags\": [\"{}\", \"{}\"], \"active\": {}, \"score\": {}.{}}}",
        rng.below(100_000),
        rng.pick(&WORDS),
        rng.pick(&WORDS),
        rng.pick(&WORDS),
        rng.pick(&WORDS),
        rng.pick(&WORDS),
        rng.below(2) == 0,
        rng.below(100),
        rng.below(100),
    ));
}

/// The bytes of text file `path` (a [`text_path`]): compressible
/// JavaScript, CSS or JSON made of whole statements, rules or records,
/// [`TEXT_SIZES`] long, the same on every run.
pub fn text_contents(path: &str) -> Vec<u8> {
    let mut rng = Rng::for_path(path);
    let (lo, hi) = TEXT_SIZES;
    let target = lo + rng.below(hi - lo + 1);
    let mut out = String::with_capacity(target + 1024);
    if path.ends_with(".json") {
        out.push_str("[\n");
        while out.len() < target {
            if out.len() > 2 {
                out.push_str(",\n");
            }
            json_unit(&mut rng, &mut out);
        }
        out.push_str("\n]\n");
    } else if path.ends_with(".css") {
        while out.len() < target {
            css_unit(&mut rng, &mut out);
        }
    } else {
        out.push_str("\"use strict\";\n\n");
        while out.len() < target {
            js_unit(&mut rng, &mut out);
        }
    }
    out.into_bytes()
}

/// Writes the tree under `root` (which must exist): always `small/`,
/// `large.bin` and `pressure/`, plus the [`Extras`] asked for.
///
/// Directories are 0755 and files 0644 so nginx and h2o workers, which drop
/// privileges to `nobody` when the harness runs as root, can read them.
pub fn generate(root: &Path, extras: Extras) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(root, fs::Permissions::from_mode(0o755))?;
    for dir in [
        "small",
        "pressure",
        "many",
        "cold",
        "text",
        "text/js",
        "text/css",
        "text/json",
        arena::DIR,
    ] {
        fs::create_dir_all(root.join(dir))?;
        fs::set_permissions(root.join(dir), fs::Permissions::from_mode(0o755))?;
    }
    let write_bytes = |path: &str, bytes: &[u8]| -> std::io::Result<()> {
        let file_path = root.join(path.trim_start_matches('/'));
        let mut file = fs::File::create(&file_path)?;
        file.write_all(bytes)?;
        fs::set_permissions(&file_path, fs::Permissions::from_mode(0o644))
    };
    let write = |path: &str, len: usize| write_bytes(path, &contents(path, len));
    for i in 0..SMALL_COUNT {
        write(&small_path(i), SMALL_SIZE)?;
    }
    write(LARGE_PATH, LARGE_SIZE)?;
    for i in 0..PRESSURE_COUNT {
        write(&pressure_path(i), PRESSURE_SIZE)?;
    }
    if extras.many {
        for i in 0..MANY_COUNT {
            write(&many_path(i), MANY_SIZE)?;
        }
    }
    for i in 0..extras.cold_files {
        write(&cold_path(i), COLD_SIZE)?;
    }
    if extras.text {
        for i in 0..TEXT_COUNT {
            let path = text_path(i);
            write_bytes(&path, &text_contents(&path))?;
        }
    }
    if extras.arena {
        for g in arena::generated() {
            let path = g.file.path();
            write_bytes(&path, &g.body)?;
            for (suffix, bytes) in [(".br", &g.br), (".gz", &g.gz)] {
                if let Some(bytes) = bytes {
                    write_bytes(&format!("{path}{suffix}"), bytes)?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contents_are_deterministic_and_distinct_per_path() {
        let a = contents("/small/000.bin", SMALL_SIZE);
        assert_eq!(a.len(), SMALL_SIZE);
        assert_eq!(a, contents("/small/000.bin", SMALL_SIZE));
        assert_ne!(a, contents("/small/001.bin", SMALL_SIZE));
        // A prefix of a longer file is the shorter file: ranges can be checked
        // by slicing.
        assert_eq!(
            &contents(LARGE_PATH, LARGE_SIZE)[..100],
            &contents(LARGE_PATH, 100)[..]
        );
    }

    #[test]
    fn paths_cover_the_regexes_oha_uses() {
        assert_eq!(small_path(0), "/small/000.bin");
        assert_eq!(small_path(SMALL_COUNT - 1), "/small/999.bin");
        assert_eq!(pressure_path(PRESSURE_COUNT - 1), "/pressure/9999.bin");
        // `many_files` asks oha for /many/[01][0-9]{4}.bin: 00000..=19999.
        assert_eq!(many_path(0), "/many/00000.bin");
        assert_eq!(many_path(MANY_COUNT - 1), "/many/19999.bin");
        assert_eq!(cold_path(COLD_COUNT - 1), "/cold/7.bin");
        assert_eq!(text_path(0), "/text/js/000.js");
        assert_eq!(text_path(TEXT_JS_COUNT - 1), "/text/js/199.js");
        assert_eq!(text_path(TEXT_JS_COUNT), "/text/css/00.css");
        assert_eq!(text_path(TEXT_COUNT - 1), "/text/json/49.json");
    }

    #[test]
    fn text_files_are_deterministic_and_sized() {
        let mut total = 0;
        for i in 0..TEXT_COUNT {
            let path = text_path(i);
            let text = text_contents(&path);
            assert_eq!(text, text_contents(&path));
            assert!(text.len() >= TEXT_SIZES.0 && text.len() < TEXT_SIZES.1 + 1024);
            assert!(std::str::from_utf8(&text).is_ok());
            total += text.len();
        }
        // A JSON document is one array of records.
        let json = String::from_utf8(text_contents(&text_path(TEXT_COUNT - 1))).unwrap();
        assert!(
            json.starts_with("[\n  {") && json.ends_with("}\n]\n"),
            "{json:.200}"
        );
        assert!(total > TEXT_COUNT * TEXT_SIZES.0);
    }

    #[test]
    fn the_arena_tree_has_httparenas_files_and_siblings_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let extras = Extras {
            arena: true,
            ..Extras::default()
        };
        generate(dir.path(), extras).unwrap();
        let read = |path: &str| fs::read(dir.path().join(path.trim_start_matches('/')));
        for f in arena::FILES {
            let body = read(&f.path()).unwrap();
            assert_eq!(body.len(), f.size, "{}", f.name);
            for (suffix, coding) in [(".br", "br"), (".gz", "gzip")] {
                match read(&format!("{}{suffix}", f.path())) {
                    Ok(sibling) => {
                        assert!(f.siblings, "{}{suffix} should not exist", f.name);
                        assert_eq!(arena::decode(coding, &sibling).unwrap(), body);
                    }
                    Err(_) => assert!(!f.siblings, "{}{suffix} missing", f.name),
                }
            }
        }
        let names = fs::read_dir(dir.path().join(arena::DIR)).unwrap().count();
        assert_eq!(names, 20 + 2 * 15);
        // Without the flag there is no static/ content.
        let plain = tempfile::tempdir().unwrap();
        generate(plain.path(), Extras::default()).unwrap();
        assert_eq!(
            fs::read_dir(plain.path().join(arena::DIR)).unwrap().count(),
            0
        );
    }
}

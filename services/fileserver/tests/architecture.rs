//! The architecture, executable: which crate may depend on which (read
//! from the workspace manifests through `cargo metadata`), and which
//! module may use which (read from the sources): in no crate under
//! `crates/`, nor in the daemon, do modules use each other in a cycle, at
//! any depth of the module tree; and none of the daemon's protocol
//! engines uses another's modules.
//!
//! A crate's modules are found as rustc finds them, from `lib.rs` along
//! its `mod` declarations (and `#[path]`s); a use is any `crate::`,
//! `super::` or `self::` path in its code (comments and literals left
//! out), groups included.
//!
//! Each rule is a small function over data (a dependency map, a module
//! graph) that returns what breaks it; the tests at the end feed each one
//! a bad map or graph and check that it says so, so no rule can pass by
//! being unable to fail.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// What a rule needs to know of one workspace package.
#[derive(Debug, Default, Clone)]
struct Package {
    /// It has a library target.
    lib: bool,
    /// Its normal and build dependencies, by package name, on any target
    /// (dev-dependencies are left out: tests may use what the code may not).
    deps: BTreeSet<String>,
}

/// Workspace packages by name.
type Packages = BTreeMap<String, Package>;

/// What a dependency rule asks of one crate.
#[derive(Debug, Clone, Copy)]
enum Limit {
    /// Only these dependencies.
    Only(&'static [&'static str]),
    /// None of these dependencies.
    Never(&'static [&'static str]),
}

/// One crate's dependency rule, and why it holds.
#[derive(Debug, Clone, Copy)]
struct Rule {
    krate: &'static str,
    /// A missing crate breaks the rule (renamed? the rule must follow);
    /// when false the rule applies only once the crate exists.
    required: bool,
    limit: Limit,
    why: &'static str,
}

/// The crates above the data structures: what `announce`, `fdtable` and
/// `pathcache` must never depend on.
const ABOVE_THE_DATA_STRUCTURES: &[&str] = &[
    "filemanager",
    "httpfile",
    "siterules",
    "servedir",
    "decide",
    "fileserver",
];

/// The HTTP layers `filemanager` must never depend on: the crates that
/// speak HTTP (ours and the libraries).
const HTTP_LAYERS: &[&str] = &[
    "httpfile",
    "siterules",
    "servedir",
    "decide",
    "fileserver",
    "http",
    "http-body",
    "http-body-util",
    "httparse",
    "h2",
    "hyper",
    "hyper-util",
    "tower",
    "tower-service",
    "tower-http",
    "axum",
];

/// The workspace's crate rules.
const RULES: &[Rule] = &[
    Rule {
        krate: "httpfile",
        required: true,
        // Its normal dependencies today; a new one is a decision to make
        // here, not a line to add to its manifest.
        limit: Limit::Only(&["httpdate", "mime_guess"]),
        why: "httpfile is HTTP semantics as pure functions: no crate that does I/O",
    },
    Rule {
        krate: "hpack",
        required: true,
        limit: Limit::Only(&[]),
        why: "hpack is header compression as pure functions: no dependency, no I/O",
    },
    Rule {
        krate: "h2wire",
        required: true,
        limit: Limit::Only(&["hpack"]),
        why: "h2wire is HTTP/2 without I/O: frames and state over hpack, nothing else",
    },
    Rule {
        krate: "h3wire",
        required: true,
        limit: Limit::Only(&["hpack", "h2wire"]),
        why: "h3wire is HTTP/3's framing and QPACK without I/O: over hpack's primitives and \
              h2wire's checked request head, nothing else",
    },
    Rule {
        krate: "announce",
        required: true,
        limit: Limit::Never(ABOVE_THE_DATA_STRUCTURES),
        why: "the data structures know nothing of files or HTTP",
    },
    Rule {
        krate: "fdtable",
        required: true,
        limit: Limit::Never(ABOVE_THE_DATA_STRUCTURES),
        why: "the data structures know nothing of files or HTTP",
    },
    Rule {
        krate: "pathcache",
        required: true,
        limit: Limit::Never(ABOVE_THE_DATA_STRUCTURES),
        why: "the data structures know nothing of files or HTTP",
    },
    Rule {
        krate: "filemanager",
        required: true,
        limit: Limit::Never(HTTP_LAYERS),
        why: "filemanager touches the filesystem and knows nothing of HTTP",
    },
    Rule {
        krate: "siterules",
        required: true,
        // Matching and rendering only: it opens no file and runs no task
        // (decide runs its password checks on the blocking pool).
        limit: Limit::Only(&["httpfile", "serde", "bcrypt", "subtle", "base64"]),
        why: "siterules matches and renders a site's rules: no file, socket or runtime",
    },
    Rule {
        krate: "decide",
        required: false,
        limit: Limit::Never(&["servedir", "http", "hyper", "tower-service"]),
        why: "decide turns a request into a decision without an HTTP library or servedir",
    },
];

/// What breaks `rule` in `packages`, one line per offence.
fn check_rule(packages: &Packages, rule: &Rule) -> Vec<String> {
    let Some(package) = packages.get(rule.krate) else {
        return if rule.required {
            vec![format!(
                "{}: no such package in the workspace (renamed? update the rule)",
                rule.krate
            )]
        } else {
            Vec::new()
        };
    };
    package
        .deps
        .iter()
        .filter(|dep| match rule.limit {
            Limit::Only(allowed) => !allowed.contains(&dep.as_str()),
            Limit::Never(forbidden) => forbidden.contains(&dep.as_str()),
        })
        .map(|dep| match rule.limit {
            Limit::Only(allowed) => format!(
                "{} depends on `{dep}`, which is not on its allow-list ({}): {}",
                rule.krate,
                allowed.join(", "),
                rule.why
            ),
            Limit::Never(_) => format!(
                "{} depends on `{dep}`, which it must not: {}",
                rule.krate, rule.why
            ),
        })
        .collect()
}

/// Library crates that depend on `daemon` (no library may: the daemon is
/// the top of the graph).
fn check_no_library_depends_on(packages: &Packages, daemon: &str) -> Vec<String> {
    packages
        .iter()
        .filter(|(name, p)| p.lib && name.as_str() != daemon && p.deps.contains(daemon))
        .map(|(name, _)| {
            format!("library crate {name} depends on `{daemon}`: nothing may sit above the daemon")
        })
        .collect()
}

/// Every rule's offences.
fn check_crates(packages: &Packages) -> Vec<String> {
    let mut offences: Vec<String> = RULES.iter().flat_map(|r| check_rule(packages, r)).collect();
    offences.extend(check_no_library_depends_on(packages, "fileserver"));
    offences
}

/// The workspace root (two levels above this crate's manifest).
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root")
}

/// The workspace's packages, from `cargo metadata --no-deps`.
fn workspace_packages() -> Packages {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(workspace_root())
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata is JSON");
    let mut packages = Packages::new();
    for p in meta["packages"].as_array().expect("a package list") {
        let name = family_member(p["name"].as_str().expect("a package name"));
        let lib = p["targets"].as_array().is_some_and(|targets| {
            targets.iter().any(|t| {
                t["kind"].as_array().is_some_and(|kinds| {
                    kinds.iter().any(|k| {
                        matches!(
                            k.as_str(),
                            Some("lib" | "rlib" | "dylib" | "cdylib" | "staticlib" | "proc-macro")
                        )
                    })
                })
            })
        });
        let deps = p["dependencies"]
            .as_array()
            .expect("a dependency list")
            .iter()
            .filter(|d| d["kind"].as_str() != Some("dev"))
            .map(|d| family_member(d["name"].as_str().expect("a dependency name")))
            .collect();
        packages.insert(name, Package { lib, deps });
    }
    packages
}

/// The name the rules use for a package: the library name a member of the
/// family is published under `fdwarden-` with (`fdwarden-filemanager` is
/// `filemanager`, what the code calls it); other names as they are.
fn family_member(package: &str) -> String {
    package
        .strip_prefix("fdwarden-")
        .unwrap_or(package)
        .to_owned()
}

/// Module graph of a crate: top-level module -> the top-level modules it
/// names through `crate::` paths.
type Graph = BTreeMap<String, BTreeSet<String>>;

/// The first top-level names of every `crate::` path in `source`:
/// `crate::a::b` gives `a`, `crate::{a, b::c}` gives `a` and `b`.
/// Comments and literals are not code ([`code_of`]).
fn crate_paths(source: &str) -> BTreeSet<String> {
    let mut names: BTreeSet<String> = rooted_paths(&code_of(source))
        .into_iter()
        .filter(|(_, path)| path[0] == "crate")
        .filter_map(|(_, mut path)| (path.len() > 1).then(|| path.swap_remove(1)))
        .collect();
    names.retain(|n| !n.is_empty() && n != "self" && n != "super");
    names
}

/// The module graph of `files` (top-level module, source), keeping only
/// edges to `modules` and no self-edges.
fn module_graph(files: &[(String, String)], modules: &BTreeSet<String>) -> Graph {
    let mut graph: Graph = modules
        .iter()
        .map(|m| (m.clone(), BTreeSet::new()))
        .collect();
    for (module, source) in files {
        let used = crate_paths(source)
            .into_iter()
            .filter(|n| modules.contains(n) && n != module);
        graph.entry(module.clone()).or_default().extend(used);
    }
    graph
}

/// A cycle of `graph` as the path that closes it (`a -> b -> a`), if any.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        node: &str,
        graph: &Graph,
        marks: &mut BTreeMap<String, Mark>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match marks.get(node) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let from = stack.iter().position(|n| n == node).expect("on the stack");
                let mut cycle = stack[from..].to_vec();
                cycle.push(node.to_owned());
                return Some(cycle);
            }
            None => {}
        }
        marks.insert(node.to_owned(), Mark::Open);
        stack.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, marks, stack) {
                return Some(cycle);
            }
        }
        stack.pop();
        marks.insert(node.to_owned(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut marks, &mut Vec::new()))
}

/// Why `graph` breaks the no-cycle rule, if it does.
fn check_acyclic(graph: &Graph) -> Option<String> {
    find_cycle(graph).map(|cycle| {
        format!(
            "the daemon's modules import each other in a cycle: {}",
            cycle.join(" -> ")
        )
    })
}

/// The daemon's source directory.
fn daemon_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file below `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("a readable source directory") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// The daemon's top-level modules and the sources of each (a file
/// `src/x.rs` or anything under `src/x/` belongs to `x`; the crate root
/// files `lib.rs` and `main.rs` to none).
fn daemon_modules() -> (BTreeSet<String>, Vec<(String, String)>) {
    let src = daemon_src();
    let mut modules = BTreeSet::new();
    let mut files = Vec::new();
    for path in rust_files(&src) {
        let rel = path.strip_prefix(&src).expect("below src");
        let mut parts = rel.components();
        let first = parts.next().expect("a path").as_os_str().to_string_lossy();
        let module = match parts.next() {
            Some(_) => first.into_owned(),
            None => first.trim_end_matches(".rs").to_owned(),
        };
        if module == "lib" || module == "main" {
            continue;
        }
        let source = std::fs::read_to_string(&path).expect("a readable source file");
        modules.insert(module.clone());
        files.push((module, source));
    }
    (modules, files)
}

// Module graphs of every crate, nested modules included.

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Where the comment or literal that starts at `at` in `source` ends, if
/// one does: a line or block comment, a string (raw, byte, C), or a
/// character literal (not a lifetime or a label).
fn skipped_end(source: &str, at: usize) -> Option<usize> {
    let bytes = source.as_bytes();
    let rest = &bytes[at..];
    if rest.starts_with(b"//") {
        return Some(at + rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len()));
    }
    if rest.starts_with(b"/*") {
        let (mut depth, mut j) = (0usize, at);
        while j < bytes.len() {
            if bytes[j..].starts_with(b"/*") {
                depth += 1;
                j += 2;
            } else if bytes[j..].starts_with(b"*/") {
                depth -= 1;
                j += 2;
                if depth == 0 {
                    return Some(j);
                }
            } else {
                j += 1;
            }
        }
        return Some(bytes.len());
    }
    // A literal's prefix (`b`, `c`, `r`, `br`, `cr`) starts no identifier.
    if at > 0 && is_ident_byte(bytes[at - 1]) {
        return None;
    }
    let mut j = at;
    if matches!(bytes.get(j), Some(b'b' | b'c')) {
        j += 1;
    }
    if bytes.get(j) == Some(&b'r') {
        let mut k = j + 1;
        while bytes.get(k) == Some(&b'#') {
            k += 1;
        }
        if bytes.get(k) != Some(&b'"') {
            return None; // an identifier (`r#type` too)
        }
        let close: Vec<u8> = std::iter::once(b'"')
            .chain(std::iter::repeat_n(b'#', k - j - 1))
            .collect();
        let body = k + 1;
        return Some(
            bytes[body..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map_or(bytes.len(), |p| body + p + close.len()),
        );
    }
    match bytes.get(j) {
        Some(b'"') => {
            let mut k = j + 1;
            while k < bytes.len() && bytes[k] != b'"' {
                k += if bytes[k] == b'\\' { 2 } else { 1 };
            }
            Some((k + 1).min(bytes.len()))
        }
        Some(b'\'') => {
            let after = &source[j + 1..];
            let first = after.chars().next()?;
            if first == '\\' {
                // An escape: the character after the backslash, then up to
                // the closing quote ('\'', '\n', '\u{..}').
                let escaped = after[1..].chars().next()?.len_utf8();
                let close = after[1 + escaped..].find('\'')?;
                Some(j + 1 + 1 + escaped + close + 1)
            } else if after[first.len_utf8()..].starts_with('\'') {
                Some(j + 1 + first.len_utf8() + 1)
            } else {
                None // a lifetime or a label
            }
        }
        _ => None,
    }
}

/// `source` with its comments and its string and character literals
/// blanked (every byte a space but newlines), so that only code is left
/// and an offset in it is the same offset in `source`.
fn code_of(source: &str) -> String {
    let mut out = source.as_bytes().to_vec();
    let mut at = 0;
    while at < out.len() {
        match skipped_end(source, at) {
            Some(end) => {
                for b in &mut out[at..end] {
                    if *b != b'\n' {
                        *b = b' ';
                    }
                }
                at = end;
            }
            None => at += 1,
        }
    }
    String::from_utf8(out).expect("blanking whole literals keeps UTF-8")
}

/// A reader of paths in code.
struct PathReader<'a> {
    code: &'a [u8],
    at: usize,
}

impl PathReader<'_> {
    fn skip_space(&mut self) {
        while self.code.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_space();
        self.code.get(self.at).copied()
    }

    fn ident(&mut self) -> Option<String> {
        self.skip_space();
        let start = self.at;
        while self.code.get(self.at).is_some_and(|&b| is_ident_byte(b)) {
            self.at += 1;
        }
        (self.at > start).then(|| String::from_utf8_lossy(&self.code[start..self.at]).into_owned())
    }

    /// Takes a `::`, if one comes next.
    fn separator(&mut self) -> bool {
        self.skip_space();
        let found = self.code[self.at..].starts_with(b"::");
        if found {
            self.at += 2;
        }
        found
    }

    /// The paths that go on from `prefix` just after its `::`: one, or
    /// one per item of a group (`{a, b::{c, d}}`), nested groups read.
    fn tree(&mut self, mut prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
        loop {
            if self.peek() == Some(b'{') {
                self.at += 1;
                self.group(&prefix, out);
                return;
            }
            match self.ident() {
                Some(segment) => {
                    prefix.push(segment);
                    if !self.separator() {
                        out.push(prefix);
                        return;
                    }
                }
                // `*`, `<T>`: the path names what it has so far.
                None => {
                    out.push(prefix);
                    return;
                }
            }
        }
    }

    /// The items of a group whose `{` was just read, up to its `}`.
    fn group(&mut self, prefix: &[String], out: &mut Vec<Vec<String>>) {
        loop {
            match self.peek() {
                None => return,
                Some(b'}') => {
                    self.at += 1;
                    return;
                }
                Some(b',') => self.at += 1,
                Some(b'{') => {
                    self.at += 1;
                    self.group(prefix, out);
                }
                Some(b) if is_ident_byte(b) => {
                    let first = self.ident().expect("an identifier");
                    let item = [prefix, &[first]].concat();
                    if self.separator() {
                        self.tree(item, out);
                    } else {
                        out.push(item);
                        // `as name`: not a path.
                        if self.peek().is_some_and(is_ident_byte)
                            && self.ident().as_deref() == Some("as")
                        {
                            self.ident();
                        }
                    }
                }
                Some(_) => self.at += 1, // `*`
            }
        }
    }
}

/// Every path in `code` (see [`code_of`]) that starts at `crate`,
/// `super` or `self` and goes on with `::`, with its offset, groups read
/// out: `use crate::a::{b, c::d}` gives `crate a b` and `crate a c d`.
fn rooted_paths(code: &str) -> Vec<(usize, Vec<String>)> {
    let bytes = code.as_bytes();
    let mut paths = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        if !is_ident_byte(bytes[at]) {
            at += 1;
            continue;
        }
        let start = at;
        while at < bytes.len() && is_ident_byte(bytes[at]) {
            at += 1;
        }
        let word = &code[start..at];
        if !matches!(word, "crate" | "super" | "self") {
            continue;
        }
        // Not `$crate`, nor the middle of a path (`a::self`).
        let before = code[..start].trim_end();
        if before.ends_with('$') || before.ends_with("::") {
            continue;
        }
        let mut reader = PathReader { code: bytes, at };
        if !reader.separator() {
            continue;
        }
        let mut found = Vec::new();
        reader.tree(vec![word.to_owned()], &mut found);
        paths.extend(found.into_iter().map(|path| (start, path)));
        at = reader.at;
    }
    paths
}

/// An inline module (`mod name { ... }`) of `code`: its name and the
/// offsets of its braces.
fn inline_modules(code: &str) -> Vec<(String, std::ops::Range<usize>)> {
    let bytes = code.as_bytes();
    let mut modules = Vec::new();
    for (at, _) in code.match_indices("mod") {
        if at > 0 && is_ident_byte(bytes[at - 1]) {
            continue;
        }
        let mut reader = PathReader {
            code: bytes,
            at: at + 3,
        };
        if !reader
            .code
            .get(reader.at)
            .is_some_and(u8::is_ascii_whitespace)
        {
            continue;
        }
        let Some(name) = reader.ident() else { continue };
        if reader.peek() != Some(b'{') {
            continue;
        }
        let open = reader.at;
        let mut depth = 0usize;
        let close = bytes[open..]
            .iter()
            .position(|&b| {
                match b {
                    b'{' => depth += 1,
                    b'}' => depth -= 1,
                    _ => {}
                }
                depth == 0
            })
            .map_or(bytes.len(), |p| open + p);
        modules.push((name, open..close));
    }
    modules
}

/// The `mod name;` declarations of `code`: offset, the inline modules
/// they are inside, and the name.
fn module_declarations(code: &str) -> Vec<(usize, Vec<String>, String)> {
    let bytes = code.as_bytes();
    let inline = inline_modules(code);
    let mut declarations = Vec::new();
    for (at, _) in code.match_indices("mod") {
        if (at > 0 && is_ident_byte(bytes[at - 1]))
            || !bytes.get(at + 3).is_some_and(u8::is_ascii_whitespace)
        {
            continue;
        }
        let mut reader = PathReader {
            code: bytes,
            at: at + 3,
        };
        let Some(name) = reader.ident() else { continue };
        if reader.peek() != Some(b';') {
            continue;
        }
        let within = inline
            .iter()
            .filter(|(_, braces)| braces.contains(&at))
            .map(|(name, _)| name.clone())
            .collect();
        declarations.push((at, within, name));
    }
    declarations
}

/// The file a `#[path = "..."]` attribute on the declaration at `at`
/// names, if it has one: read in `source` between the item before the
/// declaration and the declaration (`code` says where items end).
fn path_attribute(source: &str, code: &str, at: usize) -> Option<String> {
    let item_start = code[..at].rfind([';', '{', '}']).map_or(0, |p| p + 1);
    let attributes = &source[item_start..at];
    let path = attributes.find("#[path")?;
    let rest = &attributes[path..];
    let open = rest.find('"')? + 1;
    let close = open + rest[open..].find('"')?;
    Some(rest[open..close].to_owned())
}

/// One source file of a crate, as its module tree reaches it.
#[derive(Debug, Clone)]
struct ModuleFile {
    /// The module it is: its path from the crate root (empty: the root).
    module: Vec<String>,
    file: PathBuf,
    source: String,
}

/// The files of the crate whose root is `root` (`src/lib.rs`), each with
/// the module it is, found by following the `mod` declarations (and
/// their `#[path]`s) from the root, as rustc does. A declared module
/// with no file is left out: one compiled out (`#[cfg]`) needs none, and
/// one the reader looked for in the wrong place leaves its file
/// unreached, which [`unreached_files`] reports.
fn module_tree(root: &Path) -> Vec<ModuleFile> {
    fn visit(file: &Path, module: Vec<String>, out: &mut Vec<ModuleFile>) {
        let source =
            std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let code = code_of(&source);
        let dir = file.parent().expect("a file in a directory");
        let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
        // A `mod.rs` or a crate root holds its children beside it; `x.rs`
        // holds them in `x/`.
        let children = if module.is_empty() || name == "mod.rs" {
            dir.to_path_buf()
        } else {
            dir.join(name.trim_end_matches(".rs"))
        };
        for (at, within, child) in module_declarations(&code) {
            let path = [module.as_slice(), &within, std::slice::from_ref(&child)].concat();
            let file = match path_attribute(&source, &code, at) {
                Some(p) => dir.join(p),
                None => {
                    let dir = within.iter().fold(children.clone(), |d, m| d.join(m));
                    let flat = dir.join(format!("{child}.rs"));
                    if flat.is_file() {
                        flat
                    } else {
                        dir.join(&child).join("mod.rs")
                    }
                }
            };
            if file.is_file() {
                visit(&file, path, out);
            }
        }
        out.push(ModuleFile {
            module,
            file: file.to_path_buf(),
            source,
        });
    }
    let mut files = Vec::new();
    visit(root, Vec::new(), &mut files);
    files
}

/// Each use of a module by another in `files`: (the module whose file
/// names it, the module named), the named one being the longest module
/// path of the crate the reference starts with (`crate::a::b::f` names
/// `a::b` when that is a module, else `a`). `super` and `self` count from
/// the module the code is in, inline modules included.
fn module_uses(files: &[ModuleFile]) -> BTreeSet<(Vec<String>, Vec<String>)> {
    let known: BTreeSet<&[String]> = files.iter().map(|f| f.module.as_slice()).collect();
    let mut uses = BTreeSet::new();
    for f in files {
        let code = code_of(&f.source);
        let inline = inline_modules(&code);
        for (at, path) in rooted_paths(&code) {
            let mut target: Vec<String> = f.module.clone();
            target.extend(
                inline
                    .iter()
                    .filter(|(_, braces)| braces.contains(&at))
                    .map(|(name, _)| name.clone()),
            );
            for segment in &path {
                match segment.as_str() {
                    "crate" => target.clear(),
                    "super" => {
                        target.pop();
                    }
                    "self" => {}
                    _ => target.push(segment.clone()),
                }
            }
            let named = (0..=target.len())
                .rev()
                .map(|n| &target[..n])
                .find(|p| known.contains(p))
                .expect("the crate root is a module");
            uses.insert((f.module.clone(), named.to_vec()));
        }
    }
    uses
}

/// Module graphs of a crate, one per parent module (the key): an edge
/// `a -> b` between two of its children when code in `a` (or below it)
/// names `b` (or something below it). A module naming its parent or its
/// children is no edge: a child uses what its parent holds, a parent
/// declares its children.
type ScopedGraphs = BTreeMap<Vec<String>, Graph>;

fn scoped_graphs(uses: &BTreeSet<(Vec<String>, Vec<String>)>) -> ScopedGraphs {
    let mut graphs = ScopedGraphs::new();
    for (from, to) in uses {
        let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
        if common == from.len() || common == to.len() {
            continue;
        }
        let graph = graphs.entry(from[..common].to_vec()).or_default();
        graph.entry(to[common].clone()).or_default();
        graph
            .entry(from[common].clone())
            .or_default()
            .insert(to[common].clone());
    }
    graphs
}

/// The strongly connected components of `graph` with more than one
/// module: each holds at least one cycle, and no cycle spans two.
fn tangles(graph: &Graph) -> Vec<BTreeSet<String>> {
    struct Tarjan<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        found: Vec<BTreeSet<String>>,
    }
    impl<'g> Tarjan<'g> {
        fn visit(&mut self, node: &'g str) {
            let i = self.index.len();
            self.index.insert(node, i);
            self.low.insert(node, i);
            self.stack.push(node);
            for next in self.graph.get(node).into_iter().flatten() {
                if !self.index.contains_key(next.as_str()) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next.as_str()]);
                    self.low.insert(node, low);
                } else if self.stack.contains(&next.as_str()) {
                    let low = self.low[node].min(self.index[next.as_str()]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let at = self
                    .stack
                    .iter()
                    .position(|n| *n == node)
                    .expect("on the stack");
                let component: BTreeSet<String> =
                    self.stack.drain(at..).map(str::to_owned).collect();
                if component.len() > 1 {
                    self.found.push(component);
                }
            }
        }
    }
    let mut tarjan = Tarjan {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !tarjan.index.contains_key(node.as_str()) {
            tarjan.visit(node);
        }
    }
    tarjan.found.sort();
    tarjan.found
}

/// Why `krate`'s module graphs break the no-cycle rule: one line per
/// tangle of modules (see [`tangles`]), with a cycle through it.
fn check_crate_acyclic(krate: &str, graphs: &ScopedGraphs) -> Vec<String> {
    let mut offences = Vec::new();
    for (scope, graph) in graphs {
        for tangle in tangles(graph) {
            let within: Graph = tangle
                .iter()
                .map(|m| {
                    let next = graph[m].intersection(&tangle).cloned().collect();
                    (m.clone(), next)
                })
                .collect();
            let cycle = find_cycle(&within).expect("a tangle holds a cycle");
            let named: Vec<String> = cycle
                .iter()
                .map(|m| {
                    [scope.as_slice(), std::slice::from_ref(m)]
                        .concat()
                        .join("::")
                })
                .collect();
            offences.push(format!(
                "{krate}: modules import each other in a cycle: {}",
                named.join(" -> ")
            ));
        }
    }
    offences
}

/// Every `.rs` file below `src` that `trees` do not reach: a module the
/// reader missed (or a file nothing compiles).
fn unreached_files(src: &Path, trees: &[ModuleFile]) -> Vec<String> {
    let reached: BTreeSet<PathBuf> = trees
        .iter()
        .map(|f| f.file.canonicalize().expect("a file"))
        .collect();
    rust_files(src)
        .into_iter()
        .filter(|p| !reached.contains(&p.canonicalize().expect("a file")))
        .map(|p| {
            format!(
                "{} is in no module tree (a `mod` the reader missed?)",
                p.display()
            )
        })
        .collect()
}

/// The library crates under `crates/` (name, `src`), and the daemon's.
fn crates_to_read() -> Vec<(String, PathBuf)> {
    let crates = workspace_root().join("crates");
    let mut found: Vec<(String, PathBuf)> = std::fs::read_dir(&crates)
        .expect("a crates directory")
        .map(|e| e.expect("a directory entry").path())
        .filter(|dir| dir.join("src/lib.rs").is_file())
        .map(|dir| {
            let name = dir
                .file_name()
                .expect("a name")
                .to_string_lossy()
                .into_owned();
            (name, dir.join("src"))
        })
        .collect();
    found.sort();
    found.push(("fileserver".to_owned(), daemon_src()));
    found
}

/// Every crate's offences: module cycles, and files no tree reaches.
/// A crate's roots are `lib.rs` and `main.rs` (another crate, the binary).
fn check_crates_modules() -> (Vec<String>, BTreeMap<String, usize>) {
    let mut offences = Vec::new();
    let mut modules = BTreeMap::new();
    for (krate, src) in crates_to_read() {
        let mut reached = Vec::new();
        for root in ["lib.rs", "main.rs"] {
            if !src.join(root).is_file() {
                continue;
            }
            let tree = module_tree(&src.join(root));
            offences.extend(check_crate_acyclic(
                &krate,
                &scoped_graphs(&module_uses(&tree)),
            ));
            reached.extend(tree);
        }
        offences.extend(unreached_files(&src, &reached));
        modules.insert(krate, reached.len());
    }
    (offences, modules)
}

/// A protocol engine of the daemon: the modules that speak it (a module
/// covers those below it).
#[derive(Debug)]
struct Engine {
    name: &'static str,
    modules: &'static [&'static str],
}

/// The daemon's engines. Each answers through `decide` and shares the
/// modules no engine owns (`exchange`, `wire`, `state`, `accesslog`,
/// `http::forwarded`: the forwarded client address every engine reads);
/// none uses another's.
const ENGINES: &[Engine] = &[
    Engine {
        name: "HTTP/1.1",
        // The hand-written engine: it reads (conn), parses (http::request)
        // and writes (send).
        modules: &["conn", "http::request", "send"],
    },
    Engine {
        name: "HTTP/2",
        modules: &["h2conn"],
    },
    Engine {
        name: "HTTP/3",
        modules: &["h3conn"],
    },
];

/// Uses of one engine by another that hand a connection over rather than
/// share its code: (from, to, why).
const HANDOFFS: &[(&str, &str, &str)] = &[(
    "conn",
    "h2conn",
    "h2c: a plaintext connection that opens with the HTTP/2 preface goes, \
     with the bytes read, to HTTP/2's engine (RFC 9113 3.3)",
)];

/// The engine module that `module` is or is below, and its engine.
fn engine_of(module: &[String]) -> Option<(&'static str, &'static Engine)> {
    let path = module.join("::");
    ENGINES.iter().find_map(|engine| {
        engine
            .modules
            .iter()
            .find(|m| path == **m || path.starts_with(&format!("{m}::")))
            .map(|m| (*m, engine))
    })
}

/// Uses of one engine's module by another engine's, but for the handoffs.
fn check_engines(uses: &BTreeSet<(Vec<String>, Vec<String>)>) -> Vec<String> {
    uses.iter()
        .filter_map(|(from, to)| {
            let (from_module, from_engine) = engine_of(from)?;
            let (to_module, to_engine) = engine_of(to)?;
            let handoff = HANDOFFS
                .iter()
                .any(|&(a, b, _)| a == from_module && b == to_module);
            (from_engine.name != to_engine.name && !handoff).then(|| {
                format!(
                    "{} ({}) uses {} ({}): an engine uses shared modules, not another engine",
                    from.join("::"),
                    from_engine.name,
                    to.join("::"),
                    to_engine.name
                )
            })
        })
        .collect()
}

/// The crates no engine may use: `servedir` is the tower layer for
/// embedders; the engines share `request_context`, `decide` and `render`
/// and render the plan on their own wire.
const NOT_FOR_ENGINES: &[&str] = &["servedir"];

/// Which of `crates` each module of `files` names in code (a whole
/// identifier, not a field or a path's later segment: `servedir::X`,
/// `use servedir;`), as (module, crate).
fn crate_uses(files: &[ModuleFile], crates: &[&str]) -> BTreeSet<(Vec<String>, String)> {
    let names = |code: &str, name: &str| {
        code.match_indices(name).any(|(at, _)| {
            let glued = code[..at].bytes().next_back().is_some_and(is_ident_byte);
            let before = code[..at].trim_end().bytes().next_back();
            let after = code.as_bytes().get(at + name.len()).copied();
            !glued
                && !before.is_some_and(|b| b == b'.' || b == b':')
                && !after.is_some_and(is_ident_byte)
        })
    };
    let mut uses = BTreeSet::new();
    for f in files {
        let code = code_of(&f.source);
        for krate in crates.iter().filter(|c| names(&code, c)) {
            uses.insert((f.module.clone(), krate.to_string()));
        }
    }
    uses
}

/// Uses of a crate of [`NOT_FOR_ENGINES`] by an engine's module: `uses`
/// are (module, crate) pairs.
fn check_engine_crates(uses: &BTreeSet<(Vec<String>, String)>) -> Vec<String> {
    uses.iter()
        .filter(|(_, krate)| NOT_FOR_ENGINES.contains(&krate.as_str()))
        .filter_map(|(module, krate)| {
            let (_, engine) = engine_of(module)?;
            Some(format!(
                "{} ({}) uses {krate}: the tower layer is for embedders; an engine \
                 decides through decide and renders the plan itself",
                module.join("::"),
                engine.name
            ))
        })
        .collect()
}

// The rules against the real tree.

#[test]
fn workspace_manifests_keep_the_crate_rules() {
    let offences = check_crates(&workspace_packages());
    assert!(offences.is_empty(), "{}", offences.join("\n"));
}

#[test]
fn daemon_module_graph_is_read_from_the_sources() {
    let (modules, files) = daemon_modules();
    assert!(
        modules.contains("conn") && modules.contains("http"),
        "{modules:?}"
    );
    let graph = module_graph(&files, &modules);
    assert!(
        graph
            .get("server")
            .is_some_and(|used| used.contains("conn")),
        "server.rs names crate::conn: {graph:?}"
    );
}

#[test]
fn daemon_modules_form_no_cycle() {
    let (modules, files) = daemon_modules();
    assert!(modules.contains("conn"), "no daemon modules found");
    if let Some(offence) = check_acyclic(&module_graph(&files, &modules)) {
        panic!("{offence}");
    }
}

#[test]
fn daemon_engines_do_not_use_servedir() {
    let tree = module_tree(&daemon_src().join("lib.rs"));
    let uses = crate_uses(&tree, NOT_FOR_ENGINES);
    let offences = check_engine_crates(&uses);
    assert!(offences.is_empty(), "{}", offences.join("\n"));
    // Read, not passed for want of reading: every engine module is there.
    let known: BTreeSet<String> = tree.iter().map(|f| f.module.join("::")).collect();
    for module in ENGINES.iter().flat_map(|e| e.modules) {
        assert!(known.contains(*module), "engine module {module} not found");
    }
}

#[test]
fn no_crate_has_a_module_cycle() {
    let (offences, modules) = check_crates_modules();
    assert!(offences.is_empty(), "{}", offences.join("\n"));
    // Read, not passed for want of reading: the crates and their nested
    // modules are there.
    for (krate, at_least) in [("filemanager", 30), ("h2wire", 4), ("fileserver", 20)] {
        assert!(
            modules.get(krate).is_some_and(|&n| n >= at_least),
            "{krate}: {modules:?}"
        );
    }
}

#[test]
fn daemon_engines_do_not_use_each_other() {
    let tree = module_tree(&daemon_src().join("lib.rs"));
    let known: BTreeSet<String> = tree.iter().map(|f| f.module.join("::")).collect();
    for module in ENGINES.iter().flat_map(|e| e.modules) {
        assert!(
            known.contains(*module),
            "engine module {module} not found (renamed? update ENGINES): {known:?}"
        );
    }
    let offences = check_engines(&module_uses(&tree));
    assert!(offences.is_empty(), "{}", offences.join("\n"));
}

// Each rule fails when it should.

fn packages(list: &[(&str, bool, &[&str])]) -> Packages {
    list.iter()
        .map(|&(name, lib, deps)| {
            let deps = deps.iter().map(|d| d.to_string()).collect();
            (name.to_owned(), Package { lib, deps })
        })
        .collect()
}

fn graph(edges: &[(&str, &str)]) -> Graph {
    let mut g = Graph::new();
    for &(from, to) in edges {
        g.entry(from.to_owned()).or_default().insert(to.to_owned());
        g.entry(to.to_owned()).or_default();
    }
    g
}

/// A workspace that keeps every rule, to break one rule at a time.
fn good_workspace() -> Packages {
    packages(&[
        ("announce", true, &[]),
        ("fdtable", true, &["announce", "libc"]),
        ("pathcache", true, &["announce", "foldhash"]),
        ("filemanager", true, &["fdtable", "pathcache", "tokio"]),
        ("httpfile", true, &["httpdate", "mime_guess"]),
        ("hpack", true, &[]),
        ("h2wire", true, &["hpack"]),
        ("h3wire", true, &["hpack", "h2wire"]),
        (
            "siterules",
            true,
            &["httpfile", "serde", "bcrypt", "subtle", "base64"],
        ),
        ("servedir", true, &["filemanager", "httpfile", "http"]),
        ("fileserver", true, &["servedir", "hyper"]),
    ])
}

#[test]
fn a_workspace_that_keeps_the_rules_passes() {
    assert_eq!(check_crates(&good_workspace()), Vec::<String>::new());
}

#[test]
fn httpfile_allow_list_names_the_offending_dependency() {
    let mut ws = good_workspace();
    ws.get_mut("httpfile").unwrap().deps.insert("tokio".into());
    let offences = check_crates(&ws);
    assert_eq!(offences.len(), 1, "{offences:?}");
    assert!(
        offences[0].starts_with("httpfile depends on `tokio`"),
        "{offences:?}"
    );
}

#[test]
fn hpack_may_depend_on_nothing() {
    let mut ws = good_workspace();
    ws.get_mut("hpack").unwrap().deps.insert("bytes".into());
    let offences = check_crates(&ws);
    assert_eq!(offences.len(), 1, "{offences:?}");
    assert!(
        offences[0].starts_with("hpack depends on `bytes`"),
        "{offences:?}"
    );
}

#[test]
fn data_structures_may_not_depend_on_the_crates_above_them() {
    for krate in ["announce", "fdtable", "pathcache"] {
        for above in ["filemanager", "httpfile", "servedir", "fileserver"] {
            let mut ws = good_workspace();
            ws.get_mut(krate).unwrap().deps.insert(above.into());
            let offences = check_crates(&ws);
            let expected = format!("{krate} depends on `{above}`");
            assert!(
                offences.iter().any(|o| o.starts_with(&expected)),
                "{krate} -> {above}: {offences:?}"
            );
        }
    }
}

#[test]
fn filemanager_may_not_depend_on_an_http_layer() {
    for layer in ["servedir", "httpfile", "http", "hyper", "tower-service"] {
        let mut ws = good_workspace();
        ws.get_mut("filemanager").unwrap().deps.insert(layer.into());
        let offences = check_crates(&ws);
        let expected = format!("filemanager depends on `{layer}`");
        assert!(
            offences.iter().any(|o| o.starts_with(&expected)),
            "{layer}: {offences:?}"
        );
    }
}

#[test]
fn no_library_may_depend_on_the_daemon() {
    let mut ws = good_workspace();
    ws.get_mut("servedir")
        .unwrap()
        .deps
        .insert("fileserver".into());
    ws.insert(
        "tool".into(),
        Package {
            lib: false,
            deps: ["fileserver".to_string()].into(),
        },
    );
    let offences = check_crates(&ws);
    assert_eq!(
        offences,
        ["library crate servedir depends on `fileserver`: nothing may sit above the daemon"],
        "a binary-only package may depend on the daemon, a library may not"
    );
}

#[test]
fn decide_rule_applies_only_once_decide_exists() {
    let mut ws = good_workspace();
    assert!(check_crates(&ws).is_empty(), "no decide crate: no offence");
    ws.extend(packages(&[("decide", true, &["filemanager", "httpfile"])]));
    assert!(check_crates(&ws).is_empty(), "{:?}", check_crates(&ws));
    for layer in ["servedir", "http", "hyper", "tower-service"] {
        let mut ws = ws.clone();
        ws.get_mut("decide").unwrap().deps.insert(layer.into());
        let offences = check_crates(&ws);
        let expected = format!("decide depends on `{layer}`");
        assert!(
            offences.iter().any(|o| o.starts_with(&expected)),
            "{layer}: {offences:?}"
        );
    }
}

#[test]
fn a_required_crate_that_is_missing_is_reported() {
    let mut ws = good_workspace();
    ws.remove("fdtable");
    let offences = check_crates(&ws);
    assert_eq!(offences.len(), 1, "{offences:?}");
    assert!(offences[0].starts_with("fdtable: no such package"));
}

#[test]
fn a_two_module_cycle_is_reported_as_a_path() {
    let g = graph(&[("a", "b"), ("b", "a")]);
    assert_eq!(
        check_acyclic(&g).as_deref(),
        Some("the daemon's modules import each other in a cycle: a -> b -> a")
    );
}

#[test]
fn a_longer_cycle_is_reported_in_order() {
    let g = graph(&[
        ("conn", "stats"),
        ("state", "tls"),
        ("tls", "h2conn"),
        ("h2conn", "state"),
    ]);
    assert_eq!(
        find_cycle(&g).map(|c| c.join(" -> ")).as_deref(),
        Some("h2conn -> state -> tls -> h2conn")
    );
}

#[test]
fn a_graph_without_cycles_passes() {
    let g = graph(&[
        ("server", "conn"),
        ("server", "state"),
        ("conn", "state"),
        ("state", "config"),
    ]);
    assert_eq!(check_acyclic(&g), None);
}

#[test]
fn crate_paths_read_paths_and_groups_and_skip_comments() {
    let source = "use crate::state::State;\n\
                  use crate::{\n    config::{self, Settings},\n    stats,\n};\n\
                  // crate::commented\n\
                  /// [`crate::documented`]\n\
                  let x = mycrate::not_ours();\n\
                  fn f() { crate::accesslog::write(); }\n";
    let names: Vec<String> = crate_paths(source).into_iter().collect();
    assert_eq!(names, ["accesslog", "config", "state", "stats"]);
}

#[test]
fn module_graph_keeps_only_edges_between_modules() {
    let modules: BTreeSet<String> = ["state", "tls"].iter().map(|s| s.to_string()).collect();
    let files = vec![
        (
            "state".to_string(),
            "use crate::tls;\nuse crate::Cli;\nuse crate::state::X;".to_string(),
        ),
        ("tls".to_string(), "use crate::state;".to_string()),
    ];
    let g = module_graph(&files, &modules);
    assert_eq!(g, graph(&[("state", "tls"), ("tls", "state")]));
    assert!(check_acyclic(&g)
        .unwrap()
        .ends_with("state -> tls -> state"));
}

#[test]
fn crate_uses_reads_code_only() {
    let tree = files(&[
        (
            "h3conn",
            "use servedir::ServeDir;\n// servedir in a comment\n",
        ),
        (
            "send",
            "let s = \"servedir::x\"; let n = x.servedir; a::servedir::f();",
        ),
        (
            "conn",
            "fn f() -> servedir :: Body { todo!() }\nlet servedir_like = 1;",
        ),
        ("h2conn", "use servedir;"),
    ]);
    let uses: Vec<(String, String)> = crate_uses(&tree, &["servedir"])
        .into_iter()
        .map(|(m, c)| (m.join("::"), c))
        .collect();
    assert_eq!(
        uses,
        [
            ("conn".to_string(), "servedir".to_string()),
            ("h2conn".to_string(), "servedir".to_string()),
            ("h3conn".to_string(), "servedir".to_string()),
        ]
    );
}

#[test]
fn an_engine_using_servedir_is_reported() {
    let uses: BTreeSet<(Vec<String>, String)> = [
        ("h3conn", "servedir"),
        ("send", "servedir"),
        ("http::request", "servedir"),
        ("server", "servedir"),
        ("h2conn", "tokio"),
        ("render", "decide"),
    ]
    .iter()
    .map(|&(m, c)| (m.split("::").map(str::to_owned).collect(), c.to_string()))
    .collect();
    let offences = check_engine_crates(&uses);
    assert_eq!(
        offences
            .iter()
            .map(|o| o.split(':').next().unwrap())
            .collect::<Vec<_>>(),
        [
            "h3conn (HTTP/3) uses servedir",
            "http",
            "send (HTTP/1.1) uses servedir",
        ]
    );
}

/// Module files from (module path, source) pairs.
fn files(list: &[(&str, &str)]) -> Vec<ModuleFile> {
    list.iter()
        .map(|&(module, source)| ModuleFile {
            module: module
                .split("::")
                .filter(|m| !m.is_empty())
                .map(str::to_owned)
                .collect(),
            file: PathBuf::from(format!("{module}.rs")),
            source: source.to_owned(),
        })
        .collect()
}

fn crate_offences(list: &[(&str, &str)]) -> Vec<String> {
    check_crate_acyclic("k", &scoped_graphs(&module_uses(&files(list))))
}

#[test]
fn code_of_blanks_comments_and_literals_only() {
    let source = "let a = \"crate::x {\"; // crate::y\n\
                  let b = '{'; let c = b'\\''; /* crate::z /* { */ */\n\
                  let d = r#\"crate::w\"#; fn f<'a>(x: &'a str) {}\n";
    let code = code_of(source);
    assert_eq!(code.len(), source.len());
    assert_eq!(code.lines().count(), source.lines().count());
    assert!(!code.contains("crate"), "{code}");
    assert!(code.contains("let b =    ; let c =      ;"), "{code}");
    assert!(code.contains("fn f<'a>(x: &'a str) {}"), "{code}");
    assert_eq!(code.matches('{').count(), 1, "{code}");
}

#[test]
fn rooted_paths_read_groups_nested_groups_and_relative_paths() {
    let code = "use crate::a::{b, c::{d, e as f}, *};\n\
                use super::super::g;\n\
                fn x() { self::h::i(); $crate::no(); a::self; }\n";
    let paths: Vec<String> = rooted_paths(code)
        .into_iter()
        .map(|(_, p)| p.join(" "))
        .collect();
    assert_eq!(
        paths,
        [
            "crate a b",
            "crate a c d",
            "crate a c e",
            "super super g",
            "self h i"
        ]
    );
}

#[test]
fn a_cycle_between_top_level_modules_is_reported() {
    let offences = crate_offences(&[
        ("", "mod census; mod query;"),
        ("census", "use crate::query::Sibling;"),
        ("query", "use crate::census;"),
    ]);
    assert_eq!(
        offences,
        ["k: modules import each other in a cycle: census -> query -> census"]
    );
}

#[test]
fn every_cycle_of_a_crate_is_reported() {
    let offences = crate_offences(&[
        ("a", "use crate::b;"),
        ("b", "use crate::a;"),
        ("c", "use crate::d; use crate::a;"),
        ("d", "use crate::c;"),
    ]);
    assert_eq!(
        offences,
        [
            "k: modules import each other in a cycle: a -> b -> a",
            "k: modules import each other in a cycle: c -> d -> c",
        ]
    );
}

#[test]
fn a_cycle_between_nested_modules_is_reported_with_their_paths() {
    let offences = crate_offences(&[
        ("", "mod backend;"),
        ("backend", "mod blocking; mod uring; use self::uring::Ring;"),
        ("backend::blocking", "use super::uring::Op;"),
        (
            "backend::uring",
            "use crate::backend::{blocking::Blocking};",
        ),
    ]);
    assert_eq!(
        offences,
        ["k: modules import each other in a cycle: \
          backend::blocking -> backend::uring -> backend::blocking"]
    );
}

#[test]
fn a_cycle_through_a_child_of_another_module_is_one_between_the_two() {
    // `sys::windows` uses `resolve`, which uses `sys`: sys and resolve.
    let offences = crate_offences(&[
        ("", "mod resolve; mod sys;"),
        ("resolve", "use crate::sys::OwnedFd;"),
        ("sys", "mod windows;"),
        ("sys::windows", "use crate::resolve::Stat;"),
    ]);
    assert_eq!(
        offences,
        ["k: modules import each other in a cycle: resolve -> sys -> resolve"]
    );
}

#[test]
fn parents_and_children_using_each_other_are_no_cycle() {
    let offences = crate_offences(&[
        ("", "mod backend; use backend::Backend;"),
        (
            "backend",
            "mod uring; use self::uring::Ring; pub struct Counters;",
        ),
        ("backend::uring", "use super::Counters; use crate::Thing;"),
        // `super` in an inline module is the file's module: no edge
        // from `query` to a `census` it does not name.
        ("query", "mod tests { use super::census::X; }"),
        ("census", "use crate::query::Sibling;"),
    ]);
    assert_eq!(offences, Vec::<String>::new());
}

#[test]
fn module_tree_follows_mod_declarations_and_path_attributes() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    let write = |path: &str, text: &str| {
        let path = src.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "lib.rs",
        "mod a;\n// mod commented;\n#[cfg(unix)]\n#[path = \"b_unix.rs\"]\nmod b;\n\
         mod inline { mod c; }\n#[cfg(any())]\nmod compiled_out;\n",
    );
    write("a.rs", "pub(crate) mod d;\n#[cfg(test)]\nmod tests {}\n");
    write("a/d/mod.rs", "");
    write("b_unix.rs", "");
    write("inline/c.rs", "");
    write("stray.rs", "");
    let tree = module_tree(&src.join("lib.rs"));
    let mut modules: Vec<String> = tree.iter().map(|f| f.module.join("::")).collect();
    modules.sort();
    assert_eq!(modules, ["", "a", "a::d", "b", "inline::c"]);
    assert_eq!(
        unreached_files(src, &tree),
        [format!(
            "{} is in no module tree (a `mod` the reader missed?)",
            src.join("stray.rs").display()
        )]
    );
}

#[test]
fn an_engine_using_another_is_reported_but_the_h2c_handoff() {
    let uses: BTreeSet<(Vec<String>, Vec<String>)> = [
        ("h2conn", "conn"),
        ("h3conn", "send"),
        ("conn", "h2conn"),
        ("h2conn", "http::forwarded"),
        ("conn", "http::request"),
        ("h3conn", "render"),
        ("server", "h3conn"),
    ]
    .iter()
    .map(|&(a, b)| {
        let path = |m: &str| m.split("::").map(str::to_owned).collect::<Vec<_>>();
        (path(a), path(b))
    })
    .collect();
    assert_eq!(
        check_engines(&uses),
        [
            "h2conn (HTTP/2) uses conn (HTTP/1.1): an engine uses shared modules, not another engine",
            "h3conn (HTTP/3) uses send (HTTP/1.1): an engine uses shared modules, not another engine",
        ]
    );
}

//! The architecture, executable: which crate may depend on which (read
//! from the workspace manifests through `cargo metadata`), and which
//! module of the daemon may use which (read from its sources).
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
/// `crate::a::b` gives `a`, `crate::{a, b::c}` gives `a` and `b`. Lines
/// whose trimmed start is `//` (comments, doc comments) are skipped.
fn crate_paths(source: &str) -> BTreeSet<String> {
    let code: String = source
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let bytes = code.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let ident_at = |mut at: usize| {
        let start = at;
        while at < bytes.len() && is_ident(bytes[at]) {
            at += 1;
        }
        (&code[start..at], at)
    };
    let skip_space = |mut at: usize| {
        while at < bytes.len() && bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        at
    };
    let mut names = BTreeSet::new();
    let mut from = 0;
    while let Some(found) = code[from..].find("crate::") {
        let start = from + found;
        from = start + "crate::".len();
        if start > 0 && is_ident(bytes[start - 1]) {
            continue; // `mycrate::`, not `crate::`
        }
        let at = skip_space(from);
        if bytes.get(at) != Some(&b'{') {
            let (name, _) = ident_at(at);
            names.insert(name.to_owned());
            continue;
        }
        // A group: the first name of each item at depth 1.
        let mut at = at + 1;
        let mut depth = 1;
        let mut item_start = true;
        while at < bytes.len() && depth > 0 {
            match bytes[at] {
                b'{' => depth += 1,
                b'}' => depth -= 1,
                b',' if depth == 1 => item_start = true,
                b if b.is_ascii_whitespace() => {}
                b if item_start && depth == 1 && is_ident(b) => {
                    let (name, end) = ident_at(at);
                    names.insert(name.to_owned());
                    item_start = false;
                    at = end;
                    continue;
                }
                _ => item_start = false,
            }
            at += 1;
        }
    }
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

/// The lines of `source` outside comments that name `word` (as a whole
/// identifier), as `line number: line`.
fn code_lines_naming(source: &str, word: &str) -> Vec<String> {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    source
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
        .filter(|(_, l)| {
            l.match_indices(word).any(|(at, _)| {
                let before = l[..at].chars().next_back();
                let after = l[at + word.len()..].chars().next();
                !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
            })
        })
        .map(|(n, l)| format!("{}: {}", n + 1, l.trim()))
        .collect()
}

/// Where connection code names `servedir`: `files` are (path, source).
fn check_connection_code(files: &[(String, String)]) -> Vec<String> {
    files
        .iter()
        .flat_map(|(path, source)| {
            code_lines_naming(source, "servedir")
                .into_iter()
                .map(move |l| format!("{path}:{l} (the connection code must not use servedir)"))
        })
        .collect()
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

/// The daemon's connection code: `conn.rs` (or `conn/`) and any `send.rs`
/// or `output.rs` beside it, as (path, source).
fn connection_files() -> Vec<(String, String)> {
    let src = daemon_src();
    let mut paths: Vec<PathBuf> = ["conn.rs", "send.rs", "output.rs"]
        .iter()
        .map(|name| src.join(name))
        .filter(|p| p.is_file())
        .collect();
    if src.join("conn").is_dir() {
        paths.extend(rust_files(&src.join("conn")));
    }
    paths
        .into_iter()
        .map(|p| {
            let source = std::fs::read_to_string(&p).expect("a readable source file");
            let shown = p.strip_prefix(&src).unwrap_or(&p).display().to_string();
            (shown, source)
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
fn connection_code_does_not_use_servedir() {
    let files = connection_files();
    assert!(
        !files.is_empty(),
        "no connection code found (conn.rs moved? update the rule)"
    );
    let offences = check_connection_code(&files);
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
fn servedir_in_connection_code_is_reported() {
    let files = vec![(
        "conn.rs".to_string(),
        "//! Unlike servedir, ...\nuse servedir::stages;\nlet servedir_like = 1;\n".to_string(),
    )];
    assert_eq!(
        check_connection_code(&files),
        ["conn.rs:2: use servedir::stages; (the connection code must not use servedir)"]
    );
    let clean = vec![("conn.rs".to_string(), "use crate::state;\n".to_string())];
    assert!(check_connection_code(&clean).is_empty());
}

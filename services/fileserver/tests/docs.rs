//! The written house against the built one: the claims of
//! `docs/ARCHITECTURE.md` and the other docs that can be checked.
//!
//! - the crate list names every package, and every package it names exists;
//! - the dependency list (`<!-- checked: crate dependencies -->`) is each
//!   Cargo.toml's `[dependencies]` on the workspace's own packages;
//! - the daemon's module list (`<!-- checked: daemon modules -->`) is the
//!   code's `crate::` references, module by module;
//! - every file a doc names in backticks (`send.rs`, `scripts/loom.sh`)
//!   exists.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The ```text block after `<!-- checked: NAME -->`, as `first word ->
/// the comma-separated rest` (`-` for none).
fn checked_block(doc: &str, name: &str) -> BTreeMap<String, BTreeSet<String>> {
    let marker = format!("<!-- checked: {name} -->");
    let after = doc
        .split_once(&marker)
        .unwrap_or_else(|| panic!("no {marker}"))
        .1;
    let body = after
        .split_once("```text\n")
        .and_then(|(_, b)| b.split_once("```"))
        .unwrap_or_else(|| panic!("no text block after {marker}"))
        .0;
    body.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (name, rest) = l.trim().split_once(char::is_whitespace).unwrap_or((l, "-"));
            let deps = rest
                .split(',')
                .map(str::trim)
                .filter(|d| !d.is_empty() && *d != "-")
                .map(String::from)
                .collect();
            (name.to_string(), deps)
        })
        .collect()
}

/// Each package directory of the workspace, by package key (the name its
/// dependents write: `filemanager`, `fileserver`, `benches`).
fn packages() -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    for dir in ["crates", "services"] {
        for e in std::fs::read_dir(repo().join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.join("Cargo.toml").is_file() {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                out.insert(name, p);
            }
        }
    }
    out.insert("benches".into(), repo().join("benches"));
    out
}

/// The keys of a manifest's `[dependencies]` table.
fn dependencies(manifest: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(manifest).unwrap();
    let table: toml::Table = text.parse().unwrap();
    table
        .get("dependencies")
        .and_then(|d| d.as_table())
        .map(|d| d.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn the_crate_list_and_the_dependency_list_are_the_workspace() {
    let arch = read("docs/ARCHITECTURE.md");
    let packages = packages();
    for name in packages.keys().filter(|n| *n != "benches") {
        let dir = packages[name].strip_prefix(repo()).unwrap().to_path_buf();
        let dir = dir.to_string_lossy().replace('\\', "/");
        assert!(
            arch.contains(&format!("\n{dir} ")),
            "docs/ARCHITECTURE.md's crate list does not name {dir}"
        );
    }
    for line in arch.lines() {
        if let Some(rest) = line.strip_prefix("crates/") {
            let name = rest.split_whitespace().next().unwrap();
            assert!(packages.contains_key(name), "crates/{name} does not exist");
        }
    }
    let written = checked_block(&arch, "crate dependencies");
    let own: BTreeSet<&String> = packages.keys().collect();
    let mut built = BTreeMap::new();
    for (name, dir) in &packages {
        let deps: BTreeSet<String> = dependencies(&dir.join("Cargo.toml"))
            .into_iter()
            .filter(|d| own.contains(d))
            .collect();
        built.insert(name.clone(), deps);
    }
    assert_eq!(
        written, built,
        "docs/ARCHITECTURE.md's dependency list against the Cargo.toml files"
    );
}

/// The daemon's modules and the modules each refers to as `crate::x`
/// outside comments and its tests.
fn daemon_modules() -> BTreeMap<String, BTreeSet<String>> {
    let src = repo().join("services/fileserver/src");
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut files = Vec::new();
    let mut dirs = vec![src.clone()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    for f in files {
        let rel = f.strip_prefix(&src).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let module = top.trim_end_matches(".rs").to_string();
        if module == "lib" || module == "main" || rel.ends_with("tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
        let uses = out.entry(module.clone()).or_default();
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for (i, _) in line.match_indices("crate::") {
                let rest = &line[i + "crate::".len()..];
                if let Some(group) = rest.strip_prefix('{') {
                    // `crate::{a, b::c}` on one line: the names at depth 0.
                    let mut depth = 0;
                    let mut item = String::new();
                    for c in group.chars() {
                        match c {
                            '{' => depth += 1,
                            '}' if depth == 0 => break,
                            '}' => depth -= 1,
                            ',' if depth == 0 => {
                                uses.insert(first_ident(&item));
                                item.clear();
                            }
                            c if depth == 0 => item.push(c),
                            _ => {}
                        }
                    }
                    uses.insert(first_ident(&item));
                } else {
                    uses.insert(first_ident(rest));
                }
            }
        }
        uses.remove(&module);
        uses.remove("");
    }
    let names: BTreeSet<String> = out.keys().cloned().collect();
    for uses in out.values_mut() {
        uses.retain(|u| names.contains(u));
    }
    out
}

fn first_ident(s: &str) -> String {
    s.trim()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

#[test]
fn the_daemon_module_list_is_the_code() {
    let arch = read("docs/ARCHITECTURE.md");
    let written = checked_block(&arch, "daemon modules");
    let built = daemon_modules();
    let names: BTreeSet<&String> = written.keys().chain(built.keys()).collect();
    let wrong: Vec<String> = names
        .into_iter()
        .filter(|m| written.get(*m) != built.get(*m))
        .map(|m| {
            format!(
                "{m}: written {:?}, in the code {:?}",
                written.get(m),
                built.get(m)
            )
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "docs/ARCHITECTURE.md's module list against services/fileserver/src:\n{}",
        wrong.join("\n")
    );
}

/// Every tracked text file under the repository but build output.
fn repo_files() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![repo()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                if !matches!(name.as_str(), "target" | ".git" | "node_modules" | "corpus") {
                    dirs.push(p);
                }
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn every_file_a_doc_names_exists() {
    let files = repo_files();
    let names: BTreeSet<String> = files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let rels: Vec<String> = files
        .iter()
        .map(|p| {
            p.strip_prefix(repo())
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/")
        })
        .collect();
    let docs = rels
        .iter()
        .filter(|r| r.ends_with(".md") && !r.ends_with("HISTORY.md"));
    let mut missing = Vec::new();
    for doc in docs {
        let text = read(doc);
        for quoted in text.split('`').skip(1).step_by(2) {
            let ext = [".rs", ".toml", ".sh", ".py", ".yml", ".yaml"];
            let is_file = !quoted.contains(char::is_whitespace)
                && !quoted.contains(['*', '<', '{', '$'])
                && ext.iter().any(|x| quoted.ends_with(x));
            if !is_file {
                continue;
            }
            let found = if quoted.contains('/') {
                let q = quoted.trim_start_matches("./");
                rels.iter().any(|r| r == q || r.ends_with(&format!("/{q}")))
            } else {
                names.contains(quoted)
            };
            if !found {
                missing.push(format!("{doc}: `{quoted}`"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs name files that do not exist:\n{}",
        missing.join("\n")
    );
}

//! Stamps the git commit into the binary for `fileserver_build_info`.
//! `GIT_COMMIT` in the build's environment wins (a container build has no
//! .git); without either the commit is "unknown". (Not a `FILESERVER_*`
//! name: cargo passes `rustc-env` values to test runs too, and the daemon
//! reads `FILESERVER_*` as config keys.)

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}

fn main() {
    println!("cargo:rerun-if-env-changed=GIT_COMMIT");
    let commit = std::env::var("GIT_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=BUILD_GIT_COMMIT={commit}");
    // Rebuild when HEAD moves: HEAD itself, the branch it names, packed refs.
    let mut watched = vec![git(&["rev-parse", "--git-path", "HEAD"])];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(git(&["rev-parse", "--git-path", &branch]));
    }
    watched.push(git(&["rev-parse", "--git-path", "packed-refs"]));
    // Only files that exist: cargo takes a missing one as changed, and a
    // repository without packed refs (a fresh clone's worktree, before
    // `git gc`) then reran this script and relinked the daemon every build.
    // When git packs a ref, its loose file goes: that is a change seen.
    for path in watched.into_iter().flatten() {
        if std::path::Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
}

//! Building the workspace's binaries a run starts (the daemon, the
//! embedded and ceiling servers, h3load) with cargo, and finding them.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{ensure, Context, Result};

/// The workspace's root directory.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or(Path::new("."))
        .to_path_buf()
}

/// Builds binary `bin` of `package` with cargo profile `profile`
/// (`release`, `dev`) and returns its path: a no-op when it is fresh.
pub fn cargo_build(package: &str, bin: &str, profile: &str) -> Result<PathBuf> {
    eprintln!("loadtest: cargo build --profile {profile} -p {package} --bin {bin}");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "build",
            "--profile",
            profile,
            "-p",
            package,
            "--bin",
            bin,
            "--message-format=json-render-diagnostics",
        ])
        .current_dir(workspace_root())
        .stderr(Stdio::inherit())
        .output()
        .context("run cargo build")?;
    ensure!(
        output.status.success(),
        "cargo build --profile {profile} -p {package} --bin {bin} failed"
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["reason"] == "compiler-artifact" && v["target"]["name"] == bin)
        .find_map(|v| v["executable"].as_str().map(PathBuf::from))
        .with_context(|| format!("cargo build did not report a {bin} executable"))
}

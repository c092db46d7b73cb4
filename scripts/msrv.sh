#!/usr/bin/env bash
# Checks that the crates build with the oldest Rust the workspace promises
# (`rust-version` in Cargo.toml): the library crates a user depends on and
# the daemon, with the lock file as it is. A newer std API would pass the
# current toolchain and break a user on the promised one.
#
# Installs that toolchain with rustup (minimal profile) when missing; where
# the download is not possible the check is skipped with a notice (exit 0),
# as scripts/miri.sh does.
set -euo pipefail
cd "$(dirname "$0")/.."
msrv=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
[ -n "$msrv" ] || { echo "msrv: no rust-version in Cargo.toml" >&2; exit 1; }
if ! cargo "+$msrv" --version >/dev/null 2>&1; then
  if ! rustup toolchain install "$msrv" --profile minimal >/dev/null 2>&1; then
    echo "msrv: SKIPPED (could not install Rust $msrv here)"
    exit 0
  fi
fi
echo "msrv: Rust $msrv ($(rustc "+$msrv" --version))"
CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/msrv" cargo "+$msrv" check --locked \
  -p fdwarden-announce -p fdwarden-fdtable -p fdwarden-pathcache -p fdwarden-filemanager -p fdwarden-httpfile -p fdwarden-hpack -p fdwarden-h2wire -p fdwarden-h3wire -p fdwarden-siterules -p fdwarden-decide -p fdwarden-servedir -p fdwarden -p fileserver

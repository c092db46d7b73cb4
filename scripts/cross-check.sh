#!/usr/bin/env bash
# The library crates build beyond Linux: `cargo clippy -D warnings` of each
# for macOS (x86-64 and arm64), FreeBSD and Windows, from this Linux
# machine. No C cross toolchain is needed: zstd (libzstd, C) is a default
# feature that the check leaves out (--no-default-features). Installs the
# targets with rustup when they are missing.
#
# What each target checks (the README's "Platforms" says what runs there):
#   macOS, FreeBSD: announce fdtable pathcache filemanager httpfile siterules decide servedir
#                   and the fdwarden facade (packages fdwarden-*)
#   Windows:        announce pathcache httpfile siterules (fdtable, filemanager, decide and
#                   servedir hold Unix descriptors; not ported yet)
set -euo pipefail
cd "$(dirname "$0")/.."
unix_targets=(x86_64-apple-darwin aarch64-apple-darwin x86_64-unknown-freebsd)
windows_targets=(x86_64-pc-windows-gnu)
unix_crates=(-p fdwarden-announce -p fdwarden-fdtable -p fdwarden-pathcache -p fdwarden-filemanager -p fdwarden-httpfile -p fdwarden-siterules -p fdwarden-decide -p fdwarden-servedir -p fdwarden)
windows_crates=(-p fdwarden-announce -p fdwarden-pathcache -p fdwarden-httpfile -p fdwarden-siterules)

installed=$(rustup target list --installed)
for t in "${unix_targets[@]}" "${windows_targets[@]}"; do
  grep -qx "$t" <<<"$installed" || rustup target add "$t"
done

# A target directory of its own: the host's build cache stays warm.
export CARGO_TARGET_DIR="${CROSS_TARGET_DIR:-$PWD/target/cross}"
status=0
for t in "${unix_targets[@]}"; do
  echo "--- $t"
  cargo clippy --no-default-features --target "$t" "${unix_crates[@]}" -- -D warnings || status=1
done
for t in "${windows_targets[@]}"; do
  echo "--- $t"
  cargo clippy --no-default-features --target "$t" "${windows_crates[@]}" -- -D warnings || status=1
done
exit $status

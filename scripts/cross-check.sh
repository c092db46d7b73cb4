#!/usr/bin/env bash
# The library crates build beyond Linux: `cargo clippy -D warnings` of each
# for macOS (x86-64 and arm64), FreeBSD and Windows, from this Linux
# machine. No C cross toolchain is needed: zstd (libzstd, C) is a default
# feature that the check leaves out (--no-default-features). Installs the
# targets with rustup when they are missing.
#
# Every target checks announce fdtable pathcache filemanager httpfile
# siterules decide servedir and the fdwarden facade (packages fdwarden-*);
# the README's "Platforms" says what runs where. scripts/windows-tests.sh
# also runs the Windows build's tests under Wine.
set -euo pipefail
cd "$(dirname "$0")/.."
targets=(x86_64-apple-darwin aarch64-apple-darwin x86_64-unknown-freebsd x86_64-pc-windows-gnu)
crates=(-p fdwarden-announce -p fdwarden-fdtable -p fdwarden-pathcache -p fdwarden-filemanager -p fdwarden-httpfile -p fdwarden-hpack -p fdwarden-h2wire -p fdwarden-h3wire -p fdwarden-siterules -p fdwarden-decide -p fdwarden-servedir -p fdwarden)

installed=$(rustup target list --installed)
for t in "${targets[@]}"; do
  grep -qx "$t" <<<"$installed" || rustup target add "$t"
done

# A target directory of its own: the host's build cache stays warm.
export CARGO_TARGET_DIR="${CROSS_TARGET_DIR:-$PWD/target/cross}"
status=0
for t in "${targets[@]}"; do
  echo "--- $t"
  cargo clippy --no-default-features --target "$t" "${crates[@]}" -- -D warnings || status=1
done
exit $status

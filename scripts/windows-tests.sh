#!/usr/bin/env bash
# The Windows build of the crates that touch the OS (fdtable, filemanager)
# and those above them (decide, servedir), tested: cross-compiled for
# x86_64-pc-windows-gnu with mingw-w64 and run under Wine
# (scripts/install-deps.sh installs both). Wine stands in for Windows
# where it can: what it lacks (symlink creation, handle counts, POSIX
# rename and delete of open files) the tests say they skip, and the
# symlink tests take a tree made here with `ln -s`, which Wine resolves
# as Windows resolves links.
set -euo pipefail
cd "$(dirname "$0")/.."
target=x86_64-pc-windows-gnu
rustup target list --installed | grep -qx "$target" || rustup target add "$target"
export CARGO_TARGET_DIR="${CROSS_TARGET_DIR:-$PWD/target/cross}"

# Wine 8's bcryptprimitives.dll has no ProcessPrng, which std imports.
dlls="$CARGO_TARGET_DIR/wine-dlls"
mkdir -p "$dlls"
x86_64-w64-mingw32-gcc -shared -O2 -o "$dlls/bcryptprimitives.dll" \
  scripts/wine/bcryptprimitives.c scripts/wine/bcryptprimitives.def -ladvapi32

tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree/root/sub"
printf 'SECRET-OUTSIDE' > "$tree/secret.txt"
printf 'inside' > "$tree/root/inside.txt"
printf 'sub-inside' > "$tree/root/sub/secret.txt"
ln -s ../secret.txt "$tree/root/out_file"
ln -s "$tree" "$tree/root/out_dir"
ln -s inside.txt "$tree/root/in_file"
ln -s sub "$tree/root/in_dir"

export WINEDEBUG=-all WINEPATH="Z:${dlls//\//\\}"
export FILEMANAGER_LINK_TREE="Z:${tree//\//\\}"
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER=wine
crates=(-p fdwarden-fdtable -p fdwarden-filemanager -p fdwarden-decide -p fdwarden-servedir)
status=0
cargo test --target "$target" --no-fail-fast --lib --tests "${crates[@]}" || status=1
# The doc examples one Wine process at a time: launched together, one now
# and then exits 1 before main with no output.
cargo test --target "$target" --no-fail-fast --doc "${crates[@]}" -- --test-threads=1 || status=1
exit $status

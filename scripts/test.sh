#!/usr/bin/env bash
# The README's test command: installs what the tests need on a Debian machine
# (idempotent: apt only runs for missing packages, so it needs root or sudo
# only the first time), then runs every test of the workspace. Extra arguments
# go to nextest, e.g. `scripts/test.sh -E 'binary(listing)'`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
exec cargo nextest run --workspace --no-fail-fast "$@"

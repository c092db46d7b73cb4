#!/usr/bin/env bash
# Installs everything the tests and tools need on a fresh Debian machine.
# Idempotent: safe to run again. Needs root (or sudo) for apt.
set -euo pipefail
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
# fonts-dejavu-core: the load-test chart's font, read at run time (no -dev
# packages: the chart's text rendering is pure Rust).
# valgrind: instruction counts for the benches (scripts/callgrind-fdtable.sh).
# linux-perf: CPU per request by system call (scripts/cpu-by-syscall.sh).
# lighttpd, h2o, caddy: the load harness's peers beside nginx (benches/README.md);
# each runs only when the harness starts it, with a config in its temp dir.
# lighttpd-mod-openssl, lighttpd-mod-deflate: lighttpd's TLS and compression in
# the harness's tls and compression groups (nghttp2-client gives them h2load).
# libnginx-mod-http-brotli-static: nginx's brotli_static, which sends the .br
# siblings in the harness's arena group (without it nginx sends the .gz ones).
# python3-httpx + python3-h2, chromium: real HTTP/2 clients for the HTTPS tests
# (services/fileserver/tests/tls_http2.rs); chromium also screenshots the
# directory listing (tests/listing.rs, into target/tmp/listing-*.png).
# pebble (with pebble-challtestsrv): Let's Encrypt's test ACME server and its
# DNS, which the ACME tests start on loopback (services/fileserver/tests/acme.rs).
# wine, wine64, gcc-mingw-w64-x86-64-win32: the Windows build of the crates,
# cross-compiled and its tests run under Wine (scripts/windows-tests.sh).
# haproxy: the TCP load balancer (PROXY protocol) in front of two replicas
# in services/fileserver/tests/fleet.rs.
pkgs=(prometheus nginx-light libnginx-mod-http-brotli-static wrk curl wfuzz systemd nghttp2-client strace python3-venv util-linux
      fonts-dejavu-core valgrind linux-perf lighttpd lighttpd-mod-openssl lighttpd-mod-deflate h2o caddy
      python3-httpx python3-h2 chromium openssl pebble wine wine64 gcc-mingw-w64-x86-64-win32
      haproxy)
# kubectl (Debian's kubernetes-client, unless one is on PATH): its built-in
# kustomize builds deploy/k8s-fleet for scripts/check-deploy.sh.
command -v kubectl >/dev/null 2>&1 || pkgs+=(kubernetes-client)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy rustfmt
command -v cargo-nextest >/dev/null 2>&1 || cargo install --locked cargo-nextest
# oha: the load harness's latency at a fixed rate, corrected for coordinated
# omission. Debian does not package it. The http3 group's load comes from the
# harness's own h3load (benches/README.md), so oha needs no HTTP/3.
command -v oha >/dev/null 2>&1 || [ -x "$HOME/.cargo/bin/oha" ] || cargo install --locked oha
# aioquic: an HTTP/3 client independent of quinn and h3, for the HTTP/3 tests
# (services/fileserver/tests/http3.rs runs tests/h3client.py with this venv's
# python). PyPI, in a venv under target/ (Debian has no aioquic package).
venv="$(cd "$(dirname "$0")/.." && pwd)/target/test-venv"
if ! "$venv/bin/python" -c 'import aioquic' >/dev/null 2>&1; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check 'aioquic>=1.2,<2'
fi

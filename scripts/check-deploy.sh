#!/usr/bin/env bash
# Runs every check of deploy/ and prints one line per check:
#   systemd units (systemd-analyze verify + offline security score), Kubernetes
#   manifests (kubernetes-validate, offline schemas), the ServiceMonitor (JSON
#   schema) and cross-file consistency, the ConfigMap's TOML and the image's
#   config (`fileserver check-config`), socket activation (http + admin by name),
#   sd_notify (ready, watchdog, reload, stopping) and the
#   syscall filter against the real daemon, the Dockerfile (hadolint + structure),
#   Prometheus config/rules/rule unit tests (promtool) plus a mutation check of
#   the alert tests, and the dashboard/rules metric names against a real scrape.
# Exits non-zero if any check fails. Needs what scripts/install-deps.sh
# installs (prometheus, systemd, curl, strace) and python3 with venv/pip
# (Debian: python3-venv).
# Python tools go into a venv under $DEPLOY_CHECK_CACHE (default target/deploy-check).
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
CACHE=${DEPLOY_CHECK_CACHE:-$REPO/target/deploy-check}
TARGET_DIR=${CARGO_TARGET_DIR:-$REPO/target}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

failed=0
passed=0
# check NAME CMD...: runs CMD, prints "ok   NAME" or "FAIL NAME" plus CMD's output.
check() {
  local name=$1; shift
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" -eq 0 ]; then
    printf 'ok   %s\n' "$name"; passed=$((passed + 1))
  else
    printf 'FAIL %s\n' "$name"; printf '%s\n' "$out" | sed 's/^/       /'; failed=$((failed + 1))
  fi
}
need() { command -v "$1" >/dev/null 2>&1 || { echo "$1 not found: run scripts/install-deps.sh"; return 1; }; }

# ---------------------------------------------------------------- tools ---
setup_venv() {
  local venv=$CACHE/venv stamp=$CACHE/venv/.requirements
  if [ -x "$venv/bin/python" ] && cmp -s deploy/checks/requirements.txt "$stamp"; then return 0; fi
  rm -rf "$venv"
  python3 -m venv "$venv" || { echo "python3 -m venv failed (Debian: apt-get install python3-venv)"; return 1; }
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r deploy/checks/requirements.txt || return 1
  cp deploy/checks/requirements.txt "$stamp"
}
check "python venv with kubernetes-validate and hadolint ($CACHE/venv)" setup_venv
PY=$CACHE/venv/bin/python
BIN=$TARGET_DIR/debug/fileserver
check "fileserver binary built (cargo build -p fileserver)" cargo build --quiet -p fileserver

# -------------------------------------------------------------- systemd ---
# systemd-analyze verify checks that ExecStart's binary exists and is
# executable, so the units are verified with ExecStart pointing at the binary
# just built (the only change to the copy). verify exits 0 on unknown keys and
# most mistakes and only prints them, so ANY output is a failure.
systemd_verify() {
  need systemd-analyze || return 1
  mkdir -p "$WORK/systemd"
  cp deploy/systemd/fileserver.service deploy/systemd/fileserver.socket deploy/systemd/fileserver-admin.socket "$WORK/systemd/"
  sed -i "s|^ExecStart=/usr/local/bin/fileserver |ExecStart=$BIN |" "$WORK/systemd/fileserver.service"
  grep -q "^ExecStart=$BIN " "$WORK/systemd/fileserver.service" || { echo "ExecStart is not /usr/local/bin/fileserver ..."; return 1; }
  local out
  out=$(cd "$WORK/systemd" && systemd-analyze verify ./fileserver.service ./fileserver.socket ./fileserver-admin.socket 2>&1) || { echo "$out"; return 1; }
  [ -z "$out" ] || { echo "$out"; return 1; }
}
check "systemd-analyze verify fileserver.service fileserver.socket fileserver-admin.socket" systemd_verify
# Exposure score on systemd's 0-10 scale (the threshold is in tenths): keep the
# sandbox at 2.0 or better so a dropped Protect*= line fails CI.
systemd_security() {
  (cd "$WORK/systemd" && systemd-analyze security --offline=true --threshold=20 ./fileserver.service >/dev/null) ||
    { (cd "$WORK/systemd" && systemd-analyze security --offline=true ./fileserver.service | grep -E '^✗|Overall'); return 1; }
}
check "systemd-analyze security --offline: exposure <= 2.0" systemd_security
check "config/fileserver.toml (the unit's --config) passes fileserver check-config" "$BIN" check-config config/fileserver.toml
# The unit's ExecStart under systemd-socket-activate with both named sockets
# (http, admin) and the unit's WatchdogSec: READY=1, HTTP and /metrics served
# through LISTEN_FDS, WATCHDOG=1, SIGHUP's RELOADING=1+MONOTONIC_USEC then
# READY=1, STOPPING=1 and exit 0 on SIGTERM.
check "socket activation (http+admin by name), watchdog, reload + sd_notify with the unit's ExecStart" \
  "$PY" deploy/checks/check_activation.py "$BIN"
# Every system call the daemon makes under traffic (strace -f) must pass the
# unit's SystemCallFilter=, or production would see EPERM where tests pass.
syscalls() { need strace || return 1; "$PY" deploy/checks/check_syscalls.py "$BIN"; }
check "daemon's system calls under traffic pass the unit's SystemCallFilter (strace)" syscalls

# ----------------------------------------------------------- kubernetes ---
# Core manifests against the schemas bundled in the kubernetes-validate wheel
# (--strict: unknown fields are errors). Run in an empty network namespace
# when possible, which proves no schema is fetched. Any WARN (e.g. a kind with
# no schema) fails too: it would otherwise pass unvalidated.
k8s_validate() {
  local files=() f
  for f in deploy/k8s/*.yaml; do
    case $(basename "$f") in kustomization.yaml|servicemonitor.yaml) ;; *) files+=("$f");; esac
  done
  local run=()
  if unshare -n true 2>/dev/null; then run=(unshare -n); fi
  local out
  out=$("${run[@]}" "$CACHE/venv/bin/kubernetes-validate" --strict "${files[@]}" 2>&1) || { echo "$out"; return 1; }
  if grep -Ev '^INFO .* passed for resource' <<<"$out" | grep -q .; then echo "$out"; return 1; fi
  [ "$(grep -c '^INFO' <<<"$out")" -ge "${#files[@]}" ] || { echo "$out"; return 1; }
}
check "kubernetes-validate --strict deploy/k8s (offline schemas, k8s 1.37)" k8s_validate
# The fleet overlay, as `kubectl apply -k` would build it: the same schema
# and cross-file checks on the result, and its config.
fleet_build() {
  need kubectl || return 1
  kubectl kustomize deploy/k8s-fleet >"$WORK/fleet.yaml" 2>"$WORK/fleet.err" || { cat "$WORK/fleet.err"; return 1; }
  mkdir -p "$WORK/fleet"
  "$PY" - "$WORK/fleet.yaml" "$WORK/fleet" <<'PYEOF' || return 1
import pathlib, sys, yaml
out = pathlib.Path(sys.argv[2])
for i, doc in enumerate(d for d in yaml.safe_load_all(open(sys.argv[1])) if d):
    if doc["kind"] != "ServiceMonitor":
        (out / f"{i:02}-{doc['kind'].lower()}.yaml").write_text(yaml.safe_dump(doc))
PYEOF
  local run=()
  if unshare -n true 2>/dev/null; then run=(unshare -n); fi
  local out
  out=$("${run[@]}" "$CACHE/venv/bin/kubernetes-validate" --strict "$WORK"/fleet/*.yaml 2>&1) || { echo "$out"; return 1; }
  if grep -Ev '^INFO .* passed for resource' <<<"$out" | grep -q .; then echo "$out"; return 1; fi
  mkdir -p "$WORK/fleet-config"
  "$PY" deploy/checks/check_manifests.py --deploy deploy --manifests "$WORK/fleet.yaml" --write-config "$WORK/fleet-config" || return 1
  "$BIN" check-config --values-only "$WORK/fleet-config/configmap.toml"
}
check "deploy/k8s-fleet: kubectl kustomize, kubernetes-validate --strict, manifests agree, check-config" fleet_build
# The fleet's sync script against a local "object store" (an rclone shim
# that reads and copies files): the first release, a switch to the next by
# renaming `current`, and the pruning of old releases.
fleet_sync() {
  local d=$WORK/sync
  mkdir -p "$d/bin" "$d/store/releases/r1" "$d/store/releases/r2" "$d/www"
  "$PY" -c 'import sys, yaml
for doc in yaml.safe_load_all(open(sys.argv[1])):
    if doc and doc["metadata"]["name"] == "fileserver-sync-script":
        open(sys.argv[2], "w").write(doc["data"]["sync.sh"])' deploy/k8s-fleet/sync-script.yaml "$d/sync.sh" || return 1
  cat >"$d/bin/rclone" <<'SHIM'
#!/bin/sh
case $1 in
  cat) cat "$2" ;;
  sync) mkdir -p "$4" && cp -a "$3/." "$4/" ;;
  *) exit 2 ;;
esac
SHIM
  chmod +x "$d/bin/rclone"
  echo one >"$d/store/releases/r1/index.html"
  echo two >"$d/store/releases/r2/index.html"
  local env=(env PATH="$d/bin:$PATH" RELEASES="$d/store" CONTENT="$d/www" KEEP=0 SYNC_EVERY=1)
  echo r1 >"$d/store/current"
  (cd "$d/www" && "${env[@]}" sh "$d/sync.sh" once) || return 1
  [ "$(cat "$d/www/current/index.html")" = one ] || { echo "r1 not served"; return 1; }
  echo r2 >"$d/store/current"
  (cd "$d/www" && "${env[@]}" sh "$d/sync.sh" once) || return 1
  [ "$(readlink "$d/www/current")" = releases/r2 ] || { echo "current is $(readlink "$d/www/current")"; return 1; }
  [ "$(cat "$d/www/current/index.html")" = two ] || { echo "r2 not served"; return 1; }
  [ ! -e "$d/www/releases/r1" ] || { echo "r1 kept with KEEP=0"; return 1; }
}
check "deploy/k8s-fleet sync script: first release, switch by rename, pruning" fleet_sync
check "ServiceMonitor JSON schema + manifests agree (ports, probes, selectors, grace, job label)" \
  "$PY" deploy/checks/check_manifests.py --deploy deploy --write-config "$WORK"
# --values-only: their root (/srv/www) is the pod's and the image's, not this host's.
check "ConfigMap fileserver.toml passes fileserver check-config" "$BIN" check-config --values-only "$WORK/configmap.toml"
check "deploy/container.toml (image default) passes fileserver check-config" "$BIN" check-config --values-only deploy/container.toml

# ----------------------------------------------------------- Dockerfile ---
# No Docker engine runs here, so the image is not built; hadolint lints it and
# the structural check pins down what the deployment relies on.
dockerfile_structure() {
  local f=deploy/Dockerfile
  local froms; froms=$(grep -c '^FROM ' "$f")
  [ "$froms" -ge 2 ] || { echo "not multi-stage ($froms FROM lines)"; return 1; }
  grep -Eq '^FROM rust:[0-9][^ ]* AS build$' "$f" || { echo "build stage must be FROM rust:<version> AS build"; return 1; }
  [ "$(grep '^FROM ' "$f" | tail -1)" = "FROM gcr.io/distroless/static-debian12:nonroot" ] || { echo "runtime stage must be distroless/static nonroot"; return 1; }
  grep -q -- 'cargo build --profile dist --locked -p fileserver' "$f" || { echo "no locked dist-profile build of fileserver"; return 1; }
  grep -A3 '^\[profile.dist\]' Cargo.toml | grep -q '^strip = "symbols"' || { echo "profile.dist must strip symbols"; return 1; }
  grep -q -- 'target-feature=+crt-static' "$f" || { echo "binary not built static for a libc-less image"; return 1; }
  grep -q '^COPY --from=build /out/fileserver /usr/local/bin/fileserver$' "$f" || { echo "binary not copied from the build stage"; return 1; }
  grep -Eq '^USER [1-9][0-9]*:[1-9][0-9]*$' "$f" || { echo "USER must be a numeric non-root uid:gid"; return 1; }
  grep -q '^ENTRYPOINT \["/usr/local/bin/fileserver"\]$' "$f" || { echo "ENTRYPOINT must be exec form of the binary"; return 1; }
  grep -q '^EXPOSE 8080 8081$' "$f" || { echo "EXPOSE 8080 8081 missing"; return 1; }
  local copied; copied=$(sed -n 's/^COPY \([a-zA-Z./]*\) .*/\1/p' "$f" | grep -v -- '--from')
  for p in $copied; do [ -e "$p" ] || { echo "COPY source $p does not exist"; return 1; }; done
}
check "Dockerfile structure (multi-stage, static binary, distroless nonroot)" dockerfile_structure
check "hadolint deploy/Dockerfile" "$CACHE/venv/bin/hadolint" deploy/Dockerfile

# ----------------------------------------------------------- prometheus ---
check "promtool check config deploy/prometheus/prometheus.yml" promtool check config deploy/prometheus/prometheus.yml
# Debian's prometheus is built without Kubernetes service discovery, so its
# promtool rejects kubernetes_sd_configs. Then the file is checked with that
# one block swapped for static_configs: the relabel rules (regexes, actions,
# labels) still go through promtool.
k8s_prom_config() {
  local f=deploy/prometheus/prometheus-kubernetes.yml out
  out=$(promtool check config "$f" 2>&1) && return 0
  grep -q 'field kubernetes_sd_configs not found' <<<"$out" || { echo "$out"; return 1; }
  cp deploy/prometheus/*.yml "$WORK/"
  sed -i 's/^    kubernetes_sd_configs:$/    static_configs:/; s/^      - role: pod$/      - targets: ["127.0.0.1:8081"]/' "$WORK/prometheus-kubernetes.yml"
  promtool check config "$WORK/prometheus-kubernetes.yml"
}
check "promtool check config deploy/prometheus/prometheus-kubernetes.yml" k8s_prom_config
check "promtool check rules (recording + alerts)" promtool check rules deploy/prometheus/fileserver.rules.yml deploy/prometheus/fileserver.alerts.yml
check "promtool test rules deploy/prometheus/tests/alerts.test.yml" promtool test rules deploy/prometheus/tests/alerts.test.yml
# Each alert must have a test that makes it fire: delete the alert from a copy
# of the rules and the tests must fail.
alert_mutation() {
  local alerts a m
  alerts=$(sed -n 's/^ *- alert: *//p' deploy/prometheus/fileserver.alerts.yml)
  [ -n "$alerts" ] || { echo "no alerts found"; return 1; }
  m=$WORK/mutant; mkdir -p "$m/tests"
  cp deploy/prometheus/fileserver.rules.yml "$m/"; cp deploy/prometheus/tests/alerts.test.yml "$m/tests/"
  for a in $alerts; do
    "$PY" - "$a" deploy/prometheus/fileserver.alerts.yml "$m/fileserver.alerts.yml" <<'PYEOF' || return 1
import sys, yaml
name, src, dst = sys.argv[1:]
doc = yaml.safe_load(open(src))
for g in doc["groups"]:
    g["rules"] = [r for r in g["rules"] if r.get("alert") != name]
yaml.safe_dump(doc, open(dst, "w"))
PYEOF
    if promtool test rules "$m/tests/alerts.test.yml" >/dev/null 2>&1; then
      echo "alert $a: the unit tests still pass without it (no test makes it fire)"; return 1
    fi
  done
}
check "every alert has a unit test that fires it (mutation check)" alert_mutation

# ---------------------------------------------- dashboard / metric names ---
# Start the daemon on free loopback ports, send a little traffic (hit, 404,
# HEAD) so labelled series exist, scrape /metrics, and check every metric the
# dashboard and the rules use against what it really exports.
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# scrape_traffic HTTP ADMIN PID: waits for readiness, sends traffic, scrapes.
scrape_traffic() {
  local http=$1 admin=$2 pid=$3 i
  for i in $(seq 100); do
    curl -fsS "http://127.0.0.1:$admin/readyz" >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || { echo "daemon exited:"; cat "$WORK/daemon.log"; return 1; }
    sleep 0.1
  done
  for i in 1 2 3; do curl -fsS "http://127.0.0.1:$http/index.html" >/dev/null || return 1; done
  curl -sS -o /dev/null "http://127.0.0.1:$http/missing.txt"
  curl -sS -o /dev/null -I "http://127.0.0.1:$http/index.html"
  sleep 0.3  # request durations are folded into the histogram every 100 ms
  curl -fsS "http://127.0.0.1:$admin/metrics" >"$WORK/metrics.txt" || { cat "$WORK/daemon.log"; return 1; }
}
# check runs this in a subshell, so it stops its daemon itself on every path.
scrape_daemon() {
  need curl || return 1
  mkdir -p "$WORK/root"; echo hello > "$WORK/root/index.html"
  local http admin pid rc
  http=$(free_port); admin=$(free_port)
  "$BIN" --root "$WORK/root" --listen "127.0.0.1:$http" --admin-listen "127.0.0.1:$admin" \
    --workers 2 --log-level warn >"$WORK/daemon.log" 2>&1 &
  pid=$!
  if ! scrape_traffic "$http" "$admin" "$pid"; then
    kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; return 1
  fi
  kill -TERM "$pid"; wait "$pid"; rc=$?
  [ "$rc" -eq 0 ] || { echo "daemon exited $rc on SIGTERM"; cat "$WORK/daemon.log"; return 1; }
}
check "deploy/grafana/fileserver.json is the output of generate_dashboard.py" \
  bash -c 'python3 deploy/grafana/generate_dashboard.py | cmp - deploy/grafana/fileserver.json'
check "scrape a running fileserver's /metrics" scrape_daemon
check "dashboard JSON + every dashboard/rule metric is exported by the daemon" \
  "$PY" deploy/checks/check_metrics.py --deploy deploy --scrape "$WORK/metrics.txt" --promql-out "$WORK/dashboard.rules.yml"
check "every dashboard expression parses as PromQL (promtool check rules)" promtool check rules "$WORK/dashboard.rules.yml"

printf '%s passed, %s failed\n' "$passed" "$failed"
[ "$failed" -eq 0 ]

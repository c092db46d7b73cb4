# Shared by scripts/callgrind-*.sh (sourced, not run): build a bench binary
# and count instructions per operation with valgrind's callgrind. Each
# contender runs N and 2N operations after the same set-up; the difference
# divided by N is one operation, set-up and process start cancelled out.
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 1; }
_callgrind_tmp=$(mktemp -d); trap 'rm -rf "$_callgrind_tmp"' EXIT

# bench_bin PACKAGE BENCH: path of the built bench executable.
bench_bin() {
  local bin
  bin=$(cargo bench -p "$1" --bench "$2" --no-run --message-format=json 2>/dev/null \
    | BENCH="$2" python3 -c 'import json,os,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m["target"]["name"]==os.environ["BENCH"] and m.get("executable"): print(m["executable"])' | tail -1)
  [ -x "$bin" ] || { echo "could not build the $2 bench" >&2; exit 1; }
  echo "$bin"
}

# per_op BIN VAR CONTENDER N: instructions per operation of CONTENDER, which
# BIN runs alone when VAR=CONTENDER:COUNT is set.
per_op() {
  local a b
  a=$(_ir "$1" "$2" "$3:$4"); b=$(_ir "$1" "$2" "$3:$((2 * $4))")
  python3 -c "print(f'{($b - $a) / $4:.1f}')"
}

_ir() { # total instructions of one run: bin, var, spec
  env "$2=$3" valgrind --tool=callgrind --callgrind-out-file="$_callgrind_tmp/out" "$1" >/dev/null 2>"$_callgrind_tmp/err" \
    || { cat "$_callgrind_tmp/err" >&2; exit 1; }
  sed -n 's/^summary: //p' "$_callgrind_tmp/out"
}

#!/usr/bin/env bash
# libpq is loaded at run time, and only for PostgreSQL (engine/pg/pq_dl.h):
#   1. ldd of the engine binary and of libkstreams-testdriver lists no libpq
#   2. `kstreams check` of pipelines without PostgreSQL (none, an LMDB
#      outbox) opens no libpq (LD_DEBUG=files lists every object loaded)
#   3. `kstreams check` of a postgres outbox does open libpq.so.5 (so the
#      LD_DEBUG test of 2 sees a dlopen when there is one)
#   4. KS_LIBPQ naming a missing file: exit 2, the error names the file
#      and the package libpq5
# 3 and 4 only when the build has the PostgreSQL backend. Last line:
# "libpq: N passed, N failed".
#
#   tests/check_libpq.sh [BUILD]    the build tree (default: build/)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "${1:-$ROOT/build}" && pwd) || exit 2
KS=$B/engine/kstreams
passed=0
failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

result() { # name ok(0|1) [detail]
  if [ "$2" -eq 0 ]; then
    passed=$((passed + 1))
    echo "  $1: ok"
  else
    failed=$((failed + 1))
    echo "  $1: FAILED${3:+ ($3)}"
  fi
}

no_libpq_needed() { # file
  local f=$1 l
  [ -f "$f" ] || { result "ldd $f" 1 "missing"; return; }
  l=$(ldd "$f" 2>&1 | grep -i libpq)
  result "ldd ${f#"$B"/} lists no libpq" "$([ -z "$l" ] && echo 0 || echo 1)" "$l"
}

# `kstreams check` under LD_DEBUG=files; sets $st, $out (stdout+stderr)
# and $opened (the objects loaded).
check_traced() { # yaml [env...]
  local yaml=$1
  shift
  out=$(env "$@" LD_DEBUG=files LD_DEBUG_OUTPUT="$tmp/ld" "$KS" check "$yaml" 2>&1)
  st=$?
  opened=$(cat "$tmp"/ld.* 2>/dev/null | grep -o 'file=[^ ]*' | sort -u)
  rm -f "$tmp"/ld.*
}

no_libpq_needed "$KS"
no_libpq_needed "$B/engine/.libs/libkstreams-testdriver.so"

for y in "$ROOT/tests/fixtures/valid-minimal.yaml" "$ROOT/tests/fixtures/valid-outbox.yaml"; do
  check_traced "$y"
  l=$(grep -i libpq <<<"$opened")
  result "check ${y#"$ROOT"/} exits 0 without loading libpq" \
    "$([ $st -eq 0 ] && [ -z "$l" ] && echo 0 || echo 1)" "exit $st; $l"
done

if grep -q 'KS_HAVE_POSTGRES' "$B/Makefile"; then
  cat >"$tmp/pg.yaml" <<'YAML'
application: pgcheck
kafka: { bootstrap: 127.0.0.1:9092 }
outbox:
  backend: postgres
  dsn: "host=127.0.0.1 dbname=shop user=shop"
  topic: order-events
sources:
  in: { topic: order-events }
sinks:
  - { from: in, topic: output }
YAML
  check_traced "$tmp/pg.yaml"
  result "check of a postgres outbox exits 0 and loads libpq.so.5" \
    "$([ $st -eq 0 ] && grep -q 'libpq\.so\.5' <<<"$opened" && echo 0 || echo 1)" \
    "exit $st: $out"
  check_traced "$tmp/pg.yaml" KS_LIBPQ="$tmp/missing/libpq.so.5"
  want="PostgreSQL backend: cannot load $tmp/missing/libpq.so.5: "
  result "KS_LIBPQ missing: exit 2, the error names the file and libpq5" \
    "$([ $st -eq 2 ] && grep -qF "$want" <<<"$out" && grep -qF 'Debian package libpq5' <<<"$out" \
      && echo 0 || echo 1)" "exit $st: $out"
else
  echo "  (built without PostgreSQL: the dlopen checks do not apply)"
fi

echo "libpq: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

#!/usr/bin/env bash
# `make valgrind`: one short end-to-end run of the engine under valgrind
# memcheck. A count pipeline (exactly-once, two workers) on the broker at
# $KS_BOOTSTRAP (default 127.0.0.1:9092) gets $VALGRIND_RECORDS records
# (default 300) through kcat, the engine counts them, and SIGTERM stops it
# (finish the batch, commit, leave the group, exit 0). Passes when every
# count arrived, the engine exited 0, and valgrind found no error and no
# definite leak (--errors-for-leak-kinds=definite). Ends with
# "valgrind: N passed, N failed". The record cache is off (cache_bytes: 0)
# so every record leaves as one count.
#
#   tests/valgrind.sh [BUILD]     BUILD: a build tree (default: build)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
BOOT=${KS_BOOTSTRAP:-127.0.0.1:9092}
N=${VALGRIND_RECORDS:-300}
KEYS=10
dir=$(mktemp -d /tmp/ks-valgrind-XXXXXX)
app=valgrind-$$-$(date +%s)
in=$app-in
out=$app-out
passed=0
failed=0
ok() { echo "  ok: $*"; passed=$((passed + 1)); }
bad() { echo "  FAILED: $*"; failed=$((failed + 1)); }

command -v valgrind >/dev/null || { echo "valgrind not installed (scripts/setup.sh)"; echo "valgrind: 0 passed, 1 failed"; exit 1; }
command -v kcat >/dev/null || { echo "kcat not installed (scripts/setup.sh)"; echo "valgrind: 0 passed, 1 failed"; exit 1; }

cat >"$dir/pipeline.yaml" <<EOF
application: $app
kafka: { bootstrap: [$BOOT] }
guarantee: exactly-once
commit_interval_ms: 100
workers: 2
state_dir: $dir/state
plugin_path: [$BUILD/plugins/.libs]
sources:
  views: { topic: $in, key: string, value: json, create: true, partitions: 4 }
nodes:
  - { name: per_user, type: count, from: views, store: counts, cache_bytes: 0 }
sinks:
  - { from: per_user, topic: $out, key: string, value: int64, create: true, partitions: 4 }
EOF

VG=(valgrind --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=99
    --num-callers=30 --log-file="$dir/valgrind.log")
echo "${VG[*]} $BUILD/engine/kstreams run $dir/pipeline.yaml"
start=$(date +%s)
"${VG[@]}" "$BUILD/engine/kstreams" run "$dir/pipeline.yaml" >"$dir/engine.log" 2>&1 &
pid=$!

# the engine creates its topics; produce once the source exists
for _ in $(seq 1 240); do
  kcat -b "$BOOT" -L -t "$in" 2>/dev/null | grep -q "partition 3," && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.5
done
for i in $(seq 0 $((N - 1))); do
  echo "user-$((i % KEYS))|{\"page\":$i}"
done | kcat -b "$BOOT" -P -t "$in" -K '|' 2>"$dir/kcat.log" || bad "kcat could not produce ($dir/kcat.log)"

# wait for N committed counts
got=0
for _ in $(seq 1 240); do
  got=$(kcat -b "$BOOT" -C -t "$out" -o beginning -e -q -X isolation.level=read_committed \
        -f '%k\n' 2>/dev/null | wc -l)
  [ "$got" -ge "$N" ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 1
done
[ "$got" -eq "$N" ] && ok "$N records in, $got counts out" \
  || bad "$N records in, $got counts out (engine log $dir/engine.log)"

kill -TERM "$pid" 2>/dev/null
st=124
for _ in $(seq 1 120); do
  if ! kill -0 "$pid" 2>/dev/null; then wait "$pid"; st=$?; break; fi
  sleep 1
done
[ "$st" = 124 ] && { kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }
errors=$(sed -n 's/.*ERROR SUMMARY: \([0-9,]*\) errors.*/\1/p' "$dir/valgrind.log" | tail -1)
definite=$(sed -n 's/.*definitely lost: \([0-9,]*\) bytes.*/\1/p' "$dir/valgrind.log" | tail -1)
echo "  engine exit $st after $(( $(date +%s) - start )) s; valgrind: ${errors:-?} errors," \
     "${definite:-0} bytes definitely lost (log $dir/valgrind.log)"
sed -n 's/^==[0-9]*== \(   *\(definitely\|indirectly\|possibly\) lost: .*\|   *still reachable: .*\|ERROR SUMMARY: .*\)/   \1/p' \
  "$dir/valgrind.log"
if [ "$st" = 0 ] && [ "${errors:-x}" = 0 ] && [ "${definite:-0}" = 0 ]; then
  ok "exit 0, 0 errors, 0 bytes definitely lost"
else
  bad "exit $st, ${errors:-?} errors, ${definite:-0} bytes definitely lost"
  grep -E '^==[0-9]+== (Invalid|Conditional|Syscall|Mismatched|.*definitely lost in)' \
    "$dir/valgrind.log" | head -20
fi
[ "$failed" -eq 0 ] && rm -rf "$dir"
echo "valgrind: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

#!/usr/bin/env bash
# libFuzzer harnesses of tests/fuzz/ (docs/reliability.md): builds the engine,
# the shipped plugins and the examples with clang (coverage + ASan + UBSan) in
# build-fuzz/, links each harness, and runs each for SECONDS, two at a time
# (KS_FUZZ_JOBS; one per core of a 2-core machine), from its seed corpus
# (tests/fuzz/corpus/NAME; new inputs go to build-fuzz/corpus/NAME, never
# into the tree). A crash leaves its input as build-fuzz/crash-NAME-* and
# fails that harness.
#
#   scripts/fuzz.sh [SECONDS] [NAME...]   default: 30 s each, every harness
#   make fuzz-long                         one hour each (FUZZ_SECONDS)
#
# Prints "fuzz: N passed, N failed" last.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECONDS_EACH=${1:-30}
shift || true
B=$ROOT/build-fuzz
SAN='-fsanitize=address,undefined -fno-sanitize-recover=undefined'

command -v clang >/dev/null || { echo "fuzz: clang not found (apt-get install clang)"; echo "fuzz: 0 passed, 1 failed"; exit 1; }
mkdir -p "$B"
if [ ! -f "$B/Makefile" ] || [ "$ROOT/configure" -nt "$B/Makefile" ]; then
  (cd "$B" && "$ROOT/configure" -q CC=clang \
    CFLAGS="-g -O1 -fsanitize=fuzzer-no-link $SAN" LDFLAGS="$SAN") >"$B/configure.log" 2>&1 ||
    { tail -20 "$B/configure.log"; echo "fuzz: 0 passed, 1 failed"; exit 1; }
fi
# plugins too: fuzz_store_values loads them (build-fuzz/plugins/.libs, and
# the mailbox's handler from build-fuzz/examples/mailbox/.libs)
(make -C "$B/lib" -s -j2 && make -C "$B/engine" -s -j2 libksengine.la &&
  make -C "$B/plugins" -s -j2 && make -C "$B/examples" -s -j2) >"$B/build.log" 2>&1 ||
  { tail -30 "$B/build.log"; echo "fuzz: 0 passed, 1 failed"; exit 1; }

LIBS=("$B/engine/.libs/libksengine.a" "$B/lib/.libs/libksjson.a" "$B/lib/.libs/libkswindow.a"
  "$B/lib/.libs/libksops.a" -lrdkafka -llmdb -lyaml -ljansson -lmicrohttpd -ldl -lpthread)

names=("$@")
[ ${#names[@]} -gt 0 ] || names=($(cd tests/fuzz && ls fuzz_*.c | sed 's/\.c$//'))
JOBS=${KS_FUZZ_JOBS:-2}

# Link every harness first (in turn: the links share build-fuzz/).
for name in "${names[@]}"; do
  rm -f "$B/$name.result"
  if ! clang -g -O1 -fsanitize=fuzzer $SAN -I"$ROOT/include" -I"$ROOT/engine" -I"$ROOT/lib" \
      -D_GNU_SOURCE -o "$B/$name" "tests/fuzz/$name.c" "${LIBS[@]}" 2>"$B/$name.link.log"; then
    { tail -10 "$B/$name.link.log"; echo "$name: cannot build"; } >"$B/$name.result"
    echo 1 >"$B/$name.status"
  else
    echo 0 >"$B/$name.status"
  fi
done

# Run one harness for SECONDS_EACH; its report goes to NAME.result.
run_one() {
  local name=$1 bin=$B/$1
  local corpus=$B/corpus/$name seeds=tests/fuzz/corpus/${name#fuzz_} log=$B/$name.log
  # tests/fuzz/NAME.options: more libFuzzer flags for that harness, e.g.
  # -close_fd_mask=2 for one whose target logs at every input
  local extra=()
  [ -f "tests/fuzz/$name.options" ] && read -r -a extra <"tests/fuzz/$name.options"
  mkdir -p "$corpus"
  (cd "$B" && "$bin" -max_total_time="$SECONDS_EACH" -max_len=65536 -timeout=10 \
    -rss_limit_mb=2048 -artifact_prefix="$B/crash-$name-" -print_final_stats=1 \
    "${extra[@]}" "$corpus" "$ROOT/$seeds") >"$log" 2>&1
  local st=$?
  local execs cov ft
  execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$')
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1)
  ft=$(grep -oE 'ft: [0-9]+' "$log" | tail -1)
  if [ $st -eq 0 ]; then
    echo "$name: ${execs:-?} runs in ${SECONDS_EACH} s, ${cov:-cov: ?} edges, ${ft:-ft: ?} features, no crash"
  else
    echo "$name: FAILED (exit $st), input: $(ls "$B"/crash-$name-* 2>/dev/null | head -1)"
    grep -E 'ERROR|SUMMARY|says|encodes|refus|runtime error|fuzz_' "$log" | head -8
  fi >"$B/$name.result"
  echo $st >"$B/$name.status"
}

# JOBS harnesses at a time (default 2, one per core of the test machine).
running=0
for name in "${names[@]}"; do
  [ "$(cat "$B/$name.status")" = 0 ] || continue
  run_one "$name" &
  running=$((running + 1))
  if [ $running -ge "$JOBS" ]; then
    wait -n
    running=$((running - 1))
  fi
done
wait

passed=0
failed=0
for name in "${names[@]}"; do
  cat "$B/$name.result"
  if [ "$(cat "$B/$name.status")" = 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
echo "fuzz: $passed passed, $failed failed"
[ $failed -eq 0 ]

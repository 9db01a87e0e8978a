#!/usr/bin/env bash
# The test command (README.md, .ci/run): installs what is missing, builds
# with warnings as errors, runs the unit tests (also under ASan+UBSan),
# starts a real single-node Kafka, runs every integration test against it,
# then some of them against the ASan+UBSan engine, and one short pipeline
# under valgrind, stops the broker, and ends with one line "N passed, N failed".
#
#   scripts/test.sh              everything
#   KS_SKIP_ASAN=1 scripts/test.sh    skip the sanitizer build, its unit tests
#       and the integration suites against it (faster locally)
#   KS_SKIP_VALGRIND=1   skip the valgrind run of one short pipeline
#       (tests/valgrind.sh, also `make valgrind`; KS_TESTS must name
#       "valgrind" for it to run when KS_TESTS is set)
#   ASAN_TESTS="count eos"   integration suites run again against the
#       ASan+UBSan engine (default: "count eos reload outbox poison");
#       ASAN_OUTBOX_CASES the outbox cases among them (default "0,1,4")
#   KS_SKIP_FUZZ=1, KS_FUZZ_SECONDS=N   skip the fuzzers, or run each N s
#   KS_TESTS="stateless" scripts/test.sh   only these integration tests
#   KAFKA_VERSIONS="4.1.1" scripts/test.sh  one broker version (default: 4.1.1
#       for everything, then 3.9.2 for $SECOND_VERSION_TESTS)
#   USER_BROKERS_VERSION=4.4.0   the Kafka of the default-settings broker and
#       the three-broker cluster
#   DEFAULTS_BROKER_TESTS="defaults"  suites run again on a broker with
#       Kafka's default settings (default: "defaults count eos")
#   KS_LANES=1 scripts/test.sh   the suites of a broker one at a time
#       (default 2 at once; each suite's log is build/test-logs/it-*.log)
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
LOGDIR=$ROOT/build/test-logs
passed=0
failed=0
failed_logs=() # the logs with a failure, named again above the summary

note() { printf '\n=== %s\n' "$*"; }

# Add up every "<suite>: N passed, N failed" line of a log; a program that
# printed no summary (crash, hang) counts as one failure.
tally() {
  local log=$1 status=$2 lines before=$failed
  lines=$(grep -E '^[A-Za-z0-9_-]+: [0-9]+ passed, [0-9]+ failed' "$log" || true)
  if [ -z "$lines" ]; then
    echo "no test summary in $log (exit $status): counted as 1 failure"
    failed=$((failed + 1))
  else
    while read -r _ p _ f _; do
      passed=$((passed + p))
      failed=$((failed + f))
    done <<<"$lines"
    if [ "$status" -ne 0 ] && ! grep -qE ' [1-9][0-9]* failed' <<<"$lines"; then
      echo "$log: exit $status without a failed test: counted as 1 failure"
      failed=$((failed + 1))
    fi
  fi
  [ "$failed" -eq "$before" ] || failed_logs+=("$log")
}

# Which cases failed, and at which assertion, for each log with a failure:
# printed just above the summary, where a reader of a long run's tail sees it.
name_failures() {
  local log
  for log in "${failed_logs[@]}"; do
    echo "failed in $log:"
    awk '/^  Test: / { t = $0; sub(/ \.\.\..*/, "", t) }
         /FAILED/ && t != "" { print t; t = "" }
         /^ +[0-9]+\. [^ ]+\.c:[0-9]+/ { print }' "$log" | head -12
  done
}

scripts/setup.sh || exit 1

note "build (warnings are errors)"
./autogen.sh >/dev/null 2>&1 || { echo "autogen failed"; exit 1; }
mkdir -p build "$LOGDIR"
( cd build && ../configure --enable-werror --with-postgres -q && make -j2 -s ) >"$LOGDIR/build.log" 2>&1 \
  || { tail -50 "$LOGDIR/build.log"; echo "0 passed, 1 failed"; exit 1; }

note "include graph (docs/architecture.md)"
{ tests/check_includes.sh; tests/check_includes.sh --self-test; } >"$LOGDIR/includes.log" 2>&1
st=$?
grep -vE '^  ' "$LOGDIR/includes.log" | tail -5
tally "$LOGDIR/includes.log" $st

note "libpq loaded at run time only (tests/check_libpq.sh)"
tests/check_libpq.sh build >"$LOGDIR/libpq.log" 2>&1
st=$?
cat "$LOGDIR/libpq.log"
tally "$LOGDIR/libpq.log" $st

note "unit tests"
( cd build && make -j2 -s check ) >"$LOGDIR/unit-make.log" 2>&1
st=$?
cat build/tests/unit/test_unit.log 2>/dev/null >"$LOGDIR/unit.log" || cp "$LOGDIR/unit-make.log" "$LOGDIR/unit.log"
grep -E '^(unit: |  Test: .*FAILED|.*\.c:[0-9]+ - )' "$LOGDIR/unit.log" | tail -20
[ $st -eq 0 ] || tail -30 "$LOGDIR/unit-make.log"
tally "$LOGDIR/unit.log" $st

if [ -z "${KS_SKIP_ASAN:-}" ]; then
  note "unit tests under ASan+UBSan"
  mkdir -p build-asan
  ( cd build-asan && ../configure -q --enable-werror \
      CFLAGS='-g -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined' \
      LDFLAGS='-fsanitize=address,undefined' && make -j2 -s && make -j2 -s check ) \
      >"$LOGDIR/asan-make.log" 2>&1
  st=$?
  sed 's/^unit: /unit-asan: /' build-asan/tests/unit/test_unit.log >"$LOGDIR/asan.log" 2>/dev/null \
    || cp "$LOGDIR/asan-make.log" "$LOGDIR/asan.log"
  grep -E '^unit-asan: |ERROR: AddressSanitizer|runtime error' "$LOGDIR/asan.log" | head -20
  [ $st -eq 0 ] || tail -30 "$LOGDIR/asan-make.log"
  tally "$LOGDIR/asan.log" $st
fi

if [ -z "${KS_SKIP_FUZZ:-}" ]; then
  note "fuzzing (libFuzzer, ${KS_FUZZ_SECONDS:-30} s each, two at a time; make fuzz-long for hours)"
  scripts/fuzz.sh "${KS_FUZZ_SECONDS:-30}" >"$LOGDIR/fuzz.log" 2>&1
  st=$?
  grep -E '^fuzz' "$LOGDIR/fuzz.log" | tail -12
  tally "$LOGDIR/fuzz.log" $st
fi

# Every integration test runs on the first version; the later versions run
# the suites whose outcome depends on broker behaviour (transactions,
# fencing, epochs after a timeout: the 3.9/4.x difference of the article).
# Then two more brokers as users run them, on the newest Kafka
# ($USER_BROKERS_VERSION): one with Kafka's default settings (auto-creation
# on; the suites in $DEFAULTS_BROKER_TESTS) and a three-broker cluster
# (test_cluster, which kills brokers). 4.4.0 is not yet the first version of
# the matrix: docs/reliability.md says what the crash suite found there.
KAFKA_VERSIONS=${KAFKA_VERSIONS:-4.1.1 3.9.2}
USER_BROKERS_VERSION=${USER_BROKERS_VERSION:-4.4.0}
SECOND_VERSION_TESTS=${SECOND_VERSION_TESTS:-crash faults eos repartition stream_joins fk_joins joins global_joins}
DEFAULTS_BROKER_TESTS=${DEFAULTS_BROKER_TESTS:-defaults count eos}
OWN_BROKER_TESTS="defaults cluster" # need a broker of their own kind
first_version=${KAFKA_VERSIONS%% *}

wanted() { # name
  [ -z "${KS_TESTS:-}" ] || grep -qw "$1" <<<"$KS_TESTS"
}

exec_suite() { # test-path label [build tree, default $KS_SUITE_BUILD or build/]
  local t=$1 label=$2 build=${3:-${KS_SUITE_BUILD:-$ROOT/build}} name log start st report
  name=$(suite_name "$t")
  log="$LOGDIR/it-$name-${label// /-}.log"
  log=${log//,/}
  start=$(date +%s)
  ( cd "$(dirname "$t")" && KS_BUILD=$build timeout 900 "./$(basename "$t")" ) >"$log" 2>&1
  st=$?
  echo "$st $(( $(date +%s) - start ))" >"$log.outcome"
  report=$(grep -E '^  [a-z]|^[A-Za-z0-9_-]+: [0-9]+ passed|FAILED|\.c:[0-9]+ - ' "$log" | tail -15)
  printf '%s\n(%s on %s: exit %s in %s s; log %s)\n' "$report" "$name" "$label" "$st" \
    "$(( $(date +%s) - start ))" "$log"
}

tally_suite() { # test-path label
  local log st
  log="$LOGDIR/it-$(suite_name "$1")-${2// /-}.log"
  log=${log//,/}
  st=$(cut -d' ' -f1 "$log.outcome" 2>/dev/null || echo 1)
  tally "$log" "$st"
}

run_suite() { # test-path label [build tree]
  exec_suite "$@"
  tally_suite "$1" "$2"
}

# Seconds a suite took in a full run on the 2-core CI machine; the lanes are
# filled longest first so that they end together (unlisted: 60).
suite_weight() {
  case $1 in
    migrate) echo 230 ;; crash) echo 170 ;; outbox) echo 170 ;; windows) echo 150 ;;
    repartition) echo 130 ;; reload) echo 100 ;; faults) echo 95 ;; joins) echo 90 ;;
    containment) echo 60 ;; outbox_pg) echo 64 ;; mailbox_pg) echo 40 ;; stream_joins) echo 50 ;;
    global_joins) echo 60 ;; static) echo 40 ;; standby) echo 100 ;; count) echo 90 ;; stateless) echo 42 ;; fk_joins) echo 35 ;;
    grow) echo 55 ;; mailbox) echo 22 ;; poison) echo 20 ;; eos) echo 19 ;; query | docs | metrics) echo 7 ;; rquery) echo 40 ;;
    readme) echo 33 ;; *) echo 60 ;;
  esac
}

# Run suites in $KS_LANES lanes at once (default 2: the suites mostly wait on
# the broker and on timers, and every suite names its topics, groups, state
# directories and ports after its own pid). The shell suites (docs, readme:
# fixed example names and 127.0.0.1:9092), outbox_pg (it restarts the
# PostgreSQL that readme's example uses too) and mailbox_pg (same
# PostgreSQL) share lane 0, in order; so does every suite that stops and
# restarts the broker (crash, faults, outbox and outbox_pg) and grow (its
# tool runs and reads fail while the broker is away). The other lanes get
# the rest, on the broker at $LANE_BOOTSTRAP when it is set (a second broker
# of the same version): on a shared broker a restart in lane 0 reached the
# other lane (crash's topic set-up failed "All brokers are currently fenced";
# repartition's watermark query failed while faults had the broker down).
run_suites() { # label test-path...
  local label=$1 t i w best; shift
  local lanes=${KS_LANES:-2}
  if [ "$lanes" -le 1 ] || [ $# -le 1 ]; then
    for t; do run_suite "$t" "$label"; done
    return
  fi
  local -a load list
  for ((i = 0; i < lanes; i++)); do load[i]=0; list[i]=""; done
  for t in $(for t; do
               w=$(suite_weight "$(suite_name "$t")")
               case $t in
                 *.sh | */test_outbox_pg | */test_mailbox_pg) w=$((w + 100000)) ;; # to lane 0
                 */test_crash | */test_faults | */test_grow | */test_outbox) w=$((w + 50000)) ;;
               esac
               echo "$w $t"
             done | sort -rn | cut -d' ' -f2); do
    best=0
    case $t in
      *.sh | */test_outbox_pg | */test_mailbox_pg) ;;
      */test_crash | */test_faults | */test_grow | */test_outbox) ;;
      *) for ((i = 1; i < lanes; i++)); do [ "${load[i]}" -lt "${load[best]}" ] && best=$i; done ;;
    esac
    load[best]=$(( load[best] + $(suite_weight "$(suite_name "$t")") ))
    list[best]="${list[best]} $t"
  done
  for ((i = 0; i < lanes; i++)); do
    (
      [ "$i" -eq 0 ] || [ -z "${LANE_BOOTSTRAP:-}" ] || export KS_BOOTSTRAP=$LANE_BOOTSTRAP
      for t in ${list[i]}; do exec_suite "$t" "$label"; done
    ) &
  done
  wait
  for t; do tally_suite "$t" "$label"; done
}

suites() { # every integration test program
  for t in build/tests/integration/test_* tests/integration/test_*.sh; do
    [ -x "$t" ] && echo "$t"
  done
}

suite_name() { basename "$1" | sed -e 's/^test_//' -e 's/\.sh$//'; }

# The suites in $ASAN_TESTS again, built in build-asan/ (the unit-test
# sanitizer build: `make check` there builds the engine, the plugins and the
# integration programs with -fsanitize=address,undefined; the C programs
# find the engine and plugins of their own build tree). Every ASan and
# LeakSanitizer report goes to a file of its own in
# build/test-logs/asan-reports/<suite>/ (log_path; a report also makes the
# process exit non-zero): the suite's result counts, and each file with a
# report counts as one more failure, named. UBSan ignores log_path in a
# build with both (GCC): its reports go to stderr, which is the engine's log
# (scanned by the test program, tests/integration/itest.c, each report a
# failed test) or the suite's log (grepped here). LeakSanitizer checks every
# engine that exits by itself or on SIGTERM (detect_leaks=1; no
# suppressions: none were needed); an engine killed with SIGKILL leaves no
# report. The outbox suite runs cases $ASAN_OUTBOX_CASES only (0 Kafka down
# then up, 1 bad HTTP inputs, which reuses 0's engine, 4 events from a
# processor through kill -9): all seven take over 4 minutes under ASan.
asan_integration() { # label
  local label=$1 rdir=$LOGDIR/asan-reports start t name f n
  note "integration tests against an ASan+UBSan engine ($label)"
  if [ ! -x build-asan/engine/kstreams ]; then
    echo "no build-asan/engine/kstreams (the ASan build failed): counted as 1 failure"
    failed=$((failed + 1))
    return
  fi
  start=$(date +%s)
  rm -rf "$rdir"
  for name in ${ASAN_TESTS:-count eos reload outbox poison}; do
    wanted "$name" || continue
    t=build-asan/tests/integration/test_$name
    if [ ! -x "$t" ]; then
      echo "no $t: counted as 1 failure"
      failed=$((failed + 1))
      continue
    fi
    mkdir -p "$rdir/$name"
    export ASAN_OPTIONS="log_path=$rdir/$name/asan:log_exe_name=1:detect_leaks=1"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
    if [ "$name" = outbox ]; then
      KS_TEST_CASE=${ASAN_OUTBOX_CASES:-0,1,4} run_suite "$t" "$label, ASan engine" "$ROOT/build-asan"
    else
      run_suite "$t" "$label, ASan engine" "$ROOT/build-asan"
    fi
    unset ASAN_OPTIONS UBSAN_OPTIONS
    n=0
    for f in "$rdir/$name"/*; do
      [ -f "$f" ] || continue
      if grep -qE 'ERROR: AddressSanitizer|runtime error|ERROR: LeakSanitizer' "$f"; then
        echo "sanitizer report in $f: counted as 1 failure"
        grep -m3 -E 'ERROR: |runtime error|SUMMARY: ' "$f" | sed 's/^/    /'
        failed=$((failed + 1))
        n=$((n + 1))
      fi
    done
    f="$LOGDIR/it-$name-${label// /-}-ASan-engine.log"
    f=${f//,/}
    if grep -qE '^[^ ].*: runtime error: ' "$f" 2>/dev/null; then
      echo "UBSan report of the test program in $f: counted as 1 failure"
      grep -m3 -E '^[^ ].*: runtime error: ' "$f" | sed 's/^/    /'
      failed=$((failed + 1))
      n=$((n + 1))
    fi
    echo "($name, ASan engine: $n sanitizer reports)"
  done
  echo "(ASan+UBSan integration block: $(( $(date +%s) - start )) s)"
}

# PostgreSQL for the outbox_pg and mailbox_pg suites (scripts/postgres.sh;
# PG_PORT, default 55432), up while the first Kafka version's suites run.
pg_up=0
pg_stop() { [ "$pg_up" = 0 ] || scripts/postgres.sh stop >/dev/null 2>&1; pg_up=0; }
if [ -x build/tests/integration/test_outbox_pg ] && { wanted outbox_pg || wanted mailbox_pg; }; then
  scripts/postgres.sh stop >/dev/null 2>&1 || true
  if scripts/postgres.sh start; then
    pg_up=1
  else
    echo "postgres did not start"
    failed=$((failed + 1))
  fi
fi

lane_port=$(( ${KAFKA_PORT:-9092} + 200 ))
kafka_lane() { KAFKA_PORT=$lane_port scripts/kafka.sh "$@"; }
for version in $KAFKA_VERSIONS; do
  note "integration tests against Kafka $version"
  export KAFKA_VERSION=$version
  scripts/kafka.sh stop >/dev/null 2>&1 || true
  if ! scripts/kafka.sh start "$version"; then
    echo "kafka $version did not start"
    failed=$((failed + 1))
    continue
  fi
  trap 'scripts/kafka.sh stop >/dev/null 2>&1; kafka_lane stop >/dev/null 2>&1; pg_stop' EXIT
  export KS_BOOTSTRAP=127.0.0.1:${KAFKA_PORT:-9092}
  # the second lane's broker, out of reach of lane 0's broker restarts
  LANE_BOOTSTRAP=
  if [ "${KS_LANES:-2}" -gt 1 ]; then
    kafka_lane stop >/dev/null 2>&1 || true
    if kafka_lane start "$version"; then
      LANE_BOOTSTRAP=127.0.0.1:$lane_port
    else
      echo "a second Kafka $version for the other lanes did not start: the lanes share one"
    fi
  fi
  version_suites=()
  for t in $(suites); do
    name=$(suite_name "$t")
    wanted "$name" || continue
    case $name in outbox_pg | mailbox_pg) [ "$pg_up" = 0 ] && continue ;; esac
    grep -qw "$name" <<<"$OWN_BROKER_TESTS" && continue
    if [ "$version" != "$first_version" ] && ! grep -qw "$name" <<<"$SECOND_VERSION_TESTS"; then
      continue
    fi
    version_suites+=("$t")
  done
  [ ${#version_suites[@]} -eq 0 ] || run_suites "Kafka $version" "${version_suites[@]}"
  kafka_lane stop >/dev/null 2>&1
  LANE_BOOTSTRAP=
  if [ "$version" = "$first_version" ] && [ -z "${KS_SKIP_ASAN:-}" ]; then
    asan_integration "Kafka $version"
  fi
  if [ "$version" = "$first_version" ] && [ -z "${KS_SKIP_VALGRIND:-}" ] && wanted valgrind; then
    note "valgrind memcheck of one short end-to-end run (Kafka $version)"
    vstart=$(date +%s)
    tests/valgrind.sh build >"$LOGDIR/valgrind.log" 2>&1
    st=$?
    grep -vE '^valgrind --' "$LOGDIR/valgrind.log"
    echo "(valgrind: exit $st in $(( $(date +%s) - vstart )) s; log $LOGDIR/valgrind.log)"
    tally "$LOGDIR/valgrind.log" $st
  fi
  scripts/kafka.sh stop >/dev/null 2>&1
  kafka_lane stop >/dev/null 2>&1
  LANE_BOOTSTRAP=
  trap - EXIT
  pg_stop # only the first version runs outbox_pg and mailbox_pg
done
pg_stop

# A broker with Kafka's default settings, on a port of its own.
defaults_suites=()
for t in $(suites); do
  name=$(suite_name "$t")
  grep -qw "$name" <<<"$DEFAULTS_BROKER_TESTS" && wanted "$name" && defaults_suites+=("$t")
done
if [ "${#defaults_suites[@]}" -gt 0 ]; then
  note "integration tests against Kafka $USER_BROKERS_VERSION with Kafka's default settings"
  dport=$(( ${KAFKA_PORT:-9092} + 100 ))
  kafka_defaults() { KAFKA_PROFILE=defaults KAFKA_PORT=$dport scripts/kafka.sh "$@"; }
  kafka_defaults stop >/dev/null 2>&1 || true
  if ! kafka_defaults start "$USER_BROKERS_VERSION"; then
    echo "kafka $USER_BROKERS_VERSION with default settings did not start"
    failed=$((failed + 1))
  else
    trap 'kafka_defaults stop >/dev/null 2>&1' EXIT
    export KS_BOOTSTRAP=127.0.0.1:$dport
    run_suites "Kafka $USER_BROKERS_VERSION defaults" "${defaults_suites[@]}"
    kafka_defaults stop >/dev/null 2>&1
    trap - EXIT
  fi
fi

# A three-broker cluster (replication 3, min ISR 2) whose brokers test_cluster
# kills by role.
cluster_suite=build/tests/integration/test_cluster
if [ -x "$cluster_suite" ] && wanted cluster; then
  note "integration tests against a three-broker Kafka $USER_BROKERS_VERSION cluster"
  scripts/kafka.sh cluster stop >/dev/null 2>&1 || true
  if ! scripts/kafka.sh cluster start "$USER_BROKERS_VERSION"; then
    echo "a three-broker Kafka $USER_BROKERS_VERSION cluster did not start"
    failed=$((failed + 1))
  else
    trap 'scripts/kafka.sh cluster stop >/dev/null 2>&1' EXIT
    KS_BOOTSTRAP=$(scripts/kafka.sh cluster bootstrap)
    export KS_BOOTSTRAP
    run_suite "$cluster_suite" "a three-broker Kafka $USER_BROKERS_VERSION cluster"
    scripts/kafka.sh cluster stop >/dev/null 2>&1
    trap - EXIT
  fi
fi

note "summary"
name_failures
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

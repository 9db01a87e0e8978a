#!/usr/bin/env bash
# bench/failover.sh - failover time with and without standby replicas, of a
# static member restarting in place, for kstreams or Kafka Streams.
#
#   KS_BOOTSTRAP=127.0.0.1:9092 bench/failover.sh [--java] [KEYS] [MODES...]
#   (defaults: KEYS=300000, MODES="0 1")
#
# A MODE is a number N (standby_replicas N; the killed process stays dead)
# or `static` (standby_replicas 0, static members: `static_membership:
# true` and `--instance`, for Kafka Streams group.instance.id; the killed
# process is started again at once with the same instance name and state
# directory).
#
# For each mode: three processes (A, B, C; one worker or stream thread
# each, their own state directories) count a 6-partition topic that holds
# KEYS records with KEYS distinct keys (so the changelogs hold KEYS
# records), exactly-once, commit interval 100 ms; once the group's lag is
# 0 (plus SETTLE_S, 3 s, with standbys or static members, for the standbys
# and checkpoints), A is killed with SIGKILL and 6 000 more records follow
# at once. Reported:
#   resume_ms    kill -> the group's committed offsets reach the end of the
#                input again (every task, also A's two, processing again);
#                includes the session timeout (SESSION_MS, 6000) unless a
#                static member came back in time
#   restored     changelog records replayed after the kill (B's and C's;
#                static: A's again too)
#   last_task_ms kill -> the last "task N started" line (Kafka Streams:
#                "state RUNNING") of B and C (static: and A again)
# and for `static`: rebalances=R, the "revoked" lines (Kafka Streams:
# "state REBALANCING") of B and C after the kill (0: the group did not
# rebalance), and a_assigned, the partitions A had before the kill and
# after its restart. With BROKER_LOG=<the broker's log> (scripts/kafka.sh:
# /tmp/kstreams-kafka-PORT/broker.log) the group coordinator's INFO lines
# are turned on before the kill (scripts/kafka.sh tool, KAFKA_PORT = the
# port of KS_BOOTSTRAP): generations=G counts the group's "Stabilized
# group ... generation" lines after the kill (new generations: rebalances)
# and replaced=R its "Static member ... joins group ... in Stable state"
# lines (a static member taken back without a rebalance).
#
# --java: the same with Kafka Streams (bench/kstreams-java, `count`; built
# with mvn into JAR_DIR, default BUILD/kstreams-java, as bench/run.sh
# does; -Xmx512m each, JAVA_HEAP).
# Needs: BUILD (default <repo>/build) with engine/kstreams and plugins,
# bench tools built into $OUT (make -C bench OUT=...).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
B=${KS_BOOTSTRAP:?set KS_BOOTSTRAP}
SYSTEM=kstreams
if [ "${1:-}" = --java ]; then
  SYSTEM=java
  shift
fi
KEYS=${1:-300000}
shift || true
MODES=${*:-0 1}
SESSION_MS=${SESSION_MS:-6000}
SETTLE_S=${SETTLE_S:-3}
JAR_DIR=${JAR_DIR:-$BUILD/kstreams-java}
JAVA_HEAP=${JAVA_HEAP:-512m}
BROKER_LOG=${BROKER_LOG:-}
OUT=${OUT:-$(mktemp -d /tmp/ks-failover-XXXXXX)}
make -s -C "$ROOT/bench" OUT="$OUT" >/dev/null
KS=$BUILD/engine/kstreams
JAR=$JAR_DIR/kstreams-bench-peer-1.jar

if [ "$SYSTEM" = java ] &&
  { [ ! -f "$JAR" ] || [ -n "$(find "$ROOT/bench/kstreams-java" -newer "$JAR" -type f)" ]; }; then
  mkdir -p "$JAR_DIR"
  (cd "$ROOT/bench/kstreams-java" && mvn -q -B package -Dbench.out="$JAR_DIR") >"$JAR_DIR/mvn.log" 2>&1 ||
    { echo "failover.sh: maven failed: $JAR_DIR/mvn.log" >&2; exit 1; }
fi

now_ms() { date +%s%3N; }

# Log timestamps (2026-12-04T13:50:49.302Z) -> ms since the epoch.
log_ms() { date -d "$1" +%s%3N; }

# start WHO STANDBYS STATIC(0|1) LOG DIR APP IN OUT: one process in the
# background ($! is its pid).
start() {
  local who=$1 s=$2 static=$3 log=$4 dir=$5 app=$6 in=$7 out=$8
  if [ "$SYSTEM" = java ]; then
    local props=(num.standby.replicas="$s" session.timeout.ms="$SESSION_MS")
    [ "$static" = 1 ] && props+=(group.instance.id="$who")
    java -Xmx"$JAVA_HEAP" -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
      -cp "$JAR:$JAR_DIR/lib/*" kstreams.bench.Peer \
      count "$B" "$app" "$in" "$out" eos "$dir/state-$who" 100 "${props[@]}" >"$log" 2>&1 &
  else
    cat >"$dir/$who.yaml" <<YAML
application: $app
kafka: { bootstrap: [$B], properties: { session.timeout.ms: $SESSION_MS } }
standby_replicas: $s
static_membership: $([ "$static" = 1 ] && echo true || echo false)
state_dir: $dir/state-$who
plugin_path: [$BUILD/plugins/.libs]
sources: { in: { topic: $in, key: string, value: bytes } }
nodes: [ { name: per_key, type: count, from: in, store: counts } ]
sinks: [ { from: per_key, topic: $out, key: string, value: int64, create: true, partitions: 6 } ]
YAML
    "$KS" run "$dir/$who.yaml" --instance "$who" >"$log" 2>&1 &
  fi
}

# since FILE MARK: FILE from byte MARK on (what was logged after the kill).
since() { tail -c +"$(($2 + 1))" "$1"; }

run_one() {
  local mode=$1 s=$1 static=0
  if [ "$mode" = static ]; then
    s=0
    static=1
  fi
  local app=failover-$mode-$SYSTEM-$$ in=failover-in-$mode-$$ out=failover-out-$mode-$$ who pids=()
  local dir=$OUT/$mode-$SYSTEM
  mkdir -p "$dir"
  "$OUT/measure" create -b "$B" "$in" 6 >/dev/null
  "$OUT/measure" create -b "$B" "$out" 6 >/dev/null
  "$OUT/loadgen" -b "$B" -t "$in" -p 6 -n "$KEYS" -k "$KEYS" -Q -q
  for who in a b c; do
    start "$who" "$s" "$static" "$dir/$who.log" "$dir" "$app" "$in" "$out"
    pids+=($!)
    sleep 1
  done
  local start_ns catchup
  start_ns=$(date +%s%N)
  catchup=$("$OUT/measure" wait -b "$B" -g "$app" -t "$in" -p "${pids[1]}" -0 "$start_ns" -T 600 |
    sed -n 's/.*wall_s=\([0-9.]*\).*/\1/p')
  if [ "$s" -gt 0 ] || [ "$static" = 1 ]; then # standbys catch up, A checkpoints
    sleep "$SETTLE_S"
  fi
  if [ -n "$BROKER_LOG" ]; then # the coordinator's rebalance lines, from now on
    KAFKA_PORT=${B##*:} "$ROOT/scripts/kafka.sh" tool kafka.admin.ConfigCommand --bootstrap-server "$B" \
      --alter --entity-type broker-loggers --entity-name 1 \
      --add-config org.apache.kafka.coordinator.group.GroupMetadataManager=INFO >/dev/null 2>&1 || true
  fi
  sleep 2
  local mark_b mark_c mark_broker=0 a_before
  mark_b=$(wc -c <"$dir/b.log")
  mark_c=$(wc -c <"$dir/c.log")
  [ -n "$BROKER_LOG" ] && mark_broker=$(wc -c <"$BROKER_LOG")
  a_before=$(sed -n 's/.*assigned \([0-9]*\) partitions.*/\1/p' "$dir/a.log" | tail -1)
  local killed
  killed=$(now_ms)
  kill -KILL "${pids[0]}"
  local a_log=/dev/null
  if [ "$static" = 1 ]; then
    a_log=$dir/a2.log
    start a "$s" 1 "$a_log" "$dir" "$app" "$in" "$out"
    pids[0]=$!
  fi
  "$OUT/loadgen" -b "$B" -t "$in" -p 6 -n 6000 -k "$KEYS" -q -S 7
  start_ns=$(date +%s%N)
  "$OUT/measure" wait -b "$B" -g "$app" -t "$in" -p "${pids[1]}" -0 "$start_ns" -T 600 >/dev/null
  local resumed
  resumed=$(now_ms)
  local restored last=0 t line started='\] task [0-9]+ started'
  [ "$SYSTEM" = java ] && started='state RUNNING'
  restored=$( (since "$dir/b.log" "$mark_b"; since "$dir/c.log" "$mark_c"; cat "$a_log") |
    sed -n 's/.*restored store [^:]*: \([0-9]*\) records replayed.*/\1/p' | awk '{s+=$1} END {print s+0}')
  while read -r line; do
    t=$(log_ms "${line%% *}")
    [ "$t" -gt "$last" ] && last=$t
  done < <( (since "$dir/b.log" "$mark_b"; since "$dir/c.log" "$mark_c"; cat "$a_log") |
    grep -E "$started" || true)
  local extra=""
  if [ "$static" = 1 ]; then
    local rebalances a_after revoked='\] revoked [0-9]+ partitions'
    [ "$SYSTEM" = java ] && revoked='state REBALANCING'
    rebalances=$( (since "$dir/b.log" "$mark_b"; since "$dir/c.log" "$mark_c") | grep -cE "$revoked" || true)
    a_after=$(sed -n 's/.*assigned \([0-9]*\) partitions.*/\1/p' "$a_log" | tail -1)
    extra=" rebalances=$rebalances"
    [ "$SYSTEM" = kstreams ] && extra+=" a_assigned=${a_before:-?}/${a_after:-?}"
    if [ -n "$BROKER_LOG" ]; then
      extra+=" generations=$(since "$BROKER_LOG" "$mark_broker" | grep -c "Stabilized group $app generation" || true)"
      extra+=" replaced=$(since "$BROKER_LOG" "$mark_broker" | grep -c "Static member .* joins group $app in Stable state" || true)"
    fi
  fi
  printf 'standby_replicas=%s keys=%s catchup_s=%s resume_ms=%s restored=%s last_task_ms=%s session_timeout_ms=%s system=%s static=%s%s\n' \
    "$s" "$KEYS" "$catchup" "$((resumed - killed))" "$restored" "$((last > 0 ? last - killed : -1))" \
    "$SESSION_MS" "$SYSTEM" "$static" "$extra"
  kill -TERM "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
  "$OUT/measure" delete -b "$B" "$in" "$out" >/dev/null 2>&1 || true
}

for m in $MODES; do run_one "$m"; done

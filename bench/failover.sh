#!/usr/bin/env bash
# bench/failover.sh - failover time with and without standby replicas.
#
#   KS_BOOTSTRAP=127.0.0.1:9092 bench/failover.sh [KEYS] [STANDBYS...]
#   (defaults: KEYS=300000, STANDBYS="0 1")
#
# For each standby setting: three `kstreams run` processes (A, B, C; one
# worker each, their own state directories) count a 6-partition topic
# that holds KEYS records with KEYS distinct keys (so the changelogs hold
# KEYS records); once the group's lag is 0 (and, with standbys, their lag
# metric is 0), A is killed with SIGKILL and 6 000 more records follow at
# once. Reported:
#   resume_ms    kill -> the group's committed offsets reach the end of the
#                input again (every task, also A's two, processing again);
#                includes the session timeout (SESSION_MS, 6000)
#   restored     changelog records B and C replayed after the kill
#   last_task_ms kill -> the last "task N started" line of B and C
# Needs: BUILD (default <repo>/build) with engine/kstreams and plugins,
# bench tools built into $OUT (make -C bench OUT=...).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
B=${KS_BOOTSTRAP:?set KS_BOOTSTRAP}
KEYS=${1:-300000}
shift || true
STANDBYS=${*:-0 1}
SESSION_MS=${SESSION_MS:-6000}
OUT=${OUT:-$(mktemp -d /tmp/ks-failover-XXXXXX)}
make -s -C "$ROOT/bench" OUT="$OUT" >/dev/null
KS=$BUILD/engine/kstreams

now_ms() { date +%s%3N; }

# Log timestamps (2026-12-04T13:50:49.302Z) -> ms since the epoch.
log_ms() { date -d "$1" +%s%3N; }

run_one() {
  local s=$1 app=failover-s$1-$$ in=failover-in-s$1-$$ out=failover-out-s$1-$$ who pids=()
  local dir=$OUT/s$s
  mkdir -p "$dir"
  "$OUT/measure" create -b "$B" "$in" 6 >/dev/null
  "$OUT/loadgen" -b "$B" -t "$in" -p 6 -n "$KEYS" -k "$KEYS" -Q -q
  for who in a b c; do
    cat >"$dir/$who.yaml" <<YAML
application: $app
kafka: { bootstrap: [$B], properties: { session.timeout.ms: $SESSION_MS } }
standby_replicas: $s
state_dir: $dir/state-$who
plugin_path: [$BUILD/plugins/.libs]
sources: { in: { topic: $in, key: string, value: bytes } }
nodes: [ { name: per_key, type: count, from: in, store: counts } ]
sinks: [ { from: per_key, topic: $out, key: string, value: int64, create: true, partitions: 6 } ]
YAML
    "$KS" run "$dir/$who.yaml" --instance "$who" >"$dir/$who.log" 2>&1 &
    pids+=($!)
    sleep 1
  done
  local start_ns catchup
  start_ns=$(date +%s%N)
  catchup=$("$OUT/measure" wait -b "$B" -g "$app" -t "$in" -p "${pids[1]}" -0 "$start_ns" -T 600 |
    sed -n 's/.*wall_s=\([0-9.]*\).*/\1/p')
  if [ "$s" -gt 0 ]; then # the standbys caught up: B's and C's last lag lines
    sleep 3
  fi
  sleep 2
  local mark_b mark_c
  mark_b=$(wc -c <"$dir/b.log")
  mark_c=$(wc -c <"$dir/c.log")
  local killed
  killed=$(now_ms)
  kill -KILL "${pids[0]}"
  "$OUT/loadgen" -b "$B" -t "$in" -p 6 -n 6000 -k "$KEYS" -q -S 7
  start_ns=$(date +%s%N)
  "$OUT/measure" wait -b "$B" -g "$app" -t "$in" -p "${pids[1]}" -0 "$start_ns" -T 600 >/dev/null
  local resumed
  resumed=$(now_ms)
  local restored last=0 t line
  restored=$( (tail -c +"$((mark_b + 1))" "$dir/b.log"; tail -c +"$((mark_c + 1))" "$dir/c.log") |
    sed -n 's/.*restored store [^:]*: \([0-9]*\) records replayed.*/\1/p' | awk '{s+=$1} END {print s+0}')
  while read -r line; do
    t=$(log_ms "${line%% *}")
    [ "$t" -gt "$last" ] && last=$t
  done < <( (tail -c +"$((mark_b + 1))" "$dir/b.log"; tail -c +"$((mark_c + 1))" "$dir/c.log") |
    grep -E '\] task [0-9]+ started' || true)
  printf 'standby_replicas=%s keys=%s catchup_s=%s resume_ms=%s restored=%s last_task_ms=%s session_timeout_ms=%s\n' \
    "$s" "$KEYS" "$catchup" "$((resumed - killed))" "$restored" "$((last > 0 ? last - killed : -1))" "$SESSION_MS"
  kill -TERM "${pids[1]}" "${pids[2]}" 2>/dev/null || true
  wait "${pids[1]}" "${pids[2]}" 2>/dev/null || true
  "$OUT/measure" delete -b "$B" "$in" "$out" >/dev/null 2>&1 || true
}

for s in $STANDBYS; do run_one "$s"; done

#!/usr/bin/env bash
# The main job (README.md): from a clean clone on a fresh Debian machine,
# install what is missing, build, start a real single-node Kafka on
# 127.0.0.1, run the page-views example pipeline (drop bots, count views per
# user, exactly-once), feed it page views, and show the running counts that
# reached the output topic. Stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export KAFKA_PORT=${KAFKA_PORT:-9092}
BOOT=127.0.0.1:$KAFKA_PORT
WORK=$(mktemp -d /tmp/kstreams-demo-XXXXXX)

scripts/setup.sh
echo "== building"
./autogen.sh >/dev/null 2>&1
mkdir -p build
(cd build && { [ -f Makefile ] || ../configure -q; } && make -j2 -s) >"$WORK/build.log" 2>&1 \
  || { tail -30 "$WORK/build.log"; exit 1; }
KCAT=$(command -v kcat || command -v kafkacat)

echo "== starting Kafka"
scripts/kafka.sh start
engine_pid=
cleanup() {
  [ -n "$engine_pid" ] && kill "$engine_pid" 2>/dev/null && wait "$engine_pid" 2>/dev/null
  scripts/kafka.sh stop >/dev/null 2>&1 || true
}
trap cleanup EXIT

# a fresh copy of the example with this run's broker and state directory
sed -e "s#127.0.0.1:9092#$BOOT#" -e "s#state_dir: ./state#state_dir: $WORK/state#" \
    -e "s#plugin_path:#plugin_path:\n  - $ROOT/build/examples/page-views/.libs\n  - $ROOT/build/plugins/.libs#" \
    examples/page-views/pipeline.yaml >"$WORK/pipeline.yaml"

echo "== kstreams check"
build/engine/kstreams check "$WORK/pipeline.yaml"

echo "== kstreams run (log: $WORK/engine.log)"
build/engine/kstreams run "$WORK/pipeline.yaml" --instance demo >"$WORK/engine.log" 2>&1 &
engine_pid=$!

# wait for the engine to create its topics
for _ in $(seq 1 100); do
  "$KCAT" -b "$BOOT" -L -t page-views 2>/dev/null | grep -q "partition 3" && break
  sleep 0.2
done

echo "== feeding 1000 page views for 5 users (every 7th from a bot)"
for i in $(seq 1 1000); do
  u=$(( i % 5 ))
  agent=browser; [ $(( i % 7 )) -eq 0 ] && agent=crawler-bot
  printf 'user-%d:{"user_agent":"%s","url":"/page/%d","bytes":%d}\n' "$u" "$agent" $(( i % 7 )) $(( i * 10 ))
done | "$KCAT" -P -b "$BOOT" -t page-views -K: -X partitioner=murmur2_random

echo "== latest count per user in topic views-per-user (read_committed)"
sleep 3
"$KCAT" -C -b "$BOOT" -t views-per-user -o beginning -e -q -X isolation.level=read_committed \
    -s key=s -s value='>q' -f '%k %s\n' >"$WORK/out.txt"
sort -k1,1 -k2,2n "$WORK/out.txt" | awk '{last[$1]=$2} END {for (u in last) print "  " u ": " last[u] " views"}' | sort
echo "  ($(wc -l <"$WORK/out.txt") count updates; expected, bots dropped:"
for u in 0 1 2 3 4; do
  n=0
  for i in $(seq 1 1000); do [ $(( i % 5 )) -eq $u ] && [ $(( i % 7 )) -ne 0 ] && n=$((n + 1)); done
  printf ' user-%d: %d' "$u" "$n"
done
echo ")"

kill -TERM "$engine_pid"; wait "$engine_pid" || true; engine_pid=
grep -E "stopped" "$WORK/engine.log" | tail -3
echo "== done; work files in $WORK"

#!/usr/bin/env bash
# examples/mailbox/run.sh - run the mailbox example end to end against a
# running broker: start the engine, POST 6 commands for each of 50 users,
# wait until every row is terminal, print the statuses, stop the engine.
#
#   KS_BUILD=build         the build tree (default: the repo's build/) (kstreams, plugins, balances.so)
#   KS_BOOTSTRAP=127.0.0.1:9092   PORT=8470   USERS=50
set -euo pipefail
[ -n "${KS_BUILD:-}" ] && KS_BUILD=$(cd "$KS_BUILD" && pwd)
cd "$(dirname "$0")"
BUILD=$(cd "${KS_BUILD:-../../build}" && pwd)
BOOT=${KS_BOOTSTRAP:-127.0.0.1:9092}
PORT=${PORT:-8470}
USERS=${USERS:-50}
KS=$BUILD/engine/kstreams
WORK=$(mktemp -d /tmp/kstreams-mailbox-XXXXXX)
APP=bank-$$

# the example's pipeline with this run's broker, port, build and a fresh
# application id (topics bank-<pid>-...)
sed -e "s#127.0.0.1:9092#$BOOT#" -e "s#127.0.0.1:8470#127.0.0.1:$PORT#" \
    -e "s#\.\./\.\./build#$BUILD#g" -e "s#state_dir: ./state#state_dir: $WORK/state#" \
    -e "s#application: bank#application: $APP#" -e "s#bank-mailbox#$APP-mailbox#g" \
    -e "s#bank-outbox-results#$APP-outbox-results#" pipeline.yaml >"$WORK/pipeline.yaml"

"$KS" run "$WORK/pipeline.yaml" >"$WORK/engine.log" 2>&1 &
engine=$!
trap 'kill $engine 2>/dev/null; wait $engine 2>/dev/null || true' EXIT
# wait for the endpoint and for the topics (the source creates the mailbox
# topic with its 4 partitions before the first event is dispatched)
for _ in $(seq 200); do
  grep -q "tasks," "$WORK/engine.log" && break
  sleep 0.1
done
echo "== engine up (log: $WORK/engine.log)"

# per user: deposit 10, debit 4, debit 8 (refused), deposit 5, debit 20
# (refused), debit 3  ->  4 SUCCESS, 2 PUSHED_FAILURE, balance 8
ops=('"deposit","amount":10' '"debit","amount":4' '"debit","amount":8'
     '"deposit","amount":5' '"debit","amount":20' '"debit","amount":3')
first=
for op in "${ops[@]}"; do
  for u in $(seq -w 1 "$USERS"); do
    id=$(curl -sf -XPOST "127.0.0.1:$PORT/outbox/commands/events" \
           -d "{\"user\":\"user-$u\",\"payload\":{\"op\":$op}}" | sed 's/.*"id":"\([0-9a-f]*\)".*/\1/')
    first=${first:-$id}
    last=$id
  done
done
echo "== posted $((USERS * 6)) commands"

for _ in $(seq 600); do
  open=$("$KS" outbox-status "$WORK/pipeline.yaml" |
         awk '$1 ~ /PREQUEUED|PENDING|DISPATCHING|PUBLISHED|UNDER_PROCESSING/ {n += $2} END {print n}')
  [ "$open" = 0 ] && break
  sleep 0.2
done
echo "== statuses"
"$KS" outbox-status "$WORK/pipeline.yaml"
echo "== first event (user-01's deposit 10), by HTTP"
curl -s "127.0.0.1:$PORT/outbox/events/$first"; echo
echo "== last event (user-$USERS's debit 3), by the CLI"
"$KS" outbox-status "$WORK/pipeline.yaml" "$last"

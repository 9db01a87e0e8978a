#!/usr/bin/env bash
# examples/outbox-postgres/run.sh - the example end to end against a running
# broker and PostgreSQL: create the tables (shop.sql and `kstreams
# outbox-schema`) in a PostgreSQL schema of this run's own, start the engine,
# run the application's transactions (place_orders.sql), wait until every
# committed event is PUBLISHED and counted, print the outbox rows, the
# orders and the counts, stop the engine.
#
#   KS_BUILD=build                 the build tree (default: the repo's build/)
#   KS_BOOTSTRAP=127.0.0.1:9092
#   SHOP_PG_DSN="host=... dbname=... user=... password=..."
#                 (default: the throw-away PostgreSQL of scripts/postgres.sh)
set -euo pipefail
[ -n "${KS_BUILD:-}" ] && KS_BUILD=$(cd "$KS_BUILD" && pwd)
cd "$(dirname "$0")"
BUILD=$(cd "${KS_BUILD:-../../build}" && pwd)
BOOT=${KS_BOOTSTRAP:-127.0.0.1:9092}
KS=$BUILD/engine/kstreams
WORK=$(mktemp -d /tmp/kstreams-shop-XXXXXX)
APP=shop-$$
SCHEMA=shop_$$
BASE_DSN=${SHOP_PG_DSN:-$(../../scripts/postgres.sh dsn)}
# every table of this run in a schema of its own: ks_outbox and orders
# resolve there for the engine and for psql alike
export SHOP_PG_DSN="$BASE_DSN options='-csearch_path=$SCHEMA'"
export PGOPTIONS='-c client_min_messages=warning' # psql: no NOTICEs
sql() { psql "$SHOP_PG_DSN" -X -q -v ON_ERROR_STOP=1 "$@"; }

psql "$BASE_DSN" -X -q -v ON_ERROR_STOP=1 -c "CREATE SCHEMA $SCHEMA"
sql -f shop.sql
"$KS" outbox-schema | sql
echo "== tables created in schema $SCHEMA"

# the example's pipeline with this run's broker, build, state directory and
# a fresh application id (topics shop-<pid>-...)
sed -e "s#127.0.0.1:9092#$BOOT#" -e "s#state_dir: ./state#state_dir: $WORK/state#" \
    -e "s#\.\./\.\./plugins/\.libs, \.\./\.\./build/plugins/\.libs#$BUILD/plugins/.libs#" \
    -e "s#application: shop#application: $APP#" -e "s#order-events#$APP-order-events#g" \
    -e "s#orders-per-customer,#$APP-orders-per-customer,#" pipeline.yaml >"$WORK/pipeline.yaml"
"$KS" run "$WORK/pipeline.yaml" >"$WORK/engine.log" 2>&1 &
engine=$!
trap 'kill $engine 2>/dev/null; wait $engine 2>/dev/null || true' EXIT
for _ in $(seq 300); do
  grep -q "tasks," "$WORK/engine.log" && break
  sleep 0.1
done
echo "== engine up (log: $WORK/engine.log)"

sql -f place_orders.sql 2>"$WORK/psql.err" || true
grep -q 'violates check constraint' "$WORK/psql.err" && echo "== customer-8's transaction rolled back"

# the latest count per customer (a count emits each update that reaches a
# commit; the last one is the total)
counts() {
  kcat -C -b "$BOOT" -t "$APP-orders-per-customer" -e -q -X isolation.level=read_committed \
    -s key=s -s value='>q' -f '%k %s\n' 2>/dev/null |
    awk '{ last[$1] = $2 } END { for (k in last) print k, last[k] }' | sort
}
for _ in $(seq 300); do
  [ "$(sql -At -c "SELECT count(*) FROM ks_outbox WHERE status = 'PUBLISHED'")" = 3 ] &&
    [ "$(counts | tr '\n' ' ')" = "customer-7 2 customer-9 1 " ] && break
  sleep 0.2
done
echo "== outbox rows"
sql -At -F ' ' -c "SELECT aggregate, status FROM ks_outbox ORDER BY id"
echo "== orders"
sql -At -F ' ' -c "SELECT customer, amount FROM orders ORDER BY id"
echo "== counts (orders-per-customer)"
counts
kill -TERM $engine
wait $engine && echo "== engine stopped"
trap - EXIT
psql "$BASE_DSN" -X -q -c "DROP SCHEMA $SCHEMA CASCADE"

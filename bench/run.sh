#!/usr/bin/env bash
# bench/run.sh - the kstreams benchmark: kstreams vs Kafka Streams 4.1.1 vs
# Quix Streams (count and window only) vs a plain librdkafka loop (the
# ceiling), on one local broker, in one command.
#
#   bench/run.sh [--quick] [--only "stateless stateless-yaml count window restore swap"]
#                [--no-java] [--no-quix] [--keep-broker] [--chart FILE]
#   BENCH_SCENARIOS="rekey join sjoin fk" bench/run.sh   (the same as --only)
#
# Scenarios: stateless, stateless-yaml, count, window, restore, swap (the default set) and
# rekey, join, sjoin, fk (the rows of the re-key and join issues: run them
# by name, they are not in the default set).
#
# Prints one table (also written to $BENCH_BUILD/bench-out/table.md) and
# draws docs/performance.png (throughput per scenario). docs/performance.md
# explains the figures.
#
# For each scenario and guarantee (exactly-once, at-least-once) and each
# system (kstreams, Kafka Streams, ceiling; for count exactly-once also
# "ceiling2", the ceiling writing two records per input like count does):
#   1. bench/loadgen writes RECORDS records (KEYS keys, VALUE_BYTES bytes,
#      Zipf SKEW) to a fresh input topic of PARTITIONS partitions;
#   2. the stream processor starts; bench/measure polls its consumer group's
#      committed offsets until the lag is 0 (under exactly-once the offsets
#      commit with the outputs), then reads utime+stime and VmHWM of the
#      process: records/s = RECORDS / (start -> lag 0), CPU s per 1M records,
#      peak RSS;
#   3. with the processor still running and caught up, a steady
#      LATENCY_RATE records/s for LATENCY_SECONDS (keys that carry their send
#      time, loadgen -L; the first second is warm-up and not counted);
#      bench/measure reads the outputs read_committed: latency = arrival -
#      send time of the input the output came from: p50, p99;
#   4. SIGTERM.
# stateless runs the C plugin examples/orders (orders.route); stateless-yaml
# the same work in YAML only with the shipped ops plugin (ops.filter drops
# test orders, ops.map reshapes, ops.branch routes refunds and purchases).
# Quix Streams (bench/quix/peer.py, PyPI quixstreams BENCH_QUIX_VERSION, in a
# virtualenv $BENCH_BUILD/quix-venv made on first use; python3-venv is
# apt-get installed when python3 has no venv module) runs count and window
# with the same input, guarantee, commit interval and measurement; no
# restore, swap, re-key or join runs. --no-quix leaves it out.
# After each count and window run (not the ceiling's), before the latency
# phase, bench/measure until -m count reads the outputs from the beginning
# (read_committed) and checks that the latest count of every key (count) or
# key and window (window) adds up to RECORDS: the table's "outputs checked".
# Restore: a second kstreams (and Kafka Streams) process of the count
# exactly-once application with an empty state directory replays the
# changelog the first one wrote; the rate comes from their restore logs.
#
# Environment (defaults): BENCH_BUILD (<repo>/build-bench),
# BENCH_KAFKA_PORT (9992), BENCH_RECORDS (1000000), BENCH_KEYS (100000),
# BENCH_VALUE_BYTES (100), BENCH_SKEW (0), BENCH_PARTITIONS (4),
# BENCH_COMMIT_MS (100), BENCH_LATENCY_RATE (5000), BENCH_LATENCY_SECONDS (5),
# BENCH_LATENCY_AT (unset: at once; S: the latency phase starts when the
# wall clock is S seconds past the minute, so that a windowed run's phase
# holds, or misses, the moment its 60 s windows expire, S = 10 with the
# scenario's 10 s grace),
# BENCH_JAVA_OPTS (none: the JVM's defaults), BENCH_TIMEOUT (300 s per run),
# BENCH_SCENARIOS (the scenarios to run, as --only; default
# "stateless stateless-yaml count window restore swap"), BENCH_TABLE_KEYS (100000: the
# customers of the join scenario), BENCH_JOIN_WINDOW_S (300) and
# BENCH_JOIN_GRACE_S (60): the stream-stream join's window,
# BENCH_QUIX_VERSION (3.28.1): the quixstreams release the venv gets.
#
# The re-key and join scenarios (exactly-once, kstreams next to Kafka
# Streams, no ceiling and no latency phase) work across internal topics
# (repartition, the join's buffers), so the lag of the input says nothing
# about when they are done: bench/measure until reads their outputs from
# the beginning (read_committed) while the process runs and takes the time,
# CPU and peak RSS when the outputs are complete, which also verifies them:
#   rekey  input keyed by user (KEYS users), a JSON value whose "customer"
#          (one of KEYS customer ids) becomes the key, then counted:
#          kstreams ops.select_key -> count, Kafka Streams
#          groupBy((k, v) -> customer).count(); done when the latest
#          counts of all customers add up to RECORDS;
#   join   TABLE_KEYS customers written first (a table), then RECORDS
#          orders keyed by customer id: kstreams `tables:` + `join` (inner,
#          pair), Kafka Streams stream.join(table, joiner); done at RECORDS
#          joined orders;
#   sjoin  RECORDS/2 orders, then RECORDS/2 payments with the same ids
#          (one payment per order, seconds later): kstreams `join.streams`
#          (inner, window BENCH_JOIN_WINDOW_S each way, grace
#          BENCH_JOIN_GRACE_S), Kafka Streams join(other, joiner,
#          JoinWindows.ofTimeDifferenceAndGrace(...)); done at RECORDS/2
#          pairs;
#   fk     TABLE_KEYS customers written first, then RECORDS orders (a
#          table keyed by order id, the customer id in the value): kstreams
#          `join.fk` (inner, pair), Kafka Streams KTable#join(customers,
#          v -> customer, joiner); done when all RECORDS orders have a
#          joined result as their latest output.
# Each fails when the outputs do not complete within BENCH_TIMEOUT, or when
# more arrive (read until 3 s pass without one) than the input explains.
# BENCH_GUARANTEES ("eos alo": the guarantees the count and window scenarios
# run with), BENCH_CEILING (1; 0: no ceiling runs), BENCH_CACHE_BYTES (unset:
# the count node's default record cache and Kafka Streams' default; else the
# count node's `cache_bytes:` and Kafka Streams' statestore.cache.max.bytes,
# 0 = off for both).
# BENCH_KAFKA_PROPERTIES (unset: none): librdkafka properties for the
# kstreams pipelines' `kafka.properties`, as the inside of a YAML flow
# mapping, e.g. "fetch.queue.backoff.ms: 10". BENCH_LD_LIBRARY_PATH (unset):
# put in front of LD_LIBRARY_PATH for the kstreams processes only (loadgen,
# measure and the ceiling keep the system's librdkafka), e.g. a directory
# with a librdkafka.so.1 of another release; each kstreams run logs the
# librdkafka file its process mapped (from /proc/PID/maps).
# After each kstreams count run, the records of its changelog
# (read_committed, before the latency phase) are logged and written to
# changelog.tsv. One scenario alone, e.g. count exactly-once with the cache
# off:  BENCH_GUARANTEES=eos BENCH_CEILING=0 BENCH_CACHE_BYTES=0 \
#         bench/run.sh --only count --no-java --no-quix
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BENCH_BUILD:-$ROOT/build-bench}
PORT=${BENCH_KAFKA_PORT:-9992}
RECORDS=${BENCH_RECORDS:-1000000}
KEYS=${BENCH_KEYS:-100000}
VALUE_BYTES=${BENCH_VALUE_BYTES:-100}
SKEW=${BENCH_SKEW:-0}
PARTITIONS=${BENCH_PARTITIONS:-4}
COMMIT_MS=${BENCH_COMMIT_MS:-100}
LAT_RATE=${BENCH_LATENCY_RATE:-5000}
LAT_SECONDS=${BENCH_LATENCY_SECONDS:-5}
LAT_WARMUP_MS=1000
LAT_AT=${BENCH_LATENCY_AT:-}
TIMEOUT=${BENCH_TIMEOUT:-300}
JAVA_OPTS=${BENCH_JAVA_OPTS:-}
GUARANTEES=${BENCH_GUARANTEES:-eos alo}
CEILING=${BENCH_CEILING:-1}
CACHE_BYTES=${BENCH_CACHE_BYTES:-}
KAFKA_PROPERTIES=${BENCH_KAFKA_PROPERTIES:-}
KS_LD_PATH=${BENCH_LD_LIBRARY_PATH:-}
WINDOW_SIZE_MS=60000
WINDOW_GRACE_MS=10000
WINDOW_SPREAD_MS=600000 # window input: timestamps over the last 10 minutes
CHART=$ROOT/docs/performance.png
ONLY=${BENCH_SCENARIOS:-"stateless stateless-yaml count window restore swap"}
TABLE_KEYS=${BENCH_TABLE_KEYS:-100000}
JOIN_WINDOW_S=${BENCH_JOIN_WINDOW_S:-300}
JOIN_GRACE_S=${BENCH_JOIN_GRACE_S:-60}
JAVA=1
QUIX=1
QUIX_VERSION=${BENCH_QUIX_VERSION:-3.28.1}
KEEP_BROKER=0

while (($#)); do
	case $1 in
	--quick) RECORDS=100000 LAT_SECONDS=3 ;;
	--only) ONLY=$2; shift ;;
	--no-java) JAVA=0 ;;
	--no-quix) QUIX=0 ;;
	--keep-broker) KEEP_BROKER=1 ;;
	--chart) CHART=$2; shift ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "run.sh: unknown option $1" >&2; exit 64 ;;
	esac
	shift
done

B=127.0.0.1:$PORT
OUT=$BUILD/bench-out
TOOLS=$BUILD/bench
KSTREAMS=$BUILD/engine/kstreams
KS_RUN=("$KSTREAMS") # how the kstreams processes start (BENCH_LD_LIBRARY_PATH)
[[ -z $KS_LD_PATH ]] ||
	KS_RUN=(env "LD_LIBRARY_PATH=$KS_LD_PATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$KSTREAMS")
JAR_DIR=$BUILD/kstreams-java
QUIX_VENV=$BUILD/quix-venv
RUN=$(date +%H%M%S)
RESULTS=$OUT/results.tsv
STARTED_BROKER=0

log() { printf '[bench %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
want() { [[ " $ONLY " == *" $1 "* ]]; }

# ---- build --------------------------------------------------------------------

build() {
	if [[ ! -x $KSTREAMS || ! -f $BUILD/plugins/.libs/count.so ]]; then
		log "building kstreams in $BUILD"
		mkdir -p "$BUILD"
		[[ -x $ROOT/configure ]] || (cd "$ROOT" && autoreconf -fi >/dev/null 2>&1)
		[[ -f $BUILD/Makefile ]] || (cd "$BUILD" && "$ROOT/configure" -q)
		make -C "$BUILD" -j2 >"$OUT/build.log" 2>&1 || die "build failed: $OUT/build.log"
	fi
	make -s -C "$ROOT/bench" OUT="$TOOLS" >"$OUT/tools-build.log" 2>&1 ||
		die "bench tools: $(cat "$OUT/tools-build.log")"
	if ((JAVA)) && { ! command -v java || ! command -v mvn; } >/dev/null; then
		log "no java or mvn: running without the Kafka Streams peer"
		JAVA=0
	fi
	if ((JAVA)); then
		local jar=$JAR_DIR/kstreams-bench-peer-1.jar
		if [[ ! -f $jar || -n $(find "$ROOT/bench/kstreams-java" -newer "$jar" -type f) ]]; then
			log "building the Kafka Streams peer (mvn package)"
			mkdir -p "$JAR_DIR"
			if ! (cd "$ROOT/bench/kstreams-java" && mvn -q -B package -Dbench.out="$JAR_DIR") \
				>"$JAR_DIR/mvn.log" 2>&1; then
				log "maven failed ($JAR_DIR/mvn.log): running without the Kafka Streams peer"
				JAVA=0
			fi
		fi
	fi
	((QUIX)) && quix_setup
	return 0
}

# quix_setup: the Quix Streams peer's virtualenv (never a system-wide pip
# install); python3-venv from apt when python3 cannot make one. QUIX=0 when
# that fails.
quix_setup() {
	local py=$QUIX_VENV/bin/python3 log=$OUT/quix-setup.log sudo=
	if [[ -x $py ]] && "$py" -c "import quixstreams, sys
sys.exit(quixstreams.__version__ != '$QUIX_VERSION')" 2>/dev/null; then
		return 0
	fi
	log "installing quixstreams $QUIX_VERSION into $QUIX_VENV"
	if ! python3 -c "import venv, ensurepip" 2>/dev/null; then
		[[ $(id -u) -eq 0 ]] || sudo=sudo
		log "python3 has no venv module: apt-get install python3-venv"
		{ $sudo apt-get update -qq &&
			DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-venv; } >"$log" 2>&1 ||
			{ log "apt-get failed ($log): running without the Quix Streams peer"; QUIX=0; return 0; }
	fi
	rm -rf "$QUIX_VENV"
	if ! { python3 -m venv "$QUIX_VENV" && "$py" -m pip install -q "quixstreams==$QUIX_VERSION"; } \
		>>"$log" 2>&1; then
		log "pip failed ($log): running without the Quix Streams peer"
		QUIX=0
	fi
}

# ---- broker -------------------------------------------------------------------

broker_start() {
	if KAFKA_PORT=$PORT "$ROOT/scripts/kafka.sh" status >/dev/null 2>&1; then
		log "using the broker already on $B"
		return
	fi
	KAFKA_PORT=$PORT "$ROOT/scripts/kafka.sh" start >&2
	STARTED_BROKER=1
	warm_broker
}

# warm_broker: a fresh broker creates and loads its transaction and offsets
# topics on first use and runs cold for a while; the first exactly-once
# scenario after its start paid for it (measured on 2026-12-04: stateless
# exactly-once, first after the start, started in 1.07 s with p50 / p99
# 117 / 327 ms; run again on the same broker, 0.36 s and 73 / 128 ms). So
# the ceiling loop copies 1 000 000 records in transactions, then 5 s at
# the latency rate, before any measured run. Its figures are not kept.
warm_broker() {
	local app=bench-$RUN-warmup t0 pid
	local in=$app-in out=$app-out log=$OUT/$app.log
	log "warming the broker up (exactly-once ceiling loop, not measured)"
	"$TOOLS/loadgen" -q -b "$B" -t "$in" -p "$PARTITIONS" -n 1000000 -k "$KEYS" -s "$VALUE_BYTES" ||
		die "loadgen failed"
	"$TOOLS/measure" create -b "$B" "$out" "$PARTITIONS"
	t0=$(date +%s%N)
	"$TOOLS/ceiling" -b "$B" -g "$app" -i "$in" -o "$out" -e -c "$COMMIT_MS" >"$log" 2>&1 &
	pid=$!
	"$TOOLS/measure" wait -b "$B" -g "$app" -t "$in" -p "$pid" -0 "$t0" -T "$TIMEOUT" >/dev/null ||
		log "warm-up: the ceiling loop did not finish ($log)"
	"$TOOLS/loadgen" -q -b "$B" -t "$in" -n $((LAT_RATE * 5)) -k "$KEYS" -s "$VALUE_BYTES" \
		-r "$LAT_RATE" || true
	stop_pid "$pid"
}

cleanup() {
	local pid
	for pid in $(jobs -p); do kill -TERM "$pid" 2>/dev/null || true; done
	if ((STARTED_BROKER && !KEEP_BROKER)); then
		KAFKA_PORT=$PORT "$ROOT/scripts/kafka.sh" stop >&2 || true
	fi
}

# ---- pipelines ----------------------------------------------------------------

# kstreams_yaml FILE APP GUARANTEE SCENARIO INPUT OUTPUT STATE_DIR
# A cache_bytes: value (0, 1048576, 64KiB, 1MiB, 2GiB) as a byte count.
cache_bytes_number() {
	local v=$1 n=${1%%[!0-9]*}
	case ${v#"$n"} in
	"") echo "$n" ;;
	KiB) echo $((n * 1024)) ;;
	MiB) echo $((n * 1048576)) ;;
	GiB) echo $((n * 1073741824)) ;;
	*) die "BENCH_CACHE_BYTES: '$v' is not a number of bytes, KiB, MiB or GiB" ;;
	esac
}

kstreams_yaml() {
	local file=$1 app=$2 guarantee=$3 scenario=$4 in=$5 out=$6 state=$7 props=
	[[ -n $KAFKA_PROPERTIES ]] && props=$'\n'"  properties: { $KAFKA_PROPERTIES }"
	cat >"$file" <<EOF
application: $app
kafka:
  bootstrap: [$B]$props
guarantee: $guarantee
commit_interval_ms: $COMMIT_MS
state_dir: $state
plugin_path: [$BUILD/plugins/.libs, $BUILD/examples/orders/.libs]
EOF
	case $scenario in
	stateless)
		cat >>"$file" <<EOF
sources:
  orders: { topic: $in, key: string, value: json }
nodes:
  - name: route
    type: orders.route
    from: orders
    config: { drop_kind: test }
sinks:
  - { name: purchases, from: route, topic: $out-purchases, key: string, value: json }
  - { name: refunds, from: route, topic: $out-refunds, key: string, value: json }
EOF
		;;
	stateless-yaml)
		cat >>"$file" <<EOF
sources:
  orders: { topic: $in, key: string, value: json }
nodes:
  - name: keep
    type: ops.filter
    from: orders
    config: { where: { all: [ { not: { path: /kind, eq: test } }, { path: /id, is: number } ] } }
  - name: slim
    type: ops.map
    from: keep
    config: { fields: { id: /id, user: /user, amount: /amount, kind: /kind } }
  - name: route
    type: ops.branch
    from: slim
    config: { routes: [ { to: refunds, where: { path: /kind, eq: refund } } ], default: purchases }
sinks:
  - { name: purchases, from: route, topic: $out-purchases, key: string, value: json }
  - { name: refunds, from: route, topic: $out-refunds, key: string, value: json }
EOF
		;;
	count | window)
		cat >>"$file" <<EOF
stores:
  counts: { map_size: 4GiB }
sources:
  in: { topic: $in, key: string, value: bytes }
nodes:
  - name: per_key
    type: count
    from: in
    store: counts
EOF
		if [[ $scenario == count && -n $CACHE_BYTES ]]; then
			echo "    cache_bytes: $CACHE_BYTES" >>"$file"
		fi
		[[ $scenario == window ]] && cat >>"$file" <<EOF
    window: { kind: tumbling, size: ${WINDOW_SIZE_MS}ms, grace: ${WINDOW_GRACE_MS}ms, emit: update }
EOF
		cat >>"$file" <<EOF
sinks:
  - { from: per_key, topic: $out, key: string, value: int64 }
EOF
		;;
	rekey)
		cat >>"$file" <<EOF
stores:
  counts: { map_size: 4GiB }
sources:
  in: { topic: $in, key: string, value: json }
nodes:
  - { name: by_customer, type: ops.select_key, from: in, config: { path: /customer } }
  - { name: per_customer, type: count, from: by_customer, store: counts }
sinks:
  - { from: per_customer, topic: $out, key: string, value: int64 }
EOF
		;;
	join)
		cat >>"$file" <<EOF
stores:
  customers: { map_size: 4GiB }
sources:
  orders: { topic: $in, key: string, value: json }
tables:
  customers: { topic: $in-customers, key: string, value: json }
nodes:
  - name: enriched
    type: join
    from: orders
    table: customers
    config: { kind: inner, joiner: pair }
sinks:
  - { from: enriched, topic: $out, key: string, value: json }
EOF
		;;
	sjoin)
		cat >>"$file" <<EOF
stores:
  buffer: { map_size: 4GiB }
sources:
  orders: { topic: $in, key: string, value: json }
  payments: { topic: $in-payments, key: string, value: json }
nodes:
  - name: paid
    type: join.streams
    from: [orders, payments]
    store: buffer
    config: { left: orders, right: payments, kind: inner, joiner: pair }
    window: { before: ${JOIN_WINDOW_S}s, after: ${JOIN_WINDOW_S}s, grace: ${JOIN_GRACE_S}s }
sinks:
  - { from: paid, topic: $out, key: string, value: json }
EOF
		;;
	fk)
		cat >>"$file" <<EOF
stores:
  orders: { map_size: 4GiB }
  customers: { map_size: 4GiB }
sources: # a pipeline needs one; nothing is written to it
  events: { topic: $in-events, key: string, value: json }
tables:
  orders: { topic: $in, key: string, value: json }
  customers: { topic: $in-customers, key: string, value: json }
nodes:
  - name: orders_customers
    type: join.fk
    from: orders
    config: { right: customers, foreign_key: /customer, kind: inner, joiner: pair }
sinks:
  - { from: orders_customers, topic: $out, key: string, value: json }
EOF
		;;
	esac
}

out_topics() { # scenario base
	if [[ $1 == stateless* ]]; then echo "$2-purchases,$2-refunds"; else echo "$2"; fi
}

# ---- one run ------------------------------------------------------------------

# stop_pid PID: SIGTERM, then SIGKILL after 30 s
stop_pid() {
	local pid=$1 i
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < 300; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

# rdkafka_of PID: the librdkafka file the process has mapped
rdkafka_of() { grep -o -m1 '/[^ ]*librdkafka[^ ]*' "/proc/$1/maps" 2>/dev/null || echo unknown; }
field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }

# run_one SCENARIO GUARANTEE(eos|alo) SYSTEM(kstreams|java|quix|ceiling|ceiling2)
run_one() {
	local scenario=$1 g=$2 system=$3
	local id=$RUN-$scenario-$g-$system
	local dir=$OUT/$id app=bench-$id in=bench-$id-in out=bench-$id-out
	local guarantee=exactly-once fmt=bytes spread=0
	[[ $g == alo ]] && guarantee=at-least-once
	[[ $scenario == stateless* ]] && fmt=orders
	[[ $scenario == window ]] && spread=$WINDOW_SPREAD_MS
	mkdir -p "$dir"
	local outs t
	outs=$(out_topics "$scenario" "$out")

	log "$scenario $g $system: writing $RECORDS records to $in"
	"$TOOLS/loadgen" -q -b "$B" -t "$in" -p "$PARTITIONS" -n "$RECORDS" -k "$KEYS" \
		-s "$VALUE_BYTES" -z "$SKEW" -f "$fmt" -w "$spread" || die "loadgen failed"
	for t in ${outs//,/ }; do "$TOOLS/measure" create -b "$B" "$t" "$PARTITIONS"; done

	local t0 pid cmd=()
	case $system in
	kstreams)
		kstreams_yaml "$dir/pipeline.yaml" "$app" "$guarantee" "$scenario" "$in" "$out" "$dir/state"
		cmd=("${KS_RUN[@]}" run "$dir/pipeline.yaml" --instance bench)
		;;
	java)
		local mode=count cache=()
		[[ $scenario == window ]] && mode=window
		# the same record cache size for both (statestore.cache.max.bytes)
		[[ $scenario == count && -n $CACHE_BYTES ]] &&
			cache=(-Dkstreams.bench.cache.bytes="$(cache_bytes_number "$CACHE_BYTES")")
		# shellcheck disable=SC2206
		cmd=(java $JAVA_OPTS "${cache[@]}" -Dorg.slf4j.simpleLogger.defaultLogLevel=warn
			-cp "$JAR_DIR/kstreams-bench-peer-1.jar:$JAR_DIR/lib/*" kstreams.bench.Peer
			"$mode" "$B" "$app" "$in" "$out" "$g" "$dir/state" "$COMMIT_MS"
			"$WINDOW_SIZE_MS" "$WINDOW_GRACE_MS")
		;;
	quix)
		cmd=("$QUIX_VENV/bin/python3" "$ROOT/bench/quix/peer.py" "$scenario" "$B" "$app" "$in"
			"$out" "$g" "$dir/state" "$COMMIT_MS" "$WINDOW_SIZE_MS" "$WINDOW_GRACE_MS")
		;;
	ceiling | ceiling2)
		local flag=-e
		[[ $g == alo ]] && flag=-a
		cmd=("$TOOLS/ceiling" -b "$B" -g "$app" -i "$in" -o "$out" "$flag" -c "$COMMIT_MS")
		if [[ $system == ceiling2 ]]; then # plus a changelog-like write per record
			"$TOOLS/measure" create -b "$B" "$out-2" "$PARTITIONS"
			cmd+=(-l "$out-2")
		fi
		;;
	esac
	echo "${cmd[*]}" >"$dir/command"
	t0=$(date +%s%N)
	"${cmd[@]}" >"$dir/process.log" 2>&1 &
	pid=$!
	local res
	if ! res=$("$TOOLS/measure" wait -b "$B" -g "$app" -t "$in" -p "$pid" -0 "$t0" -T "$TIMEOUT"); then
		stop_pid "$pid"
		log "$scenario $g $system FAILED; last lines of $dir/process.log:"
		tail -n 20 "$dir/process.log" >&2
		printf '%s\t%s\t%s\tfailed\n' "$scenario" "$g" "$system" >>"$RESULTS"
		return 0
	fi
	log "$scenario $g $system: $res"
	[[ $system == kstreams ]] && log "$scenario $g $system: librdkafka $(rdkafka_of "$pid")"
	if [[ $system == kstreams && $scenario == count ]]; then
		local cl
		cl=$("$TOOLS/measure" count -b "$B" "$app-counts-changelog" || true)
		log "$scenario $g $system: changelog $cl (cache_bytes ${CACHE_BYTES:-default})"
		printf '%s\t%s\t%s\t%s\n' "$scenario" "$g" "${CACHE_BYTES:-default}" \
			"$(field records "$cl")" >>"$OUT/changelog.tsv"
	fi

	# the outputs: the latest count of every key (and window) adds up to
	# the input (checked before the latency phase adds more)
	local chk=("" "" "" "" "") cres crc=0
	if [[ $system != ceiling* && ($scenario == count || $scenario == window) ]]; then
		# (-T counts from the process's start, t0: the run's budget + 2 min)
		cres=$("$TOOLS/measure" until -b "$B" -t "$outs" -m count -x "$RECORDS" -n "$RECORDS" \
			-p "$pid" -0 "$t0" -T $((TIMEOUT + 120)) 2>"$dir/check.err") || crc=$?
		if ((crc == 1)) || [[ -z $cres ]]; then
			log "$scenario $g $system: outputs INCOMPLETE ($(cat "$dir/check.err"))"
			chk=("$RECORDS" "" "" "incomplete" "")
		else
			log "$scenario $g $system: outputs $cres"
			chk=("$RECORDS" "$(field out "$cres")" "$(field keys "$cres")" "$(field sum "$cres")"
				"$(field extra "$cres")")
		fi
	fi

	# latency: steady input while the processor is caught up
	local lat ready=$dir/latency.ready lpid n=$((LAT_RATE * LAT_SECONDS))
	rm -f "$ready"
	"$TOOLS/measure" latency -b "$B" -t "$outs" -r "$ready" -w "$LAT_WARMUP_MS" -i 2000 -T $((LAT_SECONDS + 180)) \
		>"$dir/latency.out" 2>"$dir/latency.err" &
	lpid=$!
	for ((t = 0; t < 300; t++)); do
		[[ -e $ready ]] && break
		sleep 0.05
	done
	if [[ -n $LAT_AT ]]; then
		for ((t = 0; t < 1300 && 10#$(date +%S) != LAT_AT; t++)); do sleep 0.05; done
		log "$scenario $g $system: latency phase starts at $(date +%T.%N | cut -c1-12)"
	fi
	"$TOOLS/loadgen" -q -b "$B" -t "$in" -n "$n" -k "$KEYS" -s "$VALUE_BYTES" -z "$SKEW" \
		-f "$fmt" -r "$LAT_RATE" -S 2 -L || log "latency loadgen failed"
	wait "$lpid" || true
	lat=$(cat "$dir/latency.out")
	log "$scenario $g $system: $lat"
	stop_pid "$pid"

	printf '%s\t%s\t%s\tok\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t' "$scenario" "$g" \
		"$system" "$(field records "$res")" "$(field wall_s "$res")" "$(field first_s "$res")" \
		"$(field cpu_s "$res")" "$(field rss_kb "$res")" "$(field n "$lat")" \
		"$(field p50_ms "$lat")" "$(field p99_ms "$lat")" "$(field max_ms "$lat")" \
		"$(field gap_ms "$lat")" >>"$RESULTS"
	# prep (empty), then the outputs check: expect out keys sum extra
	printf '\t%s\t%s\t%s\t%s\t%s\n' "${chk[@]}" >>"$RESULTS"
}

# ---- re-key and joins -------------------------------------------------------------

# run_until SCENARIO(rekey|join|sjoin|fk) SYSTEM(kstreams|java): exactly-once;
# the outputs are read until complete (bench/measure until), which verifies
# them too. Both systems get the same input (loadgen's seeds).
run_until() {
	local scenario=$1 system=$2
	local id=$RUN-$scenario-eos-$system
	local dir=$OUT/$id app=bench-$id in=bench-$id-in out=bench-$id-out
	local gen=("$TOOLS/loadgen" -q -b "$B" -p "$PARTITIONS" -s "$VALUE_BYTES" -f json)
	local mode expect input=$RECORDS half=$((RECORDS / 2))
	mkdir -p "$dir"
	log "$scenario eos $system: writing the input to $in"
	case $scenario in
	rekey) # keyed by user, counted by the customer in the value
		"${gen[@]}" -t "$in" -n "$RECORDS" -k "$KEYS" -c "$KEYS" -z "$SKEW" || die "loadgen failed"
		mode=count expect=$RECORDS
		;;
	join) # the customers table first, then the orders keyed by customer id
		"${gen[@]}" -t "$in-customers" -n "$TABLE_KEYS" -k "$TABLE_KEYS" -P c -Q -S 7 ||
			die "loadgen failed"
		"${gen[@]}" -t "$in" -n "$RECORDS" -k "$TABLE_KEYS" -P c -z "$SKEW" || die "loadgen failed"
		mode=records expect=$RECORDS
		;;
	sjoin) # orders, then one payment per order id
		"${gen[@]}" -t "$in" -n "$half" -k "$half" -P o -Q || die "loadgen failed"
		"${gen[@]}" -t "$in-payments" -n "$half" -k "$half" -P o -Q -S 2 || die "loadgen failed"
		mode=records expect=$half input=$((2 * half))
		;;
	fk) # the customers table first, then the orders table (key: order id)
		"${gen[@]}" -t "$in-customers" -n "$TABLE_KEYS" -k "$TABLE_KEYS" -P c -Q -S 7 ||
			die "loadgen failed"
		"${gen[@]}" -t "$in" -n "$RECORDS" -k "$RECORDS" -P o -Q -c "$TABLE_KEYS" ||
			die "loadgen failed"
		"$TOOLS/measure" create -b "$B" "$in-events" "$PARTITIONS"
		mode=table expect=$RECORDS
		;;
	esac
	"$TOOLS/measure" create -b "$B" "$out" "$PARTITIONS"

	local cmd=()
	case $system in
	kstreams)
		kstreams_yaml "$dir/pipeline.yaml" "$app" exactly-once "$scenario" "$in" "$out" "$dir/state"
		cmd=("${KS_RUN[@]}" run "$dir/pipeline.yaml" --instance bench)
		;;
	java)
		# shellcheck disable=SC2206
		cmd=(java $JAVA_OPTS -Dorg.slf4j.simpleLogger.defaultLogLevel=warn
			-cp "$JAR_DIR/kstreams-bench-peer-1.jar:$JAR_DIR/lib/*" kstreams.bench.Peer
			"$scenario" "$B" "$app" "$in" "$out" eos "$dir/state" "$COMMIT_MS"
			$((JOIN_WINDOW_S * 1000)) $((JOIN_GRACE_S * 1000)))
		;;
	esac
	echo "${cmd[*]}" >"$dir/command"
	local t0 pid res rc=0
	t0=$(date +%s%N)
	"${cmd[@]}" >"$dir/process.log" 2>&1 &
	pid=$!
	res=$("$TOOLS/measure" until -b "$B" -t "$out" -m "$mode" -x "$expect" -n "$input" -p "$pid" \
		-0 "$t0" -T "$TIMEOUT" 2>"$dir/until.err") || rc=$?
	stop_pid "$pid"
	if ((rc == 1)) || [[ -z $res ]]; then
		log "$scenario eos $system FAILED ($(cat "$dir/until.err")); last lines of $dir/process.log:"
		tail -n 20 "$dir/process.log" >&2
		printf '%s\teos\t%s\tfailed\n' "$scenario" "$system" >>"$RESULTS"
		return 0
	fi
	log "$scenario eos $system: $res"
	local status=ok
	((rc == 0)) || status=extra # more outputs than the input explains
	printf '%s\teos\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\t\t\t\t\t\t%s\t%s\t%s\t%s\t%s\n' \
		"$scenario" "$system" "$status" "$(field records "$res")" "$(field wall_s "$res")" \
		"$(field first_s "$res")" "$(field cpu_s "$res")" "$(field rss_kb "$res")" \
		"$expect" "$(field out "$res")" "$(field keys "$res")" "$(field sum "$res")" \
		"$(field extra "$res")" >>"$RESULTS"
}

# ---- restore ------------------------------------------------------------------

# restore SYSTEM: replay the changelog of the count exactly-once run into an
# empty state directory.
restore() {
	local system=$1
	local src=$RUN-count-eos-$system
	local dir=$OUT/$RUN-restore-$system
	[[ -d $OUT/$src ]] || return 0
	mkdir -p "$dir"
	local app=bench-$src in=bench-$src-in out=bench-$src-out pid i
	case $system in
	kstreams)
		sed "s|^state_dir: .*|state_dir: $dir/state|" "$OUT/$src/pipeline.yaml" >"$dir/pipeline.yaml"
		"${KS_RUN[@]}" run "$dir/pipeline.yaml" --instance bench-restore >"$dir/process.log" 2>&1 &
		;;
	java)
		# shellcheck disable=SC2086
		java $JAVA_OPTS -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
			-cp "$JAR_DIR/kstreams-bench-peer-1.jar:$JAR_DIR/lib/*" kstreams.bench.Peer \
			count "$B" "$app" "$in" "$out" eos "$dir/state" "$COMMIT_MS" >"$dir/process.log" 2>&1 &
		;;
	esac
	pid=$!
	log "restore $system: replaying the changelog of $app into $dir/state"
	for ((i = 0; i < TIMEOUT * 10; i++)); do
		if [[ $system == kstreams ]]; then
			(($(grep -c "task [0-9]* started" "$dir/process.log" || true) >= PARTITIONS)) && break
		else
			grep -q "state RUNNING" "$dir/process.log" && break
		fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	stop_pid "$pid"
	# Both restore all partitions together and print, for each, the time
	# since the pass (kstreams) or the first restore (Kafka Streams) began:
	# records / the largest time.
	local agg
	agg=$(awk '/restored store .* records replayed/ {
		  for (i = 1; i < NF; i++) if ($i == "records") n += $(i - 1)
		  t = ($NF == "s") ? $(NF - 1) : 0
		  if (t > s) s = t }
		END { printf "%d %.3f", n, s }' "$dir/process.log")
	log "restore $system: $agg (records, seconds)"
	printf 'restore\teos\t%s\tok\t%s\t%s\n' "$system" ${agg% *} ${agg#* } >>"$RESULTS"
}

# ---- hot swap -------------------------------------------------------------------

# swap: the count exactly-once pipeline with its count plugin built into a
# private directory; under a steady LATENCY_RATE stream, a second build of
# the same source (another build id) is renamed over the first and
# `kstreams reload` swaps it in. The latency reader's longest gap between
# two committed outputs, next to the same figure of the count run without a
# swap, is the pause.
swap() {
	local id=$RUN-swap-eos-kstreams
	local dir=$OUT/$id app=bench-$id in=bench-$id-in out=bench-$id-out
	local plug=$dir/plugins src=() f b
	mkdir -p "$plug"
	# the count module's sources, as the build's own Makefile lists them
	for f in $(make -s -C "$BUILD/plugins" --no-print-directory -f Makefile \
		-f <(printf 'bench-print-sources:\n\t@echo $(count_la_SOURCES)\n') bench-print-sources); do
		[[ $f == *.c ]] && src+=("$(realpath -m "$ROOT/plugins/$f")")
	done
	((${#src[@]})) || { log "swap: cannot find the count plugin's sources"; return 0; }
	for b in 1 2; do
		cc -std=c11 -O2 -fPIC -shared -fvisibility=hidden -Wl,-Bsymbolic -I"$ROOT/include" -I"$ROOT/lib" \
			-DKS_BUILD_ID="\"bench-swap-$RUN-$b\"" -o "$plug/count-$b.so" "${src[@]}" ||
			{ log "swap: cannot build the count plugin"; return 0; }
	done
	cp "$plug/count-1.so" "$plug/count.so"
	kstreams_yaml "$dir/pipeline.yaml" "$app" exactly-once count "$in" "$out" "$dir/state"
	sed -i "s|^plugin_path: .*|plugins: [$plug/count.so]|" "$dir/pipeline.yaml"
	"$TOOLS/loadgen" -q -b "$B" -t "$in" -p "$PARTITIONS" -n 10000 -k "$KEYS" -s "$VALUE_BYTES" ||
		die "loadgen failed"
	"$TOOLS/measure" create -b "$B" "$out" "$PARTITIONS"
	local t0 pid lpid gpid ready=$dir/latency.ready n=$((LAT_RATE * (LAT_SECONDS + 4))) t
	t0=$(date +%s%N)
	"${KS_RUN[@]}" run "$dir/pipeline.yaml" --instance bench >"$dir/process.log" 2>&1 &
	pid=$!
	if ! "$TOOLS/measure" wait -b "$B" -g "$app" -t "$in" -p "$pid" -0 "$t0" -T "$TIMEOUT" >/dev/null; then
		stop_pid "$pid"
		printf 'swap\teos\tkstreams\tfailed\n' >>"$RESULTS"
		return 0
	fi
	"$TOOLS/measure" latency -b "$B" -t "$out" -r "$ready" -w "$LAT_WARMUP_MS" -i 2000 -T 120 \
		>"$dir/latency.out" 2>"$dir/latency.err" &
	lpid=$!
	for ((t = 0; t < 300; t++)); do
		[[ -e $ready ]] && break
		sleep 0.05
	done
	"$TOOLS/loadgen" -q -b "$B" -t "$in" -n "$n" -k "$KEYS" -s "$VALUE_BYTES" -r "$LAT_RATE" -S 3 -L &
	gpid=$!
	sleep 4
	log "swap: installing build 2 of the count plugin and reloading"
	cp "$plug/count-2.so" "$plug/count.so.tmp" && mv "$plug/count.so.tmp" "$plug/count.so"
	"$KSTREAMS" reload "$dir/pipeline.yaml" >"$dir/reload.out" 2>&1 || log "swap: reload: $(tail -n 1 "$dir/reload.out")"
	wait "$gpid" || true
	wait "$lpid" || true
	stop_pid "$pid"
	local lat swapped
	lat=$(cat "$dir/latency.out")
	swapped=$(grep -c "swapped to build bench-swap-$RUN-2" "$dir/process.log" || true)
	log "swap: $lat (swapped: $swapped)"
	if ((swapped == 0)); then
		printf 'swap\teos\tkstreams\tfailed\n' >>"$RESULTS"
		return 0
	fi
	# the worker-side part the engine reports: new instances prepared on
	# every task at a commit boundary
	local prep
	prep=$(sed -n 's/.*prepared on every task (\([0-9]*\) ms).*/\1/p' "$dir/process.log" | tail -n 1)
	printf 'swap\teos\tkstreams\tok\t\t\t\t\t\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(field n "$lat")" \
		"$(field p50_ms "$lat")" "$(field p99_ms "$lat")" "$(field max_ms "$lat")" \
		"$(field gap_ms "$lat")" "$prep" >>"$RESULTS"
}

# ---- main ---------------------------------------------------------------------

# Sourced (bench/scaling.sh): the settings and functions above, no run.
[[ ${BASH_SOURCE[0]} != "$0" ]] && return 0

mkdir -p "$OUT"
trap cleanup EXIT
build
broker_start
: >"$RESULTS"
{
	echo "# run $RUN $(date -u +%FT%TZ)"
	echo "# table_keys=$TABLE_KEYS join_window_s=$JOIN_WINDOW_S join_grace_s=$JOIN_GRACE_S scenarios=${ONLY// /,}$( ((QUIX)) && echo " quix_version=$QUIX_VERSION")"
	echo "# records=$RECORDS keys=$KEYS value_bytes=$VALUE_BYTES skew=$SKEW partitions=$PARTITIONS commit_ms=$COMMIT_MS latency_rate=$LAT_RATE latency_seconds=$LAT_SECONDS cache_bytes=${CACHE_BYTES:-default}"
	echo "# nproc=$(nproc) mem=$(free -m | awk '/^Mem:/ {print $2 " MiB"}') cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
	echo "# load_before=$(cut -d' ' -f1-3 /proc/loadavg)"
} >>"$RESULTS"

WINDOWS=1
if want window; then
	kstreams_yaml "$OUT/window-check.yaml" bench-window-check exactly-once window in out "$OUT/state"
	if ! "$KSTREAMS" check "$OUT/window-check.yaml" >"$OUT/window-check.log" 2>&1; then
		WINDOWS=0
		log "kstreams has no 'window:' support yet ($(tail -n 1 "$OUT/window-check.log")): pending"
		echo -e "window\teos\tkstreams\tpending\nwindow\talo\tkstreams\tpending" >>"$RESULTS"
	fi
fi

# Each scenario runs its exactly-once and at-least-once runs back to back,
# and kstreams next to its peer: on a shared machine the load drifts over
# minutes, and the pairs are what the ratios compare.
if want stateless; then
	run_one stateless eos kstreams
	run_one stateless alo kstreams
fi
if want stateless-yaml; then
	run_one stateless-yaml eos kstreams
	run_one stateless-yaml alo kstreams
fi
if want count; then
	for g in $GUARANTEES; do
		run_one count "$g" kstreams
		((JAVA)) && run_one count "$g" java
		((QUIX)) && run_one count "$g" quix
	done
fi
# the ceiling, on the count input (the same record sizes as every scenario)
if ((CEILING)) && { want stateless || want stateless-yaml || want count || want window; }; then
	for g in $GUARANTEES; do run_one count "$g" ceiling; done
fi
# what the count scenario's Kafka I/O alone costs: the ceiling writing two
# records per input (an output and a changelog-like record)
if ((CEILING)) && want count && [[ " $GUARANTEES " == *" eos "* ]]; then
	run_one count eos ceiling2
fi
if want window; then
	for g in $GUARANTEES; do
		((WINDOWS)) && run_one window "$g" kstreams
		((JAVA)) && run_one window "$g" java
		((QUIX)) && run_one window "$g" quix
	done
fi
# the re-key and join rows: kstreams, then Kafka Streams on the same input
for sc in rekey join sjoin fk; do
	if want "$sc"; then
		run_until "$sc" kstreams
		((JAVA)) && run_until "$sc" java
	fi
done
if want restore; then
	want count || log "restore needs the count scenario; skipped"
	restore kstreams
	((JAVA)) && restore java
fi
if want swap; then
	if { "$KSTREAMS" 2>&1 || true; } | grep -q "^  reload "; then
		swap
	else
		echo -e "swap\teos\tkstreams\tpending" >>"$RESULTS"
	fi
fi
echo "# load_after=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$RESULTS"
# each run's figures stay, for bench/variation.py across runs
cp "$RESULTS" "$OUT/results-$RUN.tsv"

python3 "$ROOT/bench/report.py" "$RESULTS" --chart "$CHART" --venv "$BUILD/bench-venv" |
	tee "$OUT/table.md"

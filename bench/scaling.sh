#!/usr/bin/env bash
# bench/scaling.sh - how the count scenario (exactly-once, kstreams only)
# scales, in one command: three sweeps from one base point, each drawn as one
# chart.
#
#   bench/scaling.sh [--quick] [--keep-broker]     (or, from a build: make bench-scaling)
#
#   keys        1 000; 100 000; 10 000 000 distinct keys   (4 partitions, 1 process)
#   partitions  4, 16, 64 input partitions                 (100 000 keys, 1 process)
#   processes   1, 2, 3 kstreams processes of one application on this machine
#               (100 000 keys, 4 partitions: 3 processes get 2/1/1 tasks)
#
# Each point: bench/loadgen writes RECORDS records (uniform keys, the value
# size and skew of bench/run.sh) to a fresh input topic; the processes start
# together (each its own state_dir and --instance); bench/measure waits for
# lag 0 of the application's group and reads utime+stime and VmHWM of every
# process: records/s = RECORDS / (start -> lag 0), CPU s per 1M records (all
# processes), peak RSS (the sum of each process's peak). After SIGTERM, the
# LMDB store size on disk is `du` of the state directories (allocated
# blocks, not the sparse map size). The 1-minute load average is noted at
# each point's start. The base point is measured once and shown in all three
# sweeps. The point's topics and state directories are deleted after it
# (BENCH_SCALING_KEEP=1 keeps them). Before the first point an unrecorded
# warm-up point (BENCH_SCALING_WARMUP records, 20000) lets the broker load
# its transaction and group coordinators. BENCH_SCALING_RUNS=N runs the
# whole set N times (the rows carry the run's number; the table and charts
# show each point's median and range).
#
# Writes $BENCH_BUILD/bench-out/scaling.tsv (raw), scaling.md (the table,
# also printed) and scaling-keys.png, scaling-partitions.png,
# scaling-processes.png, copied to docs/ (BENCH_SCALING_DOCS=0: not copied).
#
# Environment (defaults; the others of bench/run.sh apply: BENCH_BUILD,
# BENCH_KAFKA_PORT, BENCH_VALUE_BYTES, BENCH_SKEW, BENCH_COMMIT_MS,
# BENCH_CACHE_BYTES, BENCH_TIMEOUT):
#   BENCH_SCALING_RECORDS     records per point (10000000: with uniform keys,
#                             10M records reach 63% of 10M keys; --quick: 1000000)
#   BENCH_SCALING_KEYS        the keys sweep ("1000 100000 10000000";
#                             --quick: "1000 100000 1000000")
#   BENCH_SCALING_PARTITIONS  the partitions sweep ("4 16 64")
#   BENCH_SCALING_PROCESSES   the processes sweep ("1 2 3")
#   BENCH_SCALING_BASE        the base point "KEYS PARTITIONS PROCESSES"
#                             ("100000 4 1")
#   BENCH_SCALING_SWEEPS      which sweeps run ("keys partitions processes")
#   BENCH_TIMEOUT             seconds per point (run.sh's 300; here the
#                             default is 1800, a 10M-record point takes minutes)
set -euo pipefail

SCALING_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
QUICK=0
SCALING_KEEP_BROKER=0
while (($#)); do
	case $1 in
	--quick) QUICK=1 ;;
	--keep-broker) SCALING_KEEP_BROKER=1 ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "scaling.sh: unknown option $1" >&2; exit 64 ;;
	esac
	shift
done
export BENCH_TIMEOUT=${BENCH_TIMEOUT:-1800}
set -- # run.sh parses the positional parameters when sourced
# the settings, build, broker and pipeline functions of the main benchmark
# shellcheck source=bench/run.sh
source "$SCALING_ROOT/bench/run.sh"
KEEP_BROKER=$SCALING_KEEP_BROKER
JAVA=0 # kstreams only: build() skips the Kafka Streams peer

if ((QUICK)); then
	S_RECORDS=${BENCH_SCALING_RECORDS:-1000000}
	S_KEYS=${BENCH_SCALING_KEYS:-"1000 100000 1000000"}
else
	S_RECORDS=${BENCH_SCALING_RECORDS:-10000000}
	S_KEYS=${BENCH_SCALING_KEYS:-"1000 100000 10000000"}
fi
S_PARTITIONS=${BENCH_SCALING_PARTITIONS:-"4 16 64"}
S_PROCESSES=${BENCH_SCALING_PROCESSES:-"1 2 3"}
read -r BASE_KEYS BASE_PARTITIONS BASE_PROCS <<<"${BENCH_SCALING_BASE:-100000 4 1}"
SWEEPS=${BENCH_SCALING_SWEEPS:-"keys partitions processes"}
S_KEEP=${BENCH_SCALING_KEEP:-0}
S_DOCS=${BENCH_SCALING_DOCS:-1}
S_RUNS=${BENCH_SCALING_RUNS:-1}
S_WARMUP=${BENCH_SCALING_WARMUP:-20000}
REP=0
S_RESULTS=$OUT/scaling.tsv
declare -A MEASURED # "keys partitions procs" -> the measured columns

# python3 with matplotlib: the system's, else Debian's package (as
# scripts/setup.sh installs packages), else report.py's virtualenv fallback
ensure_matplotlib() {
	local py
	for py in python3 /usr/bin/python3; do
		"$py" -c 'import matplotlib' 2>/dev/null && return 0
	done
	command -v apt-get >/dev/null || return 0
	local sudo=
	(($(id -u) == 0)) || sudo=sudo
	log "installing python3-matplotlib (apt-get)"
	{ $sudo apt-get update -qq &&
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
			python3-matplotlib; } >"$OUT/apt.log" 2>&1 ||
		log "apt-get failed ($OUT/apt.log): report.py's virtualenv is the fallback"
}

# measure_point KEYS PARTITIONS PROCS: one run; MEASURED["KEYS PARTITIONS
# PROCS"] = the measured columns (status records wall_s first_s cpu_s rss_kb
# store_kb load1), tab-separated
measure_point() {
	local keys=$1 parts=$2 procs=$3 records=${4:-$S_RECORDS}
	local id=$RUN-scaling-r$REP-k$keys-p$parts-n$procs-$records
	local dir=$OUT/$id app=bench-$id in=bench-$id-in out=bench-$id-out
	local load1 i pids=() states=() t0
	load1=$(cut -d' ' -f1 /proc/loadavg)
	mkdir -p "$dir"
	log "scaling $keys keys, $parts partitions, $procs process(es): writing $records records"
	"$TOOLS/loadgen" -q -b "$B" -t "$in" -p "$parts" -n "$records" -k "$keys" \
		-s "$VALUE_BYTES" -z "$SKEW" -f bytes >&2 || die "loadgen failed"
	"$TOOLS/measure" create -b "$B" "$out" "$parts" >&2
	kstreams_yaml "$dir/pipeline.yaml" "$app" exactly-once count "$in" "$out" "$dir/state"
	t0=$(date +%s%N)
	for ((i = 1; i <= procs; i++)); do
		states+=("$dir/state-$i")
		sed "s|^state_dir: .*|state_dir: $dir/state-$i|" "$dir/pipeline.yaml" >"$dir/pipeline-$i.yaml"
		"$KSTREAMS" run "$dir/pipeline-$i.yaml" --instance "bench-$i" >"$dir/process-$i.log" 2>&1 &
		pids+=($!)
	done
	local status=ok res=
	if ! res=$("$TOOLS/measure" wait -b "$B" -g "$app" -t "$in" -p "$(IFS=,; echo "${pids[*]}")" \
		-0 "$t0" -T "$TIMEOUT"); then
		status=failed
		log "scaling point $id FAILED; last lines of $dir/process-1.log:"
		tail -n 20 "$dir/process-1.log" >&2
	fi
	for i in "${pids[@]}"; do stop_pid "$i"; done
	local store_kb
	store_kb=$(du -sk "${states[@]}" 2>/dev/null | awk '{s += $1} END {print s + 0}')
	log "scaling $keys keys, $parts partitions, $procs process(es): $res store_kb=$store_kb load=$load1"
	if ((!S_KEEP)); then
		rm -rf "${states[@]}"
		"$TOOLS/measure" delete -b "$B" "$in" "$out" "$app-counts-changelog" >&2 || true
	fi
	MEASURED["$keys $parts $procs"]=$(printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s' "$status" \
		"$(field records "$res")" "$(field wall_s "$res")" "$(field first_s "$res")" \
		"$(field cpu_s "$res")" "$(field rss_kb "$res")" "$store_kb" "$load1")
}

# point SWEEP KEYS PARTITIONS PROCS: one row of scaling.tsv (a point already
# measured in this run, the base, is reused)
point() {
	local sweep=$1 k=$2 p=$3 n=$4
	local at="$k $p $n"
	[[ -n ${MEASURED[$at]:-} ]] || measure_point "$k" "$p" "$n"
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$sweep" "$k" "$p" "$n" "${MEASURED[$at]}" "$REP" \
		>>"$S_RESULTS"
}

mkdir -p "$OUT"
trap cleanup EXIT
build
ensure_matplotlib
broker_start
{
	echo "# run $RUN $(date -u +%FT%TZ) scaling quick=$QUICK"
	echo "# records=$S_RECORDS runs=$S_RUNS value_bytes=$VALUE_BYTES skew=$SKEW commit_ms=$COMMIT_MS cache_bytes=${CACHE_BYTES:-default} base=${BASE_KEYS},${BASE_PARTITIONS},${BASE_PROCS}"
	echo "# nproc=$(nproc) mem=$(free -m | awk '/^Mem:/ {print $2 " MiB"}') cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
	echo "# load_before=$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$S_RESULTS"
((S_WARMUP > 0)) && measure_point "$BASE_KEYS" "$BASE_PARTITIONS" "$BASE_PROCS" "$S_WARMUP"
for ((REP = 1; REP <= S_RUNS; REP++)); do
	MEASURED=()
	# the base point first: every sweep shows it
	measure_point "$BASE_KEYS" "$BASE_PARTITIONS" "$BASE_PROCS"
	for sweep in $SWEEPS; do
		case $sweep in
		keys) for v in $S_KEYS; do point keys "$v" "$BASE_PARTITIONS" "$BASE_PROCS"; done ;;
		partitions) for v in $S_PARTITIONS; do point partitions "$BASE_KEYS" "$v" "$BASE_PROCS"; done ;;
		processes) for v in $S_PROCESSES; do point processes "$BASE_KEYS" "$BASE_PARTITIONS" "$v"; done ;;
		*) die "unknown sweep $sweep" ;;
		esac
	done
done
echo "# load_after=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$S_RESULTS"

charts=()
((S_DOCS)) && charts=(--docs "$ROOT/docs")
python3 "$ROOT/bench/scaling_report.py" "$S_RESULTS" --out "$OUT" --venv "$BUILD/bench-venv" \
	"${charts[@]}" | tee "$OUT/scaling.md"

#!/usr/bin/env bash
# Single-node KRaft Kafka broker on 127.0.0.1 for tests, run from Maven Central
# jars (no tarball, no Kafka shell scripts), or a three-node KRaft cluster.
#
#   scripts/kafka.sh start [VERSION]   fetch jars if needed, start, wait until ready
#   scripts/kafka.sh stop              stop the broker and delete its data dir
#   scripts/kafka.sh stop-keep         stop the broker, keep its data
#   scripts/kafka.sh restart           stop-keep + start on the same data, version
#                                      and profile
#   scripts/kafka.sh status            exit 0 and print the ready line if it answers
#   scripts/kafka.sh fetch [VERSION]   only download the jars
#   scripts/kafka.sh topics ARGS...    org.apache.kafka.tools.TopicCommand
#                                      with --bootstrap-server prepended
#   scripts/kafka.sh tool CLASS ARGS...  any main class on the broker classpath
#
# Broker profiles (KAFKA_PROFILE, recorded in the data dir like the version):
#   test      (default) fast test settings: auto-creation off, no join delay,
#             4-partition internal topics, quick transaction abort, small
#             cleaner buffer
#   defaults  Kafka's own defaults (auto-creation on, num.partitions=1,
#             group.initial.rebalance.delay.ms=3000, 50-partition internal
#             topics, ...); only node/listener/quorum settings and replication
#             1 / min ISR 1 for the internal topics are set
#
# Three nodes, each broker+controller (node ids 1..3), Kafka's defaults except
# default.replication.factor=3 and min.insync.replicas=2:
#   scripts/kafka.sh cluster start [VERSION]  start the nodes not running, wait
#                                      until all three see each other and a
#                                      topic with replication factor 3 can be
#                                      created
#   scripts/kafka.sh cluster stop      SIGKILL all nodes, delete the data
#   scripts/kafka.sh cluster stop-keep stop all nodes (SIGTERM), keep the data
#   scripts/kafka.sh cluster kill N [--wait]  SIGKILL node N (no controlled
#                                      shutdown); --wait: until the others no
#                                      longer list it (fenced, leaders moved)
#   scripts/kafka.sh cluster start-node N  start node N on its data, wait until
#                                      the others list it and it is back in the
#                                      ISR of every partition it replicates
#   scripts/kafka.sh cluster status    one line per node; exit 1 unless all 3 up
#   scripts/kafka.sh cluster bootstrap print the three host:port, comma-separated
#   scripts/kafka.sh cluster leader TOPIC PARTITION  node id of the leader
#   scripts/kafka.sh cluster txn-coordinator TRANSACTIONAL_ID  node id of its
#                                      transaction coordinator
#   scripts/kafka.sh cluster group-coordinator GROUP  node id of its group
#                                      coordinator
#   scripts/kafka.sh cluster controller  node id of the active KRaft controller
#   scripts/kafka.sh cluster topics ARGS... / cluster tool CLASS ARGS...
#                                      as above, against the cluster
# Look-ups print -1 and exit 1 when there is no leader. They read the metadata
# of a live node, which names a SIGKILLed leader until the controller fences
# it (broker.session.timeout.ms, 9 s by default).
#
# Environment: KAFKA_VERSION (4.1.1), KAFKA_PORT (9092; the controller listens
# on KAFKA_PORT+1000), KAFKA_DIR (/tmp/kstreams-kafka-$KAFKA_PORT),
# KAFKA_PROFILE (test; ignored by restart, which keeps the recorded one),
# KSTREAMS_CACHE ($HOME/.cache/kstreams), JAVA (java), KCAT (kcat or kafkacat).
# For `cluster`: KAFKA_PORT is the base port (19092; node N listens on
# base+N-1, its controller on base+N-1+1000), KAFKA_CLUSTER_DIR
# (/tmp/kstreams-cluster-$KAFKA_PORT, one nodeN/ per node), KAFKA_CLUSTER_HEAP
# (384m per node).
set -euo pipefail

readonly DEFAULT_VERSION=4.1.1
readonly LOG4J2_VERSION=2.24.3
readonly DEP_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1
readonly READY_TIMEOUT=90
readonly STOP_TIMEOUT=30

# `cluster` commands: PORT is the base port, nodes use PORT..PORT+2.
if [[ ${1:-} == cluster ]]; then CLUSTER=1; else CLUSTER=0; fi
readonly CLUSTER
if ((CLUSTER)); then PORT=${KAFKA_PORT:-19092}; else PORT=${KAFKA_PORT:-9092}; fi
if ! [[ $PORT =~ ^[0-9]+$ ]] || ((PORT < 1 || PORT + 1000 + 2 * CLUSTER > 65535)); then
	echo "kafka.sh: bad KAFKA_PORT '$PORT'" >&2
	exit 2
fi
CPORT=$((PORT + 1000))
if ((CLUSTER)); then
	DIR=$(realpath -m "${KAFKA_CLUSTER_DIR:-/tmp/kstreams-cluster-$PORT}")
else
	DIR=$(realpath -m "${KAFKA_DIR:-/tmp/kstreams-kafka-$PORT}")
fi
CACHE=${KSTREAMS_CACHE:-$HOME/.cache/kstreams}
JAVA=${JAVA:-java}
PROPS=$DIR/server.properties
PIDFILE=$DIR/kafka.pid
LOG=$DIR/broker.log

die() { echo "kafka.sh: $*" >&2; exit 1; }

kcat_bin() {
	if [[ -n ${KCAT:-} ]]; then echo "$KCAT"; return; fi
	command -v kcat || command -v kafkacat || die "kcat (or kafkacat) not found"
}

# Short forms name the pinned patch release of a line.
resolve_version() {
	case $1 in
	3.9) echo 3.9.2 ;;
	4.1) echo 4.1.1 ;;
	*) echo "$1" ;;
	esac
}

lib_dir() { echo "$CACHE/kafka-$1/lib"; }

write_pom() { # file version extra-dependencies-xml managed-dependencies-xml
	cat >"$1" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kstreams</groupId><artifactId>kafka-runtime</artifactId><version>1</version>
  <dependencyManagement><dependencies>$4
  </dependencies></dependencyManagement>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$2</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$2</version></dependency>$3
  </dependencies>
</project>
EOF
}

dep_xml() { # group artifact version
	printf '\n    <dependency><groupId>%s</groupId><artifactId>%s</artifactId><version>%s</version></dependency>' "$@"
}

# Maven 3.8 -q still prints bare colour resets, so keep its output for failures.
copy_deps() { # dir (holding pom.xml; jars go to dir/lib)
	mvn -q -B -f "$1/pom.xml" "$DEP_PLUGIN:copy-dependencies" \
		-DincludeScope=runtime -DoutputDirectory="$1/lib" >"$1/mvn.log" 2>&1 && return 0
	sed 's/\x1b\[[0-9;]*m//g; /^$/d' "$1/mvn.log" >&2
	return 1
}

jar_version() { # dir artifact -> version of dir/artifact-<version>.jar, if any
	find "$1" -maxdepth 1 -name "$2-[0-9]*.jar" -printf '%f\n' | sed "s/^$2-//; s/\.jar\$//"
}

# The Kafka POMs bring slf4j-api but no backend. The backend must match both
# the slf4j major (binder vs provider) and the logging API Kafka's own code
# calls (log4j 1 in 3.x, log4j2 in 4.x), so resolve Kafka alone first, look
# at what came, then resolve again with the backend added, pinning what Kafka
# chose (else slf4j-reload4j downgrades reload4j 1.2.25 to 1.2.19 in 3.9).
fetch_jars() { # version
	local ver=$1 lib base tmp slf r4j l4j extra managed
	lib=$(lib_dir "$ver")
	[[ -d $lib ]] && return 0
	base=$(dirname "$lib")
	mkdir -p "$base"
	exec 8>"$base.lock"
	flock -w 600 8 || die "timed out waiting for another fetch of $ver"
	[[ -d $lib ]] && return 0
	echo "kafka.sh: fetching Kafka $ver jars into $lib" >&2
	tmp=$(mktemp -d "$base/fetch.XXXXXX")
	mkdir "$tmp/kafka" "$tmp/full"
	write_pom "$tmp/kafka/pom.xml" "$ver" "" ""
	copy_deps "$tmp/kafka" || { rm -rf "$tmp"; die "maven could not resolve kafka_2.13:$ver"; }
	slf=$(jar_version "$tmp/kafka/lib" slf4j-api)
	[[ $slf =~ ^[0-9]+\.[0-9.]+$ ]] || { rm -rf "$tmp"; die "expected one slf4j-api jar, found '$slf'"; }
	managed=$(dep_xml org.slf4j slf4j-api "$slf")
	if [[ $ver == 3.* ]]; then
		r4j=$(jar_version "$tmp/kafka/lib" reload4j)
		[[ -n $r4j ]] && managed+=$(dep_xml ch.qos.reload4j reload4j "$r4j")
		extra=$(dep_xml org.slf4j slf4j-reload4j "$slf")
	else
		l4j=$(jar_version "$tmp/kafka/lib" log4j-api)
		l4j=${l4j:-$LOG4J2_VERSION}
		extra=$(dep_xml org.apache.logging.log4j log4j-core "$l4j")
		extra+=$(dep_xml org.apache.logging.log4j log4j-1.2-api "$l4j")
		if [[ $slf == 1.* ]]; then
			extra+=$(dep_xml org.apache.logging.log4j log4j-slf4j-impl "$l4j")
		else
			extra+=$(dep_xml org.apache.logging.log4j log4j-slf4j2-impl "$l4j")
		fi
	fi
	write_pom "$tmp/full/pom.xml" "$ver" "$extra" "$managed"
	copy_deps "$tmp/full" || { rm -rf "$tmp"; die "maven could not resolve the logging backend for $ver"; }
	cp "$tmp/full/pom.xml" "$base/pom.xml"
	mv "$tmp/full/lib" "$lib" # atomic: a lib dir that exists is complete
	rm -rf "$tmp"
}

# Logging goes to stdout, which is broker.log, so JVM crash output and log
# lines share one file. Tools log to stderr to keep their stdout parseable.
write_log_config() { # version file out|err broker(0|1)
	local ver=$1 file=$2 to=$3 broker=$4
	if [[ $ver == 3.* ]]; then
		cat >"$file" <<EOF
log4j.rootLogger=WARN, out
log4j.appender.out=org.apache.log4j.ConsoleAppender
log4j.appender.out.Target=System.$to
log4j.appender.out.layout=org.apache.log4j.PatternLayout
log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c)%n
EOF
		((broker)) && echo "log4j.logger.kafka.server.KafkaRaftServer=INFO" >>"$file"
	else
		cat >"$file" <<EOF
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.target = SYSTEM_${to^^}
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = out
EOF
		((broker)) && printf '%s\n' "logger.server.name = kafka.server.KafkaRaftServer" \
			"logger.server.level = INFO" >>"$file"
	fi
	return 0
}

log_opt() { # version file
	if [[ $1 == 3.* ]]; then echo "-Dlog4j.configuration=file:$2"; else echo "-Dlog4j2.configurationFile=$2"; fi
}

write_server_properties() { # version profile
	cat >"$PROPS" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$CPORT
listeners=PLAINTEXT://127.0.0.1:$PORT,CONTROLLER://127.0.0.1:$CPORT
advertised.listeners=PLAINTEXT://127.0.0.1:$PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$DIR/data
EOF
	if [[ $2 == defaults ]]; then
		cat >>"$PROPS" <<EOF

# Profile 'defaults': Kafka's own defaults for everything else (topic
# auto-creation on, num.partitions=1, group.initial.rebalance.delay.ms=3000,
# 50 partitions per internal topic, the default log cleaner). Set only what
# one node cannot run without: it cannot hold the internal topics' default
# 3 replicas nor meet their default min ISR of 2.
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
EOF
		write_share_coordinator_properties "$1" 1 1
		return 0
	fi
	cat >>"$PROPS" <<EOF

num.partitions=1
default.replication.factor=1
min.insync.replicas=1
auto.create.topics.enable=false
delete.topic.enable=true

# One node: internal topics must live with one replica. Few partitions make
# the first group join / first InitProducerId fast.
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4

# Test speed: no join delay, short sessions allowed, timed-out transactions
# aborted within ~2 s instead of 10 s.
group.initial.rebalance.delay.ms=0
group.min.session.timeout.ms=1000
transaction.abort.timed.out.transaction.cleanup.interval.ms=2000
transaction.remove.expired.transaction.cleanup.interval.ms=60000

# Compaction: the default 128 MiB dedupe buffer is a quarter of our heap, and
# the default 15 s back-off makes compaction tests slow.
log.cleaner.enable=true
log.cleaner.threads=1
log.cleaner.dedupe.buffer.size=16777216
log.cleaner.backoff.ms=1000
EOF
	write_share_coordinator_properties "$1" 1 1
}

# The share-group coordinator's state topic exists from 4.0; 3.9 has no
# such settings.
write_share_coordinator_properties() { # version replication min-isr
	[[ $1 == 3.* ]] && return 0
	cat >>"$PROPS" <<EOF
share.coordinator.state.topic.replication.factor=$2
share.coordinator.state.topic.min.isr=$3
EOF
}

# Zombies count as dead: nothing may reap the orphaned JVM in a container.
alive() {
	local state
	[[ $1 =~ ^[0-9]+$ ]] || return 1
	state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
	[[ -n $state && $state != Z ]]
}

# A pid is ours only if it is a live JVM started on our props file.
is_ours() {
	alive "$1" && tr '\0' '\n' <"/proc/$1/cmdline" 2>/dev/null | grep -qxF "$PROPS"
}

# Prints the broker's pid; falls back to a /proc scan if the pid file is lost.
find_pid() {
	local pid p
	pid=$(cat "$PIDFILE" 2>/dev/null || true)
	if is_ours "$pid"; then echo "$pid"; return 0; fi
	# One grep over all command lines picks the candidates (forks are slow on
	# a loaded machine, and the cluster scans once per node).
	for p in $(grep -lsaF -- "$PROPS" /proc/[0-9]*/cmdline); do
		pid=${p#/proc/}
		pid=${pid%/cmdline}
		if is_ours "$pid"; then echo "$pid"; return 0; fi
	done
	return 1
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

answers() {
	local out
	port_open "$PORT" || return 1
	out=$(timeout 10 "$(kcat_bin)" -b "127.0.0.1:$PORT" -L -m 5 2>/dev/null) || return 1
	grep -qF "broker 1 at 127.0.0.1:$PORT" <<<"$out"
}

recorded_version() { cat "$DIR/version" 2>/dev/null || true; }

# Data dirs from before profiles existed hold the test profile.
recorded_profile() {
	[[ -f $DIR/version ]] || return 0
	cat "$DIR/profile" 2>/dev/null || echo test
}

# The test profile keeps the line it always had.
ready_line() {
	local extra=
	[[ $(recorded_profile) == defaults ]] && extra=" (profile defaults)"
	echo "kafka $(recorded_version) ready on 127.0.0.1:$PORT$extra"
}

# alive, not is_ours: a just-forked child has not exec'd java yet.
wait_ready() { # pid
	local pid=$1 deadline=$((SECONDS + READY_TIMEOUT))
	while ((SECONDS < deadline)); do
		if ! alive "$pid"; then
			echo "kafka.sh: broker exited during startup; last lines of $LOG:" >&2
			tail -n 40 "$LOG" >&2 || true
			exit 1
		fi
		if answers; then ready_line; return 0; fi
		sleep 0.5
	done
	echo "kafka.sh: broker not ready after ${READY_TIMEOUT}s (pid $pid still running); last lines of $LOG:" >&2
	tail -n 40 "$LOG" >&2 || true
	exit 1
}

start_broker() { # [version] [profile]
	local want=${1:-${KAFKA_VERSION:-}} have pid lib cid profile had
	have=$(recorded_version)
	want=$(resolve_version "${want:-${have:-$DEFAULT_VERSION}}")
	if [[ -n $have && $have != "$want" ]]; then
		die "$DIR holds Kafka $have data, not $want; run 'kafka.sh stop' first"
	fi
	had=$(recorded_profile)
	profile=${2:-${KAFKA_PROFILE:-${had:-test}}}
	case $profile in
	test | defaults) ;;
	*) die "unknown KAFKA_PROFILE '$profile' (test or defaults)" ;;
	esac
	if [[ -n $had && $had != "$profile" ]]; then
		die "$DIR holds a broker of profile $had, not $profile; run 'kafka.sh stop' first"
	fi

	if pid=$(find_pid); then
		wait_ready "$pid"
		return 0
	fi
	if port_open "$PORT" || port_open "$CPORT"; then
		die "port $PORT or $CPORT on 127.0.0.1 is taken by a process not started from $DIR"
	fi

	fetch_jars "$want"
	lib=$(lib_dir "$want")

	if [[ -e $DIR && ! -f $DIR/version ]] && [[ -n $(ls -A "$DIR") ]]; then
		die "$DIR exists and is not a kafka.sh data dir"
	fi
	mkdir -p "$DIR/data"
	echo "$want" >"$DIR/version"
	echo "$profile" >"$DIR/profile"
	write_server_properties "$want" "$profile"
	write_log_config "$want" "$DIR/log4j.properties" out 1
	write_log_config "$want" "$DIR/tools-log4j.properties" err 0

	if [[ ! -f $DIR/data/meta.properties ]]; then
		cid=$(cat "$DIR/cluster.id" 2>/dev/null || true)
		if [[ -z $cid ]]; then
			cid=$("$JAVA" -Xmx256m "$(log_opt "$want" "$DIR/tools-log4j.properties")" \
				-cp "$lib/*" kafka.tools.StorageTool random-uuid)
			echo "$cid" >"$DIR/cluster.id"
		fi
		"$JAVA" -Xmx256m "$(log_opt "$want" "$DIR/tools-log4j.properties")" -cp "$lib/*" \
			kafka.tools.StorageTool format -t "$cid" -c "$PROPS" --ignore-formatted >>"$LOG" 2>&1 ||
			{ tail -n 40 "$LOG" >&2; die "formatting $DIR/data failed"; }
	fi

	# setsid: a Ctrl-C or process-group kill aimed at the caller must not take
	# the broker down with it. Without job control bash does not make the
	# child a group leader, so setsid and nohup exec and $! is the JVM. The
	# JVM must not inherit the lock fds, or it holds the locks forever.
	echo "=== $(date -u +%FT%TZ) starting kafka $want" >>"$LOG"
	setsid nohup "$JAVA" -Xmx512m -Xms128m -XX:+ExitOnOutOfMemoryError \
		-Djava.awt.headless=true "$(log_opt "$want" "$DIR/log4j.properties")" \
		-cp "$lib/*" kafka.Kafka "$PROPS" >>"$LOG" 2>&1 </dev/null 8>&- 9>&- &
	pid=$!
	echo "$pid" >"$PIDFILE"
	wait_ready "$pid"
}

stop_broker() {
	local pid deadline
	if pid=$(find_pid); then
		kill -TERM "$pid" 2>/dev/null || true
		deadline=$((SECONDS + STOP_TIMEOUT))
		while is_ours "$pid" && ((SECONDS < deadline)); do sleep 0.2; done
		if is_ours "$pid"; then
			echo "kafka.sh: broker $pid ignored SIGTERM for ${STOP_TIMEOUT}s; killing" >&2
			kill -KILL "$pid" 2>/dev/null || true
			while is_ours "$pid"; do sleep 0.1; done
		fi
	fi
	rm -f "$PIDFILE"
}

remove_data() {
	[[ -e $DIR ]] || return 0
	[[ -f $DIR/version ]] || die "$DIR is not a kafka.sh data dir; not deleting it"
	rm -rf "$DIR"
}

# Same version as the broker (running or last run), else the default.
tool_lib() {
	local ver
	ver=$(recorded_version)
	ver=$(resolve_version "${ver:-${KAFKA_VERSION:-$DEFAULT_VERSION}}")
	fetch_jars "$ver"
	TOOL_VERSION=$ver
	TOOL_LIB=$(lib_dir "$ver")
}

run_tool() { # class args...
	local cfg
	tool_lib
	cfg=$(mktemp --suffix=.properties /tmp/kafka-tool-log4j.XXXXXX) # log4j2 picks the parser by suffix
	write_log_config "$TOOL_VERSION" "$cfg" err 0
	local rc=0
	"$JAVA" -Xmx256m "$(log_opt "$TOOL_VERSION" "$cfg")" -cp "$TOOL_LIB/*" "$@" || rc=$?
	rm -f "$cfg"
	return "$rc"
}

# ------------------------------------------------------------------ cluster
# Three combined broker+controller nodes. DIR is the cluster dir (version,
# cluster.id, logging configs, node1/ node2/ node3/); node_vars points PROPS,
# PIDFILE and LOG at one node, so find_pid and is_ours work per node.

readonly CLUSTER_SIZE=3
readonly CLUSTER_READY_TIMEOUT=180
readonly CLUSTER_ISR_TIMEOUT=120
readonly CLUSTER_PROBE_TOPIC=kstreams-cluster-probe
CLUSTER_HEAP=${KAFKA_CLUSTER_HEAP:-384m}

node_vars() { # n
	NODE=$1
	NPORT=$((PORT + NODE - 1))
	NCPORT=$((NPORT + 1000))
	NDIR=$DIR/node$NODE
	PROPS=$NDIR/server.properties
	PIDFILE=$NDIR/kafka.pid
	LOG=$NDIR/broker.log
}

check_node() {
	[[ $1 =~ ^[0-9]+$ ]] && ((1 <= $1 && $1 <= CLUSTER_SIZE)) ||
		die "no node '$1' (nodes are 1..$CLUSTER_SIZE)"
}

cluster_bootstrap() {
	local n out=
	for ((n = 1; n <= CLUSTER_SIZE; n++)); do out+=${out:+,}127.0.0.1:$((PORT + n - 1)); done
	echo "$out"
}

since() { # start (EPOCHREALTIME) -> seconds elapsed, one decimal
	awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'
}

write_node_properties() { # version
	local n voters=
	for ((n = 1; n <= CLUSTER_SIZE; n++)); do voters+=${voters:+,}$n@127.0.0.1:$((CPORT + n - 1)); done
	cat >"$PROPS" <<EOF
process.roles=broker,controller
node.id=$NODE
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$NPORT,CONTROLLER://127.0.0.1:$NCPORT
advertised.listeners=PLAINTEXT://127.0.0.1:$NPORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$NDIR/data

# Kafka's defaults for everything else (topic auto-creation on,
# num.partitions=1, 50 partitions per internal topic,
# group.initial.rebalance.delay.ms=3000, broker.session.timeout.ms=9000, the
# default log cleaner), except that topics get 3 replicas and acks=all writes
# need 2 in sync. The internal topics' 3 / 2 are their defaults, stated here
# for the reader.
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
EOF
	write_share_coordinator_properties "$1" 3 2
}

node_meta() { # port -> the metadata (kcat -L) as that node answers it
	timeout 10 "$(kcat_bin)" -b "127.0.0.1:$1" -L -m 5 2>/dev/null
}

# Any live node's view; kcat tries the bootstrap addresses until one answers.
cluster_meta() {
	timeout 15 "$(kcat_bin)" -b "$(cluster_bootstrap)" -L -m 10 2>/dev/null ||
		die "no node of the cluster answers on $(cluster_bootstrap)"
}

lists_broker() { # metadata n
	grep -qF "broker $2 at 127.0.0.1:$((PORT + $2 - 1))" <<<"$1"
}

# Node NODE answers, and its metadata lists every node in `want`.
node_sees() { # want...
	local meta n
	port_open "$NPORT" || return 1
	meta=$(node_meta "$NPORT") || return 1
	for n in "$@"; do lists_broker "$meta" "$n" || return 1; done
}

# "topic/partition" of each partition that has node n as a replica but not in
# its ISR. kcat: '    partition 0, leader 1, replicas: 1,2,3, isrs: 1,3'.
out_of_sync() { # metadata n
	awk -v n="$2" '
	$1 == "topic" { t = $2; gsub(/"/, "", t) }
	$1 == "partition" {
		p = $2; sub(/,$/, "", p); r = ""; i = ""
		for (k = 3; k < NF; k++) {
			if ($k == "replicas:") r = $(k + 1)
			if ($k == "isrs:") i = $(k + 1)
		}
		sub(/,$/, "", r); sub(/,$/, "", i)
		if (index("," r ",", "," n ",") && !index("," i ",", "," n ",")) print t "/" p
	}' <<<"$1"
}

under_replicated() { # metadata -> number of partitions with ISR < replicas
	awk '$1 == "partition" {
		r = ""; i = ""
		for (k = 3; k < NF; k++) {
			if ($k == "replicas:") r = $(k + 1)
			if ($k == "isrs:") i = $(k + 1)
		}
		sub(/,$/, "", r); sub(/,$/, "", i)
		if (split(i, a, ",") < split(r, b, ",")) c++
	} END { print c + 0 }' <<<"$1"
}

node_exited() { # pid: dies with the node's log tail if the JVM is gone
	alive "$1" && return 0
	echo "kafka.sh: node $NODE exited during startup; last lines of $LOG:" >&2
	tail -n 40 "$LOG" >&2 || true
	exit 1
}

# Writes node NODE's properties; formats its log dir (once, with the
# cluster's id) in the background, the pid in FORMAT_PID (0: nothing to do).
prepare_node() { # version lib
	local ver=$1 lib=$2
	if port_open "$NPORT" || port_open "$NCPORT"; then
		die "port $NPORT or $NCPORT on 127.0.0.1 is taken by a process not started from $NDIR"
	fi
	mkdir -p "$NDIR/data"
	write_node_properties "$ver"
	FORMAT_PID=0
	[[ -f $NDIR/data/meta.properties ]] && return 0
	"$JAVA" -Xmx256m "$(log_opt "$ver" "$DIR/tools-log4j.properties")" -cp "$lib/*" \
		kafka.tools.StorageTool format -t "$(cat "$DIR/cluster.id")" -c "$PROPS" \
		--ignore-formatted >>"$LOG" 2>&1 8>&- 9>&- &
	FORMAT_PID=$!
}

format_done() { # pid
	(($1 == 0)) || wait "$1" || { tail -n 40 "$LOG" >&2; die "formatting $NDIR/data failed"; }
}

launch_node() { # version lib
	local ver=$1 lib=$2 pid
	# As start_broker: own session, no lock fds.
	echo "=== $(date -u +%FT%TZ) starting kafka $ver node $NODE" >>"$LOG"
	setsid nohup "$JAVA" "-Xmx$CLUSTER_HEAP" -Xms128m -XX:+ExitOnOutOfMemoryError \
		-Djava.awt.headless=true "$(log_opt "$ver" "$DIR/log4j.properties")" \
		-cp "$lib/*" kafka.Kafka "$PROPS" >>"$LOG" 2>&1 </dev/null 8>&- 9>&- &
	pid=$!
	echo "$pid" >"$PIDFILE"
}

# Every node answers and lists all three (so a controller was elected and
# registered them), then a topic with 3 replicas is created and deleted.
wait_cluster_ready() { # start-time
	local t0=$1 deadline=$((SECONDS + CLUSTER_READY_TIMEOUT)) n ok err listed
	while :; do
		ok=1
		for ((n = 1; n <= CLUSTER_SIZE; n++)); do
			node_vars "$n"
			node_exited "$(cat "$PIDFILE" 2>/dev/null || echo none)"
			node_sees 1 2 3 || { ok=0; break; }
		done
		((ok)) && break
		((SECONDS < deadline)) || die "cluster not ready after ${CLUSTER_READY_TIMEOUT}s: node $NODE does not list all nodes (log $LOG)"
		sleep 0.5
	done
	listed=$(since "$t0")
	while ! err=$(run_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$(cluster_bootstrap)" \
		--create --if-not-exists --topic "$CLUSTER_PROBE_TOPIC" --partitions 1 \
		--replication-factor 3 2>&1 >/dev/null); do
		((SECONDS < deadline)) || die "cluster cannot create a topic with 3 replicas: $err"
		sleep 1
	done
	run_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$(cluster_bootstrap)" \
		--delete --if-exists --topic "$CLUSTER_PROBE_TOPIC" >/dev/null 2>&1 || true
	echo "kafka cluster $(recorded_version) ready on $(cluster_bootstrap) in $(since "$t0") s (all listed in $listed s)"
}

# What StorageTool random-uuid prints (Kafka's Uuid: 16 random bytes in
# unpadded URL-safe base64, never starting with '-'), without a JVM start.
new_cluster_id() {
	local id
	while id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '='); [[ $id == -* ]]; do :; done
	echo "$id"
}

cluster_start() { # [version]
	local want=${1:-${KAFKA_VERSION:-}} have lib n todo=() t0=$EPOCHREALTIME
	have=$(recorded_version)
	want=$(resolve_version "${want:-${have:-$DEFAULT_VERSION}}")
	if [[ -n $have && $have != "$want" ]]; then
		die "$DIR holds Kafka $have data, not $want; run 'kafka.sh cluster stop' first"
	fi
	fetch_jars "$want"
	lib=$(lib_dir "$want")
	if [[ -e $DIR && ! -f $DIR/version ]] && [[ -n $(ls -A "$DIR") ]]; then
		die "$DIR exists and is not a kafka.sh cluster dir"
	fi
	mkdir -p "$DIR"
	echo "$want" >"$DIR/version"
	write_log_config "$want" "$DIR/log4j.properties" out 1
	write_log_config "$want" "$DIR/tools-log4j.properties" err 0
	[[ -s $DIR/cluster.id ]] || new_cluster_id >"$DIR/cluster.id"
	# Format the nodes side by side (a JVM each), then start them together.
	for ((n = 1; n <= CLUSTER_SIZE; n++)); do
		node_vars "$n"
		find_pid >/dev/null && continue
		prepare_node "$want" "$lib"
		todo[n]=$FORMAT_PID
	done
	for n in "${!todo[@]}"; do
		node_vars "$n"
		format_done "${todo[n]}"
	done
	for n in "${!todo[@]}"; do
		node_vars "$n"
		launch_node "$want" "$lib"
	done
	wait_cluster_ready "$t0"
}

cluster_version() {
	local ver
	ver=$(recorded_version)
	[[ -n $ver ]] || die "no cluster in $DIR; run 'kafka.sh cluster start' first"
	echo "$ver"
}

# TERM: all nodes at once, as a node stopped last would have no quorum for
# its controlled shutdown; even so one sometimes waits out STOP_TIMEOUT (seen
# once on 4.4.0 after a series of kills). KILL: for `cluster stop`, whose
# data is deleted anyway.
cluster_stop() { # TERM|KILL
	local n pid pids=() deadline
	for ((n = 1; n <= CLUSTER_SIZE; n++)); do
		node_vars "$n"
		if pid=$(find_pid); then
			kill "-$1" "$pid" 2>/dev/null || true
			pids[n]=$pid
		fi
	done
	deadline=$((SECONDS + STOP_TIMEOUT))
	for n in "${!pids[@]}"; do
		node_vars "$n"
		while is_ours "${pids[n]}" && ((SECONDS < deadline)); do sleep 0.2; done
		if is_ours "${pids[n]}"; then
			echo "kafka.sh: node $n (pid ${pids[n]}) ignored SIGTERM for ${STOP_TIMEOUT}s; killing" >&2
			kill -KILL "${pids[n]}" 2>/dev/null || true
			while is_ours "${pids[n]}"; do sleep 0.1; done
		fi
	done
	for ((n = 1; n <= CLUSTER_SIZE; n++)); do
		node_vars "$n"
		rm -f "$PIDFILE"
	done
}

# --wait: until the live nodes no longer list it, i.e. the controller has
# fenced it (broker.session.timeout.ms after its last heartbeat) and moved
# the leaderships it held.
cluster_kill() { # n [--wait]
	local pid t0=$EPOCHREALTIME deadline meta
	cluster_version >/dev/null
	node_vars "$1"
	pid=$(find_pid) || die "node $1 is not running"
	kill -KILL "$pid"
	while is_ours "$pid"; do sleep 0.05; done
	rm -f "$PIDFILE"
	echo "killed node $1 (pid $pid)"
	[[ ${2:-} == --wait ]] || return 0
	deadline=$((SECONDS + CLUSTER_READY_TIMEOUT))
	while meta=$(cluster_meta) && lists_broker "$meta" "$1"; do
		((SECONDS < deadline)) || die "node $1 still listed after ${CLUSTER_READY_TIMEOUT}s"
		sleep 0.2
	done
	echo "node $1 fenced after $(since "$t0") s"
}

rejoined() { # n others...
	local n=$1 m
	node_vars "$n"
	node_sees "$@" || return 1
	for m in "${@:2}"; do
		node_vars "$m"
		node_sees "$n" || return 1
	done
}

# Rejoined: it answers and every running node lists it. In sync: it is in the
# ISR of every partition it replicates (so the next kill of another node
# leaves min.insync.replicas=2 reachable).
cluster_start_node() { # n
	local ver lib t0=$EPOCHREALTIME deadline m others=() meta lag rejoined
	ver=$(cluster_version)
	lib=$(lib_dir "$ver")
	for ((m = 1; m <= CLUSTER_SIZE; m++)); do
		node_vars "$m"
		if ((m != $1)) && find_pid >/dev/null; then others+=("$m"); fi
	done
	node_vars "$1"
	if ! find_pid >/dev/null; then
		prepare_node "$ver" "$lib"
		format_done "$FORMAT_PID"
		launch_node "$ver" "$lib"
	fi
	deadline=$((SECONDS + CLUSTER_READY_TIMEOUT))
	while :; do
		node_vars "$1"
		node_exited "$(cat "$PIDFILE" 2>/dev/null || echo none)"
		rejoined "$1" "${others[@]}" && break
		((SECONDS < deadline)) || die "node $1 not listed by all running nodes after ${CLUSTER_READY_TIMEOUT}s (log $DIR/node$1/broker.log)"
		sleep 0.5
	done
	rejoined=$(since "$t0")
	deadline=$((SECONDS + CLUSTER_ISR_TIMEOUT))
	while :; do
		meta=$(cluster_meta)
		lag=$(out_of_sync "$meta" "$1")
		[[ -z $lag ]] && break
		if ((SECONDS >= deadline)); then
			die "node $1 rejoined but is not in the ISR of $(wc -l <<<"$lag") partitions after ${CLUSTER_ISR_TIMEOUT}s, e.g. $(head -n 3 <<<"$lag" | paste -sd ' ')"
		fi
		sleep 0.5
	done
	echo "node $1 rejoined in $rejoined s, in sync in $(since "$t0") s"
}

cluster_status() {
	local n pid meta up=0 seen
	echo "kafka cluster $(cluster_version) in $DIR"
	for ((n = 1; n <= CLUSTER_SIZE; n++)); do
		node_vars "$n"
		if ! pid=$(find_pid); then
			echo "node $n 127.0.0.1:$NPORT: down"
		elif ! meta=$(node_meta "$NPORT"); then
			echo "node $n 127.0.0.1:$NPORT: pid $pid, not answering"
		else
			seen=$(grep -oE '^ +broker [0-9]+ at' <<<"$meta" | awk '{print $2}' | sort -n | paste -sd,)
			echo "node $n 127.0.0.1:$NPORT: pid $pid, up, lists brokers $seen"
			up=$((up + 1))
		fi
	done
	if ((up > 0)); then
		meta=$(cluster_meta)
		echo "under-replicated partitions: $(under_replicated "$meta")"
	fi
	((up == CLUSTER_SIZE))
}

# Prints the leader's node id; -1 (exit 1) while the partition has none.
partition_leader() { # metadata topic partition
	local leader
	leader=$(awk -v t="$2" -v p="$3" '
		$1 == "topic" { cur = $2; gsub(/"/, "", cur) }
		cur == t && $1 == "partition" && $2 == p "," { l = $4; sub(/,$/, "", l); print l; exit }' <<<"$1")
	[[ -n $leader ]] || die "no partition $3 of topic $2 in the cluster metadata"
	echo "$leader"
	[[ $leader != -1 ]] || { echo "kafka.sh: partition $2/$3 has no leader" >&2; exit 1; }
}

# Java's String.hashCode (over UTF-16 code units) as an unsigned 32-bit value.
java_string_hash() { # string
	local LC_ALL=C.UTF-8 s=$1 h=0 i cp
	for ((i = 0; i < ${#s}; i++)); do
		printf -v cp '%d' "'${s:i:1}"
		if ((cp > 0xFFFF)); then
			cp=$((cp - 0x10000))
			h=$(((h * 31 + 0xD800 + (cp >> 10)) & 0xFFFFFFFF))
			h=$(((h * 31 + 0xDC00 + (cp & 0x3FF)) & 0xFFFFFFFF))
		else
			h=$(((h * 31 + cp) & 0xFFFFFFFF))
		fi
	done
	echo "$h"
}

# The coordinator of a group or transactional id is the leader of partition
# Utils.abs(id.hashCode()) % partitions of __consumer_offsets or
# __transaction_state; that is what FindCoordinator answers, in 3.9 (old and
# new group coordinator) and 4.x alike. Checked against ConsumerGroupCommand
# --describe --state and TransactionsCommand describe (which need a live group
# or transaction; this needs only the internal topic).
cluster_coordinator() { # internal-topic id what-creates-it
	local meta parts h
	meta=$(cluster_meta)
	parts=$(awk -v t="\"$1\"" '$1 == "topic" && $2 == t && $3 == "with" { print $4 }' <<<"$meta")
	[[ -n $parts ]] || die "no $1 topic yet (Kafka creates it for the first $3)"
	h=$(java_string_hash "$2")
	((h >= 0x80000000)) && h=$((h - 0x100000000))
	if ((h == -0x80000000)); then h=0; elif ((h < 0)); then h=$((-h)); fi # Utils.abs
	partition_leader "$meta" "$1" $((h % parts))
}

# The active KRaft controller. kcat's "(controller)" mark is no use: KRaft
# brokers tell clients a random live broker is the controller.
# MetadataQuorumCommand takes --bootstrap-server in 3.9 and 4.x alike.
#
# Tool classes for `cluster tool` (checked in the 3.9.2, 4.1.1, 4.4.0 jars):
# org.apache.kafka.tools.{TopicCommand,TransactionsCommand,
# MetadataQuorumCommand,LeaderElectionCommand,GetOffsetShell} and
# org.apache.kafka.tools.consumer.group.ConsumerGroupCommand in all three
# (kafka.admin.ConsumerGroupCommand is gone by 3.9); ConfigCommand is
# kafka.admin.ConfigCommand in 3.9 and 4.1, org.apache.kafka.tools.ConfigCommand
# in 4.4. ConsumerGroupCommand --describe of an unknown group fails with
# GroupIdNotFoundException in 4.4, "Consumer group 'G' does not exist." in
# 3.9. 4.4 (ELR) also writes min.insync.replicas
# as a cluster-wide dynamic default when formatting, so a changed static
# value needs a fresh cluster (cluster stop) to take effect.
cluster_controller() {
	local out id
	out=$(run_tool org.apache.kafka.tools.MetadataQuorumCommand --bootstrap-server "$(cluster_bootstrap)" \
		describe --status) || die "MetadataQuorumCommand failed"
	id=$(awk '$1 == "LeaderId:" { print $2 }' <<<"$out")
	[[ -n $id ]] || die "no LeaderId in: $out"
	echo "$id"
}

# Serialise commands on one data dir (parallel test runners).
lock_dir() {
	exec 9>"$DIR.lock"
	flock -w 300 9 || die "timed out waiting for another kafka.sh on $DIR"
}

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}

cmd=${1:-}
[[ $# -gt 0 ]] && shift
case $cmd in
start)
	lock_dir
	start_broker "${1:-}"
	;;
stop)
	lock_dir
	stop_broker
	remove_data
	;;
stop-keep)
	lock_dir
	stop_broker
	;;
restart)
	lock_dir
	stop_broker
	start_broker "$(recorded_version)" "$(recorded_profile)" # same as the data
	;;
status)
	if find_pid >/dev/null && answers; then ready_line; else
		echo "kafka not running on 127.0.0.1:$PORT" >&2
		exit 1
	fi
	;;
fetch)
	ver=$(resolve_version "${1:-${KAFKA_VERSION:-$DEFAULT_VERSION}}")
	fetch_jars "$ver"
	lib_dir "$ver"
	;;
topics)
	run_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "127.0.0.1:$PORT" "$@"
	;;
tool)
	[[ $# -gt 0 ]] || usage
	run_tool "$@"
	;;
cluster)
	sub=${1:-}
	[[ $# -gt 0 ]] && shift
	case $sub in
	start)
		lock_dir
		cluster_start "${1:-}"
		;;
	stop)
		lock_dir
		cluster_stop KILL
		remove_data
		;;
	stop-keep)
		lock_dir
		cluster_stop TERM
		;;
	kill)
		[[ $# -eq 1 || ($# -eq 2 && $2 == --wait) ]] || usage
		check_node "$1"
		lock_dir
		cluster_kill "$@"
		;;
	start-node)
		[[ $# -eq 1 ]] || usage
		check_node "$1"
		lock_dir
		cluster_start_node "$1"
		;;
	status) cluster_status ;;
	bootstrap) cluster_bootstrap ;;
	leader)
		[[ $# -eq 2 && $2 =~ ^[0-9]+$ ]] || usage
		meta=$(cluster_meta)
		partition_leader "$meta" "$1" "$2"
		;;
	txn-coordinator)
		[[ $# -eq 1 ]] || usage
		cluster_coordinator __transaction_state "$1" "transactional producer"
		;;
	group-coordinator)
		[[ $# -eq 1 ]] || usage
		cluster_coordinator __consumer_offsets "$1" "consumer group"
		;;
	controller) cluster_controller ;;
	topics)
		run_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$(cluster_bootstrap)" "$@"
		;;
	tool)
		[[ $# -gt 0 ]] || usage
		run_tool "$@"
		;;
	*) usage ;;
	esac
	;;
*) usage ;;
esac

#!/usr/bin/env bash
# Single-node KRaft Kafka broker on 127.0.0.1 for tests, run from Maven Central
# jars (no tarball, no Kafka shell scripts).
#
#   scripts/kafka.sh start [VERSION]   fetch jars if needed, start, wait until ready
#   scripts/kafka.sh stop              stop the broker and delete its data dir
#   scripts/kafka.sh stop-keep         stop the broker, keep its data
#   scripts/kafka.sh restart           stop-keep + start on the same data and version
#   scripts/kafka.sh status            exit 0 and print the ready line if it answers
#   scripts/kafka.sh fetch [VERSION]   only download the jars
#   scripts/kafka.sh topics ARGS...    org.apache.kafka.tools.TopicCommand
#                                      with --bootstrap-server prepended
#   scripts/kafka.sh tool CLASS ARGS...  any main class on the broker classpath
#
# Environment: KAFKA_VERSION (4.1.1), KAFKA_PORT (9092; the controller listens
# on KAFKA_PORT+1000), KAFKA_DIR (/tmp/kstreams-kafka-$KAFKA_PORT),
# KSTREAMS_CACHE ($HOME/.cache/kstreams), JAVA (java), KCAT (kcat or kafkacat).
set -euo pipefail

readonly DEFAULT_VERSION=4.1.1
readonly LOG4J2_VERSION=2.24.3
readonly DEP_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1
readonly READY_TIMEOUT=90
readonly STOP_TIMEOUT=30

PORT=${KAFKA_PORT:-9092}
if ! [[ $PORT =~ ^[0-9]+$ ]] || ((PORT < 1 || PORT + 1000 > 65535)); then
	echo "kafka.sh: bad KAFKA_PORT '$PORT'" >&2
	exit 2
fi
CPORT=$((PORT + 1000))
DIR=$(realpath -m "${KAFKA_DIR:-/tmp/kstreams-kafka-$PORT}")
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

write_server_properties() { # version
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
	if [[ $1 != 3.* ]]; then
		cat >>"$PROPS" <<EOF
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
EOF
	fi
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
	for p in /proc/[0-9]*; do
		pid=${p#/proc/}
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

ready_line() { echo "kafka $(recorded_version) ready on 127.0.0.1:$PORT"; }

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

start_broker() { # [version]
	local want=${1:-${KAFKA_VERSION:-}} have pid lib cid
	have=$(recorded_version)
	want=$(resolve_version "${want:-${have:-$DEFAULT_VERSION}}")
	if [[ -n $have && $have != "$want" ]]; then
		die "$DIR holds Kafka $have data, not $want; run 'kafka.sh stop' first"
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
	write_server_properties "$want"
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
	start_broker "$(recorded_version)" # same version as the data
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
*) usage ;;
esac

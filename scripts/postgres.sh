#!/usr/bin/env bash
# A throw-away PostgreSQL 15 (Debian's postgresql-15) on 127.0.0.1 for
# tests, in a temporary directory, like scripts/kafka.sh for Kafka.
#
#   scripts/postgres.sh start     initdb (first time) and start, wait until ready
#   scripts/postgres.sh stop      stop (fast) and delete the data dir
#   scripts/postgres.sh stop-keep stop, keep the data
#   scripts/postgres.sh restart   stop-keep + start on the same data
#   scripts/postgres.sh status    exit 0 and print the DSN if it answers
#   scripts/postgres.sh dsn       print the DSN (libpq key=value)
#   scripts/postgres.sh psql ARGS...  psql on the test database
#
# Environment: PG_PORT (55432), PG_DIR (/tmp/kstreams-pg-$PG_PORT),
# PG_BIN (/usr/lib/postgresql/15/bin), PG_USER (the unprivileged system
# user that owns the cluster when run as root: postgres). The database is
# `kstreams`, its superuser `kstreams` with password `kstreams` (md5 over
# TCP, so a password really travels, as in production).
set -euo pipefail

PORT=${PG_PORT:-55432}
DIR=$(realpath -m "${PG_DIR:-/tmp/kstreams-pg-$PORT}")
BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
RUN_AS=${PG_USER:-postgres}
readonly DB=kstreams ROLE=kstreams PASSWORD=kstreams READY_TIMEOUT=60

die() { echo "postgres.sh: $*" >&2; exit 1; }
[[ $PORT =~ ^[0-9]+$ ]] || die "bad PG_PORT '$PORT'"
[ -x "$BIN/pg_ctl" ] || die "$BIN/pg_ctl not found: install the Debian package postgresql-15"

# initdb and the server refuse to run as root: run them as $RUN_AS.
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u "$RUN_AS" -- "$@"
  else
    "$@"
  fi
}

dsn() { echo "host=127.0.0.1 port=$PORT dbname=$DB user=$ROLE password=$PASSWORD"; }

answers() { "$BIN/pg_isready" -q -h 127.0.0.1 -p "$PORT" -d "$DB" -U "$ROLE" 2>/dev/null; }

init() {
  mkdir -p "$DIR"
  [ "$(id -u)" -eq 0 ] && chown "$RUN_AS" "$DIR"
  local pw="$DIR/.pw"
  echo "$PASSWORD" >"$pw"
  [ "$(id -u)" -eq 0 ] && chown "$RUN_AS" "$pw"
  as_owner "$BIN/initdb" -D "$DIR/data" -U "$ROLE" --pwfile="$pw" -A md5 -E UTF8 \
    --locale=C.UTF-8 >"$DIR/initdb.log" 2>&1 || { cat "$DIR/initdb.log" >&2; die "initdb failed"; }
  rm -f "$pw"
  cat >>"$DIR/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$DIR'
fsync = off
max_connections = 50
shared_buffers = 32MB
CONF
}

start() {
  if answers; then echo "postgres.sh: already running on $PORT"; return 0; fi
  [ -f "$DIR/data/PG_VERSION" ] || init
  as_owner "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w -t "$READY_TIMEOUT" start \
    >/dev/null || { tail -20 "$DIR/server.log" >&2; die "did not start"; }
  PGPASSWORD=$PASSWORD "$BIN/psql" -q -h 127.0.0.1 -p "$PORT" -U "$ROLE" -d postgres \
    -tAc "SELECT 1 FROM pg_database WHERE datname = '$DB'" | grep -q 1 ||
    PGPASSWORD=$PASSWORD "$BIN/createdb" -h 127.0.0.1 -p "$PORT" -U "$ROLE" "$DB"
  echo "postgres: ready on 127.0.0.1:$PORT (data $DIR)"
}

stop_keep() {
  [ -f "$DIR/data/postmaster.pid" ] || return 0
  as_owner "$BIN/pg_ctl" -D "$DIR/data" -m fast -w stop >/dev/null 2>&1 || true
}

case ${1:-} in
  start) start ;;
  stop) stop_keep; rm -rf "$DIR" ;;
  stop-keep) stop_keep ;;
  restart) stop_keep; start ;;
  status) answers && dsn ;;
  dsn) dsn ;;
  psql) shift; PGPASSWORD=$PASSWORD exec "$BIN/psql" -X -v ON_ERROR_STOP=1 -h 127.0.0.1 \
          -p "$PORT" -U "$ROLE" -d "$DB" "$@" ;;
  *) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 64 ;;
esac

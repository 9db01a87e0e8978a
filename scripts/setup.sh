#!/usr/bin/env bash
# Install the Debian packages kstreams needs to build, test and run its demo.
# Idempotent: only missing packages are installed. Needs root (or sudo).
set -euo pipefail
PKGS=(build-essential autoconf automake libtool pkg-config
      librdkafka-dev liblmdb-dev lmdb-utils libyaml-dev libcunit1-dev libjansson-dev
      libmicrohttpd-dev libpq-dev postgresql-15 kafkacat default-jre-headless maven
      graphviz gdb clang valgrind)  # graphviz: docs/cli.md's `describe --dot` is run by test_docs.sh
                     # libpq-dev, postgresql-15: the PostgreSQL outbox and its test
                     # gdb: a test prints a hung engine's stacks before killing it
                     # clang: the libFuzzer harnesses (scripts/fuzz.sh)
                     # valgrind: `make valgrind` (tests/valgrind.sh)
missing=()
for p in "${PKGS[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
# a JDK from elsewhere (e.g. /usr/lib/jvm) counts for the JRE
if command -v java >/dev/null 2>&1; then
  missing=("${missing[@]/default-jre-headless}")
fi
if command -v mvn >/dev/null 2>&1; then
  missing=("${missing[@]/maven}")
fi
read -r -a missing <<<"${missing[*]:-}"
if [ "${#missing[@]}" -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
echo "setup: packages ready"

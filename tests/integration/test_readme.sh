#!/usr/bin/env bash
# The README and packaging, as a user meets them: `make install` (into a
# DESTDIR), the "first plugin" of README.md compiled with nothing but
# `pkg-config --cflags kstreams`, checked and run by the installed binary
# against the real broker; and `kstreams check` on every invalid YAML
# fixture printing exactly the FILE:LINE:COL error the fixture expects; and
# the commands of examples/page-views, examples/windows, examples/mailbox,
# examples/enrichment and examples/outbox-postgres README.md as written, their outputs compared with what the READMEs show.
# Prints "readme: N passed, N failed".
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${KS_BUILD:-$ROOT/build}" && pwd)
BOOT=${KS_BOOTSTRAP:-127.0.0.1:9092}
KCAT=$(command -v kcat || command -v kafkacat)
WORK=$(mktemp -d /tmp/ks-readme-XXXXXX)
passed=0
failed=0
ok() { echo "  ok: $*"; passed=$((passed + 1)); }
bad() { echo "  FAILED: $*"; failed=$((failed + 1)); }

# 1. install into a staging root
DEST=$WORK/dest
if make -C "$BUILD" -s install DESTDIR="$DEST" >"$WORK/install.log" 2>&1; then
  ok "make install"
else
  bad "make install (see $WORK/install.log)"
fi
prefix=$(sed -n 's/^prefix=//p' "$BUILD/kstreams.pc")
libdir=$(sed -n 's/^libdir=//p' "$BUILD/kstreams.pc" | sed "s#\${exec_prefix}#$prefix#")
for f in "$prefix/bin/kstreams" "$prefix/include/kstreams/kstreams.h" \
         "$libdir/pkgconfig/kstreams.pc" "$libdir/kstreams/plugins/count.so"; do
  [ -e "$DEST$f" ] && ok "installed $f" || bad "missing $DEST$f"
done

# 2. the README's plugin, built with pkg-config only
awk '/^\/\* shout.c/{p=1} p&&/^```/{exit} p' "$ROOT/README.md" >"$WORK/shout.c"
export PKG_CONFIG_PATH=$DEST$libdir/pkgconfig PKG_CONFIG_SYSROOT_DIR=$DEST
cflags=$(pkg-config --cflags kstreams)
# shellcheck disable=SC2086
if cc -shared -fPIC $cflags -Wall -Wextra -Werror "$WORK/shout.c" -o "$WORK/shout.so" 2>"$WORK/cc.log"; then
  ok "README plugin builds with: cc -shared -fPIC $cflags"
else
  bad "README plugin does not build: $(head -3 "$WORK/cc.log")"
fi
exported=$(nm -D --defined-only "$WORK/shout.so" 2>/dev/null | awk '$2=="T"{print $3}' | tr '\n' ' ')
[ "$exported" = "ks_plugin_entry " ] && ok "plugin exports only ks_plugin_entry" || bad "plugin exports: $exported"

# 3. the README's pipeline, with unique topic names, checked and run
app=shouter-$$; in=words-$$; out=loud-words-$$
awk '/^application: shouter/{p=1} p&&/^```/{exit} p' "$ROOT/README.md" |
  sed -e "s#shouter#$app#" -e "s#127.0.0.1:9092#$BOOT#" -e "s#topic: words#topic: $in#" \
      -e "s#topic: loud-words#topic: $out#" -e "s#\./shout.so#$WORK/shout.so#" >"$WORK/shouter.yaml"
echo "state_dir: $WORK/state" >>"$WORK/shouter.yaml"
KS="$DEST$prefix/bin/kstreams"
if "$KS" check "$WORK/shouter.yaml" >"$WORK/check.log" 2>&1 && grep -q "shout.shout" "$WORK/check.log"; then
  ok "installed kstreams check loads the plugin"
else
  bad "kstreams check: $(tail -2 "$WORK/check.log")"
fi
"$KS" run "$WORK/shouter.yaml" --instance readme >"$WORK/run.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do "$KCAT" -b "$BOOT" -L -t "$in" 2>/dev/null | grep -q "partition 3" && break; sleep 0.2; done
printf 'k1:hello\nk2:kafka streams for c\n' | "$KCAT" -P -b "$BOOT" -t "$in" -K:
got=$(timeout 30 "$KCAT" -C -b "$BOOT" -t "$out" -o beginning -c 2 -q -X isolation.level=read_committed -f '%s\n' 2>/dev/null | sort | tr '\n' '|')
[ "$got" = "HELLO|KAFKA STREAMS FOR C|" ] && ok "README pipeline output: $got" || bad "README pipeline output: '$got' (log $WORK/run.log)"
kill -TERM $pid; wait $pid; st=$?
[ $st -eq 0 ] && ok "SIGTERM: clean exit" || bad "SIGTERM: exit $st"

# 4. every invalid fixture through the CLI
cd "$ROOT/tests/fixtures" || exit 1
nfix=0; nbad=0
for f in invalid-*.yaml; do
  want=$(head -1 "$f" | sed 's/^# expect: //')
  got=$("$BUILD/engine/kstreams" check "$f" 2>&1 >/dev/null | head -1)
  nfix=$((nfix + 1))
  if [ "$got" != "$want" ]; then
    nbad=$((nbad + 1)); echo "    $f: want '$want' got '$got'"
  fi
done
[ $nbad -eq 0 ] && ok "kstreams check on $nfix invalid fixtures prints the expected FILE:LINE:COL error" \
  || bad "$nbad of $nfix invalid fixtures print another error"

# 5. a keyed node behind a key-changing one reads through a repartition topic
got=$("$BUILD/engine/kstreams" check rekey-count.yaml 2>&1); st=$?
if [ $st -eq 0 ] && grep -q "^  rekey-per_user-repartition: written by route (sub-topology 0), read by per_user (sub-topology 1)" <<<"$got"; then
  ok "kstreams check puts a repartition topic between re-keying and count"
else
  bad "re-keying check: exit $st, '$got'"
fi

# 6. the examples' READMEs, their commands as written, against the broker
# (docs/*.md and the README blocks without a broker: test_docs.sh). Each
# example runs in a copy under $WORK with `build` linked to the build tree,
# and with this run's broker, application id and topic names.
cd "$WORK" || exit 1
ln -s "$BUILD" "$WORK/build"

# The ```sh block after the line matching $2 in README $1.
sh_block_after() {
  awk -v pat="$2" 'found && /^```sh/ { inb = 1; next } inb && /^```/ { exit }
                   inb { print } index($0, pat) { found = 1 }' "$1"
}
# The untagged block after the line matching $2.
text_block_after() {
  awk -v pat="$2" 'found && /^```$/ { if (inb) exit; inb = 1; next }
                   inb { print } index($0, pat) { found = 1 }' "$1"
}
# Run the commands of a README block ($1, a file) up to its final consumer
# (`kcat -C ...` to the end of the block) in the current directory; the
# engine it starts with `&` is remembered in $WORK/engine.pid, and the
# producer waits until the engine created source topic $2 with $3
# partitions (a user typing the commands is slower than a script).
run_readme_setup() {
  awk -v topic="$2" -v parts="$3" -v pidf="$WORK/engine.pid" '
    /^kcat -C/ { exit }
    { print }
    /&[ \t]*(#.*)?$/ && !/&&/ {
      print "echo $! >" pidf
      print "for _ in $(seq 150); do \"$KCAT\" -b \"$BOOT\" -L -t " topic \
            " 2>/dev/null | grep -q \"partition " parts - 1 ",\" && break; sleep 0.2; done" }' "$1" >"$1.setup"
  awk '/^kcat -C/ { p = 1 } p' "$1" >"$1.consume"
  KCAT=$KCAT BOOT=$BOOT bash -uo pipefail "$1.setup"
}
# Run the consumer part until its output has $2 lines (at most 60 s).
consume_until() {
  local out n
  for _ in $(seq 120); do
    out=$(timeout 20 bash "$1.consume" 2>/dev/null)
    n=$(grep -c . <<<"$out")
    [ "$n" -ge "$2" ] && break
    sleep 0.5
  done
  echo "$out"
}
stop_engine() {
  local pid
  pid=$(cat "$WORK/engine.pid" 2>/dev/null) || return 1
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.2; done
  kill -KILL "$pid" 2>/dev/null
  return 1
}

# 6a. examples/page-views/README.md, "By hand"
s=$$
mkdir -p pv/examples/page-views && ln -s "$BUILD" pv/build
sed -e "s#127.0.0.1:9092#$BOOT#" -e "s#^application: page-views#application: pv-$s#" \
    -e "s#topic: page-views,#topic: page-views-$s,#" -e "s#topic: views-per-user,#topic: views-per-user-$s,#" \
    "$ROOT/examples/page-views/pipeline.yaml" >pv/examples/page-views/pipeline.yaml
sh_block_after "$ROOT/examples/page-views/README.md" "test_readme.sh runs this block" |
  sed -e "s#127.0.0.1:9092#$BOOT#g" -e "s#-t page-views #-t page-views-$s #" \
      -e "s#-t views-per-user #-t views-per-user-$s #" >pv.block
(cd pv && run_readme_setup "$WORK/pv.block" "page-views-$s" 4) >pv.log 2>&1
got=$(cd pv && consume_until "$WORK/pv.block" 1)
if [ "$got" = "alice 1" ]; then
  ok "examples/page-views/README.md by hand: check, run, produce, consume: '$got'"
else
  bad "examples/page-views/README.md by hand: got '$got' (log $WORK/pv.log)"
fi
stop_engine && ok "page-views engine: clean stop" || bad "page-views engine did not stop"

# 6b. examples/windows/README.md, "Run it": the outputs the README shows
readme=$ROOT/examples/windows/README.md
mkdir -p win/examples/windows && ln -s "$BUILD" win/build
subst=(-e "s#127.0.0.1:9092#$BOOT#g" -e "s#page-views-windows#pvw-$s#"
       -e "s#page-views-w\b#page-views-w-$s#g" -e "s#views-per-minute#views-per-minute-$s#g"
       -e "s#views-per-session#views-per-session-$s#g" -e "s#bytes-per-session#bytes-per-session-$s#g")
sed "${subst[@]}" "$ROOT/examples/windows/pipeline.yaml" >win/examples/windows/pipeline.yaml
sh_block_after "$readme" "test_readme.sh runs this block" | sed "${subst[@]}" >win.block
(cd win && run_readme_setup "$WORK/win.block" "page-views-w-$s" 2) >win.log 2>&1
got=$(cd win/examples/windows && consume_until "$WORK/win.block" 3 | sort)
want=$(text_block_after "$readme" "then holds" | sort)
if [ -n "$want" ] && [ "$got" = "$want" ]; then
  ok "examples/windows/README.md: views-per-minute holds the README's 3 windows"
else
  bad "examples/windows/README.md: views-per-minute: want '$want', got '$got' (log $WORK/win.log)"
fi
# "bytes-per-session holds alice's session [1000, 61000] with 158 bytes and
# bob's [30000, 30000] with 10"
sed -e "s#views-per-minute-$s#bytes-per-session-$s#" win.block.consume >win.bytes.consume
got=$(consume_until "$WORK/win.bytes" 2 | sort | tr '\n' '|')
want='{"key":"alice","start":1000,"end":61000} 158|{"key":"bob","start":30000,"end":30000} 10|'
tr '\n' ' ' <"$readme" | grep -qF "alice's session \`[1000, 61000]\` with 158 bytes and bob's \`[30000, 30000]\` with 10" ||
  bad "examples/windows/README.md no longer states the bytes-per-session result this test checks"
[ "$got" = "$want" ] && ok "examples/windows/README.md: bytes-per-session as stated" ||
  bad "examples/windows/README.md: bytes-per-session: want '$want', got '$got'"
stop_engine && ok "windows engine: clean stop (kill %1)" || bad "windows engine did not stop"

# 6c. examples/enrichment/README.md, "Run it": the enriched orders shown
readme=$ROOT/examples/enrichment/README.md
mkdir -p enr/examples/enrichment && ln -s "$BUILD" enr/build
subst=(-e "s#127.0.0.1:9092#$BOOT#g" -e "s#^application: enrichment#application: enr-$s#"
       -e "s#topic: orders-enriched,#topic: orders-enriched-$s,#" -e "s#topic: orders,#topic: orders-$s,#"
       -e "s#topic: customers,#topic: customers-$s,#" -e "s#-t orders-enriched #-t orders-enriched-$s #"
       -e "s#-t orders #-t orders-$s #" -e "s#-t customers #-t customers-$s #")
sed "${subst[@]}" "$ROOT/examples/enrichment/pipeline.yaml" >enr/examples/enrichment/pipeline.yaml
sh_block_after "$readme" "test_readme.sh runs this block" | sed "${subst[@]}" >enr.block
(cd enr && run_readme_setup "$WORK/enr.block" "orders-$s" 4) >enr.log 2>&1
got=$(cd enr && consume_until "$WORK/enr.block" 2 | sort)
want=$(text_block_after "$readme" "prints (in either order)" | sort)
if [ -n "$want" ] && [ "$got" = "$want" ]; then
  ok "examples/enrichment/README.md: the enriched orders of the README"
else
  bad "examples/enrichment/README.md: want '$want', got '$got' (log $WORK/enr.log)"
fi
stop_engine && ok "enrichment engine: clean stop" || bad "enrichment engine did not stop"

# 6d. examples/mailbox/README.md, "Run it": run.sh prints the statuses shown
port=$((20000 + $$ % 20000))
while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done # in use
out=$(KS_BUILD=$BUILD KS_BOOTSTRAP=$BOOT PORT=$port timeout 300 "$ROOT/examples/mailbox/run.sh" 2>&1)
st=$?
want=$(text_block_after "$ROOT/examples/mailbox/README.md" "Run it" | sed -n '/^== statuses/,/^FAILURE/p')
got=$(sed -n '/^== statuses/,/^FAILURE/p' <<<"$out")
if [ $st -eq 0 ] && [ -n "$want" ] && [ "$got" = "$want" ]; then
  ok "examples/mailbox/run.sh: the statuses of the README"
else
  bad "examples/mailbox/run.sh: exit $st, statuses '$got', README '$want'"
fi
first=$(sed -n '/^== first event/{n;p}' <<<"$out")
case $first in
  '{"id":"'*'","status":"SUCCESS","user":"user-01",'*'"result":"{\"balance\":10}"'*) ok "mailbox: first event as in the README" ;;
  *) bad "mailbox: first event '$first'" ;;
esac

# 6e. examples/outbox-postgres/README.md, "Run it": run.sh prints what the
# README shows (needs the PostgreSQL of scripts/postgres.sh, which the test
# command starts; without it the example is skipped, not passed)
readme=$ROOT/examples/outbox-postgres/README.md
if pg_dsn=$("$ROOT/scripts/postgres.sh" status 2>/dev/null); then
  out=$(KS_BUILD=$BUILD KS_BOOTSTRAP=$BOOT SHOP_PG_DSN=$pg_dsn timeout 300 \
        "$ROOT/examples/outbox-postgres/run.sh" 2>&1)
  st=$?
  want=$(text_block_after "$readme" "Run it" | sed -n '/^== customer-8/,/^== engine stopped/p')
  got=$(sed -n '/^== customer-8/,/^== engine stopped/p' <<<"$out")
  if [ $st -eq 0 ] && [ -n "$want" ] && [ "$got" = "$want" ]; then
    ok "examples/outbox-postgres/run.sh: the rows, orders and counts of the README"
  else
    bad "examples/outbox-postgres/run.sh: exit $st, got '$got', README '$want'"
  fi
else
  echo "  skipped: examples/outbox-postgres (no PostgreSQL: scripts/postgres.sh start)"
fi

cd "$ROOT" || exit 1
rm -rf "$WORK"
echo "readme: $passed passed, $failed failed"
[ $failed -eq 0 ]

#!/usr/bin/env bash
# The README and packaging, as a user meets them: `make install` (into a
# DESTDIR), the "first plugin" of README.md compiled with nothing but
# `pkg-config --cflags kstreams`, checked and run by the installed binary
# against the real broker; and `kstreams check` on every invalid YAML
# fixture printing exactly the FILE:LINE:COL error the fixture expects.
# Prints "readme: N passed, N failed".
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${KS_BUILD:-$ROOT/build}
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

# 5. a keyed node behind a key-changing one needs a repartition topic
got=$("$BUILD/engine/kstreams" check rekey-count.yaml 2>&1 >/dev/null); st=$?
if [ $st -eq 2 ] && grep -q "^rekey-count.yaml:10:29: node 'per_user' (count) keeps state per key, but 'route' (orders.route) upstream changes keys: that needs a repartition topic" <<<"$got"; then
  ok "kstreams check refuses re-keying before count"
else
  bad "re-keying check: exit $st, '$got'"
fi

rm -rf "$WORK"
echo "readme: $passed passed, $failed failed"
[ $failed -eq 0 ]

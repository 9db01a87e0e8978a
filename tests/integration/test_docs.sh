#!/usr/bin/env bash
# The code blocks of docs/*.md and examples/*/README.md, run against the
# build, so that no example goes stale. No broker: every `kstreams` command
# used here (check, query) works offline; the examples that need Kafka are
# run by test_readme.sh. Prints "docs: N passed, N failed"; every failure
# names the markdown file and the line of the block's opening fence.
#
# What happens to a fenced block depends on its language tag and on an
# optional marker, an HTML comment (invisible on GitHub) on the line right
# before the opening fence:
#
#   <!-- doc-test: skip REASON -->
#       not run; REASON says why (e.g. which other test covers it).
#   <!-- doc-test: file NAME -->
#       saved as NAME in the directory the file's blocks run in, for the
#       `run` blocks (compile commands); a C file is also compiled alone
#       (-Wall -Wextra -Werror); a YAML file is also checked.
#   <!-- doc-test: excerpt PATH -->
#       a shortened copy of code in PATH (repository path, or a NAME saved
#       by `file`): every line except "..." must occur, in order, in PATH
#       (comments, a trailing ';' and surrounding blanks ignored).
#   <!-- doc-test: prepend [indent=N]
#   YAML lines
#   -->
#       a YAML fragment: the comment's lines, then the block indented by N
#       spaces (default 0), must be a valid pipeline.
#   <!-- doc-test: run -->
#       shell commands, run with bash -euo pipefail in that directory; must
#       exit 0.
#   <!-- doc-test: transcript SETUP -->
#       "$ command" lines, each followed by its exact output (stdout and
#       stderr); a line "..." matches the rest of that output. Runs in a
#       directory prepared by the function setup_SETUP below.
#
# Without a marker: a ```yaml block must be a complete pipeline that
# `kstreams check` accepts and the test driver opens (every processor's
# init runs: window definitions and plugin configs are checked in full); a ```c or ```sh block is an error (mark it);
# blocks with another or no tag (outputs, diagrams) are not looked at.
#
# Each markdown file's blocks run in a fresh directory holding the sources
# of examples/*/ (changes.c, page_views.c, ...) and the example plugins as
# built (build/*.so, for yaml-reference.md's `plugins:`), with `kstreams`
# of the build first on PATH, pkg-config files pointing at the source
# headers and the build's test driver, and KSTREAMS_PLUGIN_PATH at the
# build's plugins.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${KS_BUILD:-$ROOT/build}" && pwd)
KS=$BUILD/engine/kstreams
WORK=$(mktemp -d /tmp/ks-docs-XXXXXX)
passed=0
failed=0
ok() { passed=$((passed + 1)); [ -n "${VERBOSE:-}" ] && echo "  ok: $*"; return 0; }
bad() { echo "  FAILED: $*"; failed=$((failed + 1)); }
indent() { sed 's/^/      | /' | head -"${2:-15}"; }

[ -x "$KS" ] || { echo "  FAILED: no $KS (build first)"; echo "docs: 0 passed, 1 failed"; exit 1; }

# pkg-config files for the uninstalled build
PC=$WORK/pkgconfig
mkdir -p "$PC"
for pc in kstreams kstreams-testdriver; do
  sed -e "s#^includedir=.*#includedir=$ROOT/include#" -e "s#^libdir=.*#libdir=$BUILD/engine/.libs#" \
    "$BUILD/$pc.pc" >"$PC/$pc.pc"
done
export PKG_CONFIG_PATH=$PC
export LD_LIBRARY_PATH=$BUILD/engine/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
PLUGINS=$BUILD/plugins/.libs
for d in "$BUILD"/examples/*/.libs; do PLUGINS=$PLUGINS:$d; done
export KSTREAMS_PLUGIN_PATH=$PLUGINS
export PATH=$BUILD/engine:$PATH
export KS_LOG_LEVEL=warn

# A fresh directory for one markdown file's blocks.
new_dir() {
  local d=$WORK/run-$1
  mkdir -p "$d/build"
  cp "$ROOT"/examples/*/*.c "$d/"
  cp "$BUILD"/examples/*/.libs/*.so "$d/build/"
  echo "$d"
}

# ---- transcript set-ups --------------------------------------------------

# docs/outbox-and-mailbox.md, pgshop: shop.yaml, a PostgreSQL outbox (the
# error of a libpq that cannot be loaded; no PostgreSQL is contacted).
setup_pgshop() {
  cat >"$1/shop.yaml" <<'EOF'
application: shop
kafka: { bootstrap: [127.0.0.1:9092] }
outbox:
  backend: postgres
  dsn_env: SHOP_PG_DSN
  topic: order-events
sources:
  orders: { topic: order-events }
sinks:
  - { from: orders, topic: orders-copy }
EOF
}

# docs/cli.md, query: pipeline.yaml with a count per user, a count per
# binary key and a count per user and minute, its stores written by the
# test driver (a small C program built here) into ./state.
setup_query() {
  local d=$1
  cat >"$d/pipeline.yaml" <<'EOF'
application: page-views
kafka: { bootstrap: [127.0.0.1:9092] }
state_dir: ./state
sources:
  views: { topic: page-views, key: string, value: string, partitions: 4 }
  raw: { topic: raw, key: bytes, value: bytes }
  timed: { topic: timed-views, key: string, value: string }
nodes:
  - { name: per_user, type: count, from: views, store: views-per-user }
  - { name: per_raw, type: count, from: raw, store: raw-counts }
  - { name: per_minute, type: count, from: timed, store: views-per-minute,
      window: { kind: tumbling, size: 1m, retention: 1d } }
sinks:
  - { from: per_user, topic: views-per-user, key: string, value: int64 }
  - { from: per_raw, topic: raw-counts, key: bytes, value: int64 }
  - { from: per_minute, topic: views-per-minute, key: json, value: int64 }
EOF
  cat >"$d/feed.c" <<'EOF'
#include <stdio.h>
#include <kstreams/testdriver.h>
static int pipe_n(ks_driver *drv, const char *src, const char *key, size_t klen, int n,
                  long long ts, long long step)
{
    for (int i = 0; i < n; i++)
        if (ks_driver_pipe(drv, src, key, klen, "v", 1, ts + i * step) != 0)
            return -1;
    return 0;
}
int main(void)
{
    ks_driver_options opt = {.state_dir = "state", .partitions = 4};
    ks_driver *drv = NULL;
    char err[1024];
    if (ks_driver_open("pipeline.yaml", &opt, &drv, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    /* 2023-11-14T22:13:20Z = 1700000000000 */
    int rc = pipe_n(drv, "views", "alice", 5, 42, 1000, 1) |
             pipe_n(drv, "views", "bob", 3, 7, 1000, 1) |
             pipe_n(drv, "raw", "\x01\xff", 2, 3, 1000, 1) |
             pipe_n(drv, "timed", "alice", 5, 3, 1700000000000LL, 1000) |
             pipe_n(drv, "timed", "alice", 5, 1, 1700000050000LL, 1000) |
             pipe_n(drv, "timed", "bob", 3, 4, 1700000041000LL, 1000);
    ks_driver_close(drv);
    return rc ? 1 : 0;
}
EOF
  # shellcheck disable=SC2046
  cc -std=c11 -Wall -Wextra -Werror "$d/feed.c" -o "$d/feed" \
    $(pkg-config --cflags --libs kstreams-testdriver) 2>&1 &&
    (cd "$d" && ./feed)
}

# ---- checks ----------------------------------------------------------------

# Opens a pipeline with the test driver (no broker): loads the plugins and
# runs every processor's init, which `kstreams check` does not.
cat >"$WORK/open.c" <<'EOF'
#include <stdio.h>
#include <kstreams/testdriver.h>
int main(int argc, char **argv)
{
    ks_driver_options opt = {.partitions = 1};
    ks_driver *drv = NULL;
    char err[2048];
    if (argc != 2 || ks_driver_open(argv[1], &opt, &drv, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", argc == 2 ? err : "usage: open FILE");
        return 1;
    }
    ks_driver_close(drv);
    return 0;
}
EOF
# shellcheck disable=SC2046
if ! out=$(cc -std=c11 -Wall -Wextra -Werror "$WORK/open.c" -o "$WORK/open" \
             $(pkg-config --cflags --libs kstreams-testdriver) 2>&1); then
  bad "the driver helper does not build:"
  indent <<<"$out"
fi

# Check a YAML pipeline file (kstreams check, then the driver); $2 names
# the block.
check_yaml() {
  local out
  if ! out=$("$KS" check "$1" 2>&1); then
    bad "$2: kstreams check refuses it:"
    indent <<<"$out"
  elif ! out=$(cd "$(dirname "$1")" && "$WORK/open" "$1" 2>&1); then
    bad "$2: the test driver cannot open it (a processor's init failed):"
    indent <<<"$out"
  else
    ok "$2"
  fi
}

# Normalized code lines: no comments, no trailing ';', no surrounding blanks.
norm_lines() {
  sed -e 's#/\*.*\*/##g' -e 's#//.*$##' -e 's/[[:space:]]*$//' -e 's/^[[:space:]]*//' \
      -e 's/;$//' "$1"
}

# Every line of excerpt $1 (but "...") occurs in order in file $2.
check_excerpt() {
  local ex=$1 src=$2 where=$3
  if [ ! -f "$src" ]; then
    bad "$where: excerpt of $src, which does not exist"
    return
  fi
  local missing
  missing=$(awk 'NR == FNR { if ($0 != "") src[++n] = $0; next }
       $0 == "" || $0 == "..." { next }
       { while (i < n) { i++; if (index(src[i], $0)) next }
         print; exit }' <(norm_lines "$src") <(norm_lines "$ex"))
  if [ -z "$missing" ]; then
    ok "$where"
  else
    bad "$where: excerpt line not found (in this order) in ${src#"$ROOT"/}: '$missing'"
  fi
}

# Run a transcript block ($1) in directory $2.
check_transcript() {
  local block=$1 d=$2 where=$3
  local t=$d/transcript
  rm -rf "$t"
  mkdir -p "$t"
  # split into t/cmd.N and t/want.N
  awk -v t="$t" '
    cont { cmd = cmd "\n" $0; if ($0 !~ /\\$/) { cont = 0; print cmd > (t "/cmd." n) } next }
    /^\$ / { n++; cmd = substr($0, 3); printf "" > (t "/want." n)
             if ($0 ~ /\\$/) cont = 1; else print cmd > (t "/cmd." n); next }
    n { print > (t "/want." n) }' "$block"
  local n
  n=$(find "$t" -name 'cmd.*' | wc -l)
  # one shell, so that "echo $?" sees the previous command
  {
    for i in $(seq 1 "$n"); do
      printf '{ %s\n} >%q 2>&1\n' "$(cat "$t/cmd.$i")" "$t/got.$i"
    done
  } >"$t/script.sh"
  (cd "$d" && timeout 60 bash "$t/script.sh")
  local i fails=0
  for i in $(seq 1 "$n"); do
    local want=$t/want.$i got=$t/got.$i
    if grep -qx '\.\.\.' "$want"; then # "..." matches the rest
      local keep
      keep=$(grep -nx '\.\.\.' "$want" | head -1 | cut -d: -f1)
      head -n $((keep - 1)) "$want" >"$want.cut"
      head -n $((keep - 1)) "$got" >"$got.cut"
      want=$want.cut got=$got.cut
    fi
    if ! cmp -s "$want" "$got"; then
      fails=$((fails + 1))
      bad "$where: \$ $(head -1 "$t/cmd.$i")"
      diff "$want" "$got" | sed 's/^/      /' | head -12
    fi
  done
  [ $fails -eq 0 ] && ok "$where ($n commands)"
}

# ---- the blocks --------------------------------------------------------------

# Extract the blocks of markdown file $1 into directory $2: N.body, N.pre
# (a prepend marker's lines) and the index "N<TAB>LINE<TAB>LANG<TAB>MARKER".
extract() {
  awk -v dir="$2" '
    function fail(msg) { print FILENAME ":" NR ": " msg > (dir "/errors") }
    inb { if ($0 ~ /^```/) { inb = 0; close(body) } else print > body; next }
    inc { if ($0 ~ /^-->[ \t]*$/) { inc = 0; pendline = NR } else print > pre; next }
    /^<!-- doc-test:/ {
      if (pend != "") fail("doc-test marker of line " pendline " is not right before a code block")
      s = $0; sub(/^<!-- doc-test:[ \t]*/, "", s)
      if (s ~ /-->[ \t]*$/) { sub(/[ \t]*-->[ \t]*$/, "", s); pend = s; pendline = NR }
      else { pend = s; inc = 1; pre = dir "/" (n + 1) ".pre"; printf "" > pre }
      next }
    /^```/ {
      n++; inb = 1; lang = substr($0, 4); gsub(/[ \t]/, "", lang)
      marker = pendline == NR - 1 ? pend : ""
      if (pend != "" && pendline != NR - 1) fail("doc-test marker of line " pendline " is not right before a code block")
      body = dir "/" n ".body"; printf "" > body
      printf "%d\t%d\t%s\t%s\n", n, NR, lang, marker > (dir "/index")
      pend = ""; next }
    pend != "" && $0 !~ /^[ \t]*$/ { fail("doc-test marker of line " pendline " is not right before a code block"); pend = "" }
    END { if (inb) fail("code block not closed") }' "$1"
}

docs=("$ROOT"/docs/*.md "$ROOT"/examples/*/README.md)
skipped=0
for md in "${docs[@]}"; do
  rel=${md#"$ROOT"/}
  name=$(echo "$rel" | tr '/.' '__')
  ex=$WORK/blocks-$name
  mkdir -p "$ex"
  : >"$ex/index"
  extract "$md" "$ex"
  if [ -s "$ex/errors" ]; then
    while read -r e; do bad "${e#"$ROOT"/}"; done <"$ex/errors"
  fi
  d=$(new_dir "$name")
  # first the files, so that an excerpt may come before its source
  while IFS=$'\t' read -r n line lang marker; do
    case $marker in
    file\ *) cp "$ex/$n.body" "$d/${marker#file }" ;;
    esac
  done <"$ex/index"
  while IFS=$'\t' read -r n line lang marker; do
    where="$rel:$line ($lang${marker:+, ${marker%%$'\n'*}})"
    body=$ex/$n.body
    kind=${marker%% *}
    arg=${marker#"$kind"}
    arg=${arg# }
    case $kind in
    skip)
      if [ -z "$arg" ]; then bad "$where: skip needs a reason"; else skipped=$((skipped + 1)); fi
      [ -n "${VERBOSE:-}" ] && echo "  skip: $rel:$line ($arg)"
      continue ;;
    excerpt)
      src=$ROOT/$arg
      [ -f "$d/$arg" ] && src=$d/$arg
      check_excerpt "$body" "$src" "$where"
      continue ;;
    transcript)
      td=$WORK/transcript-$name-$n
      mkdir -p "$td"
      if ! out=$("setup_$arg" "$td" 2>&1); then
        bad "$where: set-up $arg failed:"
        indent <<<"$out"
        continue
      fi
      check_transcript "$body" "$td" "$where"
      continue ;;
    run)
      if out=$(cd "$d" && timeout 120 bash -euo pipefail "$body" 2>&1); then
        ok "$where"
      else
        bad "$where: exit $?:"
        indent <<<"$out" 20
      fi
      continue ;;
    esac
    case $lang in
    yaml)
      case $kind in
      file) check_yaml "$d/$arg" "$where" ;;
      prepend)
        ind=0
        [[ $arg =~ indent=([0-9]+) ]] && ind=${BASH_REMATCH[1]}
        pad=$(printf '%*s' "$ind" '')
        { cat "$ex/$n.pre"; sed "s/^/$pad/" "$body"; } >"$d/block-$line.yaml"
        check_yaml "$d/block-$line.yaml" "$where" ;;
      "")
        cp "$body" "$d/block-$line.yaml"
        check_yaml "$d/block-$line.yaml" "$where" ;;
      *) bad "$where: unknown doc-test marker '$kind'" ;;
      esac ;;
    c)
      case $kind in
      file)
        # shellcheck disable=SC2046
        if out=$(cd "$d" && cc -std=c11 -c -o /dev/null -Wall -Wextra -Werror \
                   $(pkg-config --cflags kstreams-testdriver) "$arg" 2>&1); then
          ok "$where"
        else
          bad "$where: does not compile:"
          indent <<<"$out"
        fi ;;
      "") bad "$where: C block without a doc-test marker (file, excerpt or skip)" ;;
      *) bad "$where: unknown doc-test marker '$kind'" ;;
      esac ;;
    sh | bash | console)
      case $kind in
      file) ok "$where" ;;
      "") bad "$where: shell block without a doc-test marker (run, transcript or skip)" ;;
      *) bad "$where: unknown doc-test marker '$kind'" ;;
      esac ;;
    *)
      [ -n "$kind" ] && [ "$kind" != file ] && bad "$where: doc-test marker '$kind' on a block tagged '$lang'" ;;
    esac
  done <"$ex/index"
done

if [ $failed -eq 0 ]; then rm -rf "$WORK"; else echo "  (kept for a look: $WORK)"; fi
echo "  ($skipped blocks skipped with a reason; VERBOSE=1 lists them)"
echo "docs: $passed passed, $failed failed"
[ $failed -eq 0 ]

#!/usr/bin/env bash
# The #include graph of engine/, lib/ and plugins/ against the rules of
# docs/architecture.md. Every violation is printed as FILE:LINE and the rule
# it breaks; the last line is "includes: N passed, N failed" (one check per
# source file, plus one per pair of folders that include each other).
#
#   tests/check_includes.sh [ROOT]      check the tree at ROOT (default: .)
#   tests/check_includes.sh --self-test   plant two violations in a copy of
#       the tree: engine/state/store.h including runtime/task.h (a rule),
#       http/metrics.h -> kafka/kafka.h with kafka/topics.h -> http/httpd.h
#       (a cycle, each edge allowed alone); passes only when both are found
#
# A part is a folder: engine/<part>/, lib/ (all of it), plugins/, include/.
# Rules (who may not include whom):
#   plugins/      nothing from engine/ (a plugin links no engine code)
#   lib/          nothing from engine/ or plugins/ (lib/ is below both)
#   engine/*      nothing from plugins/ (shared code lives in lib/)
#   engine/base   nothing else from engine/
#   engine/pg     nothing from engine/ but base/ (libpq's loader)
#   config, state, kafka, loader, http, ledger, query
#                 not runtime/, cli/, outbox/, testdriver/
#   outbox        not runtime/, cli/, testdriver/
#   runtime       not cli/, testdriver/
#   any two parts never include each other (no cycles of two)
set -uo pipefail

self_test() {
  local src tmp out st
  src=$(cd "$(dirname "$0")/.." && pwd)
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  (cd "$src" && git ls-files engine lib plugins include | xargs cp --parents -t "$tmp")
  echo '#include "runtime/task.h"' >>"$tmp/engine/state/store.h"
  echo '#include "kafka/kafka.h"' >>"$tmp/engine/http/metrics.h"
  echo '#include "http/httpd.h"' >>"$tmp/engine/kafka/topics.h"
  out=$("$0" "$tmp" 2>&1)
  st=$?
  local want1="engine/state/store.h:$(wc -l <"$tmp/engine/state/store.h"): state/ includes runtime/"
  local want2="http/ and kafka/ include each other"
  if [ $st -ne 0 ] && grep -qF "$want1" <<<"$out" && grep -qF "$want2" <<<"$out"; then
    echo "planted violations found:"
    grep -F -e "$want1" -e "$want2" <<<"$out" | sed 's/^/  /'
    echo "includes-self-test: 1 passed, 0 failed"
    return 0
  fi
  echo "planted violations NOT found (exit $st); checker said:"
  echo "$out"
  echo "includes-self-test: 0 passed, 1 failed"
  return 1
}

[ "${1:-}" = "--self-test" ] && { self_test; exit $?; }

ROOT=$(cd "${1:-.}" && pwd)
cd "$ROOT" || exit 2

# The part a repository path belongs to ("" when outside the checked tree).
part_of() {
  case $1 in
    engine/*/*) local p=${1#engine/}; echo "${p%%/*}" ;;
    lib/*) echo lib ;;
    plugins/*) echo plugins ;;
    include/*) echo include ;;
    *) echo "" ;;
  esac
}

# Where `#include "inc"` in file resolves: next to the file, then the -I
# roots of the build (engine/, lib/, include/). Prints the path or nothing.
resolve() {
  local file=$1 inc=$2 dir cand
  dir=$(dirname "$file")
  for cand in "$dir/$inc" "engine/$inc" "lib/$inc" "include/$inc"; do
    if [ -f "$cand" ]; then
      realpath -m --relative-to="$ROOT" "$cand"
      return
    fi
  done
}

# Why `from` may not include `to`, or nothing when it may.
forbidden() {
  local from=$1 to=$2
  [ "$from" = "$to" ] && return
  [ "$to" = include ] && return
  case $from in
    plugins) [ "$to" != lib ] && echo "plugins/ includes engine/$to/: a plugin links no engine code" ;;
    lib) echo "lib/ includes $to/: lib/ is below the engine and the plugins" ;;
    base) [ "$to" != lib ] && echo "base/ includes $to/: base/ is the bottom of engine/" ;;
    pg) [ "$to" != lib ] && [ "$to" != base ] &&
      echo "pg/ includes $to/: pg/ (libpq's loader) sits on base/ only" ;;
    *)
      case $to in
        plugins) echo "$from/ includes plugins/: code both need belongs in lib/" ;;
        cli | testdriver) echo "$from/ includes $to/: nothing includes the command line or the test driver" ;;
        runtime | outbox)
          case $from in
            config | state | kafka | loader | http | ledger | query)
              echo "$from/ includes $to/: $from/ is below runtime/ and outbox/" ;;
            outbox) [ "$to" = runtime ] && echo "outbox/ includes runtime/: the runtime starts the outbox, not the reverse" ;;
          esac ;;
      esac ;;
  esac
}

passed=0
failed=0
declare -A edge # "from to" -> first FILE:LINE seen
while read -r file; do
  from=$(part_of "$file")
  bad=0
  while IFS=: read -r line inc; do
    target=$(resolve "$file" "$inc")
    [ -n "$target" ] || continue
    to=$(part_of "$target")
    [ -n "$to" ] || continue
    [ "$from" != "$to" ] && [ -z "${edge["$from $to"]:-}" ] && edge["$from $to"]="$file:$line"
    why=$(forbidden "$from" "$to")
    if [ -n "$why" ]; then
      echo "$file:$line: $why (#include \"$inc\")"
      bad=1
    fi
  done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" |
    sed -E 's/^([0-9]+):[^"]*"([^"]+)".*/\1:\2/')
  if [ $bad -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done < <(find engine lib plugins -name '*.[ch]' -type f | sort)

for key in "${!edge[@]}"; do
  read -r a b <<<"$key"
  [[ "$a" < "$b" ]] || continue
  if [ -n "${edge["$b $a"]:-}" ]; then
    echo "$a/ and $b/ include each other: ${edge["$a $b"]} and ${edge["$b $a"]}"
    failed=$((failed + 1))
  else
    passed=$((passed + 1))
  fi
done

echo "includes: $passed passed, $failed failed"
[ $failed -eq 0 ]

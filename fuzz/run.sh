#!/bin/sh
# run.sh <builddir> <seconds>: runs each fuzz target for <seconds> on a scratch copy of
# its seed corpus (the committed corpus is never modified) and exits non-zero if any
# target finds a crash, leak, timeout or violated property. Crash inputs are kept in
# <builddir>/fuzz/artifacts/<target>/.
set -u
if [ $# -ne 2 ]; then
  echo "usage: $0 <builddir> <seconds>" >&2
  exit 2
fi
build=$1
secs=$2
here=$(cd "$(dirname "$0")" && pwd)
status=0
for kind in binary text; do
  exe="$build/fuzz/fuzz_$kind"
  if [ ! -x "$exe" ]; then
    echo "$exe not found (configure with -Dfuzzers=true and CC=clang)" >&2
    exit 2
  fi
  work=$(mktemp -d "${TMPDIR:-/tmp}/dm_fuzz_$kind.XXXXXX")
  cp -R "$here/corpus/$kind/." "$work/"
  art="$build/fuzz/artifacts/$kind"
  mkdir -p "$art"
  dict=""
  [ -f "$here/$kind.dict" ] && dict="-dict=$here/$kind.dict"
  echo "== fuzz_$kind for ${secs}s (corpus copy in $work)"
  # -timeout: one input taking seconds is a bug too; -rss_limit_mb: so is memory growth.
  if ! "$exe" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -print_final_stats=1 -artifact_prefix="$art/" $dict "$work" 2>"$build/fuzz/fuzz_$kind.log"; then
    echo "fuzz_$kind FAILED; see $build/fuzz/fuzz_$kind.log and $art/" >&2
    tail -40 "$build/fuzz/fuzz_$kind.log" >&2
    status=1
  else
    grep -E "stat::number_of_executed_units|stat::new_units_added" "$build/fuzz/fuzz_$kind.log"
  fi
  rm -rf "$work"
done
exit $status

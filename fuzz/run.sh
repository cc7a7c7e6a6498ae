#!/bin/sh
# run.sh <builddir> <seconds>: runs every fuzz target built in <builddir>/fuzz for
# <seconds> each, on a scratch copy of its seed corpus fuzz/corpus/<kind>/ (the committed
# corpus is never modified), with fuzz/<kind>.dict when there is one, and exits non-zero
# if any target finds a crash, leak, timeout or violated property. Prints one line per
# target, "PASS fuzz_<kind>" or "FAIL fuzz_<kind>" (test.sh counts them), with its
# stats. Crash inputs are kept in <builddir>/fuzz/artifacts/<kind>/.
set -u
if [ $# -ne 2 ]; then
  echo "usage: $0 <builddir> <seconds>" >&2
  exit 2
fi
build=$1
secs=$2
here=$(cd "$(dirname "$0")" && pwd)
status=0
found=0
for exe in "$build"/fuzz/fuzz_*; do
  [ -f "$exe" ] && [ -x "$exe" ] || continue   # skip meson's fuzz_*.p folders
  found=$((found + 1))
  kind=${exe##*/fuzz_}
  work=$(mktemp -d "${TMPDIR:-/tmp}/dm_fuzz_$kind.XXXXXX")
  [ -d "$here/corpus/$kind" ] && cp -R "$here/corpus/$kind/." "$work/"
  art="$build/fuzz/artifacts/$kind"
  mkdir -p "$art"
  dict=""
  [ -f "$here/$kind.dict" ] && dict="-dict=$here/$kind.dict"
  # A net is a few hundred bytes of choices; longer inputs only slow the search down.
  max_len=65536
  [ "$kind" = net ] && max_len=1024
  echo "== fuzz_$kind for ${secs}s (corpus copy in $work)"
  # -timeout: one input taking seconds is a bug too; -rss_limit_mb: so is memory growth.
  log="$build/fuzz/fuzz_$kind.log"
  if ! "$exe" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=$max_len \
      -print_final_stats=1 -artifact_prefix="$art/" $dict "$work" 2>"$log"; then
    echo "FAIL fuzz_$kind: see $log and $art/"
    tail -40 "$log" >&2
    status=1
  else
    echo "PASS fuzz_$kind"
    grep -E "stat::number_of_executed_units|stat::average_exec_per_sec|stat::new_units_added" "$log"
  fi
  rm -rf "$work"
done
if [ $found -eq 0 ]; then
  echo "no fuzz targets in $build/fuzz (configure with -Dfuzzers=true and CC=clang)" >&2
  exit 2
fi
exit $status

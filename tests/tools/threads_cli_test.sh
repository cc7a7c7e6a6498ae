#!/bin/sh
# threads_cli_test.sh: --threads on `run`, `train` and `info`. `info` reports the count
# the kernels use: by default the cores this process may run on (compared with nproc,
# which reads the same affinity mask, and under taskset with one core where taskset
# exists), N after --threads N, and OpenBLAS's own count follows. Bad counts are usage
# errors (exit 2) naming the range and the value.
#
# usage: threads_cli_test.sh DEMITASSE SOURCE_ROOT
set -u
DM=$1
SRC=$2
T=$(mktemp -d "${TMPDIR:-/tmp}/dm_threads_XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/cli_lib.sh"

cores=$(nproc)
expect 0 "$DM" info --no-selftest &&
  has out "CPU threads: $cores (default: the $cores cores this process may run on)"
if command -v taskset >/dev/null 2>&1 && taskset -c 0 true 2>/dev/null; then
  expect 0 taskset -c 0 "$DM" info --no-selftest &&
    has out "CPU threads: 1 (default: the 1 cores"
fi
# OMP_NUM_THREADS does not win over the count the CLI sets
expect 0 env OMP_NUM_THREADS=7 "$DM" info --no-selftest --threads 3 && {
  has out "CPU threads: 3 (default: the $cores cores"
  if grep -q '^BLAS: OpenBLAS' "$T/out"; then has out ', 3 threads'; fi
}

# run and train take it (train: the flag is parsed before --help answers)
cat >"$T/fill.pbtxt" <<'NET'
name: "fill"
op { type: "ConstantFill" output: "x" arg { name: "shape" ints: 2 ints: 3 } arg { name: "value" f: 1.5 } }
NET
expect 0 "$DM" run --net "$T/fill.pbtxt" --threads 1 && has out 'x: FLOAT 2x3'
expect 0 "$DM" run --net "$T/fill.pbtxt" --threads 4096
expect 0 "$DM" train --threads 2 --help && has out '--threads N'
expect 0 "$DM" run --help && has out '--threads N'
expect 0 "$DM" info --help && has out '--threads N'

for n in 0 -1 abc 1.5 '' 2x 4097 99999999999999999999; do
  for cmd in run train info; do
    net="--net=$T/fill.pbtxt"
    [ "$cmd" = info ] && net=--no-selftest
    expect 2 "$DM" $cmd "$net" --threads "$n" && {
      has err "demitasse $cmd: --threads wants a whole number of threads from 1 to 4096"
      has err "got '$n'"
    }
  done
done
expect 2 "$DM" run --net "$T/fill.pbtxt" --threads && has err 'threads'

cli_summary

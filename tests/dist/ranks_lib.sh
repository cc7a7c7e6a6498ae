# ranks_lib.sh: the setup shared by the data-parallel CLI tests (lenet_ranks_test.sh,
# gpt_ranks_test.sh). Sourced, not run: `. "$(dirname "$0")/ranks_lib.sh"`, then
# `ranks_setup NAME`.
#
#   N, LOG                 the steps ($DM_RANKS_ITERS, default $RANKS_DEFAULT_ITERS) and
#                          the logging interval (20 logged iterations)
#   PY                     Debian's Python, with NumPy
#   fail MESSAGE...        a failed check (counted in $fails)
#   ranks_setup NAME       exits 77 (skipped) without mpirun or NumPy; makes the scratch
#                          folder $T (removed on exit)
PY=/usr/bin/python3
N=${DM_RANKS_ITERS:-${RANKS_DEFAULT_ITERS:-200}}
LOG=$((N / 20 > 0 ? N / 20 : 1))
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ranks_setup() {
  command -v mpirun >/dev/null 2>&1 || { echo "no mpirun: skipped"; exit 77; }
  $PY -c 'import numpy' 2>/dev/null || { echo "no numpy for $PY: skipped"; exit 77; }
  T=$(mktemp -d "${TMPDIR:-/tmp}/dm_$1_XXXXXX") || exit 1
  trap 'rm -rf "$T"' EXIT
}

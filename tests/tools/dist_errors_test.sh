#!/bin/sh
# dist_errors_test.sh: the data-parallel pieces used without mpirun fail with a message,
# never a crash or a hang: an Allreduce run by `demitasse run` (MPI not initialised, or a
# build without MPI: either error names it), and a DB reader's num_shards/shard_id out of
# range (checked before the DB is opened).
# usage: dist_errors_test.sh DEMITASSE
DM=$1
T=$(mktemp -d "${TMPDIR:-/tmp}/dm_dist_err_XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fails=0
expect_fail() { # expect_fail NET PATTERN WHAT
  timeout 60 "$DM" run --net "$1" >"$T/out" 2>&1
  rc=$?
  if [ $rc -eq 0 ] || [ $rc -ge 124 ] || ! grep -q "$2" "$T/out"; then
    echo "FAIL: $3 (exit $rc): $(cat "$T/out")"
    fails=$((fails + 1))
  else
    echo "ok: $3: $(grep -m1 "$2" "$T/out")"
  fi
}
printf '%s\n' 'name: "ar"' \
  'op { type: "ConstantFill" output: "g" arg { name: "shape" ints: 4 } arg { name: "value" f: 1 } }' \
  'op { type: "Allreduce" input: "g" output: "g" }' >"$T/ar.pbtxt"
expect_fail "$T/ar.pbtxt" "MPI is not initialised\|needs MPI" "Allreduce outside mpirun"
printf '%s\n' 'name: "db"' \
  'op { type: "TensorProtosDBInput" output: "data" output: "label" arg { name: "db" s: "/nonexistent" }' \
  '     arg { name: "batch_size" i: 2 } arg { name: "num_shards" i: 2 } arg { name: "shard_id" i: 2 } }' \
  >"$T/db.pbtxt"
expect_fail "$T/db.pbtxt" "shard_id 2" "shard_id past num_shards"
exit $((fails > 0))

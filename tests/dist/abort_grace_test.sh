#!/bin/sh
# abort_grace_test.sh: after MPI_Abort, a `train --data-parallel` rank ends by itself
# within its grace period (15 s) even when mpirun cannot end it. Here mpirun is stopped
# (SIGSTOP, as an mpirun stuck reaching a lost host behaves) together with rank 1, so
# rank 0 times out (--dp-timeout 3), calls MPI_Abort, and nobody carries the abort out:
# rank 0 must have exited (a zombie of the stopped mpirun, or gone) within 40 s.
#
# usage: abort_grace_test.sh MPIRUN_SH DEMITASSE IMAGES.gz LABELS.gz LENET_INIT LENET_TRAIN
set -u
MPI=$1 DM=$2 IMAGES=$3 LABELS=$4 INIT=$5 NET=$6
command -v mpirun >/dev/null 2>&1 || { echo "no mpirun: skipped"; exit 77; }
command -v pgrep >/dev/null 2>&1 || { echo "no pgrep (procps): skipped"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/dm_grace_XXXXXX") || exit 1
R0= R1= MP= P=
cleanup() {
  for p in $R0 $R1 $MP; do kill -9 "$p" 2>/dev/null; kill -CONT "$p" 2>/dev/null; done
  [ -n "$P" ] && kill -9 "$P" 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT
"$DM" make-db --images "$IMAGES" --labels "$LABELS" --train 2000 --out-train "$T/db" \
  --out-val "$T/val" >"$T/make_db.log" 2>&1 || { cat "$T/make_db.log"; exit 1; }
sed 's/\(name: "batch_size" i:\) 64/\1 32/' "$NET" >"$T/net32.pbtxt"
sh "$MPI" 2 "$DM" train --init "$INIT" --net "$T/net32.pbtxt" --train-db "$T/db" \
  --iters 100000 --threads 1 --log-every 1 --data-parallel --dp-timeout 3 >"$T/log" 2>&1 &
P=$!
i=0
while ! grep -q "iter 3/" "$T/log" 2>/dev/null && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
for p in $(pgrep -f "$T/net32.pbtxt"); do
  r=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
  [ "$r" = 0 ] && R0=$p
  [ "$r" = 1 ] && R1=$p
  [ "$(cat "/proc/$p/comm" 2>/dev/null)" = mpirun ] && MP=$p
done
[ -n "$R0" ] && [ -n "$R1" ] && [ -n "$MP" ] ||
  { echo "FAIL: processes not found (rank 0 '$R0', rank 1 '$R1', mpirun '$MP')"; tail -3 "$T/log"; exit 1; }
kill -STOP "$R1" "$MP"
alive() { [ -d "/proc/$1" ] && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }
t=0
while alive "$R0" && [ $t -lt 40 ]; do sleep 1; t=$((t + 1)); done
if alive "$R0"; then
  echo "FAIL: rank 0 still alive 40 s after its peer and mpirun stopped"
  exit 1
fi
echo "rank 0 exited by itself ${t} s after its peer and mpirun stopped (3 s timeout, 15 s grace)"
exit 0

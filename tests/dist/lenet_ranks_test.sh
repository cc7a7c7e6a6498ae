#!/bin/sh
# lenet_ranks_test.sh: `mpirun -np 2 demitasse train --data-parallel` on LeNet/MNIST
# against one process, and a data-parallel job that loses a rank.
#
#   (a) 2 ranks at batch 32 each, N steps, against 1 rank at batch 64 fed the same
#       records (rank r reads its half of every global batch of 64): the two runs differ
#       only in the order of their FP32 sums (batch sums split in two halves, then added
#       by the all-reduce). Training amplifies such differences (LeNet's losses agree to
#       1e-7 for ~70 steps, then drift to 1e-3 and beyond by step 200, max-pool and ReLU
#       switching on last-bit differences), so the bound is measured, not guessed: the
#       same 1-rank run on the reference kernels (the same arithmetic in another valid
#       order) gives the spread; every logged loss must agree within max(1e-3 relative,
#       4 times the largest spread up to that step), and the final weights within 4
#       times the weights' spread (plus 16 ulps of the largest). A build without oneDNN
#       has no reference engine: its second order is the 1-rank run on one thread instead
#       of two (the kernels' per-thread partial sums add up in another order); where the
#       CPU's kernels sum the same either way, (a) checks only the first 40% of the
#       steps, before the drift sets in, within 1e-3 (a one-ulp perturbation of the
#       start drifts later than a per-step one, so it cannot stand in);
#   (b) the 2-rank run's checkpoint, resumed by 2 ranks from step N/2, ends bit-identical
#       to the uninterrupted 2-rank run;
#   (c) a rank killed (SIGKILL) mid-run ends the job with an error naming the lost rank,
#       and a rank stopped (SIGSTOP, alive but silent) makes the other fail after
#       --dp-timeout with an error naming the timeout; neither hangs.
#
# usage: lenet_ranks_test.sh MPIRUN_SH DEMITASSE IMAGES.gz LABELS.gz LENET_INIT LENET_TRAIN
# (DM_RANKS_ITERS: the steps, default 200; the sanitizer build runs 40)
set -u
MPI=$1 DM=$2 IMAGES=$3 LABELS=$4 INIT=$5 NET=$6
. "$(dirname "$0")/ranks_lib.sh"
ranks_setup ranks
"$DM" make-db --images "$IMAGES" --labels "$LABELS" --train 8000 --out-train "$T/train_db" \
  --out-val "$T/val_db" >"$T/make_db.log" 2>&1 || { cat "$T/make_db.log"; exit 1; }
sed 's/\(name: "batch_size" i:\) 64/\1 32/' "$NET" >"$T/net32.pbtxt"
grep -q '"batch_size" i: 32' "$T/net32.pbtxt" || { echo "FAIL: no batch_size 64 in $NET"; exit 1; }

one() { # one CKPT CSV LOG [flags]: 1 rank, batch 64
  o_ck=$1 o_csv=$2 o_log=$3
  shift 3
  "$DM" train --init "$INIT" --net "$NET" --train-db "$T/train_db" --iters "$N" --threads 2 \
    --checkpoint "$o_ck" --csv "$o_csv" --log-every "$LOG" "$@" >"$o_log" 2>&1
}
two() { # two CKPT CSV LOG ITERS [flags]: 2 ranks, batch 32 each
  t_ck=$1 t_csv=$2 t_log=$3 t_n=$4
  shift 4
  sh "$MPI" 2 "$DM" train --init "$INIT" --net "$T/net32.pbtxt" --train-db "$T/train_db" \
    --iters "$t_n" --threads 1 --checkpoint "$t_ck" --csv "$t_csv" --log-every "$LOG" \
    --data-parallel "$@" >"$t_log" 2>&1
}
# export CKPT NPZ: every blob of a checkpoint into one .npz (through `demitasse run`)
export_ckpt() {
  cat >"$T/load.pbtxt" <<EOF
name: "load"
op { type: "Load" arg { name: "db" s: "$1" } arg { name: "load_all" i: 1 } }
EOF
  set -- "$1" "$2" $(sed -n 's/.*output: *"\([^"]*\)".*/\1/p' "$INIT" | sort -u)
  e_out=$2
  shift 2
  e_args=""
  for b in "$@" conv1_w_momentum optimizer_iteration; do
    e_args="$e_args --output $b=$T/exp_$b.npy"
  done
  # shellcheck disable=SC2086
  "$DM" run --net "$T/load.pbtxt" $e_args >"$T/export.log" 2>&1 || { cat "$T/export.log"; return 1; }
  $PY - "$T" "$e_out" "$@" conv1_w_momentum optimizer_iteration <<'EOF'
import sys, numpy as np
t, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
np.savez(out, **{n: np.load(f"{t}/exp_{n}.npy") for n in names})
EOF
}

# (a) 1 rank, 1 rank on the reference kernels, 2 ranks
SPREAD=1
"$DM" info 2>/dev/null | grep -q 'CPU engine: oneDNN' || SPREAD=0
[ -n "${DM_RANKS_NO_SPREAD:-}" ] && SPREAD=0 # (to exercise that path on any build)
one "$T/one_ck" "$T/one.csv" "$T/one.log" || { tail -5 "$T/one.log"; exit 1; }
# Without oneDNN the second order is the same run on one thread: the reference kernels'
# per-thread partial sums (and OpenBLAS's) then add up in another order, where the CPU's
# kernels split the work by thread at all (on some they do not: see below).
if [ "$SPREAD" = 1 ]; then
  one "$T/ref_ck" "$T/ref.csv" "$T/ref.log" --engine reference || { tail -5 "$T/ref.log"; exit 1; }
else
  one "$T/ref_ck" "$T/ref.csv" "$T/ref.log" --threads 1 || { tail -5 "$T/ref.log"; exit 1; }
fi
two "$T/two_ck" "$T/two.csv" "$T/two.log" "$N" || { tail -20 "$T/two.log"; exit 1; }
grep -q "Allreduce" "$T/two.log" || fail "the 2-rank run's passes added no Allreduce"
for r in one ref two; do export_ckpt "$T/${r}_ck" "$T/$r.npz" || exit 1; done
$PY - "$(dirname "$0")" "$T" "$SPREAD" "$N" <<'EOF' || fails=$((fails + 1))
import sys, numpy as np
sys.path.insert(0, sys.argv[1])
from ranks_losses import losses_agree
t, n = sys.argv[2], int(sys.argv[4])
ok, spread_known = losses_agree(t, sys.argv[3] == "1", n)
a, r, b = (np.load(f"{t}/{k}.npz") for k in ("one", "ref", "two"))
assert int(b["optimizer_iteration"].ravel()[0]) == int(a["optimizer_iteration"].ravel()[0])
for k in sorted(a.files) if spread_known else []:
    if a[k].dtype.kind != "f":
        continue
    spread = np.abs(r[k].astype(np.float64) - a[k]).max()
    diff = np.abs(b[k].astype(np.float64) - a[k]).max()
    big = np.abs(a[k]).max()
    tol = 4 * spread + 16 * np.finfo(np.float32).eps * big
    print(f"{k}: 2 ranks vs 1 rank {diff:.3g}, reference kernels vs 1 rank {spread:.3g}, tolerance {tol:.3g}")
    ok &= diff <= tol
sys.exit(0 if ok else 1)
EOF

# (b) resume: 2 ranks to N/2, then --resume to N: bit-identical to the uninterrupted run
two "$T/res_ck" "$T/res.csv" "$T/res1.log" $((N / 2)) || { tail -20 "$T/res1.log"; exit 1; }
two "$T/res_ck" "$T/res.csv" "$T/res2.log" "$N" --resume || { tail -20 "$T/res2.log"; exit 1; }
export_ckpt "$T/res_ck" "$T/res.npz" || exit 1
$PY - "$T" <<'EOF' || fail "the resumed 2-rank run differs from the uninterrupted one"
import sys, numpy as np
t = sys.argv[1]
a, b = np.load(f"{t}/two.npz"), np.load(f"{t}/res.npz")
bad = [k for k in a.files if a[k].tobytes() != b[k].tobytes()]
print("resume: all blobs bit-identical" if not bad else f"resume: differ: {bad}")
sys.exit(1 if bad else 0)
EOF

# (c) a lost rank: killed, then stopped. The job must end (timeouts well below the
# test's own), with the error naming what was lost.
lose() { # lose SIGNAL LOG: start a long 2-rank run, send SIGNAL to rank 1 once it trains
  sh "$MPI" 2 "$DM" train --init "$INIT" --net "$T/net32.pbtxt" --train-db "$T/train_db" \
    --iters 100000 --threads 1 --log-every 1 --data-parallel --dp-timeout 5 >"$2" 2>&1 &
  l_pid=$!
  l_i=0
  while ! grep -q "iter 3/" "$2" 2>/dev/null && [ $l_i -lt 600 ]; do sleep 0.1; l_i=$((l_i + 1)); done
  victim=$(pgrep -f "$T/net32.pbtxt" | while read -r p; do
    [ "$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -c '^OMPI_COMM_WORLD_RANK=1$')" = 1 ] && echo "$p"
  done | head -1)
  [ -n "$victim" ] || { fail "$1: no rank 1 process found"; kill "$l_pid"; return; }
  kill "-$1" "$victim"
  l_t=0
  while kill -0 "$l_pid" 2>/dev/null && [ $l_t -lt 60 ]; do sleep 1; l_t=$((l_t + 1)); done
  if kill -0 "$l_pid" 2>/dev/null; then
    fail "$1: the job still runs 60 s after rank 1 got SIG$1"
    pkill -9 -f "$T/net32.pbtxt"
  fi
  wait "$l_pid" && fail "$1: the job exited 0 after losing rank 1"
  kill -CONT "$victim" 2>/dev/null
  echo "SIG$1 to rank 1: the job ended after ${l_t} s"
}
lose KILL "$T/kill.log"
grep -q "rank 1" "$T/kill.log" || fail "KILL: no error names rank 1: $(tail -5 "$T/kill.log")"
lose STOP "$T/stop.log"
grep -q "waited [0-9]* s for the other 1 rank" "$T/stop.log" ||
  fail "STOP: no timeout error: $(tail -5 "$T/stop.log")"

[ "$fails" = 0 ] && echo "all data-parallel CLI checks passed"
exit $((fails > 0))

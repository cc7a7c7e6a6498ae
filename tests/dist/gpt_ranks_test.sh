#!/bin/sh
# gpt_ranks_test.sh: `mpirun -np 2 demitasse train --data-parallel` on the tiny GPT
# (tests/models/lm_common.py's configuration: 2 layers, width 32, context 16, V = 20)
# against one process, as lenet_ranks_test.sh does for LeNet: 2 ranks at batch 4 each
# against 1 rank at batch 8 fed the same token windows (rank r reads its half of every
# global batch), Adam, N steps. The runs differ only in the order of their FP32 sums, so
# each logged loss must agree within the measured spread of two 1-rank FP32 orders
# (ranks_losses.py), and the run must learn; then the same with --fp16 (dynamic loss
# scaling), within FP16's own effect on the 1-rank run (below).
#
# usage: gpt_ranks_test.sh MPIRUN_SH DEMITASSE MAKE_LM_DB SOURCE_ROOT
# (DM_RANKS_ITERS: the steps, default 100)
set -u
MPI=$1 DM=$2 MKDB=$3 SRC=$4
RANKS_DEFAULT_ITERS=100
. "$(dirname "$0")/ranks_lib.sh"
ranks_setup gpt_ranks
gen() { # gen DIR BATCH: the tiny GPT's nets
  $PY "$SRC/models/gpt/make_gpt.py" --out-dir "$1" --seed 1 --layers 2 --width 32 --heads 2 \
    --context 16 --vocab 20 --batch "$2" >/dev/null || exit 1
}
gen "$T/b8" 8
gen "$T/b4" 4
# the same weights either way (the header comment names the command, --batch included)
[ "$(grep -v '^#' "$T/b8/gpt_init.pbtxt")" = "$(grep -v '^#' "$T/b4/gpt_init.pbtxt")" ] ||
  { echo "FAIL: the init net depends on --batch"; exit 1; }
"$MKDB" "$T/train_lmdb" 256 16 20 1 >/dev/null || exit 1

one() { # one CSV LOG [flags]: 1 rank, batch 8
  o_csv=$1 o_log=$2
  shift 2
  "$DM" train --init "$T/b8/gpt_init.pbtxt" --net "$T/b8/gpt_train.pbtxt" \
    --train-db "$T/train_lmdb" --iters "$N" --threads 2 --optimizer adam --lr 0.01 \
    --csv "$o_csv" --log-every "$LOG" "$@" >"$o_log" 2>&1 || { tail -5 "$o_log"; exit 1; }
}
two() { # two CSV LOG [flags]: 2 ranks, batch 4 each
  t_csv=$1 t_log=$2
  shift 2
  sh "$MPI" 2 "$DM" train --init "$T/b4/gpt_init.pbtxt" --net "$T/b4/gpt_train.pbtxt" \
    --train-db "$T/train_lmdb" --iters "$N" --threads 1 --optimizer adam --lr 0.01 \
    --csv "$t_csv" --log-every "$LOG" --data-parallel "$@" >"$t_log" 2>&1 ||
    { tail -20 "$t_log"; exit 1; }
}

# FP32: 1 rank, 1 rank in another summation order, 2 ranks
SPREAD=1
"$DM" info 2>/dev/null | grep -q 'CPU engine: oneDNN' || SPREAD=0
one "$T/one.csv" "$T/one.log"
if [ "$SPREAD" = 1 ]; then
  one "$T/ref.csv" "$T/ref.log" --engine reference
else
  one "$T/ref.csv" "$T/ref.log" --threads 1
fi
two "$T/two.csv" "$T/two.log"
grep -q "Allreduce" "$T/two.log" || fail "the 2-rank run's passes added no Allreduce"
$PY - "$(dirname "$0")" "$T" "$SPREAD" "$N" <<'EOF' || fail "FP32: 2 ranks do not track 1"
import sys
sys.path.insert(0, sys.argv[1])
from ranks_losses import losses_agree
ok, _ = losses_agree(sys.argv[2], sys.argv[3] == "1", int(sys.argv[4]))
first = float(open(sys.argv[2] + "/two.csv").readlines()[1].split(",")[1])
last = float(open(sys.argv[2] + "/two.csv").readlines()[-1].split(",")[1])
print("2 ranks: loss %.4f at the first logged step, %.4f at the last" % (first, last))
# ln 20 = 3.0 is chance; make_lm_db's cycle is learnable: the run must learn, not only agree
sys.exit(0 if ok and last < 0.5 * first else 1)
EOF

# FP16 with dynamic loss scaling: 2 ranks against 1 rank, both FP16. Per-rank FP16
# rounding of the half-batch gradients differs from the whole batch's, so the bound is
# FP16's own effect: each 2-rank loss within max(1e-3, 4 times the largest relative gap
# so far between 1-rank FP16 and 1-rank FP32), i.e. splitting the batch over ranks must
# move the run less than the precision does.
one "$T/one16.csv" "$T/one16.log" --fp16
two "$T/two16.csv" "$T/two16.log" --fp16
grep -q "Allreduce" "$T/two16.log" || fail "the FP16 2-rank run's passes added no Allreduce"
$PY - "$(dirname "$0")" "$T" "$N" <<'EOF' || fail "FP16: 2 ranks do not track 1"
import sys
sys.path.insert(0, sys.argv[1])
from ranks_losses import losses_agree
t = sys.argv[2]
ok, _ = losses_agree(t, True, int(sys.argv[3]), ("one16", "two16", "one"))
print("FP16, 2 ranks, the last CSV row: " + open(t + "/two16.csv").read().split()[-1])
sys.exit(0 if ok else 1)
EOF

[ "$fails" = 0 ] && echo "all GPT data-parallel checks passed"
exit $((fails > 0))

#!/bin/sh
# resume_gpu_test.sh: `demitasse train --fp16` on LeNet/MNIST, interrupted at N/2 and
# resumed from its checkpoint in a fresh process (--resume), ends where the uninterrupted
# run does, on DEVICE (cuda by default; cpu runs the same checks on the CPU).
#
# What a checkpoint holds: every blob the init nets create (tools/cmd_train.c), saved by
# one Save op: the parameters, their momenta, `optimizer_iteration` and, with --fp16, the
# loss-scale state `loss_scale`, `loss_scale_good_steps` (clean steps towards the next
# doubling) and `loss_scale_skipped`. The list compared here is not written down: it is
# the outputs of the model's init net plus those of `demitasse rewrite --init-out` with
# the same flags, and the test fails unless the three loss-scale blobs are among them.
# The data input reads batch number `optimizer_iteration`, so a resumed run sees the
# batches the uninterrupted one sees.
#
# The runs (N=60, DM_RESUME_ITERS; each logs every iteration to a CSV: loss, loss scale,
# skipped steps):
#   U, U2  uninterrupted, to N, a checkpoint every N/2 (the last one kept);
#   H      the interrupted run: the same to N/2 (the N/2 checkpoint of U itself does not
#          survive: a checkpoint path holds only its latest save);
#   R      a fresh process: --resume from H's checkpoint, to N.
# The loss scale starts at 128 (DM_RESUME_INIT_SCALE) and doubles every 7 clean steps:
# 2048 at iteration 30 with 2 clean steps counted, 32768 at 60. A resume that lost the
# scale or its counter doubles at other iterations, which the per-iteration loss_scale
# column shows. On a GPU the scale stays far below 2^18, where LeNet's FP16 gradients
# first overflowed on the CPU, so no step is skipped: whether a step near the threshold
# overflows is not something noise may be allowed to flip. The CPU variant (resume_cpu)
# starts at 65536 instead, where a few steps are skipped, and requires that some are
# (DM_RESUME_NEED_SKIPS=1): a skipped step is not an iteration (Iter takes the skip and
# `train` counts the counter's iterations), so the resumed run must still end where the
# uninterrupted one does.
#
# Required always, exactly: H's checkpoint is at iteration N/2 and holds the loss scale
# U logged at N/2 (not the initial one) and a non-zero clean-step count; R says
# "resuming at iteration N/2", logs exactly iterations N/2+1..N, and its first iteration
# runs at U's loss scale; every logged iteration of H and R has U's loss scale and
# skipped count; R's and U's final checkpoints are at iteration N with the same loss-scale
# state. (Discrete, so exact on any device: without overflows, noise cannot flip them.)
# Required of the numbers: what U2 shows is possible. If U and U2 are bit-identical
# (every checkpoint blob, every logged loss), as on the CPU and on a GPU whose cuDNN/
# cuBLAS algorithms (chosen by heuristics, the same in every process) are deterministic,
# then H's logged losses and R's losses and final checkpoint must be bit-identical to
# U's: anything else is a resume that lost or changed state. If they are not (a
# backward-filter or backward-data algorithm that accumulates with atomics), no resume
# can be bit-identical, and R must be as close to U as a rerun is: every logged loss
# within TOL = max(0.01, 3 x the largest |U2 - U| loss difference). On the CPU a
# relative change of 1e-5 in the learning rate (noise of that order) moved the losses by
# up to 0.0055 by iteration 60, resuming with the momenta zeroed by up to 0.10, and from
# the N/2 checkpoint of a run with a 1% higher learning rate by 0.0125 (just caught), so
# 0.01 tells noise from lost state; a device noisier than TOL = 0.05 cannot, and the test
# fails there as inconclusive. DM_RESUME_ASSUME_NONDETERMINISTIC=1 applies this rule anyway
# (to test it on the CPU).
#
# Exits 77 with device cuda and no usable GPU.
# usage: resume_gpu_test.sh demitasse models/mnist [cuda|cuda:N|cpu]
# shellcheck disable=SC2046  # set -- $(...) splits a function's output into fields
set -u
exe=$1 mnist=$2 device=${3:-cuda}
# shellcheck source=tests/gpu/gpu_test_lib.sh
. "$(dirname "$0")/gpu_test_lib.sh"
case "$device" in
  cpu) ;;
  cuda*) gpu_require ;;
  *) echo "usage: resume_gpu_test.sh demitasse models/mnist [cuda|cuda:N|cpu]"; exit 2 ;;
esac
N=${DM_RESUME_ITERS:-60}
half=$((N / 2))
init_scale=${DM_RESUME_INIT_SCALE:-128}
flags="--optimizer momentum --lr 0.01 --momentum 0.9 --fp16 --init-scale $init_scale --growth-interval 7"
mnist_dbs 4000

train() {  # $1: the run's name (its CSV and log under $tmp); $2: its checkpoint's; the rest: options
  r=$1 ck=$2; shift 2
  # shellcheck disable=SC2086  # $flags is a list of options
  "$exe" train --init "$mnist/lenet_init.pbtxt" --net "$mnist/lenet_train.pbtxt" \
    --train-db "$tmp/train" --iters "$N" --checkpoint-every "$half" --log-every 1 $flags \
    --device "$device" --checkpoint "$tmp/$ck.ck" --csv "$tmp/$r.csv" "$@" > "$tmp/$r.log" 2>&1 \
    || { cat "$tmp/$r.log"; fail "training run $r"; }
}

# The blobs a checkpoint carries (see the header).
# shellcheck disable=SC2086
"$exe" rewrite --grad --loss loss $flags --init-out "$tmp/state.pbtxt" -o "$tmp/rw.pbtxt" \
  "$mnist/lenet_train.pbtxt" > "$tmp/rewrite.log" 2>&1 || { cat "$tmp/rewrite.log"; fail "rewrite"; }
blobs=$(cat "$mnist/lenet_init.pbtxt" "$tmp/state.pbtxt" | sed -n 's/.*output: *"\([^"]*\)".*/\1/p' | sort -u)
for b in optimizer_iteration conv1_w_momentum loss_scale loss_scale_good_steps loss_scale_skipped; do
  echo "$blobs" | grep -qx "$b" || fail "the checkpointed state lacks $b: $(echo "$blobs" | tr '\n' ' ')"
done
nblobs=$(echo "$blobs" | wc -l)

# export_ck RUN CK: every blob of the checkpoint $tmp/CK.ck into $tmp/RUN.blobs/<blob>.npy
export_ck() {
  run=$1
  mkdir "$tmp/$run.blobs" || exit 1
  printf 'op { type: "Load" arg { name: "db" s: "%s" } arg { name: "db_type" s: "lmdb" }
     arg { name: "load_all" i: 1 } }\n' "$tmp/$2.ck" > "$tmp/load.pbtxt"
  set --
  for b in $blobs; do set -- "$@" --output "$b=$tmp/$run.blobs/$b.npy"; done
  "$exe" run --net "$tmp/load.pbtxt" "$@" > "$tmp/export.log" 2>&1 \
    || { cat "$tmp/export.log"; fail "exporting the checkpoint of run $run"; }
}
# value RUN BLOB: the one value of an exported blob (little-endian f4, f8, i4 or i8)
value() {
  f="$tmp/$1.blobs/$2.npy"
  t=$(head -c 128 "$f" | LC_ALL=C sed -n "s/.*'descr': *'<\([fi][48]\)'.*/\1/p")
  case "$t" in  # (in a command substitution, so no fail: the caller's check fails)
    f?) ot=$t ;; i?) ot=d${t#i} ;; *) echo "unreadable-$2.npy"; return ;;
  esac
  od -An -v -j $(($(wc -c < "$f") - ${t#?})) -t "$ot" "$f" | tr -d ' '
}
# same_blobs A B: every exported blob of runs A and B byte-identical; else names them
same_blobs() {
  d=
  for b in $blobs; do cmp -s "$tmp/$1.blobs/$b.npy" "$tmp/$2.blobs/$b.npy" || d="$d $b"; done
  [ -z "$d" ] || { echo "blobs that differ between $1 and $2:$d"; return 1; }
}
# rows RUN: its CSV's iterations, "first last count"
rows() { awk -F, 'NR > 1 { if (!n++) f = $1; l = $1 } END { print f, l, n }' "$tmp/$1.csv"; }
# csv_diff A B: B's logged iterations against A's: "MAXD EXACT BAD MISSING FIRSTBAD":
# the largest |loss difference|, 1 if every loss is the same number, how many rows have
# another loss scale or skipped count, how many of B's iterations A lacks, the first bad.
csv_diff() {
  awk -F, 'NR == FNR { if (FNR > 1) { L[$1] = $2; S[$1] = $7 "/" $8 }; next }
    FNR > 1 { if (!($1 in L)) { miss++; next }
      d = $2 - L[$1]; if (d < 0) d = -d; if (d > m) m = d; if ($2 != L[$1]) ne++
      if ($7 "/" $8 != S[$1]) { if (!bad++) fb = $1 ": " S[$1] " -> " $7 "/" $8 } }
    END { printf "%.9g %d %d %d %s\n", m, !ne, bad, miss, (bad ? fb : "-") }' \
    "$tmp/$1.csv" "$tmp/$2.csv"
}
# at RUN ITER COLUMN: a field of RUN's CSV row for iteration ITER (7: loss scale, 8: skipped)
at() { awk -F, -v i="$2" -v c="$3" '$1 == i { print $c }' "$tmp/$1.csv"; }
# check_discrete RUN WHAT: RUN's rows have U's loss scale and skipped count (exact).
check_discrete() {
  what=$2
  set -- $(csv_diff U "$1")
  [ "$4" = 0 ] || fail "$what: $4 logged iterations that U never logged"
  bad=$3
  shift 4
  [ "$bad" = 0 ] ||
    fail "$what: $bad iterations with another loss scale/skipped count than U's (first: iteration $*)"
}

train U U
train U2 U2
train H H --iters "$half"
export_ck H H
# A fresh process resumes the interrupted run from its N/2 checkpoint (in place), to N.
train R H --resume
export_ck R H
export_ck U U
export_ck U2 U2
u_skips=$(tail -n 1 "$tmp/U.csv" | cut -d, -f8)
echo "run U skipped $u_skips steps on overflow"
[ "${DM_RESUME_NEED_SKIPS:-0}" = 0 ] || [ "$u_skips" -gt 0 ] \
  || fail "no step was skipped: the skipped-step case is not exercised (raise DM_RESUME_INIT_SCALE)"

# The interrupted run and its checkpoint.
set -- $(rows H)
[ "$*" = "1 $half $half" ] || fail "run H logged iterations '$*', not 1..$half"
it=$(value H optimizer_iteration) ls=$(value H loss_scale)
good=$(value H loss_scale_good_steps) sk=$(value H loss_scale_skipped)
echo "checkpoint at $half: optimizer_iteration $it, loss_scale $ls, good steps $good, skipped $sk"
[ "$it" = "$half" ] || fail "the checkpoint of a run to $half is at iteration $it (after $sk skipped steps)"
awk -v a="$ls" -v b="$(at U "$half" 7)" -v i="$init_scale" 'BEGIN { exit !(a == b && a != i) }' || fail \
  "the checkpoint's loss scale $ls is not the $(at U "$half" 7) U logged at $half (or is the initial $init_scale)"
[ "$sk" = "$(at U "$half" 8)" ] || fail "the checkpoint's skipped count $sk is not U's $(at U "$half" 8)"
[ "$good" -gt 0 ] || fail "no clean steps counted at $half: pick N so that N/2 is not a multiple of 7"
check_discrete H "run H (1..$half)"

# The resumed run.
grep -q "^resuming at iteration $half\$" "$tmp/R.log" \
  || { cat "$tmp/R.log"; fail "run R does not say 'resuming at iteration $half'"; }
set -- $(rows R)
[ "$*" = "$((half + 1)) $N $((N - half))" ] || fail "run R logged iterations '$*', not $((half + 1))..$N"
echo "iteration $((half + 1)): loss scale $(at R $((half + 1)) 7) resumed, $(at U $((half + 1)) 7) uninterrupted"
check_discrete R "run R ($((half + 1))..$N)"
for b in optimizer_iteration loss_scale loss_scale_good_steps loss_scale_skipped; do
  [ "$(value U $b)" = "$(value R $b)" ] || fail "final $b: U $(value U $b), R $(value R $b)"
done
[ "$(value U optimizer_iteration)" = "$N" ] || fail "U's final checkpoint is at iteration $(value U optimizer_iteration)"

# The numbers: bit-identical where a rerun is, else within a rerun's spread.
set -- $(csv_diff U U2)
spread=$1
if [ "$2" = 1 ] && same_blobs U U2 > /dev/null && [ "${DM_RESUME_ASSUME_NONDETERMINISTIC:-0}" = 0 ]; then
  echo "$device is deterministic here: two uninterrupted runs are bit-identical ($nblobs blobs, $N losses)"
  set -- $(csv_diff U H)
  [ "$2" = 1 ] || fail "run H's losses are not bit-identical to U's (largest difference $1)"
  set -- $(csv_diff U R)
  [ "$2" = 1 ] || fail "the resumed run's losses are not bit-identical to U's (largest difference $1)"
  same_blobs U R || fail "the resumed run's final checkpoint is not bit-identical to U's"
  echo "resumed at $half to $N: all $nblobs checkpoint blobs and $((N - half)) losses bit-identical to U's"
else
  tol=$(awk -v s="$spread" 'BEGIN { t = 3 * s; printf "%.6g", (t > 0.01 ? t : 0.01) }')
  x=$(same_blobs U U2 > /dev/null || echo ' (and in their final blobs)')
  echo "requiring losses within $tol: two uninterrupted runs differ by up to $spread$x"
  awk -v t="$tol" 'BEGIN { exit !(t <= 0.05) }' \
    || fail "inconclusive: reruns on $device differ by up to $spread, too much to tell a bad resume from noise"
  set -- $(csv_diff U H)
  awk -v d="$1" -v t="$tol" 'BEGIN { exit !(d <= t) }' || fail "run H's losses differ from U's by up to $1"
  echo "run H (1..$half): losses within $1 of U's"
  set -- $(csv_diff U R)
  awk -v d="$1" -v t="$tol" 'BEGIN { exit !(d <= t) }' || fail "the resumed run's losses differ from U's by up to $1"
  x=$(same_blobs U R > /dev/null && echo " (all $nblobs blobs bit-identical)")
  echo "resumed at $half to $N: losses within $1 of U's$x"
fi
echo ok

#!/bin/sh
# train_resume_test.sh: `demitasse train` on LeNet/MNIST is reproducible and resumable,
# bit for bit. The training state is the checkpoint's blobs (parameters, momenta, the
# iteration counter); each is exported with `demitasse run` on a net holding one Load
# (load_all) and compared byte for byte with `cmp`:
#   (a) two runs with the same seeds (the init net's fills, the data input's shuffle)
#       end in the same state;
#   (b) N/2 iterations, then --resume to N, ends in the uninterrupted run's state;
#   (c) a run checkpointing every iteration, SIGKILLed at random moments (mostly inside
#       a save: with a save per iteration that is where much of the time goes) and
#       resumed each time, always leaves a checkpoint --resume loads, and the last
#       resume ends in the uninterrupted run's state. Bit-identical is the right bar:
#       the data input reads batch number `optimizer_iteration`, so a resumed run sees
#       the same batches in the same order and does the same arithmetic;
#   (d) an FP16 run whose every step overflows stops with an error after 100 skips.
# The list of blobs compared is not written here: it is every output of the init net
# plus every output of the optimizer's init additions (`demitasse rewrite
# --init-out`), the same set `demitasse train` saves.
#
# usage: train_resume_test.sh DEMITASSE IMAGES.gz LABELS.gz LENET_INIT LENET_TRAIN
# (exit 77: skipped, a prerequisite is missing)
set -u
DM=$1 IMAGES=$2 LABELS=$3 INIT=$4 NET=$5
N=${DM_RESUME_ITERS:-20}   # iterations of every full run
KILLS=${DM_RESUME_KILLS:-3}
. "$(dirname "$0")/train_test_lib.sh"
train_test_setup train_resume 2000

# The blobs a checkpoint carries (see the header).
"$DM" rewrite --grad --loss loss --optimizer momentum --init-out "$T/optim_init.pbtxt" \
  -o "$T/rewritten.pbtxt" "$NET" >"$T/rewrite.log" 2>&1 || { cat "$T/rewrite.log"; exit 1; }
BLOBS=$(cat "$INIT" "$T/optim_init.pbtxt" |
  sed -n 's/.*output: *"\([^"]*\)".*/\1/p' | sort -u)
case "$BLOBS" in *optimizer_iteration*) ;; *) echo "FAIL: no iteration counter in: $BLOBS"; exit 1 ;; esac
case "$BLOBS" in *_momentum*) ;; *) echo "FAIL: no momenta in: $BLOBS"; exit 1 ;; esac

train() { # train CKPT LOG [extra flags]: LeNet to iteration N, checkpoint at CKPT
  t_ck=$1 t_log=$2
  shift 2
  "$DM" train --init "$INIT" --net "$NET" --train-db "$T/train_db" --iters "$N" \
    --checkpoint "$t_ck" --log-every 1000 "$@" >"$t_log" 2>&1
}

# export CKPT DIR: every blob of the checkpoint into DIR/<blob>.npy
export_ckpt() {
  e_ck=$1 e_dir=$2
  rm -rf "$e_dir" && mkdir -p "$e_dir" || return 1
  cat >"$T/load.pbtxt" <<EOF
name: "load"
op { type: "Load" arg { name: "db" s: "$e_ck" } arg { name: "db_type" s: "lmdb" }
     arg { name: "load_all" i: 1 } }
EOF
  set -- # the function's own arguments are saved above; reuse the list for the flags
  for b in $BLOBS; do set -- "$@" --output "$b=$e_dir/$b.npy"; done
  "$DM" run --net "$T/load.pbtxt" "$@" >"$T/export.log" 2>&1 || { cat "$T/export.log"; return 1; }
}

# same DIR1 DIR2 WHAT: every blob byte-identical
same() {
  ok=1
  for b in $BLOBS; do
    cmp -s "$1/$b.npy" "$2/$b.npy" || { fail "$3: $b differs"; ok=0; }
  done
  [ "$ok" = 1 ] && echo "ok: $3: all $(echo $BLOBS | wc -w) blobs bit-identical"
}

# iteration DIR: the counter in an exported checkpoint (int64, the .npy's last 8 bytes)
iteration() { od -An -t d8 -j $(($(wc -c <"$1/optimizer_iteration.npy") - 8)) "$1/optimizer_iteration.npy" | tr -d ' '; }

# (a) reproducibility
train "$T/ref" "$T/ref.log" || { cat "$T/ref.log"; exit 1; }
train "$T/again" "$T/again.log" || { cat "$T/again.log"; exit 1; }
export_ckpt "$T/ref" "$T/ref_blobs" || exit 1
export_ckpt "$T/again" "$T/again_blobs" || exit 1
[ "$(iteration "$T/ref_blobs")" = "$N" ] || fail "the reference checkpoint is at iteration $(iteration "$T/ref_blobs"), not $N"
same "$T/ref_blobs" "$T/again_blobs" "(a) two runs, same seeds"
# A comparison that cannot fail proves nothing: the state must have moved from its init.
train "$T/one" "$T/one.log" --iters 1 || { cat "$T/one.log"; exit 1; }
export_ckpt "$T/one" "$T/one_blobs" || exit 1
cmp -s "$T/one_blobs/conv1_w.npy" "$T/ref_blobs/conv1_w.npy" &&
  fail "conv1_w after 1 and after $N iterations is the same: the comparisons would prove nothing"

# (b) N/2, then --resume to N
half=$((N / 2))
train "$T/res" "$T/res1.log" --iters "$half" || { cat "$T/res1.log"; exit 1; }
train "$T/res" "$T/res2.log" --resume || { cat "$T/res2.log"; exit 1; }
grep -q "resuming at iteration $half" "$T/res2.log" || fail "(b) no 'resuming at iteration $half' in: $(cat "$T/res2.log")"
export_ckpt "$T/res" "$T/res_blobs" || exit 1
same "$T/ref_blobs" "$T/res_blobs" "(b) $half + resume to $N"

# (c) SIGKILL at random moments, checkpointing every iteration
rand_ms() { echo $(($(od -An -N2 -tu2 /dev/urandom) % $1)); }
ck="$T/kill"
last=0
k=1
while [ "$k" -le "$KILLS" ]; do
  resume=
  [ -L "$ck" ] && resume=--resume
  before=$(readlink "$ck" 2>/dev/null || echo none)
  # exec: $! must be demitasse itself, not a subshell whose death leaves it running.
  (exec "$DM" train --init "$INIT" --net "$NET" --train-db "$T/train_db" --iters "$N" \
    --checkpoint "$ck" --log-every 1000 --checkpoint-every 1 $resume >"$T/kill$k.log" 2>&1) &
  pid=$!
  # Wait for a save of this round (so each round makes progress), then kill at random.
  i=0
  while [ "$(readlink "$ck" 2>/dev/null || echo none)" = "$before" ] && [ "$i" -lt 600 ]; do
    sleep 0.05
    i=$((i + 1))
  done
  ms=$(rand_ms 700)
  sleep "$(printf '0.%03d' "$ms")"
  kill -9 "$pid" 2>/dev/null || echo "note: round $k ended before its kill"
  wait "$pid" 2>/dev/null
  if export_ckpt "$ck" "$T/kill_blobs"; then
    it=$(iteration "$T/kill_blobs")
    echo "round $k: killed ${ms} ms after a save; the checkpoint loads, at iteration $it"
    [ "$it" -ge "$last" ] && [ "$it" -ge 1 ] && [ "$it" -le "$N" ] ||
      fail "(c) round $k: iteration $it after $last"
    last=$it
  else
    fail "(c) round $k: the checkpoint left by SIGKILL does not load"
  fi
  k=$((k + 1))
done
train "$ck" "$T/kill_final.log" --checkpoint-every 1 --resume || { cat "$T/kill_final.log"; exit 1; }
export_ckpt "$ck" "$T/kill_blobs" || exit 1
same "$T/ref_blobs" "$T/kill_blobs" "(c) $KILLS kills + resume to $N"
# Interrupted saves leave at most one stray version directory, removed by the next save.
n=$(ls -d "$ck".v* 2>/dev/null | wc -l)
[ "$n" -le 2 ] || fail "(c) $n version directories left: $(ls -d "$ck".v*)"

# (d) A skipped step is not an iteration, so a run whose every step overflows would never
# reach --iters: after 100 skips in a row it stops with an error instead, having warned
# (once at 10, once on reaching the minimum scale) rather than at every step.
"$DM" train --init "$INIT" --net "$NET" --train-db "$T/train_db" --iters "$N" \
  --optimizer momentum --lr 1e4 --fp16 --log-every 1000 >"$T/diverge.log" 2>&1 &&
  fail "(d) a diverging FP16 run ended with status 0"
grep -q "100 steps in a row skipped on overflow at iteration .*: stopping" "$T/diverge.log" ||
  fail "(d) no stop after 100 skipped steps: $(tail -n 3 "$T/diverge.log")"
w=$(grep -c "warning: .* steps in a row skipped" "$T/diverge.log")
[ "$w" -eq 2 ] || fail "(d) $w overflow warnings, not 2"

echo "$fails failures"
[ "$fails" -eq 0 ]

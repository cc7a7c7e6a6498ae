#!/bin/sh
# bench/gpt_precisions.sh: does the default GPT learn the corpus, and do FP16 (dynamic
# loss scaling) and BF16 end where FP32 ends? Trains models/gpt's nets from the same
# initial weights and the same shuffled batches three times (FP32, --fp16, --bf16), each
# run testing on the whole validation DB, then prints each run's final validation loss,
# its ratio to FP32's, a unigram model's loss on the same validation text (the bar to
# clear: character frequencies counted on the training text) and a sample from each
# checkpoint. A training-quality run, not a timing: a loaded machine only makes it slower.
#   bench/gpt_precisions.sh [BUILD_DIR]  (default: build; needs `ninja -C BUILD_DIR`)
#   env: ITERS (default 1500), OUT (default build/gpt_precisions), THREADS (default nproc),
#        PRECISIONS (default "fp32 fp16 bf16"), TEST_ITERS (default 40)
# The learning rate: AdamW 0.003 (weight decay 0.01, clip norm 1), 100 warmup steps, then
# a linear decay to 0 at ITERS (--policy poly --power 1).
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
iters=${ITERS:-1500}
out=${OUT:-build/gpt_precisions}
threads=${THREADS:-$(nproc)}
precisions=${PRECISIONS:-fp32 fp16 bf16}
dm=$build/tools/demitasse
corpus=/usr/share/games/fortunes
[ -x "$dm" ] || { echo "no $dm: ninja -C $build"; exit 1; }
[ -f $corpus/fortunes ] || { echo "no $corpus/fortunes: apt-get install fortunes"; exit 1; }
files=$(sed -n "s|^\([a-z-]*\)\$|$corpus/\1|p" models/transformer/corpus.txt)
mkdir -p "$out"
if [ ! -e "$out/train_lmdb" ]; then
  texts=$(for f in $files; do printf -- '--text %s ' "$f"; done)
  "$dm" make-db $texts --context 128 --out-train "$out/train_lmdb" --out-val "$out/val_lmdb"
fi
# TEST_ITERS 40 test batches of 16: 640 of the corpus's 643 validation windows
test_iters=${TEST_ITERS:-40}
grep -m1 'model name' /proc/cpuinfo | sed 's/.*: /CPU: /'
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown); $iters iterations; $threads threads"
for p in $precisions; do
  case $p in fp32) flag= ;; fp16) flag=--fp16 ;; bf16) flag=--bf16 ;;
    *) echo "unknown precision $p"; exit 1 ;; esac
  run=$out/$p
  rm -rf "$run"
  mkdir -p "$run"
  start=$(date +%s)
  "$dm" train --init models/gpt/gpt_init.pbtxt --net models/gpt/gpt_train.pbtxt \
    --test-net models/gpt/gpt_test.pbtxt --train-db "$out/train_lmdb" \
    --test-db "$out/val_lmdb" --test-iters "$test_iters" --test-every 250 \
    --iters "$iters" --optimizer adamw --lr 0.003 --weight-decay 0.01 --clip-norm 1 \
    --warmup-iter 100 --policy poly --power 1 --max-iter "$iters" --threads "$threads" \
    --log-every 100 --csv "$run/metrics.csv" --checkpoint "$run/checkpoint" \
    --checkpoint-every 500 $flag >"$run/train.log" 2>&1 ||
    { echo "$p: training failed; see $run/train.log"; tail -5 "$run/train.log"; exit 1; }
  echo "$p: trained in $(( $(date +%s) - start )) s"
done
/usr/bin/python3 bench/gpt_precisions_report.py "$out" "$precisions" "$test_iters" $files
for p in $precisions; do
  echo "--- $p sample (generate --prompt 'The ' --temperature 0.8 --top-k 20 --seed 1):"
  "$dm" generate --init models/gpt/gpt_init.pbtxt --init "$out/$p/checkpoint" \
    --net models/gpt/gpt_infer.pbtxt --vocab "$out/train_lmdb/vocab.txt" \
    --prompt "The " --tokens 300 --temperature 0.8 --top-k 20 --seed 1
  echo
done

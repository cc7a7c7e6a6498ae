#!/bin/sh
# bench/lm_precisions.sh: does a language model learn the corpus, and do FP16 (dynamic
# loss scaling) and BF16 end where FP32 ends? Trains models/gpt's nets (MODEL=gpt) or
# models/bert's (MODEL=bert) from the same initial weights and the same shuffled batches
# once per precision, each run testing on the validation DB, then prints each run's
# final validation loss and accuracy (the GPT's next-character accuracy, the BERT's
# masked-character accuracy), the loss's ratio to FP32's, two bars to clear (a unigram
# model's loss, character frequencies counted on the training text, and the accuracy of
# always answering the most frequent character) and, for the GPT, a sample from each
# checkpoint. A training-quality run, not a timing: a loaded machine only makes it slower.
#   bench/lm_precisions.sh [BUILD_DIR]  (default: build; needs `ninja -C BUILD_DIR`)
#   env: MODEL (gpt or bert, default gpt), ITERS (default 1500), OUT (default
#        build/lm_precisions/MODEL), THREADS (default nproc), TEST_ITERS (default 40),
#        PRECISIONS (default "fp32 fp16 bf16"; also fp16-ops: --fp16 with
#        --fp16-ops Gather,MaskedSoftmax,MaskedSoftmaxGradient, the FP16 residual stream
#        of docs/models.md's memory section)
# The learning rate: AdamW 0.003 (weight decay 0.01, clip norm 1), 100 warmup steps, then
# a linear decay to 0 at ITERS (--policy poly --power 1).
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
model=${MODEL:-gpt}
iters=${ITERS:-1500}
out=${OUT:-build/lm_precisions/$model}
threads=${THREADS:-$(nproc)}
precisions=${PRECISIONS:-fp32 fp16 bf16}
dm=$build/tools/demitasse
corpus=/usr/share/games/fortunes
case $model in gpt | bert) ;; *) echo "MODEL is gpt or bert, not $model"; exit 1 ;; esac
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
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown); $model; $iters iterations; $threads threads"
nets=models/$model/$model
for p in $precisions; do
  case $p in fp32) flags= ;; fp16) flags=--fp16 ;; bf16) flags=--bf16 ;;
    fp16-ops) flags="--fp16 --fp16-ops Gather,MaskedSoftmax,MaskedSoftmaxGradient" ;;
    *) echo "unknown precision $p"; exit 1 ;; esac
  run=$out/$p
  rm -rf "$run"
  mkdir -p "$run"
  start=$(date +%s)
  "$dm" train --init "${nets}_init.pbtxt" --net "${nets}_train.pbtxt" \
    --test-net "${nets}_test.pbtxt" --train-db "$out/train_lmdb" \
    --test-db "$out/val_lmdb" --test-iters "$test_iters" --test-every 250 \
    --iters "$iters" --optimizer adamw --lr 0.003 --weight-decay 0.01 --clip-norm 1 \
    --warmup-iter 100 --policy poly --power 1 --max-iter "$iters" --threads "$threads" \
    --log-every 100 --csv "$run/metrics.csv" --checkpoint "$run/checkpoint" \
    --checkpoint-every 500 $flags >"$run/train.log" 2>&1 ||
    { echo "$p: training failed; see $run/train.log"; tail -5 "$run/train.log"; exit 1; }
  echo "$p: trained in $(( $(date +%s) - start )) s"
done
/usr/bin/python3 bench/lm_precisions_report.py "$out" "$precisions" "$test_iters" $files
[ "$model" = gpt ] || exit 0
for p in $precisions; do
  echo "--- $p sample (generate --prompt 'The ' --temperature 0.8 --top-k 20 --seed 1):"
  "$dm" generate --init models/gpt/gpt_init.pbtxt --init "$out/$p/checkpoint" \
    --net models/gpt/gpt_infer.pbtxt --vocab "$out/train_lmdb/vocab.txt" \
    --prompt "The " --tokens 300 --temperature 0.8 --top-k 20 --seed 1
  echo
done

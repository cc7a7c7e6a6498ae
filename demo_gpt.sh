#!/bin/sh
# demo_gpt.sh: the language-model job. Sets up, builds, turns the Debian fortunes files
# that models/transformer/corpus.txt lists (1.64 M characters of real English, installed
# by setup.sh) into token LMDBs with `make-db --text` (characters, context 128, the last
# 5% for validation),
# trains models/gpt's GPT (4 layers, width 256) with AdamW, testing on the validation
# set as it goes (loss and perplexity in the CSV), then prints a sample with
# `demitasse generate` from the checkpoint. Extra arguments go to `demitasse train`
# (e.g. --fp16 or --bf16, --iters N). Each precision writes to its own folder
# (build/gpt/fp32, fp16 or bf16); the last lines say where the CSV, the plot and the
# checkpoint went. DM_DEMO_BIN (a built demitasse: no setup, no build) and DM_DEMO_OUT
# (instead of build/gpt) as in demo.sh.
set -eu
cd "$(dirname "$0")"
. tools/demo_lib.sh
demo_binary
out=${DM_DEMO_OUT:-build/gpt}
texts=$(sed -n 's|^\([a-z-]*\)$|--text /usr/share/games/fortunes/\1|p' models/transformer/corpus.txt)
mkdir -p "$out"
if [ ! -e "$out/train_lmdb" ]; then
  "$dm" make-db $texts --context 128 --out-train "$out/train_lmdb" --out-val "$out/val_lmdb"
fi
demo_precision "$@"
run=$out/$precision
mkdir -p "$run"
rm -rf "$run/checkpoint" "$run"/checkpoint.v*
status=0
"$dm" train --init models/gpt/gpt_init.pbtxt --net models/gpt/gpt_train.pbtxt \
  --test-net models/gpt/gpt_test.pbtxt --train-db "$out/train_lmdb" --test-db "$out/val_lmdb" \
  --test-iters 2 --test-every 100 --iters 600 --optimizer adamw --lr 0.003 --weight-decay 0.01 \
  --clip-norm 1 --csv "$run/metrics.csv" --checkpoint "$run/checkpoint" --checkpoint-every 100 \
  "$@" || status=$?
if [ "$status" -ne 0 ]; then
  echo "demo ($precision): training failed (exit $status); see the error above" >&2
  exit $status
fi
echo "demo ($precision): a sample (generate --temperature 0.8 --top-k 20):"
"$dm" generate --init models/gpt/gpt_init.pbtxt --init "$run/checkpoint" \
  --net models/gpt/gpt_infer.pbtxt --vocab "$out/train_lmdb/vocab.txt" \
  --prompt "The " --tokens 200 --temperature 0.8 --top-k 20 --seed 1
echo "demo ($precision): metrics CSV  $run/metrics.csv"
echo "demo ($precision): plot         $run/metrics.svg"
echo "demo ($precision): checkpoint   $run/checkpoint"

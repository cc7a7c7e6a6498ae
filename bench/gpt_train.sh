#!/bin/sh
# bench/gpt_train.sh: GPT training throughput on the CPU (tokens/s), `demitasse train` of
# models/gpt's nets beside PyTorch (bench/torch_gpt_train.py: the same model, config,
# batch, AdamW and thread count), rounds interleaved.
#   bench/gpt_train.sh [BUILD_DIR]      (default: build; needs `ninja -C BUILD_DIR`)
#   env: ITERS (default 24), WARMUP (default 4, untimed; must divide ITERS), ROUNDS
#        (default 3), THREADS (default nproc)
# Ours reads an LMDB `demitasse make-db --text` writes from Debian's fortunes files (the
# corpus the nets' vocabulary is from); its rate comes from the progress lines (one per
# WARMUP iterations, in the metrics CSV), leaving out the first interval. PyTorch trains
# on random windows.
# Prints each round's rates and the median ratio ours/PyTorch (higher is better for us).
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
iters=${ITERS:-24}
warmup=${WARMUP:-4}
rounds=${ROUNDS:-3}
threads=${THREADS:-$(nproc)}
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
py=/usr/bin/python3
dm=$build/tools/demitasse
net=models/gpt/gpt_train.pbtxt
corpus=/usr/share/games/fortunes
[ $((iters % warmup)) -eq 0 ] && [ "$iters" -gt "$warmup" ] ||
  { echo "ITERS ($iters) must be a multiple of WARMUP ($warmup) and larger"; exit 1; }
[ -f $corpus/fortunes ] || { echo "no $corpus/fortunes: apt-get install fortunes"; exit 1; }
$py -c 'import torch' 2>/dev/null || { echo "PyTorch missing: apt-get install python3-torch"; exit 1; }
ninja -C "$build" tools/demitasse >/dev/null
# The config from the net's header line (the make_gpt.py command that wrote it).
cmd=$(grep -m1 'make_gpt.py --layers' $net)
arg() { printf '%s\n' "$cmd" | sed -n "s/.*--$1 \([0-9]*\).*/\1/p"; }
L=$(arg layers) D=$(arg width) H=$(arg heads) T=$(arg context) V=$(arg vocab) N=$(arg batch)
[ -n "$L" ] && [ -n "$D" ] && [ -n "$H" ] && [ -n "$T" ] && [ -n "$V" ] && [ -n "$N" ] || { echo "cannot read the config of $net"; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dm_gpt_bench_XXXXXX")
trap 'rm -rf "$tmp"' EXIT
texts=$(sed -n "s|^\([a-z-]*\)\$|--text $corpus/\1|p" models/transformer/corpus.txt)
"$dm" make-db $texts --context "$T" --out-train "$tmp/train" --out-val "$tmp/val" >/dev/null
grep -m1 'model name' /proc/cpuinfo | sed 's/.*: /CPU: /'
echo "GPT: $L layers, width $D, $H heads, context $T, vocab $V, batch $N; AdamW; $threads threads"
printf "%-6s %14s %14s %8s\n" round "ours tok/s" "torch tok/s" ratio
for r in $(seq "$rounds"); do
  "$dm" train --init models/gpt/gpt_init.pbtxt --net $net --train-db "$tmp/train" \
    --iters "$iters" --log-every "$warmup" --threads "$threads" --optimizer adamw \
    --lr 0.001 --weight-decay 0.01 --csv "$tmp/ours.csv" >"$tmp/ours.log"
  rm -f "$tmp/ours.svg"
  # CSV rows: iter, ..., images_per_s (column 6, records/s since the previous row)
  ours=$(awk -F, -v w="$warmup" -v b="$N" -v t="$T" '
    NR > 1 && $1 > w && $6 > 0 { s += w * b / $6; n += w * b * t }
    END { if (s > 0) printf "%.1f", n / s }' "$tmp/ours.csv")
  rm -f "$tmp/ours.csv"
  [ -n "$ours" ] || { echo "no progress lines from demitasse train:"; cat "$tmp/ours.log"; exit 1; }
  torch=$($py bench/torch_gpt_train.py "$L" "$D" "$H" "$T" "$V" "$N" "$iters" "$threads" \
    "$warmup" | awk '{print $3}')
  printf "%-6d %14.1f %14.1f %8.2f\n" "$r" "$ours" "$torch" "$(awk -v o="$ours" -v t="$torch" 'BEGIN { print o / t }')"
done

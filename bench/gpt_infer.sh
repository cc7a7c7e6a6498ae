#!/bin/sh
# bench/gpt_infer.sh: GPT inference latency on the CPU: one forward of models/gpt's
# gpt_infer.pbtxt (FP32, as `demitasse run` builds it; bench/infer_net with --tokens)
# beside PyTorch eager (bench/torch_gpt_infer.py: the same model, config and threads,
# torch.inference_mode), at batch 1 and at the training batch, full context, random
# token ids; rounds interleaved.
#   bench/gpt_infer.sh [BUILD_DIR]      (default: build; needs `ninja -C BUILD_DIR`)
#   env: ITERS (default 20 timed forwards), WARMUP (default 3), ROUNDS (default 3),
#        THREADS (default nproc), BATCHES (default "1 N", N the nets' batch)
# Prints each round's median milliseconds per forward and the ratio ours/PyTorch
# (lower is better for us), then the median ratio per batch.
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
iters=${ITERS:-20}
warmup=${WARMUP:-3}
rounds=${ROUNDS:-3}
threads=${THREADS:-$(nproc)}
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
py=/usr/bin/python3
net=models/gpt/gpt_infer.pbtxt
$py -c 'import torch' 2>/dev/null || { echo "PyTorch missing: apt-get install python3-torch"; exit 1; }
ninja -C "$build" bench/infer_net >/dev/null
# The config from the net's header line (the make_gpt.py command that wrote it).
cmd=$(grep -m1 'make_gpt.py --layers' $net)
arg() { printf '%s\n' "$cmd" | sed -n "s/.*--$1 \([0-9]*\).*/\1/p"; }
L=$(arg layers) D=$(arg width) H=$(arg heads) T=$(arg context) V=$(arg vocab) N=$(arg batch)
[ -n "$L" ] && [ -n "$D" ] && [ -n "$H" ] && [ -n "$T" ] && [ -n "$V" ] && [ -n "$N" ] ||
  { echo "cannot read the config of $net"; exit 1; }
batches=${BATCHES:-1 $N}
grep -m1 'model name' /proc/cpuinfo | sed 's/.*: /CPU: /'
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "GPT: $L layers, width $D, $H heads, context $T, vocab $V; FP32; $threads threads"
printf "%-6s %6s %12s %12s %8s\n" round batch "ours ms" "torch ms" ratio
ratios=$(mktemp)
trap 'rm -f "$ratios"' EXIT
for r in $(seq "$rounds"); do
  for b in $batches; do
    ours=$("$build/bench/infer_net" --net $net --init models/gpt/gpt_init.pbtxt \
      --shape "$b,$T" --input tokens --tokens "$V" --iters "$iters" --warmup "$warmup" \
      --threads "$threads" | awk '{print $3}')
    torch=$($py bench/torch_gpt_infer.py "$L" "$D" "$H" "$T" "$V" "$b" "$iters" "$threads" \
      "$warmup" | awk '{print $3}')
    ratio=$(awk -v o="$ours" -v t="$torch" 'BEGIN { printf "%.3f", o / t }')
    echo "$b $ratio" >>"$ratios"
    printf "%-6d %6d %12.2f %12.2f %8s\n" "$r" "$b" "$ours" "$torch" "$ratio"
  done
done
for b in $batches; do
  awk -v b="$b" '$1 == b { print $2 }' "$ratios" | sort -n |
    awk -v b="$b" '{ v[NR] = $1 } END { printf "batch %d: median ratio ours/torch %.3f over %d rounds\n", b, NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2, NR }'
done

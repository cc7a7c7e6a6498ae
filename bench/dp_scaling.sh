#!/bin/sh
# bench/dp_scaling.sh: data-parallel training on the CPU, 1 rank against 2 (mpirun),
# LeNet/MNIST at the same global batch: 1 rank at batch 64 with THREADS threads, 2 ranks
# at batch 32 with THREADS/2 threads each (the same cores). Rounds interleaved; prints
# images/s per side (medians), their ratio (the efficiency of splitting the same cores
# across ranks: below 1 is the all-reduce's and the split's cost) and the bytes each
# rank all-reduces per step.
#   bench/dp_scaling.sh [BUILD_DIR]   env: ROUNDS (default 3), ITERS (default 300),
#                                     THREADS (default nproc)
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${ROUNDS:-3} iters=${ITERS:-300} threads=${THREADS:-$(nproc)}
half=$((threads / 2 > 0 ? threads / 2 : 1))
dm=$build/tools/demitasse
command -v mpirun >/dev/null || { echo "no mpirun: apt-get install openmpi-bin libopenmpi-dev"; exit 1; }
ninja -C "$build" tools/demitasse >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
m=models/mnist
"$dm" make-db --images $m/data/t10k-images-idx3-ubyte.gz --labels $m/data/t10k-labels-idx1-ubyte.gz \
  --train 8000 --out-train "$tmp/db" --out-val "$tmp/val" >/dev/null
sed 's/\(name: "batch_size" i:\) 64/\1 32/' $m/lenet_train.pbtxt >"$tmp/net32.pbtxt"
rate() { # images/s from train's "trained N iterations in S s" and the global batch 64
  awk -v b=64 '/^trained/ {print b * $2 / $5}' "$1"
}
median() { sort -n "$1" | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
grep -m1 'model name' /proc/cpuinfo | sed 's/.*: /CPU: /'
for r in $(seq "$rounds"); do
  "$dm" train --init $m/lenet_init.pbtxt --net $m/lenet_train.pbtxt --train-db "$tmp/db" \
    --iters "$iters" --threads "$threads" --log-every 100000 >"$tmp/one.log" 2>&1
  rate "$tmp/one.log" >>"$tmp/one"
  sh tests/dist/mpirun.sh 2 "$dm" train --init $m/lenet_init.pbtxt --net "$tmp/net32.pbtxt" \
    --train-db "$tmp/db" --iters "$iters" --threads "$half" --log-every 100000 --data-parallel \
    >"$tmp/two.log" 2>&1
  rate "$tmp/two.log" >>"$tmp/two"
done
# the parameters' element count: the products of the init net's fill shapes
params=$(/usr/bin/python3 -c '
import math, re, sys
text = open(sys.argv[1]).read()
print(sum(math.prod(int(v) for v in re.findall(r"\d+", m.group(1) or m.group(2)))
          for m in re.finditer(r"name: \"shape\" ints: (?:\[([^\]]*)\]|(\d+))", text)))' $m/lenet_init.pbtxt)
o=$(median "$tmp/one") t=$(median "$tmp/two")
printf "threads %d; %d rounds of %d iterations, interleaved; global batch 64\n" "$threads" "$rounds" "$iters"
printf "1 rank  (batch 64, %d threads):      %8.0f images/s\n" "$threads" "$o"
printf "2 ranks (batch 32 each, %d thread(s)): %8.0f images/s   2 ranks / 1 rank %.2f\n" "$half" "$t" \
  "$(echo "$t $o" | awk '{print $1 / $2}')"
[ "$params" -gt 0 ] && printf "all-reduced per step and rank: %d FP32 gradients, %.2f MB\n" "$params" \
  "$(echo "$params" | awk '{print $1 * 4 / 1e6}')"

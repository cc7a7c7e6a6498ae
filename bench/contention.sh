#!/bin/sh
# bench/contention.sh: CPU inference on a shared machine. Each side runs a torchvision
# model quiet and then with BUSY other processes spinning beside it (each a shell loop
# that never sleeps, as a compile or a browser tab would be), same thread count on every
# side; the figure is each side's slowdown, loaded time / quiet time. On C cores with
# THREADS = C and BUSY = C, a fair scheduler gives the run half the machine: 2x.
#   bench/contention.sh [BUILD_DIR]     (default: build)
#   env: MODEL (default mobilenet_v2, a torchvision.models name), BATCH (default 1),
#        BUSY (default 2), ROUNDS (default 3), ITERS (default 30), WARMUP (default 3),
#        THREADS (default nproc), SIDES (default "ours ort torch"),
#        OURS_ENV (extra environment for our side only, e.g. OMP_WAIT_POLICY=passive)
# Every round runs each side quiet and loaded, each in a fresh process, the sides' order
# turning; the table gives the medians over the rounds of each process's median.
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
model=${MODEL:-mobilenet_v2} batch=${BATCH:-1} busy=${BUSY:-2} rounds=${ROUNDS:-3}
iters=${ITERS:-30} warmup=${WARMUP:-3} threads=${THREADS:-$(nproc)}
sides=${SIDES:-ours ort torch}
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
sys_py=/usr/bin/python3
py=bench/.venv/bin/python
cache=bench/.cache
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dm_contention_XXXXXX")
pids=
stop_busy() {
  for p in $pids; do kill "$p" 2>/dev/null || true; done
  for p in $pids; do wait "$p" 2>/dev/null || true; done
  pids=
}
trap 'stop_busy; rm -rf "$tmp"' EXIT
mkdir -p $cache
sh tests/onnx/setup_python.sh "$(pwd)"
ninja -C "$build" bench/infer_net tools/demitasse >$tmp/ninja.log 2>&1 || { cat $tmp/ninja.log; exit 1; }
onnx=$cache/${model}_$($sys_py -c 'import torch; print(torch.__version__)').onnx
[ -f "$onnx" ] || $py bench/cpu_infer.py export "$model" "$onnx" >$tmp/export.log 2>&1 ||
  { cat $tmp/export.log; exit 1; }
# A dynamic-batch export whose shape arithmetic reads the batch is imported at BATCH.
"$build/tools/demitasse" import-onnx "$onnx" -o $tmp/net >$tmp/import.log 2>&1 ||
  "$build/tools/demitasse" import-onnx "$onnx" -o $tmp/net --dim N="$batch" >$tmp/import.log 2>&1 ||
  { cat $tmp/import.log; exit 1; }

one() { # SIDE LOAD: one fresh process; appends "side load ms"
  case $1 in
  ours) out=$(env ${OURS_ENV:-} "$build/bench/infer_net" --net $tmp/net/predict_net.pb \
                --init $tmp/net/init_net.pb --shape "$batch,3,224,224" --threads "$threads" \
                --iters "$iters" --warmup "$warmup" </dev/null) ;;
  ort) out=$($py bench/cpu_infer.py ort "$onnx" "$batch" "$threads" "$warmup" "$iters" </dev/null) ;;
  torch) out=$($sys_py bench/cpu_infer.py torch "$model" "$batch" "$threads" "$warmup" "$iters" </dev/null) ;;
  esac
  ms=$(echo "$out" | awk '{ for (i = 1; i < NF; i++) if ($i == "median_ms") print $(i + 1) }')
  [ -n "$ms" ] || { echo "no median from $1: $out"; exit 1; }
  echo "$1 $2 $ms" >>$tmp/runs.txt
}

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
echo "CPU: ${cpu:-unknown} ($(nproc) cores); $model batch $batch, THREADS=$threads, BUSY=$busy," \
  "ROUNDS=$rounds ITERS=$iters${OURS_ENV:+, ours with $OURS_ENV}"
r=1
while [ $r -le "$rounds" ]; do
  set -- $sides
  [ $((r % 2)) -eq 0 ] && { rev=; for s in $sides; do rev="$s $rev"; done; set -- $rev; }
  for side in "$@"; do
    one $side quiet
    i=0
    while [ $i -lt "$busy" ]; do
      sh -c 'while :; do :; done' &
      pids="$pids $!"
      i=$((i + 1))
    done
    sleep 0.5 # the spinners have the cores before the run starts
    one $side busy
    stop_busy
  done
  echo "round $r of $rounds done"
  r=$((r + 1))
done
med() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
printf "%-6s %10s %10s %9s\n" side "quiet ms" "busy ms" slowdown
for side in $sides; do
  q=$(awk -v s=$side '$1 == s && $2 == "quiet" { print $3 }' $tmp/runs.txt | med)
  b=$(awk -v s=$side '$1 == s && $2 == "busy" { print $3 }' $tmp/runs.txt | med)
  awk -v s=$side -v q=$q -v b=$b 'BEGIN { printf "%-6s %10.3f %10.3f %9.2f\n", s, q, b, b / q }'
done
echo "slowdown: busy / quiet, medians over the rounds; the fair share is $(awk -v t=$threads -v b=$busy -v c=$(nproc) 'BEGIN { x = (t + b) / c; printf "%.2f", x < 1 ? 1 : x }')x."

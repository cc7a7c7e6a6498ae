#!/bin/sh
# run_device_checks.sh: the one script to run on a GPU machine (fresh checkout, no
# network): configures build-gpu with CUDA required (or reuses it), builds, runs the
# 'gpu' suite, then the whole suite, then the GPU benchmark at sizes that keep the whole
# run under about 8 minutes. Everything lands under OUTDIR; a summary is printed last.
# usage (from the repo root): tests/gpu/run_device_checks.sh OUTDIR
set -u
out=${1:?usage: tests/gpu/run_device_checks.sh OUTDIR}
mkdir -p "$out" || exit 1
bd=build-gpu
t0=$(date +%s)
step() { printf '== %s (%ss)\n' "$1" "$(( $(date +%s) - t0 ))"; }
nvidia-smi > "$out/nvidia-smi.txt" 2>&1 || echo "nvidia-smi failed" >> "$out/nvidia-smi.txt"
step "configure"
if [ -f "$bd/build.ninja" ]; then
  meson setup --reconfigure "$bd" -Dcuda=enabled --buildtype=release > "$out/setup.log" 2>&1
else
  meson setup "$bd" -Dcuda=enabled --buildtype=release > "$out/setup.log" 2>&1
fi || { tail -n 30 "$out/setup.log"; echo "SUMMARY: meson setup failed"; exit 1; }
step "build"
ninja -C "$bd" > "$out/build.log" 2>&1 || { tail -n 40 "$out/build.log"; echo "SUMMARY: build failed"; exit 1; }
"$bd/tools/demitasse" info > "$out/demitasse-info.txt" 2>&1
step "gpu suite"
timeout 240 meson test -C "$bd" --suite gpu --print-errorlogs > "$out/test-gpu.txt" 2>&1
gpu_rc=$?
cp "$bd/meson-logs/testlog.txt" "$out/testlog-gpu.txt" 2>/dev/null
step "whole suite"
timeout 200 meson test -C "$bd" --num-processes 16 > "$out/test-all.txt" 2>&1
all_rc=$?
cp "$bd/meson-logs/testlog.txt" "$out/testlog-all.txt" 2>/dev/null
step "benchmark"
# batch 64 and 128 only, 10 steps: ResNet-50 start-up dominates a longer list.
BATCHES="${BATCHES:-64 128}" STEPS="${STEPS:-10}" WARMUP="${WARMUP:-3}" \
  timeout 180 bench/gpu_resnet50.sh "$bd" > "$out/bench.txt" 2>&1
bench_rc=$?
step "done"
echo "SUMMARY ($(( $(date +%s) - t0 ))s; files in $out)"
grep -m1 '^GPUs:' "$out/demitasse-info.txt"
echo "gpu suite (rc $gpu_rc):"; grep -E '^ *[0-9]+/[0-9]+ |^(Ok|Fail|Skipped|Timeout|Expected)' "$out/test-gpu.txt"
grep -E '^(ok|FAIL|SKIP)|passed,' "$out/testlog-gpu.txt" 2>/dev/null | grep -v '^ok' | head -40
echo "whole suite (rc $all_rc):"; grep -E '^(Ok|Fail|Skipped|Timeout|Expected)' "$out/test-all.txt"
grep -E 'FAIL|TIMEOUT' "$out/test-all.txt" | head -20
echo "benchmark (rc $bench_rc):"; tail -n 15 "$out/bench.txt"

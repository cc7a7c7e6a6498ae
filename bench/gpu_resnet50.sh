#!/bin/sh
# gpu_resnet50.sh: ResNet-50 training throughput on one GPU, FP32 and mixed precision,
# batch 64, 128, 256 (BATCHES), with the peak GPU memory of each run: gpu_train_step.c
# beside bench/gpu_resnet50_torch.py (autocast + GradScaler, channels_last) where
# PyTorch sees the GPU. Peak memory is the most nvidia-smi reports used on GPU 0 during
# a run (sampled every 100 ms; both sides keep pools, so this is reserved memory).
# Without a GPU it says so and exits 0 with no numbers.
# usage: bench/gpu_resnet50.sh [BUILD_DIR]   (STEPS=20 WARMUP=5 BATCHES="64 128 256";
#        MODEL=resnet50_nhwc for ours in NHWC, as the PyTorch side's channels_last;
#        PRECS="fp16" for mixed precision only)
set -u
bd=${1:-build}
steps=${STEPS:-20} warmup=${WARMUP:-5} batches=${BATCHES:-64 128 256}
here=$(dirname "$0")
ninja -C "$bd" bench/gpu_train_step > /dev/null || exit 1
if ! command -v nvidia-smi > /dev/null || ! nvidia-smi -L > /dev/null 2>&1; then
  echo "gpu_resnet50: no GPU here (nvidia-smi finds none); no numbers"; exit 0
fi
# the first Python whose torch sees a GPU: $PYTHON, the GPU image's venv, then the system's
torch_ok=False py=
for cand in ${PYTHON:-} /opt/torch/.venv/bin/python3 python3 /usr/bin/python3; do
  command -v "$cand" > /dev/null 2>&1 || continue
  torch_ok=$("$cand" -c 'import torch; print(torch.cuda.is_available())' 2>/dev/null)
  py=$cand
  [ "$torch_ok" = True ] && break
done
[ "$torch_ok" = True ] || echo "# PyTorch with CUDA not available here: ours only"
# Runs a command while sampling GPU memory; prints the command's last line and the peak MiB.
measure() {
  log=$(mktemp)
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 -lms 100 > "$log" 2>/dev/null &
  smi=$!
  line=$("$@" 2>&1 | tail -n 1)
  kill "$smi" 2>/dev/null; wait "$smi" 2>/dev/null
  peak=$(sort -n "$log" | tail -n 1); rm -f "$log"
  echo "$line ${peak:-?}"
}
printf '%-9s %5s %-5s %12s %12s %10s %10s %8s\n' model batch prec ours_img/s torch_img/s ours_MiB torch_MiB ours/torch
for b in $batches; do
  for p in ${PRECS:-fp32 fp16}; do
    ours=$(measure "$bd/bench/gpu_train_step" "${MODEL:-resnet50}" "$b" "$p" "$steps" "$warmup" "$here/../models")
    case "$ours" in SKIP*) echo "gpu_resnet50: $ours; no numbers"; exit 0 ;; esac
    o_ips=$(echo "$ours" | awk 'NF == 7 { print $4 }') o_mem=$(echo "$ours" | awk '{ print $NF }')
    t_ips=- t_mem=- ratio=-
    if [ "$torch_ok" = True ]; then
      th=$(measure $py "$here/gpu_resnet50_torch.py" "$b" "$p" "$steps" "$warmup")
      t_ips=$(echo "$th" | awk 'NF == 6 { print $4 }') t_mem=$(echo "$th" | awk '{ print $NF }')
      ratio=$(awk -v a="${o_ips:-0}" -v b="${t_ips:-0}" 'BEGIN { print (b > 0 ? sprintf("%.2f", a / b) : "-") }')
    fi
    [ -n "$o_ips" ] || { echo "# ours failed: $ours"; o_ips=FAIL; }
    printf '%-9s %5s %-5s %12s %12s %10s %10s %8s\n' "${MODEL:-resnet50}" "$b" "$p" "$o_ips" "${t_ips:-FAIL}" "$o_mem" "$t_mem" "$ratio"
  done
done

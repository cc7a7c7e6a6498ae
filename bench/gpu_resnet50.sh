#!/bin/sh
# gpu_resnet50.sh: ResNet-50 training throughput on one GPU at batch 64, 128, 256
# (BATCHES), with the peak GPU memory of each run. One run measures, per batch:
#   ours FP32          resnet50 fp32         (the NCHW model as written)
#   ours mixed NHWC    resnet50_nhwc fp16    (the hand-written NHWC model)
#   ours mixed layout  resnet50_layout fp16  (the NCHW model made NHWC by the layout pass,
#                                             conv1's 3 channels padded to 8, as `train
#                                             --device cuda --fp16` does by default)
#   PyTorch FP32 and AMP (bench/gpu_resnet50_torch.py: autocast + GradScaler,
#                         channels_last), where PyTorch sees the GPU
# all by gpu_train_step.c. ROUNDS rounds (default 1) run interleaved (round 1 of every
# batch and variant, then round 2, ...), so a slow spell of the machine hits all of them;
# each cell is the best round's images/s. The table gives images/s, the peak MiB, ours
# against PyTorch at the same precision (ours/torch) and mixed against FP32 (x_fp32).
# Peak memory is the most nvidia-smi reports used on GPU 0 during a run (sampled every
# 100 ms; both sides keep pools, so this is reserved memory). PROFILE=1 then prints the
# per-op-type profile of the layout variant at PROFILE_BATCH (default 128) as '#' lines
# (each op waited for: DM_BENCH_PROFILE in gpu_train_step.c).
# Without a GPU (or without CUDA in the build) it says so on stderr and exits 77.
# usage: bench/gpu_resnet50.sh [BUILD_DIR]   (STEPS=20 WARMUP=5 ROUNDS=1
#        BATCHES="64 128 256"; VARIANTS="resnet50:fp32 resnet50_nhwc:fp16
#        resnet50_layout:fp16" to choose ours; or MODEL=M PRECS="fp32 fp16" to run
#        model M at those precisions; TORCH=0 for ours only)
set -u
bd=${1:-build}
steps=${STEPS:-20} warmup=${WARMUP:-5} batches=${BATCHES:-64 128 256} rounds=${ROUNDS:-1}
here=$(dirname "$0")
if [ -n "${MODEL:-}${PRECS:-}" ]; then
  variants=
  for p in ${PRECS:-fp32 fp16}; do variants="$variants ${MODEL:-resnet50}:$p"; done
else
  variants=${VARIANTS:-resnet50:fp32 resnet50_nhwc:fp16 resnet50_layout:fp16}
fi
case "$rounds" in '' | *[!0-9]* | 0) echo "gpu_resnet50: ROUNDS must be a positive whole number" >&2; exit 2 ;; esac
ninja -C "$bd" bench/gpu_train_step > /dev/null || { echo "gpu_resnet50: building $bd/bench/gpu_train_step failed" >&2; exit 1; }
if ! command -v nvidia-smi > /dev/null || ! nvidia-smi -L > /dev/null 2>&1; then
  echo "gpu_resnet50: no GPU here (nvidia-smi finds none); no numbers" >&2; exit 77
fi
# the first Python whose torch sees a GPU: $PYTHON, the GPU image's venv, then the system's
torch_ok=False py=
if [ "${TORCH:-1}" != 0 ]; then
  for cand in ${PYTHON:-} /opt/torch/.venv/bin/python3 python3 /usr/bin/python3; do
    command -v "$cand" > /dev/null 2>&1 || continue
    torch_ok=$("$cand" -c 'import torch; print(torch.cuda.is_available())' 2>/dev/null)
    py=$cand
    [ "$torch_ok" = True ] && break
  done
fi
[ "$torch_ok" = True ] || echo "# PyTorch with CUDA not used here: ours only"
# the precisions the variants use, for PyTorch's side
precs=
for v in $variants; do
  case " $precs " in *" ${v#*:} "*) ;; *) precs="$precs ${v#*:}" ;; esac
done
res=$(mktemp -d) || exit 1
trap 'rm -rf "$res"' EXIT
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
# Keeps the best images/s (and the largest peak) of a cell over the rounds: file $res/KEY
# holds "img/s MiB"; a failed run leaves the cell as it was (FAIL if it never ran).
record() { # KEY IMG_PER_S MIB
  old_i=0 old_m=0
  [ -f "$res/$1" ] && read -r old_i old_m < "$res/$1"
  [ "$old_i" = FAIL ] && old_i=0
  [ "$old_m" = - ] && old_m=0
  awk -v oi="$old_i" -v om="$old_m" -v i="${2:-}" -v m="${3:-}" 'BEGIN {
    ok = i != ""  # a failed run: its memory not counted
    bi = (ok && i + 0 > oi + 0) ? i : oi; bm = (ok && m ~ /^[0-9]+$/ && m + 0 > om + 0) ? m : om
    printf "%s %s\n", (bi + 0 > 0 ? bi : "FAIL"), (bm + 0 > 0 ? bm : "-") }' > "$res/$1"
}
r=1
while [ "$r" -le "$rounds" ]; do
  for b in $batches; do
    for v in $variants; do
      m=${v%:*} p=${v#*:}
      ours=$(measure "$bd/bench/gpu_train_step" "$m" "$b" "$p" "$steps" "$warmup" "$here/../models")
      case "$ours" in SKIP*) echo "gpu_resnet50: $ours; no numbers" >&2; exit 77 ;; esac
      ips=$(echo "$ours" | awk 'NF == 7 { print $4 }')
      [ -n "$ips" ] || echo "# ours $m $p batch $b failed (round $r): $ours"
      record "ours_${m}_${p}_$b" "$ips" "$(echo "$ours" | awk '{ print $NF }')"
    done
    if [ "$torch_ok" = True ]; then
      for p in $precs; do
        th=$(measure "$py" "$here/gpu_resnet50_torch.py" "$b" "$p" "$steps" "$warmup")
        ips=$(echo "$th" | awk 'NF == 6 { print $4 }')
        [ -n "$ips" ] || echo "# torch $p batch $b failed (round $r): $th"
        record "torch_${p}_$b" "$ips" "$(echo "$th" | awk '{ print $NF }')"
      done
    fi
  done
  r=$((r + 1))
done
# ratio A B: A / B to two places, or - when either is not a number
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { print ((a + 0 > 0 && b + 0 > 0) ? sprintf("%.2f", a / b) : "-") }'; }
printf '%-16s %5s %-5s %10s %8s %11s %7s\n' model batch prec img/s MiB ours/torch x_fp32
for b in $batches; do
  read -r f32 _ 2>/dev/null < "$res/ours_resnet50_fp32_$b" || f32=-
  for v in $variants; do
    m=${v%:*} p=${v#*:}
    read -r ips mib < "$res/ours_${m}_${p}_$b"
    t=-
    [ -f "$res/torch_${p}_$b" ] && read -r t _ < "$res/torch_${p}_$b"
    x=-
    [ "$p" = fp16 ] && x=$(ratio "$ips" "$f32")
    printf '%-16s %5s %-5s %10s %8s %11s %7s\n' "$m" "$b" "$p" "$ips" "$mib" "$(ratio "$ips" "$t")" "$x"
  done
  for p in $precs; do
    [ -f "$res/torch_${p}_$b" ] || continue
    read -r ips mib < "$res/torch_${p}_$b"
    x=-
    if [ "$p" = fp16 ] && [ -f "$res/torch_fp32_$b" ]; then
      read -r t32 _ < "$res/torch_fp32_$b"
      x=$(ratio "$ips" "$t32")
    fi
    printf '%-16s %5s %-5s %10s %8s %11s %7s\n' "torch" "$b" "$p" "$ips" "$mib" - "$x"
  done
done
if [ "${PROFILE:-0}" = 1 ]; then
  echo "# per-op profile: resnet50_layout fp16, batch ${PROFILE_BATCH:-128}"
  DM_BENCH_PROFILE=1 "$bd/bench/gpu_train_step" resnet50_layout "${PROFILE_BATCH:-128}" fp16 \
    5 2 "$here/../models" 2>&1
fi

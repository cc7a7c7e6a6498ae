#!/bin/sh
# bench/cpu_infer.sh: CPU inference of ResNet-50, SqueezeNet and LeNet at batch 1 and 8,
# Demitasse beside ONNX Runtime and PyTorch, same thread count on every side.
#   bench/cpu_infer.sh [BUILD_DIR]        (default: build)
#   env: ROUNDS (default 5), THREADS (default nproc), ITERS (timed runs per process)
#        and WARMUP (untimed runs before them) for every model, by default per model:
#        ResNet-50 10 and 2, SqueezeNet 50 and 5, LeNet 500 and 50 (LeNet runs in a
#        tenth of a millisecond, where a few runs measure only the machine's noise);
#        MODELS (default "resnet50 squeezenet lenet"; any torchvision.models name too,
#        e.g. mobilenet_v2 efficientnet_b0: ours then runs the same ONNX export through
#        `demitasse import-onnx`, 20 timed runs after 3; a model whose shape arithmetic
#        reads the dynamic batch, such as ShuffleNet's channel shuffle, is imported once
#        per batch with `--dim N=B`, and its rows say so), BATCHES (default "1 8")
# Each round runs every side once per model and batch, each in a fresh process (the
# order of the sides turns every round): warm-up runs, then ITERS timed runs, their
# median. The table gives, per side, the median over the rounds in ms per image, and the
# ratios ours/ORT and ours/PyTorch (below 1: we are faster).
#   ours:     bench/infer_net (<demitasse.h> only): the inference net as `demitasse run`
#             builds it (FP32, BN folded into Conv), dm_set_num_threads(THREADS)
#   ORT:      onnxruntime from PyPI in bench/.venv, the torch models exported to ONNX
#             (bench/.cache/), intra_op_num_threads THREADS, inter_op_num_threads 1
#   PyTorch:  Debian's python3-torch, eager, inference_mode, torch.set_num_threads(THREADS)
# The models: ResNet-50 from models/resnet50 (models/resnet50/make_infer.py) beside
# torchvision's resnet50; the Caffe2 zoo SqueezeNet (predict net only; weights drawn by
# `demitasse init-net`, its version read from conv1's kernel) beside torchvision's
# squeezenet of the same version; LeNet (models/mnist) beside bench/torch_lenet_train.py's.
# Weights are random on every side. Where the two models' Conv/FC FLOPs differ, the
# ratios compare time per FLOP, and the row says so.
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${ROUNDS:-5}
threads=${THREADS:-$(nproc)}
models=${MODELS:-resnet50 squeezenet lenet}
batches=${BATCHES:-1 8}
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
sys_py=/usr/bin/python3 # Debian's: python3-torch is installed for it
venv=bench/.venv
cache=bench/.cache
zoo=/work/shared/data/caffe2-zoo/squeezenet # the Caffe2 zoo's SqueezeNet predict net
zoo_net=$zoo/predict_net.pb zoo_table=$zoo/out_channels.txt
# Without shared/, the same two files as the tests vendor them.
[ -f "$zoo_net" ] || zoo_net=tests/data/squeezenet_predict_net.pb \
  zoo_table=tests/data/squeezenet_out_channels.txt
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dm_cpu_infer_XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p $cache

# Dependencies: PyTorch and torchvision from Debian, ONNX Runtime and onnx from PyPI in a
# venv that sees the system's packages (so torch and numpy are Debian's), made by the
# same script the ONNX tests use.
sh tests/onnx/setup_python.sh "$(pwd)"
py=$venv/bin/python
$py -c 'import torch, torchvision, onnxruntime, onnx' 2>/dev/null ||
  { echo "bench/.venv lacks torch, torchvision, onnx or onnxruntime (see above)"; exit 1; }
ninja -C "$build" bench/infer_net tools/demitasse >$tmp/ninja.log 2>&1 || { cat $tmp/ninja.log; exit 1; }
dm=$build/tools/demitasse
infer=$build/bench/infer_net

# prepare MODEL: sets net, init, image (C,H,W), tv (the torch model), onnx, the runs
# per process (iters, warmup) and the FLOPs of one image on each side (ours_flops,
# tv_flops).
prepare() {
  case $1 in
  resnet50)
    $sys_py models/resnet50/make_infer.py models/resnet50 $tmp/resnet50_net.pbtxt
    net=$tmp/resnet50_net.pbtxt init=models/resnet50/resnet50_init.pbtxt image=3,224,224
    tv=resnet50 iters=10 warmup=2 ;;
  squeezenet)
    # The zoo's table gives each conv weight's output channels; its conv1 count is
    # 1.0's (96). SqueezeNet 1.1 has conv1 3x3 with 64 outputs, 1.0 7x7 with 96: the
    # kernel in the predict net says which, and 1.1's conv1 gets its 64.
    "$dm" init-net --for "$zoo_net" --input data=1,3,227,227 --out-channels "$zoo_table" \
      -o $tmp/sq_probe.pb >/dev/null
    "$dm" inspect "$zoo_net" --init $tmp/sq_probe.pb --input data=1,3,227,227 >$tmp/sq_probe.txt
    k=$(awk '$1 == "conv1_w" && $2 == "FLOAT" { split($3, d, "x"); print d[3] }' $tmp/sq_probe.txt)
    case $k in
    3) tv=squeezenet1_1
       sed 's/^conv1_w .*/conv1_w 64/' "$zoo_table" >$tmp/sq_table.txt ;;
    7) tv=squeezenet1_0; cp "$zoo_table" $tmp/sq_table.txt ;;
    *) echo "SqueezeNet: conv1 kernel '$k' is neither 1.0's 7 nor 1.1's 3"; exit 1 ;;
    esac
    "$dm" init-net --for "$zoo_net" --input data=1,3,227,227 --out-channels $tmp/sq_table.txt \
      -o $tmp/squeezenet_init.pb >/dev/null
    net=$zoo_net init=$tmp/squeezenet_init.pb image=3,227,227 iters=50 warmup=5 ;;
  lenet)
    $py bench/cpu_infer.py lenet-net models/mnist/lenet_test.pbtxt $tmp/lenet_net.pbtxt
    net=$tmp/lenet_net.pbtxt init=models/mnist/lenet_init.pbtxt image=1,28,28 tv=lenet
    iters=500 warmup=50 ;;
  *) # any other torchvision.models name: ours runs the same ONNX export, imported
    $py -c "import sys, torchvision; sys.exit(not hasattr(torchvision.models, '$1'))" ||
      { echo "unknown model '$1' (resnet50, squeezenet, lenet, or a torchvision.models name)"
        exit 1; }
    tv=$1 net= init= image=3,224,224 iters=20 warmup=3 ;;
  esac
  iters=${ITERS:-$iters} warmup=${WARMUP:-$warmup}
  # The export is cached by model, opset and torch version.
  onnx=$cache/${tv}_$($sys_py -c 'import torch; print(torch.__version__)').onnx
  [ -f "$onnx" ] || $py bench/cpu_infer.py export $tv "$onnx" >$tmp/export.log 2>&1 ||
    { cat $tmp/export.log; exit 1; }
  probe_net=$net probe_init=$init pinned=
  if [ -z "$net" ]; then
    if "$dm" import-onnx "$onnx" -o $tmp/$1 >$tmp/import.log 2>&1; then
      net=$tmp/$1/predict_net.pb init=$tmp/$1/init_net.pb
    elif grep -q "computed in the graph" $tmp/import.log; then
      # Shape arithmetic on the dynamic batch (ShuffleNet's channel shuffle, ViT's
      # attention reshapes): imported once per batch with the batch dim given
      # (import-onnx --dim N=B), so that it folds; @B@ in the paths is the batch.
      for b in $(echo 1 $batches | tr ' ' '\n' | sort -un); do
        "$dm" import-onnx "$onnx" -o $tmp/$1_b$b --dim N=$b >$tmp/import.log 2>&1 ||
          { cat $tmp/import.log; exit 1; }
      done
      net=$tmp/$1_b@B@/predict_net.pb init=$tmp/$1_b@B@/init_net.pb pinned=pinned
    else
      cat $tmp/import.log; exit 1
    fi
    probe_net=$(echo "$net" | sed 's/@B@/1/') probe_init=$(echo "$init" | sed 's/@B@/1/')
  fi
  "$dm" inspect "$probe_net" --init "$probe_init" --input data=1,$image >$tmp/$1_inspect.txt
  ours_flops=$($py bench/cpu_infer.py flops-ours $tmp/$1_inspect.txt)
  tv_flops=$($py bench/cpu_infer.py flops-torch $tv)
}

for m in $models; do
  prepare $m
  echo "$m $net $init $image $tv $onnx $ours_flops $tv_flops $iters $warmup ${pinned:--}" >>$tmp/models.txt
done

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
echo "CPU: ${cpu:-unknown} ($(nproc) cores available)"
echo "THREADS=$threads ROUNDS=$rounds (each side a fresh process per run; ITERS and WARMUP per model below)"
echo "versions: $("$dm" --version | head -n 1)," \
  "$($py -c 'import onnxruntime, torch; print("onnxruntime", onnxruntime.__version__ + ", torch", torch.__version__)')"
while read -r m net init image tv onnx of tf iters warmup pin; do
  awk -v m=$m -v tv=$tv -v o=$of -v t=$tf -v i=$iters -v w=$warmup 'BEGIN {
    printf "%-10s ITERS=%d WARMUP=%d; ours %.4f GFLOP/image (Conv+FC), torch/ONNX %s %.4f%s\n",
      m, i, w, o / 1e9, tv, t / 1e9, (o == t ? ", the same" : sprintf(" (ours/theirs %.3f)", o / t)) }'
done <$tmp/models.txt

# one SIDE MODEL BATCH: one fresh process, its median ms per batch appended to
# $tmp/runs.txt as "model batch side ms round R". Its stdin is not the loop's list of models.
one() {
  side=$1 m=$2 b=$3
  case $side in
  ours) out=$("$infer" --net "$(echo "$net" | sed "s/@B@/$b/")" \
                --init "$(echo "$init" | sed "s/@B@/$b/")" --shape $b,$image --threads "$threads" \
                --iters "$iters" --warmup "$warmup" </dev/null) ;;
  ort) out=$($py bench/cpu_infer.py ort "$onnx" $b "$threads" "$warmup" "$iters" </dev/null) ;;
  torch) out=$($sys_py bench/cpu_infer.py torch $tv $b "$threads" "$warmup" "$iters" </dev/null) ;;
  esac
  ms=$(echo "$out" | awk '{ for (i = 1; i < NF; i++) if ($i == "median_ms") print $(i + 1) }')
  [ -n "$ms" ] || { echo "no median from $side $m batch $b: $out"; exit 1; }
  echo "$m $b $side $ms round $r" >>$tmp/runs.txt
}

sides="ours ort torch"
r=1
while [ $r -le "$rounds" ]; do
  # The sides' order turns each round, so none is always first after another's run.
  case $((r % 3)) in 1) order="ours ort torch" ;; 2) order="ort torch ours" ;;
                     0) order="torch ours ort" ;; esac
  while read -r m net init image tv onnx of tf iters warmup pin; do
    for b in $batches; do
      for side in $order; do one $side $m $b; done
    done
  done <$tmp/models.txt
  echo "round $r of $rounds done"
  r=$((r + 1))
done

# Medians over the rounds, ms per image; the ratios per FLOP where the FLOPs differ.
echo
printf "%-10s %5s %12s %12s %12s %9s %9s  %s\n" model batch "ours ms/img" "ORT ms/img" \
  "torch ms/img" "ours/ORT" "ours/torch" note
for m in $models; do
  read -r _ _ _ _ _ _ of tf _ _ pin <<EOF
$(grep "^$m " $tmp/models.txt)
EOF
  for b in $batches; do
    for side in $sides; do
      awk -v m=$m -v b=$b -v s=$side '$1 == m && $2 == b && $3 == s { print $4 }' $tmp/runs.txt |
        sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }' \
        >$tmp/med_$side
    done
    awk -v m=$m -v b=$b -v o="$(cat $tmp/med_ours)" -v x="$(cat $tmp/med_ort)" \
      -v t="$(cat $tmp/med_torch)" -v of=$of -v tf=$tf -v pin=$pin 'BEGIN {
      # time per FLOP: ours/theirs = (o / of) / (x / tf)
      k = tf / of
      printf "%-10s %5d %12.3f %12.3f %12.3f %9.2f %9.2f  %s\n", m, b, o / b, x / b, t / b,
        o / x * k, o / t * k, (of == tf ? "" : "ratios per FLOP (FLOPs differ)") \
        (pin == "pinned" ? " ours imported at this batch (--dim N=B)" : "") }'
  done
done
cp $tmp/runs.txt $cache/cpu_infer_runs.txt
echo
echo "ms/img: median over $rounds rounds of each process's median of ITERS runs, divided by the batch."
echo "ours/ORT, ours/torch: below 1.00 is faster for us."
echo "Every process's median (ms per batch, by round): $cache/cpu_infer_runs.txt"
echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)}: left as the environment has it (this script sets nothing)."

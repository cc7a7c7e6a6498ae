#!/bin/sh
# precision_run_test.sh: `demitasse run --precision fp16|bf16` on nets with batch norm
# (which a run that turned every FLOAT blob into FLOAT16 stopped at: "SpatialBN: scale is
# FLOAT16"): a small Conv -> SpatialBN(is_test) -> Relu -> FC -> Softmax net with random
# weights, and ResNet-50 (models/resnet50/make_infer.py's inference net: SpatialBN
# is_test with one output, Softmax instead of the loss) at 64x64. Each runs in FP32, FP16 and
# BF16 (run folds the BN into the Conv first, as by default); the outputs come back FLOAT; the pass's summary shows the net painted (only
# Softmax kept FP32, the BN parameters never cast); the logits agree with FP32 within
# 2 sqrt(L) u max|z| (u the dtype's unit roundoff, L the roundings on the path: each at
# most u relative, independent ones add in quadrature), the probabilities within what
# that logit error allows (|dp| <= p (e^(2 dz) - 1)), and top-1 agrees wherever FP32's
# margin exceeds twice the logit tolerance.
# usage: precision_run_test.sh demitasse models/resnet50 python3
set -u
exe=$1 r50=$2 py=$3
"$py" -c 'import numpy' 2>/dev/null || { echo "SKIP: no numpy for $py"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

cat > "$tmp/bn_init.pbtxt" <<'NET'
op { output: "w" type: "GaussianFill" arg { name: "shape" ints: [8, 3, 3, 3] } arg { name: "std" f: 0.3 } device_option { random_seed: 1 } }
op { output: "b" type: "UniformFill" arg { name: "shape" ints: 8 } arg { name: "min" f: -0.5 } arg { name: "max" f: 0.5 } device_option { random_seed: 2 } }
op { output: "s" type: "UniformFill" arg { name: "shape" ints: 8 } arg { name: "min" f: 0.5 } arg { name: "max" f: 1.5 } device_option { random_seed: 3 } }
op { output: "bias" type: "UniformFill" arg { name: "shape" ints: 8 } arg { name: "min" f: -0.5 } arg { name: "max" f: 0.5 } device_option { random_seed: 4 } }
op { output: "rm" type: "UniformFill" arg { name: "shape" ints: 8 } arg { name: "min" f: -0.3 } arg { name: "max" f: 0.3 } device_option { random_seed: 5 } }
op { output: "riv" type: "UniformFill" arg { name: "shape" ints: 8 } arg { name: "min" f: 0.5 } arg { name: "max" f: 2 } device_option { random_seed: 6 } }
op { output: "w2" type: "GaussianFill" arg { name: "shape" ints: [10, 512] } arg { name: "std" f: 0.1 } device_option { random_seed: 7 } }
op { output: "b2" type: "UniformFill" arg { name: "shape" ints: 10 } arg { name: "min" f: -0.5 } arg { name: "max" f: 0.5 } device_option { random_seed: 8 } }
NET
cat > "$tmp/bn_net.pbtxt" <<'NET'
name: "bn_net"
op { input: "data" input: "w" input: "b" output: "conv" type: "Conv" arg { name: "kernel" i: 3 } arg { name: "pad" i: 1 } }
op { input: "conv" input: "s" input: "bias" input: "rm" input: "riv" output: "bn" type: "SpatialBN" arg { name: "is_test" i: 1 } }
op { input: "bn" output: "bn" type: "Relu" }
op { input: "bn" input: "w2" input: "b2" output: "fc" type: "FC" }
op { input: "fc" output: "prob" type: "Softmax" }
external_output: "prob"
NET
"$py" - "$tmp" <<'PY' || { echo "FAIL: writing the inputs"; exit 1; }
import sys
import numpy as np
d = sys.argv[1]
r = np.random.default_rng(5)
np.save(d + "/bn_x.npy", r.uniform(-1, 1, (6, 3, 8, 8)).astype(np.float32))
np.save(d + "/r50_x.npy", r.uniform(-1, 1, (2, 3, 64, 64)).astype(np.float32))
PY
"$py" "$r50/make_infer.py" "$r50" "$tmp/r50_net.pbtxt" \
  || { echo "FAIL: making the ResNet-50 inference net"; exit 1; }

# run MODEL INIT NET X PROB LOGITS: the three precisions; outputs $tmp/MODEL_{prob,z}_P.npy
run() {
  m=$1 init=$2 net=$3 x=$4 prob=$5 z=$6
  for p in fp32 fp16 bf16; do
    if ! "$exe" run --init "$init" --net "$net" --input data="$x" --precision $p \
         --output "$prob=$tmp/${m}_prob_$p.npy" --output "$z=$tmp/${m}_z_$p.npy" \
         > "$tmp/${m}_$p.out" 2> "$tmp/${m}_$p.err"; then
      fail "$m: run --precision $p"; sed 's/^/  /' "$tmp/${m}_$p.err" | head -5
      continue
    fi
    [ $p = fp32 ] && continue
    P=$(echo $p | tr a-z A-Z)
    grep -q "ops in $P, 1 in FP32" "$tmp/${m}_$p.err" || { fail "$m $p: summary"; cat "$tmp/${m}_$p.err"; }
    grep -q "(Softmax.*) FP32: its schema requires FP32" "$tmp/${m}_$p.err" || fail "$m $p: Softmax not kept FP32"
  done
}
run bn "$tmp/bn_init.pbtxt" "$tmp/bn_net.pbtxt" "$tmp/bn_x.npy" prob fc
run r50 "$r50/resnet50_init.pbtxt" "$tmp/r50_net.pbtxt" "$tmp/r50_x.npy" softmax pred

# L: input, conv weights, bias and output, BN output, FC weights, bias and output, the
# cast back = 9 for the small net; ResNet-50: 53 convs (weights, output), 53 BN
# outputs, 16 Sums, the average pool, FC (weights, bias, output), input and cast back:
# 106 + 53 + 16 + 1 + 3 + 2 = 181.
for m in bn:9 r50:181; do
  "$py" - "$tmp" "${m%%:*}" "${m##*:}" <<'PY' || fail "${m%%:*}: FP16/BF16 against FP32"
import sys
import numpy as np
d, m, L = sys.argv[1], sys.argv[2], int(sys.argv[3])
z32 = np.load(f"{d}/{m}_z_fp32.npy").astype(np.float64).reshape(-1, np.load(f"{d}/{m}_z_fp32.npy").shape[1])
p32 = np.load(f"{d}/{m}_prob_fp32.npy").astype(np.float64).reshape(z32.shape)
ok = True
for p, u in (("fp16", 2.0**-11), ("bf16", 2.0**-8)):
    zq, pq = np.load(f"{d}/{m}_z_{p}.npy"), np.load(f"{d}/{m}_prob_{p}.npy")
    if zq.dtype != np.float32 or pq.dtype != np.float32:
        print(f"FAIL: {m} {p}: outputs are {zq.dtype}, {pq.dtype}, not float32"); ok = False
    zq, pq = zq.astype(np.float64).reshape(z32.shape), pq.astype(np.float64).reshape(z32.shape)
    tol_z = 2 * np.sqrt(L) * u * np.abs(z32).max()
    err_z = np.abs(zq - z32).max()
    tol_p = p32 * np.expm1(2 * tol_z) + 8 * 2.0**-24
    err_p = np.abs(pq - p32).max()
    srt = np.sort(z32, axis=1)
    sure = srt[:, -1] - srt[:, -2] > 2 * tol_z
    agree = z32.argmax(1) == zq.argmax(1)
    print(f"{m} {p}: max |dz| {err_z:.3g} (tol {tol_z:.3g}), max |dp| {err_p:.3g}, "
          f"top-1 agrees on {agree[sure].sum()} of {sure.sum()} decidable (of {len(sure)})")
    if err_z > tol_z or (np.abs(pq - p32) > tol_p).any() or not agree[sure].all() or not sure.any():
        print(f"FAIL: {m} {p}"); ok = False
sys.exit(0 if ok else 1)
PY
done

# `rewrite --fp16` without --grad prints the net `run --precision fp16` runs: BN reads its
# FP32 parameters, Conv and FC the copies cast once by the --init-out net; run as it is
# (it is painted already), it gives run --precision fp16's outputs bit for bit.
# ops(FILE): one line per op of a printed net, blanks squeezed
ops() { awk '/^op \{/ { l = "" } { l = l " " $0 } /^}/ { print l }' "$1" | tr -s ' '; }
if "$exe" rewrite --fp16 --data data "$tmp/bn_net.pbtxt" -o "$tmp/bn_fp16.pbtxt" \
     --init-out "$tmp/bn_casts.pbtxt" 2> "$tmp/rw.err"; then
  ops "$tmp/bn_fp16.pbtxt" > "$tmp/rw_ops.txt"
  grep -q 'input: "conv" input: "s" input: "bias" input: "rm" input: "riv" output: "bn" type: "SpatialBN"' \
    "$tmp/rw_ops.txt" || fail "rewrite --fp16: SpatialBN does not read its FP32 parameters"
  grep -q 'input: "data_fp16" input: "w_fp16" input: "b_fp16" output: "conv" type: "Conv"' \
    "$tmp/rw_ops.txt" || fail "rewrite --fp16: Conv does not read FP16 copies"
  [ "$(ops "$tmp/bn_casts.pbtxt" | grep -c 'type: "FloatToHalf"')" = 4 ] \
    || fail "rewrite --fp16: not 4 weight casts (w, b, w2, b2) in the init addition"
  ops "$tmp/bn_casts.pbtxt" | grep -q 'input: "w" input: "b" input: "w2" input: "b2" output: "w" output: "b" output: "w2" output: "b2" type: "Free"' \
    || fail "rewrite --fp16: the FP32 weights Conv and FC no longer read are not freed"
  grep -q '"s_fp16"\|"bias_fp16"\|"rm_fp16"\|"riv_fp16"' "$tmp/bn_casts.pbtxt" "$tmp/bn_fp16.pbtxt" \
    && fail "rewrite --fp16: a BN parameter was cast"
  # (without --fuse on either side: `rewrite --fuse --fp16` is the net run's default
  # folding then paints, checked in fusion_run_test.sh)
  cat "$tmp/bn_init.pbtxt" "$tmp/bn_casts.pbtxt" > "$tmp/bn_init_casts.pbtxt"
  "$exe" run --no-fuse --init "$tmp/bn_init_casts.pbtxt" --net "$tmp/bn_fp16.pbtxt" \
    --input data="$tmp/bn_x.npy" --output prob="$tmp/rw_prob.npy" > "$tmp/rw_run.out" 2>&1 \
    || { fail "running the rewritten net"; cat "$tmp/rw_run.out"; }
  "$exe" run --no-fuse --init "$tmp/bn_init.pbtxt" --net "$tmp/bn_net.pbtxt" --precision fp16 \
    --input data="$tmp/bn_x.npy" --output prob="$tmp/nf_prob.npy" > "$tmp/nf_run.out" 2>&1 \
    || { fail "run --precision fp16 --no-fuse"; cat "$tmp/nf_run.out"; }
  "$py" -c "import numpy as np, sys; a, b = np.load(sys.argv[1]), np.load(sys.argv[2]); sys.exit(0 if a.dtype == b.dtype and (a == b).all() else 1)" \
    "$tmp/rw_prob.npy" "$tmp/nf_prob.npy" || fail "rewritten net's prob differs from run --precision fp16 --no-fuse"
else
  fail "rewrite --fp16 (inference)"; cat "$tmp/rw.err"
fi

# --device cuda combines with --precision (a machine without a GPU refuses it, for the
# GPU's sake, not for the precision's).
"$exe" run --net "$tmp/bn_net.pbtxt" --precision fp16 --device cuda > "$tmp/dev.out" 2>&1
grep -q "not with --device cuda" "$tmp/dev.out" && fail "--precision fp16 --device cuda refused"
"$exe" run --net "$tmp/bn_net.pbtxt" --precision fp8 > "$tmp/bad.out" 2>&1 && fail "fp8 accepted"
grep -q "wants fp32, fp16 or bf16" "$tmp/bad.out" || fail "--precision fp8 message"

[ $fails -eq 0 ] && echo PASS || exit 1

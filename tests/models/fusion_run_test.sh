#!/bin/sh
# fusion_run_test.sh: the inference fusion pass through the CLI (net/passes/fusion_pass.h): `run`
# folds each test-mode SpatialBN into its Conv unless --no-fuse, and the outputs agree
# with the unfused net's within FP32's tolerance, on a small Conv -> SpatialBN -> Relu ->
# FC -> Softmax net and on ResNet-50 (the inference net models/resnet50/make_infer.py
# writes, at 64x64, with --random-bn: random BN scale, bias, mean and variance in place
# of the init net's 1, 0, 0, 1, so the fold is not the identity); the summary says
# how many BN were folded; `rewrite --fuse` prints a net with no SpatialBN whose
# --init-out holds one FoldBN per BN.
# Post-op fusions (rewrite --fuse asks for them; `run` does not yet): the rewritten
# ResNet-50 has no Relu or Sum left (33 ConvFusion conv + relu, 16 conv + sum + relu,
# the 4 projection shortcuts plain Conv) and the rewritten SqueezeNet (predict net of the
# Caffe2 zoo, weights from init-net) 26 ConvFusion and no Relu; each, run with --no-fuse,
# gives the unfused net's outputs within FP32's tolerance.
# usage: fusion_run_test.sh demitasse models/resnet50 python3 squeezenet_predict_net.pb
#        squeezenet_out_channels.txt
set -u
exe=$1 r50=$2 py=$3 sq=$4 sqt=$5
"$py" -c 'import numpy' 2>/dev/null || { echo "SKIP: no numpy for $py"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

cat > "$tmp/bn_init.pbtxt" <<'NET'
op { output: "w" type: "GaussianFill" arg { name: "shape" ints: [8, 3, 3, 3] } arg { name: "std" f: 0.3 } device_option { random_seed: 1 } }
op { output: "s" type: "UniformFill" arg { name: "shape" ints: 8 } arg { name: "min" f: -1.5 } arg { name: "max" f: 1.5 } device_option { random_seed: 3 } }
op { output: "bias" type: "UniformFill" arg { name: "shape" ints: 8 } arg { name: "min" f: -0.5 } arg { name: "max" f: 0.5 } device_option { random_seed: 4 } }
op { output: "rm" type: "UniformFill" arg { name: "shape" ints: 8 } arg { name: "min" f: -0.3 } arg { name: "max" f: 0.3 } device_option { random_seed: 5 } }
op { output: "riv" type: "UniformFill" arg { name: "shape" ints: 8 } arg { name: "min" f: 0.01 } arg { name: "max" f: 2 } device_option { random_seed: 6 } }
op { output: "w2" type: "GaussianFill" arg { name: "shape" ints: [10, 512] } arg { name: "std" f: 0.1 } device_option { random_seed: 7 } }
op { output: "b2" type: "UniformFill" arg { name: "shape" ints: 10 } arg { name: "min" f: -0.5 } arg { name: "max" f: 0.5 } device_option { random_seed: 8 } }
NET
# The Conv has no bias: the fused one gets one.
cat > "$tmp/bn_net.pbtxt" <<'NET'
name: "bn_net"
op { input: "data" input: "w" output: "conv" type: "Conv" arg { name: "kernel" i: 3 } arg { name: "pad" i: 1 } }
op { input: "conv" input: "s" input: "bias" input: "rm" input: "riv" output: "bn" type: "SpatialBN" arg { name: "is_test" i: 1 } arg { name: "epsilon" f: 0.001 } }
op { input: "bn" output: "bn" type: "Relu" }
op { input: "bn" input: "w2" input: "b2" output: "fc" type: "FC" }
op { input: "fc" output: "prob" type: "Softmax" }
external_output: "prob"
NET
"$py" - "$tmp" <<'PY' || { echo "FAIL: writing the inputs"; exit 1; }
import sys
import numpy as np
d = sys.argv[1]
r = np.random.default_rng(7)
np.save(d + "/bn_x.npy", r.uniform(-1, 1, (6, 3, 8, 8)).astype(np.float32))
np.save(d + "/r50_x.npy", r.uniform(-1, 1, (2, 3, 64, 64)).astype(np.float32))
PY
"$py" "$r50/make_infer.py" "$r50" "$tmp/r50_net.pbtxt" --init-out "$tmp/r50_init.pbtxt" --random-bn \
  || { echo "FAIL: making the ResNet-50 inference net"; exit 1; }

# run MODEL NET X PROB LOGITS BNS: default (fused) and --no-fuse
run() {
  m=$1 net=$2 x=$3 prob=$4 z=$5 bns=$6
  for f in fused unfused; do
    flag=; [ $f = unfused ] && flag=--no-fuse
    if ! "$exe" run $flag --init "$tmp/${m}_init.pbtxt" --net "$net" --input data="$x" \
         --output "$prob=$tmp/${m}_prob_$f.npy" --output "$z=$tmp/${m}_z_$f.npy" \
         > "$tmp/${m}_$f.out" 2> "$tmp/${m}_$f.err"; then
      fail "$m: run ($f)"; sed 's/^/  /' "$tmp/${m}_$f.err" | head -5
    fi
  done
  grep -q "fusion: $bns of $bns SpatialBN folded into their Conv" "$tmp/${m}_fused.err" \
    || { fail "$m: not all $bns BN folded"; cat "$tmp/${m}_fused.err"; }
  grep -q "fusion:" "$tmp/${m}_unfused.err" && fail "$m: --no-fuse fused"
}
run bn "$tmp/bn_net.pbtxt" "$tmp/bn_x.npy" prob fc 1
run r50 "$tmp/r50_net.pbtxt" "$tmp/r50_x.npy" softmax pred 53

# Both paths are FP32 (u = 2^-24) and differ only in their roundings: per Conv+BN the
# fused one rounds the folded weights and bias (2), the unfused one the Conv's output and
# the BN's (2); independent relative roundings add in quadrature, so the logits differ by
# about sqrt(L) u max|z| with L = 4 per BN (bn: 4; ResNet-50: 212), and a factor 4
# covers the spread and the two paths' own errors. The probabilities move by at most
# what that allows (|dp| <= p (e^(2 dz) - 1)), plus FP32's rounding of p.
# compare MODEL L KIND: MODEL's outputs of KIND (fused, post) against its unfused ones.
compare() {
  "$py" - "$tmp" "$1" "$2" "$3" <<'PY' || fail "$1: $3 against unfused"
import sys
import numpy as np
d, m, L, kind = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
zu = np.load(f"{d}/{m}_z_unfused.npy").astype(np.float64)
zu = zu.reshape(zu.shape[0], -1)
pu = np.load(f"{d}/{m}_prob_unfused.npy").astype(np.float64).reshape(zu.shape)
zf = np.load(f"{d}/{m}_z_{kind}.npy").astype(np.float64).reshape(zu.shape)
pf = np.load(f"{d}/{m}_prob_{kind}.npy").astype(np.float64).reshape(zu.shape)
u = 2.0**-24
tol_z = 4 * np.sqrt(L) * u * np.abs(zu).max()
err_z = np.abs(zf - zu).max()
tol_p = pu * np.expm1(2 * tol_z) + 8 * u
err_p = np.abs(pf - pu).max()
print(f"{m} {kind}: max |z| {np.abs(zu).max():.3g}, max |dz| {err_z:.3g} (tol {tol_z:.3g}, "
      f"{err_z / tol_z:.2f} of it), max |dp| {err_p:.3g}")
ok = err_z <= tol_z and (np.abs(pf - pu) <= tol_p).all() and np.abs(zu).max() > 0
sys.exit(0 if ok else 1)
PY
}
compare bn 4 fused
compare r50 212 fused

# `rewrite --fuse`: no SpatialBN, the folds in --init-out, and the post-op fusions; run
# after the init net and the addition, it is compared with the unfused net below.
if "$exe" rewrite --fuse "$tmp/r50_net.pbtxt" -o "$tmp/r50_fused.pbtxt" \
     --init-out "$tmp/r50_folds.pbtxt" 2> "$tmp/rw.err"; then
  grep -q '"SpatialBN"' "$tmp/r50_fused.pbtxt" && fail "rewrite --fuse: a SpatialBN is left"
  [ "$(grep -c 'type: "FoldBN"' "$tmp/r50_folds.pbtxt")" = 53 ] \
    || fail "rewrite --fuse: not 53 FoldBN ops in the init addition"
  grep -q "fusion: 53 of 53" "$tmp/rw.err" || fail "rewrite --fuse: summary"
  grep -q "not fused" "$tmp/rw.err" && { fail "rewrite --fuse: a post-op left"; cat "$tmp/rw.err"; }
  for t in Relu:0 Sum:0 Conv:4 ConvFusion:49; do
    n=$(grep -c "type: \"${t%%:*}\"" "$tmp/r50_fused.pbtxt")
    [ "$n" = "${t##*:}" ] || fail "rewrite --fuse: $n ${t%%:*} ops, not ${t##*:}"
  done
  [ "$(grep -A1 'name: "fusion_type"' "$tmp/r50_fused.pbtxt" | grep -c 'i: 3$')" = 16 ] \
    || fail "rewrite --fuse: not 16 ConvFusion conv + sum + relu"
  cat "$tmp/r50_init.pbtxt" "$tmp/r50_folds.pbtxt" | grep -v '^name:' > "$tmp/r50_init_folds.pbtxt"
  "$exe" run --no-fuse --init "$tmp/r50_init_folds.pbtxt" --net "$tmp/r50_fused.pbtxt" \
    --input data="$tmp/r50_x.npy" --output softmax="$tmp/r50_prob_post.npy" \
    --output pred="$tmp/r50_z_post.npy" > "$tmp/rw_run.out" 2>&1 \
    || { fail "running the rewritten net"; cat "$tmp/rw_run.out"; }
else
  fail "rewrite --fuse"; cat "$tmp/rw.err"
fi

# SqueezeNet: Conv + Relu throughout, no BN.
"$exe" init-net --for "$sq" --input data=1,3,227,227 --out-channels "$sqt" -o "$tmp/sq_init.pb" \
  > "$tmp/sq_init.out" 2>&1 || { fail "squeezenet: init-net"; cat "$tmp/sq_init.out"; }
"$py" -c "import numpy as np; np.save('$tmp/sq_x.npy', np.random.default_rng(9).uniform(-1, 1, (1, 3, 227, 227)).astype(np.float32))"
if "$exe" rewrite --fuse "$sq" -o "$tmp/sq_fused.pbtxt" 2> "$tmp/sq_rw.err"; then
  [ "$(grep -c 'type: "ConvFusion"' "$tmp/sq_fused.pbtxt")" = 26 ] \
    || fail "squeezenet: rewrite --fuse: not 26 ConvFusion"
  grep -q 'type: "Relu"' "$tmp/sq_fused.pbtxt" && fail "squeezenet: rewrite --fuse: a Relu is left"
  for f in post:"$tmp/sq_fused.pbtxt" unfused:"$sq"; do
    "$exe" run --no-fuse --init "$tmp/sq_init.pb" --net "${f#*:}" --input data="$tmp/sq_x.npy" \
      --output softmaxout="$tmp/sq_prob_${f%%:*}.npy" --output pool10="$tmp/sq_z_${f%%:*}.npy" \
      > "$tmp/sq_run.out" 2>&1 || { fail "squeezenet: run ${f%%:*}"; cat "$tmp/sq_run.out"; }
  done
else
  fail "squeezenet: rewrite --fuse"; cat "$tmp/sq_rw.err"
fi

# The post-op nets against the unfused ones: the fused op does the Conv's arithmetic and
# then the sum and the relu in FP32, as the separate ops do, so at most the bound above
# (ResNet-50: L as for the folds; SqueezeNet: L = 4 per Conv, 26 of them).
compare r50 212 post
compare sq 104 post

"$exe" rewrite --fuse --grad --loss loss "$tmp/bn_net.pbtxt" > "$tmp/g.out" 2>&1 \
  && fail "rewrite --fuse --grad accepted"
grep -q "cannot be used with --grad" "$tmp/g.out" || fail "rewrite --fuse --grad: message"

[ $fails -eq 0 ] && echo PASS || exit 1

#!/bin/sh
# fusion_run_test.sh: the inference fusion pass through the CLI (net/fusion.h): `run`
# folds each test-mode SpatialBN into its Conv unless --no-fuse, and the outputs agree
# with the unfused net's within FP32's tolerance, on a small Conv -> SpatialBN -> Relu ->
# FC -> Softmax net and on ResNet-50 (the inference net models/resnet50/make_infer.py
# writes, at 64x64, with --random-bn: random BN scale, bias, mean and variance in place
# of the init net's 1, 0, 0, 1, so the fold is not the identity); the summary says
# how many BN were folded; `rewrite --fuse` prints a net with no SpatialBN whose
# --init-out holds one FoldBN per BN, and that net, run after the init net and the
# addition, gives the default run's outputs bit for bit (it is the net `run` runs).
# usage: fusion_run_test.sh demitasse models/resnet50 python3
set -u
exe=$1 r50=$2 py=$3
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
for m in bn:4 r50:212; do
  "$py" - "$tmp" "${m%%:*}" "${m##*:}" <<'PY' || fail "${m%%:*}: fused against unfused"
import sys
import numpy as np
d, m, L = sys.argv[1], sys.argv[2], int(sys.argv[3])
zu = np.load(f"{d}/{m}_z_unfused.npy").astype(np.float64)
zu = zu.reshape(zu.shape[0], -1)
pu = np.load(f"{d}/{m}_prob_unfused.npy").astype(np.float64).reshape(zu.shape)
zf = np.load(f"{d}/{m}_z_fused.npy").astype(np.float64).reshape(zu.shape)
pf = np.load(f"{d}/{m}_prob_fused.npy").astype(np.float64).reshape(zu.shape)
u = 2.0**-24
tol_z = 4 * np.sqrt(L) * u * np.abs(zu).max()
err_z = np.abs(zf - zu).max()
tol_p = pu * np.expm1(2 * tol_z) + 8 * u
err_p = np.abs(pf - pu).max()
print(f"{m}: max |z| {np.abs(zu).max():.3g}, max |dz| {err_z:.3g} (tol {tol_z:.3g}, "
      f"{err_z / tol_z:.2f} of it), max |dp| {err_p:.3g}")
ok = err_z <= tol_z and (np.abs(pf - pu) <= tol_p).all() and np.abs(zu).max() > 0
sys.exit(0 if ok else 1)
PY
done

# `rewrite --fuse` prints the net `run` runs: no SpatialBN, every Conv with a bias, the
# folds in --init-out; run after the init net and the addition, it gives the default
# run's outputs bit for bit.
if "$exe" rewrite --fuse "$tmp/r50_net.pbtxt" -o "$tmp/r50_fused.pbtxt" \
     --init-out "$tmp/r50_folds.pbtxt" 2> "$tmp/rw.err"; then
  grep -q '"SpatialBN"' "$tmp/r50_fused.pbtxt" && fail "rewrite --fuse: a SpatialBN is left"
  [ "$(grep -c 'type: "FoldBN"' "$tmp/r50_folds.pbtxt")" = 53 ] \
    || fail "rewrite --fuse: not 53 FoldBN ops in the init addition"
  grep -q "fusion: 53 of 53" "$tmp/rw.err" || fail "rewrite --fuse: summary"
  cat "$tmp/r50_init.pbtxt" "$tmp/r50_folds.pbtxt" | grep -v '^name:' > "$tmp/r50_init_folds.pbtxt"
  "$exe" run --no-fuse --init "$tmp/r50_init_folds.pbtxt" --net "$tmp/r50_fused.pbtxt" \
    --input data="$tmp/r50_x.npy" --output softmax="$tmp/rw_prob.npy" > "$tmp/rw_run.out" 2>&1 \
    || { fail "running the rewritten net"; cat "$tmp/rw_run.out"; }
  "$py" -c "import numpy as np, sys; a, b = np.load(sys.argv[1]), np.load(sys.argv[2]); sys.exit(0 if a.dtype == b.dtype and (a == b).all() else 1)" \
    "$tmp/rw_prob.npy" "$tmp/r50_prob_fused.npy" || fail "rewritten net's softmax differs from run's"
else
  fail "rewrite --fuse"; cat "$tmp/rw.err"
fi
"$exe" rewrite --fuse --grad --loss loss "$tmp/bn_net.pbtxt" > "$tmp/g.out" 2>&1 \
  && fail "rewrite --fuse --grad accepted"
grep -q "cannot be used with --grad" "$tmp/g.out" || fail "rewrite --fuse --grad: message"

[ $fails -eq 0 ] && echo PASS || exit 1

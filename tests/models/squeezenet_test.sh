#!/bin/sh
# squeezenet_test.sh: the Caffe2 model-zoo SqueezeNet (predict net only, no weights) runs
# from the CLI: init-net infers every parameter shape from the input shape and the
# output-channels table; inspect prints the inferred shapes; run gives a 1000-way
# probability vector in FP32 and in FP16 that agree within FP16's precision. A table that
# does not fit the net is refused with the blob named.
# usage: squeezenet_test.sh demitasse predict_net.pb out_channels.txt python3
set -u
exe=$1 net=$2 table=$3 py=$4
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$py" -c 'import numpy' 2>/dev/null || { echo "numpy missing"; exit 77; }

"$exe" init-net --for "$net" --input data=1,3,227,227 --out-channels "$table" -o "$tmp/init.pb" \
  > "$tmp/init.txt" 2>&1 || { cat "$tmp/init.txt"; fail "init-net"; }
grep -q "52 parameter blobs" "$tmp/init.txt" || { cat "$tmp/init.txt"; fail "expected 52 parameters"; }

"$exe" inspect "$net" --init "$tmp/init.pb" --input data=1,3,227,227 > "$tmp/inspect.txt" 2>&1 \
  || { cat "$tmp/inspect.txt"; fail "inspect"; }
grep -Eq '^  softmaxout +FLOAT +1x1000x1x1$' "$tmp/inspect.txt" || fail "softmaxout shape not 1x1000x1x1"
grep -Eq '^  conv1_w +FLOAT +96x3x3x3$' "$tmp/inspect.txt" || fail "conv1_w shape"
grep -Eq '^  pool1 +FLOAT +1x96x56x56$' "$tmp/inspect.txt" || fail "pool1 (legacy pooling) shape"
grep -q "total: .* FLOPs" "$tmp/inspect.txt" || fail "no FLOP total"

"$py" -c "import numpy as np; np.save('$tmp/x.npy', np.random.default_rng(7).uniform(-1, 1, (1, 3, 227, 227)).astype(np.float32))"
for p in fp32 fp16; do
  "$exe" run --init "$tmp/init.pb" --net "$net" --input data="$tmp/x.npy" --precision $p \
    --output softmaxout="$tmp/prob_$p.npy" --output pool10="$tmp/logit_$p.npy" > "$tmp/run_$p.txt" 2>&1 \
    || { cat "$tmp/run_$p.txt"; fail "run $p"; }
done
# FP32 probabilities sum to 1 within float rounding over 1000 terms; FP16 within 1000
# half-precision roundings. The logits agree to first order within one FP16 rounding of
# the activations and one of the weights per layer: 2 * 26 conv layers * 2^-11.
"$py" - "$tmp" <<'PY' || fail "FP32/FP16 comparison"
import sys
import numpy as np
d = sys.argv[1]
p32, p16 = np.load(d + "/prob_fp32.npy"), np.load(d + "/prob_fp16.npy").astype(np.float64)
l32, l16 = np.load(d + "/logit_fp32.npy").astype(np.float64), np.load(d + "/logit_fp16.npy").astype(np.float64)
assert p32.shape == (1, 1000, 1, 1) and p32.dtype == np.float32, p32.shape
assert p16.shape == (1, 1000, 1, 1)
assert (p32 >= 0).all() and abs(p32.sum() - 1) < 1000 * 2**-24, p32.sum()
assert abs(p16.sum() - 1) < 1000 * 2**-11 * p16.max() + 2**-11, p16.sum()
rel = np.abs(l32 - l16).max() / np.abs(l32).max()
bound = 2 * 26 * 2**-11
print(f"logits: max |fp32 - fp16| / max |fp32| = {rel:.3g} (bound {bound:.3g})")
assert rel <= bound
PY

# A table that does not fit the net names the blob.
grep -v '^conv10_w' "$table" > "$tmp/short.txt"
"$exe" init-net --for "$net" --input data=1,3,227,227 --out-channels "$tmp/short.txt" -o "$tmp/x.pb" \
  > "$tmp/e1.txt" 2>&1 && fail "a table without conv10_w was accepted"
grep -q "'conv10_w' has no entry" "$tmp/e1.txt" || { cat "$tmp/e1.txt"; fail "missing-entry message"; }
{ cat "$table"; echo "bogus_w 7"; } > "$tmp/extra.txt"
"$exe" init-net --for "$net" --input data=1,3,227,227 --out-channels "$tmp/extra.txt" -o "$tmp/x.pb" \
  > "$tmp/e2.txt" 2>&1 && fail "a table with an unknown blob was accepted"
grep -q "extra.txt:[0-9]*: 'bogus_w' is not the weight" "$tmp/e2.txt" || { cat "$tmp/e2.txt"; fail "extra-entry message"; }
sed 's/^fire2\/expand1x1_w 64/fire2\/expand1x1_w 0/' "$table" > "$tmp/zero.txt"
"$exe" init-net --for "$net" --input data=1,3,227,227 --out-channels "$tmp/zero.txt" -o "$tmp/x.pb" \
  > "$tmp/e3.txt" 2>&1 && fail "a zero channel count was accepted"
grep -q "zero.txt:[0-9]*: expected 'blob count'" "$tmp/e3.txt" || { cat "$tmp/e3.txt"; fail "bad-count message"; }
echo ok

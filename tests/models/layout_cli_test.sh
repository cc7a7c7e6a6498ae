#!/bin/sh
# layout_cli_test.sh: the layout pass from the command line (net/passes/layout_pass.h):
#   - `rewrite --layout nhwc` on LeNet's training net prints one Transpose (axes 0 2 3 1)
#     after the DB input's data, the label untouched, order NHWC on every Conv and pool
#     and their gradients; --init-out holds the filters' Transposes and the FC weight's
#     FCWeightToNHWC; the renamed weights are listed on stderr;
#   - on the zoo SqueezeNet predict net: the data transposed in and softmaxout
#     transposed back (axes 0 3 1 2); `run --layout nhwc` against `run`, FP32 and FP16:
#     the logits within a bound derived from FP32's unit roundoff (Higham-Mary,
#     4 sqrt(K) u with K the summed reductions: 26 convolutions of at most 576 terms and
#     the 169-term average pool), plus in FP16 a one-ulp difference in each of the 2 x 26
#     FP16 roundings of the path (4 sqrt(52) 2^-10), relative to the largest logit; the
#     probabilities are NCHW (1, 1000, 1, 1) again;
#   - an op the pass cannot convert is refused, the op named;
#   - `train --layout nhwc` trains LeNet (and its test net, which shares the weights) a
#     few steps; a bad --layout is a usage error.
# usage: layout_cli_test.sh demitasse models/mnist squeezenet_predict_net.pb out_channels.txt python3
set -u
exe=$1 mnist=$2 net=$3 table=$4 py=$5
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$py" -c 'import numpy' 2>/dev/null || { echo "numpy missing"; exit 77; }

# LeNet's training net.
"$exe" rewrite --layout nhwc --grad --loss loss --optimizer momentum \
  --init-out "$tmp/add.pbtxt" "$mnist/lenet_train.pbtxt" > "$tmp/lenet.pbtxt" 2> "$tmp/err.txt" \
  || { cat "$tmp/err.txt"; fail "rewrite --layout nhwc"; }
"$py" - "$tmp" <<'PY' || fail "the rewritten LeNet"
import re, sys
d = sys.argv[1]
def ops(path):
    text = open(path).read()
    out = []
    for body in re.split(r'\nop \{', text)[1:]:
        out.append({"type": re.search(r'^  type: "([^"]+)"', body, re.M).group(1),
                    "in": re.findall(r'^  input: "([^"]+)"', body, re.M),
                    "out": re.findall(r'^  output: "([^"]+)"', body, re.M),
                    "axes": [int(v) for v in re.findall(r'ints: (-?\d+)', body)],
                    "nhwc": 's: "NHWC"' in body})
    return out
net, add = ops(d + "/lenet.pbtxt"), ops(d + "/add.pbtxt")
assert net[0]["type"] == "TensorProtosDBInput"
t = net[1]
assert t["type"] == "Transpose" and t["in"] == ["data"] and t["out"] == ["data_nhwc"], t
assert t["axes"] == [0, 2, 3, 1], t
assert sum(o["type"] == "Transpose" for o in net) == 1
assert not any("label_nhwc" in o["in"] + o["out"] for o in net)
ordered = [o for o in net if o["type"] in ("Conv", "ConvGradient", "MaxPool", "MaxPoolGradient")]
assert len(ordered) == 8 and all(o["nhwc"] for o in ordered), ordered
assert ordered[0]["in"][:2] == ["data_nhwc", "conv1_w_nhwc"], ordered[0]
assert add[0] == {"type": "Transpose", "in": ["conv1_w"], "out": ["conv1_w_nhwc"],
                  "axes": [0, 2, 3, 1], "nhwc": False}, add[0]
assert add[2]["type"] == "FCWeightToNHWC" and add[2]["in"] == ["fc3_w", "conv2_w_nhwc"], add[2]
PY
grep -q "conv1_w -> conv1_w_nhwc" "$tmp/err.txt" || { cat "$tmp/err.txt"; fail "renames not listed"; }
grep -q "fc3_w -> fc3_w_nhwc (FC columns" "$tmp/err.txt" || fail "FC rename not listed"

# SqueezeNet: the net's interface stays NCHW.
"$exe" rewrite --layout nhwc "$net" > "$tmp/sq.pbtxt" 2> "$tmp/err.txt" \
  || { cat "$tmp/err.txt"; fail "rewrite --layout nhwc SqueezeNet"; }
grep -c 'type: "Transpose"' "$tmp/sq.pbtxt" | grep -qx 2 || fail "SqueezeNet: not two Transposes"
grep -A3 'input: "softmaxout_nhwc"' "$tmp/sq.pbtxt" | grep -q 'output: "softmaxout"' \
  || fail "softmaxout is not transposed back"
"$exe" init-net --for "$net" --input data=1,3,227,227 --out-channels "$table" -o "$tmp/init.pb" \
  > /dev/null 2>&1 || fail "init-net"
"$py" -c "import numpy as np; np.save('$tmp/x.npy', np.random.default_rng(7).uniform(-1, 1, (1, 3, 227, 227)).astype(np.float32))"
for p in fp32 fp16; do
  for l in nchw nhwc; do
    "$exe" run --init "$tmp/init.pb" --net "$net" --input data="$tmp/x.npy" --precision $p \
      --layout $l --output softmaxout="$tmp/prob_${p}_$l.npy" --output pool10="$tmp/logit_${p}_$l.npy" \
      > "$tmp/run.txt" 2>&1 || { cat "$tmp/run.txt"; fail "run $p $l"; }
  done
done
"$py" - "$tmp" <<'PY' || fail "NHWC against NCHW"
import math, sys
import numpy as np
d = sys.argv[1]
K = 26 * 576 + 169
for p, bound in (("fp32", 4 * math.sqrt(K) * 2**-24),
                 ("fp16", 4 * math.sqrt(K) * 2**-24 + 4 * math.sqrt(2 * 26) * 2**-10)):
    a = np.load(f"{d}/logit_{p}_nchw.npy").astype(np.float64)
    b = np.load(f"{d}/logit_{p}_nhwc.npy").astype(np.float64)
    pa, pb = np.load(f"{d}/prob_{p}_nchw.npy"), np.load(f"{d}/prob_{p}_nhwc.npy")
    assert a.shape == b.shape == (1, 1000, 1, 1) and pb.shape == (1, 1000, 1, 1), (a.shape, b.shape, pb.shape)
    rel = np.abs(a - b).max() / np.abs(a).max()
    print(f"{p}: logits max |nchw - nhwc| / max |nchw| = {rel:.3g} (bound {bound:.3g})")
    assert rel <= bound
    assert pa.argmax() == pb.argmax()
PY

# Reshape has no layout rule: its NHWC input is transposed back just before it (an exit).
cat > "$tmp/exit.pbtxt" <<'NET'
op { input: "data" input: "w" output: "c" type: "Conv" arg { name: "kernel" i: 3 } }
op { input: "c" output: "r" output: "old" name: "flat" type: "Reshape" arg { name: "shape" ints: 0 ints: -1 } }
external_input: "data" external_input: "w" external_output: "r"
NET
"$exe" rewrite --layout nhwc "$tmp/exit.pbtxt" > "$tmp/exit.txt" 2> "$tmp/exit.err" \
  || { cat "$tmp/exit.err"; fail "rewrite --layout nhwc with a Reshape"; }
tr -d ' \n' < "$tmp/exit.txt" | grep -q 'input:"c"output:"c_nchw"type:"Transpose"' \
  || { cat "$tmp/exit.txt"; fail "no Transpose back before the Reshape"; }
tr -d ' \n' < "$tmp/exit.txt" | grep -q 'input:"c_nchw"output:"r"output:"old"' \
  || { cat "$tmp/exit.txt"; fail "the Reshape does not read c_nchw"; }

# --pad-channels 8: the data (3 channels, read only by the Conv) and the filter enter
# through NCHW2NHWCPad; 0 keeps the Transposes; a bad N is a usage error.
"$exe" rewrite --layout nhwc --pad-channels 8 --init-out "$tmp/pad_init.pbtxt" \
  "$tmp/exit.pbtxt" > "$tmp/pad.txt" 2> "$tmp/pad.err" || { cat "$tmp/pad.err"; fail "--pad-channels 8"; }
tr -d ' \n' < "$tmp/pad.txt" | grep -q 'input:"data"output:"data_nhwc"type:"NCHW2NHWCPad"arg{name:"multiple"i:8}' \
  || { cat "$tmp/pad.txt"; fail "data not padded"; }
tr -d ' \n' < "$tmp/pad_init.pbtxt" | grep -q 'input:"w"output:"w_nhwc"type:"NCHW2NHWCPad"' \
  || { cat "$tmp/pad_init.pbtxt"; fail "filter not padded"; }
grep -q "w -> w_nhwc (filter M x kH x kW x C, C zero-padded)" "$tmp/pad.err" || { cat "$tmp/pad.err"; fail "padding summary"; }
"$exe" rewrite --layout nhwc --pad-channels 0 "$tmp/exit.pbtxt" 2> /dev/null | grep -q NCHW2NHWCPad \
  && fail "--pad-channels 0 padded"
"$exe" rewrite --layout nhwc --pad-channels x "$tmp/exit.pbtxt" > "$tmp/padbad.txt" 2>&1 && fail "--pad-channels x accepted"
grep -q -- "--pad-channels wants" "$tmp/padbad.txt" || { cat "$tmp/padbad.txt"; fail "--pad-channels usage error"; }

# Refused: a broadcasting Add on NHWC data.
cat > "$tmp/bad.pbtxt" <<'NET'
op { input: "data" input: "w" output: "c" type: "Conv" arg { name: "kernel" i: 3 } }
op { input: "c" input: "b" output: "r" name: "add" type: "Add" arg { name: "broadcast" i: 1 } arg { name: "axis" i: 1 } }
external_input: "data" external_input: "w" external_input: "b" external_output: "r"
NET
"$exe" rewrite --layout nhwc "$tmp/bad.pbtxt" > "$tmp/bad.txt" 2>&1 && fail "broadcasting Add on NHWC data accepted"
grep -q "op 1 (Add 'add') cannot be converted to NHWC" "$tmp/bad.txt" \
  || { cat "$tmp/bad.txt"; fail "refusal message"; }

# train: LeNet and its test net, NHWC.
"$exe" make-db --images "$mnist/data/t10k-images-idx3-ubyte.gz" \
  --labels "$mnist/data/t10k-labels-idx1-ubyte.gz" --train 9000 \
  --out-train "$tmp/train" --out-val "$tmp/val" > /dev/null || fail "make-db"
"$exe" train --init "$mnist/lenet_init.pbtxt" --net "$mnist/lenet_train.pbtxt" \
  --test-net "$mnist/lenet_test.pbtxt" --train-db "$tmp/train" --test-db "$tmp/val" \
  --iters 4 --test-every 4 --test-iters 1 --log-every 2 --layout nhwc > "$tmp/train.txt" 2>&1 \
  || { cat "$tmp/train.txt"; fail "train --layout nhwc"; }
grep -q "layout pass: .* 3 weights re-laid" "$tmp/train.txt" || { cat "$tmp/train.txt"; fail "train: no layout summary"; }
grep -q "iter 4/4" "$tmp/train.txt" || { cat "$tmp/train.txt"; fail "train: no progress"; }
"$exe" train --init "$mnist/lenet_init.pbtxt" --net "$mnist/lenet_train.pbtxt" --iters 1 \
  --layout nhcw > "$tmp/usage.txt" 2>&1 && fail "--layout nhcw accepted"
grep -q "nchw or nhwc" "$tmp/usage.txt" || { cat "$tmp/usage.txt"; fail "usage message"; }
echo ok

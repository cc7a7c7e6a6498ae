#!/bin/sh
# onnx_cli_test.sh DEMITASSE SRCDIR: the ONNX commands end to end on tests/data/onnx's
# tiny.onnx: import-onnx writes both nets and they run to ONNX Runtime's output (the
# probabilities below were printed by onnxruntime 1.32 for tiny_input.npy); run, inspect
# and convert take the .onnx directly (convert's text round trip runs the same); a model
# with untranslatable nodes fails listing all of them and writes nothing; run --init is
# refused with a .onnx; truncated and missing files fail with the file named.
set -u
DM=$1
SRC=$2
T=$(mktemp -d "${TMPDIR:-/tmp}/dm_onnx_cli_XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
. "$SRC/tests/tools/cli_lib.sh"
M=$SRC/tests/data/onnx/tiny.onnx
IN=data=$SRC/tests/data/onnx/tiny_input.npy
ORT="0.91525036 0.01838535 0.04782088 0.01854339"

# the nets' output against ONNX Runtime's, within 1e-5 (FP32, a 27-term conv)
close() {
  checks=$((checks + 1))
  got=$(sed -n 's/^prob: FLOAT 1x4 \[\(.*\)\]$/\1/p' "$T/out" | tr -d ',')
  awk -v g="$got" -v w="$ORT" 'BEGIN { n = split(g, a, " "); split(w, b, " ");
    if (n != 4) exit 1; for (i = 1; i <= 4; i++) { d = a[i] - b[i]; if (d < 0) d = -d;
    if (d > 1e-5) exit 1 } }' || fail "$1: prob is '$got', onnxruntime's $ORT"
}

expect 0 "$DM" import-onnx "$M" -o "$T/nets" && has err "4 weights, 6 ops"
[ -f "$T/nets/init_net.pb" ] && [ -f "$T/nets/predict_net.pb" ] || fail "import-onnx wrote no nets"
expect 0 "$DM" run --init "$T/nets/init_net.pb" --net "$T/nets/predict_net.pb" --input "$IN" &&
  close "import-onnx + run"
expect 0 "$DM" run --net "$M" --input "$IN" && close "run --net tiny.onnx"
expect 0 "$DM" import-onnx "$M" -o "$T/text" --text
[ -f "$T/text/predict_net.pbtxt" ] || fail "import-onnx --text wrote no predict_net.pbtxt"
expect 0 "$DM" inspect "$M" && has out "4  FC 'fc': flat, fc_w, fc_b -> fc" &&
  has out "parameters: 196 in 4 blobs" && has out "inputs to feed: data"
expect 0 "$DM" convert "$M" "$T/tiny.pbtxt" && has tiny.pbtxt 'op_type: "Conv"'
expect 0 "$DM" convert "$T/tiny.pbtxt" "$T/tiny2.onnx"
expect 0 "$DM" run --net "$T/tiny2.onnx" --input "$IN" && close "convert round trip"

# two untranslatable nodes: both listed, nothing written
sed 's/op_type: "Relu"/op_type: "Elu"/; s/op_type: "Softmax"/op_type: "Hardmax"/' \
  "$T/tiny.pbtxt" >"$T/bad.pbtxt"
expect 0 "$DM" convert "$T/bad.pbtxt" "$T/bad.onnx"
expect 1 "$DM" import-onnx "$T/bad.onnx" -o "$T/badnets" &&
  has err "2 of 6 nodes cannot be imported" && has err "node 1 'relu': Elu (domain 'ai.onnx', opset 13)" &&
  has err "node 5 'softmax': Hardmax"
[ -e "$T/badnets/predict_net.pb" ] && fail "a failed import wrote predict_net.pb"
expect 1 "$DM" run --net "$T/bad.onnx" --input "$IN" && has err "Elu"
expect 1 "$DM" run --net "$M" --init "$T/nets/init_net.pb" --input "$IN" &&
  has err "--init is not used with an ONNX model"

# truncated and missing files
head -c 600 "$M" >"$T/cut.onnx"
expect 1 "$DM" import-onnx "$T/cut.onnx" -o "$T/cut" && has err "cut.onnx"
expect 1 "$DM" import-onnx "$T/none.onnx" -o "$T/none" && has err "none.onnx"
expect 2 "$DM" import-onnx "$M"
# --dim: malformed values are usage errors; a name no input's dims carry (tiny.onnx's
# are all values) is refused, naming it, and nothing is written
expect 2 "$DM" import-onnx "$M" -o "$T/dim" --dim N=0 && has err "--dim takes NAME=VALUE"
expect 2 "$DM" import-onnx "$M" -o "$T/dim" --dim N && has err "--dim takes NAME=VALUE"
expect 2 "$DM" import-onnx "$M" -o "$T/dim" --dim =3 && has err "--dim takes NAME=VALUE"
expect 1 "$DM" import-onnx "$M" -o "$T/dim" --dim N=2 &&
  has err "no graph input has a dim named 'N' (the named dims: none)"
[ -e "$T/dim/predict_net.pb" ] && fail "import-onnx --dim N=2 wrote nets"
cli_summary

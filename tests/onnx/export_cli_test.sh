#!/bin/sh
# export_cli_test.sh DEMITASSE SRCDIR: `demitasse export-onnx` end to end without Python:
# models/example's pair exports, imports back (import-onnx) and runs to the answer the
# example ships with (its README's probabilities); a net with untranslatable ops fails
# listing each (index, name, type) and writes nothing, and leaves an older model in place;
# an op with an empty blob name is refused;
# usage errors exit 2.
set -u
DM=$1
SRC=$2
T=$(mktemp -d "${TMPDIR:-/tmp}/dm_onnx_export_XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
. "$SRC/tests/tools/cli_lib.sh"
EX=$SRC/models/example

expect 0 "$DM" export-onnx --init "$EX/init_net.pbtxt" --net "$EX/predict_net.pbtxt" \
  -o "$T/mlp.onnx" --input-shape data=1,4 && has err "4 initializers, 4 nodes, opset 13"
expect 0 "$DM" run --net "$T/mlp.onnx" --input "data=$EX/input.npy" &&
  has out "prob: FLOAT 1x3 [0.559688, 0.224541, 0.215772]"
expect 0 "$DM" import-onnx "$T/mlp.onnx" -o "$T/back" && has err "4 weights, 4 ops"
expect 0 "$DM" inspect "$T/mlp.onnx" && has out "FC 'fc1': data, fc1_w, fc1_b -> fc1"

# two ops without a translation: both listed, and the model written before stays whole
cp "$T/mlp.onnx" "$T/keep.onnx"
sed 's/type: "Relu"/type: "Elu"/; s/type: "Softmax"/type: "Hardmax"/' \
  "$EX/predict_net.pbtxt" >"$T/bad.pbtxt"
expect 1 "$DM" export-onnx --init "$EX/init_net.pbtxt" --net "$T/bad.pbtxt" -o "$T/mlp.onnx" &&
  has err "2 of 4 ops cannot be exported to ONNX" && has err "op 1 'relu1': Elu: no ONNX translation" &&
  has err "op 3 'softmax': Hardmax"
checks=$((checks + 1))
cmp -s "$T/mlp.onnx" "$T/keep.onnx" || fail "a failed export changed the model file"
expect 1 "$DM" export-onnx --net "$EX/predict_net.pbtxt" -o "$T/noinit.onnx" &&
  has err "W 'fc1_w' is not filled by the init net"
[ -e "$T/noinit.onnx" ] && fail "a failed export wrote a file"
# an empty blob name would read as ONNX's "omitted optional output": refused, not written
printf '%s\n' 'op { type: "Relu" input: "x" output: "" }' \
  'op { type: "Relu" input: "" output: "y" }' 'external_input: "x"' 'external_output: "y"' \
  >"$T/empty.pbtxt"
expect 1 "$DM" export-onnx --net "$T/empty.pbtxt" -o "$T/empty.onnx" &&
  { has err "op 0 '': Relu: output 0 has an empty name"
    has err "op 1 '': Relu: input 0 has an empty name"; }
[ -e "$T/empty.onnx" ] && fail "an export with an empty blob name wrote a file"

# usage errors
expect 2 "$DM" export-onnx --init "$EX/init_net.pbtxt" -o "$T/x.onnx" && has err "--net NET is required"
expect 2 "$DM" export-onnx --net "$EX/predict_net.pbtxt" -o "$T/x.onnx" --input-shape data=1,x &&
  has err "NAME=D0,D1"
expect 2 "$DM" export-onnx --net "$EX/predict_net.pbtxt" -o "$T/x.onnx" --input-shape data=1,4:float7 &&
  has err "float7"
expect 2 "$DM" export-onnx --net "$EX/predict_net.pbtxt" -o "$T/x.onnx" --input-shape data=:int32 &&
  has err "NAME=D0,D1"
expect 2 "$DM" export-onnx --net "$EX/predict_net.pbtxt" -o "$T/x.onnx" -s data=1,4 -s data=2,4
expect 0 "$DM" export-onnx --help && has out "--input-shape"
cli_summary

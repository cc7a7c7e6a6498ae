#!/bin/sh
# strict_cli_test.sh DEMITASSE SRCDIR: `import-onnx` on the strictness reproducers of
# tests/data/onnx/strict (made by tests/data/onnx/make_strict.py, which says what each
# is): the models ONNX Runtime refuses fail with the node and the reason named and write
# nothing; the ones that once crashed or tripped UBSan (run this under the sanitizer
# build too) fail cleanly; the folds that once went wrong give ONNX's values.
set -u
DM=$1
SRC=$2
T=$(mktemp -d "${TMPDIR:-/tmp}/dm_onnx_strict_XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
. "$SRC/tests/tools/cli_lib.sh"
S=$SRC/tests/data/onnx/strict

# refused: exit 1, each TEXT in the message, no nets written
refused() {
  m=$1
  shift
  expect 1 "$DM" import-onnx "$S/$m.onnx" -o "$T/$m" || return
  for t in "$@"; do has err "$t"; done
  checks=$((checks + 1))
  [ -e "$T/$m/predict_net.pb" ] && fail "$m: a refused import wrote predict_net.pb"
}

# imported: the text pair in $T/M, whose init net must fill VALUES (their text, squeezed)
values() {
  expect 0 "$DM" import-onnx "$S/$1.onnx" -o "$T/$1" --text || return
  checks=$((checks + 1))
  tr -d ' \n' <"$T/$1/init_net.pbtxt" | grep -qF "output:\"$2\"type:\"GivenTensorFill\"arg{name:\"shape\"ints:$3}arg{name:\"values\"$4}" ||
    fail "$1: the init net does not fill $2 with $4"
}

# crashes before: a 1-byte buffer read as 4, strcmp(NULL)
refused cos_no_dtype "node 0 'cos': ConstantOfShape" "a value with no data_type"
refused nameless_input "graph input 1 has no name"
# folds: exact int64, or not at all
values range_exact vf 3 "floats:0floats:1floats:2"
values slice_extreme_steps vf 2 "floats:0floats:9"
refused range_overflow "node 0 'range': Range" "not folded: limit - start" "overflows int64"
# not SSA, no outputs
refused ssa_input "node 1 (Relu 'relu2'): output 0 'x' is already written by graph input 0"
refused ssa_init "output 0 'w' is already written by initializer 0"
refused ssa_twice "output 0 'r' is already written by output 0 of node 0"
refused no_outputs "the graph has no outputs"
# an op's own checks refuse the node at import, not at run
refused conv_stride0 "node 0 'conv': Conv" "stride 0 is out of range"
refused conv_kernel0 "node 0 'conv': Conv" "kernel 0 is out of range"
refused pool_huge_pads "node 0 'pool': MaxPool" "pads 1048576"
refused transpose_perm00 "node 0 'tr': Transpose" "not a permutation"
refused reduce_axis_oor "node 0 'mean': ReduceMean" "axes 5 is out of range"
refused gather_oob "node 0 'gather': Gather" "index 5 (indices[0]) is out of range for axis 0 of size 3"
refused reshape_huge "node 0 'reshape': Reshape" "overflows 64 bits"
# the Conv no kernel runs is named, and the Resizes after it say where their unknown
# input comes from
refused depthwise_dilated "node 0 'dwconv': Conv" "dilation 2x2 needs group 1" \
  "node 1 'up1': Resize" "(input 'c' is from a refused node)"
# sizes folded to a constant, X a Conv's output: its inferred shape confirms N and C
expect 0 "$DM" import-onnx "$S/resize_folded_sizes.onnx" -o "$T/resize" --text &&
  has resize/predict_net.pbtxt 'type: "ResizeNearest"'
# 1090 refusals: whole lines within the message, the count of the rest, the verdict last
if refused many_refused "1090 of 1090 nodes cannot be imported" "node 0 'f0': Frob"; then
  checks=$((checks + 1))
  listed=$(grep -c "^  node [0-9]* 'f[0-9]*': Frob (domain 'com.example', opset 13): domain 'com.example' is not supported$" "$T/err")
  [ "$listed" -gt 5 ] && grep -qx "  \.\.\. and $((1090 - listed)) more" "$T/err" ||
    fail "many_refused: $listed whole lines listed, then no '... and $((1090 - listed)) more'"
  checks=$((checks + 1))
  [ "$(tail -n 1 "$T/err")" = "nothing was written or run" ] ||
    fail "many_refused: the message does not end with 'nothing was written or run'"
fi
cli_summary

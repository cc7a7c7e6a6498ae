#!/bin/sh
# cli_test.sh: end-to-end checks of the `demitasse` CLI: --help everywhere, exit code 2
# on bad usage, `info`, byte-exact .pb -> .pbtxt -> .pb, `inspect` and its DOT graph,
# `run` on models/example (checked against NumPy's forward pass when NumPy is there),
# and the messages for a missing input blob, a malformed .npy and --device cuda.
#
# usage: cli_test.sh DEMITASSE SOURCE_ROOT [PYTHON_WITH_NUMPY]
set -u
DM=$1
SRC=$2
PY=${3:-}
T=$(mktemp -d "${TMPDIR:-/tmp}/dm_cli_XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/cli_lib.sh"

EX=$SRC/models/example
SQ=$SRC/tests/data/squeezenet_predict_net.pb

# --help on the tool and on every subcommand
expect 0 "$DM" --help && has out "usage: demitasse <command>"
for cmd in run convert inspect info ops; do
  expect 0 "$DM" "$cmd" --help && has out "usage: demitasse $cmd"
  expect 0 "$DM" "$cmd" -h && has out "usage: demitasse $cmd"
done
expect 0 "$DM" --version && has out "demitasse "

# bad usage: exit 2 with a hint
expect 2 "$DM"
expect 2 "$DM" frobnicate && has err "unknown command 'frobnicate'"
expect 2 "$DM" run && has err "--net is required"
expect 2 "$DM" run --net x --bogus && has err "'--bogus'"
expect 2 "$DM" run --net x --iters 0 && has err "--iters wants a positive integer"
expect 2 "$DM" run --net x --input data && has err "--input wants NAME=FILE.npy"
expect 2 "$DM" run --net x --device tpu && has err "--device wants cpu or cuda"
expect 2 "$DM" run --net x extra && has err "unexpected argument 'extra'"
expect 2 "$DM" convert onlyone && has err "wants two files"
expect 2 "$DM" convert --type Nope a b && has err "unknown --type 'Nope'"
expect 2 "$DM" convert --to yaml a b && has err "--to wants text or binary"
expect 2 "$DM" inspect && has err "wants one net file"
expect 2 "$DM" info extra
expect 2 "$DM" ops --nope
has err "Try 'demitasse ops --help'"

# info mentions the CUDA status either way
expect 0 "$DM" info --no-selftest && has out "demitasse " && has out "CPU features:" &&
  has out "BLAS:" && has out "OpenMP:" && has out "CUDA"
if grep -q "built without CUDA" "$T/out"; then
  cuda=none
elif grep -q "^GPUs: 0" "$T/out"; then
  cuda=nogpu
  has out "cuDNN: " && has out "cuBLAS: " && has out "NCCL: " && has out "no usable GPU"
else
  cuda=gpu
fi

# --device cuda without a GPU fails with the reason
if [ "$cuda" != gpu ]; then
  expect 1 "$DM" run --net "$EX/predict_net.pbtxt" --device cuda && has err "demitasse: --device cuda: "
fi

# convert: .pb -> .pbtxt -> .pb is byte-identical; text to stdout
expect 0 "$DM" convert "$SQ" "$T/sq.pbtxt" && has sq.pbtxt 'type: "Conv"'
expect 0 "$DM" convert "$T/sq.pbtxt" "$T/sq.pb"
checks=$((checks + 1))
cmp -s "$SQ" "$T/sq.pb" || fail "convert .pb -> .pbtxt -> .pb is not byte-identical"
expect 0 "$DM" convert --to binary "$T/sq.pbtxt" "$T/sq2.bin"
checks=$((checks + 1))
cmp -s "$SQ" "$T/sq2.bin" || fail "convert --to binary is not byte-identical"
expect 0 "$DM" convert "$SQ" - && has out 'external_output: "softmaxout"'
expect 1 "$DM" convert "$T/missing.pb" "$T/x.pbtxt" && has err "demitasse: " && has err "missing.pb"

# inspect: ops, blobs, externals, parameters, DOT
expect 0 "$DM" inspect "$SQ" --dot "$T/sq.dot" && has out "66 ops" &&
  has out "0  Conv: data, conv1_w, conv1_b -> conv1" && has out "external outputs (1): softmaxout"
has sq.dot "digraph" && has sq.dot "shape=box" && has sq.dot "shape=ellipse"
expect 0 "$DM" inspect "$EX/predict_net.pbtxt" --init "$EX/init_net.pbtxt" &&
  has out "parameters: 67 in 4 blobs" && has out "inputs to feed: data" &&
  has out "1  Relu 'relu1': fc1 -> fc1"

# run the shipped example: a probability vector
expect 0 "$DM" run --init "$EX/init_net.pbtxt" --net "$EX/predict_net.pbtxt" \
  --input "data=$EX/input.npy" && has out "prob: FLOAT 1x3 [" && has out "once: " &&
  has out "setup included"
expect 0 "$DM" run --init "$EX/init_net.pbtxt" --net "$EX/predict_net.pbtxt" \
  --input "data=$EX/input.npy" --output "prob=$T/prob.npy" --iters 3 && has out "ran 'mlp_example' 3 times" &&
  has out "ms/iter" && has out "over the 2 after the first"
if [ -n "$PY" ] && "$PY" -c "import numpy" 2>/dev/null; then
  checks=$((checks + 1))
  "$PY" - "$T/prob.npy" "$EX/expected_prob.npy" <<'PYEOF' || fail "prob differs from NumPy's forward pass"
import sys
import numpy as np
got, want = np.load(sys.argv[1]), np.load(sys.argv[2])
# float32 FC/Softmax vs a float64 reference of a 4-8-3 net: a few float32 ulps
ok = got.dtype == np.float32 and got.shape == want.shape and np.allclose(got, want, rtol=1e-5, atol=1e-7)
print("prob", got, "expected", want)
sys.exit(0 if ok else 1)
PYEOF
else
  echo "note: no NumPy; the example's values are not compared"
fi

# a missing input blob names the blob and the op, and the fix
expect 1 "$DM" run --init "$EX/init_net.pbtxt" --net "$EX/predict_net.pbtxt" &&
  has err "demitasse: " && has err "'data'" && has err "op 0 (FC" && has err " 'fc1')" &&
  has err "the net reads 'data', which the init net does not make: feed it (--input data=FILE.npy)"
# a misspelt --input is refused before anything runs, listing the inputs to feed
expect 1 "$DM" run --init "$EX/init_net.pbtxt" --net "$EX/predict_net.pbtxt" --input "dta=$EX/input.npy" &&
  has err "--input 'dta': the net has no blob 'dta'; the inputs to feed are: data"
# weights without an init net: "pass --init"
expect 1 "$DM" run --net "$EX/predict_net.pbtxt" --input "data=$EX/input.npy" &&
  has err "pass --init with the net's init net"

# a malformed .npy input says which input, which file and what is wrong
printf '\223NUMPY\001\000\077\000{'"'"'descr'"'"': '"'"'<f4'"'"', '"'"'fortran_order'"'"': False, '"'"'shape'"'"': (1, 4), }   \n0123456789' >"$T/bad.npy"
expect 1 "$DM" run --net "$EX/predict_net.pbtxt" --input "data=$T/bad.npy" &&
  has err "demitasse: input 'data': $T/bad.npy: header says shape (1, 4) of <f4 = 16 bytes but the file holds 10"
printf 'not numpy' >"$T/junk.npy"
expect 1 "$DM" run --net "$EX/predict_net.pbtxt" --input "data=$T/junk.npy" && has err "not a .npy file"

# an unreadable net file
expect 1 "$DM" run --net "$T/none.pbtxt" && has err "demitasse: " && has err "none.pbtxt"

cli_summary

#!/bin/sh
# plugin_passes_test.sh: a plugin op (Swish, tests/plugins/swish_plugin.c: precision
# class FOLLOW, CPU kernels for FLOAT and FLOAT16, CUDA kernels whose supports() takes
# beta = 1 only) goes through the passes exactly like a built-in one.
#   precision: `rewrite --grad --optimizer momentum --fp16` of a training net with two
#     Swish ops paints them as the same net with Relu in their place (the same ops, casts
#     and FP16 count): FOLLOW after an FP16 FC, no cast of its own.
#   device (needs the plugin's CUDA kernels, i.e. a build with nvcc; no GPU needed, the
#     device pass only asks the registry): with --device cuda the beta = 1 Swish and its
#     gradient are on CUDA, the beta = 2 ones on the CPU with the kernel's reason.
# usage: plugin_passes_test.sh demitasse swish_plugin.so precision|device HAS_CUDA(0|1)
set -u
exe=$1 swish=$2 mode=$3 has_cuda=$4
if [ "$mode" = device ] && [ "$has_cuda" != 1 ]; then
  echo "SKIP: this build has no nvcc, so the plugin has no CUDA kernels to place"
  exit 77
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

net() { # $1: the activation type, $2: its extra argument (the second one)
  cat <<NET
name: "act_net"
op { input: "data" input: "fc1_w" input: "fc1_b" output: "fc1" type: "FC" }
op { input: "fc1" output: "a1" type: "$1" }
op { input: "a1" input: "fc2_w" input: "fc2_b" output: "fc2" type: "FC" }
op { input: "fc2" output: "a2" type: "$1" $2 }
op { input: "a2" input: "fc3_w" input: "fc3_b" output: "pred" type: "FC" }
op { input: "pred" input: "label" output: "softmax" output: "loss" type: "SoftmaxWithLoss" }
external_input: "data"
external_input: "label"
external_output: "loss"
NET
}
net Swish 'arg { name: "beta" f: 2 }' > "$tmp/swish.pbtxt"
net Relu '' > "$tmp/relu.pbtxt"

# One line per op: type, inputs, outputs, and @cuda for an op on the GPU.
ops() {
  awk '/^op {/ { t = ""; io = ""; dev = "@cpu" }
       /^  type:/ { t = $2 }
       /^  (input|output):/ { io = io " " $1 $2 }
       /^    device_type: 1/ { dev = "@cuda" }
       /^}/ && t != "" { print t io " " dev; t = "" }' "$1" | tr -d '"'
}

rewrite() { # $1: net, $2: out, then flags
  n=$1 o=$2
  shift 2
  "$exe" rewrite --plugin "$swish" --grad --loss loss --optimizer momentum --fp16 "$@" "$n" \
    --init-out "$o.init" > "$o" 2> "$o.err" || { cat "$o.err"; fail "rewrite $*"; }
}

if [ "$mode" = precision ]; then
  rewrite "$tmp/swish.pbtxt" "$tmp/s.pbtxt"
  rewrite "$tmp/relu.pbtxt" "$tmp/r.pbtxt"
  ops "$tmp/s.pbtxt" | sed 's/SwishGradient/ReluGradient/; s/Swish/Relu/' > "$tmp/s.ops"
  ops "$tmp/r.pbtxt" > "$tmp/r.ops"
  # The same op types in the same order (casts included); names differ where
  # ReluGradient reads Y and SwishGradient X.
  cut -d' ' -f1 "$tmp/s.ops" > "$tmp/s.types"
  cut -d' ' -f1 "$tmp/r.ops" > "$tmp/r.types"
  diff "$tmp/r.types" "$tmp/s.types" || fail "Swish is not painted as Relu (op types differ)"
  grep -q '^mixed precision: ' "$tmp/s.pbtxt.err" || fail "no mixed-precision summary"
  a=$(grep '^mixed precision: ' "$tmp/s.pbtxt.err") b=$(grep '^mixed precision: ' "$tmp/r.pbtxt.err")
  [ "$a" = "$b" ] || fail "summaries differ: '$a' vs '$b'"
  grep -q 'Swish' "$tmp/s.pbtxt.err" && fail "a Swish op is reported FP32: $(cat "$tmp/s.pbtxt.err")"
  # Both Swish ops read the FP16 FC outputs directly: no cast between FC and Swish.
  grep -q '^Relu input:fc1 output:a1 ' "$tmp/s.ops" || fail "Swish 1 not on fc1: $(cat "$tmp/s.ops")"
  grep -q '^Relu input:fc2 output:a2 ' "$tmp/s.ops" || fail "Swish 2 not on fc2: $(cat "$tmp/s.ops")"
  grep -q '^HalfToFloat' "$tmp/s.ops" || fail "no FP16 at all?"
  echo "ok: Swish painted like Relu ($a)"
  exit 0
fi

rewrite "$tmp/swish.pbtxt" "$tmp/s.pbtxt" --device cuda
ops "$tmp/s.pbtxt" > "$tmp/s.ops"
grep -q '^Swish input:fc1 output:a1 @cuda$' "$tmp/s.ops" || fail "Swish (beta 1) not on CUDA"
grep -q '^Swish input:fc2_cpu output:a2 @cpu$' "$tmp/s.ops" ||
  fail "Swish (beta 2) not on the CPU reading a copy: $(cat "$tmp/s.ops")"
grep -q '^SwishGradient input:fc1 input:a1_grad output:fc1_grad @cuda$' "$tmp/s.ops" ||
  fail "SwishGradient (beta 1) not on CUDA: $(cat "$tmp/s.ops")"
grep -q '^SwishGradient .*@cpu$' "$tmp/s.ops" || fail "SwishGradient (beta 2) not on the CPU"
grep -q '^CopyGPUToCPU input:fc2 output:fc2_cpu' "$tmp/s.ops" || fail "no copy of fc2 to the host"
grep -Eq '^  op [0-9]+ \(Swish\) CPU: the CUDA Swish implements beta = 1 only$' "$tmp/s.pbtxt.err" ||
  fail "no reason for the CPU Swish: $(cat "$tmp/s.pbtxt.err")"
grep -Eq '^  op [0-9]+ \(SwishGradient\) CPU: the CUDA Swish implements beta = 1 only$' \
  "$tmp/s.pbtxt.err" || fail "no reason for the CPU SwishGradient"
# The placed net reads back with the plugin (and is left as it is: already placed).
"$exe" rewrite --plugin "$swish" --device cuda "$tmp/s.pbtxt" > "$tmp/again.pbtxt" 2>&1 ||
  fail "the placed net does not read back: $(cat "$tmp/again.pbtxt")"
echo "ok: Swish on CUDA where its kernel supports it, on the CPU (with the reason) where not"

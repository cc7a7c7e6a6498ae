#!/bin/sh
# torchvision_ort.sh DEMITASSE SRCDIR: runs torchvision_ort.py (ResNet-18, SqueezeNet 1.1
# and a small net of the other translated ops, through import-onnx + run, against ONNX
# Runtime) with a Python that has torch, torchvision and onnxruntime: $DM_ONNX_PYTHON,
# else the venv bench/cpu_infer.sh makes (SRCDIR/bench/.venv: Debian's torch plus PyPI's
# onnxruntime). Exits 77 (skipped) when there is none; the test installs nothing itself.
exe=$1 src=$2
py=${DM_ONNX_PYTHON:-$src/bench/.venv/bin/python}
if [ ! -x "$py" ] || ! "$py" -c 'import torch, torchvision, onnxruntime' 2>/dev/null; then
  echo "skipped: no python with torch, torchvision and onnxruntime (run bench/cpu_infer.sh" \
       "once to make bench/.venv, or set DM_ONNX_PYTHON)"
  exit 77
fi
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
"$py" "$src/tests/onnx/torchvision_ort.py" "$exe" "$work" resnet18 squeezenet1_1 opsnet

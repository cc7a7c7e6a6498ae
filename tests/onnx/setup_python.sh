#!/bin/sh
# setup_python.sh [SRCDIR]: makes the Python the ONNX tests use (tests/onnx/with_python.sh):
# bench/.venv, a venv that sees Debian's python3-torch, python3-torchvision and
# python3-numpy, with PyPI's onnx and onnxruntime installed in it (the same venv
# bench/cpu_infer.sh makes). Idempotent. Never fails the caller: where a package cannot
# be had it says so and returns 0, and the tests that need it skip (exit 77).
src=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
venv=$src/bench/.venv
sys_py=/usr/bin/python3
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! $sys_py -c 'import torch, torchvision, numpy, venv, ensurepip' 2>/dev/null; then
  SUDO=
  [ "$(id -u)" = 0 ] || SUDO=sudo
  echo "setup_python: installing python3-torch, python3-torchvision, python3-numpy and" \
       "python3-venv from Debian (some 1 GB; minutes)"
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
      --no-install-recommends python3-torch python3-torchvision python3-numpy python3-venv; } \
    >"$log" 2>&1 || { tail -5 "$log"; echo "setup_python: apt-get failed; the ONNX Python tests will skip"; exit 0; }
fi
[ -x "$venv/bin/python" ] || $sys_py -m venv --system-site-packages "$venv" >"$log" 2>&1 ||
  { tail -5 "$log"; echo "setup_python: no venv; the ONNX Python tests will skip"; exit 0; }
# numpy<2: Debian's torch is built against NumPy 1.x; keep pip from bringing 2.x.
"$venv/bin/python" -c 'import onnx, onnxruntime' 2>/dev/null ||
  echo "setup_python: installing onnx and onnxruntime from PyPI into $venv"
"$venv/bin/python" -c 'import onnx, onnxruntime' 2>/dev/null ||
  "$venv/bin/python" -m pip install -q onnxruntime onnx 'numpy<2' >"$log" 2>&1 ||
  { tail -5 "$log"; echo "setup_python: pip failed; the ONNX Python tests will skip"; exit 0; }
echo "setup_python: $venv ready (torch, torchvision, onnx, onnxruntime)"

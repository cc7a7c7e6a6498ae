#!/bin/sh
# with_python.sh MODULES SRCDIR SCRIPT ARGS...: runs tests/onnx/SCRIPT with a Python that
# can import every module in MODULES (comma-separated): $DM_ONNX_PYTHON, else the venv
# bench/cpu_infer.sh makes (SRCDIR/bench/.venv: Debian's torch and numpy plus PyPI's
# onnx and onnxruntime; test.sh makes it with tests/onnx/setup_python.sh). Exits 77
# (skipped) when there is none; installs nothing itself.
# A scratch folder is the script's first argument after the demitasse binary.
mods=$1 src=$2 script=$3
shift 3
py=${DM_ONNX_PYTHON:-$src/bench/.venv/bin/python}
if [ ! -x "$py" ] || ! "$py" -c "import $mods" 2>/dev/null; then
  echo "skipped: no python that imports $mods (run tests/onnx/setup_python.sh once to" \
       "make bench/.venv, or set DM_ONNX_PYTHON)"
  exit 77
fi
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
exe=$1
shift
"$py" "$src/tests/onnx/$script" "$exe" "$work" "$@"

#!/bin/sh
# test.sh: sets up and runs every test: a warnings-as-errors build (with the CUDA backend
# compiled and linked where nvcc exists) and its suite; the same suite under
# AddressSanitizer + UndefinedBehaviorSanitizer; and a short libFuzzer run of each fuzz
# target (every loader, and random nets), one test each. Ends with one line:
# "N passed, N failed, N skipped". The oneDNN engine (the default where libdnnl is
# found) is on in the plain and sanitizer builds, and off in a second plain build that
# runs the same suite on the reference kernels.
#   ./test.sh            everything (what CI runs)
#   ./test.sh --quick    the plain suite only
# FUZZ_SECONDS (default 60) sets the length of each fuzzing run.
set -u
cd "$(dirname "$0")"
./setup.sh || exit 1
# The ONNX tests' Python (torch and torchvision from Debian, onnx and onnxruntime from
# PyPI, in bench/.venv); without it those tests skip.
sh tests/onnx/setup_python.sh "$(pwd)"
quick=0
[ "${1:-}" = "--quick" ] && quick=1
results=$(mktemp)
trap 'rm -f "$results"' EXIT

# Runs one meson build + suite; appends "passed failed skipped" to $results.
suite() { # name builddir meson-setup-args...
  name=$1 dir=$2
  shift 2
  echo "== $name"
  if [ ! -d "$dir" ]; then
    meson setup "$dir" "$@" >"$dir.setup.log" 2>&1 || { cat "$dir.setup.log"; echo "1 0 0" >>"$results"; return; }
  fi
  if ! ninja -C "$dir" >"$dir.build.log" 2>&1; then
    tail -50 "$dir.build.log"; echo "build failed: $name"; echo "0 1 0" >>"$results"; return
  fi
  meson test -C "$dir" --print-errorlogs --num-processes 2 ${TEST_ARGS:-}
  python3 tools/summarize_tests.py "$dir/meson-logs/testlog.json" >>"$results"
}

# The Python package's pytest suite (python/tests) on a build's package folder
# (<builddir>/python imports uninstalled), with the interpreter it was built for; its
# counts join the others (pytest's JUnit XML). Without pytest, or in a build without the
# package (no python3-dev or NumPy), one skipped, never passed.
pysuite() { # builddir
  echo "== Python package (pytest on $1/python)"
  py=$(cat "$1/python/interpreter" 2>/dev/null)
  if [ -z "$py" ] || ! ls "$1"/python/demitasse/_C*.so >/dev/null 2>&1; then
    echo "skipped: $1 has no Python package (meson's summary says why)"; echo "0 0 1" >>"$results"; return
  fi
  if ! "$py" -c "import pytest" 2>/dev/null; then
    echo "skipped: $py has no pytest (python3-pytest)"; echo "0 0 1" >>"$results"; return
  fi
  rm -f "$1/pytest.xml"
  PYTHONPATH="$1/python" OMP_WAIT_POLICY=PASSIVE "$py" -m pytest -q -p no:cacheprovider \
    --junitxml="$1/pytest.xml" python/tests
  if [ -f "$1/pytest.xml" ]; then
    python3 tools/summarize_tests.py "$1/pytest.xml" >>"$results"
  else
    echo "pytest wrote no results"; echo "0 1 0" >>"$results"
  fi
}

cuda=auto
command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ] || cuda=disabled
suite "build (-Werror, cuda=$cuda)" build-ci -Dwerror=true -Dcuda=$cuda
pysuite build-ci
if [ $quick -eq 0 ]; then
  # The kernels' and nets' suites again with oneDNN capped below this CPU: at AVX2 (an
  # AMD Zen 3: no AVX-512, so oneDNN 2.6 builds no BFLOAT16 primitive and the reference
  # kernels take those ops) and at AVX512_CORE (the oldest ISA it runs BFLOAT16 on), so
  # one machine checks the engine choices of the others. On a CPU below a cap, the cap
  # changes nothing.
  ONEDNN_MAX_CPU_ISA=AVX2 TEST_ARGS="--suite operators --suite net --suite models" \
    suite "build-ci, oneDNN capped at AVX2" build-ci
  ONEDNN_MAX_CPU_ISA=AVX512_CORE TEST_ARGS="--suite operators" \
    suite "build-ci, oneDNN capped at AVX512_CORE" build-ci
  # The same suite on the reference kernels alone: a build without oneDNN, as on a
  # machine without libdnnl (where the oneDNN engine is the default, every op that names
  # no engine runs on it in the build above).
  suite "build without oneDNN (reference engine)" build-ref -Dwerror=true -Dcuda=disabled \
    -Ddnnl=disabled
  # CUDA stays out of the sanitizer build: ASan and the CUDA runtime's memory mappings
  # do not mix, and there is no GPU to exercise here anyway.
  # Sanitized code runs several times slower: stretch the per-test timeouts.
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  TEST_ARGS="--timeout-multiplier 10" \
    suite "ASan+UBSan" build-asan -Dwerror=true -Dcuda=disabled \
      -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug
  echo "== fuzzing (${FUZZ_SECONDS:-60} s per target)"
  if [ ! -d build-fuzz ]; then
    CC=clang meson setup build-fuzz -Dfuzzers=true -Dwerror=true -Dcuda=disabled -Dbuildtype=debug >/dev/null 2>&1
  fi
  if ninja -C build-fuzz >build-fuzz.log 2>&1 && [ -x fuzz/run.sh ]; then
    # Each target that runs clean counts as one passed test, each that does not as one
    # failed (run.sh prints a PASS or FAIL line per target); a run.sh that fails
    # without naming a target (no targets built) is one failure.
    fuzz/run.sh build-fuzz "${FUZZ_SECONDS:-60}" >build-fuzz/fuzz-run.log 2>&1
    rc=$?
    cat build-fuzz/fuzz-run.log
    fp=$(grep -c '^PASS fuzz_' build-fuzz/fuzz-run.log)
    ff=$(grep -c '^FAIL fuzz_' build-fuzz/fuzz-run.log)
    [ $rc -ne 0 ] && [ "$ff" -eq 0 ] && ff=1
    echo "$fp $ff 0" >>"$results"
  else
    tail -30 build-fuzz.log; echo "0 1 0" >>"$results"
  fi
fi
awk '{p+=$1; f+=$2; s+=$3} END {printf "%d passed, %d failed, %d skipped\n", p, f, s; exit (f > 0)}' "$results"

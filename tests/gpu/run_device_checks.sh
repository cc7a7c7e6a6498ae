#!/bin/sh
# run_device_checks.sh: the one script to run on a GPU machine (no network): the 'gpu'
# test suite, then the rest of the suite, then the GPU benchmark, with stage time limits
# that keep the whole run under 8 minutes (DEVICE_BUDGET_S, default 440 s; each stage
# may overrun by the 10 s its kill grace allows). A summary is
# printed last and saved; at most 6 files land in OUTDIR (the device tool returns 8):
#   env.txt        nvidia-smi, the CUDA libraries found, LD_LIBRARY_PATH, ldd, `demitasse info`
#   build.txt      packed: the unpacking and path mapping; else meson setup + ninja logs
#   test-gpu.txt   meson test --suite gpu, then its testlog.txt
#   test-rest.txt  meson test --no-suite gpu (every other test), then its testlog.txt
#   bench.txt      bench/gpu_resnet50.sh
#   summary.txt    what this script prints at the end
#
# Two modes:
#  - packed (build-gpu/.packed exists: tests/gpu/pack_for_device.sh made build-gpu on a
#    machine with the -dev packages; see tests/gpu/README.md): nothing is configured or
#    built. pack.tar.xz is unpacked; the programs find the project's libraries in
#    build-gpu/devlibs and the CUDA ones in whatever directories of this machine hold
#    them (LD_LIBRARY_PATH); tests run with the meson that configured the build
#    (build-gpu/devtools/meson.py: `meson test` refuses a build dir of another meson
#    version). The test setup holds the absolute repo root of the packing machine;
#    where this checkout lives elsewhere, that path is made a symbolic link to it (or,
#    if it exists and is something else, the paths in the test setup are rewritten).
#  - source (no .packed): configures build-gpu with CUDA required (or reuses it) and
#    builds, which needs this project's build dependencies (setup.sh).
# usage (from anywhere in the checkout): tests/gpu/run_device_checks.sh OUTDIR
set -u
out=${1:?usage: tests/gpu/run_device_checks.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd -P) || exit 1
cd "$(dirname "$0")/../.." || exit 1
here=$(pwd -P)
bd=build-gpu
t0=$(date +%s)
budget=${DEVICE_BUDGET_S:-440}
step() { printf '== %s (%ss)\n' "$1" "$(( $(date +%s) - t0 ))"; }
# limit CAP RESERVE: CAP seconds, less if fewer than RESERVE would be left for later stages.
limit() {
  l=$(( budget - ($(date +%s) - t0) - $2 ))
  [ "$l" -gt "$1" ] && l=$1
  [ "$l" -lt 20 ] && l=20
  echo "$l"
}
# Appends a file (a meson testlog) to a log, at most 8 MiB of it.
append() { [ -f "$1" ] && { printf '\n===== %s =====\n' "$1"; head -c 8388608 "$1"; } >> "$2"; }

env_txt="$out/env.txt" build_txt="$out/build.txt"
{ echo "== nvidia-smi"; nvidia-smi 2>&1 || echo "nvidia-smi failed"; } > "$env_txt"
: > "$build_txt"
packed=0
[ -f "$bd/.packed" ] && packed=1
meson_cmd=meson

if [ "$packed" -eq 1 ]; then
  step "unpack (packed build)"
  root=$(sed -n 's/^root=//p' "$bd/.packed")
  { echo "== $bd/.packed"; cat "$bd/.packed"; echo "== this checkout: $here"; } >> "$build_txt"
  if [ -f "$bd/pack.tar.xz" ]; then
    unpacked=$(mktemp)
    if command -v xz > /dev/null; then
      xz -dc "$bd/pack.tar.xz" | tar -xvf - -C "$bd" > "$unpacked"
    else
      python3 -c 'import sys, tarfile; t = tarfile.open(sys.argv[1]); t.extractall(sys.argv[2]); print("\n".join(t.getnames()))' "$bd/pack.tar.xz" "$bd" > "$unpacked"
    fi 2>> "$build_txt" || { tail -n 20 "$build_txt"; echo "SUMMARY: unpacking $bd/pack.tar.xz failed"; exit 1; }
    echo "unpacked $bd/pack.tar.xz ($(wc -l < "$unpacked") entries)" >> "$build_txt"
  else
    echo "no $bd/pack.tar.xz: using the programs already in $bd" >> "$build_txt"
  fi
  # meson: the copy that configured the build, with a python3 that can run it.
  meson_cmd=""
  for py in python3 /opt/torch/.venv/bin/python3 /usr/bin/python3; do
    if v=$("$py" "$bd/devtools/meson.py" --version 2>> "$build_txt"); then
      meson_cmd="$py $bd/devtools/meson.py"; echo "meson $v: $meson_cmd" >> "$build_txt"; break
    fi
  done
  if [ -z "$meson_cmd" ]; then
    meson_cmd=meson
    echo "the packed meson does not run; trying '$(command -v meson)' (another version refuses the build dir)" >> "$build_txt"
  fi
  # The packing machine's absolute root, which the test setup and some test programs hold.
  if [ -n "$root" ] && [ "$root" != "$here" ]; then
    if [ ! -e "$root" ] && [ ! -L "$root" ] && mkdir -p "$(dirname "$root")" 2>> "$build_txt" &&
       ln -s "$here" "$root" 2>> "$build_txt"; then
      echo "path: made $root a link to $here" >> "$build_txt"
    elif [ "$(cd "$root" 2>/dev/null && pwd -P)" = "$here" ]; then
      echo "path: $root already leads here" >> "$build_txt"
    else
      echo "path: $root exists and is not this checkout: rewriting it to $here in the test setup" >> "$build_txt"
      py=${meson_cmd%% *}
      [ "$meson_cmd" = meson ] && py=python3
      "$py" - "$here/$bd" "$root" "$here" >> "$build_txt" 2>&1 <<'EOF'
import os, pickle, sys
bd, old, new = sys.argv[1:4]
sys.path.insert(0, os.path.join(bd, 'devtools'))
import mesonbuild.mtest  # noqa: F401 (the classes the pickles name)
def fix(o, depth=0):
    if isinstance(o, str):
        return o.replace(old, new)
    if isinstance(o, list):
        return [fix(x, depth) for x in o]
    if isinstance(o, tuple):
        return tuple(fix(x, depth) for x in o)
    if isinstance(o, dict):
        return {k: fix(v, depth) for k, v in o.items()}
    if hasattr(o, '__dict__') and not callable(o) and depth < 4:
        for k, v in list(vars(o).items()):
            setattr(o, k, fix(v, depth + 1))
    return o
for name in ('meson_test_setup.dat', 'meson_benchmark_setup.dat'):
    f = os.path.join(bd, 'meson-private', name)
    with open(f, 'rb') as fh:
        objs = pickle.load(fh)
    with open(f, 'wb') as fh:
        pickle.dump(fix(objs), fh)
    print('rewrote', f)
EOF
      echo "(programs that hold $root compiled in, such as test_op_db_input, still use it)" >> "$build_txt"
    fi
  fi
  # The CUDA libraries: every directory holding one of them, in this order.
  site=""
  for py in /opt/torch/.venv/bin/python3 python3; do
    site=$("$py" -c 'import nvidia, os; print(os.path.dirname(list(nvidia.__path__)[0]))' 2>/dev/null) && [ -n "$site" ] && break
    site=""
  done
  dirs="/usr/local/cuda/lib64 $(echo /usr/local/cuda/targets/*/lib) /usr/lib/x86_64-linux-gnu"
  [ -n "$site" ] && dirs="$dirs $(echo "$site"/nvidia/*/lib)"
  cuda_path="" missing=""
  {
    echo "== CUDA libraries (python site-packages: ${site:-none found})"
    for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2 libnvrtc.so.13 libnvJitLink.so.13; do
      found=""
      for d in $dirs; do
        [ -e "$d/$lib" ] || continue
        d=$(cd "$d" && pwd -P)  # targets/x86_64-linux/lib is often lib64 under another name
        case " $found " in *" $d "*) continue ;; esac
        found="$found $d"
        case ":$cuda_path:" in *":$d:"*) ;; *) cuda_path="${cuda_path:+$cuda_path:}$d" ;; esac
      done
      echo "$lib:${found:- MISSING}"
      case "$lib" in libnvrtc*|libnvJitLink*) ;; *) [ -n "$found" ] || missing="$missing $lib" ;; esac
    done
  } >> "$env_txt"
  ldp="$here/$bd/devlibs${cuda_path:+:$cuda_path}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # devlibs/base (libgomp, libgfortran, libquadmath, libz): only where this machine lacks
  # one, or its own is too old for the programs.
  need_base=""
  for f in "$bd"/devlibs/base/*; do
    [ -e "$f" ] || continue
    n=$(basename "$f")
    LD_LIBRARY_PATH=$ldp ldd "$bd/tools/demitasse" "$bd/tests/gpu/test_gpu_ops" 2>/dev/null |
      grep -q "^[[:space:]]*$n => not found" && need_base="$need_base $n"
  done
  if [ -z "$need_base" ] && LD_LIBRARY_PATH=$ldp "$bd/tools/demitasse" info 2>&1 | grep -q "version .* not found"; then
    need_base=" (a system copy is too old)"
  fi
  [ -n "$need_base" ] && ldp="$here/$bd/devlibs:$here/$bd/devlibs/base${cuda_path:+:$cuda_path}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export LD_LIBRARY_PATH="$ldp"
  {
    echo "devlibs/base used: ${need_base:-no (the system has them)}"
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    echo "== ldd $bd/tests/gpu/test_gpu_ops"; ldd "$bd/tests/gpu/test_gpu_ops" 2>&1
  } >> "$env_txt"
  [ -n "$missing" ] && echo "CUDA libraries not found on this machine:$missing (see $env_txt)"
else
  step "configure"
  if [ -f "$bd/build.ninja" ]; then
    meson setup --reconfigure "$bd" -Dcuda=enabled --buildtype=release > "$out/setup.log" 2>&1
  else
    meson setup "$bd" -Dcuda=enabled --buildtype=release > "$out/setup.log" 2>&1
  fi
  setup_rc=$?
  { echo "== meson setup (rc $setup_rc)"; cat "$out/setup.log"; } >> "$build_txt"; rm -f "$out/setup.log"
  [ "$setup_rc" -eq 0 ] || { tail -n 30 "$build_txt"; echo "SUMMARY: meson setup failed (see $build_txt; the -dev packages missing? use tests/gpu/pack_for_device.sh)" | tee "$out/summary.txt"; exit 1; }
  step "build"
  echo "== ninja" >> "$build_txt"
  ninja -C "$bd" >> "$build_txt" 2>&1 || { tail -n 40 "$build_txt"; echo "SUMMARY: build failed (see $build_txt)" | tee "$out/summary.txt"; exit 1; }
fi
{ echo "== $bd/tools/demitasse info"; "$bd/tools/demitasse" info 2>&1; } >> "$env_txt"

step "gpu suite"
tl=$(limit 200 150)
timeout -k 10 "$tl" $meson_cmd test -C "$bd" --no-rebuild --suite gpu --print-errorlogs > "$out/test-gpu.txt" 2>&1
gpu_rc=$?
[ "$gpu_rc" -eq 124 ] && echo "(stopped at the stage limit, ${tl}s)" >> "$out/test-gpu.txt"
append "$bd/meson-logs/testlog.txt" "$out/test-gpu.txt"

step "rest of the suite"
rest_rc=0
if [ "${SKIP_REST:-0}" = 1 ]; then
  # the CPU tests already pass in CI; a short lease may want its seconds for the GPU
  echo "skipped (SKIP_REST=1)" > "$out/test-rest.txt"
else
  tl=$(limit 100 280)
  timeout -k 10 "$tl" $meson_cmd test -C "$bd" --no-rebuild --no-suite gpu --num-processes 16 > "$out/test-rest.txt" 2>&1
  rest_rc=$?
  [ "$rest_rc" -eq 124 ] && echo "(stopped at the stage limit, ${tl}s)" >> "$out/test-rest.txt"
  append "$bd/meson-logs/testlog.txt" "$out/test-rest.txt"
fi

step "benchmark"
bench_path=$PATH
if [ "$packed" -eq 1 ]; then
  # bench/gpu_resnet50.sh runs `ninja ... bench/gpu_train_step` first; the copied sources
  # look newer than the packed program, and nothing can be rebuilt here: a no-op ninja.
  shim=$(mktemp -d)
  printf '#!/bin/sh\nexit 0\n' > "$shim/ninja" && chmod +x "$shim/ninja" && bench_path="$shim:$PATH"
fi
# batch 64, 128 and 256, 10 steps each (start-up dominates longer runs): ours FP32, mixed
# NHWC (hand-written) and mixed through the layout pass, PyTorch FP32 and AMP, interleaved.
# NHWC_BATCHES=B runs the hand-written NHWC model alone again at those batches.
tl=$(limit 240 40)
PATH=$bench_path BATCHES="${BATCHES:-64 128 256}" STEPS="${STEPS:-10}" WARMUP="${WARMUP:-3}" \
  timeout -k 10 "$tl" bench/gpu_resnet50.sh "$bd" > "$out/bench.txt" 2>&1
bench_rc=$?
[ "$bench_rc" -eq 124 ] && echo "(stopped at the stage limit, ${tl}s)" >> "$out/bench.txt"
nhwc_batches=${NHWC_BATCHES-}
if [ -n "$nhwc_batches" ] && [ "${MODEL:-resnet50}" = resnet50 ]; then
  tl=$(limit 60 10)
  PATH=$bench_path MODEL=resnet50_nhwc PRECS=fp16 BATCHES="$nhwc_batches" STEPS="${STEPS:-10}" \
    WARMUP="${WARMUP:-3}" timeout -k 10 "$tl" bench/gpu_resnet50.sh "$bd" 2>&1 |
    grep -v '^model' >> "$out/bench.txt"
fi
[ "$packed" -eq 1 ] && rm -rf "$shim"
if [ "${PROFILE:-0}" = 1 ]; then
  # where a ResNet-50 step's time goes, by op type (each op waited for: gpu_train_step.c)
  step "profile"
  tl=$(limit 120 0)
  for p in fp16 fp32; do
    DM_BENCH_PROFILE=1 timeout -k 10 "$tl" "$bd/bench/gpu_train_step" "${MODEL:-resnet50}" \
      "${PROFILE_BATCH:-128}" "$p" 5 2 models >> "$out/profile.txt" 2>&1
  done
fi
step "done"

{
  mode=source; [ "$packed" -eq 1 ] && mode="packed ($(sed -n 's/^git=//p' "$bd/.packed"), meson: $meson_cmd)"
  echo "SUMMARY ($(( $(date +%s) - t0 ))s; mode $mode; files in $out)"
  grep -m1 '^GPUs:' "$env_txt"
  [ "$packed" -eq 1 ] && grep -E 'MISSING|^devlibs/base' "$env_txt"
  # The console part of each test log (its testlog.txt follows the ===== line).
  echo "gpu suite (rc $gpu_rc):"; sed '/^===== /q' "$out/test-gpu.txt" | grep -E '^ *[0-9]+/[0-9]+ |^(Ok|Fail|Skipped|Timeout|Expected)|^ERROR|rror:'
  grep -E '^(ok|FAIL|SKIP)|passed,' "$out/test-gpu.txt" | grep -v '^ok' | head -40
  echo "rest of the suite (rc $rest_rc):"; sed '/^===== /q' "$out/test-rest.txt" | grep -E '^(Ok|Fail|Skipped|Timeout|Expected)|^ERROR|rror:'
  sed '/^===== /q' "$out/test-rest.txt" | grep -E '^ *[0-9]+/[0-9]+ .*(FAIL|TIMEOUT)' | head -20
  echo "benchmark (rc $bench_rc):"; tail -n 15 "$out/bench.txt"
} > "$out/summary.txt" 2>&1
cat "$out/summary.txt"
if [ -n "${unpacked:-}" ]; then
  # Back to the packed state, so that build-gpu stays small enough to carry (this
  # matters on the machine that packed it; there, it saves nothing but costs nothing).
  (cd "$bd" && grep -v "/$" "$unpacked" | xargs rm -f 2>/dev/null) ; rm -rf "$bd/devlibs" "$bd/devtools"
  rm -f "$unpacked"
fi
[ "$gpu_rc" -eq 0 ]

#!/bin/sh
# pack_for_device.sh: builds the CUDA build HERE and packs it so that
# tests/gpu/run_device_checks.sh runs it on a GPU machine that has CUDA but none of the
# Debian -dev packages this project builds against (protobuf-c, OpenBLAS, LMDB, cmocka)
# and cannot install any. See tests/gpu/README.md for how a session uses it.
#
# usage (anywhere in the checkout): tests/gpu/pack_for_device.sh [BUILD_DIR]  (default build-gpu)
#
# What it does, in BUILD_DIR (a meson build dir relative to the repo root):
#  1. meson setup (or --reconfigure) -Dcuda=enabled --buildtype=release; ninja.
#  2. devlibs/: the shared libraries the built programs need that the GPU machine may
#     lack, found with ldd: the project's own dependencies (protobuf-c, the OpenMP build
#     of OpenBLAS, LMDB, cmocka) at the top, and the GCC run-time and zlib libraries
#     (libgomp, libgfortran, libquadmath, libz) in devlibs/base, which the device script
#     uses only where that machine has none of its own (a newer system copy is better
#     for the other programs there, such as Python). Never the CUDA libraries (cudart,
#     cuBLAS, cuBLASLt, cuDNN, NCCL: far too big, and they must match that machine's
#     driver) and never glibc, libstdc++ or libgcc_s.
#  3. devtools/: this machine's meson (pure Python), because `meson test` refuses a
#     build dir made by another meson version (the pip meson there is not 1.0.1).
#  4. Checks that every non-CUDA library of every program resolves into devlibs.
#  5. pack.tar.xz: the programs (executables, libdemitasse.so, the test plugins),
#     devlibs/ and devtools/ in one xz archive, then deletes those from BUILD_DIR. The
#     ~40 test programs each link the whole static library with its CUDA fat binaries
#     (3 MiB apiece, ~120 MiB together, over the 64 MiB the device tool carries); they
#     differ little, and xz with a large window packs them all into a few MiB.
#     meson-private/, meson-info/ and build.ninja stay as they are: `meson test
#     --no-rebuild` reads meson-private/{build,coredata,meson_test_setup}.dat only.
#     Object files stay too (a few MiB) so that the next build here is incremental.
#  6. Writes BUILD_DIR/.packed (the absolute repo root the build was made in: the test
#     setup holds absolute paths, which the device script maps), prints the size that
#     would be carried, and fails when it exceeds 60 MiB.
# After packing, BUILD_DIR has no programs; a plain `ninja -C BUILD_DIR` relinks them
# (and makes .packed stale: run this script again before carrying BUILD_DIR).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd -P)
cd "$root"
bd=${1:-build-gpu}
limit_mib=60
case "$bd" in /*|*..*) echo "pack: BUILD_DIR must be a path inside the repo, relative to its root" >&2; exit 2 ;; esac
bda="$root/$bd"

rm -f "$bd/.packed"
# Programs from an earlier pack were deleted; the archive goes away with the marker.
rm -f "$bd/pack.tar.xz"
echo "pack: configuring $bd"
if [ -f "$bd/build.ninja" ]; then
  meson setup --reconfigure "$bd" -Dcuda=enabled --buildtype=release > /dev/null
else
  meson setup "$bd" -Dcuda=enabled --buildtype=release > /dev/null
fi
echo "pack: building $bd"
ninja -C "$bd" > "$bd/pack-build.log" 2>&1 || { tail -n 40 "$bd/pack-build.log"; echo "pack: build failed" >&2; exit 1; }

# 1. The programs: every executable, shared library and module meson built.
progs=$(mktemp)
trap 'rm -f "$progs" "$progs.libs"' EXIT
python3 - "$bda" > "$progs" <<'EOF'
import json, os, sys
bd = sys.argv[1]
for t in json.load(open(os.path.join(bd, 'meson-info', 'intro-targets.json'))):
    if t['type'] in ('executable', 'shared library', 'shared module'):
        for f in t['filename']:
            if os.path.isfile(f):
                print(os.path.relpath(f, bd))
EOF
[ -s "$progs" ] || { echo "pack: no programs found in $bd" >&2; exit 1; }

# 2. Their libraries. ldd prints "soname => path (addr)"; keep what is neither CUDA,
# nor glibc / the C++ and GCC core run-time, nor built here.
cuda_re='^lib(cuda|cudart|cublas|cublasLt|cudnn[a-z_]*|nccl|nvrtc[a-z_.-]*|nvJitLink|cufft|curand|cusparse|cusolver|nvToolsExt|cupti)\.so'
sys_re='^(linux-vdso|ld-linux[a-z0-9_-]*|libc|libm|libmvec|libdl|librt|libpthread|libutil|libresolv|libstdc\+\+|libgcc_s)\.so'
base_re='^(libgomp|libgfortran|libquadmath|libz)\.so'
rm -rf "$bd/devlibs" "$bd/devtools"
mkdir -p "$bd/devlibs/base" "$bd/devtools"
(cd "$bd" && xargs ldd < "$progs") 2>/dev/null | awk '$2 == "=>" { print $1, $3 }' | sort -u > "$progs.libs"
if grep -q ' not$' "$progs.libs"; then
  echo "pack: unresolved libraries here:" >&2; grep ' not$' "$progs.libs" >&2; exit 1
fi
while read -r name path; do
  echo "$name" | grep -Eq "$cuda_re|$sys_re" && continue
  case "$(readlink -f "$path")" in "$bda"/*) continue ;; esac
  if echo "$name" | grep -Eq "$base_re"; then dest="$bd/devlibs/base"; else dest="$bd/devlibs"; fi
  cp -L "$path" "$dest/$name"
done < "$progs.libs"

# 3. This machine's meson, run there as `python3 devtools/meson.py`.
meson_py=$(head -n 1 "$(command -v meson)" | sed -n 's/^#! *//p' | awk '{ print $1 }')
mesonbuild=$("${meson_py:-python3}" -c 'import mesonbuild, os; print(os.path.dirname(mesonbuild.__file__))')
(cd "$(dirname "$mesonbuild")" && tar -cf - --exclude=__pycache__ mesonbuild) | (cd "$bd/devtools" && tar -xf -)
cat > "$bd/devtools/meson.py" <<'EOF'
#!/usr/bin/env python3
# The meson that configured this build dir (copied by tests/gpu/pack_for_device.sh).
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mesonbuild import mesonmain
sys.exit(mesonmain.main())
EOF
chmod +x "$bd/devtools/meson.py"
meson_ver=$(python3 "$bd/devtools/meson.py" --version)

# 4. Every non-CUDA library must now resolve into devlibs (or be glibc / libstdc++ /
# libgcc_s, or built here). ldd is run with the system's default paths still behind
# LD_LIBRARY_PATH, so this checks names, not absence elsewhere; the RUNPATH entry
# for /usr/lib/*/openblas-openmp comes after LD_LIBRARY_PATH too.
bad=0
for p in $(cat "$progs"); do
  LD_LIBRARY_PATH="$bda/devlibs:$bda/devlibs/base" ldd "$bd/$p" | awk '$2 == "=>" { print $1, $3 }' |
  while read -r name path; do
    echo "$name" | grep -Eq "$cuda_re|$sys_re" && continue
    case "$(readlink -f "$path")" in "$bda"/devlibs/*|"$bda"/*) ;; *) echo "pack: $p: $name -> $path (not in devlibs)"; exit 1 ;; esac
  done || bad=1
done
[ "$bad" -eq 0 ] || { echo "pack: some libraries do not resolve into $bd/devlibs" >&2; exit 1; }
echo "pack: devlibs (every program's non-CUDA libraries resolve here):"
(cd "$bd/devlibs" && ls -l --block-size=K $(find . -maxdepth 2 -type f | sort) | awk '{ print "  " $5, $NF }')

# 5. The archive. xz -9 (64 MiB window) sees all the test programs at once.
echo "pack: compressing (about 2 minutes on 2 cores)"
(cd "$bd" && tar -cf - -T "$progs" devlibs devtools | xz -9 -c > pack.tar.xz.tmp) && mv "$bd/pack.tar.xz.tmp" "$bd/pack.tar.xz"
(cd "$bd" && xargs rm -f < "$progs") && rm -rf "$bd/devlibs" "$bd/devtools"
rm -f "$bd/pack-build.log"
# Leftovers of earlier test runs, not needed there: meson's test logs, and the 1.2 MiB
# work folder tests/tools/npy_numpy_check.py leaves behind at every run.
rm -rf "$bd"/meson-logs/testlog* "$bd"/tests/tools/dm_npy_numpy_*

# 6. Marker and sizes.
{
  echo "root=$root"
  echo "builddir=$bd"
  echo "packed_at=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "git=$(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD -- 2>/dev/null || echo '+dirty')"
  echo "meson=$meson_ver"
  echo "programs=$(wc -l < "$progs")"
} > "$bd/.packed"
kib=$(du -sk "$bd" | awk '{ print $1 }')
mib=$(( (kib + 1023) / 1024 ))
tree_kib=$(git ls-files -z --cached --others --exclude-standard | du -ck --files0-from=- 2>/dev/null | tail -n 1 | awk '{ print $1 }')
echo "pack: $bd is ${mib} MiB (${kib} KiB; pack.tar.xz $(du -k "$bd/pack.tar.xz" | awk '{ print $1 }') KiB); the working tree adds about $(( ${tree_kib:-0} / 1024 )) MiB; the device tool carries 64 MiB in all"
cat "$bd/.packed" | sed 's/^/  /'
if [ "$mib" -gt "$limit_mib" ]; then
  rm -f "$bd/.packed"
  echo "pack: FAILED: $bd is ${mib} MiB, over the ${limit_mib} MiB limit" >&2; exit 1
fi
if [ $(( kib + ${tree_kib:-0} )) -gt $(( 64 * 1024 )) ]; then
  echo "pack: WARNING: $bd plus the working tree is over 64 MiB: the device tool will refuse it" >&2
fi
echo "pack: ready; carry [\"$bd\"] and run tests/gpu/run_device_checks.sh \"\$OUT\""

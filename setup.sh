#!/bin/sh
# setup.sh: installs what Demitasse needs to build and test, from Debian packages, on a
# fresh Debian 12 machine (idempotent: packages already present are skipped). The CUDA
# toolkit is not a Debian package here; when /usr/local/cuda exists the build uses it.
# procps (pgrep) and iproute2 (ip) serve the multi-process tests; dpkg-dev lets meson
# find the multiarch folder, so `meson install` puts the library where the loader and
# pkg-config look (lib/x86_64-linux-gnu, not lib64). fortunes gives the text tests of
# `make-db --text` a real text (/usr/share/games/fortunes/fortunes). The python3-* set
# builds and tests the Python package (python/; `pip install --no-build-isolation .` with
# Debian's meson-python, which needs patchelf for the library it puts in the wheel;
# docs/python.md).
set -eu
pkgs="meson ninja-build pkg-config gcc clang libclang-rt-14-dev
      protobuf-compiler protobuf-c-compiler libprotobuf-c-dev
      libopenblas-dev libopenblas-openmp-dev libcmocka-dev uthash-dev python3 python3-numpy
      liblmdb-dev zlib1g-dev libdnnl-dev libopenmpi-dev openmpi-bin
      procps iproute2 dpkg-dev fortunes
      python3-dev python3-pip python3-venv python3-mesonpy python3-protobuf python3-pytest
      python3-hypothesis patchelf"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup: installing$missing"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
echo "setup: dependencies present"

#!/bin/sh
# demo.sh: the main job. Sets up, builds, and runs the shipped example net through the CLI.
set -eu
cd "$(dirname "$0")"
./setup.sh
[ -d build ] || meson setup build >/dev/null
ninja -C build >/dev/null
exec ./build/tools/demitasse run --init models/example/init_net.pbtxt \
  --net models/example/predict_net.pbtxt --input data=models/example/input.npy "$@"

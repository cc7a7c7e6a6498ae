#!/bin/sh
# cli_plugin_test.sh: `demitasse run --plugin` loads the Swish plugin and runs a net that
# uses it; a plugin with the wrong API version is refused with a clear message.
# usage: cli_plugin_test.sh demitasse swish_plugin.so wrong_version.so
set -u
exe=$1 swish=$2 wrong=$3
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/init.pbtxt" <<'NET'
op { output: "x" type: "GivenTensorFill"
     arg { name: "shape" ints: 3 } arg { name: "values" floats: [-1, 0, 2] } }
NET
cat > "$tmp/net.pbtxt" <<'NET'
op { input: "x" output: "y" type: "Swish" }
external_output: "y"
NET
"$exe" run --plugin "$swish" --init "$tmp/init.pbtxt" --net "$tmp/net.pbtxt" \
  > "$tmp/out.txt" 2>&1 || { echo "run with plugin failed:"; cat "$tmp/out.txt"; exit 1; }
# swish(2) = 2 / (1 + e^-2) = 1.76159...
grep -q '1\.7615' "$tmp/out.txt" || { echo "swish(2) not in output:"; cat "$tmp/out.txt"; exit 1; }
if "$exe" run --plugin "$wrong" --init "$tmp/init.pbtxt" --net "$tmp/net.pbtxt" \
  > "$tmp/bad.txt" 2>&1; then
  echo "a plugin with the wrong API version was accepted"; exit 1
fi
grep -q 'version 999' "$tmp/bad.txt" || { echo "no version message:"; cat "$tmp/bad.txt"; exit 1; }
echo ok

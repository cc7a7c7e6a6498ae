#!/bin/sh
# readme_train_test.sh: the docs stay true. Extracts the first ```c block of
# docs/embedding.md's "## Training" section (the mixed-precision training program, which
# the README points to), compiles it against the build's libdemitasse.so with nothing
# but <demitasse.h>, and runs it on LeNet with the bundled MNIST (an LMDB made by
# `demitasse make-db`) for ITERS steps.
# Passes when the loss falls clearly: the mean of the last 10 losses is below half the
# mean of the first 10 (a net that does not train, or trains backwards, stays near
# ln 10 = 2.3), every line shows the FP16 loss scale (65536 unless a step overflowed) and
# the step count is right.
# SANITIZE is the build's b_sanitize ("none", or e.g. "address,undefined"): a program
# linked against a sanitized library must carry the sanitizer runtime itself.
# usage: readme_train_test.sh CC SOURCE_ROOT BUILD_ROOT DEMITASSE [SANITIZE [ITERS]]
set -u
cc=$1 root=$2 build=$3 exe=$4 sanitize=${5:-none} iters=${6:-40}
san=""
[ "$sanitize" = none ] || [ -z "$sanitize" ] || san="-fsanitize=$sanitize"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
awk '/^## / { in_sec = ($0 == "## Training") }
     in_sec && /^```c$/ { n++; inb = 1; next }
     inb && /^```$/ { inb = 0; next }
     inb && n == 1 { print }' "$root/docs/embedding.md" > "$tmp/train_lenet.c"
[ -s "$tmp/train_lenet.c" ] || fail "no \`\`\`c block in docs/embedding.md's Training section"
grep -q "dm_workspace_create_train_net" "$tmp/train_lenet.c" || fail "the block does not train"
# $san is a word list (empty or one flag): split on purpose.
# shellcheck disable=SC2086
"$cc" -std=c17 -Wall -Wextra -Wpedantic -Werror $san -I "$root/core" "$tmp/train_lenet.c" \
  -L "$build" -Wl,-rpath,"$build" -ldemitasse -o "$tmp/train_lenet" 2> "$tmp/cc.txt" \
  || { cat "$tmp/cc.txt"; fail "the docs/embedding.md example does not compile"; }
"$exe" make-db --images "$root/models/mnist/data/t10k-images-idx3-ubyte.gz" \
  --labels "$root/models/mnist/data/t10k-labels-idx1-ubyte.gz" --train 8000 \
  --out-train "$tmp/train_lmdb" --out-val "$tmp/val_lmdb" > /dev/null || fail "make-db"
"$tmp/train_lenet" "$root/models/mnist" "$tmp/train_lmdb" "$iters" > "$tmp/out.txt" 2>&1 \
  || { cat "$tmp/out.txt"; fail "the docs/embedding.md example failed"; }
awk -v n="$iters" '
  $1 == "iter" { i++; loss[i] = $4; if ($6 <= 0) bad = "no loss scale on line " i }
  END {
    if (bad != "") { print "FAIL: " bad; exit 1 }
    if (i != n) { print "FAIL: " i " steps printed, wanted " n; exit 1 }
    for (k = 1; k <= 10; k++) { a += loss[k]; b += loss[n - 10 + k] }
    a /= 10; b /= 10
    printf "loss: first 10 steps %.4f (step 1 %.4f), last 10 %.4f (step %d %.4f)\n", a, loss[1], b, n, loss[n]
    if (!(b < 0.5 * a)) { print "FAIL: the loss did not fall to half"; exit 1 }
  }' "$tmp/out.txt" || { cat "$tmp/out.txt"; exit 1; }
grep -q "loss_scale 65536" "$tmp/out.txt" || fail "the FP16 loss scale is not shown"
echo ok

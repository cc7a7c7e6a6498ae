#!/bin/sh
# memory_limit_cli_test.sh: --memory-limit on `run` and `train`. A fill past the cap
# stops the command (exit 1) with the op, the blob and the sizes; under a cap it fits
# the same net runs; sizes take K/M/G suffixes (powers of 1024) or plain bytes; a bad
# size is a usage error (exit 2) saying what a size looks like.
#
# usage: memory_limit_cli_test.sh DEMITASSE SOURCE_ROOT
set -u
DM=$1
SRC=$2
T=$(mktemp -d "${TMPDIR:-/tmp}/dm_memlimit_XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/cli_lib.sh"

# 6,400 bytes, then 1024 x 1024 FLOAT: 4 MiB
cat >"$T/fill.pbtxt" <<'NET'
name: "fills"
op { type: "ConstantFill" name: "small_fill" output: "small" arg { name: "shape" ints: 100 ints: 16 } }
op { type: "ConstantFill" name: "big_fill" output: "big" arg { name: "shape" ints: 1024 ints: 1024 } arg { name: "value" f: 1 } }
NET

# without a cap the fill runs, as it always did
expect 0 "$DM" run --net "$T/fill.pbtxt" && has out 'big: FLOAT 1024x1024'

# past the cap: the op, the blob, the sizes; the same for every way of writing 1 MiB
for size in 1M 1m 1MiB 1MB 1024K 1048576; do
  expect 1 "$DM" run --net "$T/fill.pbtxt" --memory-limit "$size" && {
    has err "op 1 (ConstantFill 'big_fill')"
    has err "for blob 'big' would exceed the workspace memory limit"
    has err 'allocating 4194304 bytes (4.0 MiB)'
    has err '6400 bytes (6.2 KiB) in use'
    has err 'limit 1048576 bytes (1.0 MiB)'
  }
done
# a cap it fits under, and 0 (no cap)
expect 0 "$DM" run --net "$T/fill.pbtxt" --memory-limit 5M && has out 'big: FLOAT 1024x1024'
expect 0 "$DM" run --net "$T/fill.pbtxt" --memory-limit 0
expect 0 "$DM" run --net "$T/fill.pbtxt" --memory-limit 8G

# train: the init nets run under the cap too (before the training DB is opened: --train-db
# names a folder that exists, so train's own check for a missing DB stays quiet)
mkdir -p "$T/db"
expect 1 "$DM" train --init "$T/fill.pbtxt" --net "$SRC/models/mnist/lenet_train.pbtxt" \
  --train-db "$T/db" --iters 1 --memory-limit 1M && {
  has err "op 1 (ConstantFill 'big_fill')"
  has err 'limit 1048576 bytes (1.0 MiB)'
}

# bad sizes: usage errors that say what a size is
# (trailing white space: '3 ' was a shift by 70, undefined, that meant 192 bytes)
for size in abc -1 1.5G 12Q 1MX '' ' 1M' 1M1 99999999999999999999 20000000000000000E '3 ' \
  '1M ' '5	' '2 B'; do
  expect 2 "$DM" run --net "$T/fill.pbtxt" --memory-limit "$size" && {
    has err "--memory-limit wants a size such as 512M, 8G or a number of bytes"
    has err "got '$size'"
  }
done
expect 2 "$DM" train --init "$T/fill.pbtxt" --net "$T/fill.pbtxt" --iters 1 --memory-limit 2T3 &&
  has err "demitasse train: --memory-limit wants a size"
expect 2 "$DM" run --net "$T/fill.pbtxt" --memory-limit && has err 'memory-limit'

# both commands' help has it
expect 0 "$DM" run --help && has out '--memory-limit SIZE'
expect 0 "$DM" train --help && has out '--memory-limit SIZE'

cli_summary

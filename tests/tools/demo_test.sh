#!/bin/sh
# demo_test.sh: demo.sh's last lines say where its CSV, plot and checkpoint went, and an
# FP16 run writes to its own folder, leaving the FP32 run's files as they were (issue 12:
# `./demo.sh --fp16` overwrote them and nothing said where they were). Runs the demo with
# the built binary (DM_DEMO_BIN: no setup, no build) into a scratch folder (DM_DEMO_OUT),
# for 2 iterations each.
#
# A failed run says it failed and names none of those files.
#
# usage: demo_test.sh DEMITASSE SOURCE_ROOT
set -u
DM=$1
SRC=$2
case $DM in /*) ;; *) DM=$(pwd)/$DM ;; esac
case $SRC in /*) ;; *) SRC=$(pwd)/$SRC ;; esac
T=$(mktemp -d "${TMPDIR:-/tmp}/dm_demo_XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/cli_lib.sh"

demo() { DM_DEMO_BIN=$DM DM_DEMO_OUT=$T/mnist sh "$SRC/demo.sh" --iters 2 --test-iters 1 "$@"; }

# the last three lines name files that exist
named() { # named PRECISION: checks the tail of $T/out
  tail -n 3 "$T/out" >"$T/tail"
  has tail "demo ($1): metrics CSV  $T/mnist/$1/metrics.csv"
  has tail "demo ($1): plot         $T/mnist/$1/metrics.svg"
  has tail "demo ($1): checkpoint   $T/mnist/$1/checkpoint"
  for f in metrics.csv metrics.svg checkpoint; do
    checks=$((checks + 1))
    [ -e "$T/mnist/$1/$f" ] || fail "$1: $f named but not there"
  done
}

expect 0 demo && named fp32
cp "$T/mnist/fp32/metrics.csv" "$T/fp32.csv"
cp "$T/mnist/fp32/metrics.svg" "$T/fp32.svg"
expect 0 demo --fp16 && named fp16
checks=$((checks + 1))
cmp -s "$T/fp32.csv" "$T/mnist/fp32/metrics.csv" && cmp -s "$T/fp32.svg" "$T/mnist/fp32/metrics.svg" ||
  fail "the FP16 run changed the FP32 run's files"
has mnist/fp16/metrics.csv "loss_scale"
# a failed run (a bad flag for train) says so and names no file it never wrote (issue 23)
expect 2 demo --bf16 --lr nope && {
  has err "demo (bf16): training failed (exit 2)"
  count out "demo (bf16):" 0
  checks=$((checks + 1))
  [ ! -e "$T/mnist/bf16/metrics.svg" ] || fail "a failed run left a plot"
}
checks=$((checks + 1))
# the FP16 run logs its loss scale; the FP32 one has none
awk -F, 'NR > 1 && $7 != "" { found = 1 } END { exit !found }' "$T/mnist/fp16/metrics.csv" ||
  fail "the FP16 folder's CSV has no loss scale: not the FP16 run's"

cli_summary

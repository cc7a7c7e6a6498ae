#!/bin/sh
# demo_gpt_test.sh: demo_gpt.sh runs end to end (make-db --text on the fortunes files,
# train the GPT with its test net, generate from the checkpoint) for 2 iterations with
# the built binary, and its last lines name a sample and files that exist; --bf16 writes
# to its own folder. Skipped (77) without Debian's fortunes files.
#
# usage: demo_gpt_test.sh DEMITASSE SOURCE_ROOT
set -u
DM=$1
SRC=$2
[ -f /usr/share/games/fortunes/fortunes ] || { echo "skipped: no fortunes package"; exit 77; }
case $DM in /*) ;; *) DM=$(pwd)/$DM ;; esac
case $SRC in /*) ;; *) SRC=$(pwd)/$SRC ;; esac
T=$(mktemp -d "${TMPDIR:-/tmp}/dm_demo_gpt_XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/cli_lib.sh"

demo() { DM_DEMO_BIN=$DM DM_DEMO_OUT=$T/gpt sh "$SRC/demo_gpt.sh" --iters 2 --test-iters 1 "$@"; }

named() { # named PRECISION: the sample and the files the last lines name
  has out "demo ($1): a sample"
  tail -n 3 "$T/out" >"$T/tail"
  has tail "demo ($1): metrics CSV  $T/gpt/$1/metrics.csv"
  has tail "demo ($1): checkpoint   $T/gpt/$1/checkpoint"
  for f in metrics.csv metrics.svg checkpoint; do
    checks=$((checks + 1))
    [ -e "$T/gpt/$1/$f" ] || fail "$1: $f named but not there"
  done
  # the sample: the prompt and 200 characters after it, on the line after the heading
  checks=$((checks + 1))
  awk '/a sample/ { getline; print; exit }' "$T/out" | grep -q '^The ' || fail "$1: no sample"
  checks=$((checks + 1))
  grep -q 'test_perplexity' "$T/gpt/$1/metrics.csv" || fail "$1: no perplexity column"
}

expect 0 demo && named fp32
expect 0 demo --bf16 && named bf16
cli_summary

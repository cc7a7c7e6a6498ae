#!/bin/sh
# input_file_types_test.sh: a net or init file must be a regular file (issue 23, item 3).
# A FIFO with no writer would block `run --net FIFO` forever in open(); a directory or a
# device is no net either. Each must fail at once (exit 1, under a timeout so that a
# regression fails instead of hanging) saying what the path is.
#
# usage: input_file_types_test.sh DEMITASSE
set -u
DM=$1
T=$(mktemp -d "${TMPDIR:-/tmp}/dm_intypes_XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/cli_lib.sh"
cat >"$T/fill.pbtxt" <<'NET'
name: "fill"
op { type: "ConstantFill" output: "y" arg { name: "shape" ints: 4 } arg { name: "value" f: 1 } }
external_output: "y"
NET
mkfifo "$T/fifo"
mkdir "$T/dir"
# refused WHAT CMD...: exit 1 within 20 s (124: it hung), naming WHAT
refused() {
  what=$1
  shift
  expect 1 timeout 20 "$@" && has err "$what; a net is read from a regular file"
}
refused "$T/fifo: is a FIFO (named pipe)" "$DM" run --net "$T/fifo"
refused "$T/fifo: is a FIFO (named pipe)" "$DM" run --net "$T/fill.pbtxt" --init "$T/fifo"
refused "$T/fifo: is a FIFO (named pipe)" "$DM" train --init "$T/fifo" --net "$T/fill.pbtxt" \
  --iters 1
refused "$T/fifo: is a FIFO (named pipe)" "$DM" inspect "$T/fifo"
refused "$T/fifo: is a FIFO (named pipe)" "$DM" convert "$T/fifo" "$T/out.pbtxt"
refused "$T/dir: is a directory" "$DM" run --net "$T/dir"
refused "/dev/zero: is a character device" "$DM" run --net /dev/zero
# the FIFO is still there and nothing was written
checks=$((checks + 2))
[ -p "$T/fifo" ] || fail "the FIFO was replaced"
[ ! -e "$T/out.pbtxt" ] || fail "convert wrote its output from a FIFO it refused"
# a regular file still reads
expect 0 "$DM" run --net "$T/fill.pbtxt" && has out "y: FLOAT 4"
cli_summary

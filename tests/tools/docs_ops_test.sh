#!/bin/sh
# docs_ops_test.sh: docs/ops.md's table of operators is what `demitasse ops` lists. Each
# row of the table (type, inputs, outputs, precision) must be a row of `demitasse ops`
# and each row of `demitasse ops` a row of the table: an op missing from the docs, one
# the docs list that is not registered, or one whose arity or precision class changed
# fails, named. The op count `demitasse ops` prints must match the table's rows too.
#
# usage: docs_ops_test.sh DEMITASSE SOURCE_ROOT
set -u
DM=$1
SRC=$2
T=$(mktemp -d "${TMPDIR:-/tmp}/dm_docs_ops_XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/cli_lib.sh"

expect 0 "$DM" ops || { cli_summary; exit; }
# `demitasse ops`: a header line, one "TYPE INPUTS OUTPUTS PRECISION" line per op, and
# "N op types" last
awk 'NR > 1 && NF == 4 { print $1, $2, $3, $4 }' "$T/out" | sort >"$T/registered"
registered_count=$(awk '$2 == "op" && $3 == "types" { print $1 }' "$T/out")
# docs/ops.md: the rows "| TYPE | INPUTS | OUTPUTS | PRECISION |" after the header row
awk -F'|' 'NF == 6 && $2 !~ /^ *(type|-+) *$/ {
    for (i = 2; i <= 5; i++) gsub(/^ +| +$/, "", $i)
    print $2, $3, $4, $5
  }' "$SRC/docs/ops.md" | sort >"$T/documented"

checks=$((checks + 1))
[ -s "$T/registered" ] || fail "demitasse ops listed no operators"
checks=$((checks + 1))
[ -s "$T/documented" ] || fail "docs/ops.md has no table of operators"
checks=$((checks + 1))
dups=$(cut -d' ' -f1 "$T/documented" | uniq -d)
[ -z "$dups" ] || fail "docs/ops.md lists more than once: $dups"

# rows only `demitasse ops` has, then rows only the docs have
comm -23 "$T/registered" "$T/documented" >"$T/missing"
comm -13 "$T/registered" "$T/documented" >"$T/extra"
checks=$((checks + 1))
if [ -s "$T/missing" ] || [ -s "$T/extra" ]; then
  fail "docs/ops.md and \`demitasse ops\` differ (regenerate the table as docs/ops.md says)"
  sed 's/^/  registered, not in docs\/ops.md as: /' "$T/missing"
  sed 's/^/  in docs\/ops.md, not registered as: /' "$T/extra"
fi
checks=$((checks + 1))
n=$(wc -l <"$T/documented")
[ "$n" -eq "${registered_count:-0}" ] ||
  fail "docs/ops.md lists $n ops, demitasse ops says ${registered_count:-nothing}"

cli_summary

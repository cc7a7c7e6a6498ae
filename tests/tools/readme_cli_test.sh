#!/bin/sh
# readme_cli_test.sh: every documented command runs as written (a new user's copy of a
# synopsis must not fail). The commands are taken mechanically from the ```sh blocks of
# docs/cli.md, then of every other docs/*.md in name order (a block not meant to run is
# ```text): comment lines dropped, backslash continuations joined. The one substitution
# is the one docs/cli.md documents, `demitasse` -> the built binary. They run in order in
# a scratch folder that links the repository's models/ and tests/ (the docs run them
# from the repository root), and each must exit 0. Every subcommand of
# `demitasse --help` must appear at least once among them, and in the table of
# README.md's "## The CLI" section as `demitasse SUB`.
#
# usage: readme_cli_test.sh DEMITASSE SOURCE_ROOT
set -u
DM=$1
SRC=$2
case $DM in /*) ;; *) DM=$(pwd)/$DM ;; esac
case $SRC in /*) ;; *) SRC=$(pwd)/$SRC ;; esac
T=$(mktemp -d "${TMPDIR:-/tmp}/dm_readme_XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/cli_lib.sh"

mkdir "$T/root" && ln -s "$SRC/models" "$T/root/models" && ln -s "$SRC/tests" "$T/root/tests" ||
  exit 1

# the docs' shell lines, one command per line
set -- "$SRC/docs/cli.md"
for f in "$SRC"/docs/*.md; do
  [ "$f" = "$SRC/docs/cli.md" ] || set -- "$@" "$f"
done
awk '
  FNR == 1 { in_block = 0; cmd = "" }
  /^```sh$/ { in_block = 1; next }
  in_block && /^```/ { in_block = 0; next }
  in_block {
    line = $0
    if (line ~ /^[ \t]*#/) next            # a comment line
    if (line ~ /\\$/) { sub(/\\$/, "", line); cmd = cmd line; next }
    cmd = cmd line
    gsub(/[ \t]+/, " ", cmd); sub(/^ /, "", cmd); sub(/ $/, "", cmd)
    if (cmd != "") print cmd
    cmd = ""
  }' "$@" >"$T/commands"

n=$(wc -l <"$T/commands")
checks=$((checks + 1))
[ "$n" -ge 10 ] || fail "found only $n commands in docs/*.md"

i=0
while IFS= read -r cmd; do
  i=$((i + 1))
  case $cmd in
  demitasse\ *) run="\"\$DM\" ${cmd#demitasse }" ;;
  # `mpirun -np N demitasse ...`: through tests/dist/mpirun.sh (root, oversubscribed)
  mpirun\ -np\ [0-9]*\ demitasse\ *)
    command -v mpirun >/dev/null 2>&1 || { echo "no mpirun: command $i not run"; continue; }
    np=${cmd#mpirun -np }
    np=${np%% *}
    run="sh \"\$SRC/tests/dist/mpirun.sh\" $np \"\$DM\" ${cmd#mpirun -np $np demitasse }" ;;
  *) run=$cmd ;;
  esac
  checks=$((checks + 1))
  (cd "$T/root" && eval "$run") >"$T/out" 2>"$T/err" </dev/null
  rc=$?
  if [ $rc -ne 0 ]; then
    fail "command $i exited $rc: $cmd"
    sed 's/^/  stderr: /' "$T/err" | tail -5
  fi
done <"$T/commands"

# each subcommand is shown at least once
awk '/^## / { on = ($0 == "## The CLI"); next } on' "$SRC/README.md" >"$T/readme_cli"
"$DM" --help | awk '/^commands:/ { on = 1; next } on && !NF { exit } on { print $1 }' >"$T/subcommands"
while IFS= read -r sub; do
  checks=$((checks + 1))
  grep -q "^demitasse $sub\( \|$\)" "$T/commands" || fail "docs/*.md run no '$sub' command"
  checks=$((checks + 1))
  grep -q "^| \`demitasse $sub\` |" "$T/readme_cli" || fail "README.md's CLI table has no '$sub' row"
done <"$T/subcommands"
checks=$((checks + 1))
[ -s "$T/subcommands" ] || fail "demitasse --help lists no commands"

cli_summary

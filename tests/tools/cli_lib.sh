# cli_lib.sh: the check helpers shared by the CLI test scripts (cli_test.sh,
# device_cli_test.sh). Sourced, not run: `. "$(dirname "$0")/cli_lib.sh"`, after the
# script has made its scratch folder $T; outputs of the checked commands go there.
#
#   expect CODE CMD...  runs CMD with stdout in $T/out and stderr in $T/err; fails unless
#                       it exits CODE (and then returns 1, so `expect ... && has ...`
#                       skips the checks of the output)
#   has FILE TEXT       $T/FILE contains TEXT (fixed string)
#   count FILE TEXT N   TEXT occurs on exactly N lines of $T/FILE
#   fail MESSAGE...     a failed check
#   cli_summary         prints "PASSED/CHECKS checks passed"; the status is 0 when none
#                       failed: end the script with it
# A script that checks something itself adds 1 to $checks and calls fail.
fails=0
checks=0

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

expect() {
  want=$1
  shift
  checks=$((checks + 1))
  "$@" >"$T/out" 2>"$T/err"
  got=$?
  if [ "$got" -ne "$want" ]; then
    fail "exit $got (wanted $want): $*"
    sed 's/^/  stdout: /' "$T/out" | head -5
    sed 's/^/  stderr: /' "$T/err" | head -5
    return 1
  fi
  return 0
}

has() {
  checks=$((checks + 1))
  grep -qF -- "$2" "$T/$1" || { fail "$1 lacks '$2'"; sed "s/^/  $1: /" "$T/$1" | head -5; }
}

count() {
  checks=$((checks + 1))
  got=$(grep -cF -- "$2" "$T/$1")
  [ "$got" -eq "$3" ] || fail "$1 has '$2' on $got lines, wanted $3"
}

cli_summary() {
  echo "$((checks - fails))/$checks checks passed"
  [ "$fails" -eq 0 ]
}

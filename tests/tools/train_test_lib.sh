# train_test_lib.sh: the setup shared by the training test scripts (train_resume_test.sh,
# train_diverge_test.sh, train_csv_resume_test.sh). Sourced, not run:
# `. "$(dirname "$0")/train_test_lib.sh"`, after DM, IMAGES, LABELS, INIT and NET are set.
#
#   fail MESSAGE...          a failed check (counted in $fails)
#   clean_exit LOG WHAT      fails when LOG holds a sanitizer report: a run that is meant
#                            to fail exits non-zero anyway, so under ASan a leak or an
#                            error on its error path would otherwise pass unseen
#   train_test_setup NAME N  exits 77 (skipped) when an input file or cmp is missing;
#                            makes the scratch folder $T (removed on exit) and the MNIST
#                            LMDBs $T/train_db (the first N images) and $T/val_db
# shellcheck disable=SC2154  # DM, IMAGES, LABELS, INIT, NET are the caller's
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
clean_exit() {
  ! grep -q "Sanitizer\|runtime error:" "$1" ||
    fail "$2: $(grep -m 3 "Sanitizer\|runtime error:" "$1")"
}

train_test_setup() {
  for f in "$IMAGES" "$LABELS" "$INIT" "$NET"; do
    [ -r "$f" ] || { echo "missing $f: skipped"; exit 77; }
  done
  command -v cmp >/dev/null 2>&1 || { echo "no cmp: skipped"; exit 77; }
  T=$(mktemp -d "${TMPDIR:-/tmp}/dm_$1_XXXXXX") || exit 1
  trap 'rm -rf "$T"' EXIT
  "$DM" make-db --images "$IMAGES" --labels "$LABELS" --train "$2" --out-train "$T/train_db" \
    --out-val "$T/val_db" >"$T/make_db.log" 2>&1 || { cat "$T/make_db.log"; exit 1; }
}

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

# A random integer in [0, $1).
rand() { echo $(($(od -An -N2 -tu2 /dev/urandom) % $1)); }

# kill_train_at ROW MAX_MS LOG [--resume]: starts `train` on $INIT/$NET with the training
# DB, N iterations, the checkpoint $ck every $K and the CSV $csv, waits until the CSV has
# ROW rows (progress, not time: the machine may be slow), then up to MAX_MS more, and
# kills it with SIGKILL. Returns 1 when the run ended before the kill. $TRAIN_EXTRA (split
# into words): more train flags, as a test net's.
kill_train_at() {
  # exec: $! must be demitasse itself, not a subshell whose death leaves it running.
  (exec "$DM" train --init "$INIT" --net "$NET" --train-db "$T/train_db" --iters "$N" \
    --checkpoint "$ck" --checkpoint-every "$K" --log-every 1 --csv "$csv" ${TRAIN_EXTRA:-} ${4:-} \
    >"$3" 2>&1) &
  kt_pid=$!
  kt_i=0
  while [ $(($(cat "$csv" 2>/dev/null | wc -l) - 1)) -lt "$1" ] && [ "$kt_i" -lt 6000 ] &&
    kill -0 "$kt_pid" 2>/dev/null; do
    sleep 0.01
    kt_i=$((kt_i + 1))
  done
  kill_ms=$(rand "$2")
  sleep "$(printf '0.%03d' "$kill_ms")"
  kt_rc=0
  kill -9 "$kt_pid" 2>/dev/null || kt_rc=1
  wait "$kt_pid" 2>/dev/null
  return $kt_rc
}

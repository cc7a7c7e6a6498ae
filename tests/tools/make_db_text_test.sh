#!/bin/sh
# make_db_text_test.sh: `make-db --text` end to end: DBs of a small UTF-8 text written
# here (char and byte tokenizers, with and without validation) and of the fortunes file
# when the fortunes package is installed, each checked by text_db_check.py (Python's
# own UTF-8 decoding and vocabulary against the records text_db_dump prints); then the
# refusals, each leaving nothing behind.
# usage: make_db_text_test.sh DEMITASSE TEXT_DB_DUMP PYTHON CHECK_PY
DM=$1
DUMP=$2
PY=$3
CHECK=$4
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/cli_lib.sh"

if [ -z "$PY" ] || ! "$PY" -c 'import sys' 2>/dev/null; then
  echo "no python3: the records cannot be checked"
  exit 77
fi

# db_ok NAME T F TOKENIZER TRAIN VAL FILE...: make-db made them, and they match the text
db_ok() {
  name=$1 ctx=$2 frac=$3 tok=$4 train=$5 val=$6
  shift 6
  checks=$((checks + 1))
  if "$PY" "$CHECK" "$DUMP" "$ctx" "$frac" "$tok" "$train" "$val" "$@" >"$T/check" 2>&1; then
    sed "s/^/  $name: /" "$T/check"
  else
    fail "$name: the records do not match the text"
    sed "s/^/  /" "$T/check" | head -5
  fi
}

# records NAME DB N: the DB holds N records, as make-db said
records() {
  checks=$((checks + 1))
  got=$("$DUMP" "$2" | wc -l)
  [ "$got" -eq "$3" ] || fail "$1: $2 holds $got records, make-db said $3"
}

printf 'The quick brown fox — jumps över the lazy dög.\nÀ bientôt 😀\n' >"$T/a.txt"
printf 'Second file: ends without a newline; ünïcödé ©' >"$T/b.txt"

# char tokenizer, two files, a validation split
if expect 0 "$DM" make-db --text "$T/a.txt" --text "$T/b.txt" --context 7 --val-fraction 0.2 \
  --out-train "$T/tr" --out-val "$T/va"; then
  has out "from 2 files; vocabulary:"
  has out "to $T/tr, with $T/tr/vocab.txt"
  cp "$T/out" "$T/made"
  n_train=$(sed -n 's/^wrote \([0-9]*\) records* (tokens.*/\1/p' "$T/made")
  n_val=$(sed -n 's/^wrote \([0-9]*\) records* from tokens \[.*/\1/p' "$T/made")
  records char "$T/tr" "$n_train"
  records char "$T/va" "$n_val"
  db_ok char 7 0.2 char "$T/tr" "$T/va" "$T/a.txt" "$T/b.txt"
  [ -f "$T/tr/data.mdb" ] && [ -f "$T/va/vocab.txt" ] || fail "char: a DB file is missing"
  # a net reads the records with TensorProtosDBInput: tokens and targets INT32 [N, T]
  cat >"$T/reader.pbtxt" <<EOF
name: "reader"
op { output: "tokens" output: "targets" type: "TensorProtosDBInput"
     arg { name: "db" s: "$T/tr" } arg { name: "batch_size" i: 3 } }
EOF
  if expect 0 "$DM" run --net "$T/reader.pbtxt" --output "tokens=$T/tok.npy" \
    --output "targets=$T/tgt.npy"; then
    checks=$((checks + 1))
    "$PY" "$CHECK" batch "$DUMP" "$T/tr" "$T/tok.npy" "$T/tgt.npy" >"$T/check" 2>&1
    case $? in
    0) sed "s/^/  reader: /" "$T/check" ;;
    77) echo "skipped: the batch check ($(cat "$T/check"))" ;;
    *) fail "the batch TensorProtosDBInput read"; sed "s/^/  /" "$T/check" | head -5 ;;
    esac
  fi
fi
# the byte tokenizer, a context of 1, no validation
expect 0 "$DM" make-db --text "$T/a.txt" --context 1 --val-fraction 0 --tokenizer byte \
  --out-train "$T/tb" && has out "vocabulary: 256 tokens" &&
  db_ok byte 1 0 byte "$T/tb" - "$T/a.txt"
# the byte tokenizer with a split, and a context as long as the text allows
L=$(wc -c <"$T/b.txt")
expect 0 "$DM" make-db --text "$T/b.txt" --context $(((L - 1) / 4)) --val-fraction 0.3 \
  --tokenizer byte --out-train "$T/tb2" --out-val "$T/vb2" &&
  db_ok byte-split $(((L - 1) / 4)) 0.3 byte "$T/tb2" "$T/vb2" "$T/b.txt"

# a real text, when the fortunes package is installed
F=/usr/share/games/fortunes/fortunes
if [ -f "$F" ]; then
  expect 0 "$DM" make-db --text "$F" --context 64 --val-fraction 0.1 --out-train "$T/ft" \
    --out-val "$T/fv" && db_ok fortunes 64 0.1 char "$T/ft" "$T/fv" "$F"
else
  echo "skipped: $F (Debian's fortunes package) is not installed"
fi

# refusals: each names what is wrong and leaves no DB and no temporary directory
refused() {
  dir=$1
  [ ! -e "$dir" ] || fail "a refused make-db left $dir"
  [ -z "$(ls -a "$T" | grep '\.tmp\.')" ] || fail "a refused make-db left $(ls -a "$T" | grep '\.tmp\.')"
}
printf 'ab\377cd' >"$T/bad.txt"
: >"$T/empty.txt"
printf 'abcdefghij' >"$T/ten.txt"
mkfifo "$T/fifo"
expect 1 "$DM" make-db --text "$T/a.txt" --text "$T/bad.txt" --context 2 --val-fraction 0 \
  --out-train "$T/x" && has err "bad.txt: invalid UTF-8 at byte offset 2"
refused "$T/x"
expect 1 "$DM" make-db --text "$T/empty.txt" --context 2 --val-fraction 0 --out-train "$T/x" &&
  has err "empty.txt: empty file"
refused "$T/x"
expect 1 "$DM" make-db --text "$T/ten.txt" --context 10 --val-fraction 0 --out-train "$T/x" &&
  has err "10 tokens, shorter than one window of --context 10 + 1"
refused "$T/x"
# 2 windows of 4: a fraction of 0.2 rounds to none, 0.9 to both (no training text left)
expect 1 "$DM" make-db --text "$T/ten.txt" --context 4 --val-fraction 0.2 --out-train "$T/x" \
  --out-val "$T/y" && has err "is no whole window"
refused "$T/x"
expect 1 "$DM" make-db --text "$T/ten.txt" --context 4 --val-fraction 0.9 --out-train "$T/x" \
  --out-val "$T/y" && has err "the training text is 1 tokens"
refused "$T/y"
expect 1 "$DM" make-db --text "$T" --context 2 --val-fraction 0 --out-train "$T/x" &&
  has err "is a directory"
expect 1 "$DM" make-db --text "$T/fifo" --context 2 --val-fraction 0 --out-train "$T/x" &&
  has err "FIFO"
expect 1 "$DM" make-db --text "$T/missing.txt" --context 2 --val-fraction 0 --out-train "$T/x" &&
  has err "missing.txt: cannot open"
refused "$T/x"
# an output that exists: refused before anything is written, the old DB untouched
sum=$(cat "$T/tb/data.mdb" "$T/tb/vocab.txt" | cksum)
expect 1 "$DM" make-db --text "$T/a.txt" --context 2 --val-fraction 0 --out-train "$T/tb" &&
  has err "already exists"
[ "$(cat "$T/tb/data.mdb" "$T/tb/vocab.txt" | cksum)" = "$sum" ] || fail "the existing DB changed"
expect 1 "$DM" make-db --text "$T/a.txt" --context 2 --val-fraction 0.5 --out-train "$T/x" \
  --out-val "$T/tb" && has err "already exists"
refused "$T/x"
expect 1 "$DM" make-db --text "$T/a.txt" --context 2 --val-fraction 0.5 --out-train "$T/x" \
  --out-val "$T/x" && has err "is given for two outputs"
refused "$T/x"

# usage errors (exit 2)
expect 2 "$DM" make-db --text "$T/a.txt" --out-train "$T/x" --val-fraction 0 && has err "--context"
expect 2 "$DM" make-db --text "$T/a.txt" --context 0 --out-train "$T/x" && has err "--context"
expect 2 "$DM" make-db --text "$T/a.txt" --context 2000000 --out-train "$T/x" && has err "1 to 1048576"
expect 2 "$DM" make-db --text "$T/a.txt" --context 4x --out-train "$T/x" && has err "'4x'"
expect 2 "$DM" make-db --text "$T/a.txt" --context 4 --val-fraction 1 --out-train "$T/x" \
  --out-val "$T/y" && has err "[0, 1)"
expect 2 "$DM" make-db --text "$T/a.txt" --context 4 --val-fraction -0.1 --out-train "$T/x" \
  --out-val "$T/y" && has err "[0, 1)"
expect 2 "$DM" make-db --text "$T/a.txt" --context 4 --out-train "$T/x" && has err "needs --out-val"
expect 2 "$DM" make-db --text "$T/a.txt" --context 4 --val-fraction 0 --out-train "$T/x" \
  --out-val "$T/y" && has err "--val-fraction is 0"
expect 2 "$DM" make-db --text "$T/a.txt" --context 4 --tokenizer word --out-train "$T/x" &&
  has err "char or byte"
expect 2 "$DM" make-db --text "$T/a.txt" --images "$T/a.txt" --context 4 --out-train "$T/x" &&
  has err "are for MNIST"
expect 2 "$DM" make-db --images "$T/a.txt" --labels "$T/a.txt" --context 4 --out-train "$T/x" &&
  has err "--context is for --text"
expect 2 "$DM" make-db --images "$T/a.txt" --labels "$T/a.txt" --val-fraction 0.05 \
  --out-train "$T/x" && has err "--val-fraction is for --text"
refused "$T/x"
expect 0 "$DM" make-db --help && has out "--text FILE"
cli_summary

#!/bin/sh
# generate_test.sh: `demitasse generate` with a bigram language model written here:
# logits = Gather(table [V, V], tokens) -> [1, T, V], row c of the table the logits of
# the token after c (text_lm.py). A table whose rows make one next character certain
# spells a known string greedily (FP32 and FP16 logits, an init net or a checkpoint, the
# context from --context or the `positions` blob), as does one that `train` fitted to a
# make-db --text DB of that string repeated; sampling is deterministic per seed,
# differs across seeds, and top-k keeps to the k most likely; then the refusals.
# usage: generate_test.sh DEMITASSE PYTHON TEXT_LM_PY
DM=$1
PY=$2
LM=$3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/cli_lib.sh"

if [ -z "$PY" ] || ! "$PY" -c 'import sys' 2>/dev/null; then
  echo "no python3: the model tables cannot be written"
  exit 77
fi

S="quick böx" # distinct characters: each has one successor
printf '%s\n' "$S" >"$T/s.txt"
"$DM" make-db --text "$T/s.txt" --context 4 --val-fraction 0 --out-train "$T/db" >/dev/null ||
  { echo "make-db failed"; exit 1; }
V="$T/db/vocab.txt"
"$PY" "$LM" init "$V" "$S" "$T/init.pbtxt"
"$PY" "$LM" init "$V" "$S" "$T/init_pos.pbtxt" --positions 6
"$PY" "$LM" init "$V" "$S" "$T/init_fpos.pbtxt" --positions 6 --positions-dtype float
"$PY" "$LM" init "$V" "$S" "$T/flat.pbtxt" --flat
cat >"$T/net.pbtxt" <<'EOF'
name: "bigram"
external_input: "table"
external_input: "tokens"
external_output: "logits"
op { input: "table" input: "tokens" output: "logits" type: "Gather" }
EOF
cat >"$T/net16.pbtxt" <<'EOF'
name: "bigram_fp16"
external_input: "table"
external_input: "tokens"
external_output: "logits"
op { input: "table" input: "tokens" output: "logits32" type: "Gather" }
op { input: "logits32" output: "logits" type: "Cast" arg { name: "to" i: 12 } }
EOF
cat >"$T/save.pbtxt" <<EOF
name: "save"
op { input: "table" input: "positions" type: "Save"
     arg { name: "db" s: "$T/ckpt" } arg { name: "db_type" s: "lmdb" } }
EOF

# same_text NAME WANT: stdout is WANT and a newline
same_text() {
  checks=$((checks + 1))
  printf '%s\n' "$2" | cmp -s - "$T/out" || { fail "$1: printed '$(cat "$T/out")', wanted '$2'"; }
}

gen() { "$DM" generate --net "$T/net.pbtxt" --vocab "$V" "$@"; }

# greedy: the table spells S from any of its characters; the prompt is echoed
spelt=$("$PY" "$LM" expect "$S" "q" 30)
expect 0 gen --init "$T/init.pbtxt" --prompt q --tokens 30 --temperature 0 --context 4 &&
  same_text greedy "$spelt"
spelt=$("$PY" "$LM" expect "$S" "ck bö" 17)
expect 0 gen --init "$T/init.pbtxt" --prompt "ck bö" --tokens 17 --temperature 0 --context 3 &&
  same_text "greedy, prompt longer than the context" "$spelt"
expect 0 gen --init "$T/init.pbtxt" --prompt "ck bö" --tokens 17 --top-k 1 --context 8 \
  --temperature 3 && same_text "top-k 1" "$spelt"
expect 0 gen --init "$T/init.pbtxt" --prompt "ck bö" --tokens 0 --context 8 &&
  same_text "no tokens" "ck bö"
expect 0 "$DM" generate --net "$T/net16.pbtxt" --vocab "$V" --init "$T/init.pbtxt" \
  --prompt "ck bö" --tokens 17 --temperature 0 --context 5 && same_text "FP16 logits" "$spelt"
sed 's/i: 12/i: 20/' "$T/net16.pbtxt" >"$T/netbf16.pbtxt"
expect 0 "$DM" generate --net "$T/netbf16.pbtxt" --vocab "$V" --init "$T/init.pbtxt" \
  --prompt "ck bö" --tokens 17 --temperature 0 --context 5 && same_text "BF16 logits" "$spelt"
# the context from the init net's `positions`, and from a checkpoint holding it
expect 0 gen --init "$T/init_pos.pbtxt" --prompt "ck bö" --tokens 17 --temperature 0 &&
  same_text "context from positions" "$spelt"
expect 0 "$DM" run --init "$T/init_pos.pbtxt" --net "$T/save.pbtxt"
expect 0 gen --init "$T/ckpt" --prompt "ck bö" --tokens 17 --temperature 0 &&
  same_text "a checkpoint" "$spelt"
# an init net after a checkpoint runs after it: the flat table replaces the loaded one,
# and its rows' largest logit is the last token, the vocabulary's largest character
expect 0 gen --init "$T/ckpt" --init "$T/flat.pbtxt" --prompt "q" --tokens 5 --temperature 0 &&
  same_text "init after a checkpoint" "qööööö"

# end to end: make-db --text, `train` fits the bigram table to the text's windows (a
# text that is S over and over: each character has one successor), and generate from
# its checkpoint spells S
i=0
while [ $i -lt 40 ]; do printf '%s' "$S"; i=$((i + 1)); done >"$T/rep.txt"
"$DM" make-db --text "$T/rep.txt" --context 8 --val-fraction 0 --out-train "$T/lmdb" >/dev/null
NV=$(head -1 "$T/lmdb/vocab.txt" | cut -d' ' -f4)
cat >"$T/lm_init.pbtxt" <<EOF
name: "lm_init"
op { output: "table" type: "ConstantFill" arg { name: "shape" ints: [$NV, $NV] } }
EOF
cat >"$T/lm_train.pbtxt" <<EOF
name: "lm_train"
op { input: "optimizer_iteration" output: "tokens" output: "targets" type: "TensorProtosDBInput"
     arg { name: "db" s: "lmdb" } arg { name: "batch_size" i: 4 } arg { name: "shuffle" i: 1 } }
op { input: "table" input: "tokens" output: "logits" type: "Gather" }
op { input: "logits" output: "logits2d" output: "shape3d" type: "Reshape"
     arg { name: "shape" ints: [-1, $NV] } }
op { input: "targets" output: "labels" output: "shape2d" type: "Reshape" arg { name: "shape" ints: [-1] } }
op { input: "logits2d" input: "labels" output: "softmax" output: "loss" type: "SoftmaxWithLoss" }
external_output: "loss"
EOF
expect 0 "$DM" train --init "$T/lm_init.pbtxt" --net "$T/lm_train.pbtxt" --train-db "$T/lmdb" \
  --iters 60 --optimizer sgd --lr 2 --checkpoint "$T/lm_ckpt" --checkpoint-every 60
spelt=$("$PY" "$LM" expect "$S" "q" 30)
expect 0 "$DM" generate --init "$T/lm_ckpt" --net "$T/net.pbtxt" --vocab "$T/lmdb/vocab.txt" \
  --prompt q --tokens 30 --temperature 0 --context 8 && same_text "a trained bigram" "$spelt"

# sampling: a seed gives one text, other seeds others; top-k keeps to the k best
sample() { gen --init "$T/flat.pbtxt" --prompt q --tokens 200 --context 4 "$@"; }
expect 0 sample --seed 7 && cp "$T/out" "$T/s7"
expect 0 sample --seed 7 && { checks=$((checks + 1)); cmp -s "$T/out" "$T/s7" || fail "seed 7 twice gave two texts"; }
expect 0 sample --seed 8 && { checks=$((checks + 1)); cmp -s "$T/out" "$T/s7" && fail "seeds 7 and 8 gave one text"; }
expect 0 sample && cp "$T/out" "$T/s0"
expect 0 sample --seed 0 && { checks=$((checks + 1)); cmp -s "$T/out" "$T/s0" || fail "the default seed is not 0"; }
expect 0 gen --init "$T/init.pbtxt" --prompt q --tokens 300 --context 4 --temperature 4 --top-k 2 \
  --seed 3 && { checks=$((checks + 1)); "$PY" "$LM" topk "$S" "$(cat "$T/out")" 2 >"$T/topk" ||
  fail "top-k 2: $(cat "$T/topk")"; }
checks=$((checks + 1))
grep -qx '[0-9]*' "$T/topk" && [ "$(cat "$T/topk")" -gt 50 ] || fail "top-k 2 at temperature 4 took the second choice $(cat "$T/topk") times in 300"
expect 0 gen --init "$T/init.pbtxt" --prompt q --tokens 300 --context 4 --temperature 4 \
  --seed 3 && { checks=$((checks + 1)); "$PY" "$LM" topk "$S" "$(cat "$T/out")" 2 >/dev/null &&
  fail "without --top-k, 300 tokens at temperature 4 never left the two most likely"; }

# refusals, each naming what is wrong
printf 'quick böx!\n' >"$T/s2.txt"
"$DM" make-db --text "$T/s2.txt" --context 4 --val-fraction 0 --out-train "$T/db2" >/dev/null
expect 1 "$DM" generate --net "$T/net.pbtxt" --vocab "$T/db2/vocab.txt" --init "$T/init.pbtxt" \
  --prompt q --tokens 3 --context 4 && has err "V = 10 tokens, but the vocabulary" &&
  has err "has 11"
expect 1 gen --init "$T/init.pbtxt" --prompt q --tokens 3 && has err "give --context"
expect 1 gen --init "$T/init_fpos.pbtxt" --prompt q --tokens 3 && has err "'positions' is FLOAT"
mkdir "$T/empty"
expect 1 gen --init "$T/empty" --prompt q --tokens 3 --context 4 &&
  has err "--init '$T/empty' is a directory, so a checkpoint" && has err "no LMDB"
expect 1 gen --init "$T/db" --prompt q --tokens 3 --context 4 &&
  has err "--init '$T/db' is a directory, so a checkpoint"
expect 1 gen --init "$T/missing.pbtxt" --prompt q --tokens 3 --context 4 && has err "missing.pbtxt"
expect 1 gen --init "$T/init.pbtxt" --prompt "qz" --tokens 3 --context 4 &&
  has err "character U+007A 'z' at byte offset 1 is not in the vocabulary"
expect 1 gen --init "$T/init.pbtxt" --prompt "$(printf 'q\377')" --tokens 3 --context 4 &&
  has err "invalid UTF-8 at byte offset 1"
expect 1 gen --init "$T/init.pbtxt" --prompt "" --tokens 3 --context 4 && has err "--prompt is empty"
expect 1 gen --init "$T/init.pbtxt" --prompt q --tokens 3 --context 4 --top-k 11 &&
  has err "--top-k 11 is more than the 10 tokens"
expect 1 gen --init "$T/init.pbtxt" --prompt q --tokens 3 --context 4 --input-blob ids &&
  has err "no op reads 'ids'"
expect 1 gen --init "$T/init.pbtxt" --prompt q --tokens 3 --context 4 --output-blob probs &&
  has err "wrote no blob 'probs'"
expect 1 gen --init "$T/init.pbtxt" --prompt q --tokens 3 --context 4 --vocab "$T/s.txt" &&
  has err "s.txt:1: not a vocabulary"
# logits of another dtype or shape: refused before the prompt is echoed
sed 's/i: 12/i: 2/' "$T/net16.pbtxt" >"$T/neti32.pbtxt"
expect 1 "$DM" generate --net "$T/neti32.pbtxt" --vocab "$V" --init "$T/init.pbtxt" --prompt q \
  --tokens 3 --context 4 && has err "are INT32, not FLOAT, FLOAT16 or BFLOAT16" &&
  { checks=$((checks + 1)); [ ! -s "$T/out" ] || fail "the prompt was echoed before the refusal"; }
cat >"$T/net2d.pbtxt" <<'EOF'
name: "bigram_2d"
op { input: "table" input: "tokens" output: "logits3d" type: "Gather" }
op { input: "logits3d" output: "logits" output: "old" type: "Reshape" arg { name: "shape" ints: [-1, 10] } }
EOF
expect 1 "$DM" generate --net "$T/net2d.pbtxt" --vocab "$V" --init "$T/init.pbtxt" --prompt q \
  --tokens 3 --context 4 && has err "are 4x10, not [1, 4, V] for --context 4"
expect 2 gen --init "$T/init.pbtxt" --prompt q --tokens 3 --context 4 --top-k -1 && has err "--top-k"
expect 2 gen --init "$T/init.pbtxt" --prompt q --tokens 3 --context 4 --top-k two && has err "'two'"
expect 2 gen --init "$T/init.pbtxt" --prompt q --tokens 3 --temperature -1 && has err "--temperature"
expect 2 gen --init "$T/init.pbtxt" --prompt q --tokens 3 --temperature nan && has err "--temperature"
expect 2 gen --init "$T/init.pbtxt" --prompt q --tokens 3 --seed -4 && has err "--seed"
expect 2 gen --init "$T/init.pbtxt" --prompt q --tokens 3 --context 0 && has err "--context"
expect 2 gen --init "$T/init.pbtxt" --prompt q && has err "needs --init, --net, --vocab, --prompt and --tokens"
expect 2 gen --init "$T/init.pbtxt" --prompt q --tokens 3 --threads 0 && has err "--threads"
expect 0 "$DM" generate --help && has out "--top-k K"
cli_summary

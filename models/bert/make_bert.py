#!/usr/bin/python3
"""make_bert.py: writes a BERT-style encoder with a masked-LM head as Caffe2 text nets.

    python3 models/bert/make_bert.py --layers 4 --width 256 --heads 4 --context 128 \
        (--vocab V | --vocab-file vocab.txt) --out-dir models/bert [--seed S] [--batch N]

writes, sharing blob names:
  bert_init.pbtxt   the weights (N(0, 0.02), the residual projections N(0, 0.02 /
                    sqrt(2 * layers)), LayerNorm gamma 1 and beta 0, biases 0) and
                    `positions` INT32 [T] = 0..T-1
  bert_train.pbtxt  TensorProtosDBInput (tokens, targets INT32 [N, T]; targets unused)
                    -> MaskTokens (15% of the positions chosen: 80% [MASK], 10% a random
                    token of [0, V), 10% kept; the labels -1 elsewhere) -> the encoder
                    -> the MLM head -> SoftmaxWithLoss and Accuracy over the chosen positions
  bert_test.pbtxt   the same on the validation DB, read in order

The vocabulary has V + 1 rows: id V is [MASK]. The encoder is pre-LayerNorm (as GPT-2,
not BERT's post-LN: the same block writer as the GPT, and it trains without warmup) with
bidirectional attention and GELU's erf form, then a final LayerNorm. The MLM head is
BERT's: FC D -> Gelu -> LayerNorm -> the decoder tied to the token embedding, an FC
whose W is wte (h wte^T + a bias of V + 1, nn.Linear with the tied weight). No
segment embeddings, no next-sentence head, no dropout. The accuracy is the masked-token
accuracy: Accuracy's ignore_label -1 leaves out the positions not chosen.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "transformer"))
import netgen  # noqa: E402

PROG = "models/bert/make_bert.py"


def mask_op(n, V, seed):
    n.comment("MaskTokens: masked [N, T] (the encoder's input), mlm_labels [N, T] = the "
              "original token where chosen, -1 elsewhere; the draw depends on the "
              "iteration, so a resumed run masks as an uninterrupted one")
    n.op("MaskTokens", ["tokens", "optimizer_iteration"], ["masked", "mlm_labels"],
         [netgen.arg_f("mask_prob", 0.15), netgen.arg_i("mask_id", V),
          netgen.arg_i("vocab_size", V), netgen.arg_i("seed", seed),
          netgen.arg_i("ignore_label", -1)])


def forward_loss(m, V):
    """masked [N, T] -> the encoder -> the MLM head -> softmax, loss."""
    c, n = m.cfg, m.net
    rows = V + 1
    x = m.embeddings("masked", rows)
    for i in range(c.layers):
        x = m.block(x, i, causal=False, fast_gelu=False)
    m.init_comment("final LayerNorm and the MLM head")
    n.comment("final LayerNorm; the MLM head: FC D -> Gelu -> LayerNorm -> logits [N, T, "
              "V + 1] = FC(h, wte, mlm_dec_b)")
    h = m.layer_norm(x, "lnf")
    h = m.linear(h, "mlm_fc", c.width, c.width, 0.02)
    n.op("Gelu", [h], ["mlm_gelu"])
    h = m.layer_norm("mlm_gelu", "mlm_ln")
    m.tied_logits(h, "logits", bias="mlm_dec_b")
    n.comment("loss: cross-entropy over the chosen positions only (label -1 elsewhere)")
    n.op("SoftmaxWithLoss", ["logits", "mlm_labels"], ["softmax", "loss"],
         [netgen.arg_i("axis", 2), netgen.arg_i("ignore_label", -1)])
    n.comment("accuracy: of the chosen positions only, as the loss")
    m.token_accuracy("softmax", "mlm_labels", rows, ignore_label=-1)
    n.outputs = ["loss", "accuracy"]


def main():
    a = netgen.parse_args("make_bert.py", "Writes a BERT-style MLM encoder as Caffe2 text nets.", 16)
    V = a.vocab
    what = ("BERT (masked LM): %d layers, width %d, %d heads, context %d, vocabulary %d + "
            "[MASK] = %d rows (tied embedding)" % (a.layers, a.width, a.heads, a.context, V, V + 1))
    m = netgen.Model(a, PROG, what, "bert", [
        "The init net: N(0, 0.02) fills (residual projections scaled), each with its own",
        "seed, and the positions 0..T-1."])
    note = "the GPT's records; targets unused"
    m.new_net("train", [
        "The training net, forward only (`demitasse train` adds the gradient and optimizer",
        "passes). Needs the MaskTokens op."], note)
    mask_op(m.net, V, a.seed)
    forward_loss(m, V)
    m.new_net("test", [
        "The test net: the training net's forward on the validation DB, read in order; the",
        "masking is drawn from the iteration blob training keeps (no dropout)."], note)
    mask_op(m.net, V, a.seed)
    forward_loss(m, V)
    m.write_all()


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""make_gpt.py: writes a GPT (decoder-only, causal) as Caffe2 text nets (standard library).

    python3 models/gpt/make_gpt.py --layers 4 --width 256 --heads 4 --context 128 \
        (--vocab V | --vocab-file vocab.txt) --out-dir models/gpt [--seed S] [--batch N]

writes, sharing blob names:
  gpt_init.pbtxt   the weights: GPT-2's init (N(0, 0.02); the attention and MLP output
                   projections N(0, 0.02 / sqrt(2 * layers)); LayerNorm gamma 1, beta 0;
                   biases 0) and `positions` INT32 [T] = 0..T-1 (the context length
                   `demitasse generate` reads)
  gpt_train.pbtxt  TensorProtosDBInput (tokens, targets INT32 [N, T]) -> the forward ->
                   SoftmaxWithLoss at axis 2 -> loss, and a next-token accuracy
  gpt_test.pbtxt   the same forward on the validation DB, read in order
  gpt_infer.pbtxt  tokens INT32 [1, T] fed -> logits [1, T, V]; no DB, no loss

The model: learned positions, pre-LayerNorm blocks (attention with a causal mask, MLP
4D with GELU's tanh form as GPT-2), a final LayerNorm, and the head tied to the token
embedding (logits = h wte^T, no bias). No dropout.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "transformer"))
import netgen  # noqa: E402

PROG = "models/gpt/make_gpt.py"


def forward(m, tokens, rows):
    """The forward ops from tokens [N, T] to logits [N, T, rows]."""
    c, n = m.cfg, m.net
    x = m.embeddings(tokens, rows)
    for i in range(c.layers):
        x = m.block(x, i, causal=True, fast_gelu=True)
    m.init_comment("final LayerNorm")
    n.comment("final LayerNorm, then the tied head: logits [N, T, V] = lnf wte^T")
    h = m.layer_norm(x, "lnf")
    return m.tied_logits(h, "logits")


def loss_and_accuracy(m, logits, V):
    """softmax, loss = SoftmaxWithLoss at axis 2; the next-token accuracy."""
    m.net.comment("loss: cross-entropy of each position's next token, averaged over N * T")
    m.net.op("SoftmaxWithLoss", [logits, "targets"], ["softmax", "loss"], [netgen.arg_i("axis", 2)])
    m.token_accuracy("softmax", "targets", V)
    m.net.outputs = ["loss", "accuracy"]


def main():
    a = netgen.parse_args("make_gpt.py", "Writes a GPT as Caffe2 text nets.", 16)
    V = a.vocab
    what = ("GPT: %d layers, width %d, %d heads, context %d, vocabulary %d (tied embedding)"
            % (a.layers, a.width, a.heads, a.context, V))
    m = netgen.Model(a, PROG, what, "gpt", [
        "The init net: GPT-2's fills, each with its own seed, and the positions 0..T-1."])
    note = "targets[t] = tokens[t + 1] of the text"

    m.new_net("train", [
        "The training net, forward only (`demitasse train` adds the gradient and optimizer",
        "passes; `demitasse rewrite --grad --loss loss --data tokens --data targets` shows",
        "them). The DB input reads batch number `optimizer_iteration`, so a resumed run",
        "reads the batches an uninterrupted one would."], note)
    loss_and_accuracy(m, forward(m, "tokens", V), V)

    m.new_net("test", [
        "The test net: the training net's forward on the validation DB, read in order",
        "(nothing in the model differs between training and test: no dropout)."], note)
    loss_and_accuracy(m, forward(m, "tokens", V), V)

    infer = m.new_net("infer", [
        "The inference net: tokens INT32 [1, %d] fed, logits [1, %d, %d] out"
        % (a.context, a.context, V),
        "(row t scores the token after position t); run after gpt_init.pbtxt."])
    infer.inputs = ["tokens"]
    forward(m, "tokens", V)
    infer.outputs = ["logits"]
    m.write_all()


if __name__ == "__main__":
    main()

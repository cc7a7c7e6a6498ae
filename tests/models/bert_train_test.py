"""bert_train_test.py: the generated BERT trained through `demitasse train`.

    bert_train_test.py DEMITASSE MAKE_LM_DB SOURCE_ROOT (mlm | stand-in)

mlm: the tiny BERT (lm_common.TINY) as generated, masking by the built-in MaskTokens op
  (a build that lists no MaskTokens in `demitasse ops` fails). On make_lm_db's cycle a
  masked token is a function of its neighbours, so the model can learn it.
stand-in: the same nets with MaskTokens replaced by two Copy ops (masked = tokens,
  labels = targets: each position predicts the next token, which bidirectional
  attention sees), so the encoder, the MLM head and the ignore_label loss run today.

Both train with bert_test.pbtxt as the test net on a validation DB of the same cycle.
Both: the first loss within lm_common.initial_loss_bound of ln(V + 1) (the head scores
V + 1 rows, [MASK] included: the logits are lnf-like rows times wte plus a zero bias,
the bound's case), and the mean of the last 10 below ln(V + 1) / 2 (a geometric-mean
probability of the right token above (V + 1)^(-1/2) = 0.22; chance is 1 / (V + 1)), and
so the test net's loss at the end.
The last 10 rather than 5: MaskTokens scores only ~15% of the positions, so single
losses are noisy. The batch is 32 (77 scored positions a step) and Adam's step 0.003:
with TINY's batch of 8 and the step of 0.01 the GPT test uses, the masked-LM loss stays
on its plateau at the unigram loss ln V for 1,500 steps, while masking half the tokens
learns at once, so the signal per step, not the model, was short.
"""
import math
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lm_common as lm  # noqa: E402

ITERS = 300
CFG = dict(lm.TINY, batch=32)


def main():
    demitasse, make_lm_db, src = (os.path.abspath(p) for p in sys.argv[1:4])
    mode = sys.argv[4]
    if mode == "mlm" and "MaskTokens" not in lm.run([demitasse, "ops"]).split():
        lm.fail("this build registers no MaskTokens op (`demitasse ops`): a built-in op")
    cfg = CFG
    rows = cfg["vocab"] + 1
    chance = math.log(rows)
    bound0 = lm.initial_loss_bound(cfg["width"], rows)
    with tempfile.TemporaryDirectory(prefix="dm_bert_train_") as d:
        lm.generate(src, "bert", d, cfg)
        if mode == "stand-in":
            lm.stand_in(os.path.join(d, "bert_train.pbtxt"))
            lm.stand_in(os.path.join(d, "bert_test.pbtxt"))
        lm.make_db(make_lm_db, os.path.join(d, "train_lmdb"), 64)
        lm.make_db(make_lm_db, os.path.join(d, "val_lmdb"), 16)  # windows of the same cycle
        csv = os.path.join(d, "bert.csv")
        lm.run([demitasse, "train", "--init", "bert_init.pbtxt", "--net", "bert_train.pbtxt",
                "--train-db", "train_lmdb", "--iters", ITERS, "--optimizer", "adam", "--lr", "0.003",
                "--test-net", "bert_test.pbtxt", "--test-db", "val_lmdb", "--test-every", ITERS,
                "--test-iters", 2, "--log-every", 1, "--csv", csv], cwd=d)
        losses, test = lm.read_losses(csv), lm.read_losses(csv, "test_loss")
        if len(losses) != ITERS or len(test) != 1:
            lm.fail("%d losses and %d test losses, expected %d and 1" % (len(losses), len(test), ITERS))
        first, last = losses[0], sum(losses[-10:]) / 10
        print("%s: first loss %.4f (ln(V + 1) = %.4f, bound +-%.4f), last 10 mean %.4f, test net "
              "%.4f (limit %.4f)" % (mode, first, chance, bound0, last, test[0], chance / 2))
        if not test[0] < chance / 2:
            lm.fail("the test net's loss %.6f is not below %.4f" % (test[0], chance / 2))
        if abs(first - chance) > bound0:
            lm.fail("first loss %.6f not within %.4f of ln(V + 1) = %.6f" % (first, bound0, chance))
        if not last < chance / 2:
            lm.fail("the last losses average %.6f, not below %.4f" % (last, chance / 2))
    print("PASS")


if __name__ == "__main__":
    main()

"""gpt_train_test.py: the generated GPT trained through the real pipeline (CLI).

    gpt_train_test.py DEMITASSE MAKE_LM_DB SOURCE_ROOT

The tiny GPT (lm_common.TINY), with gpt_test.pbtxt as the test net, on a token DB
whose next token is a function of the current one (make_lm_db's cycle through a
permutation): `demitasse train` in FP32, then with --fp16 and --bf16. Each run's first
loss (the initial weights') must be within lm_common.initial_loss_bound of ln V,
chance; the runs must then learn:
  - FP32: the mean of the last 5 losses, and the test net's loss at the end, below
    ln(V) / 4, i.e. a geometric-mean probability of the right token above V^(-1/4)
    (0.47 at V = 20; chance is 1 / V);
  - FP16 and BF16: both below ln(V) / 2 (probability above V^(-1/2) = 0.22). The bound is
    looser because reduced precision changes the trajectory, not only the rounding:
    BF16 keeps 8 significant bits (u = 2^-8), so the logits of the head (|z| up to ~10
    once trained) carry errors near 10 * 2^-8 * sqrt(D) ~ 0.2 each, and the steps that
    follow differ; the bound asks for learning, not for FP32's numbers.
"""
import math
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lm_common as lm  # noqa: E402

ITERS = 60


def train(demitasse, d, tag, extra):
    """The training losses, one per iteration, and the test net's loss at the end."""
    csv = os.path.join(d, tag + ".csv")
    lm.run([demitasse, "train", "--init", "gpt_init.pbtxt", "--net", "gpt_train.pbtxt",
            "--train-db", "train_lmdb", "--iters", ITERS, "--optimizer", "adam", "--lr", "0.01",
            "--test-net", "gpt_test.pbtxt", "--test-db", "val_lmdb", "--test-every", ITERS,
            "--test-iters", 2, "--log-every", 1, "--csv", csv] + extra, cwd=d)
    losses, test = lm.read_losses(csv), lm.read_losses(csv, "test_loss")
    if len(losses) != ITERS or len(test) != 1:
        lm.fail("%s: %d losses and %d test losses in %s, expected %d and 1"
                % (tag, len(losses), len(test), csv, ITERS))
    return losses, test[0]


def main():
    demitasse, make_lm_db, src = (os.path.abspath(p) for p in sys.argv[1:4])
    cfg = lm.TINY
    V = cfg["vocab"]
    chance = math.log(V)
    bound0 = lm.initial_loss_bound(cfg["width"], V)
    with tempfile.TemporaryDirectory(prefix="dm_gpt_train_") as d:
        lm.generate(src, "gpt", d)
        lm.make_db(make_lm_db, os.path.join(d, "train_lmdb"), 64)
        # the validation DB: windows of the same cycle (two test batches), so the test
        # net's loss checks that it reads the trained weights, not generalisation
        lm.make_db(make_lm_db, os.path.join(d, "val_lmdb"), 16)
        for tag, extra, limit in (("fp32", [], chance / 4), ("fp16", ["--fp16"], chance / 2),
                                  ("bf16", ["--bf16"], chance / 2)):
            losses, test = train(demitasse, d, tag, extra)
            first, last = losses[0], sum(losses[-5:]) / 5
            print("%s: first loss %.4f (ln V = %.4f, bound +-%.4f), last 5 mean %.4f, test net "
                  "%.4f (limit %.4f)" % (tag, first, chance, bound0, last, test, limit))
            if not test < limit:
                lm.fail("%s: the test net's loss %.6f on the validation DB is not below %.4f"
                        % (tag, test, limit))
            if abs(first - chance) > bound0:
                lm.fail("%s: first loss %.6f is not within %.4f of ln V = %.6f" % (tag, first, bound0, chance))
            if not last < limit:
                lm.fail("%s: the last losses average %.6f, not below %.4f" % (tag, last, limit))
    print("PASS")


if __name__ == "__main__":
    main()

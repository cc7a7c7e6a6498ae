"""gpt_overflow_test.py: attention logits that overflow FP16, named by --explain-overflow.

    gpt_overflow_test.py DEMITASSE MAKE_LM_DB SOURCE_ROOT

The tiny GPT (lm_common.TINY) with layer 1's query and key weights drawn at N(0, 30^2)
instead of N(0, 0.02^2): its LayerNorm'd input has unit variance over D = 32, so q and k
have entries of standard deviation sqrt(32) * 30 ~ 170, well inside FP16, while their
products over a head's 16 dims, the attention logits q.k before the 1/sqrt(d) scale, have
standard deviation ~ 4 * 170^2 ~ 1.2e5, past FP16's 65504. So:
  - FP32 trains (finite losses: the softmax saturates, nothing overflows);
  - --fp16 --explain-overflow skips every step whatever the loss scale (the overflow is
    in the forward pass) and must name, on each skipped step, the BatchMatMul that
    writes l1_att, by its index in the net as written, and then stop with an error
    after its run of skipped steps instead of training on silently;
  - --fp16 --fp32-ops BatchMatMul, the fix the advice names, trains with no skipped step;
  - --bf16 trains: BF16 has FP32's exponent range.
"""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lm_common as lm  # noqa: E402

ITERS = 3
BIG_STD = 30


def scale_qk(path):
    """Rewrites the init net with l1_q_w and l1_k_w drawn at N(0, BIG_STD^2)."""
    with open(path) as f:
        text = f.read()
    for w in ("l1_q_w", "l1_k_w"):
        text, n = re.subn(r'(output: "%s" type: "GaussianFill".*?name: "std" f: )[0-9.e-]+' % w,
                          r"\g<1>%d" % BIG_STD, text, count=1, flags=re.S)
        if n != 1:
            lm.fail("%s: no GaussianFill of %s" % (path, w))
    with open(path, "w") as f:
        f.write(text)


def op_index(path, output):
    """The index of the op writing `output` in a text net, as `train` counts ops."""
    ops = re.findall(r"^op \{(.*?)(?=^op \{|\Z)", open(path).read(), flags=re.S | re.M)
    for i, body in enumerate(ops):
        if re.search(r'output: "%s"' % re.escape(output), body):
            return i, re.search(r'type: "(\w+)"', body).group(1)
    lm.fail("%s: no op writes %s" % (path, output))


def train(demitasse, d, extra, check=True):
    cmd = [demitasse, "train", "--init", "gpt_init.pbtxt", "--net", "gpt_train.pbtxt",
           "--train-db", "train_lmdb", "--iters", ITERS, "--optimizer", "adam", "--lr", "0.001",
           "--log-every", 1, "--threads", 1] + extra
    if check:
        return lm.run(cmd, cwd=d), 0
    p = subprocess.run([str(c) for c in cmd], cwd=d, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True)
    return p.stdout, p.returncode


def main():
    demitasse, make_lm_db, src = (os.path.abspath(p) for p in sys.argv[1:4])
    with tempfile.TemporaryDirectory(prefix="dm_gpt_overflow_") as d:
        lm.generate(src, "gpt", d)
        scale_qk(os.path.join(d, "gpt_init.pbtxt"))
        lm.make_db(make_lm_db, os.path.join(d, "train_lmdb"), 64)
        index, kind = op_index(os.path.join(d, "gpt_train.pbtxt"), "l1_att")
        if kind != "BatchMatMul":
            lm.fail("l1_att is written by %s, not BatchMatMul: the net changed" % kind)

        for tag, extra in (("fp32", []), ("bf16", ["--bf16"])):
            csv = os.path.join(d, tag + ".csv")
            train(demitasse, d, extra + ["--csv", csv])
            losses = lm.read_losses(csv)
            if len(losses) != ITERS or not all(l == l and abs(l) < 1e30 for l in losses):
                lm.fail("%s: losses %s, expected %d finite ones" % (tag, losses, ITERS))
            print("%s trains: losses %s" % (tag, " ".join("%.4f" % l for l in losses)))

        out, rc = train(demitasse, d, ["--fp16", "--explain-overflow"], check=False)
        named = re.findall(r"iteration \d+ skipped \(loss scale now [0-9.e+]+\): first inf/nan "
                           r"in op (\d+) \((\w+)\)[^\n]*output 0 '(\w+)'", out)
        if rc == 0:
            lm.fail("--fp16 with overflowing attention logits exited 0:\n" + out[-2000:])
        if "steps in a row skipped on overflow" not in out:
            lm.fail("--fp16: no error about the run of skipped steps:\n" + out[-2000:])
        if not named:
            lm.fail("--fp16 --explain-overflow named no op:\n" + out[-2000:])
        want = (str(index), "BatchMatMul", "l1_att")
        wrong = [n for n in named if n != want]
        if wrong:
            lm.fail("--explain-overflow named %s, expected op %s (BatchMatMul) writing l1_att"
                    % (wrong[0], index))
        print("fp16: %d skipped steps, each naming op %s (BatchMatMul) output 'l1_att'; exit %d"
              % (len(named), index, rc))

        csv = os.path.join(d, "fp16_fix.csv")
        train(demitasse, d, ["--fp16", "--fp32-ops", "BatchMatMul", "--csv", csv])
        skipped = lm.read_losses(csv, "skipped")
        if len(skipped) != ITERS or skipped[-1] != 0:
            lm.fail("--fp16 --fp32-ops BatchMatMul: skipped column %s, expected %d rows ending "
                    "in 0" % (skipped, ITERS))
        print("fp16 --fp32-ops BatchMatMul trains with no skipped step")


if __name__ == "__main__":
    main()

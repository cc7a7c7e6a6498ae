"""gpt_steps_test.py: 200 steps of the generated GPT's training beside PyTorch's.

    gpt_steps_test.py DEMITASSE MAKE_LM_DB SOURCE_ROOT

The tiny GPT (lm_common.TINY) trained by `demitasse train` (plain SGD, the batches in
the DB's order) and by PyTorch in FP32 from the same initial weights (fetched from
Demitasse's init net) on the same batches, the model written once in
gpt_reference_test.reference. FP32 training is not reproducible across summation
orders: rounding differences grow with the steps. So the bound is what FP32 itself
gives: PyTorch trained twice, the second time on every batch with its rows in reverse
order (the same mathematics; every sum over the batch, in the loss and in each weight
gradient, taken in another order), and at every step Demitasse's loss must be within
8 times the largest gap the two PyTorch runs have shown so far (the gap of one pair of
orders is a sample of the spread, not its maximum: 8 covers the spread of orders a
different kernel takes), plus 2^-24 * 64 of the loss for the steps where both PyTorch
runs still agree to the last bits.
"""
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lm_common as lm  # noqa: E402

STEPS = 200
LR = 0.1
RECORDS = 64
SPREAD = 8.0
FLOOR = 64 * 2.0 ** -24


def torch_losses(w0, batches, cfg, reverse):
    import torch
    from gpt_reference_test import reference
    w = {k: torch.nn.Parameter(torch.tensor(v, dtype=torch.float32)) for k, v in w0.items()}
    opt = torch.optim.SGD(w.values(), lr=LR)
    out = []
    for tok, tgt in batches:
        tok, tgt = torch.tensor(tok, dtype=torch.long), torch.tensor(tgt, dtype=torch.long)
        if reverse:
            tok, tgt = tok.flip(0), tgt.flip(0)
        _, loss = reference(w, tok, cfg, tgt)
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(float(loss))
    return out


def main():
    demitasse, make_lm_db, src = (os.path.abspath(p) for p in sys.argv[1:4])
    try:
        import numpy as np
        import torch  # noqa: F401
    except ImportError as e:
        print("skipped: %s" % e)
        sys.exit(lm.SKIP)
    cfg = lm.TINY
    N = cfg["batch"]
    with tempfile.TemporaryDirectory(prefix="dm_gpt_steps_") as d:
        lm.generate(src, "gpt", d)
        lm.make_db(make_lm_db, os.path.join(d, "train_lmdb"), RECORDS)
        with open(os.path.join(d, "gpt_train.pbtxt")) as f:
            net = f.read()
        net, n = re.subn(r'arg \{ name: "shuffle" i: 1 \}', 'arg { name: "shuffle" i: 0 }', net)
        if n != 1:
            lm.fail("gpt_train.pbtxt: expected one shuffle argument, found %d" % n)
        with open(os.path.join(d, "ordered.pbtxt"), "w") as f:
            f.write(net)
        # every record, in the DB's order, by the same reader
        with open(os.path.join(d, "all.pbtxt"), "w") as f:
            f.write('op { output: "tokens" output: "targets" type: "TensorProtosDBInput" '
                    'arg { name: "db" s: "train_lmdb" } arg { name: "db_type" s: "lmdb" } '
                    'arg { name: "batch_size" i: %d } }\n'
                    'external_output: ["tokens", "targets"]\n' % RECORDS)
        lm.run([demitasse, "run", "--net", "all.pbtxt", "--output", "tokens=tok.npy",
                "--output", "targets=tgt.npy"], cwd=d)
        tok, tgt = np.load(os.path.join(d, "tok.npy")), np.load(os.path.join(d, "tgt.npy"))
        with open(os.path.join(d, "gpt_init.pbtxt")) as f:
            params = re.findall(r'output: "([^"]*)" type: "(?:GaussianFill|ConstantFill)"', f.read())
        cmd = [demitasse, "run", "--net", "gpt_init.pbtxt"]
        for p in params:
            cmd += ["--output", "%s=w_%s.npy" % (p, p)]
        lm.run(cmd, cwd=d)
        w0 = {p: np.load(os.path.join(d, "w_%s.npy" % p)) for p in params}
        csv = os.path.join(d, "steps.csv")
        lm.run([demitasse, "train", "--init", "gpt_init.pbtxt", "--net", "ordered.pbtxt",
                "--train-db", "train_lmdb", "--iters", STEPS, "--optimizer", "sgd", "--lr", LR,
                "--log-every", 1, "--csv", csv], cwd=d)
        ours = lm.read_losses(csv)
        if len(ours) != STEPS:
            lm.fail("%d losses in the CSV, expected %d" % (len(ours), STEPS))
        batches = [(tok[(b * N + np.arange(N)) % RECORDS], tgt[(b * N + np.arange(N)) % RECORDS])
                   for b in range(STEPS)]
        a = torch_losses(w0, batches, cfg, False)
        b = torch_losses(w0, batches, cfg, True)
        gap, worst, worst_at = 0.0, 0.0, 0
        for t in range(STEPS):
            gap = max(gap, abs(a[t] - b[t]))
            bound = SPREAD * gap + FLOOR * abs(a[t])
            err = abs(ours[t] - a[t])
            if err / bound > worst:
                worst, worst_at = err / bound, t
            if err > bound:
                lm.fail("step %d: demitasse %.8f, torch %.8f (reversed batch %.8f): |diff| %.3g "
                        "> %.3g" % (t + 1, ours[t], a[t], b[t], err, bound))
        print("loss %.4f -> %.4f (torch %.4f -> %.4f); the two torch orders' largest gap %.3g; "
              "worst step %d at %.2f of its bound" % (ours[0], ours[-1], a[0], a[-1], gap,
                                                       worst_at + 1, worst))
    print("PASS")


if __name__ == "__main__":
    main()

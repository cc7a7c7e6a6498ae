"""gpt_reference_test.py: the generated GPT computes what the model is, by PyTorch in double.

    gpt_reference_test.py DEMITASSE MAKE_LM_DB SOURCE_ROOT

The tiny GPT (lm_common.TINY) written out independently in torch (float64, autograd)
from its definition: token + learned position embeddings, pre-LayerNorm blocks
(causal softmax attention scaled by 1/sqrt(Dh), MLP 4D with GELU's tanh form),
final LayerNorm, logits = h wte^T, mean cross-entropy. Demitasse's weights and batch
come from its own runs (`demitasse run --output`), so only the nets' wiring is tested.
  - training: `rewrite --grad` of gpt_train.pbtxt run on one batch: the loss, and the
    gradient of every weight against autograd's. wte is read twice (the Gather and the
    tied head): its gradient must be the sum of both uses; each use's part alone is
    checked to be far from the total, so a dropped part cannot pass.
  - inference: gpt_infer.pbtxt gives logits [1, T, V], equal to the reference's; and
    causal: changing the last token leaves the logits of every earlier position
    bit-identical (masked keys weigh exactly 0).
Tolerance, FP32 against double: each product of K terms is within K u |a||b| (u =
2^-24); the longest here is K = 4D = 128, and a value passes through about 40 such
steps forward and back, so |error| <= 40 * 128 * u * max|ref| = 3.1e-4 max|ref| of
each tensor, a worst-case bound (the errors seen are far smaller). A bias's gradient
is held to its weight's scale (see the loop).
"""
import math
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lm_common as lm  # noqa: E402

REL = 40 * 128 * 2.0 ** -24


def fetch(demitasse, d, net, names, inputs):
    import numpy as np
    cmd = [demitasse, "run", "--net", net, "--init", "gpt_init.pbtxt", "--no-fuse"]
    for k, v in inputs.items():
        np.save(os.path.join(d, "in_%s.npy" % k), v)
        cmd += ["--input", "%s=in_%s.npy" % (k, k)]
    for n in names:
        cmd += ["--output", "%s=out_%s.npy" % (n, n)]
    lm.run(cmd, cwd=d)
    return {n: np.load(os.path.join(d, "out_%s.npy" % n)) for n in names}


def reference(w, tokens, cfg, targets=None, head=None):
    """logits (and the loss) of the GPT in float64; w maps blob names to tensors; the
    head reads `head` (default: w["wte"], tied)."""
    import torch
    F = torch.nn.functional
    N, T = tokens.shape
    D, H = cfg["width"], cfg["heads"]
    Dh = D // H

    def ln(x, p):
        return F.layer_norm(x, (D,), w[p + "_s"], w[p + "_b"], 1e-5)

    def fc(x, p):
        return x @ w[p + "_w"].t() + w[p + "_b"]

    def heads(x):
        return x.reshape(N, T, H, Dh).transpose(1, 2)

    x = w["wte"][tokens] + w["wpe"][torch.arange(T)]
    causal = torch.ones(T, T, dtype=torch.bool).triu(1)
    for i in range(cfg["layers"]):
        p = "l%d" % i
        h = ln(x, p + "_ln1")
        q, k, v = (heads(fc(h, p + "_" + c)) for c in "qkv")
        att = (q @ k.transpose(-1, -2)) / math.sqrt(Dh)
        prob = att.masked_fill(causal, float("-inf")).softmax(-1)
        ctx = (prob @ v).transpose(1, 2).reshape(N, T, D)
        x = x + fc(ctx, p + "_proj")
        h = F.gelu(fc(ln(x, p + "_ln2"), p + "_fc"), approximate="tanh")
        x = x + fc(h, p + "_out")
    logits = ln(x, "lnf") @ (w["wte"] if head is None else head).t()
    if targets is None:
        return logits
    return logits, F.cross_entropy(logits.reshape(N * T, -1), targets.reshape(-1))


def close(name, got, ref, floor=0.0):
    """got within REL * max|ref| (or * floor, when the value is a cancellation)."""
    import numpy as np
    ref = ref.detach().numpy()
    err, scale = float(np.max(np.abs(got - ref))), max(float(np.max(np.abs(ref))), floor)
    if got.shape != ref.shape or not err <= REL * max(scale, 1e-30):
        lm.fail("%s: shape %s vs %s, max |error| %.3g > %.3g (max |ref| %.3g)"
                % (name, got.shape, ref.shape, err, REL * scale, scale))
    return err / max(scale, 1e-30)


def main():
    demitasse, make_lm_db, src = (os.path.abspath(p) for p in sys.argv[1:4])
    try:
        import numpy as np
        import torch
    except ImportError as e:
        print("skipped: %s" % e)
        sys.exit(lm.SKIP)
    cfg = lm.TINY
    with tempfile.TemporaryDirectory(prefix="dm_gpt_ref_") as d:
        lm.generate(src, "gpt", d)
        lm.make_db(make_lm_db, os.path.join(d, "gpt_train_lmdb"), 64)
        lm.run([demitasse, "rewrite", "--grad", "--loss", "loss", "--data", "tokens", "--data",
                "targets", "gpt_train.pbtxt", "-o", "grad.pbtxt"], cwd=d)
        with open(os.path.join(d, "gpt_init.pbtxt")) as f:
            params = re.findall(r'output: "([^"]*)" type: "(?:GaussianFill|ConstantFill)"', f.read())
        got = fetch(demitasse, d, "grad.pbtxt",
                    params + [p + "_grad" for p in params] + ["tokens", "targets", "loss"],
                    {"optimizer_iteration": np.array([0], dtype=np.int64)})
        w = {p: torch.tensor(got[p], dtype=torch.float64, requires_grad=True) for p in params}
        tokens = torch.tensor(got["tokens"], dtype=torch.long)
        targets = torch.tensor(got["targets"], dtype=torch.long)
        _, loss = reference(w, tokens, cfg, targets)
        loss.backward()
        worst = close("loss", np.array(got["loss"]), loss)
        for p in params:
            # a bias's gradient sums the dY rows its weight's gradient is made of: it is
            # as exact as that one, also where its terms cancel (the keys' bias: softmax
            # ignores a shift common to every key, so the exact value is 0)
            sib = [q for q in (p[:-2] + "_w", p[:-2] + "_s") if p.endswith("_b") and q in w]
            floor = float(w[sib[0]].grad.abs().max()) if sib else 0.0
            worst = max(worst, close(p + "_grad", got[p + "_grad"], w[p].grad, floor))
        # each use's part of wte's gradient alone: the other use reads a constant copy
        parts = []
        for use in ("embedding", "head"):
            w2 = {p: t.detach().clone().requires_grad_(True) for p, t in w.items()}
            live, const = w2["wte"], w2["wte"].detach().clone()
            if use == "embedding":
                _, l2 = reference(w2, tokens, cfg, targets, head=const)
            else:
                _, l2 = reference(dict(w2, wte=const), tokens, cfg, targets, head=live)
            l2.backward()
            parts.append(live.grad)
        total = w["wte"].grad
        for use, part in zip(("embedding", "head"), parts):
            if float((total - part).abs().max()) <= 10 * REL * float(total.abs().max()):
                lm.fail("wte's gradient is its %s use's alone: the test cannot tell a sum" % use)
        close("wte_grad (embedding + head parts)", got["wte_grad"], parts[0] + parts[1])
        print("training: loss %.6f, %d gradients match autograd (worst %.2e of max |ref|, "
              "bound %.2e); wte's is the sum of its two uses" % (float(loss), len(params), worst, REL))

        tok = got["tokens"][:1].astype(np.int32)
        out = fetch(demitasse, d, "gpt_infer.pbtxt", ["logits"], {"tokens": tok})["logits"]
        if out.shape != (1, cfg["context"], cfg["vocab"]):
            lm.fail("gpt_infer: logits %s, expected (1, %d, %d)" % (out.shape, cfg["context"], cfg["vocab"]))
        ref = reference({p: t.detach() for p, t in w.items()}, torch.tensor(tok, dtype=torch.long), cfg)
        e = close("gpt_infer logits", out, ref)
        tok2 = tok.copy()
        tok2[0, -1] = (tok2[0, -1] + 1) % cfg["vocab"]
        out2 = fetch(demitasse, d, "gpt_infer.pbtxt", ["logits"], {"tokens": tok2})["logits"]
        if not np.array_equal(out[:, :-1], out2[:, :-1]) or np.array_equal(out[:, -1], out2[:, -1]):
            lm.fail("gpt_infer is not causal: a change of the last token changed earlier logits "
                    "(or did not change the last)")
        print("inference: logits %s match the reference (%.2e of max |ref|); causal" % (out.shape, e))
    print("PASS")



if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""torch_gpt_train.py: the PyTorch CPU side of bench/gpt_train.sh: the GPT of
models/gpt (its forward written once, in tests/models/gpt_reference_test.py's
`reference`, here in FP32 with torch.nn.Parameters) trained with AdamW at the same
config, batch, learning rate and thread count as `demitasse train`, on token windows of
the same length drawn at random (the cost of a step does not depend on the tokens).
Each timed iteration is a whole step: forward, loss, backward and the update. The first
WARMUP iterations are not timed.

usage: torch_gpt_train.py LAYERS WIDTH HEADS CONTEXT VOCAB BATCH ITERS THREADS WARMUP
prints: "torch tokens_per_s <x> iters <n> seconds <t>"
"""
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "models"))
from gpt_reference_test import reference  # noqa: E402


def gpt_weights(L, D, T, V, g):
    """models/gpt's parameters by name, GPT-2's init (N(0, 0.02), LayerNorm 1 and 0,
    biases 0), drawn from generator g, as torch.nn.Parameters."""
    def param(*shape, std=0.02, value=None):
        t = torch.full(shape, value) if value is not None else torch.randn(*shape, generator=g) * std
        return torch.nn.Parameter(t)

    w = {"wte": param(V, D), "wpe": param(T, D), "lnf_s": param(D, value=1.0),
         "lnf_b": param(D, value=0.0)}
    for i in range(L):
        p = "l%d_" % i
        for n in ("ln1", "ln2"):
            w[p + n + "_s"], w[p + n + "_b"] = param(D, value=1.0), param(D, value=0.0)
        for n, (o, k) in {"q": (D, D), "k": (D, D), "v": (D, D), "proj": (D, D),
                          "fc": (4 * D, D), "out": (D, 4 * D)}.items():
            w[p + n + "_w"], w[p + n + "_b"] = param(o, k), param(o, value=0.0)
    return w


def main():
    L, D, H, T, V, N, iters, threads, warmup = (int(a) for a in sys.argv[1:10])
    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(0)
    w = gpt_weights(L, D, T, V, g)
    opt = torch.optim.AdamW(w.values(), lr=1e-3, weight_decay=0.01)
    cfg = {"layers": L, "width": D, "heads": H}
    tokens = torch.randint(0, V, (N, T + 1), generator=g)
    start = None
    for it in range(iters):
        if it == warmup:
            start = time.perf_counter()
        _, loss = reference(w, tokens[:, :-1], cfg, tokens[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    sec = time.perf_counter() - start
    n = iters - warmup
    print("torch tokens_per_s %.1f iters %d seconds %.3f" % (n * N * T / sec, n, sec))


if __name__ == "__main__":
    main()

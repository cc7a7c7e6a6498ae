#!/usr/bin/env python3
"""torch_gpt_infer.py: the PyTorch CPU side of bench/gpt_infer.sh: the forward of
models/gpt's GPT (tests/models/gpt_reference_test.py's `reference`, in FP32, with
torch_gpt_train.py's weights) on BATCH windows of CONTEXT random token ids, under
torch.inference_mode, at THREADS threads. WARMUP untimed forwards, then ITERS, each
timed alone; prints the median, as bench/infer_net does for ours.

usage: torch_gpt_infer.py LAYERS WIDTH HEADS CONTEXT VOCAB BATCH ITERS THREADS WARMUP
prints: "torch median_ms <m> min_ms <a> batch <n> iters <i> threads <t>"
"""
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "models"))
from gpt_reference_test import reference  # noqa: E402
from torch_gpt_train import gpt_weights  # noqa: E402


def main():
    L, D, H, T, V, N, iters, threads, warmup = (int(a) for a in sys.argv[1:10])
    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(0)
    w = {k: v.detach() for k, v in gpt_weights(L, D, T, V, g).items()}
    cfg = {"layers": L, "width": D, "heads": H}
    tokens = torch.randint(0, V, (N, T), generator=g)
    times = []
    with torch.inference_mode():
        for it in range(warmup + iters):
            t0 = time.perf_counter()
            reference(w, tokens, cfg)
            if it >= warmup:
                times.append(1e3 * (time.perf_counter() - t0))
    print("torch median_ms %.4f min_ms %.4f batch %d iters %d threads %d"
          % (statistics.median(times), min(times), N, iters, threads))


if __name__ == "__main__":
    main()

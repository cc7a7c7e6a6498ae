#!/usr/bin/env python3
"""torch_lenet_train.py: the PyTorch CPU side of bench/train_throughput.sh: LeNet
(models/mnist/lenet_train.pbtxt's layers) trained on MNIST with momentum SGD at the
same batch size, learning rate, momentum and thread count as `demitasse train`, the
images read from the IDX gz files into memory with NumPy (scaled by 1/256 as the
Demitasse net's data input does) and drawn in a shuffled order. Each timed iteration is
everything a training step costs: slicing the batch, forward, loss, backward and the
update. The first WARMUP iterations are not timed.

usage: torch_lenet_train.py IMAGES.gz LABELS.gz ITERS BATCH THREADS WARMUP
prints: "torch images_per_s <x> iters <n> seconds <t>"
"""
import gzip
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def read_idx(path):
    """An IDX file (gzip'd): big-endian magic (0, 0, dtype 0x08 = ubyte, ndim), dims."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    if data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise SystemExit(f"{path}: not an unsigned-byte IDX file")
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


class LeNet(nn.Module):
    """conv1 20@5x5, max-pool 2, conv2 50@5x5, max-pool 2, fc3 500 + ReLU, pred 10."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 20, 5)
        self.conv2 = nn.Conv2d(20, 50, 5)
        self.fc3 = nn.Linear(800, 500)
        self.pred = nn.Linear(500, 10)

    def forward(self, x):
        x = F.max_pool2d(self.conv1(x), 2, 2)
        x = F.max_pool2d(self.conv2(x), 2, 2)
        x = F.relu(self.fc3(x.flatten(1)))
        return self.pred(x)


def main():
    if len(sys.argv) != 7:
        raise SystemExit(__doc__)
    images, labels = read_idx(sys.argv[1]), read_idx(sys.argv[2])
    iters, batch, threads, warmup = (int(a) for a in sys.argv[3:7])
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    # Float pixels in memory once, as a framework's input pipeline would hold them.
    x_all = torch.from_numpy(images.astype(np.float32) * np.float32(1 / 256)).unsqueeze(1)
    y_all = torch.from_numpy(labels.astype(np.int64))
    n = x_all.shape[0]
    order = torch.from_numpy(np.random.default_rng(1).permutation(n))
    model = LeNet()
    # Caffe2's MomentumSGDUpdate (m = mu m + lr g; w -= m) is PyTorch's SGD with momentum
    # (b = mu b + g; w -= lr b) for a fixed lr: the same steps.
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step(it):
        lo = (it * batch) % (n - batch + 1)
        idx = order[lo: lo + batch]
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x_all[idx]), y_all[idx])
        loss.backward()
        opt.step()
        return loss

    for it in range(warmup):
        step(it)
    t0 = time.perf_counter()
    for it in range(warmup, iters):
        step(it)
    dt = time.perf_counter() - t0
    timed = iters - warmup
    print(f"torch images_per_s {timed * batch / dt:.1f} iters {timed} seconds {dt:.3f}")


if __name__ == "__main__":
    main()

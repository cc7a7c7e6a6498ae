#!/usr/bin/env python3
"""torch_step.py: the PyTorch CPU side of bench/run.sh: one training step (forward +
backward) of LeNet or a ResNet-50 bottleneck block, FP32, same shapes and threads as
bench_step. Prints "model fp32 batch ms_per_step" (median)."""
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class LeNet(nn.Module):
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


class Bottleneck(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(256, 64, 1, bias=False)
        self.n1 = nn.BatchNorm2d(64)
        self.c2 = nn.Conv2d(64, 64, 3, padding=1, bias=False)
        self.n2 = nn.BatchNorm2d(64)
        self.c3 = nn.Conv2d(64, 256, 1, bias=False)
        self.n3 = nn.BatchNorm2d(256)

    def forward(self, x):
        y = F.relu(self.n1(self.c1(x)))
        y = F.relu(self.n2(self.c2(y)))
        return F.relu(self.n3(self.c3(y)) + x)


def main():
    model_name, batch, iters, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    if model_name == "lenet":
        model = LeNet()
        x = torch.sin(0.01 * torch.arange(batch * 28 * 28, dtype=torch.float32)).reshape(batch, 1, 28, 28)
        label = torch.arange(batch) % 10
        step = lambda: F.cross_entropy(model(x), label).backward()
    else:
        model = Bottleneck()
        x = torch.sin(0.01 * torch.arange(batch * 256 * 56 * 56, dtype=torch.float32)).reshape(batch, 256, 56, 56)
        step = lambda: model(x).mean().backward()
    for _ in range(3):
        step()
    times = []
    for _ in range(iters):
        for p in model.parameters():
            p.grad = None
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    times.sort()
    print(f"{model_name} fp32 {batch} {1e3 * times[len(times) // 2]:.3f}")


if __name__ == "__main__":
    main()

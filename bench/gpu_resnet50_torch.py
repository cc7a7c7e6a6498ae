"""gpu_resnet50_torch.py: PyTorch's side of bench/gpu_resnet50.sh: ResNet-50 (v1.5, as
models/resnet50 builds it; written here, no torchvision, nothing downloaded) training
steps on one GPU with momentum SGD, channels_last; fp16 is torch.autocast + GradScaler.
Synthetic data as gpu_train_step.c feeds it. loss.item() ends each step, as our step ends
with a copy of the loss to the host.

usage: gpu_resnet50_torch.py BATCH fp32|fp16 [STEPS [WARMUP]]
prints "resnet50 BATCH PREC images_per_s max_reserved_MiB"; exits 0 saying so without a GPU.
"""
import sys
import time

import torch
import torch.nn as nn


class Bottleneck(nn.Module):
    def __init__(self, cin, mid, stride):
        super().__init__()
        cout = mid * 4
        self.body = nn.Sequential(
            nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
            nn.Conv2d(mid, mid, 3, stride, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
            nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        s = x if self.short is None else self.short(x)
        return torch.relu(self.body(x) + s)


def resnet50(classes=1000):
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
              nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for mid, n, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(n):
            layers.append(Bottleneck(cin, mid, stride if i == 0 else 1))
            cin = mid * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


def main():
    batch, prec = int(sys.argv[1]), sys.argv[2]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    warmup = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    if not torch.cuda.is_available():
        print("gpu_resnet50_torch: no GPU for PyTorch; no numbers")
        return
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    model = resnet50().to(dev).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    fp16 = prec == "fp16"
    scaler = torch.cuda.amp.GradScaler(enabled=fp16)
    i = torch.arange(batch * 3 * 224 * 224, dtype=torch.int64)
    x = (0.5 * ((i * 7919) % 1000).float() / 1000).reshape(batch, 3, 224, 224)
    x = x.to(dev).contiguous(memory_format=torch.channels_last)
    y = (torch.arange(batch) % 1000).to(dev)
    lossf = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16, enabled=fp16):
            loss = lossf(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss.item()

    for _ in range(warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    dt = time.perf_counter() - t0
    mib = torch.cuda.max_memory_reserved() / 2**20
    print(f"resnet50 {batch} {prec} {batch * steps / dt:.1f} {mib:.0f}")


if __name__ == "__main__":
    main()

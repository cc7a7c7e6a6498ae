#!/usr/bin/env python3
"""cpu_infer.py: the Python side of bench/cpu_infer.sh: the models in PyTorch (torchvision's
ResNet-50 and SqueezeNet with random weights, and bench/torch_lenet_train.py's LeNet),
their ONNX export, one timed inference run in PyTorch or ONNX Runtime, the LeNet
inference net for Demitasse, and the FLOPs of each side's model.

FLOPs are those of the convolutions and fully connected layers, 2 per multiply-add,
biases left out, counted the same way on both sides from the layers' shapes: Conv:
2 x numel(output) x (C_in / groups x kH x kW); FC: 2 x numel(output) x K. Everything
else (BN, ReLU, pooling, sums, softmax) is under 1% of these nets' FLOPs.

usage:
  cpu_infer.py torch MODEL BATCH THREADS WARMUP ITERS   time PyTorch eager, inference mode
  cpu_infer.py ort ONNX BATCH THREADS WARMUP ITERS      time ONNX Runtime (CPU provider)
  cpu_infer.py export MODEL OUT.onnx                    torch.onnx.export, opset 13
  cpu_infer.py flops-torch MODEL                        Conv/FC FLOPs of one image
  cpu_infer.py flops-ours INSPECT.txt                   the same from `demitasse inspect`
                                                        of a net at batch 1
  cpu_infer.py lenet-net LENET_TEST.pbtxt OUT.pbtxt     the LeNet test net less its DB
                                                        input, loss and accuracy
MODEL: resnet50, squeezenet1_0, squeezenet1_1, lenet or another torchvision.models name. The timing commands print
"median_ms M threads T" (M per batch, over ITERS runs after WARMUP untimed ones).
"""
import os
import re
import statistics
import sys
import time

OPSET = 13  # torch 1.13 exports up to 17; 13 is what every ONNX Runtime since 1.6 runs
# The input of one image: the torchvision models at ImageNet size (SqueezeNet at the
# Caffe2 zoo net's 227, which torchvision's adaptive pooling takes as well), LeNet MNIST.
IMAGE = {"resnet50": (3, 224, 224), "squeezenet1_0": (3, 227, 227),
         "squeezenet1_1": (3, 227, 227), "lenet": (1, 28, 28)}
# Any other torchvision model at ImageNet's size.
IMAGE_DEFAULT = (3, 224, 224)


def torch_model(name):
    import torch
    if name == "lenet":
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from torch_lenet_train import LeNet
        model = LeNet()
    else:
        import torchvision
        model = getattr(torchvision.models, name)(weights=None)  # random: nothing fetched
    torch.manual_seed(1)
    return model.eval()


def timed(run, warmup, iters):
    for _ in range(warmup):
        run()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        run()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def cmd_torch(name, batch, threads, warmup, iters):
    import torch
    torch.set_num_threads(threads)
    model = torch_model(name)
    x = torch.rand(batch, *IMAGE.get(name, IMAGE_DEFAULT)) * 2 - 1
    with torch.inference_mode():
        ms = timed(lambda: model(x), warmup, iters)
    print(f"median_ms {ms:.4f} threads {torch.get_num_threads()}")


def cmd_ort(path, batch, threads, warmup, iters):
    import numpy as np
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    shape = [batch] + list(inp.shape[1:])
    x = np.random.default_rng(1).uniform(-1, 1, shape).astype(np.float32)
    ms = timed(lambda: sess.run(None, {inp.name: x}), warmup, iters)
    print(f"median_ms {ms:.4f} threads {so.intra_op_num_threads}")


def cmd_export(name, out):
    import torch
    model = torch_model(name)
    x = torch.zeros(1, *IMAGE.get(name, IMAGE_DEFAULT))
    tmp = out + ".tmp"
    torch.onnx.export(model, x, tmp, opset_version=OPSET, input_names=["data"],
                      output_names=["out"], dynamic_axes={"data": {0: "N"}, "out": {0: "N"}})
    os.replace(tmp, out)


def cmd_flops_torch(name):
    import torch
    model = torch_model(name)
    total = [0]

    def hook(m, _inp, out):
        if isinstance(m, torch.nn.Conv2d):
            k = m.in_channels // m.groups * m.kernel_size[0] * m.kernel_size[1]
        else:
            k = m.in_features
        total[0] += 2 * out.numel() * k

    for m in model.modules():
        if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
            m.register_forward_hook(hook)
    with torch.inference_mode():
        model(torch.zeros(1, *IMAGE.get(name, IMAGE_DEFAULT)))
    print(total[0])


def cmd_flops_ours(path):
    """From `demitasse inspect NET --init INIT --input data=1,...`: the op list ("  12
    Conv: x, w -> y") and the inferred shapes ("  y   FLOAT   1x64x56x56")."""
    text = open(path).read()
    # "  12  Conv: x, w -> y", or with the op's name: "  12  Conv 'conv1': x, w -> y"
    ops = re.findall(r"^\s+\d+\s+(Conv|FC)(?: '[^'\n]*')?: ([^\n]*?) -> ([^\n]*)$", text,
                     re.M)
    shapes_at = text.find("\nshapes:")
    if not ops or shapes_at < 0:
        raise SystemExit(f"{path}: no Conv/FC ops or no shapes: not `demitasse inspect` "
                         "output with --init and --input")
    shapes = {}
    for name, dims in re.findall(r"^\s+(\S+)\s+FLOAT\s+([\dx]+)$", text[shapes_at:], re.M):
        shapes[name] = [int(d) for d in dims.split("x")]

    def numel(blob):
        if blob not in shapes:
            raise SystemExit(f"{path}: no shape for '{blob}'")
        n = 1
        for d in shapes[blob]:
            n *= d
        return n

    total = 0
    for kind, ins, outs in ops:
        w, y = ins.split(", ")[1], outs.split(", ")[0]
        # Conv weight (M, C/g, kH, kW): each output reads C/g kH kW; FC weight (M, K): K.
        total += 2 * numel(y) * (numel(w) // shapes[w][0])
    print(total)


def cmd_lenet_net(src, out):
    text = open(src).read()
    ops = re.findall(r"^op \{.*?(?=^op \{|^external|\Z)", text, re.M | re.S)
    kept = []
    for op in ops:
        if '"TensorProtosDBInput"' in op or '"Accuracy"' in op:
            continue
        op = op.replace('input: "pred" input: "label" output: "softmax" output: "loss" '
                        'type: "SoftmaxWithLoss"', 'input: "pred" output: "softmax" type: "Softmax"')
        kept.append(op.rstrip() + "\n")
    if sum('"Softmax"' in op for op in kept) != 1 or any("label" in op for op in kept):
        raise SystemExit(f"{src}: not the LeNet test net this expects (one SoftmaxWithLoss)")
    with open(out, "w") as f:
        f.write(f"# LeNet inference net, written by bench/cpu_infer.py from {src}:\n"
                "# its DB input, loss and accuracy left out; 'data' (N, 1, 28, 28) is fed.\n"
                'name: "lenet_infer"\n' + "".join(kept) +
                'external_input: "data"\nexternal_output: "softmax"\n')


def main():
    a = sys.argv[1:]
    cmds = {"torch": (6, lambda: cmd_torch(a[1], *map(int, a[2:6]))),
            "ort": (6, lambda: cmd_ort(a[1], *map(int, a[2:6]))),
            "export": (3, lambda: cmd_export(a[1], a[2])),
            "flops-torch": (2, lambda: cmd_flops_torch(a[1])),
            "flops-ours": (2, lambda: cmd_flops_ours(a[1])),
            "lenet-net": (3, lambda: cmd_lenet_net(a[1], a[2]))}
    if not a or a[0] not in cmds or len(a) != cmds[a[0]][0]:
        raise SystemExit(__doc__)
    if a[0] in ("torch", "export", "flops-torch") and a[1] not in IMAGE:
        import torchvision
        if not hasattr(torchvision.models, a[1]):
            raise SystemExit(f"unknown model '{a[1]}': one of {', '.join(IMAGE)} or a "
                             "torchvision.models name")
    cmds[a[0]][1]()


if __name__ == "__main__":
    main()

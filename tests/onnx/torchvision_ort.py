#!/usr/bin/env python3
"""torchvision_ort.py: torchvision models through `demitasse import-onnx` + `run`,
against ONNX Runtime.

Each model is built with seeded random weights (and random BatchNorm statistics, so
that the folded-in normalisation is exercised; ViT's zero-initialised head made random
so that its output is not zeros), exported to ONNX (opset 13, or the opset after an "@"
in its name, e.g. convnext_tiny@17 for LayerNormalization; eval mode, input "data"
1x3x224x224, output "prob") and run by onnxruntime. "encoder" is a
torch.nn.TransformerEncoder (BERT-like: 2 post-LN layers, width 64, 4 heads, GELU) on a
1x16x64 input; nn.MultiheadAttention is exported with autograd on, since under no_grad
torch takes its fused fast path, which has no ONNX form. demitasse runs it three
ways: the .onnx file directly, the pair `import-onnx` writes, both in FP32, and the
.onnx file with `--precision fp16`. In FP32 the largest difference must stay within 1e-3
of the largest output magnitude (FP32 arithmetic in a different order over ~10^9
multiply-adds). In FP16 the bound is derived from the format: every Conv/Gemm/MatMul
rounds its input, its weights and its output to FP16 (unit roundoff u = 2^-11) and
accumulates in FP32, so each such layer adds at most about 3u of relative error to what
it passes on; over L of them the first-order bound is 3uL of the largest output.

For the CNNs in REORDER_BOUND, `run --profile` on the imported pair must report at most
one layout conversion in and one out per run (the oneDNN engine keeps its blocked
layouts from the first op to the last; on the reference kernels there are none).

Usage: torchvision_ort.py DEMITASSE WORKDIR MODEL[@OPSET]...   (a torchvision.models name,
       opsnet, spatialnet or encoder)
Exits 77 (skipped) when torch, torchvision or onnxruntime cannot be imported.
"""
import os
import subprocess
import sys

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    import torch
    import torchvision
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)


class OpsNet(torch.nn.Module):
    """The translations torchvision's models do not reach: BatchNormalization that is
    not folded into a Conv, a grouped and a dilated Conv, MaxPool with ceil_mode,
    AveragePool with padding not counted, Split, Mul/Sub/Add/Div (equal shapes, a
    scalar constant, a (C, 1, 1) initializer), Concat, a Reshape to a
    constant shape, ShuffleNet V2's channel shuffle and chunk (shapes computed in the
    graph, folded at import; Slice), MatMul by a constant (a Linear on a 3-D tensor), and opset 13's
    Softmax along the last axis named by number."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.conv_g = torch.nn.Conv2d(16, 16, 3, padding=1, groups=4)
        self.conv_d = torch.nn.Conv2d(16, 12, 3, padding=2, dilation=2)
        self.fc = torch.nn.Linear(12, 10)
        self.fc3 = torch.nn.Linear(10, 7)  # on a 3-D tensor: MatMul + Add
        self.shift = torch.nn.Parameter(torch.randn(8, 1, 1))

    def forward(self, x):
        y = torch.relu(self.bn(torch.relu(self.conv(x))))              # 8 x 112 x 112
        a = torch.nn.functional.max_pool2d(y, 3, 2, ceil_mode=True)    # 8 x 56 x 56
        b = torch.nn.functional.avg_pool2d(y, 3, 2, padding=1, count_include_pad=False)
        p, q = torch.split(torch.cat([a, b], 1), [8, 8], dim=1)
        u = p * q - p + q * 0.5 + self.shift                           # broadcasts: a
        z = torch.cat([u, q / 2.0], 1)                                 # scalar, (8, 1, 1)
        n, c, h, w = z.size()                    # ShuffleNet's channel shuffle and chunk:
        z = z.view(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, -1, h, w)
        lo, hi = z.chunk(2, dim=1)               # Shape -> Gather -> Div -> Slice, folded
        z = torch.cat([hi, lo], 1)
        z = self.conv_d(torch.relu(self.conv_g(z)))                    # 12 x 56 x 56
        z = torch.reshape(torch.nn.functional.adaptive_avg_pool2d(z, 1), (1, 12))
        z = self.fc3(torch.reshape(self.fc(z), (1, 1, 10)))
        return torch.softmax(torch.reshape(z, (1, 7)), dim=1)


class SpatialNet(torch.nn.Module):
    """The spatial translations (net/onnx/import_spatial.c) as PyTorch exports them:
    AveragePool with ceil_mode and count_include_pad, a dilated MaxPool, a grouped
    ConvTranspose with output_padding, Resize nearest (asymmetric, floor) and bilinear
    (pytorch_half_pixel; align_corners). Not F.pad: PyTorch computes its pads with
    ConstantOfShape, Slice and Concat, which only constant folding turns into the
    constant Pad needs."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, stride=2)
        self.up = torch.nn.ConvTranspose2d(8, 6, 3, stride=2, padding=1, output_padding=1,
                                           groups=2)

    def forward(self, x):
        F = torch.nn.functional
        x = F.avg_pool2d(x, 3, 4, padding=1, ceil_mode=True, count_include_pad=True)  # 57
        y = torch.relu(self.conv(x))                                   # 8 x 28 x 28
        y = self.up(y)                                                 # 6 x 56 x 56
        y = F.interpolate(y, scale_factor=2.0, mode="nearest")         # 6 x 112 x 112
        y = F.max_pool2d(y, 3, 2, dilation=2, ceil_mode=True)          # 6 x 55 x 55
        y = F.interpolate(y, scale_factor=0.75, mode="bilinear", align_corners=False)
        # 41 x 2: an integral resized length (the importer refuses align_corners where
        # scale * input is fractional, as X's inferred 41 x 41 shows it would be at 1.5)
        return F.interpolate(y, scale_factor=2.0, mode="bilinear", align_corners=True)


def encoder():
    layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128,
                                             dropout=0.0, activation="gelu", batch_first=True)
    return torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)


def build(name):
    torch.manual_seed(0)
    m = (OpsNet() if name == "opsnet" else SpatialNet() if name == "spatialnet"
         else encoder() if name == "encoder" else getattr(torchvision.models, name)())
    g = torch.Generator().manual_seed(1)
    if name.startswith("vit_"):
        m.heads.head.weight.data.copy_(torch.randn(m.heads.head.weight.shape, generator=g) * 0.02)
    for mod in m.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.running_mean.copy_(torch.randn(mod.num_features, generator=g) * 0.1)
            mod.running_var.copy_(torch.rand(mod.num_features, generator=g) + 0.5)
            mod.weight.data.copy_(torch.rand(mod.num_features, generator=g) + 0.5)
            mod.bias.data.copy_(torch.randn(mod.num_features, generator=g) * 0.1)
    return m.eval()


# Models whose every op keeps oneDNN's blocked layout. ShuffleNet's channel shuffle
# (Reshape, Transpose, Slice on the reference kernels) and DenseNet's BatchNorm + Relu
# before each Conv still convert.
REORDER_BOUND = {"resnet18": 2, "squeezenet1_1": 2, "mobilenet_v2": 2, "efficientnet_b0": 2,
                 "vit_b_16": 2}


def reorders(exe, pair, data):
    """The layout conversions per run `run --profile` reports for the pair."""
    r = subprocess.run([exe, "run", *pair, "--input", "data=" + data, "--iters", "3",
                        "--profile"], check=True, capture_output=True, text=True)
    for line in r.stderr.splitlines():
        if line.startswith("# layout conversions:"):
            return float(line.split(":")[1].split()[0])
    raise RuntimeError("run --profile printed no layout conversion line:\n" + r.stderr)


def check(exe, work, spec):
    name, _, opset = spec.partition("@")
    opset = int(opset or 13)
    d = os.path.join(work, spec.replace("@", "_opset"))
    os.makedirs(d, exist_ok=True)
    model = build(name)
    shape = (1, 16, 64) if name == "encoder" else (1, 3, 224, 224)
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(2))
    path = os.path.join(d, name + ".onnx")
    attention = any(isinstance(m, torch.nn.MultiheadAttention) for m in model.modules())
    with torch.set_grad_enabled(attention):
        torch.onnx.export(model, x, path, opset_version=opset, input_names=["data"],
                          output_names=["prob"], do_constant_folding=True)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    ref = sess.run(None, {"data": x.numpy()})[0]
    data = os.path.join(d, "data.npy")
    np.save(data, x.numpy())
    subprocess.run([exe, "import-onnx", path, "-o", d], check=True)
    pair = ["--init", os.path.join(d, "init_net.pb"), "--net", os.path.join(d, "predict_net.pb")]
    fp16_layers = sum(n.op_type in ("Conv", "Gemm", "MatMul")
                      for n in onnx.load(path).graph.node)
    ok = True
    for how, args, bound in (("onnx", ["--net", path], 1e-3),
                             ("pair", pair, 1e-3),
                             ("onnx fp16", ["--net", path, "--precision", "fp16"],
                              3 * 2.0 ** -11 * fp16_layers)):
        out = os.path.join(d, "prob.npy")
        subprocess.run([exe, "run", *args, "--input", "data=" + data, "--output",
                        "prob=" + out], check=True, stdout=subprocess.DEVNULL)
        got = np.load(out)
        if got.shape != ref.shape:
            print(f"{spec} ({how}): shape {got.shape}, onnxruntime {ref.shape}: FAIL")
            ok = False
            continue
        err = float(np.max(np.abs(got.astype(np.float64) - ref)))
        scale = float(np.max(np.abs(ref)))
        good = err <= bound * scale
        print(f"{spec} ({how}): max |demitasse - onnxruntime| = {err:.3g}, max |out| = "
              f"{scale:.3g}, relative {err / scale:.3g} (bound {bound:.3g}): "
              f"{'ok' if good else 'FAIL'}")
        ok = ok and good
    if spec in REORDER_BOUND:
        n = reorders(exe, pair, data)
        good = n <= REORDER_BOUND[spec]
        print(f"{spec}: {n:g} layout conversions per run (at most {REORDER_BOUND[spec]}): "
              f"{'ok' if good else 'FAIL'}")
        ok = ok and good
    return ok


def main():
    if len(sys.argv) < 4:
        print(__doc__)
        return 2
    exe, work = sys.argv[1], sys.argv[2]
    ok = True
    for name in sys.argv[3:]:
        ok = check(exe, work, name) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

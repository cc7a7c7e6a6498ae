#!/usr/bin/env python3
"""precision_overflow.py: reduced-precision inference never fails silently.

torchvision's Inception v3, with seeded random weights and BatchNorm statistics (as
torchvision_ort.py builds its models), has FP32 logits near 1e13: far past FP16's largest
finite value (65504), within BF16's range (FP32's). So `run --precision fp16` must fail
(not exit 0 with NaN logits), saying the output holds inf/nan, naming the first op that
produced one, and pointing at bf16; FP32 must agree with ONNX Runtime; BF16 must run
and give finite logits of the same order as FP32's.

Usage: precision_overflow.py DEMITASSE WORKDIR
Exits 77 (skipped) when torch, torchvision or onnxruntime cannot be imported.
"""
import os
import subprocess
import sys

try:
    import numpy as np
    import onnxruntime as ort
    import torch
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torchvision_ort import build  # noqa: E402  (the same seeded models)


def run(exe, args):
    return subprocess.run([exe, "run", *args], capture_output=True, text=True)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    exe, work = sys.argv[1], sys.argv[2]
    model = build("inception_v3")
    x = torch.randn(1, 3, 299, 299, generator=torch.Generator().manual_seed(2))
    path = os.path.join(work, "inception_v3.onnx")
    with torch.no_grad():
        torch.onnx.export(model, x, path, opset_version=13, input_names=["data"],
                          output_names=["prob"], do_constant_folding=True)
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(
        None, {"data": x.numpy()})[0]
    data, out = os.path.join(work, "data.npy"), os.path.join(work, "prob.npy")
    np.save(data, x.numpy())
    io = ["--net", path, "--input", "data=" + data, "--output", "prob=" + out]
    ok = True
    scale = float(np.max(np.abs(ref)))
    print(f"onnxruntime FP32: max |logit| = {scale:.3g}")
    if scale < 65504:
        print("FAIL: the model's FP32 logits fit FP16: this test proves nothing")
        return 1

    r = run(exe, io)
    got = np.load(out) if r.returncode == 0 else None
    err = float(np.max(np.abs(got.astype(np.float64) - ref))) if got is not None else -1
    good = r.returncode == 0 and err <= 1e-3 * scale
    print(f"fp32: exit {r.returncode}, relative difference {err / scale:.3g}: "
          f"{'ok' if good else 'FAIL ' + r.stderr}")
    ok = ok and good

    os.remove(out)
    r = run(exe, io + ["--precision", "fp16"])
    msg = r.stderr
    good = (r.returncode != 0 and "holds inf or nan" in msg and "first inf/nan came from op"
            in msg and "bf16" in msg and not os.path.exists(out))
    print(f"fp16: exit {r.returncode}: {msg.strip()}\n  -> {'ok' if good else 'FAIL'}")
    ok = ok and good

    r = run(exe, io + ["--precision", "bf16"])
    got = np.load(out) if r.returncode == 0 else None
    good = (got is not None and bool(np.all(np.isfinite(got))) and
            0.5 * scale <= float(np.max(np.abs(got))) <= 2 * scale)
    print(f"bf16: exit {r.returncode}, max |logit| "
          f"{float(np.max(np.abs(got))) if got is not None else float('nan'):.3g}: "
          f"{'ok' if good else 'FAIL ' + r.stderr}")
    return 0 if ok and good else 1


if __name__ == "__main__":
    sys.exit(main())

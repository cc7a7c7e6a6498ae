#!/usr/bin/env python3
"""export_ort.py: Caffe2 pairs through `demitasse export-onnx`, run by ONNX Runtime
against `demitasse run` of the original pair on the same seeded random input.

Models:
- squeezenet: the Caffe2 model-zoo SqueezeNet 1.0 predict net (tests/data's copy of
  shared/data/caffe2-zoo/squeezenet/predict_net.pb, byte for byte), with weights from
  `demitasse init-net` (seeded Xavier fills, which the exporter runs exactly as `run`
  does), 1x3x227x227. Its logits (pool10) are made an output too: the random-weight
  probabilities are nearly uniform, so they alone would hide errors.
- lenet: models/mnist's LeNet with the DB input, loss and accuracy ops taken off and a
  Softmax added (FC on a 4-D input, an in-place Relu), 4x1x28x28.
- example: models/example's MLP, also checked against the NumPy answer it ships with.
- opsnet: a net made here for the translations the models do not reach (see OPSNET).
- mathnet: the activations, n-ary math and reductions (see MATHNET).
- matmulnet: BatchMatMul and MatMul (see MATMULNET).
- seqnet: a transformer block's ops: Gather, LayerNorm, MaskedSoftmax, Gelu, Where (see
  SEQNET).
- gpt: models/gpt's inference net as make_gpt.py writes it, at a small config (2 layers,
  width 32, 2 heads, context 16, vocabulary 20): tokens INT32 [1, 16] -> logits.

Each exported file must pass onnx.checker.check_model (full check, with the input
shapes given); SqueezeNet is also exported without input shapes (the general Softmax
form) and must run to the same answer. The bound: ONNX Runtime and demitasse compute in
FP32 with different summation orders (MLAS against oneDNN/OpenBLAS), which moves each
dot product by about sqrt(K) * 2^-24 relative (under 5e-6 for SqueezeNet's K <= 4608)
per layer; 26 layers compound that to at most ~1e-4 of the largest output, while a
wrong translation (a pad, a stride, a softmax axis) is off by O(1). So the largest
difference must stay within 1e-4 of the largest output magnitude.

Usage: export_ort.py DEMITASSE WORKDIR
Exits 77 (skipped) when onnx, onnxruntime or numpy cannot be imported.
"""
import os
import re
import subprocess
import sys

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOL = 1e-4
# --input-shape's TYPE suffix for the non-FLOAT inputs the tests feed.
DTYPE = {"int32": ":int32", "int64": ":int64", "bool": ":bool"}


def sh(*args):
    subprocess.run([str(a) for a in args], check=True, stdout=subprocess.DEVNULL)


def compare(name, exe, d, init, net, inputs, outputs, shapes=True, extra=None):
    """Exports (init, net), checks the model, runs both; True when they agree."""
    model = os.path.join(d, name + ".onnx")
    cmd = [exe, "export-onnx", "--init", init, "--net", net, "-o", model]
    if shapes:
        for k, v in inputs.items():
            cmd += ["--input-shape", k + "=" + ",".join(str(n) for n in v.shape) + DTYPE.get(v.dtype.name, "")]
    sh(*cmd)
    if shapes:
        onnx.checker.check_model(onnx.load(model), full_check=True)
    run = [exe, "run", "--init", init, "--net", net]
    for k, v in inputs.items():
        p = os.path.join(d, k + ".npy")
        np.save(p, v)
        run += ["--input", f"{k}={p}"]
    for o in outputs:
        run += ["--output", f"{o}={os.path.join(d, o + '.npy')}"]
    sh(*run)
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, inputs)))
    ok = True
    for o in outputs:
        ref = np.load(os.path.join(d, o + ".npy")).astype(np.float64)
        if got[o].shape != ref.shape:
            print(f"{name}/{o}: shape {got[o].shape}, demitasse {ref.shape}: FAIL")
            ok = False
            continue
        err = float(np.max(np.abs(got[o] - ref)))
        scale = float(np.max(np.abs(ref)))
        good = err <= TOL * scale
        print(f"{name}/{o}: max |onnxruntime - demitasse| = {err:.3g}, max |out| = {scale:.3g}, "
              f"ratio {err / scale:.3g}: {'ok' if good else 'FAIL'}")
        ok = ok and good
    if extra is not None:
        ok = extra(got) and ok
    return ok


def squeezenet(exe, work):
    d = os.path.join(work, "squeezenet")
    os.makedirs(d)
    net_pb = os.path.join(SRC, "tests", "data", "squeezenet_predict_net.pb")
    table = os.path.join(SRC, "tests", "data", "squeezenet_out_channels.txt")
    init = os.path.join(d, "init.pb")
    sh(exe, "init-net", "--for", net_pb, "--input", "data=1,3,227,227", "--out-channels", table,
       "-o", init)
    net = os.path.join(d, "predict_net.pbtxt")
    sh(exe, "convert", net_pb, net)
    with open(net, "a") as f:
        f.write('external_output: "pool10"\n')
    x = np.random.default_rng(7).uniform(-1, 1, (1, 3, 227, 227)).astype(np.float32)
    ok = compare("squeezenet", exe, d, init, net, {"data": x}, ["softmaxout", "pool10"])
    return compare("squeezenet_noshape", exe, d, init, net, {"data": x}, ["softmaxout", "pool10"],
                   shapes=False) and ok


def lenet(exe, work):
    d = os.path.join(work, "lenet")
    os.makedirs(d)
    mnist = os.path.join(SRC, "models", "mnist")
    with open(os.path.join(mnist, "lenet_test.pbtxt")) as f:
        text = f.read()
    ops = re.findall(r"^op \{.*?(?=^op \{|^external_|\Z)", text, flags=re.M | re.S)
    keep = [o for o in ops if not re.search(r'"(TensorProtosDBInput|SoftmaxWithLoss|Accuracy)"', o)]
    params = ["conv1_w", "conv1_b", "conv2_w", "conv2_b", "fc3_w", "fc3_b", "pred_w", "pred_b"]
    net = os.path.join(d, "lenet_infer.pbtxt")
    with open(net, "w") as f:
        f.write('name: "lenet_infer"\n' + "".join(keep))
        f.write('op { input: "pred" output: "prob" type: "Softmax" }\n')
        for p in ["data"] + params:
            f.write(f'external_input: "{p}"\n')
        f.write('external_output: "prob"\nexternal_output: "pred"\n')
    x = np.random.default_rng(3).uniform(0, 1, (4, 1, 28, 28)).astype(np.float32)
    return compare("lenet", exe, d, os.path.join(mnist, "lenet_init.pbtxt"), net, {"data": x},
                   ["prob", "pred"])


def example(exe, work):
    d = os.path.join(work, "example")
    os.makedirs(d)
    m = os.path.join(SRC, "models", "example")
    x = np.load(os.path.join(m, "input.npy")).astype(np.float32)
    want = np.load(os.path.join(m, "expected_prob.npy"))

    def numpy_ref(got):
        err = float(np.max(np.abs(got["prob"] - want)))
        print(f"example/prob: max |onnxruntime - NumPy| = {err:.3g}")
        return err <= 1e-6
    return compare("example", exe, d, os.path.join(m, "init_net.pbtxt"),
                   os.path.join(m, "predict_net.pbtxt"), {"data": x}, ["prob"], extra=numpy_ref)


def fill(name, a):
    a = np.asarray(a, np.float32)
    shape = ", ".join(str(d) for d in a.shape)
    vals = ", ".join(repr(float(v)) for v in a.ravel())
    return (f'op {{ output: "{name}" type: "GivenTensorFill" arg {{ name: "shape" ints: [{shape}] }}'
            f' arg {{ name: "values" floats: [{vals}] }} }}\n')


# The translations the models above do not reach, each in the form that needs care:
# Conv with legacy_pad SAME and stride 2, SpatialBN, ConvFusion (grouped; conv + b + S,
# relu) expanded again, a dilated Conv with asymmetric pads and no bias, MaxPool by Caffe's rule where the last window would start in the
# padding (dropped), AveragePool with padding not counted, LRN, Concat with split_info,
# Split, Transpose, Reshape with old_shape, FC at axis 2 (Flatten, Gemm, Reshape), Softmax
# over two trailing dims (Flatten, Softmax, Reshape), legacy broadcasts at axis 1 and of a
# scalar, Scale, Sub, Div, Sum, Cast to FLOAT16 and HalfToFloat (on the input, so both
# round the same values), Copy, test-mode Dropout, Flatten and FCFusion.
OPSNET = """name: "opsnet"
op { input: ["data", "w1", "b1"] output: "c1" name: "c1" type: "Conv" arg { name: "kernel" i: 3 }
  arg { name: "stride" i: 2 } arg { name: "legacy_pad" i: 2 } }
op { input: ["c1", "scale", "bias", "mean", "var"] output: "bn" name: "bn" type: "SpatialBN"
  arg { name: "is_test" i: 1 } arg { name: "epsilon" f: 0.001 } }
op { input: ["bn", "w2", "b2", "bn"] output: "cf" name: "cf" type: "ConvFusion"
  arg { name: "kernel" i: 3 } arg { name: "pad" i: 1 } arg { name: "fusion_type" i: 3 }
  arg { name: "group" i: 2 } }
op { input: ["cf", "w3"] output: "dil" name: "dil" type: "Conv" arg { name: "kernel" i: 2 }
  arg { name: "dilation" i: 2 } arg { name: "pads" ints: [1, 0, 2, 1] } }
op { input: "cf" output: "mp" name: "mp" type: "MaxPool" arg { name: "kernel" i: 3 }
  arg { name: "stride" i: 3 } arg { name: "pad" i: 1 } arg { name: "legacy_pad" i: 3 } }
op { input: "cf" output: "ap" name: "ap" type: "AveragePool" arg { name: "kernel" i: 3 }
  arg { name: "stride" i: 1 } arg { name: "pad" i: 1 } }
op { input: "ap" output: "lrn" name: "lrn" type: "LRN" arg { name: "size" i: 3 }
  arg { name: "alpha" f: 0.001 } arg { name: "beta" f: 0.75 } arg { name: "bias" f: 1.0 } }
op { input: ["lrn", "cf"] output: ["cat", "cat_info"] name: "cat" type: "Concat" }
op { input: "cat" output: ["sp0", "sp1"] name: "sp" type: "Split" arg { name: "axis" i: 1 }
  arg { name: "split" ints: [6, 10] } }
op { input: "sp0" output: "tr" name: "tr" type: "Transpose" arg { name: "axes" ints: [0, 2, 3, 1] } }
op { input: "tr" output: ["rs", "rs_old"] name: "rs" type: "Reshape" arg { name: "shape" ints: [0, 25, -1] } }
op { input: ["rs", "fw", "fb"] output: "fc" name: "fc" type: "FC" arg { name: "axis" i: 2 } }
op { input: "fc" output: "sm" name: "sm" type: "Softmax" arg { name: "axis" i: 1 } }
op { input: ["sm", "abias"] output: "ad" name: "ad" type: "Add" arg { name: "broadcast" i: 1 }
  arg { name: "axis" i: 1 } }
op { input: ["ad", "two"] output: "mu" name: "mu" type: "Mul" arg { name: "broadcast" i: 1 } }
op { input: "mu" output: "sc" name: "sc" type: "Scale" arg { name: "scale" f: 0.5 } }
op { input: ["sc", "sm"] output: "sb" name: "sb" type: "Sub" }
op { input: ["sb", "den"] output: "dv" name: "dv" type: "Div" arg { name: "broadcast" i: 1 } }
op { input: ["dv", "sm", "sb"] output: "su" name: "su" type: "Sum" }
op { input: "su" output: "cp" name: "cp" type: "Copy" }
op { input: "cp" output: ["out1", "mask"] name: "drop" type: "Dropout" arg { name: "is_test" i: 1 } }
op { input: "mp" output: "fl" name: "fl" type: "Flatten" }
op { input: ["fl", "fw2", "fb2"] output: "out2" name: "ff" type: "FCFusion"
  arg { name: "fusion_type" i: 1 } }
op { input: "cf" output: "mp2" name: "mp2" type: "MaxPool" arg { name: "kernel" i: 3 }
  arg { name: "stride" i: 2 } arg { name: "pad" i: 1 } arg { name: "legacy_pad" i: 3 } }
op { input: "cf" output: "ap2" name: "ap2" type: "AveragePool" arg { name: "kernel" i: 3 }
  arg { name: "stride" i: 2 } arg { name: "pad" i: 1 } arg { name: "legacy_pad" i: 3 } }
op { input: "data" output: "h" name: "tohalf" type: "Cast" arg { name: "to" s: "FLOAT16" } }
op { input: "h" output: "out3" name: "tofloat" type: "HalfToFloat" }
external_input: "data"
external_output: ["out1", "out2", "out3", "mp2", "ap2", "dil"]
"""


def opsnet(exe, work):
    d = os.path.join(work, "opsnet")
    os.makedirs(d)
    g = np.random.default_rng(5)
    r = lambda *s: g.standard_normal(s) * 0.3
    init = "".join([
        fill("w1", r(8, 3, 3, 3)), fill("b1", r(8)), fill("scale", g.uniform(0.5, 1.5, 8)),
        fill("bias", r(8)), fill("mean", r(8)), fill("var", g.uniform(0.5, 1.5, 8)),
        fill("w2", r(8, 4, 3, 3)), fill("w3", r(3, 8, 2, 2)), fill("b2", r(8)), fill("fw", r(4, 6)), fill("fb", r(4)),
        fill("abias", r(25)), fill("two", [2.0]), fill("den", g.uniform(1, 2, 4)),
        fill("fw2", r(5, 32)), fill("fb2", r(5))])
    ip, np_ = os.path.join(d, "init.pbtxt"), os.path.join(d, "net.pbtxt")
    with open(ip, "w") as f:
        f.write(init)
    with open(np_, "w") as f:
        f.write(OPSNET)
    x = g.uniform(-1, 1, (2, 3, 9, 9)).astype(np.float32)
    return compare("opsnet", exe, d, ip, np_, {"data": x}, ["out1", "out2", "out3", "mp2", "ap2", "dil"])


# The activations, n-ary math and reductions (net/onnx/export_math.c): each with the
# arguments that change its ONNX form (Clip's bounds and ReduceSum's axes as inputs, Pow's
# exponent as a scalar, HardSwish expanded, LogSoftmax over two trailing dims), and the
# pools' ceil_mode and count_include_pad (4x5 by stride 2: partial last windows).
MATHNET = """name: "mathnet"
op { input: "data" output: "sg" name: "sg" type: "Sigmoid" }
op { input: "data" output: "th" name: "th" type: "Tanh" }
op { input: "data" output: "lr" name: "lr" type: "LeakyRelu" arg { name: "alpha" f: 0.2 } }
op { input: "data" output: "hs" name: "hs" type: "HardSigmoid" arg { name: "alpha" f: 0.3 }
  arg { name: "beta" f: 0.4 } }
op { input: "data" output: "hw" name: "hw" type: "HardSwish" }
op { input: "data" output: "cl" name: "cl" type: "Clip" arg { name: "min" f: -0.5 }
  arg { name: "max" f: 0.25 } }
op { input: "data" output: "c2" name: "c2" type: "Clip" arg { name: "max" f: 0.1 } }
op { input: "sg" output: "pw" name: "pw" type: "Pow" arg { name: "exponent" f: 1.5 } }
op { input: ["sg", "th"] output: "p2" name: "p2" type: "Pow" }
op { input: ["lr", "hs", "row"] output: "mx" name: "mx" type: "Max" }
op { input: ["hw", "cl"] output: "mn" name: "mn" type: "Min" }
op { input: ["pw", "p2", "c2"] output: "me" name: "me" type: "Mean" }
op { input: "mx" output: "ls" name: "ls" type: "LogSoftmax" arg { name: "axis" i: 2 } }
op { input: "mn" output: "rs" name: "rs" type: "ReduceSum" arg { name: "axes" ints: [1, 3] }
  arg { name: "keepdims" i: 0 } }
op { input: "me" output: "rm" name: "rm" type: "ReduceMean" arg { name: "axes" ints: [2] } }
op { input: "me" output: "rx" name: "rx" type: "ReduceMax" }
op { input: "data" output: "apc" name: "apc" type: "AveragePool" arg { name: "kernel" i: 3 }
  arg { name: "stride" i: 2 } arg { name: "pad" i: 1 } arg { name: "ceil_mode" i: 1 }
  arg { name: "count_include_pad" i: 1 } }
op { input: "data" output: "mpc" name: "mpc" type: "MaxPool" arg { name: "kernel" i: 2 }
  arg { name: "stride" i: 2 } arg { name: "ceil_mode" i: 1 } }
external_input: "data"
external_output: ["ls", "rs", "rm", "rx", "mn", "apc", "mpc"]
"""


def mathnet(exe, work):
    d = os.path.join(work, "mathnet")
    os.makedirs(d)
    g = np.random.default_rng(7)
    ip, np_ = os.path.join(d, "init.pbtxt"), os.path.join(d, "net.pbtxt")
    with open(ip, "w") as f:
        f.write(fill("row", g.standard_normal(5) * 0.5))  # broadcast along the last dim
    with open(np_, "w") as f:
        f.write(MATHNET)
    x = g.uniform(-2, 2, (2, 3, 4, 5)).astype(np.float32)
    return compare("mathnet", exe, d, ip, np_, {"data": x},
                   ["ls", "rs", "rm", "rx", "mn", "apc", "mpc"])


# BatchMatMul and MatMul (net/onnx/export_math.c) as ONNX MatMul: trans_b as a Transpose
# (attention's Q K^T), a broadcast B, MatMul's axis_a as a Flatten with a transposed B,
# a 1-D A (Y loses its M dim in both).
MATMULNET = """name: "matmulnet"
op { input: ["data", "k"] output: "s" name: "qk" type: "BatchMatMul" arg { name: "trans_b" i: 1 } }
op { input: ["s", "v"] output: "o" name: "sv" type: "BatchMatMul" arg { name: "broadcast" i: 1 } }
op { input: ["o", "w"] output: "p" name: "mm" type: "MatMul" arg { name: "axis_a" i: 2 }
  arg { name: "trans_b" i: 1 } }
op { input: ["u", "data"] output: "z" name: "uq" type: "BatchMatMul" arg { name: "broadcast" i: 1 } }
external_input: "data"
external_output: ["s", "p", "z"]
"""


def matmulnet(exe, work):
    d = os.path.join(work, "matmulnet")
    os.makedirs(d)
    g = np.random.default_rng(11)
    ip, np_ = os.path.join(d, "init.pbtxt"), os.path.join(d, "net.pbtxt")
    with open(ip, "w") as f:
        f.write(fill("k", g.standard_normal((2, 5, 6))) + fill("v", g.standard_normal((5, 3))) +
                fill("w", g.standard_normal((7, 3))) + fill("u", g.standard_normal(4)))
    with open(np_, "w") as f:
        f.write(MATMULNET)
    x = g.uniform(-1, 1, (2, 4, 6)).astype(np.float32)
    return compare("matmulnet", exe, d, ip, np_, {"data": x}, ["s", "p", "z"])


# The sequence-model ops (net/onnx/export_seq.c), each in its opset-13 definition:
# Gather of an INT32 token input, LayerNorm with gamma/beta at the last axis and without
# over two dims, attention's MaskedSoftmax causal with a scale and with an additive mask,
# Gelu exact and fast, Where on a BOOL input.
SEQNET = """name: "seqnet"
op { input: ["wte", "ids"] output: "e" name: "embed" type: "Gather" }
op { input: ["e", "g", "b"] output: ["h", "h_mean", "h_std"] name: "ln1" type: "LayerNorm"
  arg { name: "axis" i: 2 } arg { name: "elementwise_affine" i: 1 } arg { name: "epsilon" f: 1e-3 } }
op { input: ["h", "wq", "bq"] output: "q" name: "q" type: "FC" arg { name: "axis" i: 2 } }
op { input: ["q", "h"] output: "s" name: "qk" type: "BatchMatMul" arg { name: "trans_b" i: 1 } }
op { input: ["s"] output: "p" name: "causal" type: "MaskedSoftmax" arg { name: "causal" i: 1 }
  arg { name: "scale" f: 0.35 } }
op { input: ["s", "madd"] output: "p2" name: "additive" type: "MaskedSoftmax" }
op { input: ["p", "h"] output: "a" name: "pv" type: "BatchMatMul" }
op { input: ["a"] output: "g1" name: "gelu" type: "Gelu" }
op { input: ["a"] output: "g2" name: "gelu_fast" type: "Gelu" arg { name: "fast_gelu" i: 1 } }
op { input: ["g1"] output: ["n2", "n2_mean", "n2_std"] name: "ln2" type: "LayerNorm" }
op { input: ["cond", "g1", "g2"] output: "w" name: "where" type: "Where" }
external_input: ["ids", "cond"]
external_output: ["h", "p", "p2", "g1", "g2", "n2", "w"]
"""


def seqnet(exe, work):
    d = os.path.join(work, "seqnet")
    os.makedirs(d)
    g = np.random.default_rng(13)
    ip, np_ = os.path.join(d, "init.pbtxt"), os.path.join(d, "net.pbtxt")
    with open(ip, "w") as f:
        f.write(fill("wte", g.standard_normal((11, 8))) + fill("g", 1 + 0.1 * g.standard_normal(8)) +
                fill("b", 0.1 * g.standard_normal(8)) + fill("wq", g.standard_normal((8, 8)) * 0.3) +
                fill("bq", 0.1 * g.standard_normal(8)) + fill("madd", g.uniform(-3, 0, (5, 5))))
    with open(np_, "w") as f:
        f.write(SEQNET)
    ids = g.integers(0, 11, (2, 5)).astype(np.int32)
    cond = g.integers(0, 2, (2, 5, 8)).astype(np.bool_)
    return compare("seqnet", exe, d, ip, np_, {"ids": ids, "cond": cond},
                   ["h", "p", "p2", "g1", "g2", "n2", "w"])


def gpt(exe, work):
    d = os.path.join(work, "gpt")
    os.makedirs(d)
    subprocess.run([sys.executable, os.path.join(SRC, "models", "gpt", "make_gpt.py"), "--layers",
                    "2", "--width", "32", "--heads", "2", "--context", "16", "--vocab", "20",
                    "--out-dir", d], check=True, stdout=subprocess.DEVNULL)
    tokens = np.random.default_rng(17).integers(0, 20, (1, 16)).astype(np.int32)
    return compare("gpt", exe, d, os.path.join(d, "gpt_init.pbtxt"),
                   os.path.join(d, "gpt_infer.pbtxt"), {"tokens": tokens}, ["logits"])


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    exe, work = sys.argv[1], sys.argv[2]
    ok = True
    for f in (squeezenet, lenet, example, opsnet, mathnet, matmulnet, seqnet, gpt):
        ok = f(exe, work) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""make_resnet50.py: writes ResNet-50 as Demitasse/Caffe2 NetDefs (standard library only).

    /usr/bin/python3 models/resnet50/make_resnet50.py [OUT_DIR]   (default: this folder)

writes resnet50_train.pbtxt (forward + loss; 'data' (N, 3, 224, 224) FLOAT and 'label'
(N) INT32 are fed directly, no DB op) and resnet50_init.pbtxt (the weights); and the
same model in NHWC, resnet50_nhwc_{train,init}.pbtxt: 'data' (N, 224, 224, 3), every
Conv, SpatialBN and pool with order "NHWC" and conv weights in Caffe2's NHWC filter
layout (M, kH, kW, C). NHWC is what GPU tensor cores read directly; in NCHW cuDNN
transposes around them.

The layout is ResNet-50 v1.5 as Caffe2's model zoo / Detectron build it: conv1 7x7/2 64,
BN, Relu, MaxPool 3x3/2; stages of [3, 4, 6, 3] bottlenecks (1x1, 3x3, 1x1 with 4x
expansion), the stride on the 3x3 (v1.5, not on the first 1x1 as in v1), a projection
shortcut (1x1 conv + BN) on the first block of each stage; Sum + Relu; global average
pool; FC 1000; SoftmaxWithLoss. Convs have no bias, as BN follows each one.

Blob names follow that builder so its pretrained weights would map by name: conv1_w,
res_conv1_bn_{s,b,rm,riv}, res2_0_branch2a_w, res2_0_branch2a_bn_s, ..., res2_0_branch1_w
(the projection), res2_0_sum, pool5, pred_w, pred_b. SpatialBN is in training mode with
its five outputs: Y, the running mean and variance written in place over inputs 3 and 4
(so they are state, not parameters: no gradient flows to them), and the saved mean and
inverse std its gradient reads.

The init net: MSRAFill conv weights (std sqrt(2 / fan_out), as Caffe2's builder), BN
scale 1, bias 0, running mean 0, running variance 1, XavierFill FC weight, FC bias 0.
Every random fill has its own seed, so two runs of the init net give the same weights.
"""
import os
import sys

STAGES = [(2, 3, 64), (3, 4, 128), (4, 6, 256), (5, 3, 512)]  # (name, blocks, width)
EXPANSION = 4
CLASSES = 1000
BN_EPSILON = 1e-5
BN_MOMENTUM = 0.9


class Nets:
    def __init__(self, nhwc=False):
        self.train = []
        self.init = []
        self.seed = 0
        self.nhwc = nhwc
        self.order = ['arg { name: "order" s: "NHWC" }'] if nhwc else []

    def fill(self, blob, kind, shape, value=None):
        """An init-net op creating `blob`; random fills get the next seed."""
        args = ['arg { name: "shape" ints: [%s] }' % ", ".join(str(d) for d in shape)]
        if value is not None:
            args.append('arg { name: "value" f: %g }' % value)
        extra = ""
        if kind != "ConstantFill":
            self.seed += 1
            extra = " device_option { random_seed: %d }" % self.seed
        self.init.append('op { output: "%s" type: "%s" %s%s }' % (blob, kind, " ".join(args), extra))

    def op(self, kind, inputs, outputs, args=()):
        ins = " ".join('input: "%s"' % i for i in inputs)
        outs = " ".join('output: "%s"' % o for o in outputs)
        text = 'op { %s %s type: "%s"' % (ins, outs, kind)
        for a in args:
            text += "\n     " + a
        self.train.append(text + " }")

    def conv(self, x, y, c_in, c_out, kernel, stride=1, pad=0):
        """Conv without bias (a BN follows); returns y."""
        # the fill draws by position, so the NHWC weights are other numbers from the
        # same distribution (MSRAFill's std depends on the element count only)
        shape = [c_out, kernel, kernel, c_in] if self.nhwc else [c_out, c_in, kernel, kernel]
        self.fill(y + "_w", "MSRAFill", shape)
        args = ['arg { name: "kernel" i: %d }' % kernel] + self.order
        if stride != 1:
            args.append('arg { name: "stride" i: %d }' % stride)
        if pad:
            args.append('arg { name: "pad" i: %d }' % pad)
        self.op("Conv", [x, y + "_w"], [y], args)
        return y

    def bn(self, x, y, c):
        """Training-mode SpatialBN; the running stats are updated in place."""
        p = y
        self.fill(p + "_s", "ConstantFill", [c], 1.0)
        self.fill(p + "_b", "ConstantFill", [c])
        self.fill(p + "_rm", "ConstantFill", [c])
        self.fill(p + "_riv", "ConstantFill", [c], 1.0)
        self.op("SpatialBN", [x, p + "_s", p + "_b", p + "_rm", p + "_riv"],
                [y, p + "_rm", p + "_riv", p + "_sm", p + "_siv"],
                ['arg { name: "is_test" i: 0 }', 'arg { name: "epsilon" f: %g }' % BN_EPSILON,
                 'arg { name: "momentum" f: %g }' % BN_MOMENTUM] + self.order)
        return y

    def relu(self, x):
        self.op("Relu", [x], [x])  # in place, as Caffe2's builder
        return x

    def bottleneck(self, x, prefix, c_in, width, stride):
        c_out = width * EXPANSION
        b = self.conv(x, prefix + "_branch2a", c_in, width, 1)
        b = self.relu(self.bn(b, prefix + "_branch2a_bn", width))
        b = self.conv(b, prefix + "_branch2b", width, width, 3, stride, 1)
        b = self.relu(self.bn(b, prefix + "_branch2b_bn", width))
        b = self.conv(b, prefix + "_branch2c", width, c_out, 1)
        b = self.bn(b, prefix + "_branch2c_bn", c_out)
        short = x
        if c_in != c_out or stride != 1:
            short = self.conv(x, prefix + "_branch1", c_in, c_out, 1, stride)
            short = self.bn(short, prefix + "_branch1_bn", c_out)
        self.op("Sum", [b, short], [prefix + "_sum"])
        return self.relu(prefix + "_sum"), c_out


def build(nhwc=False):
    n = Nets(nhwc)
    x = n.conv("data", "conv1", 3, 64, 7, 2, 3)
    x = n.relu(n.bn(x, "res_conv1_bn", 64))
    n.op("MaxPool", [x], ["pool1"],
         ['arg { name: "kernel" i: 3 }', 'arg { name: "stride" i: 2 }', 'arg { name: "pad" i: 1 }']
         + n.order)
    x, c = "pool1", 64
    for stage, blocks, width in STAGES:
        for i in range(blocks):
            stride = 2 if i == 0 and stage > 2 else 1
            x, c = n.bottleneck(x, "res%d_%d" % (stage, i), c, width, stride)
    n.op("AveragePool", [x], ["pool5"], ['arg { name: "global_pooling" i: 1 }'] + n.order)
    n.fill("pred_w", "XavierFill", [CLASSES, c])
    n.fill("pred_b", "ConstantFill", [CLASSES])
    n.op("FC", ["pool5", "pred_w", "pred_b"], ["pred"])
    n.op("SoftmaxWithLoss", ["pred", "label"], ["softmax", "loss"])
    return n


HEADER = "# Generated by make_resnet50.py; edit that, not this.\n"


def write(out, nhwc):
    n = build(nhwc)
    stem = "resnet50_nhwc" if nhwc else "resnet50"
    shape = "(N, 224, 224, 3)" if nhwc else "(N, 3, 224, 224)"
    layout = " NHWC:" if nhwc else ""
    with open(os.path.join(out, stem + "_train.pbtxt"), "w") as f:
        f.write(HEADER)
        f.write("# ResNet-50 v1.5,%s the training net: forward and loss. 'data' %s\n"
                "# FLOAT and 'label' (N) INT32 are fed; `demitasse train` or the passes add\n"
                "# the backward and the updates.\n" % (layout, shape))
        f.write('name: "%s_train"\n' % stem)
        f.write("\n".join(n.train) + "\n")
        f.write('external_input: "data"\nexternal_input: "label"\n')
        f.write('external_output: "softmax"\nexternal_output: "loss"\n')
    with open(os.path.join(out, stem + "_init.pbtxt"), "w") as f:
        f.write(HEADER)
        f.write("# ResNet-50 v1.5,%s the init net: MSRA conv weights, BN scale 1 / bias 0 /\n"
                "# mean 0 / var 1, Xavier FC weight, zero FC bias; seeded fills.\n" % layout)
        f.write('name: "%s_init"\n' % stem)
        f.write("\n".join(n.init) + "\n")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    write(out, False)
    write(out, True)


if __name__ == "__main__":
    main()

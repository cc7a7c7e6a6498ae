#!/usr/bin/env python3
"""make_infer.py: ResNet-50's inference (test-mode) nets from the training nets that
make_resnet50.py writes: every SpatialBN gets is_test 1 and keeps only its output Y (no
running-statistics update, no saved mean and inverse std), and SoftmaxWithLoss becomes a
Softmax without the label, so `softmax` holds the probabilities and `pred` the logits.
The training net's external input `label` and output `loss` are left as declared (nothing
reads or writes them; the runs feed only `data`). The init net is the model's own
(BN scale 1, bias 0, mean 0, variance 1) unless --random-bn draws each BN parameter and
statistic from a fixed range with its own seed, so that folding a BN into its Conv is not
the identity. Standard library only. Used by tests/models/fusion_run_test.sh,
tests/models/precision_run_test.sh and bench/cpu_infer.sh.

usage: make_infer.py RESNET50_DIR OUT_NET [--init-out OUT_INIT [--random-bn]]
  RESNET50_DIR  the folder with resnet50_train.pbtxt and resnet50_init.pbtxt
  OUT_NET       the inference net to write (text)
  --init-out    also write the init net there (a copy, or with --random-bn the drawn BN)
"""
import argparse
import re
import sys

BN_COUNT = 53  # one per conv: conv1, 16 bottlenecks x 3, 4 projection shortcuts


def infer_net(train_text):
    s = re.sub(r'(type: "SpatialBN"\n\s*arg \{ name: "is_test" i: )0', r"\g<1>1", train_text)

    def one_output(m):  # is_test: Y only
        line = m.group(0)
        for o in re.findall(r'output: "[^"]*"', line)[1:]:
            line = line.replace(" " + o, "")
        return line

    s = re.sub(r'op \{[^\n]*type: "SpatialBN"', one_output, s)
    s = s.replace('input: "label" output: "softmax" output: "loss" type: "SoftmaxWithLoss"',
                  'output: "softmax" type: "Softmax"')
    n = s.count('is_test" i: 1')
    if n != BN_COUNT or "SoftmaxWithLoss" in s:
        raise SystemExit("make_infer.py: the training net is not the one make_resnet50.py "
                         f"writes ({n} test-mode BN, {BN_COUNT} expected)")
    return s


def random_bn_init(init_text):
    """BN parameters and statistics drawn at random (each its own seed), not 1, 0, 0, 1."""
    ranges = {"s": (0.5, 1.5), "b": (-0.2, 0.2), "rm": (-0.2, 0.2), "riv": (0.5, 2.0)}
    seed = [100]

    def randomise(m):
        name, kind, shape = m.group(1), m.group(2), m.group(3)
        lo, hi = ranges[kind]
        seed[0] += 1
        return (f'op {{ output: "{name}" type: "UniformFill" arg {{ name: "shape" ints: [{shape}] }} '
                f'arg {{ name: "min" f: {lo} }} arg {{ name: "max" f: {hi} }} '
                f'device_option {{ random_seed: {seed[0]} }} }}')

    init, n = re.subn(r'op \{ output: "([^"]*_bn_(s|b|rm|riv))" type: "ConstantFill" '
                      r'arg \{ name: "shape" ints: \[(\d+)\] \}[^\n]*\}', randomise, init_text)
    if n != 4 * BN_COUNT:
        raise SystemExit(f"make_infer.py: {n} BN fills replaced, {4 * BN_COUNT} expected")
    return init


def main():
    ap = argparse.ArgumentParser(usage=__doc__.split("usage: ", 1)[1].split("\n", 1)[0])
    ap.add_argument("dir")
    ap.add_argument("out_net")
    ap.add_argument("--init-out")
    ap.add_argument("--random-bn", action="store_true")
    a = ap.parse_args()
    if a.random_bn and not a.init_out:
        ap.error("--random-bn needs --init-out")
    with open(a.dir + "/resnet50_train.pbtxt") as f:
        net = infer_net(f.read())
    with open(a.out_net, "w") as f:
        f.write(net)
    if a.init_out:
        with open(a.dir + "/resnet50_init.pbtxt") as f:
            init = f.read()
        with open(a.init_out, "w") as f:
            f.write(random_bn_init(init) if a.random_bn else init)


if __name__ == "__main__":
    sys.exit(main())

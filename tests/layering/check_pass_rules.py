#!/usr/bin/env python3
"""check_pass_rules.py: fails when a net pass recognises an op by its type name.

What a pass needs to know of an op lives in the op's schema (precision class, slot
masks, host inputs, role, skip input, reused outputs) and in its kernels' supports()
(DESIGN.md, "Engines and passes for speed"), so that a plugin's op takes part in the
passes like a built-in one. A pass may still name the ops it emits itself, and
recognise them again where only their type says what they are (which end of a device
copy is the host; the gradient pass's seed fill): those are EMITTED below.

Reads every .c and .h in net/ and reports each strcmp/strncmp/strcasecmp, on one line,
of a string literal that looks like an op type ("UpperCamel") with file:line, unless
the literal is an emitted op, or an op its file matches by design (MATCHED). Exits 1 on any, or when it read no file. A line-based
check: a comparison split over lines, or a table of names, is for review to catch.

Usage: check_pass_rules.py --root DIR | --self-test
"""
import argparse
import os
import re
import sys
import tempfile

# Ops the passes emit (net/passes/gradient_pass.c, net/passes/optimizer_pass.c, net/passes/mixed_precision_pass.c,
# net/passes/device_pass.c, net/passes/memory_pass.c).
EMITTED = {"CopyCPUToGPU", "CopyGPUToCPU", "ConstantFill", "Sum", "Free", "Cast",
           "FloatToHalf", "HalfToFloat", "Mul", "UnscaleAndCheck", "UpdateLossScale",
           "LearningRate", "WeightedSum", "MomentumSGDUpdate", "Adam", "Iter"}
# Ops a pass matches by type because the rule is about that op by design, per file: a
# fusion is a rewrite of one pattern of ops (Conv then a test-mode SpatialBN folded into
# it; Conv + Sum/Add, Conv (+ Sum) + Relu and FC + Relu made the ConvFusion and FCFusion
# it emits, net/passes/fusion_pass.c), which no schema field can say for a pair; the arguments it
# needs (is_test, order, epsilon, broadcast, fusion_type) it reads from the ops. Nowhere
# else may these be named.
MATCHED = {"net/passes/fusion_pass.c": {"Conv", "SpatialBN", "Relu", "Sum", "Add", "FC", "ConvFusion",
                        "FCFusion"},
           # training-mode SpatialBN (+ Sum/Add) + Relu made SpatialBNRelu and
           # SpatialBNAddRelu, Conv + Relu and FC + Relu made ConvFusion and FCFusion
           # (net/passes/train_fusion_pass.c)
           "net/passes/train_fusion_pass.c": {"SpatialBN", "Relu", "Sum", "Add", "Conv", "FC", "ConvFusion",
                              "FCFusion"}}
# An UpperCamel literal with a lower-case letter: an op type, not a dtype name ("INT64").
# is_type(op, "T") is net/passes/fusion_pass.c's comparison helper.
COMPARE_RE = re.compile(r'\b(?:strn?cmp|strcasecmp|is_type)\s*\([^;]*?"([A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*)"')


def check(root):
    problems, files = [], 0
    for dirpath, dirs, names in sorted(os.walk(os.path.join(root, "net"))):
        dirs.sort()
        for base in sorted(names):
            if base.endswith((".c", ".h")):
                files += 1
                problems += check_file(root, os.path.join(dirpath, base))
    return problems, files


def check_file(root, path):
    problems = []
    name = os.path.relpath(path, root).replace(os.sep, "/")
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            for m in COMPARE_RE.finditer(line):
                if m.group(1) not in EMITTED and m.group(1) not in MATCHED.get(name, ()):
                    problems.append(f"{name}:{lineno}: the pass recognises op type "
                                    f"'{m.group(1)}' by name; put the rule in its schema "
                                    f"or its kernels' supports()")
    return problems


def self_test():
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "net", "passes"))
        with open(os.path.join(d, "net", "p.c"), "w") as f:
            f.write('int a(const char *t) { return strcmp(t, "CopyCPUToGPU") == 0; }\n'
                    'int b(const char *t) { return strcmp(t, "SpatialBN") == 0; }\n')
        with open(os.path.join(d, "net", "passes", "fusion_pass.c"), "w") as f:  # matched there only
            f.write('int c(const char *t) { return strcmp(t, "SpatialBN") == 0; }\n'
                    'int d(const char *t) { return is_type(t, "Softmax"); }\n')
        problems, files = check(d)
        problems.sort()
        ok = (files == 2 and len(problems) == 2 and problems[0].startswith("net/p.c:2:")
              and problems[1].startswith("net/passes/fusion_pass.c:2:"))
        print("self-test:", "ok" if ok else f"FAILED ({files} files, {problems})")
        return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    problems, files = check(a.root)
    for p in problems:
        print(p)
    print(f"read {files} files under {a.root}/net")
    if files == 0:
        print("no file read: the check checks nothing")
        return 1
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

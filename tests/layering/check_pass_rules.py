#!/usr/bin/env python3
"""check_pass_rules.py: fails when a net pass recognises an op by its type name.

What a pass needs to know of an op lives in the op's schema (precision class, slot
masks, host inputs, role, skip input, reused outputs, layout rule, value copy, gradient
slots) and in its kernels' supports() (DESIGN.md, "Engines and passes for speed"), so
that a plugin's op takes part in the passes like a built-in one. A pass may still name
the ops it emits itself, and recognise them again where only their type says what they
are (which end of a device copy is the host; the gradient pass's seed fill): those are
EMITTED below. Comments are not read.

Three rules, each reported with file:line, each passing a literal that is EMITTED or
that its file matches by design (MATCHED):
  - compare: in any .c or .h under net/, a strcmp/strncmp/strcasecmp/is_type call, on
    one line, of an "UpperCamel" string literal (an op type, not a dtype like "INT64");
  - table: under net/passes/, an "UpperCamel" literal in an array initialiser
    (`static const char *const names[] = {"Cast", ...}`): a list of ops is a rule about
    them, whether or not they are registered;
  - literal: under net/passes/, any string literal that is exactly a registered op
    type, read from the `.type = "X"` initialisers of operators/**/*.c.
Exits 1 on any, or when it read no file.

Usage: check_pass_rules.py --root DIR | --self-test
"""
import argparse
import os
import re
import sys
import tempfile

# Ops the passes emit (net/passes/gradient_pass.c, optimizer_pass.c,
# mixed_precision_pass.c, device_pass.c, memory_pass.c, layout_apply.c,
# data_parallel_pass.c, fusion_pass.c's FoldBN).
EMITTED = {"CopyCPUToGPU", "CopyGPUToCPU", "ConstantFill", "Sum", "Free", "Cast",
           "FloatToHalf", "HalfToFloat", "Mul", "UnscaleAndCheck", "UpdateLossScale",
           "LearningRate", "WeightedSum", "MomentumSGDUpdate", "Adam", "AdamW",
           "ClipByGlobalNorm", "Iter",
           "MultiWeightedSum", "MultiMomentumSGDUpdate", "MultiAdam", "Allreduce",
           "FoldBN", "Transpose", "NCHW2NHWCPad", "FCWeightToNHWC"}
# Ops a pass matches by type because the rule is about that op by design, per file: a
# fusion is a rewrite of one pattern of ops (Conv then a test-mode SpatialBN folded into
# it; Conv + Sum/Add, Conv (+ Sum) + Relu and FC + Relu made the ConvFusion and FCFusion
# it emits, net/passes/fusion_pass.c), which no schema field can say for a pair; the
# arguments it needs (is_test, order, epsilon, broadcast, fusion_type) it reads from the
# ops. Nowhere else may these be named.
# Swish and HardSwish are the patterns Conv -> Sigmoid or HardSigmoid -> Mul(conv, gate)
# made one ConvFusion; the other activations it fuses after a Conv it asks ConvFusion's
# module about (dm_conv_fusable_activation), not a table of its own.
MATCHED = {"net/passes/fusion_pass.c": {"Conv", "SpatialBN", "Relu", "Sum", "Add", "FC",
                                        "ConvFusion", "FCFusion", "Sigmoid", "HardSigmoid",
                                        "Mul"},
           # training-mode SpatialBN (+ Sum/Add) + Relu made SpatialBNRelu and
           # SpatialBNAddRelu, Conv + Relu and FC + Relu made ConvFusion and FCFusion
           # (net/passes/train_fusion_pass.c)
           "net/passes/train_fusion_pass.c": {"SpatialBN", "Relu", "Sum", "Add", "Conv", "FC",
                                              "ConvFusion", "FCFusion", "SpatialBNRelu",
                                              "SpatialBNAddRelu"}}
# An UpperCamel literal with a lower-case letter: an op type, not a dtype name ("INT64").
# is_type(op, "T") is net/passes/fusion_pass.c's comparison helper.
CAMEL = r'[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*'
COMPARE_RE = re.compile(r'\b(?:strn?cmp|strcasecmp|is_type)\s*\([^;]*?"(' + CAMEL + ')"')
CAMEL_RE = re.compile(CAMEL + r'\Z')
TYPE_RE = re.compile(r'\.type\s*=\s*"([^"\\]+)"')
TABLE_RE = re.compile(r'\[[^\[\]]*\]\s*=\s*\{')
TOKEN_RE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'', re.S)


def strip(text):
    """The text with comments blanked (newlines kept), and its string literals as
    (offset, value) pairs."""
    out, literals, last = [], [], 0
    for m in TOKEN_RE.finditer(text):
        out.append(text[last:m.start()])
        tok = m.group(0)
        if tok.startswith("/"):
            out.append(re.sub(r'[^\n]', ' ', tok))
        else:
            out.append(tok)
            if tok.startswith('"'):
                literals.append((m.start(), tok[1:-1]))
        last = m.end()
    out.append(text[last:])
    return "".join(out), literals


def table_spans(code):
    """(start, end) of each array initialiser's braces."""
    spans = []
    for m in TABLE_RE.finditer(code):
        depth, i = 0, m.end() - 1
        while i < len(code):
            if code[i] == "{":
                depth += 1
            elif code[i] == "}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        spans.append((m.end() - 1, i))
    return spans


def op_types(root):
    types = set()
    for dirpath, dirs, names in os.walk(os.path.join(root, "operators")):
        for base in names:
            if base.endswith(".c"):
                with open(os.path.join(dirpath, base), encoding="utf-8", errors="replace") as f:
                    types.update(TYPE_RE.findall(strip(f.read())[0]))
    return types


def check(root):
    problems, files, types = [], 0, op_types(root)
    for dirpath, dirs, names in sorted(os.walk(os.path.join(root, "net"))):
        dirs.sort()
        for base in sorted(names):
            if base.endswith((".c", ".h")):
                files += 1
                problems += check_file(root, os.path.join(dirpath, base), types)
    return problems, files


def check_file(root, path, types):
    name = os.path.relpath(path, root).replace(os.sep, "/")
    allowed = EMITTED | MATCHED.get(name, set())
    with open(path, encoding="utf-8", errors="replace") as f:
        code, literals = strip(f.read())
    found = {}  # (line, literal) -> the rule's words, one report per literal and line

    def line_of(offset):
        return code.count("\n", 0, offset) + 1

    for m in COMPARE_RE.finditer(code):
        if m.group(1) not in allowed:
            found.setdefault((line_of(m.start(1)), m.group(1)), "recognises op type '%s' by name")
    if name.startswith("net/passes/"):
        spans = table_spans(code)
        for offset, value in literals:
            if value in allowed:
                continue
            if CAMEL_RE.match(value) and any(a < offset < b for a, b in spans):
                found.setdefault((line_of(offset), value), "lists op type '%s' in a table")
            elif value in types:
                found.setdefault((line_of(offset), value), "names op type '%s'")
    return [f"{name}:{line}: the pass {why % value}; put the rule in its schema or its "
            f"kernels' supports()" for (line, value), why in sorted(found.items())]


SELF_TEST_OPS = '''static const dm_op_schema s[] = {{.type = "Relu"}, {.type = "SpatialBN"},
    {.type = "StopGradient"}, {.type = "Softmax"}};
'''
SELF_TEST_PASS = '''/* a comment naming "Relu" is not read */
static const char *const names[] = {"Cast", "StopGradient",
                                    "NotRegistered"};
int e(const char *t) { return dm_opb_start(b, "Transpose") + dm_opb_start(b, "Softmax"); }
int f(void) { return puts("layout pass: INT64 not an op") + puts("NotAnOp"); }
'''


def self_test():
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "net", "passes"))
        os.makedirs(os.path.join(d, "operators"))
        with open(os.path.join(d, "operators", "ops.c"), "w") as f:
            f.write(SELF_TEST_OPS)
        with open(os.path.join(d, "net", "p.c"), "w") as f:
            f.write('int a(const char *t) { return strcmp(t, "CopyCPUToGPU") == 0; }\n'
                    'int b(const char *t) { return strcmp(t, "SpatialBN") == 0; }\n')
        with open(os.path.join(d, "net", "passes", "fusion_pass.c"), "w") as f:  # matched there only
            f.write('int c(const char *t) { return strcmp(t, "SpatialBN") == 0; }\n'
                    'int d(const char *t) { return is_type(t, "Softmax"); }\n')
        with open(os.path.join(d, "net", "passes", "x_pass.c"), "w") as f:
            f.write(SELF_TEST_PASS)
        problems, files = check(d)
        want = ["net/p.c:2:", "net/passes/fusion_pass.c:2:", "net/passes/x_pass.c:2:",
                "net/passes/x_pass.c:3:", "net/passes/x_pass.c:4:"]
        ok = (files == 3 and len(problems) == len(want)
              and all(p.startswith(w) for p, w in zip(problems, want))
              and "'StopGradient' in a table" in problems[2]
              and "'NotRegistered' in a table" in problems[3]
              and "names op type 'Softmax'" in problems[4])
        print("self-test:", "ok" if ok else f"FAILED ({files} files, {problems})")
        return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    if not a.root:
        ap.error("--root DIR or --self-test")
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

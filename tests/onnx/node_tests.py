#!/usr/bin/env python3
"""node_tests.py: ONNX's backend node test cases through `demitasse run --net MODEL.onnx`.

The onnx package (PyPI) carries its node test cases as code (onnx.backend.test.case.node):
each a one-node model with input and expected output arrays computed by ONNX's NumPy
reference. Every case whose nodes are all op types the importer translates is run: the
importer may refuse it (an attribute or opset it does not translate; listed as refused),
and what it accepts must run and match ONNX's outputs (rtol 1e-3, atol 1e-5, as ONNX's
own backend test), or fail with a clear error that an op does not take the dtype, or be
one of the KNOWN cases below. Cases of other op types are counted, not run. A case
refused because an index list (Slice's starts, Squeeze's axes) is a graph input is run
again with those inputs made initializers, and must then pass or be refused. A case
whose ops are all ones the importer folds is also run with every input an initializer,
so that the importer evaluates it (net/onnx/fold.c) against ONNX's expected outputs.

Usage: node_tests.py DEMITASSE WORKDIR [-v]
Exits 77 (skipped) when the onnx package or numpy cannot be imported; 1 when a case
the importer accepted fails to run or differs.
"""
import os
import re
import subprocess
import sys

try:
    import numpy as np
    import onnx
    import onnx.numpy_helper
    from onnx.backend.test.case import node as node_cases
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def translated_ops():
    """The op types the importer translates, read from its tables rather than copied:
    the {"Type", tr_...} entries of net/onnx/import*.c, and the rows
    of operators/unary_family.h marked PLAIN (translated from that table)."""
    ops = set()
    onnx = os.path.join(ROOT, "net", "onnx")
    for f in sorted(os.listdir(onnx)):
        if f.startswith("import") and f.endswith(".c"):
            with open(os.path.join(onnx, f)) as fh:
                ops |= set(re.findall(r'\{"(\w+)", tr_\w+\}', fh.read()))
    with open(os.path.join(ROOT, "operators", "unary_family.h")) as fh:
        ops |= set(re.findall(r"X\((\w+), \w+, [01], PLAIN", fh.read()))
    return ops


TRANSLATED = translated_ops()


# Accepted cases that fail with a clear error instead of an answer, and why. Anything
# else that fails to run, or any wrong answer, fails the test.
KNOWN = {
}
# Run errors that are a dtype the Caffe2 op (or the .npy reader) does not take.
DTYPE_REFUSALS = ("expected the same dtype", "unsupported dtype", "MaxPool takes")


# Inputs the importer needs as constants (ONNX lets them be runtime tensors; exporters
# write them as initializers or Constant nodes): op type -> input indices. A case that
# feeds one of them as a graph input gets it as an initializer holding the case's value.
CONST_INPUTS = {"Resize": (1, 2, 3), "Upsample": (1,), "Pad": (1, 2, 3)}


def bake_constants(case):
    """The case's model with CONST_INPUTS made initializers, and the remaining inputs'
    data sets; unchanged when the data sets disagree on a value."""
    g = case.model.graph
    names = [v.name for v in g.input if v.name not in {t.name for t in g.initializer}]
    want = {n.input[i] for n in g.node for i in CONST_INPUTS.get(n.op_type, ())
            if i < len(n.input) and n.input[i]}
    bake = [k for k, name in enumerate(names) if name in want]
    sets = case.data_sets or []
    if not bake or any(not np.array_equal(np.asarray(s[0][k]), np.asarray(sets[0][0][k]))
                       for s in sets for k in bake):
        return case.model, sets
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    for k in bake:
        model.graph.initializer.append(
            onnx.numpy_helper.from_array(np.asarray(sets[0][0][k]), names[k]))
    keep = [v for v in model.graph.input if v.name not in {names[k] for k in bake}]
    del model.graph.input[:]
    model.graph.input.extend(keep)
    sets = [([a for k, a in enumerate(ins) if k not in bake], outs) for ins, outs in sets]
    return model, sets


def run_case(exe, work, case, verbose):
    d = os.path.join(work, case.name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    model, data_sets = bake_constants(case)
    onnx.save(model, path)
    g = model.graph
    inits = {t.name for t in g.initializer}
    in_names = [v.name for v in g.input if v.name not in inits]
    out_names = [v.name for v in g.output]
    for k, (inputs, outputs) in enumerate(data_sets):
        cmd = [exe, "run", "--net", path]
        for name, arr in zip(in_names, inputs):
            f = os.path.join(d, f"in{k}_{len(cmd)}.npy")
            np.save(f, np.asarray(arr))
            cmd += ["--input", f"{name}={f}"]
        outs = []
        for name in out_names:
            f = os.path.join(d, f"out{k}_{len(outs)}.npy")
            outs.append(f)
            cmd += ["--output", f"{name}={f}"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            if "cannot be imported" in r.stderr or "the importer reads" in r.stderr:
                return "refused", r.stderr.strip().splitlines()[-1]
            err = [l for l in r.stderr.splitlines() if l.startswith("demitasse:")]
            err = err[-1] if err else r.stderr.strip()[-300:]
            if case.name in KNOWN:
                return "known", KNOWN[case.name]
            if any(t in err for t in DTYPE_REFUSALS):
                return "dtype refused", err
            return "run-error", err
        for f, want in zip(outs, outputs):
            got = np.load(f)
            want = np.asarray(want)
            if got.shape != want.shape:
                return "mismatch", f"shape {got.shape}, expected {want.shape}"
            if not np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-3,
                               atol=1e-5):
                err = np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))
                return "mismatch", f"max |error| {err:.3g}"
    return "pass", ""


# The op types the importer folds when their inputs are constants (net/onnx/fold.c).
FOLDED = {"Shape", "Size", "Gather", "Unsqueeze", "Squeeze", "Concat", "Slice", "Cast",
          "Identity", "Add", "Sub", "Mul", "Div", "Reshape", "ConstantOfShape", "Range",
          "Expand", "Equal", "Where"}


def with_index_inputs_constant(case, every=False):
    """The case with its integer graph inputs (Slice's starts, Squeeze's axes...) made
    initializers holding the values its data sets feed, or None when they differ
    between data sets. The importer takes those lists only as constants, as exporters
    write them; this runs its translation against ONNX's expected outputs anyway.
    every: all inputs made initializers, so that the importer folds the node."""
    import copy
    from onnx import numpy_helper
    g = case.model.graph
    inits = {t.name for t in g.initializer}
    in_names = [v.name for v in g.input if v.name not in inits]
    first = case.data_sets[0][0]
    fixed = {name: np.asarray(arr) for name, arr in zip(in_names, first)
             if every or np.asarray(arr).dtype in (np.int32, np.int64)}
    if not fixed or any(a.dtype == object for a in fixed.values()):
        return None
    for inputs, _ in case.data_sets[1:]:
        for name, arr in zip(in_names, inputs):
            if name in fixed and not np.array_equal(fixed[name], np.asarray(arr)):
                return None
    c = copy.copy(case)
    c.name = case.name + ("_folded" if every else "_const")
    c.model = copy.deepcopy(case.model)
    for name, arr in fixed.items():
        c.model.graph.initializer.append(numpy_helper.from_array(arr, name))
    keep = [v for v in c.model.graph.input if v.name not in fixed]
    del c.model.graph.input[:]
    c.model.graph.input.extend(keep)
    c.data_sets = [([a for n, a in zip(in_names, inputs) if n not in fixed], outputs)
                   for inputs, outputs in case.data_sets]
    return c


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    exe, work = sys.argv[1], sys.argv[2]
    verbose = "-v" in sys.argv[3:]
    counts = {"pass": 0, "refused": 0, "dtype refused": 0, "known": 0, "run-error": 0,
              "mismatch": 0, "other ops": 0, "refused but pass with constant indices": 0,
              "pass folded at import": 0}
    bad = []
    for case in node_cases.collect_testcases(None):
        if case.model is None or not case.data_sets:
            continue
        def variant(c, key):
            """Runs a variant of the case: a pass counts under key, a wrong answer fails."""
            if c is None:
                return
            s2, why2 = run_case(exe, work, c, verbose)
            if s2 == "pass":
                counts[key] += 1
            elif s2 in ("run-error", "mismatch"):
                bad.append(f"{c.name}: {s2}: {why2}")
            if verbose and s2 != "pass":
                print(f"{c.name}: {s2}: {why2}")

        ops = {n.op_type for n in case.model.graph.node}
        if ops <= FOLDED and all(n.domain in ("", "ai.onnx") for n in case.model.graph.node):
            variant(with_index_inputs_constant(case, every=True), "pass folded at import")
        if not all(n.op_type in TRANSLATED and n.domain in ("", "ai.onnx")
                   for n in case.model.graph.node):
            counts["other ops"] += 1
            continue
        status, why = run_case(exe, work, case, verbose)
        counts[status] += 1
        if status == "refused" and "computed in the graph" in why:
            variant(with_index_inputs_constant(case), "refused but pass with constant indices")
        if status in ("run-error", "mismatch"):
            bad.append(f"{case.name}: {status}: {why}")
        if verbose and status != "pass":
            print(f"{case.name}: {status}: {why}")
    print(", ".join(f"{v} {k}" for k, v in counts.items()))
    for b in bad:
        print("FAIL", b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

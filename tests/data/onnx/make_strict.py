#!/usr/bin/env python3
"""make_strict.py: writes the ONNX importer's strictness reproducers into strict/ beside
itself, and a copy of each into fuzz/corpus/onnx/ (the fuzzer's seeds, as strict_*.onnx).

    python3 tests/data/onnx/make_strict.py    (needs the onnx package; output committed)

Each model is a case the importer once crashed on, tripped UBSan on, folded wrong, or
accepted although ONNX Runtime refuses it. MODELS below says what each one is and what
ONNX Runtime makes of it: "refuse" (InferenceSession or run raises), "accept" (it runs;
tests/onnx/strict_ort.py compares its outputs with demitasse's) or None (what ONNX
Runtime does is itself undefined there: an int64 overflow). What demitasse must say for
each is in tests/onnx/strict_cli_test.sh.
"""
import os
import shutil

import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
F, I64 = TensorProto.FLOAT, TensorProto.INT64


def i64(name, vals, dims=None):
    return helper.make_tensor(name, I64, [len(vals)] if dims is None else dims, vals)


def f32(name, vals, dims):
    return helper.make_tensor(name, F, dims, vals)


def vi(name, elem, dims):
    return helper.make_tensor_value_info(name, elem, dims)


def model(nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, "strict", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def x_plus(nodes, inits, value_name, n):
    """The int64 constant `value_name` cast to FLOAT and added to input x of n values:
    a graph whose output a run computes, so ONNX Runtime and demitasse can be compared."""
    nodes = nodes + [helper.make_node("Cast", [value_name], ["vf"], to=F),
                     helper.make_node("Add", ["x", "vf"], ["y"], name="add")]
    return model(nodes, [vi("x", F, [n])], [vi("y", F, [n])], inits)


def cos_no_dtype():
    """ConstantOfShape whose value tensor has no data_type (one int32_data value): the
    translator read 4 bytes of a 1-byte buffer."""
    v = onnx.TensorProto()
    v.dims.append(1)
    v.int32_data.append(7)
    n = helper.make_node("ConstantOfShape", ["shape"], ["c"], name="cos")
    n.attribute.append(helper.make_attribute("value", v))
    add = helper.make_node("Add", ["x", "c"], ["y"], name="add")
    return model([n, add], [vi("x", F, [2, 3])], [vi("y", F, [2, 3])], [i64("shape", [2, 3])])


def nameless_input():
    """A graph input with no name field at all (protobuf-c: NULL): strcmp(NULL) crashed."""
    m = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", F, [2])], [vi("y", F, [2])])
    anon = m.graph.input.add()
    anon.type.CopyFrom(vi("z", F, [2]).type)
    return m


def range_exact():
    """Range(2^60, 2^60 + 3, 1): three values, which a count taken in double lost."""
    s = 1 << 60
    nodes = [helper.make_node("Range", ["s", "l", "d"], ["r"], name="range"),
             helper.make_node("Sub", ["r", "s"], ["v"], name="sub")]
    return x_plus(nodes, [i64("s", [s], []), i64("l", [s + 3], []), i64("d", [1], [])], "v", 3)


def range_overflow():
    """Range(INT64_MIN, INT64_MAX, 2^62): limit - start is past int64 (a fold that
    multiplies 3 * 2^62 overflows a signed 64-bit integer)."""
    nodes = [helper.make_node("Range", ["s", "l", "d"], ["r"], name="range")]
    return x_plus(nodes, [i64("s", [INT64_MIN], []), i64("l", [INT64_MAX], []),
                          i64("d", [1 << 62], [])], "r", 4)


def slice_extreme_steps():
    """Slice with steps INT64_MAX and INT64_MIN: one element each (a fold that computes
    e - b + s - 1 or -s overflows)."""
    data = i64("data", list(range(10)))
    nodes = [helper.make_node("Slice", ["data", "b0", "e0", "ax", "smax"], ["a"], name="up"),
             helper.make_node("Slice", ["data", "b1", "e1", "ax", "smin"], ["b"], name="down"),
             helper.make_node("Concat", ["a", "b"], ["v"], name="cat", axis=0)]
    inits = [data, i64("b0", [0]), i64("e0", [10]), i64("ax", [0]), i64("smax", [INT64_MAX]),
             i64("b1", [9]), i64("e1", [INT64_MIN]), i64("smin", [INT64_MIN])]
    return x_plus(nodes, inits, "v", 2)


def ssa(kind):
    """A node writing a graph input, an initializer, or a name an earlier node wrote."""
    def f():
        nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu1")]
        target = {"input": "x", "init": "w", "twice": "r"}[kind]
        nodes.append(helper.make_node("Relu", ["x"], [target], name="relu2"))
        nodes.append(helper.make_node("Add", ["r", "w"], ["y"], name="add"))
        return model(nodes, [vi("x", F, [2])], [vi("y", F, [2])], [f32("w", [1, 2], [2])])
    f.__doc__ = "SSA: a node writes " + {"input": "graph input x", "init": "initializer w",
                                          "twice": "r, which relu1 wrote"}[kind] + "."
    return f


def no_outputs():
    """A graph with no outputs."""
    return model([helper.make_node("Relu", ["x"], ["r"])], [vi("x", F, [2])], [])


def conv(k=3, **attrs):
    """A Conv on a 1x2x8x8 input with a 2x2xkxk filter, attributes as given."""
    w = f32("w", [0.1] * (4 * k * k), [2, 2, k, k])
    n = helper.make_node("Conv", ["x", "w"], ["y"], name="conv", **attrs)
    return model([n], [vi("x", F, [1, 2, 8, 8])], [vi("y", F, None)], [w])


def pool_huge_pads():
    """MaxPool with pads of 2^20."""
    n = helper.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[3, 3],
                         pads=[1 << 20] * 4)
    return model([n], [vi("x", F, [1, 2, 8, 8])], [vi("y", F, None)])


def transpose_perm00():
    """Transpose with perm [0, 0]."""
    n = helper.make_node("Transpose", ["x"], ["y"], name="tr", perm=[0, 0])
    return model([n], [vi("x", F, [2, 3])], [vi("y", F, None)])


def reduce_axis_oor():
    """ReduceSum over axis 5 of a 4-D input."""
    n = helper.make_node("ReduceMean", ["x"], ["y"], name="mean", axes=[5])
    return model([n], [vi("x", F, [1, 2, 3, 4])], [vi("y", F, None)])


def gather_oob():
    """Gather of constant index 5 along an axis of 3."""
    n = helper.make_node("Gather", ["x", "i"], ["y"], name="gather", axis=0)
    return model([n], [vi("x", F, [3, 4])], [vi("y", F, None)], [i64("i", [5])])


def reshape_huge():
    """Reshape of 6 values to 2^62 x 4."""
    n = helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")
    return model([n], [vi("x", F, [2, 3])], [vi("y", F, None)], [i64("shape", [1 << 62, 4])])


def depthwise_dilated():
    """A dilated depthwise Conv (group 4) before two Resize nodes with constant sizes:
    the Conv is the node that cannot run, and the Resizes are fine."""
    w = f32("w", [0.1] * 36, [4, 1, 3, 3])
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="dwconv", group=4,
                              dilations=[2, 2], pads=[2, 2, 2, 2]),
             helper.make_node("Resize", ["c", "", "", "s1"], ["r"], name="up1"),
             helper.make_node("Resize", ["r", "", "", "s2"], ["y"], name="up2")]
    return model(nodes, [vi("x", F, [1, 4, 8, 8])], [vi("y", F, [1, 4, 32, 32])],
                 [w, i64("s1", [1, 4, 16, 16]), i64("s2", [1, 4, 32, 32])])


def resize_folded_sizes():
    """Resize of a Conv's output (no graph input) with sizes computed as PyTorch writes
    them: Shape -> Slice (N, C) -> Concat with the new H, W; folded at import."""
    w = f32("w", [0.25] * 18, [2, 1, 3, 3])
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Shape", ["c"], ["s"], name="shape"),
             helper.make_node("Slice", ["s", "z", "two"], ["nc"], name="slice"),
             helper.make_node("Concat", ["nc", "hw"], ["sizes"], name="cat", axis=0),
             helper.make_node("Resize", ["c", "", "", "sizes"], ["y"], name="resize",
                              mode="nearest", coordinate_transformation_mode="asymmetric",
                              nearest_mode="floor")]
    return model(nodes, [vi("x", F, [1, 1, 4, 4])], [vi("y", F, [1, 2, 8, 12])],
                 [w, i64("z", [0]), i64("two", [2]), i64("hw", [8, 12])])


def many_refused():
    """1090 nodes no translator knows (a chain of com.example Frob): the refusal list is
    cut at whole lines, with how many more there are."""
    nodes, prev = [], "x"
    for i in range(1090):
        out = "y" if i == 1089 else "t%d" % i
        nodes.append(helper.make_node("Frob", [prev], [out], name="f%d" % i,
                                      domain="com.example"))
        prev = out
    m = model(nodes, [vi("x", F, [2])], [vi("y", F, [2])])
    m.opset_import.append(helper.make_opsetid("com.example", 1))
    return m


# name -> (builder, what ONNX Runtime does with it)
MODELS = {
    "cos_no_dtype": (cos_no_dtype, "refuse"),
    "nameless_input": (nameless_input, "refuse"),
    "range_exact": (range_exact, "accept"),
    "range_overflow": (range_overflow, None),
    "slice_extreme_steps": (slice_extreme_steps, "accept"),
    "ssa_input": (ssa("input"), "refuse"),
    "ssa_init": (ssa("init"), "refuse"),
    "ssa_twice": (ssa("twice"), "refuse"),
    "no_outputs": (no_outputs, "refuse"),
    "conv_stride0": (lambda: conv(strides=[0, 0]), "refuse"),
    "conv_kernel0": (lambda: conv(k=0, kernel_shape=[0, 0]), "refuse"),
    "pool_huge_pads": (pool_huge_pads, "refuse"),
    "transpose_perm00": (transpose_perm00, "refuse"),
    "reduce_axis_oor": (reduce_axis_oor, "refuse"),
    "gather_oob": (gather_oob, "refuse"),
    "reshape_huge": (reshape_huge, "refuse"),
    "depthwise_dilated": (depthwise_dilated, None),  # ONNX Runtime runs it; we cannot
    "resize_folded_sizes": (resize_folded_sizes, "accept"),
    "many_refused": (many_refused, "refuse"),
}


def main():
    out = os.path.join(HERE, "strict")
    fuzz = os.path.join(HERE, "..", "..", "..", "fuzz", "corpus", "onnx")
    os.makedirs(out, exist_ok=True)
    for name, (build, _) in MODELS.items():
        path = os.path.join(out, name + ".onnx")
        with open(path, "wb") as f:
            f.write(build().SerializeToString())
        shutil.copyfile(path, os.path.join(fuzz, "strict_" + name + ".onnx"))
    print("make_strict: %d models in %s and %s" % (len(MODELS), out, os.path.normpath(fuzz)))


if __name__ == "__main__":
    main()

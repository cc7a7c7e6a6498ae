#!/usr/bin/env python3
"""make_tiny.py: writes tiny.onnx and tiny_input.npy beside itself, the small ONNX model
docs/onnx.md imports and runs (data 1x3x8x8 -> Conv 3x3 pads 1 -> Relu ->
GlobalAveragePool -> Flatten -> Gemm (transB) -> Softmax -> prob 1x4), with seeded
random weights. Needs numpy and the onnx package (PyPI); run once, output committed."""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

here = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(0)
w = numpy_helper.from_array(rng.standard_normal((6, 3, 3, 3)).astype(np.float32) * 0.3, "conv_w")
b = numpy_helper.from_array(rng.standard_normal(6).astype(np.float32) * 0.1, "conv_b")
fw = numpy_helper.from_array(rng.standard_normal((4, 6)).astype(np.float32), "fc_w")
fb = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32) * 0.1, "fc_b")
nodes = [
    helper.make_node("Conv", ["data", "conv_w", "conv_b"], ["conv"], name="conv",
                     kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["conv"], ["relu"], name="relu"),
    helper.make_node("GlobalAveragePool", ["relu"], ["pool"], name="pool"),
    helper.make_node("Flatten", ["pool"], ["flat"], name="flat", axis=1),
    helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["fc"], name="fc", transB=1),
    helper.make_node("Softmax", ["fc"], ["prob"], name="softmax", axis=-1),
]
graph = helper.make_graph(
    nodes, "tiny", [helper.make_tensor_value_info("data", TensorProto.FLOAT, [1, 3, 8, 8])],
    [helper.make_tensor_value_info("prob", TensorProto.FLOAT, [1, 4])], [w, b, fw, fb])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                          producer_name="demitasse make_tiny.py")
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, os.path.join(here, "tiny.onnx"))
np.save(os.path.join(here, "tiny_input.npy"),
        rng.standard_normal((1, 3, 8, 8)).astype(np.float32))

#!/usr/bin/python3
"""make_example.py: writes the tiny example MLP shipped in models/example.

A 2-layer perceptron, 4 inputs -> 8 hidden (Relu) -> 3 classes (Softmax), with fixed
pseudo-random weights rounded to 3 decimals so the .pbtxt files stay readable. Also
writes input.npy (one sample, shape (1, 4)) and expected_prob.npy, the forward pass
computed here in float64 by NumPy, which the CLI test compares `demitasse run` against.
Rerun after changing anything: /usr/bin/python3 make_example.py
"""
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(20240601)
w1 = np.round(rng.standard_normal((8, 4)) * 0.5, 3)   # (hidden, in)
b1 = np.full(8, 0.1)                                   # ConstantFill value 0.1
w2 = np.round(rng.standard_normal((3, 8)) * 0.5, 3)   # (classes, hidden)
b2 = np.array([0.0, 0.1, -0.1])
x = np.array([[0.5, -1.0, 2.0, 0.25]], dtype=np.float32)  # (batch, in)


def floats(v):
    return " ".join(f"floats: {float(f):g}" for f in np.asarray(v).ravel())


def given(name, arr):
    dims = " ".join(f"ints: {d}" for d in arr.shape)
    return (f'op {{\n  output: "{name}"\n  name: "{name}"\n  type: "GivenTensorFill"\n'
            f'  arg {{\n    name: "shape"\n    {dims}\n  }}\n'
            f'  arg {{\n    name: "values"\n    {floats(arr)}\n  }}\n}}\n')


init = ('# init_net.pbtxt: the weights of the example MLP (written by make_example.py).\n'
        'name: "mlp_example_init"\n'
        + given("fc1_w", w1)
        + 'op {\n  output: "fc1_b"\n  name: "fc1_b"\n  type: "ConstantFill"\n'
          '  arg {\n    name: "shape"\n    ints: 8\n  }\n'
          '  arg {\n    name: "value"\n    f: 0.1\n  }\n}\n'
        + given("fc2_w", w2) + given("fc2_b", b2))

predict = '''# predict_net.pbtxt: the example MLP, data (N, 4) -> prob (N, 3) (written by make_example.py).
name: "mlp_example"
op {
  input: "data"
  input: "fc1_w"
  input: "fc1_b"
  output: "fc1"
  name: "fc1"
  type: "FC"
}
op {
  input: "fc1"
  output: "fc1"
  name: "relu1"
  type: "Relu"
}
op {
  input: "fc1"
  input: "fc2_w"
  input: "fc2_b"
  output: "fc2"
  name: "fc2"
  type: "FC"
}
op {
  input: "fc2"
  output: "prob"
  name: "softmax"
  type: "Softmax"
}
external_input: "data"
external_input: "fc1_w"
external_input: "fc1_b"
external_input: "fc2_w"
external_input: "fc2_b"
external_output: "prob"
'''

# float32 weights as the net will hold them, then the forward pass in float64
h = np.maximum(x.astype(np.float64) @ w1.astype(np.float32).astype(np.float64).T
               + b1.astype(np.float32), 0)
z = h @ w2.astype(np.float32).astype(np.float64).T + b2.astype(np.float32)
p = np.exp(z - z.max(axis=1, keepdims=True))
p /= p.sum(axis=1, keepdims=True)

with open(os.path.join(HERE, "init_net.pbtxt"), "w") as f:
    f.write(init)
with open(os.path.join(HERE, "predict_net.pbtxt"), "w") as f:
    f.write(predict)
np.save(os.path.join(HERE, "input.npy"), x)
np.save(os.path.join(HERE, "expected_prob.npy"), p.astype(np.float32))
print("prob =", p)

"""test_readme.py: the README's Python example (the python block after the marker
naming this file) runs as written, and its loss and gradient are NumPy's."""
import contextlib
import io
import os

import numpy as np

from demitasse import workspace

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")
MARKER = "<!-- python/tests/test_readme.py runs this example -->"


def readme_example():
    text = open(README, encoding="utf-8").read()
    assert MARKER in text, "README.md lost the example's marker"
    block = text.split(MARKER, 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    assert 8 <= len(block.strip().splitlines()) <= 14
    return block


def test_readme_example_runs():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(readme_example(), "README.md", "exec"), {})
    assert out.getvalue().strip()
    x, w = workspace.FetchBlob("x").astype(np.float64), workspace.FetchBlob("w")
    y = x @ w.T.astype(np.float64)
    r = np.maximum(y, 0)
    np.testing.assert_allclose(workspace.FetchBlob("loss"), r.mean(), rtol=1e-5)
    # d loss / d y = (y > 0) / numel; d loss / d w = that^T x.
    dy = (y > 0) / y.size
    np.testing.assert_allclose(workspace.FetchBlob("w_grad"), dy.T @ x, rtol=1e-5, atol=1e-7)

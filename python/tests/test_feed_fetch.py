"""test_feed_fetch.py: FeedBlob/FetchBlob round trips for every dtype the C API has, and
the no-copy fetch: shared memory, read-only, and an array that outlives its blob's next
write and its workspace."""
import gc

import numpy as np
import pytest

from demitasse import core, workspace

NUMERIC = [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64,
           np.uint8, np.uint16, np.bool_]


@pytest.mark.parametrize("dtype", NUMERIC, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(), (0,), (5,), (2, 3, 4), (1,) * 8])
def test_round_trip(dtype, shape):
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(shape) * 100).astype(dtype)
    workspace.FeedBlob("x", x)
    y = workspace.FetchBlob("x")
    assert y.dtype == np.dtype(dtype) and y.shape == x.shape
    np.testing.assert_array_equal(y, x)


def test_inputs_numpy_takes():
    """Python lists and scalars, non-contiguous and byte-swapped arrays are converted."""
    workspace.FeedBlob("l", [[1.5, 2.5], [3.5, 4.5]])
    assert workspace.FetchBlob("l").dtype == np.float64
    workspace.FeedBlob("s", 3)
    assert workspace.FetchBlob("s").shape == () and workspace.FetchBlob("s") == 3
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    workspace.FeedBlob("t", x.T)
    np.testing.assert_array_equal(workspace.FetchBlob("t"), x.T)
    workspace.FeedBlob("be", x.astype(">f4"))
    np.testing.assert_array_equal(workspace.FetchBlob("be"), x)
    assert workspace.FetchBlob("be").dtype == np.float32


@pytest.mark.parametrize("value", [
    np.array([b"ab", b"", b"c" * 1000], dtype=object),
    np.array([["x", "y"], ["zz", "\u00e9"]]),
    np.array([b"one", b"two"]),
    b"scalar bytes",
    "scalar str",
])
def test_strings(value):
    workspace.FeedBlob("s", value)
    got = workspace.FetchBlob("s")
    want = np.asarray(value, dtype=object)
    assert got.dtype == object and got.shape == want.shape
    for g, w in zip(got.ravel(), want.ravel()):
        assert g == (w if isinstance(w, bytes) else w.encode("utf-8"))


def test_bfloat16_fetched_as_float32():
    x = np.array([1.0, -2.5, 3.140625, 65280.0], np.float32)  # exact in BFLOAT16
    workspace.FeedBlob("x", x)
    workspace.RunOperatorOnce(core.CreateOperator("Cast", ["x"], ["y"], to=20))
    y = workspace.FetchBlob("y")
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, x)


def test_fetch_shares_memory_read_only():
    workspace.FeedBlob("x", np.arange(1000, dtype=np.float32))
    a, b = workspace.FetchBlob("x"), workspace.FetchBlob("x")
    assert a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
    assert not a.flags.writeable
    with pytest.raises(ValueError):
        a[0] = 5


def test_fetched_array_outlives_writes_and_workspace():
    x = np.arange(6, dtype=np.float32)
    workspace.FeedBlob("x", x)
    workspace.RunOperatorOnce(core.CreateOperator("Scale", ["x"], ["y"], scale=2.0))
    fed, ran = workspace.FetchBlob("x"), workspace.FetchBlob("y")
    # Writing the blobs again (a feed of the same size, a run) leaves the arrays alone.
    workspace.FeedBlob("x", x + 100)
    workspace.RunOperatorOnce(core.CreateOperator("Scale", ["x"], ["y"], scale=3.0))
    np.testing.assert_array_equal(fed, x)
    np.testing.assert_array_equal(ran, 2 * x)
    np.testing.assert_array_equal(workspace.FetchBlob("y"), 3 * (x + 100))
    # The workspace goes; the arrays (and a view of one) keep their data.
    view = ran[2:]
    del fed
    workspace.ResetWorkspace()
    gc.collect()
    assert not workspace.HasBlob("y")
    np.testing.assert_array_equal(ran, 2 * x)
    np.testing.assert_array_equal(view, 2 * x[2:])
    del ran
    gc.collect()
    np.testing.assert_array_equal(view, 2 * x[2:])  # the view alone keeps the data

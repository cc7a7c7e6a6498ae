"""test_errors.py: every way a caller can get an argument wrong ends in a Python exception
(TypeError/ValueError for the Python side, DemitasseError with the library's message,
naming net, op and blob, for the library's refusals), never a crash."""
import numpy as np
import pytest

from demitasse import DemitasseError, core, workspace
from demitasse.proto import caffe2_pb2


def expect_error(status, *words):
    """A context that wants DemitasseError with `status` and every word in its message."""
    class Check(object):
        def __enter__(self):
            self.ctx = pytest.raises(DemitasseError)
            self.info = self.ctx.__enter__()
            return self.info

        def __exit__(self, *exc):
            r = self.ctx.__exit__(*exc)
            e = self.info.value
            assert e.status == status, (e.status, str(e))
            for w in words:
                assert w in str(e), (w, str(e))
            return r
    return Check()


def test_demitasse_error_is_runtime_error():
    assert issubclass(DemitasseError, RuntimeError)


def test_fetch_missing_blob():
    with expect_error("DM_ERR_NOT_FOUND", "'nope'"):
        workspace.FetchBlob("nope")


@pytest.mark.parametrize("name,exc", [(None, TypeError), (3, TypeError), ("", ValueError),
                                      ("a\0b", ValueError), (b"\xff", UnicodeDecodeError)])
def test_bad_blob_names(name, exc):
    with pytest.raises(exc):
        workspace.FeedBlob(name, np.zeros(1, np.float32))
    with pytest.raises(exc):
        workspace.FetchBlob(name)
    with pytest.raises(exc):
        workspace.HasBlob(name)


@pytest.mark.parametrize("value,exc", [
    (np.zeros(2, np.complex64), TypeError),
    (np.zeros(2, np.uint32), TypeError),
    (np.zeros((1,) * 9, np.float32), ValueError),
    (np.array([b"a\0b"], dtype=object), ValueError),
    (np.array([b"a", 3], dtype=object), TypeError),
    (object(), TypeError),
])
def test_bad_feeds(value, exc):
    with pytest.raises(exc):
        workspace.FeedBlob("x", value)
    assert not workspace.HasBlob("x")  # a refused feed leaves no blob


def test_feed_on_a_gpu_is_refused():
    with expect_error("DM_ERR_UNSUPPORTED", "CPU"):
        workspace.FeedBlob("x", np.zeros(1), core.DeviceOption(caffe2_pb2.CUDA, 0))
    with pytest.raises(TypeError):
        workspace.FeedBlob("x", np.zeros(1), device_option="cpu")


def test_run_error_names_net_op_and_blob():
    net = core.Net("mlp")
    net.FC(["x", "w", "b"], "y", name="fc1")
    workspace.FeedBlob("x", np.zeros((2, 3), np.float32))
    with expect_error("DM_ERR_NOT_FOUND", "mlp", "FC", "fc1", "'w'"):
        workspace.RunNetOnce(net)


def test_shape_error():
    workspace.FeedBlob("x", np.zeros((2, 3), np.float32))
    workspace.FeedBlob("w", np.zeros((4, 5), np.float32))
    workspace.FeedBlob("b", np.zeros(4, np.float32))
    with pytest.raises(DemitasseError) as e:
        workspace.RunOperatorOnce(core.CreateOperator("FC", ["x", "w", "b"], ["y"]))
    assert "FC" in str(e.value) and e.value.status == "DM_ERR_SHAPE"


def test_unknown_op_type():
    with expect_error("DM_ERR_NOT_FOUND", "NoSuchOp"):
        workspace.RunOperatorOnce(core.CreateOperator("NoSuchOp", [], ["y"]))
    with pytest.raises(AttributeError, match="NoSuchOp"):
        core.Net("n").NoSuchOp([], "y")


def test_bad_nets():
    with pytest.raises(TypeError):
        workspace.RunNetOnce("not a net")
    with pytest.raises(TypeError):
        workspace.RunOperatorOnce(caffe2_pb2.NetDef())
    with pytest.raises(DemitasseError) as e:
        workspace.RunNetOnce(b"\xff\xff\xff")
    assert e.value.status == "DM_ERR_PARSE"
    assert workspace.RunNetOnce(caffe2_pb2.NetDef())  # empty: nothing to run


def test_nets_by_name():
    net = core.Net("n")
    net.ConstantFill([], "c", shape=[2], value=1.0)
    workspace.CreateNet(net)
    with expect_error("DM_ERR_EXISTS", "'n'"):
        workspace.CreateNet(net)
    assert workspace.CreateNet(net, overwrite=True)
    with expect_error("DM_ERR_NOT_FOUND", "'other'"):
        workspace.RunNet("other")
    with pytest.raises(ValueError):
        workspace.RunNet("n", num_iter=-1)
    with pytest.raises(TypeError):
        workspace.RunNet("n", num_iter="3")


def test_allow_fail():
    net = core.Net("bad")
    net.Relu("missing", "y")
    workspace.CreateNet(net)
    assert workspace.RunNet("bad", allow_fail=True) is False
    with expect_error("DM_ERR_NOT_FOUND", "bad", "Relu", "'missing'"):
        workspace.RunNet(net)  # by its core.Net too
    workspace.ResetWorkspace()  # nets go with the workspace
    with expect_error("DM_ERR_NOT_FOUND", "'bad'"):
        workspace.RunNet("bad")


def test_fetch_of_a_blob_no_op_wrote():
    net = core.Net("n")
    net.Relu("x", "y")
    workspace.CreateNet(net)  # instantiating creates x and y, empty
    with expect_error("DM_ERR_INVALID", "'y'"):
        workspace.FetchBlob("y")


def test_workspaces():
    with expect_error("DM_ERR_NOT_FOUND", "'elsewhere'"):
        workspace.SwitchWorkspace("elsewhere")
    with pytest.raises(TypeError):
        workspace.SwitchWorkspace(None, True)
    with expect_error("DM_ERR_UNSUPPORTED"):
        workspace.ResetWorkspace("/tmp")


def test_bad_operator_arguments():
    with pytest.raises(TypeError):
        core.CreateOperator("Relu", ["x"], ["y"], bad=object())
    with pytest.raises(TypeError):
        core.CreateOperator("Relu", ["x"], ["y"], bad=[1, "a"])
    with pytest.raises(TypeError):
        core.CreateOperator("Relu", [3], ["y"])
    with pytest.raises(TypeError):
        core.CreateOperator(None, ["x"], ["y"])
    with pytest.raises(TypeError):
        core.CreateOperator("Relu", ["x"], ["y"], device_option=1)
    with pytest.raises(TypeError):
        core.Net(None)
    with pytest.raises(ValueError):
        core.Net("n").Split("x", -1)


def test_argument_the_op_refuses():
    workspace.FeedBlob("x", np.zeros(2, np.float32))
    with pytest.raises(DemitasseError) as e:
        workspace.RunOperatorOnce(core.CreateOperator("Scale", ["x"], ["y"], scale="two"))
    assert "scale" in str(e.value)


def test_gradient_errors():
    net = core.Net("n")
    net.Relu("x", "y")
    with pytest.raises(DemitasseError):
        net.AddGradientOperators(["nobody_writes_this"])
    with pytest.raises(DemitasseError):
        net.AddGradientOperators([])
    with pytest.raises(NotImplementedError):
        net.AddGradientOperators(["y"], skip=1)

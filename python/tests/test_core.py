"""test_core.py: demitasse.core as Caffe2's: CreateOperator's argument typing, Net's op
methods and output naming, BlobReference, NameScope, DeviceOption; a net built with
core.Net, run and differentiated (AddGradientOperators), checked against NumPy's
gradients in double precision; and the caffe2 import alias."""
import sys

import numpy as np
import pytest

from demitasse import core, workspace
from demitasse.proto import caffe2_pb2


def arg(op, name):
    return next(a for a in op.arg if a.name == name)


def test_argument_typing():
    net = caffe2_pb2.NetDef()
    net.name = "inner"
    op = core.CreateOperator("Foo", ["a", core.BlobReference("b")], "c", name="n",
                             engine="REFERENCE", i=3, t=True, f=0.5, s="str", by=b"\x01",
                             ints=[1, 2], floats=[1.0, 2], strs=["a", b"b"],
                             arr=np.array([[1, 2]], np.int64), npf=np.float32(2.5), n=net,
                             skipped=None)
    assert list(op.input) == ["a", "b"] and list(op.output) == ["c"]
    assert op.type == "Foo" and op.name == "n" and op.engine == "REFERENCE"
    assert arg(op, "i").i == 3 and arg(op, "t").i == 1 and arg(op, "f").f == 0.5
    assert arg(op, "s").s == b"str" and arg(op, "by").s == b"\x01"
    assert list(arg(op, "ints").ints) == [1, 2]
    assert list(arg(op, "floats").floats) == [1.0, 2.0]
    assert list(arg(op, "strs").strings) == [b"a", b"b"]
    assert list(arg(op, "arr").ints) == [1, 2] and arg(op, "npf").f == 2.5
    assert arg(op, "n").n.name == "inner"
    assert all(a.name != "skipped" for a in op.arg)
    d = core.DeviceOption(caffe2_pb2.CUDA, 1, random_seed=5)
    op = core.CreateOperator("Relu", "x", "y", device_option=d)
    assert op.device_option.device_type == 1 and op.device_option.device_id == 1
    assert op.device_option.random_seed == 5


def test_net_methods_and_names():
    net = core.Net("n")
    y = net.Relu("x", "y")
    assert isinstance(y, core.BlobReference) and str(y) == "y" and y == "y"
    assert y.Net() is net
    auto = net.Relu(y)  # no outputs: one, named after the net and the op type
    assert str(auto) == "n/Relu"
    assert str(net.Relu(y)) == "n/Relu_2"
    a, b = net.Split(auto, 2, axis=0)
    assert (str(a), str(b)) == ("n/Split:0", "n/Split:1")
    z = y.Relu([], "z")  # blob.Op(...): the blob is the first input
    assert [o.type for o in net.Proto().op] == ["Relu"] * 3 + ["Split", "Relu"]
    assert list(net.Proto().op[-1].input) == ["y"] and str(z) == "z"
    assert net.BlobIsDefined("z") and not net.BlobIsDefined("x")
    x = net.AddExternalInput("x")
    assert net.BlobIsDefined(x) and list(net.Proto().external_input) == ["x"]
    net.AddExternalOutput(z)
    assert [str(o) for o in net.external_outputs] == ["z"]
    assert core.Net(net.Proto()).Proto() == net.Proto()
    assert net.Clone("m").Name() == "m" and net.Name() == "n"
    assert str(net.NextBlob("tmp")) == "n/tmp"


def test_name_scope():
    net = core.Net("n")
    with core.NameScope("a"):
        with core.NameScope("b"):
            assert core.ScopedName("x") == "a/b/x"
            y = net.Relu("x", "y")
            assert str(y) == "a/b/y" and list(net.Proto().op[0].input) == ["a/b/x"]
            # A BlobReference is not scoped again.
            assert list(net.Relu(core.BlobReference("w"), "v").Net().Proto().op[1].input) == ["w"]
        with core.NameScope("c", reset=True):
            assert core.ScopedName("x") == "c/x"
        assert core.CurrentNameScope() == "a/"
    assert core.CurrentNameScope() == ""
    assert y.GetNameScope() == "a/b/" and y.GetUnscopedName() == "y"


def test_device_scope():
    d = core.DeviceOption(caffe2_pb2.CPU)
    with core.DeviceScope(d):
        op = core.CreateOperator("Relu", "x", "y")
    assert op.HasField("device_option")
    assert not core.CreateOperator("Relu", "x", "y").HasField("device_option")


def softmax_mlp():
    """x (N, 4) -> FC(w1, b1) -> Sigmoid -> FC(w2, b2) -> SoftmaxWithLoss(label)."""
    rng = np.random.default_rng(3)
    params = {"x": rng.standard_normal((5, 4)), "w1": rng.standard_normal((6, 4)) * 0.5,
              "b1": rng.standard_normal(6) * 0.1, "w2": rng.standard_normal((3, 6)) * 0.5,
              "b2": rng.standard_normal(3) * 0.1}
    label = np.array([0, 2, 1, 1, 0], np.int32)
    net = core.Net("mlp")
    h = net.FC(["x", "w1", "b1"], "h")
    s = net.Sigmoid(h, "s")
    logits = net.FC([s, "w2", "b2"], "logits")
    prob, loss = net.SoftmaxWithLoss([logits, "label"], ["prob", "loss"])
    return net, params, label, loss


def numpy_reference(p, label):
    """Forward and backward in double precision, written out by hand."""
    h = p["x"] @ p["w1"].T + p["b1"]
    s = 1 / (1 + np.exp(-h))
    logits = s @ p["w2"].T + p["b2"]
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    prob = e / e.sum(axis=1, keepdims=True)
    n = len(label)
    loss = -np.log(prob[np.arange(n), label]).mean()
    dlogits = prob.copy()
    dlogits[np.arange(n), label] -= 1
    dlogits /= n
    ds = dlogits @ p["w2"]
    dh = ds * s * (1 - s)
    grads = {"w2": dlogits.T @ s, "b2": dlogits.sum(0), "w1": dh.T @ p["x"],
             "b1": dh.sum(0), "x": dh @ p["w1"]}
    return prob, loss, grads


def test_net_run_and_differentiated_against_numpy():
    net, params, label, loss = softmax_mlp()
    grad_map = net.AddGradientOperators([loss])
    for k in ("w1", "b1", "w2", "b2", "x"):
        assert str(grad_map[k]) == k + "_grad"
    assert any(op.type == "ConstantFill" and list(op.output) == ["loss_autogen_grad"]
               for op in net.Proto().op)
    for k, v in params.items():
        workspace.FeedBlob(k, v.astype(np.float32))
    workspace.FeedBlob("label", label)
    workspace.CreateNet(net)
    workspace.RunNet(net.Name())
    prob, want_loss, want = numpy_reference(params, label)
    # FP32 compute against a double reference: a few FP32 ulps of the values' size.
    np.testing.assert_allclose(workspace.FetchBlob("prob"), prob, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(workspace.FetchBlob("loss"), want_loss, rtol=1e-5)
    for k, g in want.items():
        np.testing.assert_allclose(workspace.FetchBlob(str(grad_map[k])), g, rtol=1e-4,
                                   atol=1e-6, err_msg=k)


def test_get_backward_pass():
    net, _, _, loss = softmax_mlp()
    ops, grads = core.GradientRegistry.GetBackwardPass(list(net.Proto().op), [str(loss)])
    assert ops and all(isinstance(o, caffe2_pb2.OperatorDef) for o in ops)
    assert str(grads["w1"]) == "w1_grad"


def test_run_operator_once_and_nets_by_object():
    workspace.FeedBlob("x", np.array([-1.0, 2.0], np.float32))
    assert workspace.RunOperatorOnce(core.CreateOperator("Relu", ["x"], ["y"]))
    np.testing.assert_array_equal(workspace.FetchBlob("y"), [0, 2])
    net = core.Net("twice")
    net.Scale("x", "x", scale=2.0)  # in place: each run doubles x
    workspace.CreateNet(net.Proto())
    workspace.RunNet(net.Proto(), num_iter=3)
    np.testing.assert_array_equal(workspace.FetchBlob("x"), [-8, 16])
    assert workspace.Nets() == ["twice"]


def test_workspace_switching():
    workspace.FeedBlob("a", np.ones(1))
    workspace.SwitchWorkspace("other", True)
    assert workspace.CurrentWorkspace() == "other" and not workspace.HasBlob("a")
    workspace.FeedBlob("b", np.ones(1))
    workspace.SwitchWorkspace("default")
    assert workspace.Blobs() == ["a"] and "other" in workspace.Workspaces()


def test_caffe2_alias():
    import demitasse
    saved = {k: v for k, v in sys.modules.items() if k == "caffe2" or k.startswith("caffe2.")}
    if saved and not getattr(saved.get("caffe2"), "__demitasse_alias__", False):
        pytest.skip("a real caffe2 is imported")
    demitasse.install_caffe2_alias()
    from caffe2.python import core as c2core, workspace as c2ws
    from caffe2.proto import caffe2_pb2 as c2pb
    assert c2core is core and c2ws is workspace and c2pb is caffe2_pb2
    import caffe2.python.workspace
    assert caffe2.python.workspace is workspace

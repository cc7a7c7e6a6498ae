"""demitasse.workspace: Caffe2's workspace API (FeedBlob, FetchBlob, RunNetOnce, ...).

As in Caffe2 there is one current workspace per process, "default" at first, and
SwitchWorkspace changes it; the named workspaces live until the process ends or
ResetWorkspace empties one. Nets are Caffe2 NetDef messages (demitasse.proto.caffe2_pb2,
or a core.Net), handed to the C library serialized. Failures in the library raise
DemitasseError (a RuntimeError) with its message: net, op index, type and name, blob.

FetchBlob shares the blob's memory (no copy) where NumPy has the dtype: the array is
read-only, and keeps the data alive by itself, after the blob is written again (a run or
a feed gives the blob new memory then, so the array keeps its values) and after the
workspace is reset. STRING blobs come back as object arrays of bytes, BFLOAT16 as
float32 copies.
"""
import threading

from demitasse import _C
from demitasse._C import DemitasseError
from demitasse.proto import caffe2_pb2

__all__ = ["FeedBlob", "FetchBlob", "FetchBlobs", "HasBlob", "Blobs", "RunOperatorOnce",
           "RunOperatorsOnce", "RunNetOnce", "CreateNet", "RunNet", "ResetWorkspace",
           "SwitchWorkspace", "CurrentWorkspace", "Workspaces", "Workspace",
           "DemitasseError"]


class Workspace(object):
    """One workspace: a _C.Workspace and the nets created in it, by name."""

    def __init__(self):
        self._c = _C.Workspace()
        self._nets = {}

    def FeedBlob(self, name, arr, device_option=None):
        _check_device(device_option)
        self._c.feed(name, arr)
        return True

    def FetchBlob(self, name):
        return self._c.fetch(name)

    def HasBlob(self, name):
        return self._c.has_blob(name)

    def Blobs(self):
        return self._c.blobs()

    def RunOperatorOnce(self, op):
        self._c.run_net_once(_net_bytes_of_ops([op]))
        return True

    def RunNetOnce(self, net):
        data = _net_bytes(net)
        if data:  # an empty NetDef (no name, no op) has nothing to run
            self._c.run_net_once(data)
        return True

    def CreateNet(self, net, overwrite=False, input_blobs=None):
        # input_blobs (Caffe2 creates them empty first) is accepted and needs nothing
        # here: instantiating a net creates every blob it names.
        name = _net_name(net)
        if name in self._nets and not overwrite:
            raise _error("DM_ERR_EXISTS", "a net named '%s' exists in the workspace; pass "
                         "overwrite=True to replace it" % name)
        self._nets[name] = self._c.create_net(_net_bytes(net))
        return True

    def RunNet(self, name, num_iter=1, allow_fail=False):
        if not isinstance(num_iter, int) or isinstance(num_iter, bool):
            raise TypeError("num_iter must be an int, not %s" % type(num_iter).__name__)
        key = name if isinstance(name, str) else _net_name(name)
        net = self._nets.get(key)
        if net is None:
            raise _error("DM_ERR_NOT_FOUND", "no net named '%s' in the workspace (CreateNet "
                         "first; nets: %s)" % (key, sorted(self._nets)))
        try:
            net.run(num_iter)
        except DemitasseError:
            if allow_fail:
                return False
            raise
        return True

    def Nets(self):
        return sorted(self._nets)


_lock = threading.Lock()
_workspaces = {"default": Workspace()}
_current = "default"


def _ws():
    return _workspaces[_current]


def _error(status, message):
    e = DemitasseError(message)
    e.status = status
    return e


def _check_device(device_option):
    if device_option is None:
        return
    if not isinstance(device_option, caffe2_pb2.DeviceOption):
        raise TypeError("device_option must be a caffe2_pb2.DeviceOption, not %s"
                        % type(device_option).__name__)
    if device_option.device_type != caffe2_pb2.CPU:
        raise _error("DM_ERR_UNSUPPORTED", "FeedBlob on device type %d: the Python package "
                     "feeds the CPU only (a net's CopyCPUToGPU moves a blob)"
                     % device_option.device_type)


def _is_message(obj, full_name):
    d = getattr(obj, "DESCRIPTOR", None)
    return d is not None and getattr(d, "full_name", None) == full_name


def _net_proto(net):
    if hasattr(net, "Proto") and callable(net.Proto):  # core.Net
        net = net.Proto()
    if not _is_message(net, "caffe2.NetDef"):
        raise TypeError("expected a caffe2_pb2.NetDef or a core.Net, not %s"
                        % type(net).__name__)
    return net


def _net_bytes(net):
    if isinstance(net, (bytes, bytearray)):
        return bytes(net)
    return _net_proto(net).SerializeToString()


def _net_name(net):
    if isinstance(net, str):
        return net
    return _net_proto(net).name


def _net_bytes_of_ops(ops):
    n = caffe2_pb2.NetDef()
    for op in ops:
        if not _is_message(op, "caffe2.OperatorDef"):
            raise TypeError("expected a caffe2_pb2.OperatorDef, not %s" % type(op).__name__)
        n.op.add().CopyFrom(op)
    n.name = "%s (run once)" % (ops[0].type if len(ops) == 1 else "operators")
    return n.SerializeToString()


# The Caffe2 module functions, on the current workspace.

def FeedBlob(name, arr, device_option=None):
    """Copies `arr` (anything numpy.asarray takes) into blob `name`; True."""
    return _ws().FeedBlob(name, arr, device_option)


def FetchBlob(name):
    """The blob as a NumPy array (read-only, no copy where the dtype allows)."""
    return _ws().FetchBlob(name)


def FetchBlobs(names):
    return [FetchBlob(n) for n in names]


def HasBlob(name):
    return _ws().HasBlob(name)


def Blobs():
    """The current workspace's blob names, sorted."""
    return _ws().Blobs()


def RunOperatorOnce(operator):
    return _ws().RunOperatorOnce(operator)


def RunOperatorsOnce(operators):
    for op in operators:
        RunOperatorOnce(op)
    return True


def RunNetOnce(net):
    return _ws().RunNetOnce(net)


def CreateNet(net, overwrite=False, input_blobs=None):
    return _ws().CreateNet(net, overwrite, input_blobs)


def RunNet(name, num_iter=1, allow_fail=False):
    return _ws().RunNet(name, num_iter, allow_fail)


def Nets():
    return _ws().Nets()


def ResetWorkspace(root_folder=None):
    """Empties the current workspace (blobs and nets). Arrays fetched from it stay valid.
    root_folder (Caffe2's folder for relative paths) is not supported."""
    if root_folder is not None:
        raise _error("DM_ERR_UNSUPPORTED", "ResetWorkspace(root_folder=...): Demitasse "
                     "workspaces have no root folder")
    with _lock:
        _workspaces[_current] = Workspace()
    return True


def SwitchWorkspace(name, create_if_missing=False):
    """Makes workspace `name` current; creates it when create_if_missing."""
    global _current
    if not isinstance(name, str) or not name:
        raise TypeError("a workspace name must be a non-empty str, not %r" % (name,))
    with _lock:
        if name not in _workspaces:
            if not create_if_missing:
                raise _error("DM_ERR_NOT_FOUND", "no workspace named '%s' (pass "
                             "create_if_missing=True to create it)" % name)
            _workspaces[name] = Workspace()
        _current = name


def CurrentWorkspace():
    return _current


def Workspaces():
    return sorted(_workspaces)

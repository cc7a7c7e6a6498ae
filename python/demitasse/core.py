"""demitasse.core: Caffe2's core API for building nets in Python: CreateOperator, Net
(ops as methods), BlobReference, DeviceOption, NameScope/ScopedName, and the gradient
(Net.AddGradientOperators, GradientRegistry.GetBackwardPass) from Demitasse's own
gradient pass, the one `demitasse train` runs (through the C API's
dm_netdef_add_gradient): the gradient of X is X_grad, each loss is seeded with 1.

Arguments follow Caffe2's typing: int and bool -> i, float -> f, str and bytes -> s, a
NetDef -> n, lists (and NumPy arrays) of those -> ints, floats, strings, nets (a list
of ints and floats together -> floats; an empty list -> ints).
"""
import contextlib
import numbers
import threading

import numpy as np

from demitasse import _C
from demitasse.proto import caffe2_pb2

__all__ = ["BlobReference", "ScopedBlobReference", "ScopedName", "NameScope",
           "CurrentNameScope", "DeviceOption", "DeviceScope", "CreateOperator",
           "MakeArgument", "Net", "GradientRegistry", "IsOperator"]

# Name scopes (Caffe2's scope module): per thread, as nets are built per thread.
_SEPARATOR = "/"
_scope = threading.local()


def CurrentNameScope():
    return getattr(_scope, "name", "")


def CurrentDeviceScope():
    return getattr(_scope, "device", None)


@contextlib.contextmanager
def NameScope(prefix, reset=False):
    """Blob names made in the block (ScopedName, auto-named outputs, str inputs and
    outputs of Net methods) start with prefix + '/'; nested scopes add up."""
    if prefix is not None and not isinstance(prefix, str):
        prefix = str(prefix)
    old = CurrentNameScope()
    base = "" if reset else old
    if prefix:
        base = base + prefix + _SEPARATOR
    _scope.name = base
    try:
        yield
    finally:
        _scope.name = old


@contextlib.contextmanager
def DeviceScope(device_option):
    """Ops made in the block without a device_option of their own get this one."""
    old = CurrentDeviceScope()
    _scope.device = device_option
    try:
        yield
    finally:
        _scope.device = old


def ScopedName(name):
    return CurrentNameScope() + name


def DeviceOption(device_type, device_id=0, random_seed=None, node_name=None,
                 numa_node_id=None, extra_info=None):
    """A caffe2_pb2.DeviceOption (device_type caffe2_pb2.CPU or caffe2_pb2.CUDA)."""
    o = caffe2_pb2.DeviceOption()
    o.device_type = device_type
    o.device_id = device_id
    if random_seed is not None:
        o.random_seed = random_seed
    if node_name is not None:
        o.node_name = node_name
    if numa_node_id is not None:
        o.numa_node_id = numa_node_id
    if extra_info is not None:
        o.extra_info.extend(extra_info)
    return o


def IsOperator(op_type):
    """Whether Demitasse registers the op type."""
    return _C.has_op(op_type)


class BlobReference(object):
    """A blob's name, and the net it came from (for blob.Op(...) calls)."""

    def __init__(self, name, net=None):
        if isinstance(name, bytes):
            name = name.decode("utf-8")
        if not isinstance(name, str):
            raise TypeError("a blob name must be a str, not %s" % type(name).__name__)
        self._name = name
        self._from_net = net

    def __hash__(self):
        return hash(self._name)

    def __eq__(self, other):
        if isinstance(other, BlobReference):
            return self._name == other._name
        return isinstance(other, str) and self._name == other

    def __ne__(self, other):
        return not self == other

    def __str__(self):
        return self._name

    def __repr__(self):
        return 'BlobReference("%s")' % self._name

    def __add__(self, other):
        if not isinstance(other, str):
            raise TypeError("a BlobReference concatenates with a str, not %s"
                            % type(other).__name__)
        return BlobReference(self._name + other, self._from_net)

    def __radd__(self, other):
        if not isinstance(other, str):
            raise TypeError("a BlobReference concatenates with a str, not %s"
                            % type(other).__name__)
        return BlobReference(other + self._name, self._from_net)

    def Net(self):
        return self._from_net

    def GetNameScope(self):
        return self._name[:self._name.rfind(_SEPARATOR) + 1]

    def GetUnscopedName(self):
        return self._name[self._name.rfind(_SEPARATOR) + 1:]

    def __getattr__(self, op_type):
        """blob.Relu([], "y") is net.Relu([blob], "y") on the net the blob came from."""
        if op_type.startswith("__"):
            raise AttributeError(op_type)
        if self._from_net is None:
            raise AttributeError("BlobReference '%s' has no net, so no op method '%s'"
                                 % (self._name, op_type))
        if not IsOperator(op_type):
            raise AttributeError("'%s' is not a registered operator" % op_type)

        def method(inputs=None, *args, **kwargs):
            if inputs is None:
                inputs = []
            elif not isinstance(inputs, list):
                inputs = [inputs]
            return self._from_net.__getattr__(op_type)([self] + inputs, *args, **kwargs)
        return method


def ScopedBlobReference(name, *args, **kwargs):
    return BlobReference(ScopedName(name), *args, **kwargs)


def _blob_names(blobs, what):
    """str, BlobReference, or a list/tuple of them -> list of names."""
    if blobs is None:
        return []
    if isinstance(blobs, (str, bytes, BlobReference)):
        blobs = [blobs]
    if not isinstance(blobs, (list, tuple)):
        raise TypeError("%s must be a blob name, a BlobReference or a list of them, not %s"
                        % (what, type(blobs).__name__))
    names = []
    for b in blobs:
        if isinstance(b, bytes):
            b = b.decode("utf-8")
        if not isinstance(b, (str, BlobReference)):
            raise TypeError("%s: a blob must be a str or a BlobReference, not %s"
                            % (what, type(b).__name__))
        names.append(str(b))
    return names


def _is_netdef(v):
    d = getattr(v, "DESCRIPTOR", None)
    return getattr(d, "full_name", None) == "caffe2.NetDef"


def MakeArgument(key, value):
    """A caffe2_pb2.Argument named key, typed by value as Caffe2 does."""
    if not isinstance(key, str) or not key:
        raise TypeError("an argument name must be a non-empty str, not %r" % (key,))
    a = caffe2_pb2.Argument()
    a.name = key
    if isinstance(value, np.ndarray):
        value = value.flatten().tolist()
    elif isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, Net):
        value = value.Proto()
    if isinstance(value, (bool, numbers.Integral)):
        a.i = int(value)
    elif isinstance(value, numbers.Real):
        a.f = float(value)
    elif isinstance(value, str):
        a.s = value.encode("utf-8")
    elif isinstance(value, bytes):
        a.s = value
    elif isinstance(value, BlobReference):
        a.s = str(value).encode("utf-8")
    elif _is_netdef(value):
        a.n.CopyFrom(value)
    elif isinstance(value, (list, tuple)):
        items = [v.item() if isinstance(v, np.generic) else v for v in value]
        items = [v.Proto() if isinstance(v, Net) else v for v in items]
        if all(isinstance(v, (bool, numbers.Integral)) for v in items):
            a.ints.extend(int(v) for v in items)
        elif all(isinstance(v, numbers.Real) for v in items):
            a.floats.extend(float(v) for v in items)
        elif all(isinstance(v, (str, bytes, BlobReference)) for v in items):
            a.strings.extend(v if isinstance(v, bytes) else str(v).encode("utf-8")
                             for v in items)
        elif all(_is_netdef(v) for v in items):
            for v in items:
                a.nets.add().CopyFrom(v)
        else:
            raise TypeError("argument '%s': a list must be all numbers, all strings or all "
                            "NetDefs, not %r" % (key, [type(v).__name__ for v in items]))
    else:
        raise TypeError("argument '%s': a value of type %s has no Caffe2 argument type "
                        "(int, float, str, bytes, NetDef, or lists of them)"
                        % (key, type(value).__name__))
    return a


def CreateOperator(operator_type, inputs, outputs, name="", control_input=None,
                   device_option=None, arg=None, engine=None, **kwargs):
    """A caffe2_pb2.OperatorDef; keyword arguments become its Arguments."""
    if not isinstance(operator_type, str) or not operator_type:
        raise TypeError("the operator type must be a non-empty str, not %r" % (operator_type,))
    op = caffe2_pb2.OperatorDef()
    op.type = operator_type
    op.name = name
    op.input.extend(_blob_names(inputs, "inputs"))
    op.output.extend(_blob_names(outputs, "outputs"))
    if control_input:
        op.control_input.extend(_blob_names(control_input, "control_input"))
    if device_option is None:
        device_option = CurrentDeviceScope()
    if device_option is not None:
        if not isinstance(device_option, caffe2_pb2.DeviceOption):
            raise TypeError("device_option must be a caffe2_pb2.DeviceOption, not %s"
                            % type(device_option).__name__)
        op.device_option.CopyFrom(device_option)
    if engine is not None:
        op.engine = engine
    if arg is not None:
        op.arg.extend(arg)
    for key in sorted(kwargs):  # sorted: the same call gives the same bytes
        if kwargs[key] is not None:
            op.arg.add().CopyFrom(MakeArgument(key, kwargs[key]))
    return op


def _grad_map(forward_ops, all_ops, losses):
    """{blob: its gradient blob} for the forward blobs the backward ops give one."""
    written = set()
    for op in all_ops[len(forward_ops):]:
        written.update(op.output)
    grads = {}
    for op in forward_ops:
        for b in list(op.input) + list(op.output):
            if b + "_grad" in written:
                grads[b] = BlobReference(b + "_grad")
    for y in losses:
        if y + "_autogen_grad" in written:
            grads[y] = BlobReference(y + "_autogen_grad")
    return grads


class GradientRegistry(object):
    @staticmethod
    def GetBackwardPass(operators, ys, ys_generate_gradient=False):
        """(gradient ops, {blob: gradient blob}) for the ops and the losses ys (a list,
        or a dict whose keys are the losses; Caffe2's given output gradients are not
        supported: each loss is seeded with 1)."""
        losses = _blob_names(list(ys), "ys")
        n = caffe2_pb2.NetDef()
        n.name = "backward"
        for op in operators:
            n.op.add().CopyFrom(op)
        out = caffe2_pb2.NetDef.FromString(_C.add_gradient(n.SerializeToString(), losses))
        ops = list(out.op)
        return ops[len(operators):], _grad_map(list(operators), ops, losses)


class Net(object):
    """A NetDef being built; each registered op type is a method:
    net.FC(["x", "w", "b"], "y") appends an FC op and returns BlobReference("y")."""

    def __init__(self, name_or_proto):
        self._net = caffe2_pb2.NetDef()
        if _is_netdef(name_or_proto):
            self._net.CopyFrom(name_or_proto)
        elif isinstance(name_or_proto, Net):
            self._net.CopyFrom(name_or_proto.Proto())
        elif isinstance(name_or_proto, str) and name_or_proto:
            self._net.name = name_or_proto
        else:
            raise TypeError("Net(name) needs a non-empty str or a NetDef, not %r"
                            % (name_or_proto,))
        self._next_ids = {}
        self._defined = set(self._net.external_input)
        for op in self._net.op:
            self._defined.update(op.output)

    def Proto(self):
        return self._net

    def Name(self):
        return self._net.name

    def __str__(self):
        return self._net.name

    def Clone(self, name):
        n = Net(self._net)
        n._net.name = name
        return n

    def BlobIsDefined(self, blob):
        return str(blob) in self._defined

    def AddExternalInput(self, *inputs):
        if len(inputs) == 1 and isinstance(inputs[0], (list, tuple)):
            inputs = inputs[0]
        refs = []
        for name in _blob_names(list(inputs), "external inputs"):
            self._net.external_input.append(name)
            self._defined.add(name)
            refs.append(BlobReference(name, self))
        return refs[0] if len(refs) == 1 else refs

    def AddExternalOutput(self, *outputs):
        if len(outputs) == 1 and isinstance(outputs[0], (list, tuple)):
            outputs = outputs[0]
        names = _blob_names(list(outputs), "external outputs")
        self._net.external_output.extend(names)
        refs = [BlobReference(n, self) for n in names]
        return refs[0] if len(refs) == 1 else refs

    AddExternalInputs = AddExternalInput
    AddExternalOutputs = AddExternalOutput

    @property
    def external_inputs(self):
        return [BlobReference(n, self) for n in self._net.external_input]

    @property
    def external_outputs(self):
        return [BlobReference(n, self) for n in self._net.external_output]

    def NextName(self, prefix=None, output_id=None):
        """An unused blob name: <net>/<prefix>[:<output_id>], with _2, _3 ... added while
        taken; without a prefix <net>_blob_<k>."""
        if not prefix:
            k = self._next_ids.get(None, 0)
            self._next_ids[None] = k + 1
            return ScopedName("%s_blob_%d" % (self._net.name, k))
        base = self._net.name + "/" + prefix
        suffix = "" if output_id is None else ":%d" % output_id
        name = ScopedName(base + suffix)
        index = self._next_ids.get(base + suffix, 2)
        while name in self._defined:
            name = ScopedName("%s_%d%s" % (base, index, suffix))
            index += 1
        self._next_ids[base + suffix] = index
        return name

    def NextBlob(self, prefix):
        return BlobReference(self.NextName(prefix), self)

    def _blob_refs(self, blobs, what):
        """Names given as str are scoped (the current NameScope); BlobReferences are not."""
        if isinstance(blobs, (str, bytes, BlobReference)):
            blobs = [blobs]
        if not isinstance(blobs, (list, tuple)):
            raise TypeError("%s must be a blob name, a BlobReference or a list of them, not "
                            "%s" % (what, type(blobs).__name__))
        out = []
        for b in blobs:
            if isinstance(b, bytes):
                b = b.decode("utf-8")
            if isinstance(b, str):
                b = ScopedName(b)
            elif not isinstance(b, BlobReference):
                raise TypeError("%s: a blob must be a str or a BlobReference, not %s"
                                % (what, type(b).__name__))
            out.append(str(b))
        return out

    def _CreateAndAddToSelf(self, op_type, inputs, outputs=None, **kwargs):
        ins = self._blob_refs(inputs if inputs is not None else [], "inputs")
        if outputs is None:
            outs = [self.NextName(prefix=op_type)]
        elif isinstance(outputs, int) and not isinstance(outputs, bool):
            if outputs < 0:
                raise ValueError("%s: a negative number of outputs (%d)" % (op_type, outputs))
            outs = [self.NextName(prefix=op_type, output_id=i) for i in range(outputs)]
        else:
            outs = self._blob_refs(outputs, "outputs")
        op = CreateOperator(op_type, ins, outs, **kwargs)
        self._net.op.add().CopyFrom(op)
        self._defined.update(outs)
        refs = tuple(BlobReference(o, self) for o in outs)
        return refs[0] if len(refs) == 1 else refs

    def __getattr__(self, op_type):
        if op_type.startswith("__"):
            raise AttributeError(op_type)
        if not IsOperator(op_type):
            raise AttributeError("Method %s is not a registered operator (Demitasse has no "
                                 "op type '%s')" % (op_type, op_type))

        def method(*args, **kwargs):
            return self._CreateAndAddToSelf(op_type, *args, **kwargs)
        method.__name__ = op_type
        return method

    def AddGradientOperators(self, ys, skip=0):
        """Appends the backward pass for the losses ys (a blob or a list); returns
        {blob: BlobReference of its gradient}. skip (Caffe2: leave out the first ops'
        gradients) must be 0."""
        if skip:
            raise NotImplementedError("AddGradientOperators(skip=%r): only skip=0" % (skip,))
        losses = _blob_names(ys, "ys")
        forward = list(self._net.op)
        data = _C.add_gradient(self._net.SerializeToString(), losses)
        full = caffe2_pb2.NetDef.FromString(data)
        self._net.CopyFrom(full)
        for op in self._net.op[len(forward):]:
            self._defined.update(op.output)
        grads = _grad_map(forward, list(self._net.op), losses)
        return {k: BlobReference(str(v), self) for k, v in grads.items()}

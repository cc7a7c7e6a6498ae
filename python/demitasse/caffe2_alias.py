"""demitasse.caffe2_alias: importing it (or calling demitasse.install_caffe2_alias())
makes Caffe2's module names import Demitasse's: `from caffe2.python import core,
workspace` and `from caffe2.proto import caffe2_pb2`. Only on request, since a real
Caffe2 installed beside would otherwise be shadowed; a `caffe2` already imported is left
alone (install() raises instead of mixing the two)."""
import sys
import types


def install():
    existing = sys.modules.get("caffe2")
    if existing is not None and not getattr(existing, "__demitasse_alias__", False):
        raise ImportError("a caffe2 package is imported already (%r); the alias would mix "
                          "it with Demitasse's modules" % getattr(existing, "__file__", None))
    from demitasse import core, workspace
    from demitasse.proto import caffe2_pb2

    def package(name, **attrs):
        m = sys.modules.get(name)
        if m is None:
            m = types.ModuleType(name, "Demitasse's alias of Caffe2's %s" % name)
            m.__path__ = []  # a package, so that submodule imports are looked up here
            m.__demitasse_alias__ = True
            sys.modules[name] = m
        for k, v in attrs.items():
            setattr(m, k, v)
        return m

    python = package("caffe2.python", core=core, workspace=workspace)
    proto = package("caffe2.proto", caffe2_pb2=caffe2_pb2)
    package("caffe2", python=python, proto=proto)
    sys.modules["caffe2.python.core"] = core
    sys.modules["caffe2.python.workspace"] = workspace
    sys.modules["caffe2.proto.caffe2_pb2"] = caffe2_pb2


install()

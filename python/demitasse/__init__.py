"""demitasse: Caffe2's Python API (workspace, core) over Demitasse's C library.

    from demitasse import core, workspace
    workspace.FeedBlob("x", numpy_array)
    net = core.Net("example"); net.Relu("x", "y")
    workspace.RunNetOnce(net); workspace.FetchBlob("y")

The extension module demitasse._C is a thin layer over the public C API (demitasse.h);
everything else is here, in Python. `demitasse.install_caffe2_alias()` (or importing
demitasse.caffe2_alias) makes `from caffe2.python import core, workspace` and
`from caffe2.proto import caffe2_pb2` resolve to these modules. See docs/python.md.
"""
from demitasse._C import DemitasseError
from demitasse._C import version as _version

__version__ = _version()
__all__ = ["DemitasseError", "install_caffe2_alias", "__version__"]


def install_caffe2_alias():
    """Makes `caffe2`, `caffe2.python`, `caffe2.proto` importable as these modules."""
    from demitasse import caffe2_alias
    caffe2_alias.install()

"""conftest.py: the pytest suite of the demitasse package. Each test starts in a fresh,
current "default" workspace, so tests do not see each other's blobs."""
import pytest

from demitasse import workspace


@pytest.fixture(autouse=True)
def fresh_workspace():
    workspace.SwitchWorkspace("default", True)
    workspace.ResetWorkspace()
    yield
    workspace.SwitchWorkspace("default", True)

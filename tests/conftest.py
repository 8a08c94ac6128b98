"""Shared test setup: tests import the independent references from this folder."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import pytest  # noqa: E402


@pytest.fixture(scope="module")
def nt_everywhere():
    """NT stores (and the plans that come with them) at any size: NT_MIN_BYTES patched to 0
    for the module, so small tensors exercise the large-tensor paths."""
    import layoutjit.plan as plan_mod

    mp = pytest.MonkeyPatch()
    mp.setattr(plan_mod, "NT_MIN_BYTES", 0)
    yield
    mp.undo()


@pytest.fixture(params=["plain", "nt"])
def stores(request, monkeypatch):
    """Each test twice: with the real store thresholds (small tensors: plain stores) and with
    NT stores at any size."""
    if request.param == "nt":
        import layoutjit.plan as plan_mod

        monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    return request.param

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


@pytest.fixture
def plans_32(monkeypatch):
    """Plans for 32-byte vectors (AVX2) on any host, for tests of rules defined at that width
    (with 64-byte vectors other tiles come first); the kernels run on any x86 host with AVX2,
    since tiles take the plan's width. Build with ``compiler.build``: ``compile_reorder``'s
    in-memory cache would hand out or keep kernels of the host's width."""
    import layoutjit.plan as plan_mod

    monkeypatch.setattr(plan_mod, "vector_bytes", lambda: 32)


@pytest.fixture(params=["plain", "nt"])
def stores(request, monkeypatch):
    """Each test twice: with the real store thresholds (small tensors: plain stores) and with
    NT stores at any size."""
    if request.param == "nt":
        import layoutjit.plan as plan_mod

        monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    return request.param


@pytest.fixture
def narrow_elements(monkeypatch):
    """Plans of the IR as lowered, without element widening (``layoutjit.widen``): for tests
    of planner rules shown on 1- and 2-byte pairs whose runs would otherwise move as wider
    elements (and take other plans). Widening itself is tested in test_widen.py."""
    import layoutjit.widen as widen_mod

    monkeypatch.setattr(widen_mod, "WIDEN_MAX_BYTES", 1)  # (8-byte NT widening included)

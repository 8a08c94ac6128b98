"""Kind "lines" with 1-byte runs of 65-128 elements (``plan.LINES_MAX_RUN``, ``_runs_per_call``).

``ihwo -> hwio`` in int8 with 96 output channels: each pixel's 96 bytes are contiguous on
both sides, and the runs are transposed over i x (h, w). As a stream (one run per call,
128 source streams live) it took 3.9x a copy; as runs packed two to a call (192 B, three
whole lines) it takes 0.4x. Runs that no small count fills whole lines with (100 B) are
moved one per call by a row gather. The tests check every byte against numpy index
arithmetic (destinations at several offsets, 1 and 2 threads, guard bytes), with plain and
NT stores, an odd row count (a last call of one run) and an epilogue (scales, relu).
"""

from __future__ import annotations

import numpy as np
import pytest

import layoutjit as lj
import layoutjit.plan as plan_mod
import reference as ref
from layoutjit.compiler import build, lower_and_plan

M = lj.MemoryDesc

CASES = [
    ((96, 6, 3, 5), "s8", "s8", 2),     # 96 B runs: 2 per call
    ((96, 5, 2, 7), "u8", "s8", 2),     # odd row count, saturating conversion
    ((80, 8, 3, 3), "s8", "s8", 4),     # 80 B: 4 per call (5 lines)
    ((72, 9, 2, 3), "u8", "u8", 8),     # 72 B: 8 per call (9 lines)
    ((100, 4, 3, 3), "s8", "s8", 1),    # 100 B: one per call, a row gather
    ((128, 3, 2, 5), "s8", "s8", 1),    # 128 B: two whole lines
]


def _long_lines(p) -> bool:
    t = p.tile
    return t is not None and t.kind == "lines" and p.nodes[t.l].extent > 64


@pytest.mark.parametrize("dims,sdt,ddt,per_call", CASES)
def test_long_runs_are_exact(stores, dims, sdt, ddt, per_call):
    s, d = M(dims, sdt, "ihwo"), M(dims, ddt, "hwio")
    k = build(s, d)  # not compile_reorder: its in-memory cache would share one kernel
    p = k.plan
    assert _long_lines(p) and p.tile.R == min(per_call, dims[1]), p.describe()
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size(), sdt, rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size(), d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, [0, 64 - 1])


def test_long_runs_with_an_epilogue():
    """Scales and a relu post-op go through the lines kernel's buffer, then the row gathers."""
    dims = (96, 5, 2, 3)
    s, d = M(dims, "s8", "ihwo"), M(dims, "s8", "hwio")
    k = lj.compile_reorder(s, d, scales={"src": 0}, post_ops=[("eltwise", "relu", 0.0)])
    assert _long_lines(k.plan), k.plan.describe()
    rng = np.random.default_rng(5)
    x = ref.random_raw(s.get_size(), "s8", rng)
    expect = ref.reorder(np.maximum(x, 0), s, d, np.zeros(d.get_size(), np.int8))
    y = np.full(d.get_size(), 77, np.int8)
    k(x, y, scales={"src": np.ones(1, np.float32)})
    np.testing.assert_array_equal(y, expect)


def test_runs_per_call():
    f = plan_mod._runs_per_call
    assert [f(b) for b in (4, 16, 32, 64, 12)] == [16, 4, 2, 1, 1]  # short runs: as before
    assert [f(b) for b in (96, 80, 72, 100, 128)] == [2, 4, 8, 1, 1]


def test_long_runs_switch(monkeypatch):
    monkeypatch.setattr(plan_mod, "LINES_MAX_RUN", 64)
    dims = (96, 6, 3, 5)
    p = lower_and_plan(M(dims, "s8", "ihwo"), M(dims, "s8", "hwio"), None)[1]
    assert p.tile is not None and p.tile.kind == "stream", p.describe()

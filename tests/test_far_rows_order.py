"""NT transposes whose job loop barely moves the source (``plan._far_rows_order``).

`oihw -> IOhw16o16i`: in destination order the I blocks are the job loop, and each job read
one short piece of every o row before the next job read the next piece of each. The step
that continues the rows now moves inward until at most ``FAR_ROWS_STREAMS`` tile calls run
between two of its steps. The tests check the plans at real sizes (no kernel built), then
force the rule onto small tensors and check every byte (destinations at several offsets, 1
and 2 threads, guard bytes, padding).
"""

from __future__ import annotations

import numpy as np
import pytest

import layoutjit as lj
import layoutjit.plan as plan_mod
import reference as ref
from layoutjit.compiler import build, lower_and_plan

M = lj.MemoryDesc
NOTE = "the job loop barely moves the source"


def plan_of(s, d):
    return lower_and_plan(s, d, None)[1]


def _taken(p) -> bool:
    return any(NOTE in n for n in p.notes)


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt,taken", [
    ((1024, 1024, 5, 5), "oihw", "IOhw16o16i", "bf16", "bf16", True),
    ((1024, 1024, 3, 3), "oihw", "IOhw16o16i", "f32", "f32", True),
    ((96, 128, 8, 192), "OIhw4o4i", "Ohwi16o", "f32", "f32", True),
    # 16 o steps of two 16x8 tiles each: 32 calls between two steps of hw (FAR_ROWS_CALLS)
    ((256, 16, 256, 5, 5), "Goihw16g", "gOIhw16o16i", "f32", "f32", True),
    # the rows' next step within 580 KB of source: read again from cache
    ((1024, 1024, 3, 3), "OIhw16o16i", "oihw", "f32", "f32", False),
    # tiles reading 256 B per row group, whose destination rows the moved step would break
    ((384, 256, 768), "Acb16a", "nCw8c", "bf16", "f32", False),
    ((112, 16, 192, 17, 12), "AcdeB8b8a", "aBdec64b", "s8", "s8", False),
])
def test_far_rows_order_at_real_sizes(plans_32, dims, stag, dtag, sdt, ddt, taken):
    p = plan_of(M(dims, sdt, stag), M(dims, ddt, dtag))
    assert p.nt and _taken(p) == taken, p.describe()


def test_far_rows_order_switch(plans_32, monkeypatch):
    dims = (1024, 1024, 5, 5)
    monkeypatch.setattr(plan_mod, "FAR_ROWS_ORDER", False)
    assert not _taken(plan_of(M(dims, "bf16", "oihw"), M(dims, "bf16", "IOhw16o16i")))


def test_far_rows_count_tile_calls(plans_32, monkeypatch):
    """The calls of a step count (``FAR_ROWS_CALLS``): 16 steps of two tiles move hw
    inward; counted as steps they did not."""
    dims = (256, 16, 256, 5, 5)
    s, d = M(dims, "f32", "Goihw16g"), M(dims, "f32", "gOIhw16o16i")
    p = plan_of(s, d)
    assert plan_mod._tile_calls_per_step(p.ir, p.tile) == 2 and _taken(p), p.describe()
    monkeypatch.setattr(plan_mod, "FAR_ROWS_CALLS", False)
    assert not _taken(plan_of(s, d))


CASES = [
    ((64, 48, 3, 3), "oihw", "IOhw16o16i", "f32", "f32"),
    ((48, 40, 5, 5), "oihw", "IOhw16o16i", "bf16", "bf16"),  # I = 40 of 48: padded blocks
    ((40, 64, 3, 5), "oihw", "IOhw16o16i", "s8", "f32"),
    ((128, 40, 7, 3), "oihw", "IOhw16o16i", "f32", "s8"),
    ((32, 128, 4, 12), "OIhw4o4i", "Ohwi16o", "f32", "f32"),
    ((32, 16, 48, 3, 3), "Goihw16g", "gOIhw16o16i", "f32", "f32"),  # two column tiles a step
    ((32, 16, 40, 3, 3), "Goihw16g", "gOIhw16o16i", "f32", "f32"),  # I = 40 of 48
]


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", CASES)
def test_far_rows_order_is_exact(nt_everywhere, plans_32, monkeypatch, dims, stag, dtag, sdt, ddt):
    monkeypatch.setattr(plan_mod, "FAR_ROWS_SPAN_BYTES", 0)
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = build(s, d)
    p = k.plan
    assert p.nt and _taken(p), p.describe()
    t = p.tile
    outer = p.nodes[:min(t.nodes)]
    inner = min(range(len(outer)), key=lambda i: abs(outer[i].strides[1] or 0) or 1 << 62)
    # at most FAR_ROWS_STREAMS tile calls between two steps of the rows' continuing node
    # (counted as calls where that move is allowed, Goihw16g; else as steps, oihw)
    steps = int(np.prod([n.extent for n in outer[inner + 1:]]))
    calls = steps * plan_mod._tile_calls_per_step(p.ir, t)
    assert (calls if stag == "Goihw16g" else steps) <= plan_mod.FAR_ROWS_STREAMS, p.describe()
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, str(s.dtype), rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, [0, 2 * d.dtype.size, 64 - d.dtype.size])

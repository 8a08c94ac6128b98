"""Whole-block tiles reading pieces of far source rows (``plan._line_split_order``).

u8 `hwio -> OIhw4o4i`: 4x4 tiles read 4 bytes from each of 4 rows (i) far apart, and the
o-blocks that read the rest of each 64-byte source line were the outermost loop: each line
came back 16 times, a sweep of 1960 rows apart, rows that share a few L2 sets. The o-block
node is now split at a line, its 16 steps innermost. The tests check plans at real sizes
(no kernel built), then force the rule onto small tensors and check every byte.
"""

from __future__ import annotations

import pytest

import layoutjit as lj
import layoutjit.plan as plan_mod
import reference as ref
from layoutjit.compiler import build, lower_and_plan

M = lj.MemoryDesc


def plan_of(dims, stag, dtag, sdt, ddt):
    return lower_and_plan(M(dims, sdt, stag), M(dims, ddt, dtag), None)[1]


def _split(p) -> bool:
    return "line_split" in p.ir.notes


@pytest.mark.parametrize("dims,dt,taken", [
    ((49152, 40, 7, 7), "u8", True),
    ((49152, 40, 3, 3), "s8", True),
    ((512, 40, 7, 7), "u8", False),    # 1960 lines 512 B apart: they stay in L2
])
def test_line_split_at_real_sizes(plans_32, dims, dt, taken):
    p = plan_of(dims, "hwio", "OIhw4o4i", dt, dt)
    assert _split(p) == taken, p.describe()
    if taken:
        t = p.tile
        inner = p.ir.nodes[min(t.nodes) - 1]
        # the o-blocks' steps within one source line (16 of 4 bytes) just outside the tile
        assert inner.extent == 16 and inner.strides[1] == 4, p.describe()
        assert p.ir.nodes[0].strides[1] == 64, p.describe()


def test_line_split_switch(plans_32, monkeypatch):
    monkeypatch.setattr(plan_mod, "LINE_SPLIT", False)
    assert not _split(plan_of((49152, 40, 7, 7), "hwio", "OIhw4o4i", "u8", "u8"))


def test_lines_overload_l2():
    ir = plan_of((64, 40, 7, 7), "hwio", "OIhw4o4i", "u8", "u8").ir
    period, ways = plan_mod.L2_SET_PERIOD, plan_mod.L2_WAYS
    # rows one set period apart: ways + 1 of them overload the set, ways do not
    assert plan_mod._lines_overload_l2(ir, [(period, ways + 1)])
    assert not plan_mod._lines_overload_l2(ir, [(period, ways)])
    # lines next to one another fill distinct sets until LINE_SHARE_BYTES
    assert not plan_mod._lines_overload_l2(ir, [(64, 1024)])
    assert plan_mod._lines_overload_l2(ir, [(64, plan_mod.LINE_SHARE_BYTES // 64)])


CASES = [
    ((128, 40, 7, 7), "hwio", "OIhw4o4i", "u8", "u8"),
    ((192, 12, 3, 3), "hwio", "OIhw4o4i", "s8", "s8"),
    ((128, 24, 3, 5), "hwio", "OIhw4o4i", "s8", "u8"),
    ((2, 128, 12, 3, 3), "hwigo", "gOIhw4o4i", "u8", "u8"),
]


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", CASES)
def test_line_split_is_exact(plans_32, monkeypatch, dims, stag, dtag, sdt, ddt):
    monkeypatch.setattr(plan_mod, "_lines_overload_l2", lambda ir, loops: True)
    k = build(M(dims, sdt, stag), M(dims, ddt, dtag))
    assert _split(k.plan), k.plan.describe()
    ref.check_exact_at_offsets(k, sum(dims))


def _shared(p) -> bool:
    return "line_share" in p.ir.notes


@pytest.mark.parametrize("dims,stag,dtag,dt", [
    ((512, 64, 192, 3, 1), "gOIhw4i16o4i", "goihw", "f32"),
    ((512, 1024, 3, 5), "OIhw4i16o4i", "oihw", "s8"),
])
def test_line_share_l1_at_real_sizes(plans_32, monkeypatch, dims, stag, dtag, dt):
    """Steps that share source lines move inward where the lines between two of them
    overload an L1 set (``_lines_overload_l1``), not only past ``LINE_SHARE_BYTES``."""
    assert _shared(plan_of(dims, stag, dtag, dt, dt))
    monkeypatch.setattr(plan_mod, "LINE_SHARE_L1", False)
    assert not _shared(plan_of(dims, stag, dtag, dt, dt))


def test_lines_overload_l1():
    ir = plan_of((64, 40, 7, 7), "hwio", "OIhw4o4i", "u8", "u8").ir
    ways, period = plan_mod.L1_WAYS, plan_mod.L1_SET_PERIOD
    assert plan_mod._lines_overload_l1(ir, [(period, ways + 1)])
    assert not plan_mod._lines_overload_l1(ir, [(period, ways)])
    assert not plan_mod._lines_overload_l1(ir, [(64, 64)])  # 64 lines side by side: 64 sets


@pytest.mark.parametrize("dims,stag,dtag,dt", [
    ((32, 32, 7, 7), "Ohwi16o", "iohw", "s8"),
    ((64, 64, 3, 3), "hwio", "OIhw4o4i", "s8"),
])
def test_line_share_l1_is_exact(plans_32, dims, stag, dtag, dt):
    k = build(M(dims, dt, stag), M(dims, dt, dtag))
    assert _shared(k.plan), k.plan.describe()
    ref.check_exact_at_offsets(k, sum(dims))


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt,taken", [
    ((112, 6, 128, 32, 28), "OdhwI48o4i", "gOIhw8o4i", "s8", "s8", True),
    ((48, 112, 208, 16), "OhwI4i32o4i", "gOIw4i8o2i", "f32", "f32", True),
    ((100, 2048, 8, 2), "ABcd8a2b", "gOwI16i48o4i", "f32", "f32", False),  # a 1 MB sweep
])
def test_line_share_padded_at_real_sizes(monkeypatch, dims, stag, dtag, sdt, ddt, taken):
    """A padded dim's lightest digit that shares source lines moves inward where the loops
    inside it sweep ``LINE_SHARE_PADDED_SPAN_BYTES`` or more of the source."""
    monkeypatch.setattr(plan_mod, "vector_bytes", lambda: 64)
    p = plan_of(dims, stag, dtag, sdt, ddt)
    assert _shared(p) == taken, p.describe()
    if taken:
        ir = p.ir
        moved = next(n for n in ir.nodes[:min(p.tile.nodes)]
                     if n.dim is not None and ir.dims[n.dim].guarded
                     and 0 < n.strides[1] * ir.operands[1].dtype.size < 64)
        assert moved.weight == 1, p.describe()  # the dim's lightest digit
        # every padded dim's digits stay heaviest-first (compile-time padding splits need it)
        for d, r in enumerate(ir.dims):
            weights = [n.weight for n in ir.nodes if n.dim == d]
            assert not r.guarded or weights == sorted(weights, reverse=True), p.describe()
    monkeypatch.setattr(plan_mod, "LINE_SHARE_PADDED_SPAN_BYTES", 0)
    assert not _shared(plan_of(dims, stag, dtag, sdt, ddt))


@pytest.mark.parametrize("dims,stag,dtag,dt", [
    ((60, 6, 8, 3, 5), "OdhwI48o4i", "gOIhw8o4i", "s8"),
    ((40, 7, 8, 9), "OhwI4i32o4i", "gOIw4i8o2i", "f32"),
])
def test_line_share_padded_is_exact(monkeypatch, dims, stag, dtag, dt):
    monkeypatch.setattr(plan_mod, "vector_bytes", lambda: 64)
    monkeypatch.setattr(plan_mod, "LINE_SHARE_PADDED_SPAN_BYTES", 1)
    monkeypatch.setattr(plan_mod, "LINE_SHARE_BYTES", 64)
    k = build(M(dims, dt, stag), M(dims, dt, dtag))
    assert _shared(k.plan), k.plan.describe()
    ref.check_exact_at_offsets(k, sum(dims))

"""Line rows over two destination nodes (``plan._line_rows_two``, ``TileSpec.a3``).

bf16 `OIhw16i16o -> oihw` 3x3: a destination line holds 32 elements of an o's row (i x hw),
so one period of rows needs 32 i, but the block's i node has 16: the period takes it whole
and 2 steps of the i-blocks (A3), 288 rows in 9 lines. s8 takes 4 i-blocks (64-element
lines). The tests check the plans and every byte (NT forced on small tensors, several
destination offsets, padded o, groups, conversions).
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


@pytest.mark.parametrize("dt,blocks", [("bf16", 2), ("s8", 4)])
def test_period_spans_two_nodes(plans_32, dt, blocks):
    p = plan_of((1024, 1024, 3, 3), "OIhw16i16o", "oihw", dt, dt)
    t = p.tile
    assert t.a2 is not None and t.a3 is not None, p.describe()
    a, a2, a3 = (p.ir.nodes[i] for i in (t.a, t.a2, t.a3))
    assert (a.extent, a2.extent, a3.extent) == (9, 16, blocks), p.describe()
    assert plan_mod.tile_rows(p.ir, t) == 9 * 16 * blocks
    # row r: i = r // 9 (16 per block), hw = r % 9; source OIhw16i16o: i-block stride
    # 9 * 256, hw stride 256, i stride 16
    rows = plan_mod.src_rows(p.ir, t)
    for r in (0, 8, 9, 143, 144, 9 * 16 * blocks - 1):
        i, hw = divmod(r, 9)
        assert rows[r] == (i // 16) * 9 * 256 + hw * 256 + (i % 16) * 16, r
    assert "A3=" in p.describe() and p.prefetch, p.describe()


def test_switch_off_and_unfit_blocks(plans_32, monkeypatch):
    # 3 i-blocks of 16 do not divide into periods of 2 blocks: no line rows over two nodes
    p = plan_of((64, 48, 3, 3), "OIhw16i16o", "oihw", "bf16", "bf16")
    assert p.tile.a3 is None, p.describe()
    monkeypatch.setattr(plan_mod, "LINE_ROWS_TWO", False)
    p = plan_of((1024, 1024, 3, 3), "OIhw16i16o", "oihw", "bf16", "bf16")
    assert p.tile.a3 is None, p.describe()


CASES = [
    ((32, 64, 3, 3), "OIhw16i16o", "oihw", "bf16", "bf16"),
    ((32, 128, 3, 3), "OIhw16i16o", "oihw", "s8", "s8"),
    ((17, 64, 7, 7), "OIhw16i16o", "oihw", "bf16", "bf16"),      # o padded (17 of 32)
    ((2, 16, 128, 3, 3), "gOIhw16i16o", "goihw", "u8", "u8"),    # groups outside
    ((16, 64, 5, 5), "OIhw16i16o", "oihw", "f32", "bf16"),       # narrowing
    ((16, 32, 3, 3), "OIhw8i8o", "oihw", "f32", "bf16"),         # 8-element blocks: 4 of them
]


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", CASES)
def test_line_rows_two_are_exact(plans_32, nt_everywhere, dims, stag, dtag, sdt, ddt):
    k = build(M(dims, sdt, stag), M(dims, ddt, dtag))
    p = k.plan
    assert p.nt and p.tile.a3 is not None, p.describe()
    ref.check_exact_at_offsets(k, sum(dims))


def test_padded_dims_of_whole_periods(plans_32, monkeypatch):
    # u8 oihw -> OIhw8i16o2i, I = 100 of 112: a line is A3 (2 of the 8i) x A2 (16o) x A (2i),
    # 4 i, and 100 is a number of them: every period is data or padding (_whole_padded_lines)
    p = plan_of((64, 100, 7, 7), "oihw", "OIhw8i16o2i", "u8", "u8")
    t = p.tile
    assert t.a3 is not None, p.describe()
    a, a2, a3 = (p.ir.nodes[i] for i in (t.a, t.a2, t.a3))
    assert (a.extent, a2.extent, a3.extent) == (2, 16, 2) and a.dim == a3.dim, p.describe()
    # I = 102: the last period would be half data: no line rows over two nodes
    p = plan_of((64, 102, 7, 7), "oihw", "OIhw8i16o2i", "u8", "u8")
    assert p.tile.a3 is None, p.describe()
    monkeypatch.setattr(plan_mod, "PADDED_LINE_ROWS_TWO", False)
    p = plan_of((64, 100, 7, 7), "oihw", "OIhw8i16o2i", "u8", "u8")
    assert p.tile.a3 is None, p.describe()


PADDED_CASES = [
    ((16, 100, 7, 7), "oihw", "OIhw8i16o2i", "u8", "u8"),
    ((16, 100, 7, 7), "oihw", "OIhw8i16o2i", "f32", "s8"),
    ((16, 102, 7, 7), "oihw", "OIhw8i16o2i", "s8", "s8"),       # half-data period: other tiles
    ((2, 16, 100, 5, 5), "goihw", "gOIhw8i16o2i", "s8", "s8"),
    ((16, 36, 3, 3), "oihw", "OIhw16i16o", "bf16", "bf16"),     # I = 36 of 48: 2 i a period
]


@pytest.mark.parametrize("switch", [True, False])
@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", PADDED_CASES)
def test_padded_line_rows_two_are_exact(plans_32, nt_everywhere, monkeypatch, switch, dims, stag,
                                        dtag, sdt, ddt):
    monkeypatch.setattr(plan_mod, "PADDED_LINE_ROWS_TWO", switch)
    k = build(M(dims, sdt, stag), M(dims, ddt, dtag))
    ref.check_exact_at_offsets(k, sum(dims))

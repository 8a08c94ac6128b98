"""One-line ``a2`` tiles prefetch the continuation of their source rows
(``plan.row_continuation``, ``Plan.row_prefetch``).

f32 `oihw -> OIhw4i16o4i`: a tile's 16 rows are 4 o x 4 i, the 4 i of an o one run of
4 x hw elements that the next step of the 4-i loop continues; each tile call prefetches
each row's line that far ahead. The tests check the plans, the prefetches in the source,
and every byte with NT stores forced on small tensors.
"""

from __future__ import annotations

import pytest

import layoutjit as lj
import layoutjit.plan as plan_mod
import reference as ref
from layoutjit.compiler import build, lower_and_plan

M = lj.MemoryDesc


def plan_of(dims, stag, dtag, sdt="f32", ddt="f32"):
    return lower_and_plan(M(dims, sdt, stag), M(dims, ddt, dtag), None)[1]


def test_rows_prefetch_their_continuation():
    p = plan_of((1024, 256, 8, 8), "oihw", "OIhw4i16o4i")
    t = p.tile
    assert p.nt and t.a2 is not None and plan_mod.tile_rows(p.ir, t) == t.R, p.describe()
    assert p.row_prefetch == 4 * 64, p.describe()  # 4 i x 64 hw: the next 4-i step
    assert "elements ahead" in p.describe()


def test_no_row_prefetch_in_cache_or_switched_off(monkeypatch):
    p = plan_of((32, 32, 8, 8), "oihw", "OIhw4i16o4i")
    assert p.tile.a2 is not None and not p.nt and p.row_prefetch == 0, p.describe()
    # f32 -> s8: 64 rows (16 o x 4 i), the 4-i loop innermost: the next tile reads the lines
    p = plan_of((4096, 1000, 3, 3), "oihw", "OIhw4i16o4i", "f32", "s8")
    assert p.nt and p.tile.a2 is not None and p.row_prefetch == 0, p.describe()
    assert plan_mod.outer_nodes(p.ir, p.tile)[-1] == 2 and p.ir.nodes[2].strides[1] == 4 * 9
    # rows continued only by an outer loop far out (6.5 MB of reads between)
    p = plan_of((8, 100, 128, 100), "hwio", "nChw8c")
    assert p.nt and p.tile.a2 is not None and p.row_prefetch == 0, p.describe()
    monkeypatch.setattr(plan_mod, "ROW_PREFETCH", False)
    p = plan_of((1024, 256, 8, 8), "oihw", "OIhw4i16o4i")
    assert p.nt and p.row_prefetch == 0, p.describe()


CASES = [
    ((64, 48, 8, 8), "oihw", "OIhw4i16o4i", "f32", "f32"),
    ((32, 20, 5, 5), "oihw", "OIhw4i16o4i", "bf16", "f32"),       # i padded (20 of 32)
    ((2, 32, 64, 7, 5), "goihw", "gOIhw4i16o4i", "bf16", "bf16"),
    ((32, 64, 11, 11), "oihw", "OIhw16o16i", "f32", "s8"),       # 64 rows of 121, 4 o x 16 i
]


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", CASES)
def test_row_prefetch_is_exact(plans_32, nt_everywhere, dims, stag, dtag, sdt, ddt):
    k = build(M(dims, sdt, stag), M(dims, ddt, dtag))
    p = k.plan
    assert p.nt and p.tile.a2 is not None and p.row_prefetch, p.describe()
    assert "prefetch(64)" in k.source, k.source
    # row 0's line at the first step's last element, one continuation ahead
    v = min(p.tile.V, p.ir.nodes[p.tile.b].extent)
    assert f"+ {p.row_prefetch + v - 1})" in k.source, k.source
    ref.check_exact_at_offsets(k, sum(dims))

"""Software prefetch in line-row transposes (``TileSpec.a2``).

- Tiles that loop over the lines of a period prefetch the next period's source block
  (``plan._prefetch_periods``, ``plan.period_next``), and periods of up to
  ``LINE_ROWS_MAX_ROWS`` rows take line rows (11x11 f32 weights: 121 lines). `OIhw16i16o
  -> oihw` f32: a period is one 16 i x hw x 16 o block of the source, contiguous, the next
  i-block right after it; each line's call reads a line from 16 rows a step of hw apart and
  prefetches 1 KB (its share) of the next block.
- One-line tiles prefetch the continuation of their source rows (``plan.row_continuation``,
  ``Plan.row_prefetch``). f32 `oihw -> OIhw4i16o4i`: a tile's 16 rows are 4 o x 4 i, the 4 i
  of an o one run of 4 x hw elements that the next step of the 4-i loop continues. Where
  that loop is the innermost (f32 -> s8: 64 rows, 16 o x 4 i), two steps ahead, to L2
  (``plan.near_row_continuation``).

The tests check the plans, the prefetches in the generated source, and every byte with NT
stores forced on small tensors.
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


def test_large_weights_prefetch_the_next_period():
    p = plan_of((1024, 512, 7, 7), "OIhw16i16o", "oihw")
    t = p.tile
    assert p.nt and t.a2 is not None and plan_mod.tile_rows(p.ir, t) == 16 * 49, p.describe()
    assert p.prefetch and p.prefetch_l2, p.describe()
    assert p.prefetch_block == 16 * 49 * 16 * 4  # 16 i x 49 hw x 16 o
    assert plan_mod.period_next(p.ir, t) == 16 * 49 * 16  # the next i-block follows
    assert "next period's block" in p.describe()


def test_long_periods_take_line_rows(plans_32, monkeypatch):
    """121 lines a period (1936 rows): line rows, prefetched; f32 -> s8 7x9 (64 i x 63 hw
    rows of 64 B: 252 KB blocks): line rows over two nodes, prefetched up to
    ``PREFETCH_PERIOD_MAX_BLOCK`` (256 KB), not past it."""
    p = plan_of((512, 512, 11, 11), "OIhw16i16o", "oihw")
    assert p.tile.a2 is not None and plan_mod.tile_rows(p.ir, p.tile) == 16 * 121, p.describe()
    assert p.prefetch, p.describe()
    p = plan_of((256, 256, 7, 9), "OIhw16i16o", "oihw", "f32", "s8")
    assert p.nt and p.tile.a3 is not None and plan_mod.tile_rows(p.ir, p.tile) == 64 * 63, p.describe()
    assert p.prefetch and p.prefetch_block == 64 * 63 * 64, p.describe()
    monkeypatch.setattr(plan_mod, "PREFETCH_PERIOD_MAX_BLOCK", 192 * 1024)
    p = plan_of((256, 256, 7, 9), "OIhw16i16o", "oihw", "f32", "s8")
    assert p.nt and p.tile.a3 is not None and not p.prefetch, p.describe()


def test_no_prefetch_in_cache_or_where_the_next_block_is_elsewhere(monkeypatch):
    p = plan_of((32, 32, 7, 7), "OIhw16i16o", "oihw")  # in cache: plain stores
    assert p.tile.a2 is not None and not p.nt and not p.prefetch, p.describe()
    # `IOhw16i16o` in destination order: the innermost outer loop (i-blocks) steps over
    # all o-blocks' blocks. The far-rows order (plan._far_rows_order) puts the o-blocks
    # inside, the next block follows, and the plan prefetches it.
    p = plan_of((1024, 512, 7, 7), "IOhw16i16o", "oihw")
    assert p.nt and p.tile.a2 is not None and p.prefetch, p.describe()
    assert plan_mod.period_next(p.ir, p.tile) != 0, p.describe()
    monkeypatch.setattr(plan_mod, "FAR_ROWS_ORDER", False)
    p = plan_of((1024, 512, 7, 7), "IOhw16i16o", "oihw")
    assert p.nt and p.tile.a2 is not None, p.describe()
    assert plan_mod.period_next(p.ir, p.tile) == 0 and not p.prefetch, p.describe()


def test_rows_prefetch_their_continuation():
    p = plan_of((1024, 256, 8, 8), "oihw", "OIhw4i16o4i")
    t = p.tile
    assert p.nt and t.a2 is not None and plan_mod.tile_rows(p.ir, t) == t.R, p.describe()
    assert p.row_prefetch == 4 * 64, p.describe()  # 4 i x 64 hw: the next 4-i step
    assert "elements ahead" in p.describe()


def test_no_row_prefetch_in_cache_or_switched_off(monkeypatch):
    p = plan_of((32, 32, 8, 8), "oihw", "OIhw4i16o4i")
    assert p.tile.a2 is not None and not p.nt and p.row_prefetch == 0, p.describe()
    # f32 -> s8: 64 rows (16 o x 4 i), the 4-i loop innermost: no continuation to all
    # levels, 1.5 KB ahead (11 steps of 144 B) to L2 (near_row_continuation) unless that is off
    p = plan_of((4096, 1000, 3, 3), "oihw", "OIhw4i16o4i", "f32", "s8")
    assert p.nt and p.tile.a2 is not None, p.describe()
    assert plan_mod.outer_nodes(p.ir, p.tile)[-1] == 2 and p.ir.nodes[2].strides[1] == 4 * 9
    assert plan_mod.row_continuation(p.ir, p.tile) == 0
    assert p.row_prefetch == 11 * 4 * 9 and p.row_prefetch_l2, p.describe()
    with monkeypatch.context() as near_off:
        near_off.setattr(plan_mod, "ROW_PREFETCH_NEAR_RUNS", 0)
        p = plan_of((4096, 1000, 3, 3), "oihw", "OIhw4i16o4i", "f32", "s8")
        assert p.row_prefetch == 0, p.describe()
    # rows continued only by an outer loop far out (6.5 MB of reads between)
    p = plan_of((8, 100, 128, 100), "hwio", "nChw8c")
    assert p.nt and p.tile.a2 is not None and p.row_prefetch == 0, p.describe()
    monkeypatch.setattr(plan_mod, "ROW_PREFETCH", False)
    p = plan_of((1024, 256, 8, 8), "oihw", "OIhw4i16o4i")
    assert p.nt and p.row_prefetch == 0, p.describe()


def test_rows_continued_by_the_innermost_loop_prefetch_to_l2():
    """``near_row_continuation``: two steps of the innermost outer loop ahead, to L2."""
    p = plan_of((1024, 512, 7, 7), "oihw", "OIhw4i16o4i", "f32", "s8")
    assert p.nt and plan_mod.tile_rows(p.ir, p.tile) == 64, p.describe()
    assert p.row_prefetch == 2 * 4 * 49 and p.row_prefetch_l2, p.describe()
    assert "innermost outer loop continue them), to L2" in p.describe()
    p = plan_of((1024, 256, 8, 8), "oihw", "OIhw4i16o4i")   # an outer loop's: L2 as well
    assert p.row_prefetch == 4 * 64 and p.row_prefetch_l2, p.describe()
    assert "outer loop continues them), to L2" in p.describe()
    # steps of 200 KB (a plane of 224x224 f32): too far ahead
    p = plan_of((12, 62, 224, 224), "nchw", "NChw16n16c", "f32", "s8")
    assert p.nt and p.tile.a2 is not None and p.row_prefetch == 0, p.describe()


def test_rows_continued_through_their_second_digit_prefetch_to_l2(monkeypatch):
    """f32 -> bf16 `oihw -> OIhw16i16o`: a tile's 32 rows are 16 o x 2 i, and each step of
    the innermost (i-pair) loop continues 2 x 49 elements of each o row, two steps ahead
    (``ROW_PREFETCH_NEAR_A2``)."""
    monkeypatch.setattr(plan_mod, "vector_bytes", lambda: 64)
    monkeypatch.setattr(plan_mod, "llc_bytes", lambda: 32 << 20)
    args = ((256, 1024, 7, 7), "oihw", "OIhw16i16o", "f32", "bf16")
    p = plan_of(*args)
    assert p.nt and p.tile.a2 is not None and plan_mod.tile_rows(p.ir, p.tile) == 32, p.describe()
    assert p.row_prefetch == 4 * 2 * 49 and p.row_prefetch_l2, p.describe()  # (392 B a step)
    monkeypatch.setattr(plan_mod, "ROW_PREFETCH_NEAR_A2", False)
    assert plan_of(*args).row_prefetch == 0


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt,step,steps", [
    ((2048, 1024, 3, 3), "oihw", "OIhw4i16o4i", "f32", "s8", 36, 11),     # 144 B a step: 1.5 KB
    ((1024, 512, 7, 7), "oihw", "OIhw4i16o4i", "f32", "s8", 196, 2),      # 784 B: two steps
    ((4, 17, 768, 200), "IhwO48i4o", "gIwO8i2o", "f32", "f32", 8, 48),    # 16 rows, 32 B steps
    ((96, 24, 110, 64), "IhwO16o16i4o", "gIOw16o16i", "f32", "s8", 16, 2),  # 64 rows of 64 B
    ((56, 56, 192, 32), "OIhw16o16i2o", "gOwI8o4i", "f32", "bf16", 16, 2),  # 32 rows of 64 B
])
def test_near_prefetch_goes_a_few_lines_ahead(monkeypatch, dims, stag, dtag, sdt, ddt, step, steps):
    """``ROW_PREFETCH_NEAR_MIN_BYTES``: at least 1.5 KB ahead, except tiles of over 16 rows
    with short steps (two steps ahead); two steps when off."""
    monkeypatch.setattr(plan_mod, "vector_bytes", lambda: 64)
    monkeypatch.setattr(plan_mod, "llc_bytes", lambda: 32 << 20)
    p = plan_of(dims, stag, dtag, sdt, ddt)
    assert p.tile.a2 is not None and p.row_prefetch == steps * step and p.row_prefetch_l2, p.describe()
    monkeypatch.setattr(plan_mod, "ROW_PREFETCH_NEAR_MIN_BYTES", 0)
    assert plan_of(dims, stag, dtag, sdt, ddt).row_prefetch == 2 * step


# (nt_everywhere patches the module from its first use on: the plan tests come first)
PERIOD_CASES = [
    ((32, 48, 7, 7), "OIhw16i16o", "oihw", "f32", "f32"),      # 3 i-blocks: 49-line periods
    ((16, 32, 11, 11), "OIhw16i16o", "oihw", "f32", "f32"),    # 121 lines, 1936-row table
    ((20, 32, 5, 5), "OIhw16i16o", "oihw", "f32", "f32"),      # O padded (20 of 32)
    ((3, 16, 32, 5, 5), "gOIhw16i16o", "goihw", "f32", "f32"),  # groups outside
    ((32, 32, 3, 3), "OIhw16i16o", "oihw", "bf16", "f32"),     # widening (32-byte plans:
]                                                              # 64-byte ones take cols)


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", PERIOD_CASES)
def test_period_prefetch_is_exact(nt_everywhere, request, dims, stag, dtag, sdt, ddt):
    if sdt != ddt:
        request.getfixturevalue("plans_32")
    k = build(M(dims, sdt, stag), M(dims, ddt, dtag))
    p = k.plan
    assert p.nt and p.tile.a2 is not None and p.prefetch, p.describe()
    share = 16 * 16 * M(dims, sdt, stag).dtype.size  # 16 rows of 16 o, one line's call
    assert f"prefetch({-(-share // 64) * 64}, l2_only=True)" in k.source, k.source
    ref.check_exact_at_offsets(k, sum(dims))


ROW_CASES = [
    ((64, 48, 8, 8), "oihw", "OIhw4i16o4i", "f32", "f32"),
    ((32, 20, 5, 5), "oihw", "OIhw4i16o4i", "bf16", "f32"),       # i padded (20 of 32)
    ((2, 32, 64, 7, 5), "goihw", "gOIhw4i16o4i", "bf16", "bf16"),
    ((32, 64, 11, 11), "oihw", "OIhw16o16i", "f32", "s8"),       # 64 rows of 121, 4 o x 16 i
]


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", ROW_CASES)
def test_row_prefetch_is_exact(plans_32, nt_everywhere, dims, stag, dtag, sdt, ddt):
    k = build(M(dims, sdt, stag), M(dims, ddt, dtag))
    p = k.plan
    assert p.nt and p.tile.a2 is not None and p.row_prefetch, p.describe()
    assert "prefetch(64, l2_only=True)" in k.source, k.source
    # row 0's line at the first step's last element, one continuation ahead
    v = min(p.tile.V, p.ir.nodes[p.tile.b].extent)
    assert f"+ {p.row_prefetch + v - 1})" in k.source, k.source
    ref.check_exact_at_offsets(k, sum(dims))


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", [
    ((32, 48, 7, 7), "oihw", "OIhw4i16o4i", "f32", "s8"),       # 64 rows, 16 o x 4 i
    ((48, 20, 3, 3), "oihw", "OIhw4i16o4i", "f32", "u8"),       # i padded (20 of 32)
    ((32, 64, 7, 7), "oihw", "OIhw16i16o", "f32", "bf16"),      # 16 o x 2 i (a2 continues)
])
def test_near_row_prefetch_is_exact(nt_everywhere, dims, stag, dtag, sdt, ddt):
    k = build(M(dims, sdt, stag), M(dims, ddt, dtag))
    p = k.plan
    assert p.nt and p.tile.a2 is not None and p.row_prefetch and p.row_prefetch_l2, p.describe()
    assert "prefetch(64, l2_only=True)" in k.source, k.source
    ref.check_exact_at_offsets(k, sum(dims))


def test_row_prefetch_to_all_levels_when_switched(plans_32, nt_everywhere, monkeypatch):
    monkeypatch.setattr(plan_mod, "ROW_PREFETCH_L2", False)
    dims = (64, 48, 8, 8)
    k = build(M(dims, "f32", "oihw"), M(dims, "f32", "OIhw4i16o4i"))
    assert k.plan.row_prefetch and not k.plan.row_prefetch_l2, k.plan.describe()
    assert "prefetch(64)" in k.source and "l2_only" not in k.source, k.source
    ref.check_exact_at_offsets(k, sum(dims))


def test_covering_points_touch_every_line():
    """Row prefetches kept by ``codegen._covering_points`` touch every line that one
    prefetch per row touched, at every alignment, and drop rows that share lines."""
    import random

    from layoutjit.codegen import _covering_points

    rng = random.Random(7)
    for _ in range(300):
        ssz = rng.choice([1, 2, 4])
        gap = 64 // ssz
        pts = [rng.randrange(0, 40 * gap) for _ in range(rng.randrange(1, 20))]
        kept = _covering_points(pts, gap)
        assert set(kept) <= set(pts) and kept == [p for p in dict.fromkeys(pts) if p in set(kept)]
        for base in range(0, 64, 4):  # the source's address modulo a line
            lines = {(base + p * ssz) // 64 for p in pts}
            assert lines == {(base + p * ssz) // 64 for p in kept}, (pts, kept, base)
    assert _covering_points([14, 17, 20, 23, 398, 401, 404, 407], 16) == [14, 23, 398, 407]
    assert _covering_points([14, 17, 20, 23], 0) == [14, 17, 20, 23]

"""Tiles that write whole blocks take columns over B x C where theirs are poor
(``plan._cols_over_blocks``).

`OIhw8i16o2i -> oihw` writes, per o, blocks of (2 i) x (hw) that follow one another: a
tile of hw rows x the 2 i of a source run writes one whole block, but reads 2 elements
of each row a call (5x2 f32). `Ohwi4o -> iohw` 1-byte with I = 1024 or 2048 reads its
hw rows 4 or 8 KB apart, 4 bytes of each: nine rows share one L1 set, so every tile
reads them from L2 again (16-55x a copy). Both now take columns over the source run
B x C (2 i x 16 o, 4 o x I), placed by a table (``TileSpec.c``), and so do 1-byte 4x4
tiles whose rows are one source line (`Ohwi16o -> OIhw4o4i`: 16 bytes a call). Checked: which plans take
them and which keep their whole-block tiles, the switch, and every byte against the
reference at 1 and 2 threads (padded O and I included).
"""

from __future__ import annotations

import pytest

import layoutjit as lj
import layoutjit.plan as plan_mod
import reference as ref
from layoutjit.compiler import build, lower_and_plan

M = lj.MemoryDesc


def plan_of(s, d):
    return lower_and_plan(s, d, None)[1]


@pytest.mark.parametrize("dims, stag, dtag, dt, cols", [
    ((64, 48, 5, 1), "OIhw8i16o2i", "oihw", "f32", True),     # B = 2 i of 4 bytes
    ((64, 48, 3, 3), "OIhw8i16o2i", "oihw", "bf16", False),   # ... of 2 bytes: kept
    ((64, 48, 3, 3), "OIhw8i16o2i", "oihw", "u8", False),
    ((8, 2048, 3, 3), "Ohwi4o", "iohw", "u8", True),          # 9 rows 8 KB apart
    ((32, 1024, 5, 5), "Ohwi8o", "iohw", "s8", True),         # 25 rows 8 KB apart
    ((8, 1000, 3, 3), "Ohwi4o", "iohw", "u8", False),         # 4000 B apart: sets differ
    ((8, 2048, 3, 3), "Ohwi4o", "iohw", "bf16", True),        # 8 bytes of each row
    ((32, 2048, 3, 3), "Ohwi16o", "iohw", "u8", False),       # 16 bytes of each row
    ((64, 64, 3, 3), "OIhw16i16o", "OIhw4o4i", "f32", False),  # 4 rows of 4 f32
    ((64, 64, 3, 3), "Ohwi16o", "OIhw4o4i", "s8", True),       # 4x4 bytes, one source line
    ((64, 64, 3, 3), "IOhw16i16o", "OIhw4o4i", "u8", True),
    ((64, 64, 3, 3), "OIhw8i8o", "OIhw4o4i", "s8", False),     # rows of 8 bytes: kept
    ((64, 64, 3, 3), "OIhw4o4i", "oihw", "u8", False),         # 9 rows: kept
])
def test_which_plans_take_columns(plans_32, monkeypatch, dims, stag, dtag, dt, cols):
    s, d = M(dims, dt, stag), M(dims, dt, dtag)
    p = plan_of(s, d)
    t = p.tile
    assert t is not None and t.kind == "transpose", p.describe()
    assert (t.c is not None) == cols, p.describe()
    if cols:
        assert "x C=" in p.describe()
        monkeypatch.setattr(plan_mod, "COLS_WHOLE_BLOCKS", False)
        before = plan_of(s, d).tile
        assert before.c is None and before.rows_contiguous


def test_two_f32_columns_only_in_cache(plans_32, monkeypatch):
    """Over 3/4 of the LLC the whole-block tiles (NT stores) stay."""
    s, d = M((64, 48, 5, 1), "f32", "OIhw8i16o2i"), M((64, 48, 5, 1), "f32", "oihw")
    assert plan_of(s, d).tile.c is not None
    monkeypatch.setattr(plan_mod, "one_rule_min_bytes", lambda: 1024)
    assert plan_of(s, d).tile.c is None


def test_lines_per_l1_set():
    assert plan_mod.lines_per_l1_set(r * 8192 for r in range(9)) == 9
    assert plan_mod.lines_per_l1_set(r * 2048 for r in range(25)) == 13   # two sets
    assert plan_mod.lines_per_l1_set(r * 4000 for r in range(9)) == 1
    assert plan_mod.lines_per_l1_set(r * 64 for r in range(128)) == 2
    assert plan_mod.lines_per_l1_set([]) == 0


@pytest.mark.parametrize("dims, stag, dtag, dt", [
    ((64, 48, 5, 1), "OIhw8i16o2i", "oihw", "f32"),
    ((40, 24, 3, 3), "OIhw8i16o2i", "oihw", "f32"),    # O and I padded
    ((32, 48, 3, 3), "OIhw8i16o2i", "oihw", "bf16"),
    ((4, 8, 48, 3, 1), "gOIhw8i16o2i", "goihw", "f32"),
    ((8, 2048, 3, 3), "Ohwi4o", "iohw", "u8"),
    ((6, 2048, 3, 3), "Ohwi4o", "iohw", "u8"),         # O padded
    ((32, 1024, 5, 5), "Ohwi8o", "iohw", "s8"),
    ((64, 48, 3, 3), "Ohwi16o", "OIhw4o4i", "s8"),
    ((40, 44, 3, 3), "Ohwi16o", "OIhw4o4i", "u8"),     # O and I padded
    ((2, 32, 48, 3, 1), "gOIhw16i16o", "gOIhw4o4i", "s8"),
    ((48, 40, 3, 5), "IOhw16i16o", "OIhw4o4i", "u8"),  # I padded
])
def test_columns_over_blocks_are_exact(plans_32, monkeypatch, dims, stag, dtag, dt):
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    s, d = M(dims, dt, stag), M(dims, dt, dtag)
    k = build(s, d)
    for threads in ref.at_thread_counts((1, 2)):
        assert ref.kernel_matches_reference(k, seed=threads), k.plan.describe()

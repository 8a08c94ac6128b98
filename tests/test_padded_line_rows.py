"""Line-row transposes (``TileSpec.a2``) whose A is a padded block (``plan._padded_line_digit``).

``aebcd -> aBcde8b`` with 1 of 8 b: the destination's 8-element blocks hold one value and
seven zeros. Line rows join two e steps x 8 b into one 64-byte line; the rows past the
data are padding rows (``src_rows`` None): zeros in the registers, never read. With
several blocks (``dcba -> aBcd4b``, 13 of 16 b) only the last block's tiles have them. The tests
check every byte (destinations at several offsets, 1 and 2 threads, guard bytes around
them, zeros in the padding), with plain and NT stores, and where the rule must not apply.
"""

from __future__ import annotations

import pytest

import layoutjit as lj
import layoutjit.plan as plan_mod
import reference as ref
from layoutjit.compiler import build, lower_and_plan

M = lj.MemoryDesc
# The rule is defined for 32-byte vectors; with 64-byte ones cols tiles over the run come first.
pytestmark = pytest.mark.usefixtures("plans_32")

CASES = [
    ((4, 1, 3, 12, 12), "aebcd", "aBcde8b", "f32", "f32"),   # 1 of 8: one data row of 16
    ((6, 3, 37, 10), "abdc", "aBcd8b", "f32", "f32"),        # 3 of 8, c = 37: a tail column
    ((5, 5, 40, 6), "abdc", "aBcd16b", "f32", "bf16"),       # 5 of 16, 16-bit lines of 32
    ((3, 3, 2, 33, 8), "abced", "aBcde4b", "f32", "f32"),    # 3 of 4: four e steps a line
    ((2, 3, 64, 16), "abdc", "aBcd4b", "s8", "s8"),          # 3 of 4, 8-bit: 16 d steps a line
    ((3, 7, 64, 10), "abdc", "aBcd8b", "u8", "f32"),         # 7 of 8, widened
    ((4, 12, 37, 10), "abdc", "aBcd8b", "f32", "f32"),       # two blocks: 8 of 8, 4 of 8
    ((40, 13, 3, 8), "dcba", "aBcd4b", "f32", "f32"),        # four blocks, the last 1 of 4
    ((3, 20, 70, 4), "abdc", "aBcd16b", "bf16", "bf16"),     # 16 of 16, 4 of 16
    ((1, 6, 5, 40), "bcda", "Ohwi16o", "f32", "bf16"),       # O = 1: one data row, source stride 1
    # rows under a line apart (NEAR_PADDED_ROWS): oihw's i rows 36 B apart, i = 20 of 32
    ((16, 20, 3, 3), "oihw", "OIhw4i16o4i", "f32", "f32"),
    ((32, 20, 3, 3), "oihw", "OIhw4i16o4i", "f32", "s8"),
]


def plan_of(s, d):
    return lower_and_plan(s, d, None)[1]


def _padded_rows(p) -> bool:
    t = p.tile
    return t is not None and t.a2 is not None and p.ir.dims[p.nodes[t.a].dim].guarded


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", CASES)
def test_padded_line_rows_are_exact(stores, dims, stag, dtag, sdt, ddt):
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = build(s, d)  # not compile_reorder: its in-memory cache would share one kernel
    p = k.plan
    assert _padded_rows(p), p.describe()
    assert p.nt == (stores == "nt"), p.describe()
    ref.check_exact_at_offsets(k, sum(dims))


def test_padded_rows_are_zeros_never_read():
    """The rows table marks the padding rows; the plan text says how many rows start where."""
    dims = (4, 1, 3, 12, 12)
    p = plan_of(M(dims, "f32", "aebcd"), M(dims, "f32", "aBcde8b"))
    rows = plan_mod.src_rows(p.ir, p.tile)
    assert len(rows) == 16
    e_stride = 3 * 12  # aebcd: e's source stride (c x d)
    assert rows == (0,) + (None,) * 7 + (e_stride,) + (None,) * 7
    assert "rows start at 2 source offsets (the other 14: padding, zeros)" in p.describe()


def test_padded_line_rows_not_taken(monkeypatch):
    """An A2 whose extent is not a whole number of line periods, scales (their epilogue
    stores through a buffer), and the switch off: other tiles."""
    cases = [
        (M((2, 3, 64, 15), "s8", "abdc"), M((2, 3, 64, 15), "s8", "aBcd4b")),
    ]
    for s, d in cases:
        p = plan_of(s, d)
        assert not _padded_rows(p), (s, d, p.describe())
    s, d = M((6, 3, 37, 10), "f32", "abdc"), M((6, 3, 37, 10), "f32", "aBcd8b")
    k = lj.compile_reorder(s, d, scales={"dst": 0})
    assert not _padded_rows(k.plan), k.plan.describe()
    monkeypatch.setattr(plan_mod, "NEAR_PADDED_ROWS", False)
    assert not _padded_rows(plan_of(M((16, 20, 3, 3), "f32", "oihw"), M((16, 20, 3, 3), "f32", "OIhw4i16o4i")))
    monkeypatch.setattr(plan_mod, "_padded_line_digit", lambda *a: False)
    assert not _padded_rows(plan_of(s, d))

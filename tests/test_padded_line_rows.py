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


def _padded_rows(p, node: str = "a") -> bool:
    """Whether the plan takes line rows whose A (or A2) is a padded dim's digit."""
    t = p.tile
    if t is None or t.a2 is None:
        return False
    return p.ir.dims[p.nodes[getattr(t, node)].dim].guarded


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


# A padded A2 (``plan._padded_line_steps``): the destination's o blocks hold fewer o than 16,
# and the line's rows are A2lo (o) x A (i). Whole lines of padding (o = 24 of 32, f32: four
# o a line) or lines cut by the data's end in a one-line period (o = 40 of 48, s8: 16 o a
# line; o = 18 with i = 18: both A2 and A cut).
A2_CASES = [
    ((2, 24, 8, 7, 3), "goihw", "gOIhw4i16o4i", "f32", "f32"),   # whole lines of padding
    ((40, 36, 3, 3), "oihw", "OIhw4i16o4i", "f32", "s8"),        # 8 of 16 o in a line
    ((18, 18, 3, 3), "oihw", "OIhw4i16o4i", "f32", "f32"),       # 2 of 4 o, 2 of 4 i
    ((20, 36, 3, 3), "oihw", "OIhw8i16o2i", "bf16", "bf16"),     # 16-bit: 16 o a line
    ((3, 20, 36, 3, 3), "goihw", "gOIhw8i16o2i", "f32", "bf16"),
]


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", A2_CASES)
def test_padded_a2_line_rows_are_exact(stores, dims, stag, dtag, sdt, ddt):
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = build(s, d)
    p = k.plan
    assert _padded_rows(p, "a2"), p.describe()
    assert p.nt == (stores == "nt"), p.describe()
    ref.check_exact_at_offsets(k, sum(dims))


def test_padded_a2_rows_past_the_data_are_padding():
    """``src_rows``' valid2: the rows of A2 steps past the data are None, the others keep
    their offsets (o = 40 of 48, s8: a line is 16 o x 4 i, rows 9 and 324 elements apart)."""
    dims = (40, 36, 3, 3)
    p = plan_of(M(dims, "f32", "oihw"), M(dims, "s8", "OIhw4i16o4i"))
    full = plan_mod.src_rows(p.ir, p.tile)
    assert full == tuple(o * 36 * 9 + i * 9 for o in range(16) for i in range(4))
    cut = plan_mod.src_rows(p.ir, p.tile, valid2=8)
    assert cut == full[:32] + (None,) * 32


def test_padded_a2_not_taken(monkeypatch):
    """The switch off: other tiles; and a padded A2 whose data ends inside a line of a
    period longer than one line is refused."""
    s, d = M((2, 24, 8, 7, 3), "f32", "goihw"), M((2, 24, 8, 7, 3), "f32", "gOIhw4i16o4i")
    monkeypatch.setattr(plan_mod, "PADDED_LINE_ROWS", False)
    assert not _padded_rows(plan_of(s, d), "a2")
    r = lj.ir.DimRange(valid=40, write=48, extent=48)
    a2 = lj.ir.Node(16, 0, 1, (4, 324))
    assert plan_mod._padded_line_steps(r, a2, 16, True)
    assert not plan_mod._padded_line_steps(r, a2, 16, False)
    assert plan_mod._padded_line_steps(lj.ir.DimRange(valid=32, write=48, extent=48), a2, 16, False)
    assert not plan_mod._padded_line_steps(r, lj.ir.Node(4, 0, 4, (16, 1296)), 4, True)

"""Cols tiles that would store short pieces give way to line rows
(``plan.LINE_ROWS_OVER_COLS_BYTES``, in ``plan._transpose``).

`chwn -> nChw8c` u8: A (the 8 c of a block) makes 8-byte pieces, one per source column
of a cols tile; line rows read 8 pixels x 8 c as one line of rows, each column one whole
line. The tests force NT stores on small tensors, check every byte (several destination
offsets, 1 and 2 threads, guard bytes, padded blocks), and check where the rule must not
apply.
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


CASES = [
    ((40, 32, 4, 6), "chwn", "nChw8c", "u8", "u8"),
    ((40, 20, 4, 6), "chwn", "nChw8c", "u8", "u8"),    # c = 20 of 24: padded blocks
    ((24, 64, 16, 8), "Abcd4a", "aCdB16b16c4b", "f32", "f32"),
    ((12, 64, 3, 4), "abDC32d4c", "BcdA32b4a", "bf16", "bf16"),
    # pieces of 20 and 32 bytes from 16-byte source pieces (LINE_ROWS_OVER_COLS_WIDE_BYTES)
    ((2, 32, 32, 5, 1), "gOIhw16i16o", "goihw", "s8", "f32"),
    ((2, 32, 16, 13, 8), "ncdhw", "gOIhw8i8o", "s8", "f32"),
    ((2, 32, 24, 7, 5), "goihw", "gOIhw16i16o", "bf16", "bf16"),  # i = 24 of 32
    # pieces of 35 to 60 bytes, shorter than a line (LINE_ROWS_OVER_COLS_WIDE_BYTES = 63)
    ((32, 64, 7, 7), "OIhw16i16o", "oihw", "u8", "u8"),
    ((32, 64, 5, 7), "IOhw16i16o", "oihw", "s8", "s8"),
    ((32, 64, 3, 5), "OIhw16i16o", "oihw", "s8", "f32"),
    ((32, 64, 3, 5), "OIhw4o4i", "iohw", "f32", "f32"),
    # f32 -> bf16 pieces of 32 bytes (16 o): line rows of 2 i x 16 o (LINE_ROWS_OVER_COLS_BYTES)
    ((32, 48, 7, 7), "oihw", "OIhw16i16o", "f32", "bf16"),
    ((2, 32, 48, 5, 3), "goihw", "gOhwi16o", "f32", "bf16"),
]


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", CASES)
def test_line_rows_over_cols_is_exact(nt_everywhere, dims, stag, dtag, sdt, ddt):
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = build(s, d)
    p = k.plan
    assert p.nt and p.tile.kind == "transpose" and p.tile.a2 is not None and p.tile.c is None, p.describe()
    ref.check_exact_at_offsets(k, sum(dims))


def test_cols_kept(nt_everywhere, monkeypatch):
    """Source pieces of 4 bytes (s8 `aCdB16b16c4b -> Abcd4a`) and the switch off: cols."""
    s, d = M((8, 32, 4, 16), "s8", "aCdB16b16c4b"), M((8, 32, 4, 16), "s8", "Abcd4a")
    p = plan_of(s, d)
    assert p.tile.c is not None, p.describe()
    monkeypatch.setattr(plan_mod, "LINE_ROWS_OVER_COLS_BYTES", 0)
    monkeypatch.setattr(plan_mod, "LINE_ROWS_OVER_COLS_WIDE_BYTES", 0)
    p = plan_of(M((40, 32, 4, 6), "u8", "chwn"), M((40, 32, 4, 6), "u8", "nChw8c"))
    assert p.tile.c is not None and p.tile.a2 is None, p.describe()


def test_narrowing_keeps_cols(nt_everywhere, monkeypatch):
    """f32 -> bf16 pieces of 32 bytes take line rows by the short rule (32 B since the
    fortieth session), and keep cols tiles under the wide one alone (narrowing); the wide
    rule off: cols again."""
    dims = (4, 16, 64, 5, 3)
    p = plan_of(M(dims, "f32", "goihw"), M(dims, "bf16", "gOhwi16o"))
    assert p.tile.a2 is not None and p.tile.c is None, p.describe()
    monkeypatch.setattr(plan_mod, "LINE_ROWS_OVER_COLS_BYTES", 16)
    p = plan_of(M(dims, "f32", "goihw"), M(dims, "bf16", "gOhwi16o"))
    assert p.tile.c is not None, p.describe()
    dims = (2, 32, 32, 5, 1)
    assert plan_of(M(dims, "s8", "gOIhw16i16o"), M(dims, "f32", "goihw")).tile.a2 is not None
    monkeypatch.setattr(plan_mod, "LINE_ROWS_OVER_COLS_WIDE_BYTES", 0)
    p = plan_of(M(dims, "s8", "gOIhw16i16o"), M(dims, "f32", "goihw"))
    assert p.tile.c is not None and p.tile.a2 is None, p.describe()


PLAIN_CASES = [
    ((16, 16, 32, 3, 3), "Goihw16g", "gOIhw4i16o4i", "s8", "s8"),
    ((16, 16, 32, 3, 3), "Goihw16g", "gOIhw8i16o2i", "u8", "u8"),
    ((8, 12, 40, 3, 1), "Goihw8g", "gOIhw8i8o", "s8", "s8"),  # o = 12 of 16, i = 40 of 48
]


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", PLAIN_CASES)
def test_line_rows_over_cols_with_plain_stores(dims, stag, dtag, sdt, ddt, monkeypatch):
    """In cache (plain stores) the g-blocked weights take line rows too (LINE_ROWS_PLAIN):
    cols tiles would store 4 bytes into each of 32 rows 16 g planes apart. Exact; the
    switch off: cols again. (The suite lowers the NT thresholds: the one-thread rule that
    asked for NT stores is made to answer no.)"""
    monkeypatch.setattr(plan_mod, "_transpose_takes_nt", lambda *a: False)
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = build(s, d)
    p = k.plan
    assert p.tile.a2 is not None and p.tile.c is None, p.describe()
    ref.check_exact_at_offsets(k, sum(dims))
    monkeypatch.setattr(plan_mod, "LINE_ROWS_PLAIN", False)
    p = plan_of(s, d)
    assert p.tile.c is not None and p.tile.a2 is None, p.describe()


HALF_CASES = [
    ((32, 96, 7, 7), "OIhw16i16o", "oihw", "u8", "u8"),   # a period of whole lines: 64 i, I = 96
    ((32, 32, 5, 7), "IOhw16i16o", "oihw", "s8", "s8"),
    ((16, 96, 3, 5), "OIhw8i8o", "oihw", "bf16", "s8"),   # a narrowing conversion, lines of 32 B
    ((32, 16, 1, 7), "OIhw8i8o", "oihw", "bf16", "bf16"),  # 2-byte elements, i = 16: 16 per half
]


@pytest.mark.parametrize("nt", [False, True])
@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", HALF_CASES)
def test_line_rows_of_half_lines(monkeypatch, nt, dims, stag, dtag, sdt, ddt):
    """Where no period of whole lines divides the nodes that continue A, line rows of half
    a line take the cols tiles' place (``LINE_ROWS_HALF``): plain half-line stores, every
    byte exact at several destination offsets, 1 and 2 threads; off, cols tiles."""
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0 if nt else 1 << 40)
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = build(s, d)
    p = k.plan
    t = p.tile
    assert t.kind == "transpose" and t.a2 is not None and t.c is None, p.describe()
    assert t.R * d.dtype.size == 32, p.describe()
    ref.check_exact_at_offsets(k, sum(dims))
    monkeypatch.setattr(plan_mod, "LINE_ROWS_HALF", False)
    q = plan_of(s, d)
    assert q.tile.c is not None and q.tile.a2 is None, q.describe()

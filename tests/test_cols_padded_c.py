"""Cols tiles whose C is the lightest digit of a dim padded in the destination
(``plan.COLS_PADDED_C``, ``codegen._cols_group``): `oihw -> OIhw16i16o` with i not a
multiple of 16 and short hw. Each state's run is cut after C's valid steps; the steps
past them get zero tiles. Every byte checked (padding zeros, guard bytes, several
destination offsets, 1 and 2 threads, plain and NT stores) and the switch off."""

from __future__ import annotations

import pytest

import layoutjit as lj
import layoutjit.plan as plan_mod
import reference as ref
from layoutjit.compiler import build, lower_and_plan

M = lj.MemoryDesc

CASES = [
    ((32, 20, 3, 3), "oihw", "OIhw16i16o", "f32", "f32"),      # 20 of 32: 4 of the last 16
    ((16, 17, 7, 1), "oihw", "OIhw16i16o", "f32", "f32"),      # 1 of the last 16
    ((2, 16, 40, 1, 7), "goihw", "gOIhw16i16o", "f32", "f32"),
    ((17, 9, 5, 5), "oihw", "OIhw16i16o", "f32", "f32"),       # o padded too: rows of zeros
    ((32, 20, 3, 3), "oihw", "OIhw16i16o", "s8", "f32"),
    ((32, 20, 8, 10), "oihw", "OIhw16i16o", "s8", "f32"),     # B = 80 columns: zeros in chunks
]


def _cols_padded(p) -> bool:
    t = p.tile
    return t is not None and t.c is not None and p.ir.dims[p.nodes[t.c].dim].guarded


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", CASES)
def test_cols_padded_c_exact(stores, dims, stag, dtag, sdt, ddt):
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = build(s, d)
    p = k.plan
    assert _cols_padded(p), p.describe()
    ref.check_exact_at_offsets(k, sum(dims))


def test_cols_padded_c_not_taken(monkeypatch):
    """Narrowing into half-line pieces (f32 -> bf16) and the switch off: no padded C."""
    dims = (32, 20, 3, 3)
    assert not _cols_padded(lower_and_plan(M(dims, "f32", "oihw"), M(dims, "bf16", "OIhw16i16o"), None)[1])
    monkeypatch.setattr(plan_mod, "COLS_PADDED_C", False)
    assert not _cols_padded(lower_and_plan(M(dims, "f32", "oihw"), M(dims, "f32", "OIhw16i16o"), None)[1])

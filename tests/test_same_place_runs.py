"""Runs back to back on both sides but for their dim's padding, packed into lines
(``plan.SAME_PLACE_RUNS``): same-layout conversions of padded blocked layouts
(f32 -> bf16 `nCdhw16c` with C = 30: runs of 16 elements, 32 B, the last block's 14
valid and 2 zeros) were element loops. Every byte checked (padding zeros included) at
several destination offsets, 1 and 2 threads, plain and NT stores, and the switch off.
"""

from __future__ import annotations

import pytest

import layoutjit as lj
import layoutjit.plan as plan_mod
import reference as ref
from layoutjit.compiler import build, lower_and_plan

# the rules shown here act on the narrow IR of these 1- and 2-byte pairs
pytestmark = pytest.mark.usefixtures("narrow_elements")

M = lj.MemoryDesc

CASES = [
    ((3, 30, 2, 5, 7), "nCdhw16c", "f32", "bf16"),
    ((3, 17, 4, 8), "nChw8c", "f32", "s8"),
    ((2, 20, 4, 8), "nChw16c", "f32", "u8"),
    ((3, 17, 5, 3), "nChw8c", "f32", "s8"),      # 15 pixels: blocks off the lines
    ((5, 17, 4, 5), "nChw4c", "s8", "f32"),
    ((4, 60, 3, 5), "nChw8c", "bf16", "f32"),
    ((20, 30, 3, 3), "Ohwi16o", "f32", "s8"),
    ((2, 100, 33), "nCw16c", "f32", "bf16"),
]


@pytest.mark.parametrize("dims,tag,sdt,ddt", CASES)
def test_same_place_runs_plain(dims, tag, sdt, ddt):
    s, d = M(dims, sdt, tag), M(dims, ddt, tag)
    k = build(s, d)
    assert k.plan.tile is not None and k.plan.tile.kind == "lines", k.plan.describe()
    ref.check_exact_at_offsets(k, dims[1])


@pytest.mark.parametrize("dims,tag,sdt,ddt", CASES[:3])
def test_same_place_runs_nt(nt_everywhere, dims, tag, sdt, ddt):
    s, d = M(dims, sdt, tag), M(dims, ddt, tag)
    k = build(s, d)
    assert k.plan.nt and k.plan.tile.kind == "lines", k.plan.describe()
    ref.check_exact_at_offsets(k, dims[1])


def test_same_place_runs_switch(monkeypatch):
    s, d = M((3, 30, 2, 5, 7), "f32", "nCdhw16c"), M((3, 30, 2, 5, 7), "bf16", "nCdhw16c")
    monkeypatch.setattr(plan_mod, "SAME_PLACE_RUNS", False)
    assert lower_and_plan(s, d, None)[1].tile is None


# Same-place runs whose row node is a padded dim's digit (``plan.SAME_PLACE_PADDED``):
# `OIhw4i16o4i -> OhwI16o4i` with O = 20 (runs of 4 o x 4 i after the uniform cut; the
# last block's o steps past the data are zero rows).
PADDED_CASES = [
    ((20, 36, 3, 3), "OIhw4i16o4i", "OhwI16o4i", "s8", "s8"),
    ((36, 20, 3, 3), "OhwI16o4i", "OIhw4i16o4i", "s8", "s8"),
    ((10, 20, 3, 3), "OIhw4i16o4i", "OhwI16o4i", "f32", "f32"),
    ((3, 100, 20, 3, 3), "gOIhw4i16o4i", "gOhwI16o4i", "f32", "s8"),
    ((13, 1, 13, 12, 6), "BcdeA16b4a", "BAcde2b8a16b4a", "bf16", "f32"),
]


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", PADDED_CASES)
def test_same_place_padded_rows(stores, dims, stag, dtag, sdt, ddt):
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = build(s, d)
    p = k.plan
    assert p.tile is not None and p.tile.kind == "lines", p.describe()
    A = p.nodes[p.tile.a]
    assert A.dim is not None and p.ir.dims[A.dim].guarded, p.describe()
    ref.check_exact_at_offsets(k, sum(dims))


def test_same_place_padded_switch(monkeypatch):
    s, d = M((20, 36, 3, 3), "s8", "OIhw4i16o4i"), M((20, 36, 3, 3), "s8", "OhwI16o4i")
    monkeypatch.setattr(plan_mod, "SAME_PLACE_PADDED", False)
    assert lower_and_plan(s, d, None)[1].tile is None

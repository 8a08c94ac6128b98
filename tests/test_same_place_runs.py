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

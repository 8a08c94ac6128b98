"""Transposes widening into 4-byte elements with destination rows 4 KB or more apart take
enough tiles per step that each row gets ``plan.WIDE_ROW_VISIT_BYTES`` per visit
(ndhwc -> ncdhw s8 -> f32: one plane per channel). Exact at 1 and 2 threads with NT
stores forced, tails included; 2-byte destinations and close rows keep their tiles."""

from __future__ import annotations

import pytest

import layoutjit as lj
import layoutjit.plan as plan_mod
import reference as ref
from layoutjit.compiler import lower_and_plan

M = lj.MemoryDesc


@pytest.mark.parametrize("dims,stag,dtag,sdt", [
    ((2, 40, 3, 8, 45), "ndhwc", "ncdhw", "s8"),
    ((2, 24, 33, 40), "nhwc", "nchw", "u8"),
    ((2, 40, 36, 30), "nhwc", "nchw", "bf16"),
])
def test_wide_row_visits_exact(nt_everywhere, dims, stag, dtag, sdt):
    k = lj.compile_reorder(M(dims, sdt, stag), M(dims, "f32", dtag))
    p, t = k.plan, k.plan.tile
    assert p.nt and t.kind == "transpose", p.describe()
    assert t.M * t.R * 4 >= plan_mod.WIDE_ROW_VISIT_BYTES or t.M * t.R >= p.nodes[t.a].extent, p.describe()
    for threads in ref.at_thread_counts((1, 2)):
        assert ref.kernel_matches_reference(k, seed=threads)


def test_wide_row_visits_not_taken(nt_everywhere, monkeypatch):
    dims = (2, 40, 3, 8, 45)
    on = lower_and_plan(M(dims, "s8", "ndhwc"), M(dims, "f32", "ncdhw"), None)[1]
    bf = lower_and_plan(M(dims, "s8", "ndhwc"), M(dims, "bf16", "ncdhw"), None)[1]
    monkeypatch.setattr(plan_mod, "WIDE_ROW_VISIT_BYTES", 0)
    off = lower_and_plan(M(dims, "s8", "ndhwc"), M(dims, "f32", "ncdhw"), None)[1]
    bf_off = lower_and_plan(M(dims, "s8", "ndhwc"), M(dims, "bf16", "ncdhw"), None)[1]
    assert on.tile.M > off.tile.M, (on.describe(), off.describe())
    assert bf.tile.M == bf_off.tile.M, (bf.describe(), bf_off.describe())


def test_half_page_rows_take_few_columns(plans_32, nt_everywhere, monkeypatch):
    """Destination planes 2 KB apart modulo 4 KB (512 f32): tiles of at most
    HALF_PAGE_ROW_COLS columns (32-byte vectors); exact. Switch off: a vector of s8 columns."""
    dims = (2, 40, 2, 16, 16)
    k = lj.compiler.build(M(dims, "s8", "ndhwc"), M(dims, "f32", "ncdhw"))
    assert k.plan.nt and k.plan.tile.V == plan_mod.HALF_PAGE_ROW_COLS == 8, k.plan.describe()
    for threads in ref.at_thread_counts((1, 2)):
        assert ref.kernel_matches_reference(k, seed=threads)
    monkeypatch.setattr(plan_mod, "HALF_PAGE_ROW_COLS", 0)
    p = lower_and_plan(M(dims, "s8", "ndhwc"), M(dims, "f32", "ncdhw"), None)[1]
    assert p.tile.V > 8, p.describe()


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt,cols,exact", [
    ((512, 2000), "ab", "ba", "f32", "f32", 16, True),          # rows of 16 f32: a line each
    ((2, 40, 2, 16, 16), "ndhwc", "ncdhw", "s8", "f32", 16, True),
    ((8, 48, 384, 299, 2), "hwigo", "Oidhw8o", "s8", "s8", 8, False),  # rows of 8 bytes
])
def test_half_page_rows_wide_vectors(nt_everywhere, monkeypatch, dims, stag, dtag, sdt, ddt, cols, exact):
    """With 64-byte vectors, tiles whose rows are whole destination lines take
    HALF_PAGE_ROW_COLS_WIDE columns (16); shorter rows keep HALF_PAGE_ROW_COLS; exact."""
    monkeypatch.setattr(plan_mod, "vector_bytes", lambda: 64)
    p = lower_and_plan(M(dims, sdt, stag), M(dims, ddt, dtag), None)[1]
    t = p.tile
    assert t.kind == "transpose" and t.V == cols, p.describe()
    assert (p.ir.nodes[t.b].strides[0] * p.ir.operands[0].dtype.size) % 4096 == 2048
    if exact:
        k = lj.compiler.build(M(dims, sdt, stag), M(dims, ddt, dtag))
        assert k.plan.tile.V == cols
        assert ref.kernel_matches_reference(k, seed=1)
    monkeypatch.setattr(plan_mod, "HALF_PAGE_ROW_COLS_WIDE", 0)
    assert lower_and_plan(M(dims, sdt, stag), M(dims, ddt, dtag), None)[1].tile.V == 8

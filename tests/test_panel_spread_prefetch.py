"""Panels that spread their prefetch over their tile calls, and scratch buffers in their page.

A panel job (one block of V short destination rows) whose source rows follow one another
prefetches its share of the next outer index's block to L2 (``panel_prefetch``). With
``Plan.panel_spread`` the share goes a piece before each tile call, in order. The tests
check the plans at real sizes (no kernel built) and the generated calls, and run such
kernels byte for byte against the numpy reference: tail blocks, conversions, 1- to 4-byte
elements, destinations at offsets within a line and one misaligned for its type, at 1 and
2 threads, guard bytes around the destination. ``codegen.scratch`` is checked by running
the lines it generates: every buffer at its slot in a page, of the asked length.
"""

from __future__ import annotations

import re

import numba as nb
import numpy as np
import pytest

import layoutjit as lj
import layoutjit.codegen as cg
import layoutjit.plan as plan_mod
import reference as ref
from layoutjit.compiler import build, lower_and_plan
from layoutjit.dtypes import as_dtype

M = lj.MemoryDesc


def plan_of(s, d):
    return lower_and_plan(s, d, None)[1]


@pytest.mark.parametrize("dims,stag,dtag,dt", [
    ((1024, 384, 7, 7), "nhwc", "nchw", "f32"),
    ((1024, 800, 56), "nwc", "ncw", "f32"),
])
def test_plans_at_real_sizes(monkeypatch, dims, stag, dtag, dt):
    monkeypatch.setattr(plan_mod, "vector_bytes", lambda: 64)
    monkeypatch.setattr(plan_mod, "llc_bytes", lambda: 32 << 20)
    p = plan_of(M(dims, dt, stag), M(dims, dt, dtag))
    assert p.panel and p.panel_blocks == 1 and p.prefetch and p.panel_spread, p.describe()
    assert "spread over its tile calls" in p.describe()
    monkeypatch.setattr(plan_mod, "PANEL_SPREAD_PREFETCH", False)
    p = plan_of(M(dims, dt, stag), M(dims, dt, dtag))
    assert p.panel and p.prefetch and not p.panel_spread and "spread" not in p.describe()


def test_panels_without_a_prefetch_or_with_wide_jobs_do_not_spread(monkeypatch):
    monkeypatch.setattr(plan_mod, "vector_bytes", lambda: 64)
    monkeypatch.setattr(plan_mod, "llc_bytes", lambda: 32 << 20)
    dims = (200, 2048, 7, 7)
    p = plan_of(M(dims, "f32", "nChw16c"), M(dims, "f32", "nchw"))  # one tile step's rows: in order
    assert p.panel and p.panel_blocks == 1 and not p.prefetch and not p.panel_spread, p.describe()
    dims = (256, 200, 13, 13)  # wide panels: their calls take their shares already
    p = plan_of(M(dims, "f32", "nchw"), M(dims, "bf16", "nhwc"))
    assert p.panel and p.panel_blocks > 1 and not p.panel_spread, p.describe()


@pytest.fixture(scope="module")
def one_block_panels():
    mp = pytest.MonkeyPatch()
    mp.setattr(plan_mod, "NT_MIN_BYTES", 0)
    mp.setattr(plan_mod, "PANEL_WIDE_BYTES", 0)  # one block of V rows per job
    mp.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)  # jobs split between threads
    yield
    mp.undo()


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", [
    ((3, 40, 7, 7), "nhwc", "nchw", "f32", "f32"),       # a tail block of 8 rows, 4 tile calls
    ((2, 70, 5, 7), "nhwc", "nchw", "bf16", "bf16"),     # rows of 35: a 32-row tile and 3
    ((2, 37, 6, 6), "acdb", "abcd", "f32", "bf16"),      # narrowing into 2-byte rows
    ((2, 130, 9, 9), "nhwc", "nchw", "s8", "s8"),        # 1-byte rows of 81
])
def test_spread_panels_are_exact(one_block_panels, dims, stag, dtag, sdt, ddt):
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = build(s, d)
    p = k.plan
    assert p.panel and p.panel_spread, p.describe()
    # one prefetch before each tile call (the loop's calls and the tail's), pfo advancing
    calls = len(re.findall(r"^\s+T\d+\(src, so \+ .*, stage, ", k.source, re.M))
    assert calls >= 2 and len(re.findall(r"\(src, pfo\)$", k.source, re.M)) == calls, k.source
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, sdt, rng)
    n = d.get_size()
    expect = ref.reorder(x, s, d, np.zeros(n // d.dtype.size, d.dtype.storage)).view(np.uint8)
    # aligned, partial lines at both ends of every panel, misaligned for the type (plain path)
    ref.check_guarded_runs(k, x, expect, sorted({0, d.dtype.size, 24, 1}))


def test_spread_switch_gives_the_same_bytes(one_block_panels, monkeypatch):
    dims = (3, 40, 7, 7)
    s, d = M(dims, "f32", "nhwc"), M(dims, "f32", "nchw")
    on = build(s, d)
    assert on.plan.panel_spread and "(src, pfo)" in on.source
    monkeypatch.setattr(plan_mod, "PANEL_SPREAD_PREFETCH", False)
    off = build(s, d)
    assert not off.plan.panel_spread and "pfo" not in off.source and "prefetch(" in off.source
    x = np.arange(s.get_size() // 4, dtype=np.float32)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // 4, np.float32))
    assert np.array_equal(on(x), expect) and np.array_equal(off(x), expect)


@pytest.mark.parametrize("dt", ["u8", "bf16", "f32", "f64"])
@pytest.mark.parametrize("name,elems", [("stage", 200), ("carry", 700), ("edge", 16), ("jcarry", 5000),
                                        ("other", 33)])
def test_scratch_buffers_start_at_their_page_slot(name, elems, dt):
    """The lines ``scratch`` generates, run: the buffer has ``elems`` elements and starts at
    its slot of a 4 KB page, or at the page's start where the slot leaves too little room."""
    dty = as_dtype(dt)
    body = "\n".join("    " + line for line in cg.scratch(name, elems, dty))
    code = f"def f():\n{body}\n    return {name}.ctypes.data, {name}.size\n"
    ns = {"np": np}
    exec(code, ns)
    addr, size = nb.njit(ns["f"])()
    at = cg.SCRATCH_SLOTS.get(name, 0)
    if at + elems * dty.size > 4096:
        at = 0
    assert size == elems and addr % 4096 == at, code


def test_scratch_pages_can_be_switched_off(monkeypatch):
    monkeypatch.setattr(cg, "SCRATCH_PAGE", False)
    assert cg.scratch("stage", 12, as_dtype("f32")) == ["stage = np.empty(12, np.float32)"]

"""Rows of runs walked in turn only when a row has few runs (``codegen.ROWS_INNER_MAX_COLS``).

`nhwc -> nChw16c` f32 is a "lines" plan: a pixel (row) holds C/16 runs, one for each
destination plane (column). With a few planes each pixel's runs go in turn (read in
order); with more than ``ROWS_INNER_MAX_COLS`` the columns go outer, each plane taking
the macro group's lines in a row. Checked: which order the generated source takes (one
column loop per row, or one column loop around every row's call), at the limit and past
it, the switch, and every byte at 1 and 2 threads.
"""
from __future__ import annotations

import re

import pytest

import layoutjit as lj
import layoutjit.codegen as cg
import layoutjit.plan as plan_mod
import reference as ref
from layoutjit.compiler import build

M = lj.MemoryDesc


@pytest.fixture(autouse=True)
def _jobs(monkeypatch):
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)


def _column_loops(source: str) -> int:
    """Column loops in the kernel's body (every branch: aligned and not)."""
    body = source[source.index("def kernel"):]
    return len(re.findall(r"for c\d+ in range\(0, \d+\):", body))


@pytest.mark.parametrize("dims, stag, dtag, cols_outer", [
    ((2, 256, 5, 7), "nhwc", "nChw16c", False),     # 16 runs a row: rows inner
    ((2, 272, 5, 7), "nhwc", "nChw16c", True),      # 17 runs: the columns outer
    ((2, 1024, 3, 5, 7), "ndhwc", "nCdhw16c", True),  # 64 runs a row
    ((3, 520, 40), "nwc", "nCw16c", True),          # 33 runs, the last one padded
])
def test_row_order_by_runs_per_row(dims, stag, dtag, cols_outer):
    s, d = M(dims, "f32", stag), M(dims, "f32", dtag)
    k = build(s, d)
    t = k.plan.tile
    assert t.kind == "lines" and t.R == 1, k.plan.describe()
    rows, cols = k.plan.ir.nodes[t.a].extent, k.plan.ir.nodes[t.b].extent
    assert rows > cols and (cols > cg.ROWS_INNER_MAX_COLS) == cols_outer
    # rows inner: a column loop per row of a macro group (16); columns outer: one per group
    groups = -(-rows // t.M)
    n = _column_loops(k.source)
    if cols_outer:
        assert n <= 2 * groups, k.source
    else:
        assert n >= t.M, k.source
    for threads in ref.at_thread_counts((1, 2)):
        assert ref.kernel_matches_reference(k, seed=threads), k.plan.describe()


def test_rows_inner_switch(monkeypatch):
    s, d = M((2, 512, 5, 7), "f32", "nhwc"), M((2, 512, 5, 7), "f32", "nChw16c")
    outer = build(s, d)
    monkeypatch.setattr(cg, "ROWS_INNER_MAX_COLS", 64)
    inner = build(s, d)
    assert _column_loops(inner.source) > _column_loops(outer.source)
    assert ref.kernel_matches_reference(inner, seed=5)
    assert ref.kernel_matches_reference(outer, seed=6)

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


def _calls_per_column_loop(source: str) -> int:
    """Most micro-kernel calls in one column loop's body: 1 with rows inner (a loop per
    row), a macro group's rows with the columns outer."""
    lines, most = source.splitlines(), 0
    for i, line in enumerate(lines):
        if re.match(r"\s*for c\d+ in range\(", line):
            ind = len(line) - len(line.lstrip())
            calls = 0
            for nxt in lines[i + 1:]:
                if len(nxt) - len(nxt.lstrip()) <= ind:
                    break
                calls += bool(re.match(r"\s*T\d+\(src,", nxt))
            most = max(most, calls)
    return most


@pytest.mark.parametrize("dims, stag, dtag, cols_outer", [
    # a row's runs follow in the source and the next row follows them: rows inner
    ((2, 128, 5, 7), "nhwc", "nChw16c", False),
    # weights whose rows lie apart in the source (a row: 12 runs, the next one 3840 B on)
    ((64, 192, 5, 1), "ohwi", "IOhw16o16i", True),
    ((40, 48, 3, 1), "ohwi", "IOhw16o16i", True),      # O padded
    # rows that follow, but plain stores to 16 planes 36 KB apart: one L1 set a row
    ((256, 64, 3, 3), "hwio", "Ohwi16o", True),
    ((256, 48, 3, 3), "hwio", "Ohwi16o", False),       # planes 27 KB apart: sets differ
])
def test_rows_inner_only_where_the_source_follows(dims, stag, dtag, cols_outer, monkeypatch):
    """``codegen.ROWS_INNER_SRC_RUNS``: rows inner where each row is the source's next
    block and plain stores spread a row's lines over L1 sets; columns outer elsewhere
    (and every order where the switch is off), every byte as the reference's."""
    s, d = M(dims, "f32", stag), M(dims, "f32", dtag)
    k = build(s, d)
    t = k.plan.tile
    assert t.kind == "lines" and t.R == 1 and not k.plan.nt, k.plan.describe()
    rows, cols = k.plan.ir.nodes[t.a].extent, k.plan.ir.nodes[t.b].extent
    assert rows > cols and cols <= cg.ROWS_INNER_MAX_COLS
    assert (_calls_per_column_loop(k.source) > 1) == cols_outer, k.source
    for threads in ref.at_thread_counts((1, 2)):
        assert ref.kernel_matches_reference(k, seed=threads), k.plan.describe()
    monkeypatch.setattr(cg, "ROWS_INNER_SRC_RUNS", False)
    before = build(s, d)
    assert _calls_per_column_loop(before.source) == 1
    if cols_outer:
        assert ref.kernel_matches_reference(before, seed=3)


def test_rows_inner_with_nt_stores(nt_everywhere, monkeypatch):
    """NT stores write whole lines without allocating them: the 16 planes 36 KB apart
    keep rows inner in the NT branch (aligned destinations), columns outer in the plain
    one; kernels that time their store kind (``Plan.nt_tune``) keep rows inner in both."""
    dims = (256, 64, 3, 3)
    s, d = M(dims, "f32", "hwio"), M(dims, "f32", "Ohwi16o")
    monkeypatch.setattr(plan_mod, "NT_TUNE", False)
    k = build(s, d)
    assert k.plan.nt and not k.plan.nt_tune and k.plan.tile.kind == "lines", k.plan.describe()
    nt_branch, plain_branch = k.source.split("\n    else:\n")
    assert _calls_per_column_loop(nt_branch) == 1
    assert _calls_per_column_loop(plain_branch) == k.plan.tile.M
    for threads in ref.at_thread_counts((1, 2)):
        assert ref.kernel_matches_reference(k, seed=threads), k.plan.describe()
    monkeypatch.setattr(plan_mod, "NT_TUNE", True)
    timed = build(s, d)
    assert timed.plan.nt_tune, timed.plan.describe()
    assert _calls_per_column_loop(timed.source) == 1

"""Tall transpose tiles prefetch their long source rows (``Plan.row_stream_prefetch``).

f32 -> s8 `ba -> ab` 1999x8192: 64x8 tiles read 32 B of 64 rows 7996 B apart, off the
lines; the hardware prefetchers do not follow 64 such streams, and a group of them is too
large for the group prefetch. Each tile call prefetches, 512 B ahead, the rows of its
share (the calls of one line's column steps take turns over the rows). Checked: the plans
that take it and those that do not (rows on the lines, 16-row tiles, rows that the group
prefetch reads, short rows, the switch), the prefetches in the generated source, and every
byte (column tails included) at 1 and 2 threads.
"""
from __future__ import annotations

import pytest

import layoutjit as lj
import layoutjit.plan as plan_mod
import reference as ref
from layoutjit.compiler import build, lower_and_plan

M = lj.MemoryDesc


@pytest.fixture(autouse=True)
def _nt_and_jobs(monkeypatch):
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)


@pytest.mark.parametrize("dims, stag, dtag, sdt, ddt", [
    # (X, Y): Y source rows of X elements; destination rows of Y elements on the lines
    # (groups of more than PREFETCH_MAX_BLOCK: no group prefetch)
    ((601, 1024), "ba", "ab", "f32", "s8"),   # 64x8 tiles, rows of 2404 B, a column tail of 1
    ((601, 1024), "ba", "ab", "f32", "u8"),
    ((2100, 128), "ba", "ab", "s8", "s8"),    # 64-row tiles, rows of 2100 B
    ((2100, 64), "ba", "ab", "bf16", "bf16"),  # 32-row tiles, rows of 4200 B
])
def test_tall_tiles_prefetch_long_rows_off_the_lines(dims, stag, dtag, sdt, ddt):
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = build(s, d)
    p = k.plan
    assert p.tile.kind == "transpose" and p.tile.R >= 32 and p.nt, p.describe()
    assert p.row_stream_prefetch == plan_mod.ROW_STREAM_AHEAD, p.describe()
    assert "long rows off the lines" in p.describe()
    ssz = s.dtype.size
    assert f"+ {plan_mod.ROW_STREAM_AHEAD // ssz})" in k.source, k.source
    for threads in ref.at_thread_counts((1, 2)):
        assert ref.kernel_matches_reference(k, seed=threads), p.describe()


@pytest.mark.parametrize("dims, stag, dtag, sdt, ddt, why", [
    ((320, 256), "ba", "ab", "f32", "s8", "rows of 1280 B: on the lines"),
    ((601, 192), "ba", "ab", "f32", "f32", "16-row tiles"),
    ((301, 192), "ba", "ab", "f32", "s8", "rows of 1204 B: the group prefetch reads them"),
    ((40, 192), "ba", "ab", "f32", "s8", "rows of 160 B"),
])
def test_no_row_stream_prefetch(dims, stag, dtag, sdt, ddt, why):
    p = lower_and_plan(M(dims, sdt, stag), M(dims, ddt, dtag), None)[1]
    assert p.row_stream_prefetch == 0, (why, p.describe())


def test_row_stream_prefetch_switch(monkeypatch):
    s, d = M((601, 1024), "f32", "ba"), M((601, 1024), "s8", "ab")
    assert lower_and_plan(s, d, None)[1].row_stream_prefetch
    monkeypatch.setattr(plan_mod, "ROW_STREAM_PREFETCH", False)
    k = build(s, d)
    assert k.plan.row_stream_prefetch == 0
    assert ref.kernel_matches_reference(k, seed=3)


@pytest.mark.parametrize("dims, tag, dt", [
    # (groups of 64 rows over PREFETCH_MAX_BLOCK: no group prefetch)
    ((8, 64, 56, 56), "nchw", "bf16"),    # 64 rows of 6272 B on the lines (128 mod 2048)
    ((8, 64, 57, 57), "nchw", "f16"),     # rows of 6498 B: off the lines, the first rule
    ((8, 96, 56, 56), "nchw", "bf16"),    # 96 rows: a row tail of 32
])
def test_two_byte_rows_on_the_lines_prefetch(dims, tag, dt):
    """2-byte copies into nhwc from rows on the lines, not a multiple of 2 KB apart: 1 KB
    ahead (``ROW_STREAM_LINED_AHEAD``); the prefetches in the source, every byte."""
    s, d = M(dims, dt, tag), M(dims, dt, "nhwc")
    k = build(s, d)
    p = k.plan
    row = dims[2] * dims[3] * 2
    lined = row % 64 == 0
    want = plan_mod.ROW_STREAM_LINED_AHEAD if lined else plan_mod.ROW_STREAM_AHEAD
    assert p.row_stream_prefetch == want, p.describe()
    assert ("2-byte rows on the lines" if lined else "long rows off the lines") in p.describe()
    assert f"+ {want // 2})" in k.source, k.source
    for threads in ref.at_thread_counts((1, 2)):
        assert ref.kernel_matches_reference(k, seed=threads), p.describe()


@pytest.mark.parametrize("dims, tag, sdt, ddt, why", [
    ((8, 64, 48, 64), "nchw", "bf16", "bf16", "rows of 6 KB (2 KB modulo 4 KB)"),
    ((1, 64, 32, 32), "nchw", "bf16", "bf16", "rows of 2 KB: the group prefetch"),
    ((8, 64, 40, 40), "nchw", "f32", "bf16", "a conversion"),
    ((8, 128, 40, 80), "nchw", "u8", "u8", "1-byte elements"),
])
def test_no_prefetch_of_other_rows_on_the_lines(dims, tag, sdt, ddt, why, monkeypatch):
    p = lower_and_plan(M(dims, sdt, tag), M(dims, ddt, "nhwc"), None)[1]
    assert p.row_stream_prefetch == 0, (why, p.describe())


def test_lined_prefetch_switch(monkeypatch):
    s, d = M((8, 64, 56, 56), "bf16", "nchw"), M((8, 64, 56, 56), "bf16", "nhwc")
    assert lower_and_plan(s, d, None)[1].row_stream_prefetch
    monkeypatch.setattr(plan_mod, "ROW_STREAM_LINED_AHEAD", 0)
    assert lower_and_plan(s, d, None)[1].row_stream_prefetch == 0

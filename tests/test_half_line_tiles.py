"""Transposes whose short source rows follow one another read half a line of each
(``plan._half_line_tiles``); with 64-byte vectors only where their groups of rows divide
A evenly, and narrowing conversions only in rows under ``HALF_LINE_MAX_ROW_WIDE``.
Plans only, at real sizes (no kernel built): they hold on any host.
"""

from __future__ import annotations

import pytest

import layoutjit as lj
import layoutjit.plan as plan_mod
from layoutjit.compiler import lower_and_plan

M = lj.MemoryDesc
HALF = "tiles read half a line of each"


def describe(dims, stag, dtag, sdt, ddt):
    return lower_and_plan(M(dims, sdt, stag), M(dims, ddt, dtag), None)[1].describe()


@pytest.fixture
def wide(monkeypatch):
    monkeypatch.setattr(plan_mod, "vector_bytes", lambda: 64)
    monkeypatch.setattr(plan_mod, "llc_bytes", lambda: 32 << 20)


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt,half", [
    ((64, 64, 56, 56), "nhwc", "nchw", "f32", "f32", True),        # rows of 256 B, 3136 = 49 x 64
    ((4096, 48, 9, 9), "nchw", "nhwc", "f32", "f32", True),        # 48 rows: one group
    ((12000, 1000), "ab", "ba", "f32", "f32", True),               # long rows, not narrowing
    ((1598, 96, 3, 5, 5), "ncdhw", "ndhwc", "f32", "f32", False),  # 96 rows: 64 + 32
    ((64, 128, 28, 28), "nhwc", "nchw", "f32", "f32", True),       # 784 rows: 12 groups + 16
    ((256, 384, 13, 13), "nchw", "nhwc", "f32", "bf16", False),    # narrowing, rows of 676 B
    ((64, 64, 56, 56), "nhwc", "nchw", "f32", "bf16", True),       # narrowing, rows of 256 B
    ((32, 512, 56, 112), "nhwc", "nchw", "s8", "f32", True),       # 1-byte rows: 256-row groups
])
def test_half_lines_with_64_byte_vectors(wide, dims, stag, dtag, sdt, ddt, half):
    assert (HALF in describe(dims, stag, dtag, sdt, ddt)) == half


def test_the_narrowing_limit_is_a_switch(wide, monkeypatch):
    monkeypatch.setattr(plan_mod, "HALF_LINE_MAX_ROW_WIDE", 4096)
    assert HALF in describe((256, 384, 13, 13), "nchw", "nhwc", "f32", "bf16")


"""Prefetched row groups of 1-byte transposes hold at most 32 KB of source
(``plan.PREFETCH_BYTE_GROUP_BLOCK``) with 64-byte vectors, in rows under 448 B.

s8 `nhwc -> nchw` 64x256x56x56: 64x16 tiles read 16 B of each of the group's rows a step,
and each source line is read again at the next three steps; 512 rows (128 KB groups) are
512 lines a step, all of L1. Plans only, at real sizes (no kernel built).
"""

from __future__ import annotations

import pytest

import layoutjit as lj
import layoutjit.plan as plan_mod
from layoutjit.compiler import lower_and_plan

M = lj.MemoryDesc


@pytest.fixture(autouse=True)
def wide(monkeypatch):
    monkeypatch.setattr(plan_mod, "vector_bytes", lambda: 64)
    monkeypatch.setattr(plan_mod, "llc_bytes", lambda: 32 << 20)


def tile_of(dims, stag, dtag, sdt, ddt):
    p = lower_and_plan(M(dims, sdt, stag), M(dims, ddt, dtag), None)[1]
    assert p.nt and p.prefetch, p.describe()
    return p.tile


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt,rows,before", [
    ((64, 256, 56, 56), "nhwc", "nchw", "s8", "s8", 128, 512),         # rows of 256 B: 32 KB
    ((16, 128, 112, 112), "nhwc", "nchw", "s8", "s8", 256, 512),       # rows of 128 B
    ((32, 256, 56, 56), "nhwc", "nchw", "bf16", "bf16", None, None),   # 2-byte: as before
    ((262144, 512), "ab", "ba", "s8", "s8", None, None),               # rows of 512 B: as before
])
def test_byte_groups(monkeypatch, dims, stag, dtag, sdt, ddt, rows, before):
    t = tile_of(dims, stag, dtag, sdt, ddt)
    monkeypatch.setattr(plan_mod, "PREFETCH_BYTE_GROUP_BLOCK", 1 << 17)
    old = tile_of(dims, stag, dtag, sdt, ddt)
    if rows is None:
        assert (t.R, t.M) == (old.R, old.M)
    else:
        assert (t.R * t.M, old.R * old.M) == (rows, before)

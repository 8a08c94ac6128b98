"""The NT thresholds count a sparse source in the lines its reads touch
(``plan.memory_traffic``, ``LINE_TRAFFIC``).

f32 -> s8 `nCw16c -> nwc` with C = 4 reads 16 bytes of each 64-byte source block: the
elements moved are 5 bytes a position, the memory moves 64 + 1. The estimate is checked
against that arithmetic, the switch and the ratio gate, and the plan it changes (NT stores
where the elements alone stay under the threshold) is checked exact.
"""

from __future__ import annotations

import pytest

import layoutjit as lj
import layoutjit.plan as plan_mod
import reference as ref
from layoutjit.compiler import build, lower_and_plan

M = lj.MemoryDesc


def traffic_of(dims, stag, dtag, sdt, ddt):
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    p = lower_and_plan(s, d, None)[1]
    return plan_mod.memory_traffic(p.ir, p.bytes_moved), p.bytes_moved


def test_sparse_blocks_count_whole_lines():
    t, moved = traffic_of((512, 4, 1000), "nCw16c", "nwc", "f32", "s8")
    n = 512 * 1000
    assert moved == n * 4 * 5
    assert t == n * 4 * 1 + n * 64  # every pixel's 64-byte block read, 4 bytes written
    t, moved = traffic_of((512, 2, 1000), "nCw16c", "nwc", "f32", "f32")
    assert t == n * 2 * 4 + n * 64


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", [
    ((8, 13, 100), "nCw16c", "nwc", "s8", "f32"),     # 13 of 16 bytes: under twice the elements
    ((8, 64, 100), "ncw", "nwc", "f32", "f32"),       # dense rows
    ((8, 32, 100), "nCw16c", "nwc", "f32", "f32"),    # whole blocks
    ((8, 3, 100), "nCw8c", "nwc", "f32", "f32"),      # 12 of 32 bytes: under twice
])
def test_dense_enough_sources_keep_the_elements(dims, stag, dtag, sdt, ddt):
    t, moved = traffic_of(dims, stag, dtag, sdt, ddt)
    assert t == moved


def test_the_switch_and_the_plan(monkeypatch):
    """Below the NT threshold by elements, above it by lines: NT stores, exact at several
    destination offsets (plain again with the switch off)."""
    dims = (64, 4, 160)  # 41 KB of elements, 700 KB of lines
    s, d = M(dims, "f32", "nCw16c"), M(dims, "s8", "nwc")
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 256 * 1024)
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 4096)
    k = build(s, d)
    assert k.plan.nt, k.plan.describe()
    ref.check_exact_at_offsets(k, 7)
    monkeypatch.setattr(plan_mod, "LINE_TRAFFIC", False)
    assert not lower_and_plan(s, d, None)[1].nt

"""Runs that do not divide a line, packed into lines (``plan.PACKED_ODD_RUNS``), and odd
rows read to a power of two (``simd.gather(src_pow2=True)``).

``nChw16c -> nhwc`` with C = 7 (u8): each pixel's 7 bytes are the start of a 16-byte source
block; 64 runs end on a line (448 B, 7 lines), so a call packs 64 runs and reads each
8 bytes whole (the block's padding follows the data) instead of element loops that move a
byte at a time. Every byte is checked against numpy index arithmetic with random bytes in
the source's padding (which must never reach the destination), destinations at several
offsets, 1 and 2 threads, plain and NT stores; and the rule's limits: far runs (each its
own source line) of less than 16 bytes keep their plans.
"""

from __future__ import annotations

import pytest

import layoutjit as lj
import layoutjit.plan as plan_mod
import reference as ref
from layoutjit.compiler import lower_and_plan
from layoutjit.simd import gather
from test_gather_over import check_gather, lines_kernel

M = lj.MemoryDesc


@pytest.mark.parametrize("R, V, sdt, ddt, nt", [
    (64, 7, "u8", "u8", True),
    (64, 7, "u8", "u8", False),
    (16, 5, "f32", "f32", True),
    (16, 3, "f32", "f32", False),
    (32, 5, "bf16", "bf16", True),
    (16, 11, "f32", "f32", False),    # a whole register, then 3 lanes read as 4
    (16, 13, "s8", "f32", True),
])
def test_gather_reads_odd_rows_to_a_power_of_two(R, V, sdt, ddt, nt):
    g = gather(R, V, sdt, ddt, nt=nt, vbytes=32, src_pow2=True)
    check_gather(g, R, V, V, 2 * V + 5, sdt, ddt, R * V)  # the gaps: random bytes


CASES = [
    ((3, 7, 9, 13), "nChw16c", "nhwc", "u8", "u8"),        # 64 runs of 7 B a call
    ((2, 5, 11, 12), "nChw8c", "nhwc", "u8", "u8"),
    ((3, 5, 8, 9), "nChw16c", "nhwc", "bf16", "bf16"),     # 10 B runs, 32 B apart
    ((2, 13, 7, 9), "nChw16c", "nhwc", "f32", "f32"),      # far runs of 52 B: 16 a call
    ((2, 7, 3, 5, 7), "nCdhw16c", "ndhwc", "f32", "f32"),  # 28 B
    ((5, 13, 33), "nCw16c", "nwc", "s8", "f32"),
]


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", CASES)
def test_odd_runs_pack_into_lines(stores, monkeypatch, dims, stag, dtag, sdt, ddt):
    s, d, k = lines_kernel(monkeypatch, dims, stag, dtag, sdt, ddt)
    assert "src_pow2=True" in k.source, k.source[:1500]
    ref.check_exact_at_offsets(k, sum(dims))
    monkeypatch.setattr(plan_mod, "PACKED_ODD_RUNS", False)
    assert lower_and_plan(s, d, None)[1].tile is None


def test_short_far_runs_keep_their_plans():
    """f32 C = 3 from nChw16c: 12 bytes of each source line, 16 lines a call -- too few
    lines in flight (the thirtieth session's thin tiles): element loops."""
    dims = (4, 3, 16, 16)
    p = lower_and_plan(M(dims, "f32", "nChw16c"), M(dims, "f32", "nhwc"), None)[1]
    assert p.tile is None, p.describe()

"""Runs packed into lines that read past their data into the source's padding
(``simd.gather(src_over=True)``), and lines plans whose B steps end past the destination's
padding (``plan._written_steps``).

``nCdhw16c -> nCdhw8c`` with C=3: each pixel's 8 destination channels come from the first 8
of a 16-channel source block, 3 of them data. The gather reads the 8 whole (the source's
padding exists in memory) and zeroes lanes 3-7, in place of a masked load of 3; and the
calls read 32 B of each 64-byte pixel, so the rule that prefetches rows of one line stays
off. Every byte is checked against numpy index arithmetic with random bytes in the source's
padding (which must never reach the destination), destinations at several offsets, 1 and 2
threads, plain and NT stores.
"""

from __future__ import annotations

import numpy as np
import pytest

import layoutjit as lj
import layoutjit.codegen as cg
import layoutjit.plan as plan_mod
import reference as ref
from layoutjit.compiler import build
from layoutjit.simd import gather
from test_convert import ref_direct

M = lj.MemoryDesc


@pytest.mark.parametrize("R, V, Vv, sdt, ddt, nt", [
    (8, 8, 3, "f32", "u8", True),
    (8, 8, 3, "f32", "u8", False),
    (4, 8, 5, "f32", "f32", False),
    (2, 16, 3, "bf16", "bf16", True),
    (4, 16, 7, "s8", "s8", True),
    (8, 8, 6, "f32", "bf16", False),
])
def test_gather_reads_whole_rows_and_zeroes_past_vv(R, V, Vv, sdt, ddt, nt):
    g = gather(R, V, sdt, ddt, Rv=R, Vv=Vv, nt=nt, vbytes=32, src_over=True)
    check_gather(g, R, V, Vv, 2 * V, sdt, ddt, R * V + Vv)


def check_gather(g, R, V, Vv, stride, sdt, ddt, seed):
    """Run gather ``g`` once over R source rows ``stride`` apart (random bytes between
    them) into an aligned destination with guard bytes; check every byte against numpy:
    each row's first Vv elements converted, zeros up to V, the guards untouched."""
    import numba

    from layoutjit.dtypes import as_dtype

    s, d = as_dtype(sdt), as_dtype(ddt)

    @numba.njit
    def run(src, soff, sstride, dst, doff):
        g(src, soff, sstride, dst, doff)

    rng = np.random.default_rng(seed)
    src = ref.random_raw(R * stride + 8, sdt, rng).view(s.storage)  # padding: random bytes
    raw = np.full(R * V * d.size + 192, 0xAB, np.uint8)
    o = (-raw.ctypes.data) % 64 + 64
    dst = raw[o:o + R * V * d.size].view(d.storage)
    run(src, 8, stride, dst, 0)
    expect = np.zeros(R * V, d.storage)
    for r in range(R):
        expect[r * V:r * V + Vv] = ref_direct(sdt, ddt, src[8 + r * stride:8 + r * stride + Vv])
    assert np.array_equal(dst.view(np.uint8), expect.view(np.uint8))
    assert (raw[:o] == 0xAB).all() and (raw[o + R * V * d.size:] == 0xAB).all()


def lines_kernel(monkeypatch, dims, stag, dtag, sdt, ddt):
    """(src, dst, kernel) of a pair that must take a "lines" plan, split into jobs from 4 KB."""
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 4096)
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = build(s, d)
    assert k.plan.tile is not None and k.plan.tile.kind == "lines", k.plan.describe()
    return s, d, k


CASES = [
    ((4, 3, 1, 24, 37), "nCdhw16c", "nCdhw8c", "f32", "u8"),   # 3 of 8: reads 8, keeps 3
    ((4, 5, 20, 36), "nChw16c", "nChw8c", "f32", "s8"),
    ((3, 8, 20, 36), "nChw16c", "nChw8c", "f32", "bf16"),      # whole 8: no blend, no prefetch
    ((2, 21, 12, 20), "nChw16c", "nChw8c", "f32", "u8"),       # 21 of 32: blocks of 8, 8, 5
    ((3, 3, 13, 11), "nChw16c", "nChw4c", "f32", "f32"),       # 3 of 4: 16-byte pieces read whole
    ((2, 7, 9, 5), "nChw16c", "nChw4c", "f32", "f32"),         # blocks of 4 and 3
]


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", CASES)
def test_runs_past_the_destination_padding(stores, monkeypatch, dims, stag, dtag, sdt, ddt):
    s, d, k = lines_kernel(monkeypatch, dims, stag, dtag, sdt, ddt)
    p = k.plan
    if (dims[1] % 8 and dims[1] < 8) or dtag == "nChw4c":  # (4c: cg.SRC_OVER_MIN_BYTES)
        assert "src_over=True" in k.source, k.source[:1500]
    if dims[1] <= 8:
        assert not p.prefetch, p.describe()  # the calls read half of each 64-byte pixel
    ref.check_exact_at_offsets(k, sum(dims))
    if stores == "nt":  # the masked loads in place of whole rows (LAYOUTJIT_SRC_OVER=0)
        monkeypatch.setattr(cg, "SRC_OVER", False)
        k2 = build(s, d)
        assert "src_over=True" not in k2.source
        ref.check_exact_at_offsets(k2, sum(dims) + 1)


def test_whole_blocks_keep_their_prefetch():
    """C=30: both halves of each 16-channel block are read, the rows follow: prefetched."""
    s, d = M((64, 30, 14, 128, 17), "f32", "nCdhw16c"), M((64, 30, 14, 128, 17), "s8", "nCdhw8c")
    p = lj.compiler.lower_and_plan(s, d, None)[1]
    assert p.prefetch, p.describe()
    assert plan_mod._written_steps(p.ir, p.nodes[p.tile.b]) == p.nodes[p.tile.b].extent

"""Transposes out of padded blocked sources read each block row whole (``simd.tile``'s
``src_over``) instead of masking the channels past the valid ones: `nCw8c -> ncw` with C=7.

The source's padding lanes hold garbage here (random bytes over the whole buffer), so a
kernel that let them through would write it; every destination byte is checked against
numpy at 1 and 2 threads, plain and non-temporal stores, with guard bytes around it.
"""

from __future__ import annotations

import numpy as np
import pytest

import layoutjit as lj
import layoutjit.plan as plan_mod
import reference as ref

M = lj.MemoryDesc

CASES = [
    ((3, 7, 48), "nCw8c", "ncw", "f32", "f32"),
    ((2, 30, 5, 16), "nChw16c", "nchw", "f32", "f32"),       # a last block of 14: rows of 6
    ((2, 7, 4, 16), "nChw8c", "nchw", "bf16", "bf16"),
    ((2, 13, 4, 64), "nChw16c", "nchw", "s8", "s8"),
    ((2, 7, 3, 4, 16), "nCdhw8c", "ncdhw", "f32", "bf16"),
    # rows of 3 floats read as 16 B (SRC_OVER_MIN_BYTES): C = 3, and I = 3 of 16 in weights
    ((2, 3, 4, 16), "nChw16c", "nchw", "f32", "f32"),
    ((4, 32, 3, 1, 5), "gOIhw16o16i", "gOhwi16o", "f32", "u8"),
]


@pytest.mark.parametrize("nt", [False, True])
@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", CASES)
def test_padded_rows_read_whole(monkeypatch, nt, dims, stag, dtag, sdt, ddt):
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0 if nt else 1 << 40)
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = lj.compiler.build(s, d)  # not the in-memory cache: the plan changes with ``nt``
    assert "src_over=True" in k.source, k.source
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, sdt, rng)  # garbage in the padding too
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, [0, d.dtype.size])


def test_no_whole_rows_without_padding():
    """A plain source with C=7, and a submemory of a blocked one whose padded dims are its
    own (7 of a block of 8: the eighth element is not this view's), mask as before."""
    parent = M((2, 16, 48), "f32", "nCw8c")
    for s in (M((2, 7, 48), "f32", "nwc"), parent.submemory_desc((2, 7, 48), (0, 8, 0))):
        k = lj.compiler.build(s, M((2, 7, 48), "f32", "ncw"))
        assert "src_over" not in k.source, (s, k.source)

"""Transposes of short dense source rows (nhwc -> nchw with C = 6 or 7): the tiles read
their rows as overlapping whole vectors (``simd._overlap_rows``). Every byte checked, at
destinations off their lines, with 1 and 2 threads, guard bytes around them; the tile's last
rows end the source, so a read past the run would leave it."""

from __future__ import annotations

import numpy as np
import pytest

import layoutjit as lj
import layoutjit.simd as simd
import reference as ref

M = lj.MemoryDesc
CASES = [
    ((2, 7, 9, 13), "nhwc", "nchw", "f32", "f32"),
    ((3, 6, 5, 21), "nhwc", "nchw", "f32", "bf16"),
    ((2, 7, 7, 11), "nhwc", "nchw", "bf16", "bf16"),
    ((2, 7, 6, 10), "nhwc", "nchw", "f32", "s8"),
    ((7, 64, 3, 5), "bcda", "abcd", "f32", "f32"),
]


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", CASES)
def test_dense_rows_overlap_exact(dims, stag, dtag, sdt, ddt):
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = lj.compile_reorder(s, d)
    assert "src_dense=True" in k.source, k.plan.describe()
    t = k.plan.tile
    V = k.plan.nodes[t.b].extent
    assert simd._overlap_rows(V, 1 << (V - 1).bit_length(), s.dtype.size)
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, sdt, rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, [0, d.dtype.size, 64 - d.dtype.size])


def test_simd_switches_change_the_cache_key():
    """The micro-kernels' environment switches shape machine code the kernel source does not
    show: they go into the runtime fingerprint (every kernel's header), so a process with
    another setting never loads a kernel compiled under this one from the disk cache."""
    import os
    import subprocess
    import sys

    code = "import layoutjit.codegen as cg; print(cg.runtime_fingerprint())"
    prints = set()
    for env in ({}, {"LAYOUTJIT_DENSE_OVERLAP": "0"}, {"LAYOUTJIT_AVX_MASKED_STORES": "1"}):
        e = dict(os.environ)
        e.pop("LAYOUTJIT_DENSE_OVERLAP", None)
        e.pop("LAYOUTJIT_AVX_MASKED_STORES", None)
        e.update(env)
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e,
                           timeout=120)
        assert p.returncode == 0, p.stderr
        prints.add(p.stdout.strip())
    assert len(prints) == 3

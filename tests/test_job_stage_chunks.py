"""Job stages larger than L1 cut into chunks of the tile's columns (``job_stage_chunks``).

s8 `nhwc -> nchw` with 7x7 pixels: tiles of 49 pixels x 16 channels write 784 contiguous
bytes each, and a job (one image) staged its whole 49 KB destination range before the NT
write-out. The planner now cuts the channels into chunks of 64 (3136 B, whole lines), one
job each, and each job prefetches its share of the next image's source, a piece before
each tile call (``Plan.chunk_prefetch``). The tests check the plans at real sizes (no
kernel built), the prefetch addresses the kernel computes, and force chunked plans onto
small tensors byte for byte against the numpy reference, at destination offsets (the
unaligned ones take the unstaged path), 1 and 2 threads, guard bytes around the output.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import layoutjit as lj
import layoutjit.plan as plan_mod
import reference as ref
from layoutjit.compiler import build, lower_and_plan

M = lj.MemoryDesc


def plan_of(s, d):
    return lower_and_plan(s, d, None)[1]


@pytest.fixture
def host64(monkeypatch):
    monkeypatch.setattr(plan_mod, "vector_bytes", lambda: 64)
    monkeypatch.setattr(plan_mod, "llc_bytes", lambda: 32 << 20)


@pytest.mark.parametrize("dt", ["s8", "u8"])
def test_plans_at_real_sizes(host64, monkeypatch, dt):
    dims = (1024, 1024, 7, 7)
    p = plan_of(M(dims, dt, "nhwc"), M(dims, dt, "nchw"))
    assert p.job_stage == 64 * 49 and p.jobs == 1024 * 16, p.describe()
    assert p.chunk_prefetch == 49 * 1024 and not p.prefetch and not p.rows_ahead and not p.job_prefetch
    assert "stages in L1" in p.describe()
    monkeypatch.setattr(plan_mod, "JOB_STAGE_CHUNK_ABOVE", 0)
    p = plan_of(M(dims, dt, "nhwc"), M(dims, dt, "nchw"))
    assert p.job_stage == 1024 * 49 and p.jobs == 1024 and not p.chunk_prefetch, p.describe()


def test_stages_that_fit_l1_stay_whole(host64):
    dims = (2048, 512, 7, 7)  # a 25 KB stage
    p = plan_of(M(dims, "s8", "nhwc"), M(dims, "s8", "nchw"))
    assert p.job_stage == 512 * 49 and not p.chunk_prefetch and "stages in L1" not in p.describe()


@pytest.fixture(scope="module")
def chunked_small():
    mp = pytest.MonkeyPatch()
    mp.setattr(plan_mod, "NT_MIN_BYTES", 0)
    mp.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)  # jobs split between threads
    mp.setattr(plan_mod, "JOB_STAGE_CHUNK_ABOVE", 1024)
    yield
    mp.undo()


@pytest.mark.parametrize("dims,dt", [
    ((3, 256, 7, 7), "s8"),   # 4 chunks of 64 channels per image
    ((2, 128, 7, 7), "u8"),
])
def test_chunked_stages_are_exact(chunked_small, dims, dt):
    s, d = M(dims, dt, "nhwc"), M(dims, dt, "nchw")
    k = build(s, d)
    p = k.plan
    C = dims[1] // 64
    assert p.job_stage == 64 * 49 and p.chunk_prefetch == 49 * dims[1] and p.jobs == dims[0] * C, p.describe()
    # job j (image j // C, chunk j % C) prefetches from the next image's block at its share:
    # its source (image + 64 c) + one image + c * (share - 64), a piece before each tile
    share = 49 * dims[1] // C
    assert f"+ {49 * dims[1]} + (it % {C}) * {share - 64}\n" in k.source, k.source
    calls = len(re.findall(r"\(src, pfo\)$", k.source, re.M))
    assert calls >= 1 and "pfo += " in k.source
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size(), dt, rng)
    n = d.get_size()
    expect = ref.reorder(x, s, d, np.zeros(n, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, [0, 1, 24, 63])


def test_chunking_can_be_switched_off(chunked_small, monkeypatch):
    dims = (2, 256, 7, 7)
    s, d = M(dims, "s8", "nhwc"), M(dims, "s8", "nchw")
    on = build(s, d)
    monkeypatch.setattr(plan_mod, "JOB_STAGE_CHUNK_ABOVE", 0)
    off = build(s, d)
    assert on.plan.job_stage == 64 * 49 and off.plan.job_stage == 256 * 49
    x = np.arange(s.get_size(), dtype=np.uint8).view(np.int8)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size(), np.int8))
    assert np.array_equal(on(x), expect) and np.array_equal(off(x), expect)

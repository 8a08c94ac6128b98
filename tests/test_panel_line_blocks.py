"""Panels of a few blocks per job so that every job's panel is whole lines (``panel_line_blocks``).

bf16 `nhwc -> nchw` with 7x7 pixels: one block of 16 channels is 1568 B, so every other
job began and ended inside a line. Two blocks a job make 3136 B (49 lines). The tests
check the plans at real sizes (no kernel built), the job's prefetch start, and force such
plans onto small tensors byte for byte against the numpy reference at destination
offsets (the misaligned one takes the unstaged path), 1 and 2 threads, guard bytes.
"""

from __future__ import annotations

import numpy as np
import pytest

import layoutjit as lj
import layoutjit.plan as plan_mod
import reference as ref
from layoutjit.compiler import build, lower_and_plan

M = lj.MemoryDesc


def plan_of(s, d):
    return lower_and_plan(s, d, None)[1]


def test_plans_at_real_sizes(monkeypatch):
    monkeypatch.setattr(plan_mod, "vector_bytes", lambda: 64)
    monkeypatch.setattr(plan_mod, "llc_bytes", lambda: 32 << 20)
    dims = (512, 1024, 7, 7)
    p = plan_of(M(dims, "bf16", "nhwc"), M(dims, "bf16", "nchw"))
    assert p.panel and p.panel_blocks == 2 and p.prefetch and p.tile.V == 16, p.describe()
    assert any("panels of 2 blocks" in n for n in p.notes)
    # a narrowing conversion keeps one block a job
    p = plan_of(M(dims, "f32", "nhwc"), M(dims, "bf16", "nchw"))
    assert p.panel and not any("panels of" in n for n in p.notes), p.describe()
    monkeypatch.setattr(plan_mod, "PANEL_LINE_BLOCKS", 0)
    p = plan_of(M(dims, "bf16", "nhwc"), M(dims, "bf16", "nchw"))
    assert p.panel and p.panel_blocks == 1, p.describe()


@pytest.fixture(scope="module")
def small_panels():
    mp = pytest.MonkeyPatch()
    mp.setattr(plan_mod, "NT_MIN_BYTES", 0)
    mp.setattr(plan_mod, "PANEL_WIDE_BYTES", 0)
    mp.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)  # jobs split between threads
    mp.setattr(plan_mod, "vector_bytes", lambda: 64)
    yield
    mp.undo()


@pytest.mark.parametrize("dims", [(2, 64, 7, 7), (3, 96, 7, 7), (2, 64, 9, 9)])
def test_line_block_panels_are_exact(small_panels, dims):
    s, d = M(dims, "bf16", "nhwc"), M(dims, "bf16", "nchw")
    k = build(s, d)
    p = k.plan
    hw = dims[2] * dims[3]
    blocks = 64 // np.gcd(16 * hw * 2, 64)
    assert p.panel and p.panel_blocks == blocks and (16 * blocks * hw * 2) % 64 == 0, p.describe()
    npan = dims[1] // (16 * blocks)
    # each job prefetches its part of the next image's block
    assert f"pfo = so + {hw * dims[1]} + pj * {hw * dims[1] // npan}" in k.source, k.source
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // 2, "bf16", rng)
    n = d.get_size() // 2
    expect = ref.reorder(x, s, d, np.zeros(n, np.uint16)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, [0, 2, 24, 1])

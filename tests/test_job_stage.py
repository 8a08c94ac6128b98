"""Jobs that stage their dense destination range (``plan.job_stage``).

Plans whose tiles store pieces of lines keep plain stores, so every destination line is
read before it is written. Where a job's loops write one dense, line-aligned range of at
most ``JOB_STAGE_BYTES``, the job fills a stage instead and writes it out as whole NT lines.
The tests check the plans at real sizes (no kernel built), then force NT plans onto small
tensors and check every byte (destinations at several offsets, so that the plain branch
runs too, 1 and 2 threads, guard bytes, padding).
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


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt,span", [
    ((64, 1024, 100, 5, 1), "gOIhw16i16o", "goihw", "s8", "f32", 8000),  # I = 100 of 112
    ((384, 512, 7, 7), "OIhw8i16o2i", "OIhw4i16o4i", "f32", "f32", 64),
    ((1, 17, 1, 512, 96), "BcdeA8b4a", "aBdeC16c48b2c", "bf16", "bf16", 1536),
    ((204800, 40, 1, 1), "OIhw8o8i", "OIhw16o16i", "f32", "u8", 0),  # narrowing 4x: left out
])
def test_job_stage_at_real_sizes(plans_32, dims, stag, dtag, sdt, ddt, span):
    p = plan_of(M(dims, sdt, stag), M(dims, ddt, dtag))
    assert p.job_stage == span, p.describe()
    if span:
        assert p.nt and p.nt_split and p.tile is not None and not p.macro_job, p.describe()
        monkey = pytest.MonkeyPatch()
        monkey.setattr(plan_mod, "JOB_STAGE_BYTES", 0)
        try:
            assert plan_of(M(dims, sdt, stag), M(dims, ddt, dtag)).job_stage == 0
        finally:
            monkey.undo()


CASES = [
    ((2, 32, 20, 5, 1), "gOIhw16i16o", "goihw", "s8", "f32"),
    ((8, 128, 4, 7, 7), "gOIhw16i16o", "goihw", "f32", "f32"),  # I = 4 of 16
    ((32, 48, 3, 5), "OIhw8i16o2i", "OIhw4i16o4i", "f32", "f32"),
    ((32, 40, 2, 3), "OIhw4o4i", "OIhw8i8o", "s8", "f32"),
    ((1, 17, 1, 24, 96), "BcdeA8b4a", "aBdeC16c48b2c", "bf16", "bf16"),
]


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", CASES)
def test_job_stage_is_exact(nt_everywhere, plans_32, monkeypatch, dims, stag, dtag, sdt, ddt):
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)  # (jobs on small tensors)
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = build(s, d)
    p = k.plan
    assert p.job_stage > 0 and p.nt, p.describe()
    assert "jstage" in k.source
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, str(s.dtype), rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, [0, 2 * d.dtype.size, 64 - d.dtype.size])

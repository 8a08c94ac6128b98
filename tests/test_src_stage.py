"""Period lines that copy their source runs to a stage first (``plan.src_stage``).

An ``a2`` transpose (``Ohwi16o -> oihw``) reads each destination line from rows spread over
a few source runs (one per hw position); where the runs start a multiple of 4 KB apart
they share one L1 set, and each period first copies them into a stage a line and a run
apart (each line's call prefetching its run of the next period, ``codegen.SRC_STAGE_PREFETCH``).
The tests check the rule's plans, then every byte of staged kernels (tails of a
padded O whose runs are not the stage's, 1 and 2 threads, destinations at several
offsets so that the plain branch runs too), and that the switch turns it off.
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


def test_stage_runs():
    """Rows that read one run together merge into it; runs must be evenly spaced and of
    one length, and a padding row (None) leaves no stage."""
    rows = tuple(i * 16 + hw * 4096 for i in range(64) for hw in range(49))
    assert plan_mod.stage_runs(rows, 16) == (0, 4096, 49, 1024)
    assert plan_mod.stage_runs(rows, 4) is None             # 4 of 16: gaps, runs of 4
    assert plan_mod.stage_runs((5, 105, 205), 10) == (5, 100, 3, 10)
    assert plan_mod.stage_runs((0, 100, 250), 10) is None   # uneven steps
    assert plan_mod.stage_runs((0, 5, 100), 10) is None     # runs of 15 and 10
    assert plan_mod.stage_runs((0, None, 100), 10) is None
    assert plan_mod.stage_runs((7,), 10) is None            # one run: nothing to spread


@pytest.mark.parametrize("dims,stag,sdt,pitch", [
    ((768, 1024, 7, 7), "Ohwi16o", "u8", 1088),     # 49 runs of 1 KB, 16 KB apart
    ((768, 256, 7, 7), "Ohwi16o", "s8", 1088),      # 4 KB apart
    ((512, 1024, 3, 5), "Ohwi16o", "u8", 1088),     # 15 runs
    ((512, 512, 5, 5), "Ohwi8o", "bf16", 288),      # rows of 16 B: 8 bf16
    ((256, 2048, 3, 3), "Ohwi16o", "u8", 0),        # 9 runs: not more than 12
    ((768, 1000, 7, 7), "Ohwi16o", "u8", 0),        # runs 16000 B apart: no shared set
    ((256, 1024, 7, 7), "Ohwi16o", "f32", 0),       # rows of 64 B: each line one tile's
    ((512, 1024, 7, 7), "Ohwi16o", "bf16", 0),      # rows of 32 B
])
def test_src_stage_plans(plans_32, monkeypatch, dims, stag, sdt, pitch):
    s, d = M(dims, sdt, stag), M(dims, sdt, "oihw")
    p = plan_of(s, d)
    assert p.src_stage == pitch, p.describe()
    assert ("source stage: each period's" in p.describe()) == bool(pitch)
    if pitch:
        assert p.tile is not None and p.tile.a2 is not None
    monkeypatch.setattr(plan_mod, "SRC_STAGE", False)
    assert plan_of(s, d).src_stage == 0


@pytest.mark.parametrize("dims,stag,dtag,sdt", [
    ((256, 256, 7, 7), "Ohwi16o", "oihw", "u8"),
    ((244, 256, 7, 7), "Ohwi16o", "oihw", "u8"),    # O = 244 of 256: the last block reads 4 o
    ((64, 512, 5, 5), "Ohwi8o", "oihw", "bf16"),
    ((8, 32, 256, 7, 7), "gOhwi16o", "goihw", "s8"),
])
def test_src_stage_is_exact(nt_everywhere, plans_32, monkeypatch, dims, stag, dtag, sdt):
    # (64 outer jobs or more: fewer and the jobs split the period's lines, and stage nothing)
    s, d = M(dims, sdt, stag), M(dims, sdt, dtag)
    k = build(s, d)
    assert k.plan.src_stage > 0, k.plan.describe()
    assert "sstage" in k.source
    assert "prefetch(" in k.source  # one line per run: each prefetches its run of the next period
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, str(s.dtype), rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, [0, 2 * d.dtype.size, 64 - d.dtype.size])
    monkeypatch.setattr(plan_mod, "SRC_STAGE", False)
    off = build(s, d)
    assert off.plan.src_stage == 0 and "sstage" not in off.source
    ref.check_guarded_runs(off, x, expect, [0])

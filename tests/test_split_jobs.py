"""Jobs of too little traffic (``plan.split_jobs``).

``OIhw8i8o -> OIhw4o4i`` u8: the block digits outside the 4x4 tile make 16 jobs here, short
of ``MIN_JOBS``, so the pixel loop used to join the job range whole: one 16-byte tile per
job, each decoding five indices. The pixel node is now cut into a job digit of just enough
steps and a loop inside each job. The tests check the plan and every byte of the result
against numpy index arithmetic (destinations at several offsets, 1 and 2 threads, guard
bytes around them).
"""

from __future__ import annotations

import numpy as np

import layoutjit as lj
import layoutjit.plan as plan_mod
import reference as ref
from layoutjit.compiler import build, lower_and_plan

M = lj.MemoryDesc
DIMS = (16, 16, 64, 64)


def _pair():
    return M(DIMS, "u8", "OIhw8i8o"), M(DIMS, "u8", "OIhw4o4i")


def test_split_jobs_plan(monkeypatch):
    s, d = _pair()
    p = lower_and_plan(s, d, None)[1]
    assert "split_jobs" in p.ir.notes and p.jobs == 64, p.describe()
    assert p.bytes_moved // p.jobs >= plan_mod.JOB_MIN_BYTES
    monkeypatch.setattr(plan_mod, "JOB_MIN_BYTES", 0)
    p = lower_and_plan(s, d, None)[1]
    assert "split_jobs" not in p.ir.notes and p.jobs == 16 * 64 * 64, p.describe()


def test_split_jobs_exact():
    s, d = _pair()
    k = build(s, d)
    assert "split_jobs" in k.plan.ir.notes
    rng = np.random.default_rng(11)
    x = ref.random_raw(s.get_size(), "u8", rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size(), np.uint8)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, [0, 5])


def test_split_jobs_leaves_padded_nodes(monkeypatch):
    """A node of a padded dim is not cut (its digits decide the padding splits): o = 40956
    makes 5120 o-blocks of 8, 128 B a job, and 5120 has the divisor the cut would take."""
    dims = (40956, 8, 1, 1)
    s, d = M(dims, "u8", "OIhw8i8o"), M(dims, "u8", "OIhw4o4i")
    p = lower_and_plan(s, d, None)[1]
    n0 = p.nodes[0]
    assert n0.dim == 0 and p.ir.dims[0].guarded and n0.extent == 5120, p.describe()
    assert p.bytes_moved // n0.extent < plan_mod.JOB_MIN_BYTES
    assert "split_jobs" not in p.ir.notes and p.jobs == 5120, p.describe()
    k = build(s, d)
    rng = np.random.default_rng(3)
    x = ref.random_raw(s.get_size(), "u8", rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size(), np.uint8)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, [0])

"""Phased "lines" plans time their one-thread store kind (``plan.PHASED_LINES_TUNE``).

u8 `nCdhw8c -> ndhwc` with C = 200: each pixel is 200 bytes, so its calls cut at the lines
(``line_phases``: 8 phases) leave 7 of every 25 lines shared by two pixels, stored plainly
in 8-byte pieces beside the NT lines. On one thread that ran at 3.0x copy against 1.6x
with plain stores only. Between the NT thresholds such plans now time both kinds on one
thread too, as they did split between threads. Checked: the plans (no kernel built) and
the switch, and every byte of a small phased kernel whose first one-thread calls take
each kind in turn, against the numpy reference.
"""

from __future__ import annotations

import layoutjit as lj
import layoutjit.plan as plan_mod
import reference as ref
from layoutjit.compiler import build, lower_and_plan

M = lj.MemoryDesc


def plan_of(dims, dt, stag, dtag):
    return lower_and_plan(M(dims, dt, stag), M(dims, dt, dtag), None)[1]


def test_phased_lines_time_one_thread(plans_32, monkeypatch, narrow_elements):
    dims = (8, 200, 7, 13, 64)
    p = plan_of(dims, "u8", "nCdhw8c", "ndhwc")
    assert p.tile.kind == "lines" and p.line_phases == 8, p.describe()
    assert p.nt_tune and p.nt_tune_one, p.describe()
    assert "one included" in p.describe()
    aligned = plan_of((8, 256, 7, 13, 64), "u8", "nCdhw8c", "ndhwc")   # whole lines: no phases
    assert aligned.line_phases == 1 and not aligned.nt_tune_one, aligned.describe()
    monkeypatch.setattr(plan_mod, "PHASED_LINES_TUNE", False)
    p0 = plan_of(dims, "u8", "nCdhw8c", "ndhwc")
    assert p0.nt_tune and not p0.nt_tune_one


def test_timed_phased_kernel_is_exact(plans_32, monkeypatch, narrow_elements):
    """Thresholds moved so a small tensor falls in the timed band: its first calls on one
    thread alternate plain and NT (two each), and every one must match the reference."""
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "nt_split_min_bytes", lambda tile: 1 << 40)
    dims = (2, 200, 3, 5, 7)
    k = build(M(dims, "u8", "nCdhw8c"), M(dims, "u8", "ndhwc"))
    assert k.plan.line_phases > 1 and k.plan.nt_tune_one, k.plan.describe()
    for seed in range(3):  # 3 x (3 offsets x 2 thread counts): both kinds at each count
        ref.check_exact_at_offsets(k, seed=seed)

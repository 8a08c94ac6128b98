"""NT transposes that narrow their elements into whole-line rows (``plan.narrow_panel``).

f32 -> s8 nchw -> nhwc writes rows of C bytes, one after another; a line of them gathers
64 source rows. The planner stages a run of pixels x all channels (one contiguous block
of the destination), fills it 16 source rows at a time and writes it out as whole
lines. The tests force that plan on small tensors (NT threshold and shortest run patched
to 0) and check every byte: tails of the pixel blocks, several panels per image, outer
loops, 5-D, every narrowing pair, destinations at several byte offsets, at 1 and 2
threads, with guard bytes around the destination.
"""

from __future__ import annotations

import numpy as np
import pytest

import layoutjit as lj
import layoutjit.plan as plan_mod
import reference as ref
from layoutjit.compiler import lower_and_plan

M = lj.MemoryDesc
NOTE = "narrow destination elements"


def plan_of(dims, sdt, stag, ddt, dtag):
    return lower_and_plan(M(dims, sdt, stag), M(dims, ddt, dtag), None)[1]


CASES = [
    ((2, 64, 9, 9), "nchw", "nhwc", "f32", "s8"),           # 81 pixels: a tail block
    ((3, 128, 5, 13), "nchw", "nhwc", "f32", "u8"),         # 65 pixels, 128 channels
    ((2, 64, 6, 6), "nchw", "nhwc", "s32", "s8"),
    ((2, 192, 4, 5), "nchw", "nhwc", "bf16", "u8"),         # 2-byte source: 16x16 tiles
    ((2, 64, 3, 4, 5), "ncdhw", "ndhwc", "f32", "s8"),      # 5-D
    ((64, 50), "ab", "ba", "f32", "s8"),                    # 2-D, no outer loop
]


@pytest.mark.parametrize("stage", [256 * 1024, 6144])
@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", CASES)
def test_narrow_panel_is_exact(nt_everywhere, monkeypatch, stage, dims, stag, dtag, sdt, ddt):
    monkeypatch.setattr(plan_mod, "NARROW_PANEL_MIN_RUN", 0)
    monkeypatch.setattr(plan_mod, "NARROW_PANEL_BYTES", stage)
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = lj.compiler.build(s, d)  # not the in-memory cache: the plan changes with ``stage``
    p = k.plan
    assert p.panel and p.nt and any(NOTE in n for n in p.notes), p.describe()
    a = p.nodes[p.tile.a]
    assert p.tile.R == min(16, a.extent) and p.tile.M == 1
    staged = p.panel_blocks * p.tile.V * a.extent * d.dtype.size
    assert staged <= stage and ref.scratch_elems(k.source, "stage") == staged
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, sdt, rng)
    n = d.get_size()
    expect = ref.reorder(x, s, d, np.zeros(n // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, [0, 1, 24, 63])


def test_narrow_panel_into_a_submemory(nt_everywhere, monkeypatch):
    """A destination that is part of a larger nhwc tensor (channels 64..191 of 256): its
    pixel rows do not follow one another, so no panel; and one whose images are whole
    blocks of a larger batch (offset0 a whole image in): panels, every byte checked."""
    monkeypatch.setattr(plan_mod, "NARROW_PANEL_MIN_RUN", 0)
    big = M((2, 256, 4, 4), "s8", "nhwc")
    part = big.submemory_desc((2, 128, 4, 4), (0, 64, 0, 0))
    assert not any(NOTE in n for n in lj.compiler.build(M((2, 128, 4, 4), "f32", "nchw"), part).plan.notes)
    batch = M((5, 128, 4, 4), "s8", "nhwc")
    sub = batch.submemory_desc((3, 128, 4, 4), (2, 0, 0, 0))
    s = M((3, 128, 4, 4), "f32", "nchw")
    k = lj.compiler.build(s, sub)
    assert any(NOTE in n for n in k.plan.notes), k.plan.describe()
    rng = np.random.default_rng(5)
    x = ref.random_raw(s.get_size() // 4, "f32", rng)
    n = max(sub.get_size(), sub.required_bytes())
    expect = ref.reorder(x, s, sub, np.full(n, 0xA5, np.uint8).view(np.int8)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, [0, 5])


def test_narrow_panel_at_the_real_thresholds():
    """The planner's choice for full-size tensors (planned, not compiled)."""
    p = plan_of((64, 256, 56, 56), "f32", "nchw", "s8", "nhwc")
    assert p.panel and any(NOTE in n for n in p.notes) and p.tile.R == 16
    # a job's source runs: 784 pixels x 4 B per row, over the 2 KB minimum
    assert p.panel_blocks * p.tile.V == 784
    assert "read 16 source rows at a time" in p.describe()
    # whole-block tiles (rows of one line) take it too
    assert any(NOTE in n for n in plan_of((32, 64, 112, 112), "f32", "nchw", "u8", "nhwc").notes)


@pytest.mark.parametrize("dims,sdt,stag,ddt,dtag,why", [
    ((64, 256, 56, 56), "s8", "nchw", "s8", "nhwc", "1-byte source: no narrowing"),
    ((64, 256, 56, 56), "f32", "nchw", "bf16", "nhwc", "32-row tiles"),
    ((16, 1024, 28, 28), "f32", "nchw", "s8", "nhwc", "784 B source runs"),
    ((64, 256, 56, 56), "f32", "nhwc", "s8", "nchw", "rows of 3136 B: 320 B runs"),
    ((4, 256, 14, 14), "f32", "nchw", "s8", "nhwc", "under the NT threshold"),
    ((64, 256, 56, 56), "f32", "nchw", "s8", "nChw16c", "not a transpose into rows"),
])
def test_narrow_panel_not_taken(dims, sdt, stag, ddt, dtag, why):
    p = plan_of(dims, sdt, stag, ddt, dtag)
    assert not any(NOTE in n for n in p.notes), (why, p.describe())


def test_narrow_panel_can_be_turned_off(monkeypatch):
    monkeypatch.setattr(plan_mod, "NARROW_PANEL", False)
    p = plan_of((64, 256, 56, 56), "f32", "nchw", "s8", "nhwc")
    # 64 rows a macro tile; with 64-byte vectors tiles of half lines read 8 KB a step: 256
    assert not p.panel and p.tile.R * p.tile.M == (256 if p.vector_bytes >= 64 else 64)

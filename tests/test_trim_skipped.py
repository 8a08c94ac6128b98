"""A dim held by one outer node stops at the destination's padded size (plan.trim_skipped).

A source blocked more coarsely than the destination lowers such a dim to a multiple of
its block (``ABcd4b16a4b -> abcd`` with a = 7 runs 16 steps, [7, 16) skipped); the
skipped steps were empty jobs, most of one thread's static share.
"""
from __future__ import annotations

import numpy as np
import pytest

import layoutjit as lj
import layoutjit.plan as plan_mod
import reference as ref
from layoutjit.compiler import lower_and_plan

# the rules shown here act on the narrow IR of these 1- and 2-byte pairs
pytestmark = pytest.mark.usefixtures("narrow_elements")

M = lj.MemoryDesc


@pytest.mark.parametrize("dims, stag, dtag, sdt, ddt, trimmed", [
    ((7, 24, 3, 40), "ABcd4b16a4b", "abcd", "f32", "f32", True),   # a = 7 of 16 (stride 4)
    ((7, 24, 3, 40), "ABcd4b16a4b", "abcd", "f32", "bf16", True),  # converted
    ((5, 24, 3, 3), "OIhw4i16o4i", "oihw", "f32", "f32", True),    # o = 5 of 16
    ((3, 40, 5, 5), "ABcd16b16a", "abcd", "f32", "f32", False),    # a's node has stride 1
    ((2, 7, 48), "nCw8c", "ncw", "f32", "f32", False),             # b's node has stride 1
    ((20, 24, 3, 3), "OIhw16i16o", "oihw", "f32", "f32", False),   # o: two digits
])
def test_skipped_steps_are_trimmed(monkeypatch, dims, stag, dtag, sdt, ddt, trimmed):
    """The trimmed dim loses its guard (nothing skipped in the plan), the others keep
    theirs; every byte exact at 1 and 2 threads."""
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    src, dst = M(dims, sdt, stag), M(dims, ddt, dtag)
    ir, plan = lower_and_plan(src, dst, None)[:2]
    assert any(r.write < r.extent for r in ir.dims), plan.describe()
    assert ("trim_skipped" in plan.ir.notes) == trimmed, plan.describe()
    if trimmed:
        assert plan.ir.dims[0].write == plan.ir.dims[0].extent == dims[0], plan.describe()
    k = lj.compiler.build(src, dst)
    for threads in ref.at_thread_counts((1, 2)):
        assert ref.kernel_matches_reference(k, seed=threads), k.plan.describe()


def test_trimmed_jobs_are_all_live():
    """7x112x28x768 from ABcd4b16a4b: no job covers only skipped rows of a."""
    dims = (7, 112, 28, 768)
    ir, plan = lower_and_plan(M(dims, "f32", "ABcd4b16a4b"), M(dims, "f32", "abcd"), None)[:2]
    assert plan.ir.total == int(np.prod(dims)), plan.describe()
    assert plan.jobs * 2 > 7 * 112, plan.describe()


@pytest.mark.parametrize("dims, stag, dtag, sdt, ddt, d, steps", [
    ((3, 7, 9, 10), "nChw16c", "nChw8c", "f32", "f32", 1, 8),      # C = 7: 16c -> one 8c block
    ((2, 8, 5, 6, 7), "nCdhw16c", "nCdhw8c", "f32", "u8", 1, 8),   # C = 8: nothing padded
    ((12, 8, 16, 24), "ABcd4b16a4b", "abcd", "f32", "f32", 1, 8),  # b = 8: 2 of 4 outer steps
    ((9, 3, 16, 24), "ABcd4b16a4b", "abcd", "bf16", "f32", 1, 4),  # b = 3: 1 of 4 (node dropped)
])
def test_outer_digit_steps_are_trimmed(monkeypatch, dims, stag, dtag, sdt, ddt, d, steps):
    """A dim split in several nodes loses the outer digit's steps that hold only skipped
    indices (``plan._outermost_digit``); without the rule the plan keeps them."""
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    src, dst = M(dims, sdt, stag), M(dims, ddt, dtag)
    plan = lower_and_plan(src, dst, None)[1]
    assert "trim_skipped" in plan.ir.notes, plan.describe()
    assert plan.ir.dims[d].extent == steps, plan.describe()
    monkeypatch.setattr(plan_mod, "TRIM_OUTER_STEPS", False)
    assert lower_and_plan(src, dst, None)[1].ir.dims[d].extent == 16
    monkeypatch.setattr(plan_mod, "TRIM_OUTER_STEPS", True)
    k = lj.compiler.build(src, dst)
    for threads in ref.at_thread_counts((1, 2)):
        assert ref.kernel_matches_reference(k, seed=threads), k.plan.describe()


@pytest.mark.parametrize("ddt, packed", [("s8", True), ("bf16", True), ("f32", True)])
def test_whole_runs_pack_where_they_convert(monkeypatch, ddt, packed):
    """C = 8 from 16c: trimmed, the 8c runs are the whole dim; they pack into lines
    (``_packed_padded_runs``): where they convert, and runs of one type of at most
    ``PACKED_SAME_MAX_BYTES``; otherwise element loops move them."""
    dims = (3, 8, 10, 13)
    src, dst = M(dims, "f32", "nChw16c"), M(dims, ddt, "nChw8c")
    p = lower_and_plan(src, dst, None)[1]
    assert (p.tile is not None and p.tile.kind == "lines") == packed, p.describe()
    monkeypatch.setattr(plan_mod, "PACKED_SAME_MAX_BYTES", 0)
    p0 = lower_and_plan(src, dst, None)[1]
    assert (p0.tile is not None) == (ddt != "f32"), p0.describe()
    monkeypatch.setattr(plan_mod, "PACKED_WHOLE_RUNS", False)
    assert lower_and_plan(src, dst, None)[1].tile is None
    k = lj.compiler.build(src, dst)
    monkeypatch.setattr(plan_mod, "PACKED_WHOLE_RUNS", True)
    monkeypatch.setattr(plan_mod, "PACKED_SAME_MAX_BYTES", 64)
    k2 = lj.compiler.build(src, dst)
    for kern in (k, k2):
        ref.check_exact_at_offsets(kern, 5)


@pytest.mark.parametrize("dt, dims, dtag", [("u8", (2, 8, 3, 5, 7), "ndhwc"), ("bf16", (2, 8, 5, 7), "nhwc"),
                                            ("s8", (1, 4, 3, 33), "nhwc")])
def test_runs_trimmed_to_the_destination(monkeypatch, dt, dims, dtag):
    """`nCdhw16c -> ndhwc` with C = 8: the run node (unit stride on both sides) walked the
    16c block whole, 8 of its steps skipped, and no micro-kernel took it (element loops,
    2.8x copy for u8). Trimmed (``TRIM_RUNS``), the 8-element runs pack into whole lines
    (C = 4: four bytes a pixel). Exact at several destination offsets."""
    stag = "nCdhw16c" if len(dims) == 5 else "nChw16c"
    src, dst = M(dims, dt, stag), M(dims, dt, dtag)
    p = lower_and_plan(src, dst, None)[1]
    assert "trim_skipped" in p.ir.notes and p.tile is not None and p.tile.kind == "lines", p.describe()
    assert p.ir.nodes[p.tile.l].extent == dims[1], p.describe()
    k = lj.compiler.build(src, dst)
    monkeypatch.setattr(plan_mod, "TRIM_RUNS", False)
    p0 = lower_and_plan(src, dst, None)[1]
    assert p0.tile is None, p0.describe()
    ref.check_exact_at_offsets(k, 5)


@pytest.mark.parametrize("dims, stag, dt, pf", [((2, 11, 5, 7), "nChw16c", "f32", True),
                                                ((2, 3, 5, 7), "nChw8c", "f32", True),
                                                ((2, 3, 5, 7), "nChw16c", "u8", False)])
def test_element_loops_prefetch_the_source(monkeypatch, dims, stag, dt, pf):
    """Element loops that read a few elements of each 32- or 64-byte source step (`nChw16c ->
    nhwc`, C = 11) prefetch a source line ahead per step (``Plan.elem_prefetch``), past the
    end of the source on the last steps (a hint, never a fault); 16-byte steps do not.
    Exact at several destination offsets. (These runs pack into lines since the
    thirty-first session, ``PACKED_ODD_RUNS``; the element loops stay for f32 C = 3 of
    ``nChw16c``, and here with the rule off.)"""
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "PACKED_ODD_RUNS", False)
    src, dst = M(dims, dt, stag), M(dims, dt, "nhwc")
    k = lj.compiler.build(src, dst)
    assert k.plan.tile is None and (k.plan.elem_prefetch > 0) == pf, k.plan.describe()
    assert ("prefetch" in k.source) == pf
    ref.check_exact_at_offsets(k, 5)
    monkeypatch.setattr(plan_mod, "ELEM_PREFETCH_BYTES", 0)
    assert lower_and_plan(src, dst, None)[1].elem_prefetch == 0

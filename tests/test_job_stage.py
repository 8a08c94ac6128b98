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

# the rules shown here act on the narrow IR of these 1- and 2-byte pairs
pytestmark = pytest.mark.usefixtures("narrow_elements")

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


def test_split_jobs_under_the_split_threshold_store_plainly(plans_32, monkeypatch):
    """``plan.JOB_STAGE_SPLIT_PLAIN``: a staged plan under the split NT threshold stages on
    one thread only; split between threads its jobs store plainly, unstaged (f32 `Ohwi8o ->
    ohwi` 6144x60x1x5, 15 MB of traffic)."""
    s, d = M((6144, 60, 1, 5), "f32", "Ohwi8o"), M((6144, 60, 1, 5), "f32", "ohwi")
    p = plan_of(s, d)
    assert p.job_stage == 2400 and p.nt and not p.nt_split, p.describe()
    assert "plain and unstaged" in p.describe()
    monkeypatch.setattr(plan_mod, "JOB_STAGE_SPLIT_PLAIN", False)
    assert plan_of(s, d).nt_split


CASES = [
    ((2, 32, 20, 5, 1), "gOIhw16i16o", "goihw", "s8", "f32"),
    ((8, 128, 4, 7, 7), "gOIhw16i16o", "goihw", "f32", "f32"),  # I = 4 of 16
    ((32, 48, 3, 5), "OIhw8i16o2i", "OIhw4i16o4i", "f32", "f32"),
    ((32, 40, 2, 3), "OIhw4o4i", "OIhw8i8o", "s8", "f32"),
    ((1, 17, 1, 24, 96), "BcdeA8b4a", "aBdeC16c48b2c", "bf16", "bf16"),
    ((256, 16, 3, 5), "Ohwi8o", "OIhw8i16o2i", "s8", "s8"),  # job_prefetch, blocks of 3840
]


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", CASES)
def test_job_stage_is_exact(nt_everywhere, plans_32, monkeypatch, dims, stag, dtag, sdt, ddt):
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)  # (jobs on small tensors)
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = build(s, d)
    p = k.plan
    assert p.job_stage > 0 and p.nt, p.describe()
    assert "jstage" in k.source
    assert ("prefetch(" in k.source) == bool(p.job_prefetch)  # (gOIhw16i16o: a padded block)
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, str(s.dtype), rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, [0, 2 * d.dtype.size, 64 - d.dtype.size])


@pytest.mark.parametrize("dims,stag,dtag,span", [
    ((4096, 100, 7, 5), "nchw", "nChw4c", 560),    # 560 B a block: four blocks, 35 lines
    ((256, 512, 7, 7), "nchw", "nChw8c", 784),     # 1568 B: two blocks
    ((4096, 24, 7, 55), "nchw", "nChw8c", 0),      # 12320 B: two would stage 24 KB
    ((512, 100, 7, 5), "nchw", "nChw4c", 0),       # 14 MB: under the split NT threshold
])
def test_job_line_groups_at_real_sizes(plans_32, monkeypatch, dims, stag, dtag, span):
    """Jobs that start on a line in some jobs only take the few outer steps whose range is
    whole lines, and stage it (``JOB_LINE_GROUPS``); not into stages over 8 KB, nor under
    the split NT threshold (a 32 MiB LLC); off: the jobs check their offset at run time."""
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 16 << 20)  # (nt_everywhere lasts the module)
    monkeypatch.setattr(plan_mod, "NT_MIN_TRANSPOSE_BYTES", (32 << 20) // 3)
    p = plan_of(M(dims, "f32", stag), M(dims, "f32", dtag))
    assert p.job_stage == span, p.describe()
    if span:
        assert "start on lines" in p.describe()
        monkey = pytest.MonkeyPatch()
        monkey.setattr(plan_mod, "JOB_LINE_GROUPS", 0)
        try:
            assert plan_of(M(dims, "f32", stag), M(dims, "f32", dtag)).job_stage == 0
        finally:
            monkey.undo()


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", [
    ((16, 12, 7, 5), "nchw", "nChw4c", "f32", "f32"),
    ((8, 16, 7, 7), "nchw", "nChw8c", "f32", "f32"),
    ((8, 24, 5, 11), "nchw", "nChw8c", "f32", "bf16"),
    ((6, 32, 55), "ncw", "nCw8c", "bf16", "bf16"),
])
def test_job_line_groups_are_exact(nt_everywhere, plans_32, monkeypatch, dims, stag, dtag, sdt, ddt):
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = build(s, d)
    p = k.plan
    assert p.job_stage > 0 and "start on lines" in p.describe(), p.describe()
    assert (p.job_stage * d.dtype.size) % 64 == 0
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, str(s.dtype), rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, [0, 2 * d.dtype.size, 64 - d.dtype.size])


@pytest.mark.parametrize("dims,stag,dtag,sdt,ahead", [
    ((98304, 48, 7, 1), "OIhw4i16o4i", "oihw", "f32", 5376),   # 21 KB blocks, rows 1 KB apart
    ((65536, 128, 3, 3), "Ohwi16o", "OIhw4o4i", "u8", 18432),
    ((256, 512, 7, 7), "nchw", "nChw8c", "f32", 0),           # rows of 196 B that follow
    ((4096, 64, 5, 7, 1), "ncdhw", "nCdhw8c", "f32", 0),      # ... of 140 B
    ((49152, 16, 5, 5), "OIhw4o4i", "OIhw8i16o2i", "f32", 6400),  # runs ("lines"), 25 KB blocks
    ((13312, 384, 3, 5), "OIhw4i16o4i", "OIhw16o16i", "s8", 0),   # runs, blocks of 256 B
])
def test_job_prefetch_at_real_sizes(plans_32, monkeypatch, dims, stag, dtag, sdt, ahead):
    """Staged jobs whose source block is dense and followed by the next job's prefetch
    it, each tile call its share (``plan.job_prefetch``); not where the tiles' rows follow
    one another and are a line or longer; off with ``JOB_PREFETCH``."""
    s, d = M(dims, sdt, stag), M(dims, sdt, dtag)
    p = plan_of(s, d)
    assert p.job_stage > 0 and p.job_prefetch == ahead, p.describe()
    assert ("next job's source block" in p.describe()) == bool(ahead)
    monkeypatch.setattr(plan_mod, "JOB_PREFETCH", False)
    assert plan_of(s, d).job_prefetch == 0


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", [
    ((1024, 16, 5, 5), "OIhw4o4i", "OIhw8i16o2i", "f32", "f32"),
    ((1024, 24, 3, 7), "OIhw8i16o2i", "OIhw4o4i", "f32", "f32"),
])
def test_job_prefetch_of_runs_is_exact(nt_everywhere, plans_32, monkeypatch, dims, stag, dtag, sdt, ddt):
    """Staged plans of runs (kind "lines") prefetch the next job's block too (the LLC's size
    lowered to take these small tensors); off with ``JOB_PREFETCH_LINES``."""
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "llc_bytes", lambda: 0)
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = build(s, d)
    p = k.plan
    assert p.tile.kind == "lines" and p.job_stage > 0 and p.job_prefetch > 0, p.describe()
    assert "prefetch(" in k.source
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, str(s.dtype), rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, [0, 2 * d.dtype.size, 64 - d.dtype.size])
    monkeypatch.setattr(plan_mod, "JOB_PREFETCH_KINDS", ("transpose",))
    assert plan_of(s, d).job_prefetch == 0


def test_split_plain_jobs_are_exact(nt_everywhere, plans_32, monkeypatch):
    """Both branches of such a kernel (staged on one thread, plain on two) write every byte."""
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "nt_split_min_bytes", lambda tile: 1 << 40)
    s, d = M((32, 48, 3, 5), "f32", "OIhw8i16o2i"), M((32, 48, 3, 5), "f32", "OIhw4i16o4i")
    k = build(s, d)
    assert k.plan.job_stage and not k.plan.nt_split, k.plan.describe()
    assert "hi - lo ==" in k.source and "jstage" in k.source
    ref.check_exact_at_offsets(k, seed=7)


def test_job_stage_anywhere_at_real_size(plans_32, monkeypatch):
    """`nCw16c -> ncw` with C = 60: each image's 60 rows of 55 f32 (13200 B, jobs 16 B apart
    modulo a line) stage whole, the partial first and last line plain (``Plan.job_shift``)."""
    dims = (4096, 60, 55)
    s, d = M(dims, "f32", "nCw16c"), M(dims, "f32", "ncw")
    p = plan_of(s, d)
    assert p.job_shift and p.job_stage == 60 * 55, p.describe()
    assert "partial first and last line plain" in p.describe()
    monkeypatch.setattr(plan_mod, "JOB_STAGE_SHIFT", False)
    p = plan_of(s, d)
    assert not p.job_shift and not p.job_stage, p.describe()


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", [
    ((64, 60, 55), "nCw16c", "ncw", "f32", "f32"),       # jobs at every 16-byte place of a line
    ((32, 20, 33), "nCw8c", "ncw", "bf16", "bf16"),
    ((64, 13, 299), "nCw8c", "ncw", "s8", "f32"),
    ((16, 4, 7, 1, 14), "nCdhw16c", "ncdhw", "f32", "f32"),
])
def test_job_stage_anywhere_is_exact(nt_everywhere, plans_32, monkeypatch, dims, stag, dtag, sdt, ddt):
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "STAGED_PADDED_B", False)  # (C = 13 of 16: else staged panels)
    monkeypatch.setattr(plan_mod, "nt_split_min_bytes", lambda tile: 0)
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = build(s, d)
    p = k.plan
    assert p.job_shift and p.job_stage > 0, p.describe()
    # the partial last line prefetched for the write as the job starts
    assert "prefetch(64, write=True)" in k.source and f"(dst, jb + {p.job_stage - 1})" in k.source, k.source
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, str(s.dtype), rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, [0, d.dtype.size, 64 - d.dtype.size])


def test_job_stage_last_line_prefetch_switch(nt_everywhere, plans_32, monkeypatch):
    from layoutjit import codegen
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "nt_split_min_bytes", lambda tile: 0)
    monkeypatch.setattr(codegen, "JOB_STAGE_LAST_LINE_PREFETCH", False)
    s, d = M((64, 60, 55), "f32", "nCw16c"), M((64, 60, 55), "f32", "ncw")
    k = build(s, d)
    assert k.plan.job_shift and "write=True" not in k.source, k.source
    ref.check_exact_at_offsets(k, seed=5)


def test_staged_jobs_prefetch_their_rows(plans_32, monkeypatch):
    """Staged jobs whose tiles' source rows follow one another prefetch the next row group
    (``JOB_STAGE_ROW_PREFETCH``): f32 `nchw -> nChw8c` with C = 60, at its real size."""
    dims = (2048, 60, 7, 17)
    s, d = M(dims, "f32", "nchw"), M(dims, "f32", "nChw8c")
    p = plan_of(s, d)
    assert p.job_stage and p.prefetch and not p.job_prefetch, p.describe()
    monkeypatch.setattr(plan_mod, "JOB_STAGE_ROW_PREFETCH", False)
    p = plan_of(s, d)
    assert p.job_stage and not p.prefetch, p.describe()


@pytest.mark.parametrize("dims,stag,dtag,dt", [
    ((64, 60, 7, 17), "nchw", "nChw8c", "f32"),
    ((64, 64, 5, 5), "ohwi", "oihw", "u8"),
])
def test_staged_row_prefetch_is_exact(nt_everywhere, plans_32, monkeypatch, dims, stag, dtag, dt):
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    s, d = M(dims, dt, stag), M(dims, dt, dtag)
    k = build(s, d)
    p = k.plan
    assert p.job_stage and p.prefetch and "prefetch(" in k.source, p.describe()
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, dt, rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, [0, 2 * d.dtype.size, 64 - d.dtype.size])


def test_job_stage_groups_before_anywhere_at_real_size(monkeypatch):
    """`nCw8c -> ncw` f32 1024x3072x13: each job (8 rows of 13 f32, 416 B) starts 32 B off a
    line every other time; two of them are 832 B, whole lines: jobs of two stage whole
    (``JOB_STAGE_GROUP_BYTES``) before a stage of one with its partial lines plain is tried."""
    dims = (1024, 3072, 13)
    s, d = M(dims, "f32", "nCw8c"), M(dims, "f32", "ncw")
    p = lower_and_plan(s, d, None)[1]
    assert "job_line_groups" in p.ir.notes and p.job_stage == 2 * 8 * 13 and not p.job_shift, p.describe()
    monkeypatch.setattr(plan_mod, "JOB_STAGE_GROUP_BYTES", 0)
    p = lower_and_plan(s, d, None)[1]
    assert "job_line_groups" not in p.ir.notes and p.job_stage != 2 * 8 * 13, p.describe()


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", [
    ((16, 24, 13), "nCw8c", "ncw", "f32", "f32"),
    ((8, 32, 3, 3), "nChw16c", "nChw8c", "f32", "bf16"),
    ((12, 16, 13), "ncw", "nCw8c", "f32", "f32"),
])
def test_job_stage_groups_are_exact(nt_everywhere, monkeypatch, dims, stag, dtag, sdt, ddt):
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "nt_split_min_bytes", lambda tile: 0)
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = build(s, d)
    p = k.plan
    assert "job_line_groups" in p.ir.notes and p.job_stage > 0 and not p.job_shift, p.describe()
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, str(s.dtype), rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, [0, d.dtype.size, 64 - d.dtype.size])

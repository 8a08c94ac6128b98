"""Staged jobs that read many short pieces of far source rows prefetch each tile's rows
where the next job reads them (``plan.job_rows_ahead``), and NT tiles where an outer
step continues them (``plan.tile_rows_ahead``), and lines calls of narrowing conversions
reading two long rows a fixed distance ahead (``plan.runs_rows_ahead``): ``Plan.rows_ahead``.

f32 `IOhw16o16i -> oihw` 24576x200x3x1: each job reads 3 KB from each of 13 I blocks 4.5 MB
apart, 39 interleaved streams the hardware does not follow; the next job's pieces continue
them. The tests check plans at real sizes (no kernel built), the prefetches in the kernel
source, then force the rule onto small tensors and check every byte.
"""

from __future__ import annotations

import re

import pytest

import layoutjit as lj
import layoutjit.plan as plan_mod
import reference as ref
from layoutjit import codegen
from layoutjit.compiler import build, lower_and_plan

M = lj.MemoryDesc


def plan_and_epilogue(dims, stag, dtag, sdt, ddt):
    _, p, ep = lower_and_plan(M(dims, sdt, stag), M(dims, ddt, dtag), None)
    return p, ep


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt,ahead", [
    ((24576, 200, 3, 1), "IOhw16o16i", "oihw", "f32", "f32", 768),   # the job step, 3 KB
    ((512, 1024, 7, 7), "Ohwi16o", "OIhw8i16o2i", "u8", "u8", 256),
    ((512, 1024, 7, 7), "OIhw4o4i", "Ohwi16o", "bf16", "bf16", 32),  # two jobs of 32 B
])
def test_job_rows_ahead_at_real_sizes(plans_32, dims, stag, dtag, sdt, ddt, ahead):
    p, ep = plan_and_epilogue(dims, stag, dtag, sdt, ddt)
    assert p.job_stage and p.rows_ahead == ahead, p.describe()
    # at least a line on, in whole job steps
    job = p.ir.nodes[plan_mod.outer_nodes(p.ir, p.tile)[p.parallel - 1]]
    assert p.rows_ahead % job.strides[1] == 0
    assert abs(p.rows_ahead) * p.ir.operands[1].dtype.size >= 64
    src = codegen.generate(p, ep)
    assert re.search(rf"\+ {ahead}\)", src), src


def test_job_rows_ahead_off_in_cache_and_by_switch(plans_32, monkeypatch):
    # 9 MB of bf16: the tensor stays in the LLC
    p, _ = plan_and_epilogue((256, 2048, 3, 3), "OIhw4o4i", "Ohwi16o", "bf16", "bf16")
    assert p.job_stage and not p.rows_ahead, p.describe()
    monkeypatch.setattr(plan_mod, "JOB_ROWS_PREFETCH", False)
    p, _ = plan_and_epilogue((24576, 200, 3, 1), "IOhw16o16i", "oihw", "f32", "f32")
    assert p.job_stage and not p.rows_ahead, p.describe()


CASES = [
    ((96, 40, 3, 1), "IOhw16o16i", "oihw", "f32", "f32"),
    ((32, 128, 3, 3), "Ohwi16o", "OIhw8i16o2i", "u8", "u8"),
    ((32, 128, 3, 3), "OIhw4o4i", "Ohwi16o", "bf16", "bf16"),
    ((64, 64, 7, 7), "Ohwi16o", "OIhw8i16o2i", "s8", "s8"),
]


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", CASES)
def test_job_rows_ahead_is_exact(plans_32, monkeypatch, dims, stag, dtag, sdt, ddt):
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "llc_bytes", lambda: 0)
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)  # (jobs on small tensors)
    k = build(M(dims, sdt, stag), M(dims, ddt, dtag))
    assert k.plan.job_stage and k.plan.rows_ahead, k.plan.describe()
    assert "prefetch(" in k.source
    ref.check_exact_at_offsets(k, sum(dims))


@pytest.mark.parametrize("dims,stag,dtag,ahead", [
    ((512, 384, 13, 1, 7), "Goihw16g", "gOIhw16o16i", 16),  # the w step: a line on
    ((1024, 1024, 3, 3), "OIhw16o16i", "oihw", 16),
    ((2048, 512, 8, 3, 7), "Goihw16g", "gOIhw16i16o", 16),
])
def test_tile_rows_ahead_at_real_sizes(plans_32, monkeypatch, dims, stag, dtag, ahead):
    p, ep = plan_and_epilogue(dims, stag, dtag, "f32", "f32")
    assert p.nt and not p.job_stage and p.rows_ahead == ahead, p.describe()
    assert "an outer step continues them" in p.describe()
    assert re.search(rf"\+ {ahead}\)", codegen.generate(p, ep))
    monkeypatch.setattr(plan_mod, "TILE_ROWS_PREFETCH", False)
    assert not plan_and_epilogue(dims, stag, dtag, "f32", "f32")[0].rows_ahead


def test_tile_rows_ahead_off_in_cache(plans_32):
    p, _ = plan_and_epilogue((128, 64, 96, 1, 3), "Goihw16g", "gOhwi16o", "f32", "f32")
    assert not p.rows_ahead, p.describe()


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", [
    ((16, 64, 13, 1, 7), "Goihw16g", "gOIhw16o16i", "f32", "f32"),
    ((64, 64, 3, 3), "OIhw16o16i", "oihw", "f32", "f32"),
    ((16, 16, 16, 16), "abcd", "dcba", "f32", "f32"),
])
def test_tile_rows_ahead_is_exact(plans_32, monkeypatch, dims, stag, dtag, sdt, ddt):
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "llc_bytes", lambda: 0)
    k = build(M(dims, sdt, stag), M(dims, ddt, dtag))
    assert k.plan.rows_ahead and not k.plan.job_stage, k.plan.describe()
    assert "prefetch(" in k.source
    ref.check_exact_at_offsets(k, sum(dims))


@pytest.mark.parametrize("dims,chunk", [
    ((1600, 832, 3, 3), 144),  # 16 i x 9 hw of one o: the next i block continues it
    ((1024, 2048, 3, 3), 144),
])
def test_tile_chunk_ahead_at_real_sizes(monkeypatch, dims, chunk):
    """Tiles whose rows follow one another (one chunk of the source each) prefetch the chunk
    an outer step continues (``TILE_CHUNK_PREFETCH``), one step ahead."""
    monkeypatch.setattr(plan_mod, "vector_bytes", lambda: 64)
    monkeypatch.setattr(plan_mod, "llc_bytes", lambda: 32 << 20)
    p, ep = plan_and_epilogue(dims, "oihw", "OIhw16o16i", "f32", "f32")
    a, b = p.ir.nodes[p.tile.a], p.ir.nodes[p.tile.b]
    assert p.nt and plan_mod._rows_follow(a, b) and p.rows_ahead == chunk == a.extent * b.extent, p.describe()
    assert re.search(rf"\+ {chunk}\)", codegen.generate(p, ep))
    monkeypatch.setattr(plan_mod, "TILE_CHUNK_PREFETCH", False)
    assert not plan_and_epilogue(dims, "oihw", "OIhw16o16i", "f32", "f32")[0].rows_ahead


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", [
    ((64, 48, 3, 3), "oihw", "OIhw16o16i", "f32", "f32"),
    ((40, 37, 3, 3), "oihw", "OIhw16o16i", "f32", "f32"),  # padded O and I
])
def test_tile_chunk_ahead_is_exact(monkeypatch, dims, stag, dtag, sdt, ddt):
    monkeypatch.setattr(plan_mod, "vector_bytes", lambda: 64)
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "llc_bytes", lambda: 0)
    k = build(M(dims, sdt, stag), M(dims, ddt, dtag))
    a, b = k.plan.ir.nodes[k.plan.tile.a], k.plan.ir.nodes[k.plan.tile.b]
    assert k.plan.rows_ahead and plan_mod._rows_follow(a, b), k.plan.describe()
    assert "prefetch(" in k.source
    ref.check_exact_at_offsets(k, sum(dims))


@pytest.mark.parametrize("dims,stag,dtag,ddt,taken", [
    ((512, 13, 4096), "nCw8c", "nCw16c", "u8", True),       # two rows, one partly padding
    ((2048, 13, 56, 55), "nChw8c", "nhwc", "bf16", True),
    ((1, 512, 64, 28, 17), "nCdhw8c", "nCdhw16c", "s8", False),  # two unpadded rows: lost
    ((32, 512, 1000), "nCw8c", "nwc", "bf16", False),           # more rows: lost
])
def test_runs_rows_ahead_at_real_sizes(plans_32, dims, stag, dtag, ddt, taken):
    p, ep = plan_and_epilogue(dims, stag, dtag, "f32", ddt)
    assert p.tile.kind == "lines"
    assert bool(p.rows_ahead) == taken, p.describe()
    if taken:
        assert p.rows_ahead == plan_mod.RUNS_ROWS_AHEAD_BYTES // 4
        assert "each call's source rows" in p.describe()
        assert re.search(rf"\+ {p.rows_ahead}\)", codegen.generate(p, ep))


@pytest.mark.parametrize("dims,stag,dtag,ddt", [
    ((32, 13, 4096), "nCw8c", "nCw16c", "u8"),
    ((32, 13, 56, 55), "nChw8c", "nhwc", "bf16"),
])
def test_runs_rows_ahead_is_exact(plans_32, monkeypatch, dims, stag, dtag, ddt):
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "llc_bytes", lambda: 0)
    monkeypatch.setattr(plan_mod, "RUNS_ROWS_AHEAD_BYTES", 64)
    k = build(M(dims, "f32", stag), M(dims, ddt, dtag))
    assert k.plan.tile.kind == "lines" and k.plan.rows_ahead, k.plan.describe()
    assert "prefetch(" in k.source
    ref.check_exact_at_offsets(k, sum(dims))


def test_runs_rows_ahead_wide_vectors(monkeypatch):
    """Plans for 64-byte vectors take ``RUNS_ROWS_AHEAD_WIDE_BYTES`` (0: on Zen 4 the
    prefetches only cost)."""
    monkeypatch.setattr(plan_mod, "vector_bytes", lambda: 64)
    monkeypatch.setattr(plan_mod, "llc_bytes", lambda: 32 << 20)
    spec = ((512, 13, 4096), "nCw8c", "nCw16c", "f32", "u8")
    assert not plan_and_epilogue(*spec)[0].rows_ahead
    monkeypatch.setattr(plan_mod, "RUNS_ROWS_AHEAD_WIDE_BYTES", 1024)
    p = plan_and_epilogue(*spec)[0]
    assert p.tile.kind == "lines" and p.rows_ahead == 1024 // 4, p.describe()

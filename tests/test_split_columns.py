"""Transposes with too few jobs outside their tile cut the tile's columns into an outer loop
(``plan.split_columns``): `ab -> ba` 3xN, a C=3 image to pixels.

The tests patch the job-size and parallel thresholds down so that small tensors split,
and check every byte at 1 and 2 threads (destinations at several byte offsets, guard bytes
around them), with plain and non-temporal stores, padding zeros and a conversion.
"""

from __future__ import annotations

import numpy as np
import pytest

import layoutjit as lj
import layoutjit.plan as plan_mod
import reference as ref
from layoutjit.compiler import lower_and_plan

M = lj.MemoryDesc
NOTE = "its columns cut into"


def plan_of(s, d):
    return lower_and_plan(s, d, None)[1]


def test_split_at_the_real_thresholds():
    """A 24 MB 3xN transpose splits into jobs of its columns; a 0.5 MB 64x1000 one, whose
    jobs would be 20 KB, keeps its two row groups. (First in the module: the fixture below
    patches thresholds down for the rest of it.)"""
    p = plan_of(M((3, 1000000), "f32", "ab"), M((3, 1000000), "f32", "ba"))
    assert any(NOTE in n for n in p.notes) and p.jobs == 100, p.describe()
    assert [n.extent for n in p.nodes] == [100, 3, 10000]
    q = plan_of(M((64, 1000), "f32", "ab"), M((64, 1000), "f32", "ba"))
    assert not any(NOTE in n for n in q.notes), q.describe()


@pytest.fixture(scope="module")
def small_jobs():
    mp = pytest.MonkeyPatch()
    mp.setattr(plan_mod, "PARALLEL_MIN_BYTES", 1024)
    mp.setattr(plan_mod, "SPLIT_JOB_BYTES", 1024)
    yield
    mp.undo()


CASES = [
    ((3, 4096), "ab", "ba", "f32", "f32"),
    ((3, 1280), "ab", "ba", "f32", "bf16"),               # a conversion; 80 steps of 16 (40 of 32)
    ((1, 3, 40, 48), "nchw", "nhwc", "s8", "s8"),
    ((1, 3, 32, 64), "nchw", "nChw16c", "f32", "f32"),   # 13 zero channels per pixel
    ((5, 2048), "ab", "ba", "bf16", "bf16"),
]


@pytest.mark.parametrize("nt", [False, True])
@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", CASES)
def test_split_columns_is_exact(small_jobs, monkeypatch, nt, dims, stag, dtag, sdt, ddt):
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0 if nt else 1 << 40)
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = lj.compiler.build(s, d)  # not the in-memory cache: the plan changes with ``nt``
    p = k.plan
    monkeypatch.setattr(plan_mod, "SPLIT_COLUMNS", False)
    whole = plan_of(s, d)
    assert any(NOTE in n for n in p.notes) and p.jobs >= 2 and p.nt == whole.nt, p.describe()
    assert whole.jobs == 1 and (p.nt or not nt or ddt == "bf16" and sdt == "f32")  # 3x8 tiles: 48 B
    chunk = p.nodes[p.tile.b]
    assert chunk.extent % p.tile.V == 0
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, sdt, rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, [0, d.dtype.size, 64 - d.dtype.size])


def test_split_columns_not_taken(small_jobs):
    """Columns that are not whole tile steps (3x1001), or whose steps have no divisor near
    the jobs wanted (3x16*61: a prime), or tiles with enough row groups: no split."""
    for dims in [(3, 1001), (3, 16 * 61), (512, 512)]:
        p = plan_of(M(dims, "f32", "ab"), M(dims, "f32", "ba"))
        assert not any(NOTE in n for n in p.notes), (dims, p.describe())


LINE_CASES = [
    ((4, 8, 7, 9), "nChw8c", "nChw16c", "f32", "f32"),   # one block of 8 into a padded 16
    ((6, 3, 5, 8), "nChw4c", "nChw8c", "f32", "f32"),    # C = 3: padding on both sides
    ((8, 8, 40), "nCw8c", "nCw16c", "f32", "s8"),        # narrowed
    ((2, 5, 6, 4, 8), "nCdhw8c", "nCdhw16c", "bf16", "bf16"),
    ((1, 24, 3, 23), "nChw8c", "nhwc", "f32", "f32"),     # one image: columns off the lines (phases)
    ((1, 20, 16, 13), "nChw16c", "nhwc", "s8", "s8"),     # one image: panels of columns
]


@pytest.mark.parametrize("nt", [False, True])
@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", LINE_CASES)
def test_runs_packed_into_lines_split_their_columns(small_jobs, monkeypatch, nt, dims, stag, dtag, sdt, ddt):
    """Runs packed into lines (kind "lines") whose channels fit one destination block have
    no node outside the tile (n, h and w merge into its columns): one job, so a second
    thread did nothing (`nCw8c -> nCw16c` f32 1024x8x299 at 2 threads 1.74x copy). Their
    columns are cut into an outer loop too (``SPLIT_LINE_COLUMNS``); every byte exact,
    padding zeros included, at 1 and 2 threads, plain and NT."""
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0 if nt else 1 << 40)
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = lj.compiler.build(s, d)
    p = k.plan
    assert p.tile.kind == "lines" and any(NOTE in n for n in p.notes) and p.jobs >= 2, p.describe()
    monkeypatch.setattr(plan_mod, "SPLIT_LINE_COLUMNS", False)
    assert plan_of(s, d).jobs == 1
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, sdt, rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, [0, d.dtype.size, 64 - d.dtype.size])

"""Realigned rows that follow one another stage the line they share (``Plan.shift_edges``).

A realigned row off the lines starts and ends in a partial line. Where the destination rows
follow one another (`nChw16c -> nchw`, `ab -> ba`), one row's last line is the next one's
first: the kernel fills it in a small stage from both rows and writes it whole (NT), and
only a job's first and last line stay plain. The tests check the plans at real sizes (no
kernel built) and force such plans onto small tensors, byte for byte: sources padding the
rows' dim (the last block's rows cut to its data), jobs split between threads in the middle
of a panel, destinations at several offsets, guard bytes.
"""

from __future__ import annotations

import numba as nb
import numpy as np
import pytest

import layoutjit as lj
import layoutjit.plan as plan_mod
import reference as ref
from layoutjit import simd
from layoutjit.compiler import build, lower_and_plan

M = lj.MemoryDesc


def plan_of(s, d):
    return lower_and_plan(s, d, None)[1]


@pytest.mark.parametrize("dims,stag,dtag,dt,edges", [
    ((75, 300, 27, 27), "nChw16c", "nchw", "bf16", True),   # rows of 1458 B, C = 300 of 304
    ((56, 768, 28, 28), "nhwc", "nchw", "s8", True),        # rows of 784 B
    ((16, 200, 55, 55), "nChw16c", "nchw", "f32", False),   # 4-byte elements: plain partial lines
])
def test_plans_at_real_sizes(monkeypatch, dims, stag, dtag, dt, edges):
    monkeypatch.setattr(plan_mod, "vector_bytes", lambda: 64)
    monkeypatch.setattr(plan_mod, "llc_bytes", lambda: 32 << 20)
    p = plan_of(M(dims, dt, stag), M(dims, dt, dtag))
    assert p.shifted and p.shift_edges == edges, p.describe()
    assert ("(edges)" in p.describe()) == edges
    if edges:
        monkeypatch.setattr(plan_mod, "SHIFT_EDGES", False)
        assert not plan_of(M(dims, dt, stag), M(dims, dt, dtag)).shift_edges


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", [
    ((2, 40, 19, 61), "nChw16c", "nchw", "bf16", "bf16"),   # C = 40 of 48: the last block's 8 rows
    ((2, 40, 5, 7, 41), "nCdhw16c", "ncdhw", "u8", "u8"),   # 1-byte rows of 1435 B
    ((2, 150, 37), "abc", "acb", "s8", "s8"),
    ((70, 45), "ab", "ba", "f32", "bf16"),                  # narrowing into 2-byte rows
    ((3, 100, 150), "abc", "acb", "bf16", "bf16"),
])
def test_edges_are_exact(nt_everywhere, monkeypatch, dims, stag, dtag, sdt, ddt):
    monkeypatch.setattr(plan_mod, "SHIFT_MIN_ROW_BYTES", 0)
    monkeypatch.setattr(plan_mod, "SHIFT_MIN_BYTE_ROWS", 0)
    monkeypatch.setattr(plan_mod, "PANEL_MAX_BYTES", 0)
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)  # (jobs split between threads)
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = build(s, d)
    assert k.plan.shifted and k.plan.shift_edges, k.plan.describe()
    assert ref.scratch_elems(k.source, "edge")
    ref.check_exact_at_offsets(k, seed=sum(dims))


@pytest.mark.parametrize("dt,npdt", [("u8", np.uint8), ("bf16", np.uint16), ("f32", np.float32)])
def test_copy_prefix_writes_exactly_n_elements(dt, npdt):
    """``simd.copy_prefix``: the first n of a line's elements, nothing past them (n <= 0:
    nothing at all), at any place in the destination."""
    cp = simd.copy_prefix(dt)
    q = 64 // np.dtype(npdt).itemsize

    @nb.njit
    def run(src, soff, dst, doff, n):
        cp(src, soff, dst, doff, n)

    src = np.arange(3 * q).astype(npdt)
    for n in (-3, 0, 1, q // 2 + 1, q - 1, q):
        for doff in (0, 1, q - 1):
            dst = np.zeros(3 * q, npdt)
            run(src, 5, dst, doff, n)
            want = np.zeros(3 * q, npdt)
            want[doff:doff + max(n, 0)] = src[5:5 + max(n, 0)]
            np.testing.assert_array_equal(dst, want, err_msg=f"n {n}, doff {doff}")


def test_edges_with_the_store_kind_timed(nt_everywhere, monkeypatch):
    """A realigned plan of few rows a job carries plain tiles too and times both kinds
    (``Plan.nt_tune``): the edges belong to the realigned kind only; every byte either way,
    at 1 and 2 threads."""
    monkeypatch.setattr(plan_mod, "SHIFT_MIN_ROW_BYTES", 0)
    monkeypatch.setattr(plan_mod, "PANEL_MAX_BYTES", 0)
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    dims = (2, 16, 70, 3)
    s, d = M(dims, "bf16", "nChw8c"), M(dims, "bf16", "nchw")
    k = build(s, d)
    p = k.plan
    assert p.shifted and p.shift_edges and p.nt_tune, p.describe()
    rng = np.random.default_rng(8)
    x = ref.random_raw(s.get_size() // 2, "bf16", rng)
    want = ref.reorder(x, s, d, np.zeros(d.get_size() // 2, d.dtype.storage))
    ref.check_store_kinds(k, x, want, (0, p.jobs))
    ref.check_guarded_runs(k, x, want.view(np.uint8), [0, 2, 62])

"""Jobs off the lines that realign whole-block tiles (``plan.job_stream_shift``).

`nchw -> nChw8c` f32 with 27x27 planes: a job (8 c of one image) writes one run of 729 x 32
bytes, and every other job starts half a line off. Those jobs took plain stores; now each
tile's run joins the last line of the previous tile's through a one-line carry and goes out
as whole aligned NT lines (``simd.tile_stream_shift``), the job's partial first and last
line plain. The tests check the micro-kernel against numpy at every place in a line, the
plans at real sizes (no kernel built), and small kernels forced onto such plans byte for
byte (destinations at several offsets, guard bytes, 1 and 2 threads).
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

pytestmark = pytest.mark.skipif(not simd.tile_stream_shift_supported("f32", "f32"),
                                reason="tile_stream_shift needs AVX2 or AVX-512")


def plan_of(s, d):
    return lower_and_plan(s, d, None)[1]


def _widths():
    return [w for w in (32, 64) if w <= simd.ISA_VECTOR_BYTES]


@pytest.mark.parametrize("vbytes", _widths())
@pytest.mark.parametrize("R,V,sdt,ddt,sty,dty", [
    (8, 16, "f32", "f32", np.float32, np.float32),
    (4, 16, "f32", "f32", np.float32, np.float32),
    (16, 16, "s8", "s8", np.int8, np.int8),
    (16, 16, "f32", "s8", np.float32, np.int8),
    (16, 16, "s32", "u8", np.int32, np.uint8),
    (16, 8, "u8", "f32", np.uint8, np.float32),
])
def test_tile_stream_shift_is_exact(vbytes, R, V, sdt, ddt, sty, dty):
    """Four tiles' runs, one after another, from every sampled place in a line: the
    destination run equals numpy's transpose (converted), the carry's last elements written
    by the caller, and nothing before or after the run changes."""
    q = 64 // np.dtype(dty).itemsize
    head = simd.tile_stream_shift(R, V, sdt, ddt, head=True, vbytes=vbytes)
    body = simd.tile_stream_shift(R, V, sdt, ddt, vbytes=vbytes)
    tiles = 4
    B = tiles * V
    n = R * B

    @nb.njit
    def run(src, dst, doff, carry):
        head(src, 0, B, dst, doff, carry)
        for t in range(1, tiles):
            body(src, t * V, B, dst, doff + t * V * R, carry)
        end = doff + n
        m = ((dst.ctypes.data + end * dst.itemsize) & 63) // dst.itemsize
        for e in range(m):
            dst[end - m + e] = carry[q - m + e]
        simd.sfence()

    rng = np.random.default_rng(R * V)
    if np.dtype(sty).kind == "f":
        x = rng.uniform(-100, 100, n).astype(sty)
    else:
        info = np.iinfo(sty)
        x = rng.integers(max(info.min, -300), min(info.max, 300), n, endpoint=True).astype(sty)
    want = ref.reorder(x, M((R, B), sdt, "ab"), M((R, B), ddt, "ba"), np.zeros(n, dty))
    for mis in sorted({0, 1, q // 4, q // 2, q - 1}):
        buf = np.full(n + 4 * q, 7, dty)
        base = (-buf.ctypes.data // buf.itemsize) % q + q  # a line into the buffer
        carry = np.zeros(q, dty)
        run(x, buf, base + mis, carry)
        np.testing.assert_array_equal(buf[base + mis:base + mis + n], want, err_msg=f"mis {mis}")
        assert (buf[:base + mis] == 7).all() and (buf[base + mis + n:] == 7).all(), f"mis {mis}"


def test_tile_stream_shift_checks_its_arguments():
    with pytest.raises(ValueError, match="multiple of 64"):
        simd.tile_stream_shift(3, 5, "f32", "f32")
    with pytest.raises(ValueError, match="1-, 2- or 4-byte"):
        simd.tile_stream_shift(8, 8, "f64", "f64")


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt,takes", [
    ((128, 128, 27, 27), "nchw", "nChw8c", "f32", "f32", True),    # runs of 729 x 32 B
    ((16, 2048, 27, 27), "nchw", "nChw16c", "f32", "bf16", True),  # ... x 32 B of bf16
    ((64, 128, 55, 55), "nchw", "nChw16c", "f32", "s8", True),     # 16 B: four places in a line
    ((512, 64, 1001), "ncw", "nCw8c", "f32", "f32", True),
    ((64, 3, 299, 299), "nchw", "nChw8c", "f32", "f32", False),    # C = 3 of 8: padded
    ((64, 128, 28, 28), "nchw", "nChw8c", "f32", "f32", False),    # every job on a line
])
def test_plans_at_real_sizes(monkeypatch, dims, stag, dtag, sdt, ddt, takes):
    """The pairs measured take the realignment where their jobs check their offset at run
    time; padded blocks and jobs that all start on a line do not; the switch turns it off."""
    monkeypatch.setattr(plan_mod, "llc_bytes", lambda: 32 << 20)
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    p = plan_of(s, d)
    assert p.job_stream_shift == takes, p.describe()
    assert ("through a one-line carry" in p.describe()) == takes
    if takes:
        assert p.job_align and p.nt and p.tile.rows_contiguous, p.describe()
        monkeypatch.setattr(plan_mod, "JOB_STREAM_SHIFT", False)
        p = plan_of(s, d)
        assert p.job_align and not p.job_stream_shift, p.describe()


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", [
    ((8, 16, 7, 7), "nchw", "nChw8c", "f32", "f32"),       # jobs of 1568 B: every other one off
    ((6, 16, 5, 9), "nchw", "nChw4c", "f32", "f32"),       # 16 B blocks
    ((4, 32, 5, 11), "nchw", "nChw16c", "f32", "bf16"),
    ((4, 32, 9, 9), "nchw", "nChw16c", "f32", "s8"),
    ((6, 32, 99), "ncw", "nCw8c", "bf16", "bf16"),
    ((3, 16, 3, 7, 7), "ncdhw", "nCdhw8c", "u8", "f32"),
])
def test_kernels_are_exact(nt_everywhere, monkeypatch, dims, stag, dtag, sdt, ddt):
    """Small tensors forced onto such plans (NT everywhere, jobs on small tensors, no
    line groups): every byte against the numpy reference, the destination aligned (the
    jobs off the lines realign), two elements past a line and one short of the next (the
    kernel's plain branch), at 1 and 2 threads."""
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "JOB_LINE_GROUPS", 0)
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = build(s, d)
    p = k.plan
    assert p.job_align and p.job_stream_shift, p.describe()
    assert "tile_stream_shift(" in k.source and "jcarry" in k.source
    ref.check_exact_at_offsets(k, seed=sum(dims))


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", [
    ((8, 16, 7, 7), "nchw", "nChw8c", "f32", "f32"),
    ((4, 32, 9, 9), "nchw", "nChw16c", "f32", "s8"),
])
def test_kernels_of_32_byte_plans_are_exact(nt_everywhere, plans_32, monkeypatch, dims, stag, dtag, sdt, ddt):
    """The same with AVX2's plans (32-byte vectors: the realignment by a switch of shuffles)."""
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "JOB_LINE_GROUPS", 0)
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = build(s, d)
    assert k.plan.job_stream_shift and k.plan.vector_bytes == 32, k.plan.describe()
    assert "vbytes=32" in k.source
    ref.check_exact_at_offsets(k, seed=sum(dims))

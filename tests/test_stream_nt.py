"""Streams through an epilogue with non-temporal stores (large eltwise / attribute reorders).

Above the NT threshold, a run contiguous on both sides whose values go through
an epilogue (an eltwise, scales, a sum) is computed chunk by chunk into a small
buffer and stored as whole lines; a head up to the first line and a tail go
element by element. The tests force that plan on small tensors (threshold
patched to 0) and check every element, at destination offsets that exercise
the head peel, in place and out of place, with guard bytes around the
destination.
"""

from __future__ import annotations

import numpy as np
import pytest

import layoutjit as lj

M = lj.MemoryDesc
GUARD = 64


def _guarded(nbytes: int, off: int):
    raw = np.full(nbytes + 2 * GUARD + 64, 0xA5, np.uint8)
    a0 = (-raw.ctypes.data) % 64 + GUARD + off
    return raw, a0


@pytest.mark.parametrize("off", [0, 4, 52])
def test_eltwise_stream_nt(nt_everywhere, off):
    md = M([3, 48, 7, 11], "f32", "nChw16c")  # 11088 elements (no padding): chunks plus a tail
    e = lj.compile_eltwise(md, "linear", 2.0, -1.0)
    assert "nt=True" in e.source and "opaque(" in e.source, e.source
    n = md.get_size()
    x = (np.arange(n // 4, dtype=np.float32) % 97) - 40
    raw, a0 = _guarded(n, off)
    y = raw[a0:a0 + n].view(np.float32)
    e(x, y)
    np.testing.assert_array_equal(y, np.float32(2.0) * x - np.float32(1.0))
    assert (raw[:a0] == 0xA5).all() and (raw[a0 + n:] == 0xA5).all()
    y[:] = x
    e(y, y)  # in place: each chunk is read before its lines are stored
    np.testing.assert_array_equal(y, np.float32(2.0) * x - np.float32(1.0))


def test_quantizing_stream_nt(nt_everywhere):
    md = M([2, 64, 9, 13], "f32", "nchw")
    k = lj.compile_reorder(md, md.with_dtype("s8"), scales={"dst": 0}, post_ops=[("sum", 1.0)])
    assert "nt=True" in k.source and "opaque(" in k.source, k.source
    n = md.get_size() // 4
    x = np.linspace(-300, 300, n, dtype=np.float32)
    old = (np.arange(n) % 7 - 3).astype(np.int8)
    raw, a0 = _guarded(n, 8)
    y = raw[a0:a0 + n].view(np.int8)
    y[:] = old
    k(x, y, scales={"dst": np.array([0.5], np.float32)})
    # oneDNN: dst = saturate(round((x + beta * dst_old) / dst_scale)), beta = 1
    want = np.clip(np.rint((x + old.astype(np.float32)) / np.float32(0.5)), -128, 127).astype(np.int8)
    np.testing.assert_array_equal(y, want)
    assert (raw[:a0] == 0xA5).all() and (raw[a0 + n:] == 0xA5).all()


def _guarded_check(src_md, dst_md, seed, plan_kind, source_has):
    import reference as ref

    k = lj.compile_reorder(src_md, dst_md)
    assert k.plan.tile is not None and k.plan.tile.kind == plan_kind, k.plan.describe()
    assert all(x in k.source for x in source_has), k.source
    n_src = max(src_md.get_size(), src_md.required_bytes()) // src_md.dtype.size
    x = ref.random_raw(n_src, str(src_md.dtype), np.random.default_rng(seed))
    n = dst_md.get_size()
    expect = ref.reorder(x, src_md, dst_md, np.zeros(n // dst_md.dtype.size,
                                                     dst_md.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, offsets=(0, 4, 64 + 16), note=f"{dst_md} ")
    return k


@pytest.mark.parametrize("c, sdt, ddt, tag", [
    (3, "f32", "f32", "nChw8c"), (3, "f32", "bf16", "nChw16c"), (5, "f32", "s8", "nChw16c"),
    (3, "u8", "f32", "nChw8c"), (3, "f32", "f32", "nChw4c"), (3, "f32", "f32", "nChw16c"),
    (13, "f32", "f32", "nChw16c"), (7, "bf16", "f32", "nChw8c")])
def test_padded_runs_packed_into_lines(nt_everywhere, c, sdt, ddt, tag):
    """nhwc -> one block with C < block: each pixel's run is part data and part zero
    padding, and the source holds the data back to back: 16 runs per call read as whole
    vectors and stored as whole lines (NT where aligned, plain at misaligned offsets; a
    tail of pixels, 2x5x7 = 70, takes a shorter call)."""
    dims = [2, c, 5, 7]
    _guarded_check(M(dims, sdt, "nhwc"), M(dims, ddt, tag), c, "lines",
                   [f"Vv={c}, src_dense=True, nt=True", f"Vv={c}, src_dense=True, nt=False"])


@pytest.mark.parametrize("c, tag", [(3, "nChw16c"), (13, "nChw16c"), (3, "nChw8c")])
def test_padded_runs_from_a_strided_source(nt_everywhere, c, tag):
    """Pixels 16 elements apart in the source (not back to back): the same packing, each
    run read by its own (masked) load."""
    src_md = M([2, c, 5, 7], "f32", strides=[16 * 35, 1, 16 * 7, 16])
    k = _guarded_check(src_md, M([2, c, 5, 7], "f32", tag), c, "lines",
                       [f"Vv={c}, nt=True", f"Vv={c}, nt=False"])
    assert "src_dense" not in k.source


@pytest.mark.parametrize("dims, stag, dtag, sdt, ddt, far", [
    ((2, 3, 5, 7), "nChw16c", "nChw8c", "f32", "f32", True),     # runs 64 B apart: 8 per call
    ((2, 5, 3, 11), "nChw16c", "nChw8c", "f32", "s8", True),
    ((3, 4, 23), "nCw16c", "nwc", "f32", "f32", True),
    ((2, 3, 1, 5, 7), "nCdhw16c", "nCdhw8c", "f32", "bf16", True),
    ((2, 3, 5, 7), "nhwc", "nChw8c", "f32", "f32", False),       # dense source: 16 per call
    ((2, 3, 5, 7), "nChw16c", "nChw8c", "u8", "u8", False),      # runs 16 B apart: 16
])
def test_runs_from_separate_lines_pack_fewer_per_call(nt_everywhere, dims, stag, dtag, sdt, ddt, far):
    """Padded runs that each start their own source line are packed ``PACKED_FAR_RUNS`` per
    call (``PACKED_RUNS`` otherwise); exact with a tail call, at several offsets."""
    s, d = M(list(dims), sdt, stag), M(list(dims), ddt, dtag)
    k = _guarded_check(s, d, sum(dims), "lines", ["nt=True"])
    assert k.plan.tile.R == (8 if far else 16), k.plan.describe()


@pytest.mark.parametrize("sdt, ddt, prefetched", [
    ("f32", "s8", True), ("f32", "bf16", True),  # reads more than it writes: source prefetched
    ("s8", "f32", False), ("f32", "f32", False),
    ("s32", "s8", False), ("s32", "u8", False),  # integer narrowing: saturating packs, no prefetch
    ("s32", "bf16", True),
])
@pytest.mark.parametrize("off", [0, 5])
def test_narrowing_streams_prefetch_their_source(plans_32, nt_everywhere, sdt, ddt, prefetched, off):
    """NT conversion streams that read more than they write prefetch the source
    ``Plan.stream_prefetch`` bytes ahead (past the end too: a hint, never a fault); every byte of
    the destination is exact, with a head peel and a tail, and nothing is written around it.
    Plans for 32-byte vectors (AVX2: measured there; 64-byte ones take none, below)."""
    import reference as ref

    src, dst = M([3, 40, 7, 13], sdt, "nhwc"), M([3, 40, 7, 13], ddt, "nhwc")
    k = lj.compiler.build(src, dst)
    assert k.plan.tile.kind == "stream" and k.plan.nt, k.plan.describe()
    ssz = src.dtype.size
    ahead = k.plan.stream_prefetch
    assert bool(ahead) == prefetched and (not ahead or "prefetches its source" in k.plan.describe())
    assert (ahead == 0 or f" + {ahead // ssz})" in k.source) and ("prefetch(" in k.source) == prefetched, k.source
    rng = np.random.default_rng(off)
    x = ref.random_raw(src.get_size() // ssz, sdt, rng)
    want = ref.reorder(x, src, dst, np.zeros(dst.get_size() // dst.dtype.size, dst.dtype.storage))
    n = dst.get_size()
    raw, a0 = _guarded(n, off * dst.dtype.size)
    y = raw[a0:a0 + n].view(dst.dtype.storage)
    k(x, y)
    np.testing.assert_array_equal(y.view(np.uint8), want.view(np.uint8))
    assert (raw[:a0] == 0xA5).all() and (raw[a0 + n:] == 0xA5).all()


def test_wide_vector_streams_take_no_prefetch(nt_everywhere, monkeypatch):
    """Plans for 64-byte vectors (AVX-512) use ``STREAM_PREFETCH_WIDE_BYTES`` (0 by default:
    on Zen 4 the prefetches only cost)."""
    import layoutjit.plan as plan_mod

    src, dst = M([3, 40, 7, 13], "f32", "nhwc"), M([3, 40, 7, 13], "s8", "nhwc")
    monkeypatch.setattr(plan_mod, "vector_bytes", lambda: 64)
    p = lj.compiler.lower_and_plan(src, dst, None)[1]
    assert p.tile.kind == "stream" and p.nt and p.stream_prefetch == 0, p.describe()
    monkeypatch.setattr(plan_mod, "STREAM_PREFETCH_WIDE_BYTES", 1024)
    assert lj.compiler.lower_and_plan(src, dst, None)[1].stream_prefetch == 1024
    monkeypatch.setattr(plan_mod, "vector_bytes", lambda: 32)
    assert lj.compiler.lower_and_plan(src, dst, None)[1].stream_prefetch == plan_mod.STREAM_PREFETCH_BYTES


@pytest.fixture
def llc_32m(monkeypatch):
    """Thresholds of a host with a 32 MiB LLC (NT from 16 MiB of traffic), on any host."""
    import layoutjit.plan as plan_mod

    monkeypatch.setattr(plan_mod, "llc_bytes", lambda: 32 << 20)
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 16 << 20)
    return plan_mod


@pytest.mark.parametrize("dims, stag, dtag, sdt, ddt, split_nt", [
    ((768, 16, 8, 7, 7), "ndhwc", "nCdhw16c", "f32", "f32", False),  # C=16: a copy, 38.5 MB
    ((10, 256, 56, 56), "nchw", "nchw", "bf16", "f32", False),       # widening, 48.2 MB
    ((1280, 16, 8, 7, 7), "ndhwc", "nCdhw16c", "f32", "f32", True),  # 64 MB: past 48 MiB
    ((8, 256, 56, 56), "nhwc", "nhwc", "f32", "bf16", True),         # narrowing: one thread's
])
def test_streams_split_between_threads_store_plainly_below_their_threshold(
        llc_32m, dims, stag, dtag, sdt, ddt, split_nt):
    """A stream of 16-48 MiB of traffic (LLC 32 MiB) takes NT stores when one thread runs
    every job and plain ones when the jobs are split between threads (``stream_split_min_bytes``:
    1.5x the LLC), unless it narrows its elements. No timed band (``nt_tune``). Plans only."""
    plan_mod = llc_32m
    p = lj.compiler.lower_and_plan(M(list(dims), sdt, stag), M(list(dims), ddt, dtag), None)[1]
    assert p.tile.kind == "stream" and p.nt and p.nt_split == split_nt and not p.nt_tune, p.describe()
    assert plan_mod.split_min_bytes(p.ir, p.tile) == (8 << 20 if ddt == "bf16" else 48 << 20)
    assert ("split between threads: plain, below 50331648 B" in p.describe()) == (not split_nt)


@pytest.mark.parametrize("sdt, ddt", [("f32", "f32"), ("u8", "f32"), ("bf16", "bf16")])
def test_stream_kernels_take_the_store_kind_of_their_job_range(monkeypatch, sdt, ddt):
    """A stream with ``nt_split`` False stores NT in a call given every job (one thread) and
    plainly in a call given part of them (split between threads); every byte exact either
    way, at destination offsets that exercise the head peel, nothing written around it."""
    import layoutjit.plan as plan_mod
    import reference as ref

    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "llc_bytes", lambda: 1 << 40)
    monkeypatch.setattr(plan_mod, "STREAM_CHUNK_BYTES", 1024)  # jobs of a few lines
    dims = [2, 16, 9, 13]
    s, d = M(dims, sdt, "nhwc"), M(dims, ddt, "nChw16c")  # C=16: one block, a run
    k = lj.compiler.build(s, d)
    p = k.plan
    assert p.tile.kind == "stream" and p.nt and not p.nt_split and p.jobs > 1, p.describe()
    assert f"hi - lo == {p.jobs}" in k.source and "ntq" not in k.source, k.source
    rng = np.random.default_rng(len(sdt + ddt))
    x = ref.random_raw(s.get_size() // s.dtype.size, sdt, rng)
    want = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, want, offsets=(0, d.dtype.size, 64 - d.dtype.size))

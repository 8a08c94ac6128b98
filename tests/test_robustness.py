"""Validation before every launch, and scale (issue 6, items 1 and 3).

Generated kernels have no bounds checks, so every bad input must be a
LayoutError naming the argument, raised before anything is written. Each
call-time case runs against a destination inside a guard region (a larger
buffer filled with a sentinel): after the refused call, every byte -- the
destination and its guards -- must be unchanged.

The 2^31+ element transpose is marked ``slow`` (deselect with ``-m "not slow"``)
and skips itself when less than ~8 GB of memory is available.
"""

from __future__ import annotations

import array
import gc
import os
import tracemalloc

import numpy as np
import pytest

import layoutjit as lj
import reference as ref
from layoutjit.compiler import check_pair
from layoutjit.kernel import element_span, overlapping_dims

M = lj.MemoryDesc
SENTINEL = 0xA5
GUARD = 64


def guarded(nbytes: int, dtype=np.uint8) -> tuple[np.ndarray, np.ndarray]:
    whole = np.full(nbytes + 2 * GUARD, SENTINEL, dtype=np.uint8)
    return whole, whole[GUARD:GUARD + nbytes].view(dtype)


# A few kernels shared by the module (compiles are the expensive part).
@pytest.fixture(scope="module")
def k_t():  # f32 3x8 transpose: 96 bytes each side (a multiple of 8, for object arrays)
    return lj.compile_reorder(M([3, 8], "f32", "ab"), M([3, 8], "f32", "ba"))


@pytest.fixture(scope="module")
def k_view():  # a submemory destination: its buffer may be larger than get_size()
    parent = M([4, 8], "f32", "ab")
    return lj.compile_reorder(M([2, 4], "f32", "ab"), parent.submemory_desc([2, 4], [1, 2]))


@pytest.fixture(scope="module")
def k_attr():
    dims = [3, 8]
    return lj.compile_reorder(M(dims, "f32", "ab"), M(dims, "s8", "ba"), scales={"src": 2, "dst": 1},
                              zero_points={"dst": 1},
                              post_ops=[("sum", 0.5), ("binary", "add", M([3, 1], "f32", "ab"))])


@pytest.fixture(scope="module")
def k_relu():
    return lj.compile_eltwise(M([3, 8], "f32", "ab"), "relu")


def expect_refused(k, src, dst_whole, match, *, dst=None, **runtime):
    """k(src, dst) raises a LayoutError matching ``match``; dst_whole is untouched."""
    before = dst_whole.copy()
    with pytest.raises(lj.LayoutError, match=match):
        k(src, dst, **runtime)
    assert np.array_equal(dst_whole, before), "a refused call wrote memory"


def good_src(n: int = 24) -> np.ndarray:
    return np.arange(n, dtype=np.float32)


# ======================================================================= compile time
def test_descriptor_pair_checks():
    a = M([3, 8], "f32", "ab")
    for bad, match in [((a, "ab"), "dst_md: expected a MemoryDesc"),
                       ((None, a), "src_md: expected a MemoryDesc"),
                       ((M([3, 8], "f32", "any"), a), "src_md: .*format 'any'"),
                       ((a, M([3, 8], "f32", "any")), "dst_md: .*format 'any'"),
                       ((M((), "f32"), a), "src_md: .*zero md"),
                       ((a, M([3, 9], "f32", "ab")), "same dims"),
                       ((a, M([3, 8, 1], "f32", "abc")), "same dims")]:
        with pytest.raises(lj.LayoutError, match=match):
            lj.compile_reorder(*bad)


def test_destination_with_overlapping_strides_is_refused_at_compile_time():
    bcast = M([3, 5, 7], "f32", strides=[0, 7, 1])  # MemoryDesc allows it (a broadcast source)
    plain = M([3, 5, 7], "f32", "abc")
    with pytest.raises(lj.LayoutError, match="dst_md: .*stride 0"):
        lj.compile_reorder(plain, bcast)
    with pytest.raises(lj.LayoutError, match="stride 0"):
        lj.compile_eltwise(bcast, "relu")
    lj.compile_reorder(bcast, plain)  # as a source it is fine
    # strides that overlap without a zero (only reachable by editing the fields)
    crafted = plain._replace(strides=(7, 7, 1))
    assert overlapping_dims(crafted) is not None
    with pytest.raises(lj.LayoutError, match="dst_md: .*overlaps"):
        check_pair(plain, crafted)
    # blocked and strided destinations that do not overlap pass
    for md in [M([2, 17, 3, 3], "f32", "nChw16c"), M([3, 5], "f32", strides=[11, 2]),
               M([2, 40, 5, 6], "f32", "nChw16c").submemory_desc([2, 8, 3, 6], [0, 32, 2, 0])]:
        assert overlapping_dims(md) is None


def test_negative_and_huge_offsets_are_refused_at_compile_time():
    plain = M([2, 3], "f32", "ab")
    with pytest.raises(lj.LayoutError, match="offset0 must not be negative"):
        M.from_blocking([2, 3], "f32", [3, 1], offset0=-1)
    for crafted, match in [(plain._replace(offset0=-1), "must not be negative"),
                           (plain._replace(strides=(-3, 1)), "negative offsets"),
                           (M.from_blocking([2, 3], "f32", [3, 1], offset0=2**61), "64-bit")]:
        for s, d in ((crafted, plain), (plain, crafted)):
            with pytest.raises(lj.LayoutError, match=match):
                lj.compile_reorder(s, d)


def test_huge_offset0_compiles_and_small_buffers_are_refused():
    far = M.from_blocking([2, 3], "f32", [3, 1], offset0=2**40)
    k = lj.compile_reorder(far, M([2, 3], "f32", "ab"))
    whole, dst = guarded(24)
    expect_refused(k, np.zeros(64, np.float32), whole, r"src: buffer of 256 bytes is too small.*4398046511128",
                   dst=dst)
    k2 = lj.compile_reorder(M([2, 3], "f32", "ab"), far)
    expect_refused(k2, good_src(6), whole, "dst: buffer of 88 bytes is too small", dst=whole[8:96])


def test_padded_offsets_are_unimplemented():
    md = M.from_blocking([3, 4], "f32", [4, 1], padded_dims=[5, 4], padded_offsets=[1, 0])
    with pytest.raises(lj.Unimplemented, match="padded_offsets"):
        lj.compile_reorder(md, M([3, 4], "f32", "ab"))


def test_element_span_matches_required_bytes():
    parent = M([2, 40, 5, 6], "f32", "nChw16c")
    for md in [M([2, 17, 5, 4], "f32", "nChw16c"), M([3, 5], "f32", strides=[11, 2]),
               M([3, 5, 7], "f32", strides=[0, 7, 1]), parent.submemory_desc([2, 8, 3, 6], [0, 32, 2, 0]),
               M([8, 8], "f32", "AB4b16a4b"), M.from_blocking([2, 3], "f32", [3, 1], offset0=9)]:
        lo, hi = element_span(md)
        assert lo >= 0 and (hi + 1) * 4 == md.required_bytes(), md
        offs = ref.offsets(md)
        assert (offs.min(), offs.max()) == (lo, hi), md
    assert element_span(M([2, 0, 3], "f32", "abc")) is None


def test_attribute_values_are_checked_at_compile_time():
    a, b = M([3, 8], "f32", "ab"), M([3, 8], "s8", "ba")
    cases = [(dict(scales={"src": True}), "scales\\['src'\\]: a mask must be an int"),
             (dict(scales={"src": 4}), "beyond the 2 dims"),
             (dict(scales={"src": -1}), "beyond"),
             (dict(scales={"weights": 0}), "only 'src' and 'dst'"),
             (dict(zero_points={"src": 0}), "integer source"),
             (dict(post_ops=[("tanh",)]), "post_ops\\[0\\]: unknown post-op"),
             (dict(post_ops=["sum"]), "post_ops\\[0\\]: expected a tuple"),
             (dict(post_ops=[("sum", 1.0, 2.0)]), "takes one value"),
             (dict(post_ops=[("eltwise", "no_such_alg")]), "unknown eltwise"),
             (dict(post_ops=[("binary", "add", M([3, 2], "f32", "ab"))]), "broadcast"),
             (dict(post_ops=[("binary", "add", M([3, 8], "f32", "any"))]), "concrete layout"),
             (dict(post_ops=[("binary", "pow", M([3, 8], "f32", "ab"))]), "binary"),
             (dict(post_ops=[("sum", 1.0)] * 33), "at most 32")]
    for kw, match in cases:
        with pytest.raises(lj.LayoutError, match=match):
            lj.compile_reorder(a, b, **kw)


@pytest.mark.parametrize("beta", ["abc", None])
def test_non_numeric_sum_beta_is_a_layout_error(beta):
    with pytest.raises(lj.LayoutError, match="post_ops\\[0\\]"):
        lj.compile_reorder(M([3, 8], "f32", "ab"), M([3, 8], "f32", "ba"), post_ops=[("sum", beta)])


# ============================ regressions found by the long fuzz run (tests/fuzz_long.py)
def _guarded_run(src_md, dst_md, slack=512):
    """(values ok, guards ok) of a reorder into a destination with wide sentinel margins."""
    n = max(dst_md.get_size(), dst_md.required_bytes())
    whole = np.full(n + 2 * slack, SENTINEL, np.uint8)
    dst = whole[slack:slack + n].view(dst_md.dtype.storage)
    src = np.arange(max(src_md.get_size(), src_md.required_bytes()) // 4).astype(np.float32)
    exp = ref.reorder(src, src_md, dst_md, dst.copy())
    lj.compile_reorder(src_md, dst_md)(src, dst)
    return (np.array_equal(dst.view(np.uint8), exp.view(np.uint8)),
            bool((whole[:slack] == SENTINEL).all() and (whole[slack + n:] == SENTINEL).all()))


def test_codegen_padding_overrun():
    """A padded size that is not a multiple of a block: no write past it (codegen.dim_segments)."""
    src, dst = M([9, 5], "f32", "Ab2a"), M.from_blocking([9, 5], "f32", [5, 1], padded_dims=[11, 5])
    assert _guarded_run(src, dst) == (True, True)


@pytest.mark.parametrize("src_tag,dst_tag,dims", [("ABc16a16b", "AbC5a4c", [10, 3, 1]),
                                                  ("AB3b3a16b", "AB16a16b", [13, 3])])
def test_tile_with_non_nesting_blocks(src_tag, dst_tag, dims):
    """Blocks that do not nest: offsets from the index, no register tiles (plan.choose_tile)."""
    assert _guarded_run(M(dims, "f32", src_tag), M(dims, "f32", dst_tag)) == (True, True)


@pytest.mark.parametrize("case", ["submemory", "from_blocking"])
def test_tile_with_odd_destination_padding(case):
    """Padded size below a whole block: micro-kernels write only inside the layout."""
    if case == "submemory":  # the sub-tensor's padded size 3 < the block 4x4 of dim a
        src, dst = M([3, 2, 1], "f32", "Abc2a"), M([120, 2, 1], "f32", "AbC4a4c4a").submemory_desc([3, 2, 1], [0, 0, 0])
    else:  # dim b padded 5 -> 6
        src = M([3, 5, 8, 1], "f32", "AbCd5a8a5c")
        dst = M.from_blocking([3, 5, 8, 1], "f32", [48, 8, 1, 1], padded_dims=[3, 6, 8, 1])
    assert _guarded_run(src, dst) == (True, True)


def test_codegen_name_clash_with_three_extra_operands():
    one = M([1, 1, 1, 1], "f32", "abcd")
    lj.compile_reorder(M([1, 1, 1, 5], "f32", "gOIw16i16o"), M([1, 1, 1, 5], "f32", "abCd3c"),
                       scales={"dst": 0}, post_ops=[("binary", "add", one), ("binary", "add", one)])


def test_from_blocking_refuses_overlapping_strides():
    with pytest.raises(lj.LayoutError):
        M.from_blocking([17, 20], "f32", [16, 16], [16], [0], padded_dims=[17, 20])  # (16,0) and (0,1) -> 16


def test_from_blocking_accepts_a_tags_own_blocking():
    t = M([4, 4, 1, 1, 1], "f64", "nCdhw16c")
    assert M.from_blocking(t.dims, "f64", t.strides, t.inner_blks, t.inner_idxs) == t


# ========================================================================== call time
def test_wrong_sizes(k_t):
    whole, dst = guarded(96, np.float32)
    for src, match in [(good_src(23), "src: buffer has 92 bytes.*needs exactly 96"),
                       (good_src(25), "src: buffer has 100 bytes"),
                       (np.zeros(0, np.float32), "src: buffer has 0 bytes")]:
        expect_refused(k_t, src, whole, match, dst=dst)
    for d, match in [(whole[GUARD:GUARD + 92], "dst: buffer has 92 bytes"),
                     (whole[GUARD:GUARD + 100], "dst: buffer has 100 bytes")]:
        expect_refused(k_t, good_src(), whole, match, dst=d)


def test_views_may_be_larger_but_not_smaller(k_view):
    need = k_view.dst_md.required_bytes()  # offset0 included
    assert k_view.dst_md.get_size() < need
    whole = np.full(128 + 2 * GUARD, SENTINEL, np.uint8)
    expect_refused(k_view, good_src(8), whole, f"dst: buffer of {need - 4} bytes is too small.*{need}",
                   dst=whole[GUARD:GUARD + need - 4])
    dst = whole[GUARD:GUARD + 128].view(np.float32)  # the whole 4x8 parent: larger is fine
    dst[:] = -1
    k_view(good_src(8), dst)
    exp = np.full((4, 8), -1, np.float32)
    exp[1:3, 2:6] = good_src(8).reshape(2, 4)
    assert np.array_equal(dst.reshape(4, 8), exp)
    assert (whole[:GUARD] == SENTINEL).all() and (whole[-GUARD:] == SENTINEL).all()


def test_non_contiguous_buffers(k_t):
    whole, dst = guarded(96, np.float32)
    base = np.arange(48, dtype=np.float32)
    for src in [base[::2], base[:24][::-1], base[:24].reshape(8, 3).T, np.asfortranarray(base[:24].reshape(3, 8))]:
        assert src.nbytes == 96
        expect_refused(k_t, src, whole, "src: the buffer must be C-contiguous", dst=dst)
    big = np.full(48 + 2 * 16, 7, np.float32)
    for d in [big[16:64][::2], big[16:40][::-1], big[16:40].reshape(8, 3).T]:
        expect_refused(k_t, good_src(), big, "dst: the buffer must be C-contiguous", dst=d)


def test_read_only_and_immutable_destinations(k_t):
    whole, _ = guarded(96, np.float32)
    whole.flags.writeable = False  # views made from now on are read-only too
    expect_refused(k_t, good_src(), whole, "dst: the buffer is read-only",
                   dst=whole[GUARD:GUARD + 96].view(np.float32))
    whole.flags.writeable = True
    for d in [bytes(96), memoryview(bytes(96)), np.float64(1.0)]:
        with pytest.raises(lj.LayoutError, match="dst: "):
            k_t(good_src(), d)
    ro = np.zeros(24, np.float32)
    ro.flags.writeable = False
    k_t(ro, np.zeros(24, np.float32))  # a read-only source is fine


def test_object_arrays_are_refused_on_both_paths(k_t):
    whole, dst = guarded(96, np.float32)
    objs = np.empty(12, dtype=object)  # 96 bytes: the fast path's size test passes
    assert objs.nbytes == 96
    expect_refused(k_t, objs, whole, "src: arrays of Python objects", dst=dst)
    whole_o = np.empty(12, dtype=object)
    with pytest.raises(lj.LayoutError, match="dst: arrays of Python objects"):
        k_t(good_src(), whole_o)
    assert all(x is None for x in whole_o)
    rec = np.zeros(6, dtype=[("a", object), ("b", "f8")])
    assert rec.nbytes == 96
    expect_refused(k_t, rec, whole, "src: arrays of Python objects", dst=dst)


def test_not_buffers(k_t):
    whole, dst = guarded(96, np.float32)
    class OnlyArray:  # __array__ alone may copy: refused
        def __array__(self, dtype=None, copy=None):
            return np.zeros(24, np.float32)

    for src, match in [([0.0] * 24, "src: expected a numpy array.*got list"), (None, "got NoneType"),
                       (3.0, "got float"), ("x" * 96, "got str"), ((1,) * 24, "got tuple"),
                       (OnlyArray(), "got OnlyArray.*np.asarray")]:
        expect_refused(k_t, src, whole, match, dst=dst)
    lst = [0.0] * 24
    with pytest.raises(lj.LayoutError, match="dst: expected a numpy array.*got list"):
        k_t(good_src(), lst)
    assert lst == [0.0] * 24


def test_raw_memory_of_any_dtype_and_other_exporters(k_t):
    want = good_src().reshape(3, 8).T.ravel()
    src_u8 = good_src().view(np.uint8)  # right nbytes, another dtype: raw memory
    out = np.zeros(12, np.float64)
    assert k_t(src_u8, out) is out
    assert np.array_equal(out.view(np.float32), want)
    ba = bytearray(96)
    assert k_t(array.array("f", good_src().tolist()), ba) is ba
    assert np.array_equal(np.frombuffer(ba, np.float32), want)
    class Sub(np.ndarray):
        pass

    sub = np.zeros(24, np.float32).view(Sub)  # an ndarray subclass
    assert k_t(good_src(), sub) is sub
    assert np.array_equal(sub.view(np.ndarray), want)
    masked = np.ma.masked_array(np.zeros(24, np.float32), mask=True)
    assert k_t(good_src(), masked) is masked
    assert np.array_equal(masked.data, want)
    two_d = np.zeros((8, 3), np.float32)  # any shape: raw memory
    k_t(good_src().reshape(2, 3, 4), two_d)
    assert np.array_equal(two_d.ravel(), want)

    class Iface:
        def __init__(self, a):
            self.a = a
            self.__array_interface__ = a.__array_interface__

    class DL:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    for wrap in (Iface, DL):
        o = np.zeros(24, np.float32)
        w = wrap(o)
        assert k_t(wrap(good_src()), w) is w
        assert np.array_equal(o, want)
    ro = np.zeros(24, np.float32)
    ro.flags.writeable = False
    with pytest.raises(lj.LayoutError, match="dst: the buffer is read-only"):
        k_t(good_src(), Iface(ro))


def test_zero_d_arrays():
    k = lj.compile_reorder(M([1], "f32", "a"), M([1], "s32", "a"))
    out = np.array(0, np.int32)
    assert k(np.array(7.0, np.float32), out) is out and int(out) == 7
    whole, dst = guarded(4, np.int32)
    expect_refused(k, np.array(7.0, np.float64), whole, "src: buffer has 8 bytes", dst=dst)
    with pytest.raises(lj.LayoutError, match="dst: buffer has 2 bytes"):
        k(np.array(7.0, np.float32), np.array(0, np.int16))


def test_overlapping_buffers(k_t, k_relu):
    base = np.full(24 * 3, SENTINEL, np.float32)
    before = base.copy()
    for s, d in [(base[:24], base[:24]), (base[:24], base[12:36]), (base[12:36], base[:24])]:
        with pytest.raises(lj.LayoutError, match="overlap"):
            k_t(s, d)
        assert np.array_equal(base, before)
    # byte-level overlap through views of another dtype, and via the slow path
    raw = base.view(np.uint8)
    with pytest.raises(lj.LayoutError, match="overlap"):
        k_t(raw[:96], memoryview(raw[95:191]))
    assert np.array_equal(base, before)
    # adjacent, non-overlapping views of one base array are fine
    base[:24] = good_src()
    k_t(base[:24], base[24:48])
    assert np.array_equal(base[24:48], good_src().reshape(3, 8).T.ravel())
    # in place is for eltwise only, and only with the very same buffer
    x = np.linspace(-3, 3, 48, dtype=np.float32)
    before = x.copy()
    with pytest.raises(lj.LayoutError, match="overlap"):
        k_relu(x[:24], x[1:25])
    assert np.array_equal(x, before)
    k_relu(x[:24], x[:24])
    assert np.array_equal(x[:24], np.maximum(before[:24], 0)) and np.array_equal(x[24:], before[24:])


def test_checked_calls_take_native_arrays_as_they_are(k_t):
    """Plain numpy buffers of native dtypes go to the serial driver without byte views:
    any shape, any numeric dtype of the right byte size, and overlap still measured in
    bytes (views that share only their last element are refused)."""
    src = good_src()
    want = src.reshape(3, 8).T.ravel()
    for s, d in [(src, np.empty(24, np.float32)), (src.reshape(3, 8), np.empty((8, 3), np.float32)),
                 (src.reshape(2, 3, 4), np.empty((4, 6), np.float32))]:
        assert k_t(s, d) is d and np.array_equal(d.ravel(), want)
    # same bytes under other native dtypes: the kernel moves f32 storage bit for bit
    d = np.empty(24, np.uint32)
    k_t(src.view(np.int32), d)
    assert np.array_equal(d.view(np.float32), want)
    d = np.empty(96, np.int8)
    k_t(src.view(np.uint16), d)
    assert np.array_equal(d.view(np.float32), want)
    base = np.full(24 * 3, SENTINEL, np.float32)
    before = base.copy()
    for s, d in [(base[:24], base[23:47]), (base[23:47], base[:24]),
                 (base[:24].reshape(3, 8), base[23:47].reshape(8, 3))]:
        with pytest.raises(lj.LayoutError, match="overlap"):
            k_t(s, d)
        assert np.array_equal(base, before)


def test_zero_volume_overlap_and_sizes():
    k = lj.compile_reorder(M([2, 0, 3], "f32", "abc"), M([2, 0, 3], "f32", "acb"))
    out = k(np.zeros(0, np.float32))
    assert out.nbytes == 0
    with pytest.raises(lj.LayoutError, match="src: buffer has 4 bytes"):
        k(np.zeros(1, np.float32))


def test_attribute_values_at_call_time(k_attr):
    src = good_src()
    s_sc = np.array([0.5, 1.0, 2.0, 1.5, 1.0, 0.25, 1.0, 3.0], np.float32)
    d_sc = np.array([1.0, 2.0, 0.5], np.float32)
    zp = np.array([1, -2, 3], np.int32)
    b1 = np.array([1.0, -1.0, 0.5], np.float32)
    ok = dict(scales={"src": s_sc, "dst": d_sc}, zero_points={"dst": zp}, binary=[b1])
    whole, dst = guarded(24, np.int8)
    dst[:] = np.arange(24, dtype=np.int8)
    cases = [(dict(ok, scales={"src": s_sc}), "scales\\['dst'\\]"),
             (dict(ok, scales={"src": s_sc[:7], "dst": d_sc}), "scales\\['src'\\]: expected 8 value"),
             (dict(ok, scales={"src": s_sc.astype(np.float64), "dst": d_sc}),
              "scales\\['src'\\]: values must be float32"),
             (dict(ok, scales={"src": "abc", "dst": d_sc}), "scales\\['src'\\]: expected numbers"),
             (dict(ok, scales=[1.0]), "scales: expected a dict"),
             (dict(ok, zero_points={"dst": [0.5, 1, 2]}), "zero points must be integers"),
             (dict(ok, zero_points={"dst": zp, "src": zp}), "zero_points: \\['src'\\] given"),
             (dict(ok, binary=[]), "binary: this kernel has 1 binary"),
             (dict(ok, binary=[b1[:2]]), "binary: the buffer .* must have 12 bytes"),
             (dict(ok, binary=[np.zeros(6, np.float32)[::2]]), "binary1: the buffer must be C-contiguous"),
             (dict(ok, binary=[b1, b1]), "binary: this kernel has 1"),
             (dict(ok, extra=1), "unexpected keyword arguments \\['extra'\\]")]
    for kw, match in cases:
        expect_refused(k_attr, src, whole, match, dst=dst, **kw)
    # a sum post-op reads dst: it must be given
    with pytest.raises(lj.LayoutError, match="dst: a kernel with a sum post-op reads dst"):
        k_attr(src, **ok)
    # attribute buffers overlapping dst
    big = np.zeros(64, np.float32)
    with pytest.raises(lj.LayoutError, match="dst overlaps an attribute buffer"):
        k_attr(src, big[:6].view(np.int8), **dict(ok, binary=[big[:3]]))
    k_attr(src, dst, **ok)  # and the valid call works
    assert (whole[:GUARD] == SENTINEL).all() and (whole[-GUARD:] == SENTINEL).all()


def test_runtime_arguments_without_attributes(k_t):
    whole, dst = guarded(96, np.float32)
    expect_refused(k_t, good_src(), whole, "unexpected arguments \\['scales'\\]", dst=dst, scales={"src": 1.0})


def test_binary_not_a_list_is_a_layout_error(k_attr):
    with pytest.raises(lj.LayoutError, match="binary"):
        k_attr(good_src(), np.zeros(24, np.int8), scales={"src": np.ones(8, np.float32), "dst": np.ones(3, np.float32)},
               zero_points={"dst": [0, 0, 0]}, binary=np.float32(1.0))


def test_none_scale_is_a_layout_error():
    k = lj.compile_reorder(M([3, 8], "f32", "ab"), M([3, 8], "f32", "ba"), scales={"src": 0})
    with pytest.raises(lj.LayoutError, match="scales\\['src'\\]"):
        k(good_src(), np.zeros(24, np.float32), scales={"src": None})


# ============================================================================== scale
def _rss_peak_reset() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM (peak RSS) to the current RSS
        return True
    except OSError:
        return False


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def _available_bytes() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def test_no_python_side_temporaries():
    """tracemalloc sees numpy's allocations: a call with dst allocates nothing proportional."""
    dims = [512, 2048]  # 4 MiB each side (big enough for the parallel driver)
    k = lj.compile_reorder(M(dims, "f32", "ab"), M(dims, "f32", "ba"))
    ks = lj.compile_reorder(M(dims, "f32", "ab"), M(dims, "bf16", "ba"), scales={"src": 0})
    src = np.ones(512 * 2048, np.float32)
    dst = np.empty_like(src)
    dst16 = np.empty(src.size, np.uint16)
    k(src, dst)
    ks(src, dst16, scales={"src": [2.0]})
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        for _ in range(3):
            k(src, dst)
            ks(src, dst16, scales={"src": [2.0]})
        peak = tracemalloc.get_traced_memory()[1]
        assert peak < 64 * 1024, peak
        tracemalloc.reset_peak()
        out = k(src)
        peak = tracemalloc.get_traced_memory()[1]
        assert src.nbytes <= peak < src.nbytes + 64 * 1024, peak
        del out
    finally:
        tracemalloc.stop()


def _fill_pattern(v: np.ndarray) -> None:
    """v[i, j] = (7 i + 13 j) mod 256, in uint8 arithmetic (row chunks: no big temporaries)."""
    rows, cols = v.shape
    row0 = (np.arange(cols, dtype=np.int64) * 13 % 256).astype(np.uint8)
    step = 1 << 14
    for r0 in range(0, rows, step):
        r1 = min(rows, r0 + step)
        off = (np.arange(r0, r1, dtype=np.int64) * 7 % 256).astype(np.uint8)
        np.add(row0[None, :], off[:, None], out=v[r0:r1])


@pytest.mark.slow
def test_transpose_above_2_to_31_elements():
    rows, cols = 65537, 32769  # 2_147_581_953 elements > 2**31: ~2.1 GB per buffer
    n = rows * cols
    assert n > 2**31
    avail = _available_bytes()
    if avail < 8 * 2**30:
        pytest.skip(f"needs ~8 GB of free memory for two 2.1 GB buffers and checks; {avail / 2**30:.1f} GB available")
    k = lj.compile_reorder(M([rows, cols], "u8", "ab"), M([rows, cols], "u8", "ba"))
    src = np.empty(n, np.uint8)
    v = src.reshape(rows, cols)
    _fill_pattern(v)
    dst = np.empty(n, np.uint8)
    gc.collect()
    measure = _rss_peak_reset()
    rss0 = _status_kb("VmRSS")
    k(src, dst)
    if measure:
        # dst's pages are first touched by the kernel: the peak grows by dst and nothing else
        grew = (_status_kb("VmHWM") - rss0) * 1024
        assert grew < n + 256 * 2**20, f"peak RSS grew by {grew} bytes for a {n}-byte destination"
    d = dst.reshape(cols, rows)
    # samples, the corners and whole border rows/columns
    rng = np.random.default_rng(0)
    ii = rng.integers(0, rows, 200_000)
    jj = rng.integers(0, cols, 200_000)
    assert np.array_equal(d[jj, ii], v[ii, jj])
    for j in (0, 1, cols // 2, cols - 2, cols - 1):
        assert np.array_equal(d[j], v[:, j]), j
    for i in (0, rows // 3, rows - 1):
        assert np.array_equal(d[:, i], v[i]), i
    # checksum-like: every destination row j holds (7 i + 13 j) mod 256 -- checked by
    # rows of the destination in chunks, against the formula (no full reference)
    col7 = (np.arange(rows, dtype=np.int64) * 7 % 256).astype(np.uint8)
    step = 2048
    tmp = np.empty((step, rows), np.uint8)
    for j0 in range(0, cols, step):
        j1 = min(cols, j0 + step)
        off = (np.arange(j0, j1, dtype=np.int64) * 13 % 256).astype(np.uint8)
        t = tmp[: j1 - j0]
        np.add(col7[None, :], off[:, None], out=t)
        assert np.array_equal(d[j0:j1], t), (j0, j1)

"""Reorders against the independent numpy reference (tests/reference.py).

Every pair of tags of the same rank from a list of 47 tags with dims that are not
multiples of the blocks, and, with dims that are, each blocked tag to and from two
plain tags of its rank, itself and another blocked tag; every data type pair; strided and
submemory sources and destinations; zero-volume tensors; random layouts.
Destinations sit inside a larger buffer filled with a sentinel, so a write
outside the destination (or into a gap of a strided destination) is caught.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import layoutjit as lj
import reference as ref

M = lj.MemoryDesc
SENTINEL = 0xA5
GUARD = 128

TAGS = {
    2: ["ab", "ba", "Ab16a", "aB16b", "AB16b16a", "BA16a16b", "AB8a4b"],
    3: ["abc", "acb", "bac", "cba", "Abc16a", "aBc16b", "ABc16a16b", "ABc8a16b2a", "aCB16b16c"],
    4: ["nchw", "nhwc", "chwn", "bacd", "cdba", "nChw8c", "nChw16c", "Acdb16a", "OIhw16i16o",
        "OIhw4i16o4i", "ABcd8a16b2a", "ABcd4b16a4b", "BAcd16b16a", "aBCd16c16b", "ABcd2a8b8a2b"],
    5: ["ncdhw", "ndhwc", "nCdhw16c", "nCdhw8c", "gOIhw16i16o", "OIdhw16i16o", "ABcde8a16b2a",
        "acbde"],
    6: ["abcdef", "acbdef", "gOIdhw16i16o", "aBcdef16b", "defcab", "aCBdef16c16b", "abcdfe"],
}
assert sum(len(v) for v in TAGS.values()) >= 40

DIMS_ODD = {2: [19, 21], 3: [3, 19, 5], 4: [3, 17, 5, 3], 5: [2, 18, 3, 2, 3], 6: [2, 17, 3, 2, 2, 3]}
DIMS_EVEN = {2: [32, 16], 3: [2, 32, 4], 4: [2, 32, 3, 4], 5: [2, 16, 16, 2, 3], 6: [2, 16, 16, 2, 1, 3]}


def guarded_dst(md: M) -> tuple[np.ndarray, np.ndarray]:
    """(whole buffer with guard regions, the destination view inside it)."""
    nbytes = max(md.get_size(), md.required_bytes())
    whole = np.full(nbytes + 2 * GUARD, SENTINEL, dtype=np.uint8)
    return whole, whole[GUARD:GUARD + nbytes].view(md.dtype.storage)


def run_and_check(src_md: M, dst_md: M, seed: int = 0) -> lj.compile_reorder:
    rng = np.random.default_rng(seed)
    n_src = max(src_md.get_size(), src_md.required_bytes()) // src_md.dtype.size
    src = ref.random_raw(n_src, str(src_md.dtype), rng)
    whole, dst = guarded_dst(dst_md)
    expected = ref.reorder(src, src_md, dst_md, dst)
    k = lj.compile_reorder(src_md, dst_md)
    out = k(src, dst)
    assert out is dst
    assert np.array_equal(dst.view(np.uint8), expected.view(np.uint8)), (src_md, dst_md)
    assert (whole[:GUARD] == SENTINEL).all() and (whole[-GUARD:] == SENTINEL).all()
    return k


def _pairs(rank_dims):
    for rank, tags in TAGS.items():
        for a, b in itertools.product(tags, tags):
            yield pytest.param(rank_dims[rank], a, b, id=f"{a}-{b}")


@pytest.mark.parametrize("dims,stag,dtag", list(_pairs(DIMS_ODD)))
def test_all_tag_pairs_odd_dims(dims, stag, dtag):
    run_and_check(M(dims, "f32", stag), M(dims, "f32", dtag))


BLOCKED = {t for ts in TAGS.values() for t in ts if any(c.isdigit() for c in t)}
#: the plain tags paired with every blocked one when no dim needs padding (the first two of
#: each rank); odd dims cover every pair already, so the even ones take each blocked tag
#: to and from these, to itself, and to the next blocked tag of its rank (so each one is
#: the destination of another too)
PLAIN_PARTNERS = {t for ts in TAGS.values() for t in [u for u in ts if u not in BLOCKED][:2]}
NEXT_BLOCKED: dict[str, str] = {}
for _ts in TAGS.values():
    _bl = [t for t in _ts if t in BLOCKED]
    NEXT_BLOCKED.update({t: _bl[(i + 1) % len(_bl)] for i, t in enumerate(_bl)})


def _blocked_pair(stag: str, dtag: str) -> bool:
    sb, db = stag in BLOCKED, dtag in BLOCKED
    if sb and db:
        return stag == dtag or NEXT_BLOCKED[stag] == dtag
    return (sb and dtag in PLAIN_PARTNERS) or (db and stag in PLAIN_PARTNERS)


@pytest.mark.parametrize("dims,stag,dtag", [p for p in _pairs(DIMS_EVEN) if _blocked_pair(*p.values[1:])])
def test_blocked_pairs_with_dims_multiple_of_blocks(dims, stag, dtag):
    run_and_check(M(dims, "f32", stag), M(dims, "f32", dtag), seed=1)


DTYPES = ["f32", "f64", "f16", "bf16", "s32", "s8", "u8"]


@pytest.mark.parametrize("sdt,ddt", list(itertools.product(DTYPES, DTYPES)))
def test_every_dtype_pair(sdt, ddt):
    dims = [2, 19, 3, 5]
    run_and_check(M(dims, sdt, "nchw"), M(dims, ddt, "nChw16c"), seed=2)


@pytest.mark.parametrize("sdt,ddt", [("f32", "bf16"), ("bf16", "f32"), ("f32", "s8"), ("u8", "f32"),
                                     ("f32", "f16"), ("s8", "s8"), ("f64", "f64"), ("bf16", "bf16")])
def test_dtype_pairs_through_transposes(sdt, ddt):
    for stag, dtag, dims in [("nchw", "nhwc", [2, 35, 4, 9]), ("nChw16c", "nchw", [2, 35, 4, 9]),
                             ("ab", "ba", [37, 70])]:
        run_and_check(M(dims, sdt, stag), M(dims, ddt, dtag), seed=3)


def test_strided_sources_and_destinations():
    dims = [3, 5, 7]
    gap = M(dims, "f32", strides=[5 * 9 * 2, 9 * 2, 2])  # gaps everywhere
    perm = M(dims, "f32", strides=[1, 3 * 7 + 1, 3])
    bcast = M(dims, "f32", strides=[0, 7, 1])  # a broadcast source
    for s, d in [(gap, M(dims, "f32", "abc")), (M(dims, "f32", "acb"), gap), (perm, gap),
                 (gap, perm), (bcast, M(dims, "f32", "cba")), (perm, M(dims, "f32", "aBc16b"))]:
        run_and_check(s, d)


def test_submemory_sources_and_destinations():
    parent = M([2, 40, 5, 6], "f32", "nChw16c")
    subs = [parent.submemory_desc([2, 16, 5, 6], [0, 16, 0, 0]),   # an interior block
            parent.submemory_desc([2, 8, 3, 6], [0, 32, 2, 0]),    # right border, inherits padding
            parent.submemory_desc([1, 5, 5, 2], [1, 0, 0, 4]),     # narrower than the block
            M([2, 40, 5, 6], "f32", "nchw").submemory_desc([2, 7, 2, 3], [0, 3, 1, 2])]
    for sub in subs:
        plain = M(sub.dims, "f32", "nchw")
        run_and_check(plain, sub)  # writes only the region (the guard-checked buffer is the parent)
        run_and_check(sub, M(sub.dims, "f32", "nhwc"))
        run_and_check(sub, M(sub.dims, "f32", "nChw8c"))


def test_submemory_destination_leaves_neighbours_alone():
    parent = M([1, 4], "f32", "ab")
    sub = parent.submemory_desc([1, 1], [0, 1])  # oneDNN gtest: dst {1,4}, sub {1}@{1}
    dst = np.full(4, -1.0, dtype=np.float32)
    lj.compile_reorder(M([1, 1], "f32", "ab"), sub)(np.array([35.0], dtype=np.float32), dst)
    assert dst.tolist() == [-1.0, 35.0, -1.0, -1.0]


def test_zero_volume_tensors():
    for dims in ([2, 0, 3, 4], [0, 17, 1, 1]):
        k = lj.compile_reorder(M(dims, "f32", "nchw"), M(dims, "f32", "nChw16c"))
        out = k(np.zeros(0, dtype=np.float32))
        assert out.nbytes == 0
        assert k.source.startswith("# zero-volume")


def test_kernel_allocates_and_reorder_helper():
    src_md, dst_md = M([2, 3, 4, 5], "f32", "nchw"), M([2, 3, 4, 5], "f32", "nChw16c")
    x = np.arange(120, dtype=np.float32)
    out = lj.compile_reorder(src_md, dst_md)(x)
    assert out.ctypes.data % 64 == 0 and out.nbytes == dst_md.get_size()
    assert np.array_equal(out, ref.reorder(x, src_md, dst_md, np.zeros_like(out)))
    assert np.array_equal(lj.reorder(x, src_md, dst_md), out)


@pytest.mark.parametrize("tag,dt", [("nChw16c", "f32"), ("OIhw4i16o4i", "bf16"), ("acdb", "s8"),
                                    ("nChw8c", "f16"), ("ABcd8a16b2a", "u8")])
def test_to_layout_from_layout_round_trip(tag, dt):
    md = M([3, 17, 2, 5], dt, tag)
    rng = np.random.default_rng(4)
    x = rng.integers(-100, 100, size=md.dims)
    buf = lj.to_layout(x, md)
    assert buf.nbytes == md.get_size() and buf.dtype == md.dtype.storage
    expect = ref.reorder(np.ascontiguousarray(x, dtype=np.float64).reshape(-1).view(np.float64),
                         M(md.dims, "f64", "abcd"), md, np.zeros_like(buf))
    assert np.array_equal(buf, expect)
    back = lj.from_layout(buf, md)
    assert back.shape == tuple(md.dims) and back.dtype == md.dtype.value_dtype
    want = x if dt != "u8" else np.clip(x, 0, 255)
    assert np.array_equal(back.astype(np.float64), want.astype(np.float64))


def test_same_key_returns_the_same_kernel_without_recompiling():
    a, b = M([2, 21, 3, 3], "f32", "nchw"), M([2, 21, 3, 3], "f32", "nChw8c")
    k1 = lj.compile_reorder(a, b)
    k2 = lj.compile_reorder(M([2, 21, 3, 3], "f32", "nchw"), M([2, 21, 3, 3], "f32", "nChw8c"))
    assert k1 is k2


# ------------------------------------------------------------- hypothesis
@st.composite
def layout_pairs(draw):
    rank = draw(st.integers(2, 5))
    tags = TAGS[rank]
    dims = [draw(st.integers(1, 20)) for _ in range(rank)]
    def one():
        if draw(st.integers(0, 3)) == 0:
            order = draw(st.permutations(list(range(rank))))
            strides = [0] * rank
            s = 1
            for d in reversed(order):
                strides[d] = s
                s *= dims[d] + draw(st.integers(0, 1))
            return M(dims, "f32", strides=strides)
        return M(dims, "f32", draw(st.sampled_from(tags)))
    s, d = one(), one()
    sdt, ddt = draw(st.sampled_from(["f32", "bf16", "s8"])), draw(st.sampled_from(["f32", "u8", "f16"]))
    return s.with_dtype(sdt), d.with_dtype(ddt)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout_pairs())
def test_random_layout_pairs(pair):
    run_and_check(*pair)


@pytest.mark.parametrize("dims, stag, dtag, sdt, ddt", [
    ((2, 2, 6, 11), "nchw", "iohw", "f32", "u8"),   # runs of 66 bytes (found by hypothesis)
    ((3, 2, 10, 12), "nchw", "iohw", "s8", "s8"),   # runs of 120: a stream, not "lines"
    ((2, 3, 8, 8), "nchw", "iohw", "f32", "u8"),    # runs of 64: the longest "lines" run
])
def test_long_one_byte_runs_between_two_swapped_nodes(dims, stag, dtag, sdt, ddt):
    """Runs contiguous on both sides with two outer nodes swapped: 1-byte runs of more than
    64 elements (64-128 bytes) go to stream calls (a "lines" call's row holds at most 64)."""
    run_and_check(M(dims, sdt, stag), M(dims, ddt, dtag))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout_pairs())
def test_round_trip_is_exact(pair):
    a, b = pair
    a = a.with_dtype("f32")
    b = b.with_dtype("f32")
    rng = np.random.default_rng(5)
    src = ref.random_raw(max(a.get_size(), a.required_bytes()) // 4, "f32", rng)
    there = lj.compile_reorder(a, b)(src)
    back = lj.compile_reorder(b, a)(there)
    assert np.array_equal(ref.logical(back, a), ref.logical(src, a))

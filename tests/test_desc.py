"""Memory descriptors: oneDNN's documented examples, every tag against an
independent construction, properties (hypothesis), errors."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import layoutjit as lj
from layoutjit.tags import abstract_tags, aliases, parse_tag
from reference import offsets, pack_by_tag

M = lj.MemoryDesc
PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --------------------------------------------------- documented examples
def test_nchw8c_with_17_channels_is_padded_to_24():
    md = M([2, 17, 5, 4], "f32", "nChw8c")
    assert md.padded_dims == (2, 24, 5, 4)
    assert md.strides == (480, 160, 32, 8)
    assert md.inner_blks == (8,) and md.inner_idxs == (1,)
    assert md.get_size() == 2 * 24 * 5 * 4 * 4
    assert repr(md) == "MemoryDesc(f32, 2x17x5x4, nChw8c)"
    # the doc's formula: offset = n*C/8*H*W*8 + (c/8)*H*W*8 + h*W*8 + w*8 + c%8
    assert md.offset_of([1, 13, 2, 3]) == 1 * 480 + 1 * 160 + 2 * 32 + 3 * 8 + 5


def test_ab_and_ba():
    ab, ba = M([2, 3], "f32", "ab"), M([2, 3], "f32", "ba")
    assert ab.strides == (3, 1) and ba.strides == (1, 2)
    assert ab != ba
    assert M([2, 3], "f32", strides=[1, 2]) == ba
    assert ba.offset_of([1, 2]) == 5


def test_permute_axes_examples():
    assert M([2, 3], "f32", "ab").permute_axes([1, 0]) == M([3, 2], "f32", "ba")
    assert M([2, 3, 4, 5], "f32", "acdb").permute_axes([0, 3, 1, 2]) == M([2, 4, 5, 3], "f32", "abcd")
    assert M([2, 15, 3, 4], "f32", "ABcd16b16a").permute_axes([1, 0, 2, 3]) == \
        M([15, 2, 3, 4], "f32", "BAcd16a16b")


def test_gtest_sizes_and_equalities():
    assert M([1, 1, 1, 1], "f32", strides=[1, 1, 1, 1]).get_size() == 4
    assert M([1, 1, 1, 1], "f32", strides=[1, 1, 1, 1]) == M([1, 1, 1, 1], "f32", strides=[8, 4, 2, 1])
    assert M([1, 4, 1, 1], "f32", "nChw8c").get_size() == 32
    md = M([32, 64, 3, 3], "f32", "ABcd16a16b")
    assert md.get_size() == 73728 and md.strides == (9216, 2304, 768, 256)
    assert M([2, 1, 5, 4], "f32", "nchw") == M([2, 1, 5, 4], "f32", "nhwc")  # C=1: same layout
    assert M([3, 0, 4], "f32", "abc").strides == (4, 4, 1)  # a zero dim keeps the stride
    assert M([2, 0, 3], "f32", strides=[]).strides == (0, 3, 1)  # NULL strides: zeros propagate
    assert M([2, 0, 3], "f32").get_size() == 0


def test_reshape_examples():
    assert M([6, 2], "f32", "ab").reshape([3, 2, 2]) == M([3, 2, 2], "f32", "abc")
    assert M([6, 2], "f32", "ba").reshape([2, 3, 2]).strides == (3, 1, 6)
    assert M([1, 15, 12], "f32", "aBc8b").reshape([1, 15, 3, 4]) == M([1, 15, 3, 4], "f32", "aBcd8b")
    assert M([3, 4, 5, 6], "f32", "ABcd16b16a").reshape([1, 3, 4, 5, 6]) == \
        M([1, 3, 4, 5, 6], "f32", "aBCde16c16b")
    assert M([2, 0, 2], "f32", "abc").reshape([2, 0, 2, 1]) == M([2, 0, 2, 1], "f32", "abcd")
    for md, dims in [(M([6, 2], "f32", "ba"), [12]), (M([2, 8, 3, 4], "f32", "aBcd8b"), [2, 96]),
                     (M([6, 2], "f32", "ab"), [6]), (M([2, 3, 0, 2], "f32", "cdba"), [6, 0, 2])]:
        with pytest.raises(lj.LayoutError):
            md.reshape(dims)


def test_submemory_rules():
    md = M([2, 32, 4, 4], "f32", "nChw16c")
    sub = md.submemory_desc([2, 16, 4, 4], [0, 16, 0, 0])
    assert sub.offset0 == 256 and sub.padded_dims == (2, 16, 4, 4)
    inner = md.submemory_desc([2, 8, 4, 4], [0, 0, 0, 0])  # narrower than the block: no padding area
    assert inner.padded_dims == (2, 8, 4, 4)
    with pytest.raises(lj.Unimplemented):
        md.submemory_desc([2, 8, 4, 4], [0, 8, 0, 0])  # offset not a multiple of the block
    with pytest.raises(lj.Unimplemented):
        md.submemory_desc([2, 20, 4, 4], [0, 0, 0, 0])  # interior size 20: not a multiple, not < 16
    with pytest.raises(lj.LayoutError):
        md.submemory_desc([2, 16, 4, 4], [0, 20, 0, 0])  # out of bounds
    right = M([2, 17, 4, 4], "f32", "nChw16c").submemory_desc([2, 1, 4, 4], [0, 16, 0, 0])
    assert right.padded_dims == (2, 16, 4, 4)  # the right border inherits the parent's padding


def test_any_and_zero_md():
    a = M([2, 3], "f32", "any")
    assert a.format_kind == "any" and a.get_size() == 0 and repr(a) == "MemoryDesc(f32, 2x3, any)"
    z = M([], "f32")
    assert z.ndims == 0 and z.get_size() == 0 and z == M([], "s8")


# ------------------------------------------ every tag: independent construction
ALL_TAGS = sorted(set(abstract_tags()) | set(aliases()))


def _dims_for(tag: str, seed: int) -> list[int]:
    pt = parse_tag(tag)
    rng = np.random.default_rng(seed)
    return [int(rng.choice([1, 3, 5, 17])) if d in pt.inner_idxs else int(rng.integers(1, 4))
            for d in range(pt.ndims)]


def test_every_tag_matches_its_pad_reshape_transpose_construction():
    """The descriptor's offsets equal the layout the tag string means, built the einops way."""
    for i, tag in enumerate(ALL_TAGS):
        dims = _dims_for(tag, i)
        md = M(dims, "f32", tag)
        x = np.arange(1, int(np.prod(dims)) + 1, dtype=np.float64).reshape(dims)
        buf = pack_by_tag(x, parse_tag(tag).abstract)
        assert md.get_size() == buf.size * 4, tag
        off = offsets(md)[tuple(slice(0, n) for n in dims)]
        assert np.array_equal(buf[off], x), tag
        assert md.tag is not None and M(dims, "f32", md.tag) == md, tag


def test_tags_are_case_sensitive_and_validated():
    assert parse_tag("nChw16c").abstract == "aBcd16b"
    for bad in ["NCHW", "nchw16", "abcc", "aBcd", "abcd16b", "aBcd0b", "xyz", "ab2m", ""]:
        with pytest.raises(lj.LayoutError):
            parse_tag(bad)
    with pytest.raises(lj.LayoutError, match="has 4 dims, the descriptor has 3"):
        M([2, 3, 4], "f32", "nchw")
    # tags oneDNN has no name for still work
    md = M([5, 6, 7], "f32", "CaB4c2b3c")
    assert md.inner_blks == (4, 2, 3) and md.inner_idxs == (2, 1, 2)
    assert md.padded_dims == (5, 6, 12)


# ------------------------------------------------------------ properties
TAGS_SMALL = [t for t in ALL_TAGS if parse_tag(t).ndims <= 5]


@st.composite
def layouts(draw):
    if draw(st.booleans()):
        tag = draw(st.sampled_from(TAGS_SMALL))
        pt = parse_tag(tag)
        dims = [draw(st.integers(1, 20 if d in pt.inner_idxs else 4)) for d in range(pt.ndims)]
        return M(dims, draw(st.sampled_from(["f32", "bf16", "s8", "f64"])), tag)
    n = draw(st.integers(1, 5))
    dims = [draw(st.integers(1, 5)) for _ in range(n)]
    order = draw(st.permutations(list(range(n))))
    strides = [0] * n
    s = 1
    for d in reversed(order):
        strides[d] = s
        s *= dims[d] + draw(st.integers(0, 2))
    return M(dims, "f32", strides=strides)


@PROPS
@given(layouts())
def test_offsets_are_distinct_and_inside_the_size(md):
    off = offsets(md)
    assert len(np.unique(off)) == off.size
    assert off.min() >= 0 and off.max() < md.get_size() // md.dtype.size
    idx = tuple(int(n) - 1 for n in md.dims)
    assert md.offset_of(idx) == off[idx]


@PROPS
@given(layouts(), st.data())
def test_submemory_keeps_every_offset(md, data):
    blocks = md.blocks
    offs, dims = [], []
    for n, b in zip(md.dims, blocks):
        o = data.draw(st.integers(0, (n - 1) // b)) * b
        rest = n - o
        cand = [rest] + [k * b for k in range(1, rest // b + 1)] + list(range(1, min(b, rest + 1)))
        dims.append(data.draw(st.sampled_from(cand)))
        offs.append(o)
    sub = md.submemory_desc(dims, offs)
    full = offsets(md)
    part = offsets(sub)[tuple(slice(0, n) for n in dims)]
    assert np.array_equal(part, full[tuple(slice(o, o + n) for o, n in zip(offs, dims))])


@PROPS
@given(layouts(), st.data())
def test_permute_keeps_every_offset(md, data):
    perm = data.draw(st.permutations(list(range(md.ndims))))
    out = md.permute_axes(perm)
    inv = np.argsort(perm)
    assert np.array_equal(offsets(out), np.transpose(offsets(md), inv))


@PROPS
@given(layouts(), st.data())
def test_reshape_keeps_every_offset(md, data):
    dims = list(md.dims)
    i = data.draw(st.integers(0, len(dims)))
    new = dims[:i] + [1] + dims[i:]  # adding a unit dim always works
    if data.draw(st.booleans()) and md.inner_nblks == 0 and len(dims) > 1:
        j = data.draw(st.integers(0, len(dims) - 2))
        new = dims[:j] + [dims[j] * dims[j + 1]] + dims[j + 2:]
    try:
        out = md.reshape(new)
    except lj.LayoutError:
        assert new != dims[:i] + [1] + dims[i:]  # only a join may be refused
        return
    o_new = offsets(out)[tuple(slice(0, n) for n in new)].reshape(-1)
    o_old = offsets(md)[tuple(slice(0, n) for n in dims)].reshape(-1)
    assert np.array_equal(o_new, o_old)


@PROPS
@given(layouts())
def test_value_semantics(md):
    assert pickle.loads(pickle.dumps(md)) == md
    assert hash(pickle.loads(pickle.dumps(md))) == hash(md)
    with pytest.raises(AttributeError):
        md.dims = (1,)  # type: ignore[misc]
    assert repr(md).startswith(f"MemoryDesc({md.dtype}, ")


# ------------------------------------------------------------------ errors
@pytest.mark.parametrize("args,kw,match", [
    (([2, -1], "f32", "ab"), {}, "negative"),
    (([2] * 13, "f32"), {}, "at most 12"),
    (([2, 3], "f12", "ab"), {}, "dtype"),
    (([2, 3], "f32", "ab"), {"strides": [3, 1]}, "not both"),
    (([2, 3], "f32"), {"strides": [2, 1]}, "overlaps"),
    (([2, 3], "f32"), {"strides": [3]}, "strides"),
    (([2, 4], "f32"), {"strides": [2**62, 1]}, "overflow"),
    (([2, 3], np.uint16, "ab"), {}, "ambiguity"),
])
def test_bad_arguments_raise_layout_error(args, kw, match):
    with pytest.raises(lj.LayoutError, match=match):
        M(*args, **kw)


def test_errors_name_the_descriptor_and_field():
    md = M([2, 3], "f32", "ab")
    with pytest.raises(lj.LayoutError, match=r"MemoryDesc\(f32, 2x3, nc\).*permutation"):
        md.permute_axes([0, 0])
    with pytest.raises(lj.LayoutError, match=r"offset_of|outside"):
        md.offset_of([2, 0])
    assert issubclass(lj.LayoutError, ValueError) and issubclass(lj.Unimplemented, lj.LayoutError)


def test_dtypes_by_onednn_and_numpy_names():
    for name, size in [("f32", 4), ("f64", 8), ("f16", 2), ("bf16", 2), ("s32", 4), ("s8", 1), ("u8", 1)]:
        t = lj.as_dtype(name)
        assert t == name and t.size == size and t.storage.itemsize == size
    assert lj.as_dtype(np.float32) == "f32" and lj.as_dtype("int8") == "s8"
    assert lj.as_dtype("bf16").storage == np.uint16 and lj.as_dtype("f16").value_dtype == np.float16

"""layoutjit.Memory: allocation, wrapping (zeroes the padding and nothing else), round trips.

Which bytes are padding is decided by tests/reference.py's ``offsets`` (oneDNN's
``off_v`` arithmetic over every padded position), independently of the
digit/box decomposition that ``layoutjit.memory`` uses.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import layoutjit as lj
import reference as ref
from layoutjit.memory import padding_views

M = lj.MemoryDesc


def _nbytes(md: M) -> int:
    return max(md.get_size(), md.required_bytes())


def _padding_bytes(md: M) -> np.ndarray:
    """Boolean mask over the buffer's bytes: True where a padding position lies."""
    mask = np.zeros(_nbytes(md), dtype=bool)
    if md.has_zero_dim:
        return mask
    off = ref.offsets(md)
    valid = np.zeros(off.shape, dtype=bool)
    valid[tuple(slice(0, n) for n in md.dims)] = True
    pad = off[~valid]
    for k in range(md.dtype.size):
        mask[pad * md.dtype.size + k] = True
    return mask


LAYOUTS = [
    M([2, 17, 3, 5], "f32", "nChw16c"),
    M([17, 19, 3, 3], "s8", "OIhw4i16o4i"),
    M([19, 21, 2, 3], "bf16", "ABcd8a16b2a"),
    M([19, 21], "u8", "AB16b16a"),
    M([2, 9, 3, 2, 2], "f32", "nCdhw8c"),
    M([3, 5, 18, 2, 2, 3], "f16", "gOIdhw16i16o"),
    M.from_blocking([2, 17, 3, 3], "f32", [720, 352, 112, 32], [16], [1]),     # padding and gaps
    M.from_blocking([2, 17, 3, 3], "f32", [1536, 512, 48, 16], [16], [1],      # padded_offsets
                    padded_dims=[2, 48, 3, 3], padded_offsets=[0, 5, 0, 0]),
    M([2, 40, 3, 3], "s8", "nChw16c").submemory_desc([2, 8, 3, 3], [0, 32, 0, 0]),  # border
    M([2, 40, 3, 3], "f32", "nChw16c").submemory_desc([2, 5, 3, 3], [0, 16, 0, 0]),  # no padding
    M([2, 17, 3, 3], "f32", strides=[347, 20, 5, 1]),                          # gaps, no padding
    M([2, 17, 3, 3], "f32", "nchw"),
]


@pytest.mark.parametrize("md", LAYOUTS, ids=repr)
def test_wrapping_zeroes_exactly_the_padding(md):
    rng = np.random.default_rng(7)
    garbage = rng.integers(1, 256, _nbytes(md), dtype=np.uint8)  # no zero byte anywhere
    raw = garbage.copy()
    m = lj.Memory(md, raw)
    assert m.buffer is raw and m.md is md and m.nbytes == raw.nbytes
    pad = _padding_bytes(md)
    assert (raw[pad] == 0).all()
    assert np.array_equal(raw[~pad], garbage[~pad]), "bytes outside the padding changed"
    # set_data_handle does the same for a new buffer (a different dtype view is fine)
    raw2 = garbage.copy().view(md.dtype.storage)
    m.set_data_handle(raw2)
    assert m.buffer is raw2 and m.get_data_handle() is raw2
    assert np.array_equal(raw2.view(np.uint8), raw)
    # zero_pad() after foreign writes
    raw2.view(np.uint8)[:] = garbage
    m.zero_pad()
    assert np.array_equal(raw2.view(np.uint8), raw)


def test_padding_views_cover_the_padding_once():
    for md in LAYOUTS:
        count = np.zeros(_nbytes(md) // md.dtype.size, dtype=np.int64)
        for off, shape, strides in padding_views(md):
            idx = off + sum(np.indices(shape)[k] * s for k, s in enumerate(strides))
            np.add.at(count, idx.reshape(-1), 1)
        pad = _padding_bytes(md).reshape(-1, md.dtype.size)[:, 0]
        assert np.array_equal(count, pad.astype(np.int64)), md


@st.composite
def blocked_mds(draw):
    tags = {2: ["Ab16a", "aB8b", "AB16b16a", "BA4b4a", "AB8a4b"],
            3: ["aBc16b", "ABc4a4b", "aCB16b16c", "ABc8a16b2a"],
            4: ["nChw8c", "OIhw4i16o4i", "ABcd2a8b8a2b", "BAcd16b16a"]}
    rank = draw(st.sampled_from(sorted(tags)))
    dims = [draw(st.integers(1, 21)) for _ in range(rank)]
    md = M(dims, draw(st.sampled_from(["f32", "s8", "bf16"])), draw(st.sampled_from(tags[rank])))
    return md


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blocked_mds())
def test_random_blocked_layouts(md):
    garbage = np.full(_nbytes(md), 0xEE, dtype=np.uint8)
    lj.Memory(md, garbage)
    pad = _padding_bytes(md)
    assert (garbage[pad] == 0).all() and (garbage[~pad] == 0xEE).all()


@pytest.mark.parametrize("md", [LAYOUTS[0], LAYOUTS[1], LAYOUTS[6], LAYOUTS[8], M([0, 17, 2, 2], "f32", "nChw16c")],
                         ids=repr)
def test_allocation(md):
    m = lj.Memory(md)
    assert m.nbytes == _nbytes(md)
    assert m.buffer.dtype == md.dtype.storage and m.buffer.ndim == 1
    assert m.data_ptr == m.buffer.ctypes.data
    if m.nbytes:  # (an empty array's address means nothing)
        assert m.data_ptr % 64 == 0
    assert not m.buffer.view(np.uint8).any()
    assert "Memory(" in repr(m)


@pytest.mark.parametrize("tag,dt", [("nChw16c", "f32"), ("OIhw4i16o4i", "s8"), ("nChw8c", "bf16"),
                                    ("nhwc", "u8"), ("ABcd8a16b2a", "f16")])
def test_from_numpy_to_numpy_round_trip(tag, dt):
    md = M([3, 17, 2, 5], dt, tag)
    rng = np.random.default_rng(3)
    x = rng.integers(0 if dt == "u8" else -100, 100, md.dims).astype(np.float32)
    m = lj.Memory.from_numpy(x, md)
    back = m.to_numpy()
    assert back.shape == tuple(md.dims) and back.dtype == md.dtype.value_dtype
    assert np.array_equal(back.astype(np.float32), x)
    # the storage is the reference packing of x (padding zero)
    abstract = {"nChw16c": "aBcd16b", "OIhw4i16o4i": "ABcd4b16a4b", "nChw8c": "aBcd8b",
                "nhwc": "acdb", "ABcd8a16b2a": "ABcd8a16b2a"}[tag]
    want = ref.pack_by_tag(ref.from_f32(x, dt), abstract)
    assert np.array_equal(m.buffer.view(np.uint8), want.view(np.uint8))


def test_round_trip_through_a_gapped_layout():
    md = M.from_blocking([2, 17, 3, 3], "f32", [720, 352, 112, 32], [16], [1])
    x = np.random.default_rng(0).normal(size=md.dims).astype(np.float32)
    m = lj.Memory.from_numpy(x, md)
    assert np.array_equal(m.to_numpy(), x)


def test_kernels_accept_memory_objects():
    src_md, dst_md = M([2, 17, 3, 5], "f32", "nchw"), M([2, 17, 3, 5], "f32", "nChw16c")
    x = np.random.default_rng(1).normal(size=src_md.dims).astype(np.float32)
    src = lj.Memory.from_numpy(x, src_md)
    dst = lj.Memory(dst_md)
    k = lj.compile_reorder(src_md, dst_md)
    assert k(src, dst) is dst
    assert np.array_equal(dst.to_numpy(), x)
    assert np.array_equal(lj.from_layout(dst, dst_md), x)
    out = lj.reorder(dst, dst_md, src_md)
    assert np.array_equal(out.reshape(x.shape), x)
    back = lj.Memory(src_md)
    assert lj.compile_reorder(dst_md, src_md)(dst, back) is back
    assert np.array_equal(back.buffer.reshape(x.shape), x)


def test_errors():
    md = LAYOUTS[0]
    with pytest.raises(lj.LayoutError):
        lj.Memory(M(md.dims, "f32", "any"))
    with pytest.raises(lj.LayoutError):
        lj.Memory("nchw")
    with pytest.raises(lj.LayoutError):  # one element short
        lj.Memory(md, np.zeros(md.get_size() // 4 - 1, np.float32))
    with pytest.raises(lj.LayoutError):  # too large for a dense layout
        lj.Memory(md, np.zeros(md.get_size() // 4 + 1, np.float32))
    with pytest.raises(lj.LayoutError):  # not contiguous
        lj.Memory(md, np.zeros(md.get_size() // 2, np.float32)[::2])
    ro = np.zeros(md.get_size() // 4, np.float32)
    ro.flags.writeable = False
    with pytest.raises(lj.LayoutError):  # padding cannot be zeroed
        lj.Memory(md, ro)
    plain = M(md.dims, "f32", "nchw")
    ro2 = np.zeros(plain.get_size() // 4, np.float32)
    ro2.flags.writeable = False
    assert lj.Memory(plain, ro2).buffer is ro2  # no padding: a read-only source is fine
    with pytest.raises(lj.LayoutError):
        lj.Memory(md, np.zeros(md.get_size(), dtype=object))
    m = lj.Memory(md)
    with pytest.raises(lj.LayoutError):
        m.set_data_handle(np.zeros(3, np.float32))
    # a view layout (gaps) accepts a larger parent buffer but not a smaller one
    gap = LAYOUTS[10]
    lj.Memory(gap, np.zeros(_nbytes(gap) + 64, np.uint8))
    with pytest.raises(lj.LayoutError):
        lj.Memory(gap, np.zeros(gap.required_bytes() - 4, np.uint8))


def test_doctests():
    import doctest

    import layoutjit.memory

    res = doctest.testmod(layoutjit.memory, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert res.failed == 0 and res.attempted > 0

"""Buffers from other libraries: DLPack (PyTorch), the buffer protocol, ml_dtypes' bfloat16.

Kernels view every buffer without copying: a tensor passed as ``dst`` is
written in place, and a non-contiguous one is refused with a LayoutError.
"""

from __future__ import annotations

import array

import numpy as np
import pytest

import layoutjit as lj
from layoutjit.buffers import as_array
from layoutjit.kernel import Kernel

DIMS = [2, 3, 4, 4]
N = 2 * 3 * 4 * 4
SRC = lj.MemoryDesc(DIMS, "f32", "nchw")
DST = lj.MemoryDesc(DIMS, "f32", "nChw8c")
SRC_BF = SRC.with_dtype("bf16")
DST_BF = DST.with_dtype("bf16")


@pytest.fixture(scope="module")
def k32() -> Kernel:
    return lj.compile_reorder(SRC, DST)


def expected() -> np.ndarray:
    return lj.to_layout(np.arange(N, dtype=np.float32).reshape(DIMS), DST)


# ----------------------------------------------------------------- buffer protocol
def test_bytearray_memoryview_array_buffers(k32):
    src = bytearray(N * 4)
    np.frombuffer(src, np.float32)[:] = np.arange(N)
    dst = bytearray(DST.get_size())
    assert k32(src, dst) is dst
    assert np.array_equal(np.frombuffer(dst, np.float32), expected())
    dst2 = bytearray(DST.get_size())
    mv = memoryview(dst2)
    assert k32(memoryview(src), mv) is mv
    assert np.array_equal(np.frombuffer(dst2, np.float32), expected())
    dst3 = array.array("f", bytes(DST.get_size()))
    k32(array.array("f", range(N)), dst3)
    assert np.array_equal(np.frombuffer(dst3, np.float32), expected())
    # the wrong size, and a read-only output, are refused before anything runs
    with pytest.raises(lj.LayoutError, match="needs exactly"):
        k32(bytearray(10))
    with pytest.raises(lj.LayoutError, match="read-only"):
        k32(src, memoryview(bytes(DST.get_size())))


def test_immutable_or_copying_dst_is_refused(k32):
    # bytes are read-only; a list would need a copy, so the output would be lost
    with pytest.raises(lj.LayoutError, match="read-only"):
        k32(bytearray(N * 4), bytes(DST.get_size()))
    with pytest.raises(lj.LayoutError):
        k32(bytearray(N * 4), [0.0] * (DST.get_size() // 4))


# ------------------------------------------------------------------------ torch
def test_torch_tensor_zero_copy_via_dlpack(k32):
    torch = pytest.importorskip("torch")
    t = torch.arange(N, dtype=torch.float32)
    out = torch.full((DST.get_size() // 4,), -1.0)
    assert as_array(out, "dst").ctypes.data == out.data_ptr()  # a view, not a copy
    r = k32(t, out)
    assert r is out  # the tensor itself comes back, written in place
    assert np.array_equal(out.numpy(), expected())
    # allocated output: a numpy array
    assert np.array_equal(k32(t), expected())
    # a logical tensor into and out of a layout
    buf = lj.to_layout(t.reshape(DIMS), DST)
    assert np.array_equal(buf, expected())


def test_torch_bfloat16_via_dlpack():
    torch = pytest.importorskip("torch")
    k = lj.compile_reorder(SRC_BF, DST_BF)
    t = torch.arange(N, dtype=torch.bfloat16)
    out = torch.zeros(DST_BF.get_size() // 2, dtype=torch.bfloat16)
    assert as_array(out, "dst").ctypes.data == out.data_ptr()
    assert k(t, out) is out
    back = torch.empty(N, dtype=torch.bfloat16)
    lj.compile_reorder(DST_BF, SRC_BF)(out, back)
    assert torch.equal(back, t)
    # bf16 -> f32 through to_layout: exact
    buf = lj.to_layout(t.reshape(DIMS), DST)
    assert np.array_equal(buf, expected())


def test_torch_non_contiguous_is_refused(k32):
    torch = pytest.importorskip("torch")
    strided = torch.arange(2 * N, dtype=torch.float32)[::2]
    with pytest.raises(lj.LayoutError, match="C-contiguous"):
        k32(strided)
    transposed = torch.arange(N, dtype=torch.float32).reshape(6, 16).t()
    with pytest.raises(lj.LayoutError, match="C-contiguous"):
        k32(transposed)
    out = torch.zeros(2 * DST.get_size() // 4)[::2]
    with pytest.raises(lj.LayoutError, match="dst: the buffer must be C-contiguous"):
        k32(torch.arange(N, dtype=torch.float32), out)
    # a logical (shaped) array may be strided: to_layout copies it into the layout
    logical = torch.arange(N, dtype=torch.float32).reshape(4, 4, 3, 2).permute(3, 2, 1, 0)
    assert np.array_equal(lj.to_layout(logical, DST),
                          lj.to_layout(np.ascontiguousarray(logical.numpy()), DST))


def test_torch_requires_grad_message(k32):
    torch = pytest.importorskip("torch")
    with pytest.raises(lj.LayoutError, match="DLPack"):
        k32(torch.ones(N, requires_grad=True))


# --------------------------------------------------------------------- ml_dtypes
def test_ml_dtypes_bfloat16_in_and_out():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf = np.dtype(ml_dtypes.bfloat16)
    a = (np.arange(N, dtype=np.float32) / 8).astype(bf).reshape(DIMS)
    buf = lj.to_layout(a, DST_BF)  # bf16 -> bf16: bits move unchanged
    assert buf.dtype.itemsize == 2 and buf.nbytes == DST_BF.get_size()  # 16-bit words
    back = lj.from_layout(buf, DST_BF)
    assert back.dtype == bf and back.shape == tuple(DIMS)
    assert np.array_equal(back.view(np.uint16), a.view(np.uint16))
    # a bfloat16 buffer is accepted as raw memory by a kernel, and f32 -> bf16 rounds as ml_dtypes
    x = np.linspace(-3, 3, N, dtype=np.float32).reshape(DIMS)
    got = lj.from_layout(lj.to_layout(x, DST_BF), DST_BF)
    assert np.array_equal(got.view(np.uint16), x.astype(bf).view(np.uint16))
    assert np.array_equal(lj.from_layout(lj.to_layout(got, DST), DST), got.astype(np.float32))


def test_numpy_dtypes_stay_sensible():
    f16 = lj.MemoryDesc(DIMS, "f16", "nChw8c")
    x = np.arange(N, dtype=np.float32).reshape(DIMS)
    assert lj.from_layout(lj.to_layout(x, f16), f16).dtype == np.float16
    s8 = lj.MemoryDesc(DIMS, "s8", "nhwc")
    b = lj.to_layout(np.arange(N, dtype=np.int64).reshape(DIMS) * 3 - 150, s8)  # exact saturation
    assert b.dtype == np.int8 and b.max() == 127 and b.min() == -128
    back = lj.from_layout(b, s8)
    assert back.dtype == np.int8 and back.shape == tuple(DIMS)

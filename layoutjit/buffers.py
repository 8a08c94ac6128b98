"""Turning user objects into raw buffers, and allocating aligned ones.

Kernels see buffers as raw memory: any C-contiguous numpy array (any dtype and
shape), or anything numpy can view without copying (the buffer protocol,
``__array_interface__``, DLPack). Validation happens here, before any kernel
runs, because kernels are compiled without bounds checks.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import LayoutError

ALIGNMENT = 64


def aligned_empty(nbytes: int, dtype: Any = np.uint8, *, zero: bool = False) -> np.ndarray:
    """A 1-D array of ``nbytes`` bytes (viewed as ``dtype``) starting on a 64-byte boundary."""
    dt = np.dtype(dtype)
    if nbytes % dt.itemsize:
        raise LayoutError(f"aligned_empty: {nbytes} bytes is not a whole number of {dt} elements")
    alloc = np.zeros if zero else np.empty
    raw = alloc(nbytes + ALIGNMENT, dtype=np.uint8)
    shift = (-raw.ctypes.data) % ALIGNMENT
    return raw[shift:shift + nbytes].view(dt)


def as_array(x: Any, what: str) -> np.ndarray:
    """A numpy view of ``x`` without copying (ndarray, Memory, buffer protocol, DLPack)."""
    if isinstance(x, np.ndarray):
        return x
    buf = getattr(x, "_layoutjit_buffer", None)  # layoutjit.Memory
    if buf is not None:
        return buf
    if hasattr(x, "__dlpack__") and not hasattr(x, "__array_interface__"):
        try:
            return np.from_dlpack(x)
        except Exception as e:
            from .interop import dlpack_fallback

            arr = dlpack_fallback(x)
            if arr is not None:
                return arr
            raise LayoutError(f"{what}: cannot view this {type(x).__name__} via DLPack: {e}") from None
    try:
        return np.asarray(x)
    except Exception as e:
        raise LayoutError(f"{what}: expected a numpy array or an object exposing its memory "
                          f"(buffer protocol, __array_interface__, DLPack); got {type(x).__name__}: {e}"
                          ) from None


def byte_view(a: np.ndarray, what: str, *, writable: bool = False) -> np.ndarray:
    """Validate a buffer (C-contiguous; writable for outputs) and view it as 1-D bytes."""
    if not a.flags.c_contiguous:
        raise LayoutError(f"{what}: the buffer must be C-contiguous (got strides {a.strides})")
    if writable and not a.flags.writeable:
        raise LayoutError(f"{what}: the buffer is read-only")
    if a.dtype.hasobject:
        raise LayoutError(f"{what}: object arrays hold no raw data")
    return a.reshape(-1).view(np.uint8)

"""Turning user objects into raw buffers, and allocating aligned ones.

Kernels see buffers as raw memory: any C-contiguous numpy array (any dtype and
shape, 0-d included), or an object whose memory numpy can view without
copying: the buffer protocol (``bytearray``, ``memoryview``, ``array.array``,
``mmap``, ctypes arrays), ``__array_interface__``/``__array_struct__``, or
DLPack. Validation happens here, before any kernel runs, because kernels are
compiled without bounds checks:

* ``as_buffer`` refuses anything that would need a copy to become an array
  (lists, Python numbers, objects with only ``__array__``): a kernel writing
  into a private copy would silently lose its output.
* ``byte_view`` refuses non-C-contiguous views (negative or gapped strides),
  read-only outputs and arrays of Python objects, and returns a 1-D ``uint8``
  view of exactly the same bytes.

``as_array`` is the lenient variant used for *logical* inputs (``to_layout``),
where a copy is harmless.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import LayoutError

ALIGNMENT = 64
_U8 = np.dtype(np.uint8)


def aligned_empty(nbytes: int, dtype: Any = np.uint8, *, zero: bool = False) -> np.ndarray:
    """A 1-D array of ``nbytes`` bytes (viewed as ``dtype``) starting on a 64-byte boundary.

    >>> import layoutjit as lj, numpy as np
    >>> a = lj.aligned_empty(64, np.float32, zero=True)
    >>> a.shape, a.ctypes.data % 64
    ((16,), 0)
    """
    dt = np.dtype(dtype)
    if nbytes < 0:
        raise LayoutError(f"aligned_empty: {nbytes} bytes is negative")
    if dt.itemsize == 0 or nbytes % dt.itemsize:
        raise LayoutError(f"aligned_empty: {nbytes} bytes is not a whole number of {dt} elements")
    alloc = np.zeros if zero else np.empty
    raw = alloc(nbytes + ALIGNMENT, dtype=np.uint8)
    shift = (-raw.ctypes.data) % ALIGNMENT
    return raw[shift:shift + nbytes].view(dt)


def _from_dlpack(x: Any, what: str) -> np.ndarray:
    try:
        return np.from_dlpack(x)
    except Exception as e:
        from .interop import dlpack_fallback

        try:
            arr = dlpack_fallback(x)
        except Exception:
            arr = None
        if arr is not None:
            return arr
        raise LayoutError(f"{what}: cannot view this {type(x).__name__} via DLPack "
                          f"(a CPU tensor is needed): {e}") from None


def _from_buffer_protocol(x: Any, what: str) -> np.ndarray | None:
    try:
        mv = memoryview(x)
    except TypeError:
        return None
    try:
        return np.asarray(mv)
    except Exception:
        pass  # a format numpy cannot parse (ctypes structures...): view the raw bytes
    if not mv.c_contiguous:
        raise LayoutError(f"{what}: the buffer must be C-contiguous")
    try:
        return np.frombuffer(mv.cast("B"), dtype=np.uint8)
    except Exception as e:
        raise LayoutError(f"{what}: cannot view the memory of this {type(x).__name__}: {e}") from None


def _view(x: Any, what: str) -> np.ndarray | None:
    """A zero-copy numpy view of the memory ``x`` exposes, or None when it exposes none."""
    if type(x) is np.ndarray:
        return x
    if isinstance(x, np.ndarray):
        return x.view(np.ndarray)
    buf = getattr(x, "_layoutjit_buffer", None)  # layoutjit.Memory
    if buf is not None:
        return _view(buf, what)
    if isinstance(x, np.generic):  # a numpy scalar: immutable, read it through its buffer
        return _from_buffer_protocol(x, what)
    if hasattr(x, "__dlpack__") and not hasattr(x, "__array_interface__"):
        return _from_dlpack(x, what)
    if hasattr(x, "__array_interface__") or hasattr(x, "__array_struct__"):
        try:
            a = np.asarray(x)
        except Exception as e:
            raise LayoutError(f"{what}: cannot view the memory of this {type(x).__name__}: {e}") from None
        return a if type(a) is np.ndarray else a.view(np.ndarray)
    if x is None or isinstance(x, (str, int, float, complex, list, tuple, dict)):
        return None
    return _from_buffer_protocol(x, what)


def as_buffer(x: Any, what: str) -> np.ndarray:
    """A numpy view of the memory of ``x`` -- never a copy.

    Accepts an ndarray (subclasses are viewed as plain ndarrays), a
    ``layoutjit.Memory``, a DLPack object, an object with
    ``__array_interface__``/``__array_struct__``, or one exporting the buffer
    protocol; anything else is a :class:`LayoutError` naming ``what``.

    >>> b = bytearray(8)
    >>> as_buffer(b, "dst")[0] = 7
    >>> b[0]
    7
    >>> as_buffer([1.0, 2.0], "dst")
    Traceback (most recent call last):
    ...
    layoutjit.errors.LayoutError: dst: expected a numpy array or an object exposing its memory \
(buffer protocol, __array_interface__, DLPack); got list
    """
    a = _view(x, what)
    if a is None:
        raise LayoutError(f"{what}: expected a numpy array or an object exposing its memory "
                          f"(buffer protocol, __array_interface__, DLPack); got {type(x).__name__}"
                          + (" (convert it with np.asarray first)" if hasattr(x, "__array__") else ""))
    return a


def as_array(x: Any, what: str) -> np.ndarray:
    """Like :func:`as_buffer`, but objects exposing no memory (lists...) become ``np.asarray(x)``.

    For logical input arrays (``to_layout``), where a copy is harmless. Output
    buffers must go through :func:`as_buffer`, which never copies.
    """
    a = _view(x, what)
    if a is not None:
        return a
    try:
        return np.asarray(x)
    except Exception as e:
        raise LayoutError(f"{what}: expected an array or an object exposing its memory "
                          f"(buffer protocol, __array_interface__, DLPack); got {type(x).__name__}: {e}"
                          ) from None


def byte_view(a: np.ndarray, what: str, *, writable: bool = False) -> np.ndarray:
    """Validate a buffer (C-contiguous; writable for outputs) and view it as 1-D bytes.

    The result is a plain ``ndarray`` of ``uint8`` over exactly ``a``'s bytes.
    """
    if type(a) is not np.ndarray:
        a = a.view(np.ndarray)  # subclasses (memmap, masked arrays, matrix): their raw data
    if a.dtype.hasobject:
        raise LayoutError(f"{what}: arrays of Python objects hold no raw data (dtype {a.dtype})")
    if not a.flags.c_contiguous:
        raise LayoutError(f"{what}: the buffer must be C-contiguous (got shape {a.shape}, "
                          f"strides {a.strides}); use np.ascontiguousarray")
    if writable and not a.flags.writeable:
        raise LayoutError(f"{what}: the buffer is read-only")
    b = a.reshape(-1).view(_U8)
    if b.size != a.nbytes or (b.size and b.ctypes.data != a.ctypes.data):
        raise LayoutError(f"{what}: cannot view the buffer's bytes in place")  # never expected
    return b

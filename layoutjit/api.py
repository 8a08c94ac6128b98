"""The public functions: compile a reorder, run one, move arrays in and out of layouts."""

from __future__ import annotations

from typing import Any

import numpy as np

from .buffers import aligned_empty, as_array
from .compiler import check_pair, get_kernel
from .desc import MemoryDesc
from .dtypes import DataType, as_dtype, numpy_to_dtype
from .errors import LayoutError
from .kernel import Kernel

_PLAIN = "abcdefghijkl"


def compile_reorder(src_md: MemoryDesc, dst_md: MemoryDesc, *, scales: dict | None = None,
                    zero_points: dict | None = None, post_ops: list | None = None) -> Kernel:
    """Compile (or fetch from the cache) the kernel that reorders ``src_md`` into ``dst_md``.

    ``scales``/``zero_points`` map ``"src"``/``"dst"`` to a mask (bit i: values vary
    along logical dim i); ``post_ops`` is a list of ``("sum", beta)``,
    ``("eltwise", alg, alpha, beta)`` and ``("binary", alg, src1_md)``.

    >>> import layoutjit as lj, numpy as np
    >>> k = lj.compile_reorder(lj.MemoryDesc([1, 3, 2, 2], "f32", "nchw"),
    ...                        lj.MemoryDesc([1, 3, 2, 2], "f32", "nChw8c"))
    >>> out = k(np.arange(12, dtype=np.float32))
    >>> out.reshape(4, 8)[0].tolist()   # first pixel: 3 channels, then zero padding
    [0.0, 4.0, 8.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    """
    check_pair(src_md, dst_md)
    attrs = None
    if scales or zero_points or post_ops:
        from .attrs import Attrs

        attrs = Attrs.make(src_md, dst_md, scales=scales, zero_points=zero_points, post_ops=post_ops)
    return get_kernel(src_md, dst_md, attrs)


def compile_eltwise(md: MemoryDesc, alg: str, alpha: float = 0.0, beta: float = 0.0) -> Kernel:
    """Compile an elementwise kernel on any layout, with oneDNN's algorithms and alpha/beta.

    Call it as ``kernel(src, dst)``; ``dst`` may be ``src`` (in place). Float
    types compute in f32, integer types compute in f32 and convert back. The
    zero padding of a blocked layout stays zero even where f(0) != 0; gaps of a
    strided layout are never touched.

    >>> import layoutjit as lj, numpy as np
    >>> md = lj.MemoryDesc([1, 3, 1, 2], "f32", "nChw8c")
    >>> buf = lj.to_layout(np.array([-1.0, 2, -3, 4, -5, 6]).reshape(md.dims), md)
    >>> relu = lj.compile_eltwise(md, "relu")
    >>> lj.from_layout(relu(buf, buf), md).ravel().tolist()
    [0.0, 2.0, 0.0, 4.0, 0.0, 6.0]
    """
    from .attrs import Attrs

    check_pair(md, md)
    attrs = Attrs.make(md, md, post_ops=[("eltwise", alg, alpha, beta)])
    return get_kernel(md, md, attrs, kind="eltwise", in_place_ok=True)


def reorder(src: Any, src_md: MemoryDesc, dst_md: MemoryDesc, dst: Any = None, **runtime: Any) -> Any:
    """Reorder ``src`` (laid out as ``src_md``) into ``dst_md``; allocates dst when None.

    >>> import layoutjit as lj, numpy as np
    >>> a = np.arange(6, dtype=np.float32)
    >>> lj.reorder(a, lj.MemoryDesc([2, 3], "f32", "ab"), lj.MemoryDesc([2, 3], "f32", "ba")).tolist()
    [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
    """
    return compile_reorder(src_md, dst_md)(src, dst, **runtime)


def plain_desc(dims: Any, dtype: Any) -> MemoryDesc:
    """The row-major (``abc...``) descriptor of a logical tensor.

    >>> import layoutjit as lj
    >>> lj.plain_desc((2, 3, 4), "f32")
    MemoryDesc(f32, 2x3x4, ncw)
    """
    dims = tuple(int(d) for d in dims)
    return MemoryDesc(dims, dtype, _PLAIN[: len(dims)]) if dims else MemoryDesc((), dtype)


def _logical_source(array: Any, md: MemoryDesc) -> tuple[np.ndarray, DataType]:
    a = as_array(array, "array")
    if a.ndim == 0 and md.ndims:
        a = a.reshape((1,) * md.ndims)
    if tuple(a.shape) != tuple(md.dims):
        raise LayoutError(f"to_layout: array shape {tuple(a.shape)} differs from the dims "
                          f"{md.dims} of {md!r}")
    dt = numpy_to_dtype(a.dtype)
    if dt is None:
        if a.dtype == np.uint16 and md.dtype in ("bf16", "f16"):
            dt = md.dtype  # raw 16-bit words of the target type
        elif a.dtype.kind in "biu" and md.dtype.is_int:
            lo, hi = int(md.dtype.lowest), int(md.dtype.highest)
            a = np.clip(a, lo, hi).astype(md.dtype.storage)  # exact saturation
            dt = md.dtype
        elif a.dtype.kind in "biuf":
            a = a.astype(np.float64)
            dt = as_dtype("f64")
        else:
            raise LayoutError(f"to_layout: arrays of dtype {a.dtype} cannot be converted to {md.dtype}")
    return np.ascontiguousarray(a), dt


def to_layout(array: Any, md: MemoryDesc, out: Any = None) -> np.ndarray:
    """Move a logical array (shape ``md.dims``) into a buffer laid out as ``md``.

    Values are converted to ``md.dtype`` with the reorder's rounding and
    saturation; padding is zero. Returns a 64-byte aligned 1-D array of
    ``md.dtype.storage`` (bf16 and f16 as 16-bit words) unless ``out`` is given.

    >>> import layoutjit as lj, numpy as np
    >>> md = lj.MemoryDesc([2, 3], "f32", "ba")
    >>> lj.to_layout(np.arange(6).reshape(2, 3), md).tolist()
    [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
    """
    if not isinstance(md, MemoryDesc):
        raise LayoutError(f"to_layout: md must be a MemoryDesc, got {type(md).__name__}")
    a, dt = _logical_source(array, md)
    src_md = plain_desc(md.dims, dt)
    k = compile_reorder(src_md, md)
    if out is None:
        nbytes = max(md.get_size(), md.required_bytes())
        out = aligned_empty(nbytes, md.dtype.storage, zero=not md.is_dense())
    k(a.reshape(-1), out)
    return out


def from_layout(buffer: Any, md: MemoryDesc) -> np.ndarray:
    """Read a buffer laid out as ``md`` back into a logical array of shape ``md.dims``.

    The result has ``md.dtype.value_dtype``: float16 for f16, ``ml_dtypes.bfloat16``
    for bf16 when ml_dtypes is installed (else the raw uint16 words).

    >>> import layoutjit as lj, numpy as np
    >>> md = lj.MemoryDesc([2, 3], "f32", "ba")
    >>> lj.from_layout(lj.to_layout(np.arange(6.0).reshape(2, 3), md), md).tolist()
    [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    """
    if not isinstance(md, MemoryDesc):
        raise LayoutError(f"from_layout: md must be a MemoryDesc, got {type(md).__name__}")
    dst_md = plain_desc(md.dims, md.dtype)
    k = compile_reorder(md, dst_md)
    out = k(buffer)
    return out.view(md.dtype.value_dtype).reshape(md.dims)

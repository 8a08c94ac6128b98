"""``Memory``: a memory descriptor together with the buffer that holds it, as in oneDNN.

A ``Memory`` either allocates its storage (64-byte aligned, zero filled) or
wraps a buffer the caller owns. Wrapping, at construction or with
:meth:`Memory.set_data_handle`, validates the buffer as kernels do and then
writes zeros into the *padding* of the layout -- the positions whose logical
index lies in ``[dims, padded_dims)`` -- exactly as oneDNN's
``memory::set_data_handle`` does, so that kernels which rely on zero padding
(blocked convolutions, our reorders) see it. Nothing else is written: the
logical elements and the gaps of a strided layout keep their bytes.

Kernels accept a ``Memory`` wherever they accept an array (it exposes its
storage as ``_layoutjit_buffer``)::

    >>> import layoutjit as lj, numpy as np
    >>> md = lj.MemoryDesc([1, 3, 1, 2], "f32", "nChw8c")
    >>> m = lj.Memory.from_numpy(np.arange(6.0).reshape(md.dims), md)
    >>> m.nbytes, m.buffer.reshape(2, 8)[0].tolist()
    (64, [0.0, 2.0, 4.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    >>> relu = lj.compile_eltwise(md, "linear", 2.0, 1.0)
    >>> relu(m, m) is m                 # in place; padding stays zero
    True
    >>> m.to_numpy().ravel().tolist()
    [1.0, 3.0, 5.0, 7.0, 9.0, 11.0]

How the padding is zeroed: a layout maps a logical index to
``offset0 + sum_d f_d(index_d)``, and each ``f_d`` is a sum over the *digits*
of dim d (its outer part and each of its inner blocks, each with an extent and
a stride). The padding of dim d, ``[dims_d, padded_dims_d)``, is a range of a
mixed-radix number, which splits into a few boxes of digits (at most two per
digit). The padding region is the disjoint union, over the padded dims d, of
"dims before d: valid range; dim d: padding; dims after d: full padded range";
each piece is a product of per-dim boxes, i.e. one strided numpy view of the
buffer, set to zero with one assignment. This is computed once per
descriptor, works for every data type (zero is all-zero bytes for all of
them), touches only the padding bytes (no read, no rounding: unlike running an
eltwise ``linear(1, 0)`` in place, which would rewrite every element through
f32 and so change f64, s32 beyond 2**24, -0.0 and signalling NaNs), and costs
no compile.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .buffers import aligned_empty, as_buffer
from .desc import MemoryDesc
from .errors import LayoutError

__all__ = ["Memory", "check_buffer", "padding_views", "size_rule", "zero_padding"]

# one box of one dim: a (start, count) per digit of the dim, outermost digit first
_Box = tuple[tuple[int, int], ...]


def _digits(md: MemoryDesc, d: int) -> tuple[list[int], list[int]]:
    """(radices of the inner digits of dim d, outermost first; strides of all its digits).

    The outer digit (the dim's position divided by its block) has stride
    ``md.strides[d]``; each inner block of dim d is one more digit whose stride
    is the product of the inner blocks inside it (oneDNN's ``off_v``).
    """
    radices: list[int] = []
    strides: list[int] = []
    bs = 1
    inner = []  # (radix, stride) innermost first
    for blk, idx in zip(reversed(md.inner_blks), reversed(md.inner_idxs)):
        if idx == d:
            inner.append((blk, bs))
        bs *= blk
    for blk, st in reversed(inner):
        radices.append(blk)
        strides.append(st)
    return radices, [md.strides[d]] + strides


def _boxes(lo: int, hi: int, radices: list[int]) -> list[_Box]:
    """Split the positions [lo, hi) of a mixed-radix number into boxes of digits.

    The outermost digit is unbounded; ``radices`` are those of the inner digits.
    """
    if hi <= lo:
        return []
    if not radices:
        return [((lo, hi - lo),)]
    unit = 1
    for r in radices:
        unit *= r
    qlo, rlo = divmod(lo, unit)
    qhi, rhi = divmod(hi, unit)
    if qlo == qhi:
        return [((qlo, 1),) + b for b in _boxes(rlo, rhi, radices[1:])]
    out: list[_Box] = []
    if rlo:
        out += [((qlo, 1),) + b for b in _boxes(rlo, unit, radices[1:])]
        qlo += 1
    if qhi > qlo:
        out.append(((qlo, qhi - qlo),) + tuple((0, r) for r in radices))
    if rhi:
        out += [((qhi, 1),) + b for b in _boxes(0, rhi, radices[1:])]
    return out


@functools.lru_cache(maxsize=1024)
def padding_views(md: MemoryDesc) -> tuple[tuple[int, tuple[int, ...], tuple[int, ...]], ...]:
    """The padding of ``md`` as strided pieces ``(element offset, shape, element strides)``.

    The pieces are disjoint and cover exactly the positions whose logical index
    lies in ``[dims, padded_dims)`` (with ``padded_offsets`` applied). Empty for
    layouts without padding.

    >>> padding_views(MemoryDesc([1, 3, 1, 2], "f32", "nChw8c"))
    ((3, (1, 1, 5, 1, 2), (16, 16, 1, 16, 8)),)
    """
    if md.format_kind != "blocked" or md.ndims == 0 or md.has_zero_dim or not md.has_padding:
        return ()
    nd = md.ndims
    digits = [_digits(md, d) for d in range(nd)]
    po = md.padded_offsets

    def boxes(d: int, lo: int, hi: int) -> list[_Box]:
        return _boxes(po[d] + lo, po[d] + hi, digits[d][0])

    full = [boxes(d, 0, md.padded_dims[d]) for d in range(nd)]
    valid = [boxes(d, 0, md.dims[d]) for d in range(nd)]
    pieces = []
    for d in range(nd):
        if md.padded_dims[d] == md.dims[d]:
            continue
        per_dim = valid[:d] + [boxes(d, md.dims[d], md.padded_dims[d])] + full[d + 1:]
        for combo in itertools.product(*per_dim):
            off = md.offset0
            shape: list[int] = []
            strides: list[int] = []
            for e, box in enumerate(combo):
                for (start, count), st in zip(box, digits[e][1]):
                    off += start * st
                    shape.append(count)
                    strides.append(st)
            if all(shape):
                pieces.append((off, tuple(shape), tuple(strides)))
    return tuple(pieces)


def zero_padding(buffer: Any, md: MemoryDesc) -> None:
    """Write zeros into the padding of ``md`` in ``buffer`` (and nowhere else).

    ``buffer`` must already be validated (C-contiguous, writable, large enough).
    """
    pieces = padding_views(md)
    if not pieces:
        return
    raw = as_buffer(buffer, "buffer").reshape(-1).view(np.uint8)
    isz = md.dtype.size
    for off, shape, strides in pieces:
        v = as_strided(raw[off * isz:], shape + (isz,), tuple(s * isz for s in strides) + (1,),
                       writeable=True)
        v[...] = 0


def _check_md(md: Any) -> MemoryDesc:
    if not isinstance(md, MemoryDesc):
        raise LayoutError(f"Memory: md must be a MemoryDesc, got {type(md).__name__}")
    if md.format_kind == "any":
        raise LayoutError(f"Memory: {md!r} has format 'any'; memory needs a concrete layout "
                          f"(resolve it first, e.g. with a Pipeline)")
    return md


def _alloc_bytes(md: MemoryDesc) -> int:
    if md.format_kind != "blocked":
        return 0
    return max(md.get_size(), md.required_bytes())


def size_rule(md: MemoryDesc) -> tuple[int, int, bool]:
    """(``md.get_size()``, bytes every position needs, whether a larger buffer is acceptable).

    A dense layout needs exactly ``get_size()`` bytes; a view (gaps, ``offset0``)
    lives inside a larger parent buffer and needs at least ``required_bytes()``.
    """
    size = md.get_size()
    req = max(md.required_bytes(), 0) if md.format_kind == "blocked" else 0
    return size, req, (not md.is_dense() or req > size)


def check_buffer(buffer: Any, md: MemoryDesc, what: str, *, writable: bool = False,
                 rule: tuple[int, int, bool] | None = None) -> np.ndarray:
    """View ``buffer`` (never a copy) and check that it can hold ``md`` as kernels require.

    C-contiguous, not an object array, writable if asked, and of the size
    :func:`size_rule` gives (pass ``rule`` to reuse one computed earlier).
    Raises :class:`LayoutError` otherwise.
    """
    a = as_buffer(buffer, what)
    if a.dtype.hasobject:
        raise LayoutError(f"{what}: arrays of Python objects hold no raw data (dtype {a.dtype})")
    if not a.flags.c_contiguous:
        raise LayoutError(f"{what}: the buffer must be C-contiguous (got strides {a.strides})")
    size, req, view = rule if rule is not None else size_rule(md)
    nb = a.nbytes
    if not ((nb == size and nb >= req) or (view and nb >= req)):
        if view:
            raise LayoutError(f"{what}: buffer of {nb} bytes is too small for {md!r}: it needs "
                              f"at least {req} bytes (offset0 and strides included)")
        raise LayoutError(f"{what}: buffer has {nb} bytes, {md!r} needs exactly {size} "
                          f"(md.get_size())")
    if writable and not a.flags.writeable:
        raise LayoutError(f"{what}: the buffer is read-only")
    return a


class Memory:
    """A memory descriptor and its buffer (oneDNN's ``dnnl::memory``).

    ``Memory(md)`` allocates ``max(md.get_size(), md.required_bytes())`` bytes,
    64-byte aligned and zero filled, as a 1-D array of ``md.dtype.storage``
    (bf16 and f16 as 16-bit words). ``Memory(md, buffer)`` wraps ``buffer``
    without copying: any C-contiguous array (or object exposing its memory) of
    the size kernels accept for ``md``; its padding is set to zero.

    >>> import layoutjit as lj, numpy as np
    >>> md = lj.MemoryDesc([2, 3], "f32", "Ab16a")          # dim 0 padded to 16
    >>> raw = np.full(48, 7.0, dtype=np.float32)
    >>> m = lj.Memory(md, raw)                               # wraps: padding := 0
    >>> m.buffer is raw, int((raw != 0).sum())
    (True, 6)
    >>> m.to_numpy().tolist()
    [[7.0, 7.0, 7.0], [7.0, 7.0, 7.0]]

    Attributes: ``md``, ``buffer`` (the storage array), ``nbytes``.
    """

    __slots__ = ("_md", "_buffer")

    def __init__(self, md: MemoryDesc, buffer: Any = None) -> None:
        self._md = _check_md(md)
        self._buffer: np.ndarray
        if buffer is None:
            self._buffer = aligned_empty(_alloc_bytes(md), md.dtype.storage, zero=True)
        else:
            self.set_data_handle(buffer)

    # ------------------------------------------------------------ construction
    @classmethod
    def from_numpy(cls, array: Any, md: MemoryDesc) -> Memory:
        """A new Memory holding the logical ``array`` (shape ``md.dims``) in ``md``'s layout.

        Values are converted to ``md.dtype`` as a reorder converts them (round to
        nearest even, saturation); padding is zero.
        """
        from .api import to_layout

        m = cls(md)
        to_layout(array, md, out=m._buffer)
        return m

    def to_numpy(self) -> np.ndarray:
        """The logical tensor as a new array of shape ``md.dims`` (``md.dtype.value_dtype``)."""
        from .api import from_layout

        return from_layout(self._buffer, self._md)

    # ------------------------------------------------------------ data handle
    def set_data_handle(self, buffer: Any) -> None:
        """Wrap another buffer (validated as kernels validate theirs); zero its padding."""
        a = check_buffer(buffer, self._md, "Memory buffer")
        if padding_views(self._md) and not a.flags.writeable:
            raise LayoutError(f"Memory buffer: the buffer is read-only, but {self._md!r} has "
                              f"padding that must be set to zero")
        zero_padding(a, self._md)
        self._buffer = a

    def get_data_handle(self) -> np.ndarray:
        """The storage array (same as :attr:`buffer`)."""
        return self._buffer

    def zero_pad(self) -> Memory:
        """Set the padding to zero again (after foreign code wrote into it); returns self."""
        zero_padding(self._buffer, self._md)
        return self

    # ------------------------------------------------------------ attributes
    @property
    def md(self) -> MemoryDesc:
        """The memory descriptor."""
        return self._md

    @property
    def buffer(self) -> np.ndarray:
        """The array holding the storage: the one allocated, or the one wrapped (as given)."""
        return self._buffer

    @property
    def _layoutjit_buffer(self) -> np.ndarray:  # what kernels read and write
        return self._buffer

    @property
    def nbytes(self) -> int:
        """Size of the buffer in bytes (``max(md.get_size(), md.required_bytes())`` when allocated)."""
        return int(self._buffer.nbytes)

    @property
    def data_ptr(self) -> int:
        """Address of the first byte of the buffer."""
        return int(self._buffer.ctypes.data)

    def __repr__(self) -> str:
        return f"Memory({self._md!r}, {self.nbytes} bytes at {self.data_ptr:#x})"

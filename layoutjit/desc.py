"""``MemoryDesc``: oneDNN's memory descriptor as an immutable Python value.

The descriptor holds exactly oneDNN's blocking description -- dims, data type,
padded dims and offsets, ``offset0``, the strides of the outer dims and the
inner blocks -- and follows oneDNN v3's rules for creating, comparing, sizing,
slicing (``submemory_desc``), reshaping and permuting it. Everything else
(size, tag name, per-dim blocks) is derived from those fields.

Physical offset of a logical index ``pos`` (oneDNN's ``off_v``)::

    off = offset0; p = pos + padded_offsets; bs = 1
    for each inner block k, innermost first:
        off += (p[idx_k] % blk_k) * bs;  p[idx_k] //= blk_k;  bs *= blk_k
    off += sum(p[d] * strides[d])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .dtypes import DataType, as_dtype
from .errors import LayoutError, Unimplemented
from .tags import MAX_NDIMS, abstract_from_blocking, display_name, parse_tag

INT64_MAX = (1 << 63) - 1

_FIELDS = ("ndims", "dims", "dtype", "padded_dims", "padded_offsets", "offset0",
           "format_kind", "strides", "inner_blks", "inner_idxs")


def _dims_str(dims: Sequence[int]) -> str:
    return "x".join(str(d) for d in dims) if len(dims) else "()"


def _as_int_tuple(values: Any, what: str) -> tuple[int, ...]:
    try:
        seq = list(values)
    except TypeError:
        raise LayoutError(f"{what}: expected a sequence of integers, got {values!r}") from None
    out = []
    for v in seq:
        if isinstance(v, bool) or not hasattr(v, "__index__"):
            raise LayoutError(f"{what}: {v!r} is not an integer")
        out.append(int(v.__index__()))
    return tuple(out)


class MemoryDesc:
    """A memory descriptor with oneDNN's semantics; immutable and hashable.

    >>> md = MemoryDesc([2, 17, 5, 4], "f32", "nChw8c")
    >>> md.padded_dims, md.strides, md.inner_blks
    ((2, 24, 5, 4), (480, 160, 32, 8), (8,))
    >>> md
    MemoryDesc(f32, 2x17x5x4, nChw8c)
    >>> MemoryDesc([2, 3], "f32", strides=[1, 2]) == MemoryDesc([2, 3], "f32", "ba")
    True
    """

    __slots__ = ("_ndims", "_dims", "_dtype", "_padded_dims", "_padded_offsets",
                 "_offset0", "_format_kind", "_strides", "_inner_blks", "_inner_idxs",
                 "_hash", "_tagname", "_keyc")
    # the slots' types (set once, through object.__setattr__, in _set)
    _ndims: int
    _dims: tuple[int, ...]
    _dtype: DataType
    _padded_dims: tuple[int, ...]
    _padded_offsets: tuple[int, ...]
    _offset0: int
    _format_kind: str
    _strides: tuple[int, ...]
    _inner_blks: tuple[int, ...]
    _inner_idxs: tuple[int, ...]
    _hash: int | None
    _tagname: str | None | bool  # False: not looked up yet
    _keyc: tuple | None  # the equality key, computed once

    # ------------------------------------------------------------------ creation
    def __init__(self, dims: Sequence[int], dtype: Any, tag: str | None = None, *,
                 strides: Sequence[int] | None = None) -> None:
        dt = as_dtype(dtype)
        dims_t = _as_int_tuple(dims, "dims")
        if tag is not None and strides is not None:
            raise LayoutError("MemoryDesc: give a tag or strides, not both")
        ndims = len(dims_t)
        if ndims == 0:
            self._set(0, (), dt, (), (), 0, "undef", (), (), ())
            return
        _sanity_check(dims_t, dt)
        if strides is not None:
            st = _as_int_tuple(strides, "strides")
            if len(st) == 0:  # oneDNN's NULL strides: dense row-major, zeros propagate
                acc = [1] * ndims
                for d in range(ndims - 2, -1, -1):
                    acc[d] = acc[d + 1] * dims_t[d + 1]
                st = tuple(acc)
            if len(st) != ndims:
                raise LayoutError(
                    f"MemoryDesc({dt}, {_dims_str(dims_t)}): strides: {len(st)} values "
                    f"for {ndims} dims")
            _strides_check(dims_t, dims_t, st, (), (), dt, f"MemoryDesc({dt}, {_dims_str(dims_t)})")
            self._set(ndims, dims_t, dt, dims_t, (0,) * ndims, 0, "blocked", st, (), ())
            return
        if tag is None:
            tag = "abcdefghijkl"[:ndims]
        if tag == "any":
            self._set(ndims, dims_t, dt, dims_t, (0,) * ndims, 0, "any", (0,) * ndims, (), ())
            return
        try:
            pt = parse_tag(tag)
        except LayoutError as e:
            raise LayoutError(f"MemoryDesc({dt}, {_dims_str(dims_t)}): {e}") from None
        if pt.ndims != ndims:
            raise LayoutError(
                f"MemoryDesc({dt}, {_dims_str(dims_t)}): tag {tag!r} has {pt.ndims} dims, "
                f"the descriptor has {ndims}")
        blocks = pt.blocks
        block_size = 1
        for b in pt.inner_blks:
            block_size *= b
        pdims = tuple(-(-d // b) * b for d, b in zip(dims_t, blocks))
        st_l = [0] * ndims
        stride = block_size
        for d in reversed(pt.perm):  # oneDNN's fill_blocked: a zero dim keeps the stride
            st_l[d] = stride
            if pdims[d] != 0:
                stride *= pdims[d] // blocks[d]
        _overflow_check(pdims, tuple(st_l), blocks, dt, f"MemoryDesc({dt}, {_dims_str(dims_t)}, {tag})")
        self._set(ndims, dims_t, dt, pdims, (0,) * ndims, 0, "blocked", tuple(st_l),
                  pt.inner_blks, pt.inner_idxs)

    @classmethod
    def from_blocking(cls, dims: Sequence[int], dtype: Any, strides: Sequence[int],
                      inner_blks: Sequence[int] = (), inner_idxs: Sequence[int] = (), *,
                      padded_dims: Sequence[int] | None = None,
                      padded_offsets: Sequence[int] | None = None,
                      offset0: int = 0) -> MemoryDesc:
        """Build a blocked descriptor from oneDNN's raw blocking fields.

        For interop with code that fills ``dnnl_memory_desc_t`` by hand. The
        strides must describe a non-overlapping layout (oneDNN's strides check).

        >>> MemoryDesc.from_blocking([2, 17, 5, 4], "f32", [480, 160, 32, 8], [8], [1])
        MemoryDesc(f32, 2x17x5x4, nChw8c)
        """
        dt = as_dtype(dtype)
        dims_t = _as_int_tuple(dims, "dims")
        ndims = len(dims_t)
        where = f"MemoryDesc({dt}, {_dims_str(dims_t)})"
        if ndims == 0:
            raise LayoutError(f"{where}: from_blocking needs at least one dim")
        _sanity_check(dims_t, dt)
        st = _as_int_tuple(strides, "strides")
        ib = _as_int_tuple(inner_blks, "inner_blks")
        ii = _as_int_tuple(inner_idxs, "inner_idxs")
        if len(st) != ndims:
            raise LayoutError(f"{where}: strides: {len(st)} values for {ndims} dims")
        if len(ib) != len(ii):
            raise LayoutError(f"{where}: inner_blks and inner_idxs differ in length")
        if len(ib) > MAX_NDIMS:
            raise LayoutError(f"{where}: inner_blks: at most {MAX_NDIMS} inner blocks")
        for b, i in zip(ib, ii):
            if b <= 0:
                raise LayoutError(f"{where}: inner_blks: {b} is not a positive block size")
            if not 0 <= i < ndims:
                raise LayoutError(f"{where}: inner_idxs: {i} names no dim")
        blocks = [1] * ndims
        for b, i in zip(ib, ii):
            blocks[i] *= b
        if padded_dims is None:
            pd = tuple(-(-d // b) * b for d, b in zip(dims_t, blocks))
        else:
            pd = _as_int_tuple(padded_dims, "padded_dims")
            if len(pd) != ndims or any(p < d for p, d in zip(pd, dims_t)):
                raise LayoutError(f"{where}: padded_dims {pd} must not be smaller than dims")
        po = (0,) * ndims if padded_offsets is None else _as_int_tuple(padded_offsets, "padded_offsets")
        if len(po) != ndims or any(p < 0 for p in po):
            raise LayoutError(f"{where}: padded_offsets {po} must be {ndims} non-negative values")
        if offset0 < 0:
            raise LayoutError(f"{where}: offset0 must not be negative")
        _strides_check(dims_t, pd, st, ib, ii, dt, where)
        self = cls.__new__(cls)
        self._set(ndims, dims_t, dt, pd, po, int(offset0), "blocked", st, ib, ii)
        return self

    def _set(self, ndims: int, dims: tuple, dtype: DataType, padded_dims: tuple,
             padded_offsets: tuple, offset0: int, format_kind: str, strides: tuple,
             inner_blks: tuple, inner_idxs: tuple) -> None:
        sa = object.__setattr__
        sa(self, "_ndims", ndims)
        sa(self, "_dims", dims)
        sa(self, "_dtype", dtype)
        sa(self, "_padded_dims", padded_dims)
        sa(self, "_padded_offsets", padded_offsets)
        sa(self, "_offset0", offset0)
        sa(self, "_format_kind", format_kind)
        sa(self, "_strides", strides)
        sa(self, "_inner_blks", inner_blks)
        sa(self, "_inner_idxs", inner_idxs)
        sa(self, "_hash", None)
        sa(self, "_tagname", False)
        sa(self, "_keyc", None)

    def _replace(self, **kw: Any) -> MemoryDesc:
        vals = {f: getattr(self, "_" + f) for f in _FIELDS}
        vals.update(kw)
        out = MemoryDesc.__new__(MemoryDesc)
        out._set(*(vals[f] for f in _FIELDS))
        return out

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("MemoryDesc is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("MemoryDesc is immutable")

    def __reduce__(self) -> tuple:
        return (_rebuild, tuple(getattr(self, "_" + f) for f in _FIELDS))

    # ---------------------------------------------------------------- attributes
    @property
    def ndims(self) -> int:
        """Number of logical dims (0 for the zero md)."""
        return self._ndims

    @property
    def dims(self) -> tuple[int, ...]:
        """Logical dims, in logical order (n, c, h, w for a 4-D activation)."""
        return self._dims

    @property
    def dtype(self) -> DataType:
        """The data type (a :class:`~layoutjit.dtypes.DataType`, equal to its name, e.g. ``"f32"``)."""
        return self._dtype

    @property
    def data_type(self) -> DataType:
        """oneDNN's name for :attr:`dtype`."""
        return self._dtype

    @property
    def padded_dims(self) -> tuple[int, ...]:
        """Dims rounded up to whole blocks; positions beyond ``dims`` hold zeros.

        >>> MemoryDesc([2, 17, 5, 4], "f32", "nChw16c").padded_dims
        (2, 32, 5, 4)
        """
        return self._padded_dims

    @property
    def padded_offsets(self) -> tuple[int, ...]:
        """Per dim, padding before the first element (oneDNN's ``padded_offsets``; usually 0)."""
        return self._padded_offsets

    @property
    def offset0(self) -> int:
        """Offset in elements of logical element (0, ..., 0) (set by submemory)."""
        return self._offset0

    @property
    def format_kind(self) -> str:
        """``"blocked"``, ``"any"`` (placeholder) or ``"undef"`` (the zero md)."""
        return self._format_kind

    @property
    def strides(self) -> tuple[int, ...]:
        """Strides of the outer dims, in elements, in logical dim order."""
        return self._strides

    @property
    def inner_blks(self) -> tuple[int, ...]:
        """Inner block sizes, outermost first."""
        return self._inner_blks

    @property
    def inner_idxs(self) -> tuple[int, ...]:
        """The logical dim of each inner block, outermost first."""
        return self._inner_idxs

    @property
    def inner_nblks(self) -> int:
        """Number of inner blocks (``len(inner_blks)``)."""
        return len(self._inner_blks)

    # ------------------------------------------------------------- derived info
    @property
    def blocks(self) -> tuple[int, ...]:
        """Per logical dim, the product of its inner blocks."""
        b = [1] * self._ndims
        for blk, idx in zip(self._inner_blks, self._inner_idxs):
            b[idx] *= blk
        return tuple(b)

    @property
    def block_size(self) -> int:
        """Elements in one inner block (the product of ``inner_blks``; 1 when plain).

        >>> MemoryDesc([8, 8], "f32", "AB4b16a4b").block_size
        256
        """
        n = 1
        for b in self._inner_blks:
            n *= b
        return n

    @property
    def nelems(self) -> int:
        """Number of logical elements (0 for a zero-volume descriptor)."""
        n = 1
        for d in self._dims:
            n *= d
        return n if self._ndims else 0

    @property
    def has_zero_dim(self) -> bool:
        """True when some dim is 0 (a tensor with no elements)."""
        return any(d == 0 for d in self._dims)

    @property
    def is_zero(self) -> bool:
        """True for the zero md (ndims 0)."""
        return self._ndims == 0

    @property
    def has_padding(self) -> bool:
        """True when ``padded_dims`` differ from ``dims`` (the layout holds zero padding)."""
        return self._padded_dims != self._dims

    @property
    def is_blocked(self) -> bool:
        """True for a concrete layout (format kind ``"blocked"``; plain layouts count too)."""
        return self._format_kind == "blocked"

    def get_size(self) -> int:
        """Size in bytes, as oneDNN computes it (``offset0`` not included).

        >>> MemoryDesc([2, 17, 5, 4], "f32", "nChw16c").get_size()
        5120
        """
        if self._format_kind != "blocked" or self._ndims == 0 or self.has_zero_dim:
            return 0
        blocks = self.blocks
        max_size = 0
        for pd, b, s in zip(self._padded_dims, blocks, self._strides):
            spd = pd // b
            eff = 1 if spd == 1 else s
            max_size = max(max_size, spd * eff)
        if max_size == 1 and self._inner_blks:
            max_size = self.block_size
        return max_size * self._dtype.size

    @property
    def size(self) -> int:
        """Same as :meth:`get_size`."""
        return self.get_size()

    def max_offset(self) -> int:
        """Largest element offset any position (padding included) maps to, or -1 if empty."""
        if self._format_kind != "blocked" or self._ndims == 0 or self.has_zero_dim:
            return -1
        return self.offset_of(tuple(p - 1 for p in self._padded_dims), allow_padding=True)

    def required_bytes(self) -> int:
        """Bytes a buffer needs so that every position of this layout lies inside it."""
        return (self.max_offset() + 1) * self._dtype.size

    def is_dense(self) -> bool:
        """True when the positions (padding included) fill [0, get_size()) exactly."""
        if self._format_kind != "blocked" or self._ndims == 0:
            return False
        if self.has_zero_dim:
            return True
        if self._offset0 != 0:
            return False
        n = self.block_size
        for pd, b in zip(self._padded_dims, self.blocks):
            if pd % b:
                return False
            n *= pd // b
        return self.max_offset() + 1 == n

    def offset_of(self, index: Sequence[int], *, allow_padding: bool = False) -> int:
        """Element offset (from the buffer start, ``offset0`` included) of a logical index.

        >>> MemoryDesc([2, 17, 5, 4], "f32", "nChw8c").offset_of([0, 9, 0, 1])
        169
        """
        if self._format_kind != "blocked":
            raise LayoutError(f"{self!r}: offset_of needs a blocked descriptor, not {self._format_kind!r}")
        idx = _as_int_tuple(index, "index")
        if len(idx) != self._ndims:
            raise LayoutError(f"{self!r}: index {idx} has {len(idx)} values for {self._ndims} dims")
        lim = self._padded_dims if allow_padding else self._dims
        for d, (i, n) in enumerate(zip(idx, lim)):
            if not 0 <= i < n:
                raise LayoutError(f"{self!r}: index {idx}: position {i} of dim {d} is outside [0, {n})")
        p = [i + o for i, o in zip(idx, self._padded_offsets)]
        off = self._offset0
        bs = 1
        for blk, d in zip(reversed(self._inner_blks), reversed(self._inner_idxs)):
            off += (p[d] % blk) * bs
            p[d] //= blk
            bs *= blk
        for pi, s in zip(p, self._strides):
            off += pi * s
        return off

    # ------------------------------------------------------------ tag matching
    @property
    def tag(self) -> str | None:
        """The preferred name of a format tag that gives exactly this layout, or None.

        >>> MemoryDesc([2, 3, 4, 5], "f32", "acdb").tag
        'nhwc'
        >>> MemoryDesc([2, 3], "f32", strides=[6, 2]).tag is None
        True
        """
        if self._tagname is False:
            object.__setattr__(self, "_tagname", self._find_tag())
        return self._tagname  # type: ignore[return-value]

    def matches_tag(self, tag: str) -> bool:
        """oneDNN's ``memory_desc_matches_tag``: same blocking as the tag's (unit-dim strides ignored)."""
        if self._format_kind != "blocked" or self._ndims == 0:
            return False
        try:
            ref = MemoryDesc(self._dims, self._dtype, tag)
        except LayoutError:
            return False
        return ref._replace(padded_offsets=self._padded_offsets, offset0=self._offset0) == self \
            and ref.padded_dims == self._padded_dims

    def _find_tag(self) -> str | None:
        if self._format_kind == "any":
            return "any"
        if self._format_kind != "blocked" or self._offset0 != 0 or any(self._padded_offsets):
            return None
        blocks = self.blocks
        # on a stride tie, a dim with at most one outer block sits inside the other
        order = sorted(range(self._ndims), key=lambda d: (
            -self._strides[d], 1 if self._padded_dims[d] // blocks[d] <= 1 else 0, d))
        abstract = abstract_from_blocking(tuple(order), self._inner_blks, self._inner_idxs)
        try:
            ref = MemoryDesc(self._dims, self._dtype, abstract)
        except LayoutError:
            return None
        if ref == self:
            return display_name(abstract)
        return None

    # ------------------------------------------------------- equality and hash
    def _key(self) -> tuple:
        k = self._keyc
        if k is None:
            k = self._make_key()
            object.__setattr__(self, "_keyc", k)
        return k

    def _make_key(self) -> tuple:
        if self._ndims == 0:
            return (0,)
        base = (self._ndims, self._dims, str(self._dtype), self._padded_dims,
                self._padded_offsets, self._offset0, self._format_kind)
        if self._format_kind != "blocked":
            return base
        strides = tuple(
            None if (d == 1 and p == 1) else s
            for d, p, s in zip(self._dims, self._padded_dims, self._strides)
        )
        return base + (strides, self._inner_blks, self._inner_idxs)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MemoryDesc):
            return NotImplemented
        return self is other or self._key() == other._key()

    def __ne__(self, other: object) -> bool:
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = hash(self._key())
            object.__setattr__(self, "_hash", h)
        return h

    def __repr__(self) -> str:
        if self._ndims == 0:
            return "MemoryDesc(zero)"
        head = f"MemoryDesc({self._dtype}, {_dims_str(self._dims)}"
        name = self.tag
        if name is not None:
            return f"{head}, {name})"
        parts = [head, f"strides={_dims_str(self._strides)}"]
        if self._inner_blks:
            parts.append("blocks=" + "".join(
                f"{b}{'abcdefghijkl'[i]}" for b, i in zip(self._inner_blks, self._inner_idxs)))
        if self._padded_dims != self._dims:
            parts.append(f"padded={_dims_str(self._padded_dims)}")
        if self._offset0:
            parts.append(f"offset0={self._offset0}")
        return ", ".join(parts) + ")"

    __str__ = __repr__

    # ------------------------------------------------------------- operations
    def with_dtype(self, dtype: Any) -> MemoryDesc:
        """The same layout with another data type (oneDNN's init_by_md_and_dt)."""
        return self._replace(dtype=as_dtype(dtype))

    def submemory_desc(self, dims: Sequence[int], offsets: Sequence[int]) -> MemoryDesc:
        """A view of a sub-tensor, as oneDNN's ``memory_desc_init_submemory``.

        >>> md = MemoryDesc([2, 32, 4, 4], "f32", "nChw16c")
        >>> sub = md.submemory_desc([2, 16, 4, 4], [0, 16, 0, 0])
        >>> sub.offset0, sub.padded_dims
        (256, (2, 16, 4, 4))
        """
        if self._ndims == 0:
            raise LayoutError("submemory_desc: the zero md has no sub-tensors")
        d_t = _as_int_tuple(dims, "dims")
        o_t = _as_int_tuple(offsets, "offsets")
        if len(d_t) != self._ndims or len(o_t) != self._ndims:
            raise LayoutError(
                f"{self!r}: submemory_desc: dims and offsets need {self._ndims} values each")
        for d in range(self._ndims):
            if d_t[d] < 0 or o_t[d] < 0 or o_t[d] + d_t[d] > self._dims[d]:
                raise LayoutError(
                    f"{self!r}: submemory_desc: dim {d}: [{o_t[d]}, {o_t[d] + d_t[d]}) is "
                    f"outside [0, {self._dims[d]})")
        if self._format_kind != "blocked":
            raise Unimplemented(f"{self!r}: submemory_desc needs a blocked descriptor")
        blocks = self.blocks
        pdims = list(self._padded_dims)
        offset0 = self._offset0
        for d in range(self._ndims):
            right = o_t[d] + d_t[d] == self._dims[d]
            if o_t[d] % blocks[d] != 0:
                raise Unimplemented(
                    f"{self!r}: submemory_desc: offset {o_t[d]} of dim {d} is not a "
                    f"multiple of its block {blocks[d]}")
            if self._padded_offsets[d] != 0:
                raise Unimplemented(f"{self!r}: submemory_desc: dim {d} has padded offsets")
            if not right and not (d_t[d] % blocks[d] == 0 or d_t[d] < blocks[d]):
                raise Unimplemented(
                    f"{self!r}: submemory_desc: interior size {d_t[d]} of dim {d} must be a "
                    f"multiple of its block {blocks[d]} or smaller than it")
            pdims[d] = self._padded_dims[d] - o_t[d] if right else d_t[d]
            offset0 += o_t[d] // blocks[d] * self._strides[d]
        return self._replace(dims=d_t, padded_dims=tuple(pdims), offset0=offset0)

    def permute_axes(self, perm: Sequence[int]) -> MemoryDesc:
        """Rename axes: output axis ``perm[d]`` is input axis ``d``; memory is untouched.

        >>> MemoryDesc([2, 3], "f32", "ab").permute_axes([1, 0]) == MemoryDesc([3, 2], "f32", "ba")
        True
        """
        if self._ndims == 0:
            raise LayoutError("permute_axes: the zero md cannot be permuted")
        if self._format_kind not in ("blocked", "any"):
            raise LayoutError(f"{self!r}: permute_axes needs a blocked or any descriptor")
        p = _as_int_tuple(perm, "perm")
        if len(p) != self._ndims or sorted(p) != list(range(self._ndims)):
            raise LayoutError(f"{self!r}: permute_axes: {list(p)} is not a permutation of 0..{self._ndims - 1}")
        n = self._ndims
        dims = [0] * n
        pd = [0] * n
        po = [0] * n
        st = [0] * n
        for d in range(n):
            dims[p[d]] = self._dims[d]
            pd[p[d]] = self._padded_dims[d]
            po[p[d]] = self._padded_offsets[d]
            st[p[d]] = self._strides[d]
        idxs = tuple(p[i] for i in self._inner_idxs)
        return self._replace(dims=tuple(dims), padded_dims=tuple(pd), padded_offsets=tuple(po),
                             strides=tuple(st), inner_idxs=idxs)

    def reshape(self, dims: Sequence[int]) -> MemoryDesc:
        """Reshape without moving memory, as oneDNN's ``memory_desc_reshape``.

        Only dense, in-order, unblocked, unpadded dims may be split or joined;
        size-1 dims may be added or dropped.

        >>> MemoryDesc([6, 2], "f32", "ba").reshape([2, 3, 2]).strides
        (3, 1, 6)
        """
        if self._ndims == 0:
            raise LayoutError("reshape: the zero md cannot be reshaped")
        o_dims = _as_int_tuple(dims, "dims")
        o_n = len(o_dims)
        where = f"{self!r}: reshape to {_dims_str(o_dims)}"
        if not 0 < o_n <= MAX_NDIMS:
            raise LayoutError(f"{where}: {o_n} dims, need 1..{MAX_NDIMS}")
        if any(d < 0 for d in o_dims):
            raise LayoutError(f"{where}: dims must not be negative")
        if self._format_kind not in ("blocked", "any"):
            raise LayoutError(f"{where}: needs a blocked or any descriptor")

        def volume(ds: Sequence[int]) -> int:
            v = 1
            for x in ds:
                v *= x if x > 0 else 1
            return v

        if volume(self._dims) != volume(o_dims):
            raise LayoutError(f"{where}: the number of elements differs")
        if self._format_kind == "any":
            return MemoryDesc(o_dims, self._dtype, "any")

        i_dims, i_pdims, i_n = self._dims, self._padded_dims, self._ndims
        i_st, ib, ii = self._strides, self._inner_blks, self._inner_idxs
        pd = [0] * o_n
        po = [0] * o_n
        st = [0] * o_n
        o_ii = list(ii)

        def find_groups(i_end: int, o_end: int) -> tuple[str, int, int]:
            if i_end > 0 and i_dims[i_end - 1] == 1:
                if i_pdims[i_end - 1] == 1:
                    return "remove1", i_end - 1, o_end
                if o_end > 0 and o_dims[o_end - 1] == 1:
                    return "keep", i_end - 1, o_end - 1
                return "fail", 0, 0
            if o_end > 0 and o_dims[o_end - 1] == 1:
                return "add1", i_end, o_end - 1
            if i_end == 0 or o_end == 0:
                return "fail", 0, 0
            ib_, ob_ = i_end - 1, o_end - 1
            iv, ov = i_dims[ib_], o_dims[ob_]
            while iv != ov:
                if iv < ov:
                    if ib_ == 0:
                        return "fail", 0, 0
                    ib_ -= 1
                    iv *= i_dims[ib_]
                    if iv == 0:
                        return "fail", 0, 0
                else:
                    if ob_ == 0:
                        return "fail", 0, 0
                    ob_ -= 1
                    ov *= o_dims[ob_]
                    if ov == 0:
                        return "fail", 0, 0
            kind = "keep" if (ib_ + 1 == i_end and ob_ + 1 == o_end) else "rearrange"
            return kind, ib_, ob_

        i_end, o_end = i_n, o_n
        while i_end != 0 or o_end != 0:
            action, i_begin, o_begin = find_groups(i_end, o_end)
            if action == "fail":
                raise LayoutError(f"{where}: the dims cannot be matched to the layout")
            if action == "add1":
                if i_begin == i_n:
                    cur = self.block_size
                else:
                    cur = i_st[i_begin] * i_dims[i_begin]
                    for b, i in zip(ib, ii):
                        if i == i_begin:
                            cur //= b
                pd[o_begin] = 1
                po[o_begin] = 0
                st[o_begin] = cur
            elif action == "keep":
                pd[o_begin] = i_pdims[i_begin]
                po[o_begin] = self._padded_offsets[i_begin]
                st[o_begin] = i_st[i_begin]
                for k, i in enumerate(ii):
                    if i == i_begin:
                        o_ii[k] = o_begin
            elif action == "rearrange":
                for d in range(i_end - 1, i_begin, -1):
                    if i_dims[d] * i_st[d] != i_st[d - 1]:
                        raise LayoutError(
                            f"{where}: dims {i_begin}..{i_end - 1} are not dense and in order")
                if i_begin in ii:
                    raise LayoutError(f"{where}: dim {i_begin} is blocked and cannot be split or joined")
                if i_pdims[i_begin] != i_dims[i_begin]:
                    raise LayoutError(f"{where}: dim {i_begin} is padded and cannot be split or joined")
                if self._padded_offsets[i_begin] != 0:
                    raise LayoutError(f"{where}: dim {i_begin} has padded offsets")
                cur = i_st[i_end - 1]
                for d in range(o_end - 1, o_begin - 1, -1):
                    pd[d] = o_dims[d]
                    po[d] = 0
                    st[d] = cur
                    cur *= pd[d]
            i_end, o_end = i_begin, o_begin
        return self._replace(ndims=o_n, dims=o_dims, padded_dims=tuple(pd),
                             padded_offsets=tuple(po), strides=tuple(st), inner_idxs=tuple(o_ii))


def _rebuild(*fields: Any) -> MemoryDesc:
    md = MemoryDesc.__new__(MemoryDesc)
    vals = list(fields)
    vals[2] = as_dtype(vals[2])
    md._set(*vals)
    return md


def _sanity_check(dims: tuple[int, ...], dt: DataType) -> None:
    where = f"MemoryDesc({dt}, {_dims_str(dims)})"
    if len(dims) > MAX_NDIMS:
        raise LayoutError(f"{where}: dims: {len(dims)} dims, at most {MAX_NDIMS}")
    prod = 1
    for d, n in enumerate(dims):
        if n < 0:
            raise LayoutError(f"{where}: dims: dim {d} is negative ({n})")
        if n > 0:
            prod *= n
            if prod > INT64_MAX:
                raise LayoutError(f"{where}: dims: the number of elements overflows int64")


def _overflow_check(pdims: tuple[int, ...], strides: tuple[int, ...], blocks: Sequence[int],
                    dt: DataType, where: str) -> None:
    span = 1
    for b in blocks:
        span *= b
    for p, s, b in zip(pdims, strides, blocks):
        span += (p // b) * abs(s)
    if span * dt.size > INT64_MAX:
        raise LayoutError(f"{where}: strides: the layout's size overflows int64")


def _strides_check(dims: tuple[int, ...], pdims: tuple[int, ...], strides: tuple[int, ...],
                   inner_blks: tuple[int, ...], inner_idxs: tuple[int, ...], dt: DataType,
                   where: str) -> None:
    """oneDNN's ``memory_desc_strides_check``: strides must not make elements overlap."""
    n = len(dims)
    if any(p == 0 for p in pdims):
        return  # an empty tensor accepts any strides
    blocks = [1] * n
    block_size = 1
    for b, i in zip(inner_blks, inner_idxs):
        blocks[i] *= b
        block_size *= b
    def order(d: int) -> tuple:
        # oneDNN's tie rule: blocked dims first, fewer outer blocks first, then the larger
        # index; unblocked: the smaller padded dim first, then the smaller index
        if blocks[d] > 1:
            return (strides[d], 0, -(-pdims[d] // blocks[d]), -d)
        return (strides[d], 1, pdims[d], d)

    perm = sorted(range(n), key=order)
    min_stride = block_size
    prev = None
    for d in perm:
        if strides[d] == 0 or pdims[d] == 1:
            continue
        if strides[d] < 0:
            raise LayoutError(f"{where}: strides: dim {d} has a negative stride ({strides[d]})")
        if strides[d] < min_stride:
            other = f" with dim {prev}" if prev is not None else " with the inner blocks"
            raise LayoutError(
                f"{where}: strides: dim {d} (stride {strides[d]}) overlaps{other}; "
                f"its stride must be at least {min_stride}")
        min_stride = strides[d] * -(-pdims[d] // blocks[d])  # a partial block still takes room
        prev = d
    _overflow_check(pdims, strides, blocks, dt, where)

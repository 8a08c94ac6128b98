"""Pipelines: a recorded chain of reorders, eltwise ops and (de)quantizations, run many times.

A :class:`Pipeline` starts from the layout of its input and records steps; each
step produces the next tensor. Recording resolves ``"any"`` layouts at once
(format propagation), :meth:`Pipeline.build` fuses steps into as few kernels
as the semantics allow, compiles each distinct kernel once (through the
kernel cache) and allocates every intermediate buffer; :meth:`Pipeline.run`
then only launches kernels: no compile, no allocation.

>>> import layoutjit as lj, numpy as np
>>> x = np.linspace(-1, 1, 2 * 17 * 4 * 4, dtype=np.float32)
>>> p = lj.Pipeline(lj.MemoryDesc([2, 17, 4, 4], "f32", "nchw"))
>>> p.reorder("any").eltwise("relu").quantize("u8", scale=1 / 128)    # doctest: +ELLIPSIS
<layoutjit.Pipeline: 3 steps, f32 2x17x4x4 nchw -> u8 ...>
>>> y = p.run(x)                       # builds on first use: one fused kernel
>>> len(p.kernels)
1
>>> q = lj.from_layout(y, p.output_md)
>>> int(q.max()), int(q.min())
(128, 0)
>>> p.run(x) is y                      # the output buffer is reused (copy it to keep it)
True

Steps (each returns the pipeline, so calls chain):

* ``reorder(layout="any", dtype=None)``: to another layout (a tag, a
  ``MemoryDesc``, or ``"any"``) and/or data type.
* ``eltwise(alg, alpha=0.0, beta=0.0)``: oneDNN's eltwise algorithms.
* ``binary(alg, src1_md, src1=None)``: ``acc = op(acc, src1)``, src1 broadcasting
  where its dims are 1 (e.g. a per-channel bias ``[1, C, 1, 1]``).
* ``quantize(dtype, scale, zero_point=None, mask=0, zero_point_mask=0, layout=None)``:
  ``q = round(x / scale + zero_point)`` saturated to ``dtype`` (oneDNN's dst scale
  and dst zero point).
* ``dequantize(scale, zero_point=None, dtype="f32", ...)``:
  ``x = scale * (q - zero_point)`` (oneDNN's src scale and src zero point).

Format propagation: ``"any"`` becomes the layout that suits this CPU for the
tensor's rank and type (:func:`preferred_layout`); a step given no layout
(``quantize``, ``dequantize``, ``eltwise``, ``binary``) keeps the layout of its
input. :meth:`Pipeline.explain` says what was chosen and why.

Fusion (``Pipeline(md, fuse=True)``): an ``eltwise`` or ``binary`` step becomes
a post-op of the kernel before it (computed in f32 before that kernel's final
conversion, as oneDNN's post-ops are), unless that kernel applies a dst scale
or zero point (oneDNN applies those after the post-ops) or already has 32
post-ops. Two reorder-like steps (reorder, quantize, dequantize) merge into one
kernel when the tensor between them is f32, the first has no dst scale/zero
point, the second no src scale/zero point, and merging computes bit for bit
what the two kernels would (the intermediate tensor is then never written).
An eltwise that cannot fuse runs in place on its input's buffer; the
pipeline's input is never written.

Run-time values: scales, zero points and binary inputs given when recording
are bound at build time (their pointers are baked in: in-place updates of
those arrays are seen by later runs). ``run(x, <step name>=...)`` overrides them
for one call: ``{"scale": s, "zero_point": z}`` for a (de)quantize step, the
src1 buffer (or ``{"src1": buf}``) for a binary step; a binary step recorded
without ``src1`` needs it at every run. Overrides are validated at each call
(which allocates a small pointer table); without them a run allocates nothing.

A pipeline is not thread-safe: its intermediate and output buffers are shared
by all runs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import simd, verbose
from .api import compile_eltwise, compile_reorder
from .attrs import MAX_POST_OPS, Attrs
from .buffers import aligned_empty
from .desc import MemoryDesc
from .dtypes import as_dtype
from .eltwise_ops import check_binary, check_eltwise
from .errors import LayoutError
from .kernel import Kernel
from .memory import check_buffer, size_rule

__all__ = ["Pipeline", "preferred_layout"]

_NO_AUX = np.zeros(1, dtype=np.int64)
_PLAIN = "abcdefghijkl"
_ISA = {64: "AVX-512", 32: "AVX2", 16: "128-bit SIMD (SSE4.1/NEON)"}
_RESERVED = {"input", "output"}


def preferred_layout(dims: Any, dtype: Any) -> tuple[MemoryDesc, str]:
    """The layout ``"any"`` resolves to for a tensor of these dims and type, and why.

    4D and 5D f32 tensors are blocked by channels so that one pixel's block of
    channels fills one vector register (``simd.HOST_VECTOR_BYTES``): nChw16c /
    nCdhw16c with AVX-512, nChw8c / nCdhw8c with AVX2, nChw4c with 16-byte
    vectors -- oneDNN's choice for f32 activations. Every other rank or type is
    plain row-major.

    >>> md, why = preferred_layout([2, 3], "f32")
    >>> md.tag, why
    ('nc', '2D f32 tensor: no blocked layout is preferred for this rank and type, so plain row-major (nc)')
    """
    dims = tuple(int(d) for d in dims)
    dt = as_dtype(dtype)
    nd = len(dims)
    if dt == "f32" and nd in (4, 5):
        vb = int(simd.HOST_VECTOR_BYTES)
        blk = max(vb // dt.size, 1)
        abstract = ("aBcd" if nd == 4 else "aBcde") + f"{blk}b"
        md = MemoryDesc(dims, dt, abstract)
        name = md.tag or abstract
        why = (f"{nd}D f32 tensor: this CPU's vector registers hold {vb} bytes "
               f"({_ISA.get(vb, f'{vb}-byte vectors')}), i.e. {blk} f32, so channels are blocked "
               f"by {blk} ({name}): one pixel's {blk} channels are one vector (oneDNN's layout "
               f"for f32 activations on this ISA)")
        return md, why
    md = MemoryDesc(dims, dt, _PLAIN[:nd]) if nd else MemoryDesc((), dt)
    return md, (f"{nd}D {dt} tensor: no blocked layout is preferred for this rank and type, "
                f"so plain row-major ({md.tag or _PLAIN[:nd]})")


def _md_text(md: MemoryDesc) -> str:
    dims = "x".join(str(d) for d in md.dims)
    return f"{md.dtype} {dims} {md.tag or repr(md)}"


def _count(dims: tuple[int, ...], mask: int) -> int:
    n = 1
    for i, d in enumerate(dims):
        if mask >> i & 1:
            n *= d
    return n


def _scale_values(x: Any, count: int, what: str) -> np.ndarray:
    try:
        a = np.array(x, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise LayoutError(f"{what}: expected a number or an array of numbers, got {x!r}") from None
    if a.size != count:
        raise LayoutError(f"{what}: expected {count} value(s) (the product of the masked dims), "
                          f"got {a.size}")
    return a.astype(np.float32)


def _zp_values(x: Any, count: int, what: str) -> np.ndarray:
    try:
        a = np.array(x, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise LayoutError(f"{what}: expected an integer or an array of integers, got {x!r}") from None
    if not np.all(a == np.round(a)) or np.any(np.abs(a) > 2**31 - 1):
        raise LayoutError(f"{what}: zero points must be 32-bit integers")
    if a.size != count:
        raise LayoutError(f"{what}: expected {count} value(s) (the product of the masked dims), "
                          f"got {a.size}")
    return a.astype(np.int32)


@dataclass
class _Op:
    """One recorded step."""

    name: str
    kind: str  # reorder | quantize | dequantize | eltwise | binary
    src_md: MemoryDesc
    dst_md: MemoryDesc
    src_scale: tuple[int, np.ndarray] | None = None  # (mask, values)
    src_zp: tuple[int, np.ndarray] | None = None
    dst_scale: tuple[int, np.ndarray] | None = None
    dst_zp: tuple[int, np.ndarray] | None = None
    post: tuple | None = None  # ("eltwise", alg, alpha, beta) or ("binary", alg, src1_md)
    src1: Any = None  # the binary input, or None when given at run time
    note: str = ""  # how the destination layout was chosen

    def describe(self) -> str:
        if self.kind == "eltwise":
            assert self.post is not None
            return f"eltwise {self.post[1]}(alpha={self.post[2]:g}, beta={self.post[3]:g})"
        if self.kind == "binary":
            assert self.post is not None
            return f"binary {self.post[1]} with src1 {_md_text(self.post[2])}"
        parts = [f"{self.kind} -> {_md_text(self.dst_md)}"]
        for label, v in (("src scale", self.src_scale), ("src zero point", self.src_zp),
                         ("dst scale", self.dst_scale), ("dst zero point", self.dst_zp)):
            if v is not None:
                parts.append(f"{label} mask {v[0]} ({v[1].size} value{'s' * (v[1].size != 1)})")
        return ", ".join(parts)


@dataclass
class _Group:
    """One kernel: the steps it runs, its descriptors and its bound run-time values."""

    ops: list[_Op]
    src_md: MemoryDesc
    dst_md: MemoryDesc
    in_place: bool = False
    src_scale: tuple[int, np.ndarray] | None = None
    src_zp: tuple[int, np.ndarray] | None = None
    dst_scale: tuple[int, np.ndarray] | None = None
    dst_zp: tuple[int, np.ndarray] | None = None
    post: list[_Op] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # filled by build()
    src_slot: int = 0
    dst_slot: int = 0
    kernel: Kernel | None = None
    origin: str = ""
    table: np.ndarray | None = None
    keep: list = field(default_factory=list)
    values: dict | None = None
    calls: int = 0
    total_ns: int = 0
    last_ns: int = 0
    min_ns: int = 0

    @property
    def name(self) -> str:
        return "+".join(op.name for op in self.ops)

    def compile(self) -> Kernel:
        if self.in_place:
            _, alg, alpha, beta = self.post[0].post  # type: ignore[misc]
            return compile_eltwise(self.dst_md, alg, alpha, beta)
        scales = {k: v[0] for k, v in (("src", self.src_scale), ("dst", self.dst_scale)) if v is not None}
        zps = {k: v[0] for k, v in (("src", self.src_zp), ("dst", self.dst_zp)) if v is not None}
        post = [op.post for op in self.post]
        return compile_reorder(self.src_md, self.dst_md, scales=scales or None,
                               zero_points=zps or None, post_ops=post or None)

    def runtime_values(self, overrides: dict[str, dict] | None = None) -> dict | None:
        """The kernel's run-time keyword arguments, or None if a binary input is missing."""
        ov = overrides or {}
        scales: dict[str, np.ndarray] = {}
        zps: dict[str, np.ndarray] = {}
        for side, sc, zp in (("src", self.src_scale, self.src_zp), ("dst", self.dst_scale, self.dst_zp)):
            owner = self._owner(side)
            o = ov.get(owner.name, {}) if owner is not None else {}
            if sc is not None:
                scales[side] = o.get("scale", sc[1])
            if zp is not None:
                zps[side] = o.get("zero_point", zp[1])
        binary = []
        for op in self.post:
            if op.kind == "binary":
                v = ov.get(op.name, {}).get("src1", op.src1)
                if v is None:
                    return None
                binary.append(v)
        out: dict[str, Any] = {}
        if scales:
            out["scales"] = scales
        if zps:
            out["zero_points"] = zps
        if binary:
            out["binary"] = binary
        return out

    def _owner(self, side: str) -> _Op | None:
        for op in self.ops:
            if op.kind in ("quantize", "dequantize", "reorder"):
                if side == "src" and (op.src_scale is not None or op.src_zp is not None):
                    return op
                if side == "dst" and (op.dst_scale is not None or op.dst_zp is not None):
                    return op
        return None


class Pipeline:
    """A chain of layout steps recorded once, compiled once, run many times.

    ``Pipeline(src_md, fuse=True)``: ``src_md`` is the (concrete) layout of the
    input buffers. Record steps with :meth:`reorder`, :meth:`eltwise`,
    :meth:`binary`, :meth:`quantize` and :meth:`dequantize` (each returns the
    pipeline); :meth:`build` compiles (``run`` builds on first use);
    :meth:`run` executes; :meth:`explain` and :meth:`stats` describe it.

    >>> import layoutjit as lj, numpy as np
    >>> md = lj.MemoryDesc([1, 2, 2, 2], "f32", "nchw")
    >>> p = lj.Pipeline(md).reorder("nhwc").eltwise("linear", 2.0, 1.0).build()
    >>> y = p.run(np.arange(8, dtype=np.float32))
    >>> y.tolist()                                    # nhwc, 2x+1
    [1.0, 9.0, 3.0, 11.0, 5.0, 13.0, 7.0, 15.0]
    >>> [s["step"] for s in p.stats()], p.stats()[0]["calls"]
    (['reorder0+eltwise1'], 1)
    """

    def __init__(self, src_md: MemoryDesc, *, fuse: bool = True) -> None:
        if not isinstance(src_md, MemoryDesc):
            raise LayoutError(f"Pipeline: src_md must be a MemoryDesc, got {type(src_md).__name__}")
        if src_md.format_kind != "blocked":
            raise LayoutError(f"Pipeline: the input {src_md!r} needs a concrete layout "
                              f"(its buffers exist already), not format {src_md.format_kind!r}")
        self._src_md = src_md
        self._fuse = bool(fuse)
        self._ops: list[_Op] = []
        self._groups: list[_Group] | None = None
        self._bufs: list[np.ndarray | None] = []
        self._views: list[Any] = []
        self._out: np.ndarray | None = None
        self._out8: np.ndarray | None = None
        self._in_rule = (0, 0, False)
        self._out_rule = (0, 0, False)
        self._out_writers: list[_Group] = []
        self._slot_md: list[MemoryDesc] = []
        self._runs = 0

    # ------------------------------------------------------------ recording
    @property
    def input_md(self) -> MemoryDesc:
        """The layout of the input buffers."""
        return self._src_md

    @property
    def output_md(self) -> MemoryDesc:
        """The layout of the current last tensor (the pipeline's output)."""
        return self._ops[-1].dst_md if self._ops else self._src_md

    @property
    def steps(self) -> list[tuple[str, str, MemoryDesc]]:
        """(name, kind, output layout) of every recorded step."""
        return [(op.name, op.kind, op.dst_md) for op in self._ops]

    def _name(self, name: str | None, kind: str) -> str:
        if name is None:
            return f"{kind}{len(self._ops)}"
        if not isinstance(name, str) or not name.isidentifier() or name in _RESERVED:
            raise LayoutError(f"Pipeline: step name {name!r} must be an identifier other than "
                              f"{sorted(_RESERVED)} (it is a keyword of run())")
        if any(op.name == name for op in self._ops):
            raise LayoutError(f"Pipeline: a step is already named {name!r}")
        return name

    def _add(self, op: _Op) -> Pipeline:
        self._ops.append(op)
        self._groups = None  # rebuild on next use
        return self

    def _target(self, layout: Any, dtype: Any, what: str) -> tuple[MemoryDesc, str]:
        cur = self.output_md
        dt = cur.dtype if dtype is None else as_dtype(dtype)
        if layout is None:
            md = cur.with_dtype(dt)
            return md, f"layout kept from the input of this step ({cur.tag or repr(cur)})"
        if isinstance(layout, MemoryDesc):
            if dtype is not None and layout.dtype != dt:
                raise LayoutError(f"{what}: dtype {dt} contradicts the layout {layout!r}")
            if layout.dims != cur.dims:
                raise LayoutError(f"{what}: {layout!r} has dims {layout.dims}, the tensor has {cur.dims}")
            md = layout
        elif isinstance(layout, str):
            md = MemoryDesc(cur.dims, dt, layout)
        else:
            raise LayoutError(f"{what}: layout must be a tag, a MemoryDesc or 'any', got {layout!r}")
        if md.format_kind == "any":
            md, why = preferred_layout(md.dims, md.dtype)
            return md, f"'any' -> {md.tag or repr(md)}: {why}"
        if md.format_kind != "blocked":
            raise LayoutError(f"{what}: {md!r} is not a layout")
        return md, f"layout given: {md.tag or repr(md)}"

    def reorder(self, layout: Any = "any", dtype: Any = None, *, name: str | None = None) -> Pipeline:
        """Move the tensor to ``layout`` (a tag, a ``MemoryDesc`` or ``"any"``), optionally converting it.

        ``dtype`` changes the data type (with the reorder's rounding and saturation).
        """
        nm = self._name(name, "reorder")
        md, note = self._target(layout, dtype, f"reorder {nm}")
        return self._add(_Op(nm, "reorder", self.output_md, md, note=note))

    def eltwise(self, alg: str, alpha: float = 0.0, beta: float = 0.0, *,
                name: str | None = None) -> Pipeline:
        """Apply a oneDNN eltwise algorithm (``"relu"``, ``"linear"``, ...); the layout is kept."""
        nm = self._name(name, "eltwise")
        canon = check_eltwise(alg, alpha, beta)
        a, b = float(np.float32(alpha)), float(np.float32(beta))
        cur = self.output_md
        return self._add(_Op(nm, "eltwise", cur, cur, post=("eltwise", canon, a, b),
                             note="layout kept (elementwise)"))

    def binary(self, alg: str, src1_md: MemoryDesc, src1: Any = None, *,
               name: str | None = None) -> Pipeline:
        """``acc = op(acc, src1)``: ``src1`` laid out as ``src1_md``, broadcast where its dims are 1.

        ``src1`` (a buffer of ``src1_md``) may be left out and passed at each run as
        ``run(x, <name>=buffer)``.
        """
        nm = self._name(name, "binary")
        cur = self.output_md
        canon = check_binary(alg)
        Attrs.make(cur, cur, post_ops=[("binary", canon, src1_md)])  # validates dims and layout
        if src1 is not None:
            check_buffer(src1, src1_md, f"binary {nm}: src1")
        return self._add(_Op(nm, "binary", cur, cur, post=("binary", canon, src1_md), src1=src1,
                             note="layout kept (elementwise)"))

    def quantize(self, dtype: Any, scale: Any, zero_point: Any = None, *, mask: int = 0,
                 zero_point_mask: int = 0, layout: Any = None, name: str | None = None) -> Pipeline:
        """``q = saturate(round_half_even(x / scale + zero_point))`` in ``dtype``.

        ``scale`` (and ``zero_point``) are one value, or ``prod(dims[i] for i in mask)``
        values for a ``mask`` (bit i: the value varies along dim i; e.g. ``mask=2`` per
        channel of NCHW). ``layout`` defaults to the input's layout.
        """
        nm = self._name(name, "quantize")
        cur = self.output_md
        md, note = self._target(layout, dtype, f"quantize {nm}")
        zps = {"dst": zero_point_mask} if zero_point is not None else None
        Attrs.make(cur, md, scales={"dst": mask}, zero_points=zps)  # validates masks and types
        sc = (mask, _scale_values(scale, _count(md.dims, mask), f"quantize {nm}: scale"))
        zp = None
        if zero_point is not None:
            zp = (zero_point_mask, _zp_values(zero_point, _count(md.dims, zero_point_mask),
                                              f"quantize {nm}: zero_point"))
        return self._add(_Op(nm, "quantize", cur, md, dst_scale=sc, dst_zp=zp, note=note))

    def dequantize(self, scale: Any, zero_point: Any = None, *, dtype: Any = "f32", mask: int = 0,
                   zero_point_mask: int = 0, layout: Any = None, name: str | None = None) -> Pipeline:
        """``x = scale * (q - zero_point)`` in ``dtype`` (default f32); masks as in :meth:`quantize`."""
        nm = self._name(name, "dequantize")
        cur = self.output_md
        md, note = self._target(layout, dtype, f"dequantize {nm}")
        zps = {"src": zero_point_mask} if zero_point is not None else None
        Attrs.make(cur, md, scales={"src": mask}, zero_points=zps)
        sc = (mask, _scale_values(scale, _count(md.dims, mask), f"dequantize {nm}: scale"))
        zp = None
        if zero_point is not None:
            zp = (zero_point_mask, _zp_values(zero_point, _count(md.dims, zero_point_mask),
                                              f"dequantize {nm}: zero_point"))
        return self._add(_Op(nm, "dequantize", cur, md, src_scale=sc, src_zp=zp, note=note))

    # ------------------------------------------------------------ fusion
    def _why_not_post_op(self, g: _Group | None, k: int) -> str | None:
        if g is None:
            return "it reads the pipeline's input, which is never written"
        if not self._fuse:
            return "fusion is off"
        if g.in_place:
            return f"kernel {k} is an in-place eltwise (one algorithm per kernel)"
        if g.dst_scale is not None or g.dst_zp is not None:
            return (f"kernel {k} applies a dst scale/zero point, which comes after post-ops, "
                    f"so the post-op would see different values")
        if len(g.post) >= MAX_POST_OPS:
            return f"kernel {k} already has {MAX_POST_OPS} post-ops"
        return None

    def _why_not_merge(self, g: _Group | None, op: _Op, k: int) -> str | None:
        if g is None:
            return ""
        if not self._fuse:
            return "fusion is off"
        if g.in_place:
            return f"kernel {k} is an in-place eltwise"
        if g.dst_md.dtype != "f32":
            return f"the tensor between them is {g.dst_md.dtype}, not f32 (its rounding is part of the result)"
        if g.dst_scale is not None or g.dst_zp is not None:
            return f"kernel {k} applies a dst scale/zero point"
        if op.src_scale is not None or op.src_zp is not None:
            return "this step applies a src scale/zero point to its input"
        has_attrs = bool(g.src_scale is not None or g.src_zp is not None or g.post
                         or op.dst_scale is not None or op.dst_zp is not None)
        if not (has_attrs or g.src_md.dtype == "f32" or op.dst_md.dtype == "f32"):
            return (f"a direct {g.src_md.dtype} -> {op.dst_md.dtype} conversion differs from one "
                    f"through f32")
        return None

    def _plan(self) -> list[_Group]:
        groups: list[_Group] = []
        g: _Group | None = None
        for op in self._ops:
            k = len(groups) - 1
            if op.kind in ("eltwise", "binary"):
                why = self._why_not_post_op(g, k)
                if why is None:
                    assert g is not None
                    g.ops.append(op)
                    g.post.append(op)
                    g.notes.append(f"{op.name}: fused as post-op {len(g.post)} (runs in f32 before "
                                   f"the final conversion)")
                    continue
                if op.kind == "eltwise" and g is not None:
                    g = _Group([op], g.dst_md, g.dst_md, in_place=True, post=[op])
                    g.notes.append(f"{op.name}: runs in place (not fused: {why})")
                else:
                    md = g.dst_md if g is not None else self._src_md
                    g = _Group([op], md, md, post=[op])
                    g.notes.append(f"{op.name}: a same-layout copy with the op as post-op "
                                   f"(not fused: {why})")
                groups.append(g)
                continue
            why = self._why_not_merge(g, op, k)
            if why is None:
                assert g is not None
                g.notes.append(f"{op.name}: merged into this kernel (the {_md_text(g.dst_md)} "
                               f"tensor between them is never written)")
                g.ops.append(op)
                g.dst_md = op.dst_md
                g.dst_scale, g.dst_zp = op.dst_scale, op.dst_zp
                continue
            g = _Group([op], op.src_md, op.dst_md, src_scale=op.src_scale, src_zp=op.src_zp,
                       dst_scale=op.dst_scale, dst_zp=op.dst_zp)
            g.notes.append(f"{op.name}: {op.kind}" + (f" (not merged: {why})" if why else ""))
            groups.append(g)
        return groups

    # ------------------------------------------------------------ build
    def build(self) -> Pipeline:
        """Fuse, compile each kernel once (via the kernel cache), allocate all buffers; returns self."""
        if not self._ops:
            raise LayoutError("Pipeline.build: no steps recorded")
        groups = self._plan()
        from . import compiler

        cache = getattr(compiler, "KERNELS", None)  # to tell cache hits from compiles
        slot_md: list[MemoryDesc] = [self._src_md]
        for g in groups:
            g.src_slot = len(slot_md) - 1
            if g.in_place:
                g.dst_slot = g.src_slot
            else:
                g.dst_slot = len(slot_md)
                slot_md.append(g.dst_md)
        for g in groups:
            n0 = len(cache) if cache is not None else -1
            g.kernel = g.compile()
            if cache is not None and len(cache) == n0:
                g.origin = "memory cache"
            elif getattr(g.kernel, "loaded_from_disk", False):
                g.origin = f"disk cache ({g.kernel.compile_s * 1e3:.0f} ms)"
            else:
                g.origin = f"compiled ({g.kernel.compile_s * 1e3:.0f} ms)"
            g.values = g.runtime_values()
            g.table, g.keep = None, []
            if g.values is not None:
                if g.kernel.attrs is not None:
                    g.table, g.keep = g.kernel.attrs.runtime_table(_copy_values(g.values))
                else:
                    g.table = _NO_AUX
            g.calls = g.total_ns = g.last_ns = g.min_ns = 0
        bufs: list[np.ndarray | None] = [None]
        for md in slot_md[1:]:
            bufs.append(aligned_empty(max(md.get_size(), md.required_bytes(), 0),
                                      md.dtype.storage, zero=True))
        self._bufs = bufs
        self._views = [None if b is None else b.view(np.uint8) for b in bufs]
        self._in_rule = size_rule(self._src_md)
        self._out_rule = size_rule(slot_md[-1])
        # groups writing the output slot: a caller's output must not overlap their attribute arrays
        self._out_writers = [g for g in groups if g.dst_slot == len(slot_md) - 1]
        self._out = bufs[-1]
        self._out8 = self._views[-1]
        self._slot_md = slot_md
        self._groups = groups
        self._runs = 0
        return self

    @property
    def kernels(self) -> list[Kernel]:
        """The compiled kernels, in run order (builds if needed)."""
        if self._groups is None:
            self.build()
        assert self._groups is not None
        return [g.kernel for g in self._groups if g.kernel is not None]

    # ------------------------------------------------------------ run
    def run(self, input: Any, output: Any = None, **runtime: Any) -> Any:  # noqa: A002
        """Run every kernel on ``input`` (a buffer of ``input_md``); returns the output buffer.

        ``output``: a buffer of ``output_md`` to write (returned as given); by
        default the pipeline's own output buffer, the same array at every run.
        ``runtime``: per-step overrides, ``<step name>={...}`` (see the module doc).
        """
        if self._groups is None:
            self.build()
        groups = self._groups
        assert groups is not None
        views = self._views
        src = check_buffer(input, self._src_md, "Pipeline input", rule=self._in_rule)
        views[0] = src.reshape(-1).view(np.uint8)
        last = len(views) - 1
        if output is None:
            result: Any = self._out
            views[last] = self._out8
        else:
            o = check_buffer(output, self.output_md, "Pipeline output", writable=True,
                             rule=self._out_rule)
            o8 = o.reshape(-1).view(np.uint8)
            for g in self._out_writers:
                for a in g.keep:
                    if _overlap(a, o8):
                        raise LayoutError("Pipeline output: overlaps a scale, zero point or binary "
                                          f"input of {g.name}")
            views[last] = o8
            result = output
        if not runtime:
            for g in groups:
                if g.table is None:
                    raise LayoutError(self._missing(g))
            for g in groups:
                self._launch_timed(g, views, g.table, None)  # type: ignore[arg-type]
        else:  # validate every override before anything runs
            overrides = self._overrides(runtime)
            tables: list[tuple[np.ndarray, Any]] = []
            for g in groups:
                if any(op.name in overrides for op in g.ops):
                    vals = g.runtime_values(overrides)
                    if vals is None:
                        raise LayoutError(self._missing(g))
                    assert g.kernel is not None and g.kernel.attrs is not None
                    tables.append(g.kernel.attrs.runtime_table(_copy_values(vals)))
                elif g.table is None:
                    raise LayoutError(self._missing(g))
                else:
                    tables.append((g.table, None))
            for g, (table, _keep) in zip(groups, tables):  # _keep: alive while the kernels run
                self._launch_timed(g, views, table, overrides)
        self._runs += 1
        return result

    __call__ = run

    @staticmethod
    def _launch_timed(g: _Group, views: list[Any], table: np.ndarray, overrides: dict | None) -> None:
        t0 = time.perf_counter_ns()
        _launch(g, views[g.src_slot], views[g.dst_slot], table, overrides)
        dt = time.perf_counter_ns() - t0
        g.calls += 1
        g.total_ns += dt
        g.last_ns = dt
        if dt < g.min_ns or g.calls == 1:
            g.min_ns = dt
        if verbose.enabled:
            verbose.log_exec(g.kernel, dt * 1e-6)

    def _missing(self, g: _Group) -> str:
        names = [op.name for op in g.post if op.kind == "binary" and op.src1 is None]
        return (f"Pipeline.run: binary step(s) {names} were recorded without src1; pass it at "
                f"each run as run(x, {names[0]}=buffer)")

    def _overrides(self, runtime: dict[str, Any]) -> dict[str, dict]:
        ops = {op.name: op for op in self._ops}
        out: dict[str, dict] = {}
        for key, val in runtime.items():
            op = ops.get(key)
            if op is None:
                raise LayoutError(f"Pipeline.run: no step named {key!r} (steps: {sorted(ops)})")
            if op.kind == "binary":
                if isinstance(val, dict):
                    bad = set(val) - {"src1"}
                    if bad:
                        raise LayoutError(f"Pipeline.run: {key}: binary steps take 'src1', not {sorted(bad)}")
                    val = val.get("src1")
                if val is None:
                    raise LayoutError(f"Pipeline.run: {key}: src1 is None")
                assert op.post is not None
                out[key] = {"src1": check_buffer(val, op.post[2], f"Pipeline.run: {key}")}
            elif op.kind in ("quantize", "dequantize"):
                if not isinstance(val, dict) or set(val) - {"scale", "zero_point"}:
                    raise LayoutError(f"Pipeline.run: {key}: expected a dict with 'scale' and/or "
                                      f"'zero_point', got {val!r}")
                sc = op.src_scale if op.kind == "dequantize" else op.dst_scale
                zp = op.src_zp if op.kind == "dequantize" else op.dst_zp
                d: dict[str, np.ndarray] = {}
                assert sc is not None
                if "scale" in val:
                    d["scale"] = _scale_values(val["scale"], sc[1].size, f"Pipeline.run: {key}: scale")
                if "zero_point" in val:
                    if zp is None:
                        raise LayoutError(f"Pipeline.run: {key} was recorded without a zero point")
                    d["zero_point"] = _zp_values(val["zero_point"], zp[1].size,
                                                 f"Pipeline.run: {key}: zero_point")
                out[key] = d
            else:
                raise LayoutError(f"Pipeline.run: step {key!r} ({op.kind}) takes no run-time values")
        return out

    # ------------------------------------------------------------ reports
    def stats(self) -> list[dict[str, Any]]:
        """Per kernel, in run order: a dict with ``step`` (the names of the steps it runs),
        ``kernel`` (what it does), ``calls``, ``total_ms``, ``last_ms``, ``mean_ms``, ``min_ms``
        and ``origin`` (where the kernel came from at build: compiled, disk cache, memory cache).
        Empty before :meth:`build`. Times are wall-clock around each launch."""
        if self._groups is None:
            return []
        out = []
        for g in self._groups:
            k = g.kernel
            assert k is not None
            out.append({
                "step": g.name,
                "kernel": f"{k.kind} {_md_text(k.src_md)} -> {_md_text(k.dst_md)}",
                "calls": g.calls,
                "total_ms": g.total_ns * 1e-6,
                "last_ms": g.last_ns * 1e-6,
                "mean_ms": g.total_ns * 1e-6 / g.calls if g.calls else 0.0,
                "min_ms": g.min_ns * 1e-6,
                "origin": g.origin,
            })
        return out

    def reset_stats(self) -> None:
        """Set every kernel's call count and times back to zero."""
        for g in self._groups or ():
            g.calls = g.total_ns = g.last_ns = g.min_ns = 0
        self._runs = 0

    def format_stats(self) -> str:
        """:meth:`stats` as a table."""
        rows = self.stats()
        if not rows:
            return "(not built)"
        w = max(len(r["step"]) for r in rows)
        lines = [f"{'step':<{w}}  {'calls':>6}  {'total ms':>10}  {'mean ms':>9}  {'min ms':>9}  "
                 f"{'last ms':>9}  kernel"]
        for r in rows:
            lines.append(f"{r['step']:<{w}}  {r['calls']:>6}  {r['total_ms']:>10.3f}  "
                         f"{r['mean_ms']:>9.4f}  {r['min_ms']:>9.4f}  {r['last_ms']:>9.4f}  {r['kernel']}")
        return "\n".join(lines)

    def explain(self) -> str:
        """What each step does, how ``"any"`` was resolved, what fused, the kernels and buffers."""
        vb = int(simd.HOST_VECTOR_BYTES)
        lines = [f"Pipeline: {len(self._ops)} step(s); this CPU: {vb}-byte vectors "
                 f"({_ISA.get(vb, 'unknown ISA')}); fusion {'on' if self._fuse else 'off'}",
                 f"input: {_md_text(self._src_md)}", "steps:"]
        for op in self._ops:
            lines.append(f"  {op.name}: {op.describe()}")
            if op.kind not in ("eltwise", "binary"):
                lines.append(f"      {op.note}")
        groups = self._groups if self._groups is not None else self._plan()
        built = self._groups is not None
        lines.append(f"kernels ({len(groups)}{'' if built else ', not built yet'}):")
        slot_md = self._slot_md if built else None

        def slot(i: int) -> str:
            if i == 0:
                return "input"
            if slot_md is not None and i == len(slot_md) - 1:
                return "output"
            return f"buffer {i}"

        for k, g in enumerate(groups):
            kind = "eltwise in place" if g.in_place else "reorder"
            head = f"  [{k}] {g.name}: {kind} {_md_text(g.src_md)} -> {_md_text(g.dst_md)}"
            if built:
                head += f"  ({slot(g.src_slot)} -> {slot(g.dst_slot)}; {g.origin})"
            lines.append(head)
            if g.kernel is not None and g.kernel.attrs is not None:
                lines.append(f"      attributes: {g.kernel.attrs.describe()}")
            for n in g.notes:
                lines.append(f"      {n}")
        if built and slot_md is not None:
            lines.append("buffers (allocated at build, 64-byte aligned, reused by every run):")
            for i, md in enumerate(slot_md[1:], 1):
                lines.append(f"  {slot(i)}: {_md_text(md)}, {self._bufs[i].nbytes} bytes")  # type: ignore[union-attr]
        lines.append(f"output: {_md_text(self.output_md)}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"<layoutjit.Pipeline: {len(self._ops)} steps, {_md_text(self._src_md)} -> "
                f"{_md_text(self.output_md)}"
                + (f", {len(self._groups)} kernels>" if self._groups is not None else ">"))


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    if not a.nbytes or not b.nbytes:
        return False
    a0, b0 = a.ctypes.data, b.ctypes.data
    return bool(a0 < b0 + b.nbytes and b0 < a0 + a.nbytes)


def _copy_values(v: dict) -> dict:
    out = dict(v)
    for k in ("scales", "zero_points"):
        if k in out:
            out[k] = dict(out[k])
    if "binary" in out:
        out["binary"] = list(out["binary"])
    return out


def _launch(g: _Group, s8: np.ndarray, d8: np.ndarray, table: np.ndarray,
            overrides: dict | None) -> None:
    """Launch with a prebuilt operand table (the pipeline validated the buffers and values).

    ``Kernel._launch`` is the allocation-free entry point under ``Kernel.__call__``;
    should it ever go away, the public call (which rebuilds the table) still works.
    """
    kernel = g.kernel
    assert kernel is not None
    launch = getattr(kernel, "_launch", None)
    if launch is not None:
        launch(s8, d8, table)
    else:  # pragma: no cover - only if Kernel's internals change
        vals = g.runtime_values(overrides) or {}
        kernel(s8, d8, **(_copy_values(vals) if kernel.attrs is not None else {}))

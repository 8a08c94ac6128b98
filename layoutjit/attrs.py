"""Reorder attributes: scales, zero points and post-ops, as oneDNN defines them.

Compile-time structure (masks, post-op kinds and constants) is part of the
kernel's key; run-time values (scale and zero-point arrays, binary inputs) are
passed at each call. Per destination element, in f32::

    acc = src_scale * (src - src_zp)
    for each post-op, in order:   sum:     acc += beta * dst_old
                                  eltwise: acc = f(acc)            (oneDNN's alpha/beta)
                                  binary:  acc = op(acc, src1)     (src1 broadcasts)
    dst = convert(acc / dst_scale + dst_zp)                        (round, saturate)

A mask's bit i means the values vary along logical dim i; the value array is
dense over the masked dims in logical order. Every attribute array is just
one more operand of the loop nest (a layout that broadcasts over the unmasked
dims), so the same IR, planner and codegen handle it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .buffers import as_buffer, byte_view
from .codegen import Epilogue
from .desc import MemoryDesc
from .errors import LayoutError

MAX_POST_OPS = 32
_INTEGRAL = ("s32", "s8", "u8")


@dataclass(frozen=True)
class PostOp:
    kind: str  # "sum", "eltwise" or "binary"
    alg: str = ""
    alpha: float = 0.0
    beta: float = 0.0
    md: MemoryDesc | None = None  # binary's src1

    def describe(self) -> str:
        if self.kind == "sum":
            return f"sum:{self.beta:g}"
        if self.kind == "eltwise":
            return f"eltwise_{self.alg}:{self.alpha:g}:{self.beta:g}"
        assert self.md is not None
        return f"binary_{self.alg}:{self.md.dtype}:{'x'.join(map(str, self.md.dims))}"


def _mask(value: Any, what: str, ndims: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise LayoutError(f"{what}: a mask must be an int (bit i: values vary along dim i), got {value!r}")
    m = int(value)
    if m < 0 or m >> ndims:
        raise LayoutError(f"{what}: mask {m:#b} names dims beyond the {ndims} dims of the tensor")
    return m


def _masked_md(dims: Sequence[int], mask: int, dtype: str) -> MemoryDesc:
    mdims = [d if mask >> i & 1 else 1 for i, d in enumerate(dims)]
    return MemoryDesc(mdims, dtype, "abcdefghijkl"[: len(dims)])


def _count(dims: Sequence[int], mask: int) -> int:
    n = 1
    for i, d in enumerate(dims):
        if mask >> i & 1:
            n *= d
    return n


@dataclass(frozen=True)
class Attrs:
    """The compile-time part of a reorder's attributes (hashable: part of the kernel key)."""

    dims: tuple[int, ...]
    src_scale: int | None = None
    dst_scale: int | None = None
    src_zp: int | None = None
    dst_zp: int | None = None
    post_ops: tuple[PostOp, ...] = ()

    @property
    def key(self) -> Attrs:
        return self

    # ------------------------------------------------------------- creation
    @staticmethod
    def make(src_md: MemoryDesc, dst_md: MemoryDesc, *, scales: dict | None = None,
             zero_points: dict | None = None, post_ops: Sequence | None = None) -> Attrs:
        nd = dst_md.ndims
        sc = dict(scales or {})
        zp = dict(zero_points or {})
        for what, dct in (("scales", sc), ("zero_points", zp)):
            bad = set(dct) - {"src", "dst"}
            if bad:
                raise LayoutError(f"{what}: only 'src' and 'dst' take {what}, not {sorted(bad)}")
        s_sc = _mask(sc["src"], "scales['src']", nd) if "src" in sc else None
        d_sc = _mask(sc["dst"], "scales['dst']", nd) if "dst" in sc else None
        s_zp = _mask(zp["src"], "zero_points['src']", nd) if "src" in zp else None
        d_zp = _mask(zp["dst"], "zero_points['dst']", nd) if "dst" in zp else None
        if s_zp is not None and str(src_md.dtype) not in _INTEGRAL:
            raise LayoutError(f"zero_points['src']: zero points need an integer source, not {src_md.dtype}")
        if d_zp is not None and str(dst_md.dtype) not in _INTEGRAL:
            raise LayoutError(f"zero_points['dst']: zero points need an integer destination, not {dst_md.dtype}")
        ops = tuple(_post_op(p, i, dst_md) for i, p in enumerate(post_ops or ()))
        if len(ops) > MAX_POST_OPS:
            raise LayoutError(f"post_ops: at most {MAX_POST_OPS} post-ops, got {len(ops)}")
        return Attrs(tuple(dst_md.dims), s_sc, d_sc, s_zp, d_zp, ops)

    def describe(self) -> str:
        parts = []
        if self.src_scale is not None or self.dst_scale is not None:
            parts.append("scales:" + "+".join(f"{k}:{m}" for k, m in (("src", self.src_scale),
                                                                      ("dst", self.dst_scale)) if m is not None))
        if self.src_zp is not None or self.dst_zp is not None:
            parts.append("zero_points:" + "+".join(f"{k}:{m}" for k, m in (("src", self.src_zp),
                                                                           ("dst", self.dst_zp)) if m is not None))
        if self.post_ops:
            parts.append("post_ops:" + "+".join(p.describe() for p in self.post_ops))
        return " ".join(parts)

    # ------------------------------------------------------------ operands
    def _operand_list(self) -> list[tuple[str, str, Any]]:
        """(name, role, payload) of every extra operand, in kernel order."""
        out: list[tuple[str, str, Any]] = []
        for name, mask, dt in (("src_scale", self.src_scale, "f32"), ("dst_scale", self.dst_scale, "f32"),
                               ("src_zero_point", self.src_zp, "s32"), ("dst_zero_point", self.dst_zp, "s32")):
            if mask is not None:
                out.append((name, dt, mask))
        for i, p in enumerate(self.post_ops):
            if p.kind == "binary":
                out.append((f"binary{i}", "binary", p))
        return out

    def extra_operands(self, src_md: MemoryDesc, dst_md: MemoryDesc) -> list[tuple[str, MemoryDesc, str]]:
        ops = []
        for name, kind, payload in self._operand_list():
            if kind == "binary":
                ops.append((name, payload.md, "binary"))
            else:
                ops.append((name, _masked_md(dst_md.dims, payload, kind), kind))
        return ops

    # ------------------------------------------------------------ epilogue
    def epilogue(self, src_md: MemoryDesc, dst_md: MemoryDesc) -> Epilogue:
        from . import convert, eltwise_ops

        names = [n for n, _, _ in self._operand_list()]
        index = {n: k for k, n in enumerate(names)}
        sdt, ddt = src_md.dtype, dst_md.dtype
        post = self.post_ops
        uses_elt = any(p.kind in ("eltwise", "binary") for p in post)

        def lines(src: str, extra: Sequence[str], dst_old: str) -> tuple[list[str], str]:
            st = [f"acc = {convert.to_f32(sdt, src)}"]
            if self.src_zp is not None:
                st.append(f"acc = acc - np.float32({extra[index['src_zero_point']]})")
            if self.src_scale is not None:
                st.append(f"acc = {extra[index['src_scale']]} * acc")
            for i, p in enumerate(post):
                if p.kind == "sum":
                    if p.beta != 0.0:
                        b = eltwise_ops.f32_literal(p.beta)
                        st.append(f"acc = acc + {b} * {convert.to_f32(ddt, dst_old)}")
                elif p.kind == "eltwise":
                    st.append(f"acc = {eltwise_ops.eltwise_expr(p.alg, 'acc', p.alpha, p.beta)}")
                else:
                    assert p.md is not None
                    s1 = convert.to_f32(p.md.dtype, extra[index[f'binary{i}']])
                    st.append(f"acc = {eltwise_ops.binary_expr(p.alg, 'acc', s1)}")
            if self.dst_scale is not None:
                st.append(f"acc = np.true_divide(acc, {extra[index['dst_scale']]})")
            if self.dst_zp is not None:
                st.append(f"acc = acc + np.float32({extra[index['dst_zero_point']]})")
            return st, convert.from_f32(ddt, "acc")

        imports = [f"from layoutjit.convert import {', '.join(convert.RUNTIME_NAMES)}"]
        if uses_elt:
            imports.append(eltwise_ops.RUNTIME_IMPORT)
        reads_dst = any(p.kind == "sum" and p.beta != 0.0 for p in post)
        return Epilogue(lines, tuple(imports), reads_dst=reads_dst, direct=False,
                        vector_ops=self._vector_ops(sdt, ddt))

    def _vector_ops(self, sdt: Any, ddt: Any) -> tuple:
        """The post-ops as ``simd.tile(post=...)`` ops, when registers can apply them exactly.

        Only f32 -> f32 without scales or zero points, and only relu with a finite
        alpha >= 0: it maps +0 (the zero lanes of padding) to +0, and its select
        form gives the scalar code's bits for -0 and NaN as well.
        """
        if str(sdt) != "f32" or str(ddt) != "f32" or not self.post_ops:
            return ()
        if any(x is not None for x in (self.src_scale, self.dst_scale, self.src_zp, self.dst_zp)):
            return ()
        from .eltwise_ops import check_eltwise

        ops = []
        for p in self.post_ops:
            if p.kind != "eltwise" or check_eltwise(p.alg, p.alpha, p.beta) != "relu":
                return ()
            a = float(np.float32(p.alpha))
            if not 0.0 <= a < float("inf"):
                return ()
            ops.append(("relu", a))
        return tuple(ops)

    # ------------------------------------------------------------ run time
    def runtime_table(self, runtime: dict[str, Any]) -> tuple[np.ndarray, list[np.ndarray]]:
        """Validate run-time values; return the operand pointer table and the arrays it points to."""
        scales = runtime.pop("scales", None) or {}
        zps = runtime.pop("zero_points", None) or {}
        binary = runtime.pop("binary", None)
        if runtime:
            raise LayoutError(f"unexpected keyword arguments {sorted(runtime)}; a kernel takes "
                              f"scales=, zero_points= and binary=")
        for what, dct in (("scales", scales), ("zero_points", zps)):
            if not isinstance(dct, dict):
                raise LayoutError(f"{what}: expected a dict like {{'src': array}}, got {type(dct).__name__}")
        keep: list[np.ndarray] = []
        nbin = sum(1 for p in self.post_ops if p.kind == "binary")
        if binary is not None and not isinstance(binary, (list, tuple)):
            raise LayoutError(f"binary: expected a list with one buffer per binary post-op, got "
                              f"{type(binary).__name__}")
        if nbin:
            if binary is None or len(binary) != nbin:
                raise LayoutError(f"binary: this kernel has {nbin} binary post-op(s); pass binary=[...] "
                                  f"with one buffer each")
        elif binary:
            raise LayoutError("binary: this kernel has no binary post-op")
        bin_iter = iter(binary or ())
        for name, kind, payload in self._operand_list():
            if kind == "binary":
                md = payload.md
                a = as_buffer(next(bin_iter), name)
                size = md.get_size()
                if a.nbytes != size and not (a.nbytes >= md.required_bytes() and not md.is_dense()):
                    raise LayoutError(f"binary: the buffer for {md!r} must have {size} bytes, got {a.nbytes}")
                keep.append(byte_view(a, name))
                continue
            side = "src" if name.startswith("src") else "dst"
            dct, what = (scales, "scales") if "scale" in name else (zps, "zero_points")
            if side not in dct:
                raise LayoutError(f"{what}['{side}']: this kernel was compiled with {what} on {side}; "
                                  f"pass {what}={{'{side}': values}}")
            keep.append(_values(dct[side], kind, _count(self.dims, payload), f"{what}['{side}']"))
        for what, dct, names in (("scales", scales, ("src_scale", "dst_scale")),
                                 ("zero_points", zps, ("src_zero_point", "dst_zero_point"))):
            compiled = {n.split("_")[0] for n, _, _ in self._operand_list() if n in names}
            extra = set(dct) - compiled
            if extra:
                raise LayoutError(f"{what}: {sorted(extra)} given but the kernel was compiled without them")
        table = np.array([a.ctypes.data for a in keep] or [0], dtype=np.int64)
        return table, keep


def _values(x: Any, kind: str, count: int, what: str) -> np.ndarray:
    want = np.float32 if kind == "f32" else np.int32
    if x is None:
        raise LayoutError(f"{what}: expected numbers, got None")
    if isinstance(x, np.ndarray):
        if x.dtype != want:
            raise LayoutError(f"{what}: values must be {np.dtype(want).name}, got {x.dtype}")
        a = np.ascontiguousarray(x).reshape(-1)
    else:
        try:
            a = np.asarray(x, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            raise LayoutError(f"{what}: expected numbers, got {type(x).__name__}") from None
        if want is np.int32 and not np.all(a == np.round(a)):
            raise LayoutError(f"{what}: zero points must be integers")
        a = a.astype(want)
    if a.size != count:
        raise LayoutError(f"{what}: expected {count} value(s) (the product of the masked dims), got {a.size}")
    return a


def _post_op(p: Any, i: int, dst_md: MemoryDesc) -> PostOp:
    what = f"post_ops[{i}]"
    if not isinstance(p, (tuple, list)) or not p:
        raise LayoutError(f"{what}: expected a tuple like ('sum', beta), got {p!r}")
    kind = p[0]
    if kind == "sum":
        if len(p) > 2:
            raise LayoutError(f"{what}: ('sum', beta) takes one value")
        try:
            beta = float(p[1]) if len(p) > 1 else 1.0
        except (TypeError, ValueError):
            raise LayoutError(f"{what}: beta must be a number, got {p[1]!r}") from None
        return PostOp("sum", beta=float(np.float32(beta)))
    if kind == "eltwise":
        from .eltwise_ops import check_eltwise

        if len(p) < 2 or len(p) > 4:
            raise LayoutError(f"{what}: expected ('eltwise', alg, alpha, beta)")
        try:
            alpha = float(p[2]) if len(p) > 2 else 0.0
            beta = float(p[3]) if len(p) > 3 else 0.0
        except (TypeError, ValueError):
            raise LayoutError(f"{what}: alpha and beta must be numbers, got {p[2:]!r}") from None
        alg = check_eltwise(p[1], alpha, beta)
        return PostOp("eltwise", alg, float(np.float32(alpha)), float(np.float32(beta)))
    if kind == "binary":
        from .eltwise_ops import check_binary

        if len(p) != 3 or not isinstance(p[2], MemoryDesc):
            raise LayoutError(f"{what}: expected ('binary', alg, src1_md)")
        alg = check_binary(p[1])
        md = p[2]
        if md.format_kind != "blocked":
            raise LayoutError(f"{what}: src1_md {md!r} needs a concrete layout")
        if md.ndims != dst_md.ndims or any(a not in (b, 1) for a, b in zip(md.dims, dst_md.dims)):
            raise LayoutError(f"{what}: src1_md dims {md.dims} must equal the destination's "
                              f"{dst_md.dims} or be 1 where they broadcast")
        return PostOp("binary", alg, md=md)
    raise LayoutError(f"{what}: unknown post-op {kind!r}; use 'sum', 'eltwise' or 'binary'")

"""Data-type conversions for generated reorder kernels: the project's numeric contract.

Every reorder converts each element with :func:`direct` semantics.  Values are moved as their
*storage* (``DataType.storage``): f16 and bf16 travel as ``uint16`` bit patterns, because
Numba's CPU target has no float16.

Conversion rules (``src -> dst``), bit-exact and identical in the scalar helpers and the vector
builders:

1. **Same type**: a bit copy.  NaN payloads (signalling NaNs included) are kept.
2. **Integer to integer** (s32, s8, u8): an exact integer clamp to the destination range.
   s32 -> s8 clamps to [-128, 127], s32 -> u8 to [0, 255], u8 -> s8 is ``min(x, 127)``,
   s8 -> u8 is ``max(x, 0)``, widening (s8/u8 -> s32) is exact.
3. **Everything else goes through f32**: ``dst = from_f32(to_f32(src))``.

   ``to_f32``: f16, bf16, s8, u8 are exact; s32 and f64 round to nearest even (f64 overflow
   gives +-inf, f64 NaN stays NaN with its payload truncated to 23 bits and quieted).  An f16
   signalling NaN comes back quiet (the quiet bit is set, the rest of the payload is kept), as
   x86's ``vcvtph2ps`` does; a bf16 NaN is widened bit for bit.

   ``from_f32``:

   * f64: exact widening (``fpext``; a NaN keeps its payload and is quieted).  Note the
     consequences of rules 1-3: f32 -> f64 is exact, f64 -> f64 is a bit copy, but
     **s32 -> f64 goes through f32 and so rounds to 24 significant bits** (oneDNN has no f64
     reorders; we keep one rule for every non-integer pair rather than special-casing it).
   * bf16: exactly oneDNN's ``bfloat16_t(float)``: f32 zeros and subnormals become a signed
     zero ``(bits >> 16) & 0x8000``; NaN becomes ``(bits >> 16) | 0x0040`` (quiet, sign and the
     top payload bits kept); everything else (normals and +-inf) is
     ``(bits + 0x7FFF + ((bits >> 16) & 1)) >> 16``, round to nearest even, where overflow to
     +-inf happens naturally.
   * f16: IEEE round to nearest even (LLVM ``fptrunc float -> half``): overflow gives +-inf,
     f16 subnormals are produced, f32 subnormals give +-0, NaN gives the quiet NaN
     ``sign | 0x7E00 | (f32 mantissa >> 13)``.
   * s8, u8, s32: NaN -> 0 (our documented choice: oneDNN versions disagree); otherwise
     saturate in f32 to ``[lowest, highest]``, where the s32 bounds are -2147483648.0 and
     2147483520.0 (the largest f32 below 2**31, as oneDNN), then round half to even
     (``rint`` under the default rounding mode: 0.5 -> 0, 1.5 -> 2, -2.5 -> -2), then convert.
     So 127.5 -> s8 127, -128.5 -> s8 -128, 255.5 -> u8 255, 3e9 -> s32 2147483520.

Using it from generated source (the code generator writes Python compiled by Numba)::

    import numpy as np
    from layoutjit.convert import lj_f32_to_bf16, lj_s32_to_s8   # RUNTIME_NAMES

    @numba.njit(cache=True)
    def kernel(src, dst):                 # src: float32[:], dst: uint16[:] (bf16 bits)
        for i in range(src.size):
            dst[i] = lj_f32_to_bf16(src[i])     # the text of direct("f32", "bf16", "src[i]")

:func:`to_f32`, :func:`from_f32` and :func:`direct` return such expressions as strings,
:func:`zero` the expression of a destination zero.  The helpers are
``numba.extending.intrinsic`` s: they emit branch-free LLVM IR (selects, no calls), work in
``@njit`` and ``@cfunc`` code, are cacheable (``cache=True`` on the caller), and a plain loop
over them vectorises.  The same IR is available to intrinsic writers as :func:`vec_to_f32`,
:func:`vec_from_f32` and :func:`vec_convert`, which take and return llvmlite values of the
storage types: scalars or ``ir.VectorType`` of any length.

Vectors of 8 or 16 lanes (and power-of-two multiples) going from f32 to s8, u8, s32 or bf16 use
x86 instructions where the target has them: ``vcvtps2dq`` (after the clamp, with the rounding
in the instruction on AVX-512; a NaN becomes INT_MIN, whose low byte is the 0 the rules ask
for) and ``vcvtneps2bf16`` (AVX512_BF16: the same rounding, subnormal and NaN handling as
rule 3).  They give the same bits as the portable IR (``x86=False``, tested side by side) in
2-4x fewer instructions, which decides the speed of conversions that run from cache.

f16 uses the hardware conversion (``vcvtps2ph``/``vcvtph2ps``, F16C) when the code is compiled
for a CPU that has it, else a bit-exact integer emulation: without F16C LLVM would emit a
``__truncsfhf2`` libcall that Numba's JIT does not resolve (it crashes).
"""

from __future__ import annotations

import functools
import platform

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .dtypes import ALL, DataType, as_dtype

__all__ = [
    "to_f32", "from_f32", "direct", "zero", "helper_name", "RUNTIME_NAMES",
    "vec_to_f32", "vec_from_f32", "vec_convert", "storage_ir_type", "storage_numba_type",
    "target_features", "has_f16c",
]

# ---------------------------------------------------------------------------------------------
# Target description (what Numba/LLVM will compile for)
# ---------------------------------------------------------------------------------------------


def _is_x86() -> bool:
    m = platform.machine().lower()
    return m in ("x86_64", "amd64", "i386", "i686", "x86")


@functools.lru_cache(maxsize=1)
def target_features() -> frozenset[str]:
    """CPU features Numba's JIT compiles for: ``NUMBA_CPU_FEATURES`` when set, else the host's.

    Only features named with ``+`` count.  When ``NUMBA_CPU_FEATURES`` is set, features implied
    only by ``NUMBA_CPU_NAME`` are not seen, which errs on the safe side (narrower vectors,
    software f16).
    """
    from numba.core import config
    from numba.core.codegen import get_host_cpu_features

    feats = getattr(config, "CPU_FEATURES", None)
    if feats is None:
        feats = get_host_cpu_features()  # respects NUMBA_ENABLE_AVX=0
    out = set()
    for f in str(feats).split(","):
        f = f.strip()
        if f.startswith("+"):
            out.add(f[1:])
    return frozenset(out)


def has_f16c() -> bool:
    """Whether ``fptrunc``/``fpext`` on ``half`` compile to instructions (not a libcall)."""
    if not _is_x86():
        return True  # AArch64 and others convert half natively
    return "f16c" in target_features()


_F16_NATIVE = has_f16c()

# ---------------------------------------------------------------------------------------------
# LLVM types and small IR utilities
# ---------------------------------------------------------------------------------------------

_F32 = ir.FloatType()
_F64 = ir.DoubleType()
_F16 = ir.HalfType()
_I8 = ir.IntType(8)
_I16 = ir.IntType(16)
_I32 = ir.IntType(32)

_STORAGE_IR: dict[str, ir.Type] = {"f32": _F32, "f64": _F64, "f16": _I16, "bf16": _I16, "s32": _I32,
               "s8": _I8, "u8": _I8}
_STORAGE_NB: dict[str, types.Type] = {"f32": types.float32, "f64": types.float64, "f16": types.uint16,
               "bf16": types.uint16, "s32": types.int32, "s8": types.int8, "u8": types.uint8}
_INT_RANGE = {"s32": (-2147483648, 2147483647), "s8": (-128, 127), "u8": (0, 255)}
# saturation bounds in f32 (s32 upper bound: largest f32 below 2**31, as oneDNN)
_F32_SAT = {"s32": (-2147483648.0, 2147483520.0), "s8": (-128.0, 127.0), "u8": (0.0, 255.0)}


def _dt(x) -> DataType:
    return as_dtype(x)


def storage_ir_type(dt, n: int | None = None) -> ir.Type:
    """LLVM type of dt's storage (f16/bf16: i16; s8/u8: i8), a vector of n when n is given."""
    t = _STORAGE_IR[str.__str__(_dt(dt))]
    return t if n is None else ir.VectorType(t, n)


def storage_numba_type(dt) -> types.Type:
    """Numba scalar type of dt's storage (f16/bf16: uint16)."""
    return _STORAGE_NB[str.__str__(_dt(dt))]


def _like(elem: ir.Type, like: ir.Type) -> ir.Type:
    """``elem``, or a vector of ``elem`` with as many lanes as ``like``."""
    if isinstance(like, ir.VectorType):
        return ir.VectorType(elem, like.count)
    return elem


def _c(ty: ir.Type, value) -> ir.Constant:
    """A constant (splat for vectors)."""
    if isinstance(value, int):
        return _c_int(ty, value)
    return ir.Constant(ty, value)


@functools.lru_cache(maxsize=1024)
def _c_int(ty: ir.Type, value: int) -> ir.Constant:
    # memoized: constants are immutable and belong to no module
    return ir.Constant(ty, value)


def _mangle(ty: ir.Type) -> str:
    if isinstance(ty, ir.VectorType):
        return f"v{ty.count}{_mangle(ty.element)}"
    if isinstance(ty, ir.FloatType):
        return "f32"
    if isinstance(ty, ir.DoubleType):
        return "f64"
    if isinstance(ty, ir.HalfType):
        return "f16"
    if isinstance(ty, ir.IntType):
        return f"i{ty.width}"
    raise TypeError(f"cannot mangle {ty}")


def _call(builder: ir.IRBuilder, name: str, ret: ir.Type, *args: ir.Value) -> ir.Value:
    """Call function ``name`` (declared on first use) returning ``ret``."""
    fnty = ir.FunctionType(ret, [a.type for a in args])
    return builder.call(cgutils.get_or_insert_function(builder.module, fnty, name), list(args))


def _llvm_intrinsic(builder: ir.IRBuilder, name: str, *args: ir.Value) -> ir.Value:
    """Call the overloaded LLVM intrinsic ``llvm.<name>.<type of args[0]>``."""
    ty = args[0].type
    return _call(builder, f"llvm.{name}.{_mangle(ty)}", ty, *args)


def _check(v: ir.Value, dt: DataType) -> None:
    elem = v.type.element if isinstance(v.type, ir.VectorType) else v.type
    if elem != _STORAGE_IR[str.__str__(dt)]:
        raise TypeError(f"expected a value of {dt} storage type "
                        f"{_STORAGE_IR[str.__str__(dt)]}, got {v.type}")


# ---------------------------------------------------------------------------------------------
# f16 emulation (used when the target lacks F16C); bit-identical to vcvtps2ph / vcvtph2ps
# ---------------------------------------------------------------------------------------------

def _sw_f32_to_f16(builder: ir.IRBuilder, v: ir.Value) -> ir.Value:
    i32 = _like(_I32, v.type)
    b = builder.bitcast(v, i32)
    sign = builder.and_(builder.lshr(b, _c(i32, 16)), _c(i32, 0x8000))
    a = builder.and_(b, _c(i32, 0x7FFFFFFF))
    # normal f16 range: rebias the exponent (127 -> 15) and round to nearest even on bit 13
    lsb = builder.and_(builder.lshr(a, _c(i32, 13)), _c(i32, 1))
    norm = builder.add(builder.sub(a, _c(i32, 0x38000000)), builder.add(lsb, _c(i32, 0xFFF)))
    norm = builder.lshr(norm, _c(i32, 13))
    # f16 subnormal range (|x| < 2**-14): |x| + 0.5 rounds (RNE, in the FPU) to a multiple of
    # 2**-24, the f16 subnormal step; subtracting bits(0.5) leaves the f16 mantissa (which may
    # round up into the smallest normal, 0x400: also the right encoding).
    fa = builder.bitcast(a, v.type)
    sub = builder.sub(builder.bitcast(builder.fadd(fa, _c(v.type, 0.5)), i32),
                      _c(i32, 0x3F000000))
    nan = builder.or_(builder.and_(builder.lshr(a, _c(i32, 13)), _c(i32, 0x3FF)),
                      _c(i32, 0x7E00))
    r = builder.select(builder.icmp_unsigned("<", a, _c(i32, 0x38800000)), sub, norm)
    r = builder.select(builder.icmp_unsigned(">=", a, _c(i32, 0x47800000)), _c(i32, 0x7C00), r)
    r = builder.select(builder.icmp_unsigned(">", a, _c(i32, 0x7F800000)), nan, r)
    return builder.trunc(builder.or_(r, sign), _like(_I16, v.type))


def _sw_f16_to_f32(builder: ir.IRBuilder, h: ir.Value) -> ir.Value:
    i32 = _like(_I32, h.type)
    f32 = _like(_F32, h.type)
    x = builder.zext(h, i32)
    sign = builder.shl(builder.and_(x, _c(i32, 0x8000)), _c(i32, 16))
    e = builder.and_(x, _c(i32, 0x7C00))
    m = builder.and_(x, _c(i32, 0x3FF))
    norm = builder.add(builder.shl(builder.and_(x, _c(i32, 0x7FFF)), _c(i32, 13)),
                       _c(i32, 0x38000000))
    # zero / subnormal: m * 2**-24, exact in f32
    sub = builder.bitcast(builder.fmul(builder.uitofp(m, f32), _c(f32, 2.0 ** -24)), i32)
    quiet = builder.select(builder.icmp_unsigned("!=", m, _c(i32, 0)), _c(i32, 0x400000),
                           _c(i32, 0))
    special = builder.or_(builder.or_(builder.shl(m, _c(i32, 13)), _c(i32, 0x7F800000)), quiet)
    r = builder.select(builder.icmp_unsigned("==", e, _c(i32, 0)), sub, norm)
    r = builder.select(builder.icmp_unsigned("==", e, _c(i32, 0x7C00)), special, r)
    return builder.bitcast(builder.or_(r, sign), f32)


# ---------------------------------------------------------------------------------------------
# IR builders (scalars or vectors of any length)
# ---------------------------------------------------------------------------------------------

def vec_to_f32(builder: ir.IRBuilder, dt, v: ir.Value, *, f16_native: bool | None = None
               ) -> ir.Value:
    """Emit IR turning ``v`` (dt storage: a scalar or ``<n x T>``) into f32 (``<n x float>``)."""
    dt = _dt(dt)
    _check(v, dt)
    name = str.__str__(dt)
    f32 = _like(_F32, v.type)
    if name == "f32":
        return v
    if name == "f64":
        return builder.fptrunc(v, f32)
    if name == "f16":
        native = _F16_NATIVE if f16_native is None else f16_native
        if native:
            return builder.fpext(builder.bitcast(v, _like(_F16, v.type)), f32)
        return _sw_f16_to_f32(builder, v)
    if name == "bf16":
        i32 = _like(_I32, v.type)
        return builder.bitcast(builder.shl(builder.zext(v, i32), _c(i32, 16)), f32)
    if name in ("s32", "s8"):
        return builder.sitofp(v, f32)
    if name == "u8":
        return builder.uitofp(v, f32)
    raise AssertionError(name)


def _f32_to_bf16(builder: ir.IRBuilder, v: ir.Value) -> ir.Value:
    i32 = _like(_I32, v.type)
    b = builder.bitcast(v, i32)
    a = builder.and_(b, _c(i32, 0x7FFFFFFF))
    hi = builder.lshr(b, _c(i32, 16))
    rne = builder.add(b, builder.add(builder.and_(hi, _c(i32, 1)), _c(i32, 0x7FFF)))
    r = builder.lshr(rne, _c(i32, 16))
    r = builder.select(builder.icmp_unsigned("<", a, _c(i32, 0x00800000)),
                       builder.and_(hi, _c(i32, 0x8000)), r)           # zero, subnormal
    r = builder.select(builder.icmp_unsigned(">", a, _c(i32, 0x7F800000)),
                       builder.or_(hi, _c(i32, 0x40)), r)              # NaN -> quiet NaN
    return builder.trunc(r, _like(_I16, v.type))


# ---------------------------------------------------------------------------------------------
# x86 conversion instructions for vectors (same bits as the portable IR, fewer instructions)
# ---------------------------------------------------------------------------------------------

class _BFloatType(ir.Type):
    """LLVM's ``bfloat`` (llvmlite has no class for it; only the bf16 intrinsic returns it)."""

    def _to_string(self) -> str:
        return "bfloat"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _BFloatType)

    def __hash__(self) -> int:
        return hash("bfloat")


def _x86_has(*features: str) -> bool:
    return _is_x86() and all(f in target_features() for f in features)


def _native_lanes(v: ir.Value, widths: dict[int, bool]) -> int:
    """The widest available chunk width (lanes) that splits ``v`` into a power-of-two number
    of pieces (so they pair up when joined), or 0."""
    if not isinstance(v.type, ir.VectorType):
        return 0
    for lanes in sorted(widths, reverse=True):
        pieces = v.type.count // lanes
        if widths[lanes] and v.type.count % lanes == 0 and pieces & (pieces - 1) == 0:
            return lanes
    return 0


def _map_chunks(builder: ir.IRBuilder, v: ir.Value, lanes: int, fn) -> ir.Value:
    """``fn`` applied to each ``lanes``-wide piece of vector ``v``, the pieces joined again."""
    n = v.type.count
    if n == lanes:
        return fn(v)

    def mask(start: int, count: int) -> ir.Constant:
        return ir.Constant(ir.VectorType(_I32, count), list(range(start, start + count)))

    parts = [fn(builder.shuffle_vector(v, v, mask(k, lanes))) for k in range(0, n, lanes)]
    while len(parts) > 1:
        w = parts[0].type.count
        parts = [builder.shuffle_vector(a, b, mask(0, 2 * w))
                 for a, b in zip(parts[::2], parts[1::2])]
    return parts[0]


def _x86_cvt_rne(builder: ir.IRBuilder, x: ir.Value, lanes: int) -> ir.Value:
    """``<lanes x float>`` -> ``<lanes x i32>``, round to nearest even, NaN and out-of-range
    values give INT_MIN (x86's integer indefinite; unlike ``fptosi``, defined)."""
    ity = ir.VectorType(_I32, lanes)
    if lanes == 16:  # vcvtps2dq {rn-sae}: the rounding is in the instruction, not MXCSR
        return _call(builder, "llvm.x86.avx512.mask.cvtps2dq.512", ity, x, ir.Constant(ity, None),
                     ir.Constant(_I16, -1), ir.Constant(_I32, 8))
    return _call(builder, "llvm.x86.avx.cvtt.ps2dq.256", ity,
                 _llvm_intrinsic(builder, "roundeven", x))


def _cvt_lanes(v: ir.Value) -> int:
    return _native_lanes(v, {16: _x86_has("avx512f"), 8: _x86_has("avx")})


@functools.lru_cache(maxsize=1)
def _llvm_has_bfloat() -> bool:
    """LLVM 17 made the bf16 intrinsics return ``bfloat`` vectors (before: ``i16``)."""
    from llvmlite import binding

    return tuple(binding.llvm_version_info) >= (17,)


def _bf16_lanes(v: ir.Value) -> int:
    if not _llvm_has_bfloat():
        return 0
    return _native_lanes(v, {16: _x86_has("avx512bf16", "avx512f"),
                             8: _x86_has("avx512bf16", "avx512vl")})


def _x86_f32_to_int(builder: ir.IRBuilder, name: str, v: ir.Value, lanes: int) -> ir.Value:
    """:func:`_f32_to_int` in four instructions a vector: clamp (a NaN passes through),
    ``cvtps2dq`` (a NaN becomes INT_MIN, whose low byte is 0), and for s32 NaN -> 0."""
    lo, hi = _F32_SAT[name]
    ft = v.type
    x = builder.select(builder.fcmp_ordered("<", v, _c(ft, lo)), _c(ft, lo), v)   # maxps
    x = builder.select(builder.fcmp_ordered(">", x, _c(ft, hi)), _c(ft, hi), x)   # minps
    i = _map_chunks(builder, x, lanes, lambda c: _x86_cvt_rne(builder, c, lanes))
    if name == "s32":
        return builder.select(builder.fcmp_ordered("ord", v, v), i, _c(i.type, 0))
    return builder.trunc(i, _like(_I8, ft))


def _x86_f32_to_bf16(builder: ir.IRBuilder, v: ir.Value, lanes: int) -> ir.Value:
    """``vcvtneps2bf16``: the same bits as :func:`_f32_to_bf16` (round to nearest even, input
    subnormals as signed zeros, NaN -> (bits >> 16) | 0x40), one instruction a vector."""
    name = f"llvm.x86.avx512bf16.cvtneps2bf16.{32 * lanes}"
    bty, ity = ir.VectorType(_BFloatType(), lanes), ir.VectorType(_I16, lanes)
    return _map_chunks(builder, v, lanes,
                       lambda c: builder.bitcast(_call(builder, name, bty, c), ity))


def _f32_to_int(builder: ir.IRBuilder, name: str, v: ir.Value) -> ir.Value:
    lo, hi = _F32_SAT[name]
    ft = v.type
    x = builder.select(builder.fcmp_unordered("uno", v, v), _c(ft, 0.0), v)   # NaN -> 0
    x = builder.select(builder.fcmp_ordered("<", x, _c(ft, lo)), _c(ft, lo), x)
    x = builder.select(builder.fcmp_ordered(">", x, _c(ft, hi)), _c(ft, hi), x)
    x = _llvm_intrinsic(builder, "roundeven", x)
    i = builder.fptosi(x, _like(_I32, ft))
    if name == "s32":
        return i
    return builder.trunc(i, _like(_I8, ft))


def vec_from_f32(builder: ir.IRBuilder, dt, v: ir.Value, *, f16_native: bool | None = None,
                 x86: bool = True) -> ir.Value:
    """Emit IR turning f32 ``v`` (a scalar or ``<n x float>``) into dt storage.

    Vectors of 8 or 16 lanes (or multiples) use x86 conversion instructions where the target
    has them (``vcvtps2dq``, ``vcvtneps2bf16``: 2-4x fewer instructions than the portable IR,
    which decides the speed of in-cache conversions); ``x86=False`` keeps the portable IR.
    Both give the same bits.
    """
    dt = _dt(dt)
    _check(v, as_dtype("f32"))
    name = str.__str__(dt)
    if name == "f32":
        return v
    if name == "f64":
        return builder.fpext(v, _like(_F64, v.type))
    if name == "f16":
        native = _F16_NATIVE if f16_native is None else f16_native
        if native:
            return builder.bitcast(builder.fptrunc(v, _like(_F16, v.type)),
                                   _like(_I16, v.type))
        return _sw_f32_to_f16(builder, v)
    if name == "bf16":
        lanes = _bf16_lanes(v) if x86 else 0
        return _x86_f32_to_bf16(builder, v, lanes) if lanes else _f32_to_bf16(builder, v)
    lanes = _cvt_lanes(v) if x86 else 0
    return _x86_f32_to_int(builder, name, v, lanes) if lanes else _f32_to_int(builder, name, v)


def _int_to_int(builder: ir.IRBuilder, s: str, d: str, v: ir.Value) -> ir.Value:
    signed = s != "u8"
    if _STORAGE_IR[s].width < 32:  # widen to i32 first: all comparisons happen there
        v = builder.sext(v, _like(_I32, v.type)) if signed else builder.zext(v, _like(_I32, v.type))
    it = v.type
    lo, hi = _INT_RANGE[d]
    slo, shi = _INT_RANGE[s]
    if lo > slo:
        v = builder.select(builder.icmp_signed("<", v, _c(it, lo)), _c(it, lo), v)
    if hi < shi:
        v = builder.select(builder.icmp_signed(">", v, _c(it, hi)), _c(it, hi), v)
    if d != "s32":
        v = builder.trunc(v, _like(_I8, it))
    return v


def vec_convert(builder: ir.IRBuilder, src_dt, dst_dt, v: ir.Value, *,
                f16_native: bool | None = None, x86: bool = True) -> ir.Value:
    """Emit IR for :func:`direct` semantics on a scalar or ``<n x src storage>`` value."""
    s, d = _dt(src_dt), _dt(dst_dt)
    _check(v, s)
    sn, dn = str.__str__(s), str.__str__(d)
    if sn == dn:
        return v
    if s.is_int and d.is_int:
        return _int_to_int(builder, sn, dn, v)
    f = vec_to_f32(builder, s, v, f16_native=f16_native)
    return vec_from_f32(builder, d, f, f16_native=f16_native, x86=x86)


# ---------------------------------------------------------------------------------------------
# Scalar helpers for generated source (Numba intrinsics)
# ---------------------------------------------------------------------------------------------

def helper_name(src_dt, dst_dt) -> str:
    """The name of the scalar helper converting src storage to dst storage (one step)."""
    return f"lj_{str.__str__(_dt(src_dt))}_to_{str.__str__(_dt(dst_dt))}"


def _make_helper(s: DataType, d: DataType):
    in_nb = _STORAGE_NB[str.__str__(s)]
    out_nb = _STORAGE_NB[str.__str__(d)]
    name = helper_name(s, d)

    def impl(typingctx, x):
        if not isinstance(x, (types.Integer, types.Float, types.Boolean)):
            return None
        sig = out_nb(x)

        def codegen(context, builder, sig, args):
            v = context.cast(builder, args[0], sig.args[0], in_nb)
            return vec_convert(builder, s, d, v)

        return sig, codegen

    impl.__name__ = impl.__qualname__ = name
    impl.__module__ = __name__
    return intrinsic(impl)


def _helper_pairs() -> list[tuple[DataType, DataType]]:
    f32 = as_dtype("f32")
    pairs = []
    for t in ALL:
        if t != f32:
            pairs.append((t, f32))
            pairs.append((f32, t))
    for s in ALL:
        for d in ALL:
            if s != d and s.is_int and d.is_int:
                pairs.append((s, d))
    return pairs


_HELPERS = {}
for _s, _d in _helper_pairs():
    _HELPERS[helper_name(_s, _d)] = globals()[helper_name(_s, _d)] = _make_helper(_s, _d)
del _s, _d

#: Every helper name that expressions from :func:`to_f32`, :func:`from_f32` and :func:`direct`
#: can reference (generated modules import them from ``layoutjit.convert``).
RUNTIME_NAMES: tuple[str, ...] = tuple(sorted(_HELPERS))


def to_f32(dt, x: str) -> str:
    """Python expression turning raw dt storage value ``x`` (an expression) into np.float32."""
    dt = _dt(dt)
    if dt == "f32":
        return f"({x})"
    return f"{helper_name(dt, 'f32')}({x})"


def from_f32(dt, x: str) -> str:
    """Python expression turning np.float32 ``x`` into raw dt storage (uint16 for f16/bf16)."""
    dt = _dt(dt)
    if dt == "f32":
        return f"({x})"
    return f"{helper_name('f32', dt)}({x})"


def direct(src_dt, dst_dt, x: str) -> str:
    """Python expression converting raw src storage ``x`` into raw dst storage (rules 1-3)."""
    s, d = _dt(src_dt), _dt(dst_dt)
    if s == d:
        return f"({x})"
    if s.is_int and d.is_int:
        return f"{helper_name(s, d)}({x})"
    return from_f32(d, to_f32(s, x))


def zero(dt) -> str:
    """Python expression of a zero of dt's storage type (``np`` must be numpy)."""
    return f"np.{_dt(dt).storage.name}(0)"

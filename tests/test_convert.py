"""layoutjit.convert against an independent numpy / ml_dtypes reference.

Compile budget: one njit function runs all 49 scalar conversions, one runs all vector-builder
variants; a few more small kernels check vectorisation, @cfunc use and on-disk caching.
"""

from __future__ import annotations

import ctypes
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

numba = pytest.importorskip("numba")
ml_dtypes = pytest.importorskip("ml_dtypes")

from llvmlite import ir  # noqa: E402
from numba import types  # noqa: E402
from numba.extending import intrinsic  # noqa: E402

from layoutjit import convert as C  # noqa: E402
from layoutjit.dtypes import ALL, as_dtype  # noqa: E402

NAMES = [str.__str__(t) for t in ALL]
STORAGE = {n: as_dtype(n).storage for n in NAMES}
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

# ---------------------------------------------------------------------------------------------
# Independent reference (numpy float ops, np.rint, np.clip, ml_dtypes)
# ---------------------------------------------------------------------------------------------


def _u32(x):
    return np.asarray(x, np.float32).view(np.uint32)


def ref_to_f32(dt: str, x: np.ndarray) -> np.ndarray:
    """Raw dt storage -> float32 (returned as float32; compare bits)."""
    with np.errstate(over="ignore", invalid="ignore"):
        if dt == "f32":
            return x.copy()
        if dt == "f64":
            out = x.astype(np.float32)
            b = x.view(np.uint64)
            nan = np.isnan(x)
            nb = (((b >> 32) & 0x80000000) | 0x7FC00000 | ((b >> 29) & 0x7FFFFF)).astype(np.uint32)
            o = out.view(np.uint32)
            o[nan] = nb[nan]
            return out
        if dt == "f16":
            h = x.astype(np.uint32)
            out = x.view(np.float16).astype(np.float32)
            nan = ((h & 0x7C00) == 0x7C00) & ((h & 0x3FF) != 0)
            nb = ((h & 0x8000) << 16) | 0x7FC00000 | ((h & 0x3FF) << 13)
            o = out.view(np.uint32)
            o[nan] = nb[nan]
            return out
        if dt == "bf16":
            return (x.astype(np.uint32) << 16).view(np.float32)
        return x.astype(np.float32)  # s32 (RNE), s8, u8 (exact)


def ref_from_f32(dt: str, f: np.ndarray) -> np.ndarray:
    """float32 -> raw dt storage."""
    b = _u32(f)
    nan = np.isnan(f)
    with np.errstate(over="ignore", invalid="ignore"):
        if dt == "f32":
            return f.copy()
        if dt == "f64":
            out = f.astype(np.float64)
            nb = (((b.astype(np.uint64) & 0x80000000) << 32) | 0x7FF8000000000000
                  | ((b.astype(np.uint64) & 0x7FFFFF) << 29))
            out.view(np.uint64)[nan] = nb[nan]
            return out
        if dt == "f16":
            out = f.astype(np.float16).view(np.uint16).copy()
            nb = (((b >> 16) & 0x8000) | 0x7E00 | ((b & 0x7FFFFF) >> 13)).astype(np.uint16)
            out[nan] = nb[nan]
            return out
        if dt == "bf16":
            out = f.astype(ml_dtypes.bfloat16).view(np.uint16).copy()
            tiny = (b & 0x7FFFFFFF) < 0x00800000           # zero and subnormal: flush, keep sign
            out[tiny] = ((b[tiny] >> 16) & 0x8000).astype(np.uint16)
            out[nan] = ((b[nan] >> 16) | 0x40).astype(np.uint16)
            return out
        lo, hi = {"s32": (-2147483648.0, 2147483520.0), "s8": (-128.0, 127.0),
                  "u8": (0.0, 255.0)}[dt]
        g = np.where(nan, np.float32(0), f)
        g = np.clip(g, np.float32(lo), np.float32(hi))
        return np.rint(g).astype(np.int64).astype(STORAGE[dt])


def ref_direct(s: str, d: str, x: np.ndarray) -> np.ndarray:
    if s == d:
        return x.copy()
    if as_dtype(s).is_int and as_dtype(d).is_int:
        info = np.iinfo(STORAGE[d])
        return np.clip(x.astype(np.int64), info.min, info.max).astype(STORAGE[d])
    return ref_from_f32(d, ref_to_f32(s, x))


# ---------------------------------------------------------------------------------------------
# Inputs: edge values plus random bit patterns, as raw storage
# ---------------------------------------------------------------------------------------------

RNG = np.random.default_rng(12345)


def _f32_edges() -> np.ndarray:
    vals = [0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.5, 126.5, 127.0, 127.49, 127.5, -127.5,
            -128.0, -128.49, -128.5, -129.0, 128.0, 254.5, 255.0, 255.49, 255.5, 256.0, -0.49,
            -1.0, 1e10, -1e10, 2147483520.0, 2147483648.0, -2147483648.0, -2147483904.0,
            16777217.0, 65504.0, 65519.0, 65520.0, 65536.0, -65520.0, 6.1e-5, 2.0 ** -14,
            2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -25, 2.0 ** -26, 1e-8, 3.0e38, -3.0e38,
            np.inf, -np.inf, 1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, 1.0 + 2.0 ** -11,
            1.0 + 3 * 2.0 ** -11]
    bits = [0x7F7FFFFF, 0xFF7FFFFF, 0x00800000, 0x80800000, 0x00000001, 0x80000001, 0x007FFFFF,
            0x807FFFFF, 0x00400000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FBFFFFF,
            0x7FC00001, 0x7FFFFFFF, 0xFFFFFFFF, 0x7FA00000, 0x7F80FFFF, 0x3F808000, 0x3F818000,
            0x3F808001, 0x3F7F8000, 0x7F7F8000, 0x7F7F7FFF, 0x477FEFFF, 0x477FF000, 0x387FE000,
            0x387FF000, 0x33000000, 0x33000001, 0xB3000001]
    a = np.concatenate([np.array(vals, np.float32), np.array(bits, np.uint32).view(np.float32)])
    return np.concatenate([a, RNG.integers(0, 2**32, 3000, dtype=np.uint64).astype(np.uint32)
                           .view(np.float32),
                           (RNG.standard_normal(1000) * 200).astype(np.float32),
                           (RNG.integers(-600, 600, 500) * 0.5).astype(np.float32)])


def _f64_edges() -> np.ndarray:
    vals = [0.0, -0.0, 0.5, -2.5, 1.0 + 2.0 ** -24, 1.0 + 3 * 2.0 ** -24, 1.0 + 2.0 ** -24 + 2.0 ** -50,
            1e300, -1e300, 1e-300, -1e-300, 3.4028235677973366e38, 3.4028234663852886e38,
            2147483647.0, 2147483648.5, -2147483649.0, 127.5, -128.5, 255.5, np.inf, -np.inf,
            5e-324, 1e-45, 7e-46, 6e-46]
    bits = [0x7FF8000000000000, 0x7FF8000000000001, 0x7FF0000000000001, 0xFFF0000000000001,
            0xFFFFFFFFFFFFFFFF, 0x7FF00000E0000000, 0x7FF4000000000000]
    a = np.concatenate([np.array(vals, np.float64), np.array(bits, np.uint64).view(np.float64)])
    return np.concatenate([a, RNG.integers(0, 2**64 - 1, 2000, dtype=np.uint64, endpoint=True)
                           .view(np.float64),
                           RNG.standard_normal(1000) * 300.0])


def _s32_edges() -> np.ndarray:
    vals = [0, 1, -1, 127, 128, -128, -129, 255, 256, 16777216, 16777217, 16777219, -16777219,
            2147483647, -2147483648, 2147483520, 2147483584, 2147483585, -2147483520]
    return np.concatenate([np.array(vals, np.int32),
                           RNG.integers(-2**31, 2**31, 3000, dtype=np.int64).astype(np.int32),
                           RNG.integers(-300, 300, 600).astype(np.int32)])


INPUTS = {
    "f32": _f32_edges(),
    "f64": _f64_edges(),
    "f16": np.arange(65536, dtype=np.uint32).astype(np.uint16),
    "bf16": np.arange(65536, dtype=np.uint32).astype(np.uint16),
    "s32": _s32_edges(),
    "s8": np.arange(-128, 128).astype(np.int8),
    "u8": np.arange(256).astype(np.uint8),
}
PAIRS = [(s, d) for s in NAMES for d in NAMES]


def _pad(x: np.ndarray, mult: int) -> np.ndarray:
    n = -(-x.size // mult) * mult
    out = np.zeros(n, x.dtype)
    out[: x.size] = x
    out[x.size:] = x[: n - x.size] if x.size >= n - x.size else 0
    return out


def _assert_bits(got: np.ndarray, want: np.ndarray, x: np.ndarray, what: str) -> None:
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    g = got.view(UINT[got.itemsize])
    w = want.view(UINT[want.itemsize])
    bad = np.flatnonzero(g != w)
    if bad.size:
        xb = x.view(UINT[x.itemsize])
        rows = [f"in={x[i]!r} (0x{int(xb[i]):x}) got 0x{int(g[i]):x} want 0x{int(w[i]):x}"
                for i in bad[:8]]
        pytest.fail(f"{what}: {bad.size} mismatches of {g.size}:\n" + "\n".join(rows))


# ---------------------------------------------------------------------------------------------
# Hand-written expectations (independent of both reference and implementation)
# ---------------------------------------------------------------------------------------------

GOLDEN = [
    ("f32", "s8", [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 127.5, -128.5, 1000.0, np.nan, -np.inf],
     [0, 2, 2, 0, -2, -2, 127, -128, 127, 0, -128]),
    ("f32", "u8", [0.5, 1.5, 254.5, 255.5, -1.0, -0.5, 300.0, np.nan, np.inf],
     [0, 2, 254, 255, 0, 0, 255, 0, 255]),
    ("f32", "s32", [2147483520.0, 2147483648.0, 3e9, -2147483648.0, -3e9, 2.5, -3.5, np.nan],
     [2147483520, 2147483520, 2147483520, -2147483648, -2147483648, 2, -4, 0]),
    ("f64", "s32", [2147483647.0, 2147483583.9, 1e300, -1e300, np.nan],
     [2147483520, 2147483520, 2147483520, -2147483648, 0]),
    ("s32", "s8", [300, -300, 127, -128, 5], [127, -128, 127, -128, 5]),
    ("s32", "u8", [300, -300, 255, 0], [255, 0, 255, 0]),
    ("u8", "s8", [0, 127, 128, 255], [0, 127, 127, 127]),
    ("s8", "u8", [-128, -1, 0, 127], [0, 0, 0, 127]),
    ("s8", "s32", [-128, 127], [-128, 127]),
    ("s32", "f64", [16777217, 2147483647], [16777216.0, 2147483648.0]),
]
GOLDEN_BITS = [  # (src, dst, src bits, dst bits)
    ("f32", "bf16", [0x3F808000, 0x3F818000, 0x3F808001, 0x00400000, 0x80000001, 0x7F800001,
                     0xFFC00000, 0x7F7FFFFF, 0xFF800000],
     [0x3F80, 0x3F82, 0x3F81, 0x0000, 0x8000, 0x7FC0, 0xFFC0, 0x7F80, 0xFF80]),
    ("f32", "f16", [0x477FF000, 0x477FEFFF, 0x33000000, 0x33000001, 0x7F800001, 0xFFA00000,
                    0x00000001],
     [0x7C00, 0x7BFF, 0x0000, 0x0001, 0x7E00, 0xFF00, 0x0000]),
    ("f16", "f32", [0x7C01, 0x0001, 0x8400], [0x7FC02000, 0x33800000, 0xB8800000]),
    ("bf16", "f32", [0x7F81, 0x0001], [0x7F810000, 0x00010000]),
    ("f32", "f32", [0x7F800001], [0x7F800001]),
    ("f64", "f64", [0x7FF0000000000001], [0x7FF0000000000001]),
    ("f16", "f16", [0x7C01], [0x7C01]),
]


@pytest.mark.parametrize("s,d,xs,want", GOLDEN)
def test_reference_golden(s, d, xs, want):
    x = np.array(xs, STORAGE[s] if s not in ("f16", "bf16") else np.float32)
    _assert_bits(ref_direct(s, d, x), np.array(want, STORAGE[d]), x, f"ref {s}->{d}")


@pytest.mark.parametrize("s,d,xs,want", GOLDEN_BITS)
def test_reference_golden_bits(s, d, xs, want):
    x = np.array(xs, UINT[as_dtype(s).size]).view(STORAGE[s])
    _assert_bits(ref_direct(s, d, x), np.array(want, UINT[as_dtype(d).size]).view(STORAGE[d]),
                 x, f"ref {s}->{d}")


# ---------------------------------------------------------------------------------------------
# Scalar helpers: all 49 pairs in ONE njit function
# ---------------------------------------------------------------------------------------------

def _scalar_source() -> str:
    args = [f"x_{s}" for s in NAMES] + [f"o_{s}_{d}" for s, d in PAIRS]
    lines = [f"def run_all({', '.join(args)}):"]
    for s in NAMES:
        lines.append(f"    for i in range(x_{s}.size):")
        lines.append(f"        v = x_{s}[i]")
        for d in NAMES:
            lines.append(f"        o_{s}_{d}[i] = {C.direct(s, d, 'v')}")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def scalar_results():
    ns = {"np": np}
    exec(f"from layoutjit.convert import {', '.join(C.RUNTIME_NAMES)}", ns)
    exec(_scalar_source(), ns)
    fn = numba.njit(ns["run_all"])
    outs = {(s, d): np.empty(INPUTS[s].size, STORAGE[d]) for s, d in PAIRS}
    fn(*[INPUTS[s] for s in NAMES], *[outs[p] for p in PAIRS])
    return outs


@pytest.mark.parametrize("s,d", PAIRS)
def test_scalar_helpers(scalar_results, s, d):
    x = INPUTS[s]
    _assert_bits(scalar_results[(s, d)], ref_direct(s, d, x), x, f"scalar {s}->{d}")


# ---------------------------------------------------------------------------------------------
# Vector builders: <n x T> chunks through a small intrinsic, all variants in ONE njit function
# ---------------------------------------------------------------------------------------------

def _vec_intrinsic(s: str, d: str, n: int | None, native: bool | None):
    """v(src, dst, i): dst[i:i+n] = vec_convert(src[i:i+n]); n=None: the scalar IR path."""

    def impl(typingctx, src, dst, i):
        sig = types.void(src, dst, types.int64)

        def codegen(context, builder, sig, args):
            sa = context.make_array(sig.args[0])(context, builder, args[0])
            da = context.make_array(sig.args[1])(context, builder, args[1])
            sp = builder.gep(sa.data, [args[2]])
            dp = builder.gep(da.data, [args[2]])
            sty, dty = C.storage_ir_type(s, n), C.storage_ir_type(d, n)
            v = builder.load(builder.bitcast(sp, sty.as_pointer()), align=as_dtype(s).size)
            kw = {"x86": False} if native == "portable" else {"f16_native": native}
            r = C.vec_convert(builder, s, d, v, **kw)
            assert r.type == dty
            builder.store(r, builder.bitcast(dp, dty.as_pointer()), align=as_dtype(d).size)
            return context.get_dummy_value()

        return sig, codegen

    impl.__name__ = f"vec_{s}_{d}_{n}_{native}"
    return intrinsic(impl)


VEC_CASES = [(s, d, 16, None) for s, d in PAIRS]
VEC_CASES += [(s, d, 5, None) for s, d in PAIRS if "f32" in (s, d) and s != d]  # odd length
# the integer emulation of f16 (used without F16C): every f16 pair as vectors, some as scalars
VEC_CASES += [(s, d, 16, False) for s, d in PAIRS if "f16" in (s, d)]
VEC_CASES += [(s, d, None, False) for s, d in (("f16", "f32"), ("f32", "f16"), ("f16", "s8"),
                                               ("f64", "f16"))]
# f32 -> s8/u8/s32/bf16 by x86 instructions (chunks of 8 and 16 lanes, where the target has
# them) and by the portable IR
_FROM_F32_HW = [("f32", d) for d in ("s8", "u8", "s32", "bf16")] + [("f16", "s8"), ("f64", "bf16")]
VEC_CASES += [(s, d, n, None) for s, d in _FROM_F32_HW for n in (8, 48, 64)]
VEC_CASES += [(s, d, 16, "portable") for s, d in _FROM_F32_HW]
# the explicit vec_to_f32 / vec_from_f32 entry points
VEC_CASES += [("f16", "f32", 8, True)] if C.has_f16c() else []
VEC_CASES += [("f32", "f16", 8, True)] if C.has_f16c() else []


@pytest.fixture(scope="module")
def vector_results():
    ns = {}
    lines = [f"def run_vec({', '.join(f'x{k}, o{k}' for k in range(len(VEC_CASES)))}):"]
    for k, (s, d, n, native) in enumerate(VEC_CASES):
        ns[f"v{k}"] = _vec_intrinsic(s, d, n, native)
        lines.append(f"    for i in range(0, x{k}.size, {n or 1}):")
        lines.append(f"        v{k}(x{k}, o{k}, i)")
    exec("\n".join(lines) + "\n", ns)
    fn = numba.njit(ns["run_vec"])
    ins = [_pad(INPUTS[s], n or 1) for s, d, n, _ in VEC_CASES]
    outs = [np.empty(x.size, STORAGE[d]) for x, (s, d, n, _) in zip(ins, VEC_CASES)]
    fn(*[a for pair in zip(ins, outs) for a in pair])
    return {case: (x, o) for case, x, o in zip(VEC_CASES, ins, outs)}


@pytest.mark.parametrize("case", VEC_CASES, ids=lambda c: f"{c[0]}-{c[1]}-n{c[2]}-{c[3]}")
def test_vector_builders(vector_results, scalar_results, case):
    s, d, n, native = case
    x, got = vector_results[case]
    _assert_bits(got, ref_direct(s, d, x), x, f"vector {case}")
    m = INPUTS[s].size  # and identical to the scalar helpers
    _assert_bits(got[:m], scalar_results[(s, d)], INPUTS[s], f"vector vs scalar {case}")


def test_vec_to_from_f32_types():
    mod = ir.Module()
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), []), "f")
    b = ir.IRBuilder(fn.append_basic_block())
    for t in NAMES:
        for n in (1, 3, 16, 64):
            v = ir.Constant(C.storage_ir_type(t, n), None)
            f = C.vec_to_f32(b, t, v)
            assert f.type == ir.VectorType(ir.FloatType(), n)
            assert C.vec_from_f32(b, t, f).type == C.storage_ir_type(t, n)
            for d in NAMES:
                assert C.vec_convert(b, t, d, v).type == C.storage_ir_type(d, n)
    with pytest.raises(TypeError):
        C.vec_to_f32(b, "f32", ir.Constant(C.storage_ir_type("s32", 4), None))


# ---------------------------------------------------------------------------------------------
# The expression API
# ---------------------------------------------------------------------------------------------

def test_expressions_reference_only_runtime_names():
    ident = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?=\()")
    used = set()
    for s, d in PAIRS:
        for e in (C.direct(s, d, "x[i]"), C.to_f32(s, "x[i]"), C.from_f32(d, "x[i]")):
            used.update(ident.findall(e))
    assert used <= set(C.RUNTIME_NAMES)
    assert used == set(C.RUNTIME_NAMES)  # and every exported name is needed
    for name in C.RUNTIME_NAMES:
        assert hasattr(C, name)
    assert C.direct("f32", "f32", "a") == "(a)"
    assert C.direct("f16", "bf16", "a") == "lj_f32_to_bf16(lj_f16_to_f32(a))"
    assert C.direct("s32", "s8", "a") == "lj_s32_to_s8(a)"
    assert C.zero("bf16") == "np.uint16(0)" and C.zero("f32") == "np.float32(0)"


def test_plain_loops_vectorise():
    """f32->bf16 and f32->s8 loops over the helpers compile to zmm/ymm vector code."""
    if "avx2" not in C.target_features():
        pytest.skip("needs AVX2 or better")
    from layoutjit.convert import lj_f32_to_bf16, lj_f32_to_s8

    @numba.njit
    def to_bf16(a, b):
        for i in range(a.size):
            b[i] = lj_f32_to_bf16(a[i])

    @numba.njit
    def to_s8(a, b):
        for i in range(a.size):
            b[i] = lj_f32_to_s8(a[i])

    a = INPUTS["f32"]
    for fn, dt, d in ((to_bf16, np.uint16, "bf16"), (to_s8, np.int8, "s8")):
        out = np.empty(a.size, dt)
        fn(a, out)
        _assert_bits(out, ref_direct("f32", d, a), a, f"loop f32->{d}")
        asm = fn.inspect_asm(fn.signatures[0])
        # (LLVM vectorises loops with 256-bit registers on some AVX-512 CPUs: Sapphire Rapids)
        reg = "[yz]mm" if "avx512f" in C.target_features() else "ymm"
        assert re.search(rf"\bv(psrld|paddd|pandd?|cvttps2dq|rndscaleps|roundps)\b[^\n]*%{reg}",
                         asm), f"f32->{d} loop not vectorised"
        if d == "s8":
            assert re.search(r"v(rndscale|round)ps", asm)  # vector roundeven


def test_cfunc_usage():
    from numba import carray, cfunc

    from layoutjit.convert import lj_f16_to_f32, lj_f32_to_bf16

    sig = types.void(types.CPointer(types.uint16), types.CPointer(types.uint16), types.int64)

    @cfunc(sig)
    def k(p, q, n):
        a = carray(p, n)
        b = carray(q, n)
        for i in range(n):
            b[i] = lj_f32_to_bf16(lj_f16_to_f32(a[i]))

    x = INPUTS["f16"]
    out = np.empty_like(x)
    p16 = ctypes.POINTER(ctypes.c_uint16)
    k.ctypes(x.ctypes.data_as(p16), out.ctypes.data_as(p16), x.size)
    _assert_bits(out, ref_direct("f16", "bf16", x), x, "cfunc f16->bf16")


CACHED_MODULE = '''
import numpy as np
import numba
from layoutjit.convert import {names}
from layoutjit.simd import tile, sfence

T = tile(16, 16, "f32", "bf16")

@numba.njit(cache=True)
def conv(a, b, c):
    for i in range(a.size):
        b[i] = lj_f32_to_bf16(a[i])
        c[i] = lj_f32_to_s8(lj_f64_to_f32(np.float64(a[i])))

@numba.njit(cache=True)
def tr(a, b):
    T(a, 0, 16, b, 0, 16)
    sfence()

@numba.cfunc(numba.types.void(numba.types.CPointer(numba.types.float32),
                              numba.types.CPointer(numba.types.uint16)), cache=True)
def ctr(p, q):
    a = numba.carray(p, (256,))
    b = numba.carray(q, (256,))
    T(a, 0, 16, b, 0, 16)
    b[0] = lj_f32_to_bf16(a[0])
'''

CACHED_DRIVER = '''
import importlib.util, sys
import numpy as np
spec = importlib.util.spec_from_file_location("ljcached", sys.argv[1])
mod = importlib.util.module_from_spec(spec); sys.modules["ljcached"] = mod
spec.loader.exec_module(mod)
a = (np.arange(256, dtype=np.float32) - 128) * 1.37
b = np.empty(256, np.uint16); c = np.empty(256, np.int8); t = np.empty(256, np.uint16)
mod.conv(a, b, c); mod.tr(a, t)
u = np.empty(256, np.uint16)
mod.ctr.ctypes(a.ctypes.data_as(mod.ctr.ctypes.argtypes[0]),
               u.ctypes.data_as(mod.ctr.ctypes.argtypes[1]))
assert (u == t).all()
print("HITS", sum(mod.conv.stats.cache_hits.values()), sum(mod.tr.stats.cache_hits.values()),
      mod.ctr.cache_hits)
print("MISSES", sum(mod.conv.stats.cache_misses.values()), sum(mod.tr.stats.cache_misses.values()))
print("OUT", b.tobytes().hex(), c.tobytes().hex(), t.tobytes().hex())
'''


def test_cache_in_fresh_process(tmp_path):
    """cache=True callers of the helpers (and of a simd tile) load from disk in a new process."""
    mod = tmp_path / "ljcached.py"
    mod.write_text(CACHED_MODULE.format(names=", ".join(C.RUNTIME_NAMES)))
    drv = tmp_path / "driver.py"
    drv.write_text(CACHED_DRIVER)
    env = dict(os.environ)
    env.pop("NUMBA_CACHE_DIR", None)
    runs = []
    for _ in range(2):
        p = subprocess.run([sys.executable, str(drv), str(mod)], capture_output=True, text=True,
                           env=env, timeout=300, cwd=str(tmp_path))
        assert p.returncode == 0, p.stderr
        runs.append(dict(line.split(" ", 1) for line in p.stdout.strip().splitlines()))
    assert runs[0]["MISSES"] == "1 1", runs[0]
    assert runs[0]["HITS"] == "0 0 0", runs[0]
    assert runs[1]["HITS"] == "1 1 1" and runs[1]["MISSES"] == "0 0", runs[1]
    assert runs[0]["OUT"] == runs[1]["OUT"]
    a = (np.arange(256, dtype=np.float32) - 128) * np.float32(1.37)
    b, c, t = (bytes.fromhex(h) for h in runs[1]["OUT"].split())
    assert b == ref_direct("f32", "bf16", a).tobytes()
    assert c == ref_direct("f32", "s8", a).tobytes()
    assert t == ref_direct("f32", "bf16", a).reshape(16, 16).T.copy().tobytes()


SOFT_F16_SCRIPT = textwrap.dedent('''
    import numpy as np, numba
    from layoutjit import convert as C
    from layoutjit.convert import lj_f32_to_f16, lj_f16_to_f32
    assert not C.has_f16c()
    @numba.njit
    def k(h, f, o):
        for i in range(h.size):
            f[i] = lj_f16_to_f32(h[i])
            o[i] = lj_f32_to_f16(f[i])
    h = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    f = np.empty(h.size, np.float32); o = np.empty_like(h)
    k(h, f, o)
    print(f.view(np.uint32).tobytes().hex()[:64], int(np.sum(f.view(np.uint32), dtype=np.uint64)),
          int(np.sum(o, dtype=np.uint64)))
''')


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="x86 Linux check")
def test_without_f16c_uses_emulation():
    """NUMBA_CPU_NAME=x86-64 without F16C: the helpers must not emit an unresolvable libcall."""
    if not C._is_x86():
        pytest.skip("x86 only")
    env = dict(os.environ, NUMBA_CPU_NAME="x86-64", NUMBA_CPU_FEATURES="+sse2")
    p = subprocess.run([sys.executable, "-c", SOFT_F16_SCRIPT], capture_output=True, text=True,
                       env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    h = INPUTS["f16"]
    f = ref_to_f32("f16", h)
    o = ref_from_f32("f16", f)
    assert p.stdout.split() == [f.view(np.uint32).tobytes().hex()[:64],
                                str(int(np.sum(f.view(np.uint32), dtype=np.uint64))),
                                str(int(np.sum(o, dtype=np.uint64)))]

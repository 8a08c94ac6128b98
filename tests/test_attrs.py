"""Reorder attributes: scales, zero points and post-ops, against a numpy reference.

The reference (``expected`` below) evaluates oneDNN's formula in float32, one
operation at a time, exactly as written::

    acc = src_scale * (src - src_zp)
    post-ops in order: sum: acc += beta * dst_old; eltwise: acc = f(acc); binary: acc = op(acc, src1)
    dst = convert(acc / dst_scale + dst_zp)      (round half to even, saturate)

so that results must match bit for bit (the eltwise algorithms used here --
relu, linear, clip, abs -- are exact in float32). Layouts and conversions come
from tests/reference.py; nothing here calls layoutjit to compute an expectation.
"""

from __future__ import annotations

import numpy as np
import pytest

import layoutjit as lj
import reference as ref

M = lj.MemoryDesc
F = np.float32
DIMS = (2, 17, 3, 5)
SENT = 0x5A


# ---------------------------------------------------------------- reference
def _bcast(dims, mask: int, values) -> np.ndarray:
    shape = [d if mask >> i & 1 else 1 for i, d in enumerate(dims)]
    return np.asarray(values).reshape(shape)


def _eltwise_f32(alg: str, acc: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    a, b = F(alpha), F(beta)
    if alg == "relu":
        return np.where(acc > 0, acc, (a * acc).astype(F)) if a != 0 else np.maximum(acc, F(0))
    if alg == "linear":
        return (a * acc).astype(F) + b
    if alg == "clip":
        return np.where(acc <= a, a, np.where(acc > b, b, acc)).astype(F)
    if alg == "abs":
        return np.abs(acc)
    raise AssertionError(alg)


def _binary_f32(alg: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
                "max": np.maximum, "min": np.minimum}[alg](a, b).astype(F)


def expected(src, src_md, dst_md, dst_old, *, scales=None, zero_points=None, post_ops=(),
             binary=()):
    """The destination buffer the formula gives; ``scales``/``zero_points``: {side: (mask, values)}."""
    scales, zero_points = scales or {}, zero_points or {}
    dims = tuple(dst_md.dims)
    sdt, ddt = str(src_md.dtype), str(dst_md.dtype)
    with np.errstate(all="ignore"):
        acc = ref.to_f32(ref.logical(src, src_md), sdt).astype(F)
        if "src" in zero_points:
            acc = (acc - _bcast(dims, *zero_points["src"]).astype(F)).astype(F)
        if "src" in scales:
            acc = (_bcast(dims, *scales["src"]).astype(F) * acc).astype(F)
        b_iter = iter(binary)
        for p in post_ops:
            if p[0] == "sum":
                if p[1] == 0.0:  # oneDNN does not read dst for a zero scale (no -0 + +0 = +0)
                    continue
                old = ref.to_f32(ref.logical(dst_old, dst_md), ddt).astype(F)
                acc = (acc + (F(p[1]) * old).astype(F)).astype(F)
            elif p[0] == "eltwise":
                acc = _eltwise_f32(p[1], acc, *(tuple(p[2:]) + (0.0, 0.0))[:2])
            else:
                md1 = p[2]
                s1 = ref.to_f32(ref.logical(next(b_iter), md1), str(md1.dtype)).astype(F)
                acc = _binary_f32(p[1], acc, s1)
        if "dst" in scales:
            acc = np.true_divide(acc, _bcast(dims, *scales["dst"]).astype(F)).astype(F)
        if "dst" in zero_points:
            acc = (acc + _bcast(dims, *zero_points["dst"]).astype(F)).astype(F)
    out = np.asarray(dst_old).copy()
    flat = out.reshape(-1).view(ref.STORAGE[ddt])
    off = ref.offsets(dst_md)
    valid = np.zeros(off.shape, dtype=bool)
    valid[tuple(slice(0, n) for n in dims)] = True
    flat[off[~valid]] = 0
    flat[off[valid].reshape(-1)] = ref.from_f32(acc.reshape(-1), ddt) if ddt != "f32" else acc.reshape(-1)
    return out


# ---------------------------------------------------------------- helpers
def buffer_of(md: M, logical: np.ndarray, garbage: int = SENT) -> np.ndarray:
    """A buffer of md holding ``logical`` (storage values) with garbage in padding and gaps."""
    n = max(md.get_size(), md.required_bytes())
    buf = np.full(n, garbage, dtype=np.uint8).view(md.dtype.storage)
    off = ref.offsets(md)[tuple(slice(0, d) for d in md.dims)]
    buf[off.reshape(-1)] = np.asarray(logical).reshape(-1)
    return buf


def f32_values(rng, dims, scale=3.0) -> np.ndarray:
    x = (rng.normal(0, scale, dims)).astype(F)
    flat = x.reshape(-1)
    # ties for round-half-even (with power-of-two scales), saturation, zeros
    flat[:14] = [0.25, 0.75, 1.25, -0.25, -0.75, -1.25, 0.0, -0.0, 1e6, -1e6, 63.75, -64.25,
                 31.875, 2.5]
    return x


def assert_same(got: np.ndarray, exp: np.ndarray) -> None:
    g, e = got.reshape(-1).view(np.uint8), exp.reshape(-1).view(np.uint8)
    assert g.shape == e.shape
    if not np.array_equal(g, e):
        gi = got.reshape(-1)
        ei = exp.reshape(-1)
        bad = np.flatnonzero(gi.view(np.uint8 if gi.dtype.itemsize == 1 else gi.dtype) !=
                             ei.view(np.uint8 if ei.dtype.itemsize == 1 else ei.dtype))
        raise AssertionError(f"{bad.size} mismatches, first at {bad[:6].tolist()}: "
                             f"got {gi[bad[:6]].tolist()} expected {ei[bad[:6]].tolist()}")


@pytest.fixture(scope="module")
def rng():
    return np.random.default_rng(1234)


NCHW = M(DIMS, "f32", "nchw")


def _run(src_md, dst_md, src, *, scales=None, zero_points=None, post_ops=(), binary=(), dst_old=None):
    """Compile with the masks, run with the values, compare with the reference."""
    k = lj.compile_reorder(src_md, dst_md,
                           scales={s: m for s, (m, _) in (scales or {}).items()} or None,
                           zero_points={s: m for s, (m, _) in (zero_points or {}).items()} or None,
                           post_ops=list(post_ops) or None)
    if dst_old is None:
        dst_old = np.full(max(dst_md.get_size(), dst_md.required_bytes()), SENT,
                          dtype=np.uint8).view(dst_md.dtype.storage)
    dst = dst_old.copy()
    rt = {}
    if scales:
        rt["scales"] = {s: np.asarray(v, dtype=F).reshape(-1) for s, (_, v) in scales.items()}
    if zero_points:
        rt["zero_points"] = {s: np.asarray(v, dtype=np.int32).reshape(-1) for s, (_, v) in zero_points.items()}
    if binary:
        rt["binary"] = list(binary)
    out = k(src, dst, **rt)
    assert out is dst
    exp = expected(src, src_md, dst_md, dst_old, scales=scales, zero_points=zero_points,
                   post_ops=post_ops, binary=binary)
    assert_same(dst, exp)
    return k, dst


# ---------------------------------------------------------------- quantization
@pytest.mark.parametrize("ddt", ["s8", "u8"])
def test_quantize_per_tensor(rng, ddt):
    x = f32_values(rng, DIMS)
    dst_md = M(DIMS, ddt, "nChw16c")
    zp = 3 if ddt == "s8" else 128
    for scale in (0.5, 0.1):  # 0.5: exact ties; 0.1: inexact division
        _run(NCHW, dst_md, x.reshape(-1), scales={"dst": (0, [scale])}, zero_points={"dst": (0, [zp])})


@pytest.mark.parametrize("ddt", ["s8", "u8"])
def test_quantize_per_channel(rng, ddt):
    x = f32_values(rng, DIMS, scale=20.0)
    dst_md = M(DIMS, ddt, "nChw16c")
    sc = np.where(np.arange(17) % 2, 0.25, 0.37).astype(F) * (1 + np.arange(17) / 8).astype(F)
    zps = (np.arange(17) * 7 - 50) if ddt == "s8" else (np.arange(17) * 9 + 20)
    _run(NCHW, dst_md, x.reshape(-1), scales={"dst": (2, sc)}, zero_points={"dst": (2, zps)})
    # per channel scale, one zero point for all
    _run(NCHW, dst_md, x.reshape(-1), scales={"dst": (2, sc)}, zero_points={"dst": (0, [5])})


def test_quantize_weights_per_output_channel(rng):
    dims = (19, 21, 3, 3)
    w = f32_values(rng, dims, scale=0.3)
    src_md = M(dims, "f32", "oihw")
    amax = np.abs(w).reshape(19, -1).max(axis=1).astype(F)
    scales = (amax / F(127)).astype(F)
    for tag in ("OIhw16i16o", "OIhw4i16o4i"):
        _run(src_md, M(dims, "s8", tag), w.reshape(-1), scales={"dst": (1, scales)})


@pytest.mark.parametrize("sdt", ["s8", "u8"])
def test_dequantize(rng, sdt):
    lo, hi = (-128, 127) if sdt == "s8" else (0, 255)
    q = rng.integers(lo, hi + 1, DIMS).astype(ref.STORAGE[sdt])
    src_md = M(DIMS, sdt, "nChw16c")
    src = buffer_of(src_md, q)
    sc = (0.01 * (1 + np.arange(17))).astype(F)
    zp = -7 if sdt == "s8" else 128
    _run(src_md, NCHW, src, scales={"src": (2, sc)}, zero_points={"src": (0, [zp])})
    _run(src_md, NCHW, src, scales={"src": (0, [0.0625])},
         zero_points={"src": (2, np.arange(17) - 8)})


def test_requantize_with_both_sides(rng):
    q = rng.integers(-128, 128, DIMS).astype(np.int8)
    src_md = M(DIMS, "s8", "nhwc")
    src = buffer_of(src_md, q)
    _run(src_md, M(DIMS, "u8", "nChw8c"), src,
         scales={"src": (2, (0.05 * (1 + np.arange(17) % 3)).astype(F)), "dst": (0, [0.1])},
         zero_points={"src": (0, [2]), "dst": (0, [120])},
         post_ops=[("eltwise", "relu", 0.0, 0.0)])


def test_blocked_padding_stays_zero_with_zero_points(rng):
    x = f32_values(rng, DIMS)
    dst_md = M(DIMS, "u8", "nChw16c")
    k, dst = _run(NCHW, dst_md, x.reshape(-1), scales={"dst": (0, [1.0])},
                  zero_points={"dst": (0, [77])})
    off = ref.offsets(dst_md)
    pad = off[:, 17:]
    assert pad.size and (dst[pad.reshape(-1)] == 0).all()


# ---------------------------------------------------------------- post-ops
@pytest.mark.parametrize("beta", [0.0, 1.0, 0.5])
def test_sum(rng, beta):
    x = f32_values(rng, DIMS)
    dst_md = M(DIMS, "f32", "nChw16c")
    old = buffer_of(dst_md, rng.normal(0, 4, DIMS).astype(F), garbage=0x7F)  # garbage padding
    k, dst = _run(NCHW, dst_md, x.reshape(-1), post_ops=[("sum", beta)], dst_old=old)
    if beta == 0.0:  # dst_old is not read: same result on a fresh buffer
        assert np.array_equal(k(x.reshape(-1)), dst)


def test_sum_into_an_integer_destination(rng):
    x = f32_values(rng, DIMS)
    dst_md = M(DIMS, "s8", "nChw16c")
    old = buffer_of(dst_md, rng.integers(-100, 100, DIMS).astype(np.int8))
    _run(NCHW, dst_md, x.reshape(-1), scales={"src": (0, [4.0]), "dst": (0, [0.5])},
         post_ops=[("sum", 0.5)], dst_old=old)


def test_sum_needs_dst():
    k = lj.compile_reorder(NCHW, M(DIMS, "f32", "nChw16c"), post_ops=[("sum", 1.0)])
    with pytest.raises(lj.LayoutError):
        k(np.zeros(int(np.prod(DIMS)), F))


@pytest.mark.parametrize("bias_tag", ["nchw", "nChw16c", "nhwc"])
def test_binary_per_channel_bias(rng, bias_tag):
    x = f32_values(rng, DIMS)
    bias_md = M((1, 17, 1, 1), "f32", bias_tag)
    bias = buffer_of(bias_md, rng.normal(0, 1, (1, 17, 1, 1)).astype(F), garbage=0x7F)
    _run(NCHW, M(DIMS, "f32", "nChw16c"), x.reshape(-1),
         post_ops=[("binary", "add", bias_md)], binary=[bias])


def test_binary_full_tensor_other_layout_and_types(rng):
    x = f32_values(rng, DIMS)
    full_md = M(DIMS, "f32", "nhwc")
    full = buffer_of(full_md, rng.normal(0, 2, DIMS).astype(F))
    s8_md = M((1, 17, 1, 1), "s8", "nChw16c")  # an integer src1 is converted to f32
    s8 = buffer_of(s8_md, rng.integers(-5, 6, (1, 17, 1, 1)).astype(np.int8))
    row_md = M((2, 1, 1, 5), "bf16", "nchw")  # broadcast over channels and rows
    row = buffer_of(row_md, ref.from_f32(rng.normal(0, 1, (2, 1, 1, 5)).astype(F), "bf16"))
    for alg in ("mul", "div", "max", "min", "sub"):
        _run(NCHW, M(DIMS, "f32", "nChw8c"), x.reshape(-1),
             post_ops=[("binary", alg, full_md), ("binary", "add", s8_md), ("binary", "sub", row_md)],
             binary=[full, s8, row])


def test_binary_accepts_memory_objects(rng):
    x = f32_values(rng, DIMS)
    bias_md = M((1, 17, 1, 1), "f32", "nChw16c")
    bias = rng.normal(0, 1, (1, 17, 1, 1)).astype(F)
    m = lj.Memory.from_numpy(bias, bias_md)
    k = lj.compile_reorder(NCHW, M(DIMS, "f32", "nhwc"), post_ops=[("binary", "add", bias_md)])
    got = k(x.reshape(-1), binary=[m])
    assert np.array_equal(got.reshape(2, 3, 5, 17), (x + bias).transpose(0, 2, 3, 1))


def test_fused_equals_the_unfused_sequence(rng):
    """One kernel with src scale and four post-ops == five separate kernels (f32, so exact)."""
    x = f32_values(rng, DIMS)
    blocked = M(DIMS, "f32", "nChw16c")
    bias_md = M((1, 17, 1, 1), "f32", "nchw")
    bias = rng.normal(0, 1, 17).astype(F)
    full_md = M(DIMS, "f32", "nhwc")
    full = buffer_of(full_md, rng.normal(0, 1, DIMS).astype(F))
    sc = (0.5 + np.arange(17) / 16).astype(F)
    post = [("eltwise", "relu", 0.1, 0.0), ("binary", "add", bias_md),
            ("eltwise", "linear", 2.0, -1.0), ("binary", "mul", full_md),
            ("eltwise", "clip", -3.0, 5.0)]
    fused = lj.compile_reorder(NCHW, blocked, scales={"src": 2}, post_ops=post)
    got = fused(x.reshape(-1), scales={"src": sc}, binary=[bias, full])

    a = lj.compile_reorder(NCHW, blocked, scales={"src": 2})(x.reshape(-1), scales={"src": sc})
    lj.compile_eltwise(blocked, "relu", 0.1)(a, a)
    b = lj.compile_reorder(blocked, blocked, post_ops=[("binary", "add", bias_md)])(a, binary=[bias])
    lj.compile_eltwise(blocked, "linear", 2.0, -1.0)(b, b)
    c = lj.compile_reorder(blocked, blocked, post_ops=[("binary", "mul", full_md)])(b, binary=[full])
    lj.compile_eltwise(blocked, "clip", -3.0, 5.0)(c, c)
    assert np.array_equal(got.view(np.uint32), c.view(np.uint32))
    exp = expected(x.reshape(-1), NCHW, blocked, np.zeros_like(got), scales={"src": (2, sc)},
                   post_ops=post, binary=[bias, full])
    assert_same(got, exp)


def test_order_of_post_ops_matters(rng):
    x = f32_values(rng, DIMS)
    dst = M(DIMS, "f32", "nChw16c")
    one = [("eltwise", "relu", 0.0, 0.0), ("eltwise", "linear", 1.0, -1.0)]
    _, a = _run(NCHW, dst, x.reshape(-1), post_ops=one)
    _, b = _run(NCHW, dst, x.reshape(-1), post_ops=one[::-1])
    assert not np.array_equal(a, b)
    assert lj.compile_reorder(NCHW, dst, post_ops=one) is not lj.compile_reorder(NCHW, dst, post_ops=one[::-1])


def test_thirty_two_post_ops(rng):
    small = M((2, 3, 4), "f32", "abc")
    x = rng.normal(0, 1, (2, 3, 4)).astype(F)
    post = [("eltwise", "linear", 1.0, 0.5)] * 32
    _run(small, M((2, 3, 4), "f32", "cba"), x.reshape(-1), post_ops=post)
    with pytest.raises(lj.LayoutError):
        lj.compile_reorder(small, M((2, 3, 4), "f32", "cba"), post_ops=post + [("sum", 1.0)])


# ---------------------------------------------------------------- errors
S8 = M(DIMS, "s8", "nChw16c")


@pytest.mark.parametrize("kw", [
    {"scales": {"src": -1}}, {"scales": {"src": 16}}, {"scales": {"dst": 1.0}},
    {"scales": {"dst": True}}, {"scales": {"wei": 0}}, {"scales": {"src": "2"}},
    {"zero_points": {"dst": 1 << 4}}, {"zero_points": {"src": 0}},  # the f32 source takes none
    {"zero_points": {"bias": 0}},
])
def test_bad_masks_and_zero_points(kw):
    with pytest.raises(lj.LayoutError):
        lj.compile_reorder(NCHW, S8, **kw)


def test_zero_points_need_integer_types():
    with pytest.raises(lj.LayoutError):
        lj.compile_reorder(NCHW, M(DIMS, "f32", "nhwc"), zero_points={"dst": 0})
    with pytest.raises(lj.LayoutError):
        lj.compile_reorder(M(DIMS, "bf16", "nchw"), S8, zero_points={"src": 0})
    lj.compile_reorder(M(DIMS, "s32", "nchw"), S8, zero_points={"src": 0, "dst": 0})


@pytest.mark.parametrize("post", [
    [("eltwise", "nope", 0.0, 0.0)], [("eltwise", "gelu")], [("binary", "pow", M(DIMS, "f32", "nchw"))],
    [("binary", "add", M((1, 17, 1, 2), "f32", "nchw"))],          # 2 does not broadcast to 5
    [("binary", "add", M((1, 17, 1), "f32", "abc"))],              # wrong rank
    [("binary", "add", M(DIMS, "f32", "any"))],                    # no concrete layout
    [("binary", "add", "nchw")], [("prelu", 0.1)], ["sum"], [("sum", 1.0, 2.0)],
    [("eltwise", "clip", 1.0, 0.0)], [("eltwise",)],
    [("eltwise", "relu", 0.0, 0.0)] * 33,
])
def test_bad_post_ops(post):
    with pytest.raises(lj.LayoutError):
        lj.compile_reorder(NCHW, M(DIMS, "f32", "nChw16c"), post_ops=post)


@pytest.fixture(scope="module")
def quant_kernel():
    bias_md = M((1, 17, 1, 1), "f32", "nchw")
    return lj.compile_reorder(NCHW, S8, scales={"src": 2, "dst": 0}, zero_points={"dst": 0},
                              post_ops=[("binary", "add", bias_md)])


@pytest.mark.parametrize("rt", [
    {},                                                                            # nothing given
    {"scales": {"src": np.ones(17, F)}, "zero_points": {"dst": [0]}, "binary": [np.zeros(17, F)]},
    {"scales": {"src": np.ones(16, F), "dst": [1.0]}, "zero_points": {"dst": [0]},
     "binary": [np.zeros(17, F)]},                                                 # wrong length
    {"scales": {"src": np.ones(17, np.float64), "dst": [1.0]}, "zero_points": {"dst": [0]},
     "binary": [np.zeros(17, F)]},                                                 # wrong dtype
    {"scales": {"src": np.ones(17, F), "dst": [1.0]}, "zero_points": {"dst": np.zeros(1, np.int64)},
     "binary": [np.zeros(17, F)]},                                                 # zp dtype
    {"scales": {"src": np.ones(17, F), "dst": [1.0]}, "zero_points": {"dst": [0.5]},
     "binary": [np.zeros(17, F)]},                                                 # fractional zp
    {"scales": {"src": np.ones(17, F), "dst": [1.0]}, "zero_points": {"dst": [0]}},  # no binary
    {"scales": {"src": np.ones(17, F), "dst": [1.0]}, "zero_points": {"dst": [0]},
     "binary": [np.zeros(16, F)]},                                                 # small binary
    {"scales": {"src": np.ones(17, F), "dst": [1.0]}, "zero_points": {"dst": [0], "src": [0]},
     "binary": [np.zeros(17, F)]},                                                 # not compiled
    {"scales": {"src": np.ones(17, F), "dst": [1.0]}, "zero_points": {"dst": [0]},
     "binary": [np.zeros(17, F)], "bias": 1},                                      # unknown kwarg
    {"scales": [1.0], "zero_points": {"dst": [0]}, "binary": [np.zeros(17, F)]},   # not a dict
])
def test_bad_runtime_values(quant_kernel, rt):
    with pytest.raises(lj.LayoutError):
        quant_kernel(np.zeros(int(np.prod(DIMS)), F), **rt)


def test_good_runtime_values_for_the_error_kernel(quant_kernel):
    x = np.arange(int(np.prod(DIMS)), dtype=F) / 10
    out = quant_kernel(x, scales={"src": np.ones(17, F), "dst": [0.5]}, zero_points={"dst": [1]},
                       binary=[np.ones(17, F)])
    assert out.nbytes == S8.get_size()
    back = lj.from_layout(out, S8).reshape(-1).astype(np.int64)
    assert np.array_equal(back, np.clip(np.rint((x + 1) / F(0.5) + 1), -128, 127).astype(np.int64))


def test_values_given_to_a_kernel_without_attributes():
    k = lj.compile_reorder(NCHW, M(DIMS, "f32", "nhwc"))
    with pytest.raises(lj.LayoutError):
        k(np.zeros(int(np.prod(DIMS)), F), scales={"src": [1.0]})


# ---------------------------------------------------------------- relu in registers
@pytest.mark.parametrize("alpha", [0.0, 0.25])
@pytest.mark.parametrize("dims,stag,dtag", [((2, 17, 5, 4), "nchw", "nChw16c"),
                                            ((3, 40, 7, 9), "nchw", "nhwc"),
                                            ((64, 48), "ab", "ba"),
                                            ((2, 40, 5, 7), "nhwc", "nChw16c"),   # runs (lines)
                                            ((32, 48, 3, 3), "oihw", "OIhw16i16o")])  # cols
def test_relu_applied_in_register_tiles(rng, dims, stag, dtag, alpha):
    """f32 -> f32 transposes (and runs moved one per call) with relu post-ops apply them
    inside the tile micro-kernel: bit-exact with oneDNN's relu (-0 -> +0 for alpha 0, NaN
    kept), padding +0."""
    s, d = M(dims, "f32", stag), M(dims, "f32", dtag)
    k = lj.compile_reorder(s, d, post_ops=[("eltwise", "relu", alpha, 0.0)] * 2)
    assert "post=(('relu'" in k.source, k.source
    x = rng.standard_normal(s.get_size() // 4).astype(F)
    x[::7], x[::11], x[::13] = -0.0, np.nan, 0.0
    base = ref.reorder(x, s, d, np.zeros(d.get_size() // 4, F))
    want = base
    with np.errstate(invalid="ignore"):
        for _ in range(2):
            if alpha == 0.0:
                want = np.where(want <= 0, F(0), want).astype(F)
            else:
                want = np.where(want > 0, want, want * F(alpha)).astype(F)
    y = np.full(d.get_size() // 4, 7, F)
    k(x, y)
    np.testing.assert_array_equal(y.view(np.uint32), want.view(np.uint32))


def test_negative_slope_relu_keeps_the_buffer_path(rng):
    """alpha < 0 would turn the +0 of padding into -0 in registers: not applied there."""
    s, d = M((2, 17, 5, 4), "f32", "nchw"), M((2, 17, 5, 4), "f32", "nChw16c")
    k = lj.compile_reorder(s, d, post_ops=[("eltwise", "relu", -0.5, 0.0)])
    assert "post=" not in k.source
    x = rng.standard_normal(s.get_size() // 4).astype(F)
    base = ref.reorder(x, s, d, np.zeros(d.get_size() // 4, F))
    np.testing.assert_array_equal(k(x), np.where(base > 0, base, base * F(-0.5)))

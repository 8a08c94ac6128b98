"""compile_eltwise on padded blocked, strided (gapped), submemory and plain layouts.

Every oneDNN eltwise algorithm, f32 and s8, in place and out of place, against
the independent float64 reference in eltwise_reference.py (benchdnn's
tolerances). Buffers start full of a sentinel byte: afterwards the logical
elements hold f(x), the zero padding of a blocked layout is zero (even where
f(0) != 0), and every other byte (gaps of strided layouts, bytes around the
buffer) still holds the sentinel.

One kernel serves both the in-place and the out-of-place run of a case, so the
cost is one compile per (layout, dtype, algorithm).
"""

from __future__ import annotations

import numpy as np
import pytest

import eltwise_reference as eref
import layoutjit as lj
import reference as ref

M = lj.MemoryDesc
SENT = 0xA5
GUARD = 64
DIMS = [2, 17, 3, 3]

# (alpha, beta) per algorithm, chosen so that f(0) != 0 wherever the algorithm allows it
PARAMS = {
    "relu": (0.1, 0.0), "tanh": (0.0, 0.0), "elu": (0.5, 0.0), "square": (0.0, 0.0),
    "abs": (0.0, 0.0), "sqrt": (0.0, 0.0), "linear": (0.5, 1.25), "soft_relu": (1.0, 0.0),
    "logistic": (0.0, 0.0), "exp": (0.0, 0.0), "gelu_tanh": (0.0, 0.0), "gelu_erf": (0.0, 0.0),
    "swish": (1.0, 0.0), "log": (0.0, 0.0), "clip": (0.25, 2.0), "clip_v2": (0.25, 2.0),
    "pow": (0.5, 2.0), "round": (0.0, 0.0), "hardsigmoid": (0.2, 0.5), "hardswish": (0.2, 0.5),
    "mish": (0.0, 0.0),
}
assert set(PARAMS) == set(eref.ELTWISE)

LAYOUTS = {
    "plain": lambda dt: M(DIMS, dt, "nchw"),
    "blocked": lambda dt: M(DIMS, dt, "nChw16c"),              # C = 17 padded to 32
    "gaps": lambda dt: M(DIMS, dt, strides=[347, 20, 5, 1]),    # gaps after w, h, c and n
}
EXTRA_LAYOUTS = {
    # blocked, padded and gapped at once
    "blocked_gaps": lambda dt: M.from_blocking(DIMS, dt, [720, 352, 112, 32], [16], [1]),
    # the right border of a padded parent: inherits its padding (8 channels of a 16-block)
    "sub_border": lambda dt: M([2, 40, 3, 3], dt, "nChw16c").submemory_desc([2, 8, 3, 3], [0, 32, 0, 0]),
    # an interior window of a plain parent
    "sub_plain": lambda dt: M([3, 20, 4, 5], dt, "nchw").submemory_desc(DIMS, [1, 2, 1, 1]),
    "blocked_8c": lambda dt: M(DIMS, dt, "nChw8c"),
}


def _layout_bytes(md: M) -> int:
    return max(md.get_size(), md.required_bytes())


def _positions(md: M) -> tuple[np.ndarray, np.ndarray]:
    """(element offsets of the logical elements in logical order, of the padding)."""
    off = ref.offsets(md)
    valid = np.zeros(off.shape, dtype=bool)
    valid[tuple(slice(0, n) for n in md.dims)] = True
    return off[tuple(slice(0, n) for n in md.dims)].reshape(-1), off[~valid]


def _byte_mask(md: M, elem_offsets: np.ndarray, nbytes: int) -> np.ndarray:
    mask = np.zeros(nbytes, dtype=bool)
    isz = md.dtype.size
    for k in range(isz):
        mask[elem_offsets * isz + k] = True
    return mask


def _values(md: M, rng: np.random.Generator) -> np.ndarray:
    n = int(np.prod(md.dims))
    if str(md.dtype) == "s8":
        v = rng.integers(-128, 128, n).astype(np.int8)
        v[:6] = [0, 1, -1, 127, -128, 2]
        return v
    v = (rng.normal(0, 2.5, n)).astype(np.float32)
    v[:10] = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 3.0, -3.0, 12.0, -20.0]
    return v


def _check_values(alg: str, dt: str, got: np.ndarray, x: np.ndarray) -> None:
    alpha, beta = PARAMS[alg]
    if dt == "f32":
        bad = eref.mismatches(alg, got, x, alpha, beta)
        exp = eref.eltwise_reference(alg, x, alpha, beta)
        assert bad.size == 0, eref.describe(alg, bad, got, x, exp, alpha, beta)
        return
    # integer: computed in f32, converted back with round-half-even and saturation; any
    # value the f32 result may take within the tolerance is accepted
    xf = x.astype(np.float32)
    f = eref.eltwise_reference(alg, xf, alpha, beta).astype(np.float64)
    tol = eref.tolerance(alg)
    with np.errstate(all="ignore"):
        m = np.where(np.isfinite(f), tol.rtol * np.abs(f) + tol.atol, 0.0)
        lo = ref.from_f32((f - m).astype(np.float32), dt).astype(np.int64)
        hi = ref.from_f32((f + m).astype(np.float32), dt).astype(np.int64)
    g = got.astype(np.int64)
    bad = np.flatnonzero((g < lo) | (g > hi))
    assert bad.size == 0, [(int(x[i]), int(g[i]), float(f[i])) for i in bad[:8]]


def _fill(md: M, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A sentinel-filled guarded buffer holding x at md's logical positions: (whole, buffer)."""
    nbytes = _layout_bytes(md)
    whole = np.full(nbytes + 2 * GUARD, SENT, dtype=np.uint8)
    buf = whole[GUARD:GUARD + nbytes].view(md.dtype.storage)
    logical, _ = _positions(md)
    buf[logical] = x
    return whole, buf


def run_case(md: M, alg: str) -> None:
    dt = str(md.dtype)
    alpha, beta = PARAMS[alg]
    k = lj.compile_eltwise(md, alg, alpha, beta)
    rng = np.random.default_rng(abs(hash((alg, dt))) % 2**32)
    x = _values(md, rng)
    logical, padding = _positions(md)
    nbytes = _layout_bytes(md)
    untouched = ~_byte_mask(md, np.concatenate([logical, padding]), nbytes)

    # out of place: src keeps every byte; dst gets f(x), zero padding, sentinel elsewhere
    s_whole, src = _fill(md, x)
    s_before = s_whole.copy()
    d_whole = np.full(nbytes + 2 * GUARD, SENT, dtype=np.uint8)
    dst = d_whole[GUARD:GUARD + nbytes].view(md.dtype.storage)
    assert k(src, dst) is dst
    assert np.array_equal(s_whole, s_before), "eltwise wrote into its source"
    _check_values(alg, dt, dst[logical], x)
    assert (dst[padding] == 0).all(), "padding is not zero"
    inner = d_whole[GUARD:GUARD + nbytes]
    assert (inner[untouched] == SENT).all(), "a gap of the layout was written"
    assert (d_whole[:GUARD] == SENT).all() and (d_whole[-GUARD:] == SENT).all()

    # in place: the padding held the sentinel (garbage) and must come out zero
    w_whole, buf = _fill(md, x)
    assert k(buf, buf) is buf
    _check_values(alg, dt, buf[logical], x)
    assert (buf[padding] == 0).all(), "padding is not zero after an in-place eltwise"
    assert np.array_equal(buf.view(np.uint8), dst.view(np.uint8)), "in place differs from out of place"
    assert (w_whole[:GUARD] == SENT).all() and (w_whole[-GUARD:] == SENT).all()


@pytest.mark.parametrize("dt", ["f32", "s8"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("alg", list(PARAMS))
def test_every_algorithm(alg, layout, dt):
    run_case(LAYOUTS[layout](dt), alg)


@pytest.mark.parametrize("layout", list(EXTRA_LAYOUTS))
@pytest.mark.parametrize("alg", ["exp", "linear", "logistic", "clip"])
def test_more_layouts(alg, layout):
    run_case(EXTRA_LAYOUTS[layout]("f32"), alg)


@pytest.mark.parametrize("alg", ["linear", "exp"])
def test_more_layouts_integer(alg):
    run_case(EXTRA_LAYOUTS["blocked_gaps"]("s8"), alg)


def test_integer_saturates_and_rounds_half_even():
    md = M([1, 20, 1, 1], "u8", "nChw16c")
    k = lj.compile_eltwise(md, "linear", 0.5, 0.0)  # x / 2: ties at every odd x
    x = np.arange(0, 20, dtype=np.uint8)
    buf = lj.to_layout(x.reshape(md.dims), md)
    out = lj.from_layout(k(buf, buf), md).reshape(-1)
    assert out.tolist() == np.rint(x / 2).astype(np.uint8).tolist()  # 0.5 -> 0, 1.5 -> 2, ...
    sq = lj.compile_eltwise(md, "square")
    out = lj.from_layout(sq(lj.to_layout(x.reshape(md.dims), md)), md).reshape(-1)
    assert out.tolist() == np.minimum(x.astype(np.int64) ** 2, 255).tolist()


def test_same_arguments_give_the_cached_kernel():
    md = LAYOUTS["blocked"]("f32")
    a = lj.compile_eltwise(md, "relu", 0.1)
    assert lj.compile_eltwise(M(DIMS, "f32", "nChw16c"), "eltwise_relu", 0.1, 0.0) is a
    assert lj.compile_eltwise(md, "relu", 0.2) is not a


def test_eltwise_on_memory_objects_in_place():
    md = LAYOUTS["blocked"]("f32")
    x = np.linspace(-2, 2, int(np.prod(DIMS)), dtype=np.float32).reshape(DIMS)
    m = lj.Memory.from_numpy(x, md)
    k = lj.compile_eltwise(md, "relu", 0.1)
    assert k(m, m) is m
    assert np.array_equal(m.to_numpy(), np.where(x > 0, x, np.float32(0.1) * x))


@pytest.mark.parametrize("args", [("nope",), ("eltwise_gelu",), ("bounded_relu", 1.0),
                                  ("clip", 2.0, 1.0), (3,), ("clip", float("nan"), 1.0),
                                  ("relu_use_dst_for_bwd", -1.0)])
def test_bad_algorithms_and_parameters(args):
    with pytest.raises(lj.LayoutError):
        lj.compile_eltwise(LAYOUTS["plain"]("f32"), *args)


def test_non_numeric_alpha_is_a_layout_error():
    with pytest.raises(lj.LayoutError):
        lj.compile_eltwise(LAYOUTS["plain"]("f32"), "relu", "a")


def test_bad_descriptors_and_buffers():
    with pytest.raises(lj.LayoutError):
        lj.compile_eltwise(M(DIMS, "f32", "any"), "relu")
    with pytest.raises(lj.LayoutError):
        lj.compile_eltwise("nchw", "relu")
    md = LAYOUTS["plain"]("f32")
    k = lj.compile_eltwise(md, "relu", 0.1)
    n = int(np.prod(DIMS))
    with pytest.raises(lj.LayoutError):
        k(np.zeros(n - 1, np.float32), np.zeros(n, np.float32))
    with pytest.raises(lj.LayoutError):
        k(np.zeros(n, np.float32), np.zeros(2 * n, np.float32)[::2])  # not contiguous
    buf = np.zeros(n + 1, np.float32)
    with pytest.raises(lj.LayoutError):  # partial overlap is refused (only exact in-place is allowed)
        k(buf[:n], buf[1:])


def test_the_layouts_have_what_they_claim():
    """Guard for the tests above: padding and gaps really exist where expected."""
    def gaps(md):
        logical, padding = _positions(md)
        return int((~_byte_mask(md, np.concatenate([logical, padding]), _layout_bytes(md))).sum())

    for name, make in {**LAYOUTS, **EXTRA_LAYOUTS}.items():
        md = make("f32")
        _, padding = _positions(md)
        has_pad = name in ("blocked", "blocked_gaps", "sub_border", "blocked_8c")
        has_gaps = name in ("gaps", "blocked_gaps", "sub_plain", "sub_border")
        assert (padding.size > 0) == has_pad, name
        assert (gaps(md) > 0) == has_gaps, name

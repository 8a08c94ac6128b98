"""layoutjit.eltwise_ops against the independent float64 reference in eltwise_reference.py.

Every (algorithm, alpha, beta) case below is compiled into ONE Numba module
(one compile for all of them: a scalar function returning the tuple of all
expressions, so that its return type proves every expression is float32,
and an array kernel that calls it), then checked on edge values, random
values and hypothesis-generated float32 arrays. Tolerances: see
eltwise_reference.tolerance (benchdnn's). When oneDNN v3 is installed, the
results, the accepted alpha/beta and the binary ops are also compared with
oneDNN's own eltwise and binary primitives.
"""

from __future__ import annotations

import ctypes
import importlib.util
import re

import numba
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import eltwise_reference as ref  # tests/ is on sys.path (conftest.py)
import layoutjit
from layoutjit import eltwise_ops as eo

F32 = np.float32
INF = float("inf")

CASES: list[tuple[str, float, float]] = [
    ("relu", 0.0, 0.0), ("relu", 0.1, 0.0), ("relu", -0.5, 0.0), ("relu", 2.5, 0.0),
    ("tanh", 0.0, 0.0),
    ("elu", 1.0, 0.0), ("elu", 0.5, 0.0), ("elu", 2.0, 0.0), ("elu", -1.5, 0.0), ("elu", 0.0, 0.0),
    ("square", 0.0, 0.0), ("abs", 0.0, 0.0), ("sqrt", 0.0, 0.0),
    ("linear", 2.0, -1.0), ("linear", 1.0, 0.0), ("linear", -0.5, 3.0), ("linear", 0.0, 7.0),
    ("soft_relu", 1.0, 0.0), ("soft_relu", -1.0, 0.0), ("soft_relu", 0.5, 0.0),
    ("soft_relu", 3.0, 0.0), ("soft_relu", 0.0, 0.0),
    ("logistic", 0.0, 0.0), ("exp", 0.0, 0.0),
    ("gelu_tanh", 0.0, 0.0), ("gelu_erf", 0.0, 0.0),
    ("swish", 1.0, 0.0), ("swish", 0.5, 0.0), ("swish", -2.0, 0.0), ("swish", 0.0, 0.0),
    ("log", 0.0, 0.0),
    ("clip", -1.0, 6.0), ("clip", 0.0, 6.0), ("clip", 0.0, 0.0), ("clip", -2.5, -1.0),
    ("clip", -INF, 0.5),
    ("clip_v2", -1.0, 1.0), ("clip_v2", 0.0, 6.0),
    ("pow", 1.0, 0.5), ("pow", 2.0, 2.0), ("pow", 0.5, 3.0), ("pow", 1.0, 3.0), ("pow", 1.0, -1.0),
    ("pow", 1.5, 0.0), ("pow", 1.0, 1.0), ("pow", 1.0, 1.7), ("pow", -2.0, 2.5),
    ("pow", 1.0, -0.5), ("pow", 0.0, 2.0), ("pow", 3.0, 4.0), ("pow", 1e-3, -1.0),
    ("round", 0.0, 0.0),
    ("hardsigmoid", 1 / 6, 0.5), ("hardsigmoid", 0.2, 0.5), ("hardsigmoid", -1.0, 0.0),
    ("hardsigmoid", 1.0, -0.5),
    ("hardswish", 1 / 6, 0.5), ("hardswish", 0.2, 0.5), ("hardswish", 1.0, -0.5),
    ("mish", 0.0, 0.0),
]
BINARY = list(ref.BINARY)

EDGE = np.array(
    [0.0, -0.0, 1e-7, -1e-7, 0.5, -0.5, 1.0, -1.0, 2.5, -2.5, 10.0, -10.0, 88.0, -88.0,
     100.0, -100.0, 1e30, -1e30, 3.4028235e38, -3.4028235e38, INF, -INF, float("nan"),
     1.5, -1.5, 3.5, 0.49999997, -0.49999997, 1e-40, -1e-40, 1.17549435e-38, 1e-45,
     88.72, 88.7228, 88.73, -87.3, -103.9, -104.5, 20.0, 21.0, 44.0, 45.0, -20.0, -44.0,
     0.625, -0.625, 0.62499994, 0.7071067, 0.7071068, 1.4142135, 6.0, -6.0, 3.0, -3.0,
     2.0 ** 23 + 1, 2.0 ** 24, 1e10, -1e10, 1e-20, -1e-20, 5.0, -5.0, 9.0, -9.0, 15.0],
    dtype=np.float32)


def _random_values(n: int, seed: int = 1234) -> np.ndarray:
    rng = np.random.default_rng(seed)
    k = n // 4
    uniform = rng.uniform(-12, 12, k)
    logmag = np.exp(rng.uniform(np.log(1e-9), np.log(1e9), k)) * rng.choice([-1.0, 1.0], k)
    near_int = rng.integers(-50, 50, k) + rng.choice([0.0, 0.5, 0.25, 1e-3], k)
    bits = rng.integers(0, 2**32, n - 3 * k, dtype=np.uint64).astype(np.uint32).view(np.float32)
    finite = np.concatenate([uniform, logmag, near_int]).astype(np.float32)
    return np.concatenate([finite, bits])


def _case_values(alg: str, a: float, b: float) -> np.ndarray:
    # benchdnn also feeds x = alpha and x = beta (and the points where alpha*x + beta hits 0, 1)
    extra = [a, b, -a, -b]
    if a not in (0.0, INF, -INF):
        extra += [-b / a, (1 - b) / a, 1 / a]
    with np.errstate(all="ignore"):
        vals = np.asarray(extra, dtype=np.float64).astype(np.float32)
    near = np.concatenate([np.nextafter(vals, F32(INF)), np.nextafter(vals, F32(-INF))])
    return np.concatenate([vals, near])


def _build_module(tmp_path_factory):
    lines = ["import numpy as np", "import numba", eo.RUNTIME_IMPORT, "", "",
             "@numba.njit", "def eltwise_scalar(x):", "    return ("]
    lines += [f"        {eo.eltwise_expr(alg, 'x', a, b)}," for alg, a, b in CASES]
    lines += ["    )", "", "", "@numba.njit", "def binary_scalar(a, b):", "    return ("]
    lines += [f"        {eo.binary_expr(alg, 'a', 'b')}," for alg in BINARY]
    lines += ["    )", "", ""]
    lines += ["@numba.njit", "def eltwise_kernel(inp, out):", "    for i in range(inp.size):",
              "        t = eltwise_scalar(inp[i])"]
    lines += [f"        out[{k}, i] = t[{k}]" for k in range(len(CASES))]
    lines += ["", "", "@numba.njit", "def binary_kernel(p, q, out):",
              "    for i in range(p.size):", "        t = binary_scalar(p[i], q[i])"]
    lines += [f"        out[{k}, i] = t[{k}]" for k in range(len(BINARY))]
    src = "\n".join(lines) + "\n"
    path = tmp_path_factory.mktemp("eltwise_gen") / "lj_eltwise_test_gen.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("lj_eltwise_test_gen", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def gen(tmp_path_factory):
    mod = _build_module(tmp_path_factory)
    x = np.zeros(1, np.float32)
    mod.eltwise_kernel(x, np.empty((len(CASES), 1), np.float32))  # the one compile
    mod.binary_kernel(x, x, np.empty((len(BINARY), 1), np.float32))
    return mod


def run_eltwise(gen, x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = np.empty((len(CASES), x.size), np.float32)
    gen.eltwise_kernel(x, out)
    return out


def run_binary(gen, p: np.ndarray, q: np.ndarray) -> np.ndarray:
    p = np.ascontiguousarray(p, dtype=np.float32)
    q = np.ascontiguousarray(q, dtype=np.float32)
    out = np.empty((len(BINARY), p.size), np.float32)
    gen.binary_kernel(p, q, out)
    return out


def check_all(gen, x: np.ndarray) -> list[str]:
    got = run_eltwise(gen, x)
    errors = []
    for k, (alg, a, b) in enumerate(CASES):
        exp = ref.eltwise_reference(alg, x, a, b)
        bad = ref.mismatches(alg, got[k], x, a, b, exp=exp)
        if bad.size:
            errors.append(ref.describe(alg, bad, got[k], x, exp, a, b))
    return errors


# ---------------------------------------------------------------- values


def test_all_results_are_float32(gen):
    (sig,) = gen.eltwise_scalar.nopython_signatures
    assert sig.return_type == numba.types.UniTuple(numba.float32, len(CASES)), sig
    (sig,) = gen.binary_scalar.nopython_signatures
    assert sig.return_type == numba.types.UniTuple(numba.float32, len(BINARY)), sig


def test_no_float64_inside(gen):
    # nothing is promoted on the way either: no double in the compiled bodies (the
    # CPython wrapper that boxes the result tuple does use doubles; skip it)
    for f in (gen.eltwise_scalar, gen.binary_scalar):
        ir = f.inspect_llvm(f.signatures[0])
        bodies = [b for b in re.findall(r"^(define [^\n]*\n.*?^})", ir, flags=re.M | re.S)
                  if "cpython" not in b.split("(", 1)[0]]
        assert bodies
        for b in bodies:
            assert not re.search(r"\bdouble\b", b), b[:200]


def test_edge_values(gen):
    errors = check_all(gen, EDGE)
    assert not errors, "\n".join(errors)


def test_alpha_beta_points(gen):
    x = np.concatenate([_case_values(alg, a, b) for alg, a, b in CASES])
    errors = check_all(gen, x)
    assert not errors, "\n".join(errors)


def test_random_values(gen):
    errors = check_all(gen, _random_values(20000))
    assert not errors, "\n".join(errors)


def test_dense_sweep(gen):
    # 60000 float32 bit patterns evenly spread over [0, 110] (denormals to exp overflow), +/-
    hi = int(np.float32(110.0).view(np.int32))
    pos = np.arange(0, hi, hi // 60000, dtype=np.int32).view(np.float32)
    x = np.concatenate([pos, -pos])
    errors = check_all(gen, x)
    assert not errors, "\n".join(errors)


def test_nan_stays_nan(gen):
    got = run_eltwise(gen, np.array([np.nan], np.float32))[:, 0]
    for k, (alg, a, b) in enumerate(CASES):
        if alg == "pow" and b == 0:
            assert got[k] == F32(a), (alg, a, b)  # powf(NaN, 0) == 1
        else:
            assert np.isnan(got[k]), (alg, a, b, got[k])


def test_round_half_to_even(gen):
    x = np.array([0.5, 1.5, 2.5, 3.5, -0.5, -1.5, -2.5, -3.5, 0.49999997, -0.49999997,
                  2.0 ** 23 + 1, 1e10, 7.5, 8.5, 1.25, -1.75], np.float32)
    exp = np.array([0, 2, 2, 4, -0.0, -2, -2, -4, 0, -0.0, 2.0 ** 23 + 1, 1e10, 8, 8, 1, -2],
                   np.float32)
    got = run_eltwise(gen, x)[CASES.index(("round", 0.0, 0.0))]
    np.testing.assert_array_equal(got, exp)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(exp))


def test_relu_zero_slope_gives_plus_zero(gen):
    got = run_eltwise(gen, np.array([-3.0, -0.0, 0.0, 2.0], np.float32))
    r = got[CASES.index(("relu", 0.0, 0.0))]
    np.testing.assert_array_equal(r, [0, 0, 0, 2])
    assert not np.signbit(r).any()


def test_pow_negative_base(gen):
    x = np.array([-2.0, -0.5, -8.0, -0.0, -INF], np.float32)
    got = run_eltwise(gen, x)
    sq = got[CASES.index(("pow", 2.0, 2.0))]
    np.testing.assert_array_equal(sq, [8.0, 0.5, 128.0, 0.0, INF])
    cube = got[CASES.index(("pow", 1.0, 3.0))]
    np.testing.assert_array_equal(cube, [-8.0, -0.125, -512.0, -0.0, -INF])
    half = got[CASES.index(("pow", 1.0, 0.5))]
    assert np.isnan(half[[0, 1, 2, 4]]).all()  # sqrt, as oneDNN's JIT (and numpy) do it
    assert half[3] == 0 and np.signbit(half[3])
    inv = got[CASES.index(("pow", 1.0, -1.0))]
    np.testing.assert_array_equal(inv, [-0.5, -2.0, -0.125, -INF, -0.0])


def test_signed_zeros(gen):
    got = run_eltwise(gen, np.array([-0.0, 0.0], np.float32))

    def at(case):
        return got[CASES.index(case)]

    for case in [("tanh", 0.0, 0.0), ("gelu_tanh", 0.0, 0.0), ("swish", 1.0, 0.0),
                 ("mish", 0.0, 0.0), ("sqrt", 0.0, 0.0), ("round", 0.0, 0.0),
                 ("elu", 1.0, 0.0), ("linear", 1.0, 0.0), ("pow", 1.0, 1.0)]:
        r = at(case)
        assert r[0] == 0 and r[1] == 0, case
        # odd functions keep the sign of zero; linear(-0) = 1 * -0 + 0 = +0 (IEEE)
        assert np.signbit(r[0]) == (case[0] != "linear") and not np.signbit(r[1]), (case, r)
    for case in [("relu", 0.0, 0.0), ("abs", 0.0, 0.0), ("clip", 0.0, 6.0), ("clip", 0.0, 0.0)]:
        r = at(case)
        assert r[0] == 0 and not np.signbit(r).any(), (case, r)  # as oneDNN: +0


def test_soft_relu_zero_alpha_is_inf(gen):
    got = run_eltwise(gen, np.array([-5.0, 0.0, 5.0], np.float32))
    np.testing.assert_array_equal(got[CASES.index(("soft_relu", 0.0, 0.0))], [INF] * 3)


def test_binary(gen):
    rng = np.random.default_rng(7)
    special = np.array([0.0, -0.0, 1.0, -1.0, 3.4028235e38, 1e-45, INF, -INF, np.nan],
                       np.float32)
    bits = rng.integers(0, 2**32, (2, 2000), dtype=np.uint64).astype(np.uint32).view(np.float32)
    p = np.concatenate([np.repeat(special, special.size),
                        (rng.standard_normal(2000) * 100).astype(np.float32), bits[0]])
    q = np.concatenate([np.tile(special, special.size),
                        rng.standard_normal(2000).astype(np.float32), bits[1]])
    got = run_binary(gen, p, q)
    for k, alg in enumerate(BINARY):
        exp = ref.binary_reference(alg, p, q)
        bad = ref.mismatches(alg, got[k], p, exp=exp)
        assert not bad.size, ref.describe(alg, bad, got[k], p, exp)
    # division by zero under Numba's default (python) error model: IEEE, no exception
    d = got[BINARY.index("div")][: special.size * special.size].reshape(special.size, -1)
    assert d[2, 0] == INF and d[3, 0] == -INF and d[2, 1] == -INF and np.isnan(d[0, 0])
    m = got[BINARY.index("max")][: special.size ** 2].reshape(special.size, -1)
    assert np.isnan(m[-1]).all() and np.isnan(m[:, -1]).all()


def test_zero_preserving_matches_generated_code(gen):
    got = run_eltwise(gen, np.array([0.0], np.float32))[:, 0]
    for k, (alg, a, b) in enumerate(CASES):
        assert eo.eltwise_zero_preserving(alg, a, b) == bool(got[k] == 0), (alg, a, b, got[k])
    assert eo.eltwise_zero_preserving("eltwise_mish")
    assert not eo.eltwise_zero_preserving("linear", 1.0, 0.5)
    assert eo.eltwise_zero_preserving("clip", -1.0, 0.0)
    assert not eo.eltwise_zero_preserving("clip", 0.5, 1.0)
    assert not eo.eltwise_zero_preserving("pow", 1.0, -1.0)
    assert eo.eltwise_zero_preserving("pow", 0.0, 0.0)
    assert not eo.eltwise_zero_preserving("relu", INF, 0.0)  # 0 * inf


def test_soft_relu_no_overflow(gen):
    # 1/alpha * log(1 + exp(alpha x)) == x for large alpha x, even where alpha * x overflows
    x = np.array([1e38, 3e38, -1e38], np.float32)
    got = run_eltwise(gen, x)
    np.testing.assert_array_equal(got[CASES.index(("soft_relu", 3.0, 0.0))], [x[0], x[1], 0.0])
    np.testing.assert_array_equal(got[CASES.index(("soft_relu", -1.0, 0.0))], [0.0, 0.0, x[2]])


# ---------------------------------------------------------------- hypothesis

_f32_arrays = hnp.arrays(np.float32, st.integers(1, 48),
                         elements=st.floats(width=32, allow_nan=True, allow_infinity=True))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(x=_f32_arrays)
def test_hypothesis_eltwise(gen, x):
    errors = check_all(gen, x)
    assert not errors, "\n".join(errors)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(x=hnp.arrays(np.float32, st.integers(1, 32),
                    elements=st.floats(-30, 30, width=32)))
def test_hypothesis_eltwise_moderate(gen, x):
    errors = check_all(gen, x)
    assert not errors, "\n".join(errors)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), n=st.integers(1, 32))
def test_hypothesis_binary(gen, data, n):
    el = st.floats(width=32)
    p = data.draw(hnp.arrays(np.float32, n, elements=el))
    q = data.draw(hnp.arrays(np.float32, n, elements=el))
    got = run_binary(gen, p, q)
    for k, alg in enumerate(BINARY):
        exp = ref.binary_reference(alg, p, q)
        bad = ref.mismatches(alg, got[k], p, exp=exp)
        assert not bad.size, ref.describe(alg, bad, got[k], p, exp)


# ---------------------------------------------------------------- source form


def test_literals_are_float32_exact():
    s = eo.eltwise_expr("linear", "v", 0.1, 1e300)
    assert s == "(np.float32(0.10000000149011612) * (v) + np.float32(np.inf))"
    assert eo.f32_literal(float("-inf")) == "np.float32(-np.inf)"
    assert eo.f32_literal(float("nan")) == "np.float32(np.nan)"
    for v in (0.1, 1 / 3, -2.5e-39, 3.4028235e38, 1e-45):
        lit = eo.f32_literal(v)
        assert eval(lit, {"np": np}) == np.float32(v)


def test_expressions_only_use_runtime_names():
    names = set(eo.RUNTIME_NAMES)
    for alg in eo.ELTWISE_ALGS:
        for a, b in ((0.0, 1.0), (1.0, 2.0), (0.5, 0.5), (1.0, 0.0), (2.0, 3.0), (1.0, -1.0)):
            try:
                s = eo.eltwise_expr(alg, "x", a, b)
            except layoutjit.LayoutError:
                continue
            used = set(re.findall(r"\b(lj_\w+)\(", s))
            assert used <= names, (alg, s)
            assert "math." not in s and not re.search(r"(?<![\w.(])\d+\.\d*(?![\w)])", s), s
    for alg in eo.BINARY_ALGS:
        assert set(re.findall(r"\b(lj_\w+)\(", eo.binary_expr(alg, "a", "b"))) <= names
    assert eo.RUNTIME_IMPORT.startswith("from layoutjit.eltwise_ops import ")
    for n in names:
        assert hasattr(eo, n)


# ---------------------------------------------------------------- names and validation


@pytest.mark.parametrize("given,canon", [
    ("relu", "relu"), ("eltwise_relu", "relu"), ("dnnl_eltwise_relu", "relu"),
    ("ELTWISE_GELU_ERF", "gelu_erf"), ("eltwise_relu_use_dst_for_bwd", "relu"),
    ("eltwise_tanh_use_dst_for_bwd", "tanh"), ("eltwise_elu_use_dst_for_bwd", "elu"),
    ("eltwise_sqrt_use_dst_for_bwd", "sqrt"), ("eltwise_logistic_use_dst_for_bwd", "logistic"),
    ("eltwise_exp_use_dst_for_bwd", "exp"), ("clip_v2_use_dst_for_bwd", "clip_v2"),
    ("eltwise_round", "round"), ("soft_relu", "soft_relu"),
])
def test_eltwise_names(given, canon):
    assert eo.check_eltwise(given, 1.0, 2.0) == canon


def test_tables():
    assert set(eo.ELTWISE_ALGS) == set(ref.ELTWISE)
    assert set(eo.BINARY_ALGS) == set(ref.BINARY)
    assert eo.USE_DST_FOR_BWD == {"relu", "tanh", "elu", "sqrt", "logistic", "exp", "clip_v2"}
    assert eo.ELTWISE_ALGS["clip"].alpha == "lower bound"
    assert eo.ELTWISE_ALGS["tanh"].alpha is None


@pytest.mark.parametrize("bad", ["relux", "eltwise_", "bounded_relu", "logsigmoid", "gelu",
                                 "eltwise_square_use_dst_for_bwd", "binary_add", "", "relu6"])
def test_unknown_eltwise(bad):
    with pytest.raises(layoutjit.LayoutError) as ei:
        eo.check_eltwise(bad)
    msg = str(ei.value)
    assert repr(bad) in msg and "gelu_erf" in msg and "hardswish" in msg
    with pytest.raises(layoutjit.LayoutError):
        eo.eltwise_expr(bad, "x", 0.0, 0.0)


def test_removed_names_hint():
    with pytest.raises(layoutjit.LayoutError, match="clip"):
        eo.check_eltwise("eltwise_bounded_relu", 6.0)
    with pytest.raises(layoutjit.LayoutError, match="soft_relu"):
        eo.check_eltwise("logsigmoid")


@pytest.mark.parametrize("alg,alpha,beta", [
    ("clip", 1.0, 0.0), ("clip_v2", 0.5, -0.5), ("clip", float("nan"), 1.0),
    ("clip", 0.0, float("nan")), ("eltwise_clip_v2_use_dst_for_bwd", 2.0, 1.0),
    ("eltwise_relu_use_dst_for_bwd", -0.1, 0.0), ("elu_use_dst_for_bwd", -1.0, 0.0),
    ("relu", "0.1", 0.0), ("linear", None, 0.0), ("linear", 1.0, [1]),
])
def test_invalid_alpha_beta(alg, alpha, beta):
    with pytest.raises(layoutjit.LayoutError):
        eo.check_eltwise(alg, alpha, beta)
    with pytest.raises(layoutjit.LayoutError):
        eo.eltwise_expr(alg, "x", alpha, beta)


def test_valid_alpha_beta_that_onednn_accepts():
    assert eo.check_eltwise("clip", 1.0, 1.0) == "clip"
    assert eo.check_eltwise("relu", -0.1) == "relu"  # forward relu takes any slope
    assert eo.check_eltwise("elu", -1.0) == "elu"
    assert eo.check_eltwise("soft_relu", 0.0) == "soft_relu"  # oneDNN: no check
    assert eo.check_eltwise("clip", -INF, INF) == "clip"
    assert eo.check_eltwise("pow", 1.0, -2.0) == "pow"
    # compared after rounding to float32, like oneDNN's float parameters
    assert eo.check_eltwise("clip", 0.1, np.float64(np.float32(0.1))) == "clip"


@pytest.mark.parametrize("given,canon", [("add", "add"), ("binary_sub", "sub"),
                                         ("dnnl_binary_mul", "mul"), ("Binary_Div", "div"),
                                         ("max", "max"), ("binary_min", "min")])
def test_binary_names(given, canon):
    assert eo.check_binary(given) == canon


@pytest.mark.parametrize("bad", ["binary_ge", "select", "pow", "eltwise_add", "", 3])
def test_unknown_binary(bad):
    with pytest.raises(layoutjit.LayoutError) as ei:
        eo.check_binary(bad)
    assert "add" in str(ei.value) and "min" in str(ei.value)
    with pytest.raises(layoutjit.LayoutError):
        eo.binary_expr(bad, "a", "b")


def test_expr_argument_checks():
    with pytest.raises(layoutjit.LayoutError):
        eo.eltwise_expr("relu", "", 0.0, 0.0)
    with pytest.raises(layoutjit.LayoutError):
        eo.binary_expr("add", "a", None)


# ---------------------------------------------------------------- vectorization

_VECTOR_F32 = re.compile(r"<\d+ x float>")


@pytest.mark.parametrize("alg,alpha,beta", [
    ("relu", 0.0, 0.0), ("relu", 0.2, 0.0), ("linear", 2.0, 1.0), ("clip", -1.0, 6.0),
    ("logistic", 0.0, 0.0), ("elu", 1.0, 0.0), ("tanh", 0.0, 0.0), ("soft_relu", 1.0, 0.0),
    ("gelu_tanh", 0.0, 0.0), ("mish", 0.0, 0.0), ("log", 0.0, 0.0), ("swish", 1.0, 0.0),
    ("hardswish", 1 / 6, 0.5), ("round", 0.0, 0.0), ("pow", 1.0, 2.0)])
def test_simple_loop_vectorizes(alg, alpha, beta):
    # the same shape of code the generated reorder kernels use: a cfunc over pointers;
    # the operand is an expression (evaluated once), not just a name
    expr = eo.eltwise_expr(alg, "sp[i]", alpha, beta)
    ns = {}
    exec("import numpy as np\nimport numba\n" + eo.RUNTIME_IMPORT + "\n"
         "@numba.cfunc(numba.types.void(numba.types.CPointer(numba.float32), "
         "numba.types.CPointer(numba.float32), numba.int64), error_model='numpy')\n"
         "def k(sp, dp, n):\n"
         "    for i in range(n):\n"
         f"        dp[i] = {expr}\n", ns)
    ir = ns["k"].inspect_llvm()  # optimized module
    assert _VECTOR_F32.search(ir), f"{alg}: the loop did not vectorize"
    assert not re.search(r"@(llvm\.(exp|log|pow)\.|expf|tanhf|logf|log1pf|expm1f)", ir), \
        "libm call left"
    # and it computes the right thing through a cfunc (error_model='numpy')
    x = np.linspace(-100, 100, 203, dtype=np.float32)
    out = np.empty_like(x)
    import ctypes
    cf = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(ns["k"].address)
    cf(x.ctypes.data, out.ctypes.data, x.size)
    bad = ref.mismatches(alg, out, x, alpha, beta)
    assert not bad.size, ref.describe(alg, bad, out, x, ref.eltwise_reference(alg, x, alpha, beta))


# ---------------------------------------------------------------- oneDNN itself (if installed)

# dnnl_alg_kind_t values of oneDNN v3 (include/oneapi/dnnl/dnnl_types.h)
_DNNL_ELTWISE = {n: 0x20 + i for i, n in enumerate(
    ["relu", "tanh", "elu", "square", "abs", "sqrt", "linear", "soft_relu", "hardsigmoid",
     "logistic", "exp", "gelu_tanh", "swish", "log", "clip", "clip_v2", "pow", "gelu_erf",
     "round", "mish", "hardswish"])}
_DNNL_ELTWISE.update({f"{n}_use_dst_for_bwd": 0x100 + i for i, n in enumerate(
    ["relu", "tanh", "elu", "sqrt", "logistic", "exp", "clip_v2"])})
_DNNL_BINARY = {"add": 0x1FFF0, "mul": 0x1FFF1, "max": 0x1FFF2, "min": 0x1FFF3,
                "div": 0x1FFF4, "sub": 0x1FFF5}


def _onednn():
    try:
        import onednn_ref
    except Exception:  # pragma: no cover
        pytest.skip("tests/onednn_ref.py not importable")
    if onednn_ref.lib() is None:
        pytest.skip("oneDNN v3 (libdnnl.so.3) not installed")
    return onednn_ref


def _dnnl_run(o, create, inputs):
    """Create a primitive with ``create(pd_ptr, engine, md)``, run it on 1-D f32 inputs."""
    lb, e = o.lib(), o.engine()
    n = inputs[0].size
    md = o.md_tag([n], "f32", "a")
    pd = ctypes.c_void_p()
    st = create(ctypes.byref(pd), e.eng, md.h)
    if st != 0:
        return st
    prim = ctypes.c_void_p()
    assert lb.dnnl_primitive_create(ctypes.byref(prim), pd) == 0
    bufs = [np.ascontiguousarray(a, np.float32) for a in inputs] + [np.empty(n, np.float32)]
    mems = []
    for b in bufs:
        m = ctypes.c_void_p()
        assert lb.dnnl_memory_create(ctypes.byref(m), md.h, e.eng,
                                     ctypes.c_void_p(b.ctypes.data)) == 0
        mems.append(m)
    ids = [1, 2][: len(inputs)] + [17]  # DNNL_ARG_SRC_0, DNNL_ARG_SRC_1, DNNL_ARG_DST
    args = (o.ExecArg * len(mems))(*[o.ExecArg(i, m) for i, m in zip(ids, mems)])
    try:
        assert lb.dnnl_primitive_execute(prim, e.stream, len(mems), args) == 0
        lb.dnnl_stream_wait(e.stream)
    finally:
        for m in mems:
            lb.dnnl_memory_destroy(m)
        lb.dnnl_primitive_destroy(prim)
        lb.dnnl_primitive_desc_destroy(pd)
    return bufs[-1]


def _dnnl_eltwise(o, alg, x, alpha, beta):
    code = _DNNL_ELTWISE[alg]
    return _dnnl_run(o, lambda pd, eng, md: o.lib().dnnl_eltwise_forward_primitive_desc_create(
        pd, eng, ctypes.c_int(96), ctypes.c_int(code), md, md,  # forward_inference
        ctypes.c_float(alpha), ctypes.c_float(beta), None), [x])


def test_onednn_agrees(gen):
    """Same formulas and alpha/beta meanings as oneDNN's own eltwise primitive.

    A semantic check, not an accuracy one: oneDNN's JIT approximations are
    looser than layoutjit's (e.g. its soft_relu(-20) is -1.9e-6 and its log
    is off by 8e-5 relative near 1; benchdnn accepts both), so values agree to
    5e-5 absolute or 1e-4 relative. Only finite normal inputs: NaN, inf and
    denormals differ by design (see layoutjit.eltwise_ops).
    """
    o = _onednn()
    x = np.concatenate([EDGE, _random_values(4000, seed=99)])
    x = x[np.isfinite(x) & ((np.abs(x) >= 1.2e-38) | (x == 0))]
    got = run_eltwise(gen, x)
    errors = []
    for k, (alg, a, b) in enumerate(CASES):
        y = _dnnl_eltwise(o, alg, x, a, b)
        assert not isinstance(y, int), (alg, a, b, "oneDNN status", y)
        with np.errstate(all="ignore"):
            g, d = got[k].astype(np.float64), y.astype(np.float64)
            diff = np.abs(g - d)
            ok = (g == d) | (np.isnan(g) & np.isnan(d)) | (diff <= 5e-5) | \
                (diff <= 1e-4 * np.abs(d))
        bad = np.flatnonzero(~ok)
        if bad.size:
            errors.append(ref.describe(alg, bad, got[k], x, y, a, b))
    assert not errors, "\n".join(errors)


@pytest.mark.parametrize("alg,alpha,beta", [
    ("soft_relu", 0.0, 0.0), ("clip", 1.0, 0.0), ("clip", 1.0, 1.0), ("clip", float("nan"), 1.0),
    ("clip_v2", 0.5, -0.5), ("relu", -0.1, 0.0), ("relu", float("nan"), 0.0),
    ("relu_use_dst_for_bwd", -0.1, 0.0), ("relu_use_dst_for_bwd", 0.1, 0.0),
    ("elu_use_dst_for_bwd", -1.0, 0.0), ("elu", -1.0, 0.0), ("clip_v2_use_dst_for_bwd", 2.0, 1.0),
    ("clip_v2_use_dst_for_bwd", -2.0, 1.0), ("pow", 0.0, -1.0), ("linear", 0.0, 0.0),
    ("hardswish", 0.0, 0.0), ("swish", 0.0, 0.0), ("log", 5.0, 5.0),
])
def test_onednn_accepts_the_same_parameters(alg, alpha, beta):
    o = _onednn()
    y = _dnnl_eltwise(o, alg, np.ones(4, np.float32), alpha, beta)
    onednn_ok = not isinstance(y, int)
    try:
        eo.check_eltwise("eltwise_" + alg, alpha, beta)
        ours_ok = True
    except layoutjit.LayoutError:
        ours_ok = False
    assert ours_ok == onednn_ok, (alg, alpha, beta, y)


def test_onednn_binary_agrees(gen):
    o = _onednn()
    rng = np.random.default_rng(3)
    special = np.array([0.0, -0.0, 1.0, -1.0, 3.4028235e38, 1.2e-38, INF, -INF], np.float32)
    p = np.concatenate([np.repeat(special, special.size),
                        (rng.standard_normal(500) * 1e3).astype(np.float32)])
    q = np.concatenate([np.tile(special, special.size),
                        rng.standard_normal(500).astype(np.float32)])
    got = run_binary(gen, p, q)
    for k, alg in enumerate(BINARY):
        code = _DNNL_BINARY[alg]
        y = _dnnl_run(o, lambda pd, eng, md, code=code: o.lib().dnnl_binary_primitive_desc_create(
            pd, eng, ctypes.c_int(code), md, md, md, None), [p, q])
        assert not isinstance(y, int), (alg, y)
        same = (got[k] == y) | (np.isnan(got[k]) & np.isnan(y))
        assert same.all(), ref.describe(alg, np.flatnonzero(~same), got[k], p, y)

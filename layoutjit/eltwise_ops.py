"""oneDNN's eltwise and binary algorithms as code-generation snippets.

Generated kernels apply a post-op to one ``np.float32`` value at a time. This
module turns an algorithm name plus its ``alpha``/``beta`` into a Python
*expression string* that computes it in float32 inside ``@numba.njit`` or
``@numba.cfunc`` code::

    >>> from layoutjit.eltwise_ops import eltwise_expr, binary_expr
    >>> eltwise_expr("eltwise_relu", "v", 0.5, 0.0)
    'lj_relu(v, np.float32(0.5))'
    >>> eltwise_expr("linear", "v", 2.0, -1.0)
    '(np.float32(2.0) * (v) + np.float32(-1.0))'
    >>> binary_expr("binary_div", "a", "b")
    'np.true_divide(a, b)'

A module that uses the expressions needs ``import numpy as np`` and
``from layoutjit.eltwise_ops import <RUNTIME_NAMES>`` (:data:`RUNTIME_IMPORT`
is that line). Every expression evaluates its operand(s) exactly once, so an
operand may be any float32 expression (``sp[i]``), not only a name.

Semantics (oneDNN v3: ``doc/primitives/eltwise.md``,
``src/common/math_utils.hpp``, ``src/cpu/x64/injectors/jit_uni_eltwise_injector.cpp``):

* alpha and beta are ``float`` in oneDNN, so they are rounded to float32
  before use and baked into the source as ``np.float32(<repr>)`` literals.
* All arithmetic is float32 (the helpers take and return float32; no float64
  literal or ``math`` call promotes). Division is ``np.true_divide`` so that a
  zero divisor gives inf/NaN whatever the caller's ``error_model``.
* NaN in gives NaN out wherever the formula does, *including* ``clip`` and
  ``logistic``, where oneDNN's own code maps NaN to ``alpha`` resp. 0
  (``vmaxps``/``vminps`` clip in the JIT, ``s > alpha ? s : alpha`` in the C
  reference; ``in < bound ? ... : 0.f`` in ``logistic_fwd``), and ``relu``
  with alpha == 0 (the JIT's ``vmaxps(x, 0)`` maps NaN to 0). Binary
  ``max``/``min`` propagate NaN from either side (oneDNN's ``nstl::max`` is
  ``a > b ? a : b``, which drops a NaN in ``a``).
* ±inf in follows IEEE evaluation of the documented formula, as oneDNN's
  reference does: e.g. ``swish(-inf)``, ``gelu_*(-inf)``, ``mish(-inf)`` and
  ``hardswish(-inf)`` are NaN (``-inf * 0``); ``pow`` with beta == 0 is
  ``alpha`` even for NaN x (C ``powf(x, 0) == 1``; the JIT loads alpha).
* ``relu`` with alpha == 0 is ``max(x, 0)``: +0 for x <= 0 and 0 for -inf,
  like the JIT (the C reference computes ``x * 0``: -0, and NaN for -inf).
* ``pow`` follows the JIT's special cases: beta 0.5 is ``alpha * sqrt(x)``
  (so -0 -> -0, -inf -> NaN, unlike ``powf``), beta -1 is ``alpha / x``,
  beta 0/1/2 exact; other betas call ``powf``.
* ``soft_relu`` does not overflow where ``alpha * x`` does (oneDNN's
  reference returns inf there; the result is ``x``); alpha == 0 is accepted
  as oneDNN accepts it and gives inf (oneDNN divides by alpha).
* ``round`` is round-half-to-even (``nearbyintf`` under the default MXCSR).
* ``linear``/``hardsigmoid``/``hardswish`` round ``alpha * x`` before adding
  beta, like oneDNN's C reference (its JIT uses an FMA for linear).

Vectorization: callers must not compile with ``fastmath`` (NaN/inf handling
relies on IEEE semantics). The helpers are branch-free (selects) and get
inlined into the caller (see the comment above ``_inline``), and
``exp``/``expm1``/``tanh``/``log`` are float32 polynomials (Cephes-style
range reduction, ~1 ulp), not libm calls, so loops over contiguous memory
vectorize without SVML. Only ``gelu_erf`` (``math.erfc``) and ``pow`` with an
exponent other than 0, ±1, 0.5, 2, 3 (``powf``, scalarized) call libm.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numba
import numpy as np

from .errors import LayoutError

__all__ = [
    "ELTWISE_ALGS",
    "BINARY_ALGS",
    "USE_DST_FOR_BWD",
    "RUNTIME_NAMES",
    "RUNTIME_IMPORT",
    "EXPR_VERSION",
    "EltwiseAlg",
    "check_eltwise",
    "check_binary",
    "eltwise_expr",
    "binary_expr",
    "eltwise_zero_preserving",
    "f32_literal",
]

#: Bumped whenever the generated expressions or the helpers change meaning or
#: code; put it in the header of generated sources that are cached on disk
#: (Numba's cache does not notice changes in inlined helpers).
EXPR_VERSION = "1"


# --------------------------------------------------------------------------
# Algorithm tables
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class EltwiseAlg:
    """One forward eltwise algorithm: its formula and what alpha/beta mean.

    ``alpha``/``beta`` are ``None`` where oneDNN ignores the parameter.
    ``use_dst_for_bwd`` tells whether oneDNN also has an
    ``eltwise_<name>_use_dst_for_bwd`` kind (same forward computation).
    """

    name: str
    formula: str
    alpha: str | None = None
    beta: str | None = None
    use_dst_for_bwd: bool = False


def _alg(name: str, formula: str, alpha: str | None = None, beta: str | None = None,
         use_dst: bool = False) -> tuple[str, EltwiseAlg]:
    return name, EltwiseAlg(name, formula, alpha, beta, use_dst)


#: oneDNN v3 forward eltwise algorithms by canonical name.
ELTWISE_ALGS: Mapping[str, EltwiseAlg] = MappingProxyType(dict([
    _alg("relu", "x if x > 0 else alpha * x", "negative slope", None, True),
    _alg("tanh", "tanh(x)", use_dst=True),
    _alg("elu", "x if x > 0 else alpha * (exp(x) - 1)", "scale of the negative part", None, True),
    _alg("square", "x * x"),
    _alg("abs", "|x|"),
    _alg("sqrt", "sqrt(x)", use_dst=True),
    _alg("linear", "alpha * x + beta", "scale", "shift"),
    _alg("soft_relu", "1/alpha * log(1 + exp(alpha * x))", "scale of the argument"),
    _alg("logistic", "1 / (1 + exp(-x))", use_dst=True),
    _alg("exp", "exp(x)", use_dst=True),
    _alg("gelu_tanh", "0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))"),
    _alg("gelu_erf", "0.5 * x * (1 + erf(x / sqrt(2)))"),
    _alg("swish", "x / (1 + exp(-alpha * x))", "scale of the sigmoid argument"),
    _alg("log", "log(x)"),
    _alg("clip", "beta if x > beta else (x if x > alpha else alpha)", "lower bound",
         "upper bound (>= alpha)"),
    _alg("clip_v2", "beta if x >= beta else (x if x > alpha else alpha)", "lower bound",
         "upper bound (>= alpha)", True),
    _alg("pow", "alpha * x ** beta", "scale", "exponent"),
    _alg("round", "round half to even"),
    _alg("hardsigmoid", "max(0, min(1, alpha * x + beta))", "scale", "shift"),
    _alg("hardswish", "x * max(0, min(1, alpha * x + beta))", "scale", "shift"),
    _alg("mish", "x * tanh(log(1 + exp(x)))"),
]))

#: Canonical names that have an ``eltwise_<name>_use_dst_for_bwd`` variant.
USE_DST_FOR_BWD = frozenset(n for n, a in ELTWISE_ALGS.items() if a.use_dst_for_bwd)

#: oneDNN binary algorithms supported here, by canonical name.
BINARY_ALGS: Mapping[str, str] = MappingProxyType({
    "add": "a + b",
    "sub": "a - b",
    "mul": "a * b",
    "div": "a / b",
    "max": "max(a, b)",
    "min": "min(a, b)",
})

# oneDNN v2 names that v3 removed, with their v3 spelling.
_REMOVED_ELTWISE = {
    "bounded_relu": "clip with alpha=0, beta=<old alpha>",
    "logsigmoid": "soft_relu with alpha=-1",
    "gelu": "gelu_tanh",
}
_OTHER_BINARY = ("ge", "gt", "le", "lt", "eq", "ne", "select")


# --------------------------------------------------------------------------
# Name normalization and validation
# --------------------------------------------------------------------------


def _base_name(alg: object, kind: str) -> tuple[str, str]:
    if not isinstance(alg, str):
        valid = ", ".join(ELTWISE_ALGS if kind == "eltwise" else BINARY_ALGS)
        raise LayoutError(f"{kind} algorithm must be a string naming one of {valid}; "
                          f"got {alg!r}")
    name = alg.strip().lower()
    if name.startswith("dnnl_"):
        name = name[5:]
    if name.startswith("algorithm::"):
        name = name[11:]
    return alg, name


def _to_f32(value: object, what: str, alg: str) -> float:
    if isinstance(value, (str, bytes)) or value is None:
        raise LayoutError(f"eltwise {alg}: {what} must be a number, got {value!r}")
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise LayoutError(f"eltwise {alg}: {what} must be a number, got {value!r}") from None
    with warnings.catch_warnings(), np.errstate(over="ignore"):
        warnings.simplefilter("ignore")
        return float(np.float32(v))


def _parse_eltwise(alg: object) -> tuple[str, bool]:
    given, name = _base_name(alg, "eltwise")
    if name.startswith("eltwise_"):
        name = name[8:]
    use_dst = False
    if name.endswith("_use_dst_for_bwd"):
        name, use_dst = name[: -len("_use_dst_for_bwd")], True
    if name in ELTWISE_ALGS and (not use_dst or name in USE_DST_FOR_BWD):
        return name, use_dst
    hint = ""
    if name in _REMOVED_ELTWISE and not use_dst:
        hint = f" ({name!r} was removed in oneDNN v3: use {_REMOVED_ELTWISE[name]})"
    elif use_dst and name in ELTWISE_ALGS:
        hint = (f" (oneDNN has no use_dst_for_bwd variant of {name!r}; those exist for "
                f"{', '.join(sorted(USE_DST_FOR_BWD))})")
    raise LayoutError(
        f"unknown eltwise algorithm {given!r}{hint}; valid: {', '.join(ELTWISE_ALGS)} "
        "(also with an 'eltwise_' prefix, and '<alg>_use_dst_for_bwd' for "
        f"{', '.join(sorted(USE_DST_FOR_BWD))})")


def check_eltwise(alg: str, alpha: float = 0.0, beta: float = 0.0) -> str:
    """Validate an eltwise algorithm and its parameters; return the canonical name.

    Accepts ``relu``, ``eltwise_relu``, ``dnnl_eltwise_relu`` and (forward
    only, same computation) ``eltwise_relu_use_dst_for_bwd``; case-insensitive.
    Raises :class:`~layoutjit.LayoutError` for an unknown name and for the
    alpha/beta that oneDNN's ``is_eltwise_ok`` rejects: ``clip``/``clip_v2``
    need ``beta >= alpha`` (so neither may be NaN), and the
    ``relu``/``elu`` ``_use_dst_for_bwd`` kinds need ``alpha >= 0``. Other
    values, even ``soft_relu`` with alpha == 0 (which yields inf: oneDNN
    divides by alpha), are accepted as oneDNN accepts them. The parameters
    are compared after rounding to float32, as oneDNN stores them.

    >>> check_eltwise("eltwise_logistic_use_dst_for_bwd")
    'logistic'
    """
    name, use_dst = _parse_eltwise(alg)
    a = _to_f32(alpha, "alpha", name)
    b = _to_f32(beta, "beta", name)
    if name in ("clip", "clip_v2") and not b >= a:
        raise LayoutError(f"eltwise {name}: needs beta (upper bound) >= alpha (lower bound), "
                          f"got alpha={a!r}, beta={b!r}")
    if use_dst and name in ("relu", "elu") and not a >= 0:
        raise LayoutError(f"eltwise {name}_use_dst_for_bwd: needs alpha >= 0, got {a!r}")
    return name


def check_binary(alg: str) -> str:
    """Validate a binary algorithm name (``add``, ``binary_add``, ...); return the canonical name.

    >>> check_binary("binary_max")
    'max'
    """
    given, name = _base_name(alg, "binary")
    if name.startswith("binary_"):
        name = name[7:]
    if name in BINARY_ALGS:
        return name
    hint = ""
    if name in _OTHER_BINARY:
        hint = " (a oneDNN binary algorithm that layoutjit does not implement)"
    raise LayoutError(f"unknown binary algorithm {given!r}{hint}; valid: "
                      f"{', '.join(BINARY_ALGS)} (also with a 'binary_' prefix)")


# --------------------------------------------------------------------------
# float32 runtime helpers (inlined into generated code)
# --------------------------------------------------------------------------

# Two kinds of helpers. The two big leaves, lj_exp and lj_log, are ordinary njit
# functions: Numba compiles each once per process and LLVM inlines the calls
# after linking (they are small enough for its inliner), so generated kernels
# don't pay for re-inlining them (Numba-IR inlining of exp costs ~0.2 s per use).
# Everything else is inline="always" (Numba-IR inlined): the composite helpers
# would otherwise exceed LLVM's inlining threshold once exp is inlined into them,
# and a call that is not inlined stops the loop from vectorizing. All helpers are
# compiled with fastmath=False; the inlined ones take the caller's flags.
_inline = numba.njit(inline="always", fastmath=False)
_leaf = numba.njit(fastmath=False)

_F = np.float32
_ZERO = _F(0.0)
_HALF = _F(0.5)
_ONE = _F(1.0)
_TWO = _F(2.0)
_INF = _F(np.inf)
_NINF = _F(-np.inf)
_NAN = _F(np.nan)

# exp: x = n*ln2 + r, |r| <= ln2/2 (Cody-Waite split of ln2), Cephes expf
# polynomial for e**r, 2**n applied as two exactly representable factors so
# that results down to the smallest denormal and up to FLT_MAX come out right.
_EXP_LO = _F(-104.0)  # exp(-104) < FLT_TRUE_MIN / 2: rounds to 0
_EXP_HI = _F(88.75)  # > log(FLT_MAX) = 88.7228: overflows to inf
_LOG2E = _F(1.44269504088896341)
_LN2_HI = _F(0.693359375)
_LN2_LO = _F(-2.12194440e-4)
_EP0 = _F(1.9875691500e-4)
_EP1 = _F(1.3981999507e-3)
_EP2 = _F(8.3334519073e-3)
_EP3 = _F(4.1665795894e-2)
_EP4 = _F(1.6666665459e-1)
_EP5 = _F(5.0000001201e-1)


@_inline
def _pow2i(n):  # pragma: no cover - compiled
    # 2**n for an int32 n in [-126, 127], built from its bit pattern.
    return np.int32((n + np.int32(127)) << np.int32(23)).view(np.float32)


@_leaf
def lj_exp(x):  # pragma: no cover - compiled
    """exp(x) in float32, branch-free (max error ~1 ulp)."""
    t = x if x > _EXP_LO else _EXP_LO  # NaN -> _EXP_LO (fixed up at the end)
    t = t if t < _EXP_HI else _EXP_HI
    z = np.rint(t * _LOG2E)
    r = t - z * _LN2_HI
    r = r - z * _LN2_LO
    p = (((((_EP0 * r + _EP1) * r + _EP2) * r + _EP3) * r + _EP4) * r + _EP5) * (r * r)
    p = p + r + _ONE
    n = np.int32(z)
    n1 = np.int32(n >> np.int32(1))
    n2 = np.int32(n - n1)
    y = p * _pow2i(n1) * _pow2i(n2)
    return y if x == x else x


_EM1_SMALL = _F(0.5)
_EM1_C = [_F(1.0 / math.factorial(k)) for k in range(2, 9)]
_EM1_C2, _EM1_C3, _EM1_C4, _EM1_C5, _EM1_C6, _EM1_C7, _EM1_C8 = _EM1_C


@_inline
def lj_expm1(x):  # pragma: no cover - compiled
    """exp(x) - 1 in float32 without cancellation near 0 (Taylor for |x| < 0.5)."""
    q = _EM1_C7 + x * _EM1_C8
    q = _EM1_C6 + x * q
    q = _EM1_C5 + x * q
    q = _EM1_C4 + x * q
    q = _EM1_C3 + x * q
    q = _EM1_C2 + x * q
    small = (x * x) * q + x
    small = small if x != _ZERO else x  # expm1(-0) = -0
    big = lj_exp(x) - _ONE
    return small if np.abs(x) < _EM1_SMALL else big


# tanh: Cephes tanhf (odd polynomial for |x| < 0.625, else 1 - 2/(exp(2|x|)+1)).
_TANH_SPLIT = _F(0.625)
_TP0 = _F(-5.70498872745e-3)
_TP1 = _F(2.06390887954e-2)
_TP2 = _F(-5.37397155531e-2)
_TP3 = _F(1.33314422036e-1)
_TP4 = _F(-3.33332819422e-1)


@_inline
def lj_tanh(x):  # pragma: no cover - compiled
    """tanh(x) in float32, branch-free."""
    z = np.abs(x)
    s = x * x
    p = ((((_TP0 * s + _TP1) * s + _TP2) * s + _TP3) * s + _TP4) * s * x + x
    p = p if x != _ZERO else x  # tanh(-0) = -0
    q = _ONE - np.true_divide(_TWO, lj_exp(z + z) + _ONE)
    q = q if x >= _ZERO else -q
    return q if z >= _TANH_SPLIT else p


# log: Cephes logf (mantissa in [sqrt(1/2), sqrt(2)), degree-9 polynomial).
_FLT_MIN = _F(1.17549435e-38)
_TWO23 = _F(8388608.0)
_SQRTHF = _F(0.707106781186547524)
_LP = [_F(c) for c in (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1,
                       -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1,
                       2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1)]
_LP0, _LP1, _LP2, _LP3, _LP4, _LP5, _LP6, _LP7, _LP8 = _LP


@_leaf
def lj_log(x):  # pragma: no cover - compiled
    """Natural log in float32, branch-free (denormals, 0, inf, negatives, NaN handled)."""
    tiny = x < _FLT_MIN
    xs = x * _TWO23 if tiny else x
    bits = np.float32(xs).view(np.int32)
    e = np.int32(((bits >> np.int32(23)) & np.int32(0xFF)) - np.int32(126))
    e = np.int32(e - np.int32(23)) if tiny else e
    m = np.int32((bits & np.int32(0x007FFFFF)) | np.int32(0x3F000000)).view(np.float32)
    lt = m < _SQRTHF
    e = np.int32(e - np.int32(1)) if lt else e
    m = (m + m - _ONE) if lt else (m - _ONE)
    z = m * m
    y = (((((((_LP0 * m + _LP1) * m + _LP2) * m + _LP3) * m + _LP4) * m + _LP5) * m
          + _LP6) * m + _LP7) * m + _LP8
    y = y * m * z
    fe = np.float32(e)
    y = y + _LN2_LO * fe
    y = y - _HALF * z
    r = m + y
    r = r + _LN2_HI * fe
    r = x if x == _INF else r
    r = _NINF if x == _ZERO else r
    return r if x >= _ZERO else _NAN


@_inline
def lj_relu(x, alpha):  # pragma: no cover - compiled
    return x if x > _ZERO else x * alpha


@_inline
def lj_relu0(x):  # pragma: no cover - compiled
    return _ZERO if x <= _ZERO else x


@_inline
def lj_elu(x, alpha):  # pragma: no cover - compiled
    return x if x > _ZERO else alpha * lj_expm1(x)


@_inline
def lj_square(x):  # pragma: no cover - compiled
    return x * x


@_inline
def lj_cube(x):  # pragma: no cover - compiled
    return x * x * x


@_inline
def lj_logistic(x):  # pragma: no cover - compiled
    return np.true_divide(_ONE, _ONE + lj_exp(-x))


@_inline
def lj_swish(x, alpha):  # pragma: no cover - compiled
    return np.true_divide(x, _ONE + lj_exp(-(alpha * x)))


@_inline
def lj_soft_relu(x, alpha):  # pragma: no cover - compiled
    # 1/alpha * log(1 + exp(t)), t = alpha * x, as
    # max(t, 0) / alpha + log1p(exp(-|t|)) / alpha, where max(t, 0) / alpha is exactly
    # x or 0 (no overflow of alpha * x), and log1p(y) = log(u) * y / (u - 1), u = 1 + y.
    t = alpha * x
    y = lj_exp(-np.abs(t))
    u = _ONE + y
    l1p = y if u == _ONE else lj_log(u) * np.true_divide(y, u - _ONE)
    m = x if t > _ZERO else _ZERO
    return m + np.true_divide(l1p, alpha)


_MISH_HI = _F(20.0)  # tanh(softplus(x)) == 1 in float32 beyond this


@_inline
def lj_mish(x):  # pragma: no cover - compiled
    # tanh(log(1 + e)) = n / (n + 2) with n = e * (e + 2), e = exp(x): no cancellation.
    e = lj_exp(x)
    n = e * (e + _TWO)
    r = x * np.true_divide(n, n + _TWO)
    return x if x > _MISH_HI else r


_SQRT_2_OVER_PI = _F(0.79788458347320556640625)
_GELU_K = _F(0.044715)
_NEG_TWO = _F(-2.0)
_SQRT_HALF = _F(0.707106769084930419921875)


@_inline
def lj_gelu_tanh(x):  # pragma: no cover - compiled
    # 0.5 * x * (1 + tanh(u)) == x / (1 + exp(-2u)): no cancellation for x << 0.
    u = _SQRT_2_OVER_PI * x * (_ONE + _GELU_K * x * x)
    return np.true_divide(x, _ONE + lj_exp(_NEG_TWO * u))


@_inline
def lj_gelu_erf(x):  # pragma: no cover - compiled
    # 0.5 * x * (1 + erf(x / sqrt 2)) == 0.5 * x * erfc(-x / sqrt 2)
    return _HALF * x * math.erfc(-(x * _SQRT_HALF))


@_inline
def lj_clip(x, lo, hi):  # pragma: no cover - compiled
    # x <= lo -> lo (not x < lo): clip(-0, 0, ...) is +0 as in oneDNN; NaN stays NaN
    return lo if x <= lo else (hi if x > hi else x)


@_inline
def lj_hardsigmoid(x, alpha, beta):  # pragma: no cover - compiled
    v = alpha * x + beta
    return _ZERO if v <= _ZERO else (_ONE if v >= _ONE else v)


@_inline
def lj_hardswish(x, alpha, beta):  # pragma: no cover - compiled
    return x * lj_hardsigmoid(x, alpha, beta)


@_inline
def lj_max(a, b):  # pragma: no cover - compiled
    return a if (a > b or a != a) else b


@_inline
def lj_min(a, b):  # pragma: no cover - compiled
    return a if (a < b or a != a) else b


#: Names that expressions may reference; import them into generated modules.
RUNTIME_NAMES: tuple[str, ...] = (
    "lj_exp", "lj_expm1", "lj_tanh", "lj_log", "lj_relu", "lj_relu0", "lj_elu",
    "lj_square", "lj_cube", "lj_logistic", "lj_swish", "lj_soft_relu",
    "lj_mish", "lj_gelu_tanh", "lj_gelu_erf", "lj_clip", "lj_hardsigmoid",
    "lj_hardswish", "lj_max", "lj_min",
)

#: The import line a generated module needs (besides ``import numpy as np``).
RUNTIME_IMPORT = f"from layoutjit.eltwise_ops import {', '.join(RUNTIME_NAMES)}"


# --------------------------------------------------------------------------
# Expression generation
# --------------------------------------------------------------------------


def f32_literal(value: float) -> str:
    """Source for a float32 constant: ``np.float32(<exact repr>)`` (inf/NaN spelled via ``np``).

    >>> f32_literal(0.1)
    'np.float32(0.10000000149011612)'
    """
    v = _to_f32(value, "value", "literal")
    if math.isnan(v):
        return "np.float32(np.nan)"
    if math.isinf(v):
        return "np.float32(np.inf)" if v > 0 else "np.float32(-np.inf)"
    return f"np.float32({v!r})"


def eltwise_expr(alg: str, x: str, alpha: float = 0.0, beta: float = 0.0) -> str:
    """A float32 expression computing eltwise ``alg`` on the float32 variable named ``x``.

    ``alg`` is validated and normalized by :func:`check_eltwise`; alpha and
    beta (oneDNN's meanings, see :data:`ELTWISE_ALGS`) are rounded to float32
    and baked in. The expression may call the helpers in
    :data:`RUNTIME_NAMES` and ``np``.

    >>> eltwise_expr("clip", "v", -1, 6)
    'lj_clip(v, np.float32(-1.0), np.float32(6.0))'
    """
    name = check_eltwise(alg, alpha, beta)
    if not isinstance(x, str) or not x.strip():
        raise LayoutError(f"eltwise_expr: x must be a non-empty expression string, got {x!r}")
    a = _to_f32(alpha, "alpha", name)
    b = _to_f32(beta, "beta", name)
    A, B = f32_literal(a), f32_literal(b)
    if name == "relu":
        return f"lj_relu0({x})" if a == 0 else f"lj_relu({x}, {A})"
    if name == "linear":
        return f"({A} * ({x}) + {B})"
    if name in ("clip", "clip_v2"):
        return f"lj_clip({x}, {A}, {B})"
    if name == "pow":
        if b == 0:  # powf(x, 0) == 1 for every x, NaN included
            return f"({A} * np.float32(1.0))"
        if b == 1:
            return f"({A} * ({x}))"
        if b == 2:
            return f"({A} * lj_square({x}))"
        if b == 3:
            return f"({A} * lj_cube({x}))"
        if b == -1:
            return f"np.true_divide({A}, {x})"
        if b == 0.5:
            return f"({A} * np.sqrt({x}))"
        return f"({A} * np.power({x}, {B}))"
    simple = {
        "tanh": "lj_tanh({x})",
        "square": "lj_square({x})",
        "abs": "np.abs({x})",
        "sqrt": "np.sqrt({x})",
        "logistic": "lj_logistic({x})",
        "exp": "lj_exp({x})",
        "gelu_tanh": "lj_gelu_tanh({x})",
        "gelu_erf": "lj_gelu_erf({x})",
        "log": "lj_log({x})",
        "round": "np.rint({x})",
        "mish": "lj_mish({x})",
        "elu": "lj_elu({x}, {A})",
        "soft_relu": "lj_soft_relu({x}, {A})",
        "swish": "lj_swish({x}, {A})",
        "hardsigmoid": "lj_hardsigmoid({x}, {A}, {B})",
        "hardswish": "lj_hardswish({x}, {A}, {B})",
    }
    return simple[name].format(x=x, A=A, B=B)


def binary_expr(alg: str, a: str, b: str) -> str:
    """A float32 expression computing binary ``alg`` on the float32 variables ``a`` and ``b``.

    ``div`` by zero gives ±inf/NaN (IEEE), ``max``/``min`` propagate NaN.

    >>> binary_expr("mul", "s", "t")
    '(s * t)'
    """
    name = check_binary(alg)
    for arg in (a, b):
        if not isinstance(arg, str) or not arg.strip():
            raise LayoutError(f"binary_expr: operands must be expression strings, got {arg!r}")
    return {
        "add": f"({a} + {b})",
        "sub": f"({a} - {b})",
        "mul": f"({a} * {b})",
        "div": f"np.true_divide({a}, {b})",
        "max": f"lj_max({a}, {b})",
        "min": f"lj_min({a}, {b})",
    }[name]


def _f0(name: str, a: float, b: float) -> float:
    """f(+0) as the generated float32 code computes it (closed forms at x = 0)."""
    f = np.float32
    z, A, B = f(0.0), f(a), f(b)
    if name == "relu":
        return 0.0 if a == 0 else float(z * A)
    if name in ("tanh", "square", "abs", "sqrt", "round", "gelu_tanh", "gelu_erf", "mish"):
        return 0.0
    if name in ("elu", "swish"):
        return float(A * z)  # alpha * expm1(0); 0 / (1 + exp(-(alpha * 0)))
    if name == "linear":
        return float(A * z + B)
    if name in ("logistic", "exp", "log", "soft_relu"):
        return 1.0  # 0.5, 1, -inf, log(2)/alpha (inf or NaN at alpha = 0 / ±inf)
    if name in ("clip", "clip_v2"):
        return float(A if z < A else (B if z > B else z))
    if name == "pow":
        return float(A * np.power(z, B))
    v = A * z + B  # hardsigmoid / hardswish
    hs = z if v <= 0 else (f(1.0) if v >= 1 else v)
    return float(hs) if name == "hardsigmoid" else float(z * hs)


def eltwise_zero_preserving(alg: str, alpha: float = 0.0, beta: float = 0.0) -> bool:
    """Whether the generated code maps +0 to ±0, i.e. f(0) == 0 exactly.

    Exact for the given parameters (e.g. ``linear`` only with beta == 0,
    ``clip`` when alpha <= 0 <= beta, ``pow`` with beta > 0 or alpha == 0 and
    beta == 0, ``hardsigmoid`` with beta <= 0, and ``mish``). oneDNN's own
    ``eltwise_fwd_pd_t::eltwise_preserves_zero`` is a conservative subset
    (it omits mish, hardsigmoid and pow/linear with alpha == 0).

    >>> eltwise_zero_preserving("linear", 2.0, 0.0), eltwise_zero_preserving("logistic")
    (True, False)
    """
    name = check_eltwise(alg, alpha, beta)
    a = _to_f32(alpha, "alpha", name)
    b = _to_f32(beta, "beta", name)
    with np.errstate(all="ignore"):
        return bool(_f0(name, a, b) == 0.0)

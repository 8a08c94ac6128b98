"""Independent float64 reference for oneDNN's eltwise and binary algorithms.

Written from the formulas in oneDNN's ``doc/primitives/eltwise.md`` and
``doc/primitives/binary.md`` (not from layoutjit's code): the input is
widened to float64, the formula is evaluated with numpy, and the result is
rounded to float32 (as benchdnn rounds its reference to the destination
type, so that e.g. ``exp(100)`` is inf). alpha and beta are rounded to
float32 first because oneDNN takes them as ``float``.

NaN conventions (where the documented case analysis does not say): NaN in
gives NaN out for every algorithm except ``pow`` with beta == 0 (IEEE
``pow(x, 0) == 1``); ``max``/``min`` propagate NaN. ±inf follow IEEE
evaluation of the formula (``swish(-inf)`` = ``-inf / inf`` = NaN), except
``relu`` with alpha == 0, which is ``max(s, 0)`` (0 for -inf). ``pow``
follows oneDNN's special cases for beta == -1 and 0.5 (see below).

:func:`tolerance` follows benchdnn (``tests/benchdnn/eltwise/eltwise.cpp``,
``get_eltwise_threshold``; ``tests/benchdnn/utils/compare.cpp``): relative
threshold 4e-6 for f32, 4e-5 for gelu_tanh, elu, swish, tanh, soft_relu,
mish and log; values with ``|exp| <= 1e-5`` compare absolutely against
FLT_EPSILON. :func:`mismatches` applies it.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

FLT_EPS = float(np.finfo(np.float32).eps)
FLT_MAX = float(np.finfo(np.float32).max)

ELTWISE = (
    "relu", "tanh", "elu", "square", "abs", "sqrt", "linear", "soft_relu", "logistic",
    "exp", "gelu_tanh", "gelu_erf", "swish", "log", "clip", "clip_v2", "pow", "round",
    "hardsigmoid", "hardswish", "mish",
)
BINARY = ("add", "sub", "mul", "div", "max", "min")

_erf = np.frompyfunc(math.erf, 1, 1)


def _f32(v: float) -> float:
    with np.errstate(over="ignore"):
        return float(np.float32(v))


def _wide(x) -> np.ndarray:
    """float32 values widened to float64 (signaling NaNs quietly become NaN)."""
    with np.errstate(invalid="ignore"):
        return np.asarray(x, dtype=np.float32).astype(np.float64)


def eltwise_reference(alg: str, x, alpha: float = 0.0, beta: float = 0.0) -> np.ndarray:
    """dst = alg(src) per oneDNN's forward formula, computed in float64, returned as float32."""
    s = _wide(x)
    a, b = _f32(alpha), _f32(beta)
    with np.errstate(all="ignore"):
        if alg == "relu":
            # alpha == 0 is max(s, 0): -inf -> 0 (oneDNN's JIT: vmaxps; its C reference
            # computes 0 * -inf = NaN), NaN stays NaN
            d = np.maximum(s, 0.0) if a == 0 else np.where(s > 0, s, a * s)
        elif alg == "tanh":
            d = np.tanh(s)
        elif alg == "elu":
            d = np.where(s > 0, s, a * np.expm1(s))
        elif alg == "square":
            d = s * s
        elif alg == "abs":
            d = np.where(s > 0, s, -s)
        elif alg == "sqrt":
            d = np.sqrt(s)
        elif alg == "linear":
            d = a * s + b
        elif alg == "soft_relu":
            # 1/alpha * ln(1 + e^(alpha s)); logaddexp(0, t) = ln(1 + e^t) without overflow
            d = np.logaddexp(0.0, a * s) / a  # alpha == 0: inf (oneDNN divides by alpha too)
        elif alg == "logistic":
            d = 1.0 / (1.0 + np.exp(-s))
        elif alg == "exp":
            d = np.exp(s)
        elif alg == "gelu_tanh":
            d = 0.5 * s * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (s + 0.044715 * s**3)))
        elif alg == "gelu_erf":
            d = 0.5 * s * (1.0 + _erf(s / math.sqrt(2.0)).astype(np.float64))
        elif alg == "swish":
            d = s / (1.0 + np.exp(-a * s))
        elif alg == "log":
            d = np.log(s)
        elif alg in ("clip", "clip_v2"):
            # beta if s > beta (clip_v2: s >= beta, same value); s if alpha < s <= beta;
            # alpha if s <= alpha
            d = np.where(s <= a, a, np.where(s > b, b, s))
            d = np.where(np.isnan(s), s, d)
        elif alg == "pow":
            # oneDNN's JIT (pow_compute_vector_fwd) special-cases beta == -1 as alpha / s and
            # beta == 0.5 as alpha * sqrt(s) (so sqrt's -0 -> -0, -inf -> NaN); otherwise
            # s**beta is a float32 intermediate (x*x, or powf) that can overflow before
            # the scaling by alpha
            if b == -1:
                d = a / s
            elif b == 0.5:
                d = a * np.sqrt(s)
            else:
                d = a * np.power(s, b).astype(np.float32).astype(np.float64)
        elif alg == "round":
            d = np.rint(s)  # half to even
        elif alg in ("hardsigmoid", "hardswish"):
            hs = np.maximum(0.0, np.minimum(1.0, a * s + b))
            d = hs if alg == "hardsigmoid" else s * hs
        elif alg == "mish":
            d = s * np.tanh(np.log1p(np.exp(s)))
        else:
            raise ValueError(f"no reference for eltwise {alg!r}")
        return np.asarray(d, dtype=np.float64).astype(np.float32)


def binary_reference(alg: str, a, b) -> np.ndarray:
    """dst = src0 op src1 in float64, returned as float32; max/min propagate NaN."""
    p = _wide(a)
    q = _wide(b)
    with np.errstate(all="ignore"):
        d = {
            "add": lambda: p + q,
            "sub": lambda: p - q,
            "mul": lambda: p * q,
            "div": lambda: p / q,
            "max": lambda: np.maximum(p, q),
            "min": lambda: np.minimum(p, q),
        }[alg]()
        return d.astype(np.float32)


class Tolerance(NamedTuple):
    """Pass when ``|got - exp| <= rtol * |exp|``, or ``<= atol`` when ``|exp| <= small``."""

    rtol: float
    atol: float
    small: float = 1e-5


# benchdnn get_eltwise_threshold: f32 trh = 4e-6, 4e-5 for "complex" algorithms.
_HIGH = {"gelu_tanh", "elu", "swish", "tanh", "soft_relu", "mish", "log"}


def tolerance(alg: str) -> Tolerance:
    """The tolerance used for ``alg`` (eltwise or binary name) against this float64 reference.

    Relative threshold as benchdnn's f32 one; absolute FLT_EPSILON for results
    within 1e-5 of zero (benchdnn's small-value rule). Binary ops are single
    correctly-rounded IEEE operations, and rounding the exact float64 result of
    two float32 operands to float32 is the same correctly-rounded value: exact.
    """
    if alg in BINARY:
        return Tolerance(rtol=0.0, atol=0.0, small=0.0)
    return Tolerance(rtol=4e-5 if alg in _HIGH else 4e-6, atol=FLT_EPS)


def _cancellation_scale(alg: str, s: np.ndarray, a: float, b: float) -> np.ndarray:
    """Magnitude of the terms that float32 evaluation rounds before they cancel.

    ``alpha * x + beta`` rounds ``alpha * x`` (and oneDNN's JIT uses an FMA
    that doesn't), so near ``alpha * x == -beta`` the error is relative to
    ``|alpha * x| + |beta|``, not to the tiny result. Other algorithms: |exp|.
    """
    with np.errstate(all="ignore"):
        if alg == "linear":
            return np.abs(a * s) + abs(b)
        if alg == "hardsigmoid":
            return np.minimum(np.abs(a * s) + abs(b), 1.0)
        if alg == "hardswish":
            return np.abs(s) * np.minimum(np.abs(a * s) + abs(b), 1.0)
    return np.zeros_like(s)


def mismatches(alg: str, got, x, alpha: float = 0.0, beta: float = 0.0,
               exp=None) -> np.ndarray:
    """Indices where ``got`` (float32) is not within :func:`tolerance` of the reference.

    NaN must match NaN; an infinity must match an infinity of the same sign,
    except that a finite value of magnitude >= FLT_MAX * (1 - rtol) may stand
    for an overflowed one (the overflow threshold is not exact in float32).
    ``exp`` defaults to :func:`eltwise_reference` ``(alg, x, alpha, beta)``.
    """
    got = _wide(got).ravel()
    if exp is None:
        exp = eltwise_reference(alg, x, alpha, beta)
    e = _wide(exp).ravel()
    s = _wide(x).ravel()
    tol = tolerance(alg)
    a, b = _f32(alpha), _f32(beta)
    with np.errstate(all="ignore"):
        same = (got == e) | (np.isnan(got) & np.isnan(e))
        diff = np.abs(got - e)
        scale = np.maximum(np.abs(e), _cancellation_scale(alg, s, a, b)) if alg in ELTWISE \
            else np.abs(e)
        close = np.isfinite(diff) & (
            (diff <= tol.rtol * scale) | ((np.abs(e) <= tol.small) & (diff <= tol.atol)))
        big = FLT_MAX * (1 - tol.rtol)
        overflow = (np.isinf(got) | np.isinf(e)) & (np.sign(got) == np.sign(e)) & \
            (np.minimum(np.abs(got), np.abs(e)) >= big)
        ok = same | close | overflow
    return np.flatnonzero(~ok)


def describe(alg: str, idx, got, x, exp, alpha: float = 0.0, beta: float = 0.0,
             limit: int = 8) -> str:
    """A readable list of the first mismatches (for assertion messages)."""
    got = np.asarray(got).ravel()
    x = np.asarray(x).ravel()
    exp = np.asarray(exp).ravel()
    rows = [f"{alg}(alpha={alpha!r}, beta={beta!r}): {len(idx)} mismatches"]
    for i in list(idx)[:limit]:
        rows.append(f"  x={x[i]!r} got={got[i]!r} exp={exp[i]!r}")
    return "\n".join(rows)

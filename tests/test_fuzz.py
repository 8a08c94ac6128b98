"""Differential fuzzing against independent numpy references (issue 6, item 5).

Hypothesis draws a random case -- rank, dims, layouts (format tags, random
abstract blocked tags, gapped/permuted strides, submemories of a random
parent, stride-0 broadcast sources, explicit ``offset0`` and extra padding),
data types, attributes (scales and zero points with random masks; ``sum``,
``eltwise`` and ``binary`` post-ops with broadcasting ``src1`` in any
layout), an in-place eltwise, small planner thresholds (parallel driver and
non-temporal stores on small tensors) and buffer misalignment -- compiles it
and compares with

* ``reference.reorder`` for plain reorders (bit-exact);
* :func:`attrs_reference` for attributes: oneDNN's formula from
  ``layoutjit/attrs.py``, evaluated step by step in float32 numpy. Exact,
  except after a transcendental eltwise (exp, tanh, ...: tolerance below).

Every buffer the kernel reads sits flush against an inaccessible page (an
over- or under-read crashes), and the destination sits between sentinel guards
(a stray write is caught), at a random byte misalignment.

CI runs a bounded number of examples; for long runs use ``tests/fuzz_long.py
--minutes 30`` (isolated worker processes, cases/s, reproducers).
"""

from __future__ import annotations

import ctypes
import mmap
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import layoutjit as lj
import layoutjit.compiler as compiler
import layoutjit.plan as plan_mod
import reference as ref
from eltwise_reference import binary_reference, eltwise_reference
from layoutjit.cache import MemoryCache
from layoutjit.desc import MemoryDesc, _rebuild
from layoutjit.kernel import element_span

LETTERS = "abcdefghijkl"
DTYPES = ["f32", "f64", "f16", "bf16", "s32", "s8", "u8"]
INTS = ("s32", "s8", "u8")
NAMED = {1: ["a"], 2: ["ab", "ba", "Ab16a", "aB16b", "AB16b16a", "BA16a16b", "AB8a4b", "Ab4a"],
         3: ["abc", "acb", "bac", "cba", "aBc16b", "ABc16a16b", "ABc8a16b2a", "aCB16b16c", "aBc4b"],
         4: ["nchw", "nhwc", "chwn", "nChw8c", "nChw16c", "Acdb16a", "OIhw16i16o", "OIhw4i16o4i",
             "ABcd8a16b2a", "BAcd16b16a", "aBCd16c16b", "ABcd2a8b8a2b"],
         5: ["ncdhw", "ndhwc", "nCdhw16c", "gOIhw16i16o", "ABcde8a16b2a", "acbde"],
         6: ["abcdef", "acbdef", "aBcdef16b", "defcab", "abcdfe"]}
# eltwise algorithms whose result is one correctly rounded float32 operation of the input (the
# float64 reference rounded to float32 is bit-exact); the others (transcendental, or several
# roundings in float32: linear, hardsigmoid, hardswish) go last in a chain, with a tolerance
EXACT_ELTWISE = ("relu", "abs", "square", "sqrt", "clip", "clip_v2", "round")
APPROX_ELTWISE = ("tanh", "elu", "soft_relu", "logistic", "exp", "gelu_tanh", "gelu_erf", "swish",
                  "log", "pow", "mish", "linear", "hardsigmoid", "hardswish")
BINARY = ("add", "sub", "mul", "div", "max", "min")
MAX_ELEMS = 6000
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")


# =========================================================================== cases
@dataclass
class Case:
    """One fuzz case: plain data, reproducible from its ``repr``-able fields."""

    src: MemoryDesc
    dst: MemoryDesc
    scales: dict = field(default_factory=dict)
    zero_points: dict = field(default_factory=dict)
    post_ops: list = field(default_factory=list)
    eltwise: tuple | None = None  # (alg, alpha, beta): an in-place compile_eltwise case
    seed: int = 0
    misalign: tuple = (0, 0)  # byte offsets of src and dst from a 64-byte boundary
    head_guard: bool = False  # the inaccessible page before (True) or after the source
    small_thresholds: bool = False  # parallel driver and NT stores from a few KiB on

    @property
    def has_attrs(self) -> bool:
        return bool(self.scales or self.zero_points or self.post_ops)

    def reproducer(self) -> str:
        """Python code that runs this case again (from the repository root)."""
        def md(m: MemoryDesc) -> str:
            f = list(m.__reduce__()[1])
            f[2] = str(f[2])
            return f"_rebuild(*{f!r})"

        ops = []
        for p in self.post_ops:
            if p[0] == "binary":
                ops.append(f"('binary', {p[1]!r}, {md(p[2])})")
            else:
                ops.append(repr(p))
        return "\n".join([
            "import sys; sys.path.insert(0, 'tests')",
            "from layoutjit.desc import _rebuild",
            "from test_fuzz import Case, run_case",
            f"case = Case(src={md(self.src)}, dst={md(self.dst)},",
            f"            scales={self.scales!r}, zero_points={self.zero_points!r},",
            f"            post_ops=[{', '.join(ops)}], eltwise={self.eltwise!r}, seed={self.seed},",
            f"            misalign={self.misalign!r}, head_guard={self.head_guard},"
            f" small_thresholds={self.small_thresholds})",
            "print(run_case(case))",
        ])


def _abstract_tag(draw, rank: int) -> str:
    perm = draw(st.permutations(list(range(rank))))
    nblk = draw(st.sampled_from([0, 0, 1, 1, 1, 2, 2, 3]))
    blocks = [(draw(st.sampled_from([2, 4, 8, 16, 16, 3, 5])), draw(st.integers(0, rank - 1)))
              for _ in range(nblk)]
    blocked = {d for _, d in blocks}
    outer = "".join(LETTERS[d].upper() if d in blocked else LETTERS[d] for d in perm)
    return outer + "".join(f"{b}{LETTERS[d]}" for b, d in blocks)


def _strided(draw, dims: Sequence[int], dt: str, allow_bcast: bool) -> MemoryDesc:
    rank = len(dims)
    order = draw(st.permutations(list(range(rank))))
    strides = [0] * rank
    s = draw(st.sampled_from([1, 1, 1, 2]))
    for d in reversed(order):
        if allow_bcast and dims[d] > 1 and draw(st.integers(0, 3)) == 0:
            strides[d] = 0
            continue
        strides[d] = s
        s *= dims[d] + draw(st.sampled_from([0, 0, 0, 1, 3]))
    return MemoryDesc(dims, dt, strides=strides)


def _tagged(draw, dims: Sequence[int], dt: str) -> MemoryDesc:
    rank = len(dims)
    if rank in NAMED and draw(st.booleans()):
        return MemoryDesc(dims, dt, draw(st.sampled_from(NAMED[rank])))
    return MemoryDesc(dims, dt, _abstract_tag(draw, rank))


def _submemory(draw, dims: Sequence[int], dt: str) -> MemoryDesc:
    rank = len(dims)
    tag = draw(st.sampled_from(NAMED[rank])) if rank in NAMED and draw(st.booleans()) else _abstract_tag(draw, rank)
    probe = MemoryDesc([1] * rank, dt, tag)
    blocks = probe.blocks
    pdims, offs = [], []
    for d, n in enumerate(dims):
        b = blocks[d]
        off = draw(st.integers(0, 2)) * b
        right = n % b != 0 and n > b or draw(st.booleans())
        pdims.append(off + n + (0 if right else draw(st.integers(1, 2)) * b))
        offs.append(off)
    parent = MemoryDesc(pdims, dt, tag)
    try:
        return parent.submemory_desc(dims, offs)
    except lj.Unimplemented:  # not expected by construction; keep the strategy total
        return MemoryDesc(dims, dt, tag)


def _from_blocking(draw, dims: Sequence[int], dt: str) -> MemoryDesc:
    """A tag's blocking with extra zero padding and/or an explicit offset0."""
    base = _tagged(draw, dims, dt)
    blocks = base.blocks
    pd = [p + (draw(st.integers(0, 1)) * b) for p, b in zip(base.padded_dims, blocks)]
    # recompute dense strides for the larger padded dims in the tag's outer order
    order = sorted(range(len(dims)), key=lambda d: -base.strides[d])
    strides = [0] * len(dims)
    s = base.block_size
    for d in reversed(order):
        strides[d] = s
        s *= pd[d] // blocks[d]
    off0 = draw(st.sampled_from([0, 0, 1, 7, 64]))
    try:
        return MemoryDesc.from_blocking(dims, dt, strides, base.inner_blks, base.inner_idxs,
                                        padded_dims=pd, offset0=off0)
    except lj.LayoutError:  # from_blocking's strides check is stricter than tags (ties of 1-block dims)
        return base


def _layout(draw, dims: Sequence[int], dt: str, *, src: bool) -> MemoryDesc:
    kinds = ["tag", "tag", "tag", "strided", "sub", "blocking"]
    if src:
        kinds.append("bcast")
    kind = draw(st.sampled_from(kinds))
    if kind == "tag":
        return _tagged(draw, dims, dt)
    if kind in ("strided", "bcast"):
        return _strided(draw, dims, dt, allow_bcast=kind == "bcast")
    if kind == "sub":
        return _submemory(draw, dims, dt)
    return _from_blocking(draw, dims, dt)


def _elems(md: MemoryDesc) -> int:
    n = 1
    for p in md.padded_dims:
        n *= max(p, 1)
    return n


@st.composite
def cases(draw, *, big: bool = True) -> Case:
    rank = draw(st.integers(1, 6))
    cap = {1: 300, 2: 40, 3: 14, 4: 8, 5: 5, 6: 4}[rank]
    large = big and draw(st.integers(0, 19)) == 0
    if large:  # beyond the parallel threshold
        rank = draw(st.integers(2, 3))
        dims = [draw(st.integers(64, 700)), draw(st.integers(64, 700))] + \
            ([draw(st.integers(1, 3))] if rank == 3 else [])
    else:
        dims = [draw(st.integers(1, cap)) for _ in range(rank)]
        if draw(st.integers(0, 40)) == 0:
            dims[draw(st.integers(0, rank - 1))] = 0
    sdt, ddt = draw(st.sampled_from(DTYPES)), draw(st.sampled_from(DTYPES))
    src = _layout(draw, dims, sdt, src=True)
    dst = _layout(draw, dims, ddt, src=False)
    limit = 400_000 if large else MAX_ELEMS
    if _elems(src) > limit:
        src = MemoryDesc(dims, sdt, LETTERS[:rank] if rank > 1 else "a")
    if _elems(dst) > limit:
        dst = MemoryDesc(dims, ddt, LETTERS[:rank][::-1])
    case = Case(src, dst, seed=draw(st.integers(0, 2**31)),
                misalign=(draw(st.sampled_from([0, 0, 1, 2, 4, 8, 32])), draw(st.sampled_from([0, 0, 1, 2, 4, 8, 32]))),
                head_guard=draw(st.booleans()), small_thresholds=draw(st.integers(0, 3)) == 0)
    mode = draw(st.integers(0, 9))
    if mode == 0 and not large:  # in-place eltwise on one layout
        md = _layout(draw, dims, draw(st.sampled_from(DTYPES)), src=False)
        if _elems(md) > limit:
            md = MemoryDesc(dims, md.dtype, LETTERS[:rank] if rank > 1 else "a")
        alg, a, b = _eltwise(draw)
        case.src = case.dst = md
        case.eltwise = (alg, a, b)
    elif mode >= 6:
        _attributes(draw, case, rank, dims)
    return case


def _eltwise(draw, exact_only: bool = False) -> tuple[str, float, float]:
    alg = draw(st.sampled_from(EXACT_ELTWISE if exact_only or draw(st.booleans()) else APPROX_ELTWISE))
    vals = st.sampled_from([0.0, 1.0, -1.0, 0.5, 2.0, -0.25, 3.0, 0.1])
    a, b = draw(vals), draw(vals)
    if alg in ("clip", "clip_v2") and b < a:
        a, b = b, a
    if alg == "pow":
        b = draw(st.sampled_from([0.0, 1.0, 2.0, 0.5, -1.0, 3.0]))
    return alg, a, b


def _attributes(draw, case: Case, rank: int, dims: Sequence[int]) -> None:
    def mask() -> int:
        return draw(st.integers(0, (1 << rank) - 1))

    sdt, ddt = str(case.src.dtype), str(case.dst.dtype)
    if draw(st.booleans()):
        case.scales["src"] = mask()
    if draw(st.booleans()):
        case.scales["dst"] = mask()
    if sdt in INTS and draw(st.booleans()):
        case.zero_points["src"] = mask()
    if ddt in INTS and draw(st.booleans()):
        case.zero_points["dst"] = mask()
    n = draw(st.integers(0, 3))
    for i in range(n):
        kind = draw(st.sampled_from(["sum", "eltwise", "binary"]))
        if kind == "sum":
            case.post_ops.append(("sum", draw(st.sampled_from([1.0, 0.5, -2.0, 0.25, 0.0]))))
        elif kind == "eltwise":
            alg, a, b = _eltwise(draw, exact_only=i != n - 1)  # a tolerance only at the end
            case.post_ops.append(("eltwise", alg, a, b))
        else:
            bdims = [d if draw(st.booleans()) else 1 for d in dims]
            bdt = draw(st.sampled_from(["f32", "bf16", "f16", "s8", "u8", "s32"]))
            bmd = _layout(draw, bdims, bdt, src=True) if draw(st.booleans()) else \
                MemoryDesc(bdims, bdt, LETTERS[:rank] if rank > 1 else "a")
            if _elems(bmd) > MAX_ELEMS * 4:
                bmd = MemoryDesc(bdims, bdt, LETTERS[:rank] if rank > 1 else "a")
            case.post_ops.append(("binary", draw(st.sampled_from(BINARY)), bmd))
    if not case.has_attrs:
        case.scales["src"] = 0


# ====================================================================== guarded memory
_PAGE = mmap.PAGESIZE
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_keep: list[Any] = []  # mmaps stay mapped while their arrays live (freed by the next case)


def read_guarded(data: np.ndarray, misalign: int, head: bool) -> np.ndarray:
    """A read-only copy of ``data``'s bytes flush against an inaccessible page.

    ``head``: the page before the first byte is inaccessible (under-reads crash);
    else the page after the last byte (over-reads crash). ``misalign`` shifts
    the start by that many bytes from a 64-byte boundary where the guard allows it.
    """
    raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    n = raw.size
    pages = -(-(n + 64) // _PAGE) + 1
    mm = mmap.mmap(-1, pages * _PAGE)
    whole = np.frombuffer(mm, np.uint8)
    base = whole.ctypes.data
    if head:
        guard, start = base, _PAGE + misalign
    else:
        guard, start = base + (pages - 1) * _PAGE, (pages - 1) * _PAGE - n
    if _libc.mprotect(ctypes.c_void_p(guard), _PAGE, 0) != 0:
        raise OSError(ctypes.get_errno(), "mprotect")
    view = whole[start:start + n]
    view[:] = raw
    _keep.append(mm)
    out = view.view(data.dtype) if data.dtype.itemsize and n % data.dtype.itemsize == 0 else view
    out.flags.writeable = False
    return out


def release_guarded() -> None:
    _keep.clear()


SENTINEL = 0x5A
GUARD = 64


def write_guarded(init: np.ndarray, misalign: int) -> tuple[np.ndarray, np.ndarray]:
    """(whole, dst): ``init``'s bytes at ``misalign`` from a 64-byte boundary, between sentinels."""
    raw = init.reshape(-1).view(np.uint8)
    n = raw.size
    whole = lj.aligned_empty(n + 2 * GUARD + 64, np.uint8)
    whole[:] = SENTINEL
    start = GUARD + misalign
    whole[start:start + n] = raw
    return whole, whole[start:start + n]


# ========================================================================= references
def _f32(x: Any) -> np.float32:
    return np.float32(x)


def eltwise_f32(alg: str, x: np.ndarray, a: float, b: float) -> np.ndarray:
    # layoutjit's abs is np.abs (+0 for -0, as oneDNN's JIT); the float64 reference follows
    # oneDNN's written formula s > 0 ? s : -s (-0 for +0), which a later pow(-1) turns into -inf
    if alg == "abs":
        return np.abs(x).astype(np.float32)
    return eltwise_reference(alg, x, a, b)


def _masked_values(values: np.ndarray, mask: int, dims: Sequence[int]) -> np.ndarray:
    shape = [d if mask >> i & 1 else 1 for i, d in enumerate(dims)]
    return np.broadcast_to(values.reshape(shape), tuple(dims))


def attrs_reference(case: Case, src: np.ndarray, dst_old: np.ndarray, rt: dict) -> np.ndarray:
    """The expected destination buffer after a reorder with attributes (attrs.py's formula).

    Per destination element, in float32: acc = src_scale * (src - src_zp); post-ops
    in order (sum: acc += beta * dst_old; eltwise: f(acc); binary: op(acc, src1));
    dst = convert(acc / dst_scale + dst_zp). Padding is zero; gaps keep their bytes.
    """
    s_md, d_md = case.src, case.dst
    sdt, ddt = str(s_md.dtype), str(d_md.dtype)
    dims = tuple(d_md.dims)
    out = dst_old.copy()
    if any(d == 0 for d in dims):
        return out
    with np.errstate(all="ignore"):
        acc = ref.to_f32(ref.logical(src, s_md), sdt).astype(np.float32)
        if "src" in case.zero_points:
            zp = _masked_values(rt["zero_points"]["src"], case.zero_points["src"], dims)
            acc = (acc - zp.astype(np.float32)).astype(np.float32)
        if "src" in case.scales:
            sc = _masked_values(rt["scales"]["src"], case.scales["src"], dims)
            acc = (sc * acc).astype(np.float32)
        old = ref.to_f32(ref.logical(dst_old, d_md), ddt).astype(np.float32)
        bins = iter(rt.get("binary", []))
        for p in case.post_ops:
            if p[0] == "sum":
                if p[1] != 0.0:
                    acc = (acc + (_f32(p[1]) * old).astype(np.float32)).astype(np.float32)
            elif p[0] == "eltwise":
                acc = eltwise_f32(p[1], acc, p[2], p[3])
            else:
                bmd = p[2]
                b = ref.to_f32(ref.logical(next(bins), bmd), str(bmd.dtype)).astype(np.float32)
                acc = binary_reference(p[1], acc, np.broadcast_to(b, dims))
        if "dst" in case.scales:
            sc = _masked_values(rt["scales"]["dst"], case.scales["dst"], dims)
            acc = np.true_divide(acc, sc).astype(np.float32)
        if "dst" in case.zero_points:
            zp = _masked_values(rt["zero_points"]["dst"], case.zero_points["dst"], dims)
            acc = (acc + zp.astype(np.float32)).astype(np.float32)
        vals = ref.from_f32(acc, ddt)
    return _store_logical(out, d_md, vals)


def _store_logical(out: np.ndarray, md, vals: np.ndarray) -> np.ndarray:
    """Write the logical values ``vals`` into buffer ``out`` laid out as ``md``; padding zero."""
    dims = tuple(md.dims)
    dst = out.reshape(-1).view(ref.STORAGE[str(md.dtype)])
    offs = ref.offsets(md)
    pad = np.ones(offs.shape, dtype=bool)
    pad[tuple(slice(0, n) for n in dims)] = False
    dst[offs[pad]] = 0
    dst[offs[tuple(slice(0, n) for n in dims)].reshape(-1)] = vals.reshape(-1)
    return out


def eltwise_in_place_reference(case: Case, buf: np.ndarray) -> np.ndarray:
    md = case.dst
    dt = str(md.dtype)
    out = buf.copy()
    dims = tuple(md.dims)
    if any(d == 0 for d in dims):
        return out
    alg, a, b = case.eltwise  # type: ignore[misc]
    with np.errstate(all="ignore"):
        x = ref.to_f32(ref.logical(buf, md), dt).astype(np.float32)
        vals = ref.from_f32(eltwise_f32(alg, x, a, b), dt)
    return _store_logical(out, md, vals)


def _decode(raw: np.ndarray, dt: str) -> np.ndarray:
    v = raw.view(ref.STORAGE[dt])
    if dt in ("f32", "f64"):
        return v.astype(np.float64)
    if dt in ("f16", "bf16"):
        return ref.to_f32(v, dt).astype(np.float64)
    return v.astype(np.float64)


def compare(got: np.ndarray, exp: np.ndarray, md: MemoryDesc, approx: bool, *,
            signed_zero: bool = True) -> str | None:
    """None when the buffers agree: bit-exact (NaN payloads aside), or within tolerance.

    ``signed_zero=False`` lets +0 match -0 (the float64 references of ``abs`` and the
    like follow oneDNN's formula ``s > 0 ? s : -s``, -0 for +0; its JIT gives +0).
    """
    g8, e8 = got.reshape(-1).view(np.uint8), exp.reshape(-1).view(np.uint8)
    if np.array_equal(g8, e8):
        return None
    dt = str(md.dtype)
    size = md.dtype.size
    bad = np.flatnonzero(g8 != e8) // size
    bad = np.unique(bad)
    g = _decode(g8[: g8.size // size * size], dt)[bad]
    e = _decode(e8[: e8.size // size * size], dt)[bad]
    with np.errstate(all="ignore"):
        ok = np.isnan(g) & np.isnan(e)
        if not signed_zero:
            ok |= (g == 0) & (e == 0)
        if approx:
            if dt in INTS:  # one float32 ulp of the value before conversion, or a rounding step
                ok |= np.abs(g - e) <= 1 + 2.0**-22 * np.abs(e)
            else:
                rtol = {"f32": 1e-4, "f64": 1e-4, "f16": 2.0**-10, "bf16": 2.0**-7}[dt]
                big = {"f32": 3.4e38, "f64": 3.4e38, "f16": 65504.0, "bf16": 3.38e38}[dt]
                ok |= np.abs(g - e) <= rtol * np.abs(e) + 2e-5
                ok |= (np.sign(g) == np.sign(e)) & (np.minimum(np.abs(g), np.abs(e)) >= big * (1 - 2 * rtol))
    if ok.all():
        return None
    idx = bad[~ok][:6]
    return (f"{int((~ok).sum())} element(s) differ, e.g. at element offsets {idx.tolist()}: "
            f"got {_decode(g8[: g8.size // size * size], dt)[idx].tolist()}, "
            f"expected {_decode(e8[: e8.size // size * size], dt)[idx].tolist()}")


# =============================================================================== runner
def _nbytes(md: MemoryDesc) -> int:
    """The smallest buffer a kernel accepts for md (exactly get_size, or the span of a view)."""
    size = md.get_size()
    span = element_span(md) if md.format_kind == "blocked" else None
    req = (span[1] + 1) * md.dtype.size if span is not None else 0
    return size if (md.is_dense() and req <= size) else req


def _runtime_values(case: Case, rng: np.random.Generator) -> dict:
    dims = case.dst.dims

    def count(mask: int) -> int:
        n = 1
        for i, d in enumerate(dims):
            if mask >> i & 1:
                n *= d
        return n

    rt: dict = {}
    if case.scales:
        rt["scales"] = {k: rng.choice(np.array([0.25, 0.5, 1.0, 2.0, 3.0, -1.5, 0.1], np.float32),
                                      count(m)).astype(np.float32) for k, m in case.scales.items()}
    if case.zero_points:
        rt["zero_points"] = {k: rng.integers(-6, 7, count(m)).astype(np.int32)
                             for k, m in case.zero_points.items()}
    bins = []
    for p in case.post_ops:
        if p[0] == "binary":
            bmd = p[2]
            n = _nbytes(bmd) // bmd.dtype.size
            bins.append(ref.random_raw(n, str(bmd.dtype), rng))
    if bins:
        rt["binary"] = bins
    return rt


def run_case(case: Case) -> str:
    """Compile and run ``case``; raise AssertionError on any disagreement; returns a summary."""
    old = (plan_mod.PARALLEL_MIN_BYTES, plan_mod.NT_MIN_BYTES, compiler.KERNELS)
    if case.small_thresholds:  # a private in-memory cache: these plans are for this case only
        plan_mod.PARALLEL_MIN_BYTES, plan_mod.NT_MIN_BYTES = 2048, 4096
        compiler.KERNELS = MemoryCache()
    try:
        return _run_case(case)
    finally:
        plan_mod.PARALLEL_MIN_BYTES, plan_mod.NT_MIN_BYTES, compiler.KERNELS = old
        release_guarded()


def _run_case(case: Case) -> str:
    rng = np.random.default_rng(case.seed)
    s_md, d_md = case.src, case.dst
    sdt, ddt = str(s_md.dtype), str(d_md.dtype)
    if case.eltwise is not None:
        k = lj.compile_eltwise(d_md, *case.eltwise)
        n = _nbytes(d_md) // d_md.dtype.size
        init = ref.random_raw(n, ddt, rng)
        # a valid buffer holds zeros in its padding
        init = ref.reorder(init, d_md, d_md, np.zeros_like(init)) if n else init
        whole, buf = write_guarded(init, case.misalign[1])
        before = whole.copy()
        exp = eltwise_in_place_reference(case, init)
        k(buf, buf)
        bad = compare(buf, exp, d_md, approx=case.eltwise[0] in APPROX_ELTWISE, signed_zero=False)
        assert bad is None, f"in-place eltwise {case.eltwise}: {bad}"
        lo, hi = GUARD + case.misalign[1], GUARD + case.misalign[1] + buf.size
        assert np.array_equal(whole[:lo], before[:lo]) and np.array_equal(whole[hi:], before[hi:]), \
            "eltwise wrote outside its buffer"
        return "eltwise"
    src_n = _nbytes(s_md) // s_md.dtype.size
    src_vals = ref.random_raw(src_n, sdt, rng)
    src = read_guarded(src_vals, case.misalign[0], case.head_guard)
    dst_n = _nbytes(d_md) // d_md.dtype.size
    init = ref.random_raw(dst_n, ddt, rng)
    whole, dst8 = write_guarded(init, case.misalign[1])
    dst = dst8.view(d_md.dtype.storage) if dst8.size % d_md.dtype.size == 0 else dst8
    before = whole.copy()
    if case.has_attrs:
        k = lj.compile_reorder(s_md, d_md, scales=case.scales or None,
                               zero_points=case.zero_points or None, post_ops=case.post_ops or None)
        rt = _runtime_values(case, rng)
        exp = attrs_reference(case, src_vals, init, rt)
        guarded_rt = {}
        if "scales" in rt:
            guarded_rt["scales"] = {k_: read_guarded(v, 0, False) for k_, v in rt["scales"].items()}
        if "zero_points" in rt:
            guarded_rt["zero_points"] = {k_: read_guarded(v, 4, True) for k_, v in rt["zero_points"].items()}
        if "binary" in rt:
            guarded_rt["binary"] = [read_guarded(v, i % 3, bool(i % 2)) for i, v in enumerate(rt["binary"])]
        out = k(src, dst, **guarded_rt)
        approx = any(p[0] == "eltwise" and p[1] in APPROX_ELTWISE for p in case.post_ops)
    else:
        k = lj.compile_reorder(s_md, d_md)
        exp = ref.reorder(src_vals, s_md, d_md, init)
        out = k(src, dst)
        approx = False
    assert out is dst
    bad = compare(dst8, exp, d_md, approx, signed_zero=not case.has_attrs)
    assert bad is None, bad
    lo, hi = GUARD + case.misalign[1], GUARD + case.misalign[1] + dst8.size
    assert np.array_equal(whole[:lo], before[:lo]) and np.array_equal(whole[hi:], before[hi:]), \
        "the kernel wrote outside the destination buffer"
    # the exact sizing matches the descriptor's own (both for sane descriptors)
    for md in (s_md, d_md):
        span = element_span(md)
        if span is not None:
            assert (span[1] + 1) * md.dtype.size == md.required_bytes(), md
    return "attrs" if case.has_attrs else "reorder"


# ============================================================================ the test
@settings(max_examples=int(os.environ.get("LAYOUTJIT_FUZZ_EXAMPLES", 50)), deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(cases())
def test_differential_fuzz(case):
    try:
        run_case(case)
    except lj.Unimplemented:
        pass  # a valid request layoutjit refuses (before writing anything)
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- reproducer ---\n{case.reproducer()}") from None


def test_reproducer_round_trip():
    case = Case(MemoryDesc([2, 3, 4], "f32", "abc").submemory_desc([2, 2, 4], [0, 1, 0]),
                MemoryDesc([2, 2, 4], "s8", "aBc16b"), scales={"src": 2},
                post_ops=[("binary", "add", MemoryDesc([1, 2, 4], "f32", "acb"))], seed=3, misalign=(1, 3))
    ns: dict = {}
    code = case.reproducer().replace("print(run_case(case))", "")
    exec(code, ns)
    again = ns["case"]
    assert again.src == case.src and again.dst == case.dst and again.post_ops == case.post_ops
    assert run_case(again) == "attrs"


@pytest.mark.parametrize("head", [True, False])
def test_guard_pages_catch_reads(head):
    """The guard page is really inaccessible (checked in a child process: the read crashes it)."""
    import subprocess
    import sys

    code = ("import sys; sys.path.insert(0, 'tests'); import numpy as np; from test_fuzz import read_guarded; "
            f"a = read_guarded(np.arange(100, dtype=np.uint8), 0, {head}); "
            "import ctypes; p = a.ctypes.data; "
            f"print(ctypes.c_uint8.from_address(p + ({-1} if {head} else 100)).value)")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60, cwd=root)
    assert r.returncode < 0, (r.returncode, r.stdout, r.stderr)  # killed by SIGSEGV


__all__ = ["Case", "cases", "run_case", "attrs_reference", "compare", "_rebuild"]

"""Independent numpy references for the tests (nothing here calls layoutjit's compiler).

- ``offsets(md)``: element offset of every padded position, from the
  descriptor's fields by oneDNN's documented ``off_v`` arithmetic.
- ``pack_by_tag(x, tag)``: the buffer a tag describes, built the einops way
  (pad, reshape every dim into its digits, transpose into memory order).
- ``convert(values, sdt, ddt)``: oneDNN's conversion rules in numpy.
- ``reorder(src_buf, src_md, dst_md, dst_buf)``: the expected destination.
"""

from __future__ import annotations

import re

import numpy as np

LETTERS = "abcdefghijkl"
STORAGE = {"f32": np.float32, "f64": np.float64, "f16": np.uint16, "bf16": np.uint16,
           "s32": np.int32, "s8": np.int8, "u8": np.uint8}
SIZE = {"f32": 4, "f64": 8, "f16": 2, "bf16": 2, "s32": 4, "s8": 1, "u8": 1}
INT_RANGE = {"s32": (-2147483648.0, 2147483520.0), "s8": (-128.0, 127.0), "u8": (0.0, 255.0)}
INT_EXACT = {"s32": (-2**31, 2**31 - 1), "s8": (-128, 127), "u8": (0, 255)}


def offsets(md) -> np.ndarray:
    """int64 array of shape md.padded_dims: offset (offset0 included) of each position."""
    pd = tuple(md.padded_dims)
    if any(p == 0 for p in pd):
        return np.zeros(pd, dtype=np.int64)
    pos = [g.astype(np.int64) for g in np.indices(pd, dtype=np.int64)]
    p = [pos[d] + md.padded_offsets[d] for d in range(len(pd))]
    off = np.full(pd, md.offset0, dtype=np.int64)
    bs = 1
    for blk, d in zip(reversed(md.inner_blks), reversed(md.inner_idxs)):
        off += (p[d] % blk) * bs
        p[d] = p[d] // blk
        bs *= blk
    for d in range(len(pd)):
        off += p[d] * md.strides[d]
    return off


def parse(tag_abstract: str):
    m = re.fullmatch(r"([a-lA-L]+)((?:\d+[a-l])*)", tag_abstract)
    assert m, tag_abstract
    outer = [LETTERS.index(c.lower()) for c in m.group(1)]
    blocks = [(int(n), LETTERS.index(c)) for n, c in re.findall(r"(\d+)([a-l])", m.group(2))]
    return outer, blocks


def pack_by_tag(x: np.ndarray, tag_abstract: str) -> np.ndarray:
    """The flat buffer of logical array x in an abstract tag's layout (padding zero)."""
    outer, blocks = parse(tag_abstract)
    nd = x.ndim
    bprod = [1] * nd
    for b, d in blocks:
        bprod[d] *= b
    pdims = [-(-n // b) * b for n, b in zip(x.shape, bprod)]
    xp = np.zeros(pdims, dtype=x.dtype)
    xp[tuple(slice(0, n) for n in x.shape)] = x
    # digits of each dim, outermost first: outer part, then its blocks in suffix order
    shape = []
    axis_of = {}  # (dim, k) -> axis in the reshaped array; k=0 outer, k>=1 k-th block of dim
    for d in range(nd):
        axis_of[(d, 0)] = len(shape)
        shape.append(pdims[d] // bprod[d])
        k = 1
        for b, bd in blocks:
            if bd == d:
                axis_of[(d, k)] = len(shape)
                shape.append(b)
                k += 1
    xr = xp.reshape(shape)
    order = [axis_of[(d, 0)] for d in outer]
    seen = [0] * nd
    for _b, d in blocks:
        seen[d] += 1
        order.append(axis_of[(d, seen[d])])
    return np.ascontiguousarray(xr.transpose(order)).reshape(-1)


# ---------------------------------------------------------------- conversions
def to_f32(raw: np.ndarray, dt: str) -> np.ndarray:
    raw = np.asarray(raw)
    if dt == "f32":
        return raw.astype(np.float32)
    if dt == "bf16":
        return (raw.astype(np.uint32) << 16).view(np.float32)
    if dt == "f16":
        return raw.view(np.float16).astype(np.float32)
    if dt == "f64":
        return raw.astype(np.float32)  # numpy rounds to nearest even
    if dt == "s32":
        return raw.astype(np.float32)
    return raw.astype(np.float32)


def from_f32(f: np.ndarray, dt: str) -> np.ndarray:
    f = np.asarray(f, dtype=np.float32)
    if dt == "f32":
        return f.copy()
    if dt == "f64":
        return f.astype(np.float64)
    if dt == "f16":
        with np.errstate(over="ignore"):  # overflow to inf is the conversion's meaning
            return f.astype(np.float16).view(np.uint16)
    if dt == "bf16":
        bits = f.view(np.uint32).astype(np.uint64)
        hi = (bits >> 16).astype(np.uint64)
        rne = ((bits + 0x7FFF + (hi & 1)) >> 16) & 0xFFFF
        absb = bits & 0x7FFFFFFF
        out = rne.copy()
        nan = absb > 0x7F800000
        out[nan] = (hi[nan] | 0x40) & 0xFFFF
        inf = absb == 0x7F800000
        out[inf] = hi[inf]
        tiny = absb < 0x00800000  # zeros and subnormals flush to signed zero
        out[tiny] = hi[tiny] & 0x8000
        return out.astype(np.uint16)
    lo, hi_ = INT_RANGE[dt]
    g = np.where(np.isnan(f), np.float32(0), f)
    g = np.clip(g, np.float32(lo), np.float32(hi_))
    g = np.rint(g)
    return g.astype(np.float64).astype(STORAGE[dt])


def convert(raw: np.ndarray, sdt: str, ddt: str) -> np.ndarray:
    """Raw src storage values -> raw dst storage values, oneDNN's rules (see layoutjit.convert)."""
    raw = np.asarray(raw)
    if sdt == ddt:
        return raw.copy()
    if sdt in INT_EXACT and ddt in INT_EXACT:
        lo, hi = INT_EXACT[ddt]
        return np.clip(raw.astype(np.int64), lo, hi).astype(STORAGE[ddt])
    return from_f32(to_f32(raw, sdt), ddt)


# ---------------------------------------------------------------- reorders
def reorder(src_buf: np.ndarray, src_md, dst_md, dst_buf: np.ndarray) -> np.ndarray:
    """Expected dst after a reorder: logical elements converted, padding zero, rest untouched."""
    sdt, ddt = str(src_md.dtype), str(dst_md.dtype)
    out = dst_buf.copy()
    if any(d == 0 for d in dst_md.dims):
        return out
    src = src_buf.reshape(-1).view(STORAGE[sdt])
    dst = out.reshape(-1).view(STORAGE[ddt])
    dims = tuple(dst_md.dims)
    so = offsets(src_md)[tuple(slice(0, n) for n in dims)]
    do_all = offsets(dst_md)
    pad_mask = np.ones(do_all.shape, dtype=bool)
    pad_mask[tuple(slice(0, n) for n in dims)] = False
    dst[do_all[pad_mask]] = 0
    do = do_all[tuple(slice(0, n) for n in dims)]
    dst[do.reshape(-1)] = convert(src[so.reshape(-1)], sdt, ddt)
    return out


def logical(buf: np.ndarray, md) -> np.ndarray:
    """Raw storage values of the logical tensor held in buf."""
    dims = tuple(md.dims)
    if any(d == 0 for d in dims):
        return np.zeros(dims, dtype=STORAGE[str(md.dtype)])
    o = offsets(md)[tuple(slice(0, n) for n in dims)]
    return buf.reshape(-1).view(STORAGE[str(md.dtype)])[o]


def random_raw(n: int, dt: str, rng: np.random.Generator) -> np.ndarray:
    """Random raw storage values that exercise rounding and saturation."""
    specials = np.array([0.0, -0.0, 0.5, 1.5, 2.5, -2.5, 127.5, -128.5, 255.5, 1e9, -1e9,
                         2147483520.0, 3e9, 16.0, 64.0, 0.25, 2.0**24, -(2.0**24)], dtype=np.float64)
    vals = np.concatenate([specials, rng.normal(0, 100, n).round(1)])[:max(n, 1)]
    vals = np.resize(vals, n)
    if dt in ("s8", "u8", "s32"):
        lo, hi = INT_EXACT[dt]
        return rng.integers(lo, hi, n, endpoint=True).astype(STORAGE[dt])
    if dt == "bf16":
        return from_f32(vals.astype(np.float32), "bf16")
    if dt == "f16":
        with np.errstate(over="ignore"):
            return vals.astype(np.float16).view(np.uint16)
    return vals.astype(STORAGE[dt])


def kernel_matches_reference(k, seed: int = 0) -> bool:
    """Run compiled kernel ``k`` on random data; True when every dst byte equals :func:`reorder`'s."""
    rng = np.random.default_rng(seed)
    s, d = k.src_md, k.dst_md
    src = random_raw(max(s.get_size(), s.required_bytes()) // s.dtype.size, str(s.dtype), rng)
    dst = np.zeros(max(d.get_size(), d.required_bytes()) // d.dtype.size, d.dtype.storage)
    exp = reorder(src, s, d, dst)
    k(src, dst)
    return bool(np.array_equal(dst.view(np.uint8), exp.view(np.uint8)))


def at_thread_counts(counts=(1, 2)):
    """Yield each of ``counts`` with Numba's thread count set to it (capped at the pool's
    size); the previous count is restored when the loop ends or fails."""
    import numba

    before = numba.get_num_threads()
    try:
        for t in counts:
            numba.set_num_threads(min(t, numba.config.NUMBA_NUM_THREADS))
            yield t
    finally:
        numba.set_num_threads(before)


def check_store_kinds(k, x: np.ndarray, want: np.ndarray, bases) -> None:
    """Launch kernel ``k`` directly with each job offset in ``bases`` (0: plain stores, the
    plan's job count: NT, for plans that time the kinds, ``Plan.nt_tune``), serially and
    split between two threads, into NaN-filled (other types: 0xA5-filled) aligned destinations; each must equal
    ``want``."""
    import layoutjit as lj
    from layoutjit.runtime import run_parallel, run_serial

    jobs, no_aux, x8 = k.plan.jobs, np.zeros(1, np.int64), x.view(np.uint8)
    for base in bases:
        for run in (lambda y8: run_serial(k._addr, x8, y8, no_aux, jobs, False, base),
                    lambda y8: run_parallel(k._addr, x8, y8, no_aux, jobs, 2, False, base)):
            y = lj.aligned_empty(k.dst_md.get_size()).view(want.dtype)
            if y.dtype.kind == "f":
                y[:] = np.nan
            else:  # (storage of bf16, f16, integers: a byte pattern)
                y.view(np.uint8)[:] = 0xA5
            assert run(y.view(np.uint8)) == 0
            np.testing.assert_array_equal(y, want, err_msg=f"job offset {base}")


GUARD = 64


def check_guarded_runs(k, x: np.ndarray, expect: np.ndarray, offsets, counts=(1, 2),
                       note: str = "") -> None:
    """Run kernel ``k`` on ``x`` into destinations at each byte offset past a 64-byte line,
    surrounded by guard bytes, at each thread count: the destination bytes must equal
    ``expect`` (uint8) and no guard byte may change. A destination misaligned for its type
    is passed as bytes."""
    d = k.dst_md
    n = expect.size
    for threads in at_thread_counts(counts):
        for off in offsets:
            raw = np.full(n + 2 * GUARD + 64, 0xA5, np.uint8)
            a0 = (-raw.ctypes.data) % 64 + GUARD + off
            y8 = raw[a0:a0 + n]
            k(x, y8.view(d.dtype.storage) if off % d.dtype.size == 0 else y8)
            np.testing.assert_array_equal(y8, expect, err_msg=f"{note}offset {off}, {threads} threads")
            assert (raw[:a0] == 0xA5).all() and (raw[a0 + n:] == 0xA5).all()


def check_exact_at_offsets(k, seed: int, offsets=None) -> None:
    """Kernel ``k`` on random source bytes against :func:`reorder` of the same, through
    :func:`check_guarded_runs` at ``offsets`` (default: the destination aligned, two
    elements past a line, and one element short of the next line)."""
    s, d = k.src_md, k.dst_md
    rng = np.random.default_rng(seed)
    x = random_raw(s.get_size() // s.dtype.size, str(s.dtype), rng)
    expect = reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    if offsets is None:
        offsets = [0, 2 * d.dtype.size, 64 - d.dtype.size]
    check_guarded_runs(k, x, expect, offsets)


def scratch_elems(source: str, name: str) -> int | None:
    """Elements of the generated kernel's scratch buffer ``name`` (codegen ``scratch``): its
    slice of a page-aligned allocation, or its plain ``np.empty`` where scratch pages are
    off; None where the kernel has no such buffer."""
    m = (re.search(rf"\b{name} = {name}\[{name}_at:{name}_at \+ (\d+)\]", source)
         or re.search(rf"\b{name} = np\.empty\((\d+),", source))
    return int(m.group(1)) if m else None

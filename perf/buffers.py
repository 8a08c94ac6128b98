"""Aligned buffers, source data and the conversion rules the peers are checked against."""

from __future__ import annotations

from typing import Any

import numpy as np

ALIGN = 64


def aligned_empty(nbytes: int, dtype: Any = np.uint8, align: int = ALIGN) -> np.ndarray:
    """A 1-D C-contiguous array of ``nbytes`` bytes whose data is ``align``-byte aligned.

    Allocated as bytes with ``align`` bytes of slack and sliced, so numpy's
    own allocator (and its transparent-huge-page madvise for large arrays)
    is kept. The pages are touched (zero-filled) here, so page faults stay
    out of the timings.
    """
    dtype = np.dtype(dtype)
    if nbytes % dtype.itemsize:
        raise ValueError(f"{nbytes} bytes is not a whole number of {dtype} elements")
    raw = np.empty(nbytes + align, dtype=np.uint8)
    off = (-raw.ctypes.data) % align
    buf = raw[off:off + nbytes]
    buf.fill(0)
    out = buf.view(dtype)
    assert out.ctypes.data % align == 0
    return out


def fill_source(buf: np.ndarray, dtype_name: str, seed: int = 1234) -> None:
    """Fill ``buf`` with values that exercise conversions.

    f32 values are random with magnitudes up to about 300, so f32 -> s8
    saturates, and every 16th value is ``k + 0.5`` (a rounding tie for s8);
    random mantissas exercise bf16 rounding. A block of prime length is
    tiled, so large buffers fill quickly while misplaced elements still show.
    """
    rng = np.random.default_rng(seed)
    n = buf.size
    period = min(n, 1_000_003)
    if dtype_name == "f32":
        pat = (rng.standard_normal(period) * 100.0).astype(np.float32)
        pat[::16] = np.floor(pat[::16]) + np.float32(0.5)
    elif dtype_name in ("bf16", "f16"):
        pat = rng.integers(0, 1 << 16, size=period, dtype=np.uint16)
        # keep them finite: clear the top exponent bit pattern for NaN/inf
        pat &= np.uint16(0xBFFF)
    elif dtype_name == "s8":
        pat = rng.integers(-128, 128, size=period, dtype=np.int8)
    elif dtype_name == "u8":
        pat = rng.integers(0, 256, size=period, dtype=np.uint8)
    elif dtype_name == "s32":
        pat = rng.integers(-(1 << 31), 1 << 31, size=period, dtype=np.int32)
    else:
        raise ValueError(f"no fill rule for {dtype_name}")
    pat = pat.view(buf.dtype)
    reps = -(-n // period)
    if reps == 1:
        buf[:] = pat[:n]
    else:
        flat = buf[: (n // period) * period].reshape(-1, period)
        flat[...] = pat
        rest = n - flat.size
        if rest:
            buf[n - rest:] = pat[:rest]


def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even f32 -> bf16 bit patterns (uint16), NaN kept quiet."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    r = ((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16))
    nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    r = np.where(nan, (bits >> np.uint32(16)) | np.uint32(0x40), r)
    return r.astype(np.uint16)


def f32_to_s8(x: np.ndarray) -> np.ndarray:
    """oneDNN's f32 -> s8: saturate to [-128, 127], round half to even."""
    return np.clip(np.rint(np.asarray(x, dtype=np.float32)), -128, 127).astype(np.int8)


# exponent bits and sign bit of the float storage types, as unsigned integers
_EXPONENT_MASK = {"bf16": (np.uint16(0x7F80), np.uint16(0x8000)),
                  "f16": (np.uint16(0x7C00), np.uint16(0x8000)),
                  "f32": (np.uint32(0x7F800000), np.uint32(0x80000000))}


def compare_outputs(ref: np.ndarray, out: np.ndarray, dst_dtype: str) -> dict:
    """Compare two destination buffers (same storage dtype).

    Returns ``{"status": "exact" | "within_rules" | "denormals_flushed" | "mismatch", ...}``.
    "within_rules": bf16 results differ by at most one unit in the last
    place, s8 results by at most 1 (a rounding tie resolved differently).
    "denormals_flushed": bf16/f16/f32 results differ only where the reference is a
    denormal (or a signed zero) and the result a zero (oneDNN's reference reorder
    ``simple:any`` runs bf16 through f32 with denormals flushed, and writes some
    negative zeros as positive ones).
    """
    if ref.shape != out.shape or ref.dtype != out.dtype:
        return {"status": "mismatch", "detail": f"buffers differ in shape/dtype: "
                f"{ref.shape}/{ref.dtype} vs {out.shape}/{out.dtype}"}
    rb = ref.view(np.uint8)
    ob = out.view(np.uint8)
    if np.array_equal(rb, ob):
        return {"status": "exact"}
    u = np.dtype(f"u{ref.itemsize}")
    diff = np.flatnonzero(ref.view(u) != out.view(u))
    first = int(diff[0]) if diff.size else -1
    info = {"n_diff": int(diff.size), "first_diff_elem": first,
            "ref_value": ref[first].item() if first >= 0 else None,
            "value": out[first].item() if first >= 0 else None}
    if dst_dtype in _EXPONENT_MASK:
        emask, sign = _EXPONENT_MASK[dst_dtype]
        a, b = ref.view(u)[diff], out.view(u)[diff]
        if np.all(((a & emask) == 0) & ((b & ~sign) == 0)):
            return {"status": "denormals_flushed", **info}
    if dst_dtype in ("bf16", "f16"):
        a = ref[diff].astype(np.int32)
        b = out[diff].astype(np.int32)
        same_sign = (a & 0x8000) == (b & 0x8000)
        if np.all(same_sign & (np.abs(a - b) <= 1)):
            return {"status": "within_rules", **info}
    elif dst_dtype in ("s8", "u8", "s32"):
        if np.all(np.abs(ref[diff].astype(np.int64) - out[diff].astype(np.int64)) <= 1):
            return {"status": "within_rules", **info}
    return {"status": "mismatch", **info}

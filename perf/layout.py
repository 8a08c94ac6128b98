"""Strided views of two layouts over the common refinement of their digits.

This module is the layout arithmetic the numpy and PyTorch peers use. It reads
only the fields of :class:`layoutjit.MemoryDesc` (``dims``, ``padded_dims``,
``strides``, ``inner_blks``, ``inner_idxs``, ``offset0``) and shares no code
with layoutjit's compiler, so a peer built on it is an independent check.

Digits
------
A blocked layout splits each logical dim ``d`` into *pieces*: the outer part
(element stride ``strides[d]``) and each inner block of ``d`` (stride = the
product of the inner blocks to its right). Reading the pieces of ``d`` from
the innermost one outwards gives a mixed-radix number: ``nChw16c`` writes a
channel ``c`` as ``(c // 16, c % 16)``. The *weight* of a piece is the product
of the sizes of the pieces of ``d`` inside it.

Two layouts are viewed together by splitting every dim at the union of both
sides' piece weights (the *common refinement*): ``OIhw16i16o`` and
``OIhw4i16o4i`` split ``i`` at weights {1, 4, 16}, so the i digits are
``(i // 16, i // 4 % 4, i % 4)``. Each common digit then lies inside exactly
one piece of each side and has one element stride per side, so any reorder is
a copy between two strided arrays of the same shape. The refinement needs the
sorted union of weights to be a divisibility chain (true for every oneDNN tag
pair in practice; ``48a`` against ``32a`` is not, and raises ``ValueError``).

Padding
-------
A dim whose logical size is not a multiple of the coarsest weight is not a
box in digit space. :func:`range_boxes` splits a range ``[lo, hi)`` into at
most ``2 * ndigits - 1`` boxes; the valid region is the product of the
per-dim boxes of ``[0, dims[d])``. The padded area of one side (positions with
``dims[d] <= p < padded_dims[d]`` for some ``d``) is the disjoint union, over
``d``, of the boxes ``p_e < dims[e]`` (e < d), ``dims[d] <= p_d < padded[d]``,
``p_e < padded[e]`` (e > d), built from that side's own pieces.

``padded_offsets`` must be zero (true for every tag-built descriptor).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import product
from typing import Any

import numpy as np


@dataclass(frozen=True)
class StridedBox:
    """One box of a region: a shape plus, per side, a base offset and element strides."""

    shape: tuple[int, ...]
    offsets: tuple[int, ...]  # per side, in elements (offset0 included)
    strides: tuple[tuple[int, ...], ...]  # per side, one element stride per axis

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


def _pieces(md: Any, d: int) -> list[tuple[int, int | None, int]]:
    """Pieces of dim ``d``, innermost first, as ``(weight, size, stride)``.

    ``size`` is None for the outer piece (its extent comes from the region).
    """
    blks = tuple(md.inner_blks)
    idxs = tuple(md.inner_idxs)
    inner_stride = [1] * len(blks)
    acc = 1
    for k in range(len(blks) - 1, -1, -1):
        inner_stride[k] = acc
        acc *= blks[k]
    out = []
    w = 1
    for k in range(len(blks) - 1, -1, -1):
        if idxs[k] == d:
            out.append((w, blks[k], inner_stride[k]))
            w *= blks[k]
    out.append((w, None, int(md.strides[d])))
    return out


def _digit_weights(mds: Sequence[Any], d: int) -> list[int]:
    ws = sorted({p[0] for md in mds for p in _pieces(md, d)})
    for a, b in zip(ws, ws[1:]):
        if b % a:
            raise ValueError(
                f"dim {d}: block weights {ws} do not form a divisibility chain; "
                "the layouts have no common digit refinement")
    return ws


def _digit_stride(md: Any, d: int, weight: int) -> int:
    for w, size, stride in _pieces(md, d):
        if weight >= w and (size is None or weight < w * size):
            return stride * (weight // w)
    raise AssertionError("unreachable: weight outside every piece")


def range_boxes(lo: int, hi: int, weights: Sequence[int]) -> list[list[tuple[int, int]]]:
    """Split ``[lo, hi)`` into boxes of the mixed-radix digits given by ``weights``.

    ``weights`` is ascending with ``weights[0] == 1``; digit ``j`` counts
    units of ``weights[j]`` and (except the top one) has radix
    ``weights[j+1] // weights[j]``. Each box is a list of ``(start, count)``,
    one per digit, digit 0 (finest) first.

    >>> range_boxes(0, 17, [1, 16])
    [[(0, 16), (0, 1)], [(0, 1), (1, 1)]]
    >>> range_boxes(0, 32, [1, 16])
    [[(0, 16), (0, 2)]]
    """
    top = len(weights) - 1
    boxes: list[list[tuple[int, int]]] = []

    def rec(lo: int, hi: int, level: int, prefix: list[tuple[int, int]]) -> None:
        # prefix: (start, count) of the digits above `level`, top digit first
        if lo >= hi:
            return
        if level == 0:
            boxes.append(prefix + [(lo, hi - lo)])
            return
        w = weights[level]
        a = -(-lo // w)
        b = hi // w
        if a <= b:
            if lo < a * w:
                rec(lo - (a - 1) * w, w, level - 1, prefix + [(a - 1, 1)])
            if a < b:
                full = [(0, weights[j + 1] // weights[j]) for j in range(level - 1, -1, -1)]
                boxes.append(prefix + [(a, b - a)] + full)
            if b * w < hi:
                rec(0, hi - b * w, level - 1, prefix + [(b, 1)])
        else:  # lo and hi in the same block of this digit
            q = lo // w
            rec(lo - q * w, hi - q * w, level - 1, prefix + [(q, 1)])

    rec(lo, hi, top, [])
    return [list(reversed(b)) for b in boxes]


def _simplify(shape: list[int], strides: list[list[int]]) -> tuple[list[int], list[list[int]]]:
    """Drop unit axes, order axes by the last side's strides (outermost first), merge."""
    keep = [i for i, n in enumerate(shape) if n != 1]
    if not keep:
        return [1], [[0] for _ in strides]
    order = sorted(keep, key=lambda i: tuple(-s[i] for s in reversed(strides)))
    shp = [shape[i] for i in order]
    sts = [[s[i] for i in order] for s in strides]
    k = len(shp) - 1
    while k > 0:  # merge axis k-1 (outer) with k (inner) when contiguous on every side
        if all(s[k - 1] == s[k] * shp[k] for s in sts):
            shp[k - 1] *= shp[k]
            del shp[k]
            for s in sts:
                s[k - 1] = s[k]
                del s[k]
        k -= 1
    return shp, sts


def _boxes(mds: Sequence[Any], ranges: Sequence[tuple[int, int]],
           weights: Sequence[Sequence[int]]) -> list[StridedBox]:
    per_dim = []
    for d, (lo, hi) in enumerate(ranges):
        ws = weights[d]
        per_dim.append([(d, box, ws) for box in range_boxes(lo, hi, ws)])
    out = []
    for combo in product(*per_dim):
        shape: list[int] = []
        strides: list[list[int]] = [[] for _ in mds]
        offs = [int(md.offset0) for md in mds]
        for d, box, ws in combo:
            for j, (start, count) in enumerate(box):
                for s, md in enumerate(mds):
                    st = _digit_stride(md, d, ws[j])
                    offs[s] += start * st
                    if count != 1:
                        strides[s].append(st)
                if count != 1:
                    shape.append(count)
        shp, sts = _simplify(shape, strides)
        out.append(StridedBox(tuple(shp), tuple(offs), tuple(tuple(s) for s in sts)))
    return out


def _check_md(md: Any) -> None:
    if any(int(p) for p in getattr(md, "padded_offsets", ())):
        raise ValueError(f"{md!r}: padded_offsets are not supported")


def copy_boxes(src_md: Any, dst_md: Any) -> list[StridedBox]:
    """Boxes covering every valid logical element; side 0 is src, side 1 is dst.

    Axes are ordered by dst strides (outermost first) and merged where both
    sides are contiguous, so a box is the smallest strided copy.
    """
    _check_md(src_md)
    _check_md(dst_md)
    if tuple(src_md.dims) != tuple(dst_md.dims):
        raise ValueError(f"dims differ: {src_md.dims} vs {dst_md.dims}")
    nd = len(src_md.dims)
    weights = [_digit_weights((src_md, dst_md), d) for d in range(nd)]
    if any(int(n) == 0 for n in src_md.dims):
        return []
    return _boxes((src_md, dst_md), [(0, int(n)) for n in src_md.dims], weights)


def padding_boxes(md: Any) -> list[StridedBox]:
    """Boxes covering exactly the padded (non-logical) positions of ``md`` (one side)."""
    _check_md(md)
    dims = [int(n) for n in md.dims]
    pdims = [int(n) for n in md.padded_dims]
    nd = len(dims)
    if any(n == 0 for n in dims):
        return []
    weights = [_digit_weights((md,), d) for d in range(nd)]
    out: list[StridedBox] = []
    for d in range(nd):
        if pdims[d] == dims[d]:
            continue
        ranges = [(0, dims[e]) if e < d else (0, pdims[e]) for e in range(nd)]
        ranges[d] = (dims[d], pdims[d])
        out.extend(_boxes((md,), ranges, weights))
    return out


def np_view(buf: np.ndarray, box: StridedBox, side: int) -> np.ndarray:
    """A numpy view of ``buf`` (1-D, element-typed) for one side of a box."""
    isz = buf.itemsize
    base = buf[box.offsets[side]:]
    return np.lib.stride_tricks.as_strided(
        base, shape=box.shape, strides=tuple(s * isz for s in box.strides[side]),
        writeable=True)


def describe(boxes: Sequence[StridedBox]) -> str:
    """Short text form for verbose output: ``shape src-strides -> dst-strides`` per box."""
    parts = []
    for b in boxes:
        parts.append(f"{'x'.join(map(str, b.shape))} " + " -> ".join(
            "(" + ",".join(map(str, s)) + ")" for s in b.strides))
    return "; ".join(parts)

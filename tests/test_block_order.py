"""Whole-block NT transposes that walk their outer loops in source order
(``plan._block_src_order``).

Tiles that write whole blocks (``nhwc -> ABcd16b16a``, ``cdab -> ABcd8b8a``) and read
parts of source lines: in destination order the rest of each line belongs to an outer
step far away, so every line was fetched again for each block; the outer loops now follow
the source. The tests force NT stores on small tensors, check every byte (destinations at
several offsets, 1 and 2 threads, guard bytes, padding), and check where the rule must not
apply.
"""

from __future__ import annotations

import numpy as np
import pytest

import layoutjit as lj
import layoutjit.plan as plan_mod
import reference as ref
from layoutjit.compiler import build, lower_and_plan

M = lj.MemoryDesc
NOTE = "whole blocks of whole lines: the outer loops in source order"


def plan_of(s, d):
    return lower_and_plan(s, d, None)[1]


def _in_source_order_and_exact(k, s, d, seed):
    """The outer loops by decreasing source stride, and every byte right (destinations at
    several offsets, 1 and 2 threads, guard bytes, padding)."""
    p = k.plan
    t = p.tile
    outer = [n.strides[1] for i, n in enumerate(p.nodes) if i not in (t.a, t.b)]
    assert outer == sorted(outer, reverse=True), p.describe()
    rng = np.random.default_rng(seed)
    x = ref.random_raw(s.get_size() // s.dtype.size, str(s.dtype), rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, [0, 2 * d.dtype.size, 64 - d.dtype.size])


def test_block_source_order_at_the_real_thresholds(plans_32):
    """At a size that takes NT stores: source order; a small one: destination order.
    (First in the module: ``nt_everywhere`` lasts to its end.)"""
    dims = (64, 64, 56, 56)
    big = plan_of(M(dims, "f32", "nhwc"), M(dims, "f32", "ABcd16b16a"))
    assert big.nt and any(NOTE in n for n in big.notes), big.describe()
    small = plan_of(M((2, 32, 8, 8), "f32", "nhwc"), M((2, 32, 8, 8), "f32", "ABcd16b16a"))
    assert not small.nt and not any(NOTE in n for n in small.notes), small.describe()


CASES = [
    ((32, 48, 5, 6), "nhwc", "ABcd16b16a", "f32", "f32"),
    ((13, 32, 6, 10), "cdab", "ABcd8b8a", "s8", "f32"),      # a = 13 of 16: padded blocks
    ((16, 24, 5, 7), "nhwc", "OIhw16i16o", "f32", "bf16"),   # b = 24 of 32, converted
    ((16, 32, 3, 5), "aBcd4b", "OIhw16i16o", "f32", "f32"),
    ((32, 32, 4, 6), "cdab", "ABcd16b16a", "s8", "s8"),
    ((24, 16, 5, 8), "acbd", "nChw8c", "bf16", "bf16"),
]


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", CASES)
def test_block_source_order_is_exact(nt_everywhere, plans_32, dims, stag, dtag, sdt, ddt):
    """(32-byte vectors: with 64-byte ones 16x16 f32 tiles read whole source lines, and the
    rule does not apply; ``test_block_source_order_not_taken``.)"""
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = build(s, d)
    p = k.plan
    assert p.nt and p.tile.kind == "transpose" and p.tile.rows_contiguous, p.describe()
    assert any(NOTE in n for n in p.notes), p.describe()
    _in_source_order_and_exact(k, s, d, sum(dims))


def test_block_source_order_not_taken(nt_everywhere, monkeypatch):
    """Tiles reading whole source lines (16 f32 a row), outer loops in source order already,
    and the switch off: destination order."""
    cases = [
        (M((32, 32, 3, 3), "f32", "OIhw16o16i"), M((32, 32, 3, 3), "f32", "oihw")),
        (M((2, 32, 5, 6), "f32", "nchw"), M((2, 32, 5, 6), "f32", "nChw16c")),
    ]
    for s, d in cases:
        p = plan_of(s, d)
        assert not any(NOTE in n for n in p.notes), (s, d, p.describe())
    monkeypatch.setattr(plan_mod, "BLOCK_SRC_ORDER", False)
    p = plan_of(M((32, 48, 5, 6), "f32", "nhwc"), M((32, 48, 5, 6), "f32", "ABcd16b16a"))
    assert p.nt and not any(NOTE in n for n in p.notes), p.describe()


SHARED = "read parts of source lines that an outer step shares"
SHARED_CASES = [
    ((3, 1, 6, 128), "ABcd4b16a4b", "acbd", "f32", "s8"),    # a: 4 elements apart
    ((5, 6, 16, 64), "ABcd4b16a4b", "acbd", "bf16", "bf16"),
    ((6, 8, 12, 64), "cdab", "acbd", "f32", "bf16"),         # b: 6 elements apart
]


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", SHARED_CASES)
def test_shared_source_lines_take_source_order(nt_everywhere, plans_32, dims, stag, dtag, sdt, ddt):
    """Tiles writing whole lines apart (not whole blocks), an outer step moving the source by
    less than a line: outer loops in source order, that step innermost; every byte checked."""
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = build(s, d)
    p = k.plan
    assert p.nt and not p.tile.rows_contiguous and any(SHARED in n for n in p.notes), p.describe()
    t = p.tile
    innermost = [n for i, n in enumerate(p.nodes) if i not in (t.a, t.b)][-1]
    assert innermost.strides[1] * s.dtype.size < 64, p.describe()
    _in_source_order_and_exact(k, s, d, sum(dims))


def test_shared_source_lines_not_taken_for_long_sweeps(nt_everywhere, monkeypatch):
    """A sweep over A touching more than SHARED_LINES_BYTES of lines: the next outer step
    would not find them in cache; destination order stays."""
    s, d = M((3, 1, 6, 128), "f32", "ABcd4b16a4b"), M((3, 1, 6, 128), "s8", "acbd")
    monkeypatch.setattr(plan_mod, "SHARED_LINES_BYTES", 64 * 127)
    p = plan_of(s, d)
    assert not any(SHARED in n for n in p.notes), p.describe()
    monkeypatch.setattr(plan_mod, "SHARED_LINES_BYTES", 64 * 128)
    assert any(SHARED in n for n in plan_of(s, d).notes)


SCATTERED_CASES = [
    ((32, 32, 3, 3), "hwio", "OIhw4i16o4i", "f32", "s8"),
    ((20, 48, 3, 5), "hwio", "OIhw4i16o4i", "f32", "u8"),     # o = 20 of 32
    ((40, 16, 5, 5), "hwio", "OhwI16o4i", "f32", "s8"),
]


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", SCATTERED_CASES)
def test_scattered_line_reads_take_source_order(nt_everywhere, plans_32, monkeypatch, dims, stag, dtag,
                                                 sdt, ddt):
    """Tiles reading whole source lines and narrowing them 4x, their rows continued outside
    a sweep of SCATTERED_READS_BYTES (lowered to fit these small tensors): source order."""
    monkeypatch.setattr(plan_mod, "SCATTERED_READS_BYTES", 1024)
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = build(s, d)
    p = k.plan
    assert p.nt and p.tile.kind == "transpose" and p.tile.V * s.dtype.size >= 64, p.describe()
    assert any(NOTE in n for n in p.notes), p.describe()
    _in_source_order_and_exact(k, s, d, sum(dims))


def test_scattered_line_reads_not_taken(nt_everywhere, plans_32, monkeypatch):
    """A sweep below the threshold, no narrowing (f32 -> f32), and the switch off (0):
    destination order. (The threshold is put just above and just at the span of the loops
    inside the o step, which continues the tiles' rows.)"""
    dims = (32, 32, 3, 3)
    s, d = M(dims, "f32", "hwio"), M(dims, "s8", "OIhw4i16o4i")
    p = plan_of(s, d)
    t = p.tile
    outer = [n for i, n in enumerate(p.nodes) if i not in (t.a, t.b)]
    k = min(range(len(outer)), key=lambda i: abs(outer[i].strides[1]) or 1 << 62)
    span = sum((n.extent - 1) * abs(n.strides[1]) for n in outer[k + 1:]) * 4
    monkeypatch.setattr(plan_mod, "SCATTERED_READS_BYTES", span + 1)
    assert not any(NOTE in n for n in plan_of(s, d).notes)
    monkeypatch.setattr(plan_mod, "SCATTERED_READS_BYTES", span)
    assert any(NOTE in n for n in plan_of(s, d).notes)
    monkeypatch.setattr(plan_mod, "SCATTERED_READS_BYTES", 1)
    p32 = plan_of(s, M(dims, "f32", "OIhw4i16o4i"))  # none narrowed
    assert not plan_mod._scattered_line_reads(p32.ir, p32.nodes[:p32.tile.a])
    assert plan_mod._scattered_line_reads(p.ir, outer)
    monkeypatch.setattr(plan_mod, "SCATTERED_READS_BYTES", 0)
    assert not any(NOTE in n for n in plan_of(s, d).notes)


LINE_SHARE = "tiles read parts of source lines whose rest an outer step reads once they have left L2"
LINE_SHARE_CASES = [
    ((48, 32, 3, 3), "hwio", "OIhw2i8o4i", "s8", "s8"),    # 4x8 tiles: 8 B of each o row
    ((40, 24, 3, 5), "ihwo", "OIhw2i8o4i", "s8", "s8"),
    ((64, 48, 3, 3), "IOhw16o16i", "oihw", "bf16", "bf16"),
]


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", LINE_SHARE_CASES)
def test_line_share_order(plans_32, monkeypatch, dims, stag, dtag, sdt, ddt):
    """The outer step that moves the source by less than a line runs just outside the steps
    that complete destination lines (LINE_SHARE_BYTES lowered to fit these small tensors);
    every byte checked. (The line split, which the lowered threshold would take too, off:
    tests/test_line_split.py.)"""
    monkeypatch.setattr(plan_mod, "LINE_SHARE_BYTES", 1)
    monkeypatch.setattr(plan_mod, "LINE_SPLIT", False)
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = build(s, d)
    p = k.plan
    assert any(LINE_SHARE in n for n in p.notes), p.describe()
    t = p.tile
    outer = [n for i, n in enumerate(p.nodes) if i not in t.nodes]
    ssz, dsz = s.dtype.size, d.dtype.size
    shared = [i for i, n in enumerate(outer) if 0 < abs(n.strides[1]) * ssz < 64]
    assert shared, p.describe()
    # inside the shared steps: only steps that complete destination lines
    assert all(abs(n.strides[0]) * dsz < 64 for n in outer[max(shared) + 1:]), p.describe()
    # and in destination order they were not there: the rule moved them
    monkeypatch.setattr(plan_mod, "LINE_SHARE_BYTES", 0)
    before = plan_of(s, d)
    t0 = before.tile
    outer0 = [n for i, n in enumerate(before.nodes) if i not in t0.nodes]
    assert outer0 != outer and sorted(outer0, key=repr) == sorted(outer, key=repr), before.describe()
    ref.check_exact_at_offsets(k, sum(dims))


def test_line_share_order_not_taken(plans_32, monkeypatch):
    """Tiles touching less than LINE_SHARE_BYTES of lines (the real one, 384 KB, for this
    small tensor) and the switch off: destination order."""
    dims = (48, 32, 3, 3)
    s, d = M(dims, "s8", "hwio"), M(dims, "s8", "OIhw2i8o4i")
    assert not any(LINE_SHARE in n for n in plan_of(s, d).notes)
    monkeypatch.setattr(plan_mod, "LINE_SHARE_BYTES", 1)
    assert any(LINE_SHARE in n for n in plan_of(s, d).notes)
    monkeypatch.setattr(plan_mod, "LINE_SHARE_BYTES", 0)
    assert not any(LINE_SHARE in n for n in plan_of(s, d).notes)


PLAIN_CASES = [
    ((16, 64, 3, 3), "ohwi", "OIhw8i8o", "f32", "f32"),   # 8x8 tiles, source rows 4 KB multiples apart
    ((16, 32, 5, 1), "ohwi", "OIhw8i8o", "f32", "u8"),
    ((32, 32, 3, 3), "OIhw16i16o", "OIhw4o4i", "f32", "f32"),  # 4x4 tiles
    ((24, 40, 3, 7), "IOhw16i16o", "OIhw4o4i", "f32", "f32"),  # i = 40 of 48: padded blocks
]


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", PLAIN_CASES)
def test_block_source_order_with_plain_stores(monkeypatch, dims, stag, dtag, sdt, ddt):
    """In cache (plain stores), whole-block tiles of 4 to 8 source rows take the source order
    too (``BLOCK_SRC_ORDER_PLAIN``); off, the destination order. Every byte exact."""
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 1 << 40)
    monkeypatch.setattr(plan_mod, "NT_MIN_TRANSPOSE_BYTES", 1 << 40)
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = build(s, d)
    p = k.plan
    assert not p.nt and p.tile.rows_contiguous and 4 <= p.tile.R <= 8, p.describe()
    assert any(NOTE in n for n in p.notes), p.describe()
    _in_source_order_and_exact(k, s, d, sum(dims))
    monkeypatch.setattr(plan_mod, "BLOCK_SRC_ORDER_PLAIN", False)
    assert not any(NOTE in n for n in plan_of(s, d).notes)


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", [
    ((32, 40, 1, 3), "oihw", "IOhw16i16o", "f32", "f32"),   # i = 40 of 48: a zero half-block
    ((32, 48, 3, 5), "iohw", "OIhw16o16i", "s8", "f32"),
    ((32, 32, 5, 5), "oihw", "IOhw16i16o", "bf16", "bf16"),
])
def test_cols_tiles_walk_the_source_rows(monkeypatch, dims, stag, dtag, sdt, ddt):
    """NT cols transposes whose source rows go on into an outer node's next step (the next
    i-block of an `oihw` row) put the outer loops in source order (``COLS_SRC_ORDER``);
    every byte exact; off, the destination order."""
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = build(s, d)
    p = k.plan
    t = p.tile
    assert p.nt and t.c is not None, p.describe()
    assert "the outer loops in source order" in p.describe(), p.describe()
    outer = [n.strides[1] for i, n in enumerate(p.nodes) if i not in (t.a, t.b, t.c)]
    assert outer == sorted(outer, reverse=True), p.describe()
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, sdt, rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, [0, 2 * d.dtype.size, 64 - d.dtype.size])
    monkeypatch.setattr(plan_mod, "COLS_SRC_ORDER", False)
    assert "the outer loops in source order" not in plan_of(s, d).describe()

"""Element widening (``layoutjit.widen``): a run both layouts keep together moves as one
wider element.

The factor comes from the lowered IR (no kernel built) and is checked against what the
layouts say: the lightest digit both hold at stride 1, and the k that divides it, the
dim's size, every other stride and offset0. Kernels built on small tensors (with the
wide path and with NT stores at any size) must match the numpy reference byte for byte,
padding and views included; random bytes as 8-byte elements check that a float move
keeps every bit (NaN payloads included).
"""

from __future__ import annotations

import numpy as np
import pytest

import layoutjit as lj
import layoutjit.widen as widen_mod
import reference as ref
from layoutjit.attrs import Attrs
from layoutjit.compiler import build, lower_and_plan
from layoutjit.ir import lower

M = lj.MemoryDesc


def factor(s, d, cap=None) -> int:
    return widen_mod.widen_factor(lower(d, s), cap)


@pytest.mark.parametrize("dims,stag,dtag,dt,k", [
    ((32, 32, 3, 3), "OIhw4i16o4i", "OIhw2i8o4i", "s8", 4),      # 4i on both sides
    ((32, 32, 3, 3), "OIhw8i16o2i", "OIhw16i16o2i", "bf16", 2),  # 2i pairs: 4 bytes
    ((32, 32, 3, 3), "OIhw4i16o4i", "OIhw8i16o2i", "s8", 2),     # only 2 of the 4i stay together
    ((2, 20, 5, 7), "nChw8c", "nhwc", "u8", 4),                 # C=20: 4 | 20
    ((2, 18, 5, 7), "nChw8c", "nhwc", "u8", 2),                 # C=18: 2 | 18, 4 does not
    ((2, 17, 5, 7), "nChw8c", "nhwc", "u8", 1),                 # a wide element would mix data and padding
    ((2, 16, 5, 7), "nchw", "nhwc", "u8", 1),                   # no run on both sides
    ((2, 32, 5, 7), "nhwc", "nChw16c", "f32", 1),               # f32 runs: 8 bytes is over the cap
    ((8, 24, 6), "abc", "acb", "s8", 1),                        # the unit-stride dims differ
])
def test_factor_from_layouts(dims, stag, dtag, dt, k):
    assert factor(M(dims, dt, stag), M(dims, dt, dtag)) == k


def test_factor_cap_and_types():
    s, d = M((2, 32, 5, 7), "f32", "nhwc"), M((2, 32, 5, 7), "f32", "nChw16c")
    assert factor(s, d, 8) == 2
    assert factor(s, d, 1) == 1
    # a conversion never widens: the elements change size
    assert factor(M((2, 32, 5, 7), "s8", "nChw8c"), M((2, 32, 5, 7), "u8", "nhwc")) == 1
    # attributes never widen either (scales apply per element)
    s, d = M((2, 32, 5, 7), "s8", "nChw8c"), M((2, 32, 5, 7), "s8", "nhwc")
    ir = lower_and_plan(s, d, Attrs.make(s, d, scales={"dst": 0}))[0]
    assert not any("move as one" in n for n in ir.notes)


def test_factor_views():
    big = M((4, 64, 6, 6), "u8", "nhwc")
    # a channel window starting at 2: offset0 and the run's dim size allow pairs only
    assert factor(big.submemory_desc((4, 30, 6, 6), (0, 2, 0, 0)), M((4, 30, 6, 6), "u8", "nChw16c")) == 2
    assert factor(big.submemory_desc((4, 32, 6, 6), (0, 4, 0, 0)), M((4, 32, 6, 6), "u8", "nChw16c")) == 4
    # strides not a multiple of the run (c stride 1, w stride 66 bytes): pairs
    odd = M((4, 32, 6, 6), "u8", strides=(6 * 6 * 66, 1, 6 * 66, 66))
    assert factor(odd, M((4, 32, 6, 6), "u8", "nChw16c")) == 2


def test_widened_ir():
    s, d = M((32, 48, 5, 3), "s8", "OIhw4i16o4i"), M((32, 48, 5, 3), "s8", "OIhw2i8o4i")
    ir = widen_mod.widen(lower(d, s))
    assert all(op.dtype == "s32" for op in ir.operands)
    assert ir.dims[1].valid == 12 and ir.dims[1].write == 12
    assert any("runs of 4 s8 move as one 4-byte element" in n for n in ir.notes)
    # the 4i node is gone: i's lightest node is the destination's 2i (2 steps of 4 s8)
    i_nodes = sorted((n.weight, n.extent, n.strides) for n in ir.nodes if n.dim == 1)
    assert i_nodes[0] == (1, 2, (8, 16))
    # same elements, a quarter as many
    assert ir.total * 4 == lower(d, s).total


CASES = [
    ((32, 48, 5, 3), "OIhw4i16o4i", "OIhw2i8o4i", "s8"),
    ((32, 40, 3, 3), "OIhw8i16o2i", "OIhw16i16o2i", "bf16"),
    ((32, 36, 3, 3), "OIhw4i16o4i", "OIhw8i16o2i", "u8"),
    ((3, 20, 5, 7), "nChw8c", "nhwc", "u8"),
    ((3, 36, 5, 7), "nhwc", "nChw16c", "s8"),      # C=36: zero padding to 48, in wide elements
    ((24, 40, 17), "acb", "aBc8b", "bf16"),
    ((2, 32, 12, 6), "ihwo", "hwio", "s8"),        # o plain on both sides: 4-byte o-quads
]


def _match(dims, stag, dtag, dt, cap):
    s, d = M(dims, dt, stag), M(dims, dt, dtag)
    k = build(s, d)
    assert factor(s, d, cap) > 1
    assert any("move as one" in n for n in k.plan.ir.notes), k.plan.describe()
    assert ref.kernel_matches_reference(k, seed=3), k.plan.describe()


@pytest.fixture
def always_wide(monkeypatch):
    """Widen even where the wide plan is no register transpose (the compiler would plan
    those narrow)."""
    monkeypatch.setattr(widen_mod, "TRANSPOSES_ONLY", False)


@pytest.mark.parametrize("dims,stag,dtag,dt", CASES)
def test_wide_kernels_match_reference(dims, stag, dtag, dt, stores, always_wide):
    _match(dims, stag, dtag, dt, None)


def test_runs_stay_narrow():
    s, d = M((3, 40, 5, 7), "u8", "nChw8c"), M((3, 40, 5, 7), "u8", "nhwc")
    p = lower_and_plan(s, d, None)[1]
    assert p.tile is not None and p.tile.kind == "lines"
    assert p.ir.operands[0].dtype == "u8"   # runs of 8 u8, not of 2 wide elements
    # a register transpose of wide elements stays wide
    s, d = M((64, 64, 3, 3), "u8", "OIhw16i16o2i"), M((64, 64, 3, 3), "u8", "OhwI16o4i")
    p = lower_and_plan(s, d, None)[1]
    assert p.ir.operands[0].dtype == "bf16" and p.tile.kind == "transpose", p.describe()


def test_views_match_reference(always_wide):
    big = M((4, 64, 6, 6), "u8", "nhwc")
    s = big.submemory_desc((4, 30, 6, 6), (0, 2, 0, 0))
    k = build(s, M((4, 30, 6, 6), "u8", "nChw16c"))
    assert any("runs of 2 u8" in n for n in k.plan.ir.notes)
    assert ref.kernel_matches_reference(k, seed=5)
    # the wide element's bits land in a destination view too
    dbig = M((4, 64, 6, 6), "s8", "nhwc")
    k = build(M((4, 32, 6, 6), "s8", "nChw8c"), dbig.submemory_desc((4, 32, 6, 6), (0, 8, 0, 0)))
    assert any("runs of 4 s8" in n for n in k.plan.ir.notes)
    assert ref.kernel_matches_reference(k, seed=6)


def test_eight_byte_elements_keep_every_bit(monkeypatch, always_wide):
    monkeypatch.setattr(widen_mod, "WIDEN_MAX_BYTES", 8)
    s, d = M((4, 32, 7, 5), "u8", "nChw8c"), M((4, 32, 7, 5), "u8", "nhwc")
    k = build(s, d)
    assert any("8-byte element" in n for n in k.plan.ir.notes)
    rng = np.random.default_rng(7)
    src = rng.integers(0, 256, s.get_size(), dtype=np.uint8)
    # every 8-byte group an f64 NaN with a payload (signalling ones among them)
    src.view(np.uint64)[::2] = 0x7FF0000000000001 + rng.integers(0, 1 << 50, src.size // 16, dtype=np.uint64)
    dst = np.zeros(d.get_size(), np.uint8)
    k(src, dst)
    assert np.array_equal(dst, ref.reorder(src, s, d, np.zeros_like(dst)))


def test_switch_off(monkeypatch):
    monkeypatch.setattr(widen_mod, "WIDEN_MAX_BYTES", 1)
    s, d = M((32, 48, 5, 3), "s8", "OIhw4i16o4i"), M((32, 48, 5, 3), "s8", "OIhw2i8o4i")
    ir = lower_and_plan(s, d, None)[0]
    assert all(op.dtype == "s8" for op in ir.operands)


def test_explain_names_the_wide_elements():
    k = build(M((64, 64, 3, 3), "u8", "OIhw16i16o2i"), M((64, 64, 3, 3), "u8", "OhwI16o4i"))
    txt = k.explain()
    assert "strides in 2-byte elements" in txt and "runs of 2 u8 move as one 2-byte element" in txt
    assert ref.kernel_matches_reference(k, seed=9)


def test_eight_bytes_where_they_make_nt_transposes():
    """u8 `OIhw8i8o -> OIhw16i16o` 12288x512x5x5 plans runs of 8 bytes with plain stores;
    as 8-byte elements it is an NT register transpose, which is kept
    (``WIDEN_NT_MAX_BYTES``). A plan that stores NT already keeps its width."""
    dims = (12288, 512, 5, 5)
    s, d = M(dims, "u8", "OIhw8i8o"), M(dims, "u8", "OIhw16i16o")
    p = lower_and_plan(s, d, None)[1]
    assert p.ir.operands[0].dtype == "f64" and p.nt and p.tile.kind == "transpose", p.describe()
    mp = pytest.MonkeyPatch()
    mp.setattr(widen_mod, "WIDEN_NT_MAX_BYTES", 0)
    try:
        p0 = lower_and_plan(s, d, None)[1]
    finally:
        mp.undo()
    assert p0.ir.operands[0].dtype == "u8" and not p0.nt, p0.describe()
    mp.setattr(widen_mod, "WIDEN_MAX_BYTES", 1)  # widening off: the 8-byte step too
    try:
        assert lower_and_plan(s, d, None)[1].ir.operands[0].dtype == "u8"
    finally:
        mp.undo()
    # nhwc -> nChw8c u8 at a size that stores NT: runs of 8 bytes stay
    big = (192, 768, 28, 28)
    q = lower_and_plan(M(big, "u8", "nhwc"), M(big, "u8", "nChw8c"), None)[1]
    assert q.nt and q.ir.operands[0].dtype == "u8", q.describe()
    # ... unless their columns start off the lines (147 pixels of 8 bytes a column)
    big = (448, 2048, 3, 7, 7)
    s, d = M(big, "u8", "ndhwc"), M(big, "u8", "nCdhw8c")
    q = lower_and_plan(s, d, None)[1]
    assert q.nt and q.ir.operands[0].dtype == "f64" and q.tile.kind == "transpose", q.describe()
    mp.setattr(widen_mod, "WIDEN_NT_MAX_BYTES", 0)
    try:
        q0 = lower_and_plan(s, d, None)[1]
    finally:
        mp.undo()
    assert q0.ir.operands[0].dtype == "u8" and q0.line_phases > 1, q0.describe()


@pytest.mark.parametrize("dims,stag,dtag,dt", [
    ((48, 40, 5, 3), "OIhw8i8o", "OIhw16i16o", "u8"),
    ((40, 24, 3, 3), "Ohwi8o", "OIhw16i16o", "s8"),     # o = 40: zero padding to 48 in 8-byte words
    ((32, 48, 7), "OIw4i8o4i", "OIw16o16i", "bf16"),   # runs of 4 bf16
    ((2, 24, 3, 7, 7), "ndhwc", "nCdhw8c", "u8"),       # destination rows of 147 words, off the lines
])
def test_eight_byte_kernels_match_reference(dims, stag, dtag, dt, stores, always_wide, monkeypatch):
    monkeypatch.setattr(widen_mod, "WIDEN_MAX_BYTES", 8)
    s, d = M(dims, dt, stag), M(dims, dt, dtag)
    k = build(s, d)
    assert any("8-byte element" in n for n in k.plan.ir.notes), k.plan.describe()
    assert ref.kernel_matches_reference(k, seed=11), k.plan.describe()


MISALIGNED = [
    ((32, 48, 5, 3), "OIhw4i16o4i", "OIhw2i8o4i", "s8", 4),
    ((64, 40, 6, 5), "OIhw8i8o", "OIhw16i16o", "u8", 8),
    ((3, 36, 5, 7), "nhwc", "nChw16c", "s8", 4),
    ((8, 32, 12, 6), "ihwo", "hwio", "u8", 4),        # runs of 8 o, two wide elements
    ((32, 40, 3, 3), "OIhw8i16o2i", "OIhw16i16o2i", "bf16", 4),
]


@pytest.mark.parametrize("dims,stag,dtag,dt,cap", MISALIGNED)
def test_wide_elements_at_any_byte_offset(dims, stag, dtag, dt, cap, stores, always_wide, monkeypatch):
    """Wide elements read from and written to buffers that are not aligned to their size
    (byte offsets 1, 3 and 6 past a line, the source 1 byte in): every byte right, no guard
    byte touched, NT stores or not."""
    monkeypatch.setattr(widen_mod, "WIDEN_MAX_BYTES", cap)
    s, d = M(dims, dt, stag), M(dims, dt, dtag)
    k = build(s, d)
    assert any(f"{cap}-byte element" in n for n in k.plan.ir.notes), k.plan.describe()
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, dt, rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, [0, 1, 3, 6])
    raw = np.zeros(x.nbytes + 65, np.uint8)
    a0 = (-raw.ctypes.data) % 64 + 1
    xs = raw[a0:a0 + x.nbytes]
    xs[:] = x.view(np.uint8)
    ref.check_guarded_runs(k, xs, expect, [0, 5])

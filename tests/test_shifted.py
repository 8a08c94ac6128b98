"""Transposes into destination rows that do not start on 64-byte lines (``Plan.shifted``).

Large transposes normally store whole aligned lines with non-temporal stores;
when the destination's row length is not a multiple of a line (3001x2999 f32),
the planner realigns every row through a carry instead. The tests force that
plan on small tensors (the size threshold patched to 0) and check every byte,
for each element size, with outer loops, for destination buffers at every
offset within a line (a 1-byte offset takes the plain-store path), at 1 and 2
threads, with guard bytes around the destination.
"""

from __future__ import annotations

import numpy as np
import pytest

import layoutjit as lj
import layoutjit.plan as plan_mod
import reference as ref
from layoutjit.compiler import build

M = lj.MemoryDesc
REAL = {name: getattr(plan_mod, name) for name in ("SHIFT_MIN_ROW_BYTES", "NT_MIN_BYTES", "PANEL_MAX_BYTES")}


@pytest.fixture(autouse=True)
def _short_rows_shift(monkeypatch):
    """The small shapes here have rows under SHIFT_MIN_ROW_BYTES: let them realign."""
    monkeypatch.setattr(plan_mod, "SHIFT_MIN_ROW_BYTES", 0)


@pytest.fixture(scope="module")
def shifted_nt(request):
    mp = pytest.MonkeyPatch()
    mp.setattr(plan_mod, "NT_MIN_BYTES", 0)
    mp.setattr(plan_mod, "PANEL_MAX_BYTES", 0)  # short rows take the panel plan (test_panel.py)
    yield
    mp.undo()


CASES = [
    ((97, 131), "ab", "ba", "f32", "f32", True),        # register path (tile_shift) + edges
    ((3, 50, 37), "abc", "acb", "s32", "s32", True),    # outer loop, partial blocks
    ((70, 45), "ab", "ba", "f32", "bf16", True),        # 2-byte lines (32 elements), conversion
    ((41, 23), "ab", "ba", "f64", "f64", True),         # 8-byte elements
    ((66, 19), "ab", "ba", "bf16", "bf16", True),
    ((2, 150, 37), "abc", "acb", "s8", "s8", True),     # 1-byte lines: 64 rows a group
    ((2, 139, 20), "abc", "acb", "f32", "u8", True),    # 1-byte, narrowed; 20 rows, tail block
    ((2, 150, 8), "abc", "acb", "u8", "u8", False),     # 1-byte, 8 rows: SHIFT_MIN_BYTE_ROWS
    ((2, 9, 35, 21), "abcd", "abdc", "f32", "s8", False),  # 1-byte rows of 35: under two groups
]


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt,shifted", CASES)
def test_shifted_transpose_is_exact(shifted_nt, dims, stag, dtag, sdt, ddt, shifted):
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = lj.compile_reorder(s, d)
    assert k.plan.shifted == shifted, k.plan.describe()
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, sdt, rng)
    n = d.get_size()
    expect = ref.reorder(x, s, d, np.zeros(n // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, sorted({0, d.dtype.size, 16, 40, 1}))


@pytest.mark.parametrize("dims,dt,group", [
    ((2, 41, 37, 3), "f32", 352),    # rows of 12 B follow one another: 4 KB groups, a short last one
    ((1, 31, 20, 5), "f32", 208),    # rows of 20 B, 620 of them: groups of 208 (at most half of A)
    ((2, 41, 37, 3), "bf16", 704),   # 2-byte elements: 32-element lines, 6 B rows
])
def test_short_rows_take_long_groups(shifted_nt, dims, dt, group):
    """nhwc -> nchw with few channels and planes off the lines (``shift_rows``): groups of
    at least 4 KB of source, a loop of tiles and of whole lines per row; every byte."""
    n, h, w, c = dims
    s, d = M((n, c, h, w), dt, "nhwc"), M((n, c, h, w), dt, "nchw")
    k = lj.compile_reorder(s, d)
    assert k.plan.shifted and plan_mod.shift_rows(k.plan.ir, k.plan.tile) == group, k.plan.describe()
    assert "for rr in range(" in k.source
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, dt, rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, sorted({0, d.dtype.size, 16, 40, 1}))


@pytest.mark.parametrize("dims,stag,dtag,dt,registers", [
    ((2, 16, 9, 23), "nChw16c", "nchw", "bf16", True),   # rows of 32 B: 32 of them make 1 KB
    ((1, 24, 7, 29), "nhwc", "nchw", "f16", True),       # rows of 48 B
    ((2, 8, 9, 23), "nhwc", "nchw", "bf16", False),      # rows of 16 B: 512 B a line's rows
    ((2, 16, 19, 23), "nChw16c", "nchw", "s8", True),    # 1-byte rows of 16 B: 64 make 1 KB
])
def test_half_line_rows_realign_in_registers(shifted_nt, monkeypatch, dims, stag, dtag, dt, registers):
    """Rows under a line whose line of rows holds 1 KB or more (``_shift_in_registers``;
    1-byte rows of 16 bytes and more always do): groups of one line's
    rows, the middle ones transposed and realigned in registers (``simd.tile_shift``);
    4 KB groups through the stage with the switch off; every byte either way."""
    s, d = M(dims, dt, stag), M(dims, dt, dtag)
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, dt, rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    for on in (True, False):
        monkeypatch.setattr(plan_mod, "SHIFT_REGISTER_ROWS", on)
        k = build(s, d)  # (not compile_reorder: its cache holds the first plan)
        assert k.plan.shifted, k.plan.describe()
        group = plan_mod.shift_rows(k.plan.ir, k.plan.tile)
        assert (group == 64 // d.dtype.size) == (on and registers), (on, group)
        if lj.simd.tile_shift_supported(dt):
            assert ("tile_shift(" in k.source) == (on and registers)
        ref.check_guarded_runs(k, x, expect, sorted({0, 2, 16, 40, 1}))


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", [
    ((200, 45), "ab", "ba", "bf16", "bf16"),      # 32x16 tiles realigned in registers (vpermi2w)
    ((130, 37), "ab", "ba", "f32", "bf16"),       # narrowed before the network, then realigned
    ((2, 100, 35), "abc", "acb", "f32", "f16"),
    ((3, 70, 50), "abc", "acb", "s32", "s32"),    # 16x16, 4-byte integers
    ((90, 53), "ab", "ba", "bf16", "f32"),        # widened after the network, then realigned
    ((2, 150, 70), "abc", "acb", "s8", "s8"),     # 1-byte lines: 64x8 tiles (simd.TILE_SHIFT_BYTES)
    ((140, 64), "ab", "ba", "u8", "u8"),
])
def test_register_realignment_of_rows(shifted_nt, dims, stag, dtag, sdt, ddt):
    """Middle row groups of full blocks are transposed, realigned with the row's carry and
    stored as whole NT lines in registers (``simd.tile_shift``) for 1-, 2- and 4-byte
    destinations, conversions included; every byte at every destination offset."""
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = lj.compile_reorder(s, d)
    assert k.plan.shifted, k.plan.describe()
    assert ("tile_shift(" in k.source) == lj.simd.tile_shift_supported(sdt, ddt)
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, sdt, rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, sorted({0, d.dtype.size, 16, 40, 1}))


@pytest.mark.parametrize("dims,dt,prefetch,l2", [
    ((2, 40, 5, 7), "f32", True, False),     # pixels of 160 B follow one another: 3 blocks of 16
    ((1, 96, 9, 11), "bf16", True, False),   # 2-byte: groups of 32 pixels, 6 blocks of 16
    ((2, 136, 5, 7), "f32", True, True),     # pixels of 544 B: prefetched to L2
    ((1, 1100, 7, 5), "f32", False, False),  # pixels of 4.4 KB stream on their own
])
def test_shifted_tiles_prefetch_the_next_group(shifted_nt, dims, dt, prefetch, l2):
    """nhwc -> nchw into planes off the lines: each block's tile prefetches its share of the
    next row group's contiguous source block (``shift_prefetch``), to L2 for rows of
    ``PREFETCH_L2_SHIFT_ROW`` bytes or more; every byte."""
    n, c, h, w = dims
    s, d = M(dims, dt, "nhwc"), M(dims, dt, "nchw")
    k = lj.compile_reorder(s, d)
    assert k.plan.shifted and k.plan.prefetch == prefetch, k.plan.describe()
    assert ("= prefetch(" in k.source) == prefetch
    assert k.plan.prefetch_l2 == l2 and ("l2_only=True" in k.source) == l2
    assert l2 == (prefetch and c * s.dtype.size >= plan_mod.PREFETCH_L2_SHIFT_ROW)
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, dt, rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, sorted({0, d.dtype.size, 16, 1}))


def test_shifted_plan_is_explained(shifted_nt):
    k = lj.compile_reorder(M((97, 131), "f32", "ab"), M((97, 131), "f32", "ba"))
    text = k.plan.describe()
    assert "realigned" in text and f"blocks of {k.plan.tile.V}" in text
    assert ("tile_shift(" in k.source) == lj.simd.tile_shift_supported("f32")


def test_aligned_rows_keep_the_direct_plan(shifted_nt):
    k = lj.compile_reorder(M((96, 128), "f32", "ab"), M((96, 128), "f32", "ba"))
    assert not k.plan.shifted and k.plan.nt


def test_long_rows_are_shifted_short_ones_staged_as_panels(shifted_nt, monkeypatch):
    monkeypatch.setattr(plan_mod, "PANEL_MAX_BYTES", 32 * 1024)
    short = lj.compile_reorder(M((95, 131), "f32", "ab"), M((95, 131), "f32", "ba"))
    assert short.plan.panel and not short.plan.shifted  # 16 rows of 95: a 6 KB panel
    long = lj.compile_reorder(M((601, 131), "f32", "ab"), M((601, 131), "f32", "ba"))
    assert long.plan.shifted and not long.plan.panel  # 16 rows of 601: 38 KB


def test_stage_path_without_the_register_path(shifted_nt, monkeypatch):
    """CPUs without AVX-512 realign every group through the stage: force that path here."""
    import layoutjit.codegen as cg

    monkeypatch.setattr(cg, "tile_shift_supported", lambda *dts: False)
    s, d = M((89, 67), "f32", "ab"), M((89, 67), "f32", "ba")
    k = lj.compile_reorder(s, d)
    assert k.plan.shifted and "tile_shift(" not in k.source
    x = np.arange(89 * 67, dtype=np.float32)
    raw = np.zeros(d.get_size() + 128, np.uint8)
    a0 = (-raw.ctypes.data) % 64 + 12
    y = raw[a0:a0 + d.get_size()].view(np.float32)
    k(x, y)
    np.testing.assert_array_equal(y.reshape(67, 89), x.reshape(89, 67).T)


def test_short_rows_store_plainly(shifted_nt, monkeypatch):
    """Rows of a few lines (``SHIFT_MIN_ROW_BYTES``) are not realigned: `gOIhw16i16o ->
    goihw` with 7x7 planes writes rows of 49 f32 (196 B), mostly partial lines."""
    monkeypatch.setattr(plan_mod, "SHIFT_MIN_ROW_BYTES", 512)
    s, d = M((2, 32, 4, 7, 7), "f32", "gOIhw16i16o"), M((2, 32, 4, 7, 7), "f32", "goihw")
    k = lj.compiler.build(s, d)  # not the in-memory cache: the plan changes with the limit
    assert not k.plan.shifted and not k.plan.panel, k.plan.describe()
    assert k.plan.tile.kind == "transpose"
    monkeypatch.setattr(plan_mod, "SHIFT_MIN_ROW_BYTES", 0)
    assert lj.compiler.build(s, d).plan.shifted
    for threads in ref.at_thread_counts((1, 2)):
        assert ref.kernel_matches_reference(k, seed=threads)


@pytest.mark.parametrize("dims,stag,dtag,tuned", [
    ((2, 16, 70, 3), "nChw8c", "nchw", True),   # 8 rows a job: realigned or plain tiles, timed
    ((1, 32, 70, 3), "nChw16c", "nchw", False),  # 16 rows: realigned lines only
])
def test_few_rows_time_realigned_against_plain_tiles(shifted_nt, monkeypatch, dims, stag, dtag, tuned):
    """Realigned plans whose jobs write fewer than SHIFT_TUNE_ROWS rows carry the plain
    tiles too (the same loop order) and time both on their first calls at each thread
    count, one included (``Plan.nt_tune_one``); every byte either way, at 1 and 2 threads,
    into guarded destinations at every offset."""
    from layoutjit import store_choice

    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)  # (serial kernels run plain tiles)
    s, d = M(dims, "f32", stag), M(dims, "f32", dtag)
    k = lj.compiler.build(s, d)  # a fresh kernel: its own store choice
    p = k.plan
    assert p.shifted and (p.nt_tune, p.nt_tune_one) == (tuned, tuned), p.describe()
    assert (f"ntq = lo >= {p.jobs}" in k.source) == tuned
    assert ("chosen at run time" in p.describe()) == tuned
    monkeypatch.setattr(plan_mod, "SHIFT_TUNE_ROWS", 0)
    assert not lj.compiler.lower_and_plan(s, d, None)[1].nt_tune
    rng = np.random.default_rng(5)
    x = ref.random_raw(s.get_size() // 4, "f32", rng)
    want = ref.reorder(x, s, d, np.zeros(d.get_size() // 4, np.float32))
    ref.check_store_kinds(k, x, want, (0, p.jobs) if tuned else (0,))  # plain tiles, realigned
    for threads in ref.at_thread_counts((1, 2)):
        for _ in range(store_choice.calls_to_choose()):
            np.testing.assert_array_equal(k(x), want)
        assert (k.store_choice is not None and k.store_choice.kept(threads) is not None) == tuned
    expect = want.view(np.uint8)
    ref.check_guarded_runs(k, x, expect, [0, 4, 16, 40, 1])


@pytest.mark.parametrize("nt_min,band,tuned", [
    (40000, True, True),    # 53760 B moved: between the NT thresholds (40000, split 60000)
    (40000, False, False),  # the band off: realigned lines only
    (30000, True, False),   # above the split threshold (45000): realigned lines only
])
def test_realigned_rows_time_the_store_kind_between_the_thresholds(monkeypatch, nt_min, band, tuned):
    """Realigned plans of 16 rows and more carry the plain tiles too between the one-thread
    and the split NT thresholds (``SHIFT_TUNE_BAND``) and time both at every thread count,
    one included; above the split threshold they keep the realigned lines. Exact at 1 and
    2 threads either way and while timing."""
    from layoutjit import store_choice

    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", nt_min)
    monkeypatch.setattr(plan_mod, "PANEL_MAX_BYTES", 0)
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "SHIFT_TUNE_BAND", band)
    dims = (1, 32, 70, 3)
    s, d = M(dims, "f32", "nChw16c"), M(dims, "f32", "nchw")
    k = lj.compiler.build(s, d)
    p = k.plan
    assert p.shifted and p.nt and (p.nt_tune, p.nt_tune_one) == (tuned, tuned), p.describe()
    assert ("chosen at run time" in p.describe()) == tuned
    rng = np.random.default_rng(6)
    x = ref.random_raw(s.get_size() // 4, "f32", rng)
    want = ref.reorder(x, s, d, np.zeros(d.get_size() // 4, np.float32))
    ref.check_store_kinds(k, x, want, (0, p.jobs) if tuned else (0,))
    for threads in ref.at_thread_counts((1, 2)):
        for _ in range(store_choice.calls_to_choose()):
            np.testing.assert_array_equal(k(x), want)
        assert (k.store_choice is not None and k.store_choice.kept(threads) is not None) == tuned


@pytest.mark.parametrize("dims,stag,dt,shifted", [
    ((4096, 4, 35, 35), "nhwc", "f32", True),      # 16-byte source rows, 4900 B destination rows
    ((8192, 3, 17, 17), "nhwc", "f32", True),
    ((4096, 4, 35, 35), "nhwc", "bf16", False),    # 2-byte elements keep their panels
    ((4096, 96, 7, 28), "nChw4c", "f32", False),   # destination rows of 784 B: panels
])
def test_few_wide_rows_realign(plans_32, monkeypatch, dims, stag, dt, shifted):
    """Transposes of source rows of at most 16 bytes of 4-byte elements into destination
    rows of 1 KB or more realign their rows instead of staging panels (``_few_wide_rows``);
    plans at real sizes (no kernel built), the switch off."""
    # (the real thresholds: this module's fixtures lower them)
    for name in ("SHIFT_MIN_ROW_BYTES", "NT_MIN_BYTES", "PANEL_MAX_BYTES"):
        monkeypatch.setattr(plan_mod, name, REAL[name])
    s, d = M(dims, dt, stag), M(dims, dt, "nchw")
    p = lj.compiler.lower_and_plan(s, d, None)[1]
    assert p.shifted == shifted and p.panel != shifted, p.describe()
    monkeypatch.setattr(plan_mod, "SHIFT_FEW_ROWS_BYTES", 0)
    monkeypatch.setattr(plan_mod, "SHIFT_LONG_ROW_BYTES", 0)   # (long rows realign too)
    p = lj.compiler.lower_and_plan(s, d, None)[1]
    assert p.panel and not p.shifted, p.describe()


@pytest.mark.parametrize("dims", [(3, 4, 35, 35), (2, 3, 17, 19)])
def test_few_wide_rows_realigned_are_exact(shifted_nt, monkeypatch, dims):
    monkeypatch.setattr(plan_mod, "PANEL_MAX_BYTES", 1 << 20)  # (panels possible, as at real sizes)
    s, d = M(dims, "f32", "nhwc"), M(dims, "f32", "nchw")
    k = lj.compiler.build(s, d)
    assert k.plan.shifted, k.plan.describe()
    ref.check_exact_at_offsets(k, sum(dims))

"""Transposes into short destination rows that follow one another (``Plan.panel``).

nhwc -> nchw with 7x7 or 14x14 pixels writes rows of 49 or 196 elements, one after
another and off the 64-byte lines. The planner stages a block of V such rows (one
contiguous panel) and writes it as whole aligned lines. The tests force that plan on
small tensors (the NT size threshold patched to 0) and check every byte: tails in both
tile directions, outer loops, conversions, every element size, destination buffers at
several offsets within a line (an offset that misaligns the element type takes the
plain-store path), at 1 and 2 threads, with guard bytes around the destination.
"""

from __future__ import annotations

import numpy as np
import pytest

import layoutjit as lj
import layoutjit.plan as plan_mod
import reference as ref

M = lj.MemoryDesc
NT_MIN_BYTES = plan_mod.NT_MIN_BYTES  # the threshold as configured, before the fixture patches it
WIDE_BYTES = plan_mod.PANEL_WIDE_BYTES  # likewise for wide panels


@pytest.fixture(autouse=True, scope="module")
def narrow_panels():
    """One block of V rows per panel job unless a test asks for wide panels
    (``plan.wide_panel``, which the planner takes with 32-byte vectors only)."""
    mp = pytest.MonkeyPatch()
    mp.setattr(plan_mod, "PANEL_WIDE_BYTES", 0)
    yield
    mp.undo()


CASES = [
    ((2, 40, 7, 7), "nhwc", "nchw", "f32", "f32"),      # rows of 49, a tail block of 8 channels
    ((3, 37, 6, 6), "acdb", "abcd", "f32", "bf16"),    # conversion, 2-byte lines, tails
    ((2, 70, 5, 7), "nhwc", "nchw", "bf16", "bf16"),   # rows of 35: a 32-row tile and 3
    ((2, 130, 9, 9), "nhwc", "nchw", "s8", "s8"),      # 1-byte rows of 81: 64-row tiles + a tail
    ((43, 23), "ab", "ba", "f64", "f64"),              # 8-byte elements, no outer loop
    ((2, 33, 14, 14), "nhwc", "nchw", "f32", "s8"),    # f32 -> s8, rows of 196
]


#: Wide panels of at most this many bytes (0: narrow): whole images, or several panels per image.
WIDE = [0, 256 * 1024, 4000]


@pytest.mark.parametrize("wide", WIDE)
@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", CASES + [
    ((2, 1024, 5, 5), "nhwc", "nchw", "f32", "f32"),  # rows 4 KB apart: 8x16 tiles when wide
])
def test_panel_transpose_is_exact(nt_everywhere, monkeypatch, wide, dims, stag, dtag, sdt, ddt):
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    monkeypatch.setattr(plan_mod, "PANEL_WIDE_BYTES", wide)
    monkeypatch.setattr(plan_mod, "PANEL_WIDE_MAX_VECTOR", 128)  # at every vector width
    k = lj.compiler.build(s, d)  # not the in-memory cache: the plan changes with ``wide``
    assert k.plan.panel and not k.plan.shifted, k.plan.describe()
    p = k.plan
    if wide == 0:
        assert p.panel_blocks == 1
    else:
        stage = (p.panel_sub_blocks or p.panel_blocks) * p.tile.V * p.nodes[p.tile.a].extent * d.dtype.size
        assert stage <= wide and (p.panel_blocks > 1 or wide < 256 * 1024), p.describe()
        assert ref.scratch_elems(k.source, "stage") == stage // d.dtype.size
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, sdt, rng)
    n = d.get_size()
    expect = ref.reorder(x, s, d, np.zeros(n // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, sorted({0, d.dtype.size, 24, 1}))


def test_panels_prefetch_the_next_outer_block(nt_everywhere):
    """Source rows that follow one another (one image of nhwc is one block): each job
    prefetches its share of the next outer index's block, to L2 (``panel_prefetch``);
    without an outer loop, or with rows apart, there is nothing to prefetch. Exact."""
    dims = (3, 40, 7, 7)
    k = lj.compile_reorder(M(dims, "f32", "nhwc"), M(dims, "f32", "nchw"))
    p = k.plan
    assert p.panel and p.prefetch and p.prefetch_l2, p.describe()
    assert p.prefetch_block == 49 * 40 * 4  # one image: 49 pixels of 40 channels
    # the jobs of V channels share the 7840 B, one image ahead: 16 channels (64-byte vectors),
    # 3 jobs of 2624 B (41 lines); 8 channels (32-byte vectors), 5 jobs of 1600 B (25 lines)
    share = {16: 2624, 8: 1600}[p.tile.V]
    if p.panel_spread:  # spread over the job's tile calls (rows 0, 16, 32, 48 with R = 16), in order
        assert f"pfo = so + 1960 + jb * {share // 4}" in k.source, k.source
        t, G = p.tile, p.tile.R * p.tile.M
        calls = 49 // G * t.M + len(range(49 // G * G, 49, t.R))
        step = -(-share // calls // 64) * 64
        assert f"prefetch({step}, l2_only=True)" in k.source and f"pfo += {step // 4}" in k.source
    else:
        assert f"prefetch({share}, l2_only=True)" in k.source, k.source
        assert f"(src, so + 1960 + jb * {share // 4})" in k.source, k.source
    # ab -> ba: no outer loop; channels 48 apart (strided source rows); nChw16c: rows of one
    # tile step, read in order: no prefetch
    for s in (M((43, 23), "f32", "ab"), M(dims, "f32", strides=(49 * 48, 1, 7 * 48, 48)),
              M((2, 32, 7, 7), "f32", "nChw16c")):
        k2 = lj.compile_reorder(s, M(s.dims, "f32", "ba" if len(s.dims) == 2 else "nchw"))
        assert k2.plan.panel and not k2.plan.prefetch and "prefetch" not in k2.source, k2.plan.describe()
    for s in (M(dims, "f32", "nhwc"), M(dims, "f32", strides=(49 * 48, 1, 7 * 48, 48))):
        kk = lj.compile_reorder(s, M(dims, "f32", "nchw"))
        for threads in ref.at_thread_counts((1, 2)):
            assert ref.kernel_matches_reference(kk, seed=threads)


def test_panel_plan_is_explained(nt_everywhere):
    k = lj.compile_reorder(M((2, 40, 7, 7), "f32", "nhwc"), M((2, 40, 7, 7), "f32", "nchw"))
    text = k.plan.describe()
    V = k.plan.tile.V  # one vector of source elements: 16 f32 (AVX-512) or 8 (AVX2)
    assert "stage" in text and f"panel of {49 * V} elements" in text and f"blocks of {V}" in text
    assert ref.scratch_elems(k.source, "stage") == 49 * V


def test_panel_needs_short_misaligned_rows(nt_everywhere):
    # rows of 56x56 f32 (12544 B) start on lines: the direct NT plan
    k = lj.compile_reorder(M((1, 32, 56, 56), "f32", "nhwc"), M((1, 32, 56, 56), "f32", "nchw"))
    assert not k.plan.panel and k.plan.nt
    # rows of 1000 f32 are off the lines, but a panel of 16 would be 64 KB: realigned rows
    k = lj.compile_reorder(M((1000, 40), "f32", "ab"), M((1000, 40), "f32", "ba"))
    assert not k.plan.panel and k.plan.shifted
    # rows of at most a line: whole-block tiles write each panel directly
    k = lj.compile_reorder(M((2, 70, 3, 7), "bf16", "nhwc"), M((2, 70, 3, 7), "bf16", "nchw"))
    assert not k.plan.panel and k.plan.tile.rows_contiguous
    # padded destinations never take it
    k = lj.compile_reorder(M((2, 20, 7, 7), "f32", "nhwc"), M((2, 20, 7, 7), "f32", "nChw16c"))
    assert not k.plan.panel


def test_panel_off_below_the_nt_size(monkeypatch):
    """At the normal thresholds a small transpose keeps plain stores straight into dst."""
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", NT_MIN_BYTES)
    k = lj.compile_reorder(M((2, 41, 7, 7), "f32", "nhwc"), M((2, 41, 7, 7), "f32", "nchw"))
    assert not k.plan.panel and not k.plan.nt


@pytest.mark.parametrize("dims,dt,panel", [
    ((2, 64, 14, 14), "f32", False),   # 13 row groups of 16, rows of 256 B: shifted, prefetched
    ((2, 64, 7, 7), "f32", True),      # 4 row groups: panels
    ((2, 48, 14, 14), "bf16", True),   # 7 groups of 32
])
def test_many_row_groups_realign_instead_of_panels(nt_everywhere, dims, dt, panel):
    """Rows that follow one another, many groups of them per destination row: the shifted
    plan with prefetch (``_prefetched_shift_better``) instead of panels; every byte."""
    s, d = M(dims, dt, "nhwc"), M(dims, dt, "nchw")
    k = lj.compile_reorder(s, d)
    assert k.plan.panel == panel and k.plan.shifted == (not panel), k.plan.describe()
    assert k.plan.prefetch  # shifted: the next row group; panels: the next image
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, dt, rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, sorted({0, d.dtype.size, 24, 1}))


@pytest.mark.parametrize("dims", [
    (2, 131, 1030),   # 131 rows of 4 KB: realigned unless panels may read them all
    (2, 100, 1030),   # 100 rows: panels
])
def test_panels_read_at_most_panel_max_rows(nt_everywhere, monkeypatch, dims):
    """A panel job reads a piece of every source row of its block side by side: with more
    than ``PANEL_MAX_ROWS`` rows of 4 KB or more (and a destination the realigning plan can
    write) the rows are realigned instead; every byte either way."""
    n, a, b = dims
    s, d = M(dims, "f32", "abc"), M(dims, "f32", "acb")
    monkeypatch.setattr(plan_mod, "SHIFT_MIN_ROW_BYTES", 0)  # rows of 400 B may realign
    for limit in (plan_mod.PANEL_MAX_ROWS, 99):
        monkeypatch.setattr(plan_mod, "PANEL_MAX_ROWS", limit)
        k = lj.compiler.build(s, d)  # not the in-memory cache: the plan changes with the limit
        want = a <= limit
        assert k.plan.panel == want and k.plan.shifted == (not want), k.plan.describe()
        rng = np.random.default_rng(a)
        x = ref.random_raw(s.get_size() // 4, "f32", rng)
        expect = ref.reorder(x, s, d, np.zeros(d.get_size() // 4, np.float32)).view(np.uint8)
        ref.check_guarded_runs(k, x, expect, [0, 4, 24])


def test_wide_panels_with_short_vectors(monkeypatch):
    """nhwc -> nchw 256x1024x7x7 (rows of 49, source rows 4 KB apart): with 32-byte vectors
    each job takes a whole image (1024 rows of 49 f32, 200 KB), staged 5 blocks of 16 rows
    at a time (``panel_sub_blocks``: 15 KB), 8x16 tiles (a whole line of each source row),
    prefetching the next image; with 64-byte vectors the narrow panel stays (49 source rows
    side by side: under ``PANEL_WIDE_MIN_ROWS``). Plans only: nothing compiles."""
    monkeypatch.setattr(plan_mod, "PANEL_WIDE_BYTES", WIDE_BYTES)
    dims = (256, 1024, 7, 7)
    ir = lj.compiler.lower_and_plan(M(dims, "f32", "nhwc"), M(dims, "f32", "nchw"), None)[0]
    p = plan_mod.make_plan(ir, vbytes=32)
    assert p.panel and p.panel_blocks == 64 and (p.tile.R, p.tile.V) == (8, 16), p.describe()
    assert p.jobs == 256 and p.prefetch and p.prefetch_block == 49 * 1024 * 4
    assert p.panel_sub_blocks == 5 and "panel of 3920 elements" in p.describe(), p.describe()
    assert "blocks of 1024 along" in p.describe()
    # 2048 channels: 400 KB images, two panels of 1024 rows each, no prefetch
    dims = (256, 2048, 7, 7)
    ir = lj.compiler.lower_and_plan(M(dims, "f32", "nhwc"), M(dims, "f32", "nchw"), None)[0]
    p = plan_mod.make_plan(ir, vbytes=32)
    assert p.panel and p.panel_blocks == 64 and p.jobs == 512 and not p.prefetch, p.describe()
    p = plan_mod.make_plan(ir, vbytes=64)
    assert p.panel and p.panel_blocks == 1 and p.tile.V == 16, p.describe()


@pytest.mark.parametrize("dims, stag, dtag, sdt, ddt, wide", [
    ((256, 100, 500), "ncw", "nwc", "f32", "f32", True),          # 100 source rows of 2000 B
    ((256, 200, 13, 13), "nchw", "nhwc", "f32", "bf16", True),    # 200 rows of 676 B
    ((256, 24, 56, 56), "nchw", "nhwc", "f32", "f32", False),     # 24 rows
    ((96, 136, 56, 56), "nchw", "nhwc", "f32", "u8", False),      # 1-byte destination
    ((68, 524288), "ab", "ba", "f32", "f32", False),              # rows of 2 MB
])
def test_wide_panels_with_64_byte_vectors_for_many_short_rows(monkeypatch, dims, stag, dtag, sdt, ddt, wide):
    """With 64-byte vectors a panel plan takes wide panels where its narrow jobs would read
    ``PANEL_WIDE_MIN_ROWS`` or more source rows shorter than a page side by side, into 2-byte
    or wider elements (``plan._many_short_rows``). Plans only."""
    monkeypatch.setattr(plan_mod, "PANEL_WIDE_BYTES", WIDE_BYTES)
    ir = lj.compiler.lower_and_plan(M(dims, sdt, stag), M(dims, ddt, dtag), None)[0]
    p = plan_mod.make_plan(ir, vbytes=64)
    assert p.panel or not wide, p.describe()
    assert (p.panel_blocks > 1) == wide, p.describe()
    monkeypatch.setattr(plan_mod, "PANEL_WIDE_MIN_ROWS", 0)
    assert plan_mod.make_plan(ir, vbytes=64).panel_blocks == 1


def test_wide_panels_start_at_the_one_thread_nt_threshold(monkeypatch):
    """Wide panels and realigned rows are planned from the one-thread NT threshold of
    register transposes (``nt_min_bytes``), at every thread count; narrow panels keep the
    split threshold (``nt_split_min_bytes``). Plans only, with fixed thresholds."""
    monkeypatch.setattr(plan_mod, "PANEL_WIDE_BYTES", WIDE_BYTES)
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 16 << 20)
    monkeypatch.setattr(plan_mod, "NT_MIN_TRANSPOSE_BYTES", 11 << 20)
    monkeypatch.setattr(plan_mod, "NT_SPLIT_MIN_BYTES", None)

    def plan(dims, vbytes):
        ir = lj.compiler.lower_and_plan(M(dims, "f32", "nhwc"), M(dims, "f32", "nchw"), None)[0]
        return plan_mod.make_plan(ir, vbytes=vbytes)

    mid = (64, 512, 7, 7)   # 12.8 MB moved: between the two thresholds (11 and 24 MB)
    p = plan(mid, 32)
    assert p.panel and p.panel_blocks == 64 and p.nt, p.describe()
    p = plan(mid, 64)
    assert not p.panel and not p.shifted and not p.nt, p.describe()
    p = plan((32, 512, 7, 7), 32)   # 6.4 MB: plain tiles straight into dst
    assert not p.panel and not p.nt, p.describe()
    p = plan((100, 1024, 14, 14), 32)   # 14x14 rows, many row groups: realigned
    assert p.shifted, p.describe()
    p = plan((10, 1024, 14, 14), 32)    # 16 MB: below the split threshold, realigned too
    assert 11 << 20 < p.bytes_moved < 24 << 20 and p.shifted and p.nt, p.describe()
    p = plan((6, 1024, 14, 14), 32)     # 9.6 MB: below both, plain tiles
    assert not p.shifted and not p.panel and not p.nt, p.describe()


def test_wide_panel_whole_line_tiles_with_a_tail_block(nt_everywhere, monkeypatch):
    """Source rows 4 KB apart (a strided nhwc view of 1000 of 1024 channels): wide panels
    take 8x16 tiles there, and 1000 channels end in a tail block of 8; the rows do not
    follow one another, so nothing is prefetched. Whole images and two panels per image,
    every byte against the reference, at 1 and 2 threads."""
    monkeypatch.setattr(plan_mod, "PANEL_WIDE_MAX_VECTOR", 128)
    monkeypatch.setattr(plan_mod, "ALIASED_L1_ROWS", 8)
    dims = (2, 1000, 5, 5)
    s = M(dims, "f32", strides=(25 * 1024, 1, 5 * 1024, 1024))
    d = M(dims, "f32", "nchw")
    rng = np.random.default_rng(5)
    x = ref.random_raw(s.get_size() // 4, "f32", rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // 4, np.float32)).view(np.uint8)
    for wide in (WIDE_BYTES, 60000):
        monkeypatch.setattr(plan_mod, "PANEL_WIDE_BYTES", wide)
        ir = lj.compiler.lower_and_plan(s, d, None)[0]
        p = plan_mod.make_plan(ir, vbytes=32)
        assert p.panel and p.panel_blocks > 1 and (p.tile.R, p.tile.V) == (8, 16), p.describe()
        assert not p.prefetch and p.nodes[p.tile.b].extent % 16 == 8
        k = lj.compiler.build(s, d)
        if k.plan.vector_bytes == 32:  # this host plans the same: run it
            assert k.plan.panel_blocks == p.panel_blocks, k.plan.describe()
        ref.check_guarded_runs(k, x, expect, [0, 4, 24])


SUB_CASES = [
    ((3, 40, 7, 9), "nchw", "nhwc", "f32", "f32"),     # rows of 40 (160 B) off the lines; 63 px
    ((2, 100, 5, 13), "nchw", "nhwc", "f32", "bf16"),  # conversion, A tail (100 = 6 x 16 + 4)
    ((2, 37, 11, 9), "nchw", "nhwc", "f32", "f32"),    # 99 px: a tail block
    ((4, 24, 200), "ncw", "nwc", "s8", "f32"),   # 7 blocks of 32 (a tail of 8)
]


@pytest.mark.parametrize("blocks", [1, 3])
@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", SUB_CASES)
def test_wide_panel_sub_blocks_are_exact(nt_everywhere, monkeypatch, blocks, dims, stag, dtag, sdt, ddt):
    """Wide panels of short prefetched source rows staged a few blocks at a time, each
    block's tiles for every A row (``plan.panel_sub_blocks``: 1 and 3 blocks a sub-panel),
    then written out: every byte at several destination offsets (a misaligning one takes
    the unstaged path), 1 and 2 threads, guard bytes; the switch off: strips."""
    monkeypatch.setattr(plan_mod, "PANEL_WIDE_BYTES", 256 * 1024)
    monkeypatch.setattr(plan_mod, "PANEL_WIDE_MAX_VECTOR", 128)
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    monkeypatch.setattr(plan_mod, "PANEL_SUB_BYTES", 0)
    p0 = lj.compiler.lower_and_plan(s, d, None)[1]
    assert p0.panel_sub_blocks == 0 and "filled a strip" in p0.describe(), p0.describe()
    block = p0.tile.V * p0.nodes[p0.tile.a].extent * d.dtype.size
    monkeypatch.setattr(plan_mod, "PANEL_SUB_BYTES", blocks * block)
    k = lj.compiler.build(s, d)
    p = k.plan
    assert p.panel and p.prefetch and p.panel_sub_blocks == blocks < p.panel_blocks, p.describe()
    assert "for s0 in range(" in k.source, k.source
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, sdt, rng)
    n = d.get_size()
    expect = ref.reorder(x, s, d, np.zeros(n // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, sorted({0, d.dtype.size, 24, 1}))

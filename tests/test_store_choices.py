"""Store-dependent plan choices: NT per thread count, wide macro tiles for plain stores.

``Plan.nt_split``: runs packed into lines (nhwc -> nChw16c) between the NT
threshold and the LLC size use NT stores when one thread runs every job and
plain stores when the jobs are split between threads; the kernel tells the two
apart by its job range. The tests shrink both thresholds, check the plan, the
generated condition and every byte at 1 and 2 threads, and that other kinds
keep one rule.

Two lines per destination row: a full transpose whose tile rows are one line (f32 -> bf16:
32 rows) reads two tiles of rows per macro tile, so it writes two lines of each row.

Wide macro tiles: transposes with plain stores into destination rows 1 KB or
more apart read 256 source rows per macro tile (a loop of tiles in the
generated code); checked on tails, padding and conversions.
"""

from __future__ import annotations

import numba
import numpy as np
import pytest

import layoutjit as lj
import layoutjit.plan as plan_mod
import reference as ref
from layoutjit.compiler import lower_and_plan

M = lj.MemoryDesc


def _exact_at_1_and_2_threads(k) -> None:
    """The serial (NT) and the split (plain) paths both match the reference."""
    for threads in ref.at_thread_counts((1, 2)):
        assert ref.kernel_matches_reference(k, seed=threads)


@pytest.fixture
def band(monkeypatch):
    """Every size is above the NT threshold and below the split threshold."""
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "llc_bytes", lambda: 1 << 40)


def test_lines_kind_splits_its_store_choice(band, monkeypatch):
    monkeypatch.setattr(plan_mod, "NT_TUNE", False)  # the fixed rule (store kind not timed)
    dims = (2, 40, 9, 7)
    k = lj.compiler.build(M(dims, "f32", "nhwc"), M(dims, "f32", "nChw16c"))  # not the memory cache
    p = k.plan
    assert p.tile.kind == "lines" and p.nt and not p.nt_split and p.jobs > 1, p.describe()
    assert not p.nt_tune and k.store_choice is None
    assert f"hi - lo == {p.jobs}" in k.source
    assert "when one thread runs every job" in p.describe()
    _exact_at_1_and_2_threads(k)


@pytest.mark.parametrize("dims, stag, dtag, kind, nt_min", [
    ((2, 40, 9, 7), "nhwc", "nChw16c", "lines", 0),  # split threshold: the (patched) LLC
    # register transposes split at 3/2 of the NT threshold: 147456 and 149760 B moved
    ((2, 64, 9, 16), "nchw", "nhwc", "transpose", 120000),
    ((2, 80, 9, 13), "nchw", "nhwc", "transpose", 120000),  # a tail of the pixels
])
def test_store_kind_is_timed_between_the_thresholds(band, monkeypatch, dims, stag, dtag, kind, nt_min):
    """Between the one-thread and the split NT thresholds the kernel carries both store
    kinds: the launcher asks for NT by offsetting the job range (every byte exact either
    way, at 1 and 2 threads), and each thread count above one times both on its first
    calls and keeps the faster."""
    from layoutjit import store_choice

    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", nt_min)
    s, d = M(dims, "f32", stag), M(dims, "f32", dtag)
    k = lj.compiler.build(s, d)  # a fresh kernel: its own store choice, not the memory cache's
    p = k.plan
    assert p.tile.kind == kind and p.nt and not p.nt_split and p.nt_tune, p.describe()
    assert f"ntq = lo >= {p.jobs}" in k.source and f"hi - lo == {p.jobs}" not in k.source
    assert "chosen at run time" in p.describe()
    rng = np.random.default_rng(3)
    x = ref.random_raw(s.get_size() // 4, "f32", rng)
    want = ref.reorder(x, s, d, np.zeros(d.get_size() // 4, np.float32))
    ref.check_store_kinds(k, x, want, (0, p.jobs))  # plain, NT: serial and on two threads
    calls = store_choice.calls_to_choose()
    for threads in ref.at_thread_counts((1, 2)):
        for _ in range(calls):
            y = k(x)
            np.testing.assert_array_equal(y, want)
        if threads > 1 and numba.get_num_threads() > 1:
            assert k.store_choice.kept(threads) is not None
            assert "stores kept so far: 2 threads:" in k.explain()
    assert k.store_choice.kept(1) is None  # one thread: NT, the plan's rule, never timed


@pytest.mark.parametrize("paired", [True, False])
def test_store_choice_times_both_kinds_then_keeps_the_faster(monkeypatch, paired):
    """Paired (the default): PLAIN_WARM untimed plain calls, SAMPLES timed ones, one
    untimed NT call and SAMPLES timed ones, each kind timed in its own steady state;
    unpaired, they alternate and the first two are not timed. NT is kept where its median
    is below NT_MARGIN of plain's (the call times are made up here)."""
    import time

    from layoutjit import store_choice
    from layoutjit.store_choice import PLAIN_WARM, SAMPLES, StoreChoice

    monkeypatch.setattr(store_choice, "PAIRED", paired)

    def run(c, n, secs):  # one launch that "took" secs(base) seconds
        base, t0 = c.start(n)
        if t0 is not None:
            t0 = time.perf_counter() - secs(base)
        c.finish(n, base, t0)
        return base, t0 is not None

    c = StoreChoice(jobs=10)
    assert c.start(1) == (10, None)  # one thread: NT, never timed
    seen = []
    while c.kept(2) is None:
        seen.append(run(c, 2, lambda base: 1.0 if base else 2.0))  # NT twice as fast
    assert len(seen) == store_choice.calls_to_choose()
    if paired:
        want = ([(0, False)] * PLAIN_WARM + [(0, True)] * SAMPLES + [(10, False)]
                + [(10, True)] * SAMPLES)
        assert seen == want
    else:
        assert [b for b, _ in seen[:4]] == [0, 10, 0, 10] and len(seen) == 2 * SAMPLES + 2
        assert [t for _, t in seen[:3]] == [False, False, True]
    assert sum(t for b, t in seen if b) == sum(t for b, t in seen if not b) == SAMPLES
    assert c.kept(2) is True and c.start(2) == (10, None)
    assert "2 threads: non-temporal" in c.describe()
    c3 = StoreChoice(jobs=4)
    for _ in range(store_choice.calls_to_choose()):
        run(c3, 3, lambda base: 1.0 if base else 0.5)  # plain faster
    assert c3.kept(3) is False and c3.start(3) == (0, None) and c3.kept(2) is None
    c4 = StoreChoice(jobs=4)
    for _ in range(store_choice.calls_to_choose()):
        run(c4, 2, lambda base: 0.95 if base else 1.0)  # NT faster, by less than the margin
    assert c4.kept(2) is False and "2 threads: plain" in c4.describe()
    c1 = StoreChoice(jobs=6, one_thread=True)  # Plan.nt_tune_one: one thread is timed too
    assert c1.start(1) == (0, None)
    for _ in range(store_choice.calls_to_choose() - 1):
        run(c1, 1, lambda base: 1.0 if base else 0.5)
    assert c1.kept(1) is False and c1.start(1) == (0, None) and "1 thread: plain" in c1.describe()


@pytest.mark.parametrize("tune", [True, False])
def test_local_permutations_time_the_store_kind_on_one_thread_too(band, monkeypatch, tune):
    """A transpose that streams on both sides (OIhw4i16o4i -> OIhw16i16o: each tile reads
    one run and writes one block) between the NT thresholds times both store kinds at every
    thread count, one included (BLOCK_LOCAL_TUNE); off, it keeps plain stores there. Exact
    at 1 and 2 threads while timing and after."""
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 120000)  # split at 180000; 165888 B moved
    monkeypatch.setattr(plan_mod, "BLOCK_LOCAL_TUNE", tune)
    dims = (48, 48, 3, 3)
    k = lj.compiler.build(M(dims, "f32", "OIhw4i16o4i"), M(dims, "f32", "OIhw16i16o"))
    p = k.plan
    assert p.tile.kind == "transpose" and p.tile.rows_contiguous, p.describe()
    assert (p.nt, p.nt_tune, p.nt_tune_one) == (tune, tune, tune), p.describe()
    assert ("one included" in p.describe()) == tune, p.describe()
    from layoutjit import store_choice
    for _ in ref.at_thread_counts((1, 2)):
        for seed in range(store_choice.calls_to_choose()):
            assert ref.kernel_matches_reference(k, seed=seed)
        if tune:  # the thread count in force (one, or two where the pool has them)
            assert k.store_choice.kept(numba.get_num_threads()) is not None


@pytest.mark.parametrize("tune", [True, False])
def test_whole_block_tiles_time_the_store_kind_on_one_thread_too(band, monkeypatch, tune):
    """Tiles that write whole blocks from rows far apart (nchw -> nChw4c: 4 planes, 8
    pixels of 4 channels a tile) between the NT thresholds time both store kinds on one
    thread too (WHOLE_BLOCK_TUNE: their one-thread NT stores had lost to plain ones in
    cache, 32x512x7x17 2.3 -> 1.3x copy); off, one thread keeps NT stores. Exact at 1 and
    2 threads while timing and after."""
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 200000)  # split at 300000
    monkeypatch.setattr(plan_mod, "NT_MIN_TRANSPOSE_BYTES", 100000)  # one thread
    monkeypatch.setattr(plan_mod, "WHOLE_BLOCK_TUNE", tune)
    dims = (4, 64, 7, 16)  # 229376 B moved, 1792 B a block (whole lines)
    k = lj.compiler.build(M(dims, "f32", "nchw"), M(dims, "f32", "nChw4c"))
    p = k.plan
    assert p.tile.kind == "transpose" and p.tile.rows_contiguous, p.describe()
    assert not plan_mod._block_local(p.ir, p.tile)
    assert (p.nt, p.nt_tune, p.nt_tune_one) == (True, True, tune), p.describe()
    assert ("one included" in p.describe()) == tune, p.describe()
    from layoutjit import store_choice
    for _ in ref.at_thread_counts((1, 2)):
        for seed in range(store_choice.calls_to_choose()):
            assert ref.kernel_matches_reference(k, seed=seed)


def test_whole_block_tiles_at_real_size(plans_32, monkeypatch):
    """nchw -> nChw4c 32x512x7x17 (15.6 MB moved, between the one-thread and the split
    thresholds of a 32 MiB LLC): timed on one thread too."""
    monkeypatch.setattr(plan_mod, "NT_MIN_TRANSPOSE_BYTES", (32 << 20) // 3)
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 16 << 20)
    dims = (32, 512, 7, 17)
    p = lj.compiler.lower_and_plan(M(dims, "f32", "nchw"), M(dims, "f32", "nChw4c"), None)[1]
    assert p.tile.rows_contiguous and (p.nt, p.nt_tune, p.nt_tune_one) == (True, True, True), p.describe()


def test_transposes_split_between_their_two_thresholds(monkeypatch):
    """Register transposes: NT from half the LLC on one thread, from 3/4 of it when split;
    local permutations (a contiguous source run per tile, whole blocks) keep one rule
    when the store kind is not timed."""
    dims = (2, 64, 9, 16)  # nchw -> nhwc: 147456 B moved, rows 256 B apart (not wide)
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 120000)  # split threshold 180000
    monkeypatch.setattr(plan_mod, "NT_TUNE", False)  # the fixed rule (store kind not timed)
    k = lj.compiler.build(M(dims, "f32", "nchw"), M(dims, "f32", "nhwc"))
    p = k.plan
    assert p.tile.kind == "transpose" and p.nt and not p.nt_split, p.describe()
    assert f"hi - lo == {p.jobs}" in k.source
    _exact_at_1_and_2_threads(k)
    # OIhw8i8o -> OIhw2i8o4i: 73728 B moved; 4x8 tiles read one run and write one block
    # (a local permutation) with 32- and 64-byte vectors alike
    wdims = (32, 32, 3, 3)
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 60000)
    k2 = lj.compile_reorder(M(wdims, "f32", "OIhw8i8o"), M(wdims, "f32", "OIhw2i8o4i"))
    assert k2.plan.tile.rows_contiguous and not k2.plan.nt, k2.plan.describe()
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 40000)  # above both thresholds: NT, split too
    k3 = lj.compile_reorder(M((32, 48, 3, 3), "f32", "OIhw8i8o"), M((32, 48, 3, 3), "f32", "OIhw2i8o4i"))
    assert k3.plan.bytes_moved >= 60000 and k3.plan.nt and k3.plan.nt_split, k3.plan.describe()
    assert ref.kernel_matches_reference(k3)


def test_register_transposes_take_nt_stores_from_their_own_threshold(monkeypatch):
    """NT_MIN_TRANSPOSE_BYTES (a third of the LLC) lowers the one-thread NT threshold of
    register transposes only, wide groups included; split between threads they time the
    store kind (``nt_tune``) up to the split threshold. Other kinds keep NT_MIN_BYTES; 0
    turns the lower threshold off."""
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 400000)
    monkeypatch.setattr(plan_mod, "NT_MIN_TRANSPOSE_BYTES", 100000)

    def plan(dims, stag, dtag):
        return lj.compiler.lower_and_plan(M(dims, "f32", stag), M(dims, "f32", dtag), None)[1]

    narrow = plan((2, 64, 9, 16), "nchw", "nhwc")   # 147456 B, rows 256 B apart
    wide = plan((1, 512, 7, 9), "nchw", "nhwc")     # 258048 B, rows 2 KB apart
    lines = plan((2, 40, 30, 16), "nhwc", "nChw16c")  # 337920 B, runs packed into lines
    for p in (narrow, wide):
        assert p.tile.kind == "transpose" and p.nt and not p.nt_split and p.nt_tune, p.describe()
    assert wide.tile.M * wide.tile.R < plan_mod.WIDE_GROUP_ROWS  # NT: one tile of rows
    assert lines.tile.kind == "lines" and not lines.nt, lines.describe()
    monkeypatch.setattr(plan_mod, "NT_TUNE", False)  # not timed: plain stores when split
    p = plan((2, 64, 9, 16), "nchw", "nhwc")
    assert p.nt and not p.nt_split and not p.nt_tune, p.describe()
    monkeypatch.setattr(plan_mod, "NT_TUNE", True)
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 400000)
    monkeypatch.setattr(plan_mod, "NT_MIN_TRANSPOSE_BYTES", 0)
    assert not plan((2, 64, 9, 16), "nchw", "nhwc").nt
    w0 = plan((1, 512, 7, 9), "nchw", "nhwc")
    # one image of 512 rows: two 256-row groups, narrowed to 8 jobs with 32-byte vectors
    assert not w0.nt and w0.tile.M * w0.tile.R == _by_width((plan_mod.WIDE_GROUP_ROWS, 64), w0)


def test_split_threshold_is_at_least_the_nt_threshold():
    dims = (2, 40, 9, 7)
    ir = lj.compiler.lower_and_plan(M(dims, "f32", "nhwc"), M(dims, "f32", "nChw16c"), None)[1]
    t = ir.tile
    assert plan_mod.nt_split_min_bytes(t) >= plan_mod.nt_min_bytes(t)
    assert plan_mod.nt_split_min_bytes(t) >= plan_mod.llc_bytes()


WIDE_CASES = [  # dims, src tag, dst tag, dst dtype
    ((2, 512, 7, 9), "nchw", "nhwc", "f32"),     # 2 KB rows: 256-row groups (4 jobs)
    ((2, 300, 5, 7), "nchw", "nhwc", "f32"),     # tail group of 44 rows, tail tile of 12
    ((1, 280, 6, 6), "nchw", "nhwc", "bf16"),    # conversion, rows 560 B apart: not wide
    ((2, 400, 3, 11), "nchw", "nhwc", "s8"),
    ((1, 600, 4, 5), "nchw", "nhwc", "bf16"),    # rows 1.2 KB apart, 2-byte: one tile of rows
    ((3, 17, 20, 20), "nhwc", "nchw", "f32"),    # rows 1.6 KB apart, 400 rows in groups
    ((1, 33, 300), "abc", "acb", "f32"),
]


@pytest.mark.parametrize("dims,stag,dtag,ddt", WIDE_CASES)
def test_wide_groups_are_exact(dims, stag, dtag, ddt):
    k = lj.compile_reorder(M(dims, "f32", stag), M(dims, ddt, dtag))
    p = k.plan
    t = p.tile
    row_bytes = p.ir.nodes[t.b].strides[0] * k.dst_md.dtype.size
    wide = row_bytes >= plan_mod.WIDE_GROUP_STRIDE_BYTES and not p.nt and k.dst_md.dtype.size >= 4
    a = p.ir.nodes[t.a]
    if wide:
        assert t.M * t.R >= min(plan_mod.WIDE_GROUP_ROWS, a.extent), p.describe()
    assert any(n.startswith("plain stores into rows") for n in p.notes) == wide, p.describe()
    if wide and a.extent > 4 * t.R:
        assert "for a" in k.source  # the group's tiles are a loop, not unrolled
    assert ref.kernel_matches_reference(k, seed=len(dims))


def test_wide_groups_through_an_epilogue():
    """Wide macro tiles also carry the buffered epilogue path (scales, a negative-slope relu)."""
    dims = (2, 300, 5, 7)
    s, d = M(dims, "f32", "nchw"), M(dims, "f32", "nhwc")
    k = lj.compile_reorder(s, d, scales={"src": 0}, post_ops=[("eltwise", "relu", -0.5, 0.0)])
    t = k.plan.tile
    assert t.M * t.R >= plan_mod.WIDE_GROUP_ROWS and "post=" not in k.source, k.plan.describe()
    rng = np.random.default_rng(5)
    x = rng.standard_normal(s.get_size() // 4).astype(np.float32)
    y = k(x, scales={"src": np.array([0.5], np.float32)})
    base = ref.reorder(x, s, d, np.zeros(d.get_size() // 4, np.float32)) * np.float32(0.5)
    want = np.where(base > 0, base, base * np.float32(-0.5)).astype(np.float32)
    np.testing.assert_array_equal(y, want)


def test_wide_groups_leave_jobs_for_two_threads():
    """One image of 256 channels is one 256-row group: one job, so at 2 threads one thread
    would do everything. With 32-byte vectors the groups narrow to 8 jobs; with 64-byte
    ones (not measured narrower) to 2. Four jobs or more keep 256-row groups."""
    def plan(dims, vbytes):
        ir = lj.compiler.lower_and_plan(M(dims, "f32", "nchw"), M(dims, "f32", "nhwc"), None)[0]
        return plan_mod.make_plan(ir, vbytes=vbytes)

    for vbytes, jobs in ((32, 8), (64, 2)):
        p = plan((1, 256, 12, 12), vbytes)  # 295 KB moved: parallel, plain stores
        assert not p.nt and p.jobs == jobs and p.tile.M * p.tile.R == 256 // jobs, p.describe()
        p = plan((1, 1024, 12, 12), vbytes)  # four 256-row groups: they stay
        assert p.jobs == 4 and p.tile.M * p.tile.R == plan_mod.WIDE_GROUP_ROWS, p.describe()
    p = plan((1, 256, 8, 8), 32)  # 131 KB: one serial job, the groups stay
    assert p.serial and p.tile.M * p.tile.R == plan_mod.WIDE_GROUP_ROWS, p.describe()
    k = lj.compile_reorder(M((1, 256, 12, 12), "f32", "nchw"), M((1, 256, 12, 12), "f32", "nhwc"))
    assert k.plan.jobs >= 2 and ref.kernel_matches_reference(k), k.plan.describe()


def _by_width(m, plan):
    """An expected value that depends on the vector width: ``m`` or ``(with 64-byte vectors,
    with 32-byte vectors)``."""
    if isinstance(m, tuple):
        return m[0] if plan.vector_bytes >= 64 else m[1]
    return m


@pytest.mark.parametrize("dims, stag, dtag, sdt, ddt, m", [
    ((2, 70, 5, 9), "nchw", "nhwc", "f32", "bf16", 1),   # 32-row tiles: 32 read streams, one
    ((2, 20, 5, 9), "nchw", "nhwc", "f32", "bf16", 1),   # A shorter than a tile: one
    ((2, 70, 5, 9), "nchw", "nhwc", "f32", "f32", 2),    # 16-row tiles: two from READ_STREAMS
    # 64x8 tiles read 32 B of a line: 8 KB steps with 64-byte vectors; with 32-byte ones
    # every tile reads half lines and keeps READ_STREAMS
    ((2, 70, 5, 9), "nchw", "nhwc", "f32", "s8", (2, 1)),
])
def test_macro_tiles_read_about_32_rows(dims, stag, dtag, sdt, ddt, m):
    k = lj.compile_reorder(M(dims, sdt, stag), M(dims, ddt, dtag))
    t = k.plan.tile
    assert t.kind == "transpose" and t.M == _by_width(m, k.plan), k.plan.describe()
    assert ref.kernel_matches_reference(k)


@pytest.mark.parametrize("dims, applies", [
    ((2, 64, 32, 40), True),    # rows 5 KB apart into rows of 256 B: 16 rows, a quarter of each
    ((2, 48, 32, 40), True),    # 192 B: the last tile holds 16 of 48 rows
    ((2, 128, 32, 40), False),  # 512 B: READ_STREAMS rows
    ((2, 384, 32, 40), False),  # 1.5 KB: a multiple of ODD_ROW_PERIOD
    ((2, 96, 32, 40), True),    # 384 B: not a multiple of 512 B (ODD_ROW_PERIOD)
    ((2, 160, 32, 40), True),   # 640 B
    ((2, 64, 8, 40), False),    # source rows 1280 B apart: READ_STREAMS rows (and more)
])
def test_far_rows_into_short_rows_read_sixteen_at_a_time(monkeypatch, dims, applies):
    """An NT transpose whose source rows are a page or more apart (one stream each) reads
    SHORT_ROW_STREAMS rows side by side into destination rows of at most 256 B or of a
    length that is not a multiple of ODD_ROW_PERIOD, where it would read 32; other plans
    are the same with the rule off. Exact at 1 and 2 threads, aligned and misaligned
    destinations."""
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "NT_MIN_TRANSPOSE_BYTES", 0)
    monkeypatch.setattr(plan_mod, "NT_TUNE", False)
    monkeypatch.setattr(plan_mod, "L2_SET_PERIOD", 1 << 30)  # no L2-aliased rows here
    src, dst = M(dims, "f32", "nchw"), M(dims, "f32", "nhwc")
    k = lj.compiler.build(src, dst)
    p = k.plan
    assert p.nt and p.tile is not None and p.tile.kind == "transpose", p.describe()
    monkeypatch.setattr(plan_mod, "SHORT_ROW_STREAMS", 0)
    off = lj.compiler.lower_and_plan(src, dst, None)[1]
    if applies:
        assert (p.tile.R, p.tile.M, off.tile.M) == (16, 1, 2), p.describe()
    else:
        assert p.tile == off.tile and p.tile.M >= 2, p.describe()
    if dims[1] * 4 > plan_mod.SHORT_ROW_MAX_BYTES:  # the odd-length half of the rule alone
        monkeypatch.setattr(plan_mod, "SHORT_ROW_STREAMS", 16)
        monkeypatch.setattr(plan_mod, "ODD_ROW_PERIOD", 0)
        assert lj.compiler.lower_and_plan(src, dst, None)[1].tile == off.tile
    _exact_into_guarded(k, sum(dims))


@pytest.mark.parametrize("dims, stag, dtag, dt, m", [
    # (with 64-byte vectors, with 32-byte ones: every tile reads half lines, READ_STREAMS rows;
    # wide steps measured 1.1-2x slower on Zen 3)
    ((2, 256, 20, 20), "nhwc", "nchw", "bf16", (8, 1)),  # 32x16 tiles read 32 B of each row: 8 KB a step
    ((2, 256, 20, 20), "nchw", "nhwc", "s8", (4, 1)),    # 64x16 tiles: 8 wanted, C=256 has 4
    ((2, 600, 9, 9), "nchw", "nhwc", "s8", (8, 1)),      # C=600: 8 of them (9.4 fit)
    ((2, 256, 12, 12), "nhwc", "nchw", "f32", 2),        # 16x16 tiles read whole lines: two
    ((2, 20, 15, 15), "nhwc", "nchw", "bf16", 1),        # C=20: B shorter than a line, no change
])
def test_tiles_reading_part_of_each_line_take_more_rows(dims, stag, dtag, dt, m):
    k = lj.compile_reorder(M(dims, dt, stag), M(dims, dt, dtag))
    t = k.plan.tile
    assert t.kind == "transpose" and t.M == _by_width(m, k.plan), k.plan.describe()
    assert ref.kernel_matches_reference(k)


@pytest.mark.parametrize("dims, stag, dtag, dt, R", [
    ((1100, 70), "ab", "ba", "s8", 64),                     # rows 1100 B apart: whole lines
    ((2, 100, 5, 9), "nchw", "nhwc", "u8", 64),             # rows 100 B apart: whole lines too
    ((3, 1030, 3, 5), "nchw", "nhwc", "s8", 64),            # C=1030: far apart, with a tail
    ((70, 4096), "ab", "ba", "u8", 64),                     # source rows 4 KB apart: 2 KB tiles
])
def test_one_byte_tiles_take_a_whole_line_into_far_rows(dims, stag, dtag, dt, R):
    k = lj.compile_reorder(M(dims, dt, stag), M(dims, dt, dtag))
    t = k.plan.tile
    assert t.kind == "transpose" and t.R == R, k.plan.describe()
    assert t.R * t.V <= plan_mod.MAX_TILE_SRC_BYTES
    # the shuffle network fits in half the register file (no spills), unless source rows
    # alias in L1 (a multiple of 4 KB apart): those tiles read half lines, not quarters
    net = plan_mod.MAX_TILE_NET_REGS * k.plan.vector_bytes
    aliased = dims[-1] % 4096 == 0
    if aliased:
        assert t.R * t.V == min(2 * net, plan_mod.MAX_TILE_SRC_BYTES), k.plan.describe()
    else:
        assert t.R * t.V <= net, k.plan.describe()
    for threads in ref.at_thread_counts((1, 2)):
        assert ref.kernel_matches_reference(k, seed=threads)


@pytest.mark.parametrize("dims, stag, dtag, sdt, ddt, half", [
    ((2, 160, 8, 8), "nhwc", "nchw", "f32", "f32", True),    # rows of 640 B follow each other
    ((2, 100, 8, 8), "nhwc", "nchw", "f32", "bf16", True),   # conversion, a tail of 4 columns
    ((2, 150, 8, 8), "nhwc", "nchw", "f32", "bf16", False),  # narrowing rows of 600 B: full lines
    ((2, 48, 8, 8), "nhwc", "nchw", "f32", "f32", False),    # rows of 192 B: full lines
    ((1, 24, 40, 40), "nchw", "nhwc", "f32", "f32", False),  # rows of 6.4 KB: full lines
])
def test_tiles_read_half_lines_of_rows_that_follow_each_other(monkeypatch, dims, stag, dtag, sdt, ddt,
                                                              half):
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    k = lj.compile_reorder(M(dims, sdt, stag), M(dims, ddt, dtag))
    t = k.plan.tile
    assert k.plan.nt and t.kind == "transpose", k.plan.describe()
    noted = any(n.startswith("source rows follow one another") for n in k.plan.notes)
    if k.plan.vector_bytes < 64:  # 8-float tiles read half lines of every row already
        half = False
    assert noted == half and t.V == (8 if half else k.plan.vector_bytes // 4), k.plan.describe()
    if half:  # 8 KB of source per step along B (16 tiles of 16x8 f32), or as many as A has
        step = plan_mod.PARTIAL_LINE_STEP_BYTES // (t.R * t.V * 4)
        assert t.M == min(-(-k.plan.nodes[t.a].extent // t.R), step), k.plan.describe()
    for threads in ref.at_thread_counts((1, 2)):
        assert ref.kernel_matches_reference(k, seed=threads)


@pytest.mark.parametrize("dims, stag, dtag, sdt, ddt, m", [
    # m: tiles a group, or (with 64-byte vectors, with 32-byte ones: 4-byte tiles that read
    # half lines take 64-row groups, PREFETCH_GROUP_ROWS)
    ((2, 192, 8, 8), "nchw", "nhwc", "f32", "f32", 4),     # rows of 256 B: 16x8 tiles, 64 rows a group
    ((2, 208, 7, 7), "nchw", "nhwc", "f32", "f32", (2, 4)),  # 49 columns (a tail of 1), A has a tail
    ((2, 224, 7, 7), "nchw", "nhwc", "f32", "bf16", (1, 2)),  # conversion: 32-row tiles, one a group
    ((2, 256, 16, 16), "nhwc", "nchw", "s8", "s8", (2, 2)),  # 8-bit tiles keep their steps (not 1;
    # with 64-byte vectors 32 KB groups of 1-byte rows, PREFETCH_BYTE_GROUP_BLOCK);
    # 32-byte vectors: two 64x8 tiles (two lines of each destination row per visit, 32 KB)
    ((2, 128, 16, 16), "nhwc", "nchw", "bf16", "bf16", (8, 2)),  # 32x8 bf16 tiles: two too
    ((2, 512, 16, 16), "nhwc", "nchw", "s8", "s8", (0, 1)),  # two would read 64 KB: one;
    # 64-byte vectors: 64x16 tiles, 4 a group, whose columns are cut in two (split_columns)
    ((3008, 48), "ab", "ba", "f32", "f32", (2, 4)),        # no outer loop: groups are the jobs
    ((2, 512, 30, 30), "nchw", "nhwc", "bf16", "bf16", (2, 1)),  # 128 KB blocks at most: 2 of 8 tiles
    ((1, 128, 48, 48), "nchw", "nhwc", "s8", "s8", 0),     # one tile's rows span 144 KB: left out
    ((2, 64, 8, 8), "nChw16c", "nchw", "f32", "f32", 0),   # rows one tile wide: read in order
    # tiles writing whole blocks: rows under 2 KB (PREFETCH_MAX_BLOCK_ROW)
    ((2, 64, 14, 14), "nchw", "nChw16c", "f32", "f32", 1),
    ((2, 48, 299), "ncw", "nCw16c", "f32", "f32", 1),         # rows of 1196 B, off the lines
    ((2, 64, 28, 28), "nchw", "nChw16c", "f32", "f32", 0),  # rows of 3136 B: left out
    ((1, 24, 40, 40), "nchw", "nhwc", "f32", "f32", 0),    # rows of 6.4 KB stream on their own
    # rows of two 16-float tile steps: read in order; four 8-float steps: prefetched (Zen 3,
    # 1024x32x28x28: 1.01x copy without, 0.78x with)
    ((2, 32, 8, 16), "nhwc", "nchw", "f32", "f32", (0, 4)),
    ((2, 40, 8, 16), "nhwc", "nchw", "f32", "f32", (2, 4)),  # three steps (16, 16, 8): prefetched
    # runs packed into lines ("lines"): each call prefetches its share of the next group
    ((2, 64, 8, 8), "nhwc", "nChw8c", "f32", "f32", 8),     # 2 runs of 8 a call, 16 pixels a group
    ((2, 40, 8, 7), "nhwc", "nChw8c", "f32", "f32", 8),     # C=40: 5 blocks, 56 pixels
    ((2, 64, 8, 8), "nhwc", "nChw16c", "f32", "bf16", 8),   # conversion: 2 runs of 16 a line
    ((2, 64, 8, 8), "nhwc", "nChw16c", "f32", "f32", 0),    # one run a line: rows read in order
    ((2, 36, 8, 8), "nhwc", "nChw16c", "f32", "s8", 4),     # pixels of 36 read as 48 (padding)
    ((2, 20, 8, 9), "nhwc", "nChw16c", "f32", "bf16", 8),   # 20 as 32, 72 pixels (a tail)
    ((2, 64, 8, 8), "nChw16c", "nChw8c", "f32", "f32", 0),  # rows of one line: read in order
    # ... but narrowing float conversions read most of their traffic: prefetched
    ((2, 64, 8, 8), "nChw16c", "nChw8c", "f32", "s8", 2),
    ((2, 64, 8, 8), "nChw16c", "nChw8c", "f32", "bf16", 4),
    ((2, 48, 8, 8), "nChw16c", "nChw4c", "f32", "u8", 1),
    ((2, 64, 8, 8), "nChw16c", "nChw8c", "s32", "s8", 0),   # integers narrowing: in order
])
def test_tiles_prefetch_the_next_block_of_short_rows(monkeypatch, dims, stag, dtag, sdt, ddt, m):
    """Short source rows that follow one another: each micro-kernel call prefetches its share
    of the next group's block (``Plan.prefetch``), groups of at most 64 rows for 4-byte
    sources and of at most 128 KB; exact at 1 and 2 threads, tails in both directions."""
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    k = lj.compile_reorder(M(dims, sdt, stag), M(dims, ddt, dtag))
    p, t = k.plan, k.plan.tile
    m = _by_width(m, p)
    lines = "C" in dtag and stag not in ("nchw", "ncw")
    assert p.nt and t.kind == ("lines" if lines else "transpose"), p.describe()
    assert p.prefetch == (m != 0) and ("= prefetch(" in k.source) == (m != 0), p.describe()
    if m:
        assert any(n.startswith("prefetch:") for n in p.notes), p.describe()
        assert t.M == m, p.describe()
        # the block: the group's rows x the row's bytes, from the descriptors' shapes
        row = {"nhwc": dims[1], "ab": dims[1], "nchw": dims[-1] * dims[-2], "ncw": dims[-1]}.get(stag, 16)
        row_bytes = row * {"f32": 4, "bf16": 2, "s8": 1}[sdt]
        if not lines:
            assert p.prefetch_block == m * t.R * row_bytes, p.describe()
        # to L2: blocks larger than L1's half, or tile rows off the lines (they straddle steps)
        l2 = p.prefetch_block > plan_mod.PREFETCH_L1_MAX_BLOCK or (not lines and row_bytes % 64 != 0)
        assert p.prefetch_l2 == l2 and ("l2_only=True" in k.source) == l2, p.describe()
    for threads in ref.at_thread_counts((1, 2)):
        assert ref.kernel_matches_reference(k, seed=threads)


@pytest.mark.parametrize("dims, sdt, ddt, whole", [
    ((8, 256, 41, 53), "bf16", "bf16", True),   # 32-row tiles write 1/8 of each 512 B pixel
    ((8, 512, 61, 70), "s8", "s8", True),       # 64-row tiles, 1/8 of each pixel, rows 4270 B
    ((8, 512, 40, 61), "s8", "s8", True),       # rows of 2440 B: 64 of them too large to prefetch
    ((8, 128, 41, 53), "bf16", "bf16", False),  # a quarter of each pixel per step already
    ((8, 256, 41, 53), "f32", "bf16", False),   # conversion: source and destination streams differ
    ((8, 512, 41, 53), "f32", "f32", False),    # 16-row tiles, two a step
    ((8, 256, 32, 64), "bf16", "bf16", False),  # source rows 4 KB apart (one L1 set)
    ((4, 256, 41, 53), "bf16", "bf16", False),  # too few outer jobs
    ((8, 512, 48, 64), "s8", "s8", False),      # rows of 3 KB: 8 of the 512 in each L2 set
])
def test_narrow_tiles_take_whole_destination_runs(monkeypatch, dims, sdt, ddt, whole):
    """16- and 8-bit transposes into long destination runs take every row of A per macro
    tile (writing the destination in order), with 32-byte vectors only and where at most
    half an L2 set's ways hold those rows' lines (planned for Zen 3's 8-way L2 with a 64 KiB
    set period); exact at 1 and 2 threads where the host plans with 32-byte vectors."""
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "L2_SET_PERIOD", 64 * 1024)
    monkeypatch.setattr(plan_mod, "L2_WAYS", 8)
    src, dst = M(dims, sdt, "nchw"), M(dims, ddt, "nhwc")
    ir = lj.compiler.lower_and_plan(src, dst, None)[0]

    def without_rule(vbytes):
        with monkeypatch.context() as m:
            m.setattr(plan_mod, "WHOLE_RUNS", False)
            return plan_mod.make_plan(ir, vbytes=vbytes)

    def noted(p):
        return any(n.startswith("narrow tiles into long destination runs") for n in p.notes)

    for vbytes in (32, 64):
        p = plan_mod.make_plan(ir, vbytes=vbytes)
        off = without_rule(vbytes)
        t = p.tile
        assert p.nt and t.kind == "transpose" and not p.prefetch and not p.shifted, p.describe()
        on = whole and vbytes == 32
        assert noted(p) == on, p.describe()
        if on:  # one macro tile covers A: the jobs are the outer loops alone
            assert t.M * t.R >= dims[1] > off.tile.M * off.tile.R * 4 and p.jobs == dims[0], p.describe()
            assert (t.R, t.V) == (off.tile.R, off.tile.V), p.describe()
        else:
            assert t == off.tile, p.describe()
    # a source span above WHOLE_RUN_MAX_SPAN: rows far apart, the rule stays off
    ssz = {"f32": 4, "bf16": 2, "s8": 1}[sdt]
    with monkeypatch.context() as m:
        m.setattr(plan_mod, "WHOLE_RUN_MAX_SPAN", dims[1] * dims[2] * dims[3] * ssz - 1)
        assert not noted(plan_mod.make_plan(ir, vbytes=32))
    if not whole and sdt == "s8" and dims[1] == 512:  # only the L2 rule keeps it off
        with monkeypatch.context() as m:
            m.setattr(plan_mod, "L2_WAYS", 16)
            assert noted(plan_mod.make_plan(ir, vbytes=32))
    k = lj.compile_reorder(src, dst)
    assert noted(k.plan) == (whole and k.plan.vector_bytes == 32), k.plan.describe()
    if noted(k.plan):
        for threads in ref.at_thread_counts((1, 2)):
            assert ref.kernel_matches_reference(k, seed=threads)


def test_rows_per_l2_set(monkeypatch):
    """Rows whose starts repeat their L2 place every few rows crowd its sets; rows off a
    line's multiple spread over every set."""
    monkeypatch.setattr(plan_mod, "L2_SET_PERIOD", 64 * 1024)
    f = plan_mod.rows_per_l2_set
    assert f(5120, 1024) == 16      # a place every 1 KB: 64 places
    assert f(3072, 512) == 8
    assert f(4096, 1024) == 64      # 16 places
    assert f(64 * 1024, 3) == 3     # one place
    assert f(3136, 1024) == 1       # 1024 places (64-byte steps)
    assert f(100, 1024) == 1        # more places than sets: one row per set
    assert f(1280, 1024) == 4
    assert f(-5120, 1024) == 16     # rows running backwards crowd the same sets
    assert plan_mod.l2_set_period() % 64 == 0 and plan_mod.l2_ways() >= 1  # sysfs or defaults


@pytest.mark.parametrize("dims, dt, V32", [
    ((2, 3, 9, 23), "f32", 16),    # 3x8 tiles would write 96 B: 3x16 write three whole lines
    ((2, 5, 9, 23), "f32", 16),    # 5 x 16 x 4 B = five lines
    ((2, 3, 9, 23), "bf16", 32),   # 3 x 32 x 2 B
    ((2, 3, 11, 23), "s8", 64),    # 3 x 64 x 1 B
    ((2, 4, 9, 23), "f32", 8),     # 4 x 8 x 4 B = two lines already
])
def test_block_tiles_take_whole_lines(monkeypatch, dims, dt, V32):
    """Tiles that write whole blocks (nchw -> nhwc, C=3) take enough columns that each call
    writes whole lines, which makes them NT-capable; exact with tails, at 1 and 2 threads."""
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    src, dst = M(dims, dt, "nchw"), M(dims, dt, "nhwc")
    ir = lj.compiler.lower_and_plan(src, dst, None)[0]
    esz = {"f32": 4, "bf16": 2, "s8": 1}[dt]
    for vbytes, V in ((32, V32), (64, 64 // esz)):
        p = plan_mod.make_plan(ir, vbytes=vbytes)
        t = p.tile
        assert t.kind == "transpose" and t.rows_contiguous and t.R == dims[1], p.describe()
        assert t.V == V and (t.R * t.V * esz) % 64 == 0 and p.nt, p.describe()
    with monkeypatch.context() as m:
        m.setattr(plan_mod, "BLOCK_TILE_LINES", False)
        m.setattr(plan_mod, "JOB_STAGE_SHIFT", False)  # (which would stage the images' pieces)
        assert not plan_mod.make_plan(ir, vbytes=32).nt or V32 == 8
    k = lj.compile_reorder(src, dst)
    assert k.plan.nt and (k.plan.tile.R * k.plan.tile.V * esz) % 64 == 0, k.plan.describe()
    for threads in ref.at_thread_counts((1, 2)):
        assert ref.kernel_matches_reference(k, seed=threads)


@pytest.mark.parametrize("dims, stag, dtag", [
    ((32, 48, 3, 3), "OIhw16o16i", "oihw"),      # 3x3 kernels of 16 outputs: 9x16 tiles
    ((2, 32, 48, 3, 3), "gOIhw16o16i", "goihw"),
    ((40, 48, 3, 3), "OIhw16o16i", "oihw"),       # O=40: the last block's padding skipped
    ((3, 48, 3, 3), "nChw16c", "nchw"),
])
def test_block_tiles_widen_past_the_network_cap_for_nt_lines(monkeypatch, dims, stag, dtag):
    """9-row whole-block tiles (3x3 kernels out of 16-blocks) take 16 columns, past the
    network's register cap, when the stores will be NT: each call then writes 9 whole
    lines; in cache they keep 8. Exact with tails, at 1 and 2 threads."""
    src, dst = M(dims, "f32", stag), M(dims, "f32", dtag)
    ir = lj.compiler.lower_and_plan(src, dst, None)[0]
    t = plan_mod.make_plan(ir, vbytes=32).tile
    assert t.rows_contiguous and (t.R, t.V) == (9, 8), t
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "NT_MIN_TRANSPOSE_BYTES", 0)
    monkeypatch.setattr(plan_mod, "NT_TUNE", False)
    p = plan_mod.make_plan(ir, vbytes=32)
    assert p.nt and p.tile.rows_contiguous and (p.tile.R, p.tile.V) == (9, 16), p.describe()
    with monkeypatch.context() as m:
        m.setattr(plan_mod, "BLOCK_TILE_LINES_NET", 1)
        assert plan_mod.make_plan(ir, vbytes=32).tile.V == 8
    k = lj.compiler.build(src, dst)
    if k.plan.vector_bytes == 32:
        assert (k.plan.tile.R, k.plan.tile.V) == (9, 16) and k.plan.nt, k.plan.describe()
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(src.get_size() // 4, "f32", rng)
    want = ref.reorder(x, src, dst, np.zeros(dst.get_size() // 4, np.float32))
    ref.check_guarded_runs(k, x, want.view(np.uint8), offsets=(0, 4))


def test_prefetch_only_with_nt_stores():
    """Tensors small enough for plain stores (they stay in cache) do not prefetch."""
    dims = (2, 240, 8, 8)
    k = lj.compile_reorder(M(dims, "f32", "nchw"), M(dims, "f32", "nhwc"))
    assert not k.plan.nt and not k.plan.prefetch and "prefetch" not in k.source, k.plan.describe()


@pytest.mark.parametrize("dims, stag, dtag, sdt, ddt, phases", [
    ((2, 40, 5, 8), "nChw8c", "nhwc", "f32", "f32", 2),     # pixels of 40 floats: every other one off
    ((1, 24, 3, 23), "nChw8c", "nhwc", "f32", "f32", 2),    # 3 runs a pixel, 69 pixels (a tail)
    ((1, 52, 4, 9), "nChw4c", "nhwc", "f32", "f32", 4),     # 13 runs of 4 a pixel: 4 phases
    ((1, 40, 6, 7), "nChw8c", "nhwc", "f32", "bf16", 4),    # 4 runs of 8 bf16 a line
    ((1, 72, 6, 6), "nChw8c", "nhwc", "s8", "s8", 8),       # 8 runs of 8 bytes a line
    ((2, 48, 5, 5), "nChw8c", "nhwc", "f32", "f32", 1),     # 48 floats: every pixel on a line
    ((1, 36, 4, 8), "nChw8c", "nhwc", "f32", "f32", 0),     # pixels 4 floats off: a lines panel
    # columns shorter than the rows (2 planes of 35 pixels per source line): every other plane off
    ((2, 32, 5, 7), "nChw16c", "nChw8c", "f32", "f32", 2),
    ((1, 32, 13), "nCw16c", "nCw8c", "f32", "f32", 2),
    ((1, 32, 3, 5, 3), "nCdhw16c", "nCdhw8c", "f32", "f32", 2),
    ((2, 16, 5, 7), "nhwc", "nChw8c", "f32", "f32", 2),
    ((2, 64, 3, 7), "nhwc", "nChw8c", "f32", "bf16", 4),
    ((2, 64, 1, 29), "nhwc", "nChw8c", "f32", "s8", 8),
    # and jobs (pairs of planes) starting half a line in, every other one: NT where a job starts a line
    ((2, 64, 3, 7), "nChw16c", "nChw8c", "bf16", "bf16", 4),
])
def test_lines_follow_destination_columns_off_the_lines(monkeypatch, narrow_elements, dims, stag, dtag, sdt, ddt,
                                                       phases):
    """Kind "lines" into columns that start inside a line (nChw8c -> nhwc, C=40: pixels of
    160 B): the calls are cut where each column's lines begin, so whole lines are NT
    stores (``Plan.line_phases``); exact at every destination offset, 1 and 2 threads,
    nothing written outside."""
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "JOB_ALIGN_PHASES_MIN_BYTES", 0)  # (columns of 336 B here)
    monkeypatch.setattr(plan_mod, "LINES_PANEL_OVER_PHASES_BYTES", 0)  # (short columns: panels)
    monkeypatch.setattr(plan_mod, "SPLIT_LINE_COLUMNS", False)  # (one image: test_split_columns.py)
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = lj.compiler.build(s, d)
    p = k.plan
    assert p.tile.kind == "lines", p.describe()
    assert p.line_phases == phases and p.nt, p.describe()
    assert (p.lines_panel > 0) == (phases == 0), p.describe()  # else test_lines_panels
    assert ("different offsets within a line" in p.describe()) == (phases > 1)
    assert p.job_align == (sdt == "bf16"), p.describe()
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, sdt, rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, sorted({0, d.dtype.size, 32}))


@pytest.mark.parametrize("dims, stag, dtag, sdt, ddt, phases", [
    ((2, 56, 3, 5, 3), "nCdhw16c", "nCdhw8c", "f32", "f32", 2),  # last 16c block: one 8c half
    ((2, 40, 5, 7), "nChw16c", "nChw8c", "f32", "f32", 2),
    ((2, 200, 3, 5), "nhwc", "nChw16c", "f32", "bf16", 2),      # 13 blocks, the last one half
    ((2, 24, 13), "nwc", "nCw16c", "f32", "u8", 4),
    ((2, 56, 5, 7), "nChw16c", "nChw8c", "s8", "f32", 2),
    ((2, 20, 5, 7), "nChw16c", "nChw4c", "bf16", "f32", 4),
])
def test_line_phases_on_padded_dims(monkeypatch, dims, stag, dtag, sdt, ddt, phases):
    """Columns off the lines where the channel dim is padded (``LINE_PHASES_PADDED``): the
    padded dim's segments cut the column runs, each call's alignment still known at
    generation; exact at every destination offset, 1 and 2 threads, nothing written outside,
    padding zero. Without the rule: plain stores."""
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "JOB_ALIGN_PHASES_MIN_BYTES", 0)
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    assert any(r.guarded for r in lower_and_plan(s, d, None)[0].dims)
    monkeypatch.setattr(plan_mod, "LINE_PHASES_PADDED", False)
    assert lower_and_plan(s, d, None)[1].line_phases == 1
    monkeypatch.setattr(plan_mod, "LINE_PHASES_PADDED", True)
    k = lj.compiler.build(s, d)
    p = k.plan
    assert p.tile.kind == "lines" and p.line_phases == phases and p.nt, p.describe()
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, sdt, rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, sorted({0, d.dtype.size, 32}))


def test_line_phases_on_padded_dims_at_real_size():
    """f32 `nCdhw16c -> nCdhw8c` C = 56 with odd 7x299x7 planes: phased NT calls (it was
    the one listed pair slower than oneDNN, with plain stores)."""
    dims = (16, 56, 7, 299, 7)
    p = lower_and_plan(M(dims, "f32", "nCdhw16c"), M(dims, "f32", "nCdhw8c"), None)[1]
    assert p.nt and p.line_phases == 2, p.describe()


@pytest.mark.parametrize("dims, stag, dtag, sdt, ddt, shifts", [
    ((3, 56, 5, 5), "nChw16c", "nChw8c", "s8", "f32", (0, 8)),    # images 1400 floats: every other off
    ((3, 56, 13), "nCw8c", "nwc", "f32", "f32", (0, 8)),
    ((3, 200, 1, 29), "nhwc", "nChw8c", "bf16", "f32", (0, 8)),
    ((3, 72, 1, 29), "nhwc", "nChw8c", "f32", "bf16", (0, 8, 16, 24)),
    ((3, 20, 7, 3), "nChw16c", "nChw4c", "f32", "f32", (0, 4, 8, 12)),
    ((3, 72, 11), "nwc", "nCw16c", "f32", "u8", (0, 16, 32, 48)),
])
def test_jobs_off_the_lines_shift_their_phases(monkeypatch, dims, stag, dtag, sdt, ddt, shifts):
    """Phased "lines" jobs that start off a line (``Plan.job_shifts``): each possible start
    gets its own copy of the job with the columns' phases shifted, so every job writes NT
    lines; exact at every destination offset, 1 and 2 threads, nothing written outside.
    ``JOB_SHIFTS_MAX = 1``: aligned jobs only (the rest plain)."""
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "JOB_ALIGN_PHASES_MIN_BYTES", 0)
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    monkeypatch.setattr(plan_mod, "JOB_SHIFTS_MAX", 1)
    assert lower_and_plan(s, d, None)[1].job_shifts == (0,)
    monkeypatch.setattr(plan_mod, "JOB_SHIFTS_MAX", 4)
    k = lj.compiler.build(s, d)
    p = k.plan
    assert p.job_align and p.line_phases > 1 and p.job_shifts == shifts, p.describe()
    dsz = d.dtype.size
    for sh in shifts:
        assert f"& 63) == {sh * dsz}:" in k.source
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, sdt, rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, sorted({0, dsz, 32}))


@pytest.mark.parametrize("dims, stag, dtag, sdt, ddt, shifts", [
    ((4096, 56, 5, 55), "nChw16c", "nChw8c", "s8", "f32", (0, 8)),
    ((4096, 56, 299), "nCw8c", "nwc", "f32", "f32", (0, 8)),
    ((4096, 200, 3, 1, 17), "nCdhw8c", "ndhwc", "f32", "f32", (0, 8)),
])
def test_job_shifts_at_real_sizes(dims, stag, dtag, sdt, ddt, shifts):
    p = lower_and_plan(M(dims, sdt, stag), M(dims, ddt, dtag), None)[1]
    assert p.nt and p.job_align and p.job_shifts == shifts, p.describe()


@pytest.mark.parametrize("dims, stag, dtag, sdt, ddt", [
    ((128, 80, 56, 56), "nChw8c", "nhwc", "bf16", "bf16"),   # pixels of 160 B: 2 phases
    ((4096, 40, 299), "nCw8c", "nwc", "bf16", "bf16"),       # 80 B: 4 phases
    ((128, 24, 3, 299, 56), "nCdhw8c", "ndhwc", "f32", "f32"),  # 96 B
])
def test_short_columns_take_a_panel_over_phases(dims, stag, dtag, sdt, ddt):
    """Columns shorter than ``LINES_PANEL_OVER_PHASES_BYTES`` share most of their lines with
    a neighbour: a lines panel, not phased calls (0: phases)."""
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    p = lower_and_plan(s, d, None)[1]
    assert p.nt and p.lines_panel > 0 and p.line_phases == 0, p.describe()
    mp = pytest.MonkeyPatch()
    mp.setattr(plan_mod, "LINES_PANEL_OVER_PHASES_BYTES", 0)
    try:
        p = lower_and_plan(s, d, None)[1]
        assert p.lines_panel == 0 and p.line_phases > 1, p.describe()
    finally:
        mp.undo()


def test_short_column_panel_is_exact(monkeypatch):
    """A panel taken over phases (columns of 80 B, 4 phases) is exact at every offset."""
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    for dims, sdt in (((3, 40, 13), "bf16"), ((3, 24, 2, 1, 11), "f32")):
        stag, dtag = ("nCw8c", "nwc") if len(dims) == 3 else ("nCdhw8c", "ndhwc")
        s, d = M(dims, sdt, stag), M(dims, sdt, dtag)
        k = lj.compiler.build(s, d)
        assert k.plan.lines_panel > 0 and k.plan.line_phases == 0, k.plan.describe()
        rng = np.random.default_rng(sum(dims))
        x = ref.random_raw(s.get_size() // s.dtype.size, sdt, rng)
        expect = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
        ref.check_guarded_runs(k, x, expect, sorted({0, d.dtype.size, 32}))


def test_job_align_phases_want_long_columns():
    """Jobs that start a line only in some cases take phased calls where the columns are
    the pixels, or planes of at least 2 KB; 7x7 planes of bf16 (784 B) take no phased calls
    (they stage jobs of two planes, whole lines: ``JOB_STAGE_GROUP_BYTES``)."""
    def plan(dims, sdt, ddt, stag="nChw16c", dtag="nChw8c"):
        return lower_and_plan(M(dims, sdt, stag), M(dims, ddt, dtag), None)[1]
    p = plan((32, 256, 55, 55), "bf16", "bf16")
    assert p.nt and p.job_align and p.line_phases == 4, p.describe()
    q = plan((256, 2048, 7, 7), "f32", "bf16")
    assert q.line_phases == 1 and not q.job_align and q.job_stage == 2 * 784 and not q.job_shift, q.describe()
    p = plan((64, 56, 299, 13), "f32", "f32", "nChw8c", "nhwc")
    assert p.nt and p.job_align and p.line_phases == 2, p.describe()


@pytest.mark.parametrize("dims, stag, dtag, sdt, ddt, panel", [
    ((2, 60, 5, 8), "nChw16c", "nhwc", "f32", "f32", 16),      # pixels of 240 B; 40 = 2 panels + 8 direct
    ((1, 36, 4, 8), "nChw8c", "nhwc", "f32", "f32", 28),       # 5 runs a pixel, the last one half
    ((2, 60, 6, 8), "nChw16c", "nhwc", "f32", "bf16", 32),     # one panel and 16 columns left
    ((3, 60, 5, 7), "nChw16c", "nhwc", "f32", "f32", 16),      # images of 35 pixels: panels start
    ((2, 60, 6, 7), "nChw16c", "nhwc", "f32", "bf16", 32),     # where a pixel starts a line
    ((1, 20, 16, 13), "nChw16c", "nhwc", "s8", "s8", 192),     # one-byte pixels of 20 B
    ((1, 60, 3, 4, 5), "nCdhw16c", "ndhwc", "f32", "f32", 16),  # 5-D: 60 columns
    # columns that are 16c blocks of 2-byte or 1-byte elements, half or a quarter of a line
    ((2, 32, 7, 7), "nChw8c", "nChw16c", "bf16", "bf16", 48),  # 49 pixels: one panel of 48
    ((2, 32, 8, 9), "nChw8c", "nChw16c", "u8", "u8", 72),
    ((1, 32, 3, 5, 7), "nCdhw8c", "nCdhw16c", "f32", "bf16", 104),
])
def test_lines_panels(monkeypatch, dims, stag, dtag, sdt, ddt, panel):
    """Kind "lines" into contiguous columns whose lines the calls cannot follow
    (nChw16c -> nhwc, C=60: no run starts on a line): columns go to a small stage in
    panels that start on lines, written out as whole NT lines (``Plan.lines_panel``);
    the columns before the first one that starts a line (images of an odd number of
    pixels) and those after the last whole panel are plain stores. Exact at several
    destination offsets (misaligned ones take the plain path), 1 and 2 threads, nothing
    written outside."""
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "nt_split_min_bytes", lambda tile: 0)  # NT at both thread counts
    monkeypatch.setattr(plan_mod, "SPLIT_LINE_COLUMNS", False)  # (one image: test_split_columns.py)
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = lj.compiler.build(s, d)  # not the memory cache (other tests plan these pairs with other thresholds)
    p = k.plan
    assert p.tile.kind == "lines" and p.nt and p.nt_split and not p.nt_tune and p.lines_panel == panel, \
        p.describe()
    assert "go to a small stage" in p.describe() and "obuf" in k.source
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, sdt, rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, sorted({0, d.dtype.size, 32}))
    monkeypatch.setattr(plan_mod, "LINES_PANEL", False)
    assert lj.compiler.build(s, d).plan.lines_panel == 0  # the switch for A/B runs


@pytest.mark.parametrize("parent, offsets", [
    ((3, 60, 8, 8), (1, 0, 0, 0)),   # images 2 and 3 of 3: offset0 = 3840 elements
    ((2, 60, 9, 8), (0, 0, 1, 0)),   # rows 1-8 of 9: offset0 = 480, images 4320 apart
])
def test_lines_panels_into_a_submemory(monkeypatch, parent, offsets):
    """A lines panel into a part of a larger ``nhwc`` tensor: the panels start where the
    column offsets (offset0 included) meet a line; the rest of the parent is untouched."""
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "nt_split_min_bytes", lambda tile: 0)
    dims = (2, 60, 8, 8)
    s = M(dims, "f32", "nChw16c")
    d = M(parent, "f32", "nhwc").submemory_desc(dims, offsets)
    k = lj.compiler.build(s, d)
    assert k.plan.lines_panel == 16 and d.offset0 > 0, k.plan.describe()
    x = ref.random_raw(s.get_size() // 4, "f32", np.random.default_rng(7))
    sentinel = np.full(d.required_bytes(), 0xA5, np.uint8).view(np.float32)
    expect = ref.reorder(x, s, d, sentinel).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, [0, 4, 32])


@pytest.mark.parametrize("dims, stag, dtag, sdt, ddt", [
    ((4, 3, 5, 7), "nchw", "nChw8c", "f32", "f32"),      # images of 35 pixels x 32 B: every other one off
    ((2, 64, 9, 9), "nchw", "nChw8c", "f32", "f32"),     # channel blocks of 81 pixels (jobs over n x C/8)
    ((4, 3, 5, 7), "nchw", "nChw8c", "f32", "bf16"),     # 16 B a pixel: one image in four on a line
])
def test_jobs_check_their_own_alignment(monkeypatch, dims, stag, dtag, sdt, ddt):
    """Destination lines that start on 64-byte boundaries in some jobs only (an outer
    stride that is not a whole number of lines): NT where a job's offset starts a line,
    checked per job at run time (``Plan.job_align``); exact at several destination
    offsets, 1 and 2 threads, nothing written outside. (Groups of jobs that start on lines,
    staged, take these pairs first: test_job_stage.py.)"""
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "JOB_LINE_GROUPS", 0)
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = lj.compile_reorder(s, d)
    p = k.plan
    assert p.nt and p.job_align and p.jobs > 1, p.describe()
    assert "each job checks its offset" in p.describe() and "& 63) == 0:" in k.source
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, sdt, rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, sorted({0, d.dtype.size, 32}))


@pytest.mark.parametrize("dims, stag, dtag, dt, l1", [
    ((40, 1024, 1, 1), "oihw", "OIhw16i16o", "f32", True),   # rows 4 KB apart, O padded to 48
    ((20, 1024), "ab", "ba", "f32", True),                    # a tail of 4 rows
    ((40, 1040, 1, 1), "oihw", "OIhw16i16o", "f32", False),  # rows 4160 B apart: no shared set
    ((40, 2048), "ab", "ba", "bf16", False),                  # 8 bf16 rows fill half a vector
])
def test_rows_sharing_an_l1_set_take_eight_row_tiles(dims, stag, dtag, dt, l1):
    """Plain-store transposes whose source rows are a multiple of 4 KB apart read 8 rows a
    tile and a whole line of each, with vectors shorter than a line; exact at 1 and 2
    threads."""
    src, dst = M(dims, dt, stag), M(dims, dt, dtag)
    ir = lj.compiler.lower_and_plan(src, dst, None)[0]
    for vbytes in (32, 64):
        p = plan_mod.make_plan(ir, vbytes=vbytes)
        t = p.tile
        assert t.kind == "transpose" and not p.nt, p.describe()
        if l1 and vbytes == 32:
            assert (t.R, t.V * 4) == (plan_mod.ALIASED_L1_ROWS, 64), p.describe()
        else:
            assert t.R >= 16, p.describe()
    k = lj.compile_reorder(src, dst)
    for threads in ref.at_thread_counts((1, 2)):
        assert ref.kernel_matches_reference(k, seed=threads)


@pytest.mark.parametrize("dims, stag, dtag, sdt, ddt, stage", [
    ((3, 48, 32, 32), "nChw16c", "nchw", "f32", "f32", 256),   # planes 4 KB apart: 1 KB of each
    ((2, 32, 64, 32), "nChw16c", "nchw", "bf16", "bf16", 512),  # 4 KB apart, 2-byte elements
    ((2, 32, 32, 64), "nChw16c", "nchw", "f32", "bf16", 512),   # converted into the stage
    ((4, 16, 32, 32), "nhwc", "nchw", "f32", "f32", 256),       # C=16: one block, same pattern
    ((3, 48, 32, 32), "nChw8c", "nchw", "f32", "f32", 0),       # blocks of 8: measured no gain
    ((2, 96, 32, 32), "nhwc", "nchw", "f32", "f32", 0),         # B longer than a line: none
    ((3, 48, 30, 30), "nChw16c", "nchw", "f32", "f32", 0),      # planes 3600 B apart: none
    ((3, 48, 16, 32), "nChw16c", "nchw", "f32", "f32", 256),    # 2 KB apart (half a page)
    ((2, 32, 32, 32), "nChw16c", "nchw", "bf16", "bf16", 512),  # ... 2-byte elements
    ((512, 32, 2, 2), "OIhw16o16i", "hwio", "f32", "f32", 0),   # half a page, a line per row
    ((1024, 16, 2, 2), "OIhw16o16i", "hwio", "f32", "f32", 0),  # 4 KB apart, a line per row
    ((1, 32, 64, 5, 7), "goihw", "gOhwi16o", "s8", "f32", 0),   # 4 KB apart, a line per row
    ((4, 1024, 7, 7), "nchw", "nhwc", "f32", "f32", 256),       # near rows (4 KB), 49 of them
    ((4, 2048, 7, 7), "nchw", "nhwc", "bf16", "bf16", 512),     # near rows of 2-byte elements
    ((4, 4096, 3, 7), "nchw", "nhwc", "f32", "f32", 0),         # rows 16 KB apart: none
    ((4, 1024, 8, 8), "nchw", "nhwc", "f32", "f32", 0),         # planes of whole lines: none
    ((4, 1024, 9, 9), "nchw", "nhwc", "f32", "f32", 0),         # 81 KB of rows: none
])
@pytest.mark.parametrize("outer_jobs", [True, False])
def test_rows_4k_apart_go_through_a_row_stage(monkeypatch, dims, stag, dtag, sdt, ddt, stage, outer_jobs):
    """NT transposes into destination rows a multiple of 4 KB apart fill a small stage with
    1 KB of each row and write it out row by row (Plan.row_stage); every byte exact at 1
    and 2 threads, at aligned and misaligned destinations (which take plain stores). Jobs
    over the outer indices, or (too few of them) over chunks of the rows."""
    monkeypatch.setattr(plan_mod, "ROW_STAGE_BYTES", 16 * 1024)  # (off by default)
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "NT_MIN_TRANSPOSE_BYTES", 0)
    monkeypatch.setattr(plan_mod, "NT_TUNE", False)
    monkeypatch.setattr(plan_mod, "MIN_JOBS", 4 if outer_jobs else 64)
    monkeypatch.setattr(plan_mod, "ROW_STAGE_MAX_VECTOR", 128)  # this host's vectors too
    k = lj.compiler.build(M(dims, sdt, stag), M(dims, ddt, dtag))
    p = k.plan
    assert p.nt and p.row_stage == stage, p.describe()
    if dims in ((1024, 16, 2, 2), (1, 32, 64, 5, 7)):  # only the one-line rule keeps it off
        with monkeypatch.context() as m:
            m.setattr(plan_mod, "ROW_STAGE_MIN_ROW_BYTES", 0)
            assert lj.compiler.build(M(dims, sdt, stag), M(dims, ddt, dtag)).plan.row_stage == 16
    assert not stage or p.macro_job != outer_jobs, p.describe()
    if stage and not outer_jobs:
        t = p.tile
        assert p.jobs == plan_mod.outer_count(p.ir, t) * p.nodes[t.a].extent // stage, p.describe()
    assert ("sto = " in k.source) == bool(stage)  # the row stage's first aligned element
    rng = np.random.default_rng(7)
    s, d = k.src_md, k.dst_md
    x = ref.random_raw(s.get_size() // s.dtype.size, sdt, rng)
    want = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage))
    ref.check_guarded_runs(k, x, want.view(np.uint8), offsets=(0, 4))


@pytest.mark.parametrize("outer_jobs", [True, False])
def test_row_stage_leaves_the_rest_of_a_row_direct(monkeypatch, outer_jobs):
    """Rows of A = 1000 elements, 1024 apart (strided destination): chunks of 256 through
    the stage (768), the remaining whole macro tiles and the tail tile straight to dst --
    in one job's loops, or as a last job of each outer index (4 jobs per outer index)."""
    monkeypatch.setattr(plan_mod, "ROW_STAGE_BYTES", 16 * 1024)  # (off by default)
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "NT_MIN_TRANSPOSE_BYTES", 0)
    monkeypatch.setattr(plan_mod, "NT_TUNE", False)
    monkeypatch.setattr(plan_mod, "MIN_JOBS", 4 if outer_jobs else 64)
    monkeypatch.setattr(plan_mod, "ROW_STAGE_MAX_VECTOR", 128)
    dims = (4, 32, 25, 40)
    s = M(dims, "f32", "nChw16c")
    d = M(dims, "f32", strides=(32 * 1024, 1024, 40, 1))
    k = lj.compiler.build(s, d)
    p = k.plan
    t = p.tile
    assert p.row_stage == 256 and p.nodes[t.a].extent == 1000, p.describe()
    if outer_jobs:
        assert "range(0, 768, 256)" in k.source and "range(768, 992, 32)" in k.source, k.source
    else:
        assert p.macro_job and p.jobs == 8 * 4, p.describe()
        assert "< 3:" in k.source and "range(768, 992, 32)" in k.source, k.source
    rng = np.random.default_rng(8)
    x = ref.random_raw(s.get_size() // 4, "f32", rng)
    want = ref.reorder(x, s, d, np.full(d.get_size() // 4, 7.0, np.float32))
    for _ in ref.at_thread_counts((1, 2)):
        y = lj.aligned_empty(d.get_size()).view(np.float32)
        y[:] = 7.0  # the 24 elements between rows are not the tensor's: left as they were
        k(x, y)
        np.testing.assert_array_equal(y, want)


def test_row_stages_only_with_32_byte_vectors(monkeypatch):
    """Measured with 32-byte vectors only: 64-byte ones keep their direct NT tiles. Off by
    default (``ROW_STAGE_BYTES`` = 0): the tiles' NT lines go straight into the rows."""
    dims = (64, 96, 64, 64)  # nChw16c -> nchw, 201 MB: NT at every thread count
    ir = lj.compiler.lower_and_plan(M(dims, "f32", "nChw16c"), M(dims, "f32", "nchw"), None)[0]
    assert plan_mod.make_plan(ir, vbytes=32).row_stage == 0
    monkeypatch.setattr(plan_mod, "ROW_STAGE_BYTES", 16 * 1024)
    assert plan_mod.make_plan(ir, vbytes=32).row_stage == 256
    assert plan_mod.make_plan(ir, vbytes=64).row_stage == 0


@pytest.mark.parametrize("dims, stag, dtag, sdt, ddt, two", [
    ((2, 32, 16, 16), "nChw16c", "nchw", "f32", "f32", True),  # planes of 1 KB: repeat every 4
    ((2, 256, 5, 7), "nchw", "nhwc", "f32", "f32", True),      # nhwc rows of 1 KB, 35 pixels
    ((2, 48, 16, 48), "nhwc", "nchw", "f32", "f32", True),     # planes of 3 KB (3072 mod 4096)
    ((2, 256, 6, 6), "nchw", "nhwc", "bf16", "f32", True),     # converted into 4-byte rows
    ((2, 128, 5, 7), "nchw", "nhwc", "f32", "f32", False),     # 512 B rows: repeat every 8
    ((2, 512, 3, 5), "nchw", "nhwc", "f32", "f32", False),     # 2 KB rows: measured a loss
    ((2, 256, 5, 7), "nchw", "nhwc", "f32", "bf16", False),    # 2-byte destination
])
def test_rows_repeating_every_four_take_two_line_tiles(monkeypatch, dims, stag, dtag, sdt, ddt, two):
    """NT transposes into destination rows 1 or 3 KB apart modulo 4 KB (their addresses
    repeat every 4 rows) take tiles that write two lines of each row (32 f32 rows); other
    strides and types keep one line. Every byte exact at 1 and 2 threads, at aligned and
    misaligned destinations (the NT kernel with its tails, and its plain fallback)."""
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "NT_MIN_TRANSPOSE_BYTES", 0)
    monkeypatch.setattr(plan_mod, "NT_TUNE", False)
    monkeypatch.setattr(plan_mod, "TWO_LINE_ROWS_MAX_VECTOR", 128)  # this host's vectors too
    k = lj.compiler.build(M(dims, sdt, stag), M(dims, ddt, dtag))
    p = k.plan
    t = p.tile
    line = 64 // lj.MemoryDesc(dims, ddt, dtag).dtype.size
    assert p.nt and t is not None and t.kind == "transpose", p.describe()
    assert t.R == (2 * line if two else line), p.describe()
    assert ("tiles write two lines of each row" in p.describe()) == two
    rng = np.random.default_rng(sum(dims))
    s, d = k.src_md, k.dst_md
    x = ref.random_raw(s.get_size() // s.dtype.size, sdt, rng)
    want = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage))
    ref.check_guarded_runs(k, x, want.view(np.uint8), offsets=(0, 4))


def test_two_line_tiles_only_for_nt_sizes_and_32_byte_vectors():
    """In-cache tensors (plain stores) and 64-byte vectors keep tiles of one line."""
    small = lj.compiler.lower_and_plan(M((1, 256, 4, 4), "f32", "nchw"), M((1, 256, 4, 4), "f32", "nhwc"), None)[0]
    assert plan_mod.make_plan(small, vbytes=32).tile.R == 16
    dims = (32, 256, 56, 56)  # 206 MB: NT on every thread count
    ir = lj.compiler.lower_and_plan(M(dims, "f32", "nchw"), M(dims, "f32", "nhwc"), None)[0]
    assert plan_mod.make_plan(ir, vbytes=32).tile.R == 32
    assert plan_mod.make_plan(ir, vbytes=64).tile.R == 16


def _l2_aliased_nt(monkeypatch, period: int) -> None:
    """NT stores at every size and an L2 set period of ``period`` bytes, so that small
    tensors take the L2-aliased rules (_l2_aliased_rows, skewed_tiles) on any host."""
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "NT_MIN_TRANSPOSE_BYTES", 0)
    monkeypatch.setattr(plan_mod, "NT_TUNE", False)
    monkeypatch.setattr(plan_mod, "TWO_LINE_ROWS_MAX_VECTOR", 128)  # this host's vectors too
    monkeypatch.setattr(plan_mod, "SKEW_MAX_VECTOR", 128)
    monkeypatch.setattr(plan_mod, "L2_SET_PERIOD", period)


def _exact_into_guarded(k, seed: int, fill: bool = False) -> None:
    """Every destination byte at 1 and 2 threads, aligned and 4 bytes off a line; with
    ``fill`` (strided rows), the bytes the layout leaves out keep the guard pattern."""
    s, d = k.src_md, k.dst_md
    x = ref.random_raw(s.get_size() // 4, "f32", np.random.default_rng(seed))
    out = np.full(d.get_size() // 4, 0xA5A5A5A5 if fill else 0, np.uint32).view(np.float32)
    want = ref.reorder(x, s, d, out)
    ref.check_guarded_runs(k, x, want.view(np.uint8), offsets=(0, 4))


@pytest.mark.parametrize("dims, stag, dtag, R, m, skew, aliased", [
    ((2, 256, 32, 32), "nchw", "nhwc", 16, 2, 512, True),   # planes of 4 KB: two tiles, skewed
    ((2, 768, 32, 32), "nchw", "nhwc", 16, 2, 512, True),   # destination rows of 3 KB
    ((2, 32, 4, 16, 16), "ncdhw", "ndhwc", 16, 1, 0, True),  # rows of 128 B: one tile of 16
    ((32, 1024), "ab", "ba", 16, 1, 0, True),               # rows of 4 KB into rows of 128 B
    ((1024, 1024), "ab", "ba", 16, 2, 0, False),            # destination rows 4 KB apart too
    ((2, 256, 31, 32), "nchw", "nhwc", 32, (8, 1), 0, False),  # planes of 3968 B (64-byte
    # vectors: 32x8 tiles read half lines, 8 KB a step, PARTIAL_LINE_STEP_BYTES)
    ((2, 512, 32, 32), "nchw", "nhwc", 16, 2, 512, True),   # destination rows of 2 KB
    ((2, 128, 32, 32), "nchw", "nhwc", 16, 2, 512, True),   # 512 B
    ((2, 64, 32, 32), "nchw", "nhwc", 16, 1, 0, True),      # 256 B: one tile of 16, no skew
])
def test_rows_sharing_an_l2_set_are_read_sixteen_at_a_time(monkeypatch, dims, stag, dtag, R, m, skew, aliased):
    """NT transposes whose source rows are a multiple of the L2 set period apart read at most
    ALIASED_L2_STREAMS rows side by side at one column and take no two-line tiles, unless the
    destination rows share an L1 set as well; into rows of 512 B or more, a second tile of 16
    rows runs ``skew`` columns ahead (plan.skewed_tiles). The period is shrunk to 4
    KB so that small tensors show the plans; every byte exact at 1 and 2 threads, aligned and
    misaligned destinations."""
    _l2_aliased_nt(monkeypatch, 4096)
    k = lj.compiler.build(M(dims, "f32", stag), M(dims, "f32", dtag))
    p = k.plan
    t = p.tile
    assert p.nt and t is not None and t.kind == "transpose", p.describe()
    assert (t.R, t.M, t.skew) == (R, _by_width(m, p), skew), p.describe()
    assert ("one L2 set" in p.describe()) == aliased, p.describe()
    assert (f"the second {skew} columns ahead" in p.describe()) == bool(skew), p.describe()
    _exact_into_guarded(k, sum(dims))


@pytest.mark.parametrize("dims, skew_bytes, skew", [
    ((1, 256, 1, 2053), 2048, 512),    # 256 column steps of 8 and a tail of 5
    ((1, 768, 1, 2053), 1 << 20, 1024),  # at most half the columns ahead (whole steps)
    ((1, 256, 1, 3077), 4000, (992, 1000)),  # 1000 columns ahead (992: steps of 16), in a run of 3072
])
def test_skewed_tiles_cover_their_run_once(monkeypatch, dims, skew_bytes, skew):
    """The second tile of a skewed macro tile runs ahead along B within its run of full
    column steps (alone over the first ``skew`` columns, the first tile alone over the last
    ones); tails keep their own steps. The L2 period is set to the plane's
    bytes so that planes with tails take the rule; exact at 1 and 2 threads, both alignments."""
    _l2_aliased_nt(monkeypatch, dims[2] * dims[3] * 4)
    monkeypatch.setattr(plan_mod, "SKEW_BYTES", skew_bytes)
    k = lj.compiler.build(M(dims, "f32", "nchw"), M(dims, "f32", "nhwc"))
    t = k.plan.tile
    skew = _by_width(skew, k.plan)
    assert t is not None and (t.R, t.M, t.V, t.skew) == (16, 2, _by_width((16, 8), k.plan), skew), \
        k.plan.describe()
    assert f" + {skew}) * " in k.source  # the second tile, ahead of the first
    _exact_into_guarded(k, sum(dims))


@pytest.mark.parametrize("channels", [56, 40])
def test_skewed_tiles_with_a_short_last_row_group(monkeypatch, channels):
    """Destination rows of 1 KB holding fewer channels (strided nhwc): the last macro tile
    has a short second tile (56 = 32 + 16 + 8) or none (40 = 32 + 8); gaps stay untouched."""
    dims = (2, channels, 1, 2053)
    _l2_aliased_nt(monkeypatch, 2053 * 4)
    k = lj.compiler.build(M(dims, "f32", "nchw"), M(dims, "f32", strides=(2053 * 256, 1, 2053 * 256, 256)))
    t = k.plan.tile
    assert t is not None and (t.R, t.M, t.skew) == (16, 2, 512), k.plan.describe()
    _exact_into_guarded(k, channels, fill=True)


def test_l2_rows_rule_only_for_nt_sizes(monkeypatch):
    """In-cache tensors (plain stores) keep their tiles: the same 64 KB planes take 16 rows
    at a column once the transpose takes NT stores. The period comes from sysfs (64 KiB unknown)."""
    assert plan_mod.l2_set_period() > 0 and plan_mod.l2_set_period() % 64 == 0
    monkeypatch.setattr(plan_mod, "L2_SET_PERIOD", 64 * 1024)
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 40 << 20)      # split threshold 60 MB
    monkeypatch.setattr(plan_mod, "NT_MIN_TRANSPOSE_BYTES", 0)
    monkeypatch.setattr(plan_mod, "NT_TUNE", False)
    monkeypatch.setattr(plan_mod, "TWO_LINE_ROWS_MAX_VECTOR", 128)  # this host's vectors too
    for n, nt in ((1, False), (4, True)):  # one image: 32 MB of traffic; four: 128 MB
        dims = (n, 256, 128, 128)
        ir = lj.compiler.lower_and_plan(M(dims, "f32", "nchw"), M(dims, "f32", "nhwc"), None)[0]
        p = plan_mod.make_plan(ir, vbytes=32)
        assert p.nt == nt, p.describe()
        assert ("one L2 set" in p.describe()) == nt, p.describe()
        if nt:  # two tiles of 16 rows, the second 2 KB ahead (plan.skewed_tiles)
            assert (p.tile.R, p.tile.M, p.tile.skew) == (16, 2, 512), p.describe()
        else:
            assert p.tile.M * p.tile.R > 16, p.describe()


@pytest.mark.parametrize("dims, stag, dtag, sdt, ddt, runs", [
    ((2, 256, 5, 7), "nChw16c", "nhwc", "f32", "u8", 16),     # 4 runs to a line, 2 passes of 8 planes
    ((2, 256, 9, 5), "nChw16c", "nhwc", "f32", "f32", 16),    # a run is a line
    ((2, 256, 4, 9), "nChw16c", "nhwc", "f32", "bf16", 16),
    ((2, 96, 7, 5), "nChw8c", "nhwc", "f32", "f32", 12),      # passes of 8 and 4 planes
    ((1, 256, 6, 7), "nChw16c", "nhwc", "s8", "s8", 16),      # runs of 16 B
])
def test_lines_passes(monkeypatch, dims, stag, dtag, sdt, ddt, runs):
    """Kind "lines" whose columns gather more runs than ``LINES_PASS_STREAMS`` source
    streams (nChw16c -> nhwc, C=256: 16 planes per pixel): blocks of columns, each swept
    once per 8 streams (``Plan.lines_passes``; blocks of 8 columns here, so that the
    images hold several blocks and a partial one). Exact at several destination offsets
    (misaligned ones take the plain path), 1 and 2 threads, nothing written outside."""
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "nt_split_min_bytes", lambda tile: 0)
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    block = 8 if stag == "nChw8c" else 16
    monkeypatch.setattr(plan_mod, "LINES_PASS_BYTES", 8 * block * s.dtype.size)
    k = lj.compiler.build(s, d)
    p = k.plan
    assert p.tile.kind == "lines" and p.nt and p.lines_passes == 8 and p.lines_pass_streams == 8, p.describe()
    assert f"a column's {p.tile.M * p.tile.R} runs" in p.describe() and p.tile.M * p.tile.R >= runs
    assert "min(b" in k.source  # the block loops
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, sdt, rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, sorted({0, d.dtype.size, 32}))
    monkeypatch.setattr(plan_mod, "LINES_PASS_STREAMS", 0)
    assert lj.compiler.build(s, d).plan.lines_passes == 0  # the switch for A/B runs


def test_lines_passes_not_taken(monkeypatch):
    """Columns of at most 8 runs, plain stores, and rows innermost keep the plain order."""
    def plan(dims, stag, dtag, sdt="f32", ddt="f32"):
        return lower_and_plan(M(dims, sdt, stag), M(dims, ddt, dtag), None)[1]
    assert plan((32, 256, 56, 56), "nChw16c", "nhwc").lines_passes == 1024  # 64 KB of each plane per pass
    assert plan((32, 128, 56, 56), "nChw16c", "nhwc").lines_passes == 0     # 8 planes
    assert plan((2, 256, 5, 5), "nChw16c", "nhwc").lines_passes == 0        # small: plain stores
    assert plan((32, 256, 56, 56), "nhwc", "nChw16c").lines_passes == 0     # rows innermost
    # 1-byte runs of 8, each sweep one line of pixels 512 B or 1 KB apart: no sweeps
    assert plan((64, 1024, 14, 112), "nChw8c", "nhwc", "s8", "s8").lines_passes == 0
    assert plan((64, 512, 28, 56), "nChw8c", "nhwc", "u8", "u8").lines_passes == 0
    assert plan((16, 384, 64, 128), "nChw8c", "nhwc", "s8", "s8").lines_passes > 0   # 384 B apart
    assert plan((8, 1024, 64, 112), "nChw8c", "nhwc", "f32", "s8").lines_passes > 0  # f32 source
    monkeypatch.setattr(plan_mod, "LINES_PASS_ALIAS_BYTES", 0)
    assert plan((64, 1024, 14, 112), "nChw8c", "nhwc", "s8", "s8").lines_passes > 0


def test_narrowing_prefetch_wants_groups_that_follow(monkeypatch):
    """Rows of one line, f32 -> bf16, but each group half of a source block (the other half a
    pass later, `gOIhw16i16o -> gOIhw8i8o`): no prefetch; exact."""
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    dims = (2, 32, 32, 3, 5)
    k = lj.compile_reorder(M(dims, "f32", "gOIhw16i16o"), M(dims, "bf16", "gOIhw8i8o"))
    p = k.plan
    assert p.nt and p.tile.kind == "lines" and not p.prefetch, p.describe()
    for threads in ref.at_thread_counts((1, 2)):
        assert ref.kernel_matches_reference(k, seed=threads)


@pytest.mark.parametrize("dims, stag, dtag, sdt, ddt, R, nt_before", [
    ((64, 3, 299, 299), "nChw16c", "nchw", "f32", "f32", 2, False),    # odd planes: plain either way
    ((64, 3, 304, 304), "nChw16c", "nchw", "f32", "f32", 2, True),     # aligned planes: NT before
    ((32, 8, 304, 304), "nChw16c", "nchw", "f32", "f32", 4, True),
    ((1024, 5, 4096), "nCw16c", "ncw", "f32", "f32", 4, True),
    ((16, 3, 1024, 1024), "nChw16c", "nchw", "f32", "bf16", 2, True),
    ((4096, 32, 3, 1, 5), "gOIhw16o16i", "gOhwi16o", "f32", "u8", 2, True),  # whole-block tiles
    ((4096, 32, 4, 1, 5), "gOIhw16o16i", "gOhwi16o", "f32", "f32", 2, True),
])
def test_thin_tiles_at_real_sizes(dims, stag, dtag, sdt, ddt, R, nt_before):
    """Rows that are a few elements of consecutive padded blocks (nChw16c -> nchw, C = 3)
    take plain tiles of few rows (``THIN_TILE_ROWS``), not 16-row tiles nor NT ones."""
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    p = lower_and_plan(s, d, None)[1]
    # (plain tile stores: straight into the destination, or into a job stage written out NT)
    assert p.tile.kind == "transpose" and p.tile.R == R and (not p.nt or p.job_stage), p.describe()
    assert any(n.startswith("tiles read") and f"{R} rows per tile" in n for n in p.notes), p.describe()
    mp = pytest.MonkeyPatch()
    mp.setattr(plan_mod, "THIN_TILE_ROWS", 0)
    try:
        p = lower_and_plan(s, d, None)[1]
        assert p.tile.R >= 16 and p.nt == nt_before, p.describe()
    finally:
        mp.undo()


@pytest.mark.parametrize("dims, stag, dtag, sdt", [
    ((16, 3, 24, 24), "nChw16c", "nchw", "f32"),   # thin
    ((48, 3, 5, 7), "IOhw16o16i", "oihw", "f32"),  # rows 1 KB apart: not consecutive blocks
    ((3, 64, 512), "ABc4b16a4b", "acb", "f32"),    # rows share their lines: not thin
    ((4, 6, 9, 13), "nChw16c", "nchw", "s8"),      # 16 bytes per block: not a line
    ((2, 12, 9, 13), "nChw16c", "nchw", "f32"),    # 48 bytes of each line: not thin
    ((4, 32, 5, 1, 5), "gOIhw16o16i", "gOhwi16o", "f32"),  # whole blocks of 20-byte rows: not thin
])
def test_thin_tiles_need_thin_rows_of_whole_lines(dims, stag, dtag, sdt):
    s, d = M(dims, sdt, stag), M(dims, sdt, dtag)
    p = lower_and_plan(s, d, None)[1]
    thin = any(n.startswith("tiles read") for n in p.notes)
    assert thin == (stag == "nChw16c" and sdt == "f32" and dims[1] <= 8), p.describe()
    assert (stag != "gOIhw16o16i") or p.tile.rows_contiguous, p.describe()


@pytest.mark.parametrize("dims, stag, dtag, sdt, ddt", [
    ((3, 3, 13, 11), "nChw16c", "nchw", "f32", "f32"),
    ((2, 1, 7, 9), "nChw16c", "nchw", "f32", "f32"),
    ((2, 6, 5, 19), "nChw16c", "nchw", "f32", "bf16"),
    ((3, 5, 133), "nCw16c", "ncw", "f32", "s8"),
    ((2, 8, 3, 5, 7), "nCdhw16c", "ncdhw", "s32", "f32"),
    ((3, 32, 3, 1, 5), "gOIhw16o16i", "gOhwi16o", "f32", "u8"),   # whole-block tiles, thin
    ((2, 48, 4, 3, 3), "gOIhw16o16i", "gOhwi16o", "f32", "f32"),
    ((2, 40, 2, 1, 7), "gOIhw16o16i", "gOhwi16o", "s32", "bf16"),  # O tail block of 8
])
def test_thin_tiles_are_exact(monkeypatch, dims, stag, dtag, sdt, ddt):
    """Thin tiles with tails of the pixels, at several destination offsets (guard bytes
    around), at 1 and 2 threads, with every size above the NT and parallel thresholds."""
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = lj.compiler.build(s, d)
    assert k.plan.tile.R <= 4 and (not k.plan.nt or k.plan.job_stage), k.plan.describe()
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, sdt, rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    for _ in ref.at_thread_counts((1, 2)):
        ref.check_guarded_runs(k, x, expect, sorted({0, d.dtype.size, 12}))

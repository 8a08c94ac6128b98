"""Transposes over two digits: source runs (``TileSpec.c``), destination lines (``TileSpec.a2``).

oihw -> OIhw16i16o reads, per output channel o, a run of 16 x 9 elements over
(i, hw): the planner tiles that run in whole vectors and places each column
through a table (``simd.tile_cols``). Checked here: the micro-kernel against
numpy index arithmetic (dtype pairs, partial tiles, non-temporal stores), the
planner's choice and its explanation, and whole kernels against the reference
reorder for weights layouts with padding, conversions, fused relu, forced
non-temporal stores, 1 and 2 threads, and guard bytes around the destination.

oihw -> OIhw4i16o4i has the opposite problem: the destination's unit-stride
digit (4 i) is shorter than a line. The planner then takes a line's worth of
rows from two digits (4 o x 4 i), each row read from its own source offset
(``simd.tile(src_rows=...)``), so that every column is stored as one line.
"""

from __future__ import annotations

import math
import re

import numba
import numpy as np
import pytest

import layoutjit as lj
import layoutjit.plan as plan_mod
import reference as ref
from layoutjit.compiler import lower_and_plan
from layoutjit.dtypes import as_dtype
from layoutjit.simd import sfence, tile, tile_cols, tile_rows
from test_convert import ref_direct

M = lj.MemoryDesc
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


# ------------------------------------------------------------------ the micro-kernel
TILE_CASES = [  # R, V, src, dst, Rv, Vv, nt
    (16, 16, "f32", "f32", 16, 16, False),
    (16, 16, "f32", "f32", 16, 16, True),
    (16, 9, "f32", "f32", 16, 9, False),
    (16, 16, "f32", "f32", 11, 16, True),
    (16, 16, "f32", "bf16", 16, 16, False),
    (32, 16, "f32", "bf16", 32, 16, True),
    (16, 16, "f32", "s8", 16, 7, False),
    (8, 8, "f64", "f64", 8, 8, True),
    (16, 16, "f32", "f32", 0, 16, True),
]


def _table(rng, V: int, R: int, dsz: int, nt: bool) -> np.ndarray:
    """Disjoint destination rows of R elements in a random order (line-aligned when nt)."""
    step = max(R, 64 // dsz) if nt else R + 3
    return (rng.permutation(V + 5)[:V] * step).astype(np.int64)


def test_tile_cols_matches_numpy():
    rng = np.random.default_rng(7)
    ns, lines, args, checks = {"sfence": sfence}, [], [], []
    for k, (R, V, s, d, Rv, Vv, nt) in enumerate(TILE_CASES):
        dd = as_dtype(d)
        sstride = V + 13
        toff = 3
        table = np.concatenate([np.zeros(toff, np.int64), _table(rng, V, R, dd.size, nt)])
        size = int(table.max()) + R + 64
        src = ref.random_raw(R * sstride + V, s, rng)
        raw = np.full(size * dd.size + 128, 0x5A, np.uint8)
        a0 = (-raw.ctypes.data) % 64
        dst = raw[a0:a0 + size * dd.size].view(dd.storage)
        soff, doff = 2, 0 if nt else 1
        ns[f"t{k}"] = tile_cols(R, V, s, d, Rv=Rv, Vv=Vv, nt=nt)
        ns[f"tab{k}"] = table
        lines.append(f"    t{k}(s{k}, {soff}, {sstride}, d{k}, {doff}, tab{k}, {toff})")
        args += [f"s{k}", f"d{k}"]
        exp = dst.copy()
        for c in range(V):
            base = doff + int(table[toff + c])
            for r in range(R):
                if r < Rv and c < Vv:
                    exp[base + r] = ref_direct(s, d, src[soff + r * sstride + c:soff + r * sstride + c + 1])[0]
                else:
                    exp[base + r] = np.zeros(1, dd.storage)[0]
        checks.append((src, dst, exp))
    exec(f"def group({', '.join(args)}):\n" + "\n".join(lines) + "\n    sfence()\n", ns)
    numba.njit(ns["group"])(*[a for src, dst, _ in checks for a in (src, dst)])
    for (R, V, s, d, Rv, Vv, nt), (_, dst, exp) in zip(TILE_CASES, checks):
        u = UINT[dst.itemsize]
        assert np.array_equal(dst.view(u), exp.view(u)), (R, V, s, d, Rv, Vv, nt)


def test_tile_cols_validation():
    with pytest.raises(ValueError, match="non-temporal"):
        tile_cols(8, 16, "f32", "f32", nt=True)
    with pytest.raises(ValueError, match="Rv"):
        tile_cols(16, 16, "f32", "f32", Rv=17)
    with pytest.raises(ValueError, match="post op"):
        tile_cols(16, 16, "f32", "bf16", post=(("relu", 0.0),))
    assert tile_cols(16, 16, "f32", "f32") is tile_cols(16, 16, "f32", "f32")


# ------------------------------------------------------------------ planner and kernels
KERNEL_CASES = [  # dims, src tag, dst tag, dst dtype, cols expected
    ((64, 48, 3, 3), "oihw", "OIhw16i16o", "f32", True),
    ((17, 48, 3, 3), "oihw", "OIhw16i16o", "f32", True),     # padded o: partial and zero tiles
    ((32, 17, 3, 3), "oihw", "OIhw16i16o", "f32", True),     # padded i: the run cut, zeros after
    ((48, 32, 5, 5), "oihw", "OIhw16i16o", "bf16", True),    # 400-column run, table of 400
    ((32, 32, 1, 7), "oihw", "OIhw16i16o", "bf16", True),    # short tail chunk
    ((2, 32, 16, 3, 3), "goihw", "gOIhw16i16o", "f32", True),
    ((16, 32, 3, 3, 3), "oidhw", "OIdhw16i16o", "f32", True),
    ((64, 32, 3, 3), "oihw", "IOhw16i16o", "f32", True),
    ((32, 24, 3, 3), "oihw", "OIhw8i8o", "f32", True),
    ((16, 3, 20, 7), "abcd", "cdba", "f32", False),          # B = 7 but no contiguous C
]


def _run_checked(k, threads_list=(1, 2), offsets=(0,)):
    s, d = k.src_md, k.dst_md
    rng = np.random.default_rng(sum(s.dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, str(s.dtype), rng)
    n = d.get_size()
    expect = ref.reorder(x, s, d, np.zeros(n // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, offsets, threads_list, note=k.plan.describe() + "\n")


@pytest.fixture
def nt_and_parallel_always(monkeypatch):
    """Small tensors planned like large ones (kernels are cached per key: dims unique here)."""
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "PARALLEL_MIN_BYTES", 0)


@pytest.mark.parametrize("dims,stag,dtag,ddt,cols", KERNEL_CASES)
def test_cols_kernels_are_exact(nt_and_parallel_always, dims, stag, dtag, ddt, cols):
    k = lj.compile_reorder(M(dims, "f32", stag), M(dims, ddt, dtag))
    t = k.plan.tile
    assert (t is not None and t.c is not None) == cols, k.plan.describe()
    if cols:
        assert "tile_cols(" in k.source and "placed by a table" in k.plan.describe()
        # NT needs whole lines per column (16 x f32), or a staged macro tile (pieces of
        # 16 x bf16/s8 and 8 x f32 go to a stage written out as whole lines: cols_stage)
        whole = t.R * as_dtype(ddt).size % 64 == 0
        assert k.plan.cols_stage == (not whole) and k.plan.nt, k.plan.describe()
        assert ("obuf, " in k.source) == k.plan.cols_stage
    # aligned (NT path where planned) and misaligned destinations (plain stores)
    _run_checked(k, offsets=(0, as_dtype(ddt).size))


@pytest.mark.parametrize("dims,stag,dtag,ddt,staged", [
    ((32, 24, 2, 3), "oihw", "OIhw8i8o", "f32", True),       # 8i x 6 x 8o: 384 elements staged
    ((2, 16, 24, 1, 5), "goihw", "gOIhw8i8o", "f32", True),
    ((32, 24, 3, 3), "oihw", "OIhw8i8o", "bf16", True),       # 16-byte pieces, 576 elements
    ((20, 24, 2, 3), "oihw", "OIhw8i8o", "f32", False),      # padded o: pieces stored in place
    ((40, 16, 3, 3), "oihw", "OIhw8i8o", "f32", False),      # 2304 B > the stage (2 KB here)
])
def test_short_pieces_go_through_a_stage(nt_and_parallel_always, monkeypatch, dims, stag, dtag, ddt,
                                         staged):
    """cols transposes storing pieces shorter than a line: the macro tile's dense destination
    range is staged and written as whole NT lines (``Plan.cols_stage``); every byte, 1 and
    2 threads, aligned and misaligned destinations, nothing written outside."""
    monkeypatch.setattr(plan_mod, "COLS_STAGE_BYTES", 2048)
    monkeypatch.setattr(plan_mod, "COLS_STAGE_SAME_WIDE", False)
    monkeypatch.setattr(plan_mod, "JOB_STAGE_BYTES", 0)  # (its jobs' stage: test_job_stage.py)
    monkeypatch.setattr(plan_mod, "LINE_ROWS_OVER_COLS_WIDE_BYTES", 0)  # (unstaged 32-byte pieces)
    monkeypatch.setattr(plan_mod, "LINE_ROWS_OVER_COLS_BYTES", 16)  # (likewise)
    k = lj.compiler.build(M(dims, "f32", stag), M(dims, ddt, dtag))
    assert k.plan.tile.c is not None and k.plan.cols_stage == staged, k.plan.describe()
    assert k.plan.nt == staged and ("written out as whole non-temporal lines" in k.plan.describe()) == staged
    _run_checked(k, offsets=(0, as_dtype(ddt).size, 32))


def test_cols_small_default_plan_is_exact():
    k = lj.compile_reorder(M((48, 32, 3, 3), "f32", "oihw"), M((48, 32, 3, 3), "f32", "OIhw16i16o"))
    assert k.plan.tile.c is not None and not k.plan.nt
    _run_checked(k, threads_list=(1,))


def test_cols_with_fused_relu():
    dims = (32, 32, 3, 3)
    k = lj.compile_reorder(M(dims, "f32", "oihw"), M(dims, "f32", "OIhw16i16o"),
                           post_ops=[("eltwise", "relu", 0.0, 0.0)])
    assert k.plan.tile.c is not None and "post=" in k.source
    rng = np.random.default_rng(3)
    x = rng.standard_normal(int(np.prod(dims))).astype(np.float32)
    y = np.full(x.size, np.nan, np.float32)
    k(x, y)
    expect = ref.reorder(np.maximum(x, 0).astype(np.float32), k.src_md, k.dst_md, np.zeros_like(y))
    np.testing.assert_array_equal(y, expect)


LINE_CASES = [  # dims, src tag, dst tag, dst dtype, a2 expected
    ((32, 64, 3, 3), "oihw", "OIhw4i16o4i", "f32", True),
    ((32, 32, 3, 3), "oihw", "OIhw4i16o4i", "s8", True),     # 64 rows (16 o x 4 i) per line
    ((16, 32, 5, 5), "oihw", "OIhw4i16o4i", "bf16", True),
    ((2, 16, 16, 3, 3), "goihw", "gOIhw4i16o4i", "f32", True),
    ((16, 16, 3, 3), "oihw", "OIhw2i8o4i", "f32", True),
    # A (hw = 9) does not divide a line: 16 i x 9 hw = 9 lines a period, unrolled
    ((64, 48, 3, 3), "OIhw16i16o", "oihw", "f32", True),
    ((2, 32, 48, 3, 3), "gOIhw16i16o", "goihw", "f32", True),
    ((32, 32, 6), "OIw16i16o", "oiw", "f32", True),          # 8 i x 6 w = 3 lines; 2 periods
    ((32, 32, 20), "OIw16i16o", "oiw", "f32", True),         # A longer than a line: 4 i x 20 = 5 lines
    ((32, 32, 3, 6), "OIhw16i16o", "oihw", "f32", True),     # 8 i x 18 hw = 9 lines
    ((32, 32, 3, 3, 3), "OIdhw16i16o", "oidhw", "f32", True),   # 27 lines a period
    ((32, 48, 5, 5), "OIhw16i16o", "oihw", "bf16", False),  # bf16 lines of 32: 32 i wanted, 16 there
    ((32, 32, 5, 5), "OIhw16i16o", "oihw", "f32", True),     # 25 lines
    ((17, 32, 3, 3), "oihw", "OIhw4i16o4i", "f32", True),    # padded o: padding rows (PADDED_LINE_ROWS)
    ((32, 20, 3, 3), "oihw", "OIhw4i16o4i", "f32", True),    # padded i: padding rows (NEAR_PADDED_ROWS)
]


@pytest.mark.parametrize("dims,stag,dtag,ddt,a2", LINE_CASES)
def test_line_rows_kernels_are_exact(nt_and_parallel_always, dims, stag, dtag, ddt, a2):
    k = lj.compile_reorder(M(dims, "f32", stag), M(dims, ddt, dtag))
    t = k.plan.tile
    assert (t.a2 is not None) == a2, k.plan.describe()
    if a2:
        assert "source offsets" in k.plan.describe()
        assert t.R * as_dtype(ddt).size == 64 and k.plan.nt  # every column one whole line
        a, a2n = k.plan.nodes[t.a], k.plan.nodes[t.a2]
        lines = a.extent * a2n.extent // t.R  # lines a period
        assert a.extent * a2n.extent == math.lcm(t.R, a.extent)
        if lines == 1:  # one tile, its row offsets constants
            assert "src_rows=" in k.source and "tile_rows" not in k.source
        else:  # a loop over the period's lines, offsets from one table of lines x R
            assert "src_rows=" not in k.source and "tile_rows(" in k.source, k.source
            tab = re.search(r"TAB\d+ = np.array\(\[(.*?)\], np.int64\)", k.source).group(1)
            assert len(tab.split(",")) == lines * t.R
    _run_checked(k, offsets=(0, as_dtype(ddt).size))


def test_tile_rows_matches_numpy():
    """``simd.tile_rows``: source row r read at ``soff + table[toff + r]``, a column tail
    (Vv < V) zero-filled, conversion, NT rejected for partial lines."""
    rng = np.random.default_rng(12)
    table = np.array([7, 0, 40, 13, 100, 91, 55, 22, 3, 64, 18, 77], np.int64)
    t = tile_rows(8, 5, "f32", "bf16", Vv=4)
    src = ref.random_raw(200, "f32", rng)
    dst = np.zeros(5 * 8 + 9, np.uint16)

    @numba.njit
    def run(s, tab, d):
        t(s, 2, tab, 3, d, 9, 8)

    run(src, table, dst)
    exp = np.zeros_like(dst)
    for c in range(4):
        for r in range(8):
            exp[9 + c * 8 + r] = ref_direct("f32", "bf16", src[2 + table[3 + r] + c:3 + table[3 + r] + c])[0]
    np.testing.assert_array_equal(dst, exp)
    with pytest.raises(ValueError, match="non-temporal"):
        tile_rows(8, 5, "f32", "f32", nt=True)


def test_src_rows_tile_matches_numpy():
    rng = np.random.default_rng(11)
    rows = (0, 9, 18, 27, 100, 109, 118, 127)
    t = tile(8, 9, "f32", "bf16", src_rows=rows)
    src = ref.random_raw(200, "f32", rng)
    dst = np.zeros(9 * 8 + 5, np.uint16)

    @numba.njit
    def run(s, d):
        t(s, 3, 0, d, 5, 8)

    run(src, dst)
    exp = np.zeros_like(dst)
    for c in range(9):
        for r in range(8):
            exp[5 + c * 8 + r] = ref_direct("f32", "bf16", src[3 + rows[r] + c:4 + rows[r] + c])[0]
    np.testing.assert_array_equal(dst, exp)
    with pytest.raises(ValueError, match="src_rows"):
        tile(8, 9, "f32", "f32", src_rows=(0, 1))


@pytest.mark.parametrize("R, V, sdt, ddt, runs", [
    (64, 3, "u8", "u8", 4),      # oihw -> OIhw16o16i 1x3: 4 runs of 16 rows of 3 bytes
    (64, 5, "s8", "s8", 4),
    (64, 7, "u8", "u8", 8),      # runs of 8 rows: 56 B, a partial last vector each
    (32, 3, "bf16", "bf16", 2),
    (32, 3, "bf16", "f32", 2),   # widened in the stores
    (64, 3, "u8", "f32", 4),
])
def test_src_rows_in_runs_match_numpy(R, V, sdt, ddt, runs):
    """Rows placed by constant offsets that follow one another in runs (``simd._row_runs``)
    are loaded run by run as whole vectors and gathered without a network; nothing past a
    run is read (the source ends where the last run does) and the result is the plain
    transpose. Checked both ways (``DENSE_ROW_RUNS``)."""
    import layoutjit.simd as simd_mod

    per = R // runs
    rows = tuple(k * 100 + j * V for k in range(runs) for j in range(per))
    assert len(simd_mod._row_runs(rows, V, R)) == runs
    rng = np.random.default_rng(R * V)
    end = rows[-1] + V + 5
    src = ref.random_raw(end, sdt, rng)
    dst = np.zeros(V * R + 3, as_dtype(ddt).storage)
    exp = np.zeros_like(dst)
    for c in range(V):
        for r in range(R):
            exp[3 + c * R + r] = ref_direct(sdt, ddt, src[5 + rows[r] + c:6 + rows[r] + c])[0]
    loads = {}
    for on in (True, False):
        mp = pytest.MonkeyPatch()
        mp.setattr(simd_mod, "DENSE_ROW_RUNS", on)
        try:
            t = tile(R, V, sdt, ddt, src_rows=rows)

            @numba.njit
            def run(s, d):
                t(s, 5, 0, d, 3, R)

            dst[:] = 0
            run(src, dst)
        finally:
            mp.undo()
        np.testing.assert_array_equal(dst, exp, err_msg=f"DENSE_ROW_RUNS={on}")
        llvm = next(iter(run.inspect_llvm().values()))
        loads[on] = llvm.count(" = load ")
    # a few vector loads per run, not one per row (LLVM may merge the other path's row loads
    # too: with AVX-512 it took 10 loads for 64x3 u8, the runs 10-14, so only the bound)
    assert loads[True] < R // 2, loads


@pytest.mark.parametrize("dims, sdt", [((32, 48, 1, 3), "u8"), ((32, 32, 1, 5), "s8"), ((48, 32, 1, 3), "bf16")])
def test_weights_with_short_rows_in_runs_are_exact(nt_and_parallel_always, dims, sdt):
    """oihw -> OIhw16o16i with 1x3 / 1x5 kernels in 1- and 2-byte types: the tiles' rows come
    in runs of 16 (``simd._row_runs``)."""
    k = lj.compile_reorder(M(dims, sdt, "oihw"), M(dims, sdt, "OIhw16o16i"))
    assert "src_rows=" in k.source, k.plan.describe()
    _run_checked(k, offsets=(0, as_dtype(sdt).size))


@pytest.mark.parametrize("dims, sdt, staged", [
    ((4, 32, 8, 7, 7), "s8", True),     # 16o x 8i x 49: 25 KB a job, rows of 196 B
    ((2, 16, 16, 7, 7), "s8", True),    # 16o x 16i x 49 f32: 50 KB
    ((2, 16, 16, 5, 5), "u8", True),
])
def test_whole_line_pieces_into_rows_off_the_lines_go_through_a_stage(nt_and_parallel_always, monkeypatch,
                                                                     dims, sdt, staged):
    """cols tiles of 16 f32 rows store whole-line pieces, but into destination rows off the
    lines (`gOIhw16i16o -> goihw` with 7x7 planes: rows of 196 B): one macro tile takes all of
    A and its dense destination range (the job's) is staged and written as whole NT lines
    (``COLS_STAGE_WHOLE_A``); exact at aligned and misaligned destinations."""
    s, d = M(dims, sdt, "gOIhw16i16o"), M(dims, "f32", "goihw")
    k = lj.compiler.build(s, d)
    t = k.plan.tile
    assert t.c is not None and k.plan.cols_stage == staged and t.R * t.M >= k.plan.nodes[t.a].extent, \
        k.plan.describe()
    _run_checked(k, offsets=(0, 4, 32))
    monkeypatch.setattr(plan_mod, "COLS_STAGE_WHOLE_A", False)
    assert not lower_and_plan(s, d, None)[1].cols_stage


def test_tiles_of_one_element_size_take_larger_stages(nt_and_parallel_always, monkeypatch):
    """Tiles that do not convert stage up to COLS_STAGE_WIDE_BYTES (``COLS_STAGE_SAME_WIDE``)."""
    monkeypatch.setattr(plan_mod, "COLS_STAGE_BYTES", 2048)
    s, d = M((40, 16, 3, 3), "f32", "oihw"), M((40, 16, 3, 3), "f32", "OIhw8i8o")  # 2304 B
    k = lj.compiler.build(s, d)
    assert k.plan.cols_stage, k.plan.describe()
    _run_checked(k, offsets=(0, 4, 32))
    monkeypatch.setattr(plan_mod, "COLS_STAGE_SAME_WIDE", False)
    assert not lower_and_plan(s, d, None)[1].cols_stage

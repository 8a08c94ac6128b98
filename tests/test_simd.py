"""layoutjit.simd register tiles against numpy index arithmetic.

Many tile calls are grouped into a few generated njit functions to bound compile time.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import re
import subprocess
import sys

import numpy as np
import pytest

numba = pytest.importorskip("numba")
pytest.importorskip("ml_dtypes")

from numba.core import errors  # noqa: E402

from layoutjit import simd  # noqa: E402
from layoutjit.dtypes import as_dtype  # noqa: E402
from layoutjit.simd import gather, sfence, tile  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_convert import ref_direct  # noqa: E402

UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
RNG = np.random.default_rng(2024)
# (not where LAYOUTJIT_VECTOR_BYTES plans for a width this CPU lacks: the asm checks need its own)
AVX512 = simd.HOST_VECTOR_BYTES == 64 == simd.ISA_VECTOR_BYTES


def rand_storage(dt: str, n: int) -> np.ndarray:
    """Half random bit patterns (NaNs, infs, huge values), half moderate values."""
    t = as_dtype(dt)
    bits = RNG.integers(0, 2 ** (8 * t.size), n, dtype=np.uint64, endpoint=False) \
        if t.size < 8 else RNG.integers(0, 2**64 - 1, n, dtype=np.uint64)
    x = bits.astype(UINT[t.size]).view(t.storage)
    vals = RNG.standard_normal(n) * 150
    if dt == "f16":
        v = vals.astype(np.float16).view(np.uint16)
    elif dt == "bf16":
        v = (vals.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    elif t.is_int:
        v = np.clip(np.rint(vals), t.lowest, t.highest).astype(t.storage)
    else:
        v = vals.astype(t.storage)
    x[::2] = v[::2]
    return x


def aligned_empty(n: int, dtype, align: int = 64) -> np.ndarray:
    dtype = np.dtype(dtype)
    raw = np.empty(n * dtype.itemsize + align, np.uint8)
    o = (-raw.ctypes.data) % align
    return raw[o:o + n * dtype.itemsize].view(dtype)


class Case:
    """One tile call: parameters, buffers, expected result."""

    def __init__(self, R, V, s, d, Rv=None, Vv=None, nt=False, rc=False, vbytes=None, dense=False,
                 over=False):
        self.R, self.V, self.s, self.d = R, V, s, d
        self.Rv = R if Rv is None else Rv
        self.Vv = V if Vv is None else Vv
        self.nt, self.rc = nt, rc
        self.vbytes = simd.HOST_VECTOR_BYTES if vbytes is None else vbytes
        self.t = tile(R, V, s, d, Rv=Rv, Vv=Vv, nt=nt, rows_contiguous=rc, vbytes=self.vbytes,
                      src_dense=dense, src_over=over)
        dsz = as_dtype(d).size
        self.sstride = V if dense else V + int(RNG.integers(0, 9))
        self.soff = int(RNG.integers(0, 7))
        self.src = rand_storage(s, self.soff + R * self.sstride + 8)
        if rc:
            self.dstride = R
        elif nt:
            self.dstride = R + 64 // dsz * int(RNG.integers(0, 3))
        else:
            self.dstride = R + int(RNG.integers(0, 5))
        self.doff = (64 // dsz) * int(RNG.integers(0, 3)) if nt else int(RNG.integers(0, 9))
        n = self.doff + V * self.dstride + 16
        self.dst = aligned_empty(n, as_dtype(d).storage)
        self.dst.view(UINT[dsz])[:] = RNG.integers(0, 2 ** (8 * dsz), n, dtype=np.uint64) \
            .astype(UINT[dsz])

    def __repr__(self):
        return (f"{self.R}x{self.V} {self.s}->{self.d} Rv={self.Rv} Vv={self.Vv} nt={self.nt} "
                f"rc={self.rc} w={self.vbytes}")

    def call(self, k: int) -> str:
        return f"t{k}(s{k}, {self.soff}, {self.sstride}, d{k}, {self.doff}, {self.dstride})"

    def expected(self, before: np.ndarray) -> np.ndarray:
        exp = before.copy()
        r, c = np.meshgrid(np.arange(self.R), np.arange(self.V), indexing="ij")
        r, c = r.ravel(), c.ravel()
        live = (r < self.Rv) & (c < self.Vv)
        didx = self.doff + c * self.dstride + r
        vals = np.zeros(r.size, as_dtype(self.d).storage)
        sidx = self.soff + r[live] * self.sstride + c[live]
        vals[live] = ref_direct(self.s, self.d, self.src[sidx])
        exp[didx] = vals
        return exp


def run_group(cases: list[Case]):
    """Compile one njit function calling every case's tile; run it; return (fn, outputs)."""
    ns = {}
    args = ", ".join(f"s{k}, d{k}" for k in range(len(cases)))
    lines = [f"def group({args}):"]
    for k, c in enumerate(cases):
        ns[f"t{k}"] = c.t
        lines.append(f"    {c.call(k)}")
    lines.append("    sfence()")
    ns["sfence"] = sfence
    exec("\n".join(lines) + "\n", ns)
    fn = numba.njit(ns["group"])
    before = [c.dst.copy() for c in cases]
    fn(*[a for c in cases for a in (c.src, c.dst)])
    return fn, before


def check_group(cases: list[Case], chunk: int = 12):
    """Run the cases in njit functions of ``chunk`` tiles (LLVM time grows faster than linearly
    with function size) and compare with numpy; return the compiled functions."""
    bad, fns = [], []
    for i in range(0, len(cases), chunk):
        part = cases[i:i + chunk]
        fn, before = run_group(part)
        fns.append(fn)
        for c, b in zip(part, before):
            exp = c.expected(b)
            u = UINT[exp.itemsize]
            if not np.array_equal(c.dst.view(u), exp.view(u)):
                bad.append(f"{c}: {np.count_nonzero(c.dst.view(u) != exp.view(u))} wrong")
    assert not bad, "\n".join(bad)
    return fns


# ---------------------------------------------------------------------------------------------
# The grid
# ---------------------------------------------------------------------------------------------

F32_SHAPES = [(16, 16), (8, 16), (16, 8), (32, 16), (3, 16), (16, 3), (4, 16), (1, 16), (16, 1),
              (5, 7), (2, 2), (1, 1), (64, 4)]
PAIRS_4B = [("f32", "f32"), ("f32", "bf16"), ("f32", "f16"), ("f32", "s8"), ("f32", "u8"),
            ("bf16", "f32"), ("u8", "f32"), ("s32", "f32"), ("f32", "s32")]


def _plain_cases(vbytes=None):
    cs = []
    for R, V in F32_SHAPES:
        cs.append(Case(R, V, "f32", "f32", vbytes=vbytes))
        cs.append(Case(R, V, "f32", "f32", rc=True, vbytes=vbytes))
    for s, d in PAIRS_4B[1:]:
        cs.append(Case(16, 16, s, d, vbytes=vbytes))
        cs.append(Case(16, 16, s, d, rc=True, vbytes=vbytes))
    for k, (R, V) in enumerate(((8, 16), (3, 16), (16, 3))):
        for j, (s, d) in enumerate((("f32", "bf16"), ("bf16", "f32"), ("f32", "s8"))):
            cs.append(Case(R, V, s, d, rc=bool((j + k) % 2), vbytes=vbytes))
    for R, V in ((16, 32), (32, 32), (8, 32), (3, 32), (32, 8)):
        cs.append(Case(R, V, "bf16", "bf16", vbytes=vbytes))
        cs.append(Case(R, V, "f16", "f16", rc=True, vbytes=vbytes))
    for R, V in ((64, 64), (16, 64), (7, 64), (64, 16), (16, 16)):
        cs.append(Case(R, V, "u8", "u8", vbytes=vbytes))
        cs.append(Case(R, V, "s8", "s8", rc=True, vbytes=vbytes))
    for R, V in ((8, 8), (4, 8), (8, 3)):
        cs.append(Case(R, V, "f64", "f64", vbytes=vbytes))
        cs.append(Case(R, V, "f64", "f32", rc=True, vbytes=vbytes))
    cs.append(Case(16, 16, "bf16", "f16", vbytes=vbytes))
    cs.append(Case(16, 16, "s8", "u8", vbytes=vbytes))
    cs.append(Case(16, 16, "u8", "s32", vbytes=vbytes))
    cs.append(Case(16, 16, "f16", "f64", vbytes=vbytes))
    # partial blocks: rows >= Rv and columns >= Vv become zeros
    for (R, V, Rv, Vv, s, d) in ((16, 16, 13, 11, "f32", "f32"), (16, 16, 0, 16, "f32", "f32"),
                                 (16, 16, 16, 0, "f32", "bf16"), (16, 16, 1, 1, "bf16", "f32"),
                                 (32, 16, 17, 9, "f32", "s8"), (3, 16, 2, 15, "f32", "f32"),
                                 (16, 3, 15, 2, "u8", "f32"), (64, 64, 33, 63, "u8", "u8"),
                                 (16, 32, 9, 31, "bf16", "bf16"), (8, 16, 8, 5, "f32", "f16")):
        cs.append(Case(R, V, s, d, Rv=Rv, Vv=Vv, vbytes=vbytes))
        cs.append(Case(R, V, s, d, Rv=Rv, Vv=Vv, rc=True, vbytes=vbytes))
    return cs


def _nt_cases(vbytes=None):
    cs = []
    for (R, V, s, d) in ((16, 16, "f32", "f32"), (32, 16, "f32", "f32"), (16, 8, "f32", "f32"),
                         (16, 3, "f32", "f32"), (16, 16, "bf16", "f32"), (16, 16, "u8", "f32"),
                         (32, 32, "bf16", "bf16"), (64, 64, "u8", "u8"), (32, 16, "f32", "bf16"),
                         (64, 16, "f32", "s8"), (8, 8, "f64", "f64")):
        cs.append(Case(R, V, s, d, nt=True, vbytes=vbytes))
    for (R, V, s, d) in ((16, 16, "f32", "f32"), (8, 16, "f32", "f32"), (4, 16, "f32", "f32"),
                         (1, 16, "f32", "f32"), (16, 16, "f32", "bf16"), (16, 16, "f32", "s8"),
                         (16, 4, "f32", "u8"), (16, 32, "bf16", "bf16"), (3, 64, "u8", "u8"),
                         (16, 16, "bf16", "f32"), (12, 16, "f32", "f32")):
        cs.append(Case(R, V, s, d, nt=True, rc=True, vbytes=vbytes))
    cs.append(Case(16, 16, "f32", "f32", Rv=11, Vv=7, nt=True))
    cs.append(Case(16, 16, "f32", "bf16", Rv=5, Vv=9, nt=True, rc=True))
    return cs


def test_tiles_plain():
    check_group(_plain_cases())


@pytest.mark.skipif(simd.HOST_VECTOR_BYTES == 32, reason="AVX2 host: test_tiles_plain compiles this network")
def test_tiles_plain_avx2_network():
    """vbytes=32: the AVX2 network and 32-byte chunking (compiled for this host's ISA)."""
    check_group(_plain_cases(vbytes=32)[::2])


def test_tiles_sse_network():
    check_group(_plain_cases(vbytes=16)[1::4])


def test_tiles_nt():
    fns = check_group(_nt_cases() + _nt_cases(vbytes=32)[::3])
    if simd.HOST_VECTOR_BYTES >= 32:
        for fn in fns:
            assert "vmovnt" in fn.inspect_asm(fn.signatures[0])


def _dense_cases(vbytes=None):
    cs = []
    for (R, V, s, d) in ((16, 3, "f32", "f32"), (16, 4, "f32", "f32"), (16, 16, "f32", "f32"),
                         (32, 16, "f32", "f32"), (8, 5, "f32", "f32"), (3, 16, "f32", "f32"),
                         (16, 3, "f32", "bf16"), (16, 3, "u8", "f32"), (64, 3, "s8", "s8"),
                         (8, 3, "f64", "f32"), (16, 7, "bf16", "bf16"), (16, 7, "f32", "f32"),
                         (16, 6, "f32", "f32"), (16, 7, "f32", "s8"), (16, 14, "bf16", "f32"),
                         (32, 15, "bf16", "bf16"), (16, 7, "f32", "bf16")):
        cs.append(Case(R, V, s, d, dense=True, vbytes=vbytes))
        cs.append(Case(R, V, s, d, dense=True, rc=True, vbytes=vbytes))
    for (R, V, Rv, s, d) in ((16, 3, 13, "f32", "f32"), (16, 3, 1, "f32", "s8"), (32, 16, 17, "f32", "f32"),
                             (16, 7, 2, "f32", "f32"), (16, 7, 1, "f32", "f32"), (16, 6, 3, "f32", "f32"),
                             (16, 14, 5, "bf16", "bf16")):
        cs.append(Case(R, V, s, d, Rv=Rv, dense=True, vbytes=vbytes))
    cs.append(Case(16, 3, "f32", "f32", nt=True, dense=True, vbytes=vbytes))
    cs.append(Case(16, 16, "f32", "f32", nt=True, rc=True, dense=True, vbytes=vbytes))
    return cs


def test_tiles_src_dense():
    """Rows that are one run (sstride == V) read as whole vectors, at every vector width."""
    check_group(_dense_cases())
    check_group(_dense_cases(vbytes=32)[::2] + _dense_cases(vbytes=16)[1::3])


def test_dense_rows_overlap_or_gather(monkeypatch):
    """Odd dense rows that fill most of their lanes are read as overlapping vectors (7 of 8
    f32, 7 of 8 and 14 of 16 bf16), others gathered (3 or 5 f32, 5 of 8 bf16, 1-byte rows);
    with the overlap off, the gather takes them all, with the same results."""
    assert [simd._overlap_rows(V, 8, 4) for V in (3, 5, 6, 7)] == [False, False, True, True]
    assert [simd._overlap_rows(V, P, 2) for V, P in ((5, 8), (7, 8), (12, 16), (14, 16))] == \
        [False, True, False, True]
    assert not simd._overlap_rows(7, 8, 1)
    monkeypatch.setattr(simd, "DENSE_OVERLAP", False)
    cases = [c for c in _dense_cases() if c.V in (6, 7, 14, 15)]
    for c in cases:  # fresh intrinsics (tile() memoizes), generated with the patch in place
        c.t = simd._make_tile.__wrapped__(c.R, c.V, c.s, c.d, c.Rv, c.Vv, c.nt, c.rc, c.vbytes, True)
    check_group(cases)


def test_tiles_src_over():
    """Rows read whole past their Vv elements (``src_over``: a padded block's garbage lanes
    follow them): the same results as masked loads, and no masked load in the code."""
    cases = [Case(16, 7, "f32", "f32", over=True), Case(32, 7, "f32", "bf16", nt=True, over=True),
             Case(16, 13, "f32", "f32", nt=True, over=True), Case(16, 6, "f32", "f32", Vv=5, over=True),
             Case(5, 7, "f32", "s8", rc=True, over=True), Case(16, 7, "bf16", "bf16", over=True),
             Case(16, 13, "s8", "s8", over=True), Case(16, 16, "f32", "f32", Rv=11, Vv=13, over=True),
             Case(16, 3, "u8", "f32", over=True)]
    fns = check_group(cases)
    for fn in fns:
        asm = fn.inspect_asm(fn.signatures[0])
        assert not re.search(r"\bv(p?maskmov)\w*\s[^\n]*\(%", asm)


def test_tiles_without_masked_memops(monkeypatch):
    """The odd-sized-vector load/store path used where masked loads/stores are not native."""
    monkeypatch.setattr(simd, "_masked_native", lambda esize, nbytes, store=False: False)
    cases = [Case(3, 16, "f32", "f32"), Case(5, 7, "f32", "s8"), Case(5, 7, "f32", "s8", rc=True),
             Case(16, 3, "f32", "f32", Vv=2), Case(16, 16, "f32", "bf16", Rv=15, Vv=13),
             Case(3, 32, "bf16", "bf16", Vv=29), Case(7, 64, "u8", "u8", Vv=37),
             Case(16, 16, "bf16", "f32", Vv=11, rc=True, vbytes=32),
             Case(16, 3, "f32", "f32", Rv=13, dense=True), Case(8, 5, "u8", "f32", dense=True)]
    for c in cases:  # fresh intrinsics (tile() memoizes), generated with the patch in place
        dense = c.sstride == c.V and c.t.tile_params["src_dense"]
        c.t = simd._make_tile.__wrapped__(c.R, c.V, c.s, c.d, c.Rv, c.Vv, c.nt, c.rc, c.vbytes, dense)
    fns = check_group(cases)
    for fn in fns:  # no masked loads/stores (masked register ops from conversions are fine)
        asm = fn.inspect_asm(fn.signatures[0])
        assert not re.search(r"\bv(p?maskmov|movup|movdqu)\w*\s[^\n]*\(%[^\n]*\{%k", asm)
        assert not re.search(r"\bv(movup|movdqu)\w*\s[^\n]*\{%k[^\n]*\(%", asm)


# ---------------------------------------------------------------------------------------------
# Assembly checks on single tiles
# ---------------------------------------------------------------------------------------------

def _asm_of(t, s, d):
    @numba.njit
    def k(a, b, so, ss, do, ds):
        t(a, so, ss, b, do, ds)

    a = np.zeros(4, as_dtype(s).storage)
    b = np.zeros(4, as_dtype(d).storage)
    k.compile((numba.typeof(a), numba.typeof(b)) + (numba.int64,) * 4)
    return k.inspect_asm(k.signatures[0])


@pytest.mark.skipif(not AVX512, reason="AVX-512 host")
def test_asm_16x16_f32():
    plain = _asm_of(tile(16, 16, "f32", "f32"), "f32", "f32")
    nt = _asm_of(tile(16, 16, "f32", "f32", nt=True), "f32", "f32")
    for asm in (plain, nt):
        assert "vmovss" not in asm                       # no scalar moves
        assert len(re.findall(r"\bv(perm[ti]2ps|unpck[lh]p[sd]|shuff?\w*)\b", asm)) <= 64
    assert "vmovnt" not in plain
    assert len(re.findall(r"\bvmovnt\w+\s+%zmm", nt)) == 16


@pytest.mark.skipif(simd.HOST_VECTOR_BYTES != 32, reason="an AVX2 host (16 vector registers)")
def test_wide_networks_run_as_row_groups(monkeypatch):
    """With 16 registers, a 32-register network runs as two independent row groups: LLVM
    then spills far less (in cache, s8 64x16 tiles went from 20 to 50 GB/s on Zen 3)."""
    assert simd._row_groups(32, 32, 6, 4) == 2          # s8 64x16: two 32x16 groups
    assert simd._row_groups(16, 32, 6, 3) == 1          # s8 64x8 fits
    assert simd._row_groups(64, 8, 4, 5) == 4           # f32 16x32: four 4x32 groups
    assert simd._row_groups(64, 32, 1, 11) == 1         # never fewer than 2 rows a group

    def stack_refs(groups_on: bool) -> int:
        monkeypatch.setattr(simd, "GROUP_NET_REGS", 16 if groups_on else 0)
        t = simd._make_tile.__wrapped__(64, 16, "s8", "s8", 64, 16, False, False, 32, False)
        return len(re.findall(r"\(%rsp\)", _asm_of(t, "s8", "s8")))

    grouped, whole = stack_refs(True), stack_refs(False)
    assert grouped < 0.7 * whole, (grouped, whole)


@pytest.mark.skipif(simd.HOST_VECTOR_BYTES < 32, reason="needs AVX2+")
def test_asm_nt_variants():
    for args, kw in (((16, 16, "f32", "bf16"), dict(nt=True, rows_contiguous=True)),
                     ((16, 16, "bf16", "f32"), dict(nt=True)),
                     ((64, 64, "u8", "u8"), dict(nt=True))):
        asm = _asm_of(tile(*args, **kw), args[2], args[3])
        assert "vmovnt" in asm, args


def test_network_sizes():
    """Shuffle counts of the planned networks (LLVM IR level) stay at the known optimum."""
    from llvmlite import ir

    def count(R, V, s, d, vbytes, **kw):
        mod = ir.Module()
        dty = as_dtype(d)
        fnty = ir.FunctionType(ir.VoidType(), [simd._cv.storage_ir_type(s).as_pointer(),
                                               simd._cv.storage_ir_type(d).as_pointer()])
        fn = ir.Function(mod, fnty, "f")
        b = ir.IRBuilder(fn.append_basic_block())
        i64 = ir.IntType(64)
        simd._emit_tile(b, fn.args[0], ir.Constant(i64, 0), ir.Constant(i64, V), fn.args[1],
                        ir.Constant(i64, 0), ir.Constant(i64, R), R=R, V=V, s=as_dtype(s),
                        d=dty, Rv=R, Vv=V, nt=False, rows_contiguous=kw.get("rc", False),
                        vbytes=vbytes)
        b.ret_void()
        return str(mod).count("shufflevector")

    assert count(16, 16, "f32", "f32", 64) == 64          # 4 riffles x 16
    # AVX2: rows split into ymm halves (32), 3 one-instruction stages x 32 (unpcklps,
    # unpcklpd, vperm2f128 style), halves joined again for the 64-byte columns (16); LLVM folds
    # the split/join into the loads and stores, leaving the 96 network shuffles.
    assert count(16, 16, "f32", "f32", 32) == 32 + 3 * 32 + 16
    assert count(8, 16, "f32", "f32", 64, rc=True) == 24
    assert count(16, 8, "f32", "f32", 64) == 8 + 24       # pack pairs + 3 unriffles x 8


# ---------------------------------------------------------------------------------------------
# Rows >= Rv and columns >= Vv are never read (guard page after the last element read)
# ---------------------------------------------------------------------------------------------

@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mprotect via libc")
def test_no_reads_beyond_rv_vv():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    page = mmap.PAGESIZE
    keep = []
    cases = []
    for (R, V, Rv, Vv, s, d) in ((16, 16, 16, 13, "f32", "f32"), (16, 16, 9, 16, "f32", "bf16"),
                                 (64, 64, 40, 37, "u8", "u8"), (16, 32, 16, 30, "bf16", "f32"),
                                 (3, 16, 2, 16, "f32", "f32"), (16, 3, 16, 1, "f32", "s8"),
                                 (16, 3, 13, 3, "f32", "f32"), (16, 5, 16, 5, "u8", "f32"),
                                 (16, 7, 16, 7, "f32", "f32"), (16, 7, 2, 7, "f32", "f32"),
                                 (16, 14, 5, 14, "bf16", "bf16"), (16, 6, 16, 6, "f32", "bf16")):
        c = Case(R, V, s, d, Rv=Rv, Vv=Vv, dense=Vv == V and V * as_dtype(s).size < 32)
        esz = as_dtype(s).size
        need = (c.soff + (Rv - 1) * c.sstride + Vv) * esz
        n = -(-need // page) * page
        mm = mmap.mmap(-1, n + page)
        buf = np.frombuffer(mm, np.uint8)
        assert libc.mprotect(buf.ctypes.data + n, page, 0) == 0
        start = n - need                                 # last element read ends the page
        src = buf[start:n].view(as_dtype(s).storage)
        src[:] = rand_storage(s, src.size)
        c.src = src
        keep.append((mm, buf))
        cases.append(c)
    check_group(cases)
    for mm, buf in keep:                                 # make the pages writable before unmap
        libc.mprotect(buf.ctypes.data, len(mm), 3)


# ---------------------------------------------------------------------------------------------
# API checks
# ---------------------------------------------------------------------------------------------

def test_memoized_and_validation():
    assert tile(16, 16, "f32", "f32") is tile(16, 16, as_dtype("f32"), "f32", Rv=16)
    assert tile(16, 16, "f32", "f32") is not tile(16, 16, "f32", "f32", nt=True)
    with pytest.raises(ValueError):
        tile(8, 16, "f32", "f32", nt=True)               # 32-byte rows: no NT
    tile(8, 16, "f32", "f32", nt=True, rows_contiguous=True)  # 512-byte block: fine
    tile(3, 16, "f32", "f32", nt=True, rows_contiguous=True)  # 192 bytes = 3 lines: fine
    with pytest.raises(ValueError):
        tile(3, 8, "f32", "f32", nt=True, rows_contiguous=True)   # 96 bytes
    with pytest.raises(ValueError):
        tile(65, 16, "f32", "f32")
    with pytest.raises(ValueError):
        tile(16, 16, "f32", "f32", Rv=17)
    with pytest.raises(ValueError):
        tile(16, 16, "f32", "f32", vbytes=48)
    assert simd.HOST_VECTOR_BYTES in (16, 32, 64)


def test_typing_errors():
    t = tile(4, 4, "f32", "bf16")

    @numba.njit
    def k(a, b):
        t(a, 0, 4, b, 0, 4)

    with pytest.raises(errors.TypingError):
        k(np.zeros(16, np.float64), np.zeros(16, np.uint16))   # src is not f32 storage
    with pytest.raises(errors.TypingError):
        k(np.zeros(16, np.float32), np.zeros(16, np.float32))  # dst is not bf16 storage


def test_sfence_emitted():
    @numba.njit
    def k(a):
        a[0] = 1.0
        sfence()

    k(np.zeros(1))
    if simd._cv._is_x86():
        assert "sfence" in k.inspect_asm(k.signatures[0])


def test_prefetch_lines_are_hints():
    """``simd.prefetch(n)`` emits one prefetch per line and never faults, even far outside
    the array (the planner prefetches the next group's block without a bounds check)."""
    pf = simd.prefetch(256)
    assert pf is simd.prefetch(256)
    for bad in (0, 32, 100, 64 * 1024):
        with pytest.raises(ValueError):
            simd.prefetch(bad)

    @numba.njit
    def k(a, off):
        pf(a, off)
        return a[0]

    a = np.ones(64, np.float32)
    for off in (0, 60, 1 << 40, -(1 << 40)):
        assert k(a, off) == 1.0
    if simd._cv._is_x86():
        asm = k.inspect_asm(k.signatures[0])
        assert len(re.findall(r"\bprefetcht0\b", asm)) == 4, asm
    pf2 = simd.prefetch(128, l2_only=True)  # large blocks: to L2, not evicting L1
    assert pf2 is not simd.prefetch(128)

    @numba.njit
    def k2(a, off):
        pf2(a, off)
        return a[0]

    assert k2(a, 1 << 40) == 1.0
    if simd._cv._is_x86():
        asm = k2.inspect_asm(k2.signatures[0])
        assert len(re.findall(r"\bprefetcht1\b", asm)) == 2 and "prefetcht0" not in asm, asm


AVX2_SCRIPT = r'''
import re, numpy as np, numba
from layoutjit import simd
from layoutjit.simd import tile
assert simd.HOST_VECTOR_BYTES == 32, simd.HOST_VECTOR_BYTES
t1 = tile(16, 16, "f32", "f32", nt=True)
t2 = tile(16, 16, "f32", "bf16", nt=True, rows_contiguous=True)
t3 = tile(3, 16, "f32", "f32", Vv=13)   # odd-sized loads (13 of 16 lanes) and stores (3)
@numba.njit
def k(a, b, c):
    for i in range(0, 256, 256):
        t1(a, 0, 16, b, 0, 16)
        t2(a, 0, 16, c, 0, 16)
@numba.njit
def k3(a, e):
    t3(a, 0, 16, e, 0, 5)
raw = np.zeros(4096, np.uint8); o = (-raw.ctypes.data) % 64
b = raw[o:o + 1024].view(np.float32); c = raw[o + 1024:o + 1536].view(np.uint16)
a = (np.arange(256, dtype=np.float32) * 1.37).astype(np.float32)
k(a, b, c)
asm = k.inspect_asm(k.signatures[0])
nt = re.findall(r"vmovnt\w+\s+%ymm\d+, (-?\d*)\((%\w+)\)", asm)
pairs = all({int(a[0] or 0), int(b[0] or 0)} == {int(a[0] or 0) // 64 * 64,
                                                 int(a[0] or 0) // 64 * 64 + 32}
            and a[1] == b[1] for a, b in zip(nt[::2], nt[1::2]))
print("ZMM", len(re.findall("zmm", asm)), "NTY", len(nt), "PAIRED", int(pairs))
print("B", b.tobytes().hex()); print("C", c.tobytes().hex())
e = np.full(80, -1.0, np.float32)
k3(a, e)
exp = np.full(80, -1.0, np.float32)
for col in range(16):
    for r in range(3):
        exp[col * 5 + r] = a[r * 16 + col] if col < 13 else 0.0
asm3 = k3.inspect_asm(k3.signatures[0])
print("E", int(np.array_equal(e, exp)), int("vmaskmov" in asm3),
      int(bool(re.search(r"vmaskmov\w*\s+%[xy]mm\d+, %[xy]mm\d+, [^\n]*\(", asm3))))
'''


@pytest.mark.skipif(not sys.platform.startswith("linux") or not simd._cv._is_x86()
                    or simd.HOST_VECTOR_BYTES < 32, reason="x86 with AVX2")
def test_avx2_target_subprocess():
    """Compiled for an AVX2-only CPU: 32-byte vectors, NT lines as two adjacent ymm stores."""
    env = dict(os.environ, NUMBA_CPU_NAME="haswell",
               NUMBA_CPU_FEATURES="+avx,+avx2,+f16c,+fma,+sse4.2,+sse4.1,+ssse3,+popcnt")
    env.pop("LAYOUTJIT_VECTOR_BYTES", None)
    p = subprocess.run([sys.executable, "-c", AVX2_SCRIPT], capture_output=True, text=True,
                       env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    out = dict(line.split(" ", 1) for line in p.stdout.strip().splitlines())
    # no zmm; 16 columns x 64 B + one 512-byte block = 48 ymm NT stores, in adjacent pairs that
    # fill one 64-byte line each
    assert out["ZMM"].split() == ["0", "NTY", "48", "PAIRED", "1"], out["ZMM"]
    # exact; no masked move (64-byte rows have no AVX masked load; stores never: slow on Zen)
    assert out["E"] == "1 0 0", out["E"]
    a = (np.arange(256, dtype=np.float32) * np.float32(1.37)).astype(np.float32)
    assert bytes.fromhex(out["B"]) == a.reshape(16, 16).T.copy().tobytes()
    assert bytes.fromhex(out["C"]) == ref_direct("f32", "bf16", a).reshape(16, 16).T.copy() \
        .tobytes()


# ---------------------------------------------------------------------------------------------
# gather: R source rows of V elements packed into R*V contiguous destination elements
# ---------------------------------------------------------------------------------------------

class GCase(Case):
    """One gather call: parameters, buffers, expected result."""

    def __init__(self, R, V, s, d, Rv=None, nt=False, vbytes=None, sstride=None, Vv=None,
                 dense=False):
        self.R, self.V, self.s, self.d = R, V, s, d
        self.Rv = R if Rv is None else Rv
        self.Vv = V if Vv is None else Vv
        self.dense = dense
        self.nt = nt
        self.vbytes = simd.HOST_VECTOR_BYTES if vbytes is None else vbytes
        self.t = gather(R, V, s, d, Rv=Rv, Vv=Vv, src_dense=dense, nt=nt, vbytes=self.vbytes)
        dsz = as_dtype(d).size
        if dense:  # the valid parts back to back
            sstride = self.Vv
        self.sstride = V + int(RNG.integers(0, 9)) if sstride is None else sstride
        self.soff = int(RNG.integers(0, 7))
        self.src = rand_storage(s, self.soff + R * self.sstride + V + 8)
        self.doff = (64 // dsz) * int(RNG.integers(0, 3)) if nt else int(RNG.integers(0, 9))
        n = self.doff + R * V + 80
        self.dst = aligned_empty(n, as_dtype(d).storage)
        self.dst.view(UINT[dsz])[:] = RNG.integers(0, 2 ** (8 * dsz), n, dtype=np.uint64) \
            .astype(UINT[dsz])

    def __repr__(self):
        return (f"gather {self.R}x{self.V} {self.s}->{self.d} Rv={self.Rv} Vv={self.Vv} "
                f"dense={self.dense} nt={self.nt} w={self.vbytes} sstride={self.sstride}")

    def call(self, k: int) -> str:
        return f"t{k}(s{k}, {self.soff}, {self.sstride}, d{k}, {self.doff})"

    def expected(self, before: np.ndarray) -> np.ndarray:
        exp = before.copy()
        r, c = np.meshgrid(np.arange(self.R), np.arange(self.V), indexing="ij")
        r, c = r.ravel(), c.ravel()
        live = (r < self.Rv) & (c < self.Vv)
        vals = np.zeros(r.size, as_dtype(self.d).storage)
        vals[live] = ref_direct(self.s, self.d, self.src[self.soff + r[live] * self.sstride
                                                         + c[live]])
        exp[self.doff + r * self.V + c] = vals
        return exp


G_F32_SHAPES = [(1, 16), (2, 8), (4, 4), (8, 2), (16, 1), (1, 64), (4, 16), (3, 16), (2, 24),
                (16, 16), (32, 8), (64, 1), (5, 7), (1, 1), (1, 3), (3, 5), (7, 1), (2, 40)]
G_DTYPES = ["f32", "f64", "f16", "bf16", "s32", "s8", "u8"]


def _gather_cases():
    cs = []
    for R, V in G_F32_SHAPES:
        cs.append(GCase(R, V, "f32", "f32"))
        if R * V * 4 % 64 == 0:
            cs.append(GCase(R, V, "f32", "f32", nt=True))
    for R, V in ((1, 64), (2, 32), (4, 16), (16, 4), (64, 1), (3, 5), (1, 13), (8, 8)):
        cs.append(GCase(R, V, "u8", "u8", nt=R * V % 64 == 0))
    for R, V in ((2, 16), (1, 32), (4, 8), (3, 7), (16, 4), (2, 64)):
        cs.append(GCase(R, V, "bf16", "bf16", nt=R * V * 2 % 64 == 0))
    for R, V in ((1, 8), (2, 4), (8, 1), (3, 3), (4, 16)):
        cs.append(GCase(R, V, "f64", "f64", nt=R * V * 8 % 64 == 0))
    # conversions
    for (R, V, s, d, nt) in ((2, 16, "f32", "bf16", True), (4, 8, "f32", "bf16", True),
                             (16, 1, "f32", "bf16", False), (3, 5, "f32", "bf16", False),
                             (4, 16, "f32", "s8", True), (1, 64, "f32", "s8", True),
                             (2, 8, "f32", "s8", False), (8, 8, "f32", "s8", True),
                             (2, 8, "f32", "f16", False), (2, 16, "f32", "f16", True),
                             (2, 8, "bf16", "f32", True), (1, 16, "bf16", "f32", True),
                             (4, 4, "bf16", "f32", True), (3, 5, "bf16", "f32", False),
                             (1, 16, "u8", "f32", True), (4, 4, "u8", "f32", True),
                             (2, 8, "u8", "f32", False), (16, 1, "u8", "f32", True),
                             (2, 8, "f16", "f32", True), (4, 16, "s32", "f32", True),
                             (2, 8, "f64", "f32", True), (2, 4, "f32", "f64", True)):
        cs.append(GCase(R, V, s, d, nt=nt))
    # rows >= Rv are zeros
    for (R, V, Rv, s, d, nt) in ((16, 1, 9, "f32", "f32", True), (2, 8, 1, "f32", "f32", True),
                                 (4, 16, 0, "f32", "f32", False), (3, 5, 2, "f32", "f32", False),
                                 (8, 8, 5, "u8", "u8", False), (4, 8, 3, "bf16", "f32", True),
                                 (4, 16, 1, "f32", "s8", True), (2, 24, 1, "f32", "bf16", False)):
        cs.append(GCase(R, V, s, d, Rv=Rv, nt=nt))
    # columns >= Vv are zeros (padded runs), read row by row or, dense, as whole vectors
    for (R, V, Vv, Rv, s, d, nt, dense) in (
            (2, 8, 3, None, "f32", "f32", True, False), (4, 16, 5, 3, "f32", "s8", True, False),
            (16, 8, 3, None, "f32", "f32", True, True), (16, 16, 3, 13, "f32", "bf16", True, True),
            (16, 4, 3, None, "f32", "f32", False, True), (16, 8, 3, None, "u8", "f32", True, True),
            (6, 16, 5, None, "f32", "s8", False, True), (3, 16, 15, 2, "f32", "f32", False, True),
            (16, 16, 1, None, "f32", "f32", True, True), (5, 7, 2, None, "bf16", "f32", False, False)):
        cs.append(GCase(R, V, s, d, Rv=Rv, nt=nt, Vv=Vv, dense=dense))
    # overlapping and broadcast rows (sstride < V) are fine: the source is only read
    cs.append(GCase(4, 8, "f32", "f32", sstride=3))
    cs.append(GCase(4, 4, "f32", "f32", sstride=0, nt=True))
    return cs


def test_gather():
    check_group(_gather_cases(), chunk=16)


def test_gather_all_dtype_pairs():
    """Every one of the 49 pairs, with odd rows (masked loads, odd tails) and with NT lines."""
    cs = []
    for i, s in enumerate(G_DTYPES):
        for j, d in enumerate(G_DTYPES):
            if (i + j) % 2:
                cs.append(GCase(3, 5, s, d, Rv=2 if j == 0 else None))
            else:
                dsz = as_dtype(d).size
                cs.append(GCase(2, 32 // dsz, s, d, nt=True))
    check_group(cs, chunk=17)


def test_gather_narrow_vectors():
    """vbytes=32 (each NT line as two 32-byte stores) and vbytes=16, compiled for this host."""
    cs = []
    for vb in (32, 16):
        for (R, V, s, d, nt) in ((2, 8, "f32", "f32", True), (1, 16, "f32", "f32", True),
                                 (4, 4, "f32", "f32", True), (16, 1, "f32", "f32", False),
                                 (1, 64, "f32", "f32", True), (5, 7, "f32", "f32", False),
                                 (2, 16, "f32", "bf16", True), (4, 16, "f32", "s8", True),
                                 (2, 8, "bf16", "f32", True), (4, 4, "u8", "f32", True),
                                 (2, 32, "u8", "u8", True), (3, 5, "f32", "s8", False)):
            cs.append(GCase(R, V, s, d, nt=nt, vbytes=vb))
    cs.append(GCase(4, 8, "bf16", "f32", Rv=3, nt=True, vbytes=32))
    check_group(cs, chunk=25)


def test_gather_without_masked_memops(monkeypatch):
    """Odd rows and tails as odd-sized vector loads/stores where masked ones are not native."""
    monkeypatch.setattr(simd, "_masked_native", lambda esize, nbytes, store=False: False)
    cases = [GCase(5, 7, "f32", "f32"), GCase(3, 5, "u8", "f32"), GCase(1, 13, "f32", "s8"),
             GCase(2, 24, "f32", "f32"), GCase(4, 3, "bf16", "bf16"),
             GCase(3, 7, "f32", "bf16", Rv=2), GCase(6, 8, "f32", "f32", Vv=3, dense=True),
             GCase(3, 16, "u8", "f32", Vv=5)]
    for c in cases:  # fresh intrinsics, generated with the patch in place
        c.t = simd._make_gather.__wrapped__(c.R, c.V, c.s, c.d, c.Rv, c.nt, c.vbytes, c.Vv,
                                            c.dense)
    fns = check_group(cases)
    for fn in fns:
        asm = fn.inspect_asm(fn.signatures[0])
        assert not re.search(r"\bv(p?maskmov|movup|movdqu)\w*\s[^\n]*\(%[^\n]*\{%k", asm)
        assert not re.search(r"\bv(movup|movdqu)\w*\s[^\n]*\{%k[^\n]*\(%", asm)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mprotect via libc")
def test_gather_no_reads_beyond_rows():
    """The last element read (row Rv-1, column V-1) ends a page followed by a PROT_NONE page."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    page = mmap.PAGESIZE
    keep, cases = [], []
    for (R, V, Rv, s, d, nt) in ((4, 3, 4, "f32", "f32", False), (3, 5, 3, "u8", "u8", False),
                                 (2, 24, 2, "f32", "f32", False), (2, 7, 2, "bf16", "f32", False),
                                 (1, 13, 1, "f32", "f32", False), (5, 3, 3, "f32", "f32", False),
                                 (4, 16, 2, "f32", "s8", True), (16, 1, 11, "f32", "f32", True),
                                 (1, 63, 1, "u8", "u8", False), (2, 8, 2, "f32", "f32", True),
                                 (3, 5, 3, "f64", "f32", False), (2, 7, 2, "f32", "f32", False),
                                 (2, 8, 2, "f32", "f32", "Vv3"), (16, 8, 16, "f32", "f32", "dense3"),
                                 (6, 16, 6, "f32", "s8", "dense5"), (16, 8, 16, "u8", "f32", "dense3")):
        vv = int(nt[-1]) if isinstance(nt, str) else None  # valid columns: reads end there
        c = GCase(R, V, s, d, Rv=Rv, nt=False if vv else nt, Vv=vv,
                  dense=isinstance(nt, str) and nt.startswith("dense"))
        esz = as_dtype(s).size
        need = (c.soff + (Rv - 1) * c.sstride + c.Vv) * esz
        n = -(-need // page) * page
        mm = mmap.mmap(-1, n + page)
        buf = np.frombuffer(mm, np.uint8)
        assert libc.mprotect(buf.ctypes.data + n, page, 0) == 0
        src = buf[n - need:n].view(as_dtype(s).storage)
        src[:] = rand_storage(s, src.size)
        c.src = src
        keep.append((mm, buf))
        cases.append(c)
    check_group(cases)
    for mm, buf in keep:                                 # make the pages writable before unmap
        libc.mprotect(buf.ctypes.data, len(mm), 3)


def _gather_asm(g, s, d):
    @numba.njit
    def k(a, b, so, ss, do):
        g(a, so, ss, b, do)

    a = np.zeros(4, as_dtype(s).storage)
    b = np.zeros(4, as_dtype(d).storage)
    k.compile((numba.typeof(a), numba.typeof(b)) + (numba.int64,) * 3)
    asm = k.inspect_asm(k.signatures[0])
    return asm[:asm.index("retq")]                       # the kernel, not the Python wrapper


@pytest.mark.skipif(not AVX512, reason="AVX-512 host")
def test_gather_asm():
    # two 32-byte rows -> one line: two loads, one concatenation, one 64-byte NT store
    asm = _gather_asm(gather(2, 8, "f32", "f32", nt=True), "f32", "f32")
    assert len(re.findall(r"\bvmovnt\w+\s+%zmm", asm)) == 1
    assert len(re.findall(r"\bvmovnt", asm)) == 1
    assert "vmovss" not in asm and "vmovups\t%" not in asm
    assert len(re.findall(r"\bv(perm\w*|shuf\w*|unpck\w*|insert\w*|blend\w*)\b", asm)) <= 1
    # four 16-byte rows, 4 lines of bf16 -> f32 and 1 line of f32 -> s8: one NT store per line
    for args, lines in (((4, 4, "f32", "f32"), 1), ((4, 16, "bf16", "f32"), 4),
                        ((4, 16, "f32", "s8"), 1), ((1, 16, "f32", "f32"), 1)):
        asm = _gather_asm(gather(*args, nt=True), args[2], args[3])
        assert len(re.findall(r"\bvmovnt\w+\s+%zmm", asm)) == lines, args
        assert len(re.findall(r"\bvmovnt", asm)) == lines, args
        assert "vmovss" not in asm, args
    plain = _gather_asm(gather(2, 8, "f32", "f32"), "f32", "f32")
    assert "vmovnt" not in plain and len(re.findall(r"\bvmovups\s+%zmm", plain)) == 1


NT_BYTES = {"xmm": 16, "ymm": 32, "zmm": 64}


@pytest.mark.skipif(simd.HOST_VECTOR_BYTES < 32, reason="needs AVX2+")
def test_gather_nt_never_lost():
    """Every destination byte is written by a non-temporal store, also where a narrowing
    conversion could be folded into a (temporal) truncating store (AVX-512 ``vpmovdw mem``,
    F16C ``vcvtps2ph mem``) when lines are stored in 32- or 16-byte parts."""
    cases = [(2, 16, "f32", "bf16", 32), (4, 16, "f32", "s8", 32), (2, 16, "u8", "f16", 32),
             (2, 32, "s32", "u8", 16), (1, 32, "f64", "bf16", 16), (4, 8, "f32", "f16", 16),
             (2, 8, "f32", "f32", 32), (4, 8, "f32", "bf16", 64), (1, 64, "s32", "s8", 64)]
    gs = [gather(R, V, s, d, nt=True, vbytes=vb) for R, V, s, d, vb in cases]
    ns = {f"g{k}": g for k, g in enumerate(gs)}
    args = ", ".join(f"s{k}, d{k}" for k in range(len(gs)))
    body = "\n".join(f"    g{k}(s{k}, 0, 64, d{k}, 0)" for k in range(len(gs)))
    exec(f"def k({args}):\n{body}\n", ns)
    fn = numba.njit(ns["k"])
    sig = []
    for _R, _V, s, d, _vb in cases:
        sig += [numba.typeof(np.zeros(4, as_dtype(s).storage)),
                numba.typeof(np.zeros(4, as_dtype(d).storage))]
    fn.compile(tuple(sig))
    asm = fn.inspect_asm(fn.signatures[0])
    asm = asm[:asm.index("retq")]
    got = sum(NT_BYTES[r] for r in re.findall(r"\bvmovnt\w+\s+%([xyz]mm)", asm))
    assert got == sum(R * V * as_dtype(d).size for R, V, s, d, vb in cases)


def test_gather_memoized_and_validation():
    assert gather(2, 8, "f32", "f32") is gather(2, 8, as_dtype("f32"), "f32", Rv=2)
    assert gather(2, 8, "f32", "f32") is not gather(2, 8, "f32", "f32", nt=True)
    assert gather(2, 8, "f32", "f32", Vv=8) is gather(2, 8, "f32", "f32")
    gather(3, 16, "f32", "f32", nt=True)                  # 192 bytes = 3 lines
    gather(1, 64, "u8", "u8", nt=True, vbytes=32)
    gather(2, 96, "s8", "s8", nt=True)                    # runs up to MAX_GATHER (128)
    for args, kw in (((1, 8, "f32", "f32"), dict(nt=True)),      # 32 bytes
                     ((3, 5, "f32", "f32"), dict(nt=True)),
                     ((2, 16, "f32", "bf16"), dict(nt=True, Rv=1)),  # 64 bytes: fine
                     ((65, 1, "f32", "f32"), {}), ((1, 129, "u8", "u8"), {}),
                     ((0, 4, "f32", "f32"), {}), ((2, 8, "f32", "f32"), dict(Rv=3)),
                     ((2, 8, "f32", "f32"), dict(vbytes=8)),
                     ((2, 8, "f32", "f32"), dict(Vv=0)), ((2, 8, "f32", "f32"), dict(Vv=9))):
        if args == (2, 16, "f32", "bf16"):
            gather(*args, **kw)
            continue
        with pytest.raises(ValueError):
            gather(*args, **kw)
    g = gather(2, 4, "f32", "bf16")

    @numba.njit
    def k(a, b):
        g(a, 0, 4, b, 0)

    with pytest.raises(errors.TypingError):
        k(np.zeros(8, np.float64), np.zeros(8, np.uint16))
    with pytest.raises(errors.TypingError):
        k(np.zeros(8, np.float32), np.zeros(8, np.float32))


GATHER_AVX2_SCRIPT = r"""
import re, numpy as np, numba
from layoutjit import simd
from layoutjit.simd import gather, sfence
assert simd.HOST_VECTOR_BYTES == 32, simd.HOST_VECTOR_BYTES
g1 = gather(2, 8, "f32", "f32", nt=True)
g2 = gather(1, 16, "f32", "f32", nt=True)
g3 = gather(2, 16, "f32", "bf16", nt=True)
g4 = gather(4, 16, "f32", "s8", nt=True)
g5 = gather(5, 7, "f32", "f32")                # masked (vmaskmovps) loads, odd-sized tail store
@numba.njit
def k(a, b, c, d, e):
    g1(a, 3, 20, b, 0)
    g2(a, 5, 0, b, 16)
    g3(a, 7, 33, c, 0)
    g4(a, 1, 40, d, 0)
    g5(a, 2, 9, e, 1)
    sfence()
raw = np.zeros(4096, np.uint8); o = (-raw.ctypes.data) % 64
b = raw[o:o + 128].view(np.float32); c = raw[o + 128:o + 192].view(np.uint16)
d = raw[o + 192:o + 256].view(np.int8)
e = np.full(40, -1.0, np.float32)
a = (np.arange(256, dtype=np.float32) * 1.37 - 150).astype(np.float32)
k(a, b, c, d, e)
asm = k.inspect_asm(k.signatures[0])
asm = asm[:asm.index("retq")]
nt = re.findall(r"vmovnt\w+\s+%([xyz]mm)\d+, (-?\d*)(\([^)]*\))", asm)
offs = [(reg, int(off or 0), base) for reg, off, base in nt]
paired = all(x[0] == y[0] == "ymm" and x[2] == y[2] and x[1] // 64 == y[1] // 64
             and {x[1] % 64, y[1] % 64} == {0, 32} for x, y in zip(offs[::2], offs[1::2]))
print("ZMM", len(re.findall("zmm", asm)), "NTY", len(nt), "PAIRED", int(paired),
      "MASKED", int("vmaskmov" in asm),
      "MSTORE", int(bool(re.search(r"vmaskmov\w*\s+%[xy]mm\d+, %[xy]mm\d+, [^\n]*\(", asm))))
for name, x in (("B", b), ("C", c), ("D", d), ("E", e)):
    print(name, x.tobytes().hex())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or not simd._cv._is_x86()
                    or simd.HOST_VECTOR_BYTES < 32, reason="x86 with AVX2")
def test_gather_avx2_target_subprocess():
    """Compiled for an AVX2-only CPU: each of the 4 NT lines is two adjacent 32-byte stores
    (in program order), no zmm; odd rows use AVX masked loads, odd-sized stores."""
    env = dict(os.environ, NUMBA_CPU_NAME="haswell",
               NUMBA_CPU_FEATURES="+avx,+avx2,+f16c,+fma,+sse4.2,+sse4.1,+ssse3,+popcnt")
    env.pop("LAYOUTJIT_VECTOR_BYTES", None)
    p = subprocess.run([sys.executable, "-c", GATHER_AVX2_SCRIPT], capture_output=True,
                       text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    out = dict(line.split(" ", 1) for line in p.stdout.strip().splitlines())
    assert out["ZMM"].split() == ["0", "NTY", "8", "PAIRED", "1", "MASKED", "1", "MSTORE", "0"], \
        out["ZMM"]
    a = (np.arange(256, dtype=np.float32) * 1.37 - 150).astype(np.float32)

    def rows(soff, sstride, R, V):
        return np.concatenate([a[soff + r * sstride:soff + r * sstride + V] for r in range(R)])

    exp_b = np.concatenate([rows(3, 20, 2, 8), rows(5, 0, 1, 16)])
    assert bytes.fromhex(out["B"]) == exp_b.tobytes()
    assert bytes.fromhex(out["C"]) == ref_direct("f32", "bf16", rows(7, 33, 2, 16)).tobytes()
    assert bytes.fromhex(out["D"]) == ref_direct("f32", "s8", rows(1, 40, 4, 16)).tobytes()
    exp_e = np.full(40, -1.0, np.float32)
    exp_e[1:36] = rows(2, 9, 5, 7)
    assert bytes.fromhex(out["E"]) == exp_e.tobytes()


def test_tile_post_ops_validation_and_values():
    with pytest.raises(ValueError, match="post op"):
        tile(16, 16, "f32", "f32", post=(("relu", -1.0),))
    with pytest.raises(ValueError, match="post op"):
        tile(16, 16, "f32", "bf16", post=(("relu", 0.0),))
    assert tile(16, 16, "f32", "f32", post=(("relu", 0.0),)) is not tile(16, 16, "f32", "f32")
    c = Case(16, 16, "f32", "f32", Rv=13, Vv=11)
    c.t = tile(16, 16, "f32", "f32", Rv=13, Vv=11, post=(("relu", 0.5),))
    before = c.dst.copy()
    fn, _ = run_group([c])
    exp = c.expected(before)
    live = np.zeros(exp.size, bool)
    r, cc = np.meshgrid(np.arange(16), np.arange(16), indexing="ij")
    live[c.doff + cc.ravel() * c.dstride + r.ravel()] = True
    v = exp[live]
    with np.errstate(invalid="ignore"):  # random bit patterns: NaNs stay NaNs
        exp[live] = np.where(v > 0, v, v * np.float32(0.5))
    np.testing.assert_array_equal(c.dst.view(np.uint32), exp.view(np.uint32))


@pytest.mark.parametrize("dt, V, hint", [("f32", 16, "prefetcht0"), ("bf16", 32, "prefetcht0"),
                                         ("bf16", 16, "prefetcht1"), ("f32", 8, "prefetcht1")])
def test_tile_shift_row_prefetch_level(dt, V, hint):
    """tile_shift prefetches its source rows ahead: to all levels when a tile reads whole
    lines of its rows, to L2 only when it reads part of each line (bf16 32x16, f32 16x8:
    32 B) and comes back to it for the next block."""
    if not simd._cv._is_x86() or not simd.tile_shift_supported(dt):
        pytest.skip(f"tile_shift of {dt} needs x86 AVX2 or AVX-512")
    ts = simd.tile_shift(dt, V=V)
    st = numba.from_dtype(np.dtype(np.float32 if dt == "f32" else np.uint16))
    arr = numba.types.Array(st, 1, "C")

    @numba.njit
    def k(src, dst, carry):
        ts(src, 0, 4096, dst, 0, 4096, carry, 0)

    k.compile((arr, arr, arr))
    asm = k.inspect_asm(k.signatures[0])
    other = "prefetcht1" if hint == "prefetcht0" else "prefetcht0"
    assert re.search(rf"\b{hint}\b", asm) and not re.search(rf"\b{other}\b", asm)


@pytest.mark.parametrize("dt, V", [("f32", 8), ("f32", 16), ("s32", 5), ("bf16", 32), ("f16", 16),
                                   ("s8", 8), ("u8", 16)])
def test_tile_shift_realigns_every_offset(dt, V):
    """``tile_shift``: for destination rows at every offset within a line (a row stride of
    R + 1 elements walks through all R), the stored line is the row's carry tail followed
    by the head of its new elements, at the line's aligned start, and the new elements
    become the carry; nothing else is written."""
    if not simd._cv._is_x86() or not simd.tile_shift_supported(dt):
        pytest.skip(f"tile_shift of {dt} needs x86 AVX2 or AVX-512")
    st = {"f32": np.float32, "s32": np.int32, "s8": np.int8, "u8": np.uint8}.get(dt, np.uint16)
    esz = np.dtype(st).itemsize
    R = 64 // esz
    dstride, sstride = R + 1, R + 5
    ts = simd.tile_shift(dt, V=V)
    rng = np.random.default_rng(7)
    top = 100 if esz == 1 else 16000  # finite as bf16 and f16 bits too
    src = rng.integers(0, top, R * sstride + V).astype(st)
    raw = np.zeros((V * dstride + 2 * R) * esz + 64, np.uint8)
    a0 = (-raw.ctypes.data) % 64
    dst = raw[a0:a0 + (V * dstride + 2 * R) * esz].view(st)
    carry = rng.integers(0, top, V * R).astype(st)
    doff = R  # rows start at R + c*(R + 1): every misalignment once over R rows
    exp = dst.copy()
    newc = carry.copy()
    for c in range(V):
        n = src[np.arange(R) * sstride + c]
        row = doff + c * dstride
        mis = row % R
        exp[row - mis:row - mis + R] = np.concatenate([carry[c * R + R - mis:c * R + R], n[:R - mis]])
        newc[c * R:c * R + R] = n

    @numba.njit
    def k(s, d, cy):
        ts(s, 0, sstride, d, doff, dstride, cy, 0)
        sfence()

    k(src, dst, carry)
    np.testing.assert_array_equal(dst, exp)
    np.testing.assert_array_equal(carry, newc)


def test_widening_odd_whole_block_tiles_store_row_by_row():
    """1-byte -> 4-byte whole-block tiles of 5-7 rows store each row (their whole vectors
    across rows were 9x slower); the same bytes as the numpy reference, guard bytes kept."""
    cases = [Case(5, 32, "s8", "f32", rc=True), Case(7, 32, "u8", "f32", rc=True),
             Case(6, 16, "s8", "s32", rc=True), Case(5, 32, "s8", "f32", Rv=3, Vv=29, rc=True)]
    check_group(cases)


def test_write_prefetch_is_a_hint():
    """``simd.prefetch(write=True)`` (``prefetchw``) compiles, changes nothing and never
    faults, past the end of the array included."""
    import numba as nb_

    from layoutjit.simd import prefetch

    pw = prefetch(64, write=True)
    assert pw is prefetch(64, write=True) and pw is not prefetch(64)

    @nb_.njit
    def touch(a):
        for i in range(0, a.size + 1024, 16):
            pw(a, i)
        return a.sum()

    a = np.arange(100, dtype=np.float32)
    assert touch(a) == np.arange(100, dtype=np.float32).sum()
    assert "prefetch" in touch.inspect_asm(touch.signatures[0])  # (prefetchw where the CPU has it)

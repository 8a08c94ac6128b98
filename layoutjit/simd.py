"""Register-tile micro-kernels: the SIMD building block of fast reorders.

:func:`tile` returns a Numba intrinsic that moves one R x V block: it loads R source rows of V
contiguous elements, converts them (``convert.direct`` semantics, as vectors), transposes them
in registers and stores V destination rows of R contiguous elements::

    t = tile(16, 16, "f32", "f32", nt=True)       # at module level of generated code

    @numba.njit
    def kernel(src, dst):                          # 1-D C-contiguous storage arrays
        ...
        t(src, soff, sstride, dst, doff, dstride)  # int64 element offsets / strides
        ...
        sfence()                                   # after NT stores, before others read dst

For r in [0, R) and c in [0, V)::

    dst[doff + c*dstride + r] = convert(src[soff + r*sstride + c])   if r < Rv and c < Vv
                              = 0 (of the dst type)                  otherwise

Source rows r >= Rv and columns c >= Vv are never read: loads are unaligned ``<Vv x T>``
vectors, or, for odd Vv where the target has them (AVX-512BW/VL; AVX for 4/8-byte elements),
fault-suppressing masked loads.  Nothing outside the V destination rows of R elements is written
(odd R: an odd-sized vector store or a masked store).

How it is built (all of it inside one intrinsic, so vectors never cross Numba's type system):

1. R' = R rounded up to a power of two, P = V rounded up likewise; rows are zero-padded to
   R' x P.  The rows are packed into (or split into) registers of ``vbytes`` bytes, so that the
   whole block is one array A[r*P + c] held in K registers.
2. A transpose of a 2**a x 2**b array is a rotation of its index bits by a, and one "riffle"
   (``new[2i] = zip_lo(reg[i], reg[i+K/2])``, ``new[2i+1] = zip_hi(...)``) rotates the index of
   the whole array left by one bit; its inverse ("unriffle": even/odd lanes of two adjacent
   registers) rotates right by one.  With 64-byte vectors the kernel does min(a, b) of these:
   log2(16) = 4 stages of 16 two-source shuffles for 16x16 f32 (64 ``vpermt2ps``).  With 32- or
   16-byte vectors on x86 a small search picks one-instruction stages instead (in-lane unpacks,
   64-bit interleaves, 128-bit lane swaps; a cross-lane zip costs two): 16x16 f32 with AVX2 is
   3 stages of 32 = 96 shuffles, the classic 8x8 network, instead of 256. With 16 vector
   registers (no AVX-512), a block in more than 16 registers is transposed as independent
   groups of rows (:func:`_row_groups`): one network on all of them spills.
3. The destination rows are then gathered from the registers (usually a register as it is or
   one half of it; any remaining permutation, e.g. for non-power-of-two R, is one shufflevector
   per output vector) and stored.

Narrowing conversions run before the network (after packing, so on full registers; the
network then moves the narrow type); widening ones run on the gathered output vectors.

Stores: plain stores are unaligned and always safe.  ``nt=True`` gives ``!nontemporal`` stores
with ``align 64``: the caller guarantees that every destination row start
``dst + doff + c*dstride`` is 64-byte aligned and that ``R*dst_size`` is a multiple of 64, or,
with ``rows_contiguous=True`` (the caller guarantees ``dstride == R``), that the block start is
64-byte aligned and ``R*V*dst_size`` is a multiple of 64; the kernel then stores the block as
consecutive full 64-byte vectors.  A 64-byte store is written as one vector even when
``vbytes == 32``, which LLVM splits into two adjacent 32-byte stores (never half-line NT stores).
NT stores to unaligned addresses fault (#GP): check alignment at run time before choosing an
``nt`` variant.  Call :func:`sfence` at the end of each parallel chunk that used NT stores.

:func:`gather` is the transpose-free sibling for layouts that are both contiguous only in short
runs (nChw16c -> nChw8c: runs of 8 f32; nhwc -> nChw16c: runs of 16): it packs R source rows of
V elements into R*V contiguous destination elements, so that a kernel can write whole 64-byte
lines (and use NT stores) from runs shorter than a line::

    g = gather(2, 8, "f32", "f32", nt=True)        # two 32-byte runs -> one 64-byte line
    g(src, soff, sstride, dst, doff)               # dst[doff + r*8 + c] = src[soff + r*sstride + c]
"""

from __future__ import annotations

import functools
import os

from llvmlite import ir
from numba import types
from numba.core import cgutils, errors
from numba.extending import intrinsic

from . import convert as _cv
from .dtypes import DataType, as_dtype

__all__ = ["HOST_VECTOR_BYTES", "host_vector_bytes", "ISA_VECTOR_BYTES", "isa_vector_bytes",
           "tile", "tile_cols", "tile_rows", "tile_shift",
           "tile_shift_supported", "tile_stream_shift", "tile_stream_shift_supported",
           "copy_prefix", "copy_prefix_native",
           "gather", "sfence", "supports",
           "MAX_TILE"]

_I32 = ir.IntType(32)

#: Largest R and V accepted by :func:`tile` (compile time grows with R*V).
MAX_TILE = 64
#: longest row of a gather (1-byte runs of up to 128 elements, plan.LINES_MAX_RUN)
MAX_GATHER = 128


def isa_vector_bytes() -> int:
    """64 with avx512f+avx512bw, 32 with avx2, else 16, for the CPU Numba compiles for."""
    if not _cv._is_x86():
        return 16
    f = _cv.target_features()
    if "avx512f" in f and "avx512bw" in f:
        return 64
    if "avx2" in f:
        return 32
    return 16


def host_vector_bytes() -> int:
    """The vector width the kernels are planned for: the CPU's (:func:`isa_vector_bytes`), or
    ``LAYOUTJIT_VECTOR_BYTES`` (16, 32 or 64). The override plans (tile shapes, store
    rules) as for another ISA while codegen still emits only what this CPU has, LLVM
    splitting wider vectors: it runs the AVX-512 plans on an AVX2 host, for their tests."""
    env = os.environ.get("LAYOUTJIT_VECTOR_BYTES", "").strip()
    if not env:
        return isa_vector_bytes()
    if env not in ("16", "32", "64"):
        raise ValueError(f"LAYOUTJIT_VECTOR_BYTES must be 16, 32 or 64, not {env!r}")
    return int(env)


#: Vector register width (bytes) of the CPU Numba/LLVM targets (``NUMBA_CPU_FEATURES`` aware).
ISA_VECTOR_BYTES: int = isa_vector_bytes()
#: Vector width the plans assume (``LAYOUTJIT_VECTOR_BYTES``, else ``ISA_VECTOR_BYTES``).
HOST_VECTOR_BYTES: int = host_vector_bytes()


# ---------------------------------------------------------------------------------------------
# Vectors with a symbolic record of which block element sits in each lane
# ---------------------------------------------------------------------------------------------

class _V:
    """An LLVM vector value plus, per lane, the id of the block element it holds."""

    __slots__ = ("val", "ids")

    def __init__(self, val: ir.Value, ids: tuple):
        self.val = val
        self.ids = ids

    def __len__(self) -> int:
        return len(self.ids)


def _mask(idx) -> ir.Constant:
    return _mask_cached(tuple(int(i) for i in idx))


@functools.lru_cache(maxsize=4096)
def _mask_cached(idx: tuple) -> ir.Constant:
    return ir.Constant(ir.VectorType(_I32, len(idx)), list(idx))


def _shuffle(builder: ir.IRBuilder, a: _V, b: _V | None, idx: list[int]) -> _V:
    """shufflevector(a, b or undef, idx) on values and ids alike (identity returns a)."""
    n = len(a)
    if b is None and list(idx) == list(range(n)):
        return a
    src_ids = a.ids + (b.ids if b is not None else (None,) * n)
    other = b.val if b is not None else ir.Constant(a.val.type, ir.Undefined)
    val = builder.shuffle_vector(a.val, other, _mask(idx))
    return _V(val, tuple(src_ids[i] for i in idx))


def _concat(builder: ir.IRBuilder, vs: list[_V]) -> _V:
    """Concatenate equal-length vectors (count padded to a power of two with undef)."""
    vs = list(vs)
    while len(vs) > 1:
        if len(vs) % 2:
            n = len(vs[-1])
            vs.append(_V(ir.Constant(vs[-1].val.type, ir.Undefined), (None,) * n))
        nxt = []
        for i in range(0, len(vs), 2):
            n = len(vs[i])
            nxt.append(_shuffle(builder, vs[i], vs[i + 1], list(range(2 * n))))
        vs = nxt
    return vs[0]


def _rechunk(builder: ir.IRBuilder, regs: list[_V], length: int) -> list[_V]:
    """Re-cut a list of equal-length vectors (one array) into vectors of ``length`` lanes."""
    cur = len(regs[0])
    if cur == length:
        return regs
    if cur < length:  # concatenate groups
        g = length // cur
        return [_concat(builder, regs[i:i + g]) for i in range(0, len(regs), g)]
    out = []  # split
    for r in regs:
        for s in range(0, cur, length):
            out.append(_shuffle(builder, r, None, list(range(s, s + length))))
    return out


def _riffle(builder: ir.IRBuilder, regs: list[_V]) -> list[_V]:
    """Perfect shuffle of the whole array: index rotated left by one bit."""
    k, n = len(regs), len(regs[0])
    h = n // 2
    lo = [i // 2 + (n if i % 2 else 0) for i in range(n)]
    hi = [h + x for x in lo]
    out = []
    for i in range(k // 2):
        a, b = regs[i], regs[i + k // 2]
        out.append(_shuffle(builder, a, b, lo))
        out.append(_shuffle(builder, a, b, hi))
    return out


def _unriffle(builder: ir.IRBuilder, regs: list[_V]) -> list[_V]:
    """Inverse perfect shuffle of the whole array: index rotated right by one bit."""
    k, n = len(regs), len(regs[0])
    even = [2 * i for i in range(n)]
    odd = [2 * i + 1 for i in range(n)]
    lows, highs = [], []
    for i in range(0, k, 2):
        lows.append(_shuffle(builder, regs[i], regs[i + 1], even))
        highs.append(_shuffle(builder, regs[i], regs[i + 1], odd))
    return lows + highs


class _Gather:
    """Builds vectors of wanted element ids out of a list of registers."""

    def __init__(self, builder: ir.IRBuilder, regs: list[_V]):
        self.b = builder
        self.regs = regs
        self.loc: dict = {}
        for ri, r in enumerate(regs):
            for lane, e in enumerate(r.ids):
                if e is not None and e not in self.loc:
                    self.loc[e] = (ri, lane)

    def _zero(self, ri: int) -> bool:
        v = self.regs[ri].val
        if not isinstance(v, ir.Constant):
            return False
        c = v.constant  # (a vector's: a tuple of element constants)
        if isinstance(c, (tuple, list)):
            return all(isinstance(x, ir.Constant) and x.constant in (0, None) for x in c)
        return c in (0, None)

    def __call__(self, want: list) -> _V:
        locs = [self.loc[e] for e in want]
        elem = self.regs[0].val.type.element
        if OPAQUE_ZERO_LANES and isinstance(elem, ir.IntType) and elem.width < 32 and _cv._is_x86():
            # 1- and 2-byte lanes from a zero register: taken from any live lane, then
            # masked by an AND (_keep_lanes: a shuffle with zeros may become SSE4a's extrq)
            zero = [self._zero(ri) for ri, _ in locs]
            if any(zero) and not all(zero):
                live = next(loc for loc, z in zip(locs, zero) if not z)
                v = self._pick([live if z else loc for loc, z in zip(locs, zero)])
                return _V(_keep_lanes(self.b, v.val, [not z for z in zero]), tuple(want))
        return self._pick(locs)

    def _pick(self, locs: list) -> _V:
        srcs = sorted({ri for ri, _ in locs})
        n = len(self.regs[0])
        if len(srcs) == 1:
            return _shuffle(self.b, self.regs[srcs[0]], None, [lane for _, lane in locs])
        if len(srcs) == 2:
            a, b = srcs
            return _shuffle(self.b, self.regs[a], self.regs[b],
                            [lane + (n if ri == b else 0) for ri, lane in locs])
        big = _concat(self.b, [self.regs[i] for i in srcs])
        pos = {ri: k for k, ri in enumerate(srcs)}
        return _shuffle(self.b, big, None, [pos[ri] * n + lane for ri, lane in locs])


# ---------------------------------------------------------------------------------------------
# Network planning for AVX2 / SSE registers
#
# With AVX-512 every two-source shuffle is one instruction (vpermt2*), so log2 riffles of the
# whole array are optimal.  With 16-byte lanes (AVX2, SSE) a cross-lane zip costs two
# instructions per output, while the in-lane unpacks, 64-bit interleaves and the 128-bit lane
# swap cost one.  The planner searches (Dijkstra) over the labels of the lane-index bits: each
# array position bit carries a logical bit (r_t or c_t); register-index bits are free to rename,
# so only the lane bits matter.  Every op pairs the registers that differ in one register bit k.
# ---------------------------------------------------------------------------------------------

def _op_cost(op: str, j: int, esize: int, m: int) -> int:
    """Instructions per output register of one pairwise op on x86 (AVX2/SSE, 16-byte lanes)
    for registers of 2**m elements of esize bytes."""
    lane_bits = _log2(max(1, 16 // esize))       # index bits inside a 16-byte lane
    if op == "unpack":                           # in-lane interleave (vpunpckl*/vunpck*)
        return 1
    if op == "riffle":                           # zip over the whole register
        return 1 if m <= lane_bits else 2
    if op == "unriffle":                         # even/odd lanes over the whole register
        if m <= lane_bits:
            return 1 if esize >= 4 else 3
        return 2 if esize >= 4 else 4
    if op == "swap":                             # exchange lane bit j with the register bit
        if j >= lane_bits:
            return 1                             # vperm2i128 / vinserti128
        chunk = (1 << j) * esize
        return 1 if chunk >= 8 else (2 if chunk == 4 else 3)
    raise AssertionError(op)


@functools.cache
def _plan_lanes(a: int, b: int, m: int, kbits: int, esize: int, vbytes: int):
    """Cheapest op list turning the lane labels of a row-major 2**a x 2**b array (registers of
    2**m lanes, 2**kbits registers) into those of its transpose; None if none is found."""
    import heapq

    n = a + b
    labels = [("c", t) for t in range(b)] + [("r", t) for t in range(a)]  # by position bit
    target = tuple(("r", t) if t < a else ("c", t - a) for t in range(m))
    tset = set(target)
    start = tuple(lab if lab in tset else "X" for lab in labels[:m])
    lane_q = _log2(max(1, 16 // esize))
    if m == 0 or n - m != kbits:
        return None

    def moves(state):
        in_reg = [t for t in target if t not in state]
        n_x_reg = (n - m) - len(in_reg)
        choices = in_reg + (["X"] if n_x_reg > 0 else [])
        for g in choices:
            for op in ("unpack", "riffle", "unriffle", "swap"):
                js = range(m) if op == "swap" else (None,)
                for j in js:
                    c = _op_cost(op, j if j is not None else 0, esize, m)
                    st = list(state)
                    if op == "unpack":
                        s_ = min(lane_q, m)
                        st[0:s_] = [g] + list(state[0:s_ - 1])
                    elif op == "riffle":
                        st = [g] + list(state[:-1])
                    elif op == "unriffle":
                        st = list(state[1:]) + [g]
                    else:
                        st[j] = g
                    yield c, tuple(st), (op, j, g)

    best = {start: 0}
    heap = [(0, 0, start, ())]
    tie = 0
    while heap:
        cost, _, state, path = heapq.heappop(heap)
        if state == target:
            return path
        if cost > best.get(state, 1 << 30) or len(path) > 2 * m + 2:
            continue
        for c, st, op in moves(state):
            nc = cost + c
            if nc < best.get(st, 1 << 30):
                best[st] = nc
                tie += 1
                heapq.heappush(heap, (nc, tie, st, path + (op,)))
    return None


def _pair_op(builder: ir.IRBuilder, regs: list[_V], k: int, m0: list[int], m1: list[int]
             ) -> list[_V]:
    """For each register pair (x, x | 2**k): out[x] = shuffle(m0), out[x | 2**k] = shuffle(m1)."""
    out = list(regs)
    bit = 1 << k
    for x in range(len(regs)):
        if x & bit:
            continue
        y = x | bit
        out[x] = _shuffle(builder, regs[x], regs[y], m0)
        out[y] = _shuffle(builder, regs[x], regs[y], m1)
    return out


def _run_plan(builder: ir.IRBuilder, regs: list[_V], plan, esize: int, a: int, b: int
              ) -> list[_V]:
    """Emit the ops of a :func:`_plan_lanes` plan (same label conventions)."""
    L = len(regs[0])
    m = _log2(L)
    labels = [("c", t) for t in range(b)] + [("r", t) for t in range(a)]
    lane, reg = labels[:m], labels[m:]
    tset = {("r", t) if t < a else ("c", t - a) for t in range(m)}
    Q = max(1, min(16 // esize, L))
    sq = _log2(Q)
    for op, j, g in plan:
        if g == "X":
            k = next(i for i, lab in enumerate(reg) if lab not in tset)
        else:
            k = reg.index(g)
        gl = reg[k]
        if op == "unpack":                       # in-lane interleave, lanes of Q elements
            lo, hi = [], []
            for pos in range(L):
                lam, w = divmod(pos, Q)
                i, beta = divmod(w, 2)
                src = lam * Q + i + (L if beta else 0)
                lo.append(src)
                hi.append(src + Q // 2)
            regs = _pair_op(builder, regs, k, lo, hi)
            reg[k] = lane[sq - 1]
            lane[0:sq] = [gl] + lane[0:sq - 1]
        elif op == "riffle":
            lo = [i // 2 + (L if i % 2 else 0) for i in range(L)]
            hi = [L // 2 + x for x in lo]
            regs = _pair_op(builder, regs, k, lo, hi)
            reg[k] = lane[m - 1]
            lane = [gl] + lane[:-1]
        elif op == "unriffle":
            regs = _pair_op(builder, regs, k, [2 * i for i in range(L)],
                            [2 * i + 1 for i in range(L)])
            reg[k] = lane[0]
            lane = lane[1:] + [gl]
        else:                                    # swap lane bit j with register bit k
            jb = 1 << j
            m0 = [p if not p & jb else L + (p & ~jb) for p in range(L)]
            m1 = [(p | jb) if not p & jb else L + p for p in range(L)]
            regs = _pair_op(builder, regs, k, m0, m1)
            reg[k], lane[j] = lane[j], gl
    return regs


def _pow2ceil(x: int) -> int:
    p = 1
    while p < x:
        p *= 2
    return p


def _log2(x: int) -> int:
    return x.bit_length() - 1


def _convert(builder: ir.IRBuilder, s: DataType, d: DataType, v: _V) -> _V:
    return _V(_cv.vec_convert(builder, s, d, v.val), v.ids)


def _masked_native(esize: int, nbytes: int, store: bool = False) -> bool:
    """Whether masked loads/stores are the way to move these vectors' first lanes:
    AVX-512BW/VL's (any element and width), and AVX's ``vmaskmovps``/``vmaskmovpd`` (4/8-byte
    elements) for loads. AVX's masked stores only with ``LAYOUTJIT_AVX_MASKED_STORES=1``: on
    Zen 3 a tile's masked stores took 5-10x the time of odd-sized vector stores (5x8 f32 tile
    46.5 -> 7.8 ns, s8 -> f32 3x32 367 -> 34 ns), while its masked loads beat odd-sized ones
    (`nChw8c -> nchw` C=7, 32x3 tiles: 1.14-1.23 -> 1.34-1.38x copy without them). Elsewhere
    odd lengths are loaded/stored as odd-sized vectors (LLVM splits them into power-of-two
    pieces: nothing past the n lanes is touched)."""
    if not _cv._is_x86():
        return False
    f = _cv.target_features()
    if "avx512f" in f and (esize >= 4 or "avx512bw" in f) and (nbytes >= 64 or "avx512vl" in f):
        return True
    return (AVX_MASKED_STORES or not store) and esize >= 4 and "avx" in f and nbytes in (16, 32)


#: Use AVX's masked stores for odd lengths where AVX-512 is absent (see ``_masked_native``).
AVX_MASKED_STORES = os.environ.get("LAYOUTJIT_AVX_MASKED_STORES", "0") == "1"


def code_switches() -> tuple:
    """The environment switches that shape the micro-kernels' machine code (not visible in
    a kernel's source: ``codegen.runtime_fingerprint`` hashes them into its header)."""
    return (AVX_MASKED_STORES, DENSE_OVERLAP, OVERLAP_GAP_4, OVERLAP_GAP_2, OPAQUE_ZERO_LANES, DENSE_ROW_RUNS,
            DENSE_ROW_RUNS_MAX_ROW_BYTES)


def _masked_load(builder: ir.IRBuilder, p: ir.Value, vty: ir.VectorType, n: int, esize: int
                 ) -> ir.Value:
    """``llvm.masked.load`` of the first n lanes of vty at p; the other lanes are zero."""
    mty = ir.VectorType(ir.IntType(1), vty.count)
    fn = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(vty, [vty.as_pointer(), _I32, mty, vty]),
        f"llvm.masked.load.{_cv._mangle(vty)}.p0")
    mask = ir.Constant(mty, [1 if i < n else 0 for i in range(vty.count)])
    return builder.call(fn, [builder.bitcast(p, vty.as_pointer()), ir.Constant(_I32, esize),
                             mask, ir.Constant(vty, None)])


def _masked_store_first(builder: ir.IRBuilder, v: ir.Value, p: ir.Value, n: ir.Value, esize: int) -> None:
    """``llvm.masked.store`` of the first ``n`` lanes of v at p, n a run-time integer (n <= 0:
    nothing); the other lanes are not written."""
    vty = v.type
    lane = vty.element
    cnt = builder.select(builder.icmp_signed("<", n, ir.Constant(n.type, 0)), ir.Constant(n.type, 0), n)
    if lane.width < cnt.type.width:
        cnt = builder.trunc(cnt, lane)  # (a lane holds the count: at most 64 lanes)
    mask = builder.icmp_signed("<", ir.Constant(vty, list(range(vty.count))), _splat(builder, cnt, vty.count))
    mty = ir.VectorType(ir.IntType(1), vty.count)
    fn = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(ir.VoidType(), [vty, vty.as_pointer(), _I32, mty]),
        f"llvm.masked.store.{_cv._mangle(vty)}.p0")
    builder.call(fn, [v, builder.bitcast(p, vty.as_pointer()), ir.Constant(_I32, esize), mask])


def _masked_store(builder: ir.IRBuilder, v: ir.Value, p: ir.Value, n: int, esize: int) -> None:
    """``llvm.masked.store`` of the first n lanes of v at p (the others are not written)."""
    vty = v.type
    mty = ir.VectorType(ir.IntType(1), vty.count)
    fn = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(ir.VoidType(), [vty, vty.as_pointer(), _I32, mty]),
        f"llvm.masked.store.{_cv._mangle(vty)}.p0")
    mask = ir.Constant(mty, [1 if i < n else 0 for i in range(vty.count)])
    builder.call(fn, [v, builder.bitcast(p, vty.as_pointer()), ir.Constant(_I32, esize), mask])


def _dense_regs(builder: ir.IRBuilder, sptr: ir.Value, soff, *, R: int, V: int, P: int, Rv: int,
                s: DataType, vbytes: int, runs: list[tuple[int, int, int]] | None = None) -> list[_V]:
    """Registers holding a tile whose Rv source rows are one run (``sstride == V``).

    The Rv*V elements are loaded as whole vectors (the last one partial); each
    lane records the id ``r*P + c`` of the element it holds, and rows Rv..R-1
    are a zero register: the destination rows are then gathered straight from
    these registers, with no per-row loads (rows of 3 elements: nhwc -> nchw, C=3).

    ``runs``: (first row, rows, source offset) of each run of rows that follow one another
    in the source, for rows placed by constant offsets (``src_rows``: oihw -> OIhw16o16i
    1x3, four runs of 16 rows of 3 elements); default one run of the Rv rows at 0.
    """
    ssz = s.size
    sty = _cv.storage_ir_type(s)
    vl = max(1, vbytes // ssz)
    regs = []
    for r0, nrows, base in (runs if runs is not None else [(0, Rv, 0)]):
        total = nrows * V
        for start in range(0, total, vl):
            n = min(vl, total - start)
            p = builder.gep(sptr, [builder.add(soff, ir.Constant(soff.type, base + start))], inbounds=True)
            vty = ir.VectorType(sty, vl)
            if n == vl:
                val = builder.load(builder.bitcast(p, vty.as_pointer()), align=ssz)
            elif _masked_native(ssz, vl * ssz):
                val = _masked_load(builder, p, vty, n, ssz)
            else:
                nty = ir.VectorType(sty, n)
                part = builder.load(builder.bitcast(p, nty.as_pointer()), align=ssz)
                val = builder.shuffle_vector(part, ir.Constant(nty, None),
                                             _mask([i if i < n else n for i in range(vl)]))
            ids = tuple((r0 + q // V) * P + q % V if q < total else None for q in range(start, start + vl))
            regs.append(_V(val, ids))
    zero_ids = [r * P + c for r in range(Rv, R) for c in range(V)]
    for i in range(0, len(zero_ids), vl):
        chunk = zero_ids[i:i + vl]
        regs.append(_V(ir.Constant(ir.VectorType(sty, vl), None),
                       tuple(chunk) + (None,) * (vl - len(chunk))))
    return regs


def _emit_tile(builder: ir.IRBuilder, sptr: ir.Value, soff, sstride, dptr: ir.Value, doff,
               dstride, *, R: int, V: int, s: DataType, d: DataType, Rv: int, Vv: int,
               nt: bool, rows_contiguous: bool, vbytes: int, src_dense: bool = False,
               post: tuple = (), cols: tuple | None = None, src_rows: tuple | _RowTable | None = None,
               src_over: bool = False) -> None:
    """Emit the whole tile at the builder's position (pointers are to storage elements).

    ``src_rows``: source row r starts at ``soff + src_rows[r]`` (``sstride`` unused), the
    offsets constants or a :class:`_RowTable` read at run time.

    ``cols``: (table pointer, offset): destination row c starts at ``doff + table[offset + c]``
    instead of ``doff + c*dstride`` (see :func:`tile_cols`).
    """
    ssz, P = s.size, _pow2ceil(V)
    # rows placed by constant offsets that come in runs (oihw -> OIhw16o16i 1x3: 16 rows of
    # 3 elements a run) are loaded run by run, like one run of dense rows below
    runs = _row_runs(src_rows, V, Rv) if (DENSE_ROW_RUNS and isinstance(src_rows, tuple) and Vv == V
                                          and V & (V - 1) > 0 and V * ssz <= DENSE_ROW_RUNS_MAX_ROW_BYTES
                                          and not src_over) else None
    dense_odd = src_dense and src_rows is None and Vv == V and V & (V - 1) > 0
    overlap = dense_odd and Rv * V >= P and _overlap_rows(V, P, ssz)
    if runs is not None or (dense_odd and Rv > 0 and V * ssz < vbytes and not overlap):
        # odd rows shorter than a register: several rows per load, gathered without a
        # network (16x3 f32: 27 vector instructions instead of 52). Power-of-two rows fill
        # the network's lanes exactly and it is cheaper than gathering each column from
        # every register (16x8: 62 vs 110; 16x16: 138 vs 420).
        gather = _Gather(builder, _dense_regs(builder, sptr, soff, R=R, V=V, P=P, Rv=Rv, s=s,
                                              vbytes=vbytes, runs=runs))
        _store_tile(builder, gather, dptr, doff, dstride, R=R, V=V, P=P, s=s, d=d, nt=nt,
                    rows_contiguous=rows_contiguous, vbytes=vbytes, converted=False, post=post,
                    cols=cols)
        return

    gather, converted = _tile_regs(builder, sptr, soff, sstride, R=R, V=V, s=s, d=d, Rv=Rv, Vv=Vv,
                                   vbytes=vbytes, src_rows=src_rows, src_over=src_over,
                                   src_overlap=overlap)
    _store_tile(builder, gather, dptr, doff, dstride, R=R, V=V, P=P, s=s, d=d, nt=nt,
                rows_contiguous=rows_contiguous, vbytes=vbytes, converted=converted, post=post,
                cols=cols)


#: Odd rows placed by constant offsets (``src_rows``) that follow one another in runs of at
#: least DENSE_ROW_RUNS_MIN rows on average are loaded run by run (``_row_runs``; 0: never).
#: oihw -> OIhw16o16i 1x3 reads 64 rows of 3 bytes a tile, four runs of 16 (48 B each):
#: 8 vector loads instead of 64 row loads. A/B on Zen 3 (AVX2), one process, ratio to copy
#: at 1 thread (2 threads): u8 65536x256x1x3 5.03 (6.04) -> 1.84 (1.98), bf16 2.30 (2.27)
#: -> 1.53 (1.45), s8 1x7 5.50 (3.40) -> 2.03 (1.25), u8 1x5 2.28 -> 1.92, u8 `oihw ->
#: OIhw4i16o4i` 1x3 5.78 (6.16) -> 2.85 (3.21); f32 1x3 and bf16 3x1 even.
DENSE_ROW_RUNS = os.environ.get("LAYOUTJIT_DENSE_ROW_RUNS", "1") != "0"
DENSE_ROW_RUNS_MIN = 4
#: ... of rows of at most this many bytes: each destination vector is gathered from about
#: V source registers (64x9 u8 lost 1.69 -> 5.15x copy; 64x3 u8 won 5.03 -> 1.84).
DENSE_ROW_RUNS_MAX_ROW_BYTES = 8


def _row_runs(src_rows: tuple, V: int, Rv: int) -> list[tuple[int, int, int]] | None:
    """(first row, rows, offset) of the runs of rows 0..Rv-1 that follow one another (row r+1
    at row r's offset + V), or None where there is a missing row or the runs are short."""
    rows = src_rows[:Rv]
    if not rows or any(o is None for o in rows):
        return None
    runs: list[tuple[int, int, int]] = []
    for r, o in enumerate(rows):
        if runs and runs[-1][2] + runs[-1][1] * V == o:
            r0, n, b = runs[-1]
            runs[-1] = (r0, n + 1, b)
        else:
            runs.append((r, 1, o))
    return runs if len(rows) >= DENSE_ROW_RUNS_MIN * len(runs) else None


#: Dense odd rows (``src_dense``) that fill most of their P lanes are read as overlapping
#: vectors and go through the network (``_tile_regs(src_overlap=True)``) instead of being
#: gathered from whole-vector loads (``_dense_regs``): at most P / OVERLAP_GAP_4 lanes
#: missing for 4-byte elements, P / OVERLAP_GAP_2 for 2-byte; never for 1-byte elements
#: (their byte shuffles gather cheaply). ``LAYOUTJIT_DENSE_OVERLAP=0``: never.
DENSE_OVERLAP = os.environ.get("LAYOUTJIT_DENSE_OVERLAP", "1") != "0"
OVERLAP_GAP_4 = 4
OVERLAP_GAP_2 = 8


def _overlap_rows(V: int, P: int, ssz: int) -> bool:
    """Whether dense rows of V elements (P lanes) are read as overlapping vectors.

    Measured in cache (Zen 3, AVX2), nhwc -> nchw into 48x224 planes, ratio to copy, gather
    -> overlapping rows: f32 C=7 2.09 -> 1.25, C=6 1.77 -> 1.48, C=5 1.40 -> 1.42; bf16 C=7
    3.02 -> 1.82, C=5 1.57 -> 2.12, C=12 1.33 -> 1.59; f32 -> s8 C=7 7.47 -> 2.63, f32 ->
    bf16 C=7 4.82 -> 4.06, bf16 -> f32 C=7 2.36 -> 2.01; s8 C=12 1.36 -> 2.04. In memory,
    ratio to copy at 1 thread (2 threads): `bcda -> abcd` 7x64x768x96 1.40 (1.05) -> 0.96
    (0.79), oneDNN 1.08 (1.10); nhwc -> nchw 32x7x224x224 1.56 (1.22) -> 1.02 (0.87); f32
    -> s8 64x7x112x112 2.99 (1.98) -> 1.40 (1.07).
    """
    gap = {4: OVERLAP_GAP_4, 2: OVERLAP_GAP_2}.get(min(ssz, 4))
    return DENSE_OVERLAP and V > 3 and gap is not None and (P - V) * gap <= P


class _RowTable:
    """Source row offsets read at run time: row r starts at ``soff + ptr[off + r]``."""

    def __init__(self, ptr: ir.Value, off: ir.Value):
        self.ptr, self.off = ptr, off


#: Zero 1- and 2-byte lanes by an AND with a mask LLVM cannot see (``_keep_lanes``);
#: ``LAYOUTJIT_OPAQUE_ZERO_LANES=0``: shuffles with zeros, as LLVM likes (for A/B runs).
OPAQUE_ZERO_LANES = os.environ.get("LAYOUTJIT_OPAQUE_ZERO_LANES", "1") != "0"


def _keep_lanes(builder: ir.IRBuilder, val: ir.Value, keep) -> ir.Value:
    """``val`` with its lanes from ``keep`` on zeroed (a row read past its data); ``keep``
    may also be one flag per lane.

    Lanes of 1 and 2 bytes are masked by an AND whose mask LLVM cannot see (an empty inline
    asm): as a shuffle with zeros, 8-byte pieces were lowered to SSE4a's ``extrq`` on AMD
    CPUs, which beside 256-bit AVX code took ~110 ns a call on Zen 3 (s8 -> f32 gathers of
    two 8-byte rows: 3 ns without it). Vectors of other sizes (not 2-16 bytes, a power of two)
    take a plain AND: no register constraint fits them, and extrq works on 8-byte pieces.
    """
    n = val.type.count
    elem = val.type.element
    flags = [j < keep for j in range(n)] if isinstance(keep, int) else list(keep)
    if OPAQUE_ZERO_LANES and isinstance(elem, ir.IntType) and elem.width < 32 and _cv._is_x86():
        mask = ir.Constant(val.type, [-1 if f else 0 for f in flags])
        bits = n * elem.width
        if bits == 128:
            asm = ir.InlineAsm(ir.FunctionType(val.type, [val.type]), "", "=x,0", side_effect=False)
            mask = builder.call(asm, [mask])
        elif bits in (16, 32, 64):  # (no vector register type that small): a general register
            ity = ir.IntType(bits)
            asm = ir.InlineAsm(ir.FunctionType(ity, [ity]), "", "=r,0", side_effect=False)
            mask = builder.bitcast(builder.call(asm, [builder.bitcast(mask, ity)]), val.type)
        return builder.and_(val, mask)
    zero = ir.Constant(val.type, None)
    return builder.shuffle_vector(val, zero, _mask([j if f else n + j for j, f in enumerate(flags)]))


def _tile_regs(builder: ir.IRBuilder, sptr: ir.Value, soff, sstride, *, R: int, V: int, s: DataType,
               d: DataType, Rv: int, Vv: int, vbytes: int, src_rows: tuple | _RowTable | None = None,
               src_over: bool = False, src_overlap: bool = False) -> tuple[_Gather, bool]:
    """Steps 1-3 of a tile: load the rows, convert (narrowing), transpose in registers.
    Returns the gatherer of element ids r*P + c and whether the values are converted.
    ``src_over``: each row may be read whole to P elements (see :func:`tile`).
    ``src_overlap``: the Rv rows are one run (``sstride == V``, Rv*V >= P): each row is
    read as P elements, its lanes past V from the next row (garbage that lands in
    destination rows past V, never stored); rows near the run's end are read from P
    elements before its end and shifted down, so nothing past the run is read."""
    ssz, dsz = s.size, d.size
    Rp, P = _pow2ceil(R), _pow2ceil(V)
    sty = _cv.storage_ir_type(s)
    i64 = soff.type
    # 1. load rows (only Rv rows of Vv elements), zero-pad to Rp rows of P lanes
    rows = []
    zero_row = ir.Constant(ir.VectorType(sty, P), None)
    for r in range(Rp):
        ids = tuple(r * P + c for c in range(P))
        if r >= Rv or Vv == 0 or (isinstance(src_rows, tuple) and src_rows[r] is None):
            rows.append(_V(zero_row, ids))
            continue
        if isinstance(src_rows, _RowTable):
            tp = builder.gep(src_rows.ptr, [builder.add(src_rows.off, ir.Constant(i64, r))], inbounds=True)
            off = builder.add(soff, builder.load(tp, align=8))
        elif src_rows is not None:
            off = builder.add(soff, ir.Constant(i64, src_rows[r]))
        elif src_overlap:
            start = min(r * V, Rv * V - P)
            off = builder.add(soff, ir.Constant(i64, start))
        else:
            off = builder.add(soff, builder.mul(sstride, ir.Constant(i64, r)))
        p = builder.gep(sptr, [off], inbounds=True)
        if src_overlap:
            val = builder.load(builder.bitcast(p, ir.VectorType(sty, P).as_pointer()), align=ssz)
            shift = r * V - start
            if shift:
                val = builder.shuffle_vector(val, val, _mask([min(c + shift, P - 1) for c in range(P)]))
        elif Vv < P and src_over:
            # the row's next P - Vv elements are readable (a padded block): one whole load,
            # the lanes from Vv on zeroed by a blend (a masked load costs twice the tile)
            val = _keep_lanes(builder, builder.load(builder.bitcast(p, ir.VectorType(sty, P).as_pointer()),
                                                    align=ssz), Vv)
        elif Vv < P and Vv & (Vv - 1) and _masked_native(ssz, P * ssz):
            val = _masked_load(builder, p, ir.VectorType(sty, P), Vv, ssz)  # zeros above Vv
        else:
            vty = ir.VectorType(sty, Vv)
            val = builder.load(builder.bitcast(p, vty.as_pointer()), align=ssz)
            if Vv < P:
                zero = ir.Constant(vty, None)
                val = builder.shuffle_vector(val, zero,
                                             _mask([c if c < Vv else Vv for c in range(P)]))
        rows.append(_V(val, ids))

    # 2. pack into full registers, convert first if the destination is not wider
    N = Rp * P
    regs = _rechunk(builder, rows, min(N, max(1, vbytes // ssz)))
    converted = False
    if dsz <= ssz and s != d:
        regs = [_convert(builder, s, d, r) for r in regs]
        regs = _rechunk(builder, regs, min(N, max(1, vbytes // dsz)))
        converted = True

    # 3. transpose network on the whole array: rotate the index by a = log2(Rp) bits
    a, b = _log2(Rp), _log2(P)
    esize = dsz if converted else ssz
    groups = _row_groups(len(regs), len(regs[0]), a, b)
    out: list[_V] = []
    n = len(regs) // groups
    for g in range(groups):
        out += _network(builder, regs[g * n:(g + 1) * n], a - _log2(groups), b, esize, vbytes)
    return _Gather(builder, out), converted


#: With 16 vector registers (AVX2, SSE), a network on more registers than this is split into
#: independent networks on groups of source rows (see :func:`_row_groups`; 0: never). A
#: constant, not an environment variable: it changes the machine code of a generated kernel
#: but not its source, which is the disk cache's key.
GROUP_NET_REGS = 16


def _row_groups(k: int, lanes: int, a: int, b: int) -> int:
    """How many independent row groups the network of a tile in k registers runs as.

    A destination row is the concatenation of its pieces from consecutive groups of source
    rows, so each group can be transposed alone and the destination rows gathered from all
    of them. With 16 vector registers (x86 without AVX-512), one network on 32 registers
    spills most of them. 1 keeps one network: AVX-512 has 32 registers, and there a 64-byte
    destination vector of s8 would span two groups (the grouped 64x32 s8 tile, compiled for
    Skylake-AVX512, had 4.5x the stack references of the single network).
    """
    if (not GROUP_NET_REGS or k <= GROUP_NET_REGS or not _cv._is_x86()
            or "avx512f" in _cv.target_features()):
        return 1
    groups = k // GROUP_NET_REGS
    while groups > 1 and (groups > (1 << a) or (k // groups) * lanes < (1 << b) * 2):
        groups //= 2
    return groups


def _network(builder: ir.IRBuilder, regs: list[_V], a: int, b: int, esize: int, vbytes: int
             ) -> list[_V]:
    """Transpose a row-major 2**a x 2**b array held in regs (index rotated by a bits)."""
    if len(regs) < 2:
        return regs
    plan = (_plan_lanes(a, b, _log2(len(regs[0])), _log2(len(regs)), esize, vbytes)
            if vbytes < 64 and _cv._is_x86() else None)
    if plan is not None:
        return _run_plan(builder, regs, plan, esize, a, b)
    if a <= b:
        for _ in range(a):
            regs = _riffle(builder, regs)
    else:
        for _ in range(b):
            regs = _unriffle(builder, regs)
    return regs


def _relu(builder: ir.IRBuilder, x: ir.Value, alpha: float) -> ir.Value:
    """oneDNN's relu on a float vector, bit for bit as ``eltwise_ops.lj_relu0`` / ``lj_relu``:
    alpha 0: ``0 if x <= 0 else x``; else ``x if x > 0 else x * alpha``."""
    zero = ir.Constant(x.type, None)
    if alpha == 0.0:
        return builder.select(builder.fcmp_ordered("<=", x, zero), zero, x)
    a = ir.Constant(x.type, [alpha] * x.type.count)
    return builder.select(builder.fcmp_ordered(">", x, zero), x, builder.fmul(x, a))


def _nt_value(builder: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """``v`` behind an empty inline-asm barrier, for a non-temporal store.

    A narrowed vector stored as it is may be folded by LLVM into a temporal truncating store
    (AVX-512 ``vpmovdb``/``vpmovdw mem``, F16C ``vcvtps2ph mem``), which drops the NT hint;
    the barrier hands the store a plain register instead (no instruction is emitted).
    """
    if not _cv._is_x86() or not isinstance(v.type, ir.VectorType):
        return v
    elem = v.type.element
    ebytes = (elem.width if isinstance(elem, ir.IntType) else
              64 if isinstance(elem, ir.DoubleType) else 32) // 8
    lanes = max(1, ISA_VECTOR_BYTES // ebytes)  # one register's worth of lanes
    pieces = v.type.count // lanes
    if v.type.count > lanes and (v.type.count % lanes or pieces & (pieces - 1)):
        return v
    constraint = "=v,0" if ISA_VECTOR_BYTES == 64 else "=x,0"

    def barrier(piece: ir.Value) -> ir.Value:
        asm = ir.InlineAsm(ir.FunctionType(piece.type, [piece.type]), "", constraint,
                           side_effect=False)
        return builder.call(asm, [piece])

    if v.type.count <= lanes:
        return barrier(v)
    return _cv._map_chunks(builder, v, lanes, barrier)


def _store_tile(builder: ir.IRBuilder, gather: _Gather, dptr: ir.Value, doff, dstride, *, R: int,
                V: int, P: int, s: DataType, d: DataType, nt: bool, rows_contiguous: bool,
                vbytes: int, converted: bool, post: tuple = (), cols: tuple | None = None) -> None:
    """4. gather destination vectors (element ids r*P + c), convert (widening case), apply
    the ``post`` ops, store."""
    dsz = d.size
    i64 = doff.type
    dty = _cv.storage_ir_type(d)
    md = builder.module.add_metadata([ir.Constant(_I32, 1)]) if nt else None

    def store(want: list, off) -> None:
        """Store the elements ``want`` (ids) at dst + off; odd lengths use a masked store of
        the next power of two where the target has one (never with NT: full lines only)."""
        n = len(want)
        full = n
        if n & (n - 1) and not nt and _masked_native(dsz, _pow2ceil(n) * dsz, store=True):
            full = _pow2ceil(n)
            want = list(want) + [want[0]] * (full - n)  # don't-care lanes
        v = gather(want)
        if not converted:
            v = _convert(builder, s, d, v)
        for _op, a in post:  # validated in tile(): relu only
            v = _V(_relu(builder, v.val, a), v.ids)
        p = builder.gep(dptr, [off], inbounds=True)
        if full != n:
            _masked_store(builder, v.val, p, n, dsz)
            return
        vty = ir.VectorType(dty, n)
        val = _nt_value(builder, v.val) if nt else v.val
        st = builder.store(val, builder.bitcast(p, vty.as_pointer()), align=64 if nt else dsz)
        if nt:
            st.set_metadata("nontemporal", md)

    # a whole-block tile widening 1-byte elements to 4-byte, R of 5-7, stores its rows one
    # by one: whole vectors across rows would gather each from every unconverted register
    # (s8 -> f32 5x32 on Zen 3: 423 ns a call against 48 row by row; s8 -> f32 nchw -> nhwc
    # C=7, 48x224 planes in cache, 32.1 -> 3.7x copy). Others lost: u8 -> f32 C=3 2.56 ->
    # 4.46, bf16 -> f32 C=5 0.98 -> 3.39.
    row_by_row = (rows_contiguous and not nt and not converted and s.size == 1 and dsz == 4
                  and 4 < R < 8)
    if rows_contiguous and not row_by_row:
        total = R * V
        chunk = 64 // dsz if nt else max(1, vbytes // dsz)
        for start in range(0, total, chunk):
            n = min(chunk, total - start)
            want = []
            for j in range(start, start + n):
                c, r = divmod(j, R)
                want.append(r * P + c)
            store(want, builder.add(doff, ir.Constant(i64, start)))
    else:
        for c in range(V):
            if cols is not None:
                tptr, toff = cols
                tp = builder.gep(tptr, [builder.add(toff, ir.Constant(i64, c))], inbounds=True)
                off = builder.add(doff, builder.load(tp, align=8))
            elif row_by_row:  # rows_contiguous: row c starts at c*R
                off = builder.add(doff, ir.Constant(i64, c * R))
            else:
                off = builder.add(doff, builder.mul(dstride, ir.Constant(i64, c)))
            store([r * P + c for r in range(R)], off)


def _realigned_tile(builder: ir.IRBuilder, sptr: ir.Value, soff, sstride, R: int, V: int, s, d,
                    vbytes: int, lanes: int):
    """What the realigning tiles (``tile_shift``, ``tile_stream_shift``) start from: the R x V
    tile's registers (``_tile_regs``: its gather and whether it converted), the register
    row pitch P, the destination line's vector type of ``lanes`` elements, and the
    non-temporal store metadata."""
    gather, converted = _tile_regs(builder, sptr, soff, sstride, R=R, V=V, s=s, d=d, Rv=R, Vv=V,
                                   vbytes=vbytes)
    vty = ir.VectorType(ir.IntType(8 * d.size), lanes)
    return gather, converted, _pow2ceil(V), vty, builder.module.add_metadata([ir.Constant(_I32, 1)])


def _emit_tile_shift(builder: ir.IRBuilder, sptr: ir.Value, soff, sstride, dptr: ir.Value, doff,
                     dstride, cptr: ir.Value, coff, *, R: int, V: int, s: DataType, d: DataType) -> None:
    """An R x V tile (R = one destination line of elements) whose destination rows are
    realigned onto whole lines.

    Row c's R new elements N (destination offset ``doff + c*dstride``, which is
    ``mis`` elements past a 64-byte line) join the previous R of that row, C, kept
    at ``carry[coff + R*c]``: the line ``C[R-mis:] ++ N[:R-mis]`` (just N when mis =
    0) is stored non-temporally at ``doff + c*dstride - mis`` -- aligned -- by one
    two-source permute with AVX-512 (``vpermi2d`` / ``vpermi2w``), by a switch on mis to
    constant shuffles with AVX2 and for bytes on any ISA (:func:`_realign_switch`; the byte
    permute ``vpermi2b`` needs VBMI), and N becomes the carry.
    """
    dsz = d.size
    i64 = soff.type
    vbytes = 64 if ISA_VECTOR_BYTES >= 64 else 32
    for r in range(R):
        p = builder.gep(sptr, [builder.add(soff, builder.mul(sstride, ir.Constant(i64, r)))], inbounds=True)
        _prefetch(builder, p, SHIFT_PREFETCH_BYTES // s.size, 2 if V * s.size < 64 else 3)
    gather, converted, P, vty, md = _realigned_tile(builder, sptr, soff, sstride, R, V, s, d, vbytes, R)
    for c in range(V):
        n = gather([r * P + c for r in range(R)])
        if not converted:
            n = _convert(builder, s, d, n)
        nv = builder.bitcast(n.val, vty)
        cp = builder.bitcast(builder.gep(cptr, [builder.add(coff, ir.Constant(i64, R * c))], inbounds=True),
                             vty.as_pointer())
        carry = builder.load(cp, align=dsz)
        roff = builder.add(doff, builder.mul(dstride, ir.Constant(i64, c)))
        rp = builder.gep(dptr, [roff], inbounds=True)
        mis = builder.and_(builder.lshr(builder.ptrtoint(rp, i64), ir.Constant(i64, _log2(dsz))),
                           ir.Constant(i64, R - 1))
        line = _realign(builder, carry, nv, mis, vbytes, byte_permute=False)
        lp = builder.gep(dptr, [builder.sub(roff, mis)], inbounds=True)
        st = builder.store(line, builder.bitcast(lp, vty.as_pointer()), align=64)
        st.set_metadata("nontemporal", md)
        builder.store(nv, cp, align=dsz)


def _realign(builder: ir.IRBuilder, carry: ir.Value, new: ir.Value, mis: ir.Value, vbytes: int,
             byte_permute: bool = True) -> ir.Value:
    """``(carry ++ new)[q - mis:2q - mis]`` for q-lane lines (``carry``, ``new``: q-lane
    integer vectors of one line) and mis in 0..q-1: one two-source permute with 64-byte
    vectors (``vpermi2d``/``vpermi2w``; ``vpermi2b`` with VBMI where ``byte_permute``),
    else a switch of constant shuffles (:func:`_realign_switch`)."""
    vty = carry.type
    q, esize = vty.count, vty.element.width // 8
    vbmi = byte_permute and "avx512vbmi" in _cv.target_features()
    name = {4: "llvm.x86.avx512.vpermi2var.d.512", 2: "llvm.x86.avx512.vpermi2var.hi.512",
            1: "llvm.x86.avx512.vpermi2var.qi.512" if vbmi else None}.get(esize) if vbytes == 64 else None
    if name is None:
        return _realign_switch(builder, carry, new, mis)
    perm = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vty, [vty, vty, vty]), name)
    h = builder.trunc(builder.sub(ir.Constant(mis.type, q), mis), vty.element)
    idx = builder.add(_splat(builder, h, q), ir.Constant(vty, list(range(q))))
    return builder.call(perm, [carry, idx, new])


def _realign_switch(builder: ir.IRBuilder, carry: ir.Value, new: ir.Value, mis: ir.Value) -> ir.Value:
    """``(carry ++ new)[R - mis:2R - mis]`` for R-lane lines and mis in 0..R-1: a switch on
    mis to R constant two-source shuffles (AVX2: a ``vperm2i128`` and a ``vpalignr`` per
    32-byte half). A row's mis is the same at every call site of a plan's column, or
    cycles with a period of a few tiles, so the jump is predicted."""
    R = carry.type.count
    fn = builder.function
    # (It replaced run-time rotations -- four ``vpermd`` and blends per 8 dwords, twice over
    # with a 16-bit funnel for words: about 10 and 25 register operations a line. Zen 3,
    # ratio to copy at 1 thread (2 threads): bf16 nchw -> nhwc C=300 1.47 -> 1.25 (1.33 ->
    # 1.16), f32 C=300 1.30 -> 1.13, f32 -> bf16 2.05 -> 1.82, f32 3001x2999 1.47 -> 1.24,
    # bf16 4001x3999 1.53 -> 1.13 (2.76 -> 0.93), f16 5000x3001 3.09 -> 1.11 (1.21 -> 0.90).)
    merge = fn.append_basic_block("realign.merge")
    default = fn.append_basic_block("realign.aligned")
    sw = builder.switch(builder.trunc(mis, _I32), default)
    incoming = []
    for m in range(1, R):
        bb = fn.append_basic_block(f"realign.{m}")
        sw.add_case(ir.Constant(_I32, m), bb)
        builder.position_at_end(bb)
        h = R - m
        v = builder.shuffle_vector(carry, new, ir.Constant(ir.VectorType(_I32, R), list(range(h, h + R))))
        incoming.append((v, builder.block))
        builder.branch(merge)
    builder.position_at_end(default)
    builder.branch(merge)
    builder.position_at_end(merge)
    phi = builder.phi(carry.type)
    phi.add_incoming(new, default)
    for v, bb in incoming:
        phi.add_incoming(v, bb)
    return phi


def _splat(builder: ir.IRBuilder, x: ir.Value, n: int) -> ir.Value:
    """An n-lane vector of the scalar x."""
    vty = ir.VectorType(x.type, n)
    v = builder.insert_element(ir.Constant(vty, ir.Undefined), x, ir.Constant(_I32, 0))
    return builder.shuffle_vector(v, ir.Constant(vty, ir.Undefined), ir.Constant(ir.VectorType(_I32, n), [0] * n))


#: tile_shift prefetches each source row this far ahead. Its 16 rows are too few read
#: streams for the memory system on their own: on a 3001x2999 f32 transpose at 2 threads
#: 45-55 GB/s without, 55-59 with (0.90-1.10x copy -> 0.81-0.85x); at 1 thread no change.
#: The 32-row tiles of 2-byte destinations (half a line of each source row) gain more, at
#: 1 thread (2 threads): bf16 4001x3999 1.77-1.89 -> 1.10-1.22 (1.30-2.33 -> 0.82-1.40),
#: 6000x6000 1.33 -> 1.00, f32 -> bf16 3001x2999 1.82-2.32 -> 1.43-1.48, f16 5000x3001
#: 1.66 -> 1.22 (1.36 -> 1.04); 512 or 1024 bytes ahead measured worse. (The plain register
#: tiles gain nothing from it: measured, left out there.)
#: Tiles that read part of each source line (2-byte: 32 B) come back to the line for their
#: next block: their row prefetches go to L2 only, not to evict those lines from L1. At 1
#: thread (2 threads), to all levels -> to L2: bf16 4001x3999 1.46 -> 1.16 (1.08 -> 0.90),
#: f16 5000x3001 1.47 -> 1.21 (2.14 -> 1.74); f32 (whole lines) 3001x2999 at 2 threads
#: 0.96-1.23 -> 1.14-1.40, so 4-byte tiles keep L1.
SHIFT_PREFETCH_BYTES = 256


def _prefetch(builder: ir.IRBuilder, p: ir.Value, elems: int, locality: int = 3, write: bool = False) -> None:
    """Software prefetch (read, or for a write: ``prefetchw``) of ``p + elems`` elements: to
    all cache levels (locality 3, ``prefetcht0``) or to L2 and beyond (2, ``prefetcht1``)."""
    i8p = ir.IntType(8).as_pointer()
    fn = builder.module.declare_intrinsic(
        "llvm.prefetch", fnty=ir.FunctionType(ir.VoidType(), [i8p, _I32, _I32, _I32]))
    q = builder.gep(p, [ir.Constant(ir.IntType(64), elems)], inbounds=False)
    builder.call(fn, [builder.bitcast(q, i8p), ir.Constant(_I32, int(write)), ir.Constant(_I32, locality),
                      ir.Constant(_I32, 1)])


@functools.cache
def _make_tile_shift(sname: str, dname: str, R: int, V: int):
    s, d = as_dtype(sname), as_dtype(dname)

    def impl(typingctx, src, soff, sstride, dst, doff, dstride, carry, coff):
        _expect_array(src, s, "src", "tile_shift")
        _expect_array(dst, d, "dst", "tile_shift")
        _expect_array(carry, d, "carry", "tile_shift")
        _expect_ints("tile_shift", soff, sstride, doff, dstride, coff)
        i64 = types.int64
        sig = types.void(src, i64, i64, dst, i64, i64, carry, i64)

        def codegen(context, builder, sig, args):
            sa = context.make_array(sig.args[0])(context, builder, args[0])
            da = context.make_array(sig.args[3])(context, builder, args[3])
            ca = context.make_array(sig.args[6])(context, builder, args[6])
            _emit_tile_shift(builder, sa.data, args[1], args[2], da.data, args[4], args[5],
                             ca.data, args[7], R=R, V=V, s=s, d=d)
            return context.get_dummy_value()

        return sig, codegen

    impl.__name__ = impl.__qualname__ = f"lj_tile_shift_{sname}_{dname}_{R}x{V}"
    impl.__module__ = __name__
    return intrinsic(impl)


def tile_shift_supported(dt, dst_dt=None) -> bool:
    """Whether :func:`tile_shift` exists for these storage types on this CPU: AVX-512 or AVX2
    and a destination of 2 or 4 bytes, or of 1 byte from the same type (``TILE_SHIFT_BYTES``)
    (``dst_dt`` defaults to ``dt``: no conversion)."""
    d = as_dtype(dt if dst_dt is None else dst_dt)
    if not _cv._is_x86() or not supports(dt, d):
        return False
    if ISA_VECTOR_BYTES not in (32, 64):
        return False
    return d.size in (2, 4) or (d.size == 1 and TILE_SHIFT_BYTES and as_dtype(dt) == d)


#: Whether :func:`tile_shift` also realigns 1-byte destinations of the source's type (64-row
#: tiles, one line of bytes a column; the switch of constant shuffles on any ISA: AVX-512's
#: byte permute of two sources needs VBMI) (``LAYOUTJIT_TILE_SHIFT_BYTES=0``: 2- and 4-byte
#: only). Zen 3 (AVX2), one process, ratio to copy at 1 thread (2 threads), 4 KB groups
#: through the stage -> registers: s8 `ndhwc -> ncdhw` 256x200x7x17x17 3.59 -> 2.11 (3.63 ->
#: 2.03), `ab -> ba` 2000003x64 2.75 -> 1.53 (1.96 -> 1.52), 2000003x40 2.55 -> 1.79 (1.92
#: -> 1.57), u8 `nCw16c -> ncw` 64x1024x1000 2.30 -> 1.90 (1.56 -> 1.27), 4000003x24 2.02
#: -> 1.70 (2.08 -> 1.57). Narrowing f32 -> s8 / u8 was a draw (3000x777 2.97 -> 3.30,
#: 3000x4096 4.39 -> 3.84): those keep the stage.
TILE_SHIFT_BYTES = os.environ.get("LAYOUTJIT_TILE_SHIFT_BYTES", "1") != "0"


def tile_shift(dt, dst_dt=None, *, V: int | None = None):
    """A (memoized) intrinsic ``ts(src, soff, sstride, dst, doff, dstride, carry, coff)``:
    an R x V transpose (R = 64 // destination size: one line; ``V`` defaults to R, up to
    ``MAX_TILE``: 32 for bf16 -> f32, whose source lines hold 32 elements) whose
    V destination rows are written as whole aligned non-temporal lines through a per-row
    carry of R elements (an array of the destination type); see :func:`_emit_tile_shift`.
    AVX-512 or AVX2 (:func:`tile_shift_supported`); the destination must be aligned to its
    element size."""
    d = as_dtype(dt if dst_dt is None else dst_dt)
    if not tile_shift_supported(dt, d):
        raise ValueError(f"tile_shift: needs AVX2 or AVX-512 and a 2- or 4-byte destination "
                         f"(or 1-byte of the same type), got {dt} -> {d}")
    R = 64 // d.size
    V = R if V is None else int(V)
    if not 1 <= V <= MAX_TILE:
        raise ValueError(f"tile_shift: V must be in 1..{MAX_TILE}, got {V}")
    return _make_tile_shift(str.__str__(as_dtype(dt)), str.__str__(d), R, V)


def _emit_tile_stream_shift(builder: ir.IRBuilder, sptr: ir.Value, soff, sstride, dptr: ir.Value, doff,
                            cptr: ir.Value, *, R: int, V: int, s: DataType, d: DataType, head: bool,
                            vbytes: int) -> None:
    """An R x V tile whose destination is one run of R*V elements (rows of R, ``dstride ==
    R``: a tile that writes whole blocks) starting ``mis`` elements past a 64-byte line,
    written as whole aligned non-temporal lines through a carry of one line.

    The run's k-th line of elements N_k (destination ``doff + k*q``) joins the previous
    one, C: ``C[q-mis:] ++ N_k[:q-mis]`` is stored at ``doff - mis + k*q`` (aligned), and
    N_k becomes the carry, kept at ``carry[0:q]`` between calls. ``head``: the first call
    of a run: its first line's elements go out by a masked plain store at ``doff`` (what
    lies before them belongs to someone else); the caller writes the last call's carry's
    last ``mis`` elements, and whatever follows, plainly.
    """
    dsz = d.size
    q = 64 // dsz
    i64 = soff.type
    gather, converted, P, vty, md = _realigned_tile(builder, sptr, soff, sstride, R, V, s, d, vbytes, q)
    cp = builder.bitcast(cptr, vty.as_pointer())
    carry = builder.load(cp, align=dsz)
    rp = builder.gep(dptr, [doff], inbounds=True)
    mis = builder.and_(builder.lshr(builder.ptrtoint(rp, i64), ir.Constant(i64, _log2(dsz))),
                       ir.Constant(i64, q - 1))
    base = builder.sub(doff, mis)
    for k in range(R * V // q):
        want = [(j % R) * P + j // R for j in range(k * q, (k + 1) * q)]
        n = gather(want)
        if not converted:
            n = _convert(builder, s, d, n)
        nv = builder.bitcast(n.val, vty)
        if k == 0 and head:  # the line's part from doff on
            _masked_store_first(builder, nv, rp, builder.sub(ir.Constant(i64, q), mis), dsz)
        else:
            line = _realign(builder, carry, nv, mis, vbytes)
            lp = builder.gep(dptr, [builder.add(base, ir.Constant(i64, k * q))], inbounds=True)
            st = builder.store(line, builder.bitcast(lp, vty.as_pointer()), align=64)
            st.set_metadata("nontemporal", md)
        carry = nv
    builder.store(carry, cp, align=dsz)


@functools.cache
def _make_tile_stream_shift(sname: str, dname: str, R: int, V: int, head: bool, vbytes: int):
    s, d = as_dtype(sname), as_dtype(dname)

    def impl(typingctx, src, soff, sstride, dst, doff, carry):
        _expect_array(src, s, "src", "tile_stream_shift")
        _expect_array(dst, d, "dst", "tile_stream_shift")
        _expect_array(carry, d, "carry", "tile_stream_shift")
        if dst.mutable is False or carry.mutable is False:
            raise errors.TypingError("tile_stream_shift: dst and carry must be writable")
        _expect_ints("tile_stream_shift", soff, sstride, doff)
        i64 = types.int64
        sig = types.void(src, i64, i64, dst, i64, carry)

        def codegen(context, builder, sig, args):
            sa = context.make_array(sig.args[0])(context, builder, args[0])
            da = context.make_array(sig.args[3])(context, builder, args[3])
            ca = context.make_array(sig.args[5])(context, builder, args[5])
            _emit_tile_stream_shift(builder, sa.data, args[1], args[2], da.data, args[4], ca.data,
                                    R=R, V=V, s=s, d=d, head=head, vbytes=vbytes)
            return context.get_dummy_value()

        return sig, codegen

    impl.__name__ = impl.__qualname__ = (f"lj_tile_stream_shift_{sname}_{dname}_{R}x{V}"
                                         + ("_head" if head else "") + f"_{vbytes}")
    impl.__module__ = __name__
    return intrinsic(impl)


def tile_stream_shift_supported(src_dt, dst_dt) -> bool:
    """Whether :func:`tile_stream_shift` exists for these storage types on this CPU: AVX-512 or
    AVX2 and a destination of 1, 2 or 4 bytes."""
    d = as_dtype(dst_dt)
    return bool(_cv._is_x86() and supports(src_dt, d) and ISA_VECTOR_BYTES in (32, 64) and d.size in (1, 2, 4))


def tile_stream_shift(R: int, V: int, src_dt, dst_dt, *, head: bool = False, vbytes: int = HOST_VECTOR_BYTES):
    """A (memoized) intrinsic ``t(src, soff, sstride, dst, doff, carry)``: an R x V transpose
    whose V destination rows of R elements are one run (``dstride == R``, as ``tile(...,
    rows_contiguous=True)``) that starts anywhere in a 64-byte line, written as whole aligned
    non-temporal lines through a one-line carry (``carry``: an array of at least 64 bytes of
    the destination type); see :func:`_emit_tile_stream_shift`. Successive calls must write
    successive runs. ``head=True``: the first call of such a sequence (its first line's
    elements stored plainly, masked). Needs ``R*V*dst_size`` a multiple of 64, the
    destination aligned to its element size, and :func:`tile_stream_shift_supported`."""
    s, d = as_dtype(src_dt), as_dtype(dst_dt)
    if not tile_stream_shift_supported(s, d):
        raise ValueError(f"tile_stream_shift: needs AVX2 or AVX-512 and a 1-, 2- or 4-byte "
                         f"destination, got {s} -> {d}")
    R, V, _rv, _vv, _post = _tile_args("tile_stream_shift", R, V, None, None, vbytes, (), d)
    if (R * V * d.size) % 64:
        raise ValueError(f"tile_stream_shift: R*V*dst_size ({R * V * d.size} bytes) must be a multiple of 64")
    return _make_tile_stream_shift(str.__str__(s), str.__str__(d), R, V, bool(head), int(vbytes))


def _expect_array(ty, dt: DataType, what: str, who: str = "tile"):
    want = _cv.storage_numba_type(dt)
    if not isinstance(ty, types.Array) or ty.ndim != 1 or ty.layout != "C":
        raise errors.TypingError(f"{who}: {what} must be a 1-D C-contiguous array of {want} "
                                 f"({dt} storage), got {ty}")
    if ty.dtype != want:
        raise errors.TypingError(f"{who}: {what} holds {ty.dtype}, expected {want} "
                                 f"({dt} storage)")


def _expect_ints(who: str, *ts, what: str = "offsets and strides") -> None:
    """Typing check of an intrinsic's integer arguments."""
    for t in ts:
        if not isinstance(t, types.Integer):
            raise errors.TypingError(f"{who}: {what} must be integers, got {t}")


@functools.cache
def _make_tile(R: int, V: int, sname: str, dname: str, Rv: int, Vv: int, nt: bool,
               rows_contiguous: bool, vbytes: int, src_dense: bool = False, post: tuple = (),
               src_rows: tuple | None = None, src_over: bool = False):
    s, d = as_dtype(sname), as_dtype(dname)
    params = dict(R=R, V=V, s=s, d=d, Rv=Rv, Vv=Vv, nt=nt, rows_contiguous=rows_contiguous,
                  vbytes=vbytes, src_dense=src_dense, post=post, src_rows=src_rows, src_over=src_over)

    def impl(typingctx, src, soff, sstride, dst, doff, dstride):
        _expect_array(src, s, "src")
        _expect_array(dst, d, "dst")
        if dst.mutable is False:
            raise errors.TypingError("tile: dst is read-only")
        _expect_ints("tile", soff, sstride, doff, dstride)
        i64 = types.int64
        sig = types.void(src, i64, i64, dst, i64, i64)

        def codegen(context, builder, sig, args):
            sa = context.make_array(sig.args[0])(context, builder, args[0])
            da = context.make_array(sig.args[3])(context, builder, args[3])
            _emit_tile(builder, sa.data, args[1], args[2], da.data, args[4], args[5], **params)
            return context.get_dummy_value()

        return sig, codegen

    name = (f"lj_tile_{R}x{V}_{sname}_{dname}"
            + (f"_rv{Rv}" if Rv != R else "") + (f"_vv{Vv}" if Vv != V else "")
            + ("_nt" if nt else "") + ("_rc" if rows_contiguous else "") + ("_sd" if src_dense else "")
            + "".join(f"_{op}{a!r}".replace(".", "p").replace("-", "m") for op, a in post)
            + (f"_sr{_short_hash(src_rows)}" if src_rows is not None else "")
            + ("_so" if src_over else "") + f"_w{vbytes}")
    impl.__name__ = impl.__qualname__ = name
    impl.__module__ = __name__
    impl.tile_params = dict(params, s=sname, d=dname)  # type: ignore[attr-defined]
    return intrinsic(impl)


def _tile_args(who: str, R: int, V: int, Rv: int | None, Vv: int | None, vbytes: int,
               post: tuple, d: DataType) -> tuple[int, int, int, int, tuple]:
    """The checks :func:`tile` and :func:`tile_cols` share: (R, V, Rv, Vv, post) normalized."""
    R, V = int(R), int(V)
    if not (1 <= R <= MAX_TILE and 1 <= V <= MAX_TILE):
        raise ValueError(f"{who}: R={R}, V={V}: both must be in 1..{MAX_TILE}")
    Rv = R if Rv is None else int(Rv)
    Vv = V if Vv is None else int(Vv)
    if not (0 <= Rv <= R and 0 <= Vv <= V):
        raise ValueError(f"{who}: need 0 <= Rv <= R and 0 <= Vv <= V (R={R}, V={V}, Rv={Rv}, "
                         f"Vv={Vv})")
    if vbytes not in (16, 32, 64):
        raise ValueError(f"{who}: vbytes={vbytes} must be 16, 32 or 64")
    post = tuple((str(op), float(a)) for op, a in post)
    for op, a in post:
        if op != "relu" or not 0.0 <= a < float("inf") or str.__str__(d) != "f32":
            raise ValueError(f"{who}: post op {(op, a)} unsupported (relu with a finite alpha >= 0, "
                             f"f32 destination)")
    return R, V, Rv, Vv, post


def tile(R: int, V: int, src_dt, dst_dt, *, Rv: int | None = None, Vv: int | None = None,
         nt: bool = False, rows_contiguous: bool = False, vbytes: int = HOST_VECTOR_BYTES,
         src_dense: bool = False, post: tuple = (), src_rows: tuple | None = None,
         src_over: bool = False):
    """A (memoized) Numba intrinsic ``t(src, soff, sstride, dst, doff, dstride)`` moving one
    R x V block; see the module docstring for the exact semantics and the NT preconditions.

    ``src``/``dst``: 1-D C-contiguous arrays of the storage dtypes (``DataType.storage``);
    offsets and strides: integers in elements (cast to int64).  ``Rv``/``Vv`` (default R/V)
    limit the rows/columns read; the rest of the block is written as zeros.
    ``src_dense=True``: the caller promises ``sstride == V`` (the rows are one run of
    Rv*V elements), which is then read as whole vectors (used when Vv == V and a row is
    shorter than a vector and not a power of two).
    ``post``: eltwise ops applied in registers to every stored f32 value, in order;
    ``("relu", alpha)`` with a finite alpha >= 0 (the zero lanes of a partial tile stay +0).
    ``src_rows``: R element offsets; source row r starts at ``soff + src_rows[r]`` and
    ``sstride`` is ignored (rows from two index digits: oihw -> OIhw4i16o4i reads a
    destination line's 4 o x 4 i values from rows 4608 and 9 elements apart); None: a
    row of zeros, never read (the padding rows of aBcde8b with 1 of 8 b).
    ``src_over``: the caller promises that every source row read holds the next power of two
    of V elements in readable memory (the padding of a blocked source: nCw8c with C=7);
    rows of Vv < that are then read whole and the extra lanes zeroed, instead of through
    a masked load.
    """
    s, d = as_dtype(src_dt), as_dtype(dst_dt)
    R, V, Rv, Vv, post = _tile_args("tile", R, V, Rv, Vv, vbytes, post, d)
    nt, rows_contiguous = bool(nt), bool(rows_contiguous)
    if nt:
        span = R * V * d.size if rows_contiguous else R * d.size
        if span % 64:
            what = "R*V*dst_size" if rows_contiguous else "R*dst_size"
            raise ValueError(f"tile: non-temporal stores need {what} ({span} bytes) to be a "
                             f"multiple of 64")
    if src_rows is not None:
        src_rows = tuple(None if x is None else int(x) for x in src_rows)
        if len(src_rows) != R:
            raise ValueError(f"tile: src_rows has {len(src_rows)} offsets, R={R}")
    return _make_tile(R, V, str.__str__(s), str.__str__(d), Rv, Vv, nt, rows_contiguous,
                      int(vbytes), bool(src_dense), post, src_rows, bool(src_over))


def _short_hash(values: tuple) -> str:
    import hashlib

    return hashlib.sha1(repr(values).encode()).hexdigest()[:10]


def _check_table_tile(who: str, s: DataType, d: DataType, src, dst, table, ints: tuple) -> None:
    """Typing checks of the table-driven tiles (:func:`tile_cols`, :func:`tile_rows`)."""
    _expect_array(src, s, "src", who)
    _expect_array(dst, d, "dst", who)
    if dst.mutable is False:
        raise errors.TypingError(f"{who}: dst is read-only")
    if not (isinstance(table, types.Array) and table.ndim == 1 and table.layout == "C"
            and table.dtype == types.int64):
        raise errors.TypingError(f"{who}: table must be a 1-D C-contiguous int64 array, got {table}")
    _expect_ints(who, *ints)


def _table_tile_name(who: str, R: int, V: int, sname: str, dname: str, Rv: int, Vv: int, nt: bool,
                     post: tuple, vbytes: int) -> str:
    """The intrinsic's name: every parameter that changes its code."""
    return (f"lj_{who}_{R}x{V}_{sname}_{dname}"
            + (f"_rv{Rv}" if Rv != R else "") + (f"_vv{Vv}" if Vv != V else "")
            + ("_nt" if nt else "")
            + "".join(f"_{op}{a!r}".replace(".", "p").replace("-", "m") for op, a in post)
            + f"_w{vbytes}")


@functools.cache
def _make_tile_cols(R: int, V: int, sname: str, dname: str, Rv: int, Vv: int, nt: bool,
                    vbytes: int, post: tuple = ()):
    s, d = as_dtype(sname), as_dtype(dname)
    params = dict(R=R, V=V, s=s, d=d, Rv=Rv, Vv=Vv, nt=nt, rows_contiguous=False, vbytes=vbytes,
                  post=post)

    def impl(typingctx, src, soff, sstride, dst, doff, table, toff):
        _check_table_tile("tile_cols", s, d, src, dst, table, (soff, sstride, doff, toff))
        i64 = types.int64
        sig = types.void(src, i64, i64, dst, i64, table, i64)

        def codegen(context, builder, sig, args):
            sa = context.make_array(sig.args[0])(context, builder, args[0])
            da = context.make_array(sig.args[3])(context, builder, args[3])
            ta = context.make_array(sig.args[5])(context, builder, args[5])
            _emit_tile(builder, sa.data, args[1], args[2], da.data, args[4], None,
                       cols=(ta.data, args[6]), **params)
            return context.get_dummy_value()

        return sig, codegen

    name = _table_tile_name("tile_cols", R, V, sname, dname, Rv, Vv, nt, post, vbytes)
    impl.__name__ = impl.__qualname__ = name
    impl.__module__ = __name__
    return intrinsic(impl)


def tile_cols(R: int, V: int, src_dt, dst_dt, *, Rv: int | None = None, Vv: int | None = None,
              nt: bool = False, vbytes: int = HOST_VECTOR_BYTES, post: tuple = ()):
    """:func:`tile` with destination rows placed by a table:
    ``t(src, soff, sstride, dst, doff, table, toff)`` stores destination row c (the
    source's column c) at ``dst[doff + table[toff + c]]`` (``table``: int64 array).

    For source rows that stay contiguous over more than one destination index digit
    (oihw -> OIhw16i16o: 144 elements over (i, hw)), so that whole vectors are loaded
    and transposed however short each digit is.  NT preconditions: every
    ``doff + table[toff + c]`` is 64-byte aligned and ``R*dst_size`` is a multiple of 64.
    """
    s, d = as_dtype(src_dt), as_dtype(dst_dt)
    R, V, Rv, Vv, post = _tile_args("tile_cols", R, V, Rv, Vv, vbytes, post, d)
    if nt and (R * d.size) % 64:
        raise ValueError(f"tile_cols: non-temporal stores need R*dst_size ({R * d.size} bytes) to "
                         f"be a multiple of 64")
    return _make_tile_cols(R, V, str.__str__(s), str.__str__(d), Rv, Vv, bool(nt), int(vbytes), post)


@functools.cache
def _make_tile_rows(R: int, V: int, sname: str, dname: str, Rv: int, Vv: int, nt: bool,
                    vbytes: int, post: tuple = ()):
    s, d = as_dtype(sname), as_dtype(dname)
    params = dict(R=R, V=V, s=s, d=d, Rv=Rv, Vv=Vv, nt=nt, rows_contiguous=False, vbytes=vbytes,
                  post=post)

    def impl(typingctx, src, soff, table, toff, dst, doff, dstride):
        _check_table_tile("tile_rows", s, d, src, dst, table, (soff, toff, doff, dstride))
        i64 = types.int64
        sig = types.void(src, i64, table, i64, dst, i64, i64)

        def codegen(context, builder, sig, args):
            sa = context.make_array(sig.args[0])(context, builder, args[0])
            ta = context.make_array(sig.args[2])(context, builder, args[2])
            da = context.make_array(sig.args[4])(context, builder, args[4])
            _emit_tile(builder, sa.data, args[1], None, da.data, args[5], args[6],
                       src_rows=_RowTable(ta.data, args[3]), **params)
            return context.get_dummy_value()

        return sig, codegen

    name = _table_tile_name("tile_rows", R, V, sname, dname, Rv, Vv, nt, post, vbytes)
    impl.__name__ = impl.__qualname__ = name
    impl.__module__ = __name__
    return intrinsic(impl)


def tile_rows(R: int, V: int, src_dt, dst_dt, *, Rv: int | None = None, Vv: int | None = None,
              nt: bool = False, vbytes: int = HOST_VECTOR_BYTES, post: tuple = ()):
    """:func:`tile` with source rows placed by a table:
    ``t(src, soff, table, toff, dst, doff, dstride)`` reads source row r from
    ``src[soff + table[toff + r]]`` (``table``: int64 array) and stores the transposed
    block as :func:`tile` does (destination row c at ``doff + c*dstride``).

    For destination lines whose elements come from two source digits in a pattern that
    repeats only every few lines (OIhw16i16o -> oihw: a line of 16 (i, hw) pairs out of
    9 x 16), one micro-kernel for all the lines of the period.
    """
    s, d = as_dtype(src_dt), as_dtype(dst_dt)
    R, V, Rv, Vv, post = _tile_args("tile_rows", R, V, Rv, Vv, vbytes, post, d)
    if nt and (R * d.size) % 64:
        raise ValueError(f"tile_rows: non-temporal stores need R*dst_size ({R * d.size} bytes) to "
                         f"be a multiple of 64")
    return _make_tile_rows(R, V, str.__str__(s), str.__str__(d), Rv, Vv, bool(nt), int(vbytes), post)


# ---------------------------------------------------------------------------------------------
# Row gathers: pack R short source rows into R*V contiguous destination elements (no transpose)
# ---------------------------------------------------------------------------------------------

def _emit_gather(builder: ir.IRBuilder, sptr: ir.Value, soff, sstride, dptr: ir.Value, doff,
                 *, R: int, V: int, s: DataType, d: DataType, Rv: int, nt: bool, vbytes: int,
                 Vv: int | None = None, dense: bool = False, over: bool = False,
                 pow2: bool = False) -> None:
    """Emit one :func:`gather` at the builder's position (pointers are to storage elements).

    Element (r, c) has id ``r*V + c``, which is also its destination offset from ``doff``.
    Source rows are loaded as pieces of U lanes (U = one register, or V rounded up to a power
    of two for rows shorter than a register; lanes past the row hold no id); every destination
    chunk of ``vbytes`` bytes is then built from the pieces holding its ids (for short rows a
    concatenation: one two-source shuffle per pair of rows), converted and stored.  With NT
    stores a whole 64-byte line is converted first and then cut into ``vbytes`` parts: a
    narrowing conversion stored directly in 16/32-byte parts would be folded by LLVM into a
    temporal truncating store (AVX-512 ``vpmovdw mem``, F16C ``vcvtps2ph mem``), dropping NT.
    """
    ssz, dsz = s.size, d.size
    sty, dty = _cv.storage_ir_type(s), _cv.storage_ir_type(d)
    i64 = soff.type
    L = max(1, vbytes // ssz)                    # source lanes per register
    U = L if V >= L or dense else _pow2ceil(V)   # lanes per loaded piece
    uty = ir.VectorType(sty, U)

    def widen(val: ir.Value, w: int) -> ir.Value:
        """Lanes [0, w) of val, then undefined lanes up to U."""
        if w == U:
            return val
        undef = ir.Constant(val.type, ir.Undefined)
        return builder.shuffle_vector(val, undef, _mask([i if i < w else w for i in range(U)]))

    def load(off: ir.Value, k: int) -> ir.Value:
        """k source elements at off, widened to U lanes (masked or odd-sized loads)."""
        p = builder.gep(sptr, [off], inbounds=True)
        kp = _pow2ceil(k)
        if k & (k - 1) and _masked_native(ssz, kp * ssz):
            return widen(_masked_load(builder, p, ir.VectorType(sty, kp), k, ssz), kp)
        vty = ir.VectorType(sty, k)  # a legal (power-of-two) vector, or one LLVM splits
        return widen(builder.load(builder.bitcast(p, vty.as_pointer()), align=ssz), k)

    # 1. load the pieces of the live rows; rows >= Rv and columns >= Vv are zeros (never read)
    Vv = V if Vv is None else Vv
    regs = []
    if dense:  # the Rv*Vv valid elements are back to back: whole registers, then zero pieces
        n_valid = Rv * Vv
        for p0 in range(0, n_valid, U):
            k = min(U, n_valid - p0)
            off = builder.add(soff, ir.Constant(i64, p0)) if p0 else soff
            regs.append(_V(load(off, k), tuple((p0 + j) // Vv * V + (p0 + j) % Vv if j < k
                                               else None for j in range(U))))
        zeros = [r * V + c for r in range(R) for c in range(V) if r >= Rv or c >= Vv]
        for z0 in range(0, len(zeros), U):
            zs = zeros[z0:z0 + U]
            regs.append(_V(ir.Constant(uty, None), tuple(zs) + (None,) * (U - len(zs))))
    for r in range(R if not dense else 0):
        rbase = None
        for p0 in range(0, V, U):
            k = min(U, V - p0)
            ids = tuple(r * V + p0 + j if j < k else None for j in range(U))
            if r >= Rv or p0 >= Vv:
                regs.append(_V(ir.Constant(uty, None), ids))
                continue
            whole = over and not k & (k - 1)
            if p0 + k > Vv and not whole:  # the row's data ends inside this piece: zeros hold the rest
                regs.append(_V(ir.Constant(uty, None),
                               tuple(i if i is not None and i - r * V >= Vv else None for i in ids)))
                k = Vv - p0
                ids = tuple(r * V + p0 + j if j < k else None for j in range(U))
            if rbase is None:
                rbase = builder.add(soff, builder.mul(sstride, ir.Constant(i64, r))) if r \
                    else soff
            off = builder.add(rbase, ir.Constant(i64, p0)) if p0 else rbase
            if p0 + k > Vv:
                # the source's padding follows the row (gather(src_over=True)): the whole
                # piece in one load, the lanes from Vv on zeroed (_keep_lanes)
                p = builder.gep(sptr, [off], inbounds=True)
                val = widen(builder.load(builder.bitcast(p, ir.VectorType(sty, k).as_pointer()), align=ssz), k)
                regs.append(_V(_keep_lanes(builder, val, Vv - p0), ids))
                continue
            if pow2 and k & (k - 1) and p0 + k == V == Vv:
                # the row's last piece read to the next power of two (gather(src_pow2=True)):
                # one whole load; the lanes past the row hold no id
                kp = _pow2ceil(k)
                p = builder.gep(sptr, [off], inbounds=True)
                val = builder.load(builder.bitcast(p, ir.VectorType(sty, kp).as_pointer()), align=ssz)
                regs.append(_V(widen(val, kp), ids))
                continue
            regs.append(_V(load(off, k), ids))
    gather = _Gather(builder, regs)

    # 2. destination chunks of one register (NT: a 64-byte line is 64 // vbytes of them,
    #    stored back to back), converted after the gather
    N = R * V
    chunk = max(1, vbytes // dsz)
    if nt:
        md = builder.module.add_metadata([ir.Constant(_I32, 1)])
        line = 64 // dsz
        vty = ir.VectorType(dty, chunk)
        for start in range(0, N, line):
            v = _convert(builder, s, d, gather(list(range(start, start + line))))
            for j in range(0, line, chunk):
                part = _shuffle(builder, v, None, list(range(j, j + chunk))).val
                off = builder.add(doff, ir.Constant(i64, start + j)) if start + j else doff
                p = builder.bitcast(builder.gep(dptr, [off], inbounds=True), vty.as_pointer())
                st = builder.store(_nt_value(builder, part), p,
                                   align=64 if j == 0 else (j * dsz) & -(j * dsz))
                st.set_metadata("nontemporal", md)
        return
    for start in range(0, N, chunk):
        n = min(chunk, N - start)
        want = list(range(start, start + n))
        full = n
        if n & (n - 1) and _masked_native(dsz, _pow2ceil(n) * dsz, store=True):
            full = _pow2ceil(n)
            want += [want[0]] * (full - n)       # don't-care lanes
        v = _convert(builder, s, d, gather(want))
        off = builder.add(doff, ir.Constant(i64, start)) if start else doff
        p = builder.gep(dptr, [off], inbounds=True)
        if full != n:
            _masked_store(builder, v.val, p, n, dsz)
            continue
        vty = ir.VectorType(dty, n)
        builder.store(v.val, builder.bitcast(p, vty.as_pointer()), align=dsz)


@functools.cache
def _make_gather(R: int, V: int, sname: str, dname: str, Rv: int, nt: bool, vbytes: int,
                 Vv: int, dense: bool, over: bool = False, pow2: bool = False):
    s, d = as_dtype(sname), as_dtype(dname)
    params = dict(R=R, V=V, s=s, d=d, Rv=Rv, nt=nt, vbytes=vbytes, Vv=Vv, dense=dense, over=over,
                  pow2=pow2)

    def impl(typingctx, src, soff, sstride, dst, doff):
        _expect_array(src, s, "src", "gather")
        _expect_array(dst, d, "dst", "gather")
        if dst.mutable is False:
            raise errors.TypingError("gather: dst is read-only")
        _expect_ints("gather", soff, sstride, doff)
        i64 = types.int64
        sig = types.void(src, i64, i64, dst, i64)

        def codegen(context, builder, sig, args):
            sa = context.make_array(sig.args[0])(context, builder, args[0])
            da = context.make_array(sig.args[3])(context, builder, args[3])
            _emit_gather(builder, sa.data, args[1], args[2], da.data, args[4], **params)
            return context.get_dummy_value()

        return sig, codegen

    name = (f"lj_gather_{R}x{V}_{sname}_{dname}" + (f"_rv{Rv}" if Rv != R else "")
            + (f"_vv{Vv}" if Vv != V else "") + ("_dense" if dense else "") + ("_so" if over else "")
            + ("_p2" if pow2 else "")
            + ("_nt" if nt else "") + f"_w{vbytes}")
    impl.__name__ = impl.__qualname__ = name
    impl.__module__ = __name__
    impl.gather_params = dict(params, s=sname, d=dname)  # type: ignore[attr-defined]
    return intrinsic(impl)


def gather(R: int, V: int, src_dt, dst_dt, *, Rv: int | None = None, Vv: int | None = None,
           src_dense: bool = False, nt: bool = False, vbytes: int = HOST_VECTOR_BYTES,
           src_over: bool = False, src_pow2: bool = False):
    """A (memoized) Numba intrinsic ``g(src, soff, sstride, dst, doff)`` packing R source rows
    of V contiguous elements into R*V contiguous destination elements, without a transpose::

        dst[doff + r*V + c] = convert(src[soff + r*sstride + c])   if r < Rv and c < Vv
                            = 0 (of the dst type)                  otherwise

    for r in [0, R), c in [0, V); rows r >= Rv (default Rv = R) are never read, nor is
    anything past the Vv (default V) elements of a row (odd rows: masked or odd-sized vector
    loads).  Vv < V packs runs with zero padding (nhwc -> nChw8c, C=3: two pixels of 3 values
    and 5 zeros per line).  ``src_dense=True``: the caller guarantees ``sstride == Vv`` (the
    valid parts are back to back), and the Rv*Vv elements are read as whole vectors and
    placed by shuffles instead of one (masked) load per row.  ``src_over=True``: the caller
    promises that each live row's elements up to V exist in memory (the source's padding
    follows its Vv): a row piece holding the end of the data is read whole (when its lanes
    are a power of two) and the lanes from Vv on are zeroed, in place of a masked load (f32
    ``nCdhw16c -> nCdhw8c`` C=3 into u8: masked loads of 3 of 8 lanes ran at 2.2-2.5x copy).
    ``src_pow2=True`` (whole rows, ``Vv == V``): the caller promises that each live row can be
    read to the next power of two of V (its padding follows it: ``nChw16c -> nhwc``, C=3, reads
    4 of each 16-channel block): a row's last piece of odd length is one whole load.
    Conversions are those of :func:`tile` (``convert.vec_convert``).  ``R = 1`` is a vector
    copy of one run (``gather(1, 64 // dst_size, s, d, nt=True)`` writes one full line).

    Rows that are a multiple of ``vbytes`` load straight into registers; shorter rows are
    concatenated with shuffles so that every ``vbytes``-byte destination chunk is one store.
    Plain stores are unaligned (an odd tail uses a masked store where the target has one).
    ``nt=True``: ``!nontemporal`` stores of ``vbytes`` bytes, back to back (a 64-byte line is
    one store with ``vbytes=64``, two adjacent 32-byte stores with ``vbytes=32``; LLVM may
    still merge or split adjacent NT stores of one line, e.g. one zmm store when ``vbytes=32``
    code is compiled for an AVX-512 CPU, or four 16-byte stores of four 16-byte rows); needs
    ``R*V*dst_size % 64 == 0`` (else ValueError), and the caller guarantees that
    ``dst + doff`` is 64-byte aligned (unaligned NT stores fault).  Call :func:`sfence` after
    a run of NT stores.
    """
    s, d = as_dtype(src_dt), as_dtype(dst_dt)
    R, V = int(R), int(V)
    if not (1 <= R <= MAX_TILE and 1 <= V <= MAX_GATHER):
        raise ValueError(f"gather: R={R}, V={V}: need R in 1..{MAX_TILE}, V in 1..{MAX_GATHER}")
    Rv = R if Rv is None else int(Rv)
    if not 0 <= Rv <= R:
        raise ValueError(f"gather: need 0 <= Rv <= R (R={R}, Rv={Rv})")
    Vv = V if Vv is None else int(Vv)
    if not 1 <= Vv <= V:
        raise ValueError(f"gather: need 1 <= Vv <= V (V={V}, Vv={Vv})")
    if vbytes not in (16, 32, 64):
        raise ValueError(f"gather: vbytes={vbytes} must be 16, 32 or 64")
    nt = bool(nt)
    if nt and (R * V * d.size) % 64:
        raise ValueError(f"gather: non-temporal stores need R*V*dst_size ({R * V * d.size} "
                         f"bytes) to be a multiple of 64")
    return _make_gather(R, V, str.__str__(s), str.__str__(d), Rv, nt, int(vbytes), Vv,
                        bool(src_dense), bool(src_over) and Vv < V and not src_dense,
                        bool(src_pow2) and Vv == V and V & (V - 1) > 0 and not src_dense)


def supports(src_dt, dst_dt) -> bool:
    """Whether :func:`tile` handles this data-type pair (every pair of known types)."""
    try:
        as_dtype(src_dt)
        as_dtype(dst_dt)
    except Exception:
        return False
    return True


def _sfence_impl(typingctx):
    sig = types.void()

    def codegen(context, builder, sig, args):
        if _cv._is_x86():
            fn = cgutils.get_or_insert_function(builder.module,
                                                ir.FunctionType(ir.VoidType(), []),
                                                "llvm.x86.sse.sfence")
            builder.call(fn, [])
        else:
            builder.fence("seq_cst")
        return context.get_dummy_value()

    return sig, codegen


_sfence_impl.__name__ = _sfence_impl.__qualname__ = "sfence"

#: ``sfence()``: store fence (``llvm.x86.sse.sfence``; a seq_cst fence elsewhere).  Call it
#: after a run of non-temporal stores, before other threads may read the data.
sfence = intrinsic(_sfence_impl)


@functools.cache
def _make_prefetch(nbytes: int, l2_only: bool, write: bool = False):
    def impl(typingctx, arr, off):
        if not isinstance(arr, types.Array) or arr.ndim != 1 or arr.layout != "C":
            raise errors.TypingError(f"prefetch: needs a 1-D C-contiguous array, got {arr}")
        if not isinstance(off, types.Integer):
            raise errors.TypingError(f"prefetch: the offset must be an integer, got {off}")
        sig = types.void(arr, types.int64)

        def codegen(context, builder, sig, args):
            a = context.make_array(sig.args[0])(context, builder, args[0])
            i8p = ir.IntType(8).as_pointer()
            base = builder.bitcast(builder.gep(a.data, [args[1]], inbounds=False), i8p)
            for k in range(0, nbytes, 64):
                _prefetch(builder, base, k, 2 if l2_only else 3, write)
            return context.get_dummy_value()

        return sig, codegen

    impl.__name__ = impl.__qualname__ = (f"lj_prefetch_{nbytes}" + ("_l2" if l2_only else "")
                                         + ("_w" if write else ""))
    impl.__module__ = __name__
    return intrinsic(impl)


@functools.cache
def _make_copy_prefix(dname: str, q: int):
    d = as_dtype(dname)

    def impl(typingctx, src, soff, dst, doff, n):
        _expect_array(src, d, "src", "copy_prefix")
        _expect_array(dst, d, "dst", "copy_prefix")
        if dst.mutable is False:
            raise errors.TypingError("copy_prefix: dst is read-only")
        _expect_ints("copy_prefix", soff, doff, n, what="offsets and counts")
        i64 = types.int64
        sig = types.void(src, i64, dst, i64, i64)

        def codegen(context, builder, sig, args):
            sa = context.make_array(sig.args[0])(context, builder, args[0])
            da = context.make_array(sig.args[2])(context, builder, args[2])
            ity = ir.IntType(8 * d.size)
            vty = ir.VectorType(ity, q)
            sp = builder.gep(sa.data, [args[1]], inbounds=True)
            v = builder.load(builder.bitcast(sp, vty.as_pointer()), align=d.size)
            _masked_store_first(builder, v, builder.gep(da.data, [args[3]], inbounds=True), args[4], d.size)
            return context.get_dummy_value()

        return sig, codegen

    impl.__name__ = impl.__qualname__ = f"lj_copy_prefix_{dname}_{q}"
    impl.__module__ = __name__
    return intrinsic(impl)


def copy_prefix_native(dt) -> bool:
    """Whether :func:`copy_prefix` is one masked store on this CPU (AVX-512BW; AVX-512F for
    4- and 8-byte elements); elsewhere LLVM expands it lane by lane."""
    f = _cv.target_features() if _cv._is_x86() else frozenset()
    return "avx512bw" in f or (as_dtype(dt).size >= 4 and "avx512f" in f)


def copy_prefix(dt, q: int | None = None):
    """A (memoized) intrinsic ``c(src, soff, dst, doff, n)``: ``dst[doff + k] = src[soff + k]``
    for k < n, 0 <= n <= q (default q: one 64-byte line of elements), by one vector load
    of q elements and a masked store (AVX-512BW: one instruction). The q source elements
    from ``soff`` must all lie in ``src``; nothing of ``dst`` past the n elements is written."""
    d = as_dtype(dt)
    q = 64 // d.size if q is None else int(q)
    if d.size not in (1, 2, 4, 8) or q < 1 or q & (q - 1):
        raise ValueError(f"copy_prefix: needs 1-, 2-, 4- or 8-byte elements and q a power of two, got {d}, {q}")
    return _make_copy_prefix(str.__str__(d), q)


def prefetch(nbytes: int, *, l2_only: bool = False, write: bool = False):
    """A (memoized) Numba intrinsic ``p(arr, off)``: software prefetch (read, all cache levels,
    or L2 and beyond with ``l2_only``) of the ``nbytes`` bytes (one per 64-byte line) from
    element ``off`` of ``arr``.

    A hint only: addresses outside the array are allowed (prefetches never fault), so a
    caller may prefetch past the end of its data without a bounds check. ``write``: a
    prefetch for a write (``prefetchw``: the line fetched for ownership), for a line that
    plain stores will write in part, so that they do not wait for its ownership read.
    """
    nbytes = int(nbytes)
    if not 64 <= nbytes <= 16384 or nbytes % 64:
        raise ValueError(f"prefetch: nbytes={nbytes} must be a multiple of 64 in 64..16384")
    return _make_prefetch(nbytes, bool(l2_only), bool(write))

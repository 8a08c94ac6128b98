"""The planner: meaning-preserving rewrites of a LoopIR, and the choices codegen follows.

Passes, in order (each is a function from IR to IR you can call and print):

1. ``drop_unit``   -- remove extent-1 nodes.
2. ``order_by_dst`` -- sort nodes by decreasing destination stride, so the
   destination is written contiguously (digits of one dim stay heaviest-first).
3. ``merge``       -- fuse adjacent nodes that are contiguous in every operand
   (oneDNN's ``prb_simplify``, HPTT's index fusion, CuTe's ``coalesce``).
4. ``choose_tile`` -- when the destination's unit-stride node (A) differs from the
   source's unit-stride node (B), the nest is a transpose: A x B is done by an
   R x V register tile (``simd.tile``) with R from the block/vector size, V from
   the vector width, M micro tiles per macro tile so that ~32 source rows are read
   side by side; tails and zero padding become smaller or zero-filled tiles.
5. ``choose_parallel`` -- the outermost loops (the tile's macro loop included)
   are flattened into one job range split between threads; small problems run
   serially in one call.

Zero padding is never a guard in the main loop: codegen splits the loop over a
padded dim's heaviest digit into a full range, one partial step and a zero
range (see ``segments``), recursively, all with compile-time bounds.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from .dtypes import DataType
from .ir import LoopIR, Node

# Problems moving fewer bytes than this run in one serial call (no thread launch).
PARALLEL_MIN_BYTES = int(os.environ.get("LAYOUTJIT_PARALLEL_MIN_BYTES", 256 * 1024))
# Destinations at least this large use non-temporal stores where a tile writes whole lines.
NT_MIN_BYTES = int(os.environ.get("LAYOUTJIT_NT_MIN_BYTES", 2 * 1024 * 1024))
# Read ~this many source rows side by side in a transpose (the L2 streamer's sweet spot).
READ_STREAMS = int(os.environ.get("LAYOUTJIT_READ_STREAMS", 32))
READ_STREAMS_BLOCKED = int(os.environ.get("LAYOUTJIT_READ_STREAMS_BLOCKED", 16))
# Flatten outer loops until the job count reaches this (load balance between threads).
MIN_JOBS = 64


def vector_bytes() -> int:
    """Vector register width the kernels target (64 with AVX-512, 32 with AVX2)."""
    try:
        from .simd import HOST_VECTOR_BYTES  # type: ignore[attr-defined]

        return int(HOST_VECTOR_BYTES)
    except Exception:  # pragma: no cover - before simd exists / exotic hosts
        return 16


# ----------------------------------------------------------------- IR passes
def drop_unit(ir: LoopIR) -> LoopIR:
    """Remove nodes of extent 1 (they move nothing)."""
    nodes = [n for n in ir.nodes if n.extent != 1]
    return ir.with_nodes(nodes, None if len(nodes) == len(ir.nodes) else "drop_unit")


def order_by_dst(ir: LoopIR) -> LoopIR:
    """Sort nodes outermost-first by decreasing destination stride (then source stride)."""
    def key(n: Node) -> tuple:
        s = n.strides[1]
        return (-(n.strides[0] or 0), -(s if s is not None else 0), -n.weight)
    nodes = sorted(ir.nodes, key=key)
    # keep each dim's digits heaviest-first (needed for compile-time padding splits)
    by_dim: dict[int, list[Node]] = {}
    for n in nodes:
        if n.dim is not None:
            by_dim.setdefault(n.dim, []).append(n)
    for d, lst in by_dim.items():
        want = sorted(lst, key=lambda n: -n.weight)
        if want != lst and ir.dims[d].guarded:
            it = iter(want)
            nodes = [next(it) if n.dim == d else n for n in nodes]
    return ir.with_nodes(nodes, "order_by_dst")


def _mergeable(ir: LoopIR, outer: Node, inner: Node) -> bool:
    for so, si in zip(outer.strides, inner.strides):
        if so is None or si is None or so != si * inner.extent:
            return False
    if outer.dim is not None and outer.dim == inner.dim:
        return outer.weight == inner.weight * inner.extent
    # different dims: only when neither carries padding guards
    for n in (outer, inner):
        if n.dim is not None and ir.dims[n.dim].guarded:
            return False
    return True


def merge(ir: LoopIR) -> LoopIR:
    """Fuse adjacent nodes that are contiguous in every operand."""
    out: list[Node] = []
    for n in ir.nodes:
        if out and _mergeable(ir, out[-1], n):
            o = out.pop()
            same = o.dim is not None and o.dim == n.dim
            n = Node(o.extent * n.extent, n.dim if same else None, n.weight if same else 1, n.strides)
        out.append(n)
    return ir.with_nodes(out, None if len(out) == len(ir.nodes) else "merge")


def normalize(ir: LoopIR) -> LoopIR:
    """drop_unit, order_by_dst, merge."""
    return merge(order_by_dst(drop_unit(ir)))


# ------------------------------------------------------------- plan choices
@dataclass(frozen=True)
class TileSpec:
    """A x B transpose by R x V register tiles, M micro tiles per macro tile."""

    a: int  # index of node A (dst unit stride) in plan.nodes
    b: int  # index of node B (src unit stride)
    R: int
    V: int
    M: int
    rows_contiguous: bool  # dst stride of B == extent of A == R: tiles write whole blocks


@dataclass(frozen=True)
class Plan:
    """The planned nest: ordered nodes, an optional tile, the parallel split."""

    ir: LoopIR
    tile: TileSpec | None
    parallel: int  # number of outermost loops flattened into the job range
    jobs: int  # product of their extents
    vector_bytes: int
    nt: bool  # tiles may use non-temporal stores (when the dst is aligned at run time)
    bytes_moved: int
    notes: tuple[str, ...] = ()

    @property
    def nodes(self) -> tuple[Node, ...]:
        return self.ir.nodes

    @property
    def serial(self) -> bool:
        """Small problems run in one call on the calling thread."""
        return self.bytes_moved < PARALLEL_MIN_BYTES or self.jobs < 2

    def loop_order(self) -> list[int]:
        """Indices of nodes looped over outside the tile (outermost first)."""
        skip = set() if self.tile is None else {self.tile.a, self.tile.b}
        return [i for i in range(len(self.nodes)) if i not in skip]

    def describe(self) -> str:
        from .ir import format_ir

        letters = "abcdefghijkl"
        lines = [format_ir(self.ir)]
        order = self.loop_order()
        par = order[: self.parallel]
        if self.tile is not None and self.parallel > len([i for i in order]):
            par = order
        lines.append("")
        if self.parallel:
            lines.append(f"parallel: {self.jobs} jobs over loops "
                         + " x ".join(f"#{i}" for i in par)
                         + (" and the tile's macro loop" if self.tile is not None and
                            self.parallel > len(order) else "")
                         + f"; {'serial' if self.serial else 'threads'}"
                         f" (problem {self.bytes_moved} B, serial below {PARALLEL_MIN_BYTES} B)")
        else:
            lines.append("parallel: none (one job)")
        if self.tile is not None:
            t = self.tile
            a, b = self.nodes[t.a], self.nodes[t.b]
            lines.append(
                f"tile: A=#{t.a} ({letters[a.dim] if a.dim is not None else '-'}, {a.extent}, dst stride 1) x "
                f"B=#{t.b} ({letters[b.dim] if b.dim is not None else '-'}, {b.extent}, src stride 1): "
                f"{t.R}x{t.V} register tiles, {t.M} per macro tile ({t.M * t.R} source rows read side by side)"
                + (", writes whole blocks" if t.rows_contiguous else ""))
            lines.append(f"stores: {'non-temporal when dst is 64-byte aligned' if self.nt else 'plain'}"
                         f"; vector width {self.vector_bytes} B")
        else:
            lines.append("tile: none (element loops; contiguous inner loops are vectorized by LLVM)")
        for n in self.notes:
            lines.append(f"note: {n}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.describe()


def _tile_supported(sdt: DataType, ddt: DataType) -> bool:
    try:
        from . import simd  # type: ignore[attr-defined]
    except Exception:
        return False
    ok = getattr(simd, "supports", None)
    return bool(ok(sdt, ddt)) if ok is not None else True


def choose_tile(ir: LoopIR, vbytes: int, allow: bool = True) -> tuple[LoopIR, TileSpec | None, list[str]]:
    """Pick the transpose tile (A: dst unit stride, B: src unit stride), if any."""
    notes: list[str] = []
    nodes = list(ir.nodes)
    if not allow or len(nodes) < 2 or vbytes < 16:
        return ir, None, notes
    dst, src = ir.operands[0], ir.operands[1]
    ia = next((i for i, n in enumerate(nodes) if n.strides[0] == 1), None)
    ib = next((i for i, n in enumerate(nodes) if n.strides[1] == 1), None)
    if ia is None or ib is None or ia == ib:
        return ir, None, notes
    a, b = nodes[ia], nodes[ib]
    if a.extent < 2 or b.extent < 2:
        return ir, None, notes
    if not _tile_supported(src.dtype, dst.dtype):
        notes.append(f"no register tile for {src.dtype}->{dst.dtype}")
        return ir, None, notes
    # padding splits need each guarded dim's other digits to be heavier (entered first)
    for n in (a, b):
        if n.dim is not None and ir.dims[n.dim].guarded:
            if n.weight != 1 or any(m.dim == n.dim and m is not n and m.weight < n.weight for m in nodes):
                notes.append("transpose node carries padding in an unusual digit order; element loops")
                return ir, None, notes
    if a.dim is not None and a.dim == b.dim and ir.dims[a.dim].guarded:
        return ir, None, notes
    ssz, dsz = src.dtype.size, dst.dtype.size
    V = min(b.extent, max(1, vbytes // ssz))
    row_elems = max(1, 64 // dsz)  # elements of one 64-byte output row
    rows_contig = b.strides[0] == a.extent
    if rows_contig and a.extent <= 64:
        R = a.extent  # the whole block: tiles write R*V contiguous elements
    else:
        R = min(a.extent, row_elems, 32)
        rows_contig = rows_contig and R == a.extent
    # Source rows read side by side: a blocked destination (whole blocks written) prefers
    # fewer streams than a full transpose (measured on Zen 5: 16 vs 32).
    streams = READ_STREAMS_BLOCKED if rows_contig else READ_STREAMS
    M = max(1, min(-(-a.extent // R), streams // R))
    # keep A and B at the end of the node list in a fixed order: outer..., A, B
    rest = [n for i, n in enumerate(nodes) if i not in (ia, ib)]
    nodes2 = rest + [a, b]
    spec = TileSpec(len(rest), len(rest) + 1, R, V, M, rows_contig)
    return ir.with_nodes(nodes2, "choose_tile"), spec, notes


def choose_parallel(ir: LoopIR, tile: TileSpec | None, bytes_moved: int) -> tuple[int, int]:
    """How many outermost loops to flatten into the job range, and the job count.

    Small problems get one job (no index decoding at all); larger ones get at
    least ``MIN_JOBS`` jobs when the loops allow, for load balance.
    """
    if bytes_moved < PARALLEL_MIN_BYTES:
        return 0, 1
    want = min(MIN_JOBS, max(2, bytes_moved // (16 * 1024)))
    order = [i for i in range(len(ir.nodes)) if tile is None or i not in (tile.a, tile.b)]
    if tile is None and order:
        order = order[:-1]  # keep the innermost loop inside each job
    jobs = 1
    k = 0
    for i in order:
        if jobs >= want:
            break
        jobs *= ir.nodes[i].extent
        k += 1
    if tile is not None and jobs < want and k == len(order):
        a = ir.nodes[tile.a]
        groups = -(-a.extent // (tile.R * tile.M))
        if groups > 1:
            jobs *= groups
            k += 1  # the tile's macro loop over A becomes a job loop too
    return k, jobs


def make_plan(ir: LoopIR, *, allow_tile: bool = True, vbytes: int | None = None) -> Plan:
    """Run every pass and record the choices (see the module docstring)."""
    vb = vector_bytes() if vbytes is None else vbytes
    ir = normalize(ir)
    ir, tile, notes = choose_tile(ir, vb, allow_tile)
    dst = ir.operands[0]
    total = ir.total
    dst_bytes = total * dst.dtype.size
    moved = total * (dst.dtype.size + ir.operands[1].dtype.size)
    parallel, jobs = choose_parallel(ir, tile, moved)
    nt = tile is not None and dst_bytes >= NT_MIN_BYTES and _nt_possible(ir, tile, parallel)
    return Plan(ir, tile, parallel, jobs, vb, nt, moved, tuple(notes))


def _nt_possible(ir: LoopIR, tile: TileSpec, parallel: int) -> bool:
    """Static part of the NT test: every tile's rows can start on a 64-byte line."""
    dst = ir.operands[0]
    q = max(1, 64 // dst.dtype.size)
    if dst.offset0 % q:
        return False
    for i, n in enumerate(ir.nodes):
        if i in (tile.a, tile.b):
            continue
        if n.strides[0] % q:
            return False
    b = ir.nodes[tile.b]
    if tile.rows_contiguous:
        return (tile.R * tile.V) % q == 0
    return b.strides[0] % q == 0 and tile.R % q == 0


def with_plan_options(plan: Plan, **kw: object) -> Plan:
    return replace(plan, **kw)  # type: ignore[arg-type]

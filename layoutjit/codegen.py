"""Codegen: render a Plan as the text of a Python module compiled by Numba.

The module defines one ``numba.cfunc`` ``kernel(sp, dp, ap, lo, hi)`` that runs
jobs ``[lo, hi)`` of the plan's flattened outer loops over the raw buffers
(``sp``/``dp`` point at the source/destination, ``ap`` at an int64 table of
extra operand pointers). Every extent, stride and offset is a literal, so LLVM
folds the index arithmetic and unrolls the small loops. A driver in
``runtime`` calls the kernel once (serial) or from a ``prange`` over threads;
since the drivers are compiled once, each kernel costs only a serial compile.

Padding never costs a guard in the main loop: the loop over a padded dim's
heaviest digit is split into a full range, one partial step and a zero range
(recursively, with constant bounds), as the planner's docstring describes.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .dtypes import DataType
from .ir import LoopIR, Node, Operand
from .plan import (
    L1_WAYS,
    Plan,
    TileSpec,
    cols_table,
    lines_per_l1_set,
    outer_nodes,
    padded_b_blocks,
    period_next,
    shift_rows,
    src_rows,
    stage_runs,
    tile_rows,
)
from .simd import MAX_TILE, copy_prefix_native, tile_shift_supported

CODEGEN_VERSION = "1"

_NUMBA_TYPES = {
    "f32": "float32", "f64": "float64", "f16": "uint16", "bf16": "uint16",
    "s32": "int32", "s8": "int8", "u8": "uint8",
}


def runtime_fingerprint() -> str:
    """Hash of the runtime modules generated code calls into.

    Numba's disk cache only notices changes to the generated file itself, so
    this goes into every generated header: a changed helper changes every
    kernel's source hash, hence its file name, and nothing stale is loaded.
    The micro-kernels' environment switches (``simd.code_switches``) shape the
    machine code without showing in the source, so they go in too.
    """
    global _FINGERPRINT
    if _FINGERPRINT is None:
        import pathlib

        from . import simd

        h = hashlib.sha256(repr(simd.code_switches()).encode())
        here = pathlib.Path(__file__).parent
        for name in ("convert.py", "simd.py", "eltwise_ops.py", "runtime.py"):
            try:
                h.update((here / name).read_bytes())
            except OSError:
                h.update(name.encode())
        _FINGERPRINT = h.hexdigest()[:16]
    return _FINGERPRINT


_FINGERPRINT: str | None = None


STREAM_EPILOGUE_NT = os.environ.get("LAYOUTJIT_STREAM_EPILOGUE_NT", "1") == "1"


def _ix(expr: str) -> str:
    """An array index as uint64: Numba then skips negative-index wraparound, so LLVM
    sees plain contiguous accesses and vectorizes element loops (offsets are never negative)."""
    return f"np.uint64({expr})"


def numba_type(dt: str) -> str:
    return _NUMBA_TYPES[str(dt)]


@dataclass
class Epilogue:
    """How one destination element's value is computed (plain conversion by default).

    ``lines(src, extra, dst_old)`` receives the source load expression, the
    load expressions of the extra operands (same order as ``ir.operands[2:]``)
    and the destination's current value (for a ``sum`` post-op); it returns
    statements to run first and the expression stored into the destination.
    ``imports`` lists module-level lines the code needs.
    """

    lines: Callable[[str, Sequence[str], str], tuple[list[str], str]]
    imports: tuple[str, ...] = ()
    reads_dst: bool = False
    tile_ok: bool = True  # micro-kernels may be planned (every epilogue allows them)
    direct: bool = True  # a plain conversion: micro-kernels convert in registers themselves
    # f32 -> f32 epilogues that are a chain of simple eltwise ops (``simd.tile(post=...)``):
    # register tiles apply them in registers instead of going through an L1 buffer
    vector_ops: tuple = ()


def plain_epilogue(sdt: str, ddt: str) -> Epilogue:
    if str(sdt) == str(ddt):
        return Epilogue(lambda src, extra, dst_old: ([], src))
    from . import convert

    def lines(src: str, extra: Sequence[str], dst_old: str) -> tuple[list[str], str]:
        return [], convert.direct(sdt, ddt, src)

    names = ", ".join(convert.RUNTIME_NAMES)
    imports = (f"from layoutjit.convert import {names}",) if names else ()
    return Epilogue(lines, imports)


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.counter = 0

    def put(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def var(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"


def _whole_lines(nbytes: int) -> int:
    """Bytes of the whole 64-byte lines that cover ``nbytes`` (a prefetch share)."""
    return -(-nbytes // 64) * 64


def _clamp(x: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, x))


#: Transpose tiles whose source rows are followed by the source's padding read them whole
#: instead of through masked loads (``simd.tile(src_over=True)``; ``LAYOUTJIT_SRC_OVER=0``:
#: masked loads, for A/B runs). A/B on Zen 3 (AVX2), ratio to copy at 1 thread (2 threads),
#: masked -> whole: ``nCw8c -> ncw`` 1024x7x384 1.05-1.34 -> 0.63-0.82 (0.98-1.29 -> 0.50-
#: 0.63), ``nChw16c -> nchw`` 16x30x64x64 1.45 -> 1.30 (1.22 -> 0.94); 16-byte masked loads
#: are cheaper than a whole load and a blend (C=3: 0.96-1.01 -> 1.03-1.09, 0.91 -> 1.03).
#: Runs packed into lines the same (``simd.gather(src_over=True)``): f32 -> u8 `nCdhw16c ->
#: nCdhw8c` 32x3x1x224x299 (3 of each 8 channels) 1.83 -> 1.09 at 1 thread (1.81 -> 1.18),
#: bf16 -> f32 `gOIhw16i16o -> gOIhw8i8o` i = 7: 1.38 -> 1.01 (1.38 -> 1.14).
SRC_OVER = os.environ.get("LAYOUTJIT_SRC_OVER", "1") != "0"
#: ... for rows of 4-byte elements read as at least this many bytes. 16-byte masked loads
#: once measured cheaper than a whole load and a blend (C=3, above); the twenty-ninth
#: session measured the opposite, one process, ratio to copy at 1 thread (2 threads),
#: masked -> whole: f32 `gOIhw16o16i -> gOhwi16o` I = 3 2.36 (1.52) -> 1.65 (1.39), f32 ->
#: u8 3.05 (2.54) -> 1.79 (1.76) (oneDNN 1.17-1.22), `nChw16c -> nchw` 16x3x1024x1024
#: 2.05 (1.74) -> 1.37 (1.48); `gOIhw16o16i -> goihw` 3x5x5 even.
#: Runs packed into lines (``simd.gather(src_over=True)``) take the same bar since the
#: thirtieth session (32 before; 16-byte masked loads -> whole loads: f32 `nChw16c ->
#: nChw4c` 512x3x64x299 1.98 (1.34) -> 0.83 (0.87), oneDNN 0.96 (0.92); 4096x4x56x5 0.90
#: -> 0.79; 1 of 168 checked pairs into 4-element blocks changed).
SRC_OVER_MIN_BYTES = 16


#: Shifted plans with staged edges (``Plan.shift_edges``) copy a row's part of a shared line
#: into the edge stage by a masked vector copy (``simd.copy_prefix``) where that is one
#: instruction (AVX-512BW), not element by element.
SHIFT_COPY_PREFIX = os.environ.get("LAYOUTJIT_SHIFT_COPY_PREFIX", "1") != "0"

#: A staged job that may start anywhere in a line (``Plan.job_shift``) prefetches its
#: partial last line for a write (``prefetchw``) as it starts: the plain stores of that line
#: otherwise wait for its ownership read from memory, with the job's NT lines behind them
#: in the store buffer. A/B on the AVX-512 host (Zen 4), u8 `nhwc -> nChw8c` 30612x40x7x7
#: (jobs of 1960 B, one image) at 1 thread, ms: 7.15-7.74 -> 6.30-7.05 (copy 4.6-5.0), once
#: 6.35 -> 3.73. ``LAYOUTJIT_JOB_STAGE_LAST_LINE_PREFETCH=0``: off.
JOB_STAGE_LAST_LINE_PREFETCH = os.environ.get("LAYOUTJIT_JOB_STAGE_LAST_LINE_PREFETCH", "1") != "0"

#: Row prefetches of a line-rows tile skip rows whose line a neighbour's prefetch already
#: touches (``_covering_points``): `oihw -> OIhw4i16o4i` 1x3 reads 4 rows of 12 bytes side
#: by side, 4 prefetches for one or two lines (16 a tile -> 8). A/B on Zen 3 (AVX2), one
#: process, ratio to copy at 1 thread (2 threads), one per row -> covering: 32768x128x1x3
#: 1.39-1.64 (1.07-1.75) -> 1.32-1.41 (0.98-1.52), within the noise of this host but never
#: behind; 512x512x3x3 f32 -> s8, 8192x256x3x1, 1024x1024x3x3 and `Goihw16g ->
#: gOIhw4i16o4i` 1024x60x64x7x1 even. ``LAYOUTJIT_ROW_PREFETCH_COVER=0``: one per row.
ROW_PREFETCH_COVER = os.environ.get("LAYOUTJIT_ROW_PREFETCH_COVER", "1") != "0"

#: Source stages (``Plan.src_stage``) whose period has one destination line per run: line k
#: also prefetches run k of the next step of the innermost outer loop (the next period) to
#: L2, so the next stage fill finds its runs there. Zen 3 (AVX2), a hand-written kernel of
#: u8 ``Ohwi16o -> oihw`` 768x1024x7x7 at 1 thread, ratio to copy: stage 1.84-1.95 -> 1.47-1.61
#: (prefetching each run while filling: 1.63-1.77; to all levels: 1.93-2.07).
SRC_STAGE_PREFETCH = os.environ.get("LAYOUTJIT_SRC_STAGE_PREFETCH", "1") != "0"


#: Scratch buffers of a kernel (stages, carries) start on a 4 KB page (``scratch``): one of
#: up to a page then never straddles two. ``np.empty`` placed them anywhere, and a stage
#: across a page boundary takes tile stores split between two pages: A/B on the AVX-512
#: host (Zen 4), `nChw8c -> nchw` 1000x2048x5x5 f32 (an 800-byte panel stage) at 1 thread,
#: ratio to copy by the stage's place in its page: 0.64-0.72 from 0 to 3072 B, 2.43-2.92
#: from 3328 B on (across the boundary); the same kernel measured 0.7 or 2.6 from one
#: process to the next. ``LAYOUTJIT_SCRATCH_PAGE=0``: wherever ``np.empty`` puts them.
SCRATCH_PAGE = os.environ.get("LAYOUTJIT_SCRATCH_PAGE", "1") != "0"

#: Where in its page each scratch buffer starts (bytes), where the buffer fits there: the
#: buffers of one kernel on different lines of their pages.
SCRATCH_SLOTS = {"stage": 0, "jstage": 0, "obuf": 0, "carry": 1024, "tbuf": 1024,
                 "sstage": 2048, "edge": 2048, "jcarry": 3072}


def scratch(name: str, elems: int, dt: DataType) -> list[str]:
    """Generated lines that allocate ``name``: ``elems`` elements of ``dt`` from its slot in
    a 4 KB page (``SCRATCH_PAGE``, ``SCRATCH_SLOTS``; at the page's start where it does not
    fit in the rest of the page). The page's slack is ``4096 // dt.size`` elements."""
    nt = numba_type(dt)
    if not SCRATCH_PAGE:
        return [f"{name} = np.empty({elems}, np.{nt})"]
    sz = dt.size
    at = SCRATCH_SLOTS.get(name, 0)
    if at + elems * sz > 4096:
        at = 0
    return [f"{name} = np.empty({elems + 4096 // sz}, np.{nt})",
            f"{name}_at = (({at} - {name}.ctypes.data) & 4095) // {sz}",
            f"{name} = {name}[{name}_at:{name}_at + {elems}]"]


def _covering_points(points: list[int], gap: int) -> list[int]:
    """The fewest of ``points`` (element offsets; kept in their order of first use) whose
    neighbours are at most ``gap`` elements apart wherever the given points were, so every
    line the points touch is still touched (``gap``: one line's elements; 0: all points)."""
    if gap <= 0 or len(points) < 3:
        return list(points)
    xs = sorted(set(points))
    keep = [xs[0]]
    for i in range(1, len(xs)):
        if i == len(xs) - 1 or xs[i + 1] - keep[-1] > gap:
            keep.append(xs[i])
    kept = set(keep)
    return [x for x in dict.fromkeys(points) if x in kept]


def _pow2(n: int) -> int:
    """The least power of two >= n (a tile's register lanes for rows of n elements)."""
    return 1 << max(0, n - 1).bit_length()


def dim_segments(ir: LoopIR, node: Node, state: object) -> list[tuple[int, int, object]]:
    """Split the loop over ``node`` into (start, stop, new state of its dim) ranges.

    ``state`` of a padded dim is ``("partial", base)`` until its heaviest digit
    is entered. A step of weight w covers positions [base + j*w, base + (j+1)*w):
    steps wholly below ``valid`` are "full", steps wholly in [valid, write) are
    "zero", steps wholly at or beyond ``write`` are dropped, and a step that
    straddles ``valid`` or ``write`` (at most two) is ``("partial", its base)``,
    resolved by the dim's lighter digits.
    """
    if node.dim is None or not ir.dims[node.dim].guarded or state in ("full", "zero"):
        return [(0, node.extent, state)]
    assert isinstance(state, tuple) and state[0] == "partial"
    base = state[1]
    r = ir.dims[node.dim]
    n, w = node.extent, node.weight
    v = r.valid - base
    wr = r.write - base
    full_end = _clamp(v // w, 0, n)  # steps [0, full_end) are all data
    zero_start = _clamp(-(-v // w), 0, n)  # first step starting at or after valid
    zero_end = _clamp(wr // w, zero_start, n)  # steps ending at or before write
    write_end = _clamp(-(-wr // w), 0, n)  # steps starting before write
    segs: list[tuple[int, int, object]] = []
    if full_end > 0:
        segs.append((0, full_end, "full"))
    for j in range(full_end, min(zero_start, write_end)):  # the step holding `valid`
        segs.append((j, j + 1, ("partial", base + j * w)))
    if zero_end > zero_start:
        segs.append((zero_start, min(zero_end, write_end), "zero"))
    for j in range(max(zero_end, zero_start), write_end):  # the step holding `write`
        if not segs or segs[-1][1] <= j:
            segs.append((j, j + 1, ("partial", base + j * w)))
    return segs


class KernelWriter:
    """Renders one Plan (with an Epilogue) as module source."""

    def __init__(self, plan: Plan, epilogue: Epilogue, *, title: str = "") -> None:
        self.plan = plan
        self.ir = plan.ir
        self.ep = epilogue
        self.title = title
        self.w = _Writer()
        self.tiles: dict[tuple, str] = {}
        self.tables: dict[tuple, str] = {}
        self.ops: list[Operand] = list(self.ir.operands)
        self.arr = ["dst", "src"] + [f"op{k}" for k in range(2, len(self.ops))]
        self.heaviest_first = self._digit_orders()
        # extra operands that are one value for the whole tensor: load once per call
        self.scalar_ops = {k for k in range(2, len(self.ops))
                           if all(n.strides[k] == 0 for n in self.ir.nodes)}
        self.uses_nt = False
        self.chunk_var: str | None = None
        self.buffer_elems = 0  # size of the per-call transpose buffer for epilogues
        self.stage_elems = 0  # size of the per-call row stage (Plan.row_stage)
        self.src_stage_used = False  # some period lines read through the source stage
        self._job_src: str | None = None  # the source base of the staged job being emitted
        # a job's prefetch cut into a piece before each staged tile call (Plan.panel_spread,
        # wide panels, Plan.chunk_prefetch): the piece's micro-kernel and the elements ``pfo``
        # then advances (_prefetch_pieces)
        self._pieces: tuple[str, int] | None = None
        self._job_shift = 0  # elements past a line at which the job being emitted starts (job_shifts)
        # the job being emitted starts off the lines and realigns its tiles (Plan.job_stream_shift)
        self._stream_shift = False
        self.stream_shift_used = False  # some job realigns through ``jcarry``
        self.outer_vars: dict[int, str] = {}  # outer node -> its index variable (_outer_offsets)
        t = plan.tile
        # staged transposes from a source padding B's dim: (block node, last block, its columns)
        self.padded_b = (padded_b_blocks(self.ir, t) if t is not None and (plan.shifted or plan.panel)
                         else None)
        # rows of a transpose over two destination digits (``TileSpec.a2``)
        self.src_rows = src_rows(self.ir, t) if t is not None and t.a2 is not None else None
        # Plan.src_stage: runs the stage holds (of the whole B), and its elements
        self.src_stage_runs = 0
        self.src_stage_elems = 0
        if plan.src_stage and self.src_rows is not None and t is not None and t.b is not None:
            runs = stage_runs(self.src_rows, self.ir.nodes[t.b].extent)
            if runs is not None:
                self.src_stage_runs = runs[2]
                self.src_stage_elems = runs[2] * plan.src_stage + max(1, 64 // self.ops[1].dtype.size)

    # ---------------------------------------------------------------- helpers
    def _digit_orders(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for i, n in enumerate(self.ir.nodes):
            if n.dim is not None:
                out.setdefault(n.dim, []).append(i)
        return out

    def _is_heaviest_remaining(self, idx: int, entered: set[int]) -> bool:
        n = self.ir.nodes[idx]
        for j in self.heaviest_first.get(n.dim, []):  # type: ignore[arg-type]
            m = self.ir.nodes[j]
            if j != idx and j not in entered and m.weight > n.weight:
                return False
        return True

    def _step(self, offs: list[str], node: Node, var: str, depth: int) -> list[str]:
        new = []
        for o, s in zip(offs, node.strides):
            if s is None or s == 0:
                new.append(o)
                continue
            nv = self.w.var("o")
            term = var if s == 1 else f"{var} * {s}"
            self.w.put(depth, f"{nv} = {o} + {term}")
            new.append(nv)
        return new

    def _step_const(self, offs: list[str], node: Node, value: int) -> list[str]:
        out = []
        for o, s in zip(offs, node.strides):
            if s is None or s == 0 or value == 0:
                out.append(o)
            else:
                out.append(f"({o} + {value * s})")
        return out

    # ---------------------------------------------------------------- the nest
    def render(self) -> str:
        p = self.plan
        body = self._render_body()
        head = [
            "# layoutjit generated kernel -- do not edit (regenerated from the plan)",
            f"# layoutjit codegen {CODEGEN_VERSION}, runtime {runtime_fingerprint()}",
        ]
        if self.title:
            head += ["# " + line for line in self.title.splitlines()]
        head += ["import numpy as np", "import numba as nb", "from numba import types as nbt",
                 "from layoutjit.runtime import opaque, ptr_from_int"]
        head += list(self.ep.imports)
        if self.tiles or self.uses_nt:
            kinds = sorted({{"cols": "tile_cols", "rows": "tile_rows"}.get(k[0], k[0]) for k in self.tiles}
                           | ({"sfence"} if self.uses_nt else set()))
            head.append(f"from layoutjit.simd import {', '.join(kinds)}")
        for spec, name in self.tiles.items():
            if spec[0] == "tile_shift":
                _, V, sdt, ddt = spec
                head.append(f"{name} = tile_shift({sdt!r}, {ddt!r}, V={V})")
            elif spec[0] == "copy_prefix":
                _, qq, sdt, ddt = spec
                head.append(f"{name} = copy_prefix({ddt!r}, {qq})")
            elif spec[0] == "tile_stream_shift":
                _, R, V, hd, sdt, ddt = spec
                head.append(f"{name} = tile_stream_shift({R}, {V}, {sdt!r}, {ddt!r}, "
                            + ("head=True, " if hd else "") + f"vbytes={p.vector_bytes})")
            elif spec[0] == "prefetch":
                head.append(f"{name} = prefetch({spec[1]}" + (", l2_only=True" if spec[2] else "")
                            + (", write=True)" if spec[3] else ")"))
            elif spec[0] in ("cols", "rows"):
                _, R, V, Rv, Vv, nt, sdt, ddt, post = spec
                fn = {"cols": "tile_cols", "rows": "tile_rows"}[spec[0]]
                head.append(f"{name} = {fn}({R}, {V}, {sdt!r}, {ddt!r}, Rv={Rv}, Vv={Vv}, nt={nt}, "
                            f"vbytes={p.vector_bytes}" + (f", post={post!r})" if post else ")"))
            elif spec[0] == "gather":
                _, R, V, Rv, nt, Vv, dense, over, pow2, sdt, ddt = spec
                head.append(f"{name} = gather({R}, {V}, {sdt!r}, {ddt!r}, Rv={Rv}, "
                            + (f"Vv={Vv}, " if Vv != V else "")
                            + ("src_dense=True, " if dense else "")
                            + ("src_over=True, " if over else "")
                            + ("src_pow2=True, " if pow2 else "")
                            + f"nt={nt}, vbytes={p.vector_bytes})")
            else:
                _, R, V, Rv, Vv, nt, rc, sdt, ddt, dense, post, rows, over = spec
                head.append(f"{name} = tile({R}, {V}, {sdt!r}, {ddt!r}, Rv={Rv}, Vv={Vv}, "
                            f"nt={nt}, rows_contiguous={rc}, vbytes={p.vector_bytes}"
                            + (", src_dense=True" if dense else "")
                            + (", src_over=True" if over else "")
                            + (f", src_rows={rows!r}" if rows is not None else "")
                            + (f", post={post!r})" if post else ")"))
        for values, name in self.tables.items():
            head.append(f"{name} = np.array({list(values)!r}, np.int64)")
        sig_args = ", ".join(
            [f"nbt.CPointer(nbt.{numba_type(self.ops[1].dtype)})",
             f"nbt.CPointer(nbt.{numba_type(self.ops[0].dtype)})",
             "nbt.CPointer(nbt.int64)", "nbt.int64", "nbt.int64"])
        head += [
            "",
            f"SIG = nbt.void({sig_args})",
            "",
            "",
            '@nb.cfunc(SIG, cache=True, error_model="numpy")',
            "def kernel(sp, dp, ap, lo, hi):",
        ]
        return "\n".join(head + body) + "\n"

    def _extent_of(self, op: Operand) -> int:
        """Elements the operand's carray must span (offset0 + max reachable offset + 1)."""
        m = op.offset0
        for d, digs in enumerate(op.digits):
            r = self.ir.dims[d]
            top = max(0, r.write - 1)
            for dg in digs:
                q = top // dg.weight
                if dg.extent is not None:
                    q = min(q, dg.extent - 1)
                m += q * dg.stride
        return m + 1

    def _render_body(self) -> list[str]:
        w = self.w
        depth = 1
        for k, op in enumerate(self.ops):
            n = self._extent_of(op)
            if k == 0:
                w.put(depth, f"dst = nb.carray(dp, ({n},))")
            elif k == 1:
                w.put(depth, f"src = nb.carray(sp, ({n},))")
            else:
                w.put(depth, f"{self.arr[k]} = nb.carray(ptr_from_int(ap[{k - 2}], np.{numba_type(op.dtype)}), ({n},))")
        for k in sorted(self.scalar_ops):
            w.put(depth, f"v{k} = {self.arr[k]}[{self.ops[k].offset0}]")
        buf_at = len(w.lines)
        t = self.plan.tile
        if self.plan.shifted:
            self._render_shifted(depth)
        elif self.plan.panel:
            self._render_panel(depth)
        elif self.plan.nt and t is not None and t.kind == "stream":
            dsz = self.ops[0].dtype.size
            w.put(depth, "dbase = dst.ctypes.data")
            whole = "" if self.plan.nt_split else f" and hi - lo == {self.plan.jobs}"
            if self.plan.nt_tune:
                whole = self._nt_request(depth)
            w.put(depth, f"if dbase % {dsz} == 0{whole}:")
            self._render_jobs(depth + 1, nt=True)
            if self.uses_nt:
                w.put(depth + 1, "sfence()")
            w.put(depth, "else:")
            self._render_jobs(depth + 1, nt=False)
        elif self.plan.nt:
            # NT only where the plan wants it at this thread count: a call given every job
            # is a serial run (Plan.nt_split)
            whole = "" if self.plan.nt_split else f" and hi - lo == {self.plan.jobs}"
            if self.plan.nt_tune:
                whole = self._nt_request(depth)
            w.put(depth, f"if (dst.ctypes.data & 63) == 0{whole}:")
            self._render_jobs(depth + 1, nt=True)
            if self.uses_nt:
                w.put(depth + 1, "sfence()")
            w.put(depth, "else:")
            self._render_jobs(depth + 1, nt=False)
        else:
            self._render_jobs(depth, nt=False)
        bufs: list[str] = []
        if self.src_stage_used:  # Plan.src_stage; ssto: its first element on a 64-byte line
            bufs += scratch("sstage", self.src_stage_elems, self.ops[1].dtype)
            bufs.append(f"ssto = ((-sstage.ctypes.data) & 63) // {self.ops[1].dtype.size}")
        if self.stream_shift_used:
            bufs += scratch("jcarry", 64 // self.ops[0].dtype.size, self.ops[0].dtype)
        if self.plan.job_stage:
            extra = max(1, 64 // self.ops[0].dtype.size) if self.plan.job_shift else 0
            bufs += scratch("jstage", self.plan.job_stage + extra, self.ops[0].dtype)
        if self.stage_elems:  # Plan.row_stage; sto: its first element on a 64-byte line
            bufs += scratch("stage", self.stage_elems, self.ops[0].dtype)
            bufs.append(f"sto = ((-stage.ctypes.data) & 63) // {self.ops[0].dtype.size}")
        if self.buffer_elems:
            bufs += scratch("obuf", self.buffer_elems, self.ops[0].dtype)
            if any("tbuf" in line for line in w.lines):  # the stream epilogue uses obuf only
                bufs += scratch("tbuf", self.buffer_elems, self.ops[1].dtype)
        w.lines[buf_at:buf_at] = ["    " * depth + line for line in bufs]
        return w.lines

    def _nt_request(self, depth: int) -> str:
        """Read the store kind the launcher picked (``Plan.nt_tune``; store_choice.py): jobs
        offset by the job count ask for NT stores. Returns the condition to AND in."""
        jobs = self.plan.jobs
        self.w.put(depth, f"ntq = lo >= {jobs}")
        self.w.put(depth, "if ntq:")
        self.w.put(depth + 1, f"lo -= {jobs}")
        self.w.put(depth + 1, f"hi -= {jobs}")
        return " and ntq"

    def _render_shifted(self, depth: int) -> None:
        """A transpose whose destination rows start off 64-byte lines (``Plan.shifted``).

        Jobs are (outer loops) x (blocks of V destination rows), run in panels of
        ``shift_panel`` blocks. For each row group of G = R*M source rows, every
        block is transposed into ``stage`` -- per destination row: q slots for the
        carry, then G new elements -- and each row emits the whole aligned lines
        it now has (``gather(1, q)`` non-temporal stores from the stage), keeping
        the rest (< q elements) in ``carry`` for the next group. A row's first
        partial line (group 0) and its last elements (last group) are plain
        stores. A destination not aligned to its element size gets the tiles
        written straight into it with plain stores (same jobs), as do the calls that
        ask for plain stores where the plan times both (``Plan.nt_tune``).
        """
        p, w = self.plan, self.w
        t, A, B, outer, nbb, nfull, btail = self._staged_nodes()
        dsz = self.ops[0].dtype.size
        q = 64 // dsz
        G = shift_rows(self.ir, t)
        sA, dB = A.strides[1], B.strides[0]
        assert sA is not None and dB is not None
        ng = -(-A.extent // G)
        last = A.extent - (ng - 1) * G
        row = q + G
        pb = p.shift_panel
        line = self._micro(("gather", 1, q, 1, True), str(self.ops[0].dtype), str(self.ops[0].dtype))
        vcopy = self._micro(("gather", 1, q, 1, False), str(self.ops[0].dtype), str(self.ops[0].dtype))

        def tiles(dep: int, rows: int, cols: int, target: str) -> None:
            """Tile calls for ``rows`` source rows x ``cols`` columns at (a0, j)."""
            start = 0
            if rows // t.R > 4:  # long groups (shift_rows): a loop of tiles
                start = rows // t.R * t.R
                w.put(dep, f"for rr in range(0, {start}, {t.R}):")
                self._tile_call(dep + 1, t.R, cols, "(a0 + rr)", target, f"{q} + rr", row)
            for r0 in range(start, rows, t.R):
                self._tile_call(dep, min(t.R, rows - r0), cols, f"(a0 + {r0})", target, f"{q + r0}", row)

        def fill(dep: int, target: str) -> None:
            """The tiles of group g for block jb (full or tail block, full or last group)."""
            def group(d2: int, cols: int) -> None:
                if ng > 1 and last != G:
                    w.put(d2, f"if g < {ng - 1}:")
                    tiles(d2 + 1, G, cols, target)
                    w.put(d2, "else:")
                    tiles(d2 + 1, last, cols, target)
                else:
                    tiles(d2, G if ng > 1 else last, cols, target)
            self._block_cases(dep, nfull, btail, group)

        w.put(depth, "dbase = dst.ctypes.data")
        ask = self._nt_request(depth) if p.nt_tune else ""  # (NT: the realigned lines)
        w.put(depth, f"aligned = dbase % {dsz} == 0{ask}")
        w.put(depth, f"de = dbase // {dsz}")
        # a row's part of a shared line into the edge stage: a masked vector copy (copy_prefix)
        # where that is one instruction, which reads a line's worth from the stage (q spare
        # elements)
        cpx = (self._micro(("copy_prefix", q), ddt_ := str(self.ops[0].dtype), ddt_)
               if SHIFT_COPY_PREFIX and p.shift_edges and p.vector_bytes >= 64
               and copy_prefix_native(self.ops[0].dtype) else None)
        bufs = scratch("stage", t.V * row + (q if cpx else 0), self.ops[0].dtype)
        bufs += scratch("carry", pb * t.V * q, self.ops[0].dtype)
        edges = p.shift_edges
        if edges:  # row r's first line, shared with row r-1's last (Plan.shift_edges)
            bufs += scratch("edge", pb * t.V * q, self.ops[0].dtype)
        for text in bufs:
            w.put(depth, text)
        w.put(depth, "it = lo")
        w.put(depth, "while it < hi:")
        d = depth + 1
        w.put(d, f"o = it // {nbb}")
        w.put(d, f"jb0 = it - o * {nbb}")
        w.put(d, f"jb1 = min({nbb}, jb0 + {pb}, jb0 + hi - it)")
        self._outer_offsets(d, outer)
        if edges:  # the job's rows (a source padding B's dim: the block's data columns)
            w.put(d, f"nr = {self._block_cols(btail, B)}" if self.padded_b is not None
                  else f"nr = min((jb1 - jb0) * {t.V}, {B.extent} - jb0 * {t.V})")
        w.put(d, f"for g in range({ng}):")
        w.put(d + 1, f"a0 = g * {G}")
        w.put(d + 1, "for jb in range(jb0, jb1):")
        d = d + 2
        w.put(d, f"j = jb * {t.V}")
        w.put(d, "if not aligned:")
        fill(d + 1, "dst")
        w.put(d + 1, "continue")
        w.put(d, f"cb = (jb - jb0) * {t.V * q}")
        sdt, ddt = str(self.ops[1].dtype), str(self.ops[0].dtype)
        if p.prefetch:
            # this block's share of the next group's source block (shift_prefetch)
            ssz = self.ops[1].dtype.size
            share = _whole_lines(-(-G * sA * ssz // nbb))
            pf = self._micro(("prefetch", share, p.prefetch_l2))
            w.put(d, f"{pf}(src, so + (a0 + {G}) * {sA} + jb * {share // ssz})")
        if ng > 2 and nfull and G == q == t.R and tile_shift_supported(sdt, ddt):
            # middle groups of full blocks: transpose, realign and store in registers
            ts = self._micro(("tile_shift", t.V), sdt, ddt)
            w.put(d, f"if g > 0 and g < {ng - 1} and {self._full_block(nfull)}:")
            w.put(d + 1, f"{ts}(src, so + a0 * {sA} + j, {sA}, dst, do + a0 + j * {dB}, {dB}, carry, cb)")
            w.put(d + 1, "continue")
        fill(d, "stage")
        w.put(d, f"for c in range({self._block_cols(btail, B)}):")
        d += 1
        w.put(d, f"rw = do + (j + c) * {dB}")
        w.put(d, f"h = (-(de + rw)) & {q - 1}")
        w.put(d, f"e = c * {row}")
        w.put(d, f"base = rw + a0 - {q}")
        w.put(d, f"cc = cb + c * {q}")
        # middle groups: exactly G/q whole lines per row, unrolled
        w.put(d, f"if g > 0 and g < {ng - 1}:")
        w.put(d + 1, f"{vcopy}(carry, cc, 0, stage, e)")
        w.put(d + 1, f"p = h if h > 0 else {q}")
        if G // q > 4:  # long groups (shift_rows): a loop of lines
            w.put(d + 1, f"for k in range(0, {G}, {q}):")
            w.put(d + 2, f"{line}(stage, e + p + k, 0, dst, base + p + k)")
        else:
            for k in range(G // q):
                w.put(d + 1, f"{line}(stage, e + p + {k * q}, 0, dst, base + p + {k * q})")
        w.put(d + 1, f"{vcopy}(stage, e + {G}, 0, carry, cc)")
        w.put(d + 1, "continue")
        w.put(d, "if g == 0:")
        def part(dep: int, target: str, at: str, frm: str, n: str) -> None:
            """``n`` elements from ``stage[frm]`` to ``target[at]``: into the edge stage by a
            masked copy where it is one instruction (``copy_prefix``); into the destination
            element by element (the masked store into a line out of cache measured slower,
            1.14 -> 1.71x copy on f32 `nchw -> nhwc` 256x200x13x13)."""
            if cpx and target == "edge":
                w.put(dep, f"{cpx}(stage, {frm}, {target}, {at}, {n})")
            else:
                w.put(dep, f"for x in range({n}):")
                w.put(dep + 1, f"{target}[{_ix(f'{at} + x')}] = stage[{_ix(f'{frm} + x')}]")

        if edges:  # a row's head: into its edge line, but the job's first row's plain
            w.put(d + 1, f"rr = (jb - jb0) * {t.V} + c")
            w.put(d + 1, "if rr > 0:")
            part(d + 2, "edge", f"rr * {q} + {q} - h", f"e + {q}", "h")
            w.put(d + 1, "else:")
            part(d + 2, "dst", f"base + {q}", f"e + {q}", "h")
        else:
            part(d + 1, "dst", f"base + {q}", f"e + {q}", "h")
        w.put(d + 1, f"p = {q} + h")
        w.put(d, "else:")
        w.put(d + 1, f"{vcopy}(carry, cc, 0, stage, e)")
        w.put(d + 1, f"p = h if h > 0 else {q}")
        if ng > 1 and last != G:
            w.put(d, f"end = {q + G} if g < {ng - 1} else {q + last}")
        else:
            w.put(d, f"end = {q + G}")
        w.put(d, f"while p + {q} <= end:")
        w.put(d + 1, f"{line}(stage, e + p, 0, dst, base + p)")
        w.put(d + 1, f"p += {q}")
        w.put(d, f"if g == {ng - 1}:")
        if edges:  # a row's tail: the next row's edge line, but the job's last row's plain
            w.put(d + 1, f"rn = (jb - jb0) * {t.V} + c + 1")
            w.put(d + 1, "if rn < nr:")
            part(d + 2, "edge", f"rn * {q}", "e + p", "end - p")
            w.put(d + 1, "else:")
            part(d + 2, "dst", "base + p", "e + p", "end - p")
        else:
            part(d + 1, "dst", "base + p", "e + p", "end - p")
        w.put(d, "else:")
        w.put(d + 1, f"{vcopy}(stage, e + {G}, 0, carry, cc)")
        if edges:  # the shared lines, whole (a row that starts a line shares none)
            d = depth + 1
            w.put(d, "if aligned:")
            w.put(d + 1, "for rr in range(1, nr):")
            w.put(d + 2, f"rw = do + (jb0 * {t.V} + rr) * {dB}")
            w.put(d + 2, f"h = (-(de + rw)) & {q - 1}")
            w.put(d + 2, "if h > 0:")
            w.put(d + 3, f"{line}(edge, rr * {q}, 0, dst, rw + h - {q})")
        w.put(depth + 1, "it += jb1 - jb0")
        w.put(depth, "if aligned:")
        w.put(depth + 1, "sfence()")
        self.uses_nt = True

    def _staged_nodes(self) -> tuple[TileSpec, Node, Node, list[int], int, int, int]:
        """What the staged transposes (``Plan.shifted``/``Plan.panel``) share: the tile, its
        nodes A and B, the outer nodes, and B's blocks of V (all, full ones, the tail's size)."""
        t = self.plan.tile
        assert t is not None and t.b is not None
        A, B = self.ir.nodes[t.a], self.ir.nodes[t.b]
        outer = outer_nodes(self.ir, t)
        return t, A, B, outer, -(-B.extent // t.V), B.extent // t.V, B.extent % t.V

    def _tile_call(self, depth: int, rows: int, cols: int, a: str, target: str, stage_at: str,
                   stage_stride: int) -> None:
        """One tile of a staged transpose (``Plan.shifted``/``Plan.panel``): ``rows`` source rows
        from row ``a`` x ``cols`` columns from ``j``, into ``stage`` (row c at ``stage_at +
        c*stage_stride``) or, for ``target == "dst"``, straight into the destination."""
        t = self.plan.tile
        assert t is not None and t.b is not None
        sA, dB = self.ir.nodes[t.a].strides[1], self.ir.nodes[t.b].strides[0]
        fn = self._micro(("tile", rows, cols, rows, cols, False, False), dense=sA == cols)
        so = f"so + {a} * {sA} + j"
        if target == "stage":
            self._put_piece(depth)
            self.w.put(depth, f"{fn}(src, {so}, {sA}, stage, {stage_at}, {stage_stride})")
        else:
            self.w.put(depth, f"{fn}(src, {so}, {sA}, dst, do + {a} + j * {dB}, {dB})")

    def _prefetch_pieces(self, share: int, calls: int, l2: bool) -> tuple[str, int]:
        """A job's prefetch of ``share`` bytes cut into ``calls`` pieces of whole lines, one
        before each of its tile calls, in order: the piece's micro-kernel and the source
        elements it advances ``pfo`` (``self._pieces``)."""
        step = min(16384, max(64, _whole_lines(-(-share // calls))))
        return self._micro(("prefetch", step, l2)), step // self.ops[1].dtype.size

    def _put_piece(self, depth: int) -> None:
        """The next piece of the job's prefetch (``self._pieces``), where one is being cut."""
        if self._pieces is not None:
            self.w.put(depth, f"{self._pieces[0]}(src, pfo)")
            self.w.put(depth, f"pfo += {self._pieces[1]}")

    def _block_cases(self, depth: int, nfull: int, btail: int, body: Callable[[int, int], None]) -> None:
        """``body(depth, cols)`` for the full blocks (``jb < nfull``) and the tail block (a
        source padding B's dim: the blocks before the last one and the last one's data)."""
        t = self.plan.tile
        assert t is not None
        full = self._full_block(nfull)
        cases = [t.V] if nfull else []
        if self.padded_b is not None:
            cases = [t.V, self.padded_b[2]]
        elif btail:
            cases.append(btail)
        for k, cols in enumerate(cases):
            if len(cases) > 1:
                self.w.put(depth, f"if {full}:" if k == 0 else "else:")
            body(depth + (len(cases) > 1), cols)

    def _full_block(self, nfull: int) -> str:
        """The condition that the job's block of B is a full one (of V columns): ``jb <
        nfull``, or, from a source padding B's dim, the block digit before the last block."""
        if self.padded_b is not None:
            k, last, _ = self.padded_b
            return f"{self.outer_vars[k]} < {last}"
        return f"jb < {nfull}"

    def _block_cols(self, btail: int, B: Node) -> str:
        """Columns (destination rows) of the job's block at ``j``."""
        t = self.plan.tile
        assert t is not None
        if self.padded_b is not None:
            return f"({t.V} if {self._full_block(0)} else {self.padded_b[2]})"
        return f"min({t.V}, {B.extent} - j)" if btail else str(t.V)

    def _outer_offsets(self, depth: int, outer: list[int]) -> None:
        """``so`` and ``do``: the source and destination offsets of outer-loop index ``o``."""
        w = self.w
        so = [str(self.ops[1].offset0)]
        do = [str(self.ops[0].offset0)]
        rest = "o"
        for k, i in enumerate(reversed(outer)):
            n = self.ir.nodes[i]
            v = w.var("x")
            self.outer_vars[i] = v
            w.put(depth, f"{v} = {rest} % {n.extent}")
            if k < len(outer) - 1:
                r = w.var("r")
                w.put(depth, f"{r} = {rest} // {n.extent}")
                rest = r
            so.append(f"{v} * {n.strides[1]}")
            do.append(f"{v} * {n.strides[0]}")
        w.put(depth, "so = " + " + ".join(so))
        w.put(depth, "do = " + " + ".join(do))

    def _render_panel(self, depth: int) -> None:
        """A transpose into short destination rows that follow one another (``Plan.panel``).

        Job = (outer loops) x (block of V destination rows). The block's rows are one
        contiguous panel of V*A elements: its tiles fill ``stage`` (row c at c*A), and
        the stage is copied to the destination as whole aligned lines (``gather(1, q)``,
        non-temporal), with plain stores for the partial first and last line. A
        destination not aligned to its element size gets the tiles written straight
        into it with plain stores.
        """
        w = self.w
        t, A, B, outer, nbb, nfull, btail = self._staged_nodes()
        dsz = self.ops[0].dtype.size
        q = max(1, 64 // dsz)
        sA, dB = A.strides[1], B.strides[0]
        assert sA is not None and dB == A.extent
        line = self._micro(("gather", 1, q, 1, True), str(self.ops[0].dtype), str(self.ops[0].dtype))

        G = t.R * t.M
        ngf = A.extent // G
        ncalls = ngf * t.M + len(range(ngf * G, A.extent, t.R))  # tile calls per job

        def tiles(dep: int, cols: int, target: str) -> None:
            """Tile calls for all A rows x ``cols`` columns at j (groups of R*M rows, then a tail)."""
            if ngf:
                w.put(dep, f"for a0 in range(0, {ngf * G}, {G}):")
                for r0 in range(0, G, t.R):
                    self._tile_call(dep + 1, t.R, cols, f"(a0 + {r0})", target, f"a0 + {r0}", A.extent)
            for r0 in range(ngf * G, A.extent, t.R):
                self._tile_call(dep, min(t.R, A.extent - r0), cols, str(r0), target, str(r0), A.extent)

        def fill(dep: int, target: str) -> None:
            self._block_cases(dep, nfull, btail, lambda d2, cols: tiles(d2, cols, target))

        if self.plan.panel_blocks > 1:
            self._render_wide_panel(depth, line)
            return
        d = self._panel_jobs(depth, t.V * A.extent, nbb, "jb", outer)
        w.put(d, f"j = jb * {t.V}")
        w.put(d, "if not aligned:")
        fill(d + 1, "dst")
        w.put(d + 1, "continue")
        if self.plan.prefetch:
            # this job's share of the next outer index's source block (panel_prefetch): at
            # once, or spread over the job's tile calls in order (Plan.panel_spread)
            ssz = self.ops[1].dtype.size
            share = min(16384, _whole_lines(-(-A.extent * sA * ssz // nbb)))
            at = f"so + {self.ir.nodes[outer[-1]].strides[1]} + jb * {share // ssz}"
            if self.plan.panel_spread and ncalls > 1:
                self._pieces = self._prefetch_pieces(share, ncalls, self.plan.prefetch_l2)
                w.put(d, f"pfo = {at}")
            else:
                pf = self._micro(("prefetch", share, self.plan.prefetch_l2))
                w.put(d, f"{pf}(src, {at})")
        fill(d, "stage")
        self._pieces = None
        self._write_stage(depth, line, f"{self._block_cols(btail, B)} * {A.extent}", f"do + j * {A.extent}")

    def _panel_jobs(self, depth: int, stage_elems: int, per_outer: int, jvar: str,
                    outer: list[int]) -> int:
        """A panel kernel's start: the destination's alignment, the stage, and the job loop
        (job = outer index ``o`` x panel ``jvar``, ``per_outer`` panels per outer index,
        with ``so``/``do`` set); returns the depth of the loop's body."""
        w = self.w
        dsz = self.ops[0].dtype.size
        w.put(depth, "dbase = dst.ctypes.data")
        w.put(depth, f"aligned = dbase % {dsz} == 0")
        w.put(depth, f"de = dbase // {dsz}")
        for text in scratch("stage", stage_elems, self.ops[0].dtype):
            w.put(depth, text)
        w.put(depth, "for it in range(lo, hi):")
        d = depth + 1
        w.put(d, f"o = it // {per_outer}")
        w.put(d, f"{jvar} = it - o * {per_outer}")
        self._outer_offsets(d, outer)
        return d

    def _write_stage(self, depth: int, line: str, count: str, start: str) -> None:
        """A panel job's end (at ``depth + 1``): its ``count`` staged elements to the
        destination from ``start``, as whole aligned lines (``line``, non-temporal) between
        plain stores of the partial first and last line; then, after the job loop, the
        ``sfence`` that orders the NT stores."""
        w, d = self.w, depth + 1
        q = max(1, 64 // self.ops[0].dtype.size)
        w.put(d, f"n = {count}")
        w.put(d, f"start = {start}")
        w.put(d, f"h = min((-(de + start)) & {q - 1}, n)")
        w.put(d, "for x in range(h):")
        w.put(d + 1, f"dst[{_ix('start + x')}] = stage[{_ix('x')}]")
        w.put(d, "p = h")
        w.put(d, f"while p + {q} <= n:")
        w.put(d + 1, f"{line}(stage, p, 0, dst, start + p)")
        w.put(d + 1, f"p += {q}")
        w.put(d, "for x in range(p, n):")
        w.put(d + 1, f"dst[{_ix('start + x')}] = stage[{_ix('x')}]")
        w.put(depth, "if aligned:")
        w.put(depth + 1, "sfence()")
        self.uses_nt = True

    def _render_wide_panel(self, depth: int, line: str) -> None:
        """A panel plan whose jobs stage ``panel_blocks`` blocks of V destination rows
        (``plan.wide_panel``): for each strip of R source rows, the tiles of every block,
        so the source rows are read in order; then the stage as whole lines."""
        w = self.w
        t, A, B, outer, nbb, nfull, btail = self._staged_nodes()
        pb = self.plan.panel_blocks
        npan = -(-nbb // pb)
        ncols = pb * t.V

        pieces = None
        if self.plan.prefetch:
            # every tile call prefetches its share of the job's part of the next outer
            # index's source block (panel_prefetch), in order: the whole block where a job
            # takes whole outer blocks, else the job's npan-th (panel_line_blocks)
            per_job = A.extent * B.extent // npan  # (source elements; npan divides B's blocks)
            pieces = self._prefetch_pieces(per_job * self.ops[1].dtype.size, -(-A.extent // t.R) * pb,
                                           self.plan.prefetch_l2)
            pf_next = self.ir.nodes[outer[-1]].strides[1]

        def calls(dep: int, rows: int, a: str, target: str, base: str) -> None:
            """The tile call of ``rows`` source rows from row ``a`` at block ``j`` (its
            prefetch share first when staged); ``base``: the first block in the stage."""
            at = f"(j - {base}) * {A.extent} + {a}"
            if btail:
                w.put(dep, f"if j < {nfull * t.V}:")
                self._tile_call(dep + 1, rows, t.V, a, target, at, A.extent)
                w.put(dep, "else:")
                self._tile_call(dep + 1, rows, btail, a, target, at, A.extent)
            else:
                self._tile_call(dep, rows, t.V, a, target, at, A.extent)

        def rows_of(dep: int, body: Callable[[int, int, str], None]) -> None:
            """``body(dep, rows, a)`` for every group of R source rows, then the tail."""
            nfr = A.extent // t.R
            if nfr:
                w.put(dep, f"for a0 in range(0, {nfr * t.R}, {t.R}):")
                body(dep + 1, t.R, "a0")
            if A.extent % t.R:
                body(dep, A.extent % t.R, str(nfr * t.R))

        def strip(dep: int, rows: int, a: str, target: str) -> None:
            """Tiles of ``rows`` source rows from row ``a``, for every block of this job."""
            w.put(dep, f"for j in range(j0, j0 + nc, {t.V}):")
            calls(dep + 1, rows, a, target, "j0")

        # sub-panels of ``sub`` blocks (plan.panel_sub_blocks): each block's tiles for every
        # A row, then the sub-panel's stage written out (a stage that stays in L1)
        sub = self.plan.panel_sub_blocks
        d = self._panel_jobs(depth, (sub or pb) * t.V * A.extent, npan, "pj", outer)
        w.put(d, f"j0 = pj * {ncols}")
        w.put(d, f"nc = min({ncols}, {B.extent} - j0)")
        w.put(d, "if not aligned:")
        rows_of(d + 1, lambda dep, rows, a: strip(dep, rows, a, "dst"))
        w.put(d + 1, "continue")
        if pieces:
            w.put(d, f"pfo = so + {pf_next}" + (f" + pj * {per_job}" if npan > 1 else ""))
        self._pieces = pieces
        if not sub:
            rows_of(d, lambda dep, rows, a: strip(dep, rows, a, "stage"))
            self._pieces = None
            self._write_stage(depth, line, f"nc * {A.extent}", f"do + j0 * {A.extent}")
            return
        w.put(d, f"for s0 in range(j0, j0 + nc, {sub * t.V}):")
        w.put(d + 1, f"sn = min({sub * t.V}, j0 + nc - s0)")
        w.put(d + 1, f"for j in range(s0, s0 + sn, {t.V}):")
        rows_of(d + 2, lambda dep, rows, a: calls(dep, rows, a, "stage", "s0"))
        self._pieces = None
        self._write_stage(d, line, f"sn * {A.extent}", f"do + s0 * {A.extent}")

    def _render_jobs(self, depth: int, nt: bool) -> None:
        p = self.plan
        order = p.loop_order()
        macro_job = p.macro_job
        npar = p.parallel - 1 if macro_job else p.parallel
        par_nodes = order[:npar]
        exts = [self.ir.nodes[i].extent for i in par_nodes]
        if macro_job:
            if p.tile is None:  # the innermost element loop, cut into chunks
                exts.append(-(-self.ir.nodes[order[-1]].extent // p.chunk))
            else:
                per = p.chunk if p.tile.kind == "stream" else (p.row_stage or p.tile.R * p.tile.M)
                exts.append(-(-tile_rows(self.ir, p.tile) // per))
        w = self.w
        offs = [str(op.offset0) for op in self.ops]
        state: dict[int, object] = {d: ("partial", 0) for d, r in enumerate(self.ir.dims) if r.guarded}
        terms: dict[int, list[str]] = {}
        if not exts:
            w.put(depth, "if lo < hi:")
            self._serial(depth + 1, 0, order, offs, state, terms, set(), nt)
            return
        w.put(depth, "for it in range(lo, hi):")
        depth += 1
        vars_ = []
        rest = "it"
        for k in range(len(exts)):
            inner = 1
            for e2 in exts[k + 1:]:
                inner *= e2
            v = f"j{k}"
            vars_.append(v)
            if inner == 1:
                w.put(depth, f"{v} = {rest}")
            else:
                w.put(depth, f"{v} = {rest} // {inner}")
                r = w.var("r")
                w.put(depth, f"{r} = {rest} % {inner}")
                rest = r
        self._decoded(depth, 0, par_nodes, vars_, order, npar, macro_job, offs, state, terms, set(), nt)

    def _decoded(self, depth: int, k: int, par_nodes: list[int], vars_: list[str], order: list[int],
                 npar: int, macro_job: bool, offs: list[str], state: dict, terms: dict,
                 entered: set[int], nt: bool) -> None:
        if k == len(par_nodes) and nt and self.plan.job_align:
            # this job's lines start on 64-byte boundaries, or it takes the plain stores
            dsz = self.ops[0].dtype.size
            for i, shift in enumerate(self.plan.job_shifts):
                self.w.put(depth, ("if " if i == 0 else "elif ")
                           + f"((dst.ctypes.data + ({offs[0]}) * {dsz}) & 63) == {shift * dsz}:")
                self._job_shift = shift  # (line_phases: the columns' phases move with the job)
                self._job_body(depth + 1, k, vars_, order, npar, macro_job, offs, state, terms, entered, True)
            self._job_shift = 0
            self.w.put(depth, "else:")
            # (Plan.job_stream_shift: whole-block tiles realign onto the lines, NT stores)
            self._stream_shift = self.plan.job_stream_shift and self.ep.direct and not self.ep.vector_ops
            self._job_body(depth + 1, k, vars_, order, npar, macro_job, offs, state, terms, entered, False)
            self._stream_shift = False
            return
        if k == len(par_nodes):
            self._job_body(depth, k, vars_, order, npar, macro_job, offs, state, terms, entered, nt)
            return
        idx = par_nodes[k]
        node = self.ir.nodes[idx]
        var = vars_[k]
        segs, st_key, state = self._segments_for(idx, state, entered)
        if segs is None:  # runtime guard fallback for this dim
            offs2 = self._step(offs, node, var, depth)
            self._decoded(depth, k + 1, par_nodes, vars_, order, npar, macro_job, offs2, state,
                          self._add_term(terms, node, var), entered | {idx}, nt)
            return
        if len(segs) == 1 and segs[0][0] == 0 and segs[0][1] == node.extent:
            st2 = dict(state)
            if st_key is not None:
                st2[st_key] = segs[0][2]
            offs2 = self._step(offs, node, var, depth)
            self._decoded(depth, k + 1, par_nodes, vars_, order, npar, macro_job, offs2, st2,
                          self._add_term(terms, node, var), entered | {idx}, nt)
            return
        first = True
        for s0, s1, new in segs:
            if s1 - s0 == 1:
                cond = f"{var} == {s0}"
            elif s0 > 0:
                cond = f"{var} >= {s0} and {var} < {s1}"
            else:
                cond = f"{var} < {s1}"
            self.w.put(depth, ("if " if first else "elif ") + cond + ":")
            first = False
            st2 = dict(state)
            if st_key is not None:
                st2[st_key] = new
            offs2 = self._step(offs, node, var, depth + 1)
            self._decoded(depth + 1, k + 1, par_nodes, vars_, order, npar, macro_job, offs2, st2,
                          self._add_term(terms, node, var), entered | {idx}, nt)

    def _job_body(self, depth: int, k: int, vars_: list[str], order: list[int], npar: int,
                  macro_job: bool, offs: list[str], state: dict, terms: dict, entered: set[int],
                  nt: bool) -> None:
        """What one job does once its offsets are decoded: a macro tile, or the serial loops."""
        if nt and self.plan.job_stage:
            self._staged_job(depth, k, order, npar, offs, state, terms, entered)
        elif macro_job and self.plan.tile is not None:
            self._tile(depth, offs, state, terms, entered, nt, group_var=vars_[k])
        else:
            self.chunk_var = vars_[k] if macro_job else None
            self._serial(depth, npar, order, offs, state, terms, entered, nt)

    def _staged_job(self, depth: int, k: int, order: list[int], npar: int, offs: list[str], state: dict,
                    terms: dict, entered: set[int]) -> None:
        """``Plan.job_stage``: the job's loops with plain stores into ``jstage`` (offsets
        relative to the job's first destination element), then the stage written to the
        destination as whole aligned non-temporal lines. With ``Plan.job_shift`` the job may
        start anywhere in a line: the stage starts at that place (``sh``), and the partial
        first and last line go out plain."""
        w = self.w
        span = self.plan.job_stage
        q = max(1, 64 // self.ops[0].dtype.size)
        line = self._micro(("gather", 1, q, 1, True), str(self.ops[0].dtype), str(self.ops[0].dtype))
        w.put(depth, f"jb = {offs[0]}")
        shift = self.plan.job_shift
        if shift:  # the job's place in its first line (the destination's base is aligned here)
            w.put(depth, f"sh = jb % {q}")
            if JOB_STAGE_LAST_LINE_PREFETCH:
                # the partial last line, which plain stores write after the stage is filled
                w.put(depth, f"{self._micro(('prefetch', 64, False, True))}(dst, jb + {span - 1})")
        self.chunk_var = None
        p = self.plan
        if p.chunk_prefetch and p.tile is not None and p.tile.b is not None:
            # job_stage_chunks: this job's share of the next outer index's block (chunk j of
            # C, cs source elements apart), a piece before each tile call
            t, tb = p.tile, p.tile.b
            cn = self.ir.nodes[p.parallel - 1]
            C, cs, ssz = cn.extent, cn.strides[1] or 0, self.ops[1].dtype.size
            share = p.chunk_prefetch // C
            calls = -(-self.ir.nodes[tb].extent // t.V) * -(-self.ir.nodes[t.a].extent // t.R)
            w.put(depth, f"pfo = {offs[1]} + {p.chunk_prefetch} + (it % {C}) * {share - cs}")
            self._pieces = self._prefetch_pieces(share * ssz, calls, True)
        first = len(w.lines)
        self._job_src = offs[1]  # (Plan.job_prefetch: the tiles prefetch from this job's block on)
        self._serial(depth, npar, order, ["sh" if shift else "0"] + list(offs[1:]), state, terms, entered,
                     False)
        self._job_src = None
        self._pieces = None
        for i in range(first, len(w.lines)):
            assert "ctypes" not in w.lines[i], w.lines[i]
            w.lines[i] = re.sub(r"\bdst\b", "jstage", w.lines[i])
        if not shift:
            w.put(depth, f"for p in range(0, {span}, {q}):")
            w.put(depth + 1, f"{line}(jstage, p, 0, dst, jb + p)")
        else:
            # stage element e is destination element jb - sh + e: the partial first and last
            # line plain (the neighbouring jobs write the rest of them), whole lines NT
            w.put(depth, f"je = sh + {span}")
            w.put(depth, f"e0 = min({q}, je)")
            w.put(depth, f"e1 = max(e0, je // {q} * {q})")
            w.put(depth, "for e in range(sh, e0):")
            w.put(depth + 1, "dst[jb - sh + e] = jstage[e]")
            w.put(depth, f"for p in range(e0, e1, {q}):")
            w.put(depth + 1, f"{line}(jstage, p, 0, dst, jb - sh + p)")
            w.put(depth, "for e in range(e1, je):")
            w.put(depth + 1, "dst[jb - sh + e] = jstage[e]")
        self.uses_nt = True

    def _job_prefetch(self, depth: int, do: str, elems: int) -> None:
        """``Plan.job_prefetch``: a call's share (``elems`` source elements) of the next job's
        source block, at its destination position in the job (offsets relative to the job
        inside a staged job) scaled to the block; nothing outside a staged job."""
        if not self.plan.job_prefetch or self._job_src is None:
            return
        nxt, span = self.plan.job_prefetch, self.plan.job_stage
        pf = self._micro(("prefetch", _whole_lines(elems * self.ops[1].dtype.size), True))
        pos = f"({do})" if nxt == span else f"({do}) * {nxt} // {span}"
        self.w.put(depth, f"{pf}(src, {self._job_src} + {nxt} + {pos})")

    def _rows_ahead(self, depth: int, so: str, sA: int, rows: int, length: int, l2: bool) -> None:
        """``Plan.rows_ahead``: one prefetch for each line of a call's ``rows`` source rows
        (``length`` elements, ``sA`` apart from ``so``), that many elements on."""
        ahead = self.plan.rows_ahead
        if not ahead:
            return
        q = max(1, 64 // self.ops[1].dtype.size)
        pf = self._micro(("prefetch", 64, l2))
        pts = [r * sA + x for r in range(rows) for x in range(0, length, q)]
        for x in _covering_points(pts, q):
            self.w.put(depth, f"{pf}(src, {so} + {x + ahead})")

    def _segments_for(self, idx: int, state: dict, entered: set[int]) -> tuple[list | None, int | None, dict]:
        """Segments of the loop over node idx, the dim they specialize, and the state to use.

        Returns ``(None, d, state')`` when dim d must fall back to a runtime guard
        (one of its lighter digits was entered before this heavier one).
        """
        node = self.ir.nodes[idx]
        d = node.dim
        if d is None or d not in state:
            return [(0, node.extent, None)], None, state
        st = state[d]
        if isinstance(st, tuple) and st[0] == "runtime":
            return None, d, state
        if isinstance(st, tuple) and st[0] == "partial" and not self._is_heaviest_remaining(idx, entered):
            st2 = dict(state)
            st2[d] = ("runtime", st[1])
            return None, d, st2
        return dim_segments(self.ir, node, st), d, state

    def _add_term(self, terms: dict, node: Node, var: str) -> dict:
        if node.dim is None:
            return terms
        t = dict(terms)
        t[node.dim] = terms.get(node.dim, []) + [var if node.weight == 1 else f"{var} * {node.weight}"]
        return t

    def _add_const_term(self, terms: dict, node: Node, value: int) -> dict:
        if node.dim is None or value == 0:
            return terms
        t = dict(terms)
        t[node.dim] = terms.get(node.dim, []) + [str(value * node.weight)]
        return t

    def _serial(self, depth: int, k: int, order: list[int], offs: list[str], state: dict,
                terms: dict, entered: set[int], nt: bool) -> None:
        if k == len(order):
            if self.plan.tile is not None:
                self._tile(depth, offs, state, terms, entered, nt, group_var=None)
            else:
                self._leaf(depth, offs, state, terms)
            return
        idx = order[k]
        node = self.ir.nodes[idx]
        segs, st_key, state = self._segments_for(idx, state, entered)
        if segs is None:
            var = self.w.var("i")
            self.w.put(depth, f"for {var} in range({node.extent}):")
            offs2 = self._step(offs, node, var, depth + 1)
            self._elem_prefetch(depth + 1, k, order, offs2)
            self._serial(depth + 1, k + 1, order, offs2, state, self._add_term(terms, node, var),
                         entered | {idx}, nt)
            return
        for s0, s1, new in segs:
            st2 = dict(state)
            if st_key is not None:
                st2[st_key] = new
            if s1 - s0 == 1:
                offs2 = self._step_const(offs, node, s0)
                self._serial(depth, k + 1, order, offs2, st2, self._add_const_term(terms, node, s0),
                             entered | {idx}, nt)
            else:
                var = self.w.var("i")
                rng = f"{s1}" if s0 == 0 else f"{s0}, {s1}"
                if self.chunk_var is not None and k == len(order) - 1:
                    # this job's chunk of the innermost loop (unguarded: one segment)
                    ch = self.plan.chunk
                    rng = f"{self.chunk_var} * {ch}, min({self.chunk_var} * {ch} + {ch}, {s1})"
                self.w.put(depth, f"for {var} in range({rng}):")
                offs2 = self._step(offs, node, var, depth + 1)
                self._elem_prefetch(depth + 1, k, order, offs2)
                self._serial(depth + 1, k + 1, order, offs2, st2, self._add_term(terms, node, var),
                             entered | {idx}, nt)

    def _elem_prefetch(self, depth: int, k: int, order: list[int], offs: list[str]) -> None:
        """Plan.elem_prefetch: a source line ahead, once per step of the loop around the
        innermost one."""
        ahead = self.plan.elem_prefetch
        if ahead and k == len(order) - 2:
            pf = self._micro(("prefetch", 64, False))
            self.w.put(depth, f"{pf}(src, {offs[1]} + {ahead})")

    # ---------------------------------------------------------------- leaves
    def _index_expr(self, d: int, state: dict, terms: dict) -> str:
        """The logical index of dim d: every entered digit adds a term (var or constant)."""
        parts = terms.get(d, [])
        return " + ".join(parts) if parts else "0"

    def _irregular_offsets(self, offs: list[str], state: dict, terms: dict, depth: int) -> list[str]:
        out = list(offs)
        for k, op in enumerate(self.ops):
            for d in range(len(self.ir.dims)):
                if any(n.dim == d and n.strides[k] is None for n in self.ir.nodes):
                    x = self.w.var("ix")
                    self.w.put(depth, f"{x} = {self._index_expr(d, state, terms)}")
                    out[k] = f"({out[k]} + {op.offset_expr_of_dim(d, x)})"
        return out

    def _guard(self, depth: int, state: dict, terms: dict) -> tuple[int, str] | None:
        """Emit the runtime guard for dims in runtime mode; returns (depth, mode)."""
        rt = [d for d, s in state.items() if isinstance(s, tuple) and s[0] == "runtime"]
        if not rt:
            return None
        conds_valid = []
        conds_write = []
        for d in rt:
            x = self.w.var("ix")
            self.w.put(depth, f"{x} = {self._index_expr(d, state, terms)}")
            r = self.ir.dims[d]
            conds_valid.append(f"{x} < {r.valid}")
            conds_write.append(f"{x} < {r.write}")
        return depth, " and ".join(conds_valid) + "|" + " and ".join(conds_write)

    def _leaf(self, depth: int, offs: list[str], state: dict, terms: dict) -> None:
        zero = any(s == "zero" for s in state.values())
        g = self._guard(depth, state, terms)
        if zero:
            if g is None:
                self._store_zero(depth, offs)
            else:
                self.w.put(depth, f"if {g[1].split('|')[1]}:")
                self._store_zero(depth + 1, offs)
            return
        if g is None:
            self._store_value(depth, offs, state, terms)
            return
        valid, write = g[1].split("|")
        self.w.put(depth, f"if {valid}:")
        self._store_value(depth + 1, offs, state, terms)
        self.w.put(depth, f"elif {write}:")
        self._store_zero(depth + 1, offs)

    def _store_zero(self, depth: int, offs: list[str]) -> None:
        self.w.put(depth, f"dst[{_ix(offs[0])}] = 0")

    def _store_value(self, depth: int, offs: list[str], state: dict, terms: dict) -> None:
        offs = self._irregular_offsets(offs, state, terms, depth)
        self._elem(depth, offs[0], f"src[{_ix(offs[1])}]", offs)

    # ---------------------------------------------------------------- tiles
    def _micro(self, key: tuple, sdt: str | None = None, ddt: str | None = None,
               dense: bool = False, post: tuple = (), rows: tuple | None = None, over: bool = False) -> str:
        """Name of a module-level micro-kernel (simd.tile or simd.gather) with these parameters.

        The data types default to the kernel's (src -> dst conversion in registers).
        ``dense``: a tile whose source rows are one run (``simd.tile(src_dense=True)``).
        """
        if key[0] == "prefetch" and len(key) == 3:
            key = key + (False,)  # ("prefetch", nbytes, l2_only, write): a read prefetch
        if key[0] == "gather" and len(key) == 5:
            key = key + (key[2], False)  # ("gather", R, V, Rv, nt, Vv, dense): whole rows
        if key[0] == "gather" and len(key) == 7:
            key = key + (False,)  # ... over: rows read whole past Vv (gather(src_over=True))
        if key[0] == "gather" and len(key) == 8:
            key = key + (False,)  # ... pow2: odd rows read to a power of two (src_pow2=True)
        key = key + (str(sdt or self.ops[1].dtype), str(ddt or self.ops[0].dtype))
        if key[0] == "tile":
            key = key + (dense and key[3] > 0 and key[4] == key[2], tuple(post), rows, over)
        if key[0] in ("cols", "rows"):
            key = key + (tuple(post),)
        if key[0] in ("tile", "cols") and (key[3] == 0 or key[4] == 0):
            key = key[:3] + (0, 0) + key[5:]  # all-zero tile: no reads
        if key not in self.tiles:
            self.tiles[key] = f"T{len(self.tiles)}"
        if key[0] in ("tile", "cols", "rows") and key[5] or key[0] in ("tile_shift", "tile_stream_shift"):
            self.uses_nt = True
        if key[0] == "gather" and key[4]:
            self.uses_nt = True
        return self.tiles[key]

    def _range_of(self, node: Node, state: dict) -> tuple[int, int]:
        """(valid steps, written steps) of a micro-kernel node in the current state."""
        n = node.extent
        d = node.dim
        if d is None or d not in state:
            return n, n
        st = state[d]
        if st == "full":
            return n, n
        if st == "zero":
            return 0, n
        assert isinstance(st, tuple) and st[0] == "partial"
        r = self.ir.dims[d]
        b, w = st[1], node.weight  # (w > 1: a uniform digit, plan._digit_order_ok)
        return _clamp(-(-(r.valid - b) // w), 0, n), _clamp(-(-(r.write - b) // w), 0, n)

    def _readable_of(self, node: Node, state: dict, cap: int | None = None) -> int:
        """Steps of a micro-kernel node whose source elements exist in memory (the source's
        padding included) in the current state, at most ``cap`` (default: the node's extent;
        past it only where the node is its whole dim and the source's padding follows)."""
        cap = node.extent if cap is None else cap
        if node.weight != 1:  # (a node with source stride 1 is its dim's lightest digit)
            return 0
        if node.dim is not None and isinstance(state.get(node.dim), tuple):
            r = self.ir.dims[node.dim]
            return _clamp(max(r.src_extent, r.valid) - state[node.dim][1], 0, cap)
        n = self._range_of(node, state)[0]  # unguarded or full: every step; zero: none
        if (n == node.extent and cap > n and node.dim is not None
                and not any(m.dim == node.dim for m in self.ir.nodes if m is not node)):
            r = self.ir.dims[node.dim]
            return _clamp(max(r.src_extent, r.valid), n, cap)
        return n

    def _tile(self, depth: int, offs: list[str], state: dict, terms: dict, entered: set[int],
              nt: bool, group_var: str | None) -> None:
        t = self.plan.tile
        assert t is not None
        g = self._guard(depth, state, terms)
        body = {"stream": self._stream_body, "lines": self._lines_body}.get(t.kind, self._tile_body)
        if g is not None:
            valid, write = g[1].split("|")
            self.w.put(depth, f"if {valid}:")
            body(depth + 1, offs, state, nt, group_var, zero=False)
            self.w.put(depth, f"elif {write}:")
            body(depth + 1, offs, state, nt, group_var, zero=True)
            return
        zero = any(s == "zero" for d, s in state.items())
        body(depth, offs, state, nt, group_var, zero=zero)

    # ------------------------------------------------------ transpose and lines
    def _tile_body(self, depth: int, offs: list[str], state: dict, nt: bool,
                   group_var: str | None, zero: bool) -> None:
        t = self.plan.tile
        assert t is not None and t.b is not None
        A = self.ir.nodes[t.a]
        B = self.ir.nodes[t.b]
        line_rows = None
        if t.a2 is not None:  # rows A2lo x A: lines, each row at its own source offset
            if tile_rows(self.ir, t) > t.R:
                self._period_lines(depth, offs, state, nt, group_var, zero)
                return
            # a padded A (plan._padded_line_digit) or A2 (plan._padded_line_steps): its
            # rows past the data in this state are padding rows, zeros in the registers
            line_rows = src_rows(self.ir, t, valid=self._range_of(A, state)[0],
                                 valid2=self._range_of(self.ir.nodes[t.a2], state)[0])
            A = Node(tile_rows(self.ir, t), None, 1, (1, 0))
        vA, wrA = self._range_of(A, state)
        vB, wrB = self._range_of(B, state)
        rdB = self._readable_of(B, state) if B.strides[1] == 1 else 0
        ssz = self.ops[1].dtype.size
        if zero:
            vA = 0
        sA, dB = A.strides[1], B.strides[0]
        assert sA is not None and dB is not None
        # row chunks: (start, rows, valid rows)
        atiles = []
        for a0 in range(0, wrA, t.R):
            R = min(t.R, wrA - a0)
            atiles.append((a0, R, _clamp(vA - a0, 0, R)))
        groups = [atiles[i:i + t.M] for i in range(0, len(atiles), t.M)]
        # column steps: runs of identical (V, valid V)
        bsteps = []
        for c0 in range(0, wrB, t.V):
            V = min(t.V, wrB - c0)
            bsteps.append((c0, V, _clamp(vB - c0, 0, V)))
        bruns: list[list] = []
        for st in bsteps:
            if bruns and bruns[-1][-1][1:] == st[1:]:
                bruns[-1].append(st)
            else:
                bruns.append([st])

        def shape(gr: list) -> tuple:
            return tuple((R, Rv) for _, R, Rv in gr)

        nuni = 0  # leading groups of the same shape become one loop
        while nuni < len(groups) and shape(groups[nuni]) == shape(groups[0]):
            nuni += 1

        def emit_group(dep: int, gr: list, base: str, stage: str | None = None) -> None:
            """One macro tile: its tiles into the destination, or (``stage``: the chunk's
            first row of A) into the row stage (``Plan.row_stage``)."""
            if t.c is not None:
                self._cols_group(dep, gr, base, offs, nt, self._range_of(self.ir.nodes[t.c], state))
                return
            for run in bruns:
                c_first, V, Vv = run[0]
                span = len(run) * t.V
                # (at most half the run, in whole steps: a run shorter than the plan's
                # columns, beside a tail, keeps the two tiles apart by half of it)
                ahead = min(t.skew, span // 2 // t.V * t.V) if len(run) > 1 and len(gr) == 2 else 0
                if ahead:
                    # plan.skewed_tiles: the second tile runs `ahead` columns in front of the
                    # first -- alone over the run's first columns, then beside it, then the
                    # first alone over the last ones (no wrap-around: it measured slower)
                    assert stage is None and not self.plan.prefetch and self.src_rows is None
                    stop = c_first + span
                    for lo, hi, ms in ((c_first, c_first + ahead, (1,)), (c_first, stop - ahead, (0, 1)),
                                       (stop - ahead, stop, (0,))):
                        cv = self.w.var("c")
                        self.w.put(dep, f"for {cv} in range({lo}, {hi}, {t.V}):")
                        for m in ms:
                            col = f"{cv} + {ahead}" if len(ms) == 2 and m == 1 else cv
                            a0, R, Rv = gr[m]
                            emit_tile(dep + 1, "", a0, R, Rv, col, V, Vv, gr, base, stage)
                    continue
                # rows of an odd Vv read whole where the source's padding follows them, in
                # place of 32-byte masked loads (or split loads of 1- and 2-byte elements)
                over = (SRC_OVER and Vv & (Vv - 1) > 0 and run[-1][0] + _pow2(V) <= rdB
                        and (_pow2(V) * ssz >= SRC_OVER_MIN_BYTES or ssz < 4))
                if (self._stream_shift and run is bruns[0] and len(run) > 1 and Vv == V == t.V
                        and len(gr) == 1 and gr[0][1] == gr[0][2] == A.extent and stage is None):
                    # Plan.job_stream_shift: the run's tiles realign through the carry (the
                    # first one stores its first line's part plainly), then the carry's last
                    # elements go out plainly before the next run
                    a0, R, Rv = gr[0]
                    end = run[-1][0] + t.V
                    emit_tile(dep, "", a0, R, Rv, str(c_first), V, Vv, gr, base, stage, stream="head")
                    cv = self.w.var("c")
                    self.w.put(dep, f"for {cv} in range({c_first + t.V}, {end}, {t.V}):")
                    emit_tile(dep + 1, "", a0, R, Rv, cv, V, Vv, gr, base, stage, stream="body")
                    aexpr = f"{base} + 0" if base != "0" else str(a0)
                    dend = f"{offs[0]} + ({aexpr}) * {A.strides[0]} + ({end}) * {dB}"
                    dsz = self.ops[0].dtype.size
                    mv, ev = self.w.var("m"), self.w.var("e")
                    self.w.put(dep, f"{mv} = ((dst.ctypes.data + ({dend}) * {dsz}) & 63) // {dsz}")
                    self.w.put(dep, f"for {ev} in range({mv}):")
                    self.w.put(dep + 1, f"dst[{dend} - {mv} + {ev}] = jcarry[{64 // dsz} - {mv} + {ev}]")
                    continue
                if len(run) > 1:
                    cv = self.w.var("c")
                    self.w.put(dep, f"for {cv} in range({c_first}, {run[-1][0] + t.V}, {t.V}):")
                    d2 = dep + 1
                    cexpr = cv
                else:
                    d2 = dep
                    cexpr = str(c_first)
                # the group's leading full tiles: unrolled when few, else a loop
                nfull = 0
                while nfull < len(gr) and gr[nfull][1:] == gr[0][1:]:
                    nfull += 1
                items: list[tuple[int, str, int, int, int]] = []
                if nfull > 4:
                    av = self.w.var("a")
                    self.w.put(d2, f"for {av} in range(0, {nfull * gr[0][1]}, {gr[0][1]}):")
                    items.append((d2 + 1, av, gr[0][0], gr[0][1], gr[0][2]))
                    rest = gr[nfull:]
                else:
                    rest = gr
                items += [(d2, "", a0, R, Rv) for a0, R, Rv in rest]
                for dep3, av, a0, R, Rv in items:
                    emit_tile(dep3, av, a0, R, Rv, cexpr, V, Vv, gr, base, stage, over)

        def emit_tile(dep3: int, av: str, a0: int, R: int, Rv: int, cexpr: str, V: int, Vv: int,
                      gr: list, base: str, stage: str | None, over: bool = False, stream: str = "") -> None:
            """One register tile of a macro tile: rows ``a0`` (+ ``av``), columns ``cexpr``;
            ``stream``: "head" or "body", a call of ``simd.tile_stream_shift`` (job_stream_shift)."""
            aexpr = f"{base} + {a0 - gr[0][0]}" if base != "0" else str(a0)
            if av:
                aexpr = f"{aexpr} + {av}"
            so = f"{offs[1]} + ({aexpr}) * {sA} + ({cexpr}) * {B.strides[1]}"
            do = f"{offs[0]} + ({aexpr}) * {A.strides[0]} + ({cexpr}) * {dB}"
            xo = [f"{offs[k]} + ({aexpr}) * {A.strides[k]} + ({cexpr}) * {B.strides[k]}"
                  for k in range(len(self.ops))]
            if self.plan.prefetch and Rv and Vv:
                # this tile's share of the next group's source block: its own size,
                # at its position in the group's (column step, row tile) order
                G = t.M * t.R
                rel = f"{a0 - gr[0][0]}" + (f" + {av}" if av else "")
                pf = self._micro(("prefetch", _whole_lines(R * V * self.ops[1].dtype.size),
                                  self.plan.prefetch_l2))
                self.w.put(dep3, f"{pf}(src, {offs[1]} + ({base} + {G}) * {sA} + "
                                 f"({cexpr}) * {G} + ({rel}) * {V})")
            if Rv and Vv:
                self._put_piece(dep3)
            if Rv and Vv:
                self._job_prefetch(dep3, do, R * V)
            if Rv and Vv and (self._job_src is not None or not self.plan.job_stage):
                # where the next job (or an outer loop's next step) reads them
                self._rows_ahead(dep3, so, sA, Rv, Vv, True)
            rows = line_rows[a0:a0 + R] if line_rows is not None else None
            ahead = self.plan.row_prefetch
            if rows is not None and ahead and Rv and Vv and stage is None:
                # each row's line that an outer loop's next step reads (row_continuation):
                # the line of the step's last element (steps shorter than a line end in
                # every line of the row)
                pfr = self._micro(("prefetch", 64, self.plan.row_prefetch_l2))
                for x in _covering_points([r + ahead + Vv - 1 for r in rows if r is not None],
                                          64 // self.ops[1].dtype.size if ROW_PREFETCH_COVER else 0):
                    self.w.put(dep3, f"{pfr}(src, {so} + {x})")
            rsp = self.plan.row_stream_prefetch
            if rsp and rows is None and Rv and Vv and stage is None:
                # the line `rsp` bytes ahead in each row, each row once a line: the tiles of
                # one line's steps take turns over the rows
                ssz = self.ops[1].dtype.size
                lane = max(1, 64 // (V * ssz))
                per = max(1, R // lane)
                pfr = self._micro(("prefetch", 64, False))
                sel = f"((({cexpr}) // {V}) % {lane}) * {per}" if lane > 1 else "0"
                for j in range(per):
                    self.w.put(dep3, f"{pfr}(src, {so} + ({sel} + {j}) * {sA} + {rsp // ssz})")
            if stage is not None:
                ps = self._stage_pitch()
                self._emit_transpose(dep3, so, f"sto + ({aexpr}) - {stage} + ({cexpr}) * {ps}", sA,
                                     ps, R, V, Rv, Vv, A, B, False, xo, target="stage")
                return
            if stream:
                fn = self._micro(("tile_stream_shift", R, V, stream == "head"))
                self.stream_shift_used = True
                self.w.put(dep3, f"{fn}(src, {so}, {sA}, dst, {do}, jcarry)")
                return
            self._emit_transpose(dep3, so, do, sA, dB, R, V, Rv, Vv, A, B, nt, xo, rows=rows, over=over)

        gsz, P = t.M * t.R, self.plan.row_stage
        staging = bool(P) and nt and not zero and self.ep.direct  # Plan.row_stage, NT path

        def emit_rest(dep: int, start: int) -> None:
            """The uniform groups from row ``start`` on (a loop, or one group), then the others."""
            if nuni * gsz - start > gsz:
                gv = self.w.var("g")
                self.w.put(dep, f"for {gv} in range({start}, {nuni * gsz}, {gsz}):")
                emit_group(dep + 1, groups[0], gv)
            elif nuni * gsz > start:
                emit_group(dep, groups[0], str(start))
            for gi in range(nuni, len(groups)):
                emit_group(dep, groups[gi], str(groups[gi][0][0]))

        if group_var is not None and P:
            # jobs are chunks of P rows of A (the last one: what is left), staged where the
            # stores are NT
            nch = nuni * gsz // P
            self.w.put(depth, f"if {group_var} < {nch}:")
            if staging:
                self._row_stage_chunk(depth + 1, f"{group_var} * {P}", P, gsz, groups[0], emit_group,
                                      offs[0], A, wrB, dB)
            else:
                gv = self.w.var("g")
                self.w.put(depth + 1, f"for {gv} in range({group_var} * {P}, {group_var} * {P} + {P}, {gsz}):")
                emit_group(depth + 2, groups[0], gv)
            if nch * P < nuni * gsz or len(groups) > nuni:
                self.w.put(depth, "else:")
                emit_rest(depth + 1, nch * P)
            return
        if group_var is not None:
            first = True
            if nuni:
                self.w.put(depth, f"if {group_var} < {nuni}:")
                emit_group(depth + 1, groups[0], f"{group_var} * {gsz}")
                first = False
            for gi in range(nuni, len(groups)):
                self.w.put(depth, ("if " if first else "elif ") + f"{group_var} == {gi}:")
                emit_group(depth + 1, groups[gi], str(groups[gi][0][0]))
                first = False
            return
        staged = 0  # rows of A written through the row stage (Plan.row_stage)
        if staging and nuni * gsz >= P:
            staged = nuni * gsz // P * P
            pv = self.w.var("p")
            self.w.put(depth, f"for {pv} in range(0, {staged}, {P}):")
            self._row_stage_chunk(depth + 1, pv, P, gsz, groups[0], emit_group, offs[0], A, wrB, dB)
        emit_rest(depth, staged)

    def _period_lines(self, depth: int, offs: list[str], state: dict, nt: bool,
                      group_var: str | None, zero: bool) -> None:
        """An ``a2`` transpose whose rows repeat their source offsets every few lines (one
        period, ``tile_rows``): a loop over the period's lines, each a ``tile_rows`` call
        whose row offsets are that line's slice of one table."""
        t = self.plan.tile
        assert t is not None and t.b is not None and self.src_rows is not None
        B = self.ir.nodes[t.b]
        L, R = tile_rows(self.ir, t), t.R
        vB, wrB = self._range_of(B, state)
        dB, sB = B.strides[0], B.strides[1]
        assert dB is not None and sB is not None
        dsz = self.ops[0].dtype.size
        use_nt = nt and (R * dsz) % 64 == 0
        offsets = [r for r in self.src_rows if r is not None]  # (no padding rows: _padded_line_digit)
        assert len(offsets) == len(self.src_rows)
        src, sbase = "src", offs[1]
        staged = self._src_stage(depth, offsets, vB, sB, offs[1]) if not zero and group_var is None else None
        if staged is not None:
            table, src, sbase = staged[0], "sstage", "ssto"
        else:
            table = self._table(offsets)
        lv = self.w.var("l")
        if group_var is not None:
            G = R * t.M
            self.w.put(depth, f"for {lv} in range({group_var} * {G}, min({group_var} * {G} + {G}, {L}), {R}):")
        else:
            self.w.put(depth, f"for {lv} in range(0, {L}, {R}):")
        d = depth + 1
        if self.plan.prefetch and not zero:
            # this line's share of the next period's source block (plan._prefetch_periods)
            share = _whole_lines(R * B.extent * self.ops[1].dtype.size)
            pf = self._micro(("prefetch", share, self.plan.prefetch_l2))
            self.w.put(d, f"{pf}(src, {offs[1]} + {period_next(self.ir, t)} + {lv} * {B.extent})")
        outer = outer_nodes(self.ir, t)
        if staged is not None and SRC_STAGE_PREFETCH and outer and L // R == staged[3] and L % R == 0:
            # line k prefetches run k of the next step of the innermost outer loop (the next
            # period, but after that loop's last step), to L2
            first, step, n, length = staged[1:]
            nxt = self.ir.nodes[outer[-1]].strides[1] or 0
            pf = self._micro(("prefetch", _whole_lines(length * self.ops[1].dtype.size), True))
            self.w.put(d, f"{pf}(src, {offs[1]} + {first + nxt} + ({lv} // {R}) * {step})")
        for c0 in range(0, wrB, t.V):
            V = min(t.V, wrB - c0)
            Vv = 0 if zero else _clamp(vB - c0, 0, V)
            so = f"{sbase} + {c0 * sB}"
            do = f"{offs[0]} + {lv} + {c0 * dB}"
            if Vv == 0:
                fn = self._micro(("tile", R, V, 0, 0, use_nt, False))
                self.w.put(d, f"{fn}(src, 0, 0, dst, {do}, {dB})")
                continue
            fn = self._micro(("rows", R, V, R, Vv, use_nt), post=self.ep.vector_ops)
            self.w.put(d, f"{fn}({src}, {so}, {table}, {lv}, dst, {do}, {dB})")

    def _src_stage(self, depth: int, offsets: list[int], vB: int, sB: int, base: str
                   ) -> tuple[str, int, int, int, int] | None:
        """``Plan.src_stage``: copy this period's source runs (rows at ``offsets`` from
        ``base``, ``vB`` elements each) into ``sstage``, ``Plan.src_stage`` elements apart,
        and return the name of the table of the rows' offsets in the stage and the runs
        (first, step, count, length); None where this state's runs are not the stage's
        (then the tiles read the source)."""
        pitch = self.plan.src_stage
        runs = stage_runs(tuple(offsets), vB) if pitch and sB == 1 and vB > 0 else None
        if runs is None or runs[2] > self.src_stage_runs or runs[3] > pitch:
            return None
        first, step, n, length = runs
        ssz = self.ops[1].dtype.size
        sdt = str(self.ops[1].dtype)
        q = min(length, 128, max(1, 256 // ssz))  # elements a copy call moves
        w = self.w
        k, x = w.var("k"), w.var("x")
        w.put(depth, f"for {k} in range({n}):")
        whole = length // q * q
        copy = self._micro(("gather", 1, q, 1, False), sdt, sdt)
        if whole:
            w.put(depth + 1, f"for {x} in range(0, {whole}, {q}):")
            w.put(depth + 2, f"{copy}(src, {base} + {first} + {k} * {step} + {x}, 0, sstage, "
                  f"ssto + {k} * {pitch} + {x})")
        if length > whole:
            rest = self._micro(("gather", 1, length - whole, 1, False), sdt, sdt)
            w.put(depth + 1, f"{rest}(src, {base} + {first} + {k} * {step} + {whole}, 0, sstage, "
                  f"ssto + {k} * {pitch} + {whole})")
        self.src_stage_used = True
        return (self._table([(r - first) // step * pitch + (r - first) % step for r in offsets]),
                first, step, n, length)

    def _cols_group(self, depth: int, gr: list, base: str, offs: list[str], nt: bool,
                    c_range: tuple[int, int] | None = None) -> None:
        """One row group of a cols transpose: V-column chunks of the B x C source run.

        Columns repeat their destination pattern every ``period`` (the table's length)
        shifted by ``period / B.extent`` steps of C; full periods loop over the table's
        chunks, the rest of the run takes whole chunks and one short chunk.

        ``c_range``: (valid, written) steps of C in this state (a padded C, its dim's
        lightest digit): the run is cut after the valid steps, and the written steps past
        them get zeros (R x B.extent tiles of zeros, one per step).
        """
        t = self.plan.tile
        assert t is not None and t.b is not None and t.c is not None
        A, B, C = self.ir.nodes[t.a], self.ir.nodes[t.b], self.ir.nodes[t.c]
        sA, dA, dC = A.strides[1], A.strides[0], C.strides[0]
        assert sA is not None and dA is not None and dC is not None
        table = cols_table(self.ir, t)
        period = len(table)
        tab = self._table(table)
        vC, wrC = c_range if c_range is not None else (C.extent, C.extent)
        W = B.extent * vC
        nper, rem = divmod(W, period)
        shift = (period // B.extent) * dC
        dsz = self.ops[0].dtype.size
        use_nt = nt and (t.R * dsz) % 64 == 0
        w = self.w

        staged = nt and self.plan.cols_stage
        if staged:  # the group's destination range (A x B x C, dense) through a stage
            use_nt = False
            span = A.extent * W
            self._need_buffer(span)

        def row_expr(a0: int) -> str:  # the row of A where chunk a0 of the group starts
            return f"{base} + {a0 - gr[0][0]}" if base != "0" else str(a0)

        def calls(dep: int, col: str, dshift: str, toff: str, V: int) -> None:
            for a0, R, Rv in gr:
                aexpr = row_expr(a0)
                post = self.ep.vector_ops if Rv else ()
                fn = self._micro(("cols", R, V, Rv, V, use_nt and (R * dsz) % 64 == 0), post=post)
                so = f"{offs[1]} + ({aexpr}) * {sA} + {col}"
                if staged:
                    w.put(dep, f"{fn}(src, {so}, {sA}, obuf, {(a0 - gr[0][0]) * dA} + {dshift}, {tab}, {toff})")
                    continue
                do = f"{offs[0]} + ({aexpr}) * {dA} + {dshift}"
                w.put(dep, f"{fn}(src, {so}, {sA}, dst, {do}, {tab}, {toff})")

        if nper:
            pv, kv = w.var("p"), w.var("k")
            d = depth
            if nper > 1:
                w.put(d, f"for {pv} in range({nper}):")
                d += 1
            else:
                w.put(d, f"{pv} = 0")
            w.put(d, f"for {kv} in range(0, {period}, {t.V}):")
            calls(d + 1, f"{pv} * {period} + {kv}", f"{pv} * {shift}", kv, t.V)
        if rem:
            full, tail = divmod(rem, t.V)
            start = nper * period
            if full:
                kv = w.var("k")
                w.put(depth, f"for {kv} in range(0, {full * t.V}, {t.V}):")
                calls(depth + 1, f"{start} + {kv}", str(nper * shift), kv, t.V)
            if tail:
                calls(depth, str(start + full * t.V), str(nper * shift), str(full * t.V), tail)
        dB = B.strides[0]
        assert dB is not None
        for cz in range(vC, wrC):  # written steps of C past its data: zeros, t.V columns a call
            for a0, R, _ in gr:
                for b0 in range(0, B.extent, t.V):
                    Vz = min(t.V, B.extent - b0)
                    fz = self._micro(("tile", R, Vz, 0, 0, use_nt and (R * dsz) % 64 == 0, False))
                    at = cz * dC + b0 * dB
                    if staged:
                        w.put(depth, f"{fz}(src, 0, 0, obuf, {(a0 - gr[0][0]) * dA + at}, {dB})")
                    else:
                        w.put(depth, f"{fz}(src, 0, 0, dst, {offs[0]} + ({row_expr(a0)}) * {dA} + {at}, {dB})")
        if staged:
            q = 64 // dsz
            ddt = str(self.ops[0].dtype)
            line = self._micro(("gather", 1, q, 1, True), ddt, ddt)
            x = w.var("x")
            rb = f"{offs[0]} + ({base}) * {dA}" if base != "0" else f"{offs[0]} + {gr[0][0] * dA}"
            w.put(depth, f"for {x} in range(0, {span}, {q}):")
            w.put(depth + 1, f"{line}(obuf, {x}, 0, dst, {rb} + {x})")

    def _table(self, values: list[int]) -> str:
        """Name of a module-level int64 table (frozen into the kernel as a constant)."""
        key = tuple(values)
        if key not in self.tables:
            self.tables[key] = f"TAB{len(self.tables)}"
        return self.tables[key]

    def _stage_pitch(self) -> int:
        """Elements between two rows of the row stage: P and a line (rows off one L1 set)."""
        return self.plan.row_stage + max(1, 64 // self.ops[0].dtype.size)

    def _row_stage_chunk(self, depth: int, p0: str, P: int, gsz: int, group: list,
                         emit_group: Callable[..., None], dbase: str, A: Node, rows: int, dB: int) -> None:
        """``Plan.row_stage``: P rows of A from ``p0``. The chunk's macro tiles fill ``stage``
        (destination row c at ``sto + c*(P + q)``), then the chunk goes out row by row as
        whole non-temporal lines."""
        w = self.w
        q = max(1, 64 // self.ops[0].dtype.size)
        ps = self._stage_pitch()
        self.stage_elems = max(self.stage_elems, rows * ps + q)
        gv, cv, xv = w.var("g"), w.var("c"), w.var("x")
        w.put(depth, f"for {gv} in range({p0}, {p0} + {P}, {gsz}):")
        emit_group(depth + 1, group, gv, stage=p0)
        line = self._micro(("gather", 1, q, 1, True), str(self.ops[0].dtype), str(self.ops[0].dtype))
        w.put(depth, f"for {cv} in range({rows}):")
        w.put(depth + 1, f"for {xv} in range(0, {P}, {q}):")
        w.put(depth + 2, f"{line}(stage, sto + {cv} * {ps} + {xv}, 0, dst, "
                         f"{dbase} + ({p0}) * {A.strides[0]} + {cv} * {dB} + {xv})")

    def _emit_transpose(self, depth: int, so: str, do: str, sA: int, dB: int, R: int, V: int,
                        Rv: int, Vv: int, A: Node, B: Node, nt: bool, xo: list[str],
                        rows: tuple | None = None, target: str = "dst", over: bool = False) -> None:
        """One register tile; ``over``: its source rows may be read whole (``simd.tile``'s
        ``src_over``: the source's padding follows their Vv elements)."""
        t = self.plan.tile
        assert t is not None
        dsz = self.ops[0].dtype.size
        q = max(1, 64 // dsz)
        rc = t.rows_contiguous and R == A.extent
        use_nt = nt and ((R * V) % q == 0 if rc else (R * dsz) % 64 == 0)
        if self.ep.direct or Rv == 0 or Vv == 0 or self.ep.vector_ops:
            post = self.ep.vector_ops if Rv and Vv else ()
            fn = self._micro(("tile", R, V, Rv, Vv, use_nt, rc), dense=sA == V, post=post, rows=rows,
                             over=over and Rv > 0 and Vv > 0)
            self.w.put(depth, f"{fn}(src, {so}, {sA}, {target}, {do}, {dB})")
            return
        assert target == "dst"
        # An epilogue (scales, post-ops): (1) transpose the source values into a small buffer,
        # (2) a loop over each row applies the epilogue into a second buffer -- its trip count
        # is opaque to LLVM so that it vectorizes along the (contiguous) row --, (3) the rows
        # are stored by the same vector micro-kernels as a plain reorder (non-temporal when
        # the plain reorder's would be).
        sdt, ddt = str(self.ops[1].dtype), str(self.ops[0].dtype)
        fn = self._micro(("tile", R, V, Rv, Vv, False, True), sdt, sdt, over=over and Rv > 0 and Vv > 0)
        self._need_buffer(R * V)
        self.w.put(depth, f"{fn}(src, {so}, {sA}, tbuf, 0, {R})")
        c, r, n = self.w.var("c"), self.w.var("r"), self.w.var("n")
        flat = (Rv == R and Vv == V and all(k in self.scalar_ops for k in range(2, len(self.ops)))
                and (rc or not self.ep.reads_dst))
        if flat:  # one loop over the whole tile (the destination block is contiguous or unread)
            i = self.w.var("i")
            self.w.put(depth, f"for {i} in range(opaque({R * V})):")
            self._elem(depth + 1, f"{do} + {i}", f"tbuf[{_ix(i)}]", [""] * len(self.ops),
                       out=f"obuf[{_ix(i)}]")
        else:
            self._epilogue_rows(depth, do, dB, R, V, Rv, Vv, A, B, xo, c, r, n)
        q = max(1, 64 // dsz)
        if rc and (R * V) % q == 0:
            g = self._micro(("gather", 1, q, 1, use_nt), ddt, ddt)
            self.w.put(depth, f"for {c} in range(0, {R * V}, {q}):")
            self.w.put(depth + 1, f"{g}(obuf, {c}, 0, dst, {do} + {c})")
        else:
            g = self._micro(("gather", 1, R, 1, use_nt and (R * dsz) % 64 == 0), ddt, ddt)
            self.w.put(depth, f"for {c} in range({V}):")
            self.w.put(depth + 1, f"{g}(obuf, {c} * {R}, 0, dst, {do} + {c} * {dB})")

    def _epilogue_rows(self, depth: int, do: str, dB: int, R: int, V: int, Rv: int, Vv: int,
                       A: Node, B: Node, xo: list[str], c: str, r: str, n: str) -> None:
        """The epilogue over a transposed tile in tbuf, row by row, into obuf (padding zero)."""
        self.w.put(depth, f"{n} = opaque({Rv})")
        self.w.put(depth, f"for {c} in range({Vv}):")
        self.w.put(depth + 1, f"for {r} in range({n}):")
        extra = [f"({xo[k]}) + {r} * {A.strides[k]} + {c} * {B.strides[k]}" for k in range(len(self.ops))]
        self._elem(depth + 2, f"{do} + {c} * {dB} + {r}", f"tbuf[{_ix(f'{c} * {R} + {r}')}]", extra,
                   out=f"obuf[{_ix(f'{c} * {R} + {r}')}]")
        if Rv < R:
            self.w.put(depth + 1, f"for {r} in range({Rv}, {R}):")
            self.w.put(depth + 2, f"obuf[{_ix(f'{c} * {R} + {r}')}] = 0")
        if Vv < V:
            self.w.put(depth, f"for {c} in range({Vv * R}, {V * R}):")
            self.w.put(depth + 1, f"obuf[{_ix(c)}] = 0")

    def _need_buffer(self, n: int) -> None:
        self.buffer_elems = max(self.buffer_elems, n)

    def _elem(self, depth: int, dst_off: str, src_expr: str, extra_offs: list[str],
              out: str | None = None) -> None:
        """One destination element through the epilogue; extra_offs[k] is operand k's offset.

        The value goes to ``dst[dst_off]``, or to ``out`` when given (dst_off still locates the
        element's old value for a sum post-op).
        """
        extra = [f"v{k}" if k in self.scalar_ops else f"{self.arr[k]}[{_ix(extra_offs[k])}]"
                 for k in range(2, len(self.ops))]  # scalar operands need no offset
        stmts, expr = self.ep.lines(src_expr, extra, f"dst[{_ix(dst_off)}]")
        for st in stmts:
            self.w.put(depth, st)
        self.w.put(depth, f"{out or f'dst[{_ix(dst_off)}]'} = {expr}")

    def _lines_body(self, depth: int, offs: list[str], state: dict, nt: bool,
                    group_var: str | None, zero: bool) -> None:
        """Runs of node L (contiguous on both sides) transposed over rows A x columns B.

        A and B may be digits of L's own (padded) dim; then the valid length of
        a run depends on its row or column, which is computed here at compile
        time from the constant bases of the padding specialization.
        """
        t = self.plan.tile
        assert t is not None and t.b is not None and t.l is not None
        A, B, L = (self.ir.nodes[i] for i in (t.a, t.b, t.l))
        sA, dB = A.strides[1], B.strides[0]
        assert sA is not None and dB is not None
        dsz = self.ops[0].dtype.size

        def base_of(n: Node) -> int | None:
            st = state.get(n.dim) if n.dim is not None else None
            return st[1] if isinstance(st, tuple) else None

        def valid_of(n: Node) -> tuple[int, int]:
            """(valid, written) step counts of A or B, not counting L's run inside the step."""
            if n.dim is not None and n.dim == L.dim and base_of(n) is not None:
                r = self.ir.dims[n.dim]
                b = base_of(n)
                assert b is not None
                return (_clamp(-(-(r.valid - b) // n.weight), 0, n.extent),
                        _clamp(-(-(r.write - b) // n.weight), 0, n.extent))
            return self._range_of(n, state)

        def run_off(r: int, c: int) -> int | None:
            """Index along L's dim of the run at row r, column c (None: L's dim is not split
            by the state: its range decides)."""
            bl = base_of(L)
            if bl is None:
                return None
            return bl + (r * A.weight if A.dim == L.dim else 0) + (c * B.weight if B.dim == L.dim else 0)

        def run_range(r: int, c: int) -> tuple[int, int]:
            """(valid, written) length of the run at row r, column c (zero mode: nothing valid)."""
            off = run_off(r, c)
            if off is None:
                v, wr = self._range_of(L, state)
                return (0 if zero else v), wr
            rr = self.ir.dims[L.dim]  # type: ignore[index]
            wr = _clamp(rr.write - off, 0, L.extent)
            return (0 if zero else _clamp(rr.valid - off, 0, L.extent)), wr

        def run_readable(r: int, c: int) -> int:
            """Elements of the run at row r, column c that exist in the source (its padding
            included), up to the run rounded up to a power of two: a run of fewer valid ones
            may be read whole up to there, an odd one to the power of two."""
            off = run_off(r, c)
            if off is None:  # (the run is its whole dim: its padding follows it)
                return self._readable_of(L, state, max(L.extent, _pow2(L.extent)))
            rr = self.ir.dims[L.dim]  # type: ignore[index]
            return _clamp(max(rr.src_extent, rr.valid) - off, 0, L.extent)

        vA, wrA = valid_of(A)
        vB, wrB = valid_of(B)
        # values computed in registers: plain conversions, and f32 relu on one run per call
        in_regs = self._runs_in_regs()
        # columns grouped in runs of identical (column validity, run lengths of each row)
        cols = []
        for c in range(wrB):
            sig = tuple(run_range(r, c) if (c < vB and r < vA) else (0, run_range(r, c)[1])
                        for r in range(wrA)) if A.dim == L.dim or B.dim == L.dim else None
            cols.append((c, c < vB, sig))
        cruns: list[list] = []
        for col in cols:
            if cruns and cruns[-1][-1][1:] == col[1:] and cruns[-1][-1][0] + 1 == col[0]:
                cruns[-1].append(col)
            else:
                cruns.append([col])
        # rows in chunks of R (gathered runs), macro groups of M chunks
        chunks = [(a0, min(t.R, wrA - a0)) for a0 in range(0, wrA, t.R)]
        groups = [chunks[i:i + t.M] for i in range(0, len(chunks), t.M)]

        def rows_sig(gr: list) -> tuple:
            return tuple((R, tuple((r < vA) for r in range(a0, a0 + R)),
                          tuple(run_range(r, 0) for r in range(a0, a0 + R)) if A.dim == L.dim else None)
                         for a0, R in gr)

        nuni = 0
        while nuni < len(groups) and rows_sig(groups[nuni]) == rows_sig(groups[0]):
            nuni += 1

        def emit_group(dep: int, gr: list, base: str, uniform: bool) -> None:
            if (in_regs and P == 1 and len(gr) > 1 and A.extent > B.extent and t.R <= ROWS_INNER_MAX_RUNS
                    and B.extent <= ROWS_INNER_MAX_COLS
                    and (self.plan.nt_tune or _rows_inner_pays(A, B, L, dsz, nt))):
                # the shorter node innermost: each row's few runs in turn (nhwc -> nChw16c:
                # a pixel's 7 blocks, read in order, one line to each plane; C=100: 1.5-2.3x
                # copy -> 1.5-1.7x; C=256 with NT: 0.98 -> 0.94). With the rows the shorter
                # node (nChw16c -> nhwc: 16 blocks per pixel) the columns stay outer: each
                # pixel is written whole (0.62-0.71x copy; rows outer 1.48-1.55x). Calls that
                # pack several runs into a line (f32 -> bf16/s8 into nChw16c) keep the
                # columns outer too: each plane then gets M lines in a row (nhwc -> nChw16c,
                # C=256, 1 thread: bf16 1.7x copy -> 1.2x, s8 1.95x -> 1.75x). Rows of more
                # than ROWS_INNER_MAX_COLS runs keep the columns outer as well.
                for ch in gr:
                    emit_columns(dep, [ch], base, gr[0][0])
                return
            emit_columns(dep, gr, base, gr[0][0])

        P = self.plan.line_phases if nt else 1
        q = max(1, 64 // dsz)
        # Plan.lines_panel: columns staged in obuf, written out as whole NT lines; every other
        # store is plain (the columns start off the lines)
        panel = self.plan.lines_panel if nt else 0
        if panel:
            if not in_regs or group_var is not None or len(groups) != 1 or groups[0][0][0] != 0:
                panel = 0  # plan.lines_panel rules these out; should one slip, plain stores
            nt = False

        def phase_chunks(gr: list, c: int) -> list:
            """The group's rows cut where column c's destination lines begin (line_phases)."""
            ph = ((c * dB + self._job_shift) % q) // L.extent
            lo, hi = gr[0][0], gr[-1][0] + gr[-1][1]
            out, a = [], lo
            while a < hi:
                nxt = min(hi, a + t.R - (ph + a) % t.R)
                out.append((a, nxt - a))
                a = nxt
            return out

        def emit_columns(dep: int, gr: list, base: str, first_row: int) -> None:
            for crun in cruns:
                c_first, c_valid, _ = crun[0]
                if P > 1:
                    # each column's calls follow its own lines: the loop unrolled by the phases
                    full = len(crun) // P * P
                    if full:
                        cv = self.w.var("c")
                        self.w.put(dep, f"for {cv} in range({c_first}, {c_first + full}, {P}):")
                        for k in range(P):
                            emit_column(dep + 1, phase_chunks(gr, c_first + k), base, first_row,
                                        c_first, c_valid, f"{cv} + {k}" if k else cv)
                    for c in range(c_first + full, c_first + len(crun)):
                        emit_column(dep, phase_chunks(gr, c), base, first_row, c, c_valid, str(c))
                    continue
                if panel and len(crun) >= panel:
                    # columns up to the first that starts on a line, plain; then panels of
                    # columns into the stage, each written out as whole aligned NT lines;
                    # then the columns left, plain (the plan makes a line start reachable)
                    end = c_first + len(crun)
                    p0, nf, cv, kv, fv = (self.w.var(x) for x in "pnckf")
                    self.w.put(dep, f"{p0} = {c_first}")
                    self.w.put(dep, f"while {p0} < {end} and ((dst.ctypes.data + ({offs[0]} + {p0} * {dB}) "
                                    f"* {dsz}) & 63) != 0:")
                    self.w.put(dep + 1, f"{p0} += 1")
                    self.w.put(dep, f"{nf} = {p0} + ({end} - {p0}) // {panel} * {panel}")
                    self.w.put(dep, f"for {cv} in range({c_first}, {p0}):")
                    emit_column(dep + 1, gr, base, first_row, c_first, c_valid, cv)
                    self.w.put(dep, f"for {cv} in range({p0}, {nf}, {panel}):")
                    self.w.put(dep + 1, f"for {kv} in range({panel}):")
                    emit_column(dep + 2, gr, base, first_row, c_first, c_valid, f"{cv} + {kv}", kv)
                    self._need_buffer(panel * dB)
                    g = self._micro(("gather", 1, q, 1, True), str(self.ops[0].dtype), str(self.ops[0].dtype))
                    self.w.put(dep + 1, f"for {fv} in range(0, {panel * dB}, {q}):")
                    self.w.put(dep + 2, f"{g}(obuf, {fv}, 0, dst, {offs[0]} + ({cv}) * {dB} + {fv})")
                    self.w.put(dep, f"for {cv} in range({nf}, {end}):")
                    emit_column(dep + 1, gr, base, first_row, c_first, c_valid, cv)
                    continue
                passes = self.plan.lines_passes if nt and in_regs else 0
                per_pass = max(1, self.plan.lines_pass_streams // t.R)
                if passes and len(crun) > 1 and len(gr) > per_pass:
                    # Plan.lines_passes: blocks of columns, each swept once per few streams
                    end = crun[-1][0] + 1
                    bv, cv = self.w.var("b"), self.w.var("c")
                    self.w.put(dep, f"for {bv} in range({c_first}, {end}, {passes}):")
                    for k in range(0, len(gr), per_pass):
                        self.w.put(dep + 1, f"for {cv} in range({bv}, min({bv} + {passes}, {end})):")
                        emit_column(dep + 2, gr[k:k + per_pass], base, first_row, c_first, c_valid, cv)
                    continue
                if len(crun) > 1:
                    cv = self.w.var("c")
                    self.w.put(dep, f"for {cv} in range({c_first}, {crun[-1][0] + 1}):")
                    d2, cexpr = dep + 1, cv
                else:
                    d2, cexpr = dep, str(c_first)
                emit_column(d2, gr, base, first_row, c_first, c_valid, cexpr)

        def emit_column(d2: int, gr: list, base: str, first_row: int, c_first: int, c_valid: bool,
                        cexpr: str, in_panel: str | None = None) -> None:
            """One column (or a loop body over columns alike from c_first): its calls of chunks gr.

            ``in_panel``: the column's index within a lines panel (written into obuf)."""
            rows_all = [r for a0, R in gr for r in range(a0, a0 + R)]
            lens_all = [run_range(r, c_first) if (c_valid and r < vA) else (0, run_range(r, c_first)[1])
                        for r in rows_all]
            if (not in_regs and P == 1 and all(v == w == L.extent for v, w in lens_all)
                    and all(k in self.scalar_ops for k in range(2, len(self.ops)))
                    and len(rows_all) * L.extent * max(dsz, self.ops[1].dtype.size) <= 4096):
                # an epilogue over whole runs: gather the group's runs into a buffer, one
                # vectorized loop over all of them, store like a plain reorder
                aexpr = base if base != "0" else str(gr[0][0])
                so = f"{offs[1]} + ({aexpr}) * {sA} + ({cexpr}) * {B.strides[1]}"
                do = f"{offs[0]} + ({aexpr}) * {A.strides[0]} + ({cexpr}) * {dB}"
                self._runs_block(d2, so, do, sA, L, len(rows_all), nt, dsz)
                return
            for a0, R in gr:
                rel = a0 - first_row
                aexpr = f"{base} + {rel}" if base != "0" else str(a0)
                so = f"{offs[1]} + ({aexpr}) * {sA} + ({cexpr}) * {B.strides[1]}"
                do = f"{offs[0]} + ({aexpr}) * {A.strides[0]} + ({cexpr}) * {dB}"
                # rows of this chunk: absolute index for validity (uniform groups share it)
                rows = range(a0, a0 + R)
                lens = [run_range(r, c_first) if (c_valid and r < vA) else (0, run_range(r, c_first)[1])
                        for r in rows]
                xo = [f"{offs[k]} + ({aexpr}) * {A.strides[k]} + ({cexpr}) * {B.strides[k]}"
                      for k in range(len(self.ops))]
                out = "dst"
                if in_panel is not None:
                    do, out = f"({aexpr}) * {A.strides[0]} + ({in_panel}) * {dB}", "obuf"
                if self.plan.prefetch and any(v for v, _ in lens):
                    # this call's share of the next group's source block (R runs)
                    G = t.M * t.R
                    pf = self._micro(("prefetch", _whole_lines(R * L.extent * self.ops[1].dtype.size),
                                          self.plan.prefetch_l2))
                    gb = base if base != "0" else str(first_row)
                    self.w.put(d2, f"{pf}(src, {offs[1]} + ({gb} + {G}) * {sA} + ({cexpr}) * {G * L.extent}"
                                   f" + {rel * L.extent})")
                if any(v for v, _ in lens):
                    self._job_prefetch(d2, do, R * L.extent)
                if any(v for v, _ in lens):
                    self._rows_ahead(d2, so, sA, R, L.extent, False)  # (runs_rows_ahead)
                reads = [run_readable(r, c_first) for r in rows]
                self._emit_runs(d2, so, do, sA, L, lens, nt, dsz, A, xo, out, reads)

        if group_var is not None:
            gsz = t.M * t.R
            first = True
            if nuni:
                self.w.put(depth, f"if {group_var} < {nuni}:")
                emit_group(depth + 1, groups[0], f"{group_var} * {gsz}", True)
                first = False
            for gi in range(nuni, len(groups)):
                self.w.put(depth, ("if " if first else "elif ") + f"{group_var} == {gi}:")
                emit_group(depth + 1, groups[gi], str(groups[gi][0][0]), False)
                first = False
            return
        if nuni > 1:
            gv = self.w.var("g")
            gsz = t.M * t.R
            self.w.put(depth, f"for {gv} in range(0, {nuni * gsz}, {gsz}):")
            emit_group(depth + 1, groups[0], gv, True)
        elif nuni == 1:
            emit_group(depth, groups[0], "0", False)
        for gi in range(nuni, len(groups)):
            emit_group(depth, groups[gi], str(groups[gi][0][0]), False)

    def _runs_in_regs(self) -> bool:
        """Whether a lines kernel computes its values in the micro-kernels' registers: plain
        conversions, and register post-ops (f32 relu) when each call moves one run (a
        ``tile(1, run)``; packing several runs into a line has no post-ops)."""
        t = self.plan.tile
        return self.ep.direct or bool(self.ep.vector_ops and t is not None and t.R == 1)

    def _runs_block(self, depth: int, so: str, do: str, sA: int, L: Node, n: int, nt: bool,
                    dsz: int) -> None:
        """n consecutive full runs (contiguous in dst) through an epilogue with scalar operands."""
        sdt, ddt = str(self.ops[1].dtype), str(self.ops[0].dtype)
        total = n * L.extent
        self._need_buffer(total)
        G = max(1, min(n, 64 // L.extent)) if L.extent <= 64 else 1
        g_in = self._micro(("gather", G, L.extent, G, False), sdt, sdt)
        for r0 in range(0, n, G):
            if r0 + G <= n:
                self.w.put(depth, f"{g_in}(src, {so} + {r0 * sA}, {sA}, tbuf, {r0 * L.extent})")
            else:
                g_t = self._micro(("gather", n - r0, L.extent, n - r0, False), sdt, sdt)
                self.w.put(depth, f"{g_t}(src, {so} + {r0 * sA}, {sA}, tbuf, {r0 * L.extent})")
        i = self.w.var("i")
        self.w.put(depth, f"for {i} in range(opaque({total})):")
        self._elem(depth + 1, f"{do} + {i}", f"tbuf[{_ix(i)}]", [""] * len(self.ops), out=f"obuf[{_ix(i)}]")
        q = max(1, 64 // dsz)
        if total % q == 0:
            g = self._micro(("gather", 1, q, 1, nt), ddt, ddt)
            c = self.w.var("c")
            self.w.put(depth, f"for {c} in range(0, {total}, {q}):")
            self.w.put(depth + 1, f"{g}(obuf, {c}, 0, dst, {do} + {c})")
        else:
            g = self._micro(("gather", 1, L.extent, 1, False), ddt, ddt)
            for r in range(n):
                self.w.put(depth, f"{g}(obuf, {r * L.extent}, 0, dst, {do} + {r * L.extent})")

    def _emit_runs(self, depth: int, so: str, do: str, sA: int, L: Node,
                   lens: list[tuple[int, int]], nt: bool, dsz: int, A: Node, xo: list[str],
                   out: str = "dst", reads: list[int] | None = None) -> None:
        """Runs r = 0..len(lens)-1 at so + r*sA -> do + r*L.extent; lens[r] = (valid, written).

        ``out``: the array written (a lines panel's stage takes the values computed in
        registers; ``do`` is then an offset into it). ``reads[r]``: elements of run r that
        exist in the source (its padding included; default: the valid ones)."""
        R = len(lens)
        if all(w == 0 for _, w in lens):
            return
        if not self._runs_in_regs():
            # an epilogue: a vectorized loop along each run into a buffer, then the runs are
            # stored by the same micro-kernel as a plain reorder (NT when it would be)
            ddt = str(self.ops[0].dtype)
            self._need_buffer(R * L.extent)
            for r, (v, wr) in enumerate(lens):
                e = self.w.var("e")
                if v:
                    self.w.put(depth, f"for {e} in range(opaque({v})):")
                    extra = [f"({xo[k]}) + {r * (A.strides[k] or 0)} + {e} * {L.strides[k]}"
                             for k in range(len(self.ops))]
                    self._elem(depth + 1, f"{do} + {r * L.extent} + {e}", f"src[{_ix(f'{so} + {r * sA} + {e}')}]",
                               extra, out=f"obuf[{_ix(f'{r * L.extent} + {e}')}]")
                if wr > v:
                    self.w.put(depth, f"for {e} in range({v}, {wr}):")
                    self.w.put(depth + 1, f"obuf[{_ix(f'{r * L.extent} + {e}')}] = 0")
            if all(wr == L.extent for _, wr in lens) and R * L.extent <= 64:
                use_nt = nt and (R * L.extent * dsz) % 64 == 0
                g = self._micro(("gather", 1, R * L.extent, 1, use_nt), ddt, ddt)
                self.w.put(depth, f"{g}(obuf, 0, 0, dst, {do})")
            else:
                for r, (_v, wr) in enumerate(lens):
                    if wr:
                        g = self._micro(("gather", 1, wr, 1, False), ddt, ddt)
                        self.w.put(depth, f"{g}(obuf, {r * L.extent}, 0, dst, {do} + {r * L.extent})")
            return
        valid = {v for v, _ in lens if v}
        if R > 1 and all(w == L.extent for _, w in lens) and len(valid) <= 1 and \
                [v for v, _ in lens] == sorted((v for v, _ in lens), reverse=True):
            # whole runs, or runs of one valid length then zero padding (nhwc -> nChw8c, C=3)
            Rv = sum(1 for v, _ in lens if v)
            use_nt = nt and (R * L.extent * dsz) % 64 == 0
            vv = max(valid, default=L.extent)
            # valid parts back to back in the source (nhwc, C=3): read as whole vectors
            dense = vv < L.extent and sA == vv
            ssz = self.ops[1].dtype.size
            piece = min(_pow2(L.extent), max(1, self.plan.vector_bytes // ssz))
            # odd runs whose source padding follows them, read past their data in whole
            # pieces: to the run's padded length (nCdhw16c -> nCdhw8c, C=3: src_over) or,
            # runs without padding, to the next power of two (nChw16c -> nhwc: src_pow2)
            past = (SRC_OVER and not dense and vv & (vv - 1) > 0 and reads is not None
                    and (piece * ssz >= SRC_OVER_MIN_BYTES or ssz < 4))
            need = L.extent if vv < L.extent else _pow2(vv)
            past = past and all(rd >= need for (v, _), rd in zip(lens, reads or []) if v)
            over = past and 0 < vv < L.extent
            pow2 = past and vv == L.extent
            fn = self._micro(("gather", R, L.extent, Rv, use_nt, vv, dense, over, pow2))
            self.w.put(depth, f"{fn}(src, {so}, {sA}, {out}, {do})")
            return
        for r, (v, wr) in enumerate(lens):
            if wr == 0:
                continue
            use_nt = nt and R == 1 and wr == L.extent and (wr * dsz) % 64 == 0
            s_r = so if r == 0 else f"{so} + {r * sA}"
            d_r = do if r == 0 else f"{do} + {r * L.extent}"
            if wr > MAX_TILE:  # 1-byte runs of 65-128 (plan.LINES_MAX_RUN): a row copy
                assert not (v and self.ep.vector_ops), "runs longer than MAX_TILE take no post-ops"
                fn = self._micro(("gather", 1, wr, 1 if v else 0, use_nt, max(v, 1), False))
                self.w.put(depth, f"{fn}(src, {s_r}, 0, {out}, {d_r})")
                continue
            fn = self._micro(("tile", 1, wr, 1 if v else 0, max(v, 1), use_nt, True),
                             post=self.ep.vector_ops if v else ())
            self.w.put(depth, f"{fn}(src, {s_r}, 0, {out}, {d_r}, 1)")

    # ----------------------------------------------------------------- stream
    def _stream_body(self, depth: int, offs: list[str], state: dict, nt: bool,
                     group_var: str | None, zero: bool) -> None:
        """A long run contiguous on both sides: scalar head to the next line, whole lines, tail."""
        p = self.plan
        t = p.tile
        assert t is not None
        A = self.ir.nodes[t.a]
        vA, wrA = self._range_of(A, state)
        if zero:
            vA = 0
        dsz = self.ops[0].dtype.size
        V = t.V
        w = self.w
        if group_var is not None:
            e0, e1 = w.var("e"), w.var("e")
            w.put(depth, f"{e0} = {group_var} * {p.chunk}")
            w.put(depth, f"{e1} = min({e0} + {p.chunk}, {wrA})")
            lo_v, hi_v = e0, f"min({e1}, {vA})"
            lo_z, hi_z = f"max({e0}, {vA})", e1
        else:
            lo_v, hi_v = "0", str(vA)
            lo_z, hi_z = str(vA), str(wrA)
        so, do = offs[1], offs[0]
        if vA > 0 and not self.ep.direct and nt and STREAM_EPILOGUE_NT:
            # an epilogue, non-temporal: a head to the next line, then chunks computed into obuf
            # (a vectorized loop) and stored as whole lines, then the tail
            q = max(1, 64 // dsz)
            ch = 64 * q
            self._need_buffer(ch)
            a, b, h = w.var("a"), w.var("b"), w.var("h")
            w.put(depth, f"{a} = {lo_v}")
            w.put(depth, f"{b} = {hi_v}")
            w.put(depth, f"{h} = min({b} - {a}, ((-(dbase + ({do} + {a}) * {dsz})) & 63) // {dsz})")
            self._epilogue_range(depth, offs, A, a, f"{a} + {h}")
            w.put(depth, f"{a} = {a} + {h}")
            k, i, c = w.var("k"), w.var("i"), w.var("c")
            g = self._micro(("gather", 1, q, 1, True), str(self.ops[0].dtype), str(self.ops[0].dtype))
            w.put(depth, f"for {k} in range({a}, {b} - {ch - 1}, {ch}):")
            w.put(depth + 1, f"for {i} in range(opaque({ch})):")
            extra = [f"{offs[j]} + ({k} + {i}) * {A.strides[j]}" for j in range(len(self.ops))]
            self._elem(depth + 2, f"{do} + {k} + {i}", f"src[{_ix(f'{so} + {k} + {i}')}]", extra,
                       out=f"obuf[{_ix(i)}]")
            w.put(depth + 1, f"for {c} in range(0, {ch}, {q}):")
            w.put(depth + 2, f"{g}(obuf, {c}, 0, dst, {do} + {k} + {c})")
            w.put(depth, f"{a} = {a} + ({b} - {a}) // {ch} * {ch}")
            self._epilogue_range(depth, offs, A, a, b)
        elif vA > 0 and not self.ep.direct:  # an epilogue: one vectorized element loop, plain stores
            self._epilogue_range(depth, offs, A, lo_v, hi_v)
        elif vA > 0:
            a, b = w.var("a"), w.var("b")
            w.put(depth, f"{a} = {lo_v}")
            w.put(depth, f"{b} = {hi_v}")
            if nt:
                h = w.var("h")
                w.put(depth, f"{h} = min({b} - {a}, ((-(dbase + ({do} + {a}) * {dsz})) & 63) // {dsz})")
                self._scalar_range(depth, so, do, a, f"{a} + {h}")
                w.put(depth, f"{a} = {a} + {h}")
            known = not nt and group_var is None  # [a, b) is [0, vA)
            if not known or vA >= V:
                fn = self._micro(("tile", 1, V, 1, V, nt, True))
                k = w.var("k")
                ssz = self.ops[1].dtype.size
                ahead = p.stream_prefetch if nt else 0
                w.put(depth, f"for {k} in range({a}, {b} - {V - 1}, {V}):")
                if ahead:  # each call's share (its own source bytes), this far ahead
                    pf = self._micro(("prefetch", V * ssz, False))
                    w.put(depth + 1, f"{pf}(src, {so} + {k} + {ahead // ssz})")
                w.put(depth + 1, f"{fn}(src, {so} + {k}, 0, dst, {do} + {k}, 1)")
            if known:
                # the tail's length is known here: one short vector call, not an element
                # loop (bf16 `aB16b -> ab` with b = 30: runs of 30 under lines of 32 took
                # 5.7 us for 32 KB, against 1.6 for its copy)
                if vA % V:
                    ft = self._micro(("tile", 1, vA % V, 1, vA % V, False, True))
                    w.put(depth, f"{ft}(src, {so} + {vA - vA % V}, 0, dst, {do} + {vA - vA % V}, 1)")
            else:
                w.put(depth, f"{a} = {a} + ({b} - {a}) // {V} * {V}")
                self._scalar_range(depth, so, do, a, b)
        if wrA > vA:
            z = w.var("z")
            w.put(depth, f"for {z} in range({lo_z}, {hi_z}):")
            w.put(depth + 1, f"dst[{_ix(f'{do} + {z}')}] = 0")

    def _epilogue_range(self, depth: int, offs: list[str], A: Node, lo: str, hi: str) -> None:
        """Element loop [lo, hi) of a stream through the epilogue (LLVM vectorizes it)."""
        e = self.w.var("e")
        self.w.put(depth, f"for {e} in range({lo}, {hi}):")
        extra = [f"{offs[k]} + {e} * {A.strides[k]}" for k in range(len(self.ops))]
        self._elem(depth + 1, f"{offs[0]} + {e}", f"src[{_ix(f'{offs[1]} + {e}')}]", extra)

    def _scalar_range(self, depth: int, so: str, do: str, lo: str, hi: str) -> None:
        """Element loop of a plain (direct) conversion, for a stream's head and tail."""
        e = self.w.var("e")
        self.w.put(depth, f"for {e} in range({lo}, {hi}):")
        self._elem(depth + 1, f"{do} + {e}", f"src[{_ix(f'{so} + {e}')}]", [])


#: Runs-kind tiles gathering at most this many runs per call walk each row's runs innermost.
ROWS_INNER_MAX_RUNS = 1
#: ... when a row has at most this many runs (columns). A row of more writes one line to each
#: of as many destination planes, and the planes' lines are then written far apart in time:
#: the columns go outer instead, each plane getting the macro group's lines in a row.
#: ``LAYOUTJIT_ROWS_INNER_MAX_COLS`` for A/B runs. Zen 3 (AVX2), ratio to copy at 1 thread
#: (2 threads), rows inner -> columns outer, `nhwc -> nChw16c` f32: C=1024 (64 runs)
#: 16x1024x17x3x112 (5-D) 1.57 -> 1.04 (0.90 -> 0.68), bf16 -> f32 1.80 -> 1.16 (0.99 ->
#: 0.73); C=512 16x512x28x56 1.32 -> 0.66 (1.01 -> 0.71); C=384 1.10 -> 0.96 (1.10 -> 0.89);
#: C=320 1.37 -> 0.93 (0.93 -> 0.89); C=256 (16 runs) 0.83-0.93 -> 0.80-0.81 (0.70-0.77 ->
#: 0.69-0.79), a draw; C=192 (12) 0.84 -> 0.95 (0.85 -> 1.09) and C=100, 128, 160 lost too.
ROWS_INNER_MAX_COLS = int(os.environ.get("LAYOUTJIT_ROWS_INNER_MAX_COLS", 16))

#: Rows inner only where a row's runs follow one another in the source and the row after
#: follows them, and plain stores do not pile a row's lines into one L1 set
#: (``LAYOUTJIT_ROWS_INNER_SRC_RUNS=0``: every such tile rows inner, as before).
ROWS_INNER_SRC_RUNS = os.environ.get("LAYOUTJIT_ROWS_INNER_SRC_RUNS", "1") != "0"

def _rows_inner_pays(A: Node, B: Node, L: Node, dsz: int, nt: bool) -> bool:
    """Whether walking each row's runs innermost reads the source in order.

    Rows inner reads a row's B runs in order and writes one line to each of B planes;
    columns outer writes each plane the group's lines in a row and reads the group's rows
    side by side. The first pays only where the row is the source's next block: weights
    whose rows lie apart (`ohwi -> IOhw16o16i`: a row is 12 runs of a 3840-byte stride)
    read no better in row order and scatter their writes over 12 planes. Plain stores to
    planes a multiple of 4 KB apart also fill one L1 set per row (`hwio -> Ohwi16o`: 16
    planes 36 KB apart); NT stores (whole lines) do not allocate.

    Zen 3 (AVX2), ``python -m perf.ab`` ratio to copy at 1 thread (2 threads), rows inner
    -> this rule, f32: `ohwi -> IOhw16o16i` 1536x192x5x1 1.88 (1.94) -> 1.07 (1.06),
    oneDNN 1.31 (2.31); `hwio -> Ohwi16o` 256x64x3x3 1.70 (1.77) -> 1.07 (0.84);
    `IOhw16i16o -> hwio` 49152x1024x3x1 1.34 (1.22) -> 0.91 (1.13); `OIhw16o16i -> ohwi`
    4096x384x3x5 1.25 (0.84) -> 0.89 (0.73); s8 `OIhw8i8o -> Ohwi8o` 256x2048x3x3 1.73
    (1.71) -> 1.16 (1.16). 28 of 6625 listed and generated pairs change (no activation):
    geomean 0.86 (0.90), 12 (9) faster by a tenth; two slower at 2 threads in one run
    measured even on a second (bf16 `OIhw8i8o -> Ohwi8o` 256x2048x3x3 1.57 -> 1.16).
    Kernels that time their store kind (``Plan.nt_tune``) keep rows inner: with columns
    outer in their plain branch that pair kept another kind and lost at 2 threads in a
    third run (1.55 -> 2.41), as did `ohwi -> OIhw16o16i` 4096x128x1x5 (1.12 -> 1.31).
    """
    if not ROWS_INNER_SRC_RUNS:
        return True
    sA, sB, dB = A.strides[1], B.strides[1], B.strides[0]
    if sA is None or sB is None or dB is None:
        return False
    if sB != L.extent or sA > B.extent * L.extent:
        return False
    return nt or lines_per_l1_set(c * dB * dsz for c in range(B.extent)) <= L1_WAYS


def generate(plan: Plan, epilogue: Epilogue, title: str = "") -> str:
    """The module source for a plan."""
    return KernelWriter(plan, epilogue, title=title).render()


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:20]

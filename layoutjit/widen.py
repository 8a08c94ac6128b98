"""Element widening: a run both sides keep together moves as one wider element.

A plain reorder (same data type, no attributes) whose source and destination both
hold the same lightest digit of a dim contiguously -- the ``4i`` of s8
``OIhw4i16o4i -> OIhw2i8o4i``, the ``2i`` of bf16 ``OIhw8i16o2i -> OIhw16i16o2i`` --
never separates the k elements of that run. Read as one element of k times the
size, the reorder is the same permutation of fewer, wider elements, and every
micro-kernel built for 2- and 4-byte elements applies: a 1-byte register transpose
(a 64-lane byte network per 64-byte vector) becomes a 4-byte one.

``widen(ir)`` rewrites the IR before planning: the run's node loses k of its steps
(its extent divides by k; it disappears when it equals k), every other stride and
that dim's weights and extents divide by k, and the operands take the wider bit
type (``bf16`` words for 2 bytes, ``s32`` for 4, ``f64`` for 8: same-type moves
copy the bits, no conversion runs). Kernels take byte pointers, so nothing changes
at run time.

Conditions, all exact: the run's node has stride 1 in both operands; k divides its
extent, the dim's size (padding never shares a wide element with data, so zero
padding stays whole elements), every other stride and ``offset0`` of both operands.
``LAYOUTJIT_WIDEN_MAX_BYTES`` caps the wide element (default 4; 1 turns widening
off): 8-byte elements would take over tuned f32 plans (``nhwc -> nChw16c``) for no
measured gain. The compiler keeps the wide IR only where its plan is a register
transpose (``TRANSPOSES_ONLY``); 1- and 2-byte elements go on to 8 bytes where that turns
a plan of plain stores into an NT register transpose (``WIDEN_NT_MAX_BYTES``).
"""

from __future__ import annotations

import os
from dataclasses import replace

from .dtypes import BF16, F64, S32, DataType
from .ir import Digit, DimRange, LoopIR, Node, Operand

#: Largest wide element in bytes (1: no widening at all, ``WIDEN_NT_MAX_BYTES`` included).
WIDEN_MAX_BYTES = int(os.environ.get("LAYOUTJIT_WIDEN_MAX_BYTES", 4))

#: Keep the wide IR only where its plan is a register transpose (``transpose`` tiles); plan
#: the narrow IR otherwise. Widening pays where it turns runs of 1-2 elements (``lines``
#: tiles, a gather per run) into a register transpose of wide elements; where the wide plan
#: moves runs or streams too, the narrow plan measured as fast or faster (its runs are
#: k times longer; bf16 ``OhwI32o4i -> Ihwo16i`` 55x16x256x256: 0.92x copy narrow, 1.14 wide).
TRANSPOSES_ONLY = os.environ.get("LAYOUTJIT_WIDEN_TRANSPOSES_ONLY", "1") != "0"

#: Elements under 4 bytes widen further, up to this many bytes, where the plan chosen with
#: ``WIDEN_MAX_BYTES`` stores plain (or cuts NT runs at lines, below) and the wider one is a
#: register transpose with non-temporal stores (0 or at most WIDEN_MAX_BYTES: never). Over 24 sampled 1- and 2-byte
#: pairs that 8-byte elements change (61 of 1080 listed and generated), 8 bytes everywhere
#: measured 0.98 -> 0.78x copy at 1 thread (0.91 -> 0.75 at 2): of the 9 whose plan stored
#: plain, 8 gained (u8 `gOIhw8i8o -> gOIhw16i16o` 14x192x7x224x13 0.91 -> 0.43, bf16
#: `gIwO16o64i4o -> NChw2c32n8c` 2.14 -> 0.82, s8 `OIw8i8o -> Owi32o` 1.41 -> 0.73) and
#: one lost a little (u8 `nCw8c -> nCw16c` 28672x1024x3 0.79 -> 0.84); the NT ones were
#: mixed (8 gained, 6 lost: u8 `nhwc -> nChw8c` 192x768x28x28 0.71 -> 0.84, `nCdhw8c ->
#: ndhwc` 0.63 -> 0.76, `abDC24d8c -> gOIw16o16i` 0.80 -> 1.35) and keep their plan, but
#: for NT runs whose columns start off the lines (``Plan.line_phases`` > 1; a line shared by
#: two columns is stored plain): all 3 of those (of 48 NT runs plans whose 8-byte plan is an
#: NT transpose) gained or held, u8 `ndhwc -> nCdhw8c` 448x2048x3x7x7 2.42 (1.69) -> 1.96
#: (1.34), oneDNN 2.9, u8 `gOIhw8i8o -> hwigo` 3.55 (2.32) -> 2.63 (1.75); panels of such
#: columns (``Plan.lines_panel``) were mixed (5 gained, 3 lost: s8 `nChw8c -> nChw16c`
#: 14x14 0.62 -> 0.81) and keep theirs.
WIDEN_NT_MAX_BYTES = int(os.environ.get("LAYOUTJIT_WIDEN_NT_MAX_BYTES", 8))

#: The bit type that moves a wide element of each size.
_BITS: dict[int, DataType] = {2: BF16, 4: S32, 8: F64}


def run_node(ir: LoopIR) -> Node | None:
    """The node both operands step with stride 1 at weight 1 (the shared contiguous run)."""
    if len(ir.operands) != 2 or ir.operands[0].dtype != ir.operands[1].dtype:
        return None
    for n in ir.nodes:
        if n.dim is not None and n.weight == 1 and n.strides[0] == 1 and n.strides[1] == 1:
            return n
    return None


def widen_factor(ir: LoopIR, max_bytes: int | None = None) -> int:
    """The largest k (a power of two, k * element size <= max_bytes) the IR can widen by; 1: none."""
    cap = WIDEN_MAX_BYTES if max_bytes is None else max_bytes
    run = run_node(ir)
    if run is None or run.dim is None:
        return 1
    esz = ir.operands[0].dtype.size
    r = ir.dims[run.dim]
    best, k = 1, 2
    while k * esz <= cap and k * esz in _BITS:
        ok = (run.extent % k == 0
              and all(b % k == 0 for b in (r.valid, r.write, r.extent, r.src_extent))
              and all(op.offset0 % k == 0 for op in ir.operands)
              and all(s is not None and s % k == 0
                      for n in ir.nodes if n is not run for s in n.strides))
        if not ok:
            break
        best, k = k, k * 2
    return best


def _widen_digits(op: Operand, d: int, k: int, dtype: DataType) -> Operand:
    digs = []
    for dg in op.digits[d]:
        if dg.weight == 1:  # the run: stride 1, k of its steps are one element now
            digs.append(Digit(1, None if dg.extent is None else dg.extent // k, dg.stride))
        else:  # weights are multiples of the run's extent; a stride that is not a multiple
            # of k belongs to a digit that never steps (its weight covers the whole dim)
            digs.append(Digit(dg.weight // k, dg.extent, dg.stride // k if dg.stride % k == 0 else 0))
    return replace(op, dtype=dtype, offset0=op.offset0 // k,
                   digits=op.digits[:d] + (tuple(digs),) + op.digits[d + 1:])


def widen(ir: LoopIR, max_bytes: int | None = None) -> LoopIR:
    """The IR with its shared contiguous run moved as wide elements (``ir`` itself when none)."""
    k = widen_factor(ir, max_bytes)
    if k == 1:
        return ir
    run = run_node(ir)
    assert run is not None and run.dim is not None
    d = run.dim
    dtype = _BITS[k * ir.operands[0].dtype.size]
    nodes = []
    for n in ir.nodes:
        if n is run:
            if n.extent > k:
                nodes.append(Node(n.extent // k, d, 1, n.strides))
            continue
        strides = tuple(None if s is None else s // k for s in n.strides)  # (widen_factor: no None)
        nodes.append(Node(n.extent, n.dim, n.weight // k if n.dim == d else n.weight, strides))
    r = ir.dims[d]
    dims = list(ir.dims)
    dims[d] = DimRange(r.valid // k, r.write // k, r.extent // k, r.src_extent // k)
    ops = tuple(_widen_digits(op, d, k, dtype) for op in ir.operands)
    note = (f"dim {'abcdefghijkl'[d]}: runs of {k} {ir.operands[0].dtype} move as one "
            f"{k * ir.operands[0].dtype.size}-byte element")
    return LoopIR(ops, tuple(dims), tuple(nodes), ir.notes + (note,))


__all__ = ["widen", "widen_factor", "run_node", "WIDEN_MAX_BYTES", "WIDEN_NT_MAX_BYTES", "TRANSPOSES_ONLY"]

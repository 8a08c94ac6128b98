"""The loop-nest IR: a reorder as a flat list of loop nodes over index digits.

Every operand layout (the destination, the source, and any per-element
attribute arrays such as scales or a binary post-op input) maps a logical index
to an element offset. Each logical dim ``d`` is split into *digits*: the outer
part and each of the layout's inner blocks of ``d``. A digit has a *weight*
(what one step of it adds to the logical index) and an extent and a stride.

Lowering a set of layouts takes the **common refinement** of their digit
splits: for each dim, the union of all digit weights (they must divide each
other, as 1 | 2 | 16 | ... do; oneDNN's reorder has the same requirement and
calls the rest unimplemented -- here an operand that does not fit gets its
offset computed from the logical index instead, see ``Node.strides``). Every
refined digit becomes one loop node that carries one stride per operand.

Each dim also records three extents: ``valid`` (logical size: positions below
it hold data), ``write`` (the destination's padded size: positions in
``[valid, write)`` are zero padding that must be written as 0) and ``extent``
(the iteration extent, a multiple of every digit weight: positions in
``[write, extent)`` exist in no destination and are skipped).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .desc import MemoryDesc
from .dtypes import DataType


@dataclass(frozen=True)
class Digit:
    """One digit of one operand's split of a logical dim.

    ``extent`` is None for the outermost digit (unbounded: ``x // weight``).
    """

    weight: int
    extent: int | None
    stride: int


@dataclass(frozen=True)
class Operand:
    """One buffer taking part in a loop nest, with its per-dim digit splits.

    ``digits[d]`` lists the digits of logical dim ``d`` from the outermost in.
    A broadcast dim (the operand has size 1 where the iteration has more) has a
    single digit of stride 0.
    """

    name: str
    dtype: DataType
    offset0: int
    digits: tuple[tuple[Digit, ...], ...]
    role: str = "src"  # "dst", "src", "scale", "zero_point", "binary"

    def offset_expr_of_dim(self, d: int, x: str) -> str:
        """Python expression for this operand's offset contribution of dim d at logical x."""
        terms = []
        for dg in self.digits[d]:
            if dg.stride == 0:
                continue
            q = x if dg.weight == 1 else f"({x} // {dg.weight})"
            if dg.extent is not None:
                q = f"({q} % {dg.extent})"
            terms.append(q if dg.stride == 1 else f"{q} * {dg.stride}")
        return " + ".join(terms) if terms else "0"


@dataclass(frozen=True)
class DimRange:
    """Extents of one logical dim: data below ``valid``, zeros below ``write``; the source
    holds elements (its padding included) below ``src_extent`` (0: ``valid``)."""

    valid: int
    write: int
    extent: int
    src_extent: int = 0

    @property
    def guarded(self) -> bool:
        return self.valid != self.extent


@dataclass(frozen=True)
class Node:
    """One loop: ``extent`` steps, each adding ``weight`` to logical dim ``dim``.

    ``strides[k]`` is operand k's element stride for one step, or None when the
    operand's split does not refine this one (its offset is then computed from
    the logical index). ``dim`` is None for a node that merged several
    unguarded dims.
    """

    extent: int
    dim: int | None
    weight: int
    strides: tuple[int | None, ...]

    def stride(self, k: int) -> int | None:
        return self.strides[k]

    def split(self, k: int) -> tuple[Node, Node]:
        """This loop as (outer, inner): ``extent // k`` steps of k of its steps, then k steps
        (k divides the extent). A merged node (dim None) keeps weight 1 outside too."""
        outer = Node(self.extent // k, self.dim, self.weight * k if self.dim is not None else 1,
                     tuple(None if s is None else s * k for s in self.strides))
        return outer, Node(k, self.dim, self.weight, self.strides)


@dataclass(frozen=True)
class LoopIR:
    """A reorder as plain data: operands, per-dim extents and loop nodes (outermost first)."""

    operands: tuple[Operand, ...]
    dims: tuple[DimRange, ...]
    nodes: tuple[Node, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def dst(self) -> Operand:
        return self.operands[0]

    def with_nodes(self, nodes: Sequence[Node], note: str | None = None) -> LoopIR:
        notes = self.notes + ((note,) if note else ())
        return LoopIR(self.operands, self.dims, tuple(nodes), notes)

    @property
    def total(self) -> int:
        n = 1
        for nd in self.nodes:
            n *= nd.extent
        return n

    def __str__(self) -> str:
        return format_ir(self)


def _operand_digits(md: MemoryDesc, iter_dims: Sequence[int]) -> tuple[tuple[Digit, ...], ...]:
    """Digit splits of every dim of a blocked descriptor (broadcast where md's dim is 1)."""
    out: list[tuple[Digit, ...]] = []
    blocks = md.blocks
    for d in range(md.ndims):
        if md.dims[d] == 1 and iter_dims[d] != 1:
            out.append((Digit(1, None, 0),))  # broadcast (any padding of it is never read)
            continue
        digs: list[Digit] = [Digit(blocks[d], None, md.strides[d])]
        # inner blocks of d, outermost first; stride = product of all inner blocks after it
        inner_stride = 1
        strides_after = []
        for b in reversed(md.inner_blks):
            strides_after.append(inner_stride)
            inner_stride *= b
        strides_after.reverse()
        rem = blocks[d]
        for b, i, s in zip(md.inner_blks, md.inner_idxs, strides_after):
            if i != d:
                continue
            rem //= b
            digs.append(Digit(rem, b, s))
        out.append(tuple(digs))
    return tuple(out)


def make_operand(name: str, md: MemoryDesc, iter_dims: Sequence[int], role: str) -> Operand:
    return Operand(name, md.dtype, md.offset0, _operand_digits(md, iter_dims), role)


def _stride_at(digits: Sequence[Digit], w: int) -> int:
    """Stride of one step of weight w within a split whose weights refine to w."""
    best = None
    for dg in digits:
        if dg.weight <= w and (best is None or dg.weight > best.weight):
            best = dg
    assert best is not None and w % best.weight == 0
    return best.stride * (w // best.weight)


def _is_chain(weights: Sequence[int]) -> bool:
    ws = sorted(set(weights))
    return all(b % a == 0 for a, b in zip(ws, ws[1:]))


def lower(dst: MemoryDesc, src: MemoryDesc,
          extra: Sequence[tuple[str, MemoryDesc, str]] = ()) -> LoopIR:
    """Lower a (dst, src, extra operands...) set of layouts to a LoopIR.

    Operand 0 is the destination, operand 1 the source; ``extra`` holds
    (name, desc, role) for attribute arrays that broadcast over the dims
    where their size is 1. Nodes come out in the destination's digit order
    (by decreasing destination stride); the planner reorders them.
    """
    iter_dims = dst.dims
    operands = [make_operand("dst", dst, iter_dims, "dst"), make_operand("src", src, iter_dims, "src")]
    for name, md, role in extra:
        operands.append(make_operand(name, md, iter_dims, role))
    nd = dst.ndims
    dims: list[DimRange] = []
    nodes: list[Node] = []
    fits: list[list[bool]] = []
    notes: list[str] = []
    for d in range(nd):
        # fold operands into the refinement one by one while their weights form a chain
        weights: list[int] = [dg.weight for dg in operands[0].digits[d]]
        fit = [True]
        for op in operands[1:]:
            ws = [dg.weight for dg in op.digits[d] if dg.stride != 0 or len(op.digits[d]) > 1]
            if _is_chain(weights + ws):
                weights += ws
                fit.append(True)
            else:
                fit.append(False)
                notes.append(f"dim {d}: {op.name}'s blocks do not nest with the others; "
                             f"its offset is computed from the index")
        fits.append(fit)
        ws = sorted(set(weights))
        top = ws[-1]
        valid = dst.dims[d]
        write = dst.padded_dims[d]
        extent = -(-write // top) * top
        dims.append(DimRange(valid, write, extent, src.padded_dims[d]))
        bounds = ws + [extent]
        dim_nodes = []
        for lo_w, hi_w in zip(bounds, bounds[1:]):
            if hi_w == lo_w:
                continue
            strides: list[int | None] = []
            for k, op in enumerate(operands):
                strides.append(_stride_at(op.digits[d], lo_w) if fit[k] else None)
            dim_nodes.append(Node(hi_w // lo_w, d, lo_w, tuple(strides)))
        nodes.extend(reversed(dim_nodes))  # outermost digit first
    ir = LoopIR(tuple(operands), tuple(dims), tuple(nodes), tuple(notes))
    return ir


def format_ir(ir: LoopIR) -> str:
    """A readable table of the IR (used by ``explain``)."""
    letters = "abcdefghijkl"
    names = [op.name for op in ir.operands]
    head = f"{'node':<8}{'extent':>8}  {'dim':<4}{'weight':>7}" + "".join(f"{n + '_stride':>14}" for n in names)
    lines = [head]
    for i, n in enumerate(ir.nodes):
        dim = "-" if n.dim is None else letters[n.dim]
        st = "".join(f"{'f(x)' if s is None else s:>14}" for s in n.strides)
        lines.append(f"{'#' + str(i):<8}{n.extent:>8}  {dim:<4}{n.weight:>7}{st}")
    for d, r in enumerate(ir.dims):
        if r.guarded:
            lines.append(f"dim {letters[d]}: data in [0, {r.valid}), zeros in [{r.valid}, {r.write})"
                         + (f", skipped [{r.write}, {r.extent})" if r.extent != r.write else ""))
    offs = ", ".join(f"{op.name}={op.offset0}" for op in ir.operands if op.offset0)
    if offs:
        lines.append(f"offset0: {offs}")
    for note in ir.notes:
        lines.append(f"note: {note}")
    return "\n".join(lines)

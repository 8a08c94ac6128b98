"""Human-readable explanations of descriptors, tags and compiled kernels.

``explain(src_md, dst_md)`` compiles (or fetches from the cache) the reorder
and returns, as text, both descriptors with their padded dims, strides and
blocks, the loop-nest IR, the plan and the generated source: what
``python -m layoutjit explain`` prints. ``explain_kernel(kernel)`` (also
``Kernel.explain()``) does the same for a kernel you already hold, and
``describe_tag(name)`` / ``memory_picture(md)`` are what
``python -m layoutjit tags NAME`` prints.

>>> import layoutjit as lj
>>> text = explain(lj.MemoryDesc([2, 17, 5, 4], "f32", "nchw"),
...                lj.MemoryDesc([2, 17, 5, 4], "f32", "nChw16c"))
>>> "padded dims   2x32x5x4" in text and "def kernel(" in text
True
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .desc import MemoryDesc
from .errors import LayoutError
from .tags import ParsedTag, parse_tag

if TYPE_CHECKING:
    from .kernel import Kernel

__all__ = [
    "explain", "explain_kernel", "describe_md", "describe_tag", "memory_picture",
    "digit_nest", "tag_letters", "default_dims", "tiny_dims",
]

LETTERS = "abcdefghijkl"

# dims used when the user gives none: a padded channel dim (17) in second place
_DEFAULT_DIMS = {
    1: (17,), 2: (17, 5), 3: (2, 17, 5), 4: (2, 17, 5, 4), 5: (2, 17, 3, 5, 4),
    6: (2, 17, 3, 3, 5, 4),
}


def _x(values: Sequence[int]) -> str:
    return "x".join(str(v) for v in values) if len(values) else "()"


def _blocks_text(md: MemoryDesc) -> str:
    return "".join(f"{b}{LETTERS[i]}" for b, i in zip(md.inner_blks, md.inner_idxs))


def default_dims(ndims: int) -> tuple[int, ...]:
    """Dims the CLI uses when none are given: small, with a channel count (17) that pads.

    >>> default_dims(4)
    (2, 17, 5, 4)
    """
    if ndims in _DEFAULT_DIMS:
        return _DEFAULT_DIMS[ndims]
    return (2, 17) + (3,) * (ndims - 2)


def tag_letters(name: str) -> str | None:
    """The domain letters of an alias, in logical dim order (``"nchw"`` for ``nChw16c``).

    None for abstract tags, whose letters already are ``a, b, c, ...``.

    >>> tag_letters("nChw16c"), tag_letters("OIhw16i16o"), tag_letters("aBcd16b")
    ('nchw', 'oihw', None)
    """
    pt = parse_tag(name)
    if pt.abstract == name:
        return None
    m = re.match(r"^[a-zA-Z]+", name)
    am = re.match(r"^[a-lA-L]+", pt.abstract)
    if m is None or am is None or len(m.group(0)) != len(am.group(0)):
        return None
    outer = m.group(0).lower()
    if len(set(outer)) != len(outer):
        return None
    letters = [""] * pt.ndims
    for alias_c, abs_c in zip(outer, am.group(0).lower()):
        letters[LETTERS.index(abs_c)] = alias_c
    return "".join(letters)


def digit_nest(pt: ParsedTag) -> list[str]:
    """The index digits of a tag from the outermost to the innermost (how memory nests).

    Each entry is an expression of a logical index letter: ``a//16`` is the
    outer part of a dim blocked by 16, ``(a//2)%8`` a middle block, ``a%2``
    the innermost one.

    >>> digit_nest(parse_tag("ABcd8a16b2a"))
    ['a//16', 'b//16', 'c', 'd', '(a//2)%8', 'b%16', 'a%2']
    """
    blocks = pt.blocks
    out = []
    for d in pt.perm:
        x = LETTERS[d]
        out.append(f"{x}//{blocks[d]}" if blocks[d] > 1 else x)
    for k, (b, d) in enumerate(zip(pt.inner_blks, pt.inner_idxs)):
        w = 1
        for b2, d2 in zip(pt.inner_blks[k + 1:], pt.inner_idxs[k + 1:]):
            if d2 == d:
                w *= b2
        x = LETTERS[d]
        out.append(f"{x}%{b}" if w == 1 else f"({x}//{w})%{b}")
    return out


def describe_md(md: MemoryDesc, label: str = "") -> str:
    """A multi-line description of a descriptor: tag, dims, padding, strides, blocks, size.

    >>> import layoutjit as lj
    >>> print(describe_md(lj.MemoryDesc([2, 17, 5, 4], "f32", "nChw16c"), "dst"))
    dst: MemoryDesc(f32, 2x17x5x4, nChw16c)
      tag           nChw16c (abstract aBcd16b)
      data type     f32 (4 B per element)
      dims          2x17x5x4
      padded dims   2x32x5x4  (b: 17 -> 32, zero padding)
      strides       640x320x64x16  (elements, outer dims, logical order)
      inner blocks  16b  (innermost last; 16 elements per block)
      size          5120 B = 1280 elements (680 data, 600 padding)
    """
    head = f"{label}: {md!r}" if label else repr(md)
    lines = [head]
    if md.format_kind != "blocked":
        lines.append(f"  format kind   {md.format_kind} (no layout yet)")
        return "\n".join(lines)
    tag = md.tag
    if tag is not None:
        abstract = parse_tag(tag).abstract
        lines.append(f"  tag           {tag}" + (f" (abstract {abstract})" if abstract != tag else ""))
    else:
        lines.append("  tag           none (a strided or sliced layout)")
    lines.append(f"  data type     {md.dtype} ({md.dtype.size} B per element)")
    lines.append(f"  dims          {_x(md.dims)}")
    pad = [f"{LETTERS[d]}: {n} -> {p}" for d, (n, p) in enumerate(zip(md.dims, md.padded_dims)) if n != p]
    lines.append(f"  padded dims   {_x(md.padded_dims)}"
                 + (f"  ({', '.join(pad)}, zero padding)" if pad else "  (no padding)"))
    if any(md.padded_offsets):
        lines.append(f"  padded offs   {_x(md.padded_offsets)}")
    lines.append(f"  strides       {_x(md.strides)}  (elements, outer dims, logical order)")
    if md.inner_blks:
        lines.append(f"  inner blocks  {_blocks_text(md)}  (innermost last; {md.block_size} "
                     f"elements per block)")
    else:
        lines.append("  inner blocks  none")
    if md.offset0:
        lines.append(f"  offset0       {md.offset0} elements")
    size = md.get_size()
    nel = size // md.dtype.size if md.dtype.size else 0
    extra = ""
    if md.has_padding and md.is_dense():
        extra = f" ({md.nelems} data, {nel - md.nelems} padding)"
    elif not md.is_dense():
        extra = f"; a view: buffers need at least {md.required_bytes()} B"
    lines.append(f"  size          {size} B = {nel} elements{extra}")
    return "\n".join(lines)


def _section(title: str) -> str:
    return f"== {title} " + "=" * max(3, 76 - len(title))


def explain_kernel(kernel: Kernel) -> str:
    """Everything about a compiled kernel: descriptors, IR, plan and generated source.

    >>> import layoutjit as lj
    >>> k = lj.compile_reorder(lj.MemoryDesc([4, 3], "f32", "ab"), lj.MemoryDesc([4, 3], "f32", "ba"))
    >>> print(k.explain().splitlines()[0])
    == reorder: MemoryDesc(f32, 4x3, nc) -> MemoryDesc(f32, 4x3, cn) ===============
    """
    src_md, dst_md = kernel.src_md, kernel.dst_md
    attrs = kernel.attrs
    title = f"{kernel.kind}: {src_md!r} -> {dst_md!r}"
    out = [_section(title)]
    if attrs is not None:
        out.append(f"attributes: {attrs.describe()}")
    if kernel.kind == "eltwise":
        out.append(describe_md(src_md, "data"))
    else:
        out.append(describe_md(src_md, "src"))
        out.append(describe_md(dst_md, "dst"))
    out.append("")
    plan = kernel.plan
    if plan is None:
        out.append("zero-volume tensor: the kernel does nothing")
    else:
        from .compiler import lower_and_plan

        unit = "elements"
        try:
            ir = lower_and_plan(src_md, dst_md, attrs)[0]
        except Exception as e:  # pragma: no cover - the kernel compiled, so this should not fail
            ir_text = f"(cannot lower again: {type(e).__name__}: {e})"
        else:
            from .ir import format_ir

            ir_text = format_ir(ir)
            if ir.operands[0].dtype.size != dst_md.dtype.size:  # widened (layoutjit.widen)
                unit = f"{ir.operands[0].dtype.size}-byte elements"
        out.append(_section("IR: the common refinement, one loop node per index digit"))
        out.append(f"strides in {unit}; f(x): offset computed from the index; operand 0 is the destination")
        out.append(ir_text)
        out.append("")
        out.append(_section("plan: after drop_unit, order_by_dst, merge, tiling, parallel split"))
        out.append(plan.describe())
        choice = getattr(kernel, "store_choice", None)
        if choice is not None:
            out.append(f"stores kept so far: {choice.describe()}")
        out.append("")
    where = "built in memory"
    if kernel.path is not None:
        how = "loaded from the disk cache" if getattr(kernel, "loaded_from_disk", False) else "compiled"
        where = f"{kernel.path} ({how} in {kernel.compile_s * 1e3:.0f} ms)"
    out.append(_section(f"generated source: {where}"))
    out.append(kernel.source.rstrip("\n"))
    return "\n".join(out) + "\n"


def explain(src_md: MemoryDesc, dst_md: MemoryDesc, **attrs: Any) -> str:
    """Compile (or fetch) the reorder ``src_md -> dst_md`` and explain it (see ``explain_kernel``).

    ``attrs`` go to :func:`layoutjit.compile_reorder` (``scales``, ``zero_points``, ``post_ops``).

    >>> import layoutjit as lj
    >>> s = lj.MemoryDesc([2, 17, 5, 4], "f32", "nchw")
    >>> d = lj.MemoryDesc([2, 17, 5, 4], "bf16", "nChw16c")
    >>> "bf16" in explain(s, d)
    True
    """
    from .api import compile_reorder

    return explain_kernel(compile_reorder(src_md, dst_md, **attrs))


# ------------------------------------------------------------------- tags
def tiny_dims(tag: str, max_slots: int = 512) -> tuple[int, ...]:
    """Small dims for a memory picture of ``tag``: 2 per plain dim, a padded size per blocked dim.

    >>> tiny_dims("nChw16c")
    (2, 3, 2, 2)
    """
    pt = parse_tag(tag)
    blocks = pt.blocks
    dims = [2 if b == 1 else max(1, min(3, b - 1)) for b in blocks]

    def slots() -> int:
        n = 1
        for d, b in zip(dims, blocks):
            n *= -(-d // b) * b
        return n

    # shrink plain dims first (innermost in memory first), then blocked ones
    order = [d for d in reversed(pt.perm) if blocks[d] == 1] + [d for d in reversed(pt.perm) if blocks[d] > 1]
    for d in order:
        if slots() <= max_slots:
            break
        dims[d] = 1
    return tuple(dims)


def memory_picture(md: MemoryDesc, letters: str | None = None, max_rows: int = 64,
                   width: int | None = None) -> str:
    """The logical index stored in each memory slot, in memory order; ``-`` marks padding.

    >>> import layoutjit as lj
    >>> print(memory_picture(lj.MemoryDesc([1, 3, 1, 2], "f32", "nChw4c")))
    slot   cells: logical index abcd of the element stored there ('----' = zero padding)
       0:  0000 0100 0200 ----
       4:  0001 0101 0201 ----
    """
    if md.format_kind != "blocked" or md.ndims == 0:
        raise LayoutError(f"{md!r}: a memory picture needs a blocked descriptor")
    nslots = md.max_offset() + 1 if not md.has_zero_dim else 0
    if nslots > 1 << 16:
        raise LayoutError(f"{md!r}: {nslots} slots are too many to draw; use smaller dims")
    letters = letters or LETTERS[: md.ndims]
    compact = all(n <= 10 for n in md.dims)  # padding cells are drawn as dashes
    cells: list[str | None] = [None] * nslots
    pad_at: list[bool] = [False] * nslots
    for idx in itertools.product(*(range(p) for p in md.padded_dims)):
        off = md.offset_of(idx, allow_padding=True)
        padding = any(i >= n for i, n in zip(idx, md.dims))
        pad_at[off] = padding
        cells[off] = "" if padding else ("" if compact else ",").join(str(i) for i in idx)
    cw = max((len(c) for c in cells if c), default=md.ndims)
    if width is None:
        width = 16
        run = 1
        for b in reversed(md.inner_blks):
            run *= b
            if run > 16:
                break
            width = run
        if not md.inner_blks:
            inner = min(range(md.ndims), key=lambda d: (md.strides[d], d))
            width = max(1, min(16, md.padded_dims[inner])) if md.strides[inner] == 1 else 16
        width = max(width, 1)
    sep = "" if compact else ","
    pad_cell = "-" * cw
    head = (f"slot   cells: logical index {sep.join(letters)} of the element stored there "
            f"('{pad_cell}' = zero padding"
            + (", '?' = a gap no index maps to" if any(c is None for c in cells) else "") + ")")
    lines = [head]
    sw = max(4, len(str(max(nslots - 1, 0))))
    rows = 0
    skipped = 0
    for start in range(0, nslots, width):
        row = range(start, min(start + width, nslots))
        if all(cells[s] is not None and pad_at[s] for s in row):
            skipped += 1
            continue
        if skipped:
            lines.append(f"{'':>{sw}}   ... {skipped} row(s) of padding only")
            skipped = 0
        if rows >= max_rows:
            lines.append(f"{'':>{sw}}   ... ({nslots - start} more slots)")
            break
        texts = []
        for s in row:
            c = cells[s]
            texts.append("?" * cw if c is None else pad_cell if pad_at[s] else c.rjust(cw))
        lines.append(f"{start:>{sw}}:  " + " ".join(texts))
        rows += 1
    else:
        if skipped:
            lines.append(f"{'':>{sw}}   ... {skipped} row(s) of padding only")
    return "\n".join(lines)


def describe_tag(name: str, dims: Sequence[int] | None = None, dtype: str = "f32",
                 picture_dims: Sequence[int] | None = None) -> str:
    """Explain one tag or alias: abstract form, how it reads, its layout for some dims, a picture.

    >>> print(describe_tag("nChw16c").splitlines()[0])
    nChw16c: alias of the abstract tag aBcd16b
    """
    pt = parse_tag(name)
    letters = tag_letters(name)
    lines = []
    if pt.abstract != name:
        lines.append(f"{name}: alias of the abstract tag {pt.abstract}")
    else:
        from .tags import display_name

        alias = display_name(name)
        lines.append(f"{name}: abstract tag" + (f" (alias {alias})" if alias != name else ""))
    lines.append(f"  ndims         {pt.ndims}"
                 + (f"  (the alias's letters: {' '.join(f'{a}={b}' for a, b in zip(letters, LETTERS))})"
                    if letters else ""))
    m = re.match(r"^[a-lA-L]+", pt.abstract)
    outer = m.group(0) if m else ""
    blocked = [LETTERS[d] for d in range(pt.ndims) if pt.blocks[d] > 1]
    lines.append(f"  outer dims    {' '.join(outer)}  (outermost first"
                 + (f"; upper case = blocked: {', '.join(blocked)}" if blocked else "") + ")")
    if pt.inner_blks:
        blk = "".join(f"{b}{LETTERS[i]}" for b, i in zip(pt.inner_blks, pt.inner_idxs))
        lines.append(f"  inner blocks  {blk}  (outermost first; {_prod(pt.inner_blks)} elements per block)")
    else:
        lines.append("  inner blocks  none (a plain permutation)")
    lines.append(f"  memory nests  {' > '.join(digit_nest(pt))}  (outermost > ... > innermost)")
    d_t = tuple(dims) if dims is not None else default_dims(pt.ndims)
    if len(d_t) != pt.ndims:
        raise LayoutError(f"tag {name!r} has {pt.ndims} dims; --dims gives {len(d_t)} ({_x(d_t)})")
    md = MemoryDesc(d_t, dtype, name)
    lines.append("")
    lines.append(f"for dims {_x(d_t)} ({dtype}):")
    lines.extend("  " + ln for ln in describe_md(md).splitlines()[1:])
    p_dims = tuple(picture_dims) if picture_dims is not None else None
    if p_dims is None:
        p_dims = d_t if MemoryDesc(d_t, dtype, name).get_size() // md.dtype.size <= 256 else tiny_dims(name)
    pmd = MemoryDesc(p_dims, dtype, name)
    lines.append("")
    lines.append(f"memory order of a {_x(p_dims)} tensor (padded {_x(pmd.padded_dims)}, "
                 f"{pmd.get_size() // pmd.dtype.size} slots):")
    lines.extend("  " + ln for ln in memory_picture(pmd, letters).splitlines())
    return "\n".join(lines)


def _prod(values: Sequence[int]) -> int:
    n = 1
    for v in values:
        n *= v
    return n

"""The pipeline: descriptors -> IR -> plan -> source -> machine code, cached.

``build`` walks ``lower`` (ir), ``widen`` (runs both layouts keep together as wider
elements, where that makes a register transpose), ``make_plan`` (plan), ``generate``
(codegen) and ``load_module`` (cache) once per distinct key; ``get_kernel`` puts the
in-memory cache in front of it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numba

from . import __version__, verbose
from . import widen as widen_mod
from .cache import MemoryCache, load_module
from .codegen import CODEGEN_VERSION, Epilogue, generate, plain_epilogue, source_hash
from .desc import MemoryDesc
from .errors import LayoutError, Unimplemented
from .ir import LoopIR, lower
from .kernel import Kernel, check_layout
from .plan import Plan, make_plan
from .widen import widen

if TYPE_CHECKING:
    from .attrs import Attrs

KERNELS = MemoryCache()


def check_pair(src_md: MemoryDesc, dst_md: MemoryDesc) -> None:
    """oneDNN's reorder checks (concrete formats, identical dims) and layoutjit's safety checks.

    Generated kernels have no bounds checks, so each layout must map every
    position to a non-negative 64-bit offset, and a destination must map
    every position to its own address (no stride-0 broadcast dims, which
    sources may have). Padded offsets (never produced by layoutjit) are
    refused as unimplemented.
    """
    for what, md in (("src_md", src_md), ("dst_md", dst_md)):
        if not isinstance(md, MemoryDesc):
            raise LayoutError(f"{what}: expected a MemoryDesc, got {type(md).__name__}")
        if md.format_kind == "any":
            raise LayoutError(f"{what}: {md!r} has format 'any'; a kernel needs a concrete layout "
                              f"(resolve it first, e.g. with a Pipeline)")
        if md.format_kind != "blocked" or md.ndims == 0:
            raise LayoutError(f"{what}: {md!r} is the zero md; nothing to reorder")
    if src_md.ndims != dst_md.ndims or src_md.dims != dst_md.dims:
        raise LayoutError(f"src_md {src_md!r} and dst_md {dst_md!r} must have the same dims")
    check_layout(src_md, "src_md", dst=False)
    check_layout(dst_md, "dst_md", dst=True)
    for what, md in (("src_md", src_md), ("dst_md", dst_md)):
        if any(md.padded_offsets):
            raise Unimplemented(f"{what}: {md!r} has padded_offsets {md.padded_offsets}; "
                                f"kernels support zero padded offsets only")


def _check_attr_operands(src_md: MemoryDesc, dst_md: MemoryDesc, attrs: Attrs) -> None:
    if tuple(attrs.dims) != tuple(dst_md.dims):
        raise LayoutError(f"attributes were made for dims {attrs.dims}, the kernel has {dst_md.dims}")
    for i, p in enumerate(attrs.post_ops):
        if p.md is not None:
            check_layout(p.md, f"post_ops[{i}] src1_md", dst=False)
            if any(p.md.padded_offsets):
                raise Unimplemented(f"post_ops[{i}] src1_md: padded_offsets are not supported")


def lower_and_plan(src_md: MemoryDesc, dst_md: MemoryDesc, attrs: Attrs | None
                   ) -> tuple[LoopIR, Plan, Epilogue]:
    extra = attrs.extra_operands(src_md, dst_md) if attrs is not None else ()
    ir = lower(dst_md, src_md, extra)
    ep = attrs.epilogue(src_md, dst_md) if attrs is not None else plain_epilogue(src_md.dtype, dst_md.dtype)

    def plan_of(ir: LoopIR) -> Plan:
        return make_plan(ir, allow_tile=ep.tile_ok, allow_shift=ep.direct,
                         allow_cols=ep.direct or bool(ep.vector_ops))

    if attrs is not None:
        return ir, plan_of(ir), ep
    chosen, plan = _choose_width(ir, plan_of)
    return chosen, plan, ep


def _choose_width(ir: LoopIR, plan_of: Callable[[LoopIR], Plan]) -> tuple[LoopIR, Plan]:
    """The IR to plan, as lowered or with the run both layouts keep together moved as wider
    elements (``layoutjit.widen``), and its plan.

    The wide IR is kept where its plan is a register transpose (``widen.TRANSPOSES_ONLY``);
    1- and 2-byte elements go on to 8-byte ones where the plan so far stores plain (or cuts
    its runs at lines, ``Plan.line_phases``) and the wider one is an NT register transpose
    (``widen.WIDEN_NT_MAX_BYTES``).
    """
    if widen_mod.WIDEN_MAX_BYTES <= 1:  # widening off
        return ir, plan_of(ir)
    chosen, plan = ir, None
    wide = widen(ir)
    if wide is not ir:
        p = plan_of(wide)
        if not widen_mod.TRANSPOSES_ONLY or _is_transpose(p):
            chosen, plan = wide, p
    if plan is None:
        plan = plan_of(ir)
    if (not plan.nt or plan.line_phases > 1) and ir.operands[0].dtype.size < 4:
        wider = widen(ir, widen_mod.WIDEN_NT_MAX_BYTES)
        if wider.operands[0].dtype.size > chosen.operands[0].dtype.size:
            p = plan_of(wider)
            if p.nt and _is_transpose(p):
                return wider, p
    return chosen, plan


def _is_transpose(plan: Plan) -> bool:
    return plan.tile is not None and plan.tile.kind == "transpose"


def title_of(kind: str, src_md: MemoryDesc, dst_md: MemoryDesc, attrs: Attrs | None) -> str:
    lines = [f"{kind}: {src_md!r} -> {dst_md!r}"]
    if attrs is not None:
        lines.append(f"attributes: {attrs.describe()}")
    lines.append(f"layoutjit {__version__}, numba {numba.__version__}")
    return "\n".join(lines)


def build(src_md: MemoryDesc, dst_md: MemoryDesc, attrs: Attrs | None = None,
          kind: str = "reorder", in_place_ok: bool = False) -> Kernel:
    """Compile (or load from disk) one kernel; no in-memory caching here.

    Every failure is a :class:`LayoutError` naming the descriptor pair; a
    module that does not compile also names its file (and the error carries
    ``.path`` and ``.source``).
    """
    t0 = time.perf_counter()
    check_pair(src_md, dst_md)
    if attrs is not None:
        _check_attr_operands(src_md, dst_md, attrs)
    if src_md.has_zero_dim:
        if verbose.enabled:
            verbose.emit("compile", kind, src_md, dst_md, attrs.describe() if attrs is not None else "", 0.0)
        return Kernel(src_md, dst_md, attrs, None, "# zero-volume: nothing to do\n", None, None,
                      0.0, kind, in_place_ok)
    pair = f"{kind} {src_md!r} -> {dst_md!r}" + (f" [{attrs.describe()}]" if attrs is not None else "")
    try:
        ir, plan, ep = lower_and_plan(src_md, dst_md, attrs)
        source = generate(plan, ep, title_of(kind, src_md, dst_md, attrs))
    except LayoutError:
        raise
    except Exception as e:  # a bug in the planner or code generator
        raise LayoutError(f"{pair}: internal error while generating the kernel: "
                          f"{type(e).__name__}: {e}") from e
    name = "lj_" + source_hash(source)
    try:
        mod, path, loaded = _load(source, name)
    except LayoutError as e:
        err = LayoutError(f"{pair}: {e}")
        err.path = getattr(e, "path", None)  # type: ignore[attr-defined]
        err.source = getattr(e, "source", source)  # type: ignore[attr-defined]
        raise err from e
    except Exception as e:  # e.g. a module without a kernel
        raise LayoutError(f"{pair}: loading the generated module {name} failed: "
                          f"{type(e).__name__}: {e}") from e
    dt = time.perf_counter() - t0
    try:
        k = Kernel(src_md, dst_md, attrs, plan, source, mod, path, dt, kind, in_place_ok)
    except LayoutError:
        raise
    except Exception as e:
        raise LayoutError(f"{pair}: the generated module {path or name} has no usable kernel: "
                          f"{type(e).__name__}: {e}") from e
    k.loaded_from_disk = loaded
    if verbose.enabled:
        verbose.emit("disk load" if loaded else "compile", kind, src_md, dst_md,
                     attrs.describe() if attrs is not None else "", dt * 1e3)
    return k


def _load(source: str, name: str) -> tuple[Any, Path | None, bool]:
    mod, path = load_module(source, name)
    cf = mod.kernel
    loaded = bool(getattr(cf, "cache_hits", 0) or getattr(cf, "_cache_hits", 0))
    return mod, path, loaded


def get_kernel(src_md: MemoryDesc, dst_md: MemoryDesc, attrs: Attrs | None = None,
               kind: str = "reorder", in_place_ok: bool = False) -> Kernel:
    """The cached kernel for a key, compiling it once (thread-safe)."""
    key = (kind, src_md, dst_md, attrs.key if attrs is not None else None)
    t0 = time.perf_counter() if verbose.enabled else 0.0
    k, built = KERNELS.get_or_build(key, lambda: build(src_md, dst_md, attrs, kind, in_place_ok))
    if verbose.enabled and not built:
        verbose.emit("cache hit", kind, src_md, dst_md,
                     attrs.describe() if attrs is not None else "", (time.perf_counter() - t0) * 1e3)
    return k


__all__ = ["build", "get_kernel", "check_pair", "lower_and_plan", "KERNELS", "CODEGEN_VERSION"]

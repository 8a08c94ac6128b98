"""The pipeline: descriptors -> IR -> plan -> source -> machine code, cached.

``build`` walks ``lower`` (ir), ``make_plan`` (plan), ``generate`` (codegen)
and ``load_module`` (cache) once per distinct key; ``get_kernel`` puts the
in-memory cache in front of it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numba

from . import __version__, verbose
from .cache import MemoryCache, load_module
from .codegen import CODEGEN_VERSION, Epilogue, generate, plain_epilogue, source_hash
from .desc import MemoryDesc
from .errors import LayoutError
from .ir import LoopIR, lower
from .kernel import Kernel
from .plan import Plan, make_plan

if TYPE_CHECKING:
    from .attrs import Attrs

KERNELS = MemoryCache()


def check_pair(src_md: MemoryDesc, dst_md: MemoryDesc) -> None:
    """oneDNN's reorder checks: concrete formats, identical dims."""
    for what, md in (("src_md", src_md), ("dst_md", dst_md)):
        if not isinstance(md, MemoryDesc):
            raise LayoutError(f"{what}: expected a MemoryDesc, got {type(md).__name__}")
        if md.format_kind == "any":
            raise LayoutError(f"{what}: {md!r} has format 'any'; a kernel needs a concrete layout "
                              f"(resolve it first, e.g. with a Pipeline)")
        if md.format_kind != "blocked":
            raise LayoutError(f"{what}: {md!r} is the zero md; nothing to reorder")
    if src_md.ndims != dst_md.ndims or src_md.dims != dst_md.dims:
        raise LayoutError(f"src_md {src_md!r} and dst_md {dst_md!r} must have the same dims")


def lower_and_plan(src_md: MemoryDesc, dst_md: MemoryDesc, attrs: Attrs | None
                   ) -> tuple[LoopIR, Plan, Epilogue]:
    extra = attrs.extra_operands(src_md, dst_md) if attrs is not None else ()
    ir = lower(dst_md, src_md, extra)
    ep = attrs.epilogue(src_md, dst_md) if attrs is not None else plain_epilogue(src_md.dtype, dst_md.dtype)
    plan = make_plan(ir, allow_tile=ep.tile_ok)
    return ir, plan, ep


def title_of(kind: str, src_md: MemoryDesc, dst_md: MemoryDesc, attrs: Attrs | None) -> str:
    lines = [f"{kind}: {src_md!r} -> {dst_md!r}"]
    if attrs is not None:
        lines.append(f"attributes: {attrs.describe()}")
    lines.append(f"layoutjit {__version__}, numba {numba.__version__}")
    return "\n".join(lines)


def build(src_md: MemoryDesc, dst_md: MemoryDesc, attrs: Attrs | None = None,
          kind: str = "reorder", in_place_ok: bool = False) -> Kernel:
    """Compile (or load from disk) one kernel; no in-memory caching here."""
    t0 = time.perf_counter()
    if src_md.has_zero_dim:
        k = Kernel(src_md, dst_md, attrs, None, "# zero-volume: nothing to do\n", None, None,
                   0.0, kind, in_place_ok)
        return k
    ir, plan, ep = lower_and_plan(src_md, dst_md, attrs)
    source = generate(plan, ep, title_of(kind, src_md, dst_md, attrs))
    name = "lj_" + source_hash(source)
    mod, path, loaded = _load(source, name)
    dt = time.perf_counter() - t0
    k = Kernel(src_md, dst_md, attrs, plan, source, mod, path, dt, kind, in_place_ok)
    k.loaded_from_disk = loaded
    if verbose.enabled:
        verbose.emit("disk load" if loaded else "compile", kind, src_md, dst_md,
                     attrs.describe() if attrs is not None else "", dt * 1e3)
    return k


def _load(source: str, name: str) -> tuple[Any, Any, bool]:
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

"""The compiled kernel object: validates buffers, then launches the machine code.

A ``Kernel`` is what ``compile_reorder`` and ``compile_eltwise`` return. Calling
it checks every buffer (type, contiguity, size, writability, overlap) before
anything runs, because the generated code has no bounds checks; then it calls
a driver from ``runtime`` with the kernel's address.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from . import verbose
from .buffers import aligned_empty, as_array, byte_view
from .desc import MemoryDesc
from .errors import LayoutError
from numba import get_num_threads

from .runtime import run_parallel, run_serial

if TYPE_CHECKING:
    from .attrs import Attrs
    from .plan import Plan

_NO_AUX = np.zeros(1, dtype=np.int64)
_U8 = np.dtype(np.uint8)


def _size_rule(md: MemoryDesc) -> tuple[int, int, bool]:
    """(get_size, required bytes, whether a larger buffer is acceptable)."""
    size = md.get_size()
    req = max(md.required_bytes(), 0)
    # A view (submemory, gaps, offset0) lives inside a bigger parent buffer.
    view = not md.is_dense() or req > size
    return size, req, view


class Kernel:
    """A compiled reorder (or eltwise) for one (src, dst, attributes) key.

    >>> import layoutjit as lj, numpy as np
    >>> src = lj.MemoryDesc([2, 3], "f32", "ab")
    >>> k = lj.compile_reorder(src, lj.MemoryDesc([2, 3], "f32", "ba"))
    >>> k(np.arange(6, dtype=np.float32)).tolist()
    [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
    """

    kind = "reorder"

    def __init__(self, src_md: MemoryDesc, dst_md: MemoryDesc, attrs: Attrs | None,
                 plan: Plan | None, source: str, module: Any, path: Path | None,
                 compile_s: float = 0.0, kind: str = "reorder", in_place_ok: bool = False) -> None:
        self.src_md = src_md
        self.dst_md = dst_md
        self.attrs = attrs
        self.plan = plan
        self._source = source
        self._module = module  # keeps the machine code alive
        self.path = path
        self.compile_s = compile_s
        self.kind = kind
        self._in_place_ok = in_place_ok
        self._addr = int(module.kernel.address) if module is not None else 0
        self._jobs = plan.jobs if plan is not None else 0
        self._serial = plan.serial if plan is not None else True
        self._src_rule = _size_rule(src_md)
        self._dst_rule = _size_rule(dst_md)
        self._dst_storage = dst_md.dtype.storage
        self._dst_zero = not dst_md.is_dense()
        # (src bytes, dst bytes, serial) when calls with exactly-sized buffers need no other check
        self._fast = None
        if (attrs is None and self._addr and self._jobs and self._src_rule[0] >= self._src_rule[1]
                and self._dst_rule[0] >= self._dst_rule[1]):
            self._fast = (self._src_rule[0], self._dst_rule[0], self._serial)
        self._reads_dst = attrs is not None and any(
            p.kind == "sum" and p.beta != 0.0 for p in attrs.post_ops)

    # ------------------------------------------------------------ inspection
    @property
    def source(self) -> str:
        """The generated Python source of this kernel."""
        return self._source

    def explain(self) -> str:
        from .explain import explain_kernel

        return explain_kernel(self)

    def __repr__(self) -> str:
        return f"<layoutjit {self.kind} kernel {self.src_md!r} -> {self.dst_md!r}>"

    # ------------------------------------------------------------ validation
    def _check(self, a: np.ndarray, rule: tuple[int, int, bool], what: str, md: MemoryDesc) -> None:
        size, req, view = rule
        nb = a.nbytes
        if nb == size and nb >= req:
            return
        if view and nb >= req:
            return
        if view:
            raise LayoutError(f"{what}: buffer of {nb} bytes is too small for {md!r}: it needs "
                              f"at least {req} bytes (offset0 and strides included)")
        raise LayoutError(f"{what}: buffer has {nb} bytes, {md!r} needs exactly {size} "
                          f"(md.get_size())")

    def _prepare(self, src: Any, dst: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        s = as_array(src, "src")
        self._check(s, self._src_rule, "src", self.src_md)
        s8 = byte_view(s, "src")
        if dst is None:
            size, req, _ = self._dst_rule
            d = aligned_empty(max(size, req), self._dst_storage, zero=self._dst_zero)
        else:
            d = as_array(dst, "dst")
            self._check(d, self._dst_rule, "dst", self.dst_md)
        d8 = byte_view(d, "dst", writable=True)
        return d, s8, d8

    # ------------------------------------------------------------------ call
    def __call__(self, src: Any, dst: Any = None, **runtime: Any) -> Any:
        """Run on ``src``; write ``dst`` (allocated, 64-byte aligned, when None) and return it."""
        # fast path: two plain numpy buffers of exactly the descriptors' sizes
        fast = self._fast
        if (fast is not None and type(src) is np.ndarray and type(dst) is np.ndarray and not runtime
                and src.nbytes == fast[0] and dst.nbytes == fast[1]):
            fs, fd = src.flags, dst.flags
            if fs.c_contiguous and fd.c_contiguous and fd.writeable and not src.dtype.hasobject:
                s8 = src.view(_U8) if src.ndim == 1 else src.reshape(-1).view(_U8)
                d8 = dst.view(_U8) if dst.ndim == 1 else dst.reshape(-1).view(_U8)
                if verbose.enabled:
                    t0 = time.perf_counter()
                    self._launch(s8, d8, _NO_AUX)
                    verbose.log_exec(self, (time.perf_counter() - t0) * 1e3)
                elif fast[2]:
                    if run_serial(self._addr, s8, d8, _NO_AUX, self._jobs, self._in_place_ok):
                        raise LayoutError("src and dst overlap in memory; a reorder needs separate buffers")
                else:
                    self._launch(s8, d8, _NO_AUX)
                return dst
        if self.attrs is None:
            if runtime:
                raise LayoutError(f"unexpected arguments {sorted(runtime)}: this kernel was "
                                  f"compiled without attributes")
            aux = _NO_AUX
        else:
            if dst is None and self._reads_dst:
                raise LayoutError("dst: a kernel with a sum post-op reads dst; pass the dst buffer")
            aux, keep = self.attrs.runtime_table(dict(runtime))  # keep: alive during the call
        d, s8, d8 = self._prepare(src, dst)
        t0 = time.perf_counter() if verbose.enabled else 0.0
        self._launch(s8, d8, aux)
        if verbose.enabled:
            verbose.log_exec(self, (time.perf_counter() - t0) * 1e3)
        return d if dst is None or isinstance(dst, np.ndarray) else dst

    def _launch(self, s8: np.ndarray, d8: np.ndarray, aux: np.ndarray) -> None:
        if self._jobs == 0 or self._addr == 0:
            if s8.ctypes.data != d8.ctypes.data or not self._in_place_ok:
                _check_overlap(s8, d8)
            return
        if self._serial:
            rc = run_serial(self._addr, s8, d8, aux, self._jobs, self._in_place_ok)
        else:
            n = min(get_num_threads(), self._jobs)
            if n <= 1:
                rc = run_serial(self._addr, s8, d8, aux, self._jobs, self._in_place_ok)
            else:
                rc = run_parallel(self._addr, s8, d8, aux, self._jobs, n, self._in_place_ok)
        if rc:
            raise LayoutError("src and dst overlap in memory; a reorder needs separate buffers")


def _check_overlap(s8: np.ndarray, d8: np.ndarray) -> None:
    if s8.size and d8.size and np.shares_memory(s8, d8):
        raise LayoutError("src and dst overlap in memory; a reorder needs separate buffers")


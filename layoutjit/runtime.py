"""Drivers that launch generated kernels, serially or on Numba's thread pool.

A generated kernel is a ``cfunc`` over raw pointers that runs jobs [lo, hi).
The drivers here are compiled once (and cached on disk like any Numba
function), and call a kernel through its address: so a new kernel costs one
serial compile, never a ``parallel=True`` compile, and launching it costs one
Numba dispatch plus (for the parallel driver) one OpenMP/TBB region.
The drivers also check, in compiled code, that source and destination do not
overlap -- cheaper than doing it in Python.
"""

from __future__ import annotations

import warnings
from typing import Any

import numba as nb
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

_I8P = ir.IntType(8).as_pointer()
_CHUNK_FNTY = ir.FunctionType(ir.VoidType(), [_I8P, _I8P, _I8P, ir.IntType(64), ir.IntType(64)])


@intrinsic
def ptr_from_int(typingctx, addr, dtype):  # type: ignore[no-untyped-def]
    """``ptr_from_int(address, np.float32)`` -> a typed pointer (for ``numba.carray``)."""
    if not isinstance(addr, types.Integer) or not isinstance(dtype, types.NumberClass):
        return None
    ptr_t = types.CPointer(dtype.instance_type)
    sig = ptr_t(addr, dtype)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        llty = context.get_value_type(ptr_t)
        return builder.inttoptr(args[0], llty)

    return sig, codegen


@intrinsic
def call_chunk(typingctx, fn, sp, dp, ap, lo, hi):  # type: ignore[no-untyped-def]
    """Call the kernel at address ``fn`` on jobs [lo, hi)."""
    sig = types.void(types.int64, types.intp, types.intp, types.intp, types.int64, types.int64)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        f, s, d, a, l_, h = args
        fp = builder.inttoptr(f, _CHUNK_FNTY.as_pointer())
        builder.call(fp, [builder.inttoptr(s, _I8P), builder.inttoptr(d, _I8P),
                          builder.inttoptr(a, _I8P), l_, h])
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def opaque(typingctx, x):  # type: ignore[no-untyped-def]
    """``x`` unchanged, but hidden from LLVM's constant folding.

    Generated epilogue loops use it for their trip count: with a literal count
    LLVM unrolls the short inner loop and then vectorizes the *outer* loop with
    gathers and scatters; with an opaque count it vectorizes the contiguous inner
    loop, which is what a row of a tile is.
    """
    if not isinstance(x, types.Integer):
        return None
    sig = types.int64(x)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        v = context.cast(builder, args[0], signature.args[0], types.int64)
        fnty = ir.FunctionType(ir.IntType(64), [ir.IntType(64)])
        return builder.asm(fnty, "", "=r,0", [v], side_effect=False)

    return sig, codegen


@nb.njit(cache=True, nogil=True)
def _overlap(src, dst, in_place_ok):  # type: ignore[no-untyped-def]
    s0 = src.ctypes.data
    d0 = dst.ctypes.data
    s1 = s0 + src.nbytes
    d1 = d0 + dst.nbytes
    if s0 == d0 and s1 == d1 and in_place_ok:
        return False
    return s0 < d1 and d0 < s1


@nb.njit(cache=True, nogil=True)
def run_serial(fn, src, dst, aux, jobs, in_place_ok, base):  # type: ignore[no-untyped-def]
    """Run all jobs on the calling thread; returns 1 if src and dst overlap (nothing written).

    ``src`` and ``dst``: C-contiguous arrays of any numeric dtype (only their addresses and
    byte sizes are used), so a checked call on plain numpy buffers passes them flattened
    (``ravel``, 0.1 us) rather than as byte views (0.5 us each, more than the launch).

    ``base`` is added to the job range the kernel sees: a kernel whose store kind is
    chosen at run time (``Plan.nt_tune``) reads ``lo >= jobs`` as "use NT stores".
    """
    if _overlap(src, dst, in_place_ok):
        return 1
    if jobs > 0:
        call_chunk(fn, src.ctypes.data, dst.ctypes.data, aux.ctypes.data, base, base + jobs)
    return 0


@nb.njit(cache=True, nogil=True)
def run_bound(fn, sp, dp, ap, jobs, base):  # type: ignore[no-untyped-def]
    """Run all jobs on buffers already validated and checked for overlap (``Kernel.bind``).

    Integer arguments only: Numba unboxes them in a few nanoseconds, so a bound
    call costs one dispatch -- no array views, no checks.
    """
    call_chunk(fn, sp, dp, ap, base, base + jobs)


@nb.njit(cache=True, nogil=True, parallel=True)
def run_parallel(fn, src, dst, aux, jobs, nchunks, in_place_ok, base):  # type: ignore[no-untyped-def]
    """Split the jobs into ``nchunks`` contiguous ranges run by Numba's threads."""
    if _overlap(src, dst, in_place_ok):
        return 1
    sp = src.ctypes.data
    dp = dst.ctypes.data
    ap = aux.ctypes.data
    for t in nb.prange(nchunks):
        lo = jobs * t // nchunks
        hi = jobs * (t + 1) // nchunks
        if hi > lo:
            call_chunk(fn, sp, dp, ap, base + lo, base + hi)
    return 0


@nb.njit(cache=True, nogil=True, parallel=True)
def run_parallel_bound(fn, sp, dp, ap, jobs, nthreads, base):  # type: ignore[no-untyped-def]
    """:func:`run_parallel` on addresses checked when the kernel was bound, split into
    ``min(nthreads, jobs)`` ranges; one range runs on the calling thread without
    entering a parallel region, so a bound call is one dispatch at any thread count."""
    n = min(nthreads, jobs)
    if n <= 1:
        call_chunk(fn, sp, dp, ap, base, base + jobs)
    else:
        for t in nb.prange(n):
            lo = jobs * t // n
            hi = jobs * (t + 1) // n
            if hi > lo:
                call_chunk(fn, sp, dp, ap, base + lo, base + hi)


cache_write_failures: list[OSError] = []  # the drivers' cache saves that failed in this process


def _tolerate_cache_write_errors(*dispatchers: Any) -> None:
    """A full disk, a file-size limit or a vanished directory must not fail a launch:
    Numba raises when it cannot save a driver's machine code (it only forgives
    EACCES on Windows). The driver is compiled all the same, so keep it and say once
    that the next process compiles it again."""

    def wrap(cache: Any) -> None:
        save = cache.save_overload

        def save_or_warn(sig: Any, data: Any) -> None:
            try:
                save(sig, data)
            except OSError as e:
                if not cache_write_failures:
                    warnings.warn(f"layoutjit: cannot save Numba's cache of its launch drivers "
                                  f"({e.strerror or e}); each new process compiles them again",
                                  RuntimeWarning, stacklevel=2)
                cache_write_failures.append(e)

        cache.save_overload = save_or_warn

    for d in dispatchers:
        cache = getattr(d, "_cache", None)
        if cache is not None and hasattr(cache, "save_overload"):
            wrap(cache)


_tolerate_cache_write_errors(_overlap, run_serial, run_bound, run_parallel, run_parallel_bound)

__all__ = ["ptr_from_int", "call_chunk", "opaque", "run_serial", "run_bound", "run_parallel",
           "run_parallel_bound", "cgutils"]

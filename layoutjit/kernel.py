"""The compiled kernel object: validates buffers, then launches the machine code.

A ``Kernel`` is what ``compile_reorder`` and ``compile_eltwise`` return. The
generated code has no bounds checks, so every byte it touches is validated
before it runs:

* at compile time (``compiler.check_pair``): both descriptors are concrete,
  have equal dims, non-negative offsets and strides (:func:`element_span`),
  and the destination maps no two positions to one address
  (:func:`check_no_overlap`: no stride-0 broadcast dims in a destination);
* at every call: each buffer is a numpy array or exposes its memory without a
  copy (``buffers.as_buffer``), is C-contiguous, not an object array,
  writable for the destination, and has the size the descriptor needs (the
  size rule below); src and dst (and attribute arrays) must not overlap in
  memory, except that an in-place eltwise may pass the very same buffer. The
  overlap test runs in the compiled driver (``runtime``). Every failure is a
  :class:`LayoutError` naming the argument, raised before anything is written.

Size rule (``_size_rule``): a buffer for a *dense* descriptor has exactly
``md.get_size()`` bytes. A *view* -- a descriptor that is not dense: a
submemory (``offset0``), gaps between strides, a stride-0 broadcast source --
lives inside a larger parent buffer, so its buffer may be larger; it needs at
least ``required`` bytes, where ``required`` is one past the last byte any
position (padding included) maps to. Descriptors are sized with exact
arithmetic in Python (64-bit and beyond), and the kernels use 64-bit offsets.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numba import get_num_threads

from . import verbose
from .buffers import aligned_empty, as_buffer, byte_view
from .desc import MemoryDesc
from .errors import LayoutError
from .runtime import run_bound, run_parallel, run_parallel_bound, run_serial
from .store_choice import StoreChoice

if TYPE_CHECKING:
    from .attrs import Attrs
    from .plan import Plan

_NO_AUX = np.zeros(1, dtype=np.int64)
_U8 = np.dtype(np.uint8)
#: Native dtypes whose arrays the serial driver takes as they are (``run_serial``): Numba
#: types them; others (float16, ml_dtypes' bfloat16, byte-swapped) go through byte views.
_DRIVER_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int8, np.uint8, np.int16,
                                                 np.uint16, np.int32, np.uint32, np.int64, np.uint64))
INT64_MAX = (1 << 63) - 1
_MAX_BLOCK = 1 << 22  # larger inner blocks than this are refused (sizing enumerates a block)


# ------------------------------------------------------------------ layout checks
def _inner_strides(md: MemoryDesc) -> list[int]:
    """Element stride of each inner block (outermost first): the product of the blocks after it."""
    out = []
    s = 1
    for b in reversed(md.inner_blks):
        out.append(s)
        s *= b
    return out[::-1]


def _dim_parts(md: MemoryDesc) -> list[tuple[int, int, int, int, list[tuple[int, int]]]]:
    """Per dim: (first padded position, last, block, outer stride, [(inner blk, stride)])."""
    istr = _inner_strides(md)
    blocks = md.blocks
    parts = []
    for d in range(md.ndims):
        po, pd = md.padded_offsets[d], md.padded_dims[d]
        inner = [(b, s) for b, i, s in zip(md.inner_blks, md.inner_idxs, istr) if i == d]
        parts.append((po, po + pd - 1, blocks[d], md.strides[d], inner))
    return parts


def _structure_errors(md: MemoryDesc) -> str | None:
    n = md.ndims
    if not 1 <= n <= 12:
        return f"{n} dims (1 to 12 supported)"
    for name in ("dims", "padded_dims", "padded_offsets", "strides"):
        v = getattr(md, name)
        if len(v) != n or not all(isinstance(x, int) for x in v):
            return f"{name} {v} must be {n} integers"
    if len(md.inner_blks) != len(md.inner_idxs):
        return "inner_blks and inner_idxs differ in length"
    if any(b <= 0 for b in md.inner_blks) or any(not 0 <= i < n for i in md.inner_idxs):
        return f"bad inner blocks {md.inner_blks} of dims {md.inner_idxs}"
    if md.block_size > _MAX_BLOCK:
        return f"inner blocks of {md.block_size} elements are larger than supported ({_MAX_BLOCK})"
    if any(d < 0 for d in md.dims) or any(p < d for p, d in zip(md.padded_dims, md.dims)):
        return f"dims {md.dims} must be non-negative and not larger than padded_dims {md.padded_dims}"
    if any(p < 0 for p in md.padded_offsets) or md.offset0 < 0:
        return "offset0 and padded_offsets must not be negative"
    return None


def element_span(md: MemoryDesc) -> tuple[int, int] | None:
    """(lowest, highest) element offset any position of ``md`` maps to (padding included).

    None for a zero-volume descriptor (no position). Exact for any strides,
    negative ones included: the offset is a sum of per-dim terms, and each
    term is bounded by enumerating one block of its dim.

    >>> element_span(MemoryDesc([2, 17, 5, 4], "f32", "nChw16c"))
    (0, 1279)
    """
    if any(p == 0 for p in md.padded_dims) or md.has_zero_dim:
        return None
    lo = hi = md.offset0
    for first, last, blk, stride, inner in _dim_parts(md):
        # g[r]: offset of position r inside the dim's block (its inner digits)
        g = np.zeros(blk, dtype=np.int64)
        rest = np.arange(blk, dtype=np.int64)
        for b, s in reversed(inner):  # innermost first, as oneDNN's off_v
            g += (rest % b) * s
            rest //= b
        q0, q1 = first // blk, last // blk
        dlo = dhi = None
        for q in sorted({q0, min(q0 + 1, q1), max(q1 - 1, q0), q1}):
            r0 = first - q * blk if q == q0 else 0
            r1 = last - q * blk if q == q1 else blk - 1
            seg = g[r0:r1 + 1]
            a = q * stride + int(seg.min())
            b_ = q * stride + int(seg.max())
            dlo = a if dlo is None else min(dlo, a)
            dhi = b_ if dhi is None else max(dhi, b_)
        assert dlo is not None and dhi is not None
        lo += dlo
        hi += dhi
    return lo, hi


def overlapping_dims(md: MemoryDesc) -> str | None:
    """Why two positions of ``md`` may share an address (None when they cannot).

    A sufficient test: the outer dims, sorted by stride, must each step over
    everything the smaller ones (and the inner blocks) reach. A stride-0 dim
    of size > 1 (a broadcast) always overlaps.

    >>> overlapping_dims(MemoryDesc([3, 4], "f32", strides=[0, 1]))
    'dim 0 has 3 positions at stride 0 (a broadcast)'
    """
    digits = []
    for d, (first, last, blk, stride, _) in enumerate(_dim_parts(md)):
        count = last // blk - first // blk + 1
        if count > 1:
            if stride == 0:
                return f"dim {d} has {count} positions at stride 0 (a broadcast)"
            digits.append((abs(stride), count, d))
    reach = md.block_size - 1
    prev = None
    for stride, count, d in sorted(digits):
        if stride <= reach:
            with_ = f"dim {prev}" if prev is not None else "the inner blocks"
            return f"dim {d} (stride {stride}) overlaps {with_} (offsets up to {reach})"
        reach += (count - 1) * stride
        prev = d
    return None


def check_layout(md: MemoryDesc, what: str, *, dst: bool) -> None:
    """Compile-time checks of one operand's layout (see the module docstring)."""
    err = _layout_error(md, dst)
    if err is not None:
        raise LayoutError(f"{what}: {md!r}: {err}")


@lru_cache(maxsize=4096)
def _layout_error(md: MemoryDesc, dst: bool) -> str | None:
    err = _structure_errors(md)
    if err is None:
        span = element_span(md)
        if span is not None:
            lo, hi = span
            if lo < 0:
                err = f"positions map to negative offsets (down to {lo}); a buffer cannot hold it"
            elif (hi + 1) * md.dtype.size > INT64_MAX:
                err = f"its last byte ({(hi + 1) * md.dtype.size}) is beyond 64-bit offsets"
            elif dst:
                ov = overlapping_dims(md)
                if ov is not None:
                    err = (f"a destination must map every position to its own address, but {ov}; "
                           f"overlapping (e.g. broadcast) layouts are for sources only")
    return err


def _size_rule(md: MemoryDesc) -> tuple[int, int, bool]:
    """(get_size, required bytes, whether a larger buffer is acceptable): see the module docstring."""
    size = md.get_size()
    span = element_span(md) if md.format_kind == "blocked" and md.ndims else None
    req = (span[1] + 1) * md.dtype.size if span is not None else 0
    # A view (submemory, gaps, offset0, broadcast) lives inside a bigger parent buffer.
    view = not md.is_dense() or req > size
    return size, req, view


# ----------------------------------------------------------- parallel launches
# Numba's workqueue threading layer aborts the process when two threads run parallel
# regions at once, and GNU OpenMP aborts a forked child that starts one. So: while the
# layer is unknown or is workqueue, one thread at a time gets the pool (others run
# serially); a child forked after an OpenMP region runs serially.
_PAR_UNKNOWN, _PAR_FREE, _PAR_ONE_AT_A_TIME, _PAR_SERIAL = 0, 1, 2, 3
_par_mode = _PAR_UNKNOWN
_par_lock = threading.Lock()


def _learn_threading_layer() -> None:
    global _par_mode
    try:
        import numba

        layer = numba.threading_layer()
    except Exception:
        return
    _par_mode = _PAR_ONE_AT_A_TIME if layer == "workqueue" else _PAR_FREE


def _after_fork_in_child() -> None:
    global _par_mode, _par_lock
    _par_lock = threading.Lock()
    if _par_mode == _PAR_FREE:
        try:
            import numba

            if numba.threading_layer() == "omp":
                _par_mode = _PAR_SERIAL
        except Exception:
            _par_mode = _PAR_SERIAL


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _run_parallel(addr: int, s8: np.ndarray, d8: np.ndarray, aux: np.ndarray, jobs: int, n: int,
                  in_place_ok: bool, bound: tuple[int, int, int] | None = None, base: int = 0) -> int:
    """Split the jobs between n threads (``bound``: the buffers' addresses, checked at
    bind time: no array arguments, no overlap test; ``base``: see ``runtime.run_serial``)."""
    mode = _par_mode
    if mode == _PAR_SERIAL:
        return run_serial(addr, s8, d8, aux, jobs, in_place_ok, base)
    lock = None
    if mode != _PAR_FREE:  # one launch at a time while the layer is unknown or not thread-safe
        lock = _par_lock
        if not lock.acquire(blocking=False):
            return run_serial(addr, s8, d8, aux, jobs, in_place_ok, base)
    try:
        # a bound call keeps to the bound driver: the first 2-thread call then loads one
        # parallel driver from the disk cache, not two (7-10 ms each)
        if bound is not None:
            run_parallel_bound(addr, *bound, jobs, n, base)
            rc = 0
        else:
            rc = run_parallel(addr, s8, d8, aux, jobs, n, in_place_ok, base)
    finally:
        if lock is not None:
            lock.release()
    if mode == _PAR_UNKNOWN:
        _learn_threading_layer()
    return rc


def _ranges_overlap(a: np.ndarray, b: np.ndarray) -> bool:
    if not a.size or not b.size:
        return False
    a0, b0 = a.ctypes.data, b.ctypes.data
    return a0 < b0 + b.nbytes and b0 < a0 + a.nbytes


# -------------------------------------------------------------------- kernel
class Kernel:
    """A compiled reorder (or eltwise) for one (src, dst, attributes) key.

    Call it as ``kernel(src, dst=None, **runtime)``: it validates the buffers
    (see :mod:`layoutjit.kernel`), runs, and returns ``dst`` (allocated, 64-byte
    aligned, when None). Kernels are thread-safe: several threads may call one
    kernel at once on different buffers (the machine code runs without the GIL).

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
        self.loaded_from_disk = False
        self._in_place_ok = in_place_ok
        self._addr = int(module.kernel.address) if module is not None else 0
        self._jobs = plan.jobs if plan is not None else 0
        self._serial = plan.serial if plan is not None else True
        # plain or NT stores, chosen by timing the first calls (Plan.nt_tune; store_choice.py)
        self.store_choice = (StoreChoice(self._jobs, plan.nt_tune_one) if plan is not None
                             and plan.nt_tune and not self._serial else None)
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
        """A readable account of the IR, the plan's choices and the generated code."""
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
        s8 = byte_view(as_buffer(src, "src"), "src")
        self._check(s8, self._src_rule, "src", self.src_md)
        if dst is None:
            size, req, _ = self._dst_rule
            d = aligned_empty(max(size, req), self._dst_storage, zero=self._dst_zero)
        else:
            d = as_buffer(dst, "dst")
        d8 = byte_view(d, "dst", writable=True)
        self._check(d8, self._dst_rule, "dst", self.dst_md)
        return d, s8, d8

    def _validated(self, src: Any, dst: Any, runtime: dict
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[np.ndarray]]:
        """Every check of a call but src/dst overlap: (dst, src bytes, dst bytes, attribute
        pointer table, the attribute arrays it points to)."""
        keep: list[np.ndarray] = []
        if self.attrs is None:
            if runtime:
                raise LayoutError(f"unexpected arguments {sorted(runtime)}: this kernel was "
                                  f"compiled without attributes")
            aux = _NO_AUX
        else:
            if dst is None and self._reads_dst:
                raise LayoutError("dst: a kernel with a sum post-op reads dst; pass the dst buffer")
            aux, keep = self.attrs.runtime_table(dict(runtime))
        d, s8, d8 = self._prepare(src, dst)
        for a in keep:
            if _ranges_overlap(a, d8):
                raise LayoutError("dst overlaps an attribute buffer (scales, zero points or a "
                                  "binary input); they must be separate")
        return d, s8, d8, aux, keep

    # ------------------------------------------------------------------ call
    def __call__(self, src: Any, dst: Any = None, **runtime: Any) -> Any:
        """Run on ``src``; write ``dst`` (allocated, 64-byte aligned, when None) and return it."""
        # fast path: two plain numpy buffers of exactly the descriptors' sizes
        fast = self._fast
        if (fast is not None and type(src) is np.ndarray and type(dst) is np.ndarray and not runtime
                and src.nbytes == fast[0] and dst.nbytes == fast[1]):
            fs, fd = src.flags, dst.flags
            if fs.c_contiguous and fd.c_contiguous and fd.writeable:
                try:
                    if fast[2] and src.dtype in _DRIVER_DTYPES and dst.dtype in _DRIVER_DTYPES:
                        # the serial driver takes native buffers flat, not as byte views (0.5 us
                        # each): one driver specialization per dtype pair, 1-D unboxes fastest
                        s8 = src if src.ndim == 1 else src.ravel()
                        d8 = dst if dst.ndim == 1 else dst.ravel()
                    else:
                        s8 = src.view(_U8) if src.ndim == 1 else src.reshape(-1).view(_U8)
                        d8 = dst.view(_U8) if dst.ndim == 1 else dst.reshape(-1).view(_U8)
                except TypeError:  # arrays of Python objects: the slow path says why not
                    pass
                else:
                    if verbose.enabled:
                        t0 = time.perf_counter()
                        self._launch(s8, d8, _NO_AUX)
                        verbose.log_exec(self, (time.perf_counter() - t0) * 1e3)
                    elif fast[2]:
                        if run_serial(self._addr, s8, d8, _NO_AUX, self._jobs, self._in_place_ok, 0):
                            raise LayoutError("src and dst overlap in memory; a reorder needs "
                                              "separate buffers")
                    else:
                        self._launch(s8, d8, _NO_AUX)
                    return dst
        d, s8, d8, aux, keep = self._validated(src, dst, runtime)  # keep: alive during the call
        t0 = time.perf_counter() if verbose.enabled else 0.0
        self._launch(s8, d8, aux)
        if verbose.enabled:
            verbose.log_exec(self, (time.perf_counter() - t0) * 1e3)
        return d if dst is None else dst

    def bind(self, src: Any, dst: Any = None, **runtime: Any) -> BoundKernel:
        """Validate ``src``, ``dst`` (and attribute arrays) once; return a no-argument runner.

        ``b = kernel.bind(src, dst); b()`` does what ``kernel(src, dst)`` does,
        without re-validating on every call: for hot loops over small tensors,
        where a checked call's ~1 us of Python is most of the time (a bound call
        is one Numba dispatch, ~0.2 us). ``dst=None`` allocates one: ``b.dst``.
        Write new values into the bound buffers between calls; to use other
        buffers, bind again.

        >>> import layoutjit as lj, numpy as np
        >>> k = lj.compile_reorder(lj.MemoryDesc([2, 3], "f32", "ab"), lj.MemoryDesc([2, 3], "f32", "ba"))
        >>> x = np.arange(6, dtype=np.float32)
        >>> b = k.bind(x)
        >>> b(); b.dst.tolist()
        [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
        >>> x[:] = 1; b(); b.dst.tolist()
        [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
        """
        d, s8, d8, aux, keep = self._validated(src, dst, runtime)
        same = (s8.ctypes.data == d8.ctypes.data and s8.nbytes == d8.nbytes and self._in_place_ok)
        if not same and _ranges_overlap(s8, d8):
            raise LayoutError("src and dst overlap in memory; a reorder needs separate buffers")
        if self._jobs == 0 or self._addr == 0:
            b = BoundKernel(_nothing)
        elif verbose.enabled:
            b = BoundKernel(self._launch_logged, s8, d8, aux)
        elif self._serial:
            b = BoundKernel(run_bound, self._addr, s8.ctypes.data, d8.ctypes.data,
                            aux.ctypes.data, self._jobs, 0)
        else:
            launch = _launch_bound if self.store_choice is not None else _launch_bound_plain
            b = BoundKernel(launch, self, s8.ctypes.data, d8.ctypes.data, aux.ctypes.data, s8, d8, aux)
        b.kernel = self
        b.src = src
        b.dst = d if dst is None else dst
        b._keep = (s8, d8, aux, keep)  # the addresses above stay valid while b lives
        return b

    def _launch_logged(self, s8: np.ndarray, d8: np.ndarray, aux: np.ndarray) -> None:
        t0 = time.perf_counter()
        self._launch(s8, d8, aux)
        verbose.log_exec(self, (time.perf_counter() - t0) * 1e3)

    def _launch(self, s8: np.ndarray, d8: np.ndarray, aux: np.ndarray) -> None:
        if self._jobs == 0 or self._addr == 0:
            if s8.ctypes.data != d8.ctypes.data or s8.size != d8.size or not self._in_place_ok:
                if _ranges_overlap(s8, d8):
                    raise LayoutError("src and dst overlap in memory; a reorder needs separate buffers")
            return
        if self._serial:
            rc = run_serial(self._addr, s8, d8, aux, self._jobs, self._in_place_ok, 0)
        else:
            n = min(_num_threads(), self._jobs)
            choice = self.store_choice
            base, t0 = (0, None) if choice is None else choice.start(n)
            if n <= 1:
                rc = run_serial(self._addr, s8, d8, aux, self._jobs, self._in_place_ok, base)
            else:
                rc = _run_parallel(self._addr, s8, d8, aux, self._jobs, n, self._in_place_ok, base=base)
            if choice is not None:
                choice.finish(n, base, t0)
        if rc:
            raise LayoutError("src and dst overlap in memory; a reorder needs separate buffers")


_raw_num_threads: Any = None


def _num_threads() -> int:
    """``numba.get_num_threads()`` in 0.15 us instead of 0.8: once the pool is up, the
    threading layer's own getter (the calling thread's count) is called directly."""
    global _raw_num_threads
    f = _raw_num_threads
    if f is not None:
        n = f()
        if n > 0:
            return int(n)
    n = get_num_threads()  # starts the pool the first time
    try:
        from numba.np.ufunc import parallel as _parallel
    except ImportError:
        return n
    _raw_num_threads = vars(_parallel).get("_get_num_threads")  # set when the pool starts
    return n


def _launch_bound(k: Kernel, sp: int, dp: int, ap: int, s8: np.ndarray, d8: np.ndarray,
                  aux: np.ndarray) -> None:
    """A bound parallel kernel: on one thread a single dispatch with the bound addresses
    (``run_bound``, as serial plans; bind checked the buffers), else the thread split."""
    jobs = k._jobs
    n = min(_num_threads(), jobs)
    choice = k.store_choice
    base, t0 = (0, None) if choice is None else choice.start(n)
    if n <= 1:
        run_bound(k._addr, sp, dp, ap, jobs, base)
    elif _run_parallel(k._addr, s8, d8, aux, jobs, n, k._in_place_ok, (sp, dp, ap), base):
        raise LayoutError("src and dst overlap in memory; a reorder needs separate buffers")
    if choice is not None:
        choice.finish(n, base, t0)


def _launch_bound_plain(k: Kernel, sp: int, dp: int, ap: int, s8: np.ndarray, d8: np.ndarray,
                        aux: np.ndarray) -> None:
    """A bound parallel kernel without a timed store choice: once the threading layer
    allows concurrent launches, one dispatch at every thread count (at 2 threads 1.6-3 us
    less a call than :func:`_launch_bound`: a 512 KB stream, a 2 MB transpose)."""
    if _par_mode == _PAR_FREE:
        run_parallel_bound(k._addr, sp, dp, ap, k._jobs, _num_threads(), 0)
    else:
        _launch_bound(k, sp, dp, ap, s8, d8, aux)


def _nothing() -> None:
    """A bound zero-volume kernel: nothing to move."""


class BoundKernel(functools.partial):  # type: ignore[type-arg]
    """``Kernel.bind``'s result: ``b()`` runs the kernel on the buffers it was bound to.

    A ``functools.partial`` of the launcher with the buffers' addresses, so a
    call goes from Python straight into one Numba dispatch. It holds the
    buffers (``b.src``, ``b.dst``) alive; numpy then refuses to resize them,
    so the addresses stay valid.
    """

    kernel: Kernel
    src: Any
    dst: Any
    _keep: tuple[Any, ...]

    def __repr__(self) -> str:
        return f"<bound {self.kernel!r}>"

"""The contenders: copy baseline, layoutjit, numpy, PyTorch and oneDNN.

Every peer is optional. ``make_peers`` returns them all with ``available``
and ``note`` set; an unavailable peer is reported, never timed.

A peer's :meth:`prepare` gets a :class:`Job` (the case, both descriptors and
both buffers, the thread count) and returns a :class:`Prepared`: a no-argument
callable that performs the reorder once, plus information for the report
(compile/creation time, the implementation oneDNN chose, ...).

The peers, exactly:

``copy``       Not a reorder: a copy of ``(src_bytes + dst_bytes) / 2`` bytes
               (rounded up to 64) between two separate aligned buffers, i.e.
               it reads and writes as many bytes as the reorder must read and
               write. 1 thread: ``np.copyto`` of byte arrays (glibc memcpy).
               n > 1 threads: the Numba kernel ``for i in prange(n): b[i] =
               a[i]`` over float32 views (LLVM vectorises it; a hand-chunked
               loop does not), with ``numba.set_num_threads(n)``.
``layoutjit``  ``k = layoutjit.compile_reorder(src_md, dst_md)`` once per case
               (its time is reported as compile time), then ``k.bind(src,
               dst)`` on 1-D buffers of the storage dtype (validated once, as
               oneDNN's primitive runs on memory objects made once) and the
               bound call is timed; ``numba.set_num_threads(n)``. A checked
               ``k(src, dst)`` call costs ~1 us more: ``python -m
               perf.overhead`` measures both.
``numpy``      :mod:`perf.layout` views both buffers as strided arrays over the
               common refinement of the two layouts' digits; ``np.copyto(dst
               view, src view)`` per box, and ``view[...] = 0`` on the boxes of
               dst padding. f32 -> bf16: ``np.copyto(scratch, src_view,
               casting="unsafe")`` into a bfloat16 (ml_dtypes, round to nearest
               even) scratch in source order -- ``astype`` without allocating --
               then ``np.copyto`` of its uint16 view into the dst view
               (4x faster than one casting ``np.copyto`` into the strided view).
               f32 -> s8: ``np.rint`` into a source-order f32 scratch,
               ``np.clip(-128, 127)`` in place, ``np.copyto(..., casting=
               "unsafe")``. numpy is single-threaded at every thread count.
``torch``      The same boxes as ``torch.as_strided`` views of
               ``torch.from_numpy`` buffers; ``dst_view.copy_(src_view)``
               (a plain transpose is a single permuted view). f32 -> bf16:
               ``copy_`` into a preallocated bf16 scratch in source order
               (rounds to nearest even), then ``copy_`` into a
               ``.view(torch.bfloat16)`` of the uint16 dst. f32 -> s8:
               ``torch.round`` (half to even) into f32 scratch, ``clamp_(-128,
               127)``, ``copy_`` to an int8 scratch, ``copy_`` into the dst view
               (both two-pass forms measured about 2x faster than one
               converting strided ``copy_``). Padding boxes ``zero_()``;
               ``torch.set_num_threads(n)``.
``onednn``     oneDNN's reorder primitive through ctypes, see :mod:`perf.onednn`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import layout as L
from .buffers import aligned_empty

PEER_ORDER = ("layoutjit", "numpy", "torch", "onednn")


@dataclass
class Job:
    case: Any
    src_md: Any
    dst_md: Any
    src: np.ndarray  # 1-D, storage dtype, 64-byte aligned
    dst: np.ndarray
    threads: int


@dataclass
class Prepared:
    fn: Callable[[], None]
    info: dict = field(default_factory=dict)
    close: Callable[[], None] | None = None
    #: what the contender chose while it was timed (asked once the phase is over)
    after: Callable[[], dict] | None = None


class Peer:
    name = "?"
    available = False
    note = ""
    version = ""

    def set_threads(self, n: int) -> None:
        pass

    def prepare(self, job: Job) -> Prepared:  # pragma: no cover - abstract
        raise NotImplementedError

    def finish_case(self) -> None:
        """Free per-case state (compiled kernels, descriptors)."""

    def describe(self) -> dict:
        return {"available": self.available, "note": self.note, "version": self.version}


# ----------------------------------------------------------------------------- copy
class CopyPeer(Peer):
    name = "copy"

    def __init__(self) -> None:
        import numba

        self.numba = numba
        self.available = True
        self.version = f"numpy {np.__version__}, numba {numba.__version__}"
        self.note = ("copy of (src_bytes+dst_bytes)/2 bytes; 1 thread: np.copyto of bytes; "
                     "n threads: numba prange b[i] = a[i] on float32")

        @numba.njit(parallel=True, nogil=True)
        def prange_copy(a, b):
            for i in numba.prange(a.size):
                b[i] = a[i]

        self._prange_copy = prange_copy
        self._threads = 1

    def warm_compile(self) -> float:
        t = time.perf_counter()
        a = np.ones(64, np.float32)
        self._prange_copy(a, np.empty_like(a))
        return time.perf_counter() - t

    def set_threads(self, n: int) -> None:
        self._threads = n
        self.numba.set_num_threads(min(n, self.numba.config.NUMBA_NUM_THREADS))

    def buffers(self, nbytes: int) -> tuple[np.ndarray, np.ndarray]:
        n = -(-nbytes // 64) * 64
        a = aligned_empty(n)
        a.view(np.uint32)[:] = 0x3F800000  # 1.0f: touched and non-zero
        return a, aligned_empty(n)

    def prepare_copy(self, a: np.ndarray, b: np.ndarray, threads: int) -> Prepared:
        if threads == 1:
            return Prepared(lambda: np.copyto(b, a), {"kind": "np.copyto"})
        af, bf = a.view(np.float32), b.view(np.float32)
        k = self._prange_copy
        return Prepared(lambda: k(af, bf), {"kind": f"numba prange, {threads} threads"})


# ------------------------------------------------------------------------ layoutjit
class LayoutJitPeer(Peer):
    name = "layoutjit"

    def __init__(self) -> None:
        import numba

        import layoutjit as lj

        self.lj = lj
        self.numba = numba
        self.version = getattr(lj, "__version__", "?")
        self._kernel = None
        self._key = None
        self._compile_s = None
        if not hasattr(lj, "compile_reorder"):
            self.note = "layoutjit.compile_reorder is not available yet"
        else:
            self.available = True

    def set_threads(self, n: int) -> None:
        self.numba.set_num_threads(min(n, self.numba.config.NUMBA_NUM_THREADS))

    def prepare(self, job: Job) -> Prepared:
        key = (job.case.name,)
        info: dict = {}
        if self._key != key:
            t = time.perf_counter()
            self._kernel = self.lj.compile_reorder(job.src_md, job.dst_md)
            self._compile_s = time.perf_counter() - t
            self._key = key
            info["compile_s"] = self._compile_s
            t = time.perf_counter()
            self._kernel(job.src, job.dst)
            info["first_call_s"] = time.perf_counter() - t
        k, s, d = self._kernel, job.src, job.dst
        settled = settle_store_choice(k, lambda: k(s, d), job.threads)
        if settled:
            info["store_choice_calls"] = settled
        if "compile_s" in info:
            kc = getattr(k, "compile_s", None)  # the kernel's own build time (0: cache hit)
            if isinstance(kc, (int, float)):
                info["kernel_compile_s"] = float(kc)
            plan = getattr(k, "plan", None)
            desc = getattr(plan, "describe", None)
            if callable(desc):
                try:
                    info["plan"] = str(desc())
                except Exception:
                    pass
        bind = getattr(k, "bind", None)
        return Prepared(bind(s, d) if callable(bind) else (lambda: k(s, d)), info,
                        after=lambda: _store_choice(k, job.threads))

    def finish_case(self) -> None:
        self._kernel = None
        self._key = None


def settle_store_choice(k: Any, call: Callable[[], Any], threads: int) -> int:
    """Calls of ``call`` until a kernel that times plain against NT stores on its first
    calls (``Plan.nt_tune``) has kept one at this thread count; how many were made.

    Part of the warm-up, like the compile: the timed rounds measure the kept kind. The
    warm-up proper lasts 0.1 s, which on a tensor of 1 GB (40 ms a call) is three calls,
    so the timing calls (half of them of the losing kind) ran into the timed rounds."""
    choice = getattr(k, "store_choice", None)
    if choice is None or (threads <= 1 and not getattr(choice, "one_thread", False)):
        return 0
    from layoutjit.store_choice import calls_to_choose

    made = 0
    while choice.kept(threads) is None and made < calls_to_choose() + 2:
        call()
        made += 1
    return made


def _store_choice(k: Any, threads: int) -> dict:
    """The store kind a kernel that times plain against NT stores kept at this thread
    count (``Plan.nt_tune``), with the medians it compared; {} for other kernels."""
    choice = getattr(k, "store_choice", None)
    if choice is None or threads <= 1:
        return {}
    kept = choice.kept(threads)
    if kept is None:
        return {"stores": "not chosen yet"}
    plain, nt = choice.medians[threads]
    return {"stores": "nt" if kept else "plain", "plain_ms": plain * 1e3, "nt_ms": nt * 1e3}


# ---------------------------------------------------------------------------- numpy
def _dense_like(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, ...]:
    """Element strides of a dense array of ``shape`` whose axes are ordered like ``strides``."""
    order = sorted(range(len(shape)), key=lambda i: -strides[i])
    out = [0] * len(shape)
    acc = 1
    for i in reversed(order):
        out[i] = acc
        acc *= shape[i]
    return tuple(out)


class NumpyPeer(Peer):
    name = "numpy"

    def __init__(self) -> None:
        self.available = True
        self.version = np.__version__
        try:
            import ml_dtypes

            self.bf16 = np.dtype(ml_dtypes.bfloat16)
            self.version += f", ml_dtypes {ml_dtypes.__version__}"
        except Exception:  # pragma: no cover
            self.bf16 = None
        self.note = "single-threaded at every thread count"

    def prepare(self, job: Job) -> Prepared:
        return numpy_reorder(job.src_md, job.dst_md, job.src, job.dst, bf16=self.bf16)


def numpy_reorder(src_md: Any, dst_md: Any, src: np.ndarray, dst: np.ndarray,
                  bf16: Any = None) -> Prepared:
    """The numpy reorder of ``src`` into ``dst`` (1-D storage-dtype buffers) as a Prepared."""
    sdt, ddt = str(src_md.dtype), str(dst_md.dtype)
    boxes = L.copy_boxes(src_md, dst_md)
    pads = [L.np_view(dst, b, 0) for b in L.padding_boxes(dst_md)]
    steps: list[Callable[[], None]] = []
    for b in boxes:
        sv = L.np_view(src, b, 0)
        dv = L.np_view(dst, b, 1)
        if sdt == ddt:
            steps.append(lambda dv=dv, sv=sv: np.copyto(dv, sv))
        elif sdt == "f32" and ddt == "bf16":
            if bf16 is None:
                raise RuntimeError("f32 -> bf16 needs ml_dtypes")
            scratch = _np_scratch(b.shape, b.strides[0], bf16)
            sv16 = scratch.view(np.uint16)

            def step(dv=dv, sv=sv, scratch=scratch, sv16=sv16):
                np.copyto(scratch, sv, casting="unsafe")  # ml_dtypes cast, source order
                np.copyto(dv, sv16)
            steps.append(step)
        elif sdt == "f32" and ddt in ("s8", "u8"):
            lo, hi = (-128, 127) if ddt == "s8" else (0, 255)
            scratch = _np_scratch(b.shape, b.strides[0], np.float32)

            def step(dv=dv, sv=sv, scratch=scratch, lo=lo, hi=hi):
                np.rint(sv, out=scratch)
                np.clip(scratch, lo, hi, out=scratch)
                np.copyto(dv, scratch, casting="unsafe")
            steps.append(step)
        else:
            steps.append(_np_convert_step(sv, dv, b, sdt, ddt, bf16))
    for p in pads:
        steps.append(lambda p=p: p.fill(0))

    if len(steps) == 1:
        fn = steps[0]
    else:
        def fn() -> None:
            for s in steps:
                s()
    return Prepared(fn, {"boxes": L.describe(boxes), "n_boxes": len(boxes),
                         "n_pad_boxes": len(pads)})


_NP_VALUE = {"f32": np.float32, "f16": np.float16, "s8": np.int8, "u8": np.uint8,
             "s32": np.int32}
_NP_INT_RANGE = {"s8": (-128, 127), "u8": (0, 255), "s32": (-(1 << 31), (1 << 31) - 1)}


def _np_value_dtype(name: str, bf16: Any) -> np.dtype:
    """The numpy dtype that holds ``name``'s values (bf16 needs ml_dtypes)."""
    if name == "bf16":
        if bf16 is None:
            raise RuntimeError("numpy peer: bf16 needs ml_dtypes")
        return np.dtype(bf16)
    if name not in _NP_VALUE:
        raise RuntimeError(f"numpy peer: no conversion rule for {name}")
    return np.dtype(_NP_VALUE[name])


def _np_convert_step(sv: np.ndarray, dv: np.ndarray, b: Any, sdt: str, ddt: str,
                     bf16: Any) -> Callable[[], None]:
    """Any other conversion, with oneDNN's rules: floats round to nearest even, integer
    destinations saturate. It converts in source order into a scratch array, then
    copies that into the destination's order (like the f32 -> bf16 step)."""
    s_val = sv.view(_np_value_dtype(sdt, bf16))
    d_val = dv.view(_np_value_dtype(ddt, bf16))
    if ddt in _NP_INT_RANGE:
        lo, hi = _NP_INT_RANGE[ddt]
        wide = np.float64 if sdt not in _NP_INT_RANGE else np.int64
        scratch = _np_scratch(b.shape, b.strides[0], wide)

        def step() -> None:
            if wide is np.float64:
                np.rint(s_val, out=scratch)
            else:
                np.copyto(scratch, s_val)
            np.clip(scratch, lo, hi, out=scratch)
            np.copyto(d_val, scratch, casting="unsafe")
        return step
    scratch = _np_scratch(b.shape, b.strides[0], d_val.dtype)

    def step_float() -> None:
        np.copyto(scratch, s_val, casting="unsafe")  # one rounding, to nearest even
        np.copyto(d_val, scratch)
    return step_float


def _np_scratch(shape: tuple[int, ...], src_strides: tuple[int, ...], dtype: Any) -> np.ndarray:
    st = _dense_like(shape, src_strides)
    n = int(np.prod(shape))
    base = aligned_empty(n * np.dtype(dtype).itemsize, dtype)
    return np.lib.stride_tricks.as_strided(
        base, shape=shape, strides=tuple(s * base.itemsize for s in st))


# ---------------------------------------------------------------------------- torch
class TorchPeer(Peer):
    name = "torch"

    def __init__(self) -> None:
        try:
            import torch
        except Exception as e:
            self.note = f"torch not importable: {e}"
            return
        self.torch = torch
        self.available = True
        self.version = torch.__version__
        self.note = f"ATen parallel backend: {_torch_backend(torch)}"
        self._dt = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16,
                    "s8": torch.int8, "u8": torch.uint8, "s32": torch.int32}

    def set_threads(self, n: int) -> None:
        self.torch.set_num_threads(n)

    def _typed(self, buf: np.ndarray, dt: str) -> Any:
        t = self.torch.from_numpy(buf)
        want = self._dt[dt]
        return t if t.dtype == want else t.view(want)

    def prepare(self, job: Job) -> Prepared:
        torch = self.torch
        sdt, ddt = str(job.src_md.dtype), str(job.dst_md.dtype)
        ts = self._typed(job.src, sdt)
        td = self._typed(job.dst, ddt)
        boxes = L.copy_boxes(job.src_md, job.dst_md)
        steps: list[Callable[[], None]] = []
        for b in boxes:
            sv = torch.as_strided(ts, b.shape, b.strides[0], b.offsets[0])
            dv = torch.as_strided(td, b.shape, b.strides[1], b.offsets[1])
            src_order = _dense_like(b.shape, b.strides[0])
            if sdt == ddt:
                steps.append(lambda dv=dv, sv=sv: dv.copy_(sv))
            elif sdt == "f32" and ddt in ("bf16", "f16"):
                # convert in source order, then a same-type strided copy: about twice as
                # fast as one converting strided copy_ (measured, 8x256x56x56 -> nChw16c)
                scratch = torch.empty_strided(b.shape, src_order, dtype=self._dt[ddt])

                def step(dv=dv, sv=sv, scratch=scratch):
                    scratch.copy_(sv)
                    dv.copy_(scratch)
                steps.append(step)
            elif sdt == "f32" and ddt in ("s8", "u8"):
                lo, hi = (-128, 127) if ddt == "s8" else (0, 255)
                sf = torch.empty_strided(b.shape, src_order, dtype=torch.float32)
                si = torch.empty_strided(b.shape, src_order, dtype=self._dt[ddt])

                def step(dv=dv, sv=sv, sf=sf, si=si, lo=lo, hi=hi):
                    torch.round(sv, out=sf)  # half to even
                    sf.clamp_(lo, hi)
                    si.copy_(sf)
                    dv.copy_(si)
                steps.append(step)
            elif ddt in _NP_INT_RANGE:
                # any other source into an integer: round (floats) and saturate in a wide
                # type first; torch's own float -> int casts truncate and wrap
                lo, hi = _NP_INT_RANGE[ddt]
                from_int = sdt in _NP_INT_RANGE
                wide = torch.empty_strided(b.shape, src_order,
                                           dtype=torch.int64 if from_int else torch.float64)
                si = torch.empty_strided(b.shape, src_order, dtype=self._dt[ddt])

                def step(dv=dv, sv=sv, wide=wide, si=si, lo=lo, hi=hi, from_int=from_int):
                    wide.copy_(sv)
                    if not from_int:
                        torch.round(wide, out=wide)  # half to even
                    wide.clamp_(lo, hi)
                    si.copy_(wide)
                    dv.copy_(si)
                steps.append(step)
            else:
                # into a float type: one rounding to nearest even, in source order
                scratch = torch.empty_strided(b.shape, src_order, dtype=self._dt[ddt])

                def step(dv=dv, sv=sv, scratch=scratch):
                    scratch.copy_(sv)
                    dv.copy_(scratch)
                steps.append(step)
        for b in L.padding_boxes(job.dst_md):
            pv = torch.as_strided(td, b.shape, b.strides[0], b.offsets[0])
            steps.append(lambda pv=pv: pv.zero_())
        if len(steps) == 1:
            fn = steps[0]
        else:
            def fn() -> None:
                for s in steps:
                    s()
        return Prepared(fn, {"n_boxes": len(boxes)})


def _torch_backend(torch: Any) -> str:
    try:
        for line in torch.__config__.parallel_info().splitlines():
            if "parallel backend" in line:
                return line.split(":", 1)[1].strip()
    except Exception:
        pass
    return "?"


# --------------------------------------------------------------------------- oneDNN
class OneDNNPeer(Peer):
    name = "onednn"

    def __init__(self) -> None:
        from .onednn import OneDNN

        try:
            self.d = OneDNN()
        except Exception as e:
            self.note = f"oneDNN unavailable: {e}"
            return
        self.available = True
        self.version = self.d.version
        self.note = (f"{self.d.path} (cpu runtime {self.d.cpu_runtime}); threads via "
                     "omp_set_num_threads before primitive creation")
        self._mds: tuple | None = None
        self._key = None
        self._threads = 1
        self._prims: list = []

    def set_threads(self, n: int) -> None:
        self._threads = n
        self.d.set_num_threads(n)

    def describe(self) -> dict:
        out = super().describe()
        if self.available:
            out.update(self.d.info())
        return out

    def _descs(self, job: Job) -> tuple:
        if self._key != job.case.name:
            self.finish_case()
            c = job.case
            sm, how_s = self.d.memory_desc(list(c.dims), c.src_dtype, c.src_tag,
                                           _plain_strides(job.src_md))
            dm, how_d = self.d.memory_desc(list(c.dims), c.dst_dtype, c.dst_tag,
                                           _plain_strides(job.dst_md))
            self._mds = (sm, dm, how_s, how_d)
            self._key = c.name
            for md, lmd, side in ((sm, job.src_md, "src"), (dm, job.dst_md, "dst")):
                if self.d.md_size(md) != lmd.get_size():
                    raise RuntimeError(f"oneDNN {side} size {self.d.md_size(md)} != "
                                       f"MemoryDesc.get_size() {lmd.get_size()}")
        return self._mds  # type: ignore[return-value]

    def prepare(self, job: Job) -> Prepared:
        sm, dm, how_s, how_d = self._descs(job)
        self.d.set_num_threads(job.threads)
        t = time.perf_counter()
        r = self.d.reorder(sm, dm)
        create_s = time.perf_counter() - t
        r.bind(job.src.ctypes.data, job.dst.ctypes.data)
        self._prims.append(r)
        return Prepared(r.run, {"impl": r.impl, "create_s": create_s,
                                "omp_max_threads": self.d.max_threads(),
                                "src_md": how_s, "dst_md": how_d})

    def finish_case(self) -> None:
        for r in self._prims:
            r.close()
        self._prims = []
        if self._mds:
            self.d.destroy_md(self._mds[0])
            self.d.destroy_md(self._mds[1])
        self._mds = None
        self._key = None


def _plain_strides(md: Any) -> list[int] | None:
    return None if md.inner_blks else [int(s) for s in md.strides]


def make_peers(names: tuple[str, ...] = PEER_ORDER) -> dict[str, Peer]:
    """Instantiate the requested peers; oneDNN first (it must load before torch)."""
    peers: dict[str, Peer] = {}
    makers: dict[str, Callable[[], Peer]] = {
        "onednn": OneDNNPeer, "layoutjit": LayoutJitPeer, "numpy": NumpyPeer, "torch": TorchPeer}
    for name in ("onednn", "layoutjit", "numpy", "torch"):
        if name not in names:
            continue
        try:
            peers[name] = makers[name]()
        except Exception as e:
            p = Peer()
            p.name = name
            p.note = f"{type(e).__name__}: {e}"
            peers[name] = p
    return {n: peers[n] for n in PEER_ORDER if n in peers}

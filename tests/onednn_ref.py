"""oneDNN itself as a reference for descriptors and reorders (ctypes on libdnnl.so.3).

Used only by tests, and only when oneDNN v3 is installed (the ``onednn``
extra: pip ``onednn-cpu-gomp``); tests skip otherwise. Nothing here is used
by layoutjit itself.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from functools import lru_cache

import numpy as np

DIMS_T = ctypes.c_int64 * 12
# dnnl_query_t values of oneDNN v3 (include/oneapi/dnnl/dnnl_types.h)
Q_NDIMS, Q_DIMS, Q_DT, Q_OFFSET0, Q_PDIMS, Q_POFFS, Q_FMT_KIND = 256, 257, 258, 259, 260, 261, 262
Q_STRIDES, Q_NBLKS, Q_BLKS, Q_IDXS = 14, 263, 264, 265
Q_IMPL_INFO = 8  # dnnl_query_impl_info_str
DT = {"f16": 1, "bf16": 2, "f32": 3, "s32": 4, "s8": 5, "u8": 6, "f64": 7}
ARG_FROM, ARG_TO = 1, 17
SUCCESS, INVALID, UNIMPLEMENTED = 0, 2, 3


class Status(Exception):
    def __init__(self, code: int, what: str):
        super().__init__(f"{what}: oneDNN status {code}")
        self.code = code


@lru_cache(maxsize=1)
def lib() -> ctypes.CDLL | None:
    cands = [os.environ.get("LAYOUTJIT_ONEDNN_LIB", ""),
             os.path.join(sys.prefix, "lib", "libdnnl.so.3"),
             ctypes.util.find_library("dnnl") or ""]
    for c in cands:
        if c and (os.path.exists(c) or not os.path.isabs(c)):
            try:
                lb = ctypes.CDLL(c)
            except OSError:
                continue
            lb.dnnl_fmt_tag2str.restype = ctypes.c_char_p
            lb.dnnl_memory_desc_get_size.restype = ctypes.c_size_t
            lb.dnnl_memory_desc_get_size.argtypes = [ctypes.c_void_p]
            lb.dnnl_memory_desc_equal.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
            lb.dnnl_memory_desc_query.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
            lb.dnnl_memory_desc_destroy.argtypes = [ctypes.c_void_p]
            return lb
    return None


@lru_cache(maxsize=1)
def tag_values() -> dict[str, int]:
    """Abstract tag name -> dnnl_format_tag_t value, as this oneDNN build names them."""
    lb = lib()
    out: dict[str, int] = {}
    if lb is None:
        return out
    for v in range(2, 4096):
        s = lb.dnnl_fmt_tag2str(v)
        if s is None:
            continue
        name = s.decode()
        if name in ("undef", "any") or name.startswith("format_tag_last") or name.startswith("unknown"):
            continue
        out.setdefault(name, v)
        if name == "format_tag_last":
            break
    return out


class MD:
    """A dnnl_memory_desc_t handle with queries."""

    def __init__(self, handle: ctypes.c_void_p):
        self.h = handle

    def __del__(self):  # pragma: no cover - best effort
        try:
            lib().dnnl_memory_desc_destroy(self.h)
        except Exception:
            pass

    def _q_int(self, q: int) -> int:
        v = ctypes.c_int(0)
        lib().dnnl_memory_desc_query(self.h, q, ctypes.byref(v))
        return v.value

    def _q_i64(self, q: int) -> int:
        v = ctypes.c_int64(0)
        lib().dnnl_memory_desc_query(self.h, q, ctypes.byref(v))
        return v.value

    def _q_dims(self, q: int, n: int) -> tuple[int, ...]:
        p = ctypes.POINTER(DIMS_T)()
        st = lib().dnnl_memory_desc_query(self.h, q, ctypes.byref(p))
        if st != SUCCESS:
            raise Status(st, f"query {q}")
        return tuple(p.contents[:n])

    @property
    def ndims(self) -> int:
        return self._q_int(Q_NDIMS)

    def fields(self) -> dict:
        n = self.ndims
        nb = self._q_int(Q_NBLKS)
        return {
            "dims": self._q_dims(Q_DIMS, n),
            "padded_dims": self._q_dims(Q_PDIMS, n),
            "padded_offsets": self._q_dims(Q_POFFS, n),
            "offset0": self._q_i64(Q_OFFSET0),
            "strides": self._q_dims(Q_STRIDES, n),
            "inner_blks": self._q_dims(Q_BLKS, nb),
            "inner_idxs": self._q_dims(Q_IDXS, nb),
            "size": lib().dnnl_memory_desc_get_size(self.h),
        }


def _new(fn, *args) -> MD:
    h = ctypes.c_void_p()
    st = fn(ctypes.byref(h), *args)
    if st != SUCCESS:
        raise Status(st, fn.__name__)
    return MD(h)


def md_tag(dims, dt: str, abstract_tag: str) -> MD:
    v = tag_values()[abstract_tag]
    d = DIMS_T(*dims)
    return _new(lib().dnnl_memory_desc_create_with_tag, ctypes.c_int(len(dims)), d,
                ctypes.c_int(DT[dt]), ctypes.c_int(v))


def md_strides(dims, dt: str, strides) -> MD:
    d = DIMS_T(*dims)
    s = DIMS_T(*strides)
    return _new(lib().dnnl_memory_desc_create_with_strides, ctypes.c_int(len(dims)), d,
                ctypes.c_int(DT[dt]), s)


def md_of(md) -> MD:
    """oneDNN's descriptor equal to a layoutjit MemoryDesc (by tag when it has one)."""
    if md.inner_blks or md.offset0:
        raise ValueError("only plain strided descriptors can be rebuilt by strides")
    return md_strides(md.dims, str(md.dtype), md.strides)


def submemory(parent: MD, dims, offsets) -> MD:
    return _new(lib().dnnl_memory_desc_create_submemory, parent.h, DIMS_T(*dims), DIMS_T(*offsets))


def reshape(md: MD, dims) -> MD:
    return _new(lib().dnnl_memory_desc_reshape, md.h, ctypes.c_int(len(dims)), DIMS_T(*dims))


def permute_axes(md: MD, perm) -> MD:
    arr = (ctypes.c_int * 12)(*perm)
    return _new(lib().dnnl_memory_desc_permute_axes, md.h, arr)


def equal(a: MD, b: MD) -> bool:
    return bool(lib().dnnl_memory_desc_equal(a.h, b.h))


# ------------------------------------------------------------------ reorders
class Engine:
    def __init__(self):
        lb = lib()
        self.eng = ctypes.c_void_p()
        st = lb.dnnl_engine_create(ctypes.byref(self.eng), ctypes.c_int(1), ctypes.c_size_t(0))
        if st != SUCCESS:
            raise Status(st, "engine")
        self.stream = ctypes.c_void_p()
        st = lb.dnnl_stream_create(ctypes.byref(self.stream), self.eng, ctypes.c_uint(1))
        if st != SUCCESS:
            raise Status(st, "stream")


@lru_cache(maxsize=1)
def engine() -> Engine:
    return Engine()


class ExecArg(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_int), ("memory", ctypes.c_void_p)]


def reorder(src: MD, dst: MD, src_buf: np.ndarray, dst_buf: np.ndarray) -> str:
    """Run oneDNN's reorder from src_buf into dst_buf; returns the implementation name."""
    lb = lib()
    e = engine()
    pd = ctypes.c_void_p()
    st = lb.dnnl_reorder_primitive_desc_create(ctypes.byref(pd), src.h, e.eng, dst.h, e.eng, None)
    if st != SUCCESS:
        raise Status(st, "reorder pd")
    impl = ctypes.c_char_p()
    lb.dnnl_primitive_desc_query(pd, Q_IMPL_INFO, 0, ctypes.byref(impl))
    name = impl.value.decode() if impl.value else "?"
    prim = ctypes.c_void_p()
    st = lb.dnnl_primitive_create(ctypes.byref(prim), pd)
    if st != SUCCESS:
        raise Status(st, "reorder primitive")
    ms = ctypes.c_void_p()
    md_ = ctypes.c_void_p()
    lb.dnnl_memory_create(ctypes.byref(ms), src.h, e.eng, ctypes.c_void_p(src_buf.ctypes.data))
    lb.dnnl_memory_create(ctypes.byref(md_), dst.h, e.eng, ctypes.c_void_p(dst_buf.ctypes.data))
    args = (ExecArg * 2)(ExecArg(ARG_FROM, ms), ExecArg(ARG_TO, md_))
    st = lb.dnnl_primitive_execute(prim, e.stream, 2, args)
    if st != SUCCESS:
        raise Status(st, "execute")
    lb.dnnl_stream_wait(e.stream)
    lb.dnnl_memory_destroy(ms)
    lb.dnnl_memory_destroy(md_)
    lb.dnnl_primitive_destroy(prim)
    lb.dnnl_primitive_desc_destroy(pd)
    return name

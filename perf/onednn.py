"""oneDNN's reorder primitive through ctypes (C API of oneDNN v3.x, ``libdnnl.so.3``).

What is called, in order:

* ``dnnl_version()``: version, git hash and CPU runtime (2 = OpenMP).
* ``dnnl_engine_create(&engine, dnnl_cpu, 0)`` and
  ``dnnl_stream_create(&stream, engine, dnnl_stream_default_flags)``.
* per case: ``dnnl_memory_desc_create_with_tag(&md, ndims, dims, dt, tag)``
  (``dnnl_memory_desc_create_with_strides`` for a plain layout that has no
  enum name), ``dnnl_memory_desc_get_size`` (checked against
  ``MemoryDesc.get_size()``),
* per case and thread count: ``dnnl_reorder_primitive_desc_create(&pd, src_md,
  engine, dst_md, engine, NULL)``, ``dnnl_primitive_desc_query(pd,
  dnnl_query_impl_info_str, 0, &name)`` (the implementation oneDNN picked),
  ``dnnl_primitive_create(&prim, pd)``, ``dnnl_memory_create(&mem, md, engine,
  ptr)`` on the harness's own buffers,
* timed: ``dnnl_primitive_execute(prim, stream, 2, {DNNL_ARG_FROM, DNNL_ARG_TO})``
  followed by ``dnnl_stream_wait(stream)``.

Enum values (format tags such as ``dnnl_nChw16c``, data types, queries, engine
kinds, status codes) and ``DNNL_ARG_*`` are parsed at run time from the
headers installed next to the library (``<prefix>/include/oneapi/dnnl/``), so
every alias that is a oneDNN enum name works. The library's version must match
the headers' ``DNNL_VERSION_*``.

Threads: this build uses GNU OpenMP. oneDNN sizes its work split when the
primitive descriptor is created (``dnnl_get_max_threads()``), so the harness
calls ``omp_set_num_threads(n)`` -- resolved through the library handle, i.e.
in the libgomp that ``libdnnl`` itself is linked to -- *before* creating the
primitive for ``n`` threads, and creates one primitive per thread count.

Load this module (``OneDNN()``) before ``import torch``: torch ships its own
``libgomp.so.1`` with the same soname, and whichever is loaded first is the
one every later ``libgomp.so.1`` user binds to. Loading ``libdnnl`` first puts
oneDNN, torch and Numba's ``omp`` threading layer on one OpenMP runtime (one
thread pool instead of two pools that spin against each other on 2 cores).

Set ``LAYOUTJIT_PERF_DNNL=/path/libdnnl.so.3`` to use another library.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import sys
from pathlib import Path
from typing import Any

DNNL_MAX_NDIMS = 12
_Dims = ctypes.c_int64 * DNNL_MAX_NDIMS
_vp = ctypes.c_void_p


class DnnlError(RuntimeError):
    pass


class _ExecArg(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_int), ("memory", ctypes.c_void_p)]


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_int), ("minor", ctypes.c_int), ("patch", ctypes.c_int),
                ("hash", ctypes.c_char_p), ("cpu_runtime", ctypes.c_uint),
                ("gpu_runtime", ctypes.c_uint)]


_RUNTIMES = {0: "none", 1: "seq", 2: "omp", 4: "tbb", 8: "threadpool", 256: "ocl", 512: "sycl"}


# ------------------------------------------------------------------ header parsing
def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _active_lines(text: str, defined: set[str]) -> list[str]:
    """Lines outside ``#ifdef X`` blocks whose macro is not defined (one level of logic)."""
    out: list[str] = []
    stack: list[bool] = []
    for line in text.splitlines():
        s = line.strip()
        m = re.match(r"#\s*(ifdef|ifndef|if|elif|else|endif)\b\s*(\w*)", s)
        if m:
            kw, name = m.groups()
            if kw == "ifdef":
                stack.append(name in defined)
            elif kw == "ifndef":
                stack.append(name not in defined)
            elif kw == "if":
                stack.append(True)  # include guards / feature checks: keep the contents
            elif kw == "else" and stack:
                stack[-1] = not stack[-1]
            elif kw == "endif" and stack:
                stack.pop()
            continue
        if all(stack):
            out.append(line)
    return out


def parse_enums(paths: list[Path], defined: set[str]) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """All ``typedef enum { ... } name;`` members of the headers.

    Returns (every member -> value, enum type name -> its members).
    """
    values: dict[str, int] = {}
    by_type: dict[str, dict[str, int]] = {}
    for p in paths:
        text = "\n".join(_active_lines(_strip_comments(p.read_text()), defined))
        for m in re.finditer(r"typedef\s+enum\s*\{(.*?)\}\s*(\w+)\s*;", text, flags=re.S):
            body, tname = m.groups()
            members: dict[str, int] = {}
            nxt = 0
            for item in body.split(","):
                item = item.strip()
                if not item:
                    continue
                if "=" in item:
                    name, expr = (x.strip() for x in item.split("=", 1))
                    expr = re.sub(r"(?<=[0-9a-fA-F])[uUlL]+$", "", expr)
                    if re.fullmatch(r"-?(0x[0-9a-fA-F]+|\d+)", expr):
                        v = int(expr, 0)
                    elif expr in members:
                        v = members[expr]
                    elif expr in values:
                        v = values[expr]
                    else:
                        raise DnnlError(f"{p.name}: cannot evaluate {name} = {expr}")
                else:
                    name, v = item, nxt
                members[name] = v
                values[name] = v
                nxt = v + 1
            by_type[tname] = members
    return values, by_type


def parse_defines(paths: list[Path]) -> dict[str, int]:
    """Integer ``#define NAME value`` / ``#define NAME OTHER`` macros."""
    raw: dict[str, str] = {}
    for p in paths:
        for m in re.finditer(r"^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+([^\n]+)$", _strip_comments(p.read_text()),
                             flags=re.M):
            raw[m.group(1)] = m.group(2).strip()
    out: dict[str, int] = {}

    def ev(name: str, depth: int = 0) -> int | None:
        if name in out:
            return out[name]
        if depth > 10 or name not in raw:
            return None
        e = re.sub(r"(?<=[0-9a-fA-F])[uUlL]+$", "", raw[name])
        if re.fullmatch(r"-?(0x[0-9a-fA-F]+|\d+)", e):
            v: int | None = int(e, 0)
        elif re.fullmatch(r"\w+", e):
            v = ev(e, depth + 1)
        else:
            v = None
        if v is not None:
            out[name] = v
        return v

    for n in raw:
        ev(n)
    return out


# ------------------------------------------------------------------ library search
def find_library() -> str | None:
    env = os.environ.get("LAYOUTJIT_PERF_DNNL")
    if env:
        return env
    cands = [Path(sys.prefix) / "lib" / "libdnnl.so.3", Path(sys.base_prefix) / "lib" / "libdnnl.so.3"]
    for c in cands:
        if c.exists():
            return str(c)
    found = ctypes.util.find_library("dnnl")
    return found


def _find_headers(lib_path: str) -> Path | None:
    real = Path(os.path.realpath(lib_path))
    for base in (real.parent.parent, Path(lib_path).parent.parent, Path(sys.prefix)):
        d = base / "include" / "oneapi" / "dnnl"
        if (d / "dnnl_types.h").exists():
            return d
    return None


class OneDNN:
    """A loaded oneDNN library with one CPU engine and stream."""

    def __init__(self, lib_path: str | None = None) -> None:
        lib_path = lib_path or find_library()
        if not lib_path:
            raise DnnlError("libdnnl.so.3 not found (pip install onednn-cpu-gomp "
                            "onednn-devel-cpu-gomp, or set LAYOUTJIT_PERF_DNNL)")
        try:
            self.lib = ctypes.CDLL(lib_path, mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            raise DnnlError(f"cannot load {lib_path}: {e}") from None
        self.path = os.path.realpath(lib_path)
        hdr = _find_headers(lib_path)
        if hdr is None:
            raise DnnlError(f"oneDNN headers (include/oneapi/dnnl/dnnl_types.h) not found near "
                            f"{lib_path} (pip install onednn-devel-cpu-gomp)")
        self.header_dir = str(hdr)
        defines = parse_defines([hdr / "dnnl_config.h", hdr / "dnnl_version.h"])
        self.enum, self.enum_types = parse_enums(
            [hdr / "dnnl_common_types.h", hdr / "dnnl_types.h"], set(defines))
        self.defines = parse_defines([hdr / "dnnl_types.h"])
        self.defines.update(defines)

        L = self.lib
        L.dnnl_version.restype = ctypes.POINTER(_Version)
        v = L.dnnl_version().contents
        self.version = f"{v.major}.{v.minor}.{v.patch}"
        self.git_hash = (v.hash or b"").decode()
        self.cpu_runtime = _RUNTIMES.get(v.cpu_runtime, str(v.cpu_runtime))
        hv = (defines.get("DNNL_VERSION_MAJOR"), defines.get("DNNL_VERSION_MINOR"))
        if hv != (v.major, v.minor):
            raise DnnlError(f"headers in {hdr} are for {hv}, the library is {self.version}")
        self.status_names = {val: k for k, val in self.enum_types["dnnl_status_t"].items()}
        self.format_tags = self.enum_types["dnnl_format_tag_t"]
        self.data_types = self.enum_types["dnnl_data_type_t"]

        def fn(name: str, *argtypes: Any, restype: Any = ctypes.c_int) -> Any:
            f = getattr(L, name)
            f.argtypes = list(argtypes)
            f.restype = restype
            return f

        P = ctypes.POINTER
        self._md_tag = fn("dnnl_memory_desc_create_with_tag", P(_vp), ctypes.c_int, _Dims,
                          ctypes.c_int, ctypes.c_int)
        self._md_strides = fn("dnnl_memory_desc_create_with_strides", P(_vp), ctypes.c_int, _Dims,
                              ctypes.c_int, _Dims)
        self._md_size = fn("dnnl_memory_desc_get_size", _vp, restype=ctypes.c_size_t)
        self._md_destroy = fn("dnnl_memory_desc_destroy", _vp)
        self._engine_create = fn("dnnl_engine_create", P(_vp), ctypes.c_int, ctypes.c_size_t)
        self._engine_destroy = fn("dnnl_engine_destroy", _vp)
        self._stream_create = fn("dnnl_stream_create", P(_vp), _vp, ctypes.c_uint)
        self._stream_destroy = fn("dnnl_stream_destroy", _vp)
        self.stream_wait = fn("dnnl_stream_wait", _vp)
        self._reorder_pd = fn("dnnl_reorder_primitive_desc_create", P(_vp), _vp, _vp, _vp, _vp, _vp)
        self._pd_query = fn("dnnl_primitive_desc_query", _vp, ctypes.c_int, ctypes.c_int, _vp)
        self._pd_destroy = fn("dnnl_primitive_desc_destroy", _vp)
        self._prim_create = fn("dnnl_primitive_create", P(_vp), _vp)
        self._prim_destroy = fn("dnnl_primitive_destroy", _vp)
        self._mem_create = fn("dnnl_memory_create", P(_vp), _vp, _vp, _vp)
        self._mem_destroy = fn("dnnl_memory_destroy", _vp)
        self.execute = fn("dnnl_primitive_execute", _vp, _vp, ctypes.c_int, P(_ExecArg))
        try:  # the OpenMP runtime libdnnl is linked against (dlsym searches its dependencies)
            self._omp_set = fn("omp_set_num_threads", ctypes.c_int, restype=None)
            self._omp_get = fn("omp_get_max_threads", restype=ctypes.c_int)
        except AttributeError:
            self._omp_set = self._omp_get = None

        self.ARG_FROM = self.defines["DNNL_ARG_FROM"]
        self.ARG_TO = self.defines["DNNL_ARG_TO"]
        self.engine = _vp()
        self._check(self._engine_create(ctypes.byref(self.engine), self.enum["dnnl_cpu"], 0),
                    "dnnl_engine_create")
        self.stream = _vp()
        self._check(self._stream_create(ctypes.byref(self.stream), self.engine,
                                        self.enum["dnnl_stream_default_flags"]),
                    "dnnl_stream_create")

    # --------------------------------------------------------------- helpers
    def _check(self, status: int, what: str) -> None:
        if status != 0:
            raise DnnlError(f"{what}: {self.status_names.get(status, status)}")

    def set_num_threads(self, n: int) -> None:
        if self._omp_set is None:
            raise DnnlError("omp_set_num_threads not found (library not built with OpenMP?)")
        self._omp_set(int(n))

    def max_threads(self) -> int | None:
        return int(self._omp_get()) if self._omp_get is not None else None

    def info(self) -> dict:
        return {"version": self.version, "git_hash": self.git_hash, "cpu_runtime": self.cpu_runtime,
                "library": self.path, "headers": self.header_dir,
                "n_format_tags": len(self.format_tags)}

    def memory_desc(self, dims: list[int], dtype: str, tag: str,
                    strides: list[int] | None = None) -> tuple[_vp, str]:
        """A ``dnnl_memory_desc_t`` (caller destroys it) and how it was made."""
        dt = self.data_types.get(f"dnnl_{dtype}")
        if dt is None:
            raise DnnlError(f"data type {dtype!r} is not a dnnl_data_type_t")
        nd = len(dims)
        cd = _Dims(*dims)
        md = _vp()
        code = self.format_tags.get(f"dnnl_{tag}")
        if code is not None:
            self._check(self._md_tag(ctypes.byref(md), nd, cd, dt, code),
                        f"dnnl_memory_desc_create_with_tag({tag})")
            return md, f"tag dnnl_{tag}={code}"
        if strides is not None:
            self._check(self._md_strides(ctypes.byref(md), nd, cd, dt, _Dims(*strides)),
                        "dnnl_memory_desc_create_with_strides")
            return md, f"strides {tuple(strides)}"
        raise DnnlError(f"format tag {tag!r} is not a dnnl_format_tag_t name and has no strides")

    def md_size(self, md: _vp) -> int:
        return int(self._md_size(md))

    def destroy_md(self, md: _vp) -> None:
        self._md_destroy(md)

    def reorder(self, src_md: _vp, dst_md: _vp) -> Reorder:
        return Reorder(self, src_md, dst_md)

    def close(self) -> None:
        if self.stream:
            self._stream_destroy(self.stream)
            self.stream = _vp()
        if self.engine:
            self._engine_destroy(self.engine)
            self.engine = _vp()


class Reorder:
    """A reorder primitive bound to two buffers; call :meth:`bind` then :meth:`__call__`."""

    def __init__(self, dnnl: OneDNN, src_md: _vp, dst_md: _vp) -> None:
        self.d = dnnl
        self.pd = _vp()
        self.prim = _vp()
        self.mems: list[_vp] = []
        self.args = None
        self.src_md, self.dst_md = src_md, dst_md
        dnnl._check(dnnl._reorder_pd(ctypes.byref(self.pd), src_md, dnnl.engine, dst_md,
                                     dnnl.engine, None), "dnnl_reorder_primitive_desc_create")
        name = ctypes.c_char_p()
        st = dnnl._pd_query(self.pd, dnnl.enum["dnnl_query_impl_info_str"], 0, ctypes.byref(name))
        self.impl = name.value.decode() if st == 0 and name.value else "?"
        dnnl._check(dnnl._prim_create(ctypes.byref(self.prim), self.pd), "dnnl_primitive_create")

    def bind(self, src_ptr: int, dst_ptr: int) -> None:
        d = self.d
        for m in self.mems:
            d._mem_destroy(m)
        ms, mdst = _vp(), _vp()
        d._check(d._mem_create(ctypes.byref(ms), self.src_md, d.engine, _vp(src_ptr)),
                 "dnnl_memory_create(src)")
        d._check(d._mem_create(ctypes.byref(mdst), self.dst_md, d.engine, _vp(dst_ptr)),
                 "dnnl_memory_create(dst)")
        self.mems = [ms, mdst]
        self.args = (_ExecArg * 2)(_ExecArg(d.ARG_FROM, ms), _ExecArg(d.ARG_TO, mdst))
        ex, wait, prim, stream, args = d.execute, d.stream_wait, self.prim, d.stream, self.args

        def run() -> None:
            if ex(prim, stream, 2, args) or wait(stream):
                raise DnnlError("dnnl_primitive_execute/dnnl_stream_wait failed")

        self.run = run

    def __call__(self) -> None:
        self.run()

    def close(self) -> None:
        d = self.d
        for m in self.mems:
            d._mem_destroy(m)
        self.mems = []
        if self.prim:
            d._prim_destroy(self.prim)
            self.prim = _vp()
        if self.pd:
            d._pd_destroy(self.pd)
            self.pd = _vp()

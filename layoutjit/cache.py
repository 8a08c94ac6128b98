"""Kernel caches: in memory (one object per key, compiled once) and on disk.

Numba caches machine code only for functions defined in files. Each generated
module is written to ``<cache dir>/lj_<hash of its source>.py`` (atomically:
write a temporary file, then rename, so no process ever sees a partial file)
and executed as a module of that name, from the source text in memory (so
what runs is always the text that was generated, whatever is on disk); its
``cfunc(cache=True)`` keeps the machine code in ``<cache dir>/__pycache__``
(Numba writes those files atomically too). The source hash covers the
layoutjit, Numba and codegen versions (they are in the source header), so
stale entries are never reused and never need invalidating. A new process
regenerates the source (cheap), finds the file and loads the machine code
instead of compiling. Several processes may share one cache directory.

Robustness:

* a corrupt module file (its text differs from the source) is rewritten;
* a corrupt Numba cache entry (garbage or truncated ``.nbi``/``.nbc``, or
  another kernel's machine code) makes loading fail or load the wrong
  symbol: the entry is deleted and the kernel compiled again;
* a cache directory that is missing and cannot be created, read-only or
  full (writing the module or Numba's files fails) makes layoutjit compile
  in memory instead (no files, no Numba disk cache) while that directory is
  the cache directory of this process, with one ``RuntimeWarning`` per
  process (``reset_disk_state`` forgets the failure);
* a failure to compile (a bug in generated code) is a :class:`LayoutError`
  naming the module's file (``.path``) and carrying its text (``.source``).
"""

from __future__ import annotations

import builtins
import linecache
import os
import sys
import threading
import types
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from .errors import LayoutError

T = TypeVar("T")

_state_lock = threading.Lock()
_warned = False
_bad_dir: Path | None = None  # the cache directory that failed in this process
_bad_reason: str | None = None


def default_cache_dir() -> Path:
    """``$LAYOUTJIT_CACHE_DIR``, else ``$XDG_CACHE_HOME/layoutjit``, else ``~/.cache/layoutjit``."""
    env = os.environ.get("LAYOUTJIT_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "layoutjit"


def _usable(d: Path) -> str | None:
    """None when ``d`` (created if missing) takes new files, else the reason it does not."""
    try:
        d.mkdir(parents=True, exist_ok=True)
        probe = d / f".probe-{os.getpid()}-{threading.get_ident()}"
        probe.write_bytes(b"x")
        probe.unlink()
        return None
    except OSError as e:
        return f"cannot write to {d}: {e.strerror or e}"


def _go_memory_only(d: Path, reason: str) -> None:
    """Remember (for this process) that ``d`` failed: compile in memory; warn once."""
    global _warned, _bad_dir, _bad_reason
    with _state_lock:
        _bad_dir, _bad_reason = d, reason
        if _warned:
            return
        _warned = True
    warnings.warn(f"layoutjit: disk cache unusable ({reason}); kernels are compiled and cached "
                  f"in memory for this process only", RuntimeWarning, stacklevel=5)


def reset_disk_state() -> None:
    """Forget an earlier disk failure (tests; or after fixing the cache directory)."""
    global _warned, _bad_dir, _bad_reason
    with _state_lock:
        _warned = False
        _bad_dir = _bad_reason = None


def memory_only_reason() -> str | None:
    """Why kernels are compiled in memory now, or None when the disk cache is in use."""
    return _bad_reason if _bad_dir is not None and _bad_dir == default_cache_dir() else None


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
        os.replace(tmp, path)
    finally:
        try:
            tmp.unlink()
        except OSError:
            pass


def _purge_numba_cache(d: Path, name: str) -> None:
    pyc = d / "__pycache__"
    if not pyc.is_dir():
        return
    for f in pyc.glob(f"{name}.*"):
        try:
            f.unlink()
        except OSError:
            pass


class _DiskTrouble(Exception):
    """Writing the cache failed (read-only, full...): compile in memory instead."""


_import_lock = threading.RLock()


def _exec_module(name: str, source: str, filename: str, *, use_disk: bool) -> types.ModuleType:
    """Run ``source`` as module ``name`` whose functions report ``filename``."""
    code = compile(source, filename, "exec", dont_inherit=True)
    mod = types.ModuleType(name)
    mod.__file__ = filename
    if not use_disk:
        # Numba's disk cache needs a real file: disable it for this module's decorators
        mod.__dict__["__builtins__"] = _NO_DISK_BUILTINS
    sys.modules[name] = mod  # Numba's cache (and pickling) find the module by name
    try:
        exec(code, mod.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    cf = getattr(mod, "kernel", None)
    native = getattr(cf, "native_name", None)
    if isinstance(native, str) and name not in native:
        # Numba loaded machine code compiled for another module: a corrupt cache entry
        sys.modules.pop(name, None)
        raise _WrongEntry(f"the cached machine code belongs to {native}")
    mod.__layoutjit_source__ = source  # type: ignore[attr-defined]
    return mod


class _WrongEntry(Exception):
    pass


def load_module(source: str, name: str) -> tuple[types.ModuleType, Path | None]:
    """Write (if needed) and run a generated module; returns it and its file (None: in memory).

    Raises :class:`LayoutError` (with ``.path`` and ``.source``) when the
    module does not compile.
    """
    with _import_lock:
        mod = sys.modules.get(name)
        if mod is not None and getattr(mod, "__layoutjit_source__", None) == source:
            f = mod.__file__ or ""
            return mod, (Path(f) if not f.startswith("<") else None)
        d = default_cache_dir()
        if d != _bad_dir:  # a directory that failed stays unused for the rest of the process
            reason = _usable(d)
            if reason is None:
                try:
                    return _load_in(d, source, name)
                except _DiskTrouble as e:
                    reason = str(e)
            _go_memory_only(d, reason)
        return _load_in_memory(source, name), None


def _compile_error(where: str, path: Path | None, source: str, e: BaseException) -> LayoutError:
    err = LayoutError(f"generated kernel {where} failed to compile: {type(e).__name__}: {e}")
    err.path = path  # type: ignore[attr-defined]
    err.source = source  # type: ignore[attr-defined]
    return err


def _load_in(d: Path, source: str, name: str) -> tuple[types.ModuleType, Path]:
    path = d / f"{name}.py"
    try:
        ok = path.read_text(encoding="utf-8") == source
    except (OSError, UnicodeDecodeError, ValueError):
        ok = False
    if not ok:
        try:
            _write_atomic(path, source)
        except OSError as e:
            raise _DiskTrouble(f"cannot write {path}: {e.strerror or e}") from e
    try:
        compile(source, str(path), "exec", dont_inherit=True)
    except SyntaxError as e:
        raise _compile_error(str(path), path, source, e) from e
    try:
        return _exec_module(name, source, str(path), use_disk=True), path
    except OSError as e:
        raise _DiskTrouble(f"cannot write Numba's cache for {path}: {e.strerror or e}") from e
    except Exception:  # a corrupt Numba cache entry, or a compile error
        pass
    # drop the machine code cached for this module (if any) and compile again
    _purge_numba_cache(d, name)
    try:
        return _exec_module(name, source, str(path), use_disk=True), path
    except OSError as e:
        raise _DiskTrouble(f"cannot write Numba's cache for {path}: {e.strerror or e}") from e
    except Exception as e:
        raise _compile_error(str(path), path, source, e) from e


def _load_in_memory(source: str, name: str) -> types.ModuleType:
    filename = f"<layoutjit {name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    try:
        return _exec_module(name, source, filename, use_disk=False)
    except Exception as e:
        raise _compile_error(f"{name} (in memory)", None, source, e) from e


# --------------------------------------------------- numba without its disk cache
class _NumbaNoDisk(types.ModuleType):
    """``numba`` as generated code sees it when compiling in memory: ``cache=`` is ignored."""

    def __init__(self, real: types.ModuleType) -> None:
        super().__init__(real.__name__)
        self.__dict__["_real"] = real

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._real, attr)
        if attr in ("cfunc", "njit", "jit", "vectorize", "guvectorize", "generated_jit"):
            return _drop_cache(value)
        return value


def _drop_cache(deco: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kw: Any) -> Any:
        kw.pop("cache", None)
        return deco(*args, **kw)

    return wrapper


def _no_disk_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (),
                    level: int = 0) -> Any:
    mod = builtins.__import__(name, globals, locals, fromlist, level)
    if level == 0 and name.split(".")[0] == "numba":
        if name == "numba" or not fromlist:
            return _NumbaNoDisk(mod) if mod.__name__ == "numba" else mod
    return mod


_NO_DISK_BUILTINS = dict(builtins.__dict__)
_NO_DISK_BUILTINS["__import__"] = _no_disk_import


# ------------------------------------------------------------------ memory cache
class MemoryCache:
    """Key -> object, building each key exactly once even under concurrent callers.

    A build that raises leaves no entry (the next caller tries again).
    """

    def __init__(self) -> None:
        self._items: dict[Any, Any] = {}
        self._locks: dict[Any, threading.Lock] = {}
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        return self._items.get(key)

    def get_or_build(self, key: Any, build: Callable[[], T]) -> tuple[T, bool]:
        """(object, built_now)."""
        item = self._items.get(key)
        if item is not None:
            return item, False
        with self._lock:
            item = self._items.get(key)
            if item is not None:
                return item, False
            klock = self._locks.setdefault(key, threading.Lock())
        try:
            with klock:
                item = self._items.get(key)
                if item is not None:
                    return item, False
                item = build()
                self._items[key] = item
        finally:
            with self._lock:
                if self._locks.get(key) is klock and key in self._items:
                    del self._locks[key]
        return item, True

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


def disk_usage(d: Path | None = None) -> tuple[Path, int, int]:
    """(directory, number of kernels, bytes) of the disk cache."""
    d = d or default_cache_dir()
    n = 0
    size = 0
    if d.is_dir():
        for f in d.rglob("*"):
            try:
                if f.is_file():
                    size += f.stat().st_size
                    if f.suffix == ".py" and f.name.startswith("lj_"):
                        n += 1
            except OSError:
                pass  # removed meanwhile by another process
    return d, n, size


def clear_disk(d: Path | None = None) -> int:
    """Delete layoutjit's generated modules and their Numba caches; returns files removed."""
    d = d or default_cache_dir()
    removed = 0
    if not d.is_dir():
        return 0
    for f in list(d.glob("lj_*.py")) + list((d / "__pycache__").glob("lj_*")):
        try:
            f.unlink()
            removed += 1
        except OSError:
            pass
    return removed

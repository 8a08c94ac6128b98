"""Kernel caches: in memory (one object per key, compiled once) and on disk.

Numba caches machine code only for functions defined in files. Each generated
module is written to ``<cache dir>/lj_<hash of its source>.py`` (atomically:
write to a temporary file, then rename) and imported under that name; its
``cfunc(cache=True)`` keeps the machine code in ``<cache dir>/__pycache__``.
The source hash covers the layoutjit, Numba and codegen versions (they are in
the source header), so stale entries are never reused and never need
invalidating. A new process regenerates the source (cheap), finds the file
and loads the machine code instead of compiling.

Robustness: a corrupt module file is detected (its text must equal the source)
and rewritten; a corrupt Numba cache entry makes the import fail, so the
entry is deleted and compiled again; a missing, read-only or full cache
directory falls back to a private temporary directory for this process, with
one warning.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from .errors import LayoutError

T = TypeVar("T")

_fallback_dir: Path | None = None
_fallback_lock = threading.Lock()
_warned = False


def default_cache_dir() -> Path:
    """``$LAYOUTJIT_CACHE_DIR``, else ``$XDG_CACHE_HOME/layoutjit``, else ``~/.cache/layoutjit``."""
    env = os.environ.get("LAYOUTJIT_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "layoutjit"


def _usable(d: Path) -> bool:
    try:
        d.mkdir(parents=True, exist_ok=True)
        probe = d / f".probe-{os.getpid()}-{threading.get_ident()}"
        probe.write_bytes(b"x")
        probe.unlink()
        return True
    except OSError:
        return False


def _fallback(reason: str) -> Path:
    global _fallback_dir, _warned
    with _fallback_lock:
        if _fallback_dir is None:
            _fallback_dir = Path(tempfile.mkdtemp(prefix="layoutjit-mem-"))
        if not _warned:
            _warned = True
            warnings.warn(f"layoutjit: disk cache unusable ({reason}); kernels are cached in "
                          f"memory for this process only", RuntimeWarning, stacklevel=4)
        return _fallback_dir


def cache_dir_for_write() -> Path:
    d = default_cache_dir()
    if _usable(d):
        return d
    return _fallback(f"cannot write to {d}")


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
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


def _import(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # Numba's cache needs the module to be importable by name
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return mod


_import_lock = threading.RLock()


def load_module(source: str, name: str) -> tuple[ModuleType, Path]:
    """Write (if needed) and import a generated module; returns it and its file path."""
    with _import_lock:
        mod = sys.modules.get(name)
        if mod is not None and getattr(mod, "__layoutjit_source__", None) == source:
            return mod, Path(mod.__file__ or "")
        d = cache_dir_for_write()
        try:
            return _load_in(d, source, name)
        except LayoutError:
            raise
        except OSError as e:  # full disk, permissions changed under us...
            return _load_in(_fallback(str(e)), source, name)


def _load_in(d: Path, source: str, name: str) -> tuple[ModuleType, Path]:
    path = d / f"{name}.py"
    try:
        ok = path.read_text() == source
    except (OSError, UnicodeDecodeError):
        ok = False
    if not ok:
        _write_atomic(path, source)
    try:
        mod = _import(path, name)
    except (SyntaxError, ImportError) as e:
        raise LayoutError(f"generated kernel {path} failed to load: {e}") from e
    except Exception:
        # a corrupt Numba cache entry: drop it and compile again
        _purge_numba_cache(d, name)
        try:
            mod = _import(path, name)
        except Exception as e:
            raise LayoutError(f"generated kernel {path} failed to compile: {type(e).__name__}: {e}") from e
    mod.__layoutjit_source__ = source  # type: ignore[attr-defined]
    return mod, path


class MemoryCache:
    """Key -> object, building each key exactly once even under concurrent callers."""

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
        with klock:
            item = self._items.get(key)
            if item is not None:
                return item, False
            item = build()
            self._items[key] = item
        with self._lock:
            self._locks.pop(key, None)
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
            if f.is_file():
                size += f.stat().st_size
                if f.suffix == ".py" and f.name.startswith("lj_"):
                    n += 1
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

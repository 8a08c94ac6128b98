"""Code quality gates: ruff, mypy (when installed), docstrings with examples, doctests.

ruff and mypy come with the ``test`` extra (``pip install -e ".[test]"``); the
tests are skipped where they are missing. Their configuration lives in
pyproject.toml (``[tool.ruff]``, ``[tool.mypy]``).
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import inspect
import subprocess
import sys
import types
from pathlib import Path

import pytest

import layoutjit as lj

ROOT = Path(__file__).resolve().parents[1]

# Public modules whose docstring examples must run (the others' examples need
# the compiler's internals or are illustrations).
DOCTEST_MODULES = ["api", "desc", "dtypes", "errors", "tags", "explain", "cli", "verbose", "interop"]

# Top-level names still waiting for an example in a module this suite does not own.
PENDING_EXAMPLES: set[str] = set()


def _run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec(tool) is None:
        pytest.skip(f"{tool} is not installed")
    return subprocess.run([sys.executable, "-m", tool, *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def test_ruff_clean():
    paths = [p for p in ("layoutjit", "perf", "tests", "examples") if (ROOT / p).exists()]
    r = _run("ruff", "check", *paths)
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_clean():
    r = _run("mypy")  # files and settings from pyproject.toml
    assert r.returncode == 0, r.stdout + r.stderr


def test_py_typed_marker_ships():
    assert (ROOT / "layoutjit" / "py.typed").is_file()
    text = (ROOT / "pyproject.toml").read_text()
    assert '"py.typed"' in text


def _public_names() -> list[tuple[str, object]]:
    out = []
    for name in sorted(dir(lj)):
        obj = getattr(lj, name)
        if name.startswith("_") or isinstance(obj, types.ModuleType):
            continue
        out.append((name, obj))
    return out


def test_public_names_have_docstrings_with_examples():
    missing = []
    for name, obj in _public_names():
        doc = inspect.getdoc(obj) or ""
        if not doc:
            missing.append(f"{name}: no docstring")
        elif ">>>" not in doc and name not in PENDING_EXAMPLES:
            missing.append(f"{name}: no example")
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if attr.startswith("_"):
                    continue
                fn = member.fget if isinstance(member, property) else member
                if callable(fn) or isinstance(member, property):
                    if not (getattr(fn, "__doc__", None) or "").strip():
                        missing.append(f"{name}.{attr}: no docstring")
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("module", DOCTEST_MODULES)
def test_doctests(module):
    mod = importlib.import_module(f"layoutjit.{module}")
    res = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert res.failed == 0

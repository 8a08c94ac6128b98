"""The disk cache under damage, and compile failures (issue 6, items 2 and 4).

* garbage written into every file of a cache directory (``.py``, ``.nbi``,
  ``.nbc``) is survived by a new process; a truncated or swapped machine-code
  entry is detected and recompiled;
* a cache directory that cannot be created, is read-only or is full makes
  kernels compile in memory, with exactly one warning;
* a kernel whose generated code does not compile (or raises at import) is a
  LayoutError naming the descriptor pair and the module's file.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import layoutjit as lj
import layoutjit.cache as cache_mod
import layoutjit.compiler as compiler
import reference as ref
from layoutjit.cache import MemoryCache, reset_disk_state

M = lj.MemoryDesc
ROOT = Path(__file__).resolve().parents[1]


check = ref.kernel_matches_reference  # also imported by this module's child scripts


def novel_pair():
    """A pair no other test (or earlier run in this process) compiled: its module is new."""
    a, b = 3 + secrets.randbelow(400), 3 + secrets.randbelow(400)
    return M([a, b], "f32", "ab"), M([a, b], "f32", "ba")


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """Point the cache at ``tmp_path/cache`` with an empty in-memory cache; restore afterwards."""
    monkeypatch.setattr(compiler, "KERNELS", MemoryCache())
    reset_disk_state()
    # kernels other tests imported from their cache directories: build anew here
    for name in [n for n in sys.modules if n.startswith("lj_")]:
        sys.modules.pop(name, None)

    def use(d: Path) -> None:
        monkeypatch.setenv("LAYOUTJIT_CACHE_DIR", str(d))
        reset_disk_state()

    use(tmp_path / "cache")
    yield use
    reset_disk_state()


def compile_fresh(pair):
    """Compile ``pair`` as if for the first time in this process (module dropped from sys.modules)."""
    k = compiler.build(*pair)
    sys.modules.pop(k._module.__name__, None)
    return compiler.build(*pair)


def _env(cache: Path) -> dict:
    e = dict(os.environ, LAYOUTJIT_CACHE_DIR=str(cache))
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests"), e.get("PYTHONPATH", "")])
    return e


def _run(code: str, cache: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True,
                          text=True, timeout=180, env=_env(cache), cwd=str(ROOT))


_COMPILE = """
    import json, warnings
    warnings.simplefilter("always")
    import layoutjit as lj
    from test_cache import PAIRS, check
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = []
        for s, d in PAIRS:
            k = lj.compile_reorder(s, d)
            out.append([check(k), bool(k.loaded_from_disk), str(k.path)])
    print(json.dumps({"out": out, "warnings": [str(x.message) for x in w]}))
"""

PAIRS = [(M([6, 35], "f32", "ab"), M([6, 35], "f32", "ba")),
         (M([2, 19, 3, 3], "s8", "nchw"), M([2, 19, 3, 3], "f32", "nChw16c")),
         (M([3, 17, 5], "bf16", "abc"), M([3, 17, 5], "f32", "acb"))]


def run_compile(cache: Path) -> dict:
    r = _run(_COMPILE, cache)
    assert r.returncode == 0, r.stdout + r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert all(ok for ok, _, _ in res["out"]), res
    return res


# ======================================================================== corruption
def test_garbage_in_every_cache_file_is_survived_by_a_new_process(tmp_path):
    cache = tmp_path / "cache"
    first = run_compile(cache)
    files = [f for f in cache.rglob("*") if f.is_file()]
    kinds = {f.suffix for f in files}
    assert {".py", ".nbi", ".nbc"} <= kinds, kinds
    rng = np.random.default_rng(1)
    for i, f in enumerate(files):
        size = [0, 1, 17, 4096][i % 4] if f.suffix != ".py" else 300
        f.write_bytes(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
    again = run_compile(cache)
    assert not again["warnings"], again["warnings"]
    assert [p for _, _, p in again["out"]] == [p for _, _, p in first["out"]]
    for _, _, p in again["out"]:
        assert Path(p).read_text().startswith("# layoutjit generated kernel")
    # the repaired cache is used by the next process
    third = run_compile(cache)
    assert all(loaded for _, loaded, _ in third["out"]), third


def test_truncated_or_swapped_machine_code_is_recompiled(fresh, tmp_path):
    a_pair = (M([4, 8], "f32", "ab"), M([4, 8], "f32", "ba"))  # same signature: f32 -> f32
    b_pair = (M([4, 8], "f32", "ab"), M([4, 8], "f32", "ab"))
    a, b = compile_fresh(a_pair), compile_fresh(b_pair)
    assert a.loaded_from_disk and b.loaded_from_disk  # the second build of each loaded from disk
    pyc = a.path.parent / "__pycache__"
    nbc = {k: next(pyc.glob(f"{k.path.stem}.*.nbc")) for k in (a, b)}
    # b's entry now holds a's machine code: Numba would load it (another kernel!) without the check
    shutil.copyfile(nbc[a], nbc[b])
    b2 = compile_fresh(b_pair)
    assert not b2.loaded_from_disk and check(b2)
    # truncated data file and truncated index
    for what in ("nbc", "nbi"):
        f = next(pyc.glob(f"{a.path.stem}.*.{what}"))
        f.write_bytes(f.read_bytes()[: max(1, f.stat().st_size // 3)])
        a2 = compile_fresh(a_pair)
        assert not a2.loaded_from_disk and check(a2)
    # and a corrupt module file is rewritten
    a.path.write_text("garbage = 1\n")
    a3 = compile_fresh(a_pair)
    assert a3.path.read_text() == a3.source and check(a3)


# ============================================================ unusable cache directories
def _compile_two_novel(expect_dir_untouched: Path | None = None):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        ks = [lj.compile_reorder(*novel_pair()) for _ in range(2)]
    msgs = [str(x.message) for x in w if issubclass(x.category, RuntimeWarning)]
    assert len(msgs) == 1 and "disk cache unusable" in msgs[0], msgs
    for k in ks:
        assert k.path is None and check(k)
    if expect_dir_untouched is not None:
        assert not list(expect_dir_untouched.glob("lj_*"))
    return msgs[0]


def test_cache_path_under_a_regular_file(fresh, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    fresh(blocker / "cache")
    msg = _compile_two_novel()
    assert str(blocker / "cache") in msg


def _make_read_only(d: Path) -> str | None:
    """Make ``d`` refuse new files; returns the way used (None: impossible here)."""
    d.chmod(0o555)
    probe = d / "probe"
    try:
        probe.write_text("x")
    except OSError:
        return "chmod"
    probe.unlink()
    d.chmod(0o755)  # running as root: permission bits do not stop writes
    r = subprocess.run(["chattr", "+i", str(d)], capture_output=True)
    if r.returncode == 0:
        try:
            probe.write_text("x")
        except OSError:
            return "chattr"
        probe.unlink()
        subprocess.run(["chattr", "-i", str(d)], capture_output=True)
    return None


def _undo_read_only(d: Path, how: str | None) -> None:
    if how == "chattr":
        subprocess.run(["chattr", "-i", str(d)], capture_output=True)
    d.chmod(0o755)


def test_read_only_cache_directory(fresh, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    how = _make_read_only(ro)
    if how is None:
        pytest.skip("cannot make a read-only directory here (root without chattr +i)")
    try:
        fresh(ro)
        _compile_two_novel(expect_dir_untouched=ro)
    finally:
        _undo_read_only(ro, how)


def test_missing_cache_directory_is_created(fresh, tmp_path):
    d = tmp_path / "not" / "yet" / "there"
    fresh(d)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k = lj.compile_reorder(*novel_pair())
    assert k.path is not None and k.path.parent == d and k.path.read_text() == k.source
    assert check(k)


_FULL_DISK = """
    import json, resource, signal, sys, warnings
    import layoutjit as lj
    import layoutjit.compiler as compiler
    from layoutjit.codegen import generate
    from test_cache import check, novel_pair
    pairs = [novel_pair() for _ in range(2)]
    ir, plan, ep = compiler.lower_and_plan(*pairs[0], None)
    n = len(generate(plan, ep, compiler.title_of("reorder", *pairs[0], None)))
    limit = 1 if sys.argv[1] == "source" else n + 64  # the module fits, Numba's cache files do not
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writing past the limit fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        ks = [lj.compile_reorder(*p) for p in pairs]
    print(json.dumps({"ok": [check(k) for k in ks], "paths": [str(k.path) for k in ks],
                      "warnings": [str(x.message) for x in w]}))
"""


@pytest.mark.parametrize("what", ["source", "numba"])
def test_full_cache_directory(tmp_path, what):
    cache = tmp_path / "full"
    r = _run(_FULL_DISK, cache, what)
    assert r.returncode == 0, r.stdout + r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["ok"] == [True, True] and res["paths"] == ["None", "None"], res
    assert len(res["warnings"]) == 1 and "disk cache unusable" in res["warnings"][0], res
    assert not list(cache.glob(".*.tmp")), "temporary files left behind"
    for f in cache.glob("lj_*.py"):  # a module that was written is whole
        assert f.read_text().startswith("# layoutjit generated kernel")


def test_driver_cache_write_failure_is_a_warning(monkeypatch):
    """The launch drivers live in Numba's own cache: a full disk there costs a
    recompile in the next process, never a failed launch."""
    import errno

    from numba import types

    from layoutjit import runtime

    def full(sig, data):
        raise OSError(errno.EFBIG, "File too large")

    monkeypatch.setattr(runtime.run_bound._cache, "_save_overload", full)
    monkeypatch.setattr(runtime, "cache_write_failures", [])
    sig = (types.int32,) * 6  # a signature no launch uses: compiled (and saved) here
    with pytest.warns(RuntimeWarning, match="cannot save Numba's cache of its launch drivers"):
        runtime.run_bound.compile(sig)
    assert sig in runtime.run_bound.overloads
    assert [e.errno for e in runtime.cache_write_failures] == [errno.EFBIG]


def test_atomic_write_leaves_nothing_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "lj_x.py"

    def failing_replace(a, b):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cache_mod.os, "replace", failing_replace)
    with pytest.raises(OSError):
        cache_mod._write_atomic(target, "x = 1\n" * 100)
    assert list(tmp_path.iterdir()) == []


# ==================================================================== compile failures
def _patched_generate(monkeypatch, mutate):
    real = compiler.generate

    def gen(plan, ep, title):
        return mutate(real(plan, ep, title))

    monkeypatch.setattr(compiler, "generate", gen)


@pytest.mark.parametrize("bad", ["syntax", "typing", "raises", "no_kernel"])
def test_compile_errors_become_layout_errors(fresh, monkeypatch, bad):
    mutate = {
        "syntax": lambda s: s.replace("def kernel(sp, dp, ap, lo, hi):", "def kernel(sp, dp, ap, lo, hi)"),
        "typing": lambda s: s.replace("def kernel(sp, dp, ap, lo, hi):",
                                      "def kernel(sp, dp, ap, lo, hi):\n    undefined_name_xyz(sp)"),
        "raises": lambda s: s + "\nraise RuntimeError('boom at import')\n",
        "no_kernel": lambda s: s.replace("def kernel(", "def not_the_kernel("),
    }[bad]
    _patched_generate(monkeypatch, mutate)
    pair = novel_pair()
    with pytest.raises(lj.LayoutError) as ei:
        lj.compile_reorder(*pair)
    msg = str(ei.value)
    assert repr(pair[0]) in msg and repr(pair[1]) in msg, msg
    if bad != "no_kernel":
        path = ei.value.path
        assert path is not None and str(path) in msg and path.is_file(), msg
        assert ei.value.source == path.read_text()
        assert path.stem not in sys.modules
    # nothing broken for the next, valid compile (the in-memory cache holds no entry)
    monkeypatch.undo()
    reset_disk_state()


def test_compile_error_in_memory_mode(fresh, tmp_path, monkeypatch):
    blocker = tmp_path / "f"
    blocker.write_text("")
    fresh(blocker / "cache")
    _patched_generate(monkeypatch, lambda s: s + "\nraise RuntimeError('boom')\n")
    pair = novel_pair()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(lj.LayoutError, match="in memory.*boom") as ei:
            lj.compile_reorder(*pair)
    assert repr(pair[0]) in str(ei.value) and ei.value.path is None and "boom" in ei.value.source

"""Concurrency (issue 6, item 2): threads compiling and running kernels, processes sharing a cache.

* 8 threads compiling the same pairs get one kernel object per pair, built once;
* one kernel runs concurrently from several threads on different buffers, and
  its drivers release the GIL;
* parallel launches from several threads survive Numba's workqueue layer (not
  thread-safe), and a child forked after an OpenMP region can still run kernels;
* two processes compiling the same kernels into one cache directory both
  succeed, no partially written ``lj_*.py`` is ever visible, and a third
  process loads everything from disk.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import layoutjit as lj
import layoutjit.compiler as compiler
import reference as ref
from layoutjit.cache import MemoryCache, reset_disk_state
from layoutjit.codegen import source_hash
from layoutjit.runtime import run_parallel, run_serial

M = lj.MemoryDesc
ROOT = Path(__file__).resolve().parents[1]


check = ref.kernel_matches_reference  # also imported by this module's child scripts


def run_threads(worker, n: int) -> None:
    """Start ``worker(t)`` for t in range(n) on n threads; wait (up to 120 s each)."""
    threads = [threading.Thread(target=worker, args=(t,)) for t in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """A new cache directory and an empty in-memory cache (so kernels really compile)."""
    monkeypatch.setenv("LAYOUTJIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(compiler, "KERNELS", MemoryCache())
    reset_disk_state()
    yield tmp_path / "cache"
    reset_disk_state()


def test_eight_threads_compile_each_pair_once(fresh_cache, monkeypatch):
    # dims no other test uses, so each key is compiled here for the first time
    pairs = [(M([5, 37], "f32", "ab"), M([5, 37], "f32", "ba")),
             (M([3, 29, 7], "f32", "abc"), M([3, 29, 7], "bf16", "aBc16b")),
             (M([2, 23, 3, 5], "s8", "nchw"), M([2, 23, 3, 5], "f32", "nChw8c")),
             (M([31, 6], "u8", "ba"), M([31, 6], "s32", "Ab16a")),
             (M([2, 19, 3, 3], "f32", "nChw16c"), M([2, 19, 3, 3], "f16", "nhwc"))]
    builds: dict = {}
    lock = threading.Lock()
    real_build = compiler.build

    def counting_build(src_md, dst_md, *a, **kw):
        with lock:
            builds[(src_md, dst_md)] = builds.get((src_md, dst_md), 0) + 1
        time.sleep(0.02)  # widen the race window
        return real_build(src_md, dst_md, *a, **kw)

    monkeypatch.setattr(compiler, "build", counting_build)
    n = 8
    barrier = threading.Barrier(n)
    got: list[list] = [[] for _ in range(n)]
    errors: list[BaseException] = []

    def worker(t):
        try:
            barrier.wait()
            order = pairs[t % len(pairs):] + pairs[:t % len(pairs)]
            for s, d in order:
                k = lj.compile_reorder(s, d)
                assert check(k, seed=t)
                got[t].append(((s, d), k))
        except BaseException as e:  # reported below
            errors.append(e)

    run_threads(worker, n)
    assert not errors, errors
    assert all(c == 1 for c in builds.values()) and len(builds) == len(pairs), builds
    for key in pairs:
        ks = {id(k) for g in got for p, k in g if p == key}
        assert len(ks) == 1, key
    assert len(compiler.KERNELS) == len(pairs)


def test_failed_build_is_retried_not_cached():
    cache = MemoryCache()
    calls = []

    def bad():
        calls.append(1)
        raise lj.LayoutError("boom")

    for _ in range(2):
        with pytest.raises(lj.LayoutError, match="boom"):
            cache.get_or_build("k", bad)
    assert len(calls) == 2 and len(cache) == 0
    assert cache.get_or_build("k", lambda: 5) == (5, True)
    assert cache.get_or_build("k", bad) == (5, False)


def test_concurrent_calls_of_one_kernel():
    small = lj.compile_reorder(M([4, 8, 3], "f32", "abc"), M([4, 8, 3], "f32", "aCb8c"))  # fast path
    big = lj.compile_reorder(M([1024, 768], "f32", "ab"), M([1024, 768], "f32", "ba"))  # parallel driver
    attr = lj.compile_reorder(M([64, 96], "f32", "ab"), M([64, 96], "s8", "ba"), scales={"src": 2})
    assert big.plan is not None and not big.plan.serial
    n = 8
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []

    def worker(t):
        try:
            rng = np.random.default_rng(t)
            xs = rng.standard_normal(96).astype(np.float32)
            outs = np.empty(small.dst_md.get_size() // 4, np.float32)
            exp_s = ref.reorder(xs, small.src_md, small.dst_md, np.zeros_like(outs))
            xb = rng.standard_normal(1024 * 768).astype(np.float32)
            outb = np.empty_like(xb)
            xa = rng.standard_normal(64 * 96).astype(np.float32) * 10
            sc = rng.uniform(0.5, 2, 96).astype(np.float32)
            outa = np.empty(64 * 96, np.int8)
            exp_a = np.clip(np.rint(xa.reshape(64, 96) * sc), -128, 127).astype(np.int8).T.ravel()
            barrier.wait()
            for i in range(200):
                outs[:] = 0
                small(xs, outs)
                assert np.array_equal(outs, exp_s)
                if i % 40 == 0:
                    big(xb, outb)
                    assert np.array_equal(outb.reshape(768, 1024), xb.reshape(1024, 768).T)
                    attr(xa, outa, scales={"src": sc})
                    assert np.array_equal(outa, exp_a)
        except BaseException as e:
            errors.append(e)

    run_threads(worker, n)
    assert not errors, errors


def test_kernels_release_the_gil():
    assert run_serial.targetoptions.get("nogil") and run_parallel.targetoptions.get("nogil")
    k = lj.compile_reorder(M([2048, 2048], "f32", "ab"), M([2048, 2048], "f32", "ba"))
    src = np.ones(2048 * 2048, np.float32)
    dst = np.empty_like(src)
    k(src, dst)
    windows: list[tuple[float, float]] = []
    done = threading.Event()
    started = threading.Event()

    def worker():
        import numba

        numba.set_num_threads(1)  # this thread's calls run serially on one core
        started.set()
        for _ in range(6):
            t0 = time.perf_counter()
            k(src, dst)
            windows.append((t0, time.perf_counter()))
        done.set()

    th = threading.Thread(target=worker)
    th.start()
    started.wait()
    stamps = []
    while not done.is_set():
        stamps.append(time.perf_counter())
    th.join()
    inside = sum(1 for s in stamps for a, b in windows if a < s < b)
    total = sum(b - a for a, b in windows)
    # with the GIL held during a call, this thread could not run a single iteration inside one
    assert inside >= 10, (inside, total)


def _run(code: str, env: dict | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    e.update(env or {})
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests"), e.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=e, cwd=str(ROOT))


def test_parallel_launches_from_threads_with_the_workqueue_layer():
    r = _run("""
        import threading, numpy as np, numba, layoutjit as lj
        M = lj.MemoryDesc
        k = lj.compile_reorder(M([1024, 1024], "f32", "ab"), M([1024, 1024], "f32", "ba"))
        assert not k.plan.serial
        srcs = [np.random.default_rng(i).random(1 << 20, dtype=np.float32) for i in range(4)]
        dsts = [np.zeros(1 << 20, np.float32) for _ in range(4)]
        def work(i):
            for _ in range(30):
                k(srcs[i], dsts[i])
        ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        [t.start() for t in ts]; [t.join() for t in ts]
        ok = all(np.array_equal(d.reshape(1024, 1024), s.reshape(1024, 1024).T) for s, d in zip(srcs, dsts))
        print(numba.threading_layer(), ok)
    """, env={"NUMBA_THREADING_LAYER": "workqueue"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.split() == ["workqueue", "True"], r.stdout + r.stderr


def test_forked_child_after_a_parallel_region():
    r = _run("""
        import multiprocessing as mp, numpy as np, numba, layoutjit as lj
        M = lj.MemoryDesc
        k = lj.compile_reorder(M([1024, 1024], "f32", "ab"), M([1024, 1024], "f32", "ba"))
        s = np.random.default_rng(0).random(1 << 20, dtype=np.float32)
        d = np.zeros_like(s)
        k(s, d)  # a parallel region in the parent
        def child(q):
            d2 = np.zeros_like(s)
            k(s, d2)
            q.put(bool(np.array_equal(d2, d)))
        ctx = mp.get_context("fork")
        q = ctx.Queue()
        p = ctx.Process(target=child, args=(q,))
        p.start(); p.join(60)
        print(numba.threading_layer(), p.exitcode, q.get(timeout=5) if p.exitcode == 0 else None)
    """)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.split()[1:] == ["0", "True"], r.stdout + r.stderr


_COMPILE_MANY = """
    import json, os, sys, time
    import numpy as np, layoutjit as lj
    from test_concurrency import PAIRS, check
    go = sys.argv[1] if len(sys.argv) > 1 else None
    while go and not os.path.exists(go):
        time.sleep(0.001)
    out = []
    for s, d in PAIRS():
        k = lj.compile_reorder(s, d)
        out.append([bool(check(k)), bool(k.loaded_from_disk), str(k.path)])
    print(json.dumps(out))
"""


def PAIRS():  # noqa: N802 - shared with the subprocesses above
    return [(M([7, 45], "f32", "ab"), M([7, 45], "f32", "ba")),
            (M([3, 21, 5], "f32", "abc"), M([3, 21, 5], "s8", "aBc16b")),
            (M([2, 21, 3, 5], "bf16", "nchw"), M([2, 21, 3, 5], "f32", "nChw8c")),
            (M([2, 21, 3, 5], "u8", "nhwc"), M([2, 21, 3, 5], "f16", "nchw")),
            (M([41, 3], "f32", "ab"), M([41, 3], "f32", "Ab8a")),
            (M([2, 3, 4, 5, 6], "s32", "abcde"), M([2, 3, 4, 5, 6], "s32", "acbde"))]


def test_two_processes_share_a_cache_directory(tmp_path):
    cache = tmp_path / "shared"
    go = tmp_path / "go"
    env = {"LAYOUTJIT_CACHE_DIR": str(cache)}
    code = textwrap.dedent(_COMPILE_MANY)
    e = dict(os.environ, **env)
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests"), e.get("PYTHONPATH", "")])
    procs = [subprocess.Popen([sys.executable, "-c", code, str(go)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=e, cwd=str(ROOT)) for _ in range(2)]
    seen: dict[str, int] = {}
    torn: list[str] = []
    stop = threading.Event()

    def scan():
        for f in list(cache.glob("lj_*.py")) if cache.is_dir() else []:
            try:
                text = f.read_text()
            except (OSError, UnicodeDecodeError) as ex:
                torn.append(f"{f.name}: {ex}")
                continue
            if "lj_" + source_hash(text) != f.stem:
                torn.append(f"{f.name}: {len(text)} chars, not the full module")
            seen[f.name] = seen.get(f.name, 0) + 1

    def watch():
        while not stop.is_set():
            scan()
        scan()  # once more after both processes are done

    w = threading.Thread(target=watch)
    w.start()
    time.sleep(0.3)  # both processes imported layoutjit and wait
    go.touch()
    outs = []
    try:
        for p in procs:
            so, se = p.communicate(timeout=240)
            assert p.returncode == 0, se
            outs.append(json.loads(so.strip().splitlines()[-1]))
    finally:
        stop.set()
        w.join()
    assert not torn, torn
    n = len(PAIRS())
    assert len(seen) == n
    for out in outs:
        assert len(out) == n and all(ok for ok, _, _ in out), out
        assert all(Path(p).parent == cache for _, _, p in out)
    assert not list(cache.glob(".*.tmp")), "temporary files left behind"
    # a third process finds everything on disk
    r = _run(_COMPILE_MANY, env=env)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert all(ok and loaded for ok, loaded, _ in out), out

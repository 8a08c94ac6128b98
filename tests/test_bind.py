"""``Kernel.bind``: validate once, run many times (issue 4's small-tensor path).

A bound runner must give exactly what a checked call gives, refuse at bind time
everything a call refuses, see new values written into its buffers between
calls, and keep its buffers alive.
"""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import layoutjit as lj
import reference as ref
from layoutjit.kernel import BoundKernel

M = lj.MemoryDesc


def _src(md, rng):
    return ref.random_raw(md.get_size() // md.dtype.size, str(md.dtype), rng)


@pytest.fixture(scope="module")
def rng():
    return np.random.default_rng(77)


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", [
    ((1, 16, 4, 4), "nchw", "nChw16c", "f32", "f32"),      # serial transpose tile
    ((2, 17, 5, 3), "nhwc", "nChw8c", "f32", "bf16"),      # padding, conversion
    ((64, 40, 30, 20), "nchw", "nhwc", "f32", "f32"),      # 6 MB: the parallel launcher
    ((3, 0, 4), "abc", "cba", "f32", "f32"),               # zero volume
])
def test_bound_equals_a_checked_call(rng, dims, stag, dtag, sdt, ddt):
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = lj.compile_reorder(s, d)
    x = _src(s, rng)
    y = np.full(d.get_size() // d.dtype.size, 7, dtype=d.dtype.storage)
    b = k.bind(x, y)
    assert isinstance(b, BoundKernel) and b.kernel is k and b.src is x and b.dst is y
    if s.get_size() > 1 << 20:
        assert not k.plan.serial  # the parallel launcher is the one bound
    for _ in ref.at_thread_counts((1, 2)):
        y[:] = 7
        assert b() is None
        np.testing.assert_array_equal(y, ref.reorder(x, s, d, np.full_like(y, 7)))
    x2 = _src(s, rng)  # new values in the same buffer
    x[:] = x2
    b()
    np.testing.assert_array_equal(y, ref.reorder(x2, s, d, np.full_like(y, 7)))


def test_bind_allocates_dst_and_keeps_buffers_alive(rng):
    s, d = M((2, 3, 4), "f32", "abc"), M((2, 3, 4), "f32", "cba")
    k = lj.compile_reorder(s, d)
    x = _src(s, rng)
    wx = weakref.ref(x)
    b = k.bind(x)
    del x
    gc.collect()
    assert wx() is not None  # held by the bound runner
    b()
    np.testing.assert_array_equal(b.dst, ref.reorder(wx(), s, d, np.zeros(24, np.float32)))
    with pytest.raises(ValueError):  # numpy refuses to move a bound buffer
        b.dst.resize(48)


def test_bind_refuses_what_a_call_refuses(rng):
    s, d = M((4, 8), "f32", "ab"), M((4, 8), "f32", "ba")
    k = lj.compile_reorder(s, d)
    x = np.zeros(32, np.float32)
    with pytest.raises(lj.LayoutError, match="dst"):
        k.bind(x, np.zeros(31, np.float32))
    with pytest.raises(lj.LayoutError, match="src"):
        k.bind(np.zeros(33, np.float32), np.zeros(32, np.float32))
    ro = np.zeros(32, np.float32)
    ro.flags.writeable = False
    with pytest.raises(lj.LayoutError, match="dst"):
        k.bind(x, ro)
    whole = np.zeros(48, np.float32)
    with pytest.raises(lj.LayoutError, match="overlap"):
        k.bind(whole[:32], whole[16:])
    with pytest.raises(lj.LayoutError, match="unexpected"):
        k.bind(x, np.zeros(32, np.float32), scales={"src": np.ones(1, np.float32)})


def test_bind_with_attributes_and_in_place_eltwise(rng):
    s, d = M((2, 16, 3, 3), "f32", "nchw"), M((2, 16, 3, 3), "s8", "nChw16c")
    k = lj.compile_reorder(s, d, scales={"dst": 0})
    x = (rng.normal(0, 50, 288)).astype(np.float32)
    sc = np.array([0.5], np.float32)
    y1 = np.zeros(288, np.int8)
    y2 = np.zeros(288, np.int8)
    k(x, y1, scales={"dst": sc})
    b = k.bind(x, y2, scales={"dst": sc})
    b()
    np.testing.assert_array_equal(y1, y2)
    sc[0] = 0.25  # the bound runner reads the scale array at every call
    k(x, y1, scales={"dst": sc})
    b()
    np.testing.assert_array_equal(y1, y2)
    e = lj.compile_eltwise(s, "relu")
    z = x.copy()
    be = e.bind(z, z)
    be()
    np.testing.assert_array_equal(z, np.maximum(x, 0))


def test_thread_count_follows_numba_in_every_thread():
    """The launchers read the calling thread's count through the threading layer's own
    getter (``kernel._num_threads``): it must agree with ``numba.get_num_threads``."""
    import threading

    import numba

    from layoutjit.kernel import _num_threads

    seen = []
    for t in ref.at_thread_counts((1, 2)):
        seen.append((_num_threads(), numba.get_num_threads(), min(t, numba.config.NUMBA_NUM_THREADS)))
        th = threading.Thread(target=lambda: seen.append((_num_threads(), numba.get_num_threads(), None)))
        th.start()
        th.join()
    for mine, numbas, want in seen:
        assert mine == numbas and (want is None or mine == want)


def test_first_bound_parallel_call_loads_one_driver():
    """A bound kernel's first call on two threads runs (and so loads from the disk cache,
    7-10 ms) only the bound parallel driver, not also the checked one; its result is exact.
    A fresh process: in this one other tests have called both drivers already."""
    import os
    import subprocess
    import sys
    import textwrap
    from pathlib import Path

    code = textwrap.dedent("""
        import numba, numpy as np
        import layoutjit as lj
        from layoutjit import runtime
        s = lj.MemoryDesc([64, 40, 30, 20], "f32", "nchw")
        k = lj.compile_reorder(s, lj.MemoryDesc([64, 40, 30, 20], "f32", "nhwc"))
        x = np.arange(64 * 40 * 30 * 20, dtype=np.float32)
        b = k.bind(x)
        numba.set_num_threads(2)
        b()
        want = x.reshape(64, 40, 30, 20).transpose(0, 2, 3, 1).ravel()
        print(int(np.array_equal(b.dst, want)), len(runtime.run_parallel.signatures),
              len(runtime.run_parallel_bound.signatures), k._jobs > 1, k._serial)
    """)
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, NUMBA_NUM_THREADS="2", PYTHONPATH=str(root))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180,
                       env=env, cwd=str(root))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "0", "1", "True", "False"]

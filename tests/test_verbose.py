"""``LAYOUTJIT_VERBOSE=1``: one ``layoutjit,...`` line per compile, cache hit, disk load and run.

The end-to-end test runs two fresh processes on one private cache directory:
the first compiles (then hits the in-memory cache, then runs the kernel), the
second loads the same kernel from disk.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np

import layoutjit as lj
from layoutjit import verbose

SCRIPT = textwrap.dedent("""
    import numpy as np
    import layoutjit as lj
    src = lj.MemoryDesc([3, 5, 7], "f32", "abc")
    dst = lj.MemoryDesc([3, 5, 7], "f32", "cab")
    k = lj.compile_reorder(src, dst)
    k2 = lj.compile_reorder(src, dst)
    out = k(np.arange(105, dtype=np.float32))
    print("ok", float(out[1]))
""")


def _fields(line: str) -> list[str]:
    f = line.split(",")
    assert len(f) == 8, line
    return f


def _run(cache: str) -> list[list[str]]:
    env = dict(os.environ, LAYOUTJIT_VERBOSE="1", LAYOUTJIT_CACHE_DIR=cache)
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok 7.0"  # cab: offset 1 is (a, b, c) = (0, 1, 0)
    return [_fields(ln) for ln in r.stderr.splitlines() if ln.startswith("layoutjit,")]


def test_verbose_compile_hit_exec_then_disk_load(tmp_path):
    first = _run(str(tmp_path))
    events = [f[1] for f in first]
    assert events == ["compile", "cache hit", "exec"], first
    for f in first:
        assert f[0] == "layoutjit"
        assert f[2] == "reorder"
        # dtype:tag, the tag by its preferred (alias) name
        assert f[3] == "f32:" + lj.MemoryDesc([3, 5, 7], "f32", "abc").tag == "f32:ncw"
        assert f[4] == "f32:" + str(lj.MemoryDesc([3, 5, 7], "f32", "cab").tag)
        assert f[5] == "3x5x7"
        assert f[6] == ""  # no attributes
        assert float(f[7]) >= 0.0  # milliseconds
    second = _run(str(tmp_path))
    assert [f[1] for f in second] == ["disk load", "cache hit", "exec"], second


def test_set_verbose_at_run_time(capsys):
    md = lj.MemoryDesc([1, 3, 1, 2], "f32", "nChw8c")
    relu = lj.compile_eltwise(md, "relu")
    k = lj.compile_reorder(lj.MemoryDesc([1, 3, 1, 2], "f32", "nchw"), md,
                           scales={"src": 0})
    was = verbose.enabled
    lj.set_verbose(True)
    try:
        buf = np.zeros(md.get_size() // 4, np.float32)
        relu(buf, buf)
        k(np.ones(6, np.float32), buf, scales={"src": np.array([2.0], np.float32)})
        lj.compile_eltwise(md, "relu")
        sub = lj.MemoryDesc([2, 32, 1, 1], "f32", "nChw16c").submemory_desc([2, 16, 1, 1], [0, 16, 0, 0])
        assert verbose.line("compile", "reorder", sub, sub, "", 1.5).split(",")[3] == \
            "f32:strides=32x16x16x16:blocks=16b:off0=16"
    finally:
        lj.set_verbose(was)
    err = capsys.readouterr().err.splitlines()
    lines = [_fields(ln) for ln in err if ln.startswith("layoutjit,")]
    assert [f[1] for f in lines] == ["exec", "exec", "cache hit"]
    assert lines[0][2] == "eltwise" and lines[0][6] == "post_ops:eltwise_relu:0:0"
    assert lines[1][2] == "reorder" and lines[1][6] == "scales:src:0"
    assert lines[1][3] == "f32:nchw" and lines[1][4] == "f32:nChw8c"
    # off: nothing is printed
    relu(buf, buf)
    assert "layoutjit," not in capsys.readouterr().err

"""The command line (``python -m layoutjit``) and ``layoutjit.explain``.

Most checks call ``layoutjit.cli.main`` in-process (fast: kernels are shared
through the in-memory cache); two run the real ``python -m layoutjit`` in a
subprocess to check the entry point, the exit status and that user errors
print one line and no traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import layoutjit as lj
from layoutjit.cli import alias_group, main, parse_dims
from layoutjit.explain import (
    describe_md,
    describe_tag,
    digit_nest,
    explain,
    explain_kernel,
    memory_picture,
    tag_letters,
    tiny_dims,
)
from layoutjit.tags import aliases, parse_tag

ROOT = Path(__file__).resolve().parents[1]


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        rc = main(list(argv))
    except SystemExit as e:  # argparse: --help, usage errors
        rc = int(e.code or 0)
    out, err = capsys.readouterr()
    return rc, out, err


def run_module(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "layoutjit", *argv], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=120)


# -------------------------------------------------------------------- explain
def test_explain_nchw_to_nChw16c_shows_padding_ir_plan_and_source(capsys):
    rc, out, err = run_main(capsys, "explain", "--dims", "2x17x5x4", "nchw", "nChw16c")
    assert rc == 0, err
    # both descriptors, with the padded C of 32, strides and blocks
    assert "src: MemoryDesc(f32, 2x17x5x4, nchw)" in out
    assert "dst: MemoryDesc(f32, 2x17x5x4, nChw16c)" in out
    assert "padded dims   2x32x5x4  (b: 17 -> 32, zero padding)" in out
    assert "strides       640x320x64x16" in out
    assert "strides       340x20x4x1" in out
    assert "inner blocks  16b" in out
    assert "size          5120 B" in out
    # IR, plan, generated source
    assert "== IR" in out and "dim b: data in [0, 17), zeros in [17, 32)" in out
    assert "== plan" in out and "micro-kernel:" in out and "parallel:" in out
    assert "== generated source" in out and "def kernel(" in out
    # the source printed is the kernel's source
    k = lj.compile_reorder(lj.MemoryDesc([2, 17, 5, 4], "f32", "nchw"),
                           lj.MemoryDesc([2, 17, 5, 4], "f32", "nChw16c"))
    assert k.source.rstrip("\n") in out
    assert k.explain() == out


def test_explain_conversion_and_options(capsys):
    rc, out, _ = run_main(capsys, "explain", "--dims", "2x17x5x4", "--sdt", "f32", "--ddt", "bf16",
                          "--no-source", "nchw", "nChw16c")
    assert rc == 0
    assert "dst: MemoryDesc(bf16, 2x17x5x4, nChw16c)" in out
    assert "data type     bf16 (2 B per element)" in out
    assert "def kernel(" not in out and "== plan" in out
    # default dims come from the tag's ndims; abstract tags work like aliases
    rc, out, _ = run_main(capsys, "explain", "--no-source", "abcd", "aBcd8b")
    assert rc == 0 and "padded dims   2x24x5x4" in out


def test_explain_kernel_variants():
    md = lj.MemoryDesc([1, 3, 1, 2], "f32", "nChw8c")
    text = lj.compile_eltwise(md, "relu").explain()
    assert text.startswith("== eltwise:") and "data: MemoryDesc(f32, 1x3x1x2, nChw8c)" in text
    assert "attributes: post_ops:eltwise_relu" in text
    zero = lj.compile_reorder(lj.MemoryDesc([0, 3], "f32", "ab"), lj.MemoryDesc([0, 3], "f32", "ba"))
    assert "zero-volume" in explain_kernel(zero)
    sub = lj.MemoryDesc([2, 32, 1, 2], "f32", "nChw16c").submemory_desc([2, 16, 1, 2], [0, 16, 0, 0])
    text = explain(lj.MemoryDesc([2, 16, 1, 2], "f32", "nchw"), sub)
    assert "tag           none" in text and "offset0       32 elements" in text


def test_describe_md_plain_and_view():
    text = describe_md(lj.MemoryDesc([2, 3], "s8", "ba"), "x")
    assert text.splitlines()[0] == "x: MemoryDesc(s8, 2x3, cn)"
    assert "(no padding)" in text and "inner blocks  none" in text and "size          6 B" in text
    assert "format kind   any" in describe_md(lj.MemoryDesc([2, 3], "f32", "any"))


# ----------------------------------------------------------------------- tags
def test_tags_list_is_grouped_with_counts(capsys):
    rc, out, _ = run_main(capsys, "tags")
    assert rc == 0
    n = len(aliases())
    assert out.startswith(f"{n} aliases of oneDNN's")
    counts = {}
    for line in out.splitlines():
        if line and not line.startswith(" ") and "alias" in line and ":" in line and "abstract" not in line:
            title, _, rest = line.rpartition(": ")
            counts[title] = int(rest.split()[0])
    assert sum(counts.values()) == n
    assert counts["weights (o, i, spatial dims)"] > 100
    tokens = set(out.split())
    assert {"nchw", "nChw16c", "OIhw16i16o", "gOIhw16i16o", "ldigo", "x"} <= tokens
    assert "abstract tags:" in out


def test_tags_grep_long_and_abstract(capsys):
    rc, out, _ = run_main(capsys, "tags", "--grep", "nChw16c", "--long")
    assert rc == 0 and "nChw16c" in out and "aBcd16b" in out
    rc, out, _ = run_main(capsys, "tags", "--abstract", "--grep", "ABcd8a16b2a")
    assert rc == 0 and "ABcd8a16b2a" in out and "OIhw8o16i2o" in out
    rc, _, err = run_main(capsys, "tags", "--grep", "no-such-tag")
    assert rc == 1 and "no alias" in err


def test_tags_name_describes_one(capsys):
    rc, out, _ = run_main(capsys, "tags", "nChw16c")
    assert rc == 0
    assert out.startswith("nChw16c: alias of the abstract tag aBcd16b")
    assert "ndims         4" in out and "n=a c=b h=c w=d" in out
    assert "padded dims   2x32x5x4" in out and "strides       640x320x64x16" in out
    assert "memory nests  a > b//16 > c > d > b%16" in out
    assert "memory order of a 2x3x2x2 tensor (padded 2x16x2x2, 128 slots)" in out
    assert "     0:  0000 0100 0200 ---- ----" in out  # padding marked after 3 channels
    rc, out, _ = run_main(capsys, "tags", "ABcd8a16b2a", "--dims", "3x3x1x1")
    assert rc == 0 and "abstract tag (alias OIhw8o16i2o)" in out
    assert "a//16 > b//16 > c > d > (a//2)%8 > b%16 > a%2" in out
    assert "padded dims   16x16x1x1" in out
    rc, out, _ = run_main(capsys, "tags", "any")
    assert rc == 0 and "placeholder" in out


def test_memory_picture_matches_offsets():
    md = lj.MemoryDesc([1, 3, 1, 2], "f32", "nChw4c")
    assert memory_picture(md).splitlines()[1:] == ["   0:  0000 0100 0200 ----",
                                                   "   4:  0001 0101 0201 ----"]
    # every drawn cell is the index whose offset is that slot
    md = lj.MemoryDesc([3, 2, 2], "f32", "Acb2a")
    lines = memory_picture(md, width=4).splitlines()[1:]
    for line in lines:
        start, cells = line.split(":", 1)
        for k, cell in enumerate(cells.split()):
            if set(cell) != {"-"}:
                assert md.offset_of([int(c) for c in cell]) == int(start) + k


def test_tag_helpers():
    assert digit_nest(parse_tag("ABcd8a16b2a")) == ['a//16', 'b//16', 'c', 'd', '(a//2)%8', 'b%16', 'a%2']
    assert tag_letters("gOIhw16i16o") == "goihw" and tag_letters("abcd") is None
    assert tiny_dims("OIhw16i16o") == (3, 3, 2, 1)
    assert alias_group("ldgOi16o") == "rnn" and alias_group("tnc") == "data"
    assert parse_dims("2x17x5x4") == parse_dims("2,17,5,4") == (2, 17, 5, 4)
    with pytest.raises(lj.LayoutError, match="has 4 dims"):
        describe_tag("nchw", (2, 3))


# ---------------------------------------------------------------- cache, bench
def test_cache_reports_and_clears(capsys, tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("LAYOUTJIT_CACHE_DIR", str(d))
    rc, out, _ = run_main(capsys, "cache")
    assert rc == 0 and str(d) in out and "does not exist yet" in out and "kernels          0" in out
    (d / "__pycache__").mkdir(parents=True)
    for name in ("lj_aaaa.py", "lj_bbbb.py"):
        (d / name).write_text("x = 1\n")
    (d / "__pycache__" / "lj_aaaa.kernel-1.py310.nbi").write_bytes(b"0" * 2000)
    rc, out, _ = run_main(capsys, "cache")
    assert "kernels          2" in out and "KiB" in out and "from LAYOUTJIT_CACHE_DIR" in out
    rc, out, _ = run_main(capsys, "cache", "--path")
    assert out.strip() == str(d)
    rc, out, _ = run_main(capsys, "cache", "--clear")
    assert rc == 0 and "removed 3 file(s)" in out
    assert not list(d.glob("lj_*")) and not list((d / "__pycache__").iterdir())


def test_bench_smoke_runs_the_perf_harness(capsys, tmp_path):
    rc, out, _ = run_main(capsys, "bench", "--smoke", "--list")
    assert rc == 0 and "smoke_ab-ba" in out and "cases (smoke)" in out
    rc, out, err = run_main(capsys, "bench", "--smoke", "--cases", "smoke_ab-ba", "--threads", "1",
                            "--out", str(tmp_path), "--", "--peers", "layoutjit", "--no-charts")
    assert rc == 0, out + err
    assert "lj/copy" in out and (tmp_path / "results.json").is_file()


# ------------------------------------------------------------- errors and help
@pytest.mark.parametrize("argv, needle", [
    (["explain", "nchw", "nosuchtag"], "not a format tag"),
    (["explain", "--dims", "2x17x5", "nchw", "nChw16c"], "has 4 dims"),
    (["explain", "nchw", "nc"], "has 2 dims"),
    (["explain", "--dims", "2xAx5x4", "nchw", "nhwc"], "--dims"),
    (["explain", "--sdt", "f33", "nchw", "nhwc"], "invalid choice"),
    (["explain", "nchw"], "required"),
    (["tags", "zz"], "not a format tag"),
    (["tags", "nchw", "--dims", "2x3"], "has 4 dims"),
    (["frobnicate"], "invalid choice"),
    ([], "choose a command"),
])
def test_user_errors_are_one_line_exit_2(capsys, argv, needle):
    rc, out, err = run_main(capsys, *argv)
    assert rc == 2
    assert needle in err
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err


@pytest.mark.parametrize("cmd", [[], ["explain"], ["tags"], ["bench"], ["cache"]])
def test_help_on_every_command(capsys, cmd):
    rc, out, _ = run_main(capsys, *cmd, "--help")
    assert rc == 0 and out.startswith("usage: layoutjit")
    assert "examples:" in out or "--clear" in out


def test_python_dash_m_entry_point():
    env = dict(os.environ)
    r = run_module("explain", "--dims", "2x17x5x4", "nchw", "nChw16c", env=env)
    assert r.returncode == 0, r.stderr
    assert "2x32x5x4" in r.stdout and "def kernel(" in r.stdout
    r = run_module("explain", "--dims", "2x17x5x4", "nchw", "nosuchtag", env=env)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert r.stderr.startswith("layoutjit explain: error:")


def test_kernel_explain_is_the_cli_text():
    k = lj.compile_reorder(lj.MemoryDesc([4, 3], "f32", "ab"), lj.MemoryDesc([4, 3], "f32", "ba"))
    assert k.explain() == explain(k.src_md, k.dst_md)
    assert np.array_equal(k(np.arange(12, dtype=np.float32)), np.arange(12.0).reshape(4, 3).T.ravel())

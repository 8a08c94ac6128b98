"""Smoke tests of the performance harness in ``perf/`` (``python -m perf``).

They pass whether or not ``layoutjit.compile_reorder`` exists (its column is
then reported unavailable) and whether or not torch / oneDNN are installed.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import layoutjit as lj

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perf import cases as C  # noqa: E402
from perf import layout as L  # noqa: E402
from perf.buffers import aligned_empty, compare_outputs  # noqa: E402
from perf.peers import Job, TorchPeer, numpy_reorder  # noqa: E402
from perf.runner import make_source  # noqa: E402

try:
    import ml_dtypes

    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover
    BF16 = None


# ----------------------------------------------------------------- reference
def elem_offset(md, pos) -> int:
    """Element offset of logical index ``pos`` from MemoryDesc fields (oneDNN's off_v)."""
    p = list(pos)
    off = md.offset0
    bs = 1
    for blk, d in zip(reversed(md.inner_blks), reversed(md.inner_idxs)):
        off += (p[d] % blk) * bs
        p[d] //= blk
        bs *= blk
    return off + sum(i * s for i, s in zip(p, md.strides))


def values(x: np.ndarray, dt: str) -> np.ndarray:
    """Storage -> float64 values (every type here fits in a double exactly)."""
    if dt == "bf16":
        return x.view(BF16).astype(np.float64)
    if dt == "f16":
        return x.view(np.float16).astype(np.float64)
    return x.astype(np.float64)


INT_RANGE = {"s8": (-128, 127, np.int8), "u8": (0, 255, np.uint8),
             "s32": (-(1 << 31), (1 << 31) - 1, np.int32)}


def convert(x: np.ndarray, sdt: str, dt: str) -> np.ndarray:
    v = values(x, sdt)
    if dt == "f32":
        return v.astype(np.float32)
    if dt == "bf16":
        return v.astype(BF16).view(np.uint16)
    if dt == "f16":
        return v.astype(np.float16).view(np.uint16)
    lo, hi, nt = INT_RANGE[dt]
    return np.clip(np.rint(v), lo, hi).astype(nt)


def reference_reorder(src_md, dst_md, src: np.ndarray) -> np.ndarray:
    """Element by element: dst[off_dst(x)] = convert(src[off_src(x)]); everything else 0."""
    dst = np.zeros(dst_md.get_size() // dst_md.dtype.size, dst_md.dtype.storage)
    idx = list(itertools.product(*[range(n) for n in src_md.dims]))
    so = np.array([elem_offset(src_md, i) for i in idx], dtype=np.int64)
    do = np.array([elem_offset(dst_md, i) for i in idx], dtype=np.int64)
    assert len(set(do.tolist())) == len(do)
    dst[do] = convert(src[so], str(src_md.dtype), str(dst_md.dtype))
    return dst


PAIRS = [((2, 17, 5, 3), "nchw", "nChw16c", "f32", "f32"),
         ((2, 17, 5, 3), "nChw16c", "nhwc", "f32", "f32"),
         ((2, 20, 3, 2), "nChw8c", "nChw16c", "f32", "f32"),
         ((2, 20, 3, 2), "nChw16c", "nChw8c", "f32", "f32"),
         ((20, 17, 3, 3), "oihw", "OIhw4i16o4i", "f32", "f32"),
         ((33, 20, 1, 2), "OIhw16i16o", "OIhw4i16o4i", "f32", "f32"),
         ((3, 17, 20, 3, 3), "goihw", "gOIhw16i16o", "f32", "f32"),
         ((2, 5, 3, 4, 3), "ncdhw", "ndhwc", "f32", "f32"),
         ((13, 7), "ab", "ba", "f32", "f32"),
         ((2, 3, 7), "ncw", "nwc", "f32", "f32"),
         ((2, 17, 5, 3), "nchw", "nChw8c", "f32", "bf16"),
         ((2, 33, 3, 3), "nhwc", "nChw16c", "f32", "s8"),
         ((2, 8, 3, 3), "nhwc", "nhwc", "f32", "s8"),
         # the general conversion rule: floats round once to nearest even, integers saturate
         ((2, 19, 3, 2), "nChw16c", "nchw", "s8", "f32"),
         ((2, 19, 3, 2), "nchw", "nhwc", "u8", "f32"),
         ((2, 19, 3, 2), "nchw", "nhwc", "f32", "f16"),
         ((2, 19, 3, 2), "nChw16c", "nhwc", "f16", "f32"),
         ((2, 19, 3, 2), "nchw", "nChw16c", "bf16", "s8"),
         ((2, 19, 3, 2), "nchw", "nhwc", "s8", "u8"),
         ((2, 19, 3, 2), "nchw", "nhwc", "f32", "s32"),
         ((2, 19, 3, 2), "nchw", "nhwc", "s32", "f32")]


@pytest.mark.parametrize("dims,st,dt,sdt,ddt", PAIRS + [
    (c.dims, c.src_tag, c.dst_tag, c.src_dtype, c.dst_dtype) for c in C.SMOKE_CASES])
def test_numpy_peer_matches_elementwise_reference(dims, st, dt, sdt, ddt):
    check_peer(lambda smd, dmd, src, dst: numpy_reorder(smd, dmd, src, dst, bf16=BF16).fn(),
               dims, st, dt, sdt, ddt)


def check_peer(run, dims, st, dt, sdt, ddt) -> None:
    """``run(src_md, dst_md, src, dst)`` (a peer's reorder) equals the element-wise one."""
    if "bf16" in (sdt, ddt) and BF16 is None:
        pytest.skip("ml_dtypes not installed")
    smd = lj.MemoryDesc(list(dims), sdt, st)
    dmd = lj.MemoryDesc(list(dims), ddt, dt)
    src = make_source(smd, seed=7)
    dst = aligned_empty(dmd.get_size(), dmd.dtype.storage)
    dst.view(np.uint8).fill(0xA5)  # garbage: padding must be zeroed by the peer
    run(smd, dmd, src, dst)
    ref = reference_reorder(smd, dmd, src)
    assert compare_outputs(ref, dst, ddt)["status"] == "exact"


@pytest.mark.parametrize("dims,st,dt,sdt,ddt", PAIRS)
def test_torch_peer_matches_elementwise_reference(dims, st, dt, sdt, ddt):
    peer = TorchPeer()
    if not peer.available:
        pytest.skip("torch not installed")
    check_peer(lambda smd, dmd, src, dst: peer.prepare(Job(None, smd, dmd, src, dst, 1)).fn(),
               dims, st, dt, sdt, ddt)


def test_range_boxes_cover_exactly():
    weights = [1, 4, 16]
    for lo, hi in [(0, 17), (3, 45), (5, 6), (16, 32), (0, 64), (17, 100)]:
        got = []
        for box in L.range_boxes(lo, hi, weights):
            ranges = [range(s, s + n) for s, n in box]
            for digits in itertools.product(*ranges):
                got.append(sum(d * w for d, w in zip(digits, weights)))
        assert sorted(got) == list(range(lo, hi))


def test_padding_boxes_are_exactly_the_padding():
    md = lj.MemoryDesc([3, 17, 2, 5], "f32", "OIhw4i16o4i")
    n = md.get_size() // 4
    mark = np.zeros(n, np.int32)
    for b in L.padding_boxes(md):
        L.np_view(mark, b, 0)[...] += 1
    for i in itertools.product(*[range(k) for k in md.dims]):
        mark[elem_offset(md, i)] += 10
    assert set(np.unique(mark).tolist()) <= {1, 10}  # each position once, padding or logical
    assert (mark == 10).sum() == md.nelems


def test_case_list():
    names = [c.name for c in C.CASES + C.SMOKE_CASES]
    assert len(names) == len(set(names))
    quick = C.select(mode="quick")
    assert quick and all(c.quick and not c.huge for c in quick)
    groups = {c.group for c in C.CASES}
    assert {"transpose", "blocked", "weights", "convert", "small", "image", "padding"} <= groups
    sizes = {}
    for c in C.CASES:
        sb, db = C.case_bytes(c)
        sizes[c.name] = (sb, db)
        if c.group == "small":
            assert max(sb, db) <= 64 * 1024, c.name
    assert any(c.huge and sum(sizes[c.name]) >= 2 << 30 for c in C.CASES)
    assert C.select(mode="quick", substring="small")


def test_case_spec_parses_and_rejects():
    c = C.parse_spec("8x17x5x3:nchw:nChw16c:f32:bf16")
    assert (c.dims, c.src_tag, c.dst_tag, c.src_dtype, c.dst_dtype, c.group) == (
        (8, 17, 5, 3), "nchw", "nChw16c", "f32", "bf16", "custom")
    assert C.case_bytes(c) == (8 * 17 * 15 * 4, 8 * 32 * 15 * 2)
    c = C.parse_spec("13x7:ab:ba:s8")
    assert (c.src_dtype, c.dst_dtype, c.name) == ("s8", "s8", "ab-ba_13x7_s8")
    for bad, word in [("13x7:ab", "DIMS:SRC:DST"), ("13xq:ab:ba", "not integers"),
                      ("0x7:ab:ba", "positive"), ("13x7:ab:bax", "bax"),
                      ("13x7:ab:ba:f33", "f33"), ("13x7x2:ab:ba", "ba")]:
        with pytest.raises(ValueError, match=word):
            C.parse_spec(bad)


def test_case_option_lists_the_given_pairs():
    cmd = [sys.executable, "-m", "perf", "--case", "64x96x28x28:nchw:nChw16c:f32:bf16",
           "--case", "13x7:ab:ba", "--list"]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "nchw-nChw16c_64x96x28x28_f32-bf16" in p.stdout and "ab-ba_13x7_f32" in p.stdout
    assert "2 cases (--case)" in p.stdout
    p = subprocess.run(cmd[:3] + ["--case", "13x7:ab:bq"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 2 and "'bq'" in p.stderr
    for name, n in [("pairs_outside", 52), ("pairs_more", 36), ("pairs_fresh", 82), ("pairs_conv", 30),
                    ("pairs_stand", 22), ("pairs_sweep", 17), ("pairs_random", 16), ("pairs_tags", 16),
                    ("pairs_kinds", 16), ("pairs_xeon", 54)]:
        p = subprocess.run([sys.executable, "-m", "perf", "--case-file", f"perf/{name}.txt", "--list"],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0 and f"{n} cases (--case)" in p.stdout, (name, p.stderr)
    p = subprocess.run([sys.executable, "-m", "perf", "--case-file", "no/such/file", "--list"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "--case-file" in p.stderr


def test_onednn_header_enums():
    from perf.onednn import DnnlError, OneDNN

    try:
        d = OneDNN()
    except DnnlError as e:
        pytest.skip(f"oneDNN unavailable: {e}")
    tags = d.format_tags
    assert tags["dnnl_nChw16c"] == tags["dnnl_aBcd16b"]
    assert tags["dnnl_nchw"] == tags["dnnl_abcd"]
    assert d.data_types["dnnl_f32"] == 3
    md, _ = d.memory_desc([2, 17, 5, 3], "f32", "nChw16c")
    assert d.md_size(md) == lj.MemoryDesc([2, 17, 5, 3], "f32", "nChw16c").get_size()
    d.destroy_md(md)


def test_smoke_run_writes_json(tmp_path):
    out = tmp_path / "perf"
    cmd = [sys.executable, "-m", "perf", "--smoke", "--out", str(out), "--threads", "1,2",
           "--cases", "smoke_nchw-nChw16c_c17,smoke_oihw,smoke_f32-s8"]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    doc = json.loads((out / "results.json").read_text())
    for key in ("machine", "software", "settings", "peers", "cases", "summary", "definitions"):
        assert key in doc
    assert doc["mode"] == "smoke"
    assert doc["machine"]["logical_cpus"] >= 1
    assert "numba_threading_layer" in doc["software"]
    peers = doc["peers"]
    assert set(peers) == {"layoutjit", "numpy", "torch", "onednn"}
    assert peers["numpy"]["available"]
    for info in peers.values():
        assert info["available"] or info["note"]  # unavailable peers say why
    has_lj = hasattr(lj, "compile_reorder")
    assert peers["layoutjit"]["available"] == has_lj
    assert len(doc["cases"]) == 3
    thr = [1, 2] if doc["software"]["numba_num_threads"] >= 2 else [1]
    for c in doc["cases"]:
        assert "error" not in c, c.get("error")
        assert c["src_bytes"] > 0 and c["dst_bytes"] > 0
        assert c["copy_bytes"] == (c["src_bytes"] + c["dst_bytes"]) // 2
        assert c["verify"]["numpy"]["status"] == "reference"
        for n, v in c["verify"].items():
            assert v["status"] in ("reference", "exact", "within_rules"), (c["name"], n, v)
        assert [r["threads"] for r in c["results"]] == thr
        for r in c["results"]:
            assert r["copy"]["median_s"] > 0
            names = set(r["contenders"])
            assert "numpy" in names
            assert ("layoutjit" in names) == (has_lj and "layoutjit" not in c["peer_errors"])
            assert 0 < r["copy"]["cpu_threads"] <= 2.6
            for n, v in r["contenders"].items():
                assert v["median_s"] > 0 and v["ratio"] > 0 and len(v["times_s"]) >= 1
                assert r["ratios"][f"{n}/copy"] == pytest.approx(v["ratio"])
                assert 0 < v["cpu_threads"] <= 2.6
    assert isinstance(doc["summary"]["over_threads"], list)
    s = doc["summary"]["by_threads"]
    assert set(s) == {str(t) for t in thr}
    assert (out / "table.txt").exists()
    try:
        import matplotlib  # noqa: F401

        assert (out / "ratio_to_copy.png").exists() and (out / "time_vs_size.png").exists()
    except ImportError:
        pass


def test_store_choices_are_reported():
    """Kernels that time plain against NT stores at run time (``Plan.nt_tune``) report what
    they kept at each thread count beside their times, and the summary counts the kinds."""
    from layoutjit.store_choice import StoreChoice
    from perf.peers import _store_choice
    from perf.report import summarize, summary_text

    class K:
        store_choice: StoreChoice | None = None

    k = K()
    assert _store_choice(k, 2) == {}  # a kernel without a timed choice
    k.store_choice = StoreChoice(8)
    assert _store_choice(k, 2) == {"stores": "not chosen yet"}
    k.store_choice.medians[2] = (2e-3, 1e-3)
    assert _store_choice(k, 2) == {"stores": "nt", "plain_ms": 2.0, "nt_ms": 1.0}
    assert _store_choice(k, 1) == {}  # one thread: the plan's rule, never timed
    k.store_choice.medians[2] = (1e-3, 2e-3)
    assert _store_choice(k, 2)["stores"] == "plain"
    cases = [{"name": f"c{i}", "results": [{"threads": 2, "ratios": {}, "copy": {},
                                            "contenders": {"layoutjit": {"stores": kind}}}]}
             for i, kind in enumerate(("nt", "plain", "nt"))]
    summary = summarize(cases, (2,), {})
    assert [o["stores"] for o in summary["store_choices"]] == ["nt", "plain", "nt"]
    text = summary_text(summary, {"layoutjit": {"available": True}})
    assert "stores timed at run time (Plan.nt_tune), kept: nt x2, plain x1" in text


def test_store_choice_settles_in_the_warm_up():
    """The layoutjit peer calls a kernel that times its store kinds until it has kept one at
    the phase's thread count (bounded), so the timed rounds measure the kept kind; kernels
    without a timed choice, and one thread where only NT is used, take no extra calls."""
    from layoutjit.store_choice import StoreChoice, calls_to_choose
    from perf.peers import settle_store_choice

    class K:
        store_choice: StoreChoice | None = None

    def caller(k, n, calls):
        def call():
            calls.append(n)
            base, t0 = k.store_choice.start(n)
            k.store_choice.finish(n, base, t0)
        return call

    k, calls = K(), []
    assert settle_store_choice(k, lambda: calls.append(0), 2) == 0 and calls == []
    k.store_choice = StoreChoice(8)
    assert settle_store_choice(k, caller(k, 1, calls), 1) == 0  # one thread: NT, never timed
    made = settle_store_choice(k, caller(k, 2, calls), 2)
    assert made == calls_to_choose() == len(calls) and k.store_choice.kept(2) is not None
    assert settle_store_choice(k, caller(k, 2, calls), 2) == 0  # kept: nothing more
    k1 = K()
    k1.store_choice = StoreChoice(8, one_thread=True)
    assert settle_store_choice(k1, caller(k1, 1, []), 1) == calls_to_choose()
    stuck = K()  # a choice that never settles (the pool has fewer threads): bounded
    stuck.store_choice = StoreChoice(8)
    assert settle_store_choice(stuck, lambda: None, 2) == calls_to_choose() + 2


def test_cpu_threads_counts_the_cpus_kept_busy():
    """The CPU check: a 1-thread busy loop uses ~1 CPU, a sleep ~0; the summary lists a
    contender above its phase's thread count."""
    import time

    from perf.report import summarize
    from perf.timing import cpu_threads

    # the arithmetic, on clocks the test drives: each call advances wall time by 1 ms and
    # CPU time by `busy` ms, so the result is exactly `busy`, however loaded the machine is
    clock = {"cpu": 0.0, "wall": 0.0}

    def call(busy):
        def fn():
            clock["wall"] += 1e-3
            clock["cpu"] += busy * 1e-3
        return fn

    for busy in (0.0, 1.0, 2.0):
        got = cpu_threads(call(busy), 0.01, lambda: clock["cpu"], lambda: clock["wall"])
        assert got == pytest.approx(busy)

    # the real clocks: a spinning thread keeps more CPU busy than a sleeping one (no bound
    # on how much: CI machines share their CPUs and a spin may get half of one)
    def spin():
        t = time.perf_counter() + 1e-3
        while time.perf_counter() < t:
            pass

    assert max(cpu_threads(spin) for _ in range(3)) > min(
        cpu_threads(lambda: time.sleep(1e-3)) for _ in range(3))
    res = {"threads": 1, "copy": {"cpu_threads": 1.0},
           "contenders": {"onednn": {"cpu_threads": 1.9}, "numpy": {"cpu_threads": 1.0}}}
    over = summarize([{"name": "c", "results": [res]}], (1,), {})["over_threads"]
    assert over == [{"case": "c", "threads": 1, "peer": "onednn", "cpu_threads": 1.9}]


def test_slow_peers_are_timed_in_a_few_rounds():
    """A contender over SLOW_RATIO x the copy on its first two calls is timed
    in SLOW_ROUNDS rounds; the others get every round; the report names the slow one."""
    import time

    from perf import timing
    from perf.report import summarize, summary_text

    calls = {"copy": 0, "fast": 0, "slow": 0}

    def sleeper(name, s):
        def f():
            calls[name] += 1
            t = time.perf_counter() + s
            while time.perf_counter() < t:
                pass
        return f

    res = timing.paired(sleeper("copy", 2e-4), {"fast": sleeper("fast", 3e-4),
                                                "slow": sleeper("slow", 2e-4 * 4 * timing.SLOW_RATIO)},
                        repeats=7, warmup=2, min_sample_s=0.0)
    fast, slow = res["contenders"]["fast"], res["contenders"]["slow"]
    assert len(fast["times_s"]) == 7 and not fast["slow"]
    assert len(slow["times_s"]) == timing.SLOW_ROUNDS and slow["slow"]
    assert slow["ratio"] > timing.SLOW_RATIO
    # two probe calls, SLOW_ROUNDS timed calls, and the CPU check's two calls (the slow one
    # takes 4 x SLOW_RATIO x the copy: a copy call slowed by a busy machine must not hide it)
    assert calls["slow"] == 2 + timing.SLOW_ROUNDS + 2
    res["threads"] = 1
    s = summarize([{"name": "c", "results": [res]}], (1,), {})
    assert s["slow_peers"] == [{"case": "c", "threads": 1, "peer": "slow"}]
    assert "slow peers" in summary_text(s, {})


def test_a_slow_first_call_alone_does_not_make_a_slow_peer():
    """One-time costs on a first call (layoutjit loads its 2-thread drivers on its first
    call at 2 threads: 7-10 ms, over SLOW_RATIO x a 3 MB copy) must not get a contender
    timed without warm-up in SLOW_ROUNDS rounds: it is timed in every round."""
    import time

    from perf import timing

    calls = {"n": 0}

    def spin(s):
        t = time.perf_counter() + s
        while time.perf_counter() < t:
            pass

    def first_slow():
        calls["n"] += 1
        spin(2e-4 * 4 * timing.SLOW_RATIO if calls["n"] == 1 else 3e-4)

    res = timing.paired(lambda: spin(2e-4), {"lj": first_slow}, repeats=7, warmup=2, min_sample_s=0.0)
    lj = res["contenders"]["lj"]
    assert not lj["slow"] and len(lj["times_s"]) == 7
    assert lj["ratio"] < 0.5 * timing.SLOW_RATIO


def test_compare_outputs_tells_flushed_denormals_from_wrong_values():
    """oneDNN's bf16 reference reorder flushes denormals (and writes some -0 as +0):
    reported as such, not as wrong; a zero where the reference is a normal number, or
    another denormal, stays a mismatch."""
    ref = np.array([0x0069, 0x8001, 0x8000, 0x3F80], np.uint16)  # denormal, -denormal, -0, 1.0
    out = np.array([0x0000, 0x8000, 0x0000, 0x3F80], np.uint16)
    assert compare_outputs(ref, out, "bf16")["status"] == "denormals_flushed"
    assert compare_outputs(ref, np.array([0, 0, 0, 0], np.uint16), "bf16")["status"] == "mismatch"
    assert compare_outputs(ref, np.array([0x0068, 0, 0, 0x3F80], np.uint16), "bf16")["status"] == "mismatch"
    f = np.array([1e-40, 2.0], np.float32)
    assert compare_outputs(f, np.array([-0.0, 2.0], np.float32), "f32")["status"] == "denormals_flushed"
    assert compare_outputs(f, np.array([0.0, 0.0], np.float32), "f32")["status"] == "mismatch"


def test_access_pattern_probe_runs_and_checks_what_it_moved(tmp_path, capsys):
    """``python -m perf.patterns`` on a small buffer: every pattern is timed, moved each
    source element once, and lands in the JSON; a pattern that skips lines is caught."""
    from perf import patterns

    out = tmp_path / "patterns.json"
    rc = patterns.main(["--mb", "2", "--rows", "2,4", "--lines", "1,2", "--row-stride", "4096",
                        "--dst-row", "1024", "--repeats", "1", "--json", str(out)])
    assert rc == 0
    res = json.loads(out.read_text())
    assert set(res["ratio"]) == {"nt_copy", "read_rows 2", "read_rows 4", "write_lines 1", "write_lines 2"}
    assert all(np.isfinite(v) and v > 0 for v in res["ratio"].values())
    assert "write_lines 2" in capsys.readouterr().out

    src = np.arange(64, dtype=np.float32)
    dst = src.copy()
    patterns.check_moved("copy", src, dst)
    dst[16:32] = dst[:16]  # a line written twice, another never
    with pytest.raises(RuntimeError, match="did not move"):
        patterns.check_moved("bad", src, dst)
    dst[:] = -1.0
    with pytest.raises(RuntimeError, match="did not move"):
        patterns.check_moved("unwritten", src, dst)


def test_access_pattern_probe_reports_the_copy_baseline_by_size(capsys):
    from perf import patterns

    assert patterns.main(["--copy-sizes", "1,2", "--repeats", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split()[0] for ln in lines] == ["1", "2"]
    assert all("1 thread(s)" in ln and "2 thread(s)" in ln and "GB/s" in ln for ln in lines)


def test_access_pattern_probe_rejects_bad_geometry():
    from perf import patterns

    with pytest.raises(SystemExit):
        patterns.main(["--row-stride", "100"])
    with pytest.raises(SystemExit):
        patterns.main(["--dst-row", "1024", "--lines", "3"])


def test_ab_builds_each_variant_and_restores_the_switches(tmp_path, monkeypatch):
    """``python -m perf.ab``: each variant is built with its switches, which are then
    restored; differing outputs would be flagged; the ratios come from one paired run."""
    import io

    import layoutjit.plan as plan_mod
    from perf import ab

    assert ab.parse_line("  # a comment") is None
    spec, variants = ab.parse_line("64x40x5x7:nChw8c:nhwc ;; old=pm.LINES_PANEL=False ;; new=")
    assert spec == "64x40x5x7:nChw8c:nhwc" and variants == [("old", "pm.LINES_PANEL=False"), ("new", "")]
    before = plan_mod.LINES_PANEL
    s, d = (lj.MemoryDesc([64, 40, 5, 7], "f32", t) for t in ("nChw8c", "nhwc"))
    k = ab.build_with("pm.LINES_PANEL = not pm.LINES_PANEL; pm.NEW_NAME = 1", s, d)
    assert plan_mod.LINES_PANEL == before and not hasattr(plan_mod, "NEW_NAME")
    assert k.plan is not None
    from perf.peers import CopyPeer

    out = io.StringIO()
    res = ab.run_line(spec, variants, 1, [1], CopyPeer(), None, out=out)
    assert set(res[1]) == {"old", "new"} and all(v > 0 for v in res[1].values())
    assert "!!" not in out.getvalue() and "t=1:" in out.getvalue()


def test_ab_spread_is_the_range_of_the_per_round_ratios():
    """perf.ab prints each variant's per-round ratio range beside its median: the ratios of
    paired rounds (contender time / copy time of the same round), lowest to highest."""
    from perf import ab

    r = {"times_s": [3.0, 1.0, 2.0, 8.0], "copy_times_s": [2.0, 1.0, 1.0, 4.0]}
    assert ab.spread(r) == " [1.00-2.00]"  # ratios 1.5, 1.0, 2.0, 2.0
    assert ab.spread({"times_s": [1.0, 2.0], "copy_times_s": [1.0, 1.0]}) == ""  # too few rounds

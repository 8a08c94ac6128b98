"""layoutjit.Pipeline: format propagation, fusion, repeated runs, no compile/allocation per run.

Expected outputs are computed with numpy from the formulas (float32, one
operation at a time) and packed with tests/reference.py's ``pack_by_tag``.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import layoutjit as lj
import layoutjit.api
import layoutjit.attrs
import layoutjit.compiler
import layoutjit.kernel
import layoutjit.pipeline
import reference as ref
from layoutjit import simd

M = lj.MemoryDesc
F = np.float32
DIMS = (2, 17, 5, 4)
NCHW = M(DIMS, "f32", "nchw")


def blocked_tag(rank: int, vb: int) -> str:
    blk = vb // 4
    return ("aBcd" if rank == 4 else "aBcde") + f"{blk}b"


HOST_TAG = blocked_tag(4, simd.HOST_VECTOR_BYTES)


@pytest.fixture(scope="module")
def x():
    return np.random.default_rng(11).normal(0, 2, DIMS).astype(F)


@pytest.fixture(scope="module")
def bias():
    return np.random.default_rng(12).normal(0, 1, 17).astype(F)


BIAS_MD = M((1, 17, 1, 1), "f32", "nchw")


def quant_ref(x, bias, scale, zp):
    acc = np.maximum(x, F(0))
    acc = (acc + bias.reshape(1, 17, 1, 1)).astype(F)
    acc = np.true_divide(acc, F(scale)).astype(F)
    acc = (acc + F(zp)).astype(F)
    return ref.from_f32(acc, "u8")


@pytest.fixture(scope="module")
def qpipe(bias):
    """reorder(any) -> relu -> + bias -> quantize u8: one fused kernel."""
    p = lj.Pipeline(NCHW)
    p.reorder("any").eltwise("relu").binary("add", BIAS_MD, bias, name="bias")
    p.quantize("u8", 0.05, 10, name="q")
    return p.build()


# ---------------------------------------------------------------- format propagation
@pytest.mark.parametrize("vb,tag4,tag5,isa", [(64, "nChw16c", "nCdhw16c", "AVX-512"),
                                              (32, "nChw8c", "nCdhw8c", "AVX2")])
def test_any_follows_the_vector_width(monkeypatch, vb, tag4, tag5, isa):
    monkeypatch.setattr(simd, "HOST_VECTOR_BYTES", vb)
    p = lj.Pipeline(NCHW).reorder("any")
    assert p.output_md == M(DIMS, "f32", tag4) and p.output_md.tag == tag4
    text = p.explain()
    assert tag4 in text and isa in text and f"{vb} bytes" in text
    p5 = lj.Pipeline(M((2, 17, 3, 4, 5), "f32", "ncdhw")).reorder("any")
    assert p5.output_md == M((2, 17, 3, 4, 5), "f32", tag5)


def test_any_on_this_host():
    md, why = lj.pipeline.preferred_layout(DIMS, "f32")
    assert md == M(DIMS, "f32", HOST_TAG)
    assert str(simd.HOST_VECTOR_BYTES) in why


@pytest.mark.parametrize("dims,dt,tag", [((4, 5), "f32", "ab"), ((2, 3, 4), "f32", "abc"),
                                         (DIMS, "s8", "abcd"), (DIMS, "bf16", "abcd"),
                                         ((1, 2, 3, 4, 5, 6), "f32", "abcdef")])
def test_any_is_plain_for_other_ranks_and_types(dims, dt, tag):
    p = lj.Pipeline(M(dims, dt, "abcdef"[: len(dims)][::-1])).reorder("any")
    assert p.output_md == M(dims, dt, tag)
    assert "plain" in p.explain()


def test_steps_without_a_layout_keep_it(bias):
    p = lj.Pipeline(NCHW).reorder("nhwc").eltwise("relu").binary("add", BIAS_MD, bias)
    p.quantize("s8", 0.1).dequantize(0.1).reorder("any", dtype="bf16")
    tags = [md.tag for _, _, md in p.steps]
    assert tags == ["nhwc"] * 5 + ["nchw"]
    assert [str(md.dtype) for _, _, md in p.steps] == ["f32"] * 3 + ["s8", "f32", "bf16"]
    p2 = lj.Pipeline(NCHW).quantize("u8", 0.1, layout="any")
    assert p2.output_md == M(DIMS, "u8", "abcd")
    p3 = lj.Pipeline(NCHW).reorder(M(DIMS, "f32", "any"))
    assert p3.output_md == M(DIMS, "f32", HOST_TAG)


# ---------------------------------------------------------------- fusion
def _kinds(p):
    return [k.kind for k in p.kernels]


def test_fusion_counts(bias):
    assert len(lj.Pipeline(NCHW).reorder("any").eltwise("relu").eltwise("linear", 2, 1).kernels) == 1
    assert len(lj.Pipeline(NCHW).reorder("any").eltwise("relu").quantize("u8", 0.1).kernels) == 1
    # a dst scale comes after post-ops: the eltwise cannot join, it runs in place
    p = lj.Pipeline(NCHW).reorder("any").quantize("u8", 0.1, 3).eltwise("relu")
    assert _kinds(p) == ["reorder", "eltwise"]
    # eltwise steps on the input: one copy kernel with both post-ops
    assert len(lj.Pipeline(NCHW).eltwise("relu").eltwise("abs").kernels) == 1
    # a bf16 tensor in between is observable rounding: two reorders
    assert len(lj.Pipeline(NCHW).reorder("nhwc", "bf16").reorder("nchw", "f32").kernels) == 2
    # f32 in between: merged (the nhwc tensor is never written)
    assert len(lj.Pipeline(NCHW).reorder("nhwc").reorder("any").kernels) == 1
    # a dequantize merges with what follows it
    s8 = M(DIMS, "s8", "nhwc")
    assert len(lj.Pipeline(s8).dequantize(0.5, 3).eltwise("relu").reorder("nchw").kernels) == 1
    # fusion off: one kernel per step
    p = lj.Pipeline(NCHW, fuse=False).reorder("any").eltwise("relu").binary("add", BIAS_MD, bias)
    assert _kinds(p) == ["reorder", "eltwise", "reorder"]


def test_fused_equals_unfused(x, bias):
    def make(fuse):
        p = lj.Pipeline(NCHW, fuse=fuse).reorder("any").eltwise("relu", 0.1)
        p.binary("mul", BIAS_MD, bias).eltwise("linear", 2.0, -1.0).reorder("nhwc")
        return p.build()

    a, b = make(True), make(False)
    assert len(a.kernels) == 1 and len(b.kernels) == 5
    ya, yb = a.run(x), b.run(x)
    assert np.array_equal(ya.view(np.uint32), yb.view(np.uint32))
    acc = np.where(x > 0, x, (F(0.1) * x).astype(F))
    acc = (acc * bias.reshape(1, 17, 1, 1)).astype(F)
    acc = ((F(2.0) * acc).astype(F) + F(-1.0)).astype(F)
    assert np.array_equal(ya, acc.transpose(0, 2, 3, 1).reshape(-1))


def test_explain_names_the_fusion(qpipe):
    text = qpipe.explain()
    assert "kernels (1)" in text
    assert "post-op" in text and "merged" in text and "never written" in text
    assert qpipe.output_md.tag in text
    text = lj.Pipeline(NCHW).quantize("u8", 0.1, 3).eltwise("relu").explain()
    assert "not built yet" in text and "in place" in text and "dst scale" in text


# ---------------------------------------------------------------- runs
def test_repeated_runs_equal_the_reference(qpipe, bias):
    assert qpipe.output_md == M(DIMS, "u8", HOST_TAG)
    rng = np.random.default_rng(5)
    y0 = None
    for i in range(3):
        xi = rng.normal(0, 2, DIMS).astype(F)
        y = qpipe.run(xi)
        if y0 is None:
            y0 = y
        assert y is y0  # the same preallocated output every run
        want = ref.pack_by_tag(quant_ref(xi, bias, 0.05, 10), HOST_TAG)
        assert np.array_equal(y, want), i
    back = lj.Pipeline(qpipe.output_md).dequantize(0.05, 10).reorder("nchw")
    z = back.run(y0).reshape(DIMS)
    want = (F(0.05) * (quant_ref(xi, bias, 0.05, 10).astype(F) - F(10))).astype(F)
    assert np.array_equal(z, want)


def test_runs_into_given_buffers_and_memory(qpipe, x, bias):
    out = np.zeros(qpipe.output_md.get_size(), np.uint8)
    assert qpipe.run(x.reshape(-1), out) is out
    want = ref.pack_by_tag(quant_ref(x, bias, 0.05, 10), HOST_TAG)
    assert np.array_equal(out, want)
    m_in = lj.Memory.from_numpy(x, NCHW)
    m_out = lj.Memory(qpipe.output_md)
    assert qpipe(m_in, output=m_out) is m_out
    assert np.array_equal(m_out.buffer, want)
    with pytest.raises(lj.LayoutError):
        qpipe.run(x, np.zeros(7, np.uint8))
    with pytest.raises(lj.LayoutError):
        qpipe.run(x[:1])
    ro = np.zeros(qpipe.output_md.get_size(), np.uint8)
    ro.flags.writeable = False
    with pytest.raises(lj.LayoutError):
        qpipe.run(x, ro)


def test_input_is_never_written(x):
    p = lj.Pipeline(NCHW).eltwise("relu").eltwise("linear", 1.0, 5.0)
    xc = x.copy()
    y = p.run(xc)
    assert np.array_equal(xc, x)
    assert np.array_equal(y.reshape(DIMS), (np.maximum(x, F(0)) + F(5)).astype(F))
    with pytest.raises(lj.LayoutError):  # output over input: refused
        p.run(xc, xc)


def test_runtime_overrides(qpipe, x, bias):
    y = qpipe.run(x, q={"scale": 0.1, "zero_point": 0}).copy()
    assert np.array_equal(y, ref.pack_by_tag(quant_ref(x, bias, 0.1, 0), HOST_TAG))
    b2 = (bias * 2).astype(F)
    y = qpipe.run(x, bias=b2).copy()
    assert np.array_equal(y, ref.pack_by_tag(quant_ref(x, b2, 0.05, 10), HOST_TAG))
    y = qpipe.run(x, bias={"src1": b2}, q={"scale": [0.1]}).copy()
    assert np.array_equal(y, ref.pack_by_tag(quant_ref(x, b2, 0.1, 10), HOST_TAG))
    # the recorded values are back for a run without overrides
    y = qpipe.run(x)
    assert np.array_equal(y, ref.pack_by_tag(quant_ref(x, bias, 0.05, 10), HOST_TAG))
    for bad in ({"nope": 1}, {"q": 0.1}, {"q": {"scales": 0.1}}, {"q": {"scale": [0.1, 0.2]}},
                {"bias": np.zeros(3, F)}, {"bias": {"src": bias}}, {"q": {"zero_point": 0.5}}):
        with pytest.raises(lj.LayoutError):
            qpipe.run(x, **bad)


def test_binary_input_given_at_run_time(x, bias):
    p = lj.Pipeline(NCHW).reorder("any").binary("add", BIAS_MD, name="b").eltwise("relu")
    with pytest.raises(lj.LayoutError, match="b=buffer"):
        p.run(x)
    y = p.run(x, b=bias)
    acc = np.maximum((x + bias.reshape(1, 17, 1, 1)).astype(F), F(0))
    assert np.array_equal(y, ref.pack_by_tag(acc, HOST_TAG))
    with pytest.raises(lj.LayoutError):
        p.run(x, relu=1)


def test_per_channel_quantize_and_dequantize():
    rng = np.random.default_rng(8)
    w = rng.normal(0, 0.2, (19, 8, 3, 3)).astype(F)
    sc = (np.abs(w).reshape(19, -1).max(1) / 127).astype(F)
    wmd = M(w.shape, "f32", "oihw")
    p = lj.Pipeline(wmd).quantize("s8", sc, mask=1, layout="OIhw4i16o4i")
    q = p.run(w)
    want = ref.from_f32(np.true_divide(w, sc.reshape(19, 1, 1, 1)).astype(F), "s8")
    assert np.array_equal(q, ref.pack_by_tag(want, "ABcd4b16a4b"))
    d = lj.Pipeline(p.output_md).dequantize(sc, mask=1, layout="oihw").run(q)
    assert np.array_equal(d.reshape(w.shape), (sc.reshape(19, 1, 1, 1) * want.astype(F)).astype(F))


# ---------------------------------------------------------------- no compile, no allocation
def test_build_compiles_each_distinct_kernel_once(monkeypatch):
    dims = (1, 19, 3, 7)  # dims used by no other test: nothing is in the cache yet
    md = M(dims, "f32", "nchw")
    built = []
    real = layoutjit.compiler.build
    monkeypatch.setattr(layoutjit.compiler, "build", lambda *a, **k: built.append(a) or real(*a, **k))
    p = lj.Pipeline(md).reorder("any").quantize("u8", 0.5, 3).eltwise("relu").eltwise("relu")
    assert len(p.kernels) == 3 and p.kernels[1] is p.kernels[2]
    assert len(built) == 2
    assert "memory cache" in p.explain()  # the second relu came from the cache
    p2 = lj.Pipeline(md).reorder("any").quantize("u8", 0.5, 3).eltwise("relu").eltwise("relu").build()
    assert len(built) == 2 and all(a is b for a, b in zip(p.kernels, p2.kernels))


def test_second_run_does_not_compile_or_allocate(monkeypatch, bias):
    dims = (8, 32, 16, 16)  # 256 KiB of f32: any buffer allocated in a run would show
    md = M(dims, "f32", "nchw")
    p = lj.Pipeline(md).reorder("any").eltwise("relu").quantize("u8", 0.05, 10).eltwise("relu")
    p.reorder("nchw")
    x = np.random.default_rng(3).normal(size=dims).astype(F)
    y = p.run(x).copy()  # builds, compiles
    assert len(p.kernels) == 3

    def boom(*a, **k):
        raise AssertionError("compiled or allocated during a run")

    for mod, name in [(layoutjit.compiler, "build"), (layoutjit.compiler, "get_kernel"),
                      (layoutjit.api, "get_kernel"), (layoutjit.pipeline, "compile_reorder"),
                      (layoutjit.pipeline, "compile_eltwise"), (layoutjit.pipeline, "aligned_empty"),
                      (layoutjit.kernel, "aligned_empty"), (layoutjit.attrs.Attrs, "runtime_table")]:
        monkeypatch.setattr(mod, name, boom)
    p.run(x)  # warm
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        out = p.run(x)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # the smallest buffer of this pipeline is 64 KiB (u8); Python 3.12 with Numba 0.68.0
    # traced 6.8 KB of small objects in a run
    assert peak - before < 32768, f"{peak - before} bytes allocated during a run"
    assert np.array_equal(out, y)
    s = p.stats()
    assert [r["calls"] for r in s] == [3, 3, 3]


def test_stats(qpipe, x):
    qpipe.reset_stats()
    for _ in range(4):
        qpipe.run(x)
    (row,) = qpipe.stats()
    assert row["step"] == "reorder0+eltwise1+bias+q"
    assert row["calls"] == 4 and row["total_ms"] >= row["last_ms"] >= row["min_ms"] > 0
    assert row["mean_ms"] == pytest.approx(row["total_ms"] / 4)
    assert "reorder0+eltwise1+bias+q" in qpipe.format_stats()
    qpipe.reset_stats()
    assert qpipe.stats()[0]["calls"] == 0
    assert lj.Pipeline(NCHW).stats() == []


# ---------------------------------------------------------------- errors
def test_errors(bias):
    with pytest.raises(lj.LayoutError):
        lj.Pipeline(M(DIMS, "f32", "any"))
    with pytest.raises(lj.LayoutError):
        lj.Pipeline("nchw")
    with pytest.raises(lj.LayoutError):
        lj.Pipeline(NCHW).build()
    p = lj.Pipeline(NCHW)
    bad_steps = [
        lambda: p.reorder(M((2, 17, 5, 5), "f32", "nchw")),           # other dims
        lambda: p.reorder(M(DIMS, "f32", "nhwc"), dtype="s8"),         # dtype contradicts md
        lambda: p.reorder("nChw17q"),                                   # bad tag
        lambda: p.reorder(3),
        lambda: p.eltwise("nope"),
        lambda: p.binary("pow", BIAS_MD, bias),
        lambda: p.binary("add", M((1, 17, 2, 1), "f32", "nchw"), None),  # does not broadcast
        lambda: p.binary("add", BIAS_MD, np.zeros(3, F)),               # wrong size
        lambda: p.quantize("u8", [0.1, 0.2]),                            # 2 values, mask 0
        lambda: p.quantize("u8", np.ones(17), mask=1),                   # dim 0 has 2
        lambda: p.quantize("f32", 0.1, 3),                               # zero point on f32
        lambda: p.quantize("u8", 0.1, 2.5),                              # fractional zero point
        lambda: p.quantize("u8", "x"),
        lambda: p.quantize("u8", 0.1, mask=16),
        lambda: p.dequantize(0.1, 3),                                    # f32 input: no zero point
        lambda: p.eltwise("relu", name="input"),
        lambda: p.eltwise("relu", name="not valid"),
    ]
    for i, f in enumerate(bad_steps):
        with pytest.raises(lj.LayoutError):
            f()
        assert p.steps == [], i
    p.eltwise("relu", name="a")
    with pytest.raises(lj.LayoutError):
        p.eltwise("relu", name="a")


def test_doctests():
    import doctest

    res = doctest.testmod(layoutjit.pipeline, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert res.failed == 0 and res.attempted > 0


def test_a_failing_run_writes_nothing(x, bias):
    p = lj.Pipeline(NCHW).eltwise("relu").quantize("u8", 0.1).eltwise("relu")
    p.reorder("nchw").binary("add", M((1, 17, 1, 1), "u8", "nchw"), name="b")
    out = np.full(p.output_md.get_size(), 7, np.uint8)
    with pytest.raises(lj.LayoutError):
        p.run(x, out)                              # b is missing: refused before any kernel runs
    with pytest.raises(lj.LayoutError):
        p.run(x, out, b=np.zeros(17, np.uint8), q=1)  # an unknown step
    assert (out == 7).all() and all(s["calls"] == 0 for s in p.stats())
    p.run(x, out, b=np.ones(17, np.uint8))
    want = (np.rint(np.maximum(x, 0) / F(0.1)).clip(0, 255) + 1).clip(0, 255).astype(np.uint8)
    assert np.array_equal(out.reshape(DIMS), want)

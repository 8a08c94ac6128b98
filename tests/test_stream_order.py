"""Stream plans that walk their outer loops in source order (``plan._stream_src_order``).

A permutation that keeps a long innermost run on both sides (``abcd -> acbd``: heads split)
streams each run; with non-temporal stores and runs of whole destination lines, the outer
loops follow the source instead of the destination. The tests force NT on small tensors,
check every byte (destinations at several byte offsets, 1 and 2 threads, guard bytes), and
check where the rule must not apply.
"""

from __future__ import annotations

import numpy as np
import pytest

import layoutjit as lj
import reference as ref
from layoutjit.compiler import lower_and_plan

M = lj.MemoryDesc
NOTE = "outer loops in source order"


def plan_of(s, d):
    return lower_and_plan(s, d, None)[1]


def test_source_order_at_the_real_thresholds():
    """Heads split at a size that takes NT stores: source order; a small one: plain stores
    in destination order. (First in the module: ``nt_everywhere`` lasts to its end.)"""
    big = plan_of(M((16, 512, 12, 64), "f32", "abcd"), M((16, 512, 12, 64), "f32", "acbd"))
    assert big.nt and any(NOTE in n for n in big.notes), big.describe()
    assert [n.extent for n in big.nodes] == [16, 512, 12, 64]
    small = plan_of(M((1, 64, 12, 64), "f32", "abcd"), M((1, 64, 12, 64), "f32", "acbd"))
    assert not small.nt and not any(NOTE in n for n in small.notes), small.describe()


def test_narrowing_streams_take_nt_from_a_quarter_of_the_llc():
    """f32 -> s8/bf16 streams of 14-16 MB (between a quarter and half of a 32 MiB LLC) take
    NT stores at every thread count, never the timed band (streams have none); a widening
    stream of that size and a narrowing one under the quarter keep plain stores.
    (Before the fixture below: it patches the thresholds for the rest of the module.)"""
    import layoutjit.plan as plan_mod

    q = plan_mod.llc_bytes() // 4
    for sdt, ddt, n, want in [("f32", "s8", q * 6 // 5, True), ("f32", "bf16", q * 6 // 5, True),
                              ("s8", "f32", q * 6 // 5, False), ("f32", "s8", q * 4 // 5, False)]:
        elems = n // 5 if ddt == "s8" or sdt == "s8" else n // 6
        elems -= elems % 64
        p = plan_of(M((elems,), sdt, "a"), M((elems,), ddt, "a"))
        assert p.tile.kind == "stream" and p.nt == want and not p.nt_tune, (sdt, ddt, n, p.describe())
        assert p.nt_split or not p.nt


CASES = [
    ((2, 24, 3, 48), "abcd", "acbd", "f32", "f32"),       # runs of three lines
    ((2, 9, 5, 64), "abcd", "acbd", "f32", "f32"),        # runs of four lines
    ((3, 5, 7, 96), "abcd", "cbad", "bf16", "bf16"),      # three outer nodes, all reordered
    ((5, 4, 128), "abc", "bac", "f32", "bf16"),           # a conversion: lines of the destination
    ((3, 4, 5, 256), "abcd", "acbd", "s8", "s8"),
    ((2, 3, 4, 5, 48), "abcde", "adcbe", "f32", "f32"),   # 5-D
]


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", CASES)
def test_source_order_is_exact(nt_everywhere, dims, stag, dtag, sdt, ddt):
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = lj.compile_reorder(s, d)
    p = k.plan
    assert p.nt and p.tile.kind == "stream" and any(NOTE in n for n in p.notes), p.describe()
    src_strides = [n.strides[1] for n in p.nodes[:-1]]
    assert src_strides == sorted(src_strides, reverse=True)
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, sdt, rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, [0, 2 * d.dtype.size, 64 - d.dtype.size])


def test_source_order_into_whole_images_of_a_batch(nt_everywhere):
    """A destination that is images 2..4 of a larger batch: offset0 is whole lines, so the
    rule applies; every byte of the larger buffer around it is checked."""
    big = M((5, 6, 4, 48), "f32", "acbd")
    sub = big.submemory_desc((3, 6, 4, 48), (2, 0, 0, 0))
    s = M((3, 6, 4, 48), "f32", "abcd")
    k = lj.compile_reorder(s, sub)
    assert any(NOTE in n for n in k.plan.notes), k.plan.describe()
    rng = np.random.default_rng(7)
    x = ref.random_raw(s.get_size() // 4, "f32", rng)
    n = max(sub.get_size(), sub.required_bytes())
    expect = ref.reorder(x, s, sub, np.full(n, 0xA5, np.uint8).view(np.float32)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, [0, 4])


def test_source_order_not_taken(nt_everywhere):
    """Runs that are not whole lines, runs off the lines (a submemory a few channels in, a
    destination offset0 off a line), a padded run, plain stores, and two nodes: destination
    order."""
    cases = [
        (M((2, 9, 5, 40), "f32", "abcd"), M((2, 9, 5, 40), "f32", "acbd")),       # 160 B runs
        (M((2, 40, 3, 4), "f32", "aBcd64b"), M((2, 40, 3, 4), "f32", "aBdc64b")),  # padded off a line
        (M((64, 64), "f32", "ab"), M((64, 64), "f32", "ab")),                      # one node
    ]
    big = M((2, 8, 4, 64), "f32", "acbd")
    cases.append((M((2, 8, 4, 48), "f32", "abcd"), big.submemory_desc((2, 8, 4, 48), (0, 0, 0, 8))))
    for s, d in cases:
        p = plan_of(s, d)
        assert not any(NOTE in n for n in p.notes), (s, d, p.describe())


def test_padded_run_on_lines_at_real_size():
    """A run whose dim is padded with its bounds on lines (o = 112 of 128, 32 o per run:
    the last run 16 o of data and 16 of zeros, each a whole line) takes the source order;
    the switch off, destination order."""
    import layoutjit.plan as plan_mod

    dims = (112, 6, 112, 96)
    s, d = M(dims, "f32", "AcdB4b32a"), M(dims, "f32", "ABcd4b32a")
    p = plan_of(s, d)
    assert p.nt and p.tile.kind == "stream" and any(NOTE in n for n in p.notes), p.describe()
    mp = pytest.MonkeyPatch()
    mp.setattr(plan_mod, "STREAM_SRC_ORDER_PADDED", False)
    try:
        assert not any(NOTE in n for n in plan_of(s, d).notes)
    finally:
        mp.undo()


@pytest.mark.parametrize("dims", [(48, 6, 5, 3), (80, 3, 2, 7)])
def test_padded_run_on_lines_is_exact(nt_everywhere, dims):
    s, d = M(dims, "f32", "AcdB4b32a"), M(dims, "f32", "ABcd4b32a")
    k = lj.compile_reorder(s, d)
    assert any(NOTE in n for n in k.plan.notes), k.plan.describe()
    rng = np.random.default_rng(dims[0])
    x = ref.random_raw(s.get_size() // 4, "f32", rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // 4, np.float32)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, [0, 8, 60])

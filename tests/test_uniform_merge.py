"""Nodes of different padded dims merged where each digit is uniform (``plan._uniform_digit``).

``AcdeB4b8a4b -> ABcde16b64a4b`` (int8 weights): the innermost 8a x 4b is the same 32
contiguous elements on both sides, and a and b are both padded. Each digit's values lie on
one side of its dim's bounds (the bounds are multiples of its span), so the two merge into
one run and the dims' heavier digits decide every guard; the heavier digit left lightest
(weight 8) may then be a micro-kernel node, its valid steps counted in its own weight. The
tests check every byte against numpy index arithmetic (destinations at several offsets, 1
and 2 threads, guard bytes around them, zeros in the padding), in tile and element-loop
plans, and that digits straddling a bound are not merged.
"""

from __future__ import annotations

import numpy as np
import pytest

import layoutjit as lj
import layoutjit.plan as plan_mod
import reference as ref
from layoutjit.compiler import build, lower_and_plan

# the rules shown here act on the narrow IR of these 1- and 2-byte pairs
pytestmark = pytest.mark.usefixtures("narrow_elements")

M = lj.MemoryDesc

CASES = [
    # a: 24 of 64 (three 8-steps of data in the 64-block), b: 40 of 48
    ((24, 40, 3, 2, 5), "AcdeB4b8a4b", "ABcde16b64a4b", "s8", "u8"),
    ((72, 20, 2, 3), "AcdB4b8a4b", "ABcd16b64a4b", "s8", "s8"),      # a: 72 of 128, b: 20 of 32
    ((16, 36, 5, 3), "ABcd4b16a4b", "ABcd16b16a4b", "u8", "u8"),     # a: 16 of 16, b: 36 of 48
    ((20, 24, 3, 5), "BcdA8b2a", "BcdA16a16b2a", "f32", "f32"),     # 8b x 2a (a: 20 of 32, b: 24 of 32)
    ((30, 48, 64), "BcA16b2a", "BcA64b2a", "f32", "s8"),             # 16b x 2a (b: 48 of 64, zeros)
]


def plan_of(s, d):
    return lower_and_plan(s, d, None)[1]


def plan_without(switch, s, d):
    """The plan with the planner switch ``switch`` (a module flag of layoutjit.plan) off."""
    saved = getattr(plan_mod, switch)
    setattr(plan_mod, switch, False)
    try:
        return plan_of(s, d)
    finally:
        setattr(plan_mod, switch, saved)


def _merged_padded(s, d) -> bool:
    """Whether the uniform merge changes the plan's nodes (it joins digits of padded dims)."""
    return plan_of(s, d).nodes != plan_without("UNIFORM_MERGE", s, d).nodes


def _check(k, s, d, seed):
    rng = np.random.default_rng(seed)
    x = ref.random_raw(s.get_size() // s.dtype.size, str(s.dtype), rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, [0, 64 - d.dtype.size])


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", CASES)
def test_uniform_merge_is_exact(dims, stag, dtag, sdt, ddt):
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = build(s, d)  # not compile_reorder: its in-memory cache would share one kernel
    assert _merged_padded(s, d), k.plan.describe()
    _check(k, s, d, sum(dims))


def test_uniform_merge_in_element_loops(monkeypatch):
    """Without a micro-kernel the merged run is an element loop inside the zero/data splits."""
    monkeypatch.setattr(plan_mod, "_tile_supported", lambda *a: False)
    dims = (24, 40, 3, 2, 5)
    s, d = M(dims, "s8", "AcdeB4b8a4b"), M(dims, "u8", "ABcde16b64a4b")
    k = build(s, d)
    assert k.plan.tile is None and _merged_padded(s, d), k.plan.describe()
    _check(k, s, d, 7)


def test_uniform_digit_rule(monkeypatch):
    """The merge needs every bound a multiple of the digit's span; a straddling digit stays
    (or is cut, ``_uniform_cut``: its 4 light steps are uniform)."""
    dims = (24, 40, 3, 2, 5)
    s, d = M(dims, "s8", "AcdeB4b8a4b"), M(dims, "u8", "ABcde16b64a4b")
    p = plan_of(s, d)
    run = p.nodes[-1]
    assert run.dim is None and run.extent == 32 and run.strides == (1, 1), p.describe()
    # a = 20: its 8a digit straddles valid = 20: cut into 2 x 4a, 4a x 4b merge
    dims = (20, 40, 3, 2, 5)
    s, d = M(dims, "s8", "AcdeB4b8a4b"), M(dims, "u8", "ABcde16b64a4b")
    p = plan_of(s, d)
    assert p.nodes[-1].extent == 16 and p.nodes[-1].dim is None, p.describe()
    _check(build(s, d), s, d, 3)
    monkeypatch.setattr(plan_mod, "SPLIT_MERGE", False)  # without the cut 8a x 4b stays two nodes
    assert not _merged_padded(s, d), plan_of(s, d).describe()
    _check(build(s, d), s, d, 3)


def test_uniform_merge_switch(monkeypatch):
    monkeypatch.setattr(plan_mod, "UNIFORM_MERGE", False)
    dims = (24, 40, 3, 2, 5)
    p = plan_of(M(dims, "s8", "AcdeB4b8a4b"), M(dims, "u8", "ABcde16b64a4b"))
    assert all(n.dim is not None for n in p.nodes if n.strides == (1, 1)), p.describe()


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", [
    ((16, 30, 8, 16), "OIhw8i16o2i", "nchw", "f32", "f32"),    # i = 30 of 32: 2i is B
    ((32, 30, 8, 16), "OIhw8i16o2i", "nchw", "u8", "bf16"),    # converted
    ((40, 24, 32, 4, 3), "BAcde4b8a8b4a", "aBdeC16c64b2c", "s8", "s8"),  # a = 40 of 64
])
def test_cols_over_a_uniform_padded_b(dims, stag, dtag, sdt, ddt):
    """A cols tile (``TileSpec.c``) whose B is a uniform digit of a padded dim."""
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = build(s, d)
    t = k.plan.tile
    assert t is not None and t.c is not None, k.plan.describe()
    B = k.plan.nodes[t.b]
    assert B.dim is not None and k.plan.ir.dims[B.dim].guarded, k.plan.describe()
    _check(k, s, d, sum(dims))
    t2 = plan_without("COLS_UNIFORM", s, d).tile
    assert t2 is None or t2.c is None


# A padded digit that is not uniform, cut so that its uniform light steps merge inward
# (``plan._uniform_cut``): `gOIhw4i16o4i -> gOhwI16o4i` with o = 40 of 48 had runs of 4 i
# (16 B) between the o steps; 8 o x 4 i is uniform (40 and 48 are multiples of 8), so the
# block's 16 o become 2 x 8 and the run 32 elements.
CUT_CASES = [
    ((2, 40, 32, 3, 3), "gOIhw4i16o4i", "gOhwI16o4i", "f32", "f32"),
    ((2, 40, 32, 3, 3), "gOhwI16o4i", "gOIhw4i16o4i", "f32", "f32"),
    ((20, 36, 3, 3), "OIhw4i16o4i", "OhwI16o4i", "s8", "s8"),           # o: 20 of 32, cut 4 x 4
    ((3, 100, 20, 3, 3), "gOIhw4i16o4i", "gOhwI16o4i", "f32", "s8"),    # o: 100 of 112
    ((2, 20, 40, 3, 3), "gOIhw8i16o2i", "gOhwI16o2i", "bf16", "bf16"),
]


def _cut(s, d) -> bool:
    return plan_of(s, d).nodes != plan_without("SPLIT_MERGE", s, d).nodes


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", CUT_CASES)
def test_uniform_cut_is_exact(dims, stag, dtag, sdt, ddt):
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = build(s, d)
    assert _cut(s, d), k.plan.describe()
    _check(k, s, d, sum(dims))


def test_uniform_cut_nodes():
    """o = 40 of 48: the run is 8 o x 4 i = 32 contiguous elements, the 16 o's other digit
    2 steps of 8; o = 36 (gcd 4): 4 o x 4 i; runs of a line or more are left alone."""
    dims = (2, 40, 32, 3, 3)
    p = plan_of(M(dims, "f32", "gOIhw4i16o4i"), M(dims, "f32", "gOhwI16o4i"))
    assert p.nodes[-1].extent == 32 and p.nodes[-1].strides == (1, 1), p.describe()
    assert any(n.extent == 2 and n.weight == 8 and n.dim == 1 for n in p.nodes), p.describe()
    assert p.tile is not None and p.tile.kind == "stream", p.describe()
    dims = (2, 36, 32, 3, 3)
    p = plan_of(M(dims, "f32", "gOIhw4i16o4i"), M(dims, "f32", "gOhwI16o4i"))
    assert p.nodes[-1].extent == 16, p.describe()
    dims = (96, 2, 3, 3)  # OIhw16i16o -> IOhw16i16o, i = 2 of 16: runs of 16 o (a line) already
    s, d = M(dims, "f32", "OIhw16i16o"), M(dims, "f32", "IOhw16i16o")
    assert not _cut(s, d), plan_of(s, d).describe()

"""Lines plans whose destination order sweeps the source in short pieces
(``plan._far_source_pieces``).

f32 `OIhw4o4i -> IOhw16o16i` 51200x100x5x1: the I blocks, 1280 B apart in the source, were
the job loop outside the O blocks: seven sweeps of the whole source, each reading 1280 B of
every 8000 B. The outer loops now go in source order. The tests check plans at real sizes
(no kernel built), then force the rule onto small tensors and check every byte.
"""

from __future__ import annotations

import pytest

import layoutjit as lj
import layoutjit.plan as plan_mod
import reference as ref
from layoutjit.compiler import build, lower_and_plan

# the rules shown here act on the narrow IR of these 1- and 2-byte pairs
pytestmark = pytest.mark.usefixtures("narrow_elements")

M = lj.MemoryDesc


def plan_of(dims, stag, dtag, sdt, ddt):
    return lower_and_plan(M(dims, sdt, stag), M(dims, ddt, dtag), None)[1]


def _source_order(p) -> bool:
    return "source_order" in p.ir.notes


def _outer_src_bytes(p) -> list[int]:
    ssz = p.ir.operands[1].dtype.size
    return [abs(n.strides[1] or 0) * ssz for n in p.ir.nodes[:min(p.tile.nodes)]]


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", [
    ((51200, 100, 5, 1), "OIhw4o4i", "IOhw16o16i", "f32", "f32"),
    ((98304, 32, 1, 5), "OIhw4o4i", "IOhw16o16i", "f32", "f32"),
    ((65536, 256, 5, 1), "OIhw8i16o2i", "IOhw16o16i", "s8", "f32"),
])
def test_far_pieces_at_real_sizes(plans_32, dims, stag, dtag, sdt, ddt):
    p = plan_of(dims, stag, dtag, sdt, ddt)
    assert p.tile.kind == "lines" and _source_order(p), p.describe()
    outer = _outer_src_bytes(p)
    assert outer == sorted(outer, reverse=True), p.describe()
    assert p.parallel >= 1


def test_far_pieces_switch(plans_32, monkeypatch):
    monkeypatch.setattr(plan_mod, "FAR_PIECES_BYTES", 0)
    p = plan_of((51200, 100, 5, 1), "OIhw4o4i", "IOhw16o16i", "f32", "f32")
    assert not _source_order(p), p.describe()
    # the I blocks (1280 B on in the source) stay outside the O blocks
    assert _outer_src_bytes(p)[0] == 1280, p.describe()


def test_far_pieces_needs_a_long_sweep(plans_32):
    # 64 O blocks: the sweep inside an I block spans 512 KB, under FAR_ROWS_SPAN_BYTES
    p = plan_of((256, 100, 5, 1), "OIhw4o4i", "IOhw16o16i", "f32", "f32")
    assert not _source_order(p), p.describe()


CASES = [
    ((64, 100, 5, 1), "OIhw4o4i", "IOhw16o16i", "f32", "f32"),
    ((48, 40, 3, 1), "OIhw8i16o2i", "IOhw16o16i", "s8", "f32"),
    ((32, 64, 1, 7), "OIhw8i8o", "IOhw16i16o", "f32", "f32"),
]


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", CASES)
def test_far_pieces_is_exact(plans_32, monkeypatch, dims, stag, dtag, sdt, ddt):
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "FAR_ROWS_SPAN_BYTES", 1)
    k = build(M(dims, sdt, stag), M(dims, ddt, dtag))
    assert _source_order(k.plan), k.plan.describe()
    ref.check_exact_at_offsets(k, sum(dims))


def test_far_pieces_wide_pieces_and_small_tensors(plans_32):
    # pieces of 7 KB (the I blocks of 7 x 256 elements) on 336 MB: source order
    assert _source_order(plan_of((49152, 256, 1, 7), "OIhw4i16o4i", "IOhw16o16i", "f32", "f32"))
    # 9 MB of bf16 (moving less than one_rule_min_bytes): the destination order stays
    p = plan_of((256, 2048, 3, 3), "OIhw8i16o2i", "IOhw16o16i", "bf16", "bf16")
    assert not _source_order(p), p.describe()


# --- calls that write several whole lines apart (``plan._line_pieces_src_order``) ----------

@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt,taken", [
    ((125, 64, 56, 1, 56), "gOhwi16o", "gOIhw8i8o", "f32", "u8", True),
    ((96, 16, 448, 24), "IOhw16o16i", "IOhw8o8i", "f32", "bf16", True),
    ((7, 112, 56, 1024), "OIhw8i8o2i", "hwoi", "f32", "f32", False),  # 7 stretches side by side
    ((1, 37, 512, 256), "gOIw8o4i", "gOwI16i32o2i", "bf16", "f32", False),  # a 10 MB source
])
def test_line_pieces_at_real_sizes(monkeypatch, dims, stag, dtag, sdt, ddt, taken):
    """Lines calls writing two whole lines apart (A x the run one piece of whole lines, B
    placing the pieces): source order where destination order reads many stretches."""
    monkeypatch.setattr(plan_mod, "vector_bytes", lambda: 64)
    monkeypatch.setattr(plan_mod, "llc_bytes", lambda: 32 << 20)
    p = plan_of(dims, stag, dtag, sdt, ddt)
    assert p.tile.kind == "lines" and not p.tile.rows_contiguous, p.describe()
    assert _source_order(p) == taken, p.describe()
    if taken:
        outer = _outer_src_bytes(p)
        assert outer == sorted(outer, reverse=True), p.describe()
        monkeypatch.setattr(plan_mod, "LINE_PIECES_SRC_ORDER", False)
        assert not _source_order(plan_of(dims, stag, dtag, sdt, ddt))


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", [
    ((5, 64, 13, 1, 9), "gOhwi16o", "gOIhw8i8o", "f32", "u8"),
    ((26, 16, 11, 6), "IOhw16o16i", "IOhw8o8i", "f32", "bf16"),
])
def test_line_pieces_is_exact(monkeypatch, dims, stag, dtag, sdt, ddt):
    monkeypatch.setattr(plan_mod, "vector_bytes", lambda: 64)
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    monkeypatch.setattr(plan_mod, "llc_bytes", lambda: 64)
    monkeypatch.setattr(plan_mod, "READ_STREAMS", 2)
    k = build(M(dims, sdt, stag), M(dims, ddt, dtag))
    assert _source_order(k.plan) and not k.plan.tile.rows_contiguous, k.plan.describe()
    ref.check_exact_at_offsets(k, sum(dims))

"""Lines plans whose calls write whole blocks walk their outer loops in source order
(``plan._lines_src_order``).

`nhwc -> OIhw8i16o2i`: each 1 KB block reads 64 B of 16 source rows, and in destination
order the next 64 B of those rows (the next 16 i) come a whole sweep over the pixels
later. The rule puts the step that continues the rows innermost. The tests force NT
stores on small tensors, check every byte (several destination offsets, 1 and 2 threads,
guard bytes, padding), and check where the rule must not apply.
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
NOTE = "whole blocks of whole lines: the outer loops in source order"


def plan_of(s, d):
    return lower_and_plan(s, d, None)[1]


CASES = [
    ((32, 48, 3, 5), "nhwc", "OIhw8i16o2i", "f32", "f32"),
    ((32, 40, 2, 3), "cdab", "OIhw8i16o2i", "f32", "f32"),    # i = 40 of 48: padded blocks
    ((16, 64, 4, 5), "Bcda16b", "aCdB8c2b", "f32", "f32"),
    ((32, 48, 4, 3), "acdb", "OIhw8i16o2i", "bf16", "bf16"),
    ((20, 32, 3, 5), "Ohwi8o", "OIhw16i16o", "bf16", "f32"),   # o = 20 of 32
    ((40, 16, 24), "cBa4b", "ABc16b32a2b", "f32", "f32"),      # 3D, a = 40 of 64
]


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt", CASES)
def test_lines_source_order_is_exact(nt_everywhere, dims, stag, dtag, sdt, ddt):
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = build(s, d)
    p = k.plan
    assert p.nt and p.tile.kind == "lines" and p.tile.rows_contiguous, p.describe()
    assert any(NOTE in n for n in p.notes), p.describe()
    outer = [n.strides[1] for n in p.nodes[:p.tile.a]]
    assert outer == sorted(outer, reverse=True), p.describe()
    ref.check_exact_at_offsets(k, sum(dims))


def test_lines_source_order_not_taken(nt_everywhere, monkeypatch):
    """Few rows read side by side in destination order (16 rows of 1 KB blocks: 4 o x
    4 i-blocks per pixel; 256 B blocks with 32 rows), and the switch off: destination order."""
    cases = [
        (M((32, 30, 3, 5), "s8", "OIhw4o4i"), M((32, 30, 3, 5), "f32", "NChw16n16c")),
        (M((32, 2, 4, 6), "f32", "nChw8c"), M((32, 2, 4, 6), "bf16", "OIhw4i16o4i")),
    ]
    for s, d in cases:
        p = plan_of(s, d)
        assert p.nt and p.tile.kind == "lines" and p.tile.rows_contiguous, p.describe()
        assert not any(NOTE in n for n in p.notes), (s, d, p.describe())
    s, d = M((32, 48, 3, 5), "f32", "nhwc"), M((32, 48, 3, 5), "f32", "OIhw8i16o2i")
    monkeypatch.setattr(plan_mod, "LINES_SRC_ORDER", False)
    p = plan_of(s, d)
    assert p.nt and not any(NOTE in n for n in p.notes), p.describe()

"""Plain-store streams whose runs end off a vector: the tail is one short vector call.

``aB16b -> ab`` in bf16 with b = 30: each row is one run of 30 elements under 32-element
lines, so the stream's vector loop never ran and every element went through the scalar
tail loop (5.7 us for 32 KB against 1.6 us for its copy). With plain stores and no job
chunking the tail's length is known when the kernel is generated, so it is one
``simd.tile(1, tail)`` call. The tests check the generated calls and every byte against
numpy index arithmetic (destinations at several offsets, guard bytes around them).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import layoutjit as lj
import reference as ref
from layoutjit.compiler import build

# the rules shown here act on the narrow IR of these 1- and 2-byte pairs
pytestmark = pytest.mark.usefixtures("narrow_elements")

M = lj.MemoryDesc

CASES = [
    ((512, 30), "aB16b", "ab", "bf16", "bf16", 30),   # the whole run is the tail
    ((40, 45), "aB16b", "ab", "f32", "f32", 13),      # f32 lines of 16: 32 + 13
    ((24, 70), "aB32b", "ab", "f32", "bf16", 6),      # conversion in the tail
    ((33, 77), "aB16b", "ab", "s8", "s8", 13),        # 1-byte lines of 64: 64 + 13
]


@pytest.mark.parametrize("dims,stag,dtag,sdt,ddt,tail", CASES)
def test_stream_tail_is_a_vector_call(dims, stag, dtag, sdt, ddt, tail):
    s, d = M(dims, sdt, stag), M(dims, ddt, dtag)
    k = build(s, d)
    p = k.plan
    assert p.tile is not None and p.tile.kind == "stream" and not p.nt, p.describe()
    tiles = {int(v) for v in re.findall(r"= tile\(1, (\d+),", k.source)}
    assert tail in tiles, k.source
    rng = np.random.default_rng(sum(dims))
    x = ref.random_raw(s.get_size() // s.dtype.size, sdt, rng)
    expect = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, expect, [0, d.dtype.size], counts=(1,))

"""The plans of the other vector width, run on this host (``LAYOUTJIT_VECTOR_BYTES``).

The planner's rules differ between 32-byte (AVX2) and 64-byte (AVX-512) vectors: tile
shapes, rows read per step, which rule takes a pair. A CI host has one of the two, so the
other width's plans would go untested; with the override the kernels are planned for the
other width and compiled for this CPU (LLVM splits wider vectors), so every byte of those
plans can be checked here. One subprocess (the width is read at import), NT stores at
every size, destinations aligned and off a line, 1 and 2 threads, guard bytes.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from layoutjit import simd

HERE = os.path.dirname(__file__)

# kinds of the public perf list at small sizes, tails, padding and conversions included
PAIRS = [
    ((2, 40, 7, 9), "nhwc", "nchw", "f32", "bf16"),
    ((61, 67), "ab", "ba", "f32", "f32"),              # rows off the lines: realigned stores
    ((96, 80), "ab", "ba", "s8", "s8"),
    ((2, 17, 5, 6), "nchw", "nChw16c", "f32", "f32"),  # C = 17: a padded block
    ((2, 20, 5, 6), "nChw16c", "nchw", "f32", "f32"),
    ((2, 36, 5, 7), "nhwc", "nChw16c", "f32", "s8"),
    ((2, 3, 16, 24), "nchw", "nChw16c", "f32", "f32"),  # an image input, C = 3
    ((2, 3, 1, 12, 20), "nCdhw16c", "nCdhw8c", "f32", "u8"),  # runs read whole past C = 3
    ((40, 20, 3, 3), "oihw", "OIhw16i16o", "f32", "f32"),
    ((32, 20, 3, 3), "oihw", "OIhw4i16o4i", "f32", "f32"),
    ((2, 32, 24, 3, 3), "goihw", "gOIhw16i16o", "f32", "bf16"),
    ((4, 1, 3, 12, 12), "aebcd", "aBcde8b", "f32", "f32"),
    ((2, 16, 3, 40, 24), "ncdhw", "ndhwc", "s8", "f32"),
]

SCRIPT = r'''
import sys
sys.path.insert(0, {here!r})
import layoutjit as lj
from layoutjit import plan, simd
import reference as ref
assert plan.vector_bytes() == simd.HOST_VECTOR_BYTES == {width}, (plan.vector_bytes(), {width})
for i, (dims, st, dt, sdt, ddt) in enumerate({pairs!r}):
    k = lj.compile_reorder(lj.MemoryDesc(dims, sdt, st), lj.MemoryDesc(dims, ddt, dt))
    assert k.plan.vector_bytes == {width}, k.plan.describe()
    ref.check_exact_at_offsets(k, i)
    print("ok", dims, st, dt, sdt, ddt, k.plan.tile)
'''


def _other_width() -> int:
    return 32 if simd.ISA_VECTOR_BYTES >= 64 else 64


@pytest.mark.skipif(not simd._cv._is_x86() or simd.ISA_VECTOR_BYTES < 32, reason="x86 with AVX2")
def test_other_width_plans_are_exact(tmp_path):
    width = _other_width()
    env = dict(os.environ, LAYOUTJIT_VECTOR_BYTES=str(width), LAYOUTJIT_NT_MIN_BYTES="0",
               LAYOUTJIT_NT_MIN_TRANSPOSE_BYTES="0", LAYOUTJIT_PARALLEL_MIN_BYTES="4096")
    script = SCRIPT.format(here=HERE, width=width, pairs=PAIRS)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                       timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert p.stdout.count("ok ") == len(PAIRS), p.stdout

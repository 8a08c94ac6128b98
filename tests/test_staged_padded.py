"""Staged transposes from a source that pads the dim of the destination rows.

`nChw16c -> nchw` with C = 20: two blocks of 16 channels, the second with 4 of data and
12 of padding. The destination rows (one per channel) are off the 64-byte lines, so the
planner stages them, as a panel (short rows, ``Plan.panel``) or realigned through a
carry (``Plan.shifted``), the last block's tiles and rows cut to its channels of data
(``plan.padded_b_blocks``). The tests force those plans on small tensors (NT threshold
0), fill the source padding with noise, and check every destination byte against the
numpy reference at 1 and 2 threads and several destination offsets, with guard bytes
around the destination (a row past C would land in them).
"""

from __future__ import annotations

import numpy as np
import pytest

import layoutjit as lj
import layoutjit.plan as plan_mod
import reference as ref

M = lj.MemoryDesc


@pytest.fixture(autouse=True)
def narrow_panels(monkeypatch):
    monkeypatch.setattr(plan_mod, "PANEL_WIDE_BYTES", 0)


def _check(k) -> None:
    s, d = k.src_md, k.dst_md
    rng = np.random.default_rng(d.get_size())
    x = ref.random_raw(s.get_size() // s.dtype.size, str(s.dtype), rng)  # padding: noise too
    want = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, want, offsets=(0, d.dtype.size, 64 - d.dtype.size))


@pytest.mark.parametrize("dims, stag, sdt, ddt", [
    ((2, 20, 9, 11), "nChw16c", "f32", "f32"),     # rows of 99 (396 B): 16 + 4 channels
    ((3, 13, 9, 9), "nChw8c", "f32", "f32"),       # 8 + 5
    ((2, 45, 11, 13), "nChw16c", "bf16", "bf16"),  # 2-byte rows of 143, 16 + 16 + 13
    ((2, 9, 11, 13), "nChw8c", "f32", "bf16"),     # a conversion
])
def test_panels_from_a_padded_source_are_exact(nt_everywhere, dims, stag, sdt, ddt):
    k = lj.compiler.build(M(dims, sdt, stag), M(dims, ddt, "nchw"))
    p = k.plan
    assert p.panel and not p.shifted and plan_mod.padded_b_blocks(p.ir, p.tile), p.describe()
    blk, last, cols = plan_mod.padded_b_blocks(p.ir, p.tile)
    assert (last, cols) == divmod(dims[1], p.tile.V)
    assert f"< {last} else {cols})" in k.source, k.source
    _check(k)


@pytest.mark.parametrize("dims, stag, sdt, ddt", [
    ((2, 20, 23, 29), "nChw16c", "f32", "f32"),    # rows of 667 (2668 B): 16 + 4 channels
    ((2, 11, 31, 37), "nChw8c", "f32", "f32"),     # 8 + 3, rows of 1147
    ((1, 40, 19, 61), "nChw16c", "bf16", "bf16"),  # 2-byte rows of 1159: 16 + 16 + 8
])
def test_realigned_rows_from_a_padded_source_are_exact(nt_everywhere, dims, stag, sdt, ddt):
    k = lj.compiler.build(M(dims, sdt, stag), M(dims, ddt, "nchw"))
    p = k.plan
    assert p.shifted and not p.panel and plan_mod.padded_b_blocks(p.ir, p.tile), p.describe()
    _check(k)


def test_destination_padding_is_not_a_padded_source(nt_everywhere):
    """A destination that pads the dim (nchw -> nChw16c: zeros to store) is not what
    ``padded_b_blocks`` covers."""
    dims = (2, 20, 23, 29)
    p = lj.compiler.lower_and_plan(M(dims, "f32", "nchw"), M(dims, "f32", "nChw16c"), None)[1]
    assert p.tile is not None and plan_mod.padded_b_blocks(p.ir, p.tile) is None, p.describe()


def test_short_rows_keep_the_plain_plan(nt_everywhere):
    """Rows under ``STAGED_PADDED_B_MIN_ROW_BYTES`` (7x7 f32: 196 B) keep plain tiles."""
    dims = (2, 20, 7, 7)
    p = lj.compiler.lower_and_plan(M(dims, "f32", "nChw16c"), M(dims, "f32", "nchw"), None)[1]
    assert p.tile is not None and plan_mod.padded_b_blocks(p.ir, p.tile) is None, p.describe()
    assert not (p.panel or p.shifted), p.describe()


def test_switch_off_keeps_the_plain_plan(nt_everywhere, monkeypatch):
    monkeypatch.setattr(plan_mod, "STAGED_PADDED_B", False)
    p = lj.compiler.lower_and_plan(M((2, 20, 23, 29), "f32", "nChw16c"), M((2, 20, 23, 29), "f32", "nchw"),
                                   None)[1]
    assert not (p.panel or p.shifted), p.describe()


@pytest.mark.parametrize("dims, tag, staged", [
    ((16, 200, 55, 55), "nChw16c", "realigned"),   # rows of 12100 B
    ((128, 100, 27, 27), "nChw8c", "realigned"),   # rows of 2916 B (_long_rows_shift)
    ((256, 100, 14, 14), "nChw8c", "panel"),       # rows of 784 B, panels of 8
])
def test_real_sizes_take_the_staged_plans(dims, tag, staged):
    """At real sizes (above the NT thresholds), without patching: plans only."""
    p = lj.compiler.lower_and_plan(M(dims, "f32", tag), M(dims, "f32", "nchw"), None)[1]
    assert p.nt and (p.shifted if staged == "realigned" else p.panel), p.describe()

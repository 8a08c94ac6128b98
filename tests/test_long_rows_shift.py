"""Long destination rows off the lines: realigned rather than staged as whole panels.

A blocked -> plain transpose whose destination rows (one per channel) do not start on
64-byte lines is staged: short rows as one contiguous panel of V rows (``Plan.panel``),
long ones realigned through a carry (``Plan.shifted``). Out of cache, panels of rows of
1280 B and more (1792 B for conversions that narrow their elements) lose to realigned
rows (``plan._long_rows_shift``). The plan tests need no kernel (large descriptors are
only planned); the kernel tests force the rule on small tensors (LLC patched to 0, NT
threshold 0) and check every destination byte against the numpy reference.
"""

from __future__ import annotations

import numpy as np
import pytest

import layoutjit as lj
import layoutjit.plan as plan_mod
import reference as ref
from layoutjit.compiler import lower_and_plan

M = lj.MemoryDesc


def _plan(dims, stag, dtag, sdt="f32", ddt="f32"):
    return lower_and_plan(M(dims, sdt, stag), M(dims, ddt, dtag), None)[1]


@pytest.mark.parametrize("dims, stag, dtag, sdt, ddt", [
    ((128, 100, 27, 27), "nChw8c", "nchw", "f32", "f32"),    # rows of 2916 B, C padded
    ((256, 64, 27, 27), "nChw8c", "nchw", "f32", "f32"),
    ((256, 64, 777), "nCw8c", "ncw", "f32", "f32"),
    ((256, 128, 27, 27), "nChw16c", "nchw", "bf16", "bf16"),  # 1458 B
    ((256, 128, 45, 45), "nChw16c", "nchw", "u8", "u8"),      # 2025 B
    ((64, 256, 31, 31), "nChw8c", "nchw", "f32", "bf16"),     # narrowing, 1922 B
])
def test_long_rows_realign_out_of_cache(dims, stag, dtag, sdt, ddt, monkeypatch):
    monkeypatch.setattr(plan_mod, "llc_bytes", lambda: 32 << 20)   # (the host the rule was measured on)
    p = _plan(dims, stag, dtag, sdt, ddt)
    assert p.shifted and not p.panel, p.describe()
    monkeypatch.setattr(plan_mod, "SHIFT_LONG_ROW_BYTES", 0)   # the switch: panels again
    p = _plan(dims, stag, dtag, sdt, ddt)
    assert p.panel and not p.shifted, p.describe()


@pytest.mark.parametrize("dims, stag, dtag, sdt, ddt", [
    ((256, 512, 14, 14), "nChw16c", "nchw", "f32", "f32"),    # rows of 784 B
    ((128, 128, 27, 27), "nChw8c", "nchw", "f32", "bf16"),    # narrowing, 1458 B
    ((4, 64, 27, 27), "nChw8c", "nchw", "f32", "f32"),        # 1.5 MB: in cache
])
def test_short_rows_narrowing_and_cached_keep_panels(dims, stag, dtag, sdt, ddt, monkeypatch):
    monkeypatch.setattr(plan_mod, "llc_bytes", lambda: 32 << 20)
    monkeypatch.setattr(plan_mod, "NT_MIN_BYTES", 0)
    p = _plan(dims, stag, dtag, sdt, ddt)
    assert p.panel and not p.shifted, p.describe()


@pytest.mark.parametrize("dims, stag, sdt, ddt", [
    ((2, 16, 27, 27), "nChw8c", "f32", "f32"),      # rows of 729 f32
    ((1, 20, 23, 29), "nChw8c", "f32", "f32"),      # C padded: 8 + 8 + 4
    ((1, 24, 23, 29), "nChw16c", "bf16", "bf16"),   # rows of 1334 B, 16 + 8
])
def test_realigned_long_rows_are_exact(nt_everywhere, dims, stag, sdt, ddt, monkeypatch):
    monkeypatch.setattr(plan_mod, "PANEL_WIDE_BYTES", 0)
    monkeypatch.setattr(plan_mod, "llc_bytes", lambda: 0)
    with monkeypatch.context() as off:
        off.setattr(plan_mod, "SHIFT_LONG_ROW_BYTES", 0)
        assert _plan(dims, stag, "nchw", sdt, ddt).panel   # the rule is what changes the plan
    k = lj.compiler.build(M(dims, sdt, stag), M(dims, ddt, "nchw"))
    assert k.plan.shifted and not k.plan.panel, k.plan.describe()
    s, d = k.src_md, k.dst_md
    rng = np.random.default_rng(d.get_size())
    x = ref.random_raw(s.get_size() // s.dtype.size, str(s.dtype), rng)   # padding: noise too
    want = ref.reorder(x, s, d, np.zeros(d.get_size() // d.dtype.size, d.dtype.storage)).view(np.uint8)
    ref.check_guarded_runs(k, x, want, offsets=(0, d.dtype.size, 64 - d.dtype.size))

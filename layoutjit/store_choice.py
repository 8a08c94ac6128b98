"""Choosing plain or non-temporal stores at run time, by timing the first calls.

Between half the last-level cache (above which NT stores win on one thread) and the
size above which they win at every thread count, which store kind is faster on
several threads depends on what else holds the cache, not on the layouts: an
output that stays in cache favours plain stores, one that is evicted between calls
(by other work, other tenants, a benchmark's copy) favours NT stores, which skip the
ownership reads. Measured on a Zen 3 host (AVX2, 32 MiB L3 shared with other
tenants), oihw -> OIhw16i16o 512x512x3x3 (19 MB) at 2 threads, alternating with a
copy of the same bytes: plain 1.42-1.50x the copy's time, NT 0.73-0.86x (in the
harness: plain 1.48x, timed choice 0.51-1.21x); on a Zen 4 host in earlier sessions
the same pair went the other way (plain 1.45-1.74x, NT 2.36-2.52x). No fixed threshold is right on both,
so such kernels (``Plan.nt_tune``) carry both store kinds and each thread count
above one times them on its first calls, then keeps the faster.

The kernel reads the request from its job range: jobs ``[lo, hi)`` offset by the
plan's job count mean "NT stores" (``runtime.run_*``'s ``base``).
"""

from __future__ import annotations

import os
import statistics
import threading

#: Calls timed per store kind (after one untimed call of each), alternating.
SAMPLES = int(os.environ.get("LAYOUTJIT_NT_TUNE_SAMPLES", 4))


class StoreChoice:
    """Per thread count: the calls timed so far, then the store kind kept.

    ``next_call(n)`` gives the job offset for the next call on ``n`` threads (0:
    plain, ``jobs``: NT) and whether to time it; ``record`` takes that call's time
    while the choice is open. The choice is made once per kernel and thread count
    (calls from several Python threads only add samples).
    """

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self._times: dict[int, tuple[list[float], list[float]]] = {}
        self._calls: dict[int, int] = {}
        self.chosen: dict[int, bool] = {}  # thread count -> NT stores kept
        self.medians: dict[int, tuple[float, float]] = {}  # thread count -> (plain, NT) seconds
        self._lock = threading.Lock()

    def next_call(self, n: int) -> tuple[int, bool]:
        """(job offset, timed?) for the next call on ``n`` threads (one thread: NT, the
        plan's rule above ``nt_min_bytes``)."""
        if n <= 1:
            return self.jobs, False
        nt = self.chosen.get(n)
        if nt is not None:
            return (self.jobs if nt else 0), False
        with self._lock:
            c = self._calls.get(n, 0)
            self._calls[n] = c + 1
        return (self.jobs if c % 2 else 0), c >= 2

    def record(self, n: int, base: int, seconds: float) -> None:
        with self._lock:
            if n in self.chosen:
                return
            plain, nt = self._times.setdefault(n, ([], []))
            (nt if base else plain).append(seconds)
            if len(plain) >= SAMPLES and len(nt) >= SAMPLES:
                mp, mt = statistics.median(plain), statistics.median(nt)
                self.medians[n] = (mp, mt)
                self.chosen[n] = mt < mp

    def describe(self) -> str:
        """What was kept so far, e.g. ``2 threads: non-temporal (0.61 ms; plain 1.02 ms)``."""
        if not self.chosen:
            return f"not chosen yet (each thread count times {SAMPLES} calls of each kind first)"
        parts = []
        for n in sorted(self.chosen):
            p, t = self.medians[n]
            kept = "non-temporal" if self.chosen[n] else "plain"
            parts.append(f"{n} thread{'s' if n > 1 else ''}: {kept} (median NT {t * 1e3:.3g} ms, "
                         f"plain {p * 1e3:.3g} ms)")
        return "; ".join(parts)

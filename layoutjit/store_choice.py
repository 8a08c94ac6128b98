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
above one times them on its first calls, then keeps the faster. Local permutations
(``Plan.nt_tune_one``: tiles that read one run and write one block, streaming like a
copy) time them on one thread as well: there too the faster kind changed between
sessions on the same kind of host (plan.BLOCK_LOCAL_TUNE).

The kernel reads the request from its job range: jobs ``[lo, hi)`` offset by the
plan's job count mean "NT stores" (``runtime.run_*``'s ``base``).
"""

from __future__ import annotations

import os
import statistics
import threading
import time

#: Calls timed per store kind.
SAMPLES = int(os.environ.get("LAYOUTJIT_NT_TUNE_SAMPLES", 4))

#: The calls go in pairs of one kind (plain, plain, NT, NT, ...) and only the second of
#: each pair is timed, so each kind is timed in its own steady state: a plain call right
#: after an NT one finds its output evicted (NT stores bypass the cache) and pays the
#: ownership reads an output kept in cache would not. Alternating every call (0: the first
#: two calls untimed, then plain, NT, plain, ...) timed plain stores that way and kept NT
#: for outputs that stay in cache. Zen 3 (AVX2), f32 `nChw16c -> nchw` 1x384x299x17
#: (16 MB), medians of the timed calls, plain / NT: 1 thread 0.48 / 0.45 ms alternating,
#: 0.36 / 0.44 paired; 2 threads 0.28 / 0.30 -> 0.14 / 0.28.
PAIRED = os.environ.get("LAYOUTJIT_NT_TUNE_PAIRED", "1") != "0"


def calls_to_choose() -> int:
    """Calls at one thread count until the store kind is kept."""
    return 4 * SAMPLES if PAIRED else 2 * SAMPLES + 2


class StoreChoice:
    """Per thread count: the calls timed so far, then the store kind kept.

    A launch asks ``start(n)`` for the job offset of its call on ``n`` threads (0:
    plain, ``jobs``: NT) and a start time (None: not timed), and hands both to
    ``finish`` when the call returns. The choice is made once per kernel and thread
    count (calls from several Python threads only add samples).
    """

    def __init__(self, jobs: int, one_thread: bool = False) -> None:
        self.jobs = jobs
        self.one_thread = one_thread  # time on one thread too (Plan.nt_tune_one), else NT there
        self._times: dict[int, tuple[list[float], list[float]]] = {}
        self._calls: dict[int, int] = {}
        self.medians: dict[int, tuple[float, float]] = {}  # thread count -> (plain, NT) seconds
        self._lock = threading.Lock()

    def kept(self, n: int) -> bool | None:
        """NT (True) or plain (False) kept for ``n`` threads; None while still timing."""
        m = self.medians.get(n)
        return None if m is None else m[1] < m[0]

    def start(self, n: int) -> tuple[int, float | None]:
        """(job offset, start time or None) for the next call on ``n`` threads (one
        thread: NT, the plan's rule above ``nt_min_bytes``, untimed unless ``one_thread``)."""
        if n <= 1 and not self.one_thread:
            return self.jobs, None
        nt = self.kept(n)
        if nt is not None:
            return (self.jobs if nt else 0), None
        with self._lock:
            c = self._calls.get(n, 0)
            self._calls[n] = c + 1
        if PAIRED:  # plain, plain, NT, NT, ...: the second of each pair timed
            return (self.jobs if c // 2 % 2 else 0), (time.perf_counter() if c % 2 else None)
        return (self.jobs if c % 2 else 0), (time.perf_counter() if c >= 2 else None)

    def finish(self, n: int, base: int, t0: float | None) -> None:
        """Record a timed call (``t0`` from :meth:`start`); choose once both kinds have
        ``SAMPLES`` times."""
        if t0 is None:
            return
        seconds = time.perf_counter() - t0
        with self._lock:
            if n in self.medians:
                return
            plain, nt = self._times.setdefault(n, ([], []))
            (nt if base else plain).append(seconds)
            if len(plain) >= SAMPLES and len(nt) >= SAMPLES:
                self.medians[n] = (statistics.median(plain), statistics.median(nt))

    def describe(self) -> str:
        """What was kept so far, e.g. ``2 threads: non-temporal (median NT 0.61 ms, plain 1.02 ms)``."""
        if not self.medians:
            return f"not chosen yet (each thread count times {SAMPLES} calls of each kind first)"
        parts = []
        for n in sorted(self.medians):
            p, t = self.medians[n]
            kept = "non-temporal" if t < p else "plain"
            parts.append(f"{n} thread{'s' if n > 1 else ''}: {kept} (median NT {t * 1e3:.3g} ms, "
                         f"plain {p * 1e3:.3g} ms)")
        return "; ".join(parts)

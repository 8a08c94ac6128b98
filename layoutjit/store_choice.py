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

#: Each kind is timed in its own steady state: all plain calls first (``PLAIN_WARM``
#: untimed, then ``SAMPLES`` timed), then one untimed NT call and ``SAMPLES`` timed ones.
#: A plain call after NT ones finds its output evicted (NT stores bypass the cache, and
#: evict the lines they write) and pays the ownership reads an output kept in cache would
#: not; on the AVX-512 host (Zen 4, its L3 a victim cache of L2) plain calls take several
#: calls to settle: f32 `oihw -> OIhw16i16o` 512x512x3x3 (19 MB) at 2 threads, back to
#: back, plain calls after NT ones 0.53, 0.45, 0.40, 0.38, 0.36 ms, then 0.18-0.20, against
#: 0.34 for NT from its first call. Calls in pairs of one kind (plain, plain(timed), NT,
#: NT(timed), ..., ``PAIRED`` before) timed plain at 0.45-0.55 and kept NT, and in the
#: harness the pair ran at 2.4-2.5x the copy's time, behind oneDNN (plain stores,
#: 2.2-2.4), against 1.4-1.7 with plain stores. (Zen 3, AVX2, pairs against alternating
#: every call, f32 `nChw16c -> nchw` 1x384x299x17, plain / NT medians: 1 thread 0.48 /
#: 0.45 ms alternating, 0.36 / 0.44 paired; 2 threads 0.28 / 0.30 -> 0.14 / 0.28.)
#: ``LAYOUTJIT_NT_TUNE_PAIRED=0``: alternate every call (the first two untimed).
PAIRED = os.environ.get("LAYOUTJIT_NT_TUNE_PAIRED", "1") != "0"
PLAIN_WARM = int(os.environ.get("LAYOUTJIT_NT_TUNE_PLAIN_WARM", 8))

#: NT is kept only where its median is below this fraction of plain's: in a caller that
#: does other work between calls, plain stores leave their write-backs to that work, which
#: NT stores pay themselves (the pair above alternating with a copy of the same bytes at 2
#: threads: plain 0.46 ms and the copy 0.33, NT 0.39 and the copy 0.20).
NT_MARGIN = float(os.environ.get("LAYOUTJIT_NT_TUNE_MARGIN", 0.9))


def calls_to_choose() -> int:
    """Calls at one thread count until the store kind is kept."""
    return PLAIN_WARM + 2 * SAMPLES + 1 if PAIRED else 2 * SAMPLES + 2


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
        return None if m is None else m[1] < NT_MARGIN * m[0]

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
        if PAIRED:  # plain x (PLAIN_WARM + SAMPLES), then NT x (1 + SAMPLES); the last SAMPLES of each timed
            first_nt = PLAIN_WARM + SAMPLES
            timed = PLAIN_WARM <= c < first_nt or c > first_nt
            return (self.jobs if c >= first_nt else 0), (time.perf_counter() if timed else None)
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
            kept = "non-temporal" if self.kept(n) else "plain"
            parts.append(f"{n} thread{'s' if n > 1 else ''}: {kept} (median NT {t * 1e3:.3g} ms, "
                         f"plain {p * 1e3:.3g} ms)")
        return "; ".join(parts)

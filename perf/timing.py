"""Paired, alternating timing of contenders against the copy baseline.

The machine is a shared VM whose memory bandwidth drifts by up to ±30 % between
runs, so absolute times from different moments are not comparable. Each round
therefore times, for every contender in turn, one copy sample immediately
followed by one contender sample; the contender order rotates between rounds.
After ``warmup`` untimed calls of everything (and at least ``warmup_s`` seconds of them),
``repeats`` rounds are run.

Per contender the result holds its own sample times and the copy samples
taken right before them. ``ratio`` = median(contender) / median(paired copy);
``paired_ratio`` = median over rounds of (contender / copy of that round), a
cross-check that agrees with ``ratio`` when the run is stable.

A *sample* is ``k`` back-to-back calls divided by ``k``; ``k`` is chosen per
function (from the warm-up) so that a sample lasts at least ``min_sample_s``.
Large cases use ``k = 1``; tiny ones (per-call overhead) use many calls, which
keeps the data cache-resident -- the copy baseline is timed the same way.
Cases smaller than the last-level cache are therefore measured warm.

Disturbed rounds. On this shared VM a vCPU is sometimes unavailable for
seconds; a 2-thread parallel region then waits at its barrier for the host's
scheduler and every sample (copy and contender alike) takes a multiple of
about 4-8 ms. Bandwidth drift cancels in the paired ratios, this does not. So
each round starts with a :class:`CpuProbe`: a fixed amount of pure arithmetic
on every thread of the phase (about 0.2 ms). A round whose probe takes more
than ``2x`` the fastest probe seen (+50 us) is *disturbed* and left out; rounds
continue until ``repeats`` clean rounds are collected or ``3 * repeats``
rounds have run. If too few are clean, all rounds are used and the result is
marked ``stable: false``.

Slow peers. A contender whose first two calls each take more than ``SLOW_RATIO`` times
the copy's (the first alone can carry one-time costs of a new thread count; oneDNN v3.2
runs bf16 reorders on AVX2 CPUs through its reference ``simple:any`` kernel: 100-600x a
copy, seconds per call on large cases) is timed in the first ``SLOW_ROUNDS`` rounds only
(``slow: true`` in its result). Its ratio is then known to a few per cent, which is plenty
for a 100x ratio, and the run does not spend minutes on it.

Other processes. The probe cannot see a co-tenant that keeps both CPUs busy
the whole time (the reference is then slow too), so :class:`LoadMonitor`
reads ``/proc/stat`` and ``/proc/self/stat`` around every timing phase and
reports how many CPUs *other* processes used meanwhile (``others_cpu``) and
the steal time. The runner repeats a phase that ran beside other work, after
waiting for the machine to become quiet (see ``perf.runner``).
"""

from __future__ import annotations

import gc
import math
import os
import statistics
import time
from collections.abc import Callable


def _sample(fn: Callable[[], None], k: int) -> float:
    pc = time.perf_counter_ns
    if k == 1:
        t0 = pc()
        fn()
        return (pc() - t0) * 1e-9
    t0 = pc()
    for _ in range(k):
        fn()
    return (pc() - t0) * 1e-9 / k


def cpu_threads(fn: Callable[[], None], min_s: float = 0.03,
                cpu_clock: Callable[[], float] = time.process_time,
                wall_clock: Callable[[], float] = time.perf_counter) -> float:
    """CPUs ``fn`` keeps busy: process CPU time over wall time for calls lasting ``min_s``.

    Checks that a contender runs on the threads it was given (a peer whose thread-count
    setting did not take would show ~2.0 in a 1-thread phase). Spinning idle workers count
    as busy, as they do for the machine. The clocks are parameters so that tests can
    check the arithmetic without depending on how loaded the machine is.
    """
    fn()
    c0, t0 = cpu_clock(), wall_clock()
    while True:
        fn()
        wall = wall_clock() - t0
        if wall >= min_s:
            return (cpu_clock() - c0) / wall


def calls_per_sample(fn: Callable[[], None], min_sample_s: float, probes: int = 3) -> int:
    """Calls per sample so that one sample lasts at least ``min_sample_s`` (fn already warm)."""
    if min_sample_s <= 0:
        return 1
    t = min(_sample(fn, 1) for _ in range(probes))
    if t >= min_sample_s:
        return 1
    k = max(1, math.ceil(min_sample_s / max(t, 1e-7)))
    # refine once with a batch (single-call timings of tiny functions are noisy)
    t = _sample(fn, k)
    return max(1, min(1_000_000, math.ceil(min_sample_s / max(t, 1e-9))))


class LoadMonitor:
    """CPU time used by other processes (and stolen by the host) between two snapshots."""

    def __init__(self) -> None:
        self.hz = os.sysconf("SC_CLK_TCK")
        self.ok = os.path.exists("/proc/stat") and os.path.exists("/proc/self/stat")

    def snap(self) -> tuple[float, int, int, int]:
        if not self.ok:
            return (time.monotonic(), 0, 0, 0)
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        busy = v[0] + v[1] + v[2] + v[5] + v[6]  # user nice system irq softirq
        steal = v[7] if len(v) > 7 else 0
        with open("/proc/self/stat") as f:
            st = f.read().rsplit(")", 1)[1].split()
        mine = int(st[11]) + int(st[12])  # utime + stime of all our threads
        return (time.monotonic(), busy, steal, mine)

    def load(self, a: tuple, b: tuple) -> dict:
        """``others_cpu``: CPUs' worth of time other processes used; ``steal_cpu`` likewise."""
        wall = max(b[0] - a[0], 1e-9)
        if not self.ok:
            return {"wall_s": wall, "others_cpu": None, "steal_cpu": None, "self_cpu": None}
        others = max(0, (b[1] - a[1]) - (b[3] - a[3])) / self.hz / wall
        return {"wall_s": wall, "others_cpu": others,
                "steal_cpu": (b[2] - a[2]) / self.hz / wall,
                "self_cpu": (b[3] - a[3]) / self.hz / wall}

    def measure(self, seconds: float) -> dict:
        a = self.snap()
        time.sleep(seconds)
        return self.load(a, self.snap())

    def wait_quiet(self, max_wait_s: float, threshold: float, window_s: float = 0.3) -> dict:
        """Sleep until other processes use less than ``threshold`` CPUs (or time runs out)."""
        t0 = time.monotonic()
        while True:
            m = self.measure(window_s)
            busy = (m["others_cpu"] or 0.0) + (m["steal_cpu"] or 0.0)
            if busy < threshold or time.monotonic() - t0 >= max_wait_s:
                m["waited_s"] = time.monotonic() - t0
                m["quiet"] = busy < threshold
                return m


class CpuProbe:
    """Times a fixed compute-only parallel region; slow probes mean a busy or absent CPU."""

    def __init__(self, target_s: float = 2e-4) -> None:
        import numba
        import numpy as np

        @numba.njit(parallel=True, nogil=True)
        def spin(n, iters, out):
            for t in numba.prange(n):
                x = 1.0 + t
                for _ in range(iters):
                    x = x * 0.9999999 + 1e-7
                out[t] = x

        self._numba = numba
        self._spin = spin
        self._out = np.zeros(64)
        self.iters = 1000
        self.ref: dict[int, float] = {}
        spin(1, 10, self._out)
        t = min(self._run(1) for _ in range(5))
        self.iters = max(1000, int(self.iters * target_s / max(t, 1e-7)))

    def _run(self, n: int) -> float:
        t0 = time.perf_counter_ns()
        self._spin(n, self.iters, self._out)
        return (time.perf_counter_ns() - t0) * 1e-9

    def __call__(self) -> float:
        n = self._numba.get_num_threads()
        t = self._run(n)
        if t < self.ref.get(n, float("inf")):
            self.ref[n] = t
        return t

    def calibrate(self, rounds: int = 15) -> None:
        for _ in range(rounds):
            self()

    def disturbed(self, t: float) -> bool:
        n = self._numba.get_num_threads()
        return t > 2.0 * self.ref.get(n, t) + 5e-5


SLOW_RATIO = 50.0
SLOW_ROUNDS = 3


def paired(copy: Callable[[], None], contenders: dict[str, Callable[[], None]], *,
           repeats: int, warmup: int, min_sample_s: float,
           probe: CpuProbe | None = None, warmup_s: float = 0.0) -> dict:
    """Time each contender alternately with ``copy``; see the module docstring.

    Warm-up: ``warmup`` calls of everything, then more rounds until ``warmup_s``
    seconds have passed -- after a new thread count or new buffers, the first tens of
    milliseconds on this VM can run at half speed (seen at 2 threads on large cases).
    """
    t_end = time.perf_counter() + warmup_s
    t_copy = min(_sample(copy, 1) for _ in range(3))  # one preempted call must not decide
    # a first call can carry one-time costs (a thread pool woken after a one-thread phase,
    # code loaded at a new thread count: 7-10 ms for layoutjit's 2-thread drivers), so a
    # contender is slow only if a second call is over the bar too
    slow = {n for n, f in contenders.items()
            if _sample(f, 1) > SLOW_RATIO * t_copy and _sample(f, 1) > SLOW_RATIO * t_copy}
    fast = [f for n, f in contenders.items() if n not in slow]
    n = 1
    while n < warmup or (time.perf_counter() < t_end and n < 1000):
        copy()
        for f in fast:
            f()
        n += 1
    k_copy = calls_per_sample(copy, min_sample_s)
    ks = {n: 1 if n in slow else calls_per_sample(f, min_sample_s) for n, f in contenders.items()}
    sampled = dict.fromkeys(contenders, 0)
    names = list(contenders)
    rounds: list[dict] = []
    n_clean = 0
    max_rounds = repeats * 3 if probe is not None else repeats
    gc_was = gc.isenabled()
    gc.disable()
    try:
        r = 0
        while n_clean < repeats and r < max_rounds:
            pt = probe() if probe is not None else 0.0
            rot = names[r % len(names):] + names[:r % len(names)] if names else []
            rd: dict = {"probe_s": pt, "copy": [], "x": {}}
            if not names:
                rd["copy"].append(_sample(copy, k_copy))
            for n in rot:
                if n in slow and sampled[n] >= SLOW_ROUNDS:
                    continue
                tc = _sample(copy, k_copy)
                tx = _sample(contenders[n], ks[n])
                rd["copy"].append(tc)
                rd["x"][n] = (tc, tx)
                sampled[n] += 1
            rounds.append(rd)
            r += 1
            if probe is None or not probe.disturbed(pt):
                n_clean += 1
    finally:
        if gc_was:
            gc.enable()
    if probe is not None:  # judge every round against the final (fastest) reference
        clean = [rd for rd in rounds if not probe.disturbed(rd["probe_s"])]
    else:
        clean = rounds
    stable = len(clean) >= repeats
    use = clean if stable else rounds
    copy_all = [t for rd in use for t in rd["copy"]]
    out: dict = {"copy": {"median_s": statistics.median(copy_all), "min_s": min(copy_all),
                          "times_s": copy_all, "calls_per_sample": k_copy},
                 "contenders": {}, "rounds_run": len(rounds), "rounds_used": len(use),
                 "rounds_disturbed": len(rounds) - len(clean), "stable": stable,
                 "probe_s": [rd["probe_s"] for rd in rounds],
                 "probe_ref_s": (probe.ref.get(probe._numba.get_num_threads())
                                 if probe is not None else None)}
    out["copy"]["cpu_threads"] = cpu_threads(copy)
    for n in names:
        mine = [rd for rd in use if n in rd["x"]] or [rd for rd in rounds if n in rd["x"]]
        c = [rd["x"][n][0] for rd in mine]
        t = [rd["x"][n][1] for rd in mine]
        mt, mc = statistics.median(t), statistics.median(c)
        out["contenders"][n] = {
            "median_s": mt, "min_s": min(t), "copy_median_s": mc,
            "ratio": mt / mc if mc > 0 else float("nan"),
            "paired_ratio": statistics.median(x / y for x, y in zip(t, c)),
            "calls_per_sample": ks[n], "times_s": t, "copy_times_s": c,
            "cpu_threads": cpu_threads(contenders[n], min_s=0.0 if n in slow else 0.03),
            "slow": n in slow,
        }
    return out

"""Fixed costs and fused-kernel costs: ``python -m perf.overhead``.

Measures, each in the setting the figure is about:

- cold compile of one kernel (a new process, an empty cache directory): the
  first kernel of the process (includes Numba's one-time initialisation and
  loading the drivers) and a further kernel;
- loading a kernel from the disk cache in a new process (first and further);
- an in-memory cache hit (``compile_reorder`` with equal descriptors);
- a call of a cached kernel (checked ``k(src, dst)`` and bound ``k.bind(src, dst)()``)
  on a tiny tensor (1x16x4x4 f32) and on 64 KB, beside
  ``np.copyto`` of the same bytes;
- a reorder with a fused eltwise post-op against the plain reorder, and an
  in-place eltwise against a copy of the same bytes (large tensors, 1 and 2
  threads, medians of alternating runs).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import timeit

_CHILD = textwrap.dedent("""
    import json, sys, time
    t0 = time.perf_counter()
    import layoutjit as lj
    t1 = time.perf_counter()
    M = lj.MemoryDesc
    out = {"import_s": t1 - t0}
    pairs = [([2, 17, 5, 4], "nchw", "nChw16c"), ([8, 64, 7, 9], "nhwc", "nchw"),
             ([3, 40, 50], "abc", "cab")]
    times = []
    for dims, s, d in pairs:
        t = time.perf_counter()
        lj.compile_reorder(M(dims, "f32", s), M(dims, "f32", d))
        times.append(time.perf_counter() - t)
    out["kernel_s"] = times
    print(json.dumps(out))
""")


def _child(cache: str) -> dict:
    env = dict(os.environ, LAYOUTJIT_CACHE_DIR=cache)
    r = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True,
                       check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def compile_costs(runs: int = 3) -> dict:
    cold_first, cold_next, disk_first, disk_next = [], [], [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="lj-overhead-") as d:
            a = _child(d)
            b = _child(d)
        cold_first.append(a["kernel_s"][0])
        cold_next += a["kernel_s"][1:]
        disk_first.append(b["kernel_s"][0])
        disk_next += b["kernel_s"][1:]
    med = statistics.median
    return {"cold_compile_first_s": med(cold_first), "cold_compile_further_s": med(cold_next),
            "disk_load_first_s": med(disk_first), "disk_load_further_s": med(disk_next)}


def call_costs() -> dict:
    import numpy as np

    import layoutjit as lj

    M = lj.MemoryDesc
    out = {}
    s, d = M([1, 16, 4, 4], "f32", "nchw"), M([1, 16, 4, 4], "f32", "nChw16c")
    k = lj.compile_reorder(s, d)
    n = 20000
    out["memory_hit_us"] = min(timeit.repeat(lambda: lj.compile_reorder(
        M([1, 16, 4, 4], "f32", "nchw"), M([1, 16, 4, 4], "f32", "nChw16c")), number=2000, repeat=5)) / 2000 * 1e6
    out["memory_hit_same_objects_us"] = min(timeit.repeat(lambda: lj.compile_reorder(s, d),
                                                          number=n, repeat=5)) / n * 1e6
    for dims, name in (([1, 16, 4, 4], "tiny_1x16x4x4"), ([1, 64, 16, 16], "64KB_1x64x16x16")):
        s, d = M(dims, "f32", "nchw"), M(dims, "f32", "nChw16c")
        k = lj.compile_reorder(s, d)
        a = lj.aligned_empty(s.get_size(), np.float32)
        a[:] = 1
        b = lj.aligned_empty(d.get_size(), np.float32)
        k(a, b)
        out[f"call_{name}_us"] = min(timeit.repeat(lambda: k(a, b), number=n, repeat=7)) / n * 1e6
        bound = k.bind(a, b)
        out[f"bound_{name}_us"] = min(timeit.repeat(bound, number=n, repeat=7)) / n * 1e6
        out[f"copyto_{name}_us"] = min(timeit.repeat(lambda: np.copyto(b, a), number=n, repeat=7)) / n * 1e6
    return out


def _median_alternating(f, g, rounds: int = 9) -> tuple[float, float]:
    f()
    g()
    tf, tg = [], []
    for _ in range(rounds):
        t = time.perf_counter()
        f()
        tf.append(time.perf_counter() - t)
        t = time.perf_counter()
        g()
        tg.append(time.perf_counter() - t)
    return statistics.median(tf), statistics.median(tg)


def fused_costs(threads: list[int]) -> list[dict]:
    import numba
    import numpy as np

    import layoutjit as lj

    @numba.njit(parallel=True)
    def pcopy(a, b):  # the 2-thread copy baseline: an elementwise prange loop
        for i in numba.prange(a.size):
            b[i] = a[i]

    M = lj.MemoryDesc
    rows = []
    dims = [32, 256, 56, 56]
    for s, d in (("nchw", "nChw16c"), ("nchw", "nhwc"), ("nhwc", "nChw16c")):
        smd, dmd = M(dims, "f32", s), M(dims, "f32", d)
        plain = lj.compile_reorder(smd, dmd)
        fused = lj.compile_reorder(smd, dmd, post_ops=[("eltwise", "relu", 0.0, 0.0)])
        x = lj.aligned_empty(smd.get_size(), np.float32)
        x[:] = 1
        y = lj.aligned_empty(dmd.get_size(), np.float32)
        for t in threads:
            numba.set_num_threads(t)
            tf, tp = _median_alternating(lambda f=fused, x=x, y=y: f(x, y), lambda p=plain, x=x, y=y: p(x, y))
            rows.append({"case": f"{s}->{d} {'x'.join(map(str, dims))} f32 + relu", "threads": t,
                         "fused_ms": tf * 1e3, "plain_ms": tp * 1e3, "ratio": tf / tp})
    md = M(dims, "f32", "nChw16c")
    e = lj.compile_eltwise(md, "relu")
    x = lj.aligned_empty(md.get_size(), np.float32)
    x[:] = 1
    c = lj.aligned_empty(md.get_size(), np.float32)
    for t in threads:
        numba.set_num_threads(t)
        copy = (lambda: np.copyto(c, x)) if t == 1 else (lambda: pcopy(x, c))
        te, tc = _median_alternating(lambda: e(x, x), copy)
        rows.append({"case": f"in-place relu {'x'.join(map(str, dims))} nChw16c f32", "threads": t,
                     "fused_ms": te * 1e3, "plain_ms": tc * 1e3, "ratio": te / tc, "vs": "copy"})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m perf.overhead", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    ap.add_argument("--skip-fused", action="store_true")
    args = ap.parse_args(argv)
    threads = [int(t) for t in args.threads.split(",")]
    res: dict = {"compile": compile_costs(), "calls": call_costs()}
    if not args.skip_fused:
        res["fused"] = fused_costs(threads)
    c, k = res["compile"], res["calls"]
    print("compile and cache (new processes, empty then warm cache dir):")
    print(f"  cold compile, first kernel in the process   {c['cold_compile_first_s'] * 1e3:8.1f} ms")
    print(f"  cold compile, further kernel                {c['cold_compile_further_s'] * 1e3:8.1f} ms")
    print(f"  disk-cache load, first kernel in a process  {c['disk_load_first_s'] * 1e3:8.1f} ms")
    print(f"  disk-cache load, further kernel             {c['disk_load_further_s'] * 1e3:8.1f} ms")
    print(f"  in-memory hit (new equal descriptors)       {k['memory_hit_us']:8.2f} us")
    print(f"  in-memory hit (same descriptor objects)     {k['memory_hit_same_objects_us']:8.2f} us")
    print("calls of a cached kernel (1 thread):")
    for name in ("tiny_1x16x4x4", "64KB_1x64x16x16"):
        call, bound, cp = k[f"call_{name}_us"], k[f"bound_{name}_us"], k[f"copyto_{name}_us"]
        print(f"  {name:<18} k(src, dst) {call:6.2f} us   bound b() {bound:6.2f} us   np.copyto {cp:6.2f} us"
              f"   overhead {call - cp:+.2f} / {bound - cp:+.2f} us")
    if "fused" in res:
        print("fused post-ops (medians of 9 alternating runs):")
        for r in res["fused"]:
            vs = r.get("vs", "plain reorder")
            print(f"  {r['case']:<44} threads={r['threads']}  {r['fused_ms']:7.2f} ms vs {vs} "
                  f"{r['plain_ms']:7.2f} ms  ratio {r['ratio']:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What this host's memory system charges for the access patterns of a transpose:
``python -m perf.patterns``.

A transpose reads several source rows side by side and writes a few lines of each
destination row per pass; a copy reads one stream and writes one. This probe times the
two halves of that pattern separately, each against a copy of the same bytes (1 thread,
alternating, medians), with the same non-temporal line stores the kernels use:

- ``nt_copy``: a sequential copy by NT lines (is our store path as fast as the copy?);
- ``read_rows R``: read R rows ``--row-stride`` bytes apart, one line of each per visit,
  and write what was read as one sequential NT stream (the cost of R read streams);
- ``write_lines k``: read one sequential stream and write it k lines at a time into
  rows ``--dst-row`` bytes apart, pass after pass (the cost of short write runs);
- ``--copy-sizes``: the copy baseline itself at 1 and 2 threads over a range of sizes.

The planner's limits on rows read side by side (``READ_STREAMS``, ``ALIASED_L2_STREAMS``,
``SHORT_ROW_STREAMS``) and its multi-line tiles (``TWO_LINE_ROWS``, ``skewed_tiles``)
answer these costs; on a new host this says whether they still hold. A transpose needs
both at once: with f32 rows of C channels, a pass over R source rows writes R*4 bytes of
each destination row, so few streams and long write runs pull against each other.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import statistics
import sys
import time
from collections.abc import Callable

import numba
import numpy as np

from layoutjit import simd

from .buffers import aligned_empty

LINE = 16  # f32 elements of one 64-byte line


def _kernels() -> dict[str, Callable[..., Callable]]:
    """Factories of the probe kernels (compiled on first use)."""
    line_nt = simd.gather(1, LINE, "f32", "f32", nt=True)
    sfence = simd.sfence

    @numba.njit(nogil=True)
    def nt_copy(a, d):  # type: ignore[no-untyped-def]
        for i in range(0, a.size, LINE):
            line_nt(a, i, 0, d, i)
        sfence()

    def read_rows(rows: int, stride: int, visit: int) -> Callable:
        step = LINE * visit

        @numba.njit(nogil=True)
        def k(a, d):  # type: ignore[no-untyped-def]
            block = rows * stride
            for b in range(0, a.size - block + 1, block):
                for c in range(0, stride, step):
                    for r in range(rows):
                        for x in range(0, step, LINE):
                            line_nt(a, b + r * stride + c + x, 0, d, b + c * rows + r * step + x)
            sfence()
        return k

    def write_lines(lines: int, row: int) -> Callable:
        @numba.njit(nogil=True)
        def k(a, d):  # type: ignore[no-untyped-def]
            nrows = d.size // row
            i = 0
            for blk in range(0, nrows, 8192):
                end = min(blk + 8192, nrows)
                for g in range(0, row, LINE * lines):
                    for j in range(blk, end):
                        for x in range(lines):
                            line_nt(a, i, 0, d, j * row + g + x * LINE)
                            i += LINE
            sfence()
        return k

    return {"nt_copy": lambda: nt_copy, "read_rows": read_rows, "write_lines": write_lines}


def check_moved(name: str, src: np.ndarray, dst: np.ndarray) -> None:
    """Every destination element written, and the values moved, not made up (a pattern
    that skipped or doubled lines would time less or more work than the copy)."""
    if dst.min() < 0 or not np.isclose(dst.sum(dtype=np.float64), src.sum(dtype=np.float64), rtol=0, atol=0.5):
        raise RuntimeError(f"pattern {name!r} did not move every element of the source once")


def run(mb: int, rows: list[int], lines: list[int], row_stride: int, dst_row: int,
        repeats: int, visit: int = 1) -> dict:
    """Time every pattern against ``np.copyto`` of the same bytes; returns the results."""
    elems = (mb << 20) // 4
    unit = math.lcm(row_stride // 4 * math.lcm(*rows), dst_row // 4)
    elems = max(unit, elems // unit * unit)  # whole blocks of every pattern
    src = aligned_empty(elems * 4).view(np.float32)
    src[:] = np.arange(elems) % 1021
    dst = aligned_empty(elems * 4).view(np.float32)
    ca, cb = aligned_empty(elems * 4), aligned_empty(elems * 4)
    ca[:] = 1
    make = _kernels()
    kernels: dict[str, Callable] = {"nt_copy": make["nt_copy"]()}
    for nrows in rows:
        kernels[f"read_rows {nrows}"] = make["read_rows"](nrows, row_stride // 4, visit)
    for nlines in lines:
        kernels[f"write_lines {nlines}"] = make["write_lines"](nlines, dst_row // 4)
    fns: dict[str, Callable[[], object]] = {
        name: functools.partial(kern, src, dst) for name, kern in kernels.items()}
    numba.set_num_threads(1)
    for name, f in fns.items():
        dst.fill(-1.0)
        f()  # compile and touch
        check_moved(name, src, dst)

    def timed(f: Callable[[], object]) -> float:
        t = time.perf_counter()
        f()
        return time.perf_counter() - t

    ratios: dict[str, list[float]] = {n: [] for n in fns}
    copies: list[float] = []
    for _ in range(repeats):
        for name, f in fns.items():
            c = timed(lambda: np.copyto(cb, ca))
            copies.append(c)
            ratios[name].append(timed(f) / c)
    copy_s = statistics.median(copies)
    return {"bytes": elems * 4, "row_stride": row_stride, "dst_row": dst_row,
            "visit_lines": visit, "repeats": repeats, "copy_gbps": 2 * elems * 4 / copy_s / 1e9,
            "ratio": {n: statistics.median(v) for n, v in ratios.items()},
            "ratio_range": {n: [min(v), max(v)] for n, v in ratios.items()}}


def copy_sizes(mbs: list[int], repeats: int) -> dict[int, dict[int, float]]:
    """The harness's copy baseline (``CopyPeer``) in GB/s of traffic at 1 and 2 threads for
    each size: glibc switches to non-temporal loops above a threshold, so the target a
    kernel is measured against moves with the size."""
    from .peers import CopyPeer

    cp = CopyPeer()
    cp.warm_compile()
    out: dict[int, dict[int, float]] = {}
    for mb in mbs:
        a, b = cp.buffers(mb << 20)
        out[mb] = {}
        for th in (1, 2):
            cp.set_threads(th)
            f = cp.prepare_copy(a, b, th).fn
            f()
            ts = []
            for _ in range(repeats):
                t = time.perf_counter()
                f()
                ts.append(time.perf_counter() - t)
            out[mb][th] = 2 * (mb << 20) / statistics.median(ts) / 1e9
        del a, b
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m perf.patterns", description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=512, help="buffer size in MiB (default 512: "
                    "glibc copies with NT stores above about 200 MB)")
    ap.add_argument("--rows", default="8,16,32,64", help="source rows read side by side")
    ap.add_argument("--lines", default="1,2,4,16", help="lines written per destination row visit")
    ap.add_argument("--row-stride", type=int, default=65536, help="bytes between source rows")
    ap.add_argument("--visit", type=int, default=1, help="lines read from a source row per visit")
    ap.add_argument("--dst-row", type=int, default=1024, help="bytes between destination rows")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--copy-sizes", help="instead: the copy baseline's GB/s at 1 and 2 threads "
                    "for these buffer sizes in MiB (comma-separated)")
    a = ap.parse_args(argv)
    if a.copy_sizes:
        sizes = copy_sizes([int(x) for x in a.copy_sizes.split(",") if x], a.repeats)
        for mb, by_threads in sizes.items():
            print(f"{mb:6d} MiB  " + "  ".join(f"{th} thread(s) {g:5.1f} GB/s" for th, g in by_threads.items()))
        return 0
    rows = [int(x) for x in a.rows.split(",") if x]
    lines = [int(x) for x in a.lines.split(",") if x]
    for what, v, unit in (("--row-stride", a.row_stride, 64 * a.visit), ("--dst-row", a.dst_row, 64)):
        if v <= 0 or v % unit:
            ap.error(f"{what} must be a positive multiple of {unit} bytes")
    if any(r < 1 for r in rows):
        ap.error("--rows: row counts must be positive")
    for n in lines:
        if n < 1 or (a.dst_row // 64) % n:
            ap.error(f"--lines {n}: must divide the {a.dst_row // 64} lines of a destination row")
    if a.visit < 1:
        ap.error("--visit must be positive")
    res = run(a.mb, rows, lines, a.row_stride, a.dst_row, a.repeats, a.visit)
    print(f"{res['bytes'] / 2**20:.0f} MiB, 1 thread, copy (np.copyto) {res['copy_gbps']:.1f} GB/s of "
          f"traffic; source rows {a.row_stride} B apart, read {a.visit} line(s) a visit; "
          f"destination rows {a.dst_row} B; ratio to the copy's time, median of {a.repeats} (range)")
    for n, v in res["ratio"].items():
        lo, hi = res["ratio_range"][n]
        print(f"  {n:16s} {v:5.2f}  ({lo:.2f}-{hi:.2f})")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

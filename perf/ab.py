"""One-process A/B of planner switches: ``python -m perf.ab JOBFILE [ROUNDS] [THREADS]``.

The machines this runs on drift between runs (other tenants, frequency), so two harness runs
with and without a switch can differ by more than the switch does. Here every variant of a
pair is built in the same process (``compiler.build``, no in-memory cache) and timed
alternately with a copy of the same bytes (``perf.timing.paired``), so their ratios to the
copy compare directly. Each line of JOBFILE is::

    DIMS:SRC:DST[:SDT[:DDT]] ;; name=statements ;; name=statements ...

The statements run with ``pm`` (layoutjit.plan), ``cg`` (layoutjit.codegen), ``simd`` and ``wd``
(layoutjit.widen) bound,
before the variant is built; every module attribute they change is restored afterwards.
A micro-kernel switch (``simd.*``) shapes machine code the source does not show, so its
statements must also reset ``cg._FINGERPRINT = None`` (the disk cache key). Example::

    16x56x7x299x7:nCdhw16c:nCdhw8c:f32:f32 ;; old=pm.LINE_PHASES_PADDED=False ;; new=

Kernels that time plain against NT stores on their first calls (``Plan.nt_tune``) make
that choice before the rounds at each thread count (``perf.peers.settle_store_choice``).

Output: per pair and thread count, each variant's median ratio to the copy (and oneDNN's,
when its library loads; ``AB_NO_ONEDNN=1`` skips it), with the range of its per-round
ratios in brackets (from three rounds): on a noisy host, overlapping ranges are a tie.
Variants whose outputs differ from the first variant's are reported (``!!``).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np

from .buffers import aligned_empty
from .cases import parse_spec
from .peers import CopyPeer, Job, OneDNNPeer, settle_store_choice
from .runner import make_descs, make_source
from .timing import paired


def parse_line(line: str) -> tuple[str, list[tuple[str, str]]] | None:
    """(case spec, [(variant, statements)]) of a job line; None for blanks and comments."""
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    parts = [p.strip() for p in line.split(";;")]
    variants = []
    for part in parts[1:]:
        name, _, stmts = part.partition("=")
        variants.append((name.strip(), stmts.strip()))
    return parts[0], variants or [("base", "")]


def build_with(stmts: str, src_md: Any, dst_md: Any) -> Any:
    """Build the kernel with ``stmts`` applied to the planner modules, then restore them."""
    from layoutjit import codegen as cg
    from layoutjit import compiler, simd
    from layoutjit import plan as pm
    from layoutjit import widen as wd

    mods = (pm, cg, simd, wd)
    snap = {m: dict(vars(m)) for m in mods}
    try:
        if stmts:
            exec(stmts, {"pm": pm, "cg": cg, "simd": simd, "wd": wd})
        return compiler.build(src_md, dst_md)
    finally:
        for m, saved in snap.items():
            for key in [k for k in vars(m) if k not in saved]:
                delattr(m, key)
            for key, v in saved.items():
                if vars(m).get(key) is not v:
                    setattr(m, key, v)


def spread(result: dict) -> str:
    """`` [lo-hi]``: the range of a contender's per-round ratios to the copy (its median is
    ``paired_ratio``), so that two variants whose ranges overlap read as a tie on a noisy
    host; empty under three rounds."""
    ratios = sorted(x / y for x, y in zip(result["times_s"], result["copy_times_s"]))
    return f" [{ratios[0]:.2f}-{ratios[-1]:.2f}]" if len(ratios) >= 3 else ""


def run_line(spec: str, variants: list[tuple[str, str]], rounds: int, threads: list[int],
             copy: CopyPeer, onednn: Any, out: Any = sys.stdout) -> dict:
    import numba

    case = parse_spec(spec)
    s, d = make_descs(case)
    kernels = {name: build_with(stmts, s, d) for name, stmts in variants}
    src = make_source(s)
    dst = aligned_empty(d.get_size(), np.dtype(d.dtype.storage))
    first = None
    for name, k in kernels.items():
        dst.view(np.uint8).fill(0xA5)
        k(src, dst)
        if first is None:
            first = dst.copy()
        elif not np.array_equal(first.view(np.uint8), dst.view(np.uint8)):
            print(f"   !! {name}: output differs from {variants[0][0]}", file=out)
    nbytes = (s.get_size() + d.get_size()) // 2
    ca, cb = copy.buffers(nbytes)
    print(f"== {spec}  ({nbytes / 2**20:.0f} MB)", file=out)
    res: dict = {}
    for t in threads:
        copy.set_threads(t)
        numba.set_num_threads(min(t, numba.config.NUMBA_NUM_THREADS))
        fns = {}
        for name, k in kernels.items():
            bind = getattr(k, "bind", None)
            fns[name] = bind(src, dst) if callable(bind) else (lambda k=k: k(src, dst))
            settle_store_choice(k, fns[name], t)  # (a timed store kind chosen before the rounds)
        if onednn is not None:
            try:
                onednn.set_threads(t)
                fns["onednn"] = onednn.prepare(Job(case, s, d, src, dst, t)).fn
            except Exception as e:  # a pair oneDNN does not take
                print(f"   onednn: {e}", file=out)
        r = paired(copy.prepare_copy(ca, cb, t).fn, fns, repeats=rounds, warmup=2,
                   min_sample_s=0.05, warmup_s=0.3)
        res[t] = {n: r["contenders"][n]["paired_ratio"] for n in fns}
        print(f"   t={t}: " + "  ".join(f"{n} {v:.2f}{spread(r['contenders'][n])}" for n, v in res[t].items()),
              file=out, flush=True)
    if onednn is not None:
        onednn.finish_case()
    return res


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print(__doc__)
        return 2
    rounds = int(argv[1]) if len(argv) > 1 else 7
    threads = [int(t) for t in (argv[2] if len(argv) > 2 else "1,2").split(",")]
    copy = CopyPeer()
    copy.warm_compile()
    onednn = None
    if not os.environ.get("AB_NO_ONEDNN"):
        onednn = OneDNNPeer()
        if not onednn.available:
            onednn = None
    with open(argv[0]) as f:
        for line in f:
            job = parse_line(line)
            if job is not None:
                run_line(job[0], job[1], rounds, threads, copy, onednn)
    return 0


if __name__ == "__main__":
    sys.exit(main())
